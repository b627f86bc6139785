/*
 * ssrf.h — outbound fetch checks (guardrail 4): the one gate every fetch made on
 * the agent's behalf goes through (web fetch, browser navigation, downloads by
 * URL, webhooks). docs/internals/ssrf.md explains the design.
 *
 * A check takes a URL (or a host and port), normalises it (url.h), applies the
 * policy and resolves the host once; it admits the URL only when every address
 * the name resolves to is admitted, and hands back those addresses (ssrf.c: no
 * libcurl, so an egress proxy can use the check alone). A checked fetch
 * (ssrf_fetch.c, over libcurl) connects only to them: they are pinned with CURLOPT_RESOLVE, and an
 * open-socket callback verifies each address again right before connect(), so
 * a DNS answer that changes between check and connect cannot reach anything
 * else. Redirects are followed here (never by curl), each hop checked in full.
 *
 * Every refusal carries a machine-readable code (tk_ssrf_code_str: "bad_url",
 * "blocked_address", ...) and a reason for people, e.g.
 *   {code: "blocked_address", reason: "127.0.0.1 is loopback (127.0.0.0/8)"}.
 *
 * Precedence, first match decides:
 *   1. the URL itself: bad_url, bad_scheme, userinfo (no list overrides these);
 *   2. the port: 80, 443 and the operator's extra ports, else bad_port;
 *   3. the host name against the denylist (denied_host), then the allowlist;
 *   4. each address (a literal, or every answer for a name): the denylist
 *      (denied_host; an entry also catches the IPv4 address embedded in
 *      mapped/compatible/NAT64/6to4/Teredo forms); the unspecified addresses
 *      0.0.0.0 and :: (always blocked_address); an allowlisted name or an
 *      allowlisted address (exact family, no embedded forms) admits; else the
 *      built-in rules (blocked_address for loopback, private, link-local, ...).
 *   The denylist therefore always wins over the allowlist.
 *
 * Settings (tk_ssrf_policy_from_env):
 *   SSRF_ALLOW           hosts and CIDRs admitted although the built-in rules refuse
 *                        them: "intranet.example.com,10.1.0.0/16,*.corp.example"
 *   SSRF_DENY            hosts and CIDRs refused although the rules admit them
 *   SSRF_ALLOWED_PORTS   ports allowed beyond 80 and 443: "8080,8443"
 *   FETCH_MAX_BYTES      response body cap, bytes (K, M, G suffixes); default 2M
 *   FETCH_TIMEOUT        whole fetch, redirects included; default 15s
 *   FETCH_MAX_REDIRECTS  redirects followed; default 5 (0 to 20)
 * List entries are separated by commas or spaces: a host name (exact match;
 * IDNA and case folded as in URLs), "*.example.com" (any name below it, not
 * example.com itself), an address, or a CIDR prefix ("10.1.0.0/16", "fd00::/8";
 * host bits must be zero). Any of them may end in ":port" ("127.0.0.1:8123",
 * "[::1]:8123", "*.corp.example:8443"; an IPv6 address takes brackets then):
 * the entry then applies to that port only, and an allowlist entry with a port
 * also admits that port for what it matches (without it, only 80, 443 and the
 * extra ports are allowed).
 *
 * Threads: a policy is built once, then read-only; every function below is safe
 * to call from many threads at once on the same policy. Global state:
 * curl_global_init (once) and the count of abandoned lookups (atomic). Each
 * name lookup runs on its own short-lived helper thread (see
 * tk_ssrf_resolve_fn).
 */
#ifndef TK_SSRF_H
#define TK_SSRF_H

#include <stddef.h>
#include <stdint.h>

#include "lib/buf.h"
#include "lib/common.h"
#include "lib/url.h"

