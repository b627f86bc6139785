/*
 * events_fixture.h — the event path of a chat for a unit test: a fresh,
 * migrated database (tests/run.sh's cluster), the app context pointing at it,
 * the event threads started, and GET /api/sessions/{id}/events served on a
 * loopback port to a fixed user who owns two chats. A reader thread follows a
 * stream and keeps every byte it got. Include after tk_test.h.
 */
#ifndef TEST_EVENTS_FIXTURE_H
#define TEST_EVENTS_FIXTURE_H

#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <string.h>

#include "app/agent/bus.h"
#include "app/agent/events.h"
#include "app/agent/hub.h"
#include "app/app.h"
#include "app/auth/auth.h"
#include "lib/arena.h"
#include "lib/embed.h"
#include "lib/httpc.h"
#include "lib/httpd.h"
#include "lib/json.h"
#include "lib/pg.h"
#include "lib/tktime.h"
#include "tk_test_pg.h"

extern const struct tk_embed_file tk_embed_sql[];

#define EV_USER  "01a23000-0000-7000-8000-0000000000a1"
#define EV_CHAT  "01a23000-0000-7000-8000-0000000000c1"
#define EV_OTHER "01a23000-0000-7000-8000-0000000000c2"
#define EV_TURN  "01a23000-0000-7000-8000-0000000000f1"

static char ev_dburl[512];
static app_settings ev_cfg;
static tk_pg_pool *ev_pool;
static tk_httpd *ev_srv;
static char ev_base[64];

#define EV_UNUSED __attribute__((unused))

static int ev_auth(tk_req *r, void *ud)
{
    app_user *u = tk_arena_xalloc(tk_req_arena(r), sizeof *u);
    memset(u, 0, sizeof *u);
    snprintf(u->id, sizeof u->id, "%s", EV_USER);
    tk_req_set_user(r, u);
    return 0;
}

EV_UNUSED static void ev_sql(const char *sql)
{
    PGconn *c = tk_pg_acquire(ev_pool, 1000);
    PGresult *r = tk_pg_query(c, sql, 0, NULL);
    if (!tk_pg_ok(r))
        TK_TEST_FAIL("%s: %s", sql, PQresultErrorMessage(r));
    PQclear(r);
    tk_pg_release(ev_pool, c);
}

/* The first column of the first row of sql (a new string; "" for no row). */
EV_UNUSED static char *ev_sql_value(const char *sql)
{
    PGconn *c = tk_pg_acquire(ev_pool, 1000);
    PGresult *r = tk_pg_query(c, sql, 0, NULL);
    if (!tk_pg_ok(r))
        TK_TEST_FAIL("%s: %s", sql, PQresultErrorMessage(r));
    char *v = tk_strdup(PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "");
    PQclear(r);
    tk_pg_release(ev_pool, c);
    return v;
}

static void ev_setup(const char *tag)
{
    char t[48], err[256];
    snprintf(t, sizeof t, "ev_%s", tag);
    tk_test_fresh_db(t, ev_dburl, sizeof ev_dburl);
    ev_pool = tk_pg_pool_new(ev_dburl, 4, err, sizeof err);
    if (!ev_pool)
        TK_TEST_FAIL("pool: %s", err);
    PGconn *m = tk_pg_acquire(ev_pool, 1000);
    int applied;
    if (tk_pg_migrate(m, tk_embed_sql, &applied, err, sizeof err) != TK_OK)
        TK_TEST_FAIL("migrate: %s", err);
    tk_pg_release(ev_pool, m);
    ev_cfg.database_url = ev_dburl;
    app_set_for_test(&ev_cfg, ev_pool);
    ev_sql("INSERT INTO users (id, email) VALUES ('" EV_USER "', 'ev@example.com')");
    ev_sql("INSERT INTO chat_sessions (id, user_id) VALUES ('" EV_CHAT "', '" EV_USER
           "'), ('" EV_OTHER "', '" EV_USER "')");
    tk_httpc_global_init();
    tk_httpd_config hc = {.listen = "127.0.0.1:0", .name = "test", .auth = ev_auth};
    ev_srv = tk_httpd_start(&hc, agent_hub_routes, agent_hub_nroutes, err, sizeof err);
    if (!ev_srv)
        TK_TEST_FAIL("httpd: %s", err);
    snprintf(ev_base, sizeof ev_base, "http://127.0.0.1:%d", tk_httpd_port(ev_srv));
    if (agent_events_start(err, sizeof err) != TK_OK)
        TK_TEST_FAIL("events: %s", err);
}

/* ------------------------------------------------------------ a reader */

struct ev_reader {
    char path[256];
    char last_event_id[24]; /* "" for none */
    pthread_t th;
    pthread_mutex_t mu;
    tk_buf got;
    volatile int stop;
    int done;
    long status;
};

