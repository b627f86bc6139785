/* Utopia's in-process extractors (the first byte picks the format), then the
 * chunker and the blocks protocol on what they produce: no crash, caps hold,
 * every block is valid UTF-8 without NUL, the protocol round-trips. */
#include <stdint.h>
#include <string.h>

#include "app/utopia/chunk.h"
#include "app/utopia/extract.h"

static void check_utf8(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] == 0)
            __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static const utopia_format fmts[] = {UTOPIA_FMT_TEXT, UTOPIA_FMT_MARKDOWN, UTOPIA_FMT_HTML,
                                         UTOPIA_FMT_CSV, UTOPIA_FMT_JSON};
    utopia_format f = fmts[data[0] % 5];
    utopia_blocks b;
    utopia_blocks_init(&b, 1 << 16);
    char err[256];
    tk_status st = utopia_extract(f, data + 1, size - 1, NULL, &b, err, sizeof err);
    if (st == TK_OK) {
        if (b.bytes > b.max_bytes)
            __builtin_trap();
        for (size_t i = 0; i < b.n; i++)
            check_utf8(b.v[i].text, b.v[i].len);
        tk_buf w;
        tk_buf_init(&w, 1 << 20);
        if (utopia_blocks_write(&b, &w) == TK_OK) {
            utopia_blocks b2;
            utopia_blocks_init(&b2, 1 << 17);
            if (utopia_blocks_parse(&b2, tk_buf_cstr(&w), w.len) != TK_OK || b2.n != b.n)
                __builtin_trap();
            utopia_blocks_free(&b2);
        }
        tk_buf_free(&w);
        utopia_chunks c = {0};
        utopia_chunk_blocks(&b, 64 + data[0], data[0] / 4, &c);
        for (size_t i = 0; i < c.n; i++)
            if (c.v[i].len > (size_t)(64 + data[0]) + 4)
                __builtin_trap();
        utopia_chunks_free(&c);
    }
    utopia_blocks_free(&b);
    /* and the protocol parser on raw input */
    utopia_blocks_init(&b, 1 << 16);
    (void)utopia_blocks_parse(&b, (const char *)data, size);
    utopia_blocks_free(&b);
    return 0;
}