typedef enum {
    TK_SSRF_OK = 0,
    TK_SSRF_BAD_URL,            /* malformed URL or host */
    TK_SSRF_BAD_SCHEME,         /* not http or https */
    TK_SSRF_USERINFO,           /* user name or password in the URL */
    TK_SSRF_BAD_PORT,           /* port not allowed */
    TK_SSRF_DENIED_HOST,        /* matches the operator denylist */
    TK_SSRF_BLOCKED_ADDRESS,    /* an address is in a refused range */
    TK_SSRF_DNS_FAILED,         /* the name has no address, or resolving failed */
    TK_SSRF_REDIRECT_BLOCKED,   /* a redirect target was refused (see cause) */
    TK_SSRF_TOO_MANY_REDIRECTS, /* more redirects than the limit */
    TK_SSRF_TOO_LARGE,          /* the body is over the cap (truncation not asked for) */
    TK_SSRF_TIMEOUT,            /* the fetch took longer than its time cap */
    TK_SSRF_FETCH_FAILED,       /* connection, TLS or protocol failure */
    TK_SSRF_CANCELLED,          /* the caller's cancel flag was set */
} tk_ssrf_code;

/* "ok", "bad_url", "bad_scheme", "userinfo", "bad_port", "denied_host",
 * "blocked_address", "dns_failed", "redirect_blocked", "too_many_redirects",
 * "too_large", "timeout", "fetch_failed", "cancelled". */
const char *tk_ssrf_code_str(tk_ssrf_code c);

#define TK_SSRF_MAX_ADDRS             64 /* addresses per name; a name with more is refused */
#define TK_SSRF_MAX_PORTS             64
#define TK_SSRF_MAX_REDIRECTS         20
#define TK_SSRF_REASON_MAX            448
#define TK_SSRF_MAX_ABANDONED         32 /* lookups past their deadline still running; more: refused */
#define TK_SSRF_DEFAULT_MAX_BYTES     (2u << 20)
#define TK_SSRF_DEFAULT_TIMEOUT_MS    15000L
#define TK_SSRF_DEFAULT_MAX_REDIRECTS 5

/*
 * A resolver: fills up to max addresses of host (a normalised name, never an IP
 * literal) into addrs and sets *n. Returns TK_OK, TK_ENOENT (no such name),
 * TK_ETOOBIG (more than max addresses) or TK_ERROR, with a message in err.
 * The default is getaddrinfo(); tests supply their own.
 *
 * It runs on a helper thread, so that a check can stop waiting at its deadline
 * (the fetch's remaining time; the policy's timeout for tk_ssrf_check): the
 * check then fails with timeout and the resolver keeps running until it returns
 * on its own; its answer is dropped and everything it was given (host, addrs,
 * err) stays valid until then. ud must therefore outlive any lookup still
 * running (static or process-long data; the system resolver uses none). While
 * TK_SSRF_MAX_ABANDONED such lookups are still running, a check refuses names
 * at once (dns_failed) instead of starting more.
 */
typedef tk_status (*tk_ssrf_resolve_fn)(void *ud, const char *host, tk_ip *addrs, size_t max,
                                        size_t *n, char *err, size_t errlen);
/* Called right before every connect() of a checked fetch, after the address
 * was verified; return non-zero to refuse the connect (fetch_failed). */
typedef int (*tk_ssrf_connect_fn)(void *ud, const tk_ip *ip, int port);

typedef struct tk_ssrf_entry tk_ssrf_entry;

/* Build with tk_ssrf_policy_init or _from_env; free with tk_ssrf_policy_free.
 * Share it by pointer (do not copy the struct). */
typedef struct {
    tk_ssrf_entry *allow, *deny; /* operator lists: tk_ssrf_policy_allow / _deny */
    size_t nallow, ndeny;
    uint16_t ports[TK_SSRF_MAX_PORTS]; /* allowed beyond 80 and 443 */
    size_t nports;
    size_t max_bytes;           /* body cap; default 2 MiB */
    long timeout_ms;            /* whole fetch; default 15000 */
    int max_redirects;          /* default 5, at most TK_SSRF_MAX_REDIRECTS */
    tk_ssrf_resolve_fn resolve; /* NULL: getaddrinfo */
    void *resolve_ud;
    tk_ssrf_connect_fn on_connect; /* NULL: none */
    void *connect_ud;
    /* the settings named in reasons; default "SSRF_ALLOW", "SSRF_DENY",
     * "SSRF_ALLOWED_PORTS" (the egress proxy names its own) */
    const char *allow_setting, *deny_setting, *ports_setting;
} tk_ssrf_policy;

