/*
 * tusko-browserd — the browser service (Steel API) driving Chromium.
 */
#include <stdio.h>

#include "lib/httpd.h"
#include "lib/log.h"
#include "lib/prog.h"

static char *opt_listen;

static tk_setting settings[] = {
    {"BROWSERD_LISTEN", "listen", TK_SET_STR, "127.0.0.1:8082",
     "address to serve on (host:port or unix:/path)", .out = &opt_listen,
     .check = tk_config_check_listen},
};

static const tk_prog prog = {
    .name = "tusko-browserd",
    .summary = "the browser service (Steel API) driving Chromium",
    .settings = settings,
    .nsettings = TK_ARRAY_LEN(settings),
};

int main(int argc, char **argv)
{
    int argi = 1;
    tk_prog_init(&prog, argc, argv, &argi);
    if (argi < argc) {
        fprintf(stderr, "tusko-browserd: unexpected argument \"%s\" (see --help)\n", argv[argi]);
        return 2;
    }
    tk_route routes[] = {
        {"GET", "/healthz", tk_prog_healthz, (void *)&prog, TK_ROUTE_PUBLIC | TK_ROUTE_QUIET},
    };
    char err[512];
    tk_httpd_config hc = {.listen = opt_listen, .name = "http"};
    tk_httpd *h = tk_httpd_start(&hc, routes, TK_ARRAY_LEN(routes), err, sizeof err);
    if (!h) {
        fprintf(stderr, "tusko-browserd: %s\n", err);
        return 1;
    }
    tk_info("main", "msg=\"listening\" url=%s", tk_httpd_url(h));
    int sig = tk_prog_wait();
    tk_info("main", "msg=\"stopping\" signal=%d", sig);
    tk_httpd_stop(h);
    tk_config_free(settings, TK_ARRAY_LEN(settings));
    return 0;
}
