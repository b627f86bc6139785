/*
 * tusko — the chat platform: web UI, JSON+SSE API, auth, the agent loop, tools.
 *
 *   tusko [serve]                                   serve the UI and API (default)
 *   tusko migrate [--status]                        apply migrations and exit (or list them)
 *   tusko user add --email E [--password-stdin]     create a local account
 *   tusko token create --email E [--name N]         print a new personal API token
 *   tusko backup [--out FILE] [--schedule]          a backup archive while serving goes on
 *   tusko restore FILE [--force]                    a backup into an empty database and data folder
 *   tusko check-url URL                             would a fetch for the agent be allowed?
 *   tusko s3 check|ls|put|get|rm|uploads|abort      the snapshots' object store (S3_*)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/tools/subagent.h"
#include "app/agent_start.h"
#include "app/app.h"
#include "app/auth/password.h"
#include "app/backup.h"
#include "app/cli.h"
#include "app/durability.h"
#include "app/schema.h"
#include "app/server.h"
#include "app/settings.h"
#include "app/snapshots/snapshots.h"
#include "app/snapshots/snapshots_store.h"
#include "lib/embed.h"
#include "lib/httpc.h"
#include "lib/log.h"
#include "lib/pg.h"
#include "lib/prog.h"

static tk_prog prog = {
    .metrics = 1,
    .name = "tusko",
    .summary = "the Tusko chat platform",
    .usage = "[command] [options]",
    .commands =
        "Commands:\n"
        "  serve                          serve the web UI and API (the default)\n"
        "  migrate [--status]             apply database migrations and exit, also those\n"
        "                                 that lock large tables (tusko serve refuses\n"
        "                                 those); --status lists them, applied or "
        "pending\n"
        "  user add --email E [--name N] [--password-stdin]\n"
        "                                 create a local account (password: first line "
        "of stdin)\n"
        "  token create --email E [--name N]\n"
        "                                 print a new personal API token for that user\n"
        "  backup [--out FILE]            write a backup (the database, TUSKO_DATA_DIR's\n"
        "                                 data, a manifest with checksums) while tusko\n"
        "                                 serves; default FILE: BACKUP_DIR/tusko-<time>.tar\n"
        "  backup --schedule              take backups at BACKUP_SCHEDULE, keep BACKUP_KEEP\n"
        "  restore FILE [--force]         restore a backup into an empty database and\n"
        "                                 TUSKO_DATA_DIR (--force: replace what is there)\n"
        "  check-url URL                  check URL against the outbound fetch rules "
        "(SSRF_*):\n"
        "                                 prints allowed and the addresses a fetch would "
        "use,\n"
        "                                 or refused <code>: <reason> (exit 0 / 1); "
        "fetches nothing\n"
        "  s3 check | ls [PREFIX] | put KEY FILE | get KEY FILE | rm KEY | uploads [PREFIX]\n"
        "     | abort KEY UPLOAD_ID       the snapshots' object store (S3_* settings only)\n",
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

/* `tusko s3` reads only the store's settings: no database. */
static snapshots_config s3_cfg;
static tk_setting s3_settings[] = {SNAPSHOTS_SETTINGS(s3_cfg)};
static tk_prog s3_prog = {
    .name = "tusko s3",
    .summary = "check and use the snapshots' object store (S3_* settings)",
    .usage = "check | ls [PREFIX] | put KEY FILE | get KEY FILE | rm KEY | uploads [PREFIX] | "
             "abort KEY UPLOAD_ID",
    .settings = s3_settings,
    .nsettings = TK_ARRAY_LEN(s3_settings),
};

static int s3_cmd(int argc, char **argv)
{
    int argi = 2;
    tk_prog_init(&s3_prog, argc, argv, &argi);
    int rc = snapshots_store_cli(argc - argi, argv + argi, &s3_cfg);
    tk_config_free(s3_settings, TK_ARRAY_LEN(s3_settings));
    return rc;
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
    tk_status st = app_agent_start(err, sizeof err);
    if (st != TK_OK) {
        /* a bad setting (e.g. a SUBAGENT_<ROLE>_MODEL outside TUSKO_MODELS)
         * exits 2, as other settings do */
        fprintf(stderr, "tusko: %s\n", err);
        return st == TK_EINVAL ? 2 : 1;
    }
    tk_httpd *h = app_server_start(&prog, err, sizeof err);
    if (!h) {
        fprintf(stderr, "tusko: %s\n", err);
        app_agent_stop();
        return 1;
    }
    tk_info("main", "msg=\"listening\" url=%s", tk_httpd_url(h));
    tk_httpd *mh = tk_prog_metrics_start(&prog, err, sizeof err);
    if (!mh && err[0]) {
        fprintf(stderr, "tusko: METRICS_LISTEN: %s\n", err);
        tk_httpd_stop(h);
        app_agent_stop();
        return 1;
    }
    int sig = tk_prog_wait();
    tk_info("main", "msg=\"stopping\" signal=%d", sig);
    if (mh)
        tk_httpd_stop(mh);
    tk_httpd_stop(h);
    app_agent_stop();
    return 0;
}