/* Defaults, empty lists, the system resolver. */
void tk_ssrf_policy_init(tk_ssrf_policy *p);
/* Frees the lists; p is left as after tk_ssrf_policy_init. */
void tk_ssrf_policy_free(tk_ssrf_policy *p);
/* Adds list entries (syntax above). TK_EINVAL with the bad entry named in err;
 * entries before it stay added. */
tk_status tk_ssrf_policy_allow(tk_ssrf_policy *p, const char *list, char *err, size_t errlen);
tk_status tk_ssrf_policy_deny(tk_ssrf_policy *p, const char *list, char *err, size_t errlen);
/* Adds ports allowed beyond 80 and 443: "8080,8443". */
tk_status tk_ssrf_policy_allow_ports(tk_ssrf_policy *p, const char *list, char *err, size_t errlen);
/* Initialises p from the settings above. On TK_EINVAL err names the variable
 * ("SSRF_ALLOW: \"10.1.2.3/16\": host bits are set ...") and p is left empty
 * (initialised, nothing to free). Call before threads start (getenv). */
tk_status tk_ssrf_policy_from_env(tk_ssrf_policy *p, char *err, size_t errlen);

/* The verdict of a check. Free with tk_ssrf_target_free. */
typedef struct {
    tk_ssrf_code code;               /* TK_SSRF_OK when admitted */
    char reason[TK_SSRF_REASON_MAX]; /* why refused, or what was admitted and by what */
    char *url;                       /* normalised URL (heap); NULL if unparsable or for
                                        tk_ssrf_check_host */
    char host[TK_HOST_MAX + 1];      /* normalised host ("" if unparsable) */
    tk_host_type host_type;
    int port;
    int by_allowlist;               /* admitted by an operator allowlist entry */
    size_t naddrs;                  /* admitted: every address of the host; connect */
    tk_ip addrs[TK_SSRF_MAX_ADDRS]; /* only to these */
} tk_ssrf_target;

/*
 * Checks a URL: normalise, policy, resolve once, check every address. Returns
 * TK_OK (t->code TK_SSRF_OK), TK_EDENIED (refused; t->code and t->reason say
 * why), TK_ENOENT (dns_failed) or TK_ETIMEOUT (timeout: the resolver gave no
 * answer within the policy's timeout_ms). Sends nothing but the DNS query (none
 * for IP literals or with a custom resolver). Always call tk_ssrf_target_free
 * after.
 */
tk_status tk_ssrf_check(const tk_ssrf_policy *p, const char *url, tk_ssrf_target *t);
/*
 * The same for a host and port on their own, for a proxy's CONNECT host:port:
 * on TK_OK t->addrs[0..t->naddrs) are the addresses it may connect to (pinned:
 * connect to these, never resolve again); otherwise t->code and t->reason say
 * why not. Needs no curl.
 */
tk_status tk_ssrf_check_host(const tk_ssrf_policy *p, const char *host, int port,
                             tk_ssrf_target *t);
/* tk_ssrf_check with its own time bound: the lookup must answer before
 * deadline_ms (tk_mono_ms()); limit_ms is the limit it comes from, named in a
 * timeout's reason. The checked fetch checks each hop so. */
tk_status tk_ssrf_check_until(const tk_ssrf_policy *p, const char *url, int64_t deadline_ms,
                              long limit_ms, tk_ssrf_target *t);
/* For the moment before connect(): 1 when ip:port is one of the addresses an
 * admitted target t was pinned to, on its port, and the address still passes
 * the policy's address rules; else 0. */
int tk_ssrf_target_admits(const tk_ssrf_policy *p, const tk_ssrf_target *t, const tk_ip *ip,
                          int port);
