/*
 * cron.c — cron expressions: the parser and next-fire search (see cron.h).
 */
#include "lib/cron.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "lib/tktime.h"

typedef struct {
    const char *name;
    int lo, hi;
    const char *const *names; /* three-letter names for lo.. */
} field_def;

static const char *const month_names[] = {"jan", "feb", "mar", "apr", "may", "jun", "jul",
                                          "aug", "sep", "oct", "nov", "dec", NULL};
static const char *const day_names[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat", NULL};

static const field_def fields[5] = {
    {"minute", 0, 59, NULL},          {"hour", 0, 23, NULL},
    {"day-of-month", 1, 31, NULL},    {"month", 1, 12, month_names},
    {"day-of-week", 0, 7, day_names},
};

static const struct {
    const char *name, *expr;
} macros[] = {
    {"@hourly", "0 * * * *"},   {"@daily", "0 0 * * *"},   {"@midnight", "0 0 * * *"},
    {"@weekly", "0 0 * * 0"},   {"@monthly", "0 0 1 * *"}, {"@yearly", "0 0 1 1 *"},
    {"@annually", "0 0 1 1 *"},
};

/* One value: a number or (where the field has them) a name. */
static bool parse_value(const field_def *f, const char **pp, const char *end, int *out, char *err,
                        size_t errlen)
{
    const char *p = *pp;
    if (p < end && *p >= '0' && *p <= '9') {
        long v = 0;
        int nd = 0;
        while (p < end && *p >= '0' && *p <= '9') {
            if (++nd > 4) {
                snprintf(err, errlen, "%s: number too long", f->name);
                return false;
            }
            v = v * 10 + (*p++ - '0');
        }
        if (v < f->lo || v > f->hi) {
            snprintf(err, errlen, "%s: %ld is out of range %d-%d", f->name, v, f->lo, f->hi);
            return false;
        }
        *out = (int)v;
        *pp = p;
        return true;
    }
    if (f->names && end - p >= 3) {
        for (int i = 0; f->names[i]; i++)
            if (strncasecmp(p, f->names[i], 3) == 0 &&
                (end - p == 3 || !((p[3] | 0x20) >= 'a' && (p[3] | 0x20) <= 'z'))) {
                *out = f->lo + i;
                *pp = p + 3;
                return true;
            }
    }
    char ch = p < end ? *p : 0;
    if (ch == '?' || ch == 'L' || ch == 'W' || ch == '#' || ch == 'l' || ch == 'w')
        snprintf(err, errlen, "%s: '%c' is not supported (Quartz syntax)", f->name, ch);
    else if (f->names && ch && ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'z'))
        snprintf(err, errlen, "%s: unknown name (use %s)", f->name,
                 f->names == month_names ? "jan-dec" : "sun-sat");
    else if (ch)
        snprintf(err, errlen, "%s: unexpected '%c'", f->name, ch);
    else
        snprintf(err, errlen, "%s: a value is missing", f->name);
    return false;
}

