/* The JSON body reader: size cap, nesting cap, duplicate keys, then the getters
 * handlers use on whatever came in; and tk_json_quote: any valid UTF-8 input,
 * quoted, parses back to exactly its bytes. */
#include <stdint.h>
#include <string.h>

#include "lib/json.h"
#include "lib/utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    if (tk_utf8_valid((const char *)data, size)) {
        tk_buf q;
        tk_buf_init(&q, size * 6 + 2);
        if (tk_json_quote(&q, (const char *)data, size) != TK_OK)
            __builtin_trap(); /* six bytes an input byte at most, and the quotes */
        json_t *s = json_loadb(q.data, q.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
        if (!s || json_string_length(s) != size || memcmp(json_string_value(s), data, size) != 0)
            __builtin_trap();
        json_decref(s);
        tk_buf_free(&q);
    }
    json_t *j = tk_json_parse((const char *)data, size, 1 << 16, err, sizeof err);
    if (!j) {
        if (err[0] == '\0')
            __builtin_trap(); /* a refusal always says why */
        return 0;
    }
    int64_t v;
    (void)tk_json_str(j, "content");
    (void)tk_json_int(j, "timeout", &v);
    (void)tk_json_bool_or(j, "background", 0);
    tk_buf b;
    tk_buf_init(&b, 1 << 20);
    if (tk_json_dump_buf(j, &b) == TK_OK) {
        /* what we serialise parses back */
        json_t *k = tk_json_parse(b.data, b.len, 1 << 21, err, sizeof err);
        if (!k)
            __builtin_trap();
        json_decref(k);
    }
    tk_buf_free(&b);
    json_decref(j);
    return 0;
}
