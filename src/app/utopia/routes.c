/*
 * routes.c — /api/utopia/...: what the UI lists, searches, views and deletes
 * (docs/API.md, "Utopia"). Every route is authenticated and blocking; every
 * call is scoped to the caller (another user's ids answer 404).
 */
#include "app/utopia/routes.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/app.h"
#include "app/auth/auth.h"
#include "app/sessions.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/pg.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static utopia U;
static tk_status U_status = TK_ERROR;
static char U_err[256];

static void init_once(void)
{
    U_status = utopia_init(&U, &app_get()->cfg->utopia, U_err, sizeof U_err);
    if (U_status != TK_OK)
        tk_error("utopia", "msg=\"utopia settings refused\" error=\"%s\"", U_err);
}

const utopia *utopia_app(void)
{
    pthread_once(&once, init_once);
    return U_status == TK_OK ? &U : NULL;
}

/* A chat's own documents go with it; what was learned in it (facts, memories)
 * stays: long-term memory outlives chats. */
static void on_chat_deleted(const char *session_id, const char *user_id, void *ud)
{
    (void)ud;
    const utopia *u = utopia_app();
    PGconn *c = u ? app_db_acquire() : NULL;
    if (!c)
        return;
    const char *p[] = {user_id, session_id};
    PGresult *res =
        tk_pg_query(c, "SELECT id FROM utopia_documents WHERE user_id = $1 AND chat_id = $2", 2, p);
    for (int i = 0; tk_pg_ok(res) && i < PQntuples(res); i++) {
        json_t *out = NULL;
        char err[256];
        if (utopia_doc_delete(u, c, user_id, PQgetvalue(res, i, 0), &out, err, sizeof err) != TK_OK)
            tk_warn("utopia", "msg=\"chat document not deleted\" error=\"%s\"", err);
        json_decref(out);
    }
    PQclear(res);
    app_db_release(c);
}

static void register_hook(void)
{
    app_sessions_on_delete(on_chat_deleted, NULL);
}

size_t utopia_upload_max_body(const utopia_config *cfg)
{
    return (size_t)cfg->max_document_bytes;
}

static void h_docs_add(tk_req *r, void *ud);

tk_status utopia_start(char *err, size_t errlen)
{
    const utopia *u = utopia_app();
    if (!u) {
        snprintf(err, errlen, "%s", U_err);
        return TK_EINVAL;
    }
    for (size_t i = 0; i < utopia_nroutes; i++)
        if (utopia_routes[i].fn == h_docs_add)
            utopia_routes[i].max_body = utopia_upload_max_body(&u->cfg);
    static pthread_once_t hook_once = PTHREAD_ONCE_INIT;
    pthread_once(&hook_once, register_hook);
    return TK_OK;
}

void utopia_respond_status(tk_req *r, tk_status st, const char *err)
{
    switch (st) {
    case TK_EINVAL:
        tk_respond_error(r, 400, "INVALID_REQUEST", "%s", err);
        break;
    case TK_ENOENT:
        tk_respond_error(r, 404, "NOT_FOUND", "%s", err);
        break;
    case TK_ETOOBIG:
        tk_respond_error(r, 413, "TOO_LARGE", "%s", err);
        break;
    case TK_EDENIED:
        tk_respond_error(r, 415, "UNSUPPORTED_DOCUMENT", "%s", err);
        break;
    case TK_ETIMEOUT:
        tk_respond_error(r, 422, "EXTRACTION_TIMEOUT", "%s", err);
        break;
    default:
        tk_respond_error(r, 500, "UTOPIA_ERROR", "%s", *err ? err : "internal error");
        break;
    }
}

/* Common prologue: the store, a connection, the caller. */
typedef struct {
    const utopia *u;
    PGconn *c;
    const char *uid;
} ctx;

static int begin(tk_req *r, ctx *x)
{
    x->u = utopia_app();
    if (!x->u) {
        tk_respond_error(r, 500, "UTOPIA_ERROR", "Utopia is not configured: %s", U_err);
        return -1;
    }
    x->c = app_db_acquire();
    if (!x->c) {
        app_respond_db_unavailable(r);
        return -1;
    }
    x->uid = app_req_user(r)->id;
    return 0;
}

static void finish(tk_req *r, ctx *x, tk_status st, json_t *out, const char *err, int ok_status)
{
    app_db_release(x->c);
    if (st == TK_OK) {
        tk_respond_json(r, ok_status, out); /* takes the reference */
    } else {
        utopia_respond_status(r, st, err);
        json_decref(out);
    }
}

/* A chat_id given by the caller must be one of the caller's chats. */
static int chat_ok(tk_req *r, ctx *x, const char *chat_id)
{
    if (!chat_id)
        return 1;
    if (!tk_uuid_valid(chat_id)) {
        tk_respond_error(r, 400, "INVALID_REQUEST", "chat_id: not a chat id");
        return 0;
    }
    const char *p[] = {chat_id, x->uid};
    PGresult *res =
        tk_pg_query(x->c, "SELECT 1 FROM chat_sessions WHERE id = $1 AND user_id = $2", 2, p);
    int ok = tk_pg_ok(res) && PQntuples(res) == 1;
    PQclear(res);
    if (!ok)
        tk_respond_error(r, 404, "NOT_FOUND", "no such chat");
    return ok;
}

