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

#endif
