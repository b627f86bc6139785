#include "lib/tar.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define BLOCK 512

static const unsigned char zeros[BLOCK];

static tk_status write_all(tk_tar_writer *w, const void *data, size_t n)
{
    const char *p = data;
    while (n > 0) {
        ssize_t k = write(w->fd, p, n);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            if (!w->err)
                w->err = errno;
            return TK_ERROR;
        }
        p += k;
        n -= (size_t)k;
    }
    return TK_OK;
}

void tk_tar_writer_init(tk_tar_writer *w, int fd)
{
    memset(w, 0, sizeof *w);
    w->fd = fd;
}

/* an octal field of len bytes: digits, then NUL */
static void octal(unsigned char *f, size_t len, uint64_t v)
{
    f[len - 1] = '\0';
    for (size_t i = len - 1; i-- > 0;) {
        f[i] = (unsigned char)('0' + (v & 7));
        v >>= 3;
    }
}

/* a number field: octal when it fits, else GNU base-256 (big-endian, high
 * bit of the first byte set) */
static void number(unsigned char *f, size_t len, uint64_t v)
{
    if (v < (1ULL << (3 * (len - 1)))) {
        octal(f, len, v);
        return;
    }
    memset(f, 0, len);
    for (size_t i = len; i-- > 1 && v;) {
        f[i] = (unsigned char)(v & 0xff);
        v >>= 8;
    }
    f[0] = 0x80;
}

tk_status tk_tar_begin(tk_tar_writer *w, const char *name, uint64_t size, unsigned mode,
                       int64_t mtime)
{
    if (w->left)
        return TK_EINVAL;
    size_t n = strlen(name);
    if (n == 0 || n > TK_TAR_NAME_MAX)
        return TK_EINVAL;
    unsigned char h[BLOCK] = {0};
    if (n <= 100) {
        memcpy(h, name, n);
    } else {
        /* prefix (<= 155) '/' name (<= 100): split at the last fitting '/' */
        const char *cut = NULL;
        for (const char *s = name + n - 101; s < name + n; s++)
            if (*s == '/' && (size_t)(s - name) <= 155 && s > name) {
                cut = s;
                break;
            }
        if (!cut || n - (size_t)(cut - name) - 1 == 0)
            return TK_EINVAL;
        memcpy(h + 345, name, (size_t)(cut - name));
        memcpy(h, cut + 1, n - (size_t)(cut - name) - 1);
    }
    octal(h + 100, 8, mode & 07777);
    octal(h + 108, 8, 0);
    octal(h + 116, 8, 0);
    number(h + 124, 12, size);
    number(h + 136, 12, mtime < 0 ? 0 : (uint64_t)mtime);
    h[156] = '0';
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (size_t i = 0; i < BLOCK; i++)
        sum += h[i];
    octal(h + 148, 7, sum);
    h[155] = ' ';
    if (write_all(w, h, BLOCK) != TK_OK)
        return TK_ERROR;
    w->left = w->size = size;
    return TK_OK;
}

tk_status tk_tar_write(tk_tar_writer *w, const void *data, size_t n)
{
    if (n > w->left)
        return TK_EINVAL;
    w->left -= n;
    return write_all(w, data, n);
}

tk_status tk_tar_end(tk_tar_writer *w)
{
    if (w->left)
        return TK_EINVAL;
    size_t pad = (size_t)((BLOCK - w->size % BLOCK) % BLOCK);
    w->size = 0;
    return pad ? write_all(w, zeros, pad) : TK_OK;
}

tk_status tk_tar_finish(tk_tar_writer *w)
{
    if (w->left)
        return TK_EINVAL;
    if (write_all(w, zeros, BLOCK) != TK_OK)
        return TK_ERROR;
    return write_all(w, zeros, BLOCK);
}

void tk_tar_reader_init(tk_tar_reader *r, tk_tar_read_fn read, void *ud)
{
    memset(r, 0, sizeof *r);
    r->read = read;
    r->ud = ud;
}

/* exactly n bytes: 1, 0 at a clean end before any byte, -1 cut short or error */
static int read_exact(tk_tar_reader *r, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t k = r->read(r->ud, (char *)buf + got, n - got);
        if (k < 0) {
            snprintf(r->err, sizeof r->err, "cannot read the archive at byte %llu",
                     (unsigned long long)(r->offset + got));
            return -1;
        }
        if (k == 0) {
            if (got == 0)
                return 0;
            snprintf(r->err, sizeof r->err, "the archive is cut short at byte %llu",
                     (unsigned long long)(r->offset + got));
            return -1;
        }
        got += (size_t)k;
    }
    r->offset += n;
    return 1;
}

