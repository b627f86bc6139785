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

/* ---- one shape for every route ----
 *
 * A route is: the store, a connection and the caller (begin); one call; the
 * answer: the call's JSON with 200 (201 for what creates), or its status and
 * message through utopia_respond_status. What a route checks itself (its
 * parameters, the chat it names) it reports the same way, as a status and a
 * message: only begin and h_op respond (run_docs_add sets a header). */

typedef struct {
    const utopia *u;
    PGconn *c;
    const char *uid;
} ctx;

/* A route's call: its JSON in *out (a new reference), or a status and the
 * reason in err. */
typedef tk_status (*run_fn)(tk_req *r, const ctx *x, json_t **out, char *err, size_t errlen);
/* A call on the caller's object whose id is the path's {id}. */
typedef tk_status (*id_fn)(const utopia *u, PGconn *c, const char *user_id, const char *id,
                           json_t **out, char *err, size_t errlen);

typedef struct {
    run_fn run;          /* the call, or: */
    id_fn by_id;         /* a call on {id}; an {id} that is not a UUID is 404 ... */
    const char *missing; /* ... with this message ("no such document") */
    int created;         /* answers 201, not 200 */
    int json_body;       /* the body is JSON: a bad one is 400 INVALID_JSON before anything else */
} op;

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

/* Every route's handler; ud is its op. */
static void h_op(tk_req *r, void *ud)
{
    const op *o = ud;
    if (o->json_body && !tk_req_json(r, 0))
        return; /* answered */
    ctx x;
    if (begin(r, &x))
        return;
    json_t *out = NULL;
    char err[256] = "";
    tk_status st = TK_ENOENT;
    const char *id = tk_req_param(r, "id");
    if (o->run)
        st = o->run(r, &x, &out, err, sizeof err);
    else if (tk_uuid_valid(id))
        st = o->by_id(x.u, x.c, x.uid, id, &out, err, sizeof err);
    else
        snprintf(err, sizeof err, "%s", o->missing);
    app_db_release(x.c);
    if (st == TK_OK) {
        tk_respond_json(r, o->created ? 201 : 200, out); /* takes the reference */
    } else {
        utopia_respond_status(r, st, err);
        json_decref(out);
    }
}

/* A chat_id given by the caller must be one of the caller's chats (not an id:
 * 400; another user's or none: 404; the lookup failed: 500, as the store's own
 * database errors). */
static tk_status chat_check(const ctx *x, const char *chat_id, char *err, size_t errlen)
{
    if (!chat_id)
        return TK_OK;
    if (!tk_uuid_valid(chat_id)) {
        snprintf(err, errlen, "chat_id: not a chat id");
        return TK_EINVAL;
    }
    tk_status st = app_session_owned(x->c, x->uid, chat_id);
    if (st == TK_OK)
        return TK_OK;
    if (st == TK_ERROR) {
        snprintf(err, errlen, "could not look up the chat: database error");
        return TK_ERROR;
    }
    snprintf(err, errlen, "no such chat");
    return TK_ENOENT;
}

static int int_query(tk_req *r, const char *name, int def)
{
    const char *v = tk_req_query(r, name);
    int64_t n;
    if (!v || tk_parse_i64(v, 0, 100000, &n) != TK_OK)
        return def;
    return (int)n;
}

/* A query parameter the route cannot do without: NULL with "<name>: required". */
static const char *required_query(tk_req *r, const char *name, char *err, size_t errlen)
{
    const char *v = tk_req_query(r, name);
    if (!v)
        snprintf(err, errlen, "%s: required", name);
    return v;
}

/* ---- documents ---- */

static tk_status run_docs_list(tk_req *r, const ctx *x, json_t **out, char *err, size_t errlen)
{
    const char *chat = tk_req_query(r, "chat_id");
    tk_status st = chat_check(x, chat, err, errlen);
    if (st != TK_OK)
        return st;
    return utopia_doc_list(x->u, x->c, x->uid, chat, int_query(r, "limit", 100),
                           int_query(r, "offset", 0), out, err, errlen);
}

static tk_status run_docs_add(tk_req *r, const ctx *x, json_t **out, char *err, size_t errlen)
{
    const char *chat = tk_req_query(r, "chat_id");
    tk_status st = chat_check(x, chat, err, errlen);
    if (st != TK_OK)
        return st;
    size_t len = 0;
    const char *body = tk_req_body(r, &len);
    if (len == 0) {
        snprintf(err, errlen, "the request body is the document; it was empty");
        return TK_EINVAL;
    }
    utopia_doc_in in = {
        .chat_id = chat,
        .title = tk_req_query(r, "title"),
        .filename = tk_req_query(r, "filename"),
        .source = tk_req_query(r, "source"),
        .mime = tk_req_header(r, "content-type"),
        .data = body,
        .len = len,
    };
    st = utopia_doc_add(x->u, x->c, x->uid, &in, out, err, errlen);
    if (st == TK_OK) {
        char loc[96];
        snprintf(loc, sizeof loc, "/api/utopia/documents/%s", tk_json_str(*out, "id"));
        tk_respond_header(r, "Location", loc);
    }
    return st;
}

/* GET /api/utopia/documents/{id}: with its chunks */
static tk_status doc_get_with_chunks(const utopia *u, PGconn *c, const char *user_id,
                                     const char *id, json_t **out, char *err, size_t errlen)
{
    return utopia_doc_get(u, c, user_id, id, 1, out, err, errlen);
}

/* ---- search ---- */

