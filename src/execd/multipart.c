#include "execd/multipart.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

enum { S_PREAMBLE, S_AFTER_DELIM, S_HEADERS, S_BODY, S_END, S_ERROR };

#define LOOKAHEAD (EXECD_MP_HEADER_MAX + 2 * (EXECD_MP_BOUNDARY_MAX + 5) + 128)

static int bchar(char c)
{
    /* RFC 2046 bchars */
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           strchr("'()+_,-./:=? ", c) != NULL;
}

tk_status execd_mp_boundary(const char *ct, char *out, size_t outlen)
{
    if (!ct || strncasecmp(ct, "multipart/form-data", 19) != 0)
        return TK_EINVAL;
    const char *p = ct + 19;
    while (*p) {
        while (*p == ';' || *p == ' ' || *p == '\t')
            p++;
        const char *k = p;
        while (*p && *p != '=' && *p != ';')
            p++;
        size_t kl = (size_t)(p - k);
        while (kl && (k[kl - 1] == ' ' || k[kl - 1] == '\t'))
            kl--;
        if (*p != '=') {
            continue;
        }
        p++;
        char val[EXECD_MP_BOUNDARY_MAX + 2];
        size_t vl = 0;
        if (*p == '"') {
            p++;
            while (*p && *p != '"') {
                if (*p == '\\' && p[1])
                    p++;
                if (vl >= EXECD_MP_BOUNDARY_MAX)
                    return TK_EINVAL;
                val[vl++] = *p++;
            }
            if (*p != '"')
                return TK_EINVAL;
            p++;
        } else {
            while (*p && *p != ';' && *p != ' ' && *p != '\t') {
                if (vl >= EXECD_MP_BOUNDARY_MAX)
                    return TK_EINVAL;
                val[vl++] = *p++;
            }
        }
        val[vl] = '\0';
        if (kl == 8 && strncasecmp(k, "boundary", 8) == 0) {
            if (vl == 0 || vl + 1 > outlen || val[vl - 1] == ' ')
                return TK_EINVAL;
            for (size_t i = 0; i < vl; i++)
                if (!bchar(val[i]))
                    return TK_EINVAL;
            memcpy(out, val, vl + 1);
            return TK_OK;
        }
    }
    return TK_EINVAL;
}

void execd_mp_init(execd_mp *m, const char *boundary, const execd_mp_cb *cb, void *ud)
{
    memset(m, 0, sizeof *m);
    size_t bl = strlen(boundary);
    if (bl > EXECD_MP_BOUNDARY_MAX)
        bl = EXECD_MP_BOUNDARY_MAX;
    memcpy(m->delim, "\r\n--", 4);
    memcpy(m->delim + 4, boundary, bl);
    m->dlen = 4 + bl;
    m->delim[m->dlen] = '\0';
    tk_buf_init(&m->buf, LOOKAHEAD);
    /* A virtual CRLF, so that a boundary at the very start is a delimiter too. */
    tk_buf_append(&m->buf, "\r\n", 2);
    m->state = S_PREAMBLE;
    m->cb = *cb;
    m->ud = ud;
}

void execd_mp_free(execd_mp *m)
{
    tk_buf_free(&m->buf);
}

static tk_status fail(execd_mp *m, tk_status st, char *err, size_t errlen, const char *msg)
{
    if (msg)
        snprintf(err, errlen, "%s", msg);
    else if (!err[0])
        snprintf(err, errlen, "the upload was refused");
    m->state = S_ERROR;
    return st;
}

