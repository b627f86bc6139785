/* Every migration in sql/, applied in order on a real Postgres (tests/run.sh
 * sets TK_TEST_DATABASE_URL), is watched while it runs:
 *   - it runs in one transaction (tk_migrate refuses transaction control; here
 *     the connection must still be inside the test's transaction after it);
 *   - working through a table that existed before it — a scan (an index build,
 *     an UPDATE or DELETE of every row, a constraint's validation) or a
 *     rewrite (a new relfilenode) — takes time in proportion to the table
 *     while holding locks that stop chat's writes to it (SHARE for an index
 *     build, ACCESS EXCLUSIVE for a rewrite, the rows' locks for an UPDATE),
 *     so it must be declared by a "-- locks: TABLE" line, which makes tusko
 *     serve leave the migration to `tusko migrate` on a large table
 *     (lib/migrate.h). A declaration of a table the migration does not work
 *     through is refused too, so they stay true. A lock without such work —
 *     ACCESS EXCLUSIVE for ADD COLUMN without a volatile default or SET
 *     STORAGE, SHARE ROW EXCLUSIVE on the table a new foreign key references
 *     — is a catalog change of a moment and needs none.
 *   - running every migration again changes nothing. */
#include "app/schema.h"
#include "lib/migrate.h"
#include "tk_test.h"
#include "tk_test_pg.h"

static PGresult *q(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    if (!tk_pg_ok(r))
        TK_TEST_FAIL("%s: %s", sql, PQresultErrorMessage(r));
    return r;
}

/* the tables of the public schema as they are before a migration (the
 * scans counted so far: pg_stat_xact_ also holds earlier transactions' counts
 * until they are reported) */
static const char snapshot_sql[] =
    "CREATE TEMP TABLE pre ON COMMIT DROP AS"
    " SELECT c.oid, c.relname::text AS name, c.relfilenode, coalesce(s.seq_scan, 0) AS scans"
    " FROM pg_class c LEFT JOIN pg_stat_xact_user_tables s ON s.relid = c.oid"
    " WHERE c.relkind IN ('r', 'p', 'm') AND c.relnamespace = 'public'::regnamespace"
    "   AND c.relname <> 'schema_migrations'";

/* the tables the migration just run worked through (a scan or a rewrite), and
 * what it did and the locks it holds on them (comma-separated); a lock alone —
 * a new table's foreign key takes SHARE ROW EXCLUSIVE on the table it
 * references, ADD COLUMN takes ACCESS EXCLUSIVE — is held for a moment */
static const char observed_sql[] =
    "SELECT name, string_agg(what, ', ' ORDER BY what) FROM ("
    " SELECT p.name, 'scans' AS what FROM pg_stat_xact_user_tables s"
    "   JOIN pre p ON p.oid = s.relid WHERE s.seq_scan > p.scans"
    " UNION SELECT p.name, 'rewrites' FROM pg_class c JOIN pre p ON p.oid = c.oid"
    "   WHERE c.relfilenode <> p.relfilenode"
    " UNION SELECT p.name, 'holding ' || l.mode FROM pg_locks l JOIN pre p ON p.oid = l.relation"
    "   WHERE l.pid = pg_backend_pid() AND l.locktype = 'relation'"
    "     AND l.mode NOT IN ('AccessShareLock', 'RowShareLock')"
    ") x GROUP BY name HAVING bool_or(what IN ('scans', 'rewrites')) ORDER BY name";

static int declared(char names[][TK_MIGRATE_NAME_MAX], int n, const char *table)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], table) == 0)
            return 1;
    return 0;
}

