/* The Postgres pool and migrations, against a real cluster (tests/run.sh starts
 * one and sets TK_TEST_DATABASE_URL). */
#include <sys/wait.h>

#include "lib/log.h"
#include "lib/migrate.h"
#include "lib/pg.h"
#include "tk_test.h"
#include "tk_test_pg.h"

static char dburl[512];

/* A fresh database for this test; its URL in dburl. */
static void fresh_db(const char *tag)
{
    tk_test_fresh_db(tag, dburl, sizeof dburl);
}

TEST(pg_pool_query_and_exhaustion)
{
    fresh_db("pool");
    char err[256];
    tk_pg_pool *p = tk_pg_pool_new(dburl, 2, err, sizeof err);
    CHECK(p != NULL);
    PGconn *a = tk_pg_acquire(p, 1000), *b = tk_pg_acquire(p, 1000);
    CHECK(a && b && a != b);
    CHECK(tk_pg_acquire(p, 200) == NULL); /* both in use: times out */
    const char *params[] = {"21"};
    PGresult *r = tk_pg_query(a, "SELECT $1::int * 2", 1, params);
    CHECK(tk_pg_ok(r));
    CHECK_STR(PQgetvalue(r, 0, 0), "42");
    PQclear(r);
    /* an error leaves a transaction aborted; release rolls it back */
    CHECK(tk_pg_exec(b, "BEGIN", 0, NULL) == TK_OK);
    r = tk_pg_query(b, "SELECT no_such_column", 0, NULL);
    CHECK(!tk_pg_ok(r));
    CHECK_STR(tk_pg_sqlstate(r), "42703");
    PQclear(r);
    tk_pg_release(p, b);
    PGconn *c = tk_pg_acquire(p, 1000);
    CHECK(c != NULL);
    CHECK(PQtransactionStatus(c) == PQTRANS_IDLE);
    CHECK(tk_pg_exec(c, "SELECT 1", 0, NULL) == TK_OK);
    tk_pg_release(p, c);
    tk_pg_release(p, a);
    tk_pg_pool_free(p);
}

TEST(pg_array_elem_to_the_letter_and_through_postgres)
{
    tk_buf b;
    tk_buf_init(&b, 1024);
    const char *el[] = {"a", "b\"c", "d\\e", NULL, "", "{x,y}", "NULL"};
    tk_buf_append_byte(&b, '{');
    for (size_t i = 0; i < TK_ARRAY_LEN(el); i++)
        CHECK(tk_pg_array_elem(&b, el[i], i == 0) == TK_OK);
    tk_buf_append_byte(&b, '}');
    CHECK_STR(tk_buf_cstr(&b), "{\"a\",\"b\\\"c\",\"d\\\\e\",NULL,\"\",\"{x,y}\",\"NULL\"}");
    /* Postgres reads back the same elements, NULL as NULL and "NULL" as text */
    fresh_db("arr");
    PGconn *c = PQconnectdb(dburl);
    CHECK(PQstatus(c) == CONNECTION_OK);
    const char *p[] = {tk_buf_cstr(&b)};
    PGresult *r = tk_pg_query(c, "SELECT x, x IS NULL FROM unnest($1::text[]) x", 1, p);
    CHECK(tk_pg_ok(r));
    CHECK_INT(PQntuples(r), ==, (int)TK_ARRAY_LEN(el));
    for (int i = 0; i < PQntuples(r); i++) {
        if (!el[i]) {
            CHECK_STR(PQgetvalue(r, i, 1), "t");
        } else {
            CHECK_STR(PQgetvalue(r, i, 1), "f");
            CHECK_STR(PQgetvalue(r, i, 0), el[i]);
        }
    }
    PQclear(r);
    PQfinish(c);
    /* past the cap */
    tk_buf_free(&b);
    tk_buf_init(&b, 4);
    CHECK(tk_pg_array_elem(&b, "ab", 1) == TK_OK);
    CHECK(tk_pg_array_elem(&b, "c", 0) == TK_ETOOBIG);
    tk_buf_free(&b);
}