/* One field into a bit set; *star when it starts with '*'. */
static bool parse_field(const field_def *f, const char *s, const char *end, uint64_t *bits,
                        bool *star, char *err, size_t errlen)
{
    *bits = 0;
    *star = s < end && *s == '*';
    const char *p = s;
    for (;;) {
        int lo, hi, step = 1;
        bool range = false;
        if (p < end && *p == '*') {
            lo = f->lo, hi = f->hi;
            range = true;
            p++;
        } else {
            if (!parse_value(f, &p, end, &lo, err, errlen))
                return false;
            hi = lo;
            if (p < end && *p == '-') {
                p++;
                if (!parse_value(f, &p, end, &hi, err, errlen))
                    return false;
                if (hi < lo) {
                    snprintf(err, errlen, "%s: range %d-%d is reversed", f->name, lo, hi);
                    return false;
                }
                range = true;
            }
        }
        if (p < end && *p == '/') {
            p++;
            if (!range) {
                snprintf(err, errlen, "%s: a step needs a range or '*' (e.g. %d-%d/N)", f->name, lo,
                         f->hi);
                return false;
            }
            const char *q = p;
            long v = 0;
            while (p < end && *p >= '0' && *p <= '9' && p - q < 4)
                v = v * 10 + (*p++ - '0');
            if (p == q || (p < end && *p >= '0' && *p <= '9')) {
                snprintf(err, errlen, "%s: a step must be a number", f->name);
                return false;
            }
            if (v == 0 || v > f->hi) {
                snprintf(err, errlen, "%s: step %ld is out of range 1-%d", f->name, v, f->hi);
                return false;
            }
            step = (int)v;
        }
        for (int v = lo; v <= hi; v += step)
            *bits |= 1ULL << v;
        if (p == end)
            return true;
        if (*p != ',') {
            char ch = *p;
            if (ch == '?' || ch == 'L' || ch == 'W' || ch == '#' || ch == 'l' || ch == 'w')
                snprintf(err, errlen, "%s: '%c' is not supported (Quartz syntax)", f->name, ch);
            else
                snprintf(err, errlen, "%s: unexpected '%c'", f->name, ch);
            return false;
        }
        p++;
    }
}

static bool is_space(char ch)
{
    return ch == ' ' || ch == '\t';
}

static bool never_fires(const tk_cron *c, char *err, size_t errlen)
{
    if (!c->dom_star && !c->dow_star)
        return false; /* either rule: some weekday fires in any month */
    for (unsigned m = 1; m <= 12; m++) {
        if (!(c->month & (1u << m)))
            continue;
        unsigned dim = tk_days_in_month(2024, m); /* a leap year: Feb 29 occurs */
        for (unsigned d = 1; d <= dim; d++)
            if (c->dom & (1u << d))
                return false;
    }
    snprintf(err, errlen,
             "day-of-month: the expression never fires (no chosen month has that day)");
    return true;
}

tk_status tk_cron_parse(const char *s, tk_cron *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (errlen)
        err[0] = 0;
    size_t n = strlen(s);
    if (n > TK_CRON_EXPR_MAX) {
        snprintf(err, errlen, "expression: longer than %d characters", TK_CRON_EXPR_MAX);
        return TK_EINVAL;
    }
    while (n && is_space(s[n - 1]))
        n--;
    while (n && is_space(*s))
        s++, n--;
    char buf[TK_CRON_EXPR_MAX + 1];
    memcpy(buf, s, n);
    buf[n] = 0;
    if (n == 0) {
        snprintf(err, errlen, "expression: empty");
        return TK_EINVAL;
    }
    if (buf[0] == '@') {
        for (size_t i = 0; i < TK_ARRAY_LEN(macros); i++)
            if (strcasecmp(buf, macros[i].name) == 0)
                return tk_cron_parse(macros[i].expr, out, err, errlen);
        if (strcasecmp(buf, "@reboot") == 0)
            snprintf(err, errlen, "expression: @reboot is not supported");
        else
            snprintf(err, errlen,
                     "expression: unknown macro (use @hourly, @daily, @weekly, "
                     "@monthly or @yearly)");
        return TK_EINVAL;
    }
    /* A one-shot: four digits and '-' start an RFC 3339 time. */
    if (n >= 5 && buf[4] == '-' && buf[0] >= '0' && buf[0] <= '9') {
        int64_t ms;
        if (tk_time_parse_rfc3339(buf, &ms) != TK_OK) {
            snprintf(err, errlen,
                     "time: not an RFC 3339 time with an offset "
                     "(e.g. 2026-12-24T09:00:00+01:00)");
            return TK_EINVAL;
        }
        int y = 0, m = 0, d = 0;
        if (sscanf(buf, "%4d-%2d-%2d", &y, &m, &d) != 3 ||
            (unsigned)d > tk_days_in_month(y, (unsigned)m)) {
            snprintf(err, errlen, "time: %.10s is not a date", buf);
            return TK_EINVAL;
        }
        out->once = true;
        out->at = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
        return TK_OK;
    }
    const char *start[6], *end[6];
    int nf = 0;
    const char *p = buf;
    while (*p) {
        while (is_space(*p))
            p++;
        if (!*p)
            break;
        if (nf == 6)
            break;
        start[nf] = p;
        while (*p && !is_space(*p))
            p++;
        end[nf++] = p;
    }
    if (nf != 5) {
        if (nf == 6)
            snprintf(err, errlen,
                     "expression: 6 or more fields; expected 5 (minute hour "
                     "day-of-month month day-of-week; no seconds or years)");
        else
            snprintf(err, errlen,
                     "expression: %d field%s; expected 5 (minute hour day-of-month "
                     "month day-of-week)",
                     nf, nf == 1 ? "" : "s");
        return TK_EINVAL;
    }
    uint64_t bits[5];
    bool star[5];
    for (int i = 0; i < 5; i++)
        if (!parse_field(&fields[i], start[i], end[i], &bits[i], &star[i], err, errlen))
            return TK_EINVAL;
    out->minute = bits[0];
    out->hour = (uint32_t)bits[1];
    out->dom = (uint32_t)bits[2];
    out->month = (uint16_t)bits[3];
    out->dow = (uint8_t)((bits[4] | (bits[4] >> 7)) & 0x7f); /* 7 is Sunday */
    out->dom_star = star[2];
    out->dow_star = star[4];
    if (never_fires(out, err, errlen))
        return TK_EINVAL;
    return TK_OK;
}

