/* lib/cron: the grammar and its refusals to the letter, and next fire times in
 * real zones across both DST switches. The table's expectations were computed
 * independently (Python's zoneinfo and a minute-by-minute scan applying the
 * DST policy); a second oracle here scans UTC minutes with glibc's localtime_r. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/cron.h"
#include "lib/tktime.h"
#include "lib/tz.h"
#include "tk_test.h"
#include "tz_fixture.h"

static void fmt_min(int64_t u, char *out, size_t n)
{
    int64_t days = u / 86400, y;
    unsigned m, d;
    tk_civil_from_days(days, &y, &m, &d);
    int64_t sod = u - days * 86400;
    snprintf(out, n, "%04lld-%02u-%02uT%02lld:%02lldZ", (long long)y, m, d, (long long)(sod / 3600),
             (long long)(sod % 3600 / 60));
}

static tk_cron parse_ok(const char *s)
{
    tk_cron c;
    char err[160];
    if (tk_cron_parse(s, &c, err, sizeof err) != TK_OK)
        TK_TEST_FAIL("refused %s: %s", s, err);
    return c;
}

TEST(fields_and_names)
{
    tk_cron c = parse_ok("*/15 9-17 1,15 jan-mar,DEC mon-fri");
    CHECK(c.minute == (1ULL << 0 | 1ULL << 15 | 1ULL << 30 | 1ULL << 45));
    CHECK(c.hour == 0x3fe00u);
    CHECK(c.dom == (1u << 1 | 1u << 15));
    CHECK(c.month == (1u << 1 | 1u << 2 | 1u << 3 | 1u << 12));
    CHECK(c.dow == 0x3e);
    CHECK(!c.dom_star && !c.dow_star && !c.once);
    c = parse_ok("0 0 * * 7");
    CHECK(c.dow == 1);
    c = parse_ok("0 0 * * 5-7");
    CHECK(c.dow == (1 | 1 << 5 | 1 << 6));
    c = parse_ok("0 0 * * 0-7");
    CHECK(c.dow == 0x7f);
    c = parse_ok("1-10/3 0 * * *");
    CHECK(c.minute == (1ULL << 1 | 1ULL << 4 | 1ULL << 7 | 1ULL << 10));
    c = parse_ok("  5\t4 * * sun  ");
    CHECK(c.minute == 1ULL << 5 && c.hour == 1u << 4 && c.dow == 1 && c.dom_star);
    c = parse_ok("0 0 */2 * 1"); /* a starred day field keeps the 'both' rule */
    CHECK(c.dom_star && !c.dow_star);
    c = parse_ok("59 23 31 12 6");
    CHECK(c.minute == 1ULL << 59 && c.hour == 1u << 23 && c.dom == 1u << 31);
}

TEST(macros)
{
    const char *m[][2] = {{"@hourly", "0 * * * *"},   {"@daily", "0 0 * * *"},
                          {"@midnight", "0 0 * * *"}, {"@weekly", "0 0 * * 0"},
                          {"@monthly", "0 0 1 * *"},  {"@yearly", "0 0 1 1 *"},
                          {"@annually", "0 0 1 1 *"}, {"@DAILY", "0 0 * * *"}};
    for (size_t i = 0; i < TK_ARRAY_LEN(m); i++) {
        tk_cron a = parse_ok(m[i][0]), b = parse_ok(m[i][1]);
        CHECK(memcmp(&a, &b, sizeof a) == 0);
    }
}

TEST(one_shot)
{
    tk_cron c = parse_ok("2026-12-24T09:00:00+01:00");
    CHECK(c.once);
    CHECK_INT(c.at, ==, at("2026-12-24T08:00:00Z"));
    int64_t n;
    tk_tz *tz = zone("UTC");
    CHECK(tk_cron_next(&c, tz, at("2026-12-01T00:00:00Z"), &n) && n == c.at);
    CHECK(!tk_cron_next(&c, tz, c.at, &n));
    tk_tz_free(tz);
}

