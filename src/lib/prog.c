#include "lib/prog.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/common.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/metrics.h"

static sigset_t prog_sigs;

static int64_t http_max_conns, http_per_ip, http_header_ms, http_idle_ms, http_min_rate;
static char *http_trusted_text;
static tk_cidr_list http_trusted;

static int check_cidr_list(const char *value, char *msg, size_t msglen)
{
    tk_cidr_list l;
    if (tk_cidr_list_parse(value, &l, msg, msglen) != TK_OK)
        return 1;
    tk_cidr_list_free(&l);
    return 0;
}

static tk_setting http_settings[] = {
    {"HTTP_MAX_CONNECTIONS", NULL, TK_SET_INT, "4096", "HTTP connections open at once", .min = 16,
     .max = 1000000, .out = &http_max_conns},
    {"HTTP_MAX_CONNECTIONS_PER_IP", NULL, TK_SET_INT, "64",
     "HTTP connections from one client address (an IPv6 client is its /64); 0: no limit", .min = 0,
     .max = 1000000, .out = &http_per_ip},
    {"HTTP_HEADER_TIMEOUT", NULL, TK_SET_DURATION, "10s",
     "time for a request line and its headers to arrive", .min = 1000, .max = 600000,
     .out = &http_header_ms},
    {"HTTP_IDLE_TIMEOUT", NULL, TK_SET_DURATION, "60s",
     "an idle connection is closed after this long", .min = 1000, .max = 3600000,
     .out = &http_idle_ms},
    {"HTTP_MIN_BODY_RATE", NULL, TK_SET_INT, "1024",
     "bytes/s a request body must average after HTTP_HEADER_TIMEOUT; 0: no minimum", .min = 0,
     .max = 1 << 30, .out = &http_min_rate},
    {"TRUSTED_PROXIES", NULL, TK_SET_STR, NULL,
     "reverse proxies (addresses, CIDR prefixes) whose X-Forwarded-For names the client",
     .out = &http_trusted_text, .check = check_cidr_list},
};

static char *metrics_token, *metrics_listen;

static tk_setting metrics_settings[] = {
    {"METRICS_TOKEN", NULL, TK_SET_STR, NULL,
     "GET /metrics on the main listener needs \"Authorization: Bearer <this>\" (unset, and "
     "METRICS_LISTEN unset: /metrics is off)",
     .flags = TK_SET_SECRET, .out = &metrics_token},
    {"METRICS_LISTEN", NULL, TK_SET_STR, NULL,
     "serve /metrics (and /healthz, /readyz) on this address only, not the main listener",
     .out = &metrics_listen},
};

void tk_prog_http_config(tk_httpd_config *hc)
{
    hc->max_connections = (unsigned)http_max_conns;
    hc->per_ip_limit = (unsigned)http_per_ip;
    hc->header_timeout_ms = http_header_ms;
    hc->timeout_s = (unsigned)((http_idle_ms + 999) / 1000);
    hc->min_body_rate = http_min_rate;
    hc->trusted = &http_trusted;
}

static void usage(const tk_prog *p, FILE *f)
{
    fprintf(f, "%s %s — %s\n\nUsage: %s %s\n", p->name, TUSKO_VERSION, p->summary, p->name,
            p->usage ? p->usage : "[options]");
    if (p->commands)
        fprintf(f, "\n%s", p->commands);
    fprintf(f, "\nSettings (environment variable, or the flag beside it):\n");
    tk_config_usage(f, p->settings, p->nsettings);
    tk_config_usage(f, http_settings, TK_ARRAY_LEN(http_settings));
    if (p->metrics)
        tk_config_usage(f, metrics_settings, TK_ARRAY_LEN(metrics_settings));
    fprintf(f, "  %-24s %-28s %s\n  %-24s %-28s %s\n", "--help", "", "print this help and exit",
            "--version", "", "print the version and exit");
}

void tk_prog_init(const tk_prog *p, int argc, char **argv, int *argi)
{
    sigemptyset(&prog_sigs);
    sigaddset(&prog_sigs, SIGINT);
    sigaddset(&prog_sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &prog_sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    tk_log_init(p->name);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(p, stdout);
            exit(0);
        }
        if (strcmp(argv[i], "--version") == 0) {
            printf("%s %s\n", p->name, TUSKO_VERSION);
            exit(0);
        }
    }
    char err[512];
    if (tk_log_check_env(err, sizeof err) != TK_OK) {
        fprintf(stderr, "%s: %s\n", p->name, err);
        exit(2);
    }
    int a = argi ? *argi : 1;
    if (tk_config_load(p->settings, p->nsettings, argc, argv, &a, err, sizeof err) != TK_OK) {
        fprintf(stderr, "%s: %s\n", p->name, err);
        exit(2);
    }
    if (argi)
        *argi = a;
    if (tk_config_load(http_settings, TK_ARRAY_LEN(http_settings), 0, argv, NULL, err,
                       sizeof err) != TK_OK ||
        tk_cidr_list_parse(http_trusted_text, &http_trusted, err, sizeof err) != TK_OK) {
        fprintf(stderr, "%s: %s\n", p->name, err);
        exit(2);
    }
    if (p->metrics && tk_config_load(metrics_settings, TK_ARRAY_LEN(metrics_settings), 0, argv,
                                     NULL, err, sizeof err) != TK_OK) {
        fprintf(stderr, "%s: %s\n", p->name, err);
        exit(2);
    }
}

