/*
 * tusko-sandboxd — the OpenSandbox lifecycle service (see docs/SANDBOXD.md).
 *
 * Runs as root (the native runtime makes namespaces, cgroups and mounts) and
 * fails closed: without SANDBOXD_API_KEY it refuses to start unless told
 * --insecure-no-auth, which it logs loudly.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/httpc.h"
#include "lib/httpd.h"
#include "lib/log.h"
#include "lib/prog.h"
#include "sandboxd/api.h"
#include "sandboxd/pool.h"
#include "sandboxd/proxy.h"
#include "sandboxd/reaper.h"
#include "sandboxd/service.h"

static char *opt_listen, *opt_key, *opt_runtime, *opt_state, *opt_image, *opt_execd;
static char *opt_ws_size, *opt_tmp_size, *opt_def_mem, *opt_def_cpu, *opt_pool_name;
static int64_t opt_pool, opt_refill_quiet, opt_refill_max, opt_idle, opt_min_timeout,
    opt_max_timeout, opt_max_sbx, opt_proxy_per_sbx, opt_def_pids, opt_max_pids;
static int opt_insecure, opt_k8s;
static char *opt_network, *opt_host_allow;

/* The service, once open, for the egress proxy's question about a sandbox's
 * own rules; until then every request is refused (fail closed). */
static sbx_service *_Atomic g_svc;

static int egress_admit(void *ud, const char *tag, const char *host, const tk_ip *addrs,
                        size_t naddrs, char *why, size_t whylen)
{
    (void)ud;
    sbx_service *svc = g_svc;
    if (!svc) {
        snprintf(why, whylen, "the service is starting");
        return 0;
    }
    return sbx_service_egress_admits(svc, tag, host, addrs, naddrs, why, whylen);
}

/* Every entry of SANDBOX_HOST_VOLUME_ALLOW: an absolute path, never "/" alone. */
static int check_host_allow(const char *v, char *msg, size_t msglen)
{
    const char *p = v;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 0 || p[0] != '/' || (n == 1 && p[0] == '/')) {
            snprintf(msg, msglen, "must be ','-separated absolute folders (not / itself)");
            return 1;
        }
        p = e ? e + 1 : p + n;
    }
    return 0;
}

static int check_network(const char *v, char *msg, size_t msglen)
{
    if (strcmp(v, "none") != 0 && strcmp(v, "proxy") != 0) {
        snprintf(msg, msglen, "must be none or proxy");
        return 1;
    }
    return 0;
}

static int check_bytes(const char *v, char *msg, size_t msglen)
{
    int64_t b;
    if (sbx_limits_parse_bytes(v, &b) != TK_OK || b < (1 << 20)) {
        snprintf(msg, msglen, "is not a size of at least 1 MiB (e.g. \"1g\", \"512Mi\")");
        return 1;
    }
    return 0;
}

static int check_cpu(const char *v, char *msg, size_t msglen)
{
    int64_t m;
    if (sbx_limits_parse_cpu(v, &m) != TK_OK || m < 10) {
        snprintf(msg, msglen, "is not a CPU quantity (e.g. \"1\", \"500m\")");
        return 1;
    }
    return 0;
}

