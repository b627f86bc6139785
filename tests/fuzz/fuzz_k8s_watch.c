/* A Kubernetes watch stream (what the API server, or anything on its address,
 * sends sandboxd), from arbitrary bytes fed in arbitrary chunks: every event
 * handed on has a type and an object, no line past the cap is parsed, and the
 * same bytes in one chunk or in pieces give the same events. */
#include <stdint.h>
#include <string.h>

#include "sandboxd/k8s.h"

typedef struct {
    size_t n;
    uint64_t hash;
} seen;

static int on_event(const char *type, json_t *obj, void *ud)
{
    seen *s = ud;
    if (!type || !json_is_object(obj))
        __builtin_trap();
    s->n++;
    for (const char *p = type; *p; p++)
        s->hash = s->hash * 131 + (unsigned char)*p;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    seen a = {0}, b = {0};
    sbx_k8s_watch_parser p;
    sbx_k8s_watch_parser_init(&p, 4096, on_event, &a);
    sbx_k8s_watch_parser_feed(&p, (const char *)data, size);
    sbx_k8s_watch_parser_free(&p);
    sbx_k8s_watch_parser_init(&p, 4096, on_event, &b);
    size_t step = size ? (size_t)data[0] % 17 + 1 : 1;
    for (size_t i = 0; i < size; i += step)
        sbx_k8s_watch_parser_feed(&p, (const char *)data + i, size - i < step ? size - i : step);
    sbx_k8s_watch_parser_free(&p);
    if (a.n != b.n || a.hash != b.hash)
        __builtin_trap();
    return 0;
}
