#include "app/sessions.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/app.h"
#include "app/auth/auth.h"
#include "app/models.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/pg.h"
#include "lib/utf8.h"

#define LIST_DEFAULT     50
#define LIST_MAX         200
#define MESSAGES_DEFAULT 200
#define MESSAGES_MAX     1000

static struct {
    app_session_deleted_fn fn;
    void *ud;
} hooks[8];
static size_t nhooks;

void app_sessions_on_delete(app_session_deleted_fn fn, void *ud)
{
    TK_ASSERT(nhooks < TK_ARRAY_LEN(hooks));
    hooks[nhooks].fn = fn;
    hooks[nhooks].ud = ud;
    nhooks++;
}

tk_status app_session_owned(PGconn *c, const char *user_id, const char *session_id)
{
    if (!session_id || !tk_uuid_valid(session_id))
        return TK_ENOENT;
    const char *p[] = {session_id, user_id};
    PGresult *r =
        tk_pg_query(c, "SELECT 1 FROM chat_sessions WHERE id = $1 AND user_id = $2", 2, p);
    tk_status st = !tk_pg_ok(r) ? TK_ERROR : PQntuples(r) == 1 ? TK_OK : TK_ENOENT;
    PQclear(r);
    return st;
}

static void respond_not_found(tk_req *r)
{
    tk_respond_error(r, 404, "NOT_FOUND", "no such chat session");
}

const char *app_req_session(tk_req *r, PGconn *c)
{
    const char *id = tk_req_param(r, "id");
    tk_status st = app_session_owned(c, app_req_user(r)->id, id);
    if (st == TK_OK)
        return id;
    if (st == TK_ERROR)
        app_respond_db_unavailable(r);
    else
        respond_not_found(r);
    return NULL;
}

tk_status app_session_touch(PGconn *c, const char *session_id)
{
    const char *p[] = {session_id};
    return tk_pg_exec(c, "UPDATE chat_sessions SET updated_at = now() WHERE id = $1", 1, p);
}

tk_status app_message_add(PGconn *c, const char *session_id, const char *role, const char *content,
                          char id[TK_UUID_LEN])
{
    tk_uuid7(id);
    const char *p[] = {id, session_id, role, content};
    return tk_pg_exec(
        c, "INSERT INTO messages (id, session_id, role, content) VALUES ($1, $2, $3, $4)", 4, p);
}

int app_sessions_retention_sweep(PGconn *c, int64_t retention_ms, int max)
{
    char secs[32], lim[16];
    snprintf(secs, sizeof secs, "%.3f", (double)retention_ms / 1000.0);
    snprintf(lim, sizeof lim, "%d", max);
    const char *p[] = {secs, lim};
    /* SKIP LOCKED: instances sweeping at once take different chats */
    PGresult *r = tk_pg_query(
        c,
        "DELETE FROM chat_sessions WHERE id IN (SELECT s.id FROM chat_sessions s WHERE "
        "s.updated_at < now() - make_interval(secs => $1::double precision) AND NOT EXISTS "
        "(SELECT 1 FROM turns t WHERE t.session_id = s.id AND t.state IN ('queued', 'running')) "
        "ORDER BY s.updated_at LIMIT $2::int FOR UPDATE SKIP LOCKED) RETURNING id, user_id",
        2, p);
    if (!tk_pg_ok(r)) {
        PQclear(r);
        return -1;
    }
    int n = PQntuples(r);
    for (int i = 0; i < n; i++) {
        const char *sid = PQgetvalue(r, i, 0), *uid = PQgetvalue(r, i, 1);
        tk_info("sessions",
                "msg=\"chat session deleted: not touched within CHAT_RETENTION\" "
                "session=%s user=%s",
                sid, uid);
        for (size_t k = 0; k < nhooks; k++)
            hooks[k].fn(sid, uid, hooks[k].ud);
    }
    PQclear(r);
    return n;
}

/* ---------- handlers ---------- */