TEST(refusals_name_the_field)
{
    const char *bad[][2] = {
        {"0 0 * * * *", "expression: 6 or more fields"},
        {"0 0 * * * 2026", "expression: 6 or more fields"},
        {"0 0 * *", "expression: 4 fields"},
        {"", "expression: empty"},
        {"@reboot", "expression: @reboot is not supported"},
        {"@every", "expression: unknown macro"},
        {"0 0 ? * 1", "day-of-month: '?' is not supported"},
        {"0 0 * * ?", "day-of-week: '?' is not supported"},
        {"0 0 L * *", "day-of-month: 'L' is not supported"},
        {"0 0 15W * *", "day-of-month: 'W' is not supported"},
        {"0 0 * * 5L", "day-of-week: 'L' is not supported"},
        {"0 0 * * 1#2", "day-of-week: '#' is not supported"},
        {"60 0 * * *", "minute: 60 is out of range 0-59"},
        {"0 24 * * *", "hour: 24 is out of range 0-23"},
        {"0 0 0 * *", "day-of-month: 0 is out of range 1-31"},
        {"0 0 32 * *", "day-of-month: 32 is out of range 1-31"},
        {"0 0 * 13 *", "month: 13 is out of range 1-12"},
        {"0 0 * 0 *", "month: 0 is out of range 1-12"},
        {"0 0 * * 8", "day-of-week: 8 is out of range 0-7"},
        {"0 0 * foo *", "month: unknown name"},
        {"0 0 * * mon-foo", "day-of-week: unknown name"},
        {"30-10 * * * *", "minute: range 30-10 is reversed"},
        {"*/0 * * * *", "minute: step 0 is out of range"},
        {"5/10 * * * *", "minute: a step needs a range or '*'"},
        {"*/x * * * *", "minute: a step must be a number"},
        {"1,,2 * * * *", "minute: unexpected ','"},
        {"-1 * * * *", "minute: unexpected '-'"},
        {"00001 * * * *", "minute: number too long"},
        {"0 0 30 2 *", "day-of-month: the expression never fires"},
        {"0 0 31 4,6,9,11 *", "day-of-month: the expression never fires"},
        {"2026-02-30T09:00:00Z", "time: 2026-02-30 is not a date"},
        {"2026-12-24T09:00:00", "time: not an RFC 3339 time with an offset"},
    };
    for (size_t i = 0; i < TK_ARRAY_LEN(bad); i++) {
        tk_cron c;
        char err[160];
        if (tk_cron_parse(bad[i][0], &c, err, sizeof err) == TK_OK)
            TK_TEST_FAIL("accepted '%s'", bad[i][0]);
        if (strncmp(err, bad[i][1], strlen(bad[i][1])) != 0)
            TK_TEST_FAIL("'%s': got '%s', want '%s...'", bad[i][0], err, bad[i][1]);
    }
    /* 31 in a list with a month that has it fires; Feb 29 fires in leap years */
    parse_ok("0 0 31 2,3 *");
    parse_ok("0 0 29 2 *");
    /* both day fields restricted: either matches, so it fires */
    parse_ok("0 0 30 2 mon");
}