static tk_status run_search(tk_req *r, const ctx *x, json_t **out, char *err, size_t errlen)
{
    const char *scope = tk_req_query(r, "scope"), *chat = tk_req_query(r, "chat_id");
    const char *kinds = tk_req_query(r, "kinds");
    if (scope && strcmp(scope, "user") && strcmp(scope, "chat")) {
        snprintf(err, errlen, "scope: \"user\" or \"chat\"");
        return TK_EINVAL;
    }
    tk_status st = chat_check(x, chat, err, errlen);
    if (st != TK_OK)
        return st;
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
    return utopia_search(x->u, x->c, x->uid, &o, out, err, errlen);
}

/* ---- memories, facts and entities ---- */

static tk_status run_mem_list(tk_req *r, const ctx *x, json_t **out, char *err, size_t errlen)
{
    return utopia_memory_list(x->u, x->c, x->uid, int_query(r, "limit", 200),
                              int_query(r, "offset", 0), out, err, errlen);
}

/* POST /api/utopia/memories and /facts: the remember payload, {note} and/or {fact} */
static tk_status run_remember(tk_req *r, const ctx *x, json_t **out, char *err, size_t errlen)
{
    /* parsed (and owned) by the request before begin: see op.json_body */
    return utopia_remember(x->u, x->c, x->uid, tk_req_json(r, 0), NULL, 0, out, err, errlen);
}

static tk_status run_facts_list(tk_req *r, const ctx *x, json_t **out, char *err, size_t errlen)
{
    return utopia_fact_list(x->u, x->c, x->uid, tk_req_query(r, "entity"),
                            int_query(r, "limit", 200), int_query(r, "offset", 0), out, err,
                            errlen);
}

/* GET /api/utopia/recall?entity=&at= */
static tk_status run_recall(tk_req *r, const ctx *x, json_t **out, char *err, size_t errlen)
{
    const char *entity = required_query(r, "entity", err, errlen);
    if (!entity)
        return TK_EINVAL;
    return utopia_recall_facts(x->u, x->c, x->uid, entity, tk_req_query(r, "at"), 0, out, err,
                               errlen);
}

/* GET /api/utopia/graph?entity=&hops=&at= */
static tk_status run_graph(tk_req *r, const ctx *x, json_t **out, char *err, size_t errlen)
{
    const char *entity = required_query(r, "entity", err, errlen);
    if (!entity)
        return TK_EINVAL;
    return utopia_neighbourhood(x->u, x->c, x->uid, entity, int_query(r, "hops", 1),
                                tk_req_query(r, "at"), 0, out, err, errlen);
}

/* ---- the table ---- */

static const op docs_list = {.run = run_docs_list};
static const op docs_add = {.run = run_docs_add, .created = 1};
static const op doc_get = {.by_id = doc_get_with_chunks, .missing = "no such document"};
static const op doc_delete = {.by_id = utopia_doc_delete, .missing = "no such document"};
static const op search = {.run = run_search};
static const op mem_list = {.run = run_mem_list};
static const op remember = {.run = run_remember, .created = 1, .json_body = 1};
static const op mem_delete = {.by_id = utopia_memory_delete, .missing = "no such memory"};
static const op facts_list = {.run = run_facts_list};
static const op fact_delete = {.by_id = utopia_fact_delete, .missing = "no such fact"};
static const op recall = {.run = run_recall};
static const op graph = {.run = run_graph};

#define B TK_ROUTE_BLOCKING
tk_route utopia_routes[] = {
    {"GET", "/api/utopia/documents", h_op, (void *)&docs_list, B},
    /* max_body: set by utopia_start from UTOPIA_MAX_DOCUMENT_BYTES; this is the
     * setting's default, for a table used without it */
    {"POST", "/api/utopia/documents", h_op, (void *)&docs_add, B, 25 << 20},
    {"GET", "/api/utopia/documents/{id}", h_op, (void *)&doc_get, B},
    {"DELETE", "/api/utopia/documents/{id}", h_op, (void *)&doc_delete, B},
    {"GET", "/api/utopia/search", h_op, (void *)&search, B},
    {"GET", "/api/utopia/memories", h_op, (void *)&mem_list, B},
    {"POST", "/api/utopia/memories", h_op, (void *)&remember, B, 64 << 10},
    {"DELETE", "/api/utopia/memories/{id}", h_op, (void *)&mem_delete, B},
    {"GET", "/api/utopia/facts", h_op, (void *)&facts_list, B},
    {"POST", "/api/utopia/facts", h_op, (void *)&remember, B, 64 << 10},
    {"DELETE", "/api/utopia/facts/{id}", h_op, (void *)&fact_delete, B},
    {"GET", "/api/utopia/recall", h_op, (void *)&recall, B},
    {"GET", "/api/utopia/graph", h_op, (void *)&graph, B},
};
const size_t utopia_nroutes = TK_ARRAY_LEN(utopia_routes);

tk_status utopia_start(char *err, size_t errlen)
{
    const utopia *u = utopia_app();
    if (!u) {
        snprintf(err, errlen, "%s", U_err);
        return TK_EINVAL;
    }
    for (size_t i = 0; i < utopia_nroutes; i++)
        if (utopia_routes[i].ud == &docs_add)
            utopia_routes[i].max_body = utopia_upload_max_body(&u->cfg);
    static pthread_once_t hook_once = PTHREAD_ONCE_INIT;
    pthread_once(&hook_once, register_hook);
    return TK_OK;
}
