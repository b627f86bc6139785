/*
 * utf8_oracle.h — an independent UTF-8 check for tests/unit/lib/test_utf8.c and
 * tests/fuzz/fuzz_utf8.c: the well-formed byte sequences of the Unicode
 * Standard, Table 3-7, written as byte ranges (no code point arithmetic, unlike
 * lib/utf8.c). utf8_oracle returns the length of the well-formed sequence at
 * s[0..n), or 0.
 */
#ifndef TK_TEST_UTF8_ORACLE_H
#define TK_TEST_UTF8_ORACLE_H

#include <stddef.h>

static inline size_t utf8_oracle(const unsigned char *s, size_t n)
{
    static const struct {
        unsigned char lo[4], hi[4];
        size_t len;
    } rows[] = {
        {{0x00}, {0x7F}, 1},
        {{0xC2, 0x80}, {0xDF, 0xBF}, 2},
        {{0xE0, 0xA0, 0x80}, {0xE0, 0xBF, 0xBF}, 3},
        {{0xE1, 0x80, 0x80}, {0xEC, 0xBF, 0xBF}, 3},
        {{0xED, 0x80, 0x80}, {0xED, 0x9F, 0xBF}, 3},
        {{0xEE, 0x80, 0x80}, {0xEF, 0xBF, 0xBF}, 3},
        {{0xF0, 0x90, 0x80, 0x80}, {0xF0, 0xBF, 0xBF, 0xBF}, 4},
        {{0xF1, 0x80, 0x80, 0x80}, {0xF3, 0xBF, 0xBF, 0xBF}, 4},
        {{0xF4, 0x80, 0x80, 0x80}, {0xF4, 0x8F, 0xBF, 0xBF}, 4},
    };
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        if (s[0] < rows[r].lo[0] || s[0] > rows[r].hi[0])
            continue;
        if (n < rows[r].len)
            return 0;
        for (size_t i = 1; i < rows[r].len; i++)
            if (s[i] < rows[r].lo[i] || s[i] > rows[r].hi[i])
                return 0;
        return rows[r].len;
    }
    return 0;
}

#endif