/* Copies a header parameter value (token or quoted-string) into out. */
static int param(const char *v, size_t vl, const char *key, char *out, size_t outlen)
{
    size_t kl = strlen(key);
    size_t i = 0;
    while (i < vl) {
        while (i < vl && (v[i] == ';' || v[i] == ' ' || v[i] == '\t'))
            i++;
        size_t ks = i;
        while (i < vl && v[i] != '=' && v[i] != ';')
            i++;
        size_t kle = i;
        while (kle > ks && (v[kle - 1] == ' ' || v[kle - 1] == '\t'))
            kle--;
        if (i >= vl || v[i] != '=')
            continue;
        i++;
        while (i < vl && (v[i] == ' ' || v[i] == '\t'))
            i++;
        char tmp[512];
        size_t tl = 0;
        if (i < vl && v[i] == '"') {
            i++;
            while (i < vl && v[i] != '"') {
                if (v[i] == '\\' && i + 1 < vl)
                    i++;
                if (tl + 1 >= sizeof tmp)
                    return -1;
                tmp[tl++] = v[i++];
            }
            if (i >= vl)
                return -1;
            i++;
        } else {
            while (i < vl && v[i] != ';' && v[i] != ' ' && v[i] != '\t') {
                if (tl + 1 >= sizeof tmp)
                    return -1;
                tmp[tl++] = v[i++];
            }
        }
        tmp[tl] = '\0';
        if (kle - ks == kl && strncasecmp(v + ks, key, kl) == 0) {
            if (tl + 1 > outlen || memchr(tmp, '\0', tl))
                return -1;
            memcpy(out, tmp, tl + 1);
            return 1;
        }
    }
    return 0;
}

static tk_status parse_headers(const char *h, size_t len, execd_mp_part *p, char *err,
                               size_t errlen)
{
    memset(p, 0, sizeof *p);
    int disposition = 0;
    size_t i = 0;
    while (i < len) {
        const char *line = h + i;
        const char *e = memmem(line, len - i, "\r\n", 2);
        size_t ll = e ? (size_t)(e - line) : len - i;
        i += ll + (e ? 2 : 0);
        const char *colon = memchr(line, ':', ll);
        if (!colon) {
            snprintf(err, errlen, "malformed part header line");
            return TK_EINVAL;
        }
        size_t nl = (size_t)(colon - line);
        const char *v = colon + 1;
        size_t vl = ll - nl - 1;
        while (vl && (*v == ' ' || *v == '\t'))
            v++, vl--;
        while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
            vl--;
        if (nl == 19 && strncasecmp(line, "Content-Disposition", 19) == 0) {
            if (vl < 9 || strncasecmp(v, "form-data", 9) != 0) {
                snprintf(err, errlen, "a part's Content-Disposition is not form-data");
                return TK_EINVAL;
            }
            disposition = 1;
            if (param(v + 9, vl - 9, "name", p->name, sizeof p->name) < 0 ||
                param(v + 9, vl - 9, "filename", p->filename, sizeof p->filename) < 0) {
                snprintf(err, errlen, "a part's name or filename is malformed or too long");
                return TK_EINVAL;
            }
        } else if (nl == 12 && strncasecmp(line, "Content-Type", 12) == 0) {
            if (vl >= sizeof p->content_type) {
                snprintf(err, errlen, "a part's Content-Type is too long");
                return TK_EINVAL;
            }
            memcpy(p->content_type, v, vl);
            p->content_type[vl] = '\0';
        }
    }
    if (!disposition) {
        snprintf(err, errlen, "a part has no Content-Disposition header");
        return TK_EINVAL;
    }
    return TK_OK;
}

