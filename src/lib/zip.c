/* The zip writer (see zip.h). */
#include "lib/zip.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

uint64_t tk_zip_zip64_at = 0xFFFFFFFFu;

/* What the central directory keeps of an entry. */
struct tk_zip_dirent {
    char *name;
    uint64_t hdr_off, usize, csize;
    uint32_t crc, dostime;
    int64_t mtime;
    uint16_t method;
    int zip64_local; /* its local header has a ZIP64 extra (sizes) */
};

#define SIG_LOCAL   0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_END     0x06054b50u
#define SIG_END64   0x06064b50u
#define SIG_LOC64   0x07064b50u
#define FLAG_UTF8   0x0800u
#define VERSION_20  20
#define VERSION_45  45 /* ZIP64 */
#define OUT_CHUNK   65536

static void put16(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static void put32(unsigned char *p, uint32_t v)
{
    put16(p, v & 0xFFFF);
    put16(p + 2, v >> 16);
}

static void put64(unsigned char *p, uint64_t v)
{
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

static tk_status fail(tk_zip_writer *w, int e)
{
    if (!w->err)
        w->err = e ? e : EIO;
    return TK_ERROR;
}

static tk_status out(tk_zip_writer *w, const void *p, size_t n)
{
    const unsigned char *b = p;
    while (n) {
        ssize_t k = write(w->fd, b, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return fail(w, k < 0 ? errno : EIO);
        b += k;
        n -= (size_t)k;
        w->off += (uint64_t)k;
    }
    return TK_OK;
}

static tk_status pout(tk_zip_writer *w, const void *p, size_t n, uint64_t at)
{
    const unsigned char *b = p;
    while (n) {
        ssize_t k = pwrite(w->fd, b, n, (off_t)at);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return fail(w, k < 0 ? errno : EIO);
        b += k;
        n -= (size_t)k;
        at += (uint64_t)k;
    }
    return TK_OK;
}

static uint32_t dos_time(int64_t t)
{
    if (t < 315532800) /* 1980-01-01, the format's first day */
        t = 315532800;
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    if (tm.tm_year > 207) /* 2107, its last year */
        return (127u << 25) | (12u << 21) | (31u << 16) | (23u << 11) | (59u << 5) | 29u;
    return ((uint32_t)(tm.tm_year - 80) << 25) | ((uint32_t)(tm.tm_mon + 1) << 21) |
           ((uint32_t)tm.tm_mday << 16) | ((uint32_t)tm.tm_hour << 11) |
           ((uint32_t)tm.tm_min << 5) | ((uint32_t)tm.tm_sec >> 1);
}

static int name_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > TK_ZIP_NAME_MAX || s[0] == '/' || s[n - 1] == '/' || strchr(s, '\\'))
        return 0;
    for (const char *p = s; *p;) { /* no "." or ".." component */
        size_t c = strcspn(p, "/");
        if (c == 0 || (c == 1 && p[0] == '.') || (c == 2 && p[0] == '.' && p[1] == '.'))
            return 0;
        p += c;
        if (*p)
            p++;
    }
    return 1;
}

void tk_zip_writer_init(tk_zip_writer *w, int fd)
{
    memset(w, 0, sizeof *w);
    w->fd = fd;
}

/* The local header (fixed part, name, extras) of e, sizes as known now. */
static size_t local_header(const tk_zip_dirent *e, unsigned char *h)
{
    size_t nl = strlen(e->name);
    put32(h, SIG_LOCAL);
    put16(h + 4, e->zip64_local ? VERSION_45 : VERSION_20);
    put16(h + 6, FLAG_UTF8);
    put16(h + 8, e->method);
    put32(h + 10, e->dostime);
    put32(h + 14, e->crc);
    put32(h + 18, e->zip64_local ? 0xFFFFFFFFu : (uint32_t)e->csize);
    put32(h + 22, e->zip64_local ? 0xFFFFFFFFu : (uint32_t)e->usize);
    put16(h + 26, (uint32_t)nl);
    size_t xl = 9 + (e->zip64_local ? 20 : 0);
    put16(h + 28, (uint32_t)xl);
    memcpy(h + 30, e->name, nl);
    unsigned char *x = h + 30 + nl;
    put16(x, 0x5455); /* extended timestamp: mtime */
    put16(x + 2, 5);
    x[4] = 1;
    put32(x + 5, (uint32_t)e->mtime);
    if (e->zip64_local) {
        put16(x + 9, 0x0001);
        put16(x + 11, 16);
        put64(x + 13, e->usize);
        put64(x + 21, e->csize);
    }
    return 30 + nl + xl;
}

tk_status tk_zip_begin(tk_zip_writer *w, const char *name, uint64_t size, int64_t mtime)
{
    if (w->open || !name_ok(name))
        return TK_EINVAL;
    if (w->err)
        return TK_ERROR;
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 32;
        tk_zip_dirent *d = realloc(w->dir, cap * sizeof *d);
        if (!d)
            return fail(w, ENOMEM);
        w->dir = d;
        w->cap = cap;
    }
    tk_zip_dirent *e = &w->dir[w->n];
    memset(e, 0, sizeof *e);
    e->name = strdup(name);
    if (!e->name)
        return fail(w, ENOMEM);
    e->hdr_off = w->off;
    e->usize = size;
    e->mtime = mtime < 0 ? 0 : mtime > 0xFFFFFFFFLL ? 0xFFFFFFFFLL : mtime;
    e->dostime = dos_time(mtime);
    e->crc = (uint32_t)crc32(0L, Z_NULL, 0);
    /* deflate what is small enough that even its worst deflated form stays
     * under the ZIP64 line; store the rest (its stored size is known now) */
    e->zip64_local = size >= tk_zip_zip64_at;
    e->method = size == 0 || compressBound((uLong)size) >= tk_zip_zip64_at ? 0 : 8;
    if (e->method == 0)
        e->csize = size;
    w->n++;
    unsigned char h[30 + TK_ZIP_NAME_MAX + 9 + 20];
    size_t hl = local_header(e, h);
    if (out(w, h, hl) != TK_OK)
        return TK_ERROR;
    w->deflating = 0;
    if (e->method == 8) {
        memset(&w->zs, 0, sizeof w->zs);
        if (deflateInit2(&w->zs, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
            return fail(w, ENOMEM);
        w->deflating = 1;
    }
    w->open = 1;
    w->left = size;
    return TK_OK;
}

/* Runs deflate over what zs holds (flush: Z_NO_FLUSH or Z_FINISH). */
static tk_status pump(tk_zip_writer *w, int flush)
{
    tk_zip_dirent *e = &w->dir[w->n - 1];
    unsigned char buf[OUT_CHUNK];
    for (;;) {
        w->zs.next_out = buf;
        w->zs.avail_out = sizeof buf;
        int rc = deflate(&w->zs, flush);
        if (rc == Z_STREAM_ERROR)
            return fail(w, EIO);
        size_t got = sizeof buf - w->zs.avail_out;
        if (got && out(w, buf, got) != TK_OK)
            return TK_ERROR;
        e->csize += got;
        if (flush == Z_FINISH ? rc == Z_STREAM_END : w->zs.avail_out != 0)
            return TK_OK;
    }
}

tk_status tk_zip_write(tk_zip_writer *w, const void *data, size_t n)
{
    if (!w->open || n > w->left)
        return TK_EINVAL;
    if (w->err)
        return TK_ERROR;
    tk_zip_dirent *e = &w->dir[w->n - 1];
    const unsigned char *p = data;
    size_t done = 0;
    while (done < n) { /* crc32 and zlib take uInt lengths */
        size_t k = n - done > (1u << 30) ? (1u << 30) : n - done;
        e->crc = (uint32_t)crc32(e->crc, p + done, (uInt)k);
        if (w->deflating) {
            w->zs.next_in = (Bytef *)(uintptr_t)(p + done);
            w->zs.avail_in = (uInt)k;
            if (pump(w, Z_NO_FLUSH) != TK_OK)
                return TK_ERROR;
        } else if (out(w, p + done, k) != TK_OK)
            return TK_ERROR;
        done += k;
    }
    w->left -= n;
    return TK_OK;
}

tk_status tk_zip_end(tk_zip_writer *w)
{
    if (!w->open || w->left)
        return TK_EINVAL;
    w->open = 0;
    tk_zip_dirent *e = &w->dir[w->n - 1];
    if (w->deflating) {
        w->zs.next_in = Z_NULL;
        w->zs.avail_in = 0;
        tk_status st = pump(w, Z_FINISH);
        deflateEnd(&w->zs);
        w->deflating = 0;
        if (st != TK_OK)
            return TK_ERROR;
    }
    if (w->err)
        return TK_ERROR;
    /* the CRC and sizes into the local header, where room was left for them */
    unsigned char h[30 + TK_ZIP_NAME_MAX + 9 + 20];
    size_t hl = local_header(e, h);
    return pout(w, h, hl, e->hdr_off);
}

tk_status tk_zip_finish(tk_zip_writer *w)
{
    if (w->open)
        return TK_EINVAL;
    if (w->err)
        return TK_ERROR;
    uint64_t cd_off = w->off;
    int any64 = 0;
    for (size_t i = 0; i < w->n; i++) {
        tk_zip_dirent *e = &w->dir[i];
        int bu = e->usize >= tk_zip_zip64_at, bc = e->csize >= tk_zip_zip64_at,
            bo = e->hdr_off >= tk_zip_zip64_at;
        size_t nl = strlen(e->name), x64 = (bu || bc || bo) ? 4 + 8 * (size_t)(bu + bc + bo) : 0;
        unsigned char h[46 + TK_ZIP_NAME_MAX + 9 + 28];
        put32(h, SIG_CENTRAL);
        put16(h + 4, (3u << 8) | (x64 ? VERSION_45 : VERSION_20)); /* made by: Unix */
        put16(h + 6, x64 || e->zip64_local ? VERSION_45 : VERSION_20);
        put16(h + 8, FLAG_UTF8);
        put16(h + 10, e->method);
        put32(h + 12, e->dostime);
        put32(h + 16, e->crc);
        put32(h + 20, bc ? 0xFFFFFFFFu : (uint32_t)e->csize);
        put32(h + 24, bu ? 0xFFFFFFFFu : (uint32_t)e->usize);
        put16(h + 28, (uint32_t)nl);
        put16(h + 30, (uint32_t)(9 + x64));
        put16(h + 32, 0);                /* comment */
        put16(h + 34, 0);                /* disk */
        put16(h + 36, 0);                /* internal attributes */
        put32(h + 38, (0100600u) << 16); /* a regular file, rw------- */
        put32(h + 42, bo ? 0xFFFFFFFFu : (uint32_t)e->hdr_off);
        memcpy(h + 46, e->name, nl);
        unsigned char *x = h + 46 + nl;
        put16(x, 0x5455);
        put16(x + 2, 5);
        x[4] = 1;
        put32(x + 5, (uint32_t)e->mtime);
        if (x64) {
            unsigned char *z = x + 9;
            put16(z, 0x0001);
            put16(z + 2, (uint32_t)(x64 - 4));
            z += 4;
            if (bu) {
                put64(z, e->usize);
                z += 8;
            }
            if (bc) {
                put64(z, e->csize);
                z += 8;
            }
            if (bo)
                put64(z, e->hdr_off);
            any64 = 1;
        }
        if (out(w, h, 46 + nl + 9 + x64) != TK_OK)
            return TK_ERROR;
    }
    uint64_t cd_size = w->off - cd_off;
    int z64 = any64 || w->n >= 0xFFFF || cd_off >= tk_zip_zip64_at || cd_size >= tk_zip_zip64_at;
    if (z64) {
        uint64_t end64_off = w->off;
        unsigned char r[56 + 20];
        put32(r, SIG_END64);
        put64(r + 4, 44); /* the record's size after this field */
        put16(r + 12, (3u << 8) | VERSION_45);
        put16(r + 14, VERSION_45);
        put32(r + 16, 0);
        put32(r + 20, 0);
        put64(r + 24, w->n);
        put64(r + 32, w->n);
        put64(r + 40, cd_size);
        put64(r + 48, cd_off);
        put32(r + 56, SIG_LOC64);
        put32(r + 60, 0);
        put64(r + 64, end64_off);
        put32(r + 72, 1);
        if (out(w, r, sizeof r) != TK_OK)
            return TK_ERROR;
    }
    unsigned char end[22];
    put32(end, SIG_END);
    put16(end + 4, 0);
    put16(end + 6, 0);
    put16(end + 8, z64 ? 0xFFFF : (uint32_t)w->n);
    put16(end + 10, z64 ? 0xFFFF : (uint32_t)w->n);
    put32(end + 12, z64 ? 0xFFFFFFFFu : (uint32_t)cd_size);
    put32(end + 16, z64 ? 0xFFFFFFFFu : (uint32_t)cd_off);
    put16(end + 20, 0);
    return out(w, end, sizeof end);
}

void tk_zip_writer_free(tk_zip_writer *w)
{
    if (w->deflating)
        deflateEnd(&w->zs);
    for (size_t i = 0; i < w->n; i++)
        free(w->dir[i].name);
    free(w->dir);
    w->dir = NULL;
    w->n = w->cap = 0;
    w->deflating = 0;
}