static tk_setting settings[] = {
    {"SANDBOXD_LISTEN", "listen", TK_SET_STR, "127.0.0.1:8081",
     "address to serve on (host:port or unix:/path)", .out = &opt_listen,
     .check = tk_config_check_listen},
    {"SANDBOXD_API_KEY", "api-key", TK_SET_STR, NULL,
     "key every request must carry in OPEN-SANDBOX-API-KEY (required)",
     .flags = TK_SET_FAIL_CLOSED | TK_SET_SECRET, .out = &opt_key},
    {"SANDBOXD_INSECURE_NO_AUTH", "insecure-no-auth", TK_SET_BOOL, "false",
     "serve without an API key (development only; logged loudly)", .out = &opt_insecure},
    {"SANDBOX_RUNTIME", "runtime", TK_SET_STR, "native",
     "sandbox runtime: native, docker or kubernetes", .out = &opt_runtime},
    {"K8S_SANDBOX_ENABLED", "k8s-sandbox-enabled", TK_SET_BOOL, "false",
     "true means SANDBOX_RUNTIME=kubernetes (the product's name for it)", .out = &opt_k8s},
    {"SANDBOXD_STATE_DIR", "state-dir", TK_SET_STR, "var/sandboxd",
     "where sandbox records and execd sockets live (0700)", .out = &opt_state},
    {"SANDBOX_IMAGE_DIR", "image-dir", TK_SET_STR, "var/images/tusko-sandbox",
     "the sandbox image (images/sandbox/build.sh --print-path)", .out = &opt_image},
    {"SANDBOX_EXECD_PATH", "execd-path", TK_SET_STR, NULL,
     "host build of tusko-execd to run in sandboxes (default: next to this program)",
     .out = &opt_execd},
    {"SANDBOX_WARM_POOL_SIZE", "warm-pool-size", TK_SET_INT, "2", "ready sandboxes kept started",
     .min = 0, .max = 64, .out = &opt_pool},
    {"SANDBOX_POOL_REFILL_QUIET", "pool-refill-quiet", TK_SET_DURATION, "10ms",
     "a pool refill waits until no create, delete or proxied request has begun or ended for "
     "this long (0: refill at once)",
     .min = 0, .max = 60000, .out = &opt_refill_quiet},
    {"SANDBOX_POOL_REFILL_MAX_WAIT", "pool-refill-max-wait", TK_SET_DURATION, "1s",
     "the longest a pool refill waits for a quiet moment (an empty pool refills at once)", .min = 0,
     .max = 600000, .out = &opt_refill_max},
    {"SANDBOX_IDLE_TTL", "idle-ttl", TK_SET_DURATION, "30m",
     "a sandbox with no proxied activity for this long is reaped (0: never)", .min = 0,
     .max = 30LL * 24 * 3600 * 1000, .out = &opt_idle},
    {"SANDBOX_MIN_TIMEOUT", "min-timeout", TK_SET_INT, "60",
     "smallest timeout a request may ask (s)", .min = 1, .max = 86400, .out = &opt_min_timeout},
    {"SANDBOX_MAX_TIMEOUT", "max-timeout", TK_SET_INT, "86400",
     "largest timeout or renewal a request may ask (s)", .min = 60, .max = 30LL * 86400,
     .out = &opt_max_timeout},
    {"SANDBOXD_MAX_SANDBOXES", "max-sandboxes", TK_SET_INT, "64", "live sandboxes at once",
     .min = 1, .max = 4096, .out = &opt_max_sbx},
    {"SANDBOXD_PROXY_MAX_PER_SANDBOX", "proxy-max-per-sandbox", TK_SET_INT, "64",
     "proxied execd requests in flight at once to one sandbox (one more: 429)", .min = 1,
     .max = 512, .out = &opt_proxy_per_sbx},
    {"SANDBOX_WORKSPACE_SIZE", "workspace-size", TK_SET_STR, "1g",
     "size of each sandbox's /workspace (tmpfs; counts against its memory)", .out = &opt_ws_size,
     .check = check_bytes},
    {"SANDBOX_TMP_SIZE", "tmp-size", TK_SET_STR, "256m", "size of each sandbox's /tmp",
     .out = &opt_tmp_size, .check = check_bytes},
    {"SANDBOX_DEFAULT_MEMORY", "default-memory", TK_SET_STR, "2Gi",
     "memory limit when a request gives none (also the pool's)", .out = &opt_def_mem,
     .check = check_bytes},
    {"SANDBOX_DEFAULT_CPU", "default-cpu", TK_SET_STR, "1", "CPU limit when a request gives none",
     .out = &opt_def_cpu, .check = check_cpu},
    {"SANDBOX_DEFAULT_PIDS", "default-pids", TK_SET_INT, "512",
     "process limit when a request gives none", .min = 16, .max = 65536, .out = &opt_def_pids},
    {"SANDBOX_MAX_PIDS", "max-pids", TK_SET_INT, "4096", "largest process limit a request may ask",
     .min = 16, .max = 65536, .out = &opt_max_pids},
    {"SANDBOX_NETWORK", "network", TK_SET_STR, "proxy",
     "a sandbox's way out: proxy (only through the checking egress proxy, EGRESS_*) or none "
     "(no network at all)",
     .out = &opt_network, .check = check_network},
    {"SANDBOX_HOST_VOLUME_ALLOW", "host-volume-allow", TK_SET_STR, "",
     "host folders (','-separated absolute prefixes) that volumes[].host.path may name; empty "
     "refuses host volumes (403)",
     .out = &opt_host_allow, .check = check_host_allow},
    {"SANDBOX_POOL_NAME", "pool-name", TK_SET_STR, "default",
     "the name extensions.poolRef uses for the warm pool", .out = &opt_pool_name},
};

