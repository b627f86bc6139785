/*
 * tz.c — TZif reader and POSIX TZ rule evaluation (see tz.h).
 */
#include "lib/tz.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Caps on what a zone file may hold (real files have < 2,000 transitions). */
#define TZ_FILE_MAX  (256 * 1024)
#define TZ_TRANS_MAX 4096
#define TZ_TYPES_MAX 256
#define TZ_OFFS_MAX  32

/* A POSIX TZ date rule: Jn (1-365, no Feb 29), n (0-365), or Mm.w.d. */
typedef struct {
    char kind; /* 'J', 'N', 'M' */
    int n, m, w, d;
    int32_t time; /* seconds after local midnight; may be negative or > 24h */
} tz_rule;

typedef struct {
    bool valid;
    int32_t std_off, dst_off; /* east positive */
    bool has_dst;
    tz_rule start, end;
} tz_posix;

struct tk_tz {
    char name[TK_TZ_NAME_MAX + 1];
    size_t ntrans;
    int64_t *trans;     /* UTC seconds, ascending */
    int32_t *trans_off; /* offset in force from trans[i] */
    int32_t first_off;  /* before the first transition */
    tz_posix posix;
    int32_t offs[TZ_OFFS_MAX]; /* every distinct offset the zone uses */
    size_t noffs;
};

int64_t tk_days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const unsigned yoe = (unsigned)(y - era * 400);
    const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

void tk_civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
    z += 719468;
    const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const unsigned doe = (unsigned)(z - era * 146097);
    const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

unsigned tk_weekday_from_days(int64_t z)
{
    return (unsigned)(z >= -4 ? (z + 4) % 7 : (z + 5) % 7 + 6);
}

static bool is_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