/* Parses the JSON text of column 0 of each row into an array. */
static json_t *rows_json(PGresult *res)
{
    json_t *arr = json_array();
    for (int i = 0; i < PQntuples(res); i++) {
        json_t *j = json_loads(PQgetvalue(res, i, 0), JSON_DECODE_ANY, NULL);
        if (j)
            json_array_append_new(arr, j);
    }
    return arr;
}

/* Answers a page of a query that asked for limit + 1 rows of JSON text:
 * {key: [the first limit], "has_more": whether there was one more}; 503 when
 * the query failed. */
static void respond_page(tk_req *r, PGresult *res, const char *key, int64_t limit)
{
    if (!tk_pg_ok(res)) {
        app_respond_db_unavailable(r);
        return;
    }
    json_t *arr = rows_json(res);
    int more = json_array_size(arr) > (size_t)limit;
    if (more)
        json_array_remove(arr, (size_t)limit);
    tk_respond_json(r, 200, tk_json_obj(key, arr, "has_more", json_boolean(more), NULL));
}

/* For a route on the session {id}: a connection, or NULL after answering 404
 * (id not a UUID) or 503. */
static PGconn *acquire_for(tk_req *r, const char *id)
{
    if (!tk_uuid_valid(id)) {
        respond_not_found(r);
        return NULL;
    }
    PGconn *c = app_db_acquire();
    if (!c)
        app_respond_db_unavailable(r);
    return c;
}

/* Answers a query for the caller's one session row: 200 with it, 404 when
 * there is none, 503 when the query failed. */
static void respond_row(tk_req *r, PGconn *c, const char *sql, int n, const char *const *p)
{
    PGresult *res = tk_pg_query(c, sql, n, p);
    if (!tk_pg_ok(res))
        app_respond_db_unavailable(r);
    else if (PQntuples(res) != 1)
        respond_not_found(r);
    else
        tk_respond_json(r, 200, json_loads(PQgetvalue(res, 0, 0), 0, NULL));
    PQclear(res);
}

/* Validates the optional "title" and "model" of a body. On a bad value responds
 * 400 and returns non-zero. *title / *model stay NULL when absent. */
static int read_fields(tk_req *r, json_t *body, const char **title, const char **model)
{
    *title = *model = NULL;
    if (!body)
        return 0;
    if (!json_is_object(body)) {
        tk_respond_error(r, 400, "INVALID_REQUEST", "the body must be a JSON object");
        return 1;
    }
    json_t *t = json_object_get(body, "title");
    if (t && !json_is_null(t)) {
        if (!json_is_string(t)) {
            tk_respond_error(r, 400, "INVALID_REQUEST", "\"title\" must be a string");
            return 1;
        }
        const char *s = json_string_value(t);
        size_t len = json_string_length(t);
        long chars = tk_utf8_count(s, len);
        if (chars < 1 || chars > APP_TITLE_MAX || memchr(s, 0, len)) {
            tk_respond_error(r, 400, "INVALID_REQUEST", "\"title\" must be 1 to %d characters",
                             APP_TITLE_MAX);
            return 1;
        }
        for (size_t i = 0; i < len; i++) {
            unsigned char ch = (unsigned char)s[i];
            if (ch < 0x20 || ch == 0x7f) {
                tk_respond_error(r, 400, "INVALID_REQUEST",
                                 "\"title\" must not contain control characters");
                return 1;
            }
        }
        *title = s;
    }
    json_t *m = json_object_get(body, "model");
    if (m && !json_is_null(m)) {
        const app_model *am = json_is_string(m) ? app_models_find(json_string_value(m)) : NULL;
        if (!am || !json_string_length(m)) {
            tk_respond_error(r, 400, "MODEL_NOT_ALLOWED",
                             "\"model\" must be one of GET /api/models");
            return 1;
        }
        *model = am->id;
    }
    return 0;
}

static const char *SESSION_JSON = "(to_jsonb(s) - 'user_id')::text";