static int serve_cmd(int argc, char **argv)
{
    return serve();
}

/* The commands after their settings are loaded and the database is open. */
struct command {
    const char *name;
    int own_options;   /* parses the options after its name itself */
    int migrate_first; /* applies the pending migrations first (as at start-up) */
    int (*run)(int argc, char **argv);
};
static const struct command commands[] = {
    {"serve", 0, 1, serve_cmd},
    {"migrate", 1, 0, app_cli_migrate},
    {"user", 0, 1, app_cli_user},
    {"token", 0, 1, app_cli_token},
    /* a backup takes the schema as it is; a restore needs an empty target */
    {"backup", 1, 0, app_cli_backup},
    {"restore", 1, 0, app_cli_restore},
};

/* The program's settings: app/settings.c's table, then the snapshots' rows,
 * loaded as one (so --help and flags cover both); each keeps its own rows'
 * sources (app_settings_source) and frees its own strings. */
static tk_setting *all_settings;

static void settings_join(void)
{
    size_t na, ns;
    tk_setting *a = app_settings_table(&na);
    tk_setting *s = snapshots_settings(&ns);
    all_settings = tk_calloc(na + ns, sizeof *all_settings);
    memcpy(all_settings, a, na * sizeof *a);
    memcpy(all_settings + na, s, ns * sizeof *s);
    prog.settings = all_settings;
    prog.nsettings = na + ns;
}

static void settings_split(void)
{
    size_t na, ns;
    tk_setting *a = app_settings_table(&na);
    tk_setting *s = snapshots_settings(&ns);
    for (size_t i = 0; i < na; i++)
        a[i].source = all_settings[i].source;
    for (size_t i = 0; i < ns; i++)
        s[i].source = all_settings[na + i].source;
}

static void settings_free(void)
{
    app_settings_free();
    snapshots_settings_free();
    free(all_settings);
    all_settings = NULL;
}

static const struct command *find_command(const char *name)
{
    for (size_t i = 0; i < TK_ARRAY_LEN(commands); i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

int main(int argc, char **argv)
{
    const char *cmd = NULL;
    int argi = 1;
    if (argc > 1 && strcmp(argv[1], "check-url") == 0)
        return check_url(argc, argv);
    if (argc > 1 && strcmp(argv[1], "s3") == 0)
        return s3_cmd(argc, argv);
    if (argc > 1 && argv[1][0] != '-') {
        cmd = argv[1];
        argi = 2;
    }
    const struct command *k = cmd ? find_command(cmd) : NULL;
    /* see tk_fd_table_reserve: grown before the first thread (a chat server
     * holds a socket per client, per stream to sandboxd and per model call) */
    (void)tk_fd_table_reserve(4096);
    settings_join();
    /* a command with options of its own reads everything after its name;
     * settings as flags go before it (tusko --database-url U backup --out F) */
    tk_prog_init(&prog, k && k->own_options ? 2 : argc, argv, &argi);
    settings_split();
    if (!cmd && argi < argc) {
        cmd = argv[argi++];
        k = find_command(cmd);
    }
    if (!cmd)
        k = find_command(cmd = "serve");
    if (!k) {
        fprintf(stderr, "tusko: unknown command \"%s\" (see tusko --help)\n", cmd);
        return 2;
    }
    if (strcmp(cmd, "serve") == 0 && argi < argc) {
        fprintf(stderr, "tusko %s: unexpected argument \"%s\"\n", cmd, argv[argi]);
        return 2;
    }
    char err[1024];
    app_password_init();
    tk_status st = app_init(1, err, sizeof err);
    if (st != TK_OK) {
        fprintf(stderr, "tusko: %s\n", err);
        settings_free();
        return st == TK_EINVAL ? 2 : 1;
    }
    /* settings that need the model allowlist are checked before anything
     * touches the database */
    if (strcmp(cmd, "serve") == 0 && agent_subagent_check_models(err, sizeof err) != TK_OK) {
        fprintf(stderr, "tusko: %s\n", err);
        app_shutdown();
        settings_free();
        return 2;
    }
    int rc = k->migrate_first ? app_schema_migrate_at_start() : 0;
    if (rc == 0)
        rc = k->run(argc - argi, argv + argi);
    app_shutdown();
    settings_free();
    return rc;
}
