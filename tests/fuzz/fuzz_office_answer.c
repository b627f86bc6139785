/* The office helper's output as a sandbox may print it (the sandbox is the
 * user's, so anything): no crash; an answer is an object whose pages keep a
 * picture only when it is PNG or JPEG; the preview text of any answer is a
 * string. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "app/tools/office.h"
#include "lib/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char msg[256];
    json_t *v = tools_office_answer((const char *)data, size, msg, sizeof msg);
    if (v) {
        if (!json_is_object(v))
            __builtin_trap();
        size_t i;
        json_t *pg;
        json_array_foreach(json_object_get(v, "pages"), i, pg)
        {
            const char *m = json_is_object(pg) ? tk_json_str(pg, "mime") : NULL;
            if (json_is_object(pg) && json_object_get(pg, "base64") &&
                (!m || (strcmp(m, "image/png") != 0 && strcmp(m, "image/jpeg") != 0)))
                __builtin_trap();
        }
        char *t = tools_office_preview_text(v);
        if (!t)
            __builtin_trap();
        free(t);
        json_decref(v);
    } else if (!msg[0]) {
        __builtin_trap();
    }
    return 0;
}
