/*
 * tk_test_pg.h — a fresh database for a unit test, on the cluster tests/run.sh
 * starts (TK_TEST_DATABASE_URL). Include after tk_test.h.
 *
 *   char url[512];
 *   tk_test_fresh_db("mig", url, sizeof url);   // database tk_mig_<pid>, empty
 */
#ifndef TK_TEST_PG_H
#define TK_TEST_PG_H

#include <libpq-fe.h>

#include "lib/log.h"
#include "lib/pg.h"

/* Creates (after dropping) database tk_<tag>_<pid>; its URL goes to url. */
static inline void tk_test_fresh_db(const char *tag, char *url, size_t urllen)
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
    snprintf(url, urllen, "%s", base);
    char *q = strchr(url, '?');
    char tail[256] = "";
    if (q) {
        snprintf(tail, sizeof tail, "%s", q);
        *q = 0;
    }
    char *slash = strrchr(url, '/');
    snprintf(slash + 1, urllen - (size_t)(slash + 1 - url), "%s%s", name, tail);
}

#endif
