#include "lib/sse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int has_crlf(const char *s)
{
    return s && strpbrk(s, "\r\n") != NULL;
}

tk_status tk_sse_format(tk_buf *out, const char *id, const char *event, const char *data,
                        size_t len)
{
    size_t before = out->len;
    tk_status st = TK_OK;
    if (id && *id && !has_crlf(id))
        st = tk_buf_printf(out, "id: %s\n", id);
    if (st == TK_OK && event && *event && !has_crlf(event))
        st = tk_buf_printf(out, "event: %s\n", event);
    size_t start = 0;
    for (size_t i = 0; st == TK_OK && i <= len; i++) {
        if (i < len && data[i] != '\n' && data[i] != '\r')
            continue;
        st = tk_buf_append_str(out, "data: ");
        if (st == TK_OK)
            st = tk_buf_append(out, data + start, i - start);
        if (st == TK_OK)
            st = tk_buf_append_byte(out, '\n');
        if (i < len && data[i] == '\r' && i + 1 < len && data[i + 1] == '\n')
            i++;
        start = i + 1;
    }
    if (st == TK_OK)
        st = tk_buf_append_byte(out, '\n');
    if (st != TK_OK) {
        out->len = before;
        if (out->data)
            out->data[before] = '\0';
    }
    return st;
}

tk_status tk_sse_comment(tk_buf *out, const char *text)
{
    if (has_crlf(text))
        text = "";
    return tk_buf_printf(out, ": %s\n\n", text);
}

void tk_sse_parser_init(tk_sse_parser *p, size_t max_line, size_t max_event, tk_sse_cb cb, void *ud)
{
    memset(p, 0, sizeof *p);
    tk_buf_init(&p->line, max_line);
    tk_buf_init(&p->data, max_event);
    tk_buf_init(&p->event, 256);
    p->retry_ms = -1;
    p->cb = cb;
    p->ud = ud;
}

void tk_sse_parser_free(tk_sse_parser *p)
{
    tk_buf_free(&p->line);
    tk_buf_free(&p->data);
    tk_buf_free(&p->event);
}

static int dispatch(tk_sse_parser *p)
{
    int stop = 0;
    if (p->has_data) {
        tk_sse_event ev = {
            .event = p->event.len ? tk_buf_cstr(&p->event) : "message",
            .data = tk_buf_cstr(&p->data),
            .data_len = p->data.len,
            .id = p->last_id,
            .retry_ms = p->retry_ms,
        };
        stop = p->cb(&ev, p->ud);
    }
    tk_buf_reset(&p->data);
    tk_buf_reset(&p->event);
    p->has_data = 0;
    p->retry_ms = -1;
    return stop;
}

static tk_status process_line(tk_sse_parser *p, int *stop)
{
    const char *l = tk_buf_cstr(&p->line);
    size_t n = p->line.len;
    if (n == 0) {
        *stop = dispatch(p);
        return TK_OK;
    }
    if (l[0] == ':')
        return TK_OK;
    if (l[0] == '{') {
        /* OpenSandbox execd: a bare JSON object is the event's data. */
        if (p->has_data && tk_buf_append_byte(&p->data, '\n') != TK_OK)
            return TK_ETOOBIG;
        if (tk_buf_append(&p->data, l, n) != TK_OK)
            return TK_ETOOBIG;
        p->has_data = 1;
        return TK_OK;
    }
    const char *colon = memchr(l, ':', n);
    size_t flen = colon ? (size_t)(colon - l) : n;
    const char *val = colon ? colon + 1 : l + n;
    size_t vlen = colon ? n - flen - 1 : 0;
    if (vlen && *val == ' ') {
        val++;
        vlen--;
    }
    if (flen == 4 && memcmp(l, "data", 4) == 0) {
        if (p->has_data && tk_buf_append_byte(&p->data, '\n') != TK_OK)
            return TK_ETOOBIG;
        if (tk_buf_append(&p->data, val, vlen) != TK_OK)
            return TK_ETOOBIG;
        p->has_data = 1;
    } else if (flen == 5 && memcmp(l, "event", 5) == 0) {
        tk_buf_reset(&p->event);
        if (tk_buf_append(&p->event, val, vlen) != TK_OK)
            return TK_ETOOBIG;
    } else if (flen == 2 && memcmp(l, "id", 2) == 0) {
        if (!memchr(val, '\0', vlen) && vlen < sizeof p->last_id) {
            memcpy(p->last_id, val, vlen);
            p->last_id[vlen] = '\0';
        }
    } else if (flen == 5 && memcmp(l, "retry", 5) == 0) {
        long v = 0;
        size_t i = 0;
        for (; i < vlen && val[i] >= '0' && val[i] <= '9' && v < 100000000; i++)
            v = v * 10 + (val[i] - '0');
        if (i == vlen && vlen > 0)
            p->retry_ms = v;
    }
    return TK_OK;
}

tk_status tk_sse_feed(tk_sse_parser *p, const char *buf, size_t n)
{
    size_t i = 0;
    if (!p->bom_checked && n > 0) {
        /* A UTF-8 BOM at the very start is ignored. */
        if (n >= 3 && (unsigned char)buf[0] == 0xEF && (unsigned char)buf[1] == 0xBB &&
            (unsigned char)buf[2] == 0xBF)
            i = 3;
        p->bom_checked = 1;
    }
    for (; i < n; i++) {
        char c = buf[i];
        if (c == '\n' && p->saw_cr) {
            p->saw_cr = 0;
            continue;
        }
        p->saw_cr = 0;
        if (c == '\r' || c == '\n') {
            p->saw_cr = c == '\r';
            int stop = 0;
            tk_status st = process_line(p, &stop);
            tk_buf_reset(&p->line);
            if (st != TK_OK)
                return st;
            if (stop)
                return TK_AGAIN;
            continue;
        }
        if (tk_buf_append_byte(&p->line, c) != TK_OK)
            return TK_ETOOBIG;
    }
    return TK_OK;
}

void tk_sse_finish(tk_sse_parser *p)
{
    tk_buf_reset(&p->line);
    tk_buf_reset(&p->data);
    p->has_data = 0;
}
