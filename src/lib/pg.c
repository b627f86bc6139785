#include "lib/pg.h"

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/cond.h"
#include "lib/log.h"
#include "lib/tktime.h"

struct tk_pg_pool {
    char *conninfo;
    int size, open;
    PGconn **idle;
    int nidle;
    pthread_mutex_t lock;
    pthread_cond_t cond;
};

static void notice_to_log(void *arg, const char *message)
{
    tk_debug("pg", "msg=\"notice\" text=\"%.*s\"", (int)strcspn(message, "\n"), message);
}

static PGconn *pg_connect(const char *conninfo, char *err, size_t errlen)
{
    PGconn *c = PQconnectdb(conninfo);
    if (!c)
        tk_oom();
    if (PQstatus(c) != CONNECTION_OK) {
        const char *m = PQerrorMessage(c);
        snprintf(err, errlen, "cannot connect to Postgres: %.*s", (int)strcspn(m, "\n"), m);
        PQfinish(c);
        return NULL;
    }
    PQsetNoticeProcessor(c, notice_to_log, NULL);
    return c;
}

tk_pg_pool *tk_pg_pool_new(const char *conninfo, int size, char *err, size_t errlen)
{
    PGconn *c = pg_connect(conninfo, err, errlen);
    if (!c)
        return NULL;
    tk_pg_pool *p = tk_calloc(1, sizeof *p);
    p->conninfo = tk_strdup(conninfo);
    p->size = size > 0 ? size : 8;
    p->idle = tk_calloc((size_t)p->size, sizeof *p->idle);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    p->idle[p->nidle++] = c;
    p->open = 1;
    return p;
}

void tk_pg_pool_free(tk_pg_pool *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->nidle; i++)
        PQfinish(p->idle[i]);
    free(p->idle);
    free(p->conninfo);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->cond);
    free(p);
}

/* Whether an idle connection still has its server. libpq notices a lost
 * server only when it next uses the connection, so after a Postgres restart
 * (or a backend ended by an administrator) every idle connection would fail
 * the request that takes it; an idle connection has nothing to read unless its
 * server closed it or said why it did, which one poll() without waiting sees. */
static int idle_alive(PGconn *c)
{
    if (PQstatus(c) != CONNECTION_OK)
        return 0;
    /* a closing server sends why (read as a notice) and then the end of the
     * stream, which only the next read finds */
    for (int round = 0; round < 4; round++) {
        struct pollfd pfd = {.fd = PQsocket(c), .events = POLLIN};
        if (pfd.fd < 0)
            return 0;
        if (poll(&pfd, 1, 0) <= 0)
            return 1; /* nothing waiting (or poll itself failed: use it as before) */
        if (!PQconsumeInput(c))
            return 0;
        PQisBusy(c); /* parses what came: a notice, a parameter change */
        if (PQstatus(c) != CONNECTION_OK)
            return 0;
    }
    return 1;
}

PGconn *tk_pg_acquire(tk_pg_pool *p, int timeout_ms)
{
    int64_t deadline = tk_mono_ms() + timeout_ms;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        if (p->nidle > 0) {
            PGconn *c = p->idle[--p->nidle];
            pthread_mutex_unlock(&p->lock);
            if (idle_alive(c))
                return c;
            PQreset(c);
            if (PQstatus(c) == CONNECTION_OK)
                return c;
            PQfinish(c);
            pthread_mutex_lock(&p->lock);
            p->open--;
            continue;
        }
        if (p->open < p->size) {
            p->open++;
            pthread_mutex_unlock(&p->lock);
            char err[256];
            PGconn *c = pg_connect(p->conninfo, err, sizeof err);
            if (c)
                return c;
            tk_warn("pg", "msg=\"%s\"", err);
            pthread_mutex_lock(&p->lock);
            p->open--;
            pthread_cond_signal(&p->cond);
            pthread_mutex_unlock(&p->lock);
            return NULL;
        }
        if (tk_cond_wait_until(&p->cond, &p->lock, deadline) != 0) {
            pthread_mutex_unlock(&p->lock);
            tk_warn("pg", "msg=\"no free database connection\" pool=%d", p->size);
            return NULL;
        }
    }
}

void tk_pg_release(tk_pg_pool *p, PGconn *c)
{
    if (!c)
        return;
    /* A connection left inside a transaction (an error path) is rolled back. */
    if (PQstatus(c) == CONNECTION_OK && PQtransactionStatus(c) != PQTRANS_IDLE) {
        PGresult *r = PQexec(c, "ROLLBACK");
        PQclear(r);
    }
    pthread_mutex_lock(&p->lock);
    if (PQstatus(c) != CONNECTION_OK || p->nidle >= p->size) {
        PQfinish(c);
        p->open--;
    } else {
        p->idle[p->nidle++] = c;
    }
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

PGresult *tk_pg_query(PGconn *c, const char *sql, int nparams, const char *const *params)
{
    PGresult *r = PQexecParams(c, sql, nparams, NULL, params, NULL, NULL, 0);
    if (!r) {
        /* libpq answers NULL not only out of memory but when the command
         * cannot be sent at all (the server died under the connection): a
         * failed result carrying the connection's error, as callers expect
         * (this was a "fatal: out of memory" abort when Postgres was killed) */
        r = PQmakeEmptyPGresult(c, PGRES_FATAL_ERROR);
        if (!r)
            tk_oom();
    }
    if (!tk_pg_ok(r)) {
        const char *m = PQresultErrorMessage(r);
        tk_warn("pg", "msg=\"query failed\" sql=\"%.40s\" sqlstate=%s error=\"%.*s\"", sql,
                tk_pg_sqlstate(r), (int)strcspn(m, "\n"), m);
    }
    return r;
}

int tk_pg_ok(const PGresult *r)
{
    ExecStatusType s = PQresultStatus(r);
    return s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
}

tk_status tk_pg_exec(PGconn *c, const char *sql, int nparams, const char *const *params)
{
    PGresult *r = tk_pg_query(c, sql, nparams, params);
    int ok = tk_pg_ok(r);
    PQclear(r);
    return ok ? TK_OK : TK_ERROR;
}

const char *tk_pg_sqlstate(const PGresult *r)
{
    const char *s = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    return s ? s : "";
}

tk_status tk_pg_array_elem(tk_buf *b, const char *s, int first)
{
    tk_status st = first ? TK_OK : tk_buf_append_byte(b, ',');
    if (!s)
        return st == TK_OK ? tk_buf_append_str(b, "NULL") : st;
    if (st == TK_OK)
        st = tk_buf_append_byte(b, '"');
    const char *p = s;
    while (st == TK_OK) {
        size_t n = strcspn(p, "\"\\");
        st = tk_buf_append(b, p, n);
        p += n;
        if (!*p || st != TK_OK)
            break;
        st = tk_buf_append_byte(b, '\\');
        if (st == TK_OK)
            st = tk_buf_append_byte(b, *p++);
    }
    return st == TK_OK ? tk_buf_append_byte(b, '"') : st;
}
