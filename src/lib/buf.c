#include "lib/buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tk_buf_init(tk_buf *b, size_t max)
{
    b->data = NULL;
    b->len = 0;
    b->size = 0;
    b->max = max;
}

void tk_buf_free(tk_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->size = 0;
}

void tk_buf_reset(tk_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

tk_status tk_buf_reserve(tk_buf *b, size_t n)
{
    if (n > b->max || b->len > b->max - n)
        return TK_ETOOBIG;
    size_t need = b->len + n + 1;
    if (need <= b->size)
        return TK_OK;
    size_t sz = b->size ? b->size : 64;
    while (sz < need)
        sz = sz > SIZE_MAX / 2 ? need : sz * 2;
    if (sz > b->max + 1)
        sz = b->max + 1;
    if (sz < need)
        sz = need;
    b->data = tk_realloc(b->data, sz);
    b->size = sz;
    return TK_OK;
}

tk_status tk_buf_append(tk_buf *b, const void *p, size_t n)
{
    tk_status st = tk_buf_reserve(b, n);
    if (st != TK_OK)
        return st;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return TK_OK;
}

tk_status tk_buf_append_str(tk_buf *b, const char *s)
{
    return tk_buf_append(b, s, strlen(s));
}

tk_status tk_buf_append_byte(tk_buf *b, char c)
{
    return tk_buf_append(b, &c, 1);
}

tk_status tk_buf_vprintf(tk_buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return TK_EINVAL;
    if ((size_t)n < sizeof small)
        return tk_buf_append(b, small, (size_t)n);
    tk_status st = tk_buf_reserve(b, (size_t)n);
    if (st != TK_OK)
        return st;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return TK_OK;
}

tk_status tk_buf_printf(tk_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tk_status st = tk_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return st;
}

void tk_buf_consume(tk_buf *b, size_t n)
{
    TK_ASSERT(n <= b->len);
    if (n == 0)
        return;
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = '\0';
}

char *tk_buf_steal(tk_buf *b, size_t *len)
{
    char *p = b->data ? b->data : tk_strdup("");
    if (len)
        *len = b->len;
    b->data = NULL;
    b->len = b->size = 0;
    return p;
}

const char *tk_buf_cstr(const tk_buf *b)
{
    return b->data ? b->data : "";
}
