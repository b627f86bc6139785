/*
 * dates.h — dates as a model writes them, parsed liberally, stored strictly.
 *
 * Accepted (case-insensitive, surrounding words "in", "on", "since", "from",
 * "as of", "until", "till", "by", "before", "after" ignored):
 *   RFC 3339 / ISO 8601: 2024-03-05T10:00:00Z, 2024-03-05 10:00, 2024-03-05,
 *     2024-03, 2024/03/05, 2024
 *   names: March 2024, Mar 2024, 5 March 2024, 5th of March, 2024, March 5 2024,
 *     March 5th, 2024
 *   numeric day-first or month-first only when unambiguous: 31/12/2024,
 *     12/31/2024, 31.12.2024 (05/03/2024 is refused: which is the month?)
 *   quarters: Q3 2024
 *   relative to now: now, today, yesterday, tomorrow, this/last/next
 *     year|month|week, N days|weeks|months|years ago
 * The result is the first instant (UTC) of what was named, with its precision:
 * "year", "month", "day", "minute", "second". Years 1..9999.
 */
#ifndef UTOPIA_DATES_H
#define UTOPIA_DATES_H

#include <stdint.h>

#include "lib/common.h"

/* now_ms: the "now" of relative dates. TK_EINVAL with a reason in err. */
tk_status utopia_date_parse(const char *s, int64_t now_ms, int64_t *ms, const char **precision,
                            char *err, size_t errlen);

/* Formats ms at a precision: "2024", "2024-03", "2024-03-05", else RFC 3339. */
void utopia_date_format(int64_t ms, const char *precision, char *out, size_t outlen);

#endif
