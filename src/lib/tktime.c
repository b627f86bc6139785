#include "lib/tktime.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int64_t tk_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t tk_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t tk_mono_ms(void)
{
    return tk_mono_ns() / 1000000;
}

void tk_time_rfc3339(int64_t ms, char *out, size_t outlen)
{
    time_t secs = (time_t)(ms / 1000);
    int frac = (int)(ms % 1000);
    if (frac < 0) {
        frac += 1000;
        secs -= 1;
    }
    struct tm tm;
    gmtime_r(&secs, &tm);
    /* four-digit years always (strftime's %Y does not pad years below 1000) */
    snprintf(out, outlen, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
}

static int digits(const char **p, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!isdigit((unsigned char)**p))
            return 0;
        v = v * 10 + (**p - '0');
        (*p)++;
    }
    *out = v;
    return 1;
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian), after Howard Hinnant. */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

tk_status tk_time_parse_rfc3339(const char *s, int64_t *ms)
{
    const char *p = s;
    int y, mo, d, h, mi, se, frac = 0;
    if (!digits(&p, 4, &y) || *p++ != '-' || !digits(&p, 2, &mo) || *p++ != '-' ||
        !digits(&p, 2, &d))
        return TK_EINVAL;
    if (*p != 'T' && *p != 't' && *p != ' ')
        return TK_EINVAL;
    p++;
    if (!digits(&p, 2, &h) || *p++ != ':' || !digits(&p, 2, &mi) || *p++ != ':' ||
        !digits(&p, 2, &se))
        return TK_EINVAL;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60)
        return TK_EINVAL;
    if (*p == '.') {
        p++;
        int n = 0;
        while (isdigit((unsigned char)*p)) {
            if (n < 3)
                frac = frac * 10 + (*p - '0');
            n++;
            p++;
        }
        if (n == 0)
            return TK_EINVAL;
        for (; n < 3; n++)
            frac *= 10;
    }
    int64_t off = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int sign = *p == '-' ? -1 : 1, oh, om;
        p++;
        if (!digits(&p, 2, &oh) || *p++ != ':' || !digits(&p, 2, &om) || oh > 23 || om > 59)
            return TK_EINVAL;
        off = sign * (oh * 3600 + om * 60);
    } else {
        return TK_EINVAL;
    }
    if (*p)
        return TK_EINVAL;
    int64_t days = days_from_civil(y, mo, d);
    int64_t secs = days * 86400 + h * 3600 + mi * 60 + se - off;
    *ms = secs * 1000 + frac;
    return TK_OK;
}

tk_status tk_parse_duration(const char *s, int64_t *ms)
{
    if (!s || !*s)
        return TK_EINVAL;
    int64_t total = 0;
    const char *p = s;
    int any = 0;
    while (*p) {
        if (!isdigit((unsigned char)*p))
            return TK_EINVAL;
        int64_t v = 0;
        while (isdigit((unsigned char)*p)) {
            if (v > INT64_MAX / 10 - 10)
                return TK_EINVAL;
            v = v * 10 + (*p - '0');
            p++;
        }
        int64_t unit;
        if (strncmp(p, "ms", 2) == 0) {
            unit = 1;
            p += 2;
        } else if (*p == 's') {
            unit = 1000;
            p++;
        } else if (*p == 'm') {
            unit = 60 * 1000;
            p++;
        } else if (*p == 'h') {
            unit = 3600 * 1000;
            p++;
        } else if (*p == 'd') {
            unit = 86400 * 1000;
            p++;
        } else if (*p == '\0' && !any) {
            unit = 1000; /* a plain number is seconds */
        } else {
            return TK_EINVAL;
        }
        if (v > (INT64_MAX - total) / unit)
            return TK_EINVAL;
        total += v * unit;
        any = 1;
    }
    *ms = total;
    return TK_OK;
}

void tk_format_duration(int64_t ms, char *out, size_t outlen)
{
    if (ms % 1000 != 0 || ms == 0) {
        snprintf(out, outlen, "%lldms", (long long)ms);
        return;
    }
    int64_t s = ms / 1000;
    int64_t h = s / 3600, m = (s % 3600) / 60, sec = s % 60;
    size_t n = 0;
    out[0] = '\0';
    if (h)
        n += (size_t)snprintf(out + n, outlen - n, "%lldh", (long long)h);
    if (m && n < outlen)
        n += (size_t)snprintf(out + n, outlen - n, "%lldm", (long long)m);
    if (sec && n < outlen)
        snprintf(out + n, outlen - n, "%llds", (long long)sec);
}

void tk_sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}
