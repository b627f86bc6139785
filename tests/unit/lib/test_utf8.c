#include "lib/common.h"
#include "lib/utf8.h"
#include "tk_test.h"
#include "utf8_oracle.h"

static uint32_t oracle_cp(const unsigned char *s, size_t len)
{
    if (len == 1)
        return s[0];
    uint32_t v = s[0] & (0xFF >> (len + 1));
    for (size_t i = 1; i < len; i++)
        v = (v << 6) | (s[i] & 0x3F);
    return v;
}

static void check_against_oracle(const unsigned char *b, size_t n)
{
    uint32_t cp = 0xDEADBEEF;
    size_t got = tk_utf8_decode((const char *)b, n, &cp), want = utf8_oracle(b, n);
    if (got != want)
        TK_TEST_FAIL("decode of %02x %02x %02x %02x (n %zu): %zu, the oracle says %zu", b[0],
                     n > 1 ? b[1] : 0, n > 2 ? b[2] : 0, n > 3 ? b[3] : 0, n, got, want);
    if (want && cp != oracle_cp(b, want))
        TK_TEST_FAIL("decode of %02x %02x %02x %02x: U+%04X, want U+%04X", b[0], b[1], b[2], b[3],
                     cp, oracle_cp(b, want));
    if (!want && cp != 0xDEADBEEF)
        TK_TEST_FAIL("an invalid sequence wrote *cp");
}

TEST(utf8_decode_every_sequence_of_up_to_three_bytes)
{
    unsigned char b[4] = {0};
    for (unsigned x = 0; x < 256; x++) {
        b[0] = (unsigned char)x;
        check_against_oracle(b, 1);
        for (unsigned y = 0; y < 256; y++) {
            b[1] = (unsigned char)y;
            check_against_oracle(b, 2);
            for (unsigned z = 0; z < 256; z++) {
                b[2] = (unsigned char)z;
                check_against_oracle(b, 3);
            }
        }
    }
}

TEST(utf8_decode_every_four_byte_lead_and_continuation)
{
    /* every lead from F0 up, every second byte, the continuation range and its
     * edges for the last two */
    static const unsigned char tail[] = {0x00, 0x41, 0x7F, 0x80, 0x81, 0x9F, 0xA0,
                                         0xBE, 0xBF, 0xC0, 0xC2, 0xF0, 0xFF};
    unsigned char b[4];
    for (unsigned x = 0xF0; x < 256; x++)
        for (unsigned y = 0; y < 256; y++)
            for (size_t i = 0; i < sizeof tail; i++)
                for (size_t j = 0; j < sizeof tail; j++) {
                    b[0] = (unsigned char)x, b[1] = (unsigned char)y, b[2] = tail[i],
                    b[3] = tail[j];
                    check_against_oracle(b, 4);
                    check_against_oracle(b, 3); /* cut short */
                }
}

TEST(utf8_decode_named_cases)
{
    uint32_t cp;
    CHECK_INT(tk_utf8_decode("A", 1, &cp), ==, 1);
    CHECK_INT(cp, ==, 'A');
    CHECK_INT(tk_utf8_decode("\0", 1, &cp), ==, 1); /* NUL is a character */
    CHECK_INT(cp, ==, 0);
    CHECK_INT(tk_utf8_decode("\xc3\xa9", 2, &cp), ==, 2);
    CHECK_INT(cp, ==, 0xE9);
    CHECK_INT(tk_utf8_decode("\xe2\x82\xac", 3, &cp), ==, 3);
    CHECK_INT(cp, ==, 0x20AC);
    CHECK_INT(tk_utf8_decode("\xf0\x9f\x98\x80", 4, &cp), ==, 4);
    CHECK_INT(cp, ==, 0x1F600);
    CHECK_INT(tk_utf8_decode("\xf4\x8f\xbf\xbf", 4, &cp), ==, 4); /* U+10FFFF */
    CHECK_INT(cp, ==, 0x10FFFF);
    CHECK_INT(tk_utf8_decode("\xed\x9f\xbf", 3, &cp), ==, 3); /* U+D7FF, below the surrogates */
    CHECK_INT(tk_utf8_decode("\xee\x80\x80", 3, &cp), ==, 3); /* U+E000, above them */
    /* overlongs */
    CHECK_INT(tk_utf8_decode("\xc0\x80", 2, NULL), ==, 0);
    CHECK_INT(tk_utf8_decode("\xc1\xbf", 2, NULL), ==, 0);
    CHECK_INT(tk_utf8_decode("\xe0\x80\xaf", 3, NULL), ==, 0);
    CHECK_INT(tk_utf8_decode("\xe0\x9f\xbf", 3, NULL), ==, 0);
    CHECK_INT(tk_utf8_decode("\xf0\x80\x80\xaf", 4, NULL), ==, 0);
    CHECK_INT(tk_utf8_decode("\xf0\x8f\xbf\xbf", 4, NULL), ==, 0);
    /* surrogates */
    CHECK_INT(tk_utf8_decode("\xed\xa0\x80", 3, NULL), ==, 0);
    CHECK_INT(tk_utf8_decode("\xed\xbf\xbf", 3, NULL), ==, 0);
    /* past U+10FFFF */
    CHECK_INT(tk_utf8_decode("\xf4\x90\x80\x80", 4, NULL), ==, 0);
    CHECK_INT(tk_utf8_decode("\xf5\x80\x80\x80", 4, NULL), ==, 0);
    CHECK_INT(tk_utf8_decode("\xf8\x88\x80\x80\x80", 5, NULL), ==, 0);
    CHECK_INT(tk_utf8_decode("\xff", 1, NULL), ==, 0);
    /* stray continuation, a lead without its continuation */
    CHECK_INT(tk_utf8_decode("\x80", 1, NULL), ==, 0);
    CHECK_INT(tk_utf8_decode("\xbf", 1, NULL), ==, 0);
    CHECK_INT(tk_utf8_decode("\xc3(", 2, NULL), ==, 0);
    CHECK_INT(tk_utf8_decode("\xe2\x82(", 3, NULL), ==, 0);
    /* cut short by n, though the bytes after are there */
    CHECK_INT(tk_utf8_decode("\xc3\xa9", 1, NULL), ==, 0);
    CHECK_INT(tk_utf8_decode("\xe2\x82\xac", 2, NULL), ==, 0);
    CHECK_INT(tk_utf8_decode("\xf0\x9f\x98\x80", 3, NULL), ==, 0);
}