static tk_status run(execd_mp *m, char *err, size_t errlen)
{
    tk_buf *b = &m->buf;
    for (;;) {
        switch (m->state) {
        case S_PREAMBLE:
        case S_BODY: {
            char *hit = b->len >= m->dlen ? memmem(b->data, b->len, m->delim, m->dlen) : NULL;
            if (hit) {
                size_t pre = (size_t)(hit - b->data);
                if (m->state == S_BODY) {
                    if (pre && m->cb.data(m->ud, b->data, pre, err, errlen))
                        return fail(m, TK_EDENIED, err, errlen, NULL);
                    m->in_part = 0;
                    if (m->cb.end(m->ud, err, errlen))
                        return fail(m, TK_EDENIED, err, errlen, NULL);
                }
                tk_buf_consume(b, pre + m->dlen);
                m->state = S_AFTER_DELIM;
                continue;
            }
            size_t keep = m->dlen - 1;
            if (b->len > keep) {
                size_t n = b->len - keep;
                if (m->state == S_BODY && m->cb.data(m->ud, b->data, n, err, errlen))
                    return fail(m, TK_EDENIED, err, errlen, NULL);
                tk_buf_consume(b, n);
            }
            return TK_OK;
        }
        case S_AFTER_DELIM: {
            if (b->len < 2)
                return TK_OK;
            if (b->data[0] == '-' && b->data[1] == '-') {
                m->state = S_END;
                continue;
            }
            size_t i = 0;
            while (i < b->len && (b->data[i] == ' ' || b->data[i] == '\t'))
                i++;
            if (i > 64)
                return fail(m, TK_EINVAL, err, errlen, "too much padding after a boundary");
            if (i + 2 > b->len)
                return TK_OK;
            if (b->data[i] != '\r' || b->data[i + 1] != '\n')
                return fail(m, TK_EINVAL, err, errlen, "a boundary is not followed by CRLF");
            tk_buf_consume(b, i + 2);
            if (++m->parts > EXECD_MP_PARTS_MAX)
                return fail(m, TK_EINVAL, err, errlen, "too many parts in the multipart body");
            m->state = S_HEADERS;
            continue;
        }
        case S_HEADERS: {
            size_t hl;
            size_t skip;
            if (b->len >= 2 && b->data[0] == '\r' && b->data[1] == '\n') {
                hl = 0;
                skip = 2;
            } else {
                char *e = b->len >= 4 ? memmem(b->data, b->len, "\r\n\r\n", 4) : NULL;
                if (!e) {
                    if (b->len > EXECD_MP_HEADER_MAX)
                        return fail(m, TK_EINVAL, err, errlen,
                                    "a part's headers are larger than 8192 bytes");
                    return TK_OK;
                }
                hl = (size_t)(e - b->data);
                skip = hl + 4;
                if (hl > EXECD_MP_HEADER_MAX)
                    return fail(m, TK_EINVAL, err, errlen,
                                "a part's headers are larger than 8192 bytes");
            }
            execd_mp_part p;
            if (parse_headers(b->data, hl, &p, err, errlen) != TK_OK)
                return fail(m, TK_EINVAL, err, errlen, NULL);
            tk_buf_consume(b, skip);
            m->in_part = 1;
            if (m->cb.begin(m->ud, &p, err, errlen))
                return fail(m, TK_EDENIED, err, errlen, NULL);
            /* The body may be empty: the delimiter can follow at once, and the
             * CRLF that begins it is already at the head of the buffer. */
            m->state = S_BODY;
            continue;
        }
        case S_END:
            tk_buf_reset(b); /* the epilogue is ignored */
            return TK_OK;
        default:
            return TK_EINVAL;
        }
    }
}

tk_status execd_mp_feed(execd_mp *m, const char *d, size_t n, char *err, size_t errlen)
{
    if (errlen)
        err[0] = '\0';
    if (m->state == S_ERROR) {
        snprintf(err, errlen, "the multipart body was already refused");
        return TK_EINVAL;
    }
    while (n > 0) {
        if (m->state == S_END)
            return TK_OK;
        size_t room = LOOKAHEAD - m->buf.len;
        if (room == 0)
            return fail(m, TK_EINVAL, err, errlen, "multipart parser overflow");
        size_t take = n < room ? n : room;
        tk_buf_append(&m->buf, d, take);
        d += take;
        n -= take;
        tk_status st = run(m, err, errlen);
        if (st != TK_OK)
            return st;
    }
    return TK_OK;
}

tk_status execd_mp_finish(execd_mp *m, char *err, size_t errlen)
{
    if (m->state == S_END)
        return TK_OK;
    if (m->state != S_ERROR)
        fail(m, TK_EINVAL, err, errlen,
             m->parts == 0 ? "no multipart boundary found in the body"
                           : "the body ended before the closing multipart boundary");
    return TK_EINVAL;
}