/* The program's settings, the egress proxy's, then each runtime's (runtime.h),
 * in one table. */
/* /readyz: a runtime is up (svc->rt) */
static int runtime_ready(char *why, size_t whylen, void *ud)
{
    const sbx_service *svc = ud;
    if (svc->rt)
        return 1;
    snprintf(why, whylen, "no sandbox runtime is ready");
    return 0;
}

static tk_prog prog = {
    .metrics = 1,
    .name = "tusko-sandboxd",
    .summary = "the OpenSandbox lifecycle service (native Linux-namespace, docker or kubernetes "
               "runtime)",
};

static void settings_table(void)
{
    size_t n = TK_ARRAY_LEN(settings) + tk_egress_nsettings;
    for (const sbx_runtime_kind *const *k = sbx_runtime_kinds; *k; k++)
        n += (*k)->nsettings;
    tk_setting *all = tk_calloc(n, sizeof *all);
    memcpy(all, settings, sizeof settings);
    size_t i = TK_ARRAY_LEN(settings);
    for (size_t j = 0; j < tk_egress_nsettings; j++)
        all[i++] = tk_egress_settings[j];
    for (const sbx_runtime_kind *const *k = sbx_runtime_kinds; *k; k++)
        for (size_t j = 0; j < (*k)->nsettings; j++)
            all[i++] = (*k)->settings[j];
    prog.settings = all;
    prog.nsettings = n;
}

static int64_t host_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    return pages > 0 && psz > 0 ? (int64_t)pages * psz : (int64_t)64 << 30;
}