TEST(migrations_declare_the_tables_they_lock_and_run_in_one_transaction)
{
    char url[512], err[512];
    tk_test_fresh_db("migcheck", url, sizeof url);
    PGconn *c = PQconnectdb(url);
    CHECK(PQstatus(c) == CONNECTION_OK);
    PQclear(q(c, "SET client_min_messages = warning"));
    const struct tk_embed_file none[] = {{NULL, NULL, 0}};
    int applied;
    CHECK(tk_pg_migrate(c, none, &applied, err, sizeof err) == TK_OK); /* schema_migrations */
    int problems = 0, nfiles = 0, nlocking = 0;
    for (const struct tk_embed_file *f = app_schema_files(); f->name; f++, nfiles++) {
        char names[TK_MIGRATE_MAX_LOCKS][TK_MIGRATE_NAME_MAX];
        int n = tk_migrate_locks(f, names);
        if (n < 0) {
            fprintf(stderr, "%s: a malformed \"-- locks:\" line\n", f->name);
            problems++;
            continue;
        }
        nlocking += n > 0;
        char word[16];
        if (tk_migrate_transaction_control((const char *)f->data, f->size, word, sizeof word)) {
            fprintf(stderr, "%s: has a %s statement (each migration is one transaction)\n", f->name,
                    word);
            problems++;
            continue;
        }
        PQclear(q(c, "BEGIN"));
        PQclear(q(c, snapshot_sql));
        PGresult *r = PQexec(c, (const char *)f->data);
        if (!tk_pg_ok(r))
            TK_TEST_FAIL("%s: %s", f->name, PQresultErrorMessage(r));
        PQclear(r);
        CHECK(PQtransactionStatus(c) == PQTRANS_INTRANS);
        r = q(c, observed_sql);
        int seen[TK_MIGRATE_MAX_LOCKS] = {0};
        for (int i = 0; i < PQntuples(r); i++) {
            const char *t = PQgetvalue(r, i, 0);
            int k;
            for (k = 0; k < n && strcmp(names[k], t) != 0; k++)
                ;
            if (k < n) {
                seen[k] = 1;
            } else {
                fprintf(stderr,
                        "%s: works through table %s (%s), which existed before it, without "
                        "declaring "
                        "\"-- locks: %s\" (tusko serve would run it at start-up on a large "
                        "table and stop chat meanwhile)\n",
                        f->name, t, PQgetvalue(r, i, 1), t);
                problems++;
            }
        }
        PQclear(r);
        for (int k = 0; k < n; k++)
            if (!seen[k] && !declared(names, k, names[k])) {
                fprintf(stderr,
                        "%s: declares \"-- locks: %s\" but neither scans, rewrites nor "
                        "write-locks it\n",
                        f->name, names[k]);
                problems++;
            }
        const char *p[] = {f->name};
        r = PQexecParams(c, "INSERT INTO schema_migrations (version) VALUES ($1)", 1, NULL, p, NULL,
                         NULL, 0);
        CHECK(tk_pg_ok(r));
        PQclear(r);
        PQclear(q(c, "COMMIT"));
    }
    CHECK_INT(problems, ==, 0);
    CHECK_INT(nfiles, >, 10);
    CHECK_INT(nlocking, >=, 1); /* sql/0025 builds an index on events */
    /* all recorded as tk_migrate records them: nothing left to do, twice */
    for (int round = 0; round < 2; round++) {
        CHECK(tk_pg_migrate(c, app_schema_files(), &applied, err, sizeof err) == TK_OK);
        CHECK_INT(applied, ==, 0);
    }
    PQfinish(c);
}

TEST(migrations_on_an_empty_database_all_apply_at_start_up)
{
    /* a new installation: every table is empty, so tusko serve applies even
     * the migrations that lock (nothing waits for them) */
    char url[512], err[512];
    tk_test_fresh_db("migstart", url, sizeof url);
    PGconn *c = PQconnectdb(url);
    tk_migrate_opts start = {.at_start = 1, .lock_timeout_ms = 5000};
    int applied, n = 0;
    CHECK(tk_migrate(c, app_schema_files(), &start, &applied, err, sizeof err) == TK_OK);
    for (const struct tk_embed_file *f = app_schema_files(); f->name; f++)
        n++;
    CHECK_INT(applied, ==, n);
    json_t *v = app_schema_applied(c);
    CHECK(v && json_array_size(v) == (size_t)n);
    CHECK(app_schema_check_known(v, err, sizeof err) == TK_OK);
    json_array_append_new(v, json_string("9999_from_the_future.sql"));
    CHECK(app_schema_check_known(v, err, sizeof err) == TK_EINVAL);
    CHECK(strstr(err, "9999_from_the_future.sql") != NULL);
    CHECK(strstr(err, "newer tusko") != NULL);
    json_decref(v);
    PQfinish(c);
}

TEST_MAIN()
