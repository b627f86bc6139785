/*
 * cron.h — schedule expressions and their fire times in a time zone.
 *
 * Grammar: five fields "minute hour day-of-month month day-of-week", each a
 * list of ranges: "*" ["/" step] | n ["-" m ["/" step]], with month names
 * (jan-dec) and day names (sun-sat) in any case, 0 and 7 both Sunday; the
 * macros @hourly, @daily (@midnight), @weekly, @monthly, @yearly (@annually);
 * or a one-shot RFC 3339 time with an offset ("2026-12-24T09:00:00+01:00").
 * As in Vixie cron, when day-of-month and day-of-week are both restricted
 * (neither starts with "*") a day matching either fires.
 *
 * Refused, with a message naming the field: a field count other than five,
 * @reboot and unknown macros, "?", "L", "W", "#", out-of-range values, reversed
 * ranges, step 0, a step on a single value, and expressions that never fire
 * (day-of-month that no chosen month has, "0 0 30 2 *").
 *
 * Fire times are wall-clock times of the zone. DST policy: a local time that
 * does not exist (spring forward) fires once, at the first valid minute after
 * it (the end of the gap); a local time that occurs twice (fall back) fires
 * once, at its first occurrence.
 */
#ifndef TK_CRON_H
#define TK_CRON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/common.h"
#include "lib/tz.h"

#define TK_CRON_EXPR_MAX 256

typedef struct {
    bool once;       /* a one-shot time */
    int64_t at;      /* once: UTC seconds */
    uint64_t minute; /* bit n = minute n (0-59) */
    uint32_t hour;   /* 0-23 */
    uint32_t dom;    /* 1-31 */
    uint16_t month;  /* 1-12 */
    uint8_t dow;     /* 0-6, Sunday 0 */
    bool dom_star, dow_star;
} tk_cron;

/* Parses an expression; on refusal err holds a message naming the field. */
tk_status tk_cron_parse(const char *s, tk_cron *out, char *err, size_t errlen);

/* The first fire time strictly after UTC second `after`, in zone `tz`
 * (ignored for one-shots): true and *next (UTC seconds, on a minute), or false
 * when there is none within 8 years (a past one-shot). */
bool tk_cron_next(const tk_cron *c, const tk_tz *tz, int64_t after, int64_t *next);

/* Does local calendar day `days` (days since the epoch) match? */
bool tk_cron_day_matches(const tk_cron *c, int64_t days);

#endif