int main(int argc, char **argv)
{
    int argi = 1;
    /* see tk_fd_table_reserve: grown before the first thread */
    (void)tk_fd_table_reserve(4096);
    settings_table();
    tk_prog_init(&prog, argc, argv, &argi);
    if (argi < argc) {
        fprintf(stderr, "tusko-sandboxd: unexpected argument \"%s\" (see --help)\n", argv[argi]);
        return 2;
    }
    if (!opt_key && !opt_insecure) {
        fprintf(stderr,
                "tusko-sandboxd: SANDBOXD_API_KEY is not set; refusing to start without "
                "authentication (set it, or pass --insecure-no-auth for development only)\n");
        return 2;
    }
    if (opt_key && strlen(opt_key) < 16) {
        fprintf(stderr, "tusko-sandboxd: SANDBOXD_API_KEY is shorter than 16 characters\n");
        return 2;
    }
    if (opt_insecure && !opt_key) {
        for (int i = 0; i < 3; i++)
            tk_warn("main",
                    "msg=\"INSECURE: serving WITHOUT authentication (--insecure-no-auth); anyone "
                    "who can reach this address can run code in sandboxes\"");
    }
    tk_httpc_global_init();

    char state[PATH_MAX], cwd[PATH_MAX], execd[PATH_MAX], image[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd))
        snprintf(cwd, sizeof cwd, "/");
    if (opt_state[0] == '/')
        snprintf(state, sizeof state, "%s", opt_state);
    else
        snprintf(state, sizeof state, "%s/%s", cwd, opt_state);
    if (opt_image[0] == '/')
        snprintf(image, sizeof image, "%s", opt_image);
    else
        snprintf(image, sizeof image, "%s/%s", cwd, opt_image);
    if (opt_execd) {
        snprintf(execd, sizeof execd, "%s", opt_execd);
    } else {
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        self[n > 0 ? n : 0] = '\0';
        char *slash = strrchr(self, '/');
        if (slash)
            *slash = '\0';
        snprintf(execd, sizeof execd, "%s/tusko-execd", self);
    }
    int64_t ws, tmp, defmem, defcpu;
    sbx_limits_parse_bytes(opt_ws_size, &ws);
    sbx_limits_parse_bytes(opt_tmp_size, &tmp);
    sbx_limits_parse_bytes(opt_def_mem, &defmem);
    sbx_limits_parse_cpu(opt_def_cpu, &defcpu);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    /* the kubernetes runtime keeps its own pool of warm pods (K8S_SANDBOX_WARM_POOL_SIZE),
     * shared by the sandboxd processes of one K8S_SANDBOX_POOL */
    const char *runtime = opt_k8s ? "kubernetes" : opt_runtime;
    int64_t pool = strcmp(runtime, "kubernetes") == 0 ? 0 : opt_pool;
    sbx_service_config sc = {
        .state_dir = state,
        .runtime = runtime,
        .rtc = {.image_dir = image, .execd_path = execd, .workspace_bytes = ws, .tmp_bytes = tmp},
        .pool_size = pool,
        .idle_ttl_ms = opt_idle,
        .min_timeout_s = opt_min_timeout,
        .max_timeout_s = opt_max_timeout,
        .max_sandboxes = opt_max_sbx,
        .proxy_per_sandbox = opt_proxy_per_sbx,
        .tombstone_ms = 10 * 60 * 1000,
        .policy = {.def = {.memory_bytes = defmem, .cpu_millis = defcpu, .pids = opt_def_pids},
                   .min = {.memory_bytes = 32 << 20, .cpu_millis = 10, .pids = 16},
                   .max = {.memory_bytes = host_memory(),
                           .cpu_millis = (ncpu > 0 ? ncpu : 1) * 1000,
                           .pids = opt_max_pids}},
        .pool_name = opt_pool_name,
        .pool_refill_quiet_ms = opt_refill_quiet,
        .pool_refill_max_ms = opt_refill_max,
        .host_volume_allow = opt_host_allow ? opt_host_allow : "",
    };
    char err[1024];
    /* the way out: one proxy for every sandbox, each its own listener and caps */
    tk_ssrf_policy egress_policy;
    tk_ssrf_policy_init(&egress_policy);
    tk_egress *egress = NULL;
    if (strcmp(opt_network, "proxy") == 0) {
        tk_egress_config ec;
        if (tk_egress_from_settings(&egress_policy, &ec, &sc.rtc.egress_caps, err, sizeof err) !=
            TK_OK) {
            fprintf(stderr, "tusko-sandboxd: %s\n", err);
            return 2;
        }
        ec.admit = egress_admit;
        egress = tk_egress_start(&ec, err, sizeof err);
        if (!egress) {
            fprintf(stderr, "tusko-sandboxd: %s\n", err);
            return 1;
        }
        sc.rtc.egress = egress;
    }
    sbx_service *svc = sbx_service_open(&sc, err, sizeof err);
    if (!svc) {
        fprintf(stderr, "tusko-sandboxd: %s\n", err);
        return 1;
    }
    g_svc = svc;
    sbx_reaper_start(svc);
    if (svc->rt)
        sbx_pool_start(svc);
    sbx_api api = {.svc = svc, .api_key = opt_key, .insecure_no_auth = opt_insecure && !opt_key};
    tk_prog_set_ready(runtime_ready, svc);
    tk_route routes[64];
    size_t nroutes = sbx_api_routes(&api, &prog, routes, TK_ARRAY_LEN(routes));
    tk_httpd_config hc = {
        .listen = opt_listen, .name = "http", .auth = sbx_api_auth, .ud = &api, .workers = 32};
    tk_prog_http_config(&hc);
    tk_httpd *h = tk_httpd_start(&hc, routes, nroutes, err, sizeof err);
    if (!h) {
        fprintf(stderr, "tusko-sandboxd: %s\n", err);
        g_svc = NULL;
        sbx_service_close(svc);
        return 1;
    }
    char host[256];
    const char *url = tk_httpd_url(h);
    snprintf(host, sizeof host, "%s", strncmp(url, "http://", 7) == 0 ? url + 7 : "localhost");
    api.public_host = host;
    tk_info("main", "msg=\"listening\" url=%s runtime=%s pool=%lld idle_ttl_ms=%lld state_dir=%s",
            url, runtime, (long long)pool, (long long)opt_idle, state);
    tk_httpd *mh = tk_prog_metrics_start(&prog, err, sizeof err);
    if (!mh && err[0])
        tk_error("main", "msg=\"METRICS_LISTEN failed\" error=\"%s\"", err);
    int sig = tk_prog_wait();
    tk_info("main", "msg=\"stopping\" signal=%d", sig);
    if (mh)
        tk_httpd_stop(mh);
    sbx_proxy_shutdown(3000);
    tk_httpd_stop(h);
    g_svc = NULL; /* the proxy refuses from here on */
    sbx_service_close(svc);
    tk_egress_stop(egress); /* after the sandboxes' listeners were let go */
    tk_ssrf_policy_free(&egress_policy);
    tk_config_free(prog.settings, prog.nsettings);
    free(prog.settings);
    return 0;
}
