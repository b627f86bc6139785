/* The JSON body reader: size cap, nesting cap, duplicate keys, then the getters
 * handlers use on whatever came in. */
#include <stdint.h>
#include <string.h>

#include "lib/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
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