static const struct {
    const char *expr, *zone, *after, *want[3];
} table[] = {
    {"30 2 * * *",
     "America/New_York",
     "2026-03-07T12:00:00Z",
     {"2026-03-08T07:00Z", "2026-03-09T06:30Z", "2026-03-10T06:30Z"}},
    {"0 2 * * *",
     "America/New_York",
     "2026-03-07T12:00:00Z",
     {"2026-03-08T07:00Z", "2026-03-09T06:00Z", "2026-03-10T06:00Z"}},
    {"*/20 2 * * *",
     "America/New_York",
     "2026-03-08T06:00:00Z",
     {"2026-03-08T07:00Z", "2026-03-09T06:00Z", "2026-03-09T06:20Z"}},
    {"30 1 * * *",
     "America/New_York",
     "2026-10-31T12:00:00Z",
     {"2026-11-01T05:30Z", "2026-11-02T06:30Z", "2026-11-03T06:30Z"}},
    {"*/30 1 * * *",
     "America/New_York",
     "2026-11-01T04:00:00Z",
     {"2026-11-01T05:00Z", "2026-11-01T05:30Z", "2026-11-02T06:00Z"}},
    {"0 9 * * 1-5",
     "America/New_York",
     "2026-03-06T15:00:00Z",
     {"2026-03-09T13:00Z", "2026-03-10T13:00Z", "2026-03-11T13:00Z"}},
    {"30 1 * * *",
     "Europe/London",
     "2026-03-28T12:00:00Z",
     {"2026-03-29T01:00Z", "2026-03-30T00:30Z", "2026-03-31T00:30Z"}},
    {"30 1 * * *",
     "Europe/London",
     "2026-10-24T12:00:00Z",
     {"2026-10-25T00:30Z", "2026-10-26T01:30Z", "2026-10-27T01:30Z"}},
    {"0 * * * *",
     "Europe/London",
     "2026-10-25T00:30:00Z",
     {"2026-10-25T02:00Z", "2026-10-25T03:00Z", "2026-10-25T04:00Z"}},
    {"30 2 * * *",
     "Europe/Berlin",
     "2026-03-28T12:00:00Z",
     {"2026-03-29T01:00Z", "2026-03-30T00:30Z", "2026-03-31T00:30Z"}},
    {"30 2 * * *",
     "Europe/Berlin",
     "2026-10-24T12:00:00Z",
     {"2026-10-25T00:30Z", "2026-10-26T01:30Z", "2026-10-27T01:30Z"}},
    {"15 2 * * *",
     "Australia/Lord_Howe",
     "2026-10-03T00:00:00Z",
     {"2026-10-03T15:30Z", "2026-10-04T15:15Z", "2026-10-05T15:15Z"}},
    {"45 1 * * *",
     "Australia/Lord_Howe",
     "2026-04-04T00:00:00Z",
     {"2026-04-04T14:45Z", "2026-04-05T15:15Z", "2026-04-06T15:15Z"}},
    {"*/15 1 * * *",
     "Australia/Lord_Howe",
     "2026-04-04T14:00:00Z",
     {"2026-04-04T14:15Z", "2026-04-04T14:30Z", "2026-04-04T14:45Z"}},
    {"0 9 * * *",
     "Asia/Kolkata",
     "2026-06-01T00:00:00Z",
     {"2026-06-01T03:30Z", "2026-06-02T03:30Z", "2026-06-03T03:30Z"}},
};

TEST(next_fire_table)
{
    for (size_t i = 0; i < TK_ARRAY_LEN(table); i++) {
        tk_cron c = parse_ok(table[i].expr);
        tk_tz *tz = zone(table[i].zone);
        int64_t t = at(table[i].after);
        for (int k = 0; k < 3; k++) {
            int64_t n;
            char got[32];
            if (!tk_cron_next(&c, tz, t, &n))
                TK_TEST_FAIL("%s %s: no fire", table[i].expr, table[i].zone);
            fmt_min(n, got, sizeof got);
            if (strcmp(got, table[i].want[k]) != 0)
                TK_TEST_FAIL("%s in %s after %s, fire %d: got %s want %s", table[i].expr,
                             table[i].zone, table[i].after, k, got, table[i].want[k]);
            t = n;
        }
        tk_tz_free(tz);
    }
}

TEST(next_fire_far)
{
    tk_tz *utc = zone("UTC");
    int64_t n;
    tk_cron c = parse_ok("0 0 29 2 *");
    CHECK(tk_cron_next(&c, utc, at("2026-03-01T00:00:00Z"), &n));
    CHECK_INT(n, ==, at("2028-02-29T00:00:00Z"));
    /* the either rule: 1st, 15th and every Friday */
    c = parse_ok("0 12 1,15 * fri");
    CHECK(tk_cron_next(&c, utc, at("2026-05-01T12:00:00Z"), &n));
    CHECK_INT(n, ==, at("2026-05-08T12:00:00Z"));
    CHECK(tk_cron_next(&c, utc, n, &n));
    CHECK_INT(n, ==, at("2026-05-15T12:00:00Z"));
    CHECK(tk_cron_next(&c, utc, n, &n));
    CHECK_INT(n, ==, at("2026-05-22T12:00:00Z"));
    /* a starred day-of-month with a day-of-week: both must match (Mondays that are odd days) */
    c = parse_ok("0 0 */2 * mon");
    CHECK(tk_cron_next(&c, utc, at("2026-06-01T00:00:00Z"), &n));
    CHECK_INT(n, ==, at("2026-06-15T00:00:00Z"));
    tk_tz *berlin = zone("Europe/Berlin");
    c = parse_ok("@yearly");
    CHECK(tk_cron_next(&c, berlin, at("2026-06-01T00:00:00Z"), &n));
    CHECK_INT(n, ==, at("2026-12-31T23:00:00Z"));
    /* far beyond the file's transitions, the footer rule: 09:00 in July 2040 is CEST */
    c = parse_ok("0 9 4 7 *");
    CHECK(tk_cron_next(&c, berlin, at("2040-01-01T00:00:00Z"), &n));
    CHECK_INT(n, ==, at("2040-07-04T07:00:00Z"));
    tk_tz_free(berlin);
    tk_tz_free(utc);
}

