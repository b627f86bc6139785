/*
 * fuzz_egress_request — the egress proxy's request head parser
 * (tk_egress_parse_request in src/lib/egress.c), fed what a browser or
 * sandbox may send. Invariants on every accepted head:
 *   - it ends in CRLFCRLF at head_len, within the input and the head cap;
 *   - every header kept lies inside the head, is one "Name: value" line ending
 *     in CRLF, and is never a hop-by-hop header or Host;
 *   - a CONNECT has a host and a port in 1..65535; anything else is http://;
 *   - no shorter prefix is accepted, and the head alone parses the same.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/egress.h"

static int dropped(const char *p, size_t n)
{
    static const char *const names[] = {"connection:",
                                        "proxy-connection:",
                                        "keep-alive:",
                                        "proxy-authorization:",
                                        "proxy-authenticate:",
                                        "te:",
                                        "trailer:",
                                        "upgrade:",
                                        "host:",
                                        "transfer-encoding:"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t l = strlen(names[i]);
        if (n >= l && strncasecmp(p, names[i], l) == 0)
            return 1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    tk_egress_req *r = malloc(sizeof *r), *r2 = malloc(sizeof *r2);
    char why[160];
    tk_egress_parse_rc rc = tk_egress_parse_request(buf, size, r, why, sizeof why);
    if (rc != TK_EGRESS_PARSE_OK && rc != TK_EGRESS_PARSE_MORE && !why[0])
        __builtin_trap(); /* a refusal always says why */
    if (rc == TK_EGRESS_PARSE_OK) {
        size_t h = r->head_len;
        if (h < 4 || h > size || h > TK_EGRESS_MAX_HEAD || memcmp(buf + h - 4, "\r\n\r\n", 4) != 0)
            __builtin_trap();
        for (size_t i = 0; i < r->nkeep; i++) {
            const char *p = r->keep[i].p;
            size_t n = r->keep[i].n;
            if (p < buf || p + n > buf + h || n < 3 || p[n - 2] != '\r' || p[n - 1] != '\n' ||
                memchr(p, '\n', n - 1) || memchr(p, '\r', n - 2) || !memchr(p, ':', n) ||
                dropped(p, n))
                __builtin_trap();
        }
        if (r->kind == TK_EGRESS_REQ_CONNECT) {
            if (!r->host[0] || r->port < 1 || r->port > 65535)
                __builtin_trap();
        } else if (r->kind != TK_EGRESS_REQ_HTTP || strncasecmp(r->target, "http://", 7) != 0) {
            __builtin_trap();
        }
        if (tk_egress_parse_request(buf, h, r2, why, sizeof why) != TK_EGRESS_PARSE_OK ||
            r2->head_len != h || r2->kind != r->kind || r2->nkeep != r->nkeep)
            __builtin_trap();
        if (tk_egress_parse_request(buf, h - 1, r2, why, sizeof why) == TK_EGRESS_PARSE_OK)
            __builtin_trap();
    }
    free(r);
    free(r2);
    free(buf);
    return 0;
}
