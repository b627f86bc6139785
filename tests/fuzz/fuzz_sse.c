/* The SSE parser, fed arbitrary bytes in arbitrary chunks. */
#include <stdint.h>
#include <string.h>

#include "lib/sse.h"

static int on_event(const tk_sse_event *e, void *ud)
{
    size_t *n = ud;
    /* the event's data is NUL-terminated at data_len and within the cap */
    if (e->data[e->data_len] != '\0' || e->data_len > 4096)
        __builtin_trap();
    (*n)++;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t n = 0;
    tk_sse_parser p;
    tk_sse_parser_init(&p, 512, 4096, on_event, &n);
    /* first byte chooses the chunk size, so chunk boundaries are fuzzed too */
    size_t chunk = size ? (size_t)(data[0] % 17) + 1 : 1;
    for (size_t i = size ? 1 : 0; i < size; i += chunk) {
        size_t len = size - i < chunk ? size - i : chunk;
        if (tk_sse_feed(&p, (const char *)data + i, len) != TK_OK)
            break;
    }
    tk_sse_finish(&p);
    tk_sse_parser_free(&p);
    /* formatting any bytes must parse back to exactly one event */
    tk_buf b;
    tk_buf_init(&b, size * 8 + 64);
    if (tk_sse_format(&b, "1", "e", (const char *)data, size) == TK_OK) {
        size_t m = 0;
        tk_sse_parser_init(&p, size + 64, size + 64, on_event, &m);
        if (memchr(data, '\0', size) == NULL && size <= 4096) {
            tk_sse_feed(&p, b.data, b.len);
            if (m != 1)
                __builtin_trap();
        }
        tk_sse_parser_free(&p);
    }
    tk_buf_free(&b);
    return 0;
}
