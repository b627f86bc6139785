/*
 * tktime.h — wall-clock and monotonic time, RFC 3339, durations.
 */
#ifndef TK_TKTIME_H
#define TK_TKTIME_H

#include <stddef.h>
#include <stdint.h>

#include "lib/common.h"

/* Milliseconds since the Unix epoch (wall clock). */
int64_t tk_now_ms(void);
/* Monotonic clock, for measuring durations and deadlines. */
int64_t tk_mono_ns(void);
int64_t tk_mono_ms(void);

/* Formats ms since the epoch as 2026-12-01T05:40:04.123Z (out: >= 32 bytes). */
void tk_time_rfc3339(int64_t ms, char *out, size_t outlen);
/* Parses RFC 3339 (with Z or a numeric offset; fraction optional) to ms. */
tk_status tk_time_parse_rfc3339(const char *s, int64_t *ms);

/* Parses a duration: "30m", "1h30m", "45s", "500ms", "2d", or plain seconds "90".
 * Result in milliseconds. */
tk_status tk_parse_duration(const char *s, int64_t *ms);
/* Formats ms as a short duration ("30m", "1h30m", "45s", "250ms"). */
void tk_format_duration(int64_t ms, char *out, size_t outlen);

/* Sleeps ms milliseconds (restarts on EINTR). */
void tk_sleep_ms(int64_t ms);

#endif
