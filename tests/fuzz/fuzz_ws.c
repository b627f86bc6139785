/* lib/ws's frame reader fed arbitrary bytes in arbitrary chunks, as a server
 * and as a client: every message handed on is within the caps, text is valid
 * UTF-8, control frames are at most 125 bytes, the buffer stays within a frame
 * and its header, and a refusal is one of the close codes. Then a frame made
 * by tk_ws_header from the input reads back as the same message. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/utf8.h"
#include "lib/ws.h"

#define MAX_FRAME 300
#define MAX_MSG   700

static int on_msg(void *ud, int op, const char *d, size_t len)
{
    (void)ud;
    if (len > MAX_MSG || (op >= 0x8 && len > 125) || (op == TK_WS_TEXT && !tk_utf8_valid(d, len)))
        __builtin_trap();
    if (op != TK_WS_TEXT && op != TK_WS_BINARY && op != TK_WS_CLOSE && op != TK_WS_PING &&
        op != TK_WS_PONG)
        __builtin_trap();
    return 0;
}

struct back {
    const uint8_t *want;
    size_t len;
    int seen;
};

static int check_back(void *ud, int op, const char *d, size_t len)
{
    struct back *b = ud;
    if (op != TK_WS_BINARY || len != b->len || (len && memcmp(d, b->want, len) != 0))
        __builtin_trap();
    b->seen++;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (int server = 0; server < 2; server++) {
        tk_ws_reader r;
        tk_ws_reader_init(&r, server, MAX_FRAME, MAX_MSG);
        size_t chunk = size ? (size_t)(data[0] % 31) + 1 : 1;
        for (size_t i = size ? 1 : 0; i < size; i += chunk) {
            size_t len = size - i < chunk ? size - i : chunk;
            int rc = tk_ws_reader_feed(&r, data + i, len, on_msg, NULL);
            if (rc && rc != TK_WS_CLOSE_PROTOCOL && rc != TK_WS_CLOSE_INVALID_DATA &&
                rc != TK_WS_CLOSE_TOO_BIG)
                __builtin_trap();
            if (r.in.len > MAX_FRAME + TK_WS_MAX_HEADER || r.msg.len > MAX_MSG)
                __builtin_trap();
            if (rc)
                break;
        }
        tk_ws_reader_free(&r);
    }
    /* round trip: the input as one masked binary frame, then in two fragments */
    size_t n = size > MAX_FRAME ? MAX_FRAME : size;
    unsigned char *f = malloc(2 * TK_WS_MAX_HEADER + n + 1);
    const unsigned char key[4] = {0x11, 0x22, 0x33, size ? data[0] : 0x44};
    size_t h = tk_ws_header(f, 1, TK_WS_BINARY, n, key);
    memcpy(f + h, data, n);
    tk_ws_mask(f + h, n, key, 0);
    struct back b = {.want = data, .len = n};
    tk_ws_reader r;
    tk_ws_reader_init(&r, 1, MAX_FRAME, MAX_MSG);
    if (tk_ws_reader_feed(&r, f, h + n, check_back, &b) != 0 || b.seen != 1)
        __builtin_trap();
    tk_ws_reader_free(&r);
    size_t half = n / 2;
    size_t h1 = tk_ws_header(f, 0, TK_WS_BINARY, half, NULL);
    memcpy(f + h1, data, half);
    size_t h2 = tk_ws_header(f + h1 + half, 1, TK_WS_CONT, n - half, NULL);
    memcpy(f + h1 + half + h2, data + half, n - half);
    b.seen = 0;
    tk_ws_reader_init(&r, 0, MAX_FRAME, MAX_MSG);
    if (tk_ws_reader_feed(&r, f, h1 + half + h2 + n - half, check_back, &b) != 0 || b.seen != 1)
        __builtin_trap();
    tk_ws_reader_free(&r);
    free(f);
    return 0;
}
