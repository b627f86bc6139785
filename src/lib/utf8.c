#include "lib/utf8.h"

/*
 * The sequence at s[0..n): its length (1-4) with *cp, 0 when invalid, -1 when
 * n ends before it does (a lead byte followed only by continuation bytes).
 * Overlongs, surrogates and values past U+10FFFF are seen once the sequence is
 * whole, from its code point.
 */
static int seq(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    int need;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) {
        need = 2, v = c & 0x1F, min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 3, v = c & 0x0F, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4, v = c & 0x07, min = 0x10000;
    } else {
        return 0; /* a continuation byte, C0/C1 (always overlong), F5..FF */
    }
    for (int i = 1; i < need; i++) {
        if ((size_t)i >= n)
            return -1;
        if (!tk_utf8_is_cont(s[i]))
            return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return need;
}

size_t tk_utf8_decode(const char *s, size_t n, uint32_t *cp)
{
    uint32_t v;
    int k = seq((const unsigned char *)s, n, &v);
    if (k <= 0)
        return 0;
    if (cp)
        *cp = v;
    return (size_t)k;
}

size_t tk_utf8_encode(uint32_t cp, char out[4])
{
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        cp = 0xFFFD;
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

long tk_utf8_count(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    long count = 0;
    for (size_t i = 0; i < n; count++) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        int k = seq(p + i, n - i, &cp);
        if (k <= 0)
            return -1;
        i += (size_t)k;
    }
    return count;
}

int tk_utf8_valid(const char *s, size_t n)
{
    return tk_utf8_count(s, n) >= 0;
}

size_t tk_utf8_whole(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    /* Only the last 3 bytes can start a sequence that is cut short. */
    for (size_t i = n > 3 ? n - 3 : 0; i < n; i++) {
        uint32_t cp;
        if (p[i] >= 0xC2 && p[i] <= 0xF4 && seq(p + i, n - i, &cp) < 0)
            return i;
    }
    return n;
}

size_t tk_utf8_chars(const char *s, size_t n)
{
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        count += !tk_utf8_is_cont((unsigned char)s[i]);
    return count;
}

size_t tk_utf8_cut(const char *s, size_t n, size_t max)
{
    if (n <= max)
        return n;
    while (max > 0 && tk_utf8_is_cont((unsigned char)s[max]))
        max--;
    return max;
}

size_t tk_utf8_cut_chars(const char *s, size_t n, size_t max, size_t *total)
{
    size_t chars = 0, cut = n;
    for (size_t i = 0; i < n; i++) {
        if (tk_utf8_is_cont((unsigned char)s[i]))
            continue;
        if (chars == max) {
            cut = i;
            if (!total)
                return cut;
        }
        chars++;
    }
    if (total)
        *total = chars;
    return cut;
}