/* A pooled connection whose server went away (a Postgres restart, a backend
 * terminated) is replaced when taken, not handed out to fail its first query. */
TEST(pg_pool_replaces_an_idle_connection_whose_server_is_gone)
{
    fresh_db("pool_gone");
    char err[256];
    tk_pg_pool *p = tk_pg_pool_new(dburl, 2, err, sizeof err);
    CHECK(p != NULL);
    PGconn *a = tk_pg_acquire(p, 1000);
    CHECK(a != NULL);
    char pid[16];
    snprintf(pid, sizeof pid, "%d", PQbackendPID(a));
    tk_pg_release(p, a);
    PGconn *killer = PQconnectdb(dburl);
    CHECK(PQstatus(killer) == CONNECTION_OK);
    const char *kp[] = {pid};
    PGresult *r = tk_pg_query(killer, "SELECT pg_terminate_backend($1::int, 5000)", 1, kp);
    CHECK(tk_pg_ok(r));
    CHECK_STR(PQgetvalue(r, 0, 0), "t");
    PQclear(r);
    PQfinish(killer);
    PGconn *b = tk_pg_acquire(p, 1000);
    CHECK(b != NULL);
    r = tk_pg_query(b, "SELECT 1", 0, NULL);
    CHECK(tk_pg_ok(r)); /* the first query on what the pool gave works */
    PQclear(r);
    CHECK(PQbackendPID(b) != atoi(pid));
    tk_pg_release(p, b);
    tk_pg_pool_free(p);
}

/* A connection whose server is gone: libpq's PQexecParams then answers NULL
 * (the command cannot be sent), which tk_pg_query turned into "fatal: out of
 * memory". Every query on it is now a failed result, and the process lives. */
TEST(pg_query_on_a_connection_whose_server_died_fails_without_aborting)
{
    fresh_db("pg_dead_conn");
    PGconn *c = PQconnectdb(dburl);
    CHECK(PQstatus(c) == CONNECTION_OK);
    char pid[16];
    snprintf(pid, sizeof pid, "%d", PQbackendPID(c));
    PGconn *killer = PQconnectdb(dburl);
    const char *kp[] = {pid};
    PGresult *r = tk_pg_query(killer, "SELECT pg_terminate_backend($1::int, 5000)", 1, kp);
    CHECK(tk_pg_ok(r));
    PQclear(r);
    PQfinish(killer);
    for (int i = 0; i < 3; i++) { /* the first sees the end; the next cannot even send */
        r = tk_pg_query(c, "SELECT 1", 0, NULL);
        CHECK(r != NULL);
        CHECK(!tk_pg_ok(r));
        PQclear(r);
        CHECK(tk_pg_exec(c, "BEGIN", 0, NULL) != TK_OK);
    }
    CHECK(PQstatus(c) == CONNECTION_BAD);
    PQfinish(c);
}

TEST(pg_bad_url_is_a_clear_error)
{
    char err[256];
    tk_pg_pool *p = tk_pg_pool_new("postgresql://nobody@%2Fnonexistent:1/x", 2, err, sizeof err);
    CHECK(p == NULL);
    CHECK(strstr(err, "cannot connect to Postgres") != NULL);
}

static const unsigned char m1[] = "CREATE TABLE a (id int PRIMARY KEY); SELECT pg_sleep(0.3);";
static const unsigned char m2[] = "CREATE TABLE b (id int REFERENCES a(id));";
static const unsigned char m3[] = "INSERT INTO a VALUES (1);";
static const unsigned char bad[] = "CREATE TABLE c (id int); SELEC broken;";

static const struct tk_embed_file good[] = {
    {"0001_a.sql", m1, sizeof m1 - 1}, {"0002_b.sql", m2, sizeof m2 - 1}, {NULL, NULL, 0}};
