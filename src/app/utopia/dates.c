/*
 * dates.c — the liberal date parser (see dates.h).
 */
#include "app/utopia/dates.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "lib/tktime.h"

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant). */
static int64_t days_from_civil(int64_t y, int64_t m, int64_t d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

static int mdays(int64_t y, int m)
{
    static const int n[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : n[m - 1];
}

static const char *const months[] = {"january",   "february", "march",    "april",
                                     "may",       "june",     "july",     "august",
                                     "september", "october",  "november", "december"};

static int month_word(const char *w, size_t n)
{
    if (n < 3)
        return 0;
    for (int i = 0; i < 12; i++) {
        size_t ml = strlen(months[i]);
        if (n <= ml && strncmp(w, months[i], n) == 0 && (n == ml || n == 3 || (i == 8 && n == 4)))
            return i + 1;
    }
    return 0;
}

typedef struct {
    char w[8][24];
    int n;
} words;

/* Splits on blanks, commas and the separators / . - (kept as their own words
 * only inside numeric forms, which are handled before this). */
static int split(const char *s, words *ws)
{
    ws->n = 0;
    while (*s) {
        while (*s == ' ' || *s == ',' || *s == '\t')
            s++;
        if (!*s)
            break;
        if (ws->n == 8)
            return -1;
        size_t k = 0;
        while (*s && *s != ' ' && *s != ',' && *s != '\t') {
            if (k < sizeof ws->w[0] - 1)
                ws->w[ws->n][k++] = (char)tolower((unsigned char)*s);
            s++;
        }
        ws->w[ws->n][k] = 0;
        ws->n++;
    }
    return 0;
}

static int all_digits(const char *s, size_t min, size_t max)
{
    size_t n = strlen(s);
    if (n < min || n > max)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i]))
            return 0;
    return 1;
}

/* "5", "5th", "1st", "22nd", "3rd" -> day */
static int day_word(const char *w)
{
    int d = 0;
    size_t i = 0;
    while (i < 2 && isdigit((unsigned char)w[i]))
        d = d * 10 + (w[i++] - '0');
    if (i == 0)
        return 0;
    const char *rest = w + i;
    if (*rest && strcmp(rest, "st") && strcmp(rest, "nd") && strcmp(rest, "rd") &&
        strcmp(rest, "th"))
        return 0;
    return d;
}

static tk_status ymd(int64_t y, int m, int d, int64_t *ms, char *err, size_t errlen)
{
    if (y < 32 || y > 9999) {
        /* years below 32 read as days or months in the numeric forms, so they
         * could not be parsed back; nothing a chat remembers is dated so */
        snprintf(err, errlen, "year %lld is out of range (32 to 9999)", (long long)y);
        return TK_EINVAL;
    }
    if (m < 1 || m > 12 || d < 1 || d > mdays(y, m)) {
        snprintf(err, errlen, "no such date");
        return TK_EINVAL;
    }
    *ms = days_from_civil(y, m, d) * 86400000LL;
    return TK_OK;
}

