/*
 * egress.h — the checked way out: a forward HTTP proxy that applies the
 * outbound fetch checks (ssrf.h) to every connection it makes. Browsers and
 * sandboxes run in network namespaces holding only loopback; their one route
 * out is a listening socket made inside that namespace and served here, from
 * the host's namespace.
 *
 * What it serves, on every listener it is handed:
 *   - HTTP/1.1 absolute-form requests ("GET http://host[:port]/path HTTP/1.1"):
 *     the URL is checked (tk_ssrf_check_until), the request is sent on in
 *     origin-form with Host rewritten, hop-by-hop headers dropped and
 *     "Connection: close", and the response relayed; one request per
 *     connection (the client opens another for the next).
 *   - CONNECT host:port (HTTPS, WebSockets, anything in a tunnel): the host and
 *     port are checked (tk_ssrf_check_host), "200 Connection established" is
 *     answered once connected, then bytes are relayed both ways.
 * The connection goes only to the addresses the check admitted (pinned: the
 * name is never resolved a second time), each address verified again
 * (tk_ssrf_target_admits) right before its connect().
 *
 * Refusals are answered before anything is sent on: 403 for the policy
 * (bad_scheme, userinfo, bad_port, denied_host, blocked_address, caps, and
 * "policy" for a listener's own rules, tk_egress_config.admit),
 * 400 for a request that does not parse, 405 for a method that is not served
 * (origin-form requests, https:// absolute-form), 411 for request bodies without
 * Content-Length (chunked uploads are not relayed), 431 for a head over the
 * cap, 502 for dns_failed and failed connects, 504 for timeouts. Every answer
 * carries "X-Tusko-Egress: <code>" and a one-line reason as its body; refusals
 * are logged (component "egress", at most EGRESS_LOG_PER_SEC lines a second,
 * the rest counted and reported with the next line that is logged).
 *
 * Policy: built from the EGRESS_* settings with the same rules as the fetch
 * checks (ssrf.h: the built-in address ranges, precedence, list syntax); list
 * entries may carry a port ("127.0.0.1:8123", "[::1]:8123",
 * "files.example.com:8443"), which admits (or refuses) only that port.
 *
 * Caps per listener (tk_egress_caps): bytes relayed in both directions over
 * the listener's life (past it: open connections are closed, new requests
 * answered 403 "byte_cap"), and connections at once (past it: 403 "conn_cap").
 *
 * Threads: one event-loop thread relays; name lookups run on a small worker
 * pool. Every function below may be called from any thread except the loop's
 * (they wait for the loop).
 */
#ifndef TK_EGRESS_H
#define TK_EGRESS_H

#include <stddef.h>
#include <stdint.h>

#include "lib/common.h"
#include "lib/config.h"
#include "lib/ssrf.h"

typedef struct tk_egress tk_egress;
typedef struct tk_egress_listener tk_egress_listener;

#define TK_EGRESS_MAX_HEAD    32768 /* request line and headers, bytes */
#define TK_EGRESS_MAX_HEADERS 128

typedef struct {
    uint64_t max_bytes; /* relayed, both directions, over the listener's life; 0: no cap */
    unsigned max_conns; /* connections at once; 0: no cap */
} tk_egress_caps;

typedef struct {
    const tk_ssrf_policy *policy; /* borrowed, read-only, outlives the proxy */
    int64_t head_timeout_ms;      /* the request head must arrive within; default 10 s */
    int64_t connect_timeout_ms;   /* lookup and connect; default 10 s */
    int64_t idle_timeout_ms;      /* no byte either way; default 5 min */
    unsigned lookup_threads;      /* default 4 */
    int log_per_sec;              /* refusal lines a second; 0: 10; negative: none */
    /* Optional, a listener's own rules on top of the checks: called once the
     * checks admitted a request, with the listener's tag, the host as checked
     * (normalised) and the addresses admitted; 0 refuses it (403 "policy", why
     * as the reason). Runs on a lookup worker, so it must be thread-safe. It
     * can only narrow: what the checks refused never reaches it. */
    int (*admit)(void *ud, const char *tag, const char *host, const tk_ip *addrs, size_t naddrs,
                 char *why, size_t whylen);
    void *admit_ud;
} tk_egress_config;

