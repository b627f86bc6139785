/*
 * tusko-browserd — the browser service (Steel API) driving Chromium.
 *
 * It fails closed: without BROWSERD_API_KEY (at least 16 characters) it
 * refuses to start. On SIGINT/SIGTERM it stops serving, then ends every
 * session and pooled browser (each namespace killed, each profile removed).
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "browserd/api.h"
#include "browserd/session.h"
#include "lib/egress.h"
#include "lib/httpd.h"
#include "lib/log.h"
#include "lib/prog.h"

static char *opt_listen, *opt_key, *opt_chromium, *opt_state;
static int64_t opt_max_sessions, opt_pool, opt_idle, opt_def_timeout, opt_max_timeout, opt_uid,
    opt_max_procs;

static tk_setting settings[] = {
    {"BROWSERD_LISTEN", "listen", TK_SET_STR, "127.0.0.1:8082",
     "address to serve on (host:port or unix:/path)", .out = &opt_listen,
     .check = tk_config_check_listen},
    {"BROWSERD_API_KEY", "api-key", TK_SET_STR, NULL,
     "key every request must carry in the steel-api-key header (required)",
     .flags = TK_SET_FAIL_CLOSED | TK_SET_SECRET, .out = &opt_key},
    {"BROWSERD_CHROMIUM", "chromium", TK_SET_STR, "/usr/lib/chromium/chromium",
     "the Chromium executable (the binary itself, not a wrapper script)", .out = &opt_chromium},
    {"BROWSERD_STATE_DIR", "state-dir", TK_SET_STR, "var/browserd",
     "where each browser's profile folder is made (emptied at start)", .out = &opt_state},
    {"BROWSERD_MAX_SESSIONS", "max-sessions", TK_SET_INT, "8", "live sessions at once", .min = 1,
     .max = 1000, .out = &opt_max_sessions},
    {"BROWSERD_WARM_POOL_SIZE", "warm-pool-size", TK_SET_INT, "2",
     "browsers kept launched ahead of any request", .min = 0, .max = 64, .out = &opt_pool},
    {"BROWSERD_IDLE_TTL", "idle-ttl", TK_SET_DURATION, "10m",
     "a session unused this long is released (0: never)", .min = 0, .max = 7LL * 86400 * 1000,
     .out = &opt_idle},
    {"BROWSERD_DEFAULT_TIMEOUT", "default-timeout", TK_SET_DURATION, "5m",
     "a session's lifetime when its create gives no timeout", .min = 1000,
     .max = 7LL * 86400 * 1000, .out = &opt_def_timeout},
    {"BROWSERD_MAX_TIMEOUT", "max-timeout", TK_SET_DURATION, "1h",
     "the longest timeout a create may ask", .min = 1000, .max = 7LL * 86400 * 1000,
     .out = &opt_max_timeout},
    {"BROWSERD_UID", "uid", TK_SET_INT, "61999",
     "as root: the first uid/gid of the browsers' (each its own: this + n)", .min = 1,
     .max = 2147483646, .out = &opt_uid},
    {"BROWSERD_MAX_PROCS", "max-procs", TK_SET_INT, "512",
     "process limit of each browser (RLIMIT_NPROC of its own uid)", .min = 16, .max = 1 << 20,
     .out = &opt_max_procs},
};

static tk_prog prog = {
    .metrics = 1,
    .name = "tusko-browserd",
    .summary = "the browser service (Steel API) driving Chromium",
};

/* browserd's settings, then the egress proxy's (lib/egress.h) */
static void settings_table(void)
{
    size_t n = TK_ARRAY_LEN(settings) + tk_egress_nsettings;
    tk_setting *all = tk_calloc(n, sizeof *all);
    memcpy(all, settings, sizeof settings);
    memcpy(all + TK_ARRAY_LEN(settings), tk_egress_settings,
           tk_egress_nsettings * sizeof *tk_egress_settings);
    prog.settings = all;
    prog.nsettings = n;
}

/* Each browser's proxy listener is served by the egress proxy. */
static tk_egress *egress;
static tk_egress_caps egress_caps;

static void *proxy_add(int listen_fd, const char *tag, void *ud)
{
    char t[64];
    snprintf(t, sizeof t, "browser %s", tag);
    return tk_egress_add_listener(egress, listen_fd, t, &egress_caps);
}

static void proxy_end(void *handle, void *ud)
{
    tk_egress_remove_listener(egress, handle);
}

