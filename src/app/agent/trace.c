#include "app/agent/trace.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/app.h"
#include "app/auth/auth.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/tktime.h"

struct agent_span {
    agent_trace *t;
    char id[TK_UUID_LEN];
    char parent[TK_UUID_LEN];
    char kind[24];
    char name[96];
    char status[12];
    int64_t start_wall_ms;
    int64_t start_ns;
    double duration_ms;
    json_t *attrs;
    int ended, stored;
    agent_span *next;
};

struct agent_trace {
    pthread_mutex_t lock;
    char turn_id[TK_UUID_LEN];
    agent_span *spans; /* newest first */
};

agent_trace *agent_trace_new(const char *turn_id)
{
    agent_trace *t = tk_calloc(1, sizeof *t);
    pthread_mutex_init(&t->lock, NULL);
    snprintf(t->turn_id, sizeof t->turn_id, "%s", turn_id);
    return t;
}

void agent_trace_free(agent_trace *t)
{
    if (!t)
        return;
    agent_span *s = t->spans;
    while (s) {
        agent_span *n = s->next;
        json_decref(s->attrs);
        free(s);
        s = n;
    }
    pthread_mutex_destroy(&t->lock);
    free(t);
}

agent_span *agent_span_begin(agent_trace *t, const char *parent_id, const char *kind,
                             const char *name)
{
    agent_span *s = tk_calloc(1, sizeof *s);
    s->t = t;
    tk_uuid7(s->id);
    snprintf(s->parent, sizeof s->parent, "%s", parent_id ? parent_id : "");
    snprintf(s->kind, sizeof s->kind, "%s", kind);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->start_wall_ms = tk_now_ms();
    s->start_ns = tk_mono_ns();
    s->attrs = json_object();
    pthread_mutex_lock(&t->lock);
    s->next = t->spans;
    t->spans = s;
    pthread_mutex_unlock(&t->lock);
    return s;
}

const char *agent_span_id(const agent_span *s)
{
    return s->id;
}

void agent_span_attr(agent_span *s, const char *key, json_t *v)
{
    pthread_mutex_lock(&s->t->lock);
    json_object_set_new(s->attrs, key, v ? v : json_null());
    pthread_mutex_unlock(&s->t->lock);
}

void agent_span_attrs(agent_span *s, json_t *attrs)
{
    if (!attrs)
        return;
    pthread_mutex_lock(&s->t->lock);
    if (json_is_object(attrs))
        json_object_update(s->attrs, attrs);
    pthread_mutex_unlock(&s->t->lock);
    json_decref(attrs);
}

double agent_span_end(agent_span *s, const char *status)
{
    pthread_mutex_lock(&s->t->lock);
    if (!s->ended) {
        s->duration_ms = (double)(tk_mono_ns() - s->start_ns) / 1e6;
        snprintf(s->status, sizeof s->status, "%s", status ? status : "ok");
        s->ended = 1;
    }
    double d = s->duration_ms;
    pthread_mutex_unlock(&s->t->lock);
    return d;
}

void agent_span_record(agent_trace *t, const char *parent_id, const char *kind, const char *name,
                       int64_t start_ms, double duration_ms, const char *status, json_t *attrs)
{
    agent_span *s = agent_span_begin(t, parent_id, kind, name);
    pthread_mutex_lock(&t->lock);
    s->start_wall_ms = start_ms;
    s->duration_ms = duration_ms;
    snprintf(s->status, sizeof s->status, "%s", status ? status : "ok");
    if (json_is_object(attrs))
        json_object_update(s->attrs, attrs);
    s->ended = 1;
    pthread_mutex_unlock(&t->lock);
    json_decref(attrs);
}

char *agent_trace_take_pending(agent_trace *t)
{
    json_t *rows = json_array();
    pthread_mutex_lock(&t->lock);
    for (agent_span *s = t->spans; s; s = s->next) {
        if (!s->ended || s->stored)
            continue;
        char at[40];
        tk_time_rfc3339(s->start_wall_ms, at, sizeof at);
        json_array_append_new(
            rows, tk_json_obj("id", json_string(s->id), "parent_id",
                              s->parent[0] ? json_string(s->parent) : json_null(), "kind",
                              json_string(s->kind), "name", json_string(s->name), "status",
                              json_string(s->status), "started_at", json_string(at), "duration_ms",
                              json_real(s->duration_ms), "attrs", json_deep_copy(s->attrs), NULL));
        s->stored = 1;
    }
    pthread_mutex_unlock(&t->lock);
    char *js = json_array_size(rows) ? tk_json_dumps(rows) : NULL;
    json_decref(rows);
    return js;
}

tk_status agent_trace_store(agent_trace *t, PGconn *c)
{
    char *js = agent_trace_take_pending(t);
    if (!js)
        return TK_OK;
    const char *p[] = {t->turn_id, js};
    tk_status st = tk_pg_exec(c, "SELECT tusko_spans_add($1, $2::jsonb)", 2, p);
    if (st != TK_OK)
        tk_warn("trace", "msg=\"spans not stored\" turn=%s", t->turn_id);
    free(js);
    return st;
}

/* ---------- GET /api/turns/{id}/trace ---------- */

static void h_trace(tk_req *r, void *ud)
{
    const char *id = tk_req_param(r, "id");
    if (!tk_uuid_valid(id)) {
        tk_respond_error(r, 404, "NOT_FOUND", "no such turn");
        return;
    }
    PGconn *c = app_db_acquire();
    if (!c) {
        app_respond_db_unavailable(r);
        return;
    }
    const char *p[] = {id, app_req_user(r)->id};
    PGresult *t = tk_pg_query(c,
                              "SELECT (to_jsonb(t) - 'user_id' - 'instance_id')::text FROM turns t "
                              "WHERE id = $1 AND user_id = $2",
                              2, p);
    if (!tk_pg_ok(t)) {
        app_respond_db_unavailable(r);
    } else if (PQntuples(t) != 1) {
        tk_respond_error(r, 404, "NOT_FOUND", "no such turn");
    } else {
        PGresult *s =
            tk_pg_query(c,
                        "SELECT coalesce(jsonb_agg((to_jsonb(s) - 'turn_id') ORDER BY "
                        "s.started_at, s.id), '[]')::text FROM spans s WHERE turn_id = $1",
                        1, p);
        if (!tk_pg_ok(s)) {
            app_respond_db_unavailable(r);
        } else {
            json_t *turn = json_loads(PQgetvalue(t, 0, 0), 0, NULL);
            json_t *spans = json_loads(PQgetvalue(s, 0, 0), 0, NULL);
            tk_respond_json(r, 200,
                            tk_json_obj("turn", turn ? turn : json_object(), "spans",
                                        spans ? spans : json_array(), NULL));
        }
        PQclear(s);
    }
    PQclear(t);
    app_db_release(c);
}

const tk_route agent_trace_routes[] = {
    {"GET", "/api/turns/{id}/trace", h_trace, NULL, TK_ROUTE_BLOCKING},
};
const size_t agent_trace_nroutes = TK_ARRAY_LEN(agent_trace_routes);