static const struct tk_embed_file more[] = {{"0001_a.sql", m1, sizeof m1 - 1},
                                            {"0002_b.sql", m2, sizeof m2 - 1},
                                            {"0003_c.sql", m3, sizeof m3 - 1},
                                            {NULL, NULL, 0}};
static const struct tk_embed_file broken[] = {
    {"0001_a.sql", m1, sizeof m1 - 1}, {"0002_bad.sql", bad, sizeof bad - 1}, {NULL, NULL, 0}};

TEST(pg_migrations_apply_once_in_order)
{
    fresh_db("mig");
    PGconn *c = PQconnectdb(dburl);
    CHECK(PQstatus(c) == CONNECTION_OK);
    int applied;
    char err[512];
    CHECK(tk_pg_migrate(c, good, &applied, err, sizeof err) == TK_OK);
    CHECK_INT(applied, ==, 2);
    CHECK(tk_pg_migrate(c, good, &applied, err, sizeof err) == TK_OK);
    CHECK_INT(applied, ==, 0);
    CHECK(tk_pg_migrate(c, more, &applied, err, sizeof err) == TK_OK);
    CHECK_INT(applied, ==, 1);
    PGresult *r =
        PQexec(c, "SELECT string_agg(version, ',' ORDER BY version) FROM schema_migrations");
    CHECK_STR(PQgetvalue(r, 0, 0), "0001_a.sql,0002_b.sql,0003_c.sql");
    PQclear(r);
    PQfinish(c);
}

static const unsigned char fixed[] = "CREATE TABLE c (id int);";
static const struct tk_embed_file repaired[] = {
    {"0001_a.sql", m1, sizeof m1 - 1}, {"0002_bad.sql", fixed, sizeof fixed - 1}, {NULL, NULL, 0}};

static PGresult *q1(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    if (!tk_pg_ok(r))
        TK_TEST_FAIL("%s: %s", sql, PQresultErrorMessage(r));
    return r;
}

static void check_one(PGconn *c, const char *sql, const char *want)
{
    PGresult *r = q1(c, sql);
    CHECK_STR(PQgetvalue(r, 0, 0), want);
    PQclear(r);
}

TEST(pg_failed_migration_keeps_those_before_it)
{
    fresh_db("bad");
    PGconn *c = PQconnectdb(dburl);
    int applied;
    char err[512];
    CHECK(tk_pg_migrate(c, broken, &applied, err, sizeof err) == TK_ERROR);
    CHECK_INT(applied, ==, 1);
    CHECK(strstr(err, "0002_bad.sql") != NULL);
    CHECK(strstr(err, "syntax error") != NULL);
    /* each migration is its own transaction: the first is applied and
     * recorded, nothing of the failed one is there */
    check_one(c, "SELECT string_agg(version, ',') FROM schema_migrations", "0001_a.sql");
    check_one(c, "SELECT to_regclass('a') IS NOT NULL AND to_regclass('c') IS NULL", "t");
    CHECK(PQtransactionStatus(c) == PQTRANS_IDLE);
    /* mended, a second run goes on from there */
    CHECK(tk_pg_migrate(c, repaired, &applied, err, sizeof err) == TK_OK);
    CHECK_INT(applied, ==, 1);
    check_one(c, "SELECT string_agg(version, ',' ORDER BY version) FROM schema_migrations",
              "0001_a.sql,0002_bad.sql");
    PQfinish(c);
}

static const unsigned char commits[] = "CREATE TABLE d (id int);\n-- done\n  commit ;";
static const unsigned char body_begin[] =
    "CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $fn$ BEGIN RETURN 1; END $fn$;\n"
    "/* BEGIN; */ SELECT 'COMMIT; ' AS \"begin\"; -- ROLLBACK;\nSELECT $$ END; $$;";

