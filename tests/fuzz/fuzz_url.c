/*
 * fuzz_url — the URL parser and normaliser (src/lib/url.c) and the SSRF check
 * on top of it, with a fake resolver: nothing touches the network.
 *
 * Input: a URL; or "base\nref" (a newline cannot be part of a URL), which also
 * resolves ref against base. Invariants checked on every accepted URL:
 *   - the href is origin + path, no longer than TK_URL_MAX, with no control
 *     characters, spaces, backslashes or '#';
 *   - normalising the href again is stable (same href, host, port);
 *   - the host on its own normalises to itself;
 *   - resolving "" or the href itself against the URL gives the href;
 *   - the check admits only with addresses, refuses only with a reason.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "lib/ssrf.h"
#include "lib/url.h"

#define FUZZ_ASSERT(e)                                                                             \
    do {                                                                                           \
        if (!(e)) {                                                                                \
            fprintf(stderr, "invariant failed: %s (%s:%d)\n", #e, __FILE__, __LINE__);             \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static tk_status fake_resolve(void *ud, const char *host, tk_ip *out, size_t max, size_t *n,
                              char *err, size_t errlen)
{
    uint32_t h = 2166136261u;
    for (const char *p = host; *p; p++)
        h = (h ^ (uint8_t)*p) * 16777619u;
    *n = 0;
    if (h % 7 == 0) {
        snprintf(err, errlen, "no such name");
        return TK_ENOENT;
    }
    size_t k = 1 + h % 3;
    for (size_t i = 0; i < k && i < max; i++) {
        memset(&out[i], 0, sizeof out[i]);
        out[i].family = (h >> (i + 3)) & 1 ? 6 : 4;
        for (int j = 0; j < 16; j++)
            out[i].b[j] = (uint8_t)(h >> ((j + i) % 24));
        (*n)++;
    }
    return TK_OK;
}

static void check_url(tk_arena *a, const tk_url *u)
{
    FUZZ_ASSERT(u->href && u->origin && u->path && u->scheme);
    size_t hl = strlen(u->href), ol = strlen(u->origin);
    FUZZ_ASSERT(hl <= TK_URL_MAX);
    FUZZ_ASSERT(strncmp(u->href, u->origin, ol) == 0);
    FUZZ_ASSERT(strcmp(u->href + ol, u->path) == 0);
    FUZZ_ASSERT(u->path[0] == '/');
    FUZZ_ASSERT(strcmp(u->scheme, "http") == 0 || strcmp(u->scheme, "https") == 0);
    FUZZ_ASSERT(u->port >= 1 && u->port <= 65535);
    for (const char *p = u->href; *p; p++) {
        unsigned char c = (unsigned char)*p;
        FUZZ_ASSERT(c > 0x20 && c < 0x7f && c != '\\' && c != '#');
    }
    FUZZ_ASSERT(!strchr(u->origin + strlen(u->scheme) + 3, '@'));

    /* stable */
    tk_url v;
    tk_url_err e;
    FUZZ_ASSERT(tk_url_parse(a, u->href, hl, &v, &e) == TK_OK);
    FUZZ_ASSERT(strcmp(v.href, u->href) == 0);
    FUZZ_ASSERT(strcmp(v.host.text, u->host.text) == 0);
    FUZZ_ASSERT(v.host.type == u->host.type && v.port == u->port);
    FUZZ_ASSERT(v.host.ip.family == u->host.ip.family);
    FUZZ_ASSERT(memcmp(v.host.ip.b, u->host.ip.b, 16) == 0);

    /* the host alone */
    char hb[TK_HOST_MAX + 3];
    snprintf(hb, sizeof hb, u->host.type == TK_HOST_IPV6 ? "[%s]" : "%s", u->host.text);
    tk_host h;
    FUZZ_ASSERT(tk_url_host_parse(hb, strlen(hb), &h, &e) == TK_OK);
    FUZZ_ASSERT(strcmp(h.text, u->host.text) == 0 && h.type == u->host.type);
    if (h.type == TK_HOST_NAME)
        FUZZ_ASSERT(strlen(h.text) <= TK_HOST_MAX);

    /* trivial references */
    FUZZ_ASSERT(tk_url_resolve(a, u, "", 0, &v, &e) == TK_OK);
    FUZZ_ASSERT(strcmp(v.href, u->href) == 0);
    FUZZ_ASSERT(tk_url_resolve(a, u, u->href, hl, &v, &e) == TK_OK);
    FUZZ_ASSERT(strcmp(v.href, u->href) == 0);
}

static void check_refusal(tk_status st, const tk_url_err *e)
{
    FUZZ_ASSERT(st == TK_EINVAL || st == TK_ETOOBIG);
    FUZZ_ASSERT(e->fault != TK_URL_OK);
    FUZZ_ASSERT(e->reason[0] != '\0');
    FUZZ_ASSERT(memchr(e->reason, '\0', sizeof e->reason));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int init;
    if (!init) {
        tk_log_set_level(TK_LOG_ERROR);
        init = 1;
    }
    if (size > 3 * TK_URL_MAX)
        return 0;
    const char *s = (const char *)data;
    tk_arena *a = tk_arena_new(1 << 20);
    tk_url u;
    tk_url_err e;

    const char *nl = memchr(s, '\n', size);
    size_t first = nl ? (size_t)(nl - s) : size;
    tk_status st = tk_url_parse(a, s, first, &u, &e);
    if (st == TK_OK) {
        check_url(a, &u);
        if (nl) {
            tk_url r;
            size_t rl = size - first - 1;
            st = tk_url_resolve(a, &u, nl + 1, rl, &r, &e);
            if (st == TK_OK)
                check_url(a, &r);
            else
                check_refusal(st, &e);
        }
    } else {
        check_refusal(st, &e);
    }

    /* the check, on a NUL-terminated copy */
    char *z = malloc(first + 1);
    FUZZ_ASSERT(z);
    memcpy(z, s, first);
    z[first] = '\0';
    if (strlen(z) == first) {
        static tk_ssrf_policy p;
        static int pinit;
        if (!pinit) {
            char err[128];
            tk_ssrf_policy_init(&p);
            p.resolve = fake_resolve;
            FUZZ_ASSERT(tk_ssrf_policy_allow(&p, "*.corp.example,10.1.0.0/16", err, sizeof err) ==
                        TK_OK);
            FUZZ_ASSERT(tk_ssrf_policy_deny(&p, "bad.example,8.8.0.0/16", err, sizeof err) ==
                        TK_OK);
            pinit = 1;
        }
        tk_ssrf_target t;
        st = tk_ssrf_check(&p, z, &t);
        FUZZ_ASSERT(t.reason[0] != '\0');
        if (st == TK_OK) {
            FUZZ_ASSERT(t.code == TK_SSRF_OK && t.naddrs > 0 && t.url);
            for (size_t i = 0; i < t.naddrs; i++) {
                char why[256];
                if (!t.by_allowlist)
                    FUZZ_ASSERT(!tk_ssrf_addr_blocked(&t.addrs[i], why, sizeof why));
            }
        } else {
            FUZZ_ASSERT(t.code != TK_SSRF_OK && t.naddrs == 0);
        }
        tk_ssrf_target_free(&t);
    }
    free(z);
    tk_arena_free(a);
    return 0;
}