TEST(utf8_encode_round_trips_every_code_point)
{
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
        char e[4];
        size_t k = tk_utf8_encode(cp, e);
        uint32_t back = 0xFFFFFFFF;
        if (cp >= 0xD800 && cp <= 0xDFFF) {
            if (k != 3 || memcmp(e, "\xef\xbf\xbd", 3) != 0)
                TK_TEST_FAIL("surrogate U+%04X not written as U+FFFD", cp);
            continue;
        }
        size_t want = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
        if (k != want || tk_utf8_decode(e, k, &back) != k || back != cp)
            TK_TEST_FAIL("U+%04X: encoded in %zu bytes, decoded as U+%04X", cp, k, back);
        if (utf8_oracle((const unsigned char *)e, k) != k)
            TK_TEST_FAIL("U+%04X: the encoding is not well formed", cp);
    }
    char e[4];
    CHECK_INT(tk_utf8_encode(0x110000, e), ==, 3);
    CHECK_MEM(e, "\xef\xbf\xbd", 3);
    CHECK_INT(tk_utf8_encode(0xFFFFFFFF, e), ==, 3);
    CHECK_MEM(e, "\xef\xbf\xbd", 3);
}

TEST(utf8_count_and_valid)
{
    CHECK_INT(tk_utf8_count("", 0), ==, 0);
    CHECK_INT(tk_utf8_count("abc", 3), ==, 3);
    CHECK_INT(tk_utf8_count("a\0b", 3), ==, 3);
    CHECK_INT(tk_utf8_count("\xc3\xa9t\xc3\xa9", 5), ==, 3);
    CHECK_INT(tk_utf8_count("\xe6\x97\xa5\xf0\x9f\x98\x80", 7), ==, 2);
    static const char *const bad[] = {"\xc3",         "\xe6\x97",         "\xc0\xaf",
                                      "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xff",
                                      "\x80",         "a\xc3(",           "ok\xe2\x82"};
    for (size_t i = 0; i < TK_ARRAY_LEN(bad); i++) {
        if (tk_utf8_count(bad[i], strlen(bad[i])) != -1)
            TK_TEST_FAIL("counted invalid \"%s\"", bad[i]);
        if (tk_utf8_valid(bad[i], strlen(bad[i])))
            TK_TEST_FAIL("\"%s\" taken for valid", bad[i]);
    }
    CHECK(tk_utf8_valid("", 0));
    CHECK(tk_utf8_valid("\xf4\x8f\xbf\xbf", 4));
    /* n bounds the check: the bytes after it are not read */
    CHECK(tk_utf8_valid("ab\xff", 2));
    CHECK_INT(tk_utf8_count("\xc3\xa9\xc3", 2), ==, 1);
}