TEST(pg_migration_that_controls_its_transaction_is_refused)
{
    char w[16];
    CHECK(tk_migrate_transaction_control((const char *)commits, sizeof commits - 1, w, sizeof w));
    CHECK_STR(w, "COMMIT");
    /* BEGIN in a function body, a comment, a string or an identifier is not one */
    CHECK(!tk_migrate_transaction_control((const char *)body_begin, sizeof body_begin - 1, w,
                                          sizeof w));
    const char *v = "CREATE TABLE x (id int); VACUUM x;";
    CHECK(tk_migrate_transaction_control(v, strlen(v), w, sizeof w));
    CHECK_STR(w, "VACUUM");

    fresh_db("ctl");
    PGconn *c = PQconnectdb(dburl);
    const struct tk_embed_file files[] = {{"0001_ctl.sql", commits, sizeof commits - 1},
                                          {NULL, NULL, 0}};
    int applied;
    char err[512];
    CHECK(tk_pg_migrate(c, files, &applied, err, sizeof err) == TK_ERROR);
    CHECK(strstr(err, "0001_ctl.sql has a COMMIT statement") != NULL);
    /* refused before it ran: nothing of it was committed */
    check_one(c, "SELECT to_regclass('d') IS NULL", "t");
    const struct tk_embed_file ok[] = {{"0001_f.sql", body_begin, sizeof body_begin - 1},
                                       {NULL, NULL, 0}};
    CHECK(tk_pg_migrate(c, ok, &applied, err, sizeof err) == TK_OK);
    check_one(c, "SELECT f()", "1");
    PQfinish(c);
}

static const unsigned char big_table[] = "CREATE TABLE big (x int);";
static const unsigned char big_index[] =
    "-- An index on a table that may be large.\n-- locks: big\nCREATE INDEX big_x ON big (x);";

TEST(pg_locking_migration_waits_for_tusko_migrate_when_the_table_is_large)
{
    fresh_db("locks");
    PGconn *c = PQconnectdb(dburl);
    const struct tk_embed_file one[] = {{"0001_big.sql", big_table, sizeof big_table - 1},
                                        {NULL, NULL, 0}};
    const struct tk_embed_file two[] = {{"0001_big.sql", big_table, sizeof big_table - 1},
                                        {"0002_big_x.sql", big_index, sizeof big_index - 1},
                                        {NULL, NULL, 0}};
    char names[TK_MIGRATE_MAX_LOCKS][TK_MIGRATE_NAME_MAX];
    CHECK_INT(tk_migrate_locks(&two[1], names), ==, 1);
    CHECK_STR(names[0], "big");
    CHECK_INT(tk_migrate_locks(&two[0], names), ==, 0);
    int applied;
    char err[512];
    CHECK(tk_pg_migrate(c, one, &applied, err, sizeof err) == TK_OK);
    /* small: start-up applies it as it would any other */
    char sql[128];
    snprintf(sql, sizeof sql, "INSERT INTO big SELECT g FROM generate_series(1, %d) g",
             TK_MIGRATE_SMALL_ROWS);
    PQclear(q1(c, sql));
    tk_migrate_opts start = {.at_start = 1, .lock_timeout_ms = 1000};
    CHECK(tk_migrate(c, two, &start, &applied, err, sizeof err) == TK_OK);
    CHECK_INT(applied, ==, 1);
    PQclear(q1(c, "DROP INDEX big_x"));
    PQclear(q1(c, "DELETE FROM schema_migrations WHERE version = '0002_big_x.sql'"));
    /* one row more: start-up refuses, naming the migration, the table and what to do */
    PQclear(q1(c, "INSERT INTO big VALUES (0)"));
    CHECK(tk_migrate(c, two, &start, &applied, err, sizeof err) == TK_EDENIED);
    CHECK_INT(applied, ==, 0);
    CHECK(strstr(err, "0002_big_x.sql locks table big") != NULL);
    CHECK(strstr(err, "Run `tusko migrate` first") != NULL);
    check_one(c, "SELECT to_regclass('big_x') IS NULL", "t");
    tk_migration_state st[2];
    CHECK_INT(tk_migrate_status(c, two, st, err, sizeof err), ==, 2);
    CHECK(st[0].applied && !st[1].applied);
    CHECK_INT(st[1].nlocks, ==, 1);
    CHECK_INT(st[1].rows[0], ==, TK_MIGRATE_SMALL_ROWS + 1);
    /* tusko migrate applies it */
    CHECK(tk_pg_migrate(c, two, &applied, err, sizeof err) == TK_OK);
    CHECK_INT(applied, ==, 1);
    check_one(c, "SELECT to_regclass('big_x') IS NOT NULL", "t");
    /* the lock is given back: another session takes it at once */
    check_one(c, "SELECT pg_try_advisory_lock(x'7461736b6f01'::bigint)", "t");
    PQfinish(c);
}

