/*
 * utf8.h — UTF-8 as RFC 3629 defines it: one sequence decoded or encoded, a
 * string validated or counted, text cut at a character boundary.
 *
 * Valid means the shortest form of a code point in U+0000..U+10FFFF that is not
 * a surrogate (U+D800..U+DFFF). Invalid: overlong forms (C0 AF, E0 80 80, F0 80
 * 80 80), surrogates (ED A0 80), anything past U+10FFFF (F4 90 80 80, F5..FF),
 * continuation bytes (80..BF) where a character should start, and a sequence
 * cut short. NUL is a valid character here; callers that refuse it say so.
 *
 * Two ways of counting, both on bytes and never allocating:
 *   - tk_utf8_count validates as it counts (-1 for invalid input);
 *   - tk_utf8_chars and tk_utf8_cut_chars count every byte that is not a
 *     continuation byte as a character. On valid text the two agree; on bytes
 *     that are not UTF-8 the second stays defined (each stray byte counts as
 *     one, and a cut never lands inside a sequence).
 */
#ifndef TK_UTF8_H
#define TK_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Is c a continuation byte (10xxxxxx)? */
static inline int tk_utf8_is_cont(unsigned char c)
{
    return (c & 0xC0) == 0x80;
}

/*
 * Decodes the sequence at s[0..n) (n >= 1). Returns its length (1 to 4) and
 * sets *cp (cp may be NULL), or returns 0 when the bytes at s do not begin a
 * valid sequence (including one that n cuts short); *cp is then untouched.
 */
size_t tk_utf8_decode(const char *s, size_t n, uint32_t *cp);

/* Writes cp into out (1 to 4 bytes) and returns the length. A surrogate or a
 * value past U+10FFFF is written as U+FFFD. */
size_t tk_utf8_encode(uint32_t cp, char out[4]);

/* 1 when s[0..n) is valid UTF-8 (NUL included), else 0. */
int tk_utf8_valid(const char *s, size_t n);

/* Code points in s[0..n), or -1 when it is not valid UTF-8. */
long tk_utf8_count(const char *s, size_t n);

/*
 * For text read in pieces: the length of s[0..n) without a sequence that n cuts
 * short at its end, so that the held-back bytes (at most 3) can be joined to
 * the next piece. A sequence counts as cut short when a lead byte (C2..F4) is
 * followed only by continuation bytes, fewer than it needs (whether its code
 * point is valid shows only once it is whole). Invalid bytes are not held back.
 */
size_t tk_utf8_whole(const char *s, size_t n);

/* Characters in s[0..n), counted as the bytes that are not continuation bytes. */
size_t tk_utf8_chars(const char *s, size_t n);

/*
 * A byte cap: the largest length <= max at which s[0..n) can be cut without
 * splitting a character (n itself when n <= max). Backs up over continuation
 * bytes only, so it may return 0.
 */
size_t tk_utf8_cut(const char *s, size_t n, size_t max);

/*
 * A character cap: the byte offset where character number max (from 0) starts,
 * that is the length of the first max characters; n when s[0..n) has no more
 * than max. Characters are counted as tk_utf8_chars does. When total is not
 * NULL it gets the characters of the whole of s[0..n).
 */
size_t tk_utf8_cut_chars(const char *s, size_t n, size_t max, size_t *total);

#endif