static void h_create(tk_req *r, void *ud)
{
    json_t *body = tk_req_json(r, 1);
    if (!body && tk_req_responded(r))
        return;
    const char *title, *model;
    if (read_fields(r, body, &title, &model) != 0)
        return;
    PGconn *c = app_db_acquire();
    if (!c) {
        app_respond_db_unavailable(r);
        return;
    }
    char id[TK_UUID_LEN];
    tk_uuid7(id);
    const char *p[] = {id, app_req_user(r)->id, title ? title : "New chat", model};
    char sql[256];
    snprintf(sql, sizeof sql,
             "INSERT INTO chat_sessions AS s (id, user_id, title, model) VALUES ($1, $2, $3, $4) "
             "RETURNING %s",
             SESSION_JSON);
    PGresult *res = tk_pg_query(c, sql, 4, p);
    if (!tk_pg_ok(res) || PQntuples(res) != 1) {
        app_respond_db_unavailable(r);
    } else {
        json_t *j = json_loads(PQgetvalue(res, 0, 0), 0, NULL);
        char loc[80];
        snprintf(loc, sizeof loc, "/api/sessions/%s", id);
        tk_respond_header(r, "Location", loc);
        tk_respond_json(r, 201, j ? j : json_object());
    }
    PQclear(res);
    app_db_release(c);
}

static int64_t query_int(tk_req *r, const char *name, int64_t def, int64_t min, int64_t max,
                         int *bad)
{
    const char *v = tk_req_query(r, name);
    int64_t x = def;
    if (v && tk_parse_i64(v, min, max, &x) != TK_OK) {
        tk_respond_error(r, 400, "INVALID_REQUEST", "\"%s\" must be an integer from %lld to %lld",
                         name, (long long)min, (long long)max);
        *bad = 1;
    }
    return x;
}

static void h_list(tk_req *r, void *ud)
{
    int bad = 0;
    int64_t limit = query_int(r, "limit", LIST_DEFAULT, 1, LIST_MAX, &bad);
    int64_t offset = bad ? 0 : query_int(r, "offset", 0, 0, 1000000, &bad);
    if (bad)
        return;
    /* q: chats whose title contains it, ignoring case (the sidebar's search
     * reaches chats beyond the first page) */
    const char *q = tk_req_query(r, "q");
    if (q && !*q)
        q = NULL;
    if (q) {
        long n = tk_utf8_count(q, strlen(q));
        if (n < 0 || n > APP_TITLE_MAX) {
            tk_respond_error(r, 400, "INVALID_REQUEST",
                             "\"q\" must be UTF-8 text of at most %d characters", APP_TITLE_MAX);
            return;
        }
    }
    PGconn *c = app_db_acquire();
    if (!c) {
        app_respond_db_unavailable(r);
        return;
    }
    char sl[24], so[24];
    snprintf(sl, sizeof sl, "%lld", (long long)limit + 1);
    snprintf(so, sizeof so, "%lld", (long long)offset);
    const char *p[] = {app_req_user(r)->id, sl, so, q};
    char sql[400];
    snprintf(sql, sizeof sql,
             "SELECT %s FROM chat_sessions s WHERE user_id = $1 "
             "AND ($4::text IS NULL OR strpos(lower(title), lower($4)) > 0) "
             "ORDER BY updated_at DESC, id DESC LIMIT $2 OFFSET $3",
             SESSION_JSON);
    PGresult *res = tk_pg_query(c, sql, 4, p);
    respond_page(r, res, "sessions", limit);
    PQclear(res);
    app_db_release(c);
}

static void h_get(tk_req *r, void *ud)
{
    const char *id = tk_req_param(r, "id");
    PGconn *c = acquire_for(r, id);
    if (!c)
        return;
    const char *p[] = {id, app_req_user(r)->id};
    char sql[200];
    snprintf(sql, sizeof sql, "SELECT %s FROM chat_sessions s WHERE id = $1 AND user_id = $2",
             SESSION_JSON);
    respond_row(r, c, sql, 2, p);
    app_db_release(c);
}