static const unsigned char slow[] =
    "CREATE TABLE s (id int);\n"
    "SELECT pg_sleep(CASE WHEN (SELECT count(*) FROM a) = 0 THEN 60 ELSE 0 END);";

TEST(pg_migrate_killed_half_way_runs_again)
{
    fresh_db("kill");
    const struct tk_embed_file files[] = {{"0001_a.sql", m1, sizeof m1 - 1},
                                          {"0002_slow.sql", slow, sizeof slow - 1},
                                          {NULL, NULL, 0}};
    pid_t pid = fork();
    if (pid == 0) {
        PGconn *c = PQconnectdb(dburl);
        int applied;
        char err[512];
        tk_pg_migrate(c, files, &applied, err, sizeof err);
        _exit(0);
    }
    PGconn *c = PQconnectdb(dburl);
    /* until the second migration sleeps: the first is committed by then */
    for (int i = 0;; i++) {
        PGresult *r = q1(c, "SELECT count(*) FROM pg_stat_activity WHERE query LIKE "
                            "'%pg_sleep(CASE%' AND pid <> pg_backend_pid()");
        int n = atoi(PQgetvalue(r, 0, 0));
        PQclear(r);
        if (n > 0)
            break;
        CHECK_INT(i, <, 200);
        usleep(25000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    PQclear(q1(c, "INSERT INTO a VALUES (1)")); /* so the next run does not sleep */
    int applied;
    char err[512];
    /* the killed run's backend notices within seconds and rolls back, freeing
     * the lock; the rerun applies only what is missing */
    CHECK(tk_pg_migrate(c, files, &applied, err, sizeof err) == TK_OK);
    CHECK_INT(applied, ==, 1);
    check_one(c, "SELECT string_agg(version, ',' ORDER BY version) FROM schema_migrations",
              "0001_a.sql,0002_slow.sql");
    PQfinish(c);
}

TEST(pg_migrations_racing_from_several_processes)
{
    fresh_db("race");
    enum { N = 4 };
    int pipes[N][2];
    pid_t pids[N];
    for (int i = 0; i < N; i++) {
        CHECK(pipe(pipes[i]) == 0);
        pids[i] = fork();
        if (pids[i] == 0) {
            PGconn *c = PQconnectdb(dburl);
            int applied = -1;
            char err[512];
            tk_status st = tk_pg_migrate(c, more, &applied, err, sizeof err);
            int out = st == TK_OK ? applied : -1;
            if (write(pipes[i][1], &out, sizeof out) != sizeof out)
                _exit(2);
            PQfinish(c);
            _exit(0);
        }
    }
    int total = 0, winners = 0;
    for (int i = 0; i < N; i++) {
        int v = -2;
        CHECK(read(pipes[i][0], &v, sizeof v) == sizeof v);
        int status;
        waitpid(pids[i], &status, 0);
        CHECK_INT(v, >=, 0); /* nobody failed */
        total += v;
        winners += v > 0;
    }
    CHECK_INT(winners, ==, 1);
    CHECK_INT(total, ==, 3);
}

TEST_MAIN()
