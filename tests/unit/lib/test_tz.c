/* lib/tz: offsets of real zones against glibc's localtime_r (an independent
 * reader of the same files) from 1900 to 2100, wall-clock to UTC in gaps and
 * repeated hours, names refused, and malformed TZif refused. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/tktime.h"
#include "lib/tz.h"
#include "tk_test.h"
#include "tz_fixture.h"

TEST(offsets_match_glibc)
{
    srand(7);
    for (size_t i = 0; i < TK_ARRAY_LEN(tz_test_zones); i++) {
        setenv("TZ", tz_test_zones[i], 1);
        tzset();
        tk_tz *tz = zone(tz_test_zones[i]);
        CHECK_STR(tk_tz_name(tz), tz_test_zones[i]);
        for (int64_t u = at("1900-01-01T00:00:00Z"); u < at("2100-01-01T00:00:00Z");
             u += 3 * 86400 + rand() % 86400) {
            time_t t = (time_t)u;
            struct tm tm;
            localtime_r(&t, &tm);
            if (tk_tz_offset(tz, u) != tm.tm_gmtoff)
                TK_TEST_FAIL("%s at %lld: %d vs glibc %ld", tz_test_zones[i], (long long)u,
                             tk_tz_offset(tz, u), tm.tm_gmtoff);
        }
        tk_tz_free(tz);
    }
}

TEST(local_to_utc)
{
    int64_t u;
    tk_tz *ny = zone("America/New_York");
    /* 2026-03-08 02:30 does not exist; 01:30 on 2026-11-01 happens twice */
    CHECK_INT(tk_tz_local_to_utc(ny, at("2026-03-08T02:30:00Z"), &u), ==, 0);
    CHECK_INT(tk_tz_local_to_utc(ny, at("2026-03-08T03:00:00Z"), &u), ==, 1);
    CHECK_INT(u, ==, at("2026-03-08T07:00:00Z"));
    CHECK_INT(tk_tz_local_to_utc(ny, at("2026-11-01T01:30:00Z"), &u), ==, 2);
    CHECK_INT(u, ==, at("2026-11-01T05:30:00Z"));
    CHECK_INT(tk_tz_local_to_utc(ny, at("2026-07-01T12:00:00Z"), &u), ==, 1);
    CHECK_INT(u, ==, at("2026-07-01T16:00:00Z"));
    tk_tz_free(ny);
    tk_tz *lh = zone("Australia/Lord_Howe"); /* a 30-minute shift */
    CHECK_INT(tk_tz_local_to_utc(lh, at("2026-10-04T02:15:00Z"), &u), ==, 0);
    CHECK_INT(tk_tz_local_to_utc(lh, at("2026-10-04T02:30:00Z"), &u), ==, 1);
    CHECK_INT(u, ==, at("2026-10-03T15:30:00Z"));
    CHECK_INT(tk_tz_local_to_utc(lh, at("2026-04-05T01:45:00Z"), &u), ==, 2);
    CHECK_INT(u, ==, at("2026-04-04T14:45:00Z"));
    CHECK_INT(tk_tz_local_to_utc(lh, at("2026-04-05T01:15:00Z"), &u), ==, 1);
    tk_tz_free(lh);
}

TEST(names_refused)
{
    const char *bad[] = {"",
                         "../etc/passwd",
                         "/etc/localtime",
                         "Europe/../UTC",
                         "Europe Berlin",
                         "Europe/Berlin;rm",
                         "Nowhere/Atlantis"};
    for (size_t i = 0; i < TK_ARRAY_LEN(bad); i++) {
        tk_tz *tz;
        char err[128] = "";
        if (tk_tz_load(bad[i], &tz, err, sizeof err) == TK_OK)
            TK_TEST_FAIL("loaded '%s'", bad[i]);
        CHECK(strncmp(err, "time zone: ", 11) == 0);
    }
}

TEST(malformed_refused)
{
    tk_tz *tz;
    uint8_t junk[64] = "TZif2";
    CHECK(tk_tz_parse(junk, sizeof junk, &tz) != TK_OK);
    CHECK(tk_tz_parse((const uint8_t *)"", 0, &tz) != TK_OK);
    /* a real file cut at every length up to 200 bytes never loads half */
    FILE *f = fopen("/usr/share/zoneinfo/Europe/Berlin", "rb");
    CHECK(f);
    uint8_t buf[8192];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    CHECK(tk_tz_parse(buf, n, &tz) == TK_OK);
    tk_tz_free(tz);
    for (size_t cut = 0; cut < 200 && cut < n; cut++)
        if (tk_tz_parse(buf, cut, &tz) == TK_OK)
            TK_TEST_FAIL("parsed a file cut at %zu", cut);
}

TEST(calendar)
{
    for (int64_t d = -800000; d < 800000; d += 37) {
        int64_t y;
        unsigned m, dd;
        tk_civil_from_days(d, &y, &m, &dd);
        CHECK_INT(tk_days_from_civil(y, m, dd), ==, d);
    }
    CHECK_INT(tk_weekday_from_days(0), ==, 4); /* 1970-01-01 was a Thursday */
    CHECK_INT(tk_weekday_from_days(tk_days_from_civil(2026, 12, 2)), ==, 3);
    CHECK_INT(tk_days_in_month(2024, 2), ==, 29);
    CHECK_INT(tk_days_in_month(2100, 2), ==, 28);
    CHECK_INT(tk_days_in_month(2000, 2), ==, 29);
}

TEST_MAIN()
