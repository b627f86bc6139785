/* The streaming multipart/form-data parser, fed arbitrary bodies in arbitrary
 * chunks with an arbitrary boundary; and the Content-Type boundary parser. */
#include <stdint.h>
#include <string.h>

#include "execd/multipart.h"

struct st {
    int in_part;
    size_t parts, bytes, max;
};

static int on_begin(void *ud, const execd_mp_part *p, char *err, size_t errlen)
{
    struct st *s = ud;
    if (s->in_part)
        __builtin_trap(); /* begin twice without end */
    if (strnlen(p->name, sizeof p->name) == sizeof p->name ||
        strnlen(p->filename, sizeof p->filename) == sizeof p->filename ||
        strnlen(p->content_type, sizeof p->content_type) == sizeof p->content_type)
        __builtin_trap();
    s->in_part = 1;
    s->parts++;
    /* refuse some parts, so the refusal paths run too */
    return p->name[0] == '!' ? 1 : 0;
}

static int on_data(void *ud, const char *d, size_t n, char *err, size_t errlen)
{
    struct st *s = ud;
    if (!s->in_part || n == 0)
        __builtin_trap(); /* data outside a part, or an empty chunk */
    s->bytes += n;
    if (s->bytes > s->max)
        __builtin_trap(); /* more data than the body had */
    (void)d;
    return 0;
}

static int on_end(void *ud, char *err, size_t errlen)
{
    struct st *s = ud;
    if (!s->in_part)
        __builtin_trap();
    s->in_part = 0;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    /* byte 0: boundary length (1..70); byte 1: chunk size */
    size_t bl = (size_t)(data[0] % EXECD_MP_BOUNDARY_MAX) + 1;
    size_t chunk = (size_t)(data[1] % 31) + 1;
    data += 2;
    size -= 2;
    if (bl > size)
        bl = size;
    char boundary[EXECD_MP_BOUNDARY_MAX + 1];
    memcpy(boundary, data, bl);
    boundary[bl] = '\0';
    if (strlen(boundary) == 0)
        return 0;
    data += bl;
    size -= bl;

    /* the same bytes as a Content-Type header */
    char ct[256], b2[EXECD_MP_BOUNDARY_MAX + 1];
    size_t cl = size < sizeof ct - 1 ? size : sizeof ct - 1;
    memcpy(ct, data, cl);
    ct[cl] = '\0';
    if (execd_mp_boundary(ct, b2, sizeof b2) == TK_OK && (strlen(b2) == 0 || strlen(b2) > 70))
        __builtin_trap();

    struct st s = {0, 0, 0, size};
    execd_mp_cb cb = {on_begin, on_data, on_end};
    execd_mp m;
    execd_mp_init(&m, boundary, &cb, &s);
    char err[256];
    tk_status st = TK_OK;
    for (size_t i = 0; i < size && st == TK_OK; i += chunk) {
        size_t n = size - i < chunk ? size - i : chunk;
        st = execd_mp_feed(&m, (const char *)data + i, n, err, sizeof err);
    }
    if (st == TK_OK && execd_mp_finish(&m, err, sizeof err) == TK_OK && s.in_part)
        __builtin_trap(); /* finished cleanly inside a part */
    if (m.buf.len > m.buf.max)
        __builtin_trap();
    execd_mp_free(&m);
    return 0;
}
