/*
 * tz.h — IANA time zones from the system's compiled zoneinfo (TZif, RFC 8536),
 * read without touching the process's TZ (thread-safe, no setenv/localtime).
 * A zone answers two questions: the UTC offset in force at a UTC instant, and
 * which UTC instants a wall-clock (local) time names: none (a gap, spring
 * forward), one, or two (a repeated hour, fall back). Beyond the file's last
 * transition the footer's POSIX TZ rule is used, so far-future dates follow the
 * zone's current rule.
 */
#ifndef TK_TZ_H
#define TK_TZ_H

#include <stddef.h>
#include <stdint.h>

#include "lib/common.h"

typedef struct tk_tz tk_tz;

/* Longest zone name accepted. */
#define TK_TZ_NAME_MAX 64

/* Loads a zone by IANA name ("Europe/Berlin", "UTC") from $TZDIR or
 * /usr/share/zoneinfo. Names with "..", a leading '/', or characters outside
 * A-Z a-z 0-9 / _ + - are refused. TK_ENOENT when no such zone; err says why. */
tk_status tk_tz_load(const char *name, tk_tz **out, char *err, size_t errlen);
/* Parses TZif bytes (untrusted: every count and offset is checked). */
tk_status tk_tz_parse(const uint8_t *data, size_t len, tk_tz **out);
void tk_tz_free(tk_tz *tz);
const char *tk_tz_name(const tk_tz *tz);

/* UTC offset in seconds (east positive) at UTC instant `utc` (seconds). */
int32_t tk_tz_offset(const tk_tz *tz, int64_t utc);

/* The UTC instants at which the wall clock reads `local` (seconds since the
 * epoch as if local time were UTC): returns how many (0, 1 or 2); *first gets
 * the earliest one when there is any. */
int tk_tz_local_to_utc(const tk_tz *tz, int64_t local, int64_t *first);

/* Civil calendar helpers (proleptic Gregorian, UTC-like seconds). */
int64_t tk_days_from_civil(int64_t y, unsigned m, unsigned d);
void tk_civil_from_days(int64_t days, int64_t *y, unsigned *m, unsigned *d);
/* 0 = Sunday. */
unsigned tk_weekday_from_days(int64_t days);
unsigned tk_days_in_month(int64_t y, unsigned m);

#endif
