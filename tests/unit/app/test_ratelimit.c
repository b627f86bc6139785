/* The shared rate limit (sql/0004_ratelimit.sql, src/app/ratelimit.c) against a
 * real Postgres (tests/run.sh starts one and sets TK_TEST_DATABASE_URL). */
#include <sys/wait.h>

#include "app/app.h"
#include "app/ratelimit.h"
#include "lib/embed.h"
#include "lib/log.h"
#include "lib/pg.h"
#include "tk_test.h"
#include "tk_test_pg.h"

extern const struct tk_embed_file tk_embed_sql[];

static char dburl[512];
static app_settings cfg;
static tk_pg_pool *pool;

/* A fresh, migrated database; the app context pointing at it. */
static void setup(const char *tag, int64_t max)
{
    char t[48];
    snprintf(t, sizeof t, "rl_%s", tag);
    tk_test_fresh_db(t, dburl, sizeof dburl);
    char err[256];
    pool = tk_pg_pool_new(dburl, 4, err, sizeof err);
    if (!pool)
        TK_TEST_FAIL("pool: %s", err);
    PGconn *m = tk_pg_acquire(pool, 1000);
    int applied;
    if (tk_pg_migrate(m, tk_embed_sql, &applied, err, sizeof err) != TK_OK)
        TK_TEST_FAIL("migrate: %s", err);
    tk_pg_release(pool, m);
    cfg.chat_rate_limit_max = max;
    app_set_for_test(&cfg, pool);
}

static void sql_exec(const char *sql)
{
    PGconn *c = tk_pg_acquire(pool, 1000);
    PGresult *r = tk_pg_query(c, sql, 0, NULL);
    if (!tk_pg_ok(r))
        TK_TEST_FAIL("%s: %s", sql, PQresultErrorMessage(r));
    PQclear(r);
    tk_pg_release(pool, c);
}

static const char *U1 = "01a23000-0000-7000-8000-000000000001";
static const char *U2 = "01a23000-0000-7000-8000-000000000002";

TEST(ratelimit_exact_at_the_boundary)
{
    setup("boundary", 30);
    int retry = -1;
    for (int i = 0; i < 30; i++) {
        tk_status st = app_ratelimit_take(U1, &retry);
        if (st != TK_OK)
            TK_TEST_FAIL("request %d of 30 refused (%d)", i + 1, st);
        CHECK_INT(retry, ==, 0);
    }
    CHECK_INT(app_ratelimit_take(U1, &retry), ==, TK_EDENIED);
    CHECK_INT(retry, >=, 1);
    CHECK_INT(retry, <=, 60);
    /* refused attempts are not counted, and stay refused */
    CHECK_INT(app_ratelimit_take(U1, &retry), ==, TK_EDENIED);
    /* another user has a budget of their own */
    for (int i = 0; i < 30; i++)
        CHECK_INT(app_ratelimit_take(U2, &retry), ==, TK_OK);
    CHECK_INT(app_ratelimit_take(U2, &retry), ==, TK_EDENIED);
    tk_pg_pool_free(pool);
}

TEST(ratelimit_window_slides_and_retry_after_is_when_a_slot_frees)
{
    setup("slide", 3);
    int retry;
    for (int i = 0; i < 3; i++)
        CHECK_INT(app_ratelimit_take(U1, &retry), ==, TK_OK);
    CHECK_INT(app_ratelimit_take(U1, &retry), ==, TK_EDENIED);
    /* the oldest event is 50 s old: the next slot frees in about 10 s */
    sql_exec("UPDATE rate_events SET at = at - interval '50 seconds' WHERE ctid = "
             "(SELECT ctid FROM rate_events ORDER BY at LIMIT 1)");
    CHECK_INT(app_ratelimit_take(U1, &retry), ==, TK_EDENIED);
    CHECK_INT(retry, >=, 9);
    CHECK_INT(retry, <=, 11);
    /* once it is past the minute, exactly one more request fits */
    sql_exec("UPDATE rate_events SET at = at - interval '11 seconds' WHERE ctid = "
             "(SELECT ctid FROM rate_events ORDER BY at LIMIT 1)");
    CHECK_INT(app_ratelimit_take(U1, &retry), ==, TK_OK);
    CHECK_INT(app_ratelimit_take(U1, &retry), ==, TK_EDENIED);
    CHECK_INT(retry, >=, 55);
    tk_pg_pool_free(pool);
}