static int skip(tk_tar_reader *r, uint64_t n)
{
    unsigned char buf[4096];
    while (n > 0) {
        size_t k = n < sizeof buf ? (size_t)n : sizeof buf;
        if (read_exact(r, buf, k) != 1) {
            if (!r->err[0])
                snprintf(r->err, sizeof r->err, "the archive is cut short at byte %llu",
                         (unsigned long long)r->offset);
            return -1;
        }
        n -= k;
    }
    return 0;
}

/* a number field: octal (spaces before, NUL or space after) or base-256 */
static int parse_number(const unsigned char *f, size_t len, uint64_t *out)
{
    uint64_t v = 0;
    if (f[0] & 0x80) {
        if (f[0] != 0x80)
            return -1; /* negative, or more than 64 bits */
        for (size_t i = 1; i < len; i++) {
            if (v >> 56)
                return -1;
            v = v << 8 | f[i];
        }
        *out = v;
        return 0;
    }
    size_t i = 0;
    while (i < len && f[i] == ' ')
        i++;
    int digits = 0;
    for (; i < len && f[i] >= '0' && f[i] <= '7'; i++, digits++) {
        if (v >> 61)
            return -1;
        v = v << 3 | (uint64_t)(f[i] - '0');
    }
    for (; i < len; i++)
        if (f[i] != '\0' && f[i] != ' ')
            return -1;
    if (!digits)
        return -1;
    *out = v;
    return 0;
}

static size_t field_len(const unsigned char *f, size_t max)
{
    const unsigned char *z = memchr(f, 0, max);
    return z ? (size_t)(z - f) : max;
}

static tk_status bad(tk_tar_reader *r, uint64_t at, const char *what)
{
    snprintf(r->err, sizeof r->err, "not a valid archive: %s (header at byte %llu)", what,
             (unsigned long long)at);
    return TK_EINVAL;
}

tk_status tk_tar_next(tk_tar_reader *r, tk_tar_entry *e)
{
    if (skip(r, r->left + r->pad) < 0)
        return TK_EINVAL;
    r->left = r->pad = 0;
    unsigned char h[BLOCK];
    uint64_t at = r->offset;
    int got = read_exact(r, h, BLOCK);
    if (got < 0)
        return TK_EINVAL;
    if (got == 0)
        return bad(r, at, "it ends without its two end blocks");
    if (memcmp(h, zeros, BLOCK) == 0) {
        int g2 = read_exact(r, h, BLOCK);
        if (g2 != 1 || memcmp(h, zeros, BLOCK) != 0)
            return bad(r, at, "a zero block not followed by another");
        return TK_ENOENT;
    }
    uint64_t sum = 0, want;
    for (size_t i = 0; i < BLOCK; i++)
        sum += (i >= 148 && i < 156) ? ' ' : h[i];
    if (parse_number(h + 148, 8, &want) < 0 || want != sum)
        return bad(r, at, "a header checksum does not match");
    if (memcmp(h + 257, "ustar", 5) != 0)
        return bad(r, at, "not a ustar header");
    if (h[156] != '0' && h[156] != '\0')
        return bad(r, at, "an entry that is not a regular file");
    uint64_t size, mode, mtime;
    if (parse_number(h + 124, 12, &size) < 0 || parse_number(h + 100, 8, &mode) < 0 ||
        parse_number(h + 136, 12, &mtime) < 0)
        return bad(r, at, "a malformed size, mode or time");
    if (size > (1ULL << 62))
        return bad(r, at, "an entry larger than 4 EiB");
    size_t nl = field_len(h, 100), pl = field_len(h + 345, 155);
    if (nl == 0)
        return bad(r, at, "an entry without a name");
    size_t n = 0;
    if (pl) {
        memcpy(e->name, h + 345, pl);
        e->name[pl] = '/';
        n = pl + 1;
    }
    memcpy(e->name + n, h, nl);
    e->name[n + nl] = '\0';
    e->size = size;
    e->mode = (unsigned)(mode & 07777);
    e->mtime = (int64_t)(mtime > INT64_MAX ? INT64_MAX : mtime);
    r->left = size;
    r->pad = (BLOCK - size % BLOCK) % BLOCK;
    return TK_OK;
}

ssize_t tk_tar_read(tk_tar_reader *r, void *buf, size_t n)
{
    if (r->left == 0)
        return 0;
    if (n > r->left)
        n = (size_t)r->left;
    ssize_t k;
    do
        k = r->read(r->ud, buf, n);
    while (k < 0 && errno == EINTR);
    if (k <= 0) {
        snprintf(r->err, sizeof r->err, "the archive is cut short at byte %llu",
                 (unsigned long long)r->offset);
        return -1;
    }
    r->left -= (uint64_t)k;
    r->offset += (uint64_t)k;
    return k;
}

ssize_t tk_tar_read_fd(void *ud, void *buf, size_t n)
{
    int fd = *(int *)ud;
    ssize_t k;
    do
        k = read(fd, buf, n);
    while (k < 0 && errno == EINTR);
    return k;
}