static int int_query(tk_req *r, const char *name, int def)
{
    const char *v = tk_req_query(r, name);
    int64_t n;
    if (!v || tk_parse_i64(v, 0, 100000, &n) != TK_OK)
        return def;
    return (int)n;
}

/* ---- documents ---- */

static void h_docs_list(tk_req *r, void *ud)
{
    (void)ud;
    ctx x;
    if (begin(r, &x))
        return;
    const char *chat = tk_req_query(r, "chat_id");
    if (!chat_ok(r, &x, chat)) {
        app_db_release(x.c);
        return;
    }
    json_t *out = NULL;
    char err[256] = "";
    tk_status st = utopia_doc_list(x.u, x.c, x.uid, chat, int_query(r, "limit", 100),
                                   int_query(r, "offset", 0), &out, err, sizeof err);
    finish(r, &x, st, out, err, 200);
}

static void h_docs_add(tk_req *r, void *ud)
{
    (void)ud;
    ctx x;
    if (begin(r, &x))
        return;
    const char *chat = tk_req_query(r, "chat_id");
    if (!chat_ok(r, &x, chat)) {
        app_db_release(x.c);
        return;
    }
    size_t len = 0;
    const char *body = tk_req_body(r, &len);
    utopia_doc_in in = {
        .chat_id = chat,
        .title = tk_req_query(r, "title"),
        .filename = tk_req_query(r, "filename"),
        .source = tk_req_query(r, "source"),
        .mime = tk_req_header(r, "content-type"),
        .data = body ? body : "",
        .len = len,
    };
    json_t *out = NULL;
    char err[256] = "";
    tk_status st =
        len == 0 ? TK_EINVAL : utopia_doc_add(x.u, x.c, x.uid, &in, &out, err, sizeof err);
    if (len == 0)
        snprintf(err, sizeof err, "the request body is the document; it was empty");
    if (st == TK_OK) {
        char loc[96];
        snprintf(loc, sizeof loc, "/api/utopia/documents/%s", tk_json_str(out, "id"));
        tk_respond_header(r, "Location", loc);
    }
    finish(r, &x, st, out, err, 201);
}

static void h_doc_get(tk_req *r, void *ud)
{
    (void)ud;
    ctx x;
    if (begin(r, &x))
        return;
    json_t *out = NULL;
    char err[256] = "";
    const char *id = tk_req_param(r, "id");
    tk_status st = tk_uuid_valid(id) ? utopia_doc_get(x.u, x.c, x.uid, id, 1, &out, err, sizeof err)
                                     : TK_ENOENT;
    if (!tk_uuid_valid(id))
        snprintf(err, sizeof err, "no such document");
    finish(r, &x, st, out, err, 200);
}

static void h_doc_delete(tk_req *r, void *ud)
{
    (void)ud;
    ctx x;
    if (begin(r, &x))
        return;
    json_t *out = NULL;
    char err[256] = "no such document";
    const char *id = tk_req_param(r, "id");
    tk_status st = tk_uuid_valid(id) ? utopia_doc_delete(x.u, x.c, x.uid, id, &out, err, sizeof err)
                                     : TK_ENOENT;
    finish(r, &x, st, out, err, 200);
}

/* ---- search ---- */

static void h_search(tk_req *r, void *ud)
{
    (void)ud;
    ctx x;
    if (begin(r, &x))
        return;
    const char *scope = tk_req_query(r, "scope"), *chat = tk_req_query(r, "chat_id");
    const char *kinds = tk_req_query(r, "kinds");
    if (scope && strcmp(scope, "user") && strcmp(scope, "chat")) {
        app_db_release(x.c);
        tk_respond_error(r, 400, "INVALID_REQUEST", "scope: \"user\" or \"chat\"");
        return;
    }
    if (!chat_ok(r, &x, chat)) {
        app_db_release(x.c);
        return;
    }
    int k = 0;
    if (kinds) {
        k |= strstr(kinds, "chunk") ? UTOPIA_KIND_CHUNKS : 0;
        k |= strstr(kinds, "memor") ? UTOPIA_KIND_MEMORIES : 0;
        k |= strstr(kinds, "fact") ? UTOPIA_KIND_FACTS : 0;
    }
    utopia_search_opts o = {.query = tk_req_query(r, "q"),
                            .chat_id = chat,
                            .scope_chat = scope && !strcmp(scope, "chat"),
                            .k = int_query(r, "k", 8),
                            .kinds = k};
    json_t *out = NULL;
    char err[256] = "";
    tk_status st = utopia_search(x.u, x.c, x.uid, &o, &out, err, sizeof err);
    finish(r, &x, st, out, err, 200);
}

/* ---- memories ---- */

