/* browserd's CDP reader and message checks, fed arbitrary bytes in arbitrary
 * chunks: every message handed on is within the cap, NUL-terminated, and what
 * parses has a consistent shape. */
#include <stdint.h>
#include <string.h>

#include "browserd/cdp.h"

static int on_msg(const char *m, size_t len, void *ud)
{
    size_t *n = ud;
    if (len > 256 || m[len] != '\0' || memchr(m, '\0', len))
        __builtin_trap();
    brd_cdp_msg msg;
    char err[128];
    if (brd_cdp_msg_parse(m, len, &msg, err, sizeof err) == 0) {
        if (msg.id < 0 || (msg.id == 0 && !msg.method) || (msg.id > 0 && !msg.result && !msg.error))
            __builtin_trap();
        json_decref(msg.root);
    }
    (*n)++;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t n = 0;
    brd_cdp_reader r;
    brd_cdp_reader_init(&r, 256);
    size_t chunk = size ? (size_t)(data[0] % 23) + 1 : 1;
    for (size_t i = size ? 1 : 0; i < size; i += chunk) {
        size_t len = size - i < chunk ? size - i : chunk;
        brd_cdp_reader_feed(&r, (const char *)data + i, len, on_msg, &n);
    }
    if (r.buf.len > 256)
        __builtin_trap();
    brd_cdp_reader_free(&r);
    return 0;
}