static int ev_reader_data(const char *d, size_t n, void *ud)
{
    struct ev_reader *r = ud;
    pthread_mutex_lock(&r->mu);
    tk_buf_append(&r->got, d, n);
    pthread_mutex_unlock(&r->mu);
    return r->stop;
}

static void *ev_reader_main(void *arg)
{
    struct ev_reader *r = arg;
    char url[400], h[64];
    snprintf(url, sizeof url, "%s%s", ev_base, r->path);
    snprintf(h, sizeof h, "Last-Event-ID: %s", r->last_event_id);
    const char *headers[] = {h, NULL};
    tk_httpc_req rq = {.url = url,
                       .headers = r->last_event_id[0] ? headers : NULL,
                       .on_data = ev_reader_data,
                       .ud = r,
                       .timeout_ms = 15000,
                       .cancel = &r->stop};
    tk_httpc_resp resp;
    tk_httpc_do(&rq, &resp);
    pthread_mutex_lock(&r->mu);
    r->status = resp.status;
    r->done = 1;
    pthread_mutex_unlock(&r->mu);
    tk_httpc_resp_free(&resp);
    return NULL;
}

/* Starts following path (with a Last-Event-ID unless lei is NULL). */
EV_UNUSED static void ev_reader_start(struct ev_reader *r, const char *path, const char *lei)
{
    memset(r, 0, sizeof *r);
    snprintf(r->path, sizeof r->path, "%s", path);
    snprintf(r->last_event_id, sizeof r->last_event_id, "%s", lei ? lei : "");
    pthread_mutex_init(&r->mu, NULL);
    tk_buf_init(&r->got, 16u << 20);
    pthread_create(&r->th, NULL, ev_reader_main, r);
}

/* What the reader has so far (a new string). */
EV_UNUSED static char *ev_reader_text(struct ev_reader *r)
{
    pthread_mutex_lock(&r->mu);
    char *s = tk_strndup(r->got.data ? r->got.data : "", r->got.len);
    pthread_mutex_unlock(&r->mu);
    return s;
}

/* Waits up to ms until the reader's bytes contain needle (or the stream ended). */
EV_UNUSED static int ev_reader_wait(struct ev_reader *r, const char *needle, int ms)
{
    for (int waited = 0; waited <= ms; waited += 10) {
        char *s = ev_reader_text(r);
        int found = strstr(s, needle) != NULL;
        free(s);
        pthread_mutex_lock(&r->mu);
        int done = r->done;
        pthread_mutex_unlock(&r->mu);
        if (found)
            return 1;
        if (done)
            return 0;
        tk_sleep_ms(10);
    }
    return 0;
}

/* Ends the stream (if it still runs) and the thread; the bytes stay readable. */
EV_UNUSED static void ev_reader_join(struct ev_reader *r)
{
    r->stop = 1;
    pthread_join(r->th, NULL);
}

EV_UNUSED static void ev_reader_free(struct ev_reader *r)
{
    tk_buf_free(&r->got);
    pthread_mutex_destroy(&r->mu);
}

/* The stream a non-following GET answers in full (a new string). */
EV_UNUSED static char *ev_get(const char *path, const char *lei)
{
    struct ev_reader r;
    ev_reader_start(&r, path, lei);
    pthread_join(r.th, NULL);
    char *s = ev_reader_text(&r);
    ev_reader_free(&r);
    return s;
}

/* The stored events of a chat as their SSE frames, in seq order, built from
 * the rows themselves (a new string). */
EV_UNUSED static char *ev_stored_frames(const char *sid)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT coalesce(string_agg(format(E'id: %%s\\nevent: %%s\\ndata: %%s\\n\\n', seq, "
             "type, data), '' ORDER BY seq), '') FROM events WHERE session_id = '%s'",
             sid);
    return ev_sql_value(sql);
}

/* Replaces every "at":"<RFC 3339>" (and "at": "<...>") with "at":"AT", in place. */
EV_UNUSED static void ev_mask_at(char *s)
{
    regex_t re;
    regcomp(&re, "\"at\": ?\"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z\"", REG_EXTENDED);
    tk_buf out;
    tk_buf_init(&out, strlen(s) + 1);
    const char *p = s;
    regmatch_t m;
    while (regexec(&re, p, 1, &m, 0) == 0) {
        tk_buf_append(&out, p, (size_t)m.rm_so);
        tk_buf_append_str(&out, "\"at\":\"AT\"");
        p += m.rm_eo;
    }
    tk_buf_append_str(&out, p);
    memcpy(s, tk_buf_cstr(&out), out.len + 1);
    tk_buf_free(&out);
    regfree(&re);
}

#endif