TEST(utf8_whole_holds_back_only_a_sequence_cut_short)
{
    CHECK_INT(tk_utf8_whole("", 0), ==, 0);
    CHECK_INT(tk_utf8_whole("abc", 3), ==, 3);
    CHECK_INT(tk_utf8_whole("ab\xc3", 3), ==, 2);
    CHECK_INT(tk_utf8_whole("a\xe2\x82", 3), ==, 1);
    CHECK_INT(tk_utf8_whole("a\xe2", 2), ==, 1);
    CHECK_INT(tk_utf8_whole("\xf0\x9f\x98", 3), ==, 0);
    CHECK_INT(tk_utf8_whole("xy\xf0\x9f\x98", 5), ==, 2);
    CHECK_INT(tk_utf8_whole("a\xe2\x82\xac", 4), ==, 4); /* whole */
    CHECK_INT(tk_utf8_whole("\xff", 1), ==, 1);          /* invalid, not cut short */
    CHECK_INT(tk_utf8_whole("a\x80", 2), ==, 2);
    CHECK_INT(tk_utf8_whole("\xc0", 1), ==, 1);     /* never a lead */
    CHECK_INT(tk_utf8_whole("\xf5\x80", 2), ==, 2); /* past U+10FFFF, never a lead */
    CHECK_INT(tk_utf8_whole("a\xe2(", 3), ==, 3);   /* broken, not cut */
    /* a lead with continuation bytes is held back even when it will turn out
     * overlong or a surrogate: that shows only once it is whole */
    CHECK_INT(tk_utf8_whole("a\xe0\x80", 3), ==, 1);
    CHECK_INT(tk_utf8_whole("a\xed\xa0", 3), ==, 1);
    /* only a sequence that starts in the last 3 bytes can be cut short */
    CHECK_INT(tk_utf8_whole("\xf0\x9f\x98\x80", 4), ==, 4);
    CHECK_INT(tk_utf8_whole("\xf0\x9f\x98\x80\xc3", 5), ==, 4);
}

TEST(utf8_chars_counts_every_byte_but_continuation_bytes)
{
    CHECK_INT(tk_utf8_chars("", 0), ==, 0);
    CHECK_INT(tk_utf8_chars("abc", 3), ==, 3);
    CHECK_INT(tk_utf8_chars("\xc3\xa9t\xf0\x9f\x98\x80", 7), ==, 3);
    CHECK_INT(tk_utf8_chars("\xff\xfe", 2), ==, 2); /* stray bytes count one each */
    CHECK_INT(tk_utf8_chars("a\x80\x80", 3), ==, 1);
}

TEST(utf8_cut_at_a_byte_cap)
{
    const char *s = "a\xc3\xa9\xe2\x82\xac!"; /* a é € ! : 1+2+3+1 bytes */
    size_t n = strlen(s);
    CHECK_INT(tk_utf8_cut(s, n, 100), ==, n);
    CHECK_INT(tk_utf8_cut(s, n, n), ==, n);
    CHECK_INT(tk_utf8_cut(s, n, 0), ==, 0);
    CHECK_INT(tk_utf8_cut(s, n, 1), ==, 1);
    CHECK_INT(tk_utf8_cut(s, n, 2), ==, 1); /* inside é */
    CHECK_INT(tk_utf8_cut(s, n, 3), ==, 3);
    CHECK_INT(tk_utf8_cut(s, n, 4), ==, 3); /* inside € */
    CHECK_INT(tk_utf8_cut(s, n, 5), ==, 3);
    CHECK_INT(tk_utf8_cut(s, n, 6), ==, 6);
    CHECK_INT(tk_utf8_cut("\x80\x80\x80", 3, 2), ==, 0); /* nothing but continuations */
    /* every cut is at most max and never splits a sequence */
    const char *t = "\xf0\x9f\x98\x80x\xc3\xa9\xe6\x97\xa5";
    size_t tn = strlen(t);
    for (size_t max = 0; max <= tn + 1; max++) {
        size_t c = tk_utf8_cut(t, tn, max);
        CHECK(c <= max && c <= tn);
        CHECK(tk_utf8_valid(t, c));
        CHECK(c == tn || !tk_utf8_is_cont((unsigned char)t[c]));
    }
}

TEST(utf8_cut_at_a_character_cap)
{
    const char *s = "a\xc3\xa9\xe2\x82\xac!"; /* 4 characters */
    size_t n = strlen(s), total = 0;
    CHECK_INT(tk_utf8_cut_chars(s, n, 0, &total), ==, 0);
    CHECK_INT(total, ==, 4);
    CHECK_INT(tk_utf8_cut_chars(s, n, 1, NULL), ==, 1);
    CHECK_INT(tk_utf8_cut_chars(s, n, 2, NULL), ==, 3);
    CHECK_INT(tk_utf8_cut_chars(s, n, 3, &total), ==, 6);
    CHECK_INT(total, ==, 4);
    CHECK_INT(tk_utf8_cut_chars(s, n, 4, &total), ==, n); /* not longer than the cap */
    CHECK_INT(tk_utf8_cut_chars(s, n, 99, &total), ==, n);
    CHECK_INT(total, ==, 4);
    total = 7;
    CHECK_INT(tk_utf8_cut_chars("", 0, 3, &total), ==, 0);
    CHECK_INT(total, ==, 0);
    /* agrees with tk_utf8_chars on the prefix it keeps */
    for (size_t max = 0; max <= 5; max++) {
        size_t c = tk_utf8_cut_chars(s, n, max, NULL);
        CHECK_INT(tk_utf8_chars(s, c), ==, TK_MIN(max, 4));
    }
}

TEST_MAIN()
