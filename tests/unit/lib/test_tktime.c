/* lib/tktime: RFC 3339 both ways, durations. */
#include <string.h>

#include "lib/tktime.h"
#include "tk_test.h"

TEST(time_rfc3339_roundtrip)
{
    char s[40];
    tk_time_rfc3339(1764567604123, s, sizeof s);
    CHECK_STR(s, "2025-12-01T05:40:04.123Z");
    int64_t ms;
    CHECK(tk_time_parse_rfc3339(s, &ms) == TK_OK);
    CHECK_INT(ms, ==, 1764567604123);
    CHECK(tk_time_parse_rfc3339("2025-12-01T07:40:04+02:00", &ms) == TK_OK);
    CHECK_INT(ms, ==, 1764567604000);
    CHECK(tk_time_parse_rfc3339("1970-01-01T00:00:00Z", &ms) == TK_OK);
    CHECK_INT(ms, ==, 0);
    CHECK(tk_time_parse_rfc3339("2024-02-29T12:00:00.5Z", &ms) == TK_OK);
    CHECK_INT(ms, ==, 1709208000500);
    /* years below 1000 keep four digits, so the output parses back */
    CHECK(tk_time_parse_rfc3339("0818-11-24T04:01:08.073Z", &ms) == TK_OK);
    tk_time_rfc3339(ms, s, sizeof s);
    CHECK_STR(s, "0818-11-24T04:01:08.073Z");
}

TEST(time_rfc3339_rejects)
{
    int64_t ms;
    const char *bad[] = {"",
                         "2025",
                         "2025-13-01T00:00:00Z",
                         "2025-12-01 00:00:00",
                         "2025-12-01T25:00:00Z",
                         "2025-12-01T00:00:00",
                         "2025-12-01T00:00:00Zjunk",
                         "2025-12-01T00:00:00.Z",
                         "2025-12-01T00:00:00+0200"};
    for (size_t i = 0; i < TK_ARRAY_LEN(bad); i++)
        if (tk_time_parse_rfc3339(bad[i], &ms) == TK_OK)
            TK_TEST_FAIL("accepted %s", bad[i]);
}

TEST(durations)
{
    int64_t ms;
    CHECK(tk_parse_duration("30m", &ms) == TK_OK && ms == 1800000);
    CHECK(tk_parse_duration("1h30m", &ms) == TK_OK && ms == 5400000);
    CHECK(tk_parse_duration("45s", &ms) == TK_OK && ms == 45000);
    CHECK(tk_parse_duration("500ms", &ms) == TK_OK && ms == 500);
    CHECK(tk_parse_duration("90", &ms) == TK_OK && ms == 90000);
    CHECK(tk_parse_duration("2d", &ms) == TK_OK && ms == 172800000);
    CHECK(tk_parse_duration("", &ms) == TK_EINVAL);
    CHECK(tk_parse_duration("m", &ms) == TK_EINVAL);
    CHECK(tk_parse_duration("10x", &ms) == TK_EINVAL);
    CHECK(tk_parse_duration("-5s", &ms) == TK_EINVAL);
    CHECK(tk_parse_duration("99999999999999999999d", &ms) == TK_EINVAL);
    char out[32];
    tk_format_duration(1800000, out, sizeof out);
    CHECK_STR(out, "30m");
    tk_format_duration(5400000, out, sizeof out);
    CHECK_STR(out, "1h30m");
    tk_format_duration(250, out, sizeof out);
    CHECK_STR(out, "250ms");
}

TEST_MAIN()
