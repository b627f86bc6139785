/* TRUSTED_PROXIES lists and X-Forwarded-For: the CIDR list parser and the
 * client walk. Input: a list, a NUL byte, a header. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/cidr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    const char *nul = memchr(s, '\0', size);
    size_t ll = nul ? (size_t)(nul - s) : size;
    char *list = malloc(ll + 1);
    memcpy(list, s, ll);
    list[ll] = '\0';
    tk_cidr_list l;
    char err[256];
    if (tk_cidr_list_parse(list, &l, err, sizeof err) == TK_OK) {
        if (l.n > TK_CIDR_LIST_MAX)
            __builtin_trap();
        for (size_t i = 0; i < l.n; i++) {
            /* an entry formats to text that parses back to itself and contains its network */
            char out[64];
            tk_cidr c;
            tk_cidr_format(&l.v[i], out, sizeof out);
            if (tk_cidr_parse(out, strlen(out), &c, err, sizeof err) != TK_OK ||
                c.len != l.v[i].len || memcmp(&c.net, &l.v[i].net, sizeof c.net) != 0 ||
                !tk_cidr_match(&l.v[i], &l.v[i].net))
                __builtin_trap();
        }
    } else if (l.n != 0 || l.v != NULL) {
        __builtin_trap();
    }
    if (nul) {
        const char *xff = nul + 1;
        size_t xl = size - ll - 1;
        tk_ip peer = {.family = 4, .b = {127, 0, 0, 1}}, client;
        int n = tk_forwarded_client(&peer, xff, xl, &l, &client);
        if (n < 0 || n > TK_XFF_MAX_HOPS || (client.family != 4 && client.family != 6))
            __builtin_trap();
        /* only a trusted peer's header is read */
        if (n > 0 && !tk_cidr_list_match(&l, &peer))
            __builtin_trap();
        tk_ip e;
        if (tk_xff_entry_parse(xff, xl, &e) && e.family != 4 && e.family != 6)
            __builtin_trap();
    }
    tk_cidr_list_free(&l);
    free(list);
    return 0;
}
