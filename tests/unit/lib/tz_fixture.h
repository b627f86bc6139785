/* Shared by the zone and cron tests: real zones with DST switches of every
 * kind (north and south, negative DST in Dublin, half-hour shifts in Lord
 * Howe, a 45-minute offset in Chatham, none in Kolkata), loading, and times. */
#ifndef TZ_FIXTURE_H
#define TZ_FIXTURE_H

#include "lib/tktime.h"
#include "lib/tz.h"
#include "tk_test.h"

static const char *const tz_test_zones[] = {
    "America/New_York",
    "Europe/London",
    "Europe/Berlin",
    "Europe/Dublin",
    "Australia/Lord_Howe",
    "Asia/Kolkata",
    "UTC",
    "America/Santiago",
    "Pacific/Chatham",
    "Asia/Tehran",
    "America/St_Johns",
    "Africa/Casablanca",
    "Pacific/Apia",
    "America/Sao_Paulo",
    "Australia/Sydney",
};

static inline tk_tz *zone(const char *name)
{
    tk_tz *tz;
    char err[128];
    if (tk_tz_load(name, &tz, err, sizeof err) != TK_OK)
        TK_TEST_FAIL("load %s: %s", name, err);
    return tz;
}

static inline int64_t at(const char *s)
{
    int64_t ms;
    if (tk_time_parse_rfc3339(s, &ms) != TK_OK)
        TK_TEST_FAIL("bad time %s", s);
    return ms / 1000;
}

#endif
