#include "app/schema.h"

#include <stdio.h>
#include <string.h>

#include "app/app.h"
#include "lib/log.h"
#include "lib/migrate.h"
#include "lib/pg.h"

extern const struct tk_embed_file tk_embed_sql[];

/* how long a start-up migration waits for a table lock (a busy old instance) */
#define START_LOCK_TIMEOUT_MS 15000

const struct tk_embed_file *app_schema_files(void)
{
    return tk_embed_sql;
}

static int run(const tk_migrate_opts *o)
{
    char err[768];
    int applied = 0;
    PGconn *c = app_db_acquire();
    if (!c) {
        fprintf(stderr, "tusko: no database connection\n");
        return 1;
    }
    tk_status st = tk_migrate(c, tk_embed_sql, o, &applied, err, sizeof err);
    app_db_release(c);
    if (st != TK_OK) {
        if (applied)
            fprintf(stderr, "tusko: %d migration(s) applied before this one\n", applied);
        fprintf(stderr, "tusko: %s\n", err);
        return 1;
    }
    tk_info("db", "msg=\"schema up to date\" applied=%d", applied);
    return 0;
}

int app_schema_migrate_at_start(void)
{
    tk_migrate_opts o = {.at_start = 1, .lock_timeout_ms = START_LOCK_TIMEOUT_MS};
    return run(&o);
}

static int status(void)
{
    size_t n = 0;
    while (tk_embed_sql[n].name)
        n++;
    tk_migration_state *s = tk_calloc(n ? n : 1, sizeof *s);
    char err[256];
    PGconn *c = app_db_acquire();
    if (!c) {
        fprintf(stderr, "tusko: no database connection\n");
        free(s);
        return 1;
    }
    int got = tk_migrate_status(c, tk_embed_sql, s, err, sizeof err);
    app_db_release(c);
    if (got < 0) {
        fprintf(stderr, "tusko migrate: %s\n", err);
        free(s);
        return 1;
    }
    int pending = 0, locking = 0;
    for (int i = 0; i < got; i++) {
        printf("%-8s %s", s[i].applied ? "applied" : "pending", s[i].name);
        pending += !s[i].applied;
        for (int k = 0; k < s[i].nlocks; k++) {
            printf("%s%s", k ? ", " : "  locks ", s[i].locks[k]);
            if (!s[i].applied && s[i].rows[k] > TK_MIGRATE_SMALL_ROWS) {
                printf(" (over %d rows: run tusko migrate before starting)", TK_MIGRATE_SMALL_ROWS);
                locking++;
            } else if (!s[i].applied && s[i].rows[k] >= 0) {
                printf(" (%lld rows)", s[i].rows[k]);
            }
        }
        printf("\n");
    }
    printf("%d pending%s\n", pending,
           locking ? "; some lock large tables: tusko serve will not apply them" : "");
    free(s);
    return 0;
}

int app_cli_migrate(int argc, char **argv)
{
    if (argc == 1 && strcmp(argv[0], "--status") == 0)
        return status();
    if (argc > 0) {
        fprintf(stderr, "usage: tusko migrate [--status]\n");
        return 2;
    }
    return run(NULL);
}

json_t *app_schema_applied(PGconn *c)
{
    PGresult *r = tk_pg_query(c,
                              "SELECT CASE WHEN to_regclass('schema_migrations') IS NULL"
                              " THEN '[]'::json ELSE (SELECT coalesce(json_agg(version"
                              " ORDER BY version), '[]') FROM schema_migrations) END",
                              0, NULL);
    json_t *v = NULL;
    if (tk_pg_ok(r))
        v = json_loads(PQgetvalue(r, 0, 0), 0, NULL);
    PQclear(r);
    return v;
}

tk_status app_schema_check_known(const json_t *applied, char *err, size_t errlen)
{
    if (!json_is_array(applied)) {
        snprintf(err, errlen, "the list of applied migrations is not an array");
        return TK_EINVAL;
    }
    size_t i;
    const json_t *v;
    json_array_foreach(applied, i, v)
    {
        const char *name = json_string_value(v);
        if (!name || !tk_embed_find(tk_embed_sql, name)) {
            snprintf(err, errlen,
                     "the database has migration %s, which this tusko does not know: it comes "
                     "from a newer tusko (use that version or a later one)",
                     name ? name : "(not a string)");
            return TK_EINVAL;
        }
    }
    return TK_OK;
}