void tk_ssrf_target_free(tk_ssrf_target *t);
/* Lookups that outlived their check's deadline and have not returned yet. */
int tk_ssrf_abandoned_lookups(void);
/* One line for operators: "allowed http://example.com/ (93.184.215.14)" or
 * "refused blocked_address: 127.0.0.1 is loopback (127.0.0.0/8)". */
void tk_ssrf_target_describe(const tk_ssrf_target *t, char *out, size_t outlen);

/*
 * The built-in address rules alone, without a policy: returns 1 and a phrase
 * ("loopback (127.0.0.0/8)") when ip is in a refused range, else 0.
 */
int tk_ssrf_addr_blocked(const tk_ip *ip, char *why, size_t whylen);

/* A size setting: bytes with an optional binary suffix ("2097152", "512K", "2M",
 * "1G"; also KB/KiB...), at most 2^40 before the suffix. 1 when valid. */
int tk_ssrf_parse_size(const char *s, uint64_t *out);

/* The refusal code for a URL that does not parse: bad_scheme, userinfo,
 * bad_port, else bad_url. */
tk_ssrf_code tk_ssrf_url_fault_code(tk_url_fault f);

/* --- the checked fetch (ssrf_fetch.c, over libcurl) --- */

#define TK_SSRF_NO_REDIRECTS (-1)

typedef struct {
    const char *method;         /* "GET" (default) or "HEAD"; nothing else */
    const char *const *headers; /* "Name: value", NULL-terminated; sent only to the
                                   origin of the first URL; Host is dropped */
    size_t max_bytes;           /* 0: the policy's */
    long timeout_ms;            /* 0: the policy's; covers every hop */
    int max_redirects;          /* 0: the policy's; TK_SSRF_NO_REDIRECTS: none */
    int allow_truncation;       /* a body over the cap is cut (result->truncated), not
                                   an error */
    const char *user_agent;     /* default "tusko/<version>" */
    const volatile int *cancel; /* polled: non-zero aborts (cancelled) */
} tk_ssrf_fetch_opts;

typedef struct {
    char *url;        /* the normalised URL requested (heap) */
    long status;      /* its response status; 0 when none arrived */
    char address[48]; /* the address connected to; "" when none */
} tk_ssrf_hop;

/* Free with tk_ssrf_result_free. */
typedef struct {
    tk_ssrf_code code;  /* TK_SSRF_OK when a response arrived (whatever its status) */
    tk_ssrf_code cause; /* for redirect_blocked: why the target was refused */
    char reason[TK_SSRF_REASON_MAX];
    long status;            /* status of the last response; 0 when none */
    char *final_url;        /* the last URL requested (heap); the normalised URL if the
                               first was refused; NULL if it did not parse */
    char content_type[256]; /* of the final response, as sent; "" when none */
    tk_buf body;            /* the final response body (capped) */
    int truncated;          /* the body was cut at the cap */
    size_t nhops;           /* requests made, in order (redirects included) */
    tk_ssrf_hop hops[TK_SSRF_MAX_REDIRECTS + 1];
    int64_t elapsed_ms;
} tk_ssrf_result;

/*
 * Fetches url through the checks: every hop is checked in full (tk_ssrf_check),
 * connects only to the admitted addresses, follows 301/302/303/307/308 itself
 * up to the redirect limit, caps the body and the total time (name lookups
 * included: a resolver that does not answer ends the fetch with timeout when
 * the time is up). opts may be NULL.
 * Returns TK_OK (a response arrived; r->code TK_SSRF_OK), TK_EDENIED (refused:
 * r->code and r->reason), TK_ENOENT (dns_failed), TK_ETOOBIG (too_large),
 * TK_ETIMEOUT (timeout), TK_ECLOSED (cancelled) or TK_ERROR (fetch_failed).
 * Always call tk_ssrf_result_free after.
 */
tk_status tk_ssrf_fetch(const tk_ssrf_policy *p, const char *url, const tk_ssrf_fetch_opts *opts,
                        tk_ssrf_result *r);
void tk_ssrf_result_free(tk_ssrf_result *r);

#endif