unsigned tk_days_in_month(int64_t y, unsigned m)
{
    static const unsigned dm[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (m < 1 || m > 12)
        return 0;
    return m == 2 && is_leap(y) ? 29 : dm[m - 1];
}

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* ---- POSIX TZ strings ("EST5EDT,M3.2.0,M11.1.0", "<+1030>-10:30<+11>-11,M10.1.0,M4.1.0") */

static const char *posix_name(const char *p)
{
    if (*p == '<') {
        p++;
        while (*p && *p != '>')
            p++;
        return *p == '>' ? p + 1 : NULL;
    }
    const char *s = p;
    while ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z'))
        p++;
    return p - s >= 3 ? p : NULL;
}

/* [+-]hh[:mm[:ss]] into seconds; hours up to max_h. */
static const char *posix_hms(const char *p, int max_h, int32_t *out)
{
    int sign = 1;
    if (*p == '+' || *p == '-')
        sign = *p++ == '-' ? -1 : 1;
    int parts[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++) {
        if (i > 0) {
            if (*p != ':')
                break;
            p++;
        }
        if (*p < '0' || *p > '9')
            return NULL;
        int v = 0, nd = 0;
        while (*p >= '0' && *p <= '9' && nd < 3) {
            v = v * 10 + (*p++ - '0');
            nd++;
        }
        parts[i] = v;
    }
    if (parts[0] > max_h || parts[1] > 59 || parts[2] > 59)
        return NULL;
    *out = sign * (parts[0] * 3600 + parts[1] * 60 + parts[2]);
    return p;
}

static const char *posix_num(const char *p, int lo, int hi, int *out)
{
    if (*p < '0' || *p > '9')
        return NULL;
    int v = 0, nd = 0;
    while (*p >= '0' && *p <= '9') {
        if (++nd > 3)
            return NULL;
        v = v * 10 + (*p++ - '0');
    }
    if (v < lo || v > hi)
        return NULL;
    *out = v;
    return p;
}

static const char *posix_rule(const char *p, tz_rule *r)
{
    if (*p == 'J') {
        r->kind = 'J';
        p = posix_num(p + 1, 1, 365, &r->n);
    } else if (*p == 'M') {
        r->kind = 'M';
        p = posix_num(p + 1, 1, 12, &r->m);
        if (p && *p == '.')
            p = posix_num(p + 1, 1, 5, &r->w);
        else
            p = NULL;
        if (p && *p == '.')
            p = posix_num(p + 1, 0, 6, &r->d);
        else
            p = NULL;
    } else {
        r->kind = 'N';
        p = posix_num(p, 0, 365, &r->n);
    }
    if (!p)
        return NULL;
    r->time = 7200;
    if (*p == '/')
        p = posix_hms(p + 1, 167, &r->time);
    return p;
}

static bool posix_parse(const char *s, tz_posix *z)
{
    memset(z, 0, sizeof *z);
    const char *p = posix_name(s);
    int32_t off;
    if (!p || !(p = posix_hms(p, 24, &off)))
        return false;
    z->std_off = -off;
    if (*p == 0) {
        z->valid = true;
        return true;
    }
    if (!(p = posix_name(p)))
        return false;
    z->has_dst = true;
    z->dst_off = z->std_off + 3600;
    if (*p && *p != ',') {
        if (!(p = posix_hms(p, 24, &off)))
            return false;
        z->dst_off = -off;
    }
    if (*p != ',') /* no rule: POSIX leaves it to the implementation; refuse */
        return false;
    if (!(p = posix_rule(p + 1, &z->start)) || *p != ',')
        return false;
    if (!(p = posix_rule(p + 1, &z->end)) || *p != 0)
        return false;
    z->valid = true;
    return true;
}

/* Local midnight (as days) of a rule's date in year y. */
static int64_t rule_day(const tz_rule *r, int64_t y)
{
    int64_t jan1 = tk_days_from_civil(y, 1, 1);
    if (r->kind == 'J')
        return jan1 + r->n - 1 + (is_leap(y) && r->n >= 60 ? 1 : 0);
    if (r->kind == 'N')
        return jan1 + r->n;
    int64_t first = tk_days_from_civil(y, (unsigned)r->m, 1);
    int wd = (int)tk_weekday_from_days(first);
    int64_t day = first + (r->d - wd + 7) % 7 + (int64_t)(r->w - 1) * 7;
    int64_t dim = tk_days_in_month(y, (unsigned)r->m);
    while (day >= first + dim)
        day -= 7;
    return day;
}

static int32_t posix_offset(const tz_posix *z, int64_t utc)
{
    if (!z->has_dst)
        return z->std_off;
    int64_t days = floor_div(utc + z->std_off, 86400);
    int64_t y;
    unsigned m, d;
    tk_civil_from_days(days, &y, &m, &d);
    /* The transitions of the year before, this year and the next, in order:
     * the last one at or before utc decides. */
    int32_t off = z->std_off;
    int64_t best = INT64_MIN;
    for (int64_t yy = y - 1; yy <= y + 1; yy++) {
        int64_t s = rule_day(&z->start, yy) * 86400 + z->start.time - z->std_off;
        int64_t e = rule_day(&z->end, yy) * 86400 + z->end.time - z->dst_off;
        if (s <= utc && s > best) {
            best = s;
            off = z->dst_off;
        }
        if (e <= utc && e > best) {
            best = e;
            off = z->std_off;
        }
    }
    return off;
}

/* ---- TZif */

static int64_t be32(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

static int64_t be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return (int64_t)v;
}

static void add_off(tk_tz *tz, int32_t off)
{
    for (size_t i = 0; i < tz->noffs; i++)
        if (tz->offs[i] == off)
            return;
    if (tz->noffs < TZ_OFFS_MAX)
        tz->offs[tz->noffs++] = off;
}

typedef struct {
    uint32_t isut, isstd, leap, time, type, chr;
} tzif_counts;

static bool tzif_header(const uint8_t *p, size_t len, tzif_counts *c, char *version)
{
    if (len < 44 || memcmp(p, "TZif", 4) != 0)
        return false;
    *version = (char)p[4];
    uint32_t v[6];
    for (int i = 0; i < 6; i++)
        v[i] = (uint32_t)be32(p + 20 + 4 * i);
    c->isut = v[0], c->isstd = v[1], c->leap = v[2], c->time = v[3], c->type = v[4], c->chr = v[5];
    return c->time <= TZ_TRANS_MAX && c->type >= 1 && c->type <= TZ_TYPES_MAX && c->chr <= 4096 &&
           c->leap <= 1024 && c->isut <= c->type && c->isstd <= c->type;
}

static size_t tzif_block_len(const tzif_counts *c, size_t tsize)
{
    return c->time * tsize + c->time + c->type * 6 + c->chr + c->leap * (tsize + 4) + c->isstd +
           c->isut;
}

tk_status tk_tz_parse(const uint8_t *data, size_t len, tk_tz **out)
{
    *out = NULL;
    tzif_counts c;
    char version;
    if (!tzif_header(data, len, &c, &version))
        return TK_EINVAL;
    size_t off = 44, tsize = 4;
    size_t blen = tzif_block_len(&c, 4);
    if (blen > len - off)
        return TK_EINVAL;
    if (version >= '2') {
        off += blen;
        if (!tzif_header(data + off, len - off, &c, &version))
            return TK_EINVAL;
        off += 44;
        tsize = 8;
        blen = tzif_block_len(&c, 8);
        if (blen > len - off)
            return TK_EINVAL;
    }
    const uint8_t *p = data + off;
    const uint8_t *idx = p + c.time * tsize;
    const uint8_t *types = idx + c.time;
    int32_t type_off[TZ_TYPES_MAX] = {0};
    for (uint32_t i = 0; i < c.type; i++) {
        int64_t o = be32(types + 6 * i);
        if (o < -26 * 3600 || o > 26 * 3600)
            return TK_EINVAL;
        type_off[i] = (int32_t)o;
    }
    tk_tz *tz = calloc(1, sizeof *tz);
    if (!tz) {
        tk_oom();
        return TK_ERROR; /* not reached */
    }
    tz->ntrans = c.time;
    tz->trans = calloc(c.time ? c.time : 1, sizeof *tz->trans);
    tz->trans_off = calloc(c.time ? c.time : 1, sizeof *tz->trans_off);
    if (!tz->trans || !tz->trans_off)
        tk_oom();
    tz->first_off = type_off[0];
    add_off(tz, type_off[0]);
    for (uint32_t i = 0; i < c.time; i++) {
        tz->trans[i] = tsize == 8 ? be64(p + 8 * i) : be32(p + 4 * i);
        if (i > 0 && tz->trans[i] <= tz->trans[i - 1])
            goto bad;
        if (idx[i] >= c.type)
            goto bad;
        tz->trans_off[i] = type_off[idx[i]];
        add_off(tz, tz->trans_off[i]);
    }
    if (version >= '2') {
        const uint8_t *f = p + blen, *end = data + len;
        if (f < end && *f == '\n') {
            const uint8_t *nl = memchr(f + 1, '\n', (size_t)(end - f - 1));
            if (!nl || nl - f - 1 > 128)
                goto bad;
            char foot[130];
            memcpy(foot, f + 1, (size_t)(nl - f - 1));
            foot[nl - f - 1] = 0;
            if (foot[0] && !posix_parse(foot, &tz->posix))
                goto bad;
            if (tz->posix.valid) {
                add_off(tz, tz->posix.std_off);
                if (tz->posix.has_dst)
                    add_off(tz, tz->posix.dst_off);
            }
        }
    }
    *out = tz;
    return TK_OK;
bad:
    tk_tz_free(tz);
    return TK_EINVAL;
}

static bool name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > TK_TZ_NAME_MAX || name[0] == '/' || strstr(name, ".."))
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = name[i];
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
              ch == '/' || ch == '_' || ch == '+' || ch == '-'))
            return false;
    }
    return true;
}

