/* browserd's outline of an accessibility tree (brd_page_outline_of), fed
 * arbitrary JSON as Accessibility.getFullAXTree's nodes: cycles, repeats,
 * missing and mistyped fields. The outline stays within its cap, is valid
 * UTF-8 (jansson's strings are, so every cut must fall between characters),
 * and every ref is a node id the input gave. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "browserd/page.h"
#include "lib/utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t je;
    json_t *nodes = json_loadb((const char *)data, size, 0, &je);
    if (!nodes)
        return 0;
    int64_t *refs;
    size_t nrefs;
    char *text = brd_page_outline_of(nodes, &refs, &nrefs);
    if (!text || strlen(text) > BRD_PAGE_MAX_OUTLINE || !tk_utf8_valid(text, strlen(text)))
        __builtin_trap();
    for (size_t i = 0; i < nrefs; i++) {
        int found = 0;
        size_t k;
        json_t *n;
        json_array_foreach(nodes, k, n)
        {
            json_t *b = json_object_get(n, "backendDOMNodeId");
            if (json_is_integer(b) && json_integer_value(b) == refs[i])
                found = 1;
        }
        if (!found)
            __builtin_trap();
    }
    free(text);
    free(refs);
    json_decref(nodes);
    return 0;
}
