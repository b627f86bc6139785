/*
 * tusko — the chat platform: web UI, JSON+SSE API, auth, the agent loop, tools.
 *
 *   tusko [serve]                                   serve the UI and API (default)
 *   tusko migrate                                   apply migrations and exit
 *   tusko user add --email E [--password-stdin]     create a local account
 *   tusko token create --email E [--name N]         print a new personal API token
 *   tusko check-url URL                             would a fetch for the agent be allowed?
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/agent/agent.h"
#include "app/agent/subagent.h"
#include "app/app.h"
#include "app/auth/password.h"
#include "app/cli.h"
#include "app/durability.h"
#include "app/server.h"
#include "lib/embed.h"
#include "lib/httpc.h"
#include "lib/log.h"
#include "lib/pg.h"
#include "lib/prog.h"

extern const struct tk_embed_file tk_embed_sql[];

static tk_prog prog = {
    .name = "tusko",
    .summary = "the Tusko chat platform",
    .usage = "[command] [options]",
    .commands = "Commands:\n"
                "  serve                          serve the web UI and API (the default)\n"
                "  migrate                        apply database migrations and exit\n"
                "  user add --email E [--name N] [--password-stdin]\n"
                "                                 create a local account (password: first line "
                "of stdin)\n"
                "  token create --email E [--name N]\n"
                "                                 print a new personal API token for that user\n"
                "  check-url URL                  check URL against the outbound fetch rules "
                "(SSRF_*):\n"
                "                                 prints allowed and the addresses a fetch would "
                "use,\n"
                "                                 or refused <code>: <reason> (exit 0 / 1); "
                "fetches nothing\n",
};

/* `tusko check-url` reads only the outbound fetch settings: no database. */
static char *check_url_env[APP_SSRF_SETTINGS];
static tk_setting check_url_settings[] = {APP_SSRF_SETTINGS_TABLE(check_url_env)};
static tk_prog check_url_prog = {
    .name = "tusko check-url",
    .summary = "check a URL against the outbound fetch rules (guardrail 4) without fetching it",
    .usage = "URL",
    .settings = check_url_settings,
    .nsettings = TK_ARRAY_LEN(check_url_settings),
};

static int check_url(int argc, char **argv)
{
    int argi = 2;
    tk_prog_init(&check_url_prog, argc, argv, &argi);
    int rc = app_cli_check_url(argc - argi, argv + argi);
    tk_config_free(check_url_settings, TK_ARRAY_LEN(check_url_settings));
    return rc;
}

static int migrate(void)
{
    char err[512];
    int applied = 0;
    PGconn *c = app_db_acquire();
    if (!c) {
        fprintf(stderr, "tusko: no database connection\n");
        return 1;
    }
    tk_status st = tk_pg_migrate(c, tk_embed_sql, &applied, err, sizeof err);
    app_db_release(c);
    if (st != TK_OK) {
        fprintf(stderr, "tusko: %s\n", err);
        return 1;
    }
    tk_info("db", "msg=\"schema up to date\" applied=%d", applied);
    return 0;
}

static int serve(void)
{
    char err[512];
    tk_httpc_global_init();
    app_log_summary();
    PGconn *c = app_db_acquire();
    if (c) {
        app_durability_check(c);
        app_db_release(c);
    }
    tk_status st = agent_init(err, sizeof err);
    if (st != TK_OK) {
        /* a bad setting (e.g. a SUBAGENT_<ROLE>_MODEL outside TUSKO_MODELS)
         * exits 2, as other settings do */
        fprintf(stderr, "tusko: %s\n", err);
        return st == TK_EINVAL ? 2 : 1;
    }
    tk_httpd *h = app_server_start(&prog, err, sizeof err);
    if (!h) {
        fprintf(stderr, "tusko: %s\n", err);
        agent_shutdown();
        return 1;
    }
    tk_info("main", "msg=\"listening\" url=%s", tk_httpd_url(h));
    int sig = tk_prog_wait();
    tk_info("main", "msg=\"stopping\" signal=%d", sig);
    tk_httpd_stop(h);
    agent_shutdown();
    return 0;
}

int main(int argc, char **argv)
{
    const char *cmd = NULL;
    int argi = 1;
    if (argc > 1 && strcmp(argv[1], "check-url") == 0)
        return check_url(argc, argv);
    if (argc > 1 && argv[1][0] != '-') {
        cmd = argv[1];
        argi = 2;
    }
    /* see tk_fd_table_reserve: grown before the first thread (a chat server
     * holds a socket per client, per stream to sandboxd and per model call) */
    (void)tk_fd_table_reserve(4096);
    prog.settings = app_settings_table(&prog.nsettings);
    tk_prog_init(&prog, argc, argv, &argi);
    if (!cmd && argi < argc)
        cmd = argv[argi++];
    if (!cmd)
        cmd = "serve";
    int known = strcmp(cmd, "serve") == 0 || strcmp(cmd, "migrate") == 0 ||
                strcmp(cmd, "user") == 0 || strcmp(cmd, "token") == 0;
    if (!known) {
        fprintf(stderr, "tusko: unknown command \"%s\" (see tusko --help)\n", cmd);
        return 2;
    }
    if ((strcmp(cmd, "serve") == 0 || strcmp(cmd, "migrate") == 0) && argi < argc) {
        fprintf(stderr, "tusko %s: unexpected argument \"%s\"\n", cmd, argv[argi]);
        return 2;
    }
    char err[1024];
    app_password_init();
    tk_status st = app_init(1, err, sizeof err);
    if (st != TK_OK) {
        fprintf(stderr, "tusko: %s\n", err);
        app_settings_free();
        return st == TK_EINVAL ? 2 : 1;
    }
    /* settings that need the model allowlist are checked before anything
     * touches the database */
    if (strcmp(cmd, "serve") == 0 && agent_subagent_check_models(err, sizeof err) != TK_OK) {
        fprintf(stderr, "tusko: %s\n", err);
        app_shutdown();
        app_settings_free();
        return 2;
    }
    int rc = migrate();
    if (rc == 0) {
        if (strcmp(cmd, "serve") == 0)
            rc = serve();
        else if (strcmp(cmd, "user") == 0)
            rc = app_cli_user(argc - argi, argv + argi);
        else if (strcmp(cmd, "token") == 0)
            rc = app_cli_token(argc - argi, argv + argi);
    }
    app_shutdown();
    app_settings_free();
    return rc;
}