TEST(ratelimit_key_functions)
{
    setup("keys", 30);
    PGconn *c = tk_pg_acquire(pool, 1000);
    int64_t ms;
    CHECK_INT(app_ratelimit_take_key(c, "k", 2, 60000, &ms), ==, TK_OK);
    CHECK_INT(app_ratelimit_take_key(c, "k", 2, 60000, &ms), ==, TK_OK);
    CHECK_INT(app_ratelimit_take_key(c, "k", 2, 60000, &ms), ==, TK_EDENIED);
    CHECK_INT(ms, >, 58000);
    CHECK_INT(ms, <=, 60000);
    CHECK_INT(app_ratelimit_untake_key(c, "k"), ==, TK_OK);
    CHECK_INT(app_ratelimit_take_key(c, "k", 2, 60000, &ms), ==, TK_OK);
    CHECK_INT(app_ratelimit_take_key(c, "k", 2, 60000, &ms), ==, TK_EDENIED);
    CHECK_INT(app_ratelimit_reset_key(c, "k"), ==, TK_OK);
    CHECK_INT(app_ratelimit_take_key(c, "k", 2, 60000, &ms), ==, TK_OK);
    /* retry-after never exceeds the window */
    CHECK_INT(app_ratelimit_take_key(c, "short", 1, 5000, &ms), ==, TK_OK);
    CHECK_INT(app_ratelimit_take_key(c, "short", 1, 5000, &ms), ==, TK_EDENIED);
    CHECK_INT(ms, <=, 5000);
    CHECK_INT(ms, >, 0);
    tk_pg_release(pool, c);
    tk_pg_pool_free(pool);
}

/* Eight processes (as eight tusko instances, each with its own connection) race
 * for one user's budget of 30: exactly 30 win. */
TEST(ratelimit_concurrent_instances_never_overshoot)
{
    setup("burst", 30);
    enum { PROCS = 8, EACH = 10 };
    int fds[PROCS][2];
    pid_t pids[PROCS];
    for (int i = 0; i < PROCS; i++) {
        if (pipe(fds[i]) != 0)
            TK_TEST_FAIL("pipe");
        pids[i] = fork();
        if (pids[i] == 0) {
            close(fds[i][0]);
            PGconn *c = PQconnectdb(dburl);
            int ok = 0;
            for (int k = 0; k < EACH; k++) {
                int64_t ms;
                if (app_ratelimit_take_key(c, "chat:burst", 30, 60000, &ms) == TK_OK)
                    ok++;
            }
            PQfinish(c);
            if (write(fds[i][1], &ok, sizeof ok) != sizeof ok)
                _exit(2);
            _exit(0);
        }
        close(fds[i][1]);
    }
    int total = 0;
    for (int i = 0; i < PROCS; i++) {
        int ok = 0;
        if (read(fds[i][0], &ok, sizeof ok) != sizeof ok)
            TK_TEST_FAIL("child %d gave no count", i);
        close(fds[i][0]);
        int st;
        waitpid(pids[i], &st, 0);
        total += ok;
    }
    CHECK_INT(total, ==, 30);
    tk_pg_pool_free(pool);
}

TEST(ratelimit_without_a_database_is_an_error_not_a_pass)
{
    /* no connection to be had: TK_ERROR (the handler answers 503), never TK_OK */
    setup("down", 30);
    tk_pg_pool_free(pool);
    char err[256];
    pool = tk_pg_pool_new(dburl, 1, err, sizeof err);
    app_set_for_test(&cfg, pool);
    PGconn *hold = tk_pg_acquire(pool, 1000); /* the only connection: take() must give up */
    CHECK(hold != NULL);
    int retry;
    CHECK_INT(app_ratelimit_take(U1, &retry), ==, TK_ERROR);
    tk_pg_release(pool, hold);
    tk_pg_pool_free(pool);
}

TEST_MAIN()