static void h_patch(tk_req *r, void *ud)
{
    const char *id = tk_req_param(r, "id");
    json_t *body = tk_req_json(r, 0);
    if (!body)
        return;
    const char *title, *model;
    if (read_fields(r, body, &title, &model) != 0)
        return;
    int clear_model = json_is_null(json_object_get(body, "model"));
    if (!title && !model && !clear_model) {
        tk_respond_error(r, 400, "INVALID_REQUEST", "give \"title\" and/or \"model\" to change");
        return;
    }
    PGconn *c = acquire_for(r, id);
    if (!c)
        return;
    const char *p[] = {id, app_req_user(r)->id, title, model, clear_model ? "1" : "0"};
    char sql[400];
    snprintf(sql, sizeof sql,
             "UPDATE chat_sessions AS s SET title = coalesce($3, title), "
             "model = CASE WHEN $5 = '1' THEN NULL ELSE coalesce($4, model) END, "
             "updated_at = now() WHERE id = $1 AND user_id = $2 RETURNING %s",
             SESSION_JSON);
    respond_row(r, c, sql, 5, p);
    app_db_release(c);
}

static void h_delete(tk_req *r, void *ud)
{
    const char *id = tk_req_param(r, "id");
    const app_user *u = app_req_user(r);
    PGconn *c = acquire_for(r, id);
    if (!c)
        return;
    const char *p[] = {id, u->id};
    PGresult *res =
        tk_pg_query(c, "DELETE FROM chat_sessions WHERE id = $1 AND user_id = $2", 2, p);
    int ok = tk_pg_ok(res), n = ok ? (int)strtol(PQcmdTuples(res), NULL, 10) : 0;
    PQclear(res);
    app_db_release(c);
    if (!ok) {
        app_respond_db_unavailable(r);
        return;
    }
    if (n != 1) {
        respond_not_found(r);
        return;
    }
    tk_info("sessions", "msg=\"chat session deleted\" session=%s user=%s", id, u->id);
    for (size_t i = 0; i < nhooks; i++)
        hooks[i].fn(id, u->id, hooks[i].ud);
    tk_respond_empty(r, 204);
}

static void h_messages(tk_req *r, void *ud)
{
    int bad = 0;
    int64_t limit = query_int(r, "limit", MESSAGES_DEFAULT, 1, MESSAGES_MAX, &bad);
    int64_t after = bad ? 0 : query_int(r, "after", 0, 0, INT64_MAX, &bad);
    if (bad)
        return;
    PGconn *c = app_db_acquire();
    if (!c) {
        app_respond_db_unavailable(r);
        return;
    }
    const char *sid = app_req_session(r, c);
    if (sid) {
        char sl[24], sa[24];
        snprintf(sl, sizeof sl, "%lld", (long long)limit + 1);
        snprintf(sa, sizeof sa, "%lld", (long long)after);
        const char *p[] = {sid, sa, sl};
        PGresult *res = tk_pg_query(c,
                                    "SELECT (to_jsonb(m) - 'session_id')::text FROM messages m "
                                    "WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
                                    3, p);
        respond_page(r, res, "messages", limit);
        PQclear(res);
    }
    app_db_release(c);
}

const tk_route app_sessions_routes[] = {
    {"POST", "/api/sessions", h_create, NULL, TK_ROUTE_BLOCKING, 16384},
    {"GET", "/api/sessions", h_list, NULL, TK_ROUTE_BLOCKING},
    {"GET", "/api/sessions/{id}", h_get, NULL, TK_ROUTE_BLOCKING},
    {"PATCH", "/api/sessions/{id}", h_patch, NULL, TK_ROUTE_BLOCKING, 16384},
    {"DELETE", "/api/sessions/{id}", h_delete, NULL, TK_ROUTE_BLOCKING},
    {"GET", "/api/sessions/{id}/messages", h_messages, NULL, TK_ROUTE_BLOCKING},
};
const size_t app_sessions_nroutes = TK_ARRAY_LEN(app_sessions_routes);
