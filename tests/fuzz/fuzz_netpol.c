/* A sandbox's egress rules (sandboxd/netpol.c) from arbitrary JSON: the
 * create request's networkPolicy, then the same bytes as a PATCH and as a
 * DELETE body of /policy; whatever is accepted stays within the caps and
 * serialises back to a policy that parses to the same rules. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/json.h"
#include "sandboxd/netpol.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256], msg[256];
    json_t *j = tk_json_parse((const char *)data, size, 1 << 20, err, sizeof err);
    if (!j)
        return 0;
    sbx_netpol *p = NULL;
    if (sbx_netpol_parse(j, &p, msg, sizeof msg) == TK_OK && p) {
        if (p->n > SBX_NETPOL_MAX_RULES)
            __builtin_trap();
        json_t *back = sbx_netpol_json(p);
        sbx_netpol *q = NULL;
        if (sbx_netpol_parse(back, &q, msg, sizeof msg) != TK_OK || !q || q->n != p->n ||
            q->default_allow != p->default_allow)
            __builtin_trap();
        for (size_t i = 0; i < p->n; i++)
            if (strcmp(p->r[i].target, q->r[i].target) != 0 || p->r[i].allow != q->r[i].allow)
                __builtin_trap();
        free(q);
        json_decref(back);
    }
    if (!p)
        p = calloc(1, sizeof *p);
    size_t before = p->n;
    if (sbx_netpol_patch(p, j, msg, sizeof msg) != TK_OK && p->n != before)
        __builtin_trap(); /* a refused patch changes nothing */
    if (p->n > SBX_NETPOL_MAX_RULES)
        __builtin_trap();
    sbx_netpol_delete(p, j, msg, sizeof msg);
    tk_ip a = {0};
    char why[256];
    sbx_netpol_admits(p, "example.com", &a, 1, why, sizeof why);
    free(p);
    json_decref(j);
    return 0;
}