tk_status tk_tz_load(const char *name, tk_tz **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!name_ok(name)) {
        snprintf(err, errlen, "time zone: not an IANA zone name");
        return TK_EINVAL;
    }
    const char *dir = getenv("TZDIR");
    if (!dir || !*dir)
        dir = "/usr/share/zoneinfo";
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ELOOP) /* zoneinfo links aliases; the target is in the tree */
        fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "time zone: unknown zone %s", name);
        return TK_ENOENT;
    }
    uint8_t *buf = malloc(TZ_FILE_MAX);
    if (!buf)
        tk_oom();
    size_t len = 0;
    for (;;) {
        ssize_t r = read(fd, buf + len, TZ_FILE_MAX - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t)r;
        if (len == TZ_FILE_MAX)
            break;
    }
    close(fd);
    tk_status st = len < TZ_FILE_MAX ? tk_tz_parse(buf, len, out) : TK_ETOOBIG;
    free(buf);
    if (st != TK_OK) {
        snprintf(err, errlen, "time zone: unknown zone %s", name);
        return TK_ENOENT;
    }
    snprintf((*out)->name, sizeof(*out)->name, "%s", name);
    return TK_OK;
}

void tk_tz_free(tk_tz *tz)
{
    if (!tz)
        return;
    free(tz->trans);
    free(tz->trans_off);
    free(tz);
}

const char *tk_tz_name(const tk_tz *tz)
{
    return tz->name;
}

int32_t tk_tz_offset(const tk_tz *tz, int64_t utc)
{
    size_t n = tz->ntrans;
    if (n == 0 || utc < tz->trans[0])
        return n == 0 && tz->posix.valid ? posix_offset(&tz->posix, utc) : tz->first_off;
    if (utc >= tz->trans[n - 1] && tz->posix.valid)
        return posix_offset(&tz->posix, utc);
    size_t lo = 0, hi = n; /* last i with trans[i] <= utc */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (tz->trans[mid] <= utc)
            lo = mid;
        else
            hi = mid;
    }
    return tz->trans_off[lo];
}

int tk_tz_local_to_utc(const tk_tz *tz, int64_t local, int64_t *first)
{
    int count = 0;
    int64_t sol[TZ_OFFS_MAX];
    for (size_t i = 0; i < tz->noffs; i++) {
        int64_t u = local - tz->offs[i];
        if (tk_tz_offset(tz, u) != tz->offs[i])
            continue;
        bool dup = false;
        for (int k = 0; k < count; k++)
            dup |= sol[k] == u;
        if (!dup)
            sol[count++] = u;
    }
    if (count == 0)
        return 0;
    int64_t best = sol[0];
    for (int k = 1; k < count; k++)
        if (sol[k] < best)
            best = sol[k];
    *first = best;
    return count;
}