int main(int argc, char **argv)
{
    int argi = 1;
    settings_table();
    tk_prog_init(&prog, argc, argv, &argi);
    if (argi < argc) {
        fprintf(stderr, "tusko-browserd: unexpected argument \"%s\" (see --help)\n", argv[argi]);
        return 2;
    }
    if (!opt_key) {
        fprintf(stderr, "tusko-browserd: BROWSERD_API_KEY is not set; refusing to start without "
                        "authentication\n");
        return 2;
    }
    if (strlen(opt_key) < 16) {
        fprintf(stderr, "tusko-browserd: BROWSERD_API_KEY is shorter than 16 characters\n");
        return 2;
    }
    if (opt_def_timeout > opt_max_timeout) {
        fprintf(stderr, "tusko-browserd: BROWSERD_DEFAULT_TIMEOUT is longer than "
                        "BROWSERD_MAX_TIMEOUT\n");
        return 2;
    }
    if (access(opt_chromium, X_OK) != 0) {
        fprintf(stderr, "tusko-browserd: BROWSERD_CHROMIUM %s is not an executable\n",
                opt_chromium);
        return 2;
    }
    /* profiles are named by absolute paths (Chromium starts in its own) */
    char state[PATH_MAX];
    if ((mkdir(opt_state, 0711) != 0 && errno != EEXIST) || !realpath(opt_state, state)) {
        fprintf(stderr, "tusko-browserd: BROWSERD_STATE_DIR %s: %s\n", opt_state, strerror(errno));
        return 1;
    }
    char err[512];
    static tk_ssrf_policy policy; /* outlives the proxy */
    tk_egress_config ecfg;
    if (tk_egress_from_settings(&policy, &ecfg, &egress_caps, err, sizeof err) != TK_OK) {
        fprintf(stderr, "tusko-browserd: %s\n", err);
        return 2;
    }
    egress = tk_egress_start(&ecfg, err, sizeof err);
    if (!egress) {
        fprintf(stderr, "tusko-browserd: the egress proxy: %s\n", err);
        return 1;
    }
    brd_session_config sc = {.chromium = opt_chromium,
                             .state_dir = state,
                             .uid = (uid_t)opt_uid,
                             .gid = (gid_t)opt_uid,
                             .max_procs = opt_max_procs,
                             .max_sessions = (int)opt_max_sessions,
                             .pool_size = (int)opt_pool,
                             .idle_ttl_ms = opt_idle,
                             .default_timeout_ms = opt_def_timeout,
                             .max_timeout_ms = opt_max_timeout,
                             .on_proxy = proxy_add,
                             .on_proxy_end = proxy_end};
    brd_session_mgr *mgr = brd_session_mgr_start(&sc, err, sizeof err);
    if (!mgr) {
        fprintf(stderr, "tusko-browserd: %s\n", err);
        tk_egress_stop(egress);
        return 1;
    }
    brd_api api = {.mgr = mgr, .api_key = opt_key, .max_timeout_ms = opt_max_timeout};
    size_t napi;
    const tk_route *ar = brd_api_routes(&api, &napi);
    tk_route routes[16];
    size_t n = 0;
    n += tk_prog_routes(&prog, routes, 3); /* /healthz, /readyz, /metrics */
    for (size_t i = 0; i < napi && n < TK_ARRAY_LEN(routes); i++)
        routes[n++] = ar[i];
    tk_httpd_config hc = {.listen = opt_listen, .name = "http", .auth = brd_api_auth, .ud = &api};
    tk_prog_http_config(&hc);
    tk_httpd *h = tk_httpd_start(&hc, routes, n, err, sizeof err);
    if (!h) {
        fprintf(stderr, "tusko-browserd: %s\n", err);
        brd_session_mgr_stop(mgr);
        tk_egress_stop(egress);
        return 1;
    }
    tk_info("main", "msg=\"listening\" url=%s", tk_httpd_url(h));
    tk_httpd *mh = tk_prog_metrics_start(&prog, err, sizeof err);
    if (!mh && err[0])
        tk_error("main", "msg=\"METRICS_LISTEN failed\" error=\"%s\"", err);
    int sig = tk_prog_wait();
    tk_info("main", "msg=\"stopping\" signal=%d", sig);
    if (mh)
        tk_httpd_stop(mh);
    tk_httpd_stop(h);
    brd_session_mgr_stop(mgr);
    tk_egress_stop(egress);
    tk_ssrf_policy_free(&policy);
    tk_info("main", "msg=\"stopped\"");
    tk_config_free(prog.settings, prog.nsettings);
    free(prog.settings);
    return 0;
}
