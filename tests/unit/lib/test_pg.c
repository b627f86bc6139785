/* The Postgres pool and migrations, against a real cluster (tests/run.sh starts
 * one and sets TK_TEST_DATABASE_URL). */
#include <sys/wait.h>

#include "lib/log.h"
#include "lib/pg.h"
#include "tk_test.h"

static char dburl[512];

/* A fresh database for this test; its URL in dburl. */
static void fresh_db(const char *tag)
{
    const char *base = getenv("TK_TEST_DATABASE_URL");
    if (!base || !*base)
        TK_TEST_FAIL("TK_TEST_DATABASE_URL is not set (tests/run.sh starts a cluster and sets it)");
    tk_log_set_level(TK_LOG_ERROR);
    PGconn *c = PQconnectdb(base);
    if (PQstatus(c) != CONNECTION_OK)
        TK_TEST_FAIL("connect %s: %s", base, PQerrorMessage(c));
    char name[64], sql[160];
    snprintf(name, sizeof name, "tk_%s_%d", tag, getpid());
    PQclear(PQexec(c, "SET client_min_messages = warning"));
    snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s", name);
    PQclear(PQexec(c, sql));
    snprintf(sql, sizeof sql, "CREATE DATABASE %s", name);
    PGresult *r = PQexec(c, sql);
    if (!tk_pg_ok(r))
        TK_TEST_FAIL("%s: %s", sql, PQresultErrorMessage(r));
    PQclear(r);
    PQfinish(c);
    /* same server, other database: replace the path's last segment */
    snprintf(dburl, sizeof dburl, "%s", base);
    char *q = strchr(dburl, '?');
    char tail[256] = "";
    if (q) {
        snprintf(tail, sizeof tail, "%s", q);
        *q = 0;
    }
    char *slash = strrchr(dburl, '/');
    snprintf(slash + 1, sizeof dburl - (size_t)(slash + 1 - dburl), "%s%s", name, tail);
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

TEST(pg_failed_migration_rolls_back_everything)
{
    fresh_db("bad");
    PGconn *c = PQconnectdb(dburl);
    int applied;
    char err[512];
    CHECK(tk_pg_migrate(c, broken, &applied, err, sizeof err) == TK_ERROR);
    CHECK_INT(applied, ==, 0);
    CHECK(strstr(err, "0002_bad.sql") != NULL);
    /* not even the good first migration was kept */
    PGresult *r =
        PQexec(c, "SELECT to_regclass('a') IS NULL, to_regclass('schema_migrations') IS NULL");
    CHECK_STR(PQgetvalue(r, 0, 0), "t");
    CHECK_STR(PQgetvalue(r, 0, 1), "t");
    PQclear(r);
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