int tk_prog_wait(void)
{
    int sig = 0;
    sigwait(&prog_sigs, &sig);
    return sig;
}

void tk_prog_healthz(tk_req *req, void *ud)
{
    const tk_prog *p = ud;
    tk_respond_json(req, 200,
                    tk_json_obj("status", json_string("ok"), "program", json_string(p->name),
                                "version", json_string(TUSKO_VERSION), NULL));
}

/* ---------- /readyz, /metrics ---------- */

static int (*ready_fn)(char *why, size_t whylen, void *ud);
static void *ready_ud;

void tk_prog_set_ready(int (*fn)(char *why, size_t whylen, void *ud), void *ud)
{
    ready_ud = ud;
    ready_fn = fn;
}

static void h_readyz(tk_req *req, void *ud)
{
    const tk_prog *p = ud;
    char why[300] = "";
    if (ready_fn && !ready_fn(why, sizeof why, ready_ud)) {
        tk_respond_json(req, 503,
                        tk_json_obj("status", json_string("not ready"), "program",
                                    json_string(p->name), "reason", json_string(why), NULL));
        return;
    }
    tk_respond_json(
        req, 200,
        tk_json_obj("status", json_string("ready"), "program", json_string(p->name), NULL));
}

/* ud: NULL on the main listener, non-NULL on METRICS_LISTEN's */
static void h_metrics(tk_req *req, void *ud)
{
    int own = ud != NULL;
    if (!own && (metrics_listen || !metrics_token)) {
        tk_respond_error(req, 404, "METRICS_OFF",
                         metrics_listen ? "metrics are served on METRICS_LISTEN only"
                                        : "metrics are off: set METRICS_TOKEN or METRICS_LISTEN");
        return;
    }
    if (metrics_token) {
        const char *a = tk_req_header(req, "Authorization");
        if (!a || strncmp(a, "Bearer ", 7) != 0 || !tk_str_eq_ct(a + 7, metrics_token)) {
            tk_respond_header(req, "WWW-Authenticate", "Bearer realm=\"metrics\"");
            tk_respond_error(req, 401, "UNAUTHORIZED",
                             "send \"Authorization: Bearer <METRICS_TOKEN>\"");
            return;
        }
    }
    tk_buf b;
    tk_buf_init(&b, 64u << 20);
    tk_metrics_render(&b);
    tk_respond(req, 200, "text/plain; version=0.0.4; charset=utf-8", b.data ? b.data : "", b.len);
    tk_buf_free(&b);
}

static const char metrics_own = 1;

size_t tk_prog_routes(const tk_prog *p, tk_route *routes, size_t max)
{
    size_t n = 0;
    const tk_route all[] = {
        {"GET", "/healthz", tk_prog_healthz, (void *)p, TK_ROUTE_PUBLIC | TK_ROUTE_QUIET},
        {"GET", "/readyz", h_readyz, (void *)p, TK_ROUTE_PUBLIC | TK_ROUTE_QUIET},
        {"GET", "/metrics", h_metrics, NULL, TK_ROUTE_PUBLIC | TK_ROUTE_QUIET},
    };
    for (size_t i = 0; i < TK_ARRAY_LEN(all) && n < max; i++)
        routes[n++] = all[i];
    return n;
}

tk_httpd *tk_prog_metrics_start(const tk_prog *p, char *err, size_t errlen)
{
    err[0] = '\0';
    if (!p->metrics || !metrics_listen)
        return NULL;
    static tk_route r[3];
    tk_prog_routes(p, r, 3);
    r[2].ud = (void *)&metrics_own;
    tk_httpd_config hc = {.listen = metrics_listen, .name = "metrics", .threads = 1, .workers = 1};
    tk_prog_http_config(&hc);
    tk_httpd *h = tk_httpd_start(&hc, r, 3, err, errlen);
    if (h)
        tk_info("main", "msg=\"metrics listening\" url=%s", tk_httpd_url(h));
    return h;
}