/* The settings, for a program to append to its own table before
 * tk_config_load (see sandboxd's main.c):
 *   EGRESS_ALLOW          hosts, CIDRs, host:port admitted beyond the built-in rules
 *   EGRESS_DENY           hosts, CIDRs, host:port refused although the rules admit them
 *   EGRESS_ALLOWED_PORTS  ports allowed beyond 80 and 443
 *   EGRESS_HEAD_TIMEOUT, EGRESS_CONNECT_TIMEOUT, EGRESS_IDLE_TIMEOUT, EGRESS_LOG_PER_SEC
 *   EGRESS_MAX_BYTES, EGRESS_MAX_CONNS   the default per-listener caps
 */
extern tk_setting tk_egress_settings[];
extern const size_t tk_egress_nsettings;

/* After tk_config_load: the policy (initialised here; free it with
 * tk_ssrf_policy_free), the config (pointing at policy) and the default caps.
 * TK_EINVAL with the setting named in err. */
tk_status tk_egress_from_settings(tk_ssrf_policy *policy, tk_egress_config *cfg,
                                  tk_egress_caps *caps, char *err, size_t errlen);

/* Starts the loop and the lookup pool. NULL with err on failure. */
tk_egress *tk_egress_start(const tk_egress_config *cfg, char *err, size_t errlen);
/* Closes every listener and connection, joins the threads, frees e. */
void tk_egress_stop(tk_egress *e);

/* Serves listen_fd (a listening SOCK_STREAM socket; ownership passes to the
 * proxy, even on failure). tag names it in logs ("browser 3f2a...",
 * "sandbox <id>"); caps may be NULL (no caps). NULL only when e is stopping. */
tk_egress_listener *tk_egress_add_listener(tk_egress *e, int listen_fd, const char *tag,
                                           const tk_egress_caps *caps);
/* Stops serving: closes the listening fd and every connection it accepted.
 * On return nothing of it runs any more. l is invalid afterwards. */
void tk_egress_remove_listener(tk_egress *e, tk_egress_listener *l);

typedef struct {
    uint64_t bytes;         /* relayed, both directions */
    unsigned conns;         /* open now */
    uint64_t conns_total;   /* accepted */
    uint64_t refused;       /* answered with a refusal (any 4xx/5xx of ours) */
    uint64_t relayed;       /* requests and tunnels that reached their target */
    char last_refusal[128]; /* "blocked_address 127.0.0.1:9 ..." ("" when none) */
} tk_egress_stats;

void tk_egress_listener_stats(tk_egress *e, tk_egress_listener *l, tk_egress_stats *out);

/* --- the request head parser (exported for the fuzz target and tests) --- */

typedef enum {
    TK_EGRESS_REQ_CONNECT = 1, /* CONNECT host:port */
    TK_EGRESS_REQ_HTTP,        /* absolute-form http:// */
} tk_egress_req_kind;

typedef struct {
    tk_egress_req_kind kind;
    char method[16];
    char target[TK_URL_MAX + 1]; /* as sent: "host:port" or the absolute URL */
    char host[TK_HOST_MAX + 1];  /* CONNECT: the host (brackets removed) */
    int port;                    /* CONNECT: the port */
    int minor;                   /* HTTP/1.<minor> */
    long long content_length;    /* -1 when none */
    size_t head_len;             /* bytes of the head, final CRLFCRLF included */
    /* the headers to send on, each "Name: value\r\n", hop-by-hop ones and Host
     * removed (points into a copy owned by the caller's buffer) */
    size_t nkeep;
    struct {
        const char *p;
        size_t n;
    } keep[TK_EGRESS_MAX_HEADERS];
} tk_egress_req;

typedef enum {
    TK_EGRESS_PARSE_OK = 0,
    TK_EGRESS_PARSE_MORE,     /* no complete head yet (and under the cap) */
    TK_EGRESS_PARSE_BAD,      /* 400 */
    TK_EGRESS_PARSE_METHOD,   /* 405: origin-form, or a scheme not served */
    TK_EGRESS_PARSE_LENGTH,   /* 411: a body without Content-Length */
    TK_EGRESS_PARSE_TOO_LONG, /* 431: head over TK_EGRESS_MAX_HEAD or too many headers */
} tk_egress_parse_rc;

/* Parses the head at buf[0..len). On anything but OK and MORE, why says what
 * was wrong (for the 4xx body). The header pointers point into buf. */
tk_egress_parse_rc tk_egress_parse_request(const char *buf, size_t len, tk_egress_req *r, char *why,
                                           size_t whylen);

#endif