/* ---- a second oracle: glibc's localtime_r, scanning UTC minutes */

static int64_t glibc_local(int64_t u)
{
    time_t t = (time_t)u;
    struct tm tm;
    localtime_r(&t, &tm);
    return u + tm.tm_gmtoff;
}

static bool local_matches(const tk_cron *c, int64_t L)
{
    int64_t days = L >= 0 ? L / 86400 : -((-L + 86399) / 86400);
    int64_t sod = L - days * 86400;
    return tk_cron_day_matches(c, days) && (c->hour & (1u << (sod / 3600))) &&
           (c->minute & (1ULL << (sod % 3600 / 60)));
}

static int64_t oracle_next(const tk_cron *c, int64_t after)
{
    int64_t u = after - after % 60 + 60;
    int64_t maxseen = glibc_local(u - 60);
    for (int i = 0; i < 60 * 24 * 40; i++, u += 60) {
        int64_t L = glibc_local(u);
        if (L <= maxseen)
            continue; /* a repeated local time: it fired at its first occurrence */
        bool fire = false;
        for (int64_t t = maxseen + 60; t <= L && !fire; t += 60)
            fire = local_matches(c, t); /* a gap's skipped minutes fire at its end */
        maxseen = L;
        if (fire)
            return u;
    }
    return -1;
}

TEST(next_fire_against_glibc)
{
    const char *exprs[] = {"* * * * *",      "*/7 * * * *", "0 * * * *",   "30 * * * *",
                           "*/15 1-3 * * *", "0 2 * * *",   "30 2 * * *",  "59 1 * * *",
                           "0,30 0-4 * * 0", "45 23 * * *", "0 3 * * 1-5", "15,45 2 * * *"};
    srand(17);
    for (size_t zi = 0; zi < TK_ARRAY_LEN(tz_test_zones); zi++) {
        setenv("TZ", tz_test_zones[zi], 1);
        tzset();
        tk_tz *tz = zone(tz_test_zones[zi]);
        /* find this zone's transitions in 2026-2027 and start near each */
        int64_t starts[8];
        int ns = 0;
        for (int64_t u = at("2026-01-01T00:00:00Z"); u < at("2028-01-01T00:00:00Z") && ns < 8;
             u += 1800)
            if (glibc_local(u) - u != glibc_local(u + 1800) - (u + 1800))
                starts[ns++] = u - 3 * 3600 - (rand() % 7200);
        if (ns == 0)
            starts[ns++] = at("2026-06-01T00:00:00Z");
        for (int s = 0; s < ns; s++)
            for (size_t ei = 0; ei < TK_ARRAY_LEN(exprs); ei++) {
                tk_cron c = parse_ok(exprs[ei]);
                int64_t t = starts[s];
                for (int k = 0; k < 12; k++) {
                    int64_t n, want = oracle_next(&c, t);
                    if (!tk_cron_next(&c, tz, t, &n) || n != want) {
                        char a[32], b[32], w[32];
                        fmt_min(t, a, sizeof a), fmt_min(n, b, sizeof b);
                        fmt_min(want, w, sizeof w);
                        TK_TEST_FAIL("%s in %s after %s: got %s, glibc scan %s", exprs[ei],
                                     tz_test_zones[zi], a, b, w);
                    }
                    t = n;
                }
            }
        tk_tz_free(tz);
    }
}

TEST_MAIN()