tk_status utopia_date_parse(const char *in, int64_t now_ms, int64_t *ms, const char **precision,
                            char *err, size_t errlen)
{
    char s[96];
    snprintf(err, errlen, "%s", "");
    if (!in) {
        snprintf(err, errlen, "no date");
        return TK_EINVAL;
    }
    while (isspace((unsigned char)*in))
        in++;
    size_t n = strlen(in);
    while (n && (isspace((unsigned char)in[n - 1]) || in[n - 1] == '.'))
        n--;
    if (n == 0 || n >= sizeof s) {
        snprintf(err, errlen, "not a date");
        return TK_EINVAL;
    }
    memcpy(s, in, n);
    s[n] = 0;
    if (now_ms == 0)
        now_ms = tk_now_ms();
    /* full timestamps first */
    if (n >= 20 && tk_time_parse_rfc3339(s, ms) == TK_OK) {
        *precision = "second";
        return TK_OK;
    }
    /* leading prepositions */
    static const char *const lead[] = {"as of ",  "since ", "from ", "until ", "till ", "by ",
                                       "before ", "after ", "in ",   "on ",    "at "};
    for (int again = 1; again;) {
        again = 0;
        for (size_t i = 0; i < TK_ARRAY_LEN(lead); i++) {
            size_t l = strlen(lead[i]);
            if (strncasecmp(s, lead[i], l) == 0) {
                memmove(s, s + l, strlen(s + l) + 1);
                again = 1;
            }
        }
    }
    int y, m, d, hh, mm, ss;
    char tail[8];
    /* ISO forms */
    if (sscanf(s, "%4d-%2d-%2d%*[T ]%2d:%2d:%2d%7s", &y, &m, &d, &hh, &mm, &ss, tail) >= 6 ||
        sscanf(s, "%4d-%2d-%2d%*[T ]%2d:%2d%7s", &y, &m, &d, &hh, &mm, tail) >= 5) {
        int secs = sscanf(s, "%4d-%2d-%2d%*[T ]%2d:%2d:%2d", &y, &m, &d, &hh, &mm, &ss) == 6;
        if (!secs)
            ss = 0;
        if (hh > 23 || mm > 59 || ss > 59 || ymd(y, m, d, ms, err, errlen) != TK_OK) {
            snprintf(err, errlen, "no such date or time");
            return TK_EINVAL;
        }
        *ms += ((int64_t)hh * 3600 + mm * 60 + ss) * 1000;
        /* a trailing Z or offset: only Z / +00:00 are taken as UTC; others refused */
        const char *t = strpbrk(s + 10, "Z+-z");
        if (t && (*t == '+' || *t == '-')) {
            int oh = 0, om = 0;
            if (sscanf(t + 1, "%2d:%2d", &oh, &om) < 1 || oh > 23 || om > 59) {
                snprintf(err, errlen, "bad UTC offset");
                return TK_EINVAL;
            }
            int64_t off = ((int64_t)oh * 60 + om) * 60000;
            *ms += *t == '+' ? -off : off;
        }
        *precision = secs ? "second" : "minute";
        return TK_OK;
    }
    char c1, c2;
    int consumed = 0;
    if (sscanf(s, "%4d%c%2d%c%2d%n", &y, &c1, &m, &c2, &d, &consumed) == 5 && consumed == (int)n &&
        c1 == c2 && (c1 == '-' || c1 == '/' || c1 == '.') && y > 31) {
        *precision = "day";
        return ymd(y, m, d, ms, err, errlen);
    }
    if (sscanf(s, "%4d%c%2d%n", &y, &c1, &m, &consumed) == 3 && consumed == (int)n &&
        (c1 == '-' || c1 == '/') && y > 31 && strlen(s) >= 6) {
        *precision = "month";
        return ymd(y, m, 1, ms, err, errlen);
    }
    int a, b;
    if (sscanf(s, "%2d%c%2d%c%4d%n", &a, &c1, &b, &c2, &y, &consumed) == 5 &&
        consumed == (int)strlen(s) && c1 == c2 && (c1 == '/' || c1 == '.' || c1 == '-') && y > 31) {
        *precision = "day";
        if (c1 == '.' || a > 12)
            return ymd(y, b, a, ms, err, errlen); /* day first */
        if (b > 12)
            return ymd(y, a, b, ms, err, errlen); /* month first */
        if (a == b)
            return ymd(y, a, b, ms, err, errlen);
        snprintf(err, errlen,
                 "ambiguous date \"%s\" (day/month or month/day?): write it as YYYY-MM-DD", s);
        return TK_EINVAL;
    }
    words ws;
    if (split(s, &ws) != 0 || ws.n == 0) {
        snprintf(err, errlen, "not a date");
        return TK_EINVAL;
    }
    int64_t ny;
    int nm, nd;
    civil_from_days(now_ms / 86400000LL - (now_ms < 0 && now_ms % 86400000LL), &ny, &nm, &nd);
    /* relative */
    if (ws.n == 1 && (!strcmp(ws.w[0], "now") || !strcmp(ws.w[0], "today") ||
                      !strcmp(ws.w[0], "yesterday") || !strcmp(ws.w[0], "tomorrow"))) {
        if (!strcmp(ws.w[0], "now")) {
            *ms = now_ms;
            *precision = "second";
            return TK_OK;
        }
        int delta = !strcmp(ws.w[0], "yesterday") ? -1 : !strcmp(ws.w[0], "tomorrow") ? 1 : 0;
        *ms = (days_from_civil(ny, nm, nd) + delta) * 86400000LL;
        *precision = "day";
        return TK_OK;
    }
    if (ws.n == 2 &&
        (!strcmp(ws.w[0], "this") || !strcmp(ws.w[0], "last") || !strcmp(ws.w[0], "next"))) {
        int delta = !strcmp(ws.w[0], "last") ? -1 : !strcmp(ws.w[0], "next") ? 1 : 0;
        if (!strcmp(ws.w[1], "year")) {
            *precision = "year";
            return ymd(ny + delta, 1, 1, ms, err, errlen);
        }
        if (!strcmp(ws.w[1], "month")) {
            int64_t yy = ny;
            int mo = nm + delta;
            if (mo < 1)
                mo = 12, yy--;
            if (mo > 12)
                mo = 1, yy++;
            *precision = "month";
            return ymd(yy, mo, 1, ms, err, errlen);
        }
        if (!strcmp(ws.w[1], "week")) {
            *ms = (days_from_civil(ny, nm, nd) + 7 * delta) * 86400000LL;
            *precision = "day";
            return TK_OK;
        }
    }
    if (ws.n == 3 && !strcmp(ws.w[2], "ago") && all_digits(ws.w[0], 1, 4)) {
        int k = 0;
        for (const char *p = ws.w[0]; *p; p++)
            k = k * 10 + (*p - '0');
        const char *unit = ws.w[1];
        size_t ul = strlen(unit);
        if (ul > 1 && unit[ul - 1] == 's')
            ul--;
        if (ul == 3 && !strncmp(unit, "day", 3)) {
            *ms = (days_from_civil(ny, nm, nd) - k) * 86400000LL;
            *precision = "day";
            return TK_OK;
        }
        if (ul == 4 && !strncmp(unit, "week", 4)) {
            *ms = (days_from_civil(ny, nm, nd) - 7LL * k) * 86400000LL;
            *precision = "day";
            return TK_OK;
        }
        if (ul == 5 && !strncmp(unit, "month", 5)) {
            int64_t total = ny * 12 + (nm - 1) - k;
            *precision = "month";
            return ymd(total / 12, (int)(total % 12) + 1, 1, ms, err, errlen);
        }
        if (ul == 4 && !strncmp(unit, "year", 4)) {
            *precision = "year";
            return ymd(ny - k, 1, 1, ms, err, errlen);
        }
    }
    /* quarters: Q3 2024 */
    if (ws.n == 2 && ws.w[0][0] == 'q' && ws.w[0][1] >= '1' && ws.w[0][1] <= '4' && !ws.w[0][2] &&
        all_digits(ws.w[1], 4, 4)) {
        *precision = "month";
        return ymd((ws.w[1][0] - '0') * 1000 + (ws.w[1][1] - '0') * 100 + (ws.w[1][2] - '0') * 10 +
                       (ws.w[1][3] - '0'),
                   (ws.w[0][1] - '1') * 3 + 1, 1, ms, err, errlen);
    }
    /* words: drop "of" and "the" */
    int month = 0, day = 0;
    int64_t year = -1;
    for (int i = 0; i < ws.n; i++) {
        const char *w = ws.w[i];
        if (!strcmp(w, "of") || !strcmp(w, "the"))
            continue;
        int mw = month_word(w, strlen(w));
        if (mw && !month) {
            month = mw;
            continue;
        }
        if (all_digits(w, 4, 4) && year < 0) {
            year = (w[0] - '0') * 1000 + (w[1] - '0') * 100 + (w[2] - '0') * 10 + (w[3] - '0');
            if (year <= 31) {
                /* as in the numeric forms: "0018" could be a day; refuse */
                snprintf(err, errlen, "ambiguous year \"%s\" in \"%s\" (try YYYY-MM-DD)", w, in);
                return TK_EINVAL;
            }
            continue;
        }
        int dw = day_word(w);
        if (dw && !day) {
            day = dw;
            continue;
        }
        snprintf(err, errlen, "not a date: \"%s\" (try YYYY-MM-DD)", in);
        return TK_EINVAL;
    }
    if (year >= 0 && !month && !day) {
        *precision = "year";
        return ymd(year, 1, 1, ms, err, errlen);
    }
    if (month && !day && year >= 0) {
        *precision = "month";
        return ymd(year, month, 1, ms, err, errlen);
    }
    if (month && day) {
        if (year < 0)
            year = ny; /* "March 5": this year */
        *precision = "day";
        return ymd(year, month, day, ms, err, errlen);
    }
    snprintf(err, errlen, "not a date: \"%s\" (try YYYY-MM-DD)", in);
    return TK_EINVAL;
}

void utopia_date_format(int64_t ms, const char *precision, char *out, size_t outlen)
{
    int64_t y;
    int m, d;
    int64_t days = ms / 86400000LL - (ms < 0 && ms % 86400000LL ? 1 : 0);
    civil_from_days(days, &y, &m, &d);
    if (precision && !strcmp(precision, "year"))
        snprintf(out, outlen, "%04lld", (long long)y);
    else if (precision && !strcmp(precision, "month"))
        snprintf(out, outlen, "%04lld-%02d", (long long)y, m);
    else if (precision && !strcmp(precision, "day"))
        snprintf(out, outlen, "%04lld-%02d-%02d", (long long)y, m, d);
    else
        tk_time_rfc3339(ms, out, outlen);
}
