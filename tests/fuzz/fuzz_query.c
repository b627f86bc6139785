/* Request-target parsing: path segments, query strings, percent-decoding. */
#include <stdint.h>
#include <string.h>

#include "lib/query.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tk_arena *a = tk_arena_new(1 << 20);
    const char *s = (const char *)data;
    const char *q = memchr(s, '?', size);
    size_t plen = q ? (size_t)(q - s) : size;
    char **segs;
    size_t nsegs;
    if (tk_path_split(a, s, plen, &segs, &nsegs) == TK_OK) {
        for (size_t i = 0; i < nsegs; i++) {
            /* decoded segments never contain NUL and never are empty */
            if (segs[i][0] == '\0')
                __builtin_trap();
            /* encoding then decoding returns the segment */
            char *enc = tk_percent_encode(a, segs[i]);
            char *dec;
            if (tk_percent_decode(a, enc, strlen(enc), 0, &dec, NULL) != TK_OK ||
                strcmp(dec, segs[i]) != 0)
                __builtin_trap();
            /* into a buffer: without keep the same bytes; keeping '/' it still
             * decodes back; one byte of cap too few refuses and appends nothing */
            tk_buf b, k, tight;
            tk_buf_init(&b, 3 * strlen(segs[i]));
            tk_buf_init(&k, 3 * strlen(segs[i]));
            if (tk_percent_append(&b, segs[i], NULL) != TK_OK || strcmp(b.data, enc) != 0 ||
                tk_percent_append(&k, segs[i], "/") != TK_OK ||
                tk_percent_decode(a, k.data, k.len, 0, &dec, NULL) != TK_OK ||
                strcmp(dec, segs[i]) != 0)
                __builtin_trap();
            tk_buf_init(&tight, b.len - 1);
            if (tk_percent_append(&tight, segs[i], NULL) != TK_ETOOBIG || tight.len != 0)
                __builtin_trap();
            tk_buf_free(&b);
            tk_buf_free(&k);
            tk_buf_free(&tight);
        }
        if (segs[nsegs] != NULL)
            __builtin_trap();
    }
    if (q) {
        tk_kv *kv;
        size_t n;
        if (tk_query_parse(a, q + 1, size - plen - 1, TK_QUERY_MAX_ITEMS, &kv, &n) == TK_OK) {
            if (n > TK_QUERY_MAX_ITEMS)
                __builtin_trap();
            for (size_t i = 0; i < n; i++)
                if (!kv[i].name || !kv[i].value)
                    __builtin_trap();
        }
    }
    tk_arena_free(a);
    return 0;
}