bool tk_cron_day_matches(const tk_cron *c, int64_t days)
{
    int64_t y;
    unsigned m, d;
    tk_civil_from_days(days, &y, &m, &d);
    if (!(c->month & (1u << m)))
        return false;
    bool dom = c->dom & (1u << d);
    bool dow = c->dow & (1u << tk_weekday_from_days(days));
    if (c->dom_star || c->dow_star)
        return dom && dow;
    return dom || dow;
}

/* Where local time L fires: its first occurrence, or for a time in a gap the
 * first valid minute after it. */
static int64_t fire_of(const tk_tz *tz, int64_t local)
{
    int64_t u;
    for (int i = 0; i <= 48 * 60; i++, local += 60)
        if (tk_tz_local_to_utc(tz, local, &u) > 0)
            return u;
    return INT64_MAX;
}

bool tk_cron_next(const tk_cron *c, const tk_tz *tz, int64_t after, int64_t *next)
{
    if (c->once) {
        if (c->at <= after)
            return false;
        *next = c->at;
        return true;
    }
    /* Fire times grow with local time, so start a little over the zone's
     * widest backward jump before `after`'s local time and take the first
     * matching local minute that fires after it. */
    const int64_t back = 26 * 3600;
    int64_t local = after + tk_tz_offset(tz, after) - back;
    local -= ((local % 60) + 60) % 60;
    const int64_t limit = local + back + (int64_t)(8 * 366 + 2) * 86400;
    while (local <= limit) {
        int64_t days = local >= 0 ? local / 86400 : -((-local + 86399) / 86400);
        int64_t sod = local - days * 86400;
        int64_t y;
        unsigned m, d;
        tk_civil_from_days(days, &y, &m, &d);
        if (!(c->month & (1u << m))) {
            local = (tk_days_from_civil(y, m, 1) + tk_days_in_month(y, m)) * 86400;
            continue;
        }
        if (!tk_cron_day_matches(c, days)) {
            local = (days + 1) * 86400;
            continue;
        }
        int h = (int)(sod / 3600), mi = (int)(sod % 3600 / 60);
        if (!(c->hour & (1u << h))) {
            local = days * 86400 + (int64_t)(h + 1) * 3600;
            continue;
        }
        if (!(c->minute & (1ULL << mi))) {
            local += 60;
            continue;
        }
        int64_t u = fire_of(tz, local);
        if (u > after && u != INT64_MAX) {
            *next = u;
            return true;
        }
        local += 60;
    }
    return false;
}
