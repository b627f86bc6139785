/*
 * tusko — the chat platform: web UI, JSON+SSE API, auth, the agent loop, tools.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/embed.h"
#include "lib/httpd.h"
#include "lib/log.h"
#include "lib/pg.h"
#include "lib/prog.h"

extern const struct tk_embed_file tk_embed_sql[];

static char *opt_listen, *opt_database_url;

static tk_setting settings[] = {
    {"TUSKO_LISTEN", "listen", TK_SET_STR, "127.0.0.1:8080", "address to serve the UI and API on",
     .out = &opt_listen, .check = tk_config_check_listen},
    {"DATABASE_URL", "database-url", TK_SET_STR, NULL, "Postgres connection URL",
     .flags = TK_SET_REQUIRED | TK_SET_SECRET, .out = &opt_database_url},
};

static const tk_prog prog = {
    .name = "tusko",
    .summary = "the Tusko chat platform",
    .usage = "[command] [options]",
    .commands = "Commands:\n"
                "  serve       serve the web UI and API (the default)\n"
                "  migrate     apply database migrations and exit\n",
    .settings = settings,
    .nsettings = TK_ARRAY_LEN(settings),
};

static int migrate(tk_pg_pool *pool)
{
    char err[512];
    int applied = 0;
    PGconn *c = tk_pg_acquire(pool, 10000);
    if (!c) {
        fprintf(stderr, "tusko: no database connection\n");
        return 1;
    }
    tk_status st = tk_pg_migrate(c, tk_embed_sql, &applied, err, sizeof err);
    tk_pg_release(pool, c);
    if (st != TK_OK) {
        fprintf(stderr, "tusko: %s\n", err);
        return 1;
    }
    tk_info("db", "msg=\"schema up to date\" applied=%d", applied);
    return 0;
}

int main(int argc, char **argv)
{
    const char *cmd = "serve";
    int argi = 1;
    if (argc > 1 && argv[1][0] != '-') {
        cmd = argv[1];
        argi = 2;
    }
    tk_prog_init(&prog, argc, argv, &argi);
    if (strcmp(cmd, "serve") != 0 && strcmp(cmd, "migrate") != 0) {
        fprintf(stderr, "tusko: unknown command \"%s\" (see tusko --help)\n", cmd);
        return 2;
    }
    char err[512];
    tk_pg_pool *pool = tk_pg_pool_new(opt_database_url, 8, err, sizeof err);
    if (!pool) {
        fprintf(stderr, "tusko: DATABASE_URL: %s\n", err);
        return 1;
    }
    if (migrate(pool) != 0)
        return 1;
    if (strcmp(cmd, "migrate") == 0) {
        tk_pg_pool_free(pool);
        tk_config_free(settings, TK_ARRAY_LEN(settings));
        return 0;
    }
    tk_route routes[] = {
        {"GET", "/healthz", tk_prog_healthz, (void *)&prog, TK_ROUTE_PUBLIC | TK_ROUTE_QUIET},
    };
    tk_httpd_config hc = {.listen = opt_listen, .name = "http"};
    tk_httpd *h = tk_httpd_start(&hc, routes, TK_ARRAY_LEN(routes), err, sizeof err);
    if (!h) {
        fprintf(stderr, "tusko: %s\n", err);
        return 1;
    }
    tk_info("main", "msg=\"listening\" url=%s", tk_httpd_url(h));
    int sig = tk_prog_wait();
    tk_info("main", "msg=\"stopping\" signal=%d", sig);
    tk_httpd_stop(h);
    tk_pg_pool_free(pool);
    tk_config_free(settings, TK_ARRAY_LEN(settings));
    return 0;
}