static void h_mem_list(tk_req *r, void *ud)
{
    (void)ud;
    ctx x;
    if (begin(r, &x))
        return;
    json_t *out = NULL;
    char err[256] = "";
    tk_status st = utopia_memory_list(x.u, x.c, x.uid, int_query(r, "limit", 200),
                                      int_query(r, "offset", 0), &out, err, sizeof err);
    finish(r, &x, st, out, err, 200);
}

/* POST /api/utopia/memories: the remember payload, {note} and/or {fact} */
static void h_remember(tk_req *r, void *ud)
{
    (void)ud;
    json_t *body = tk_req_json(r, 0); /* owned by the request */
    if (!body)
        return; /* answered */
    ctx x;
    if (begin(r, &x))
        return;
    json_t *out = NULL;
    char err[256] = "";
    tk_status st = utopia_remember(x.u, x.c, x.uid, body, NULL, 0, &out, err, sizeof err);
    finish(r, &x, st, out, err, 201);
}

static void h_mem_delete(tk_req *r, void *ud)
{
    (void)ud;
    ctx x;
    if (begin(r, &x))
        return;
    json_t *out = NULL;
    char err[256] = "no such memory";
    const char *id = tk_req_param(r, "id");
    tk_status st = tk_uuid_valid(id)
                       ? utopia_memory_delete(x.u, x.c, x.uid, id, &out, err, sizeof err)
                       : TK_ENOENT;
    finish(r, &x, st, out, err, 200);
}

/* ---- facts and entities ---- */

static void h_facts_list(tk_req *r, void *ud)
{
    (void)ud;
    ctx x;
    if (begin(r, &x))
        return;
    json_t *out = NULL;
    char err[256] = "";
    tk_status st =
        utopia_fact_list(x.u, x.c, x.uid, tk_req_query(r, "entity"), int_query(r, "limit", 200),
                         int_query(r, "offset", 0), &out, err, sizeof err);
    finish(r, &x, st, out, err, 200);
}

static void h_fact_delete(tk_req *r, void *ud)
{
    (void)ud;
    ctx x;
    if (begin(r, &x))
        return;
    json_t *out = NULL;
    char err[256] = "no such fact";
    const char *id = tk_req_param(r, "id");
    tk_status st = tk_uuid_valid(id)
                       ? utopia_fact_delete(x.u, x.c, x.uid, id, &out, err, sizeof err)
                       : TK_ENOENT;
    finish(r, &x, st, out, err, 200);
}

/* GET /api/utopia/recall?entity=&at= */
static void h_recall(tk_req *r, void *ud)
{
    (void)ud;
    ctx x;
    if (begin(r, &x))
        return;
    json_t *out = NULL;
    char err[256] = "";
    const char *entity = tk_req_query(r, "entity");
    tk_status st = entity ? utopia_recall_facts(x.u, x.c, x.uid, entity, tk_req_query(r, "at"), 0,
                                                &out, err, sizeof err)
                          : TK_EINVAL;
    if (!entity)
        snprintf(err, sizeof err, "entity: required");
    finish(r, &x, st, out, err, 200);
}

/* GET /api/utopia/graph?entity=&hops=&at= */
static void h_graph(tk_req *r, void *ud)
{
    (void)ud;
    ctx x;
    if (begin(r, &x))
        return;
    json_t *out = NULL;
    char err[256] = "";
    const char *entity = tk_req_query(r, "entity");
    tk_status st = entity ? utopia_neighbourhood(x.u, x.c, x.uid, entity, int_query(r, "hops", 1),
                                                 tk_req_query(r, "at"), 0, &out, err, sizeof err)
                          : TK_EINVAL;
    if (!entity)
        snprintf(err, sizeof err, "entity: required");
    finish(r, &x, st, out, err, 200);
}

#define B TK_ROUTE_BLOCKING
tk_route utopia_routes[] = {
    {"GET", "/api/utopia/documents", h_docs_list, NULL, B},
    /* max_body: set by utopia_start from UTOPIA_MAX_DOCUMENT_BYTES; this is the
     * setting's default, for a table used without it */
    {"POST", "/api/utopia/documents", h_docs_add, NULL, B, 25 << 20},
    {"GET", "/api/utopia/documents/{id}", h_doc_get, NULL, B},
    {"DELETE", "/api/utopia/documents/{id}", h_doc_delete, NULL, B},
    {"GET", "/api/utopia/search", h_search, NULL, B},
    {"GET", "/api/utopia/memories", h_mem_list, NULL, B},
    {"POST", "/api/utopia/memories", h_remember, NULL, B, 64 << 10},
    {"DELETE", "/api/utopia/memories/{id}", h_mem_delete, NULL, B},
    {"GET", "/api/utopia/facts", h_facts_list, NULL, B},
    {"POST", "/api/utopia/facts", h_remember, NULL, B, 64 << 10},
    {"DELETE", "/api/utopia/facts/{id}", h_fact_delete, NULL, B},
    {"GET", "/api/utopia/recall", h_recall, NULL, B},
    {"GET", "/api/utopia/graph", h_graph, NULL, B},
};
const size_t utopia_nroutes = TK_ARRAY_LEN(utopia_routes);
