/*
 * prog.h — what every program's main() does the same way: --help and --version,
 * settings from the environment, signals, and a /healthz route.
 */
#ifndef TK_PROG_H
#define TK_PROG_H

#include "lib/config.h"
#include "lib/httpd.h"

typedef struct {
    const char *name;     /* "tusko-execd" */
    const char *summary;  /* one line for --help */
    const char *usage;    /* e.g. "[options]" or "<command> [options]" */
    const char *commands; /* extra --help text listing subcommands; may be NULL */
    tk_setting *settings;
    size_t nsettings;
    /* 1: the program serves /readyz and /metrics (tk_prog_routes) and reads
     * METRICS_TOKEN and METRICS_LISTEN */
    int metrics;
} tk_prog;

/*
 * Blocks SIGINT/SIGTERM/SIGPIPE for every thread (call first, before any thread
 * starts), initialises logging, handles --help and --version (exiting), and loads
 * the settings (exiting with status 2 and a message naming the variable on a bad
 * value). On return *argi is the index of the first non-option argument.
 */
void tk_prog_init(const tk_prog *p, int argc, char **argv, int *argi);

/*
 * The HTTP server's per-client limits every program reads (loaded by
 * tk_prog_init, listed by --help; docs/SECURITY.md):
 *   HTTP_MAX_CONNECTIONS         connections open at once (4096)
 *   HTTP_MAX_CONNECTIONS_PER_IP  per client address, an IPv6 client's /64 (64; 0: none)
 *   HTTP_HEADER_TIMEOUT          request line and headers (10s)
 *   HTTP_IDLE_TIMEOUT            a connection idle between requests (60s)
 *   HTTP_MIN_BODY_RATE           bytes/s a request body must average (1024; 0: none)
 *   TRUSTED_PROXIES              proxies whose X-Forwarded-For is believed (none)
 * Fills those fields of hc.
 */
void tk_prog_http_config(tk_httpd_config *hc);

/* Waits for SIGINT or SIGTERM; returns the signal number. */
int tk_prog_wait(void);

/* GET /healthz: {"status":"ok","program":...,"version":...}. ud is the tk_prog. */
void tk_prog_healthz(tk_req *req, void *ud);

/*
 * Health for orchestrators and metrics (docs/OBSERVABILITY.md):
 *   GET /healthz  alive (above)
 *   GET /readyz   200 {"status":"ready"} when the program's readiness check
 *                 (tk_prog_set_ready) says so, else 503 {"status":"not ready",
 *                 "reason":...}; without a check, ready once serving
 *   GET /metrics  lib/metrics.h's registry in the Prometheus text format.
 *                 On the main listener only when METRICS_TOKEN is set (then
 *                 "Authorization: Bearer <METRICS_TOKEN>" is required) and
 *                 METRICS_LISTEN is not (then it is served there only, with
 *                 the token checked too when set); else 404 METRICS_OFF.
 * tk_prog_routes writes these three routes (public: no auth hook) into
 * routes[0..max) and returns how many it wrote.
 */
size_t tk_prog_routes(const tk_prog *p, tk_route *routes, size_t max);
/* fn: 1 ready; 0 not, with why filled. Called on an HTTP thread for each
 * /readyz: keep it quick (a cached state, a short database round trip). */
void tk_prog_set_ready(int (*fn)(char *why, size_t whylen, void *ud), void *ud);
/* Starts the METRICS_LISTEN server (/metrics, /healthz, /readyz) when it is
 * set: NULL when it is not (err ""), or on failure (err says why). */
tk_httpd *tk_prog_metrics_start(const tk_prog *p, char *err, size_t errlen);

#endif
