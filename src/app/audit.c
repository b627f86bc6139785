#include "app/audit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/app.h"
#include "app/auth/auth.h"
#include "lib/id.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/pg.h"

#define AUDIT_EXPORT_BATCH 1000
#define AUDIT_JSON_MAX     (32u << 20)

tk_status app_audit(PGconn *c, const char *actor_id, const char *ip, const char *action,
                    const char *account_id, const char *target, json_t *detail)
{
    char *d = detail ? tk_json_dumps(detail) : NULL;
    json_decref(detail);
    const char *p[] = {
        action, actor_id, ip, account_id, target, d ? d : "{}", actor_id ? "user" : "system"};
    tk_status st = tk_pg_exec(c,
                              "INSERT INTO audit_log (action, actor, actor_id, ip, account_id, "
                              "target, detail) VALUES ($1, $7, $2, $3, $4, $5, $6::jsonb)",
                              7, p);
    if (st != TK_OK)
        tk_error("audit", "msg=\"audit entry not written\" action=%s", action);
    free(d);
    return st;
}

void app_audit_now(const char *actor_id, const char *ip, const char *action, const char *account_id,
                   const char *target, json_t *detail)
{
    PGconn *c = app_db_acquire();
    if (!c) {
        json_decref(detail);
        tk_error("audit", "msg=\"audit entry not written: no database connection\" action=%s",
                 action);
        return;
    }
    app_audit(c, actor_id, ip, action, account_id, target, detail);
    app_db_release(c);
}

void app_audit_req(tk_req *r, const char *action, const char *account_id, const char *target,
                   json_t *detail)
{
    const app_user *u = app_req_user(r);
    app_audit_now(u ? u->id : NULL, tk_req_client_ip(r), action, account_id, target, detail);
}

int app_audit_sweep(PGconn *c, int batch)
{
    char ms[32], b[16];
    snprintf(ms, sizeof ms, "%lld", (long long)app_get()->cfg->audit_retention_ms);
    snprintf(b, sizeof b, "%d", batch);
    const char *p[] = {ms, b};
    PGresult *r = tk_pg_query(c,
                              "DELETE FROM audit_log WHERE id IN (SELECT id FROM audit_log "
                              "WHERE at < now() - $1::bigint * interval '1 millisecond' "
                              "ORDER BY at LIMIT $2::int)",
                              2, p);
    int n = tk_pg_ok(r) ? atoi(PQcmdTuples(r)) : -1;
    PQclear(r);
    return n;
}

/* ---------- GET /api/admin/audit ---------- */

/* The filter, $1..$4: action, actor, account, before; $5 the limit. */
static const char LIST_SQL[] =
    "SELECT coalesce(json_agg(json_build_object('id', a.id, 'at', a.at, 'action', a.action, "
    "'actor', a.actor, 'actor_id', a.actor_id, 'actor_email', u.email, 'ip', a.ip, "
    "'account_id', a.account_id, 'target', a.target, 'detail', a.detail) ORDER BY a.id DESC), "
    "'[]')::text, min(a.id) FROM (SELECT * FROM audit_log a "
    "WHERE ($1::text IS NULL OR a.action = $1 OR (right($1, 1) = '.' AND "
    "starts_with(a.action, $1))) AND ($2::uuid IS NULL OR a.actor_id = $2) "
    "AND ($3::uuid IS NULL OR a.account_id = $3) AND ($4::bigint IS NULL OR a.id < $4) "
    "ORDER BY a.id DESC LIMIT $5::int) a LEFT JOIN users u ON u.id = a.actor_id";

static int uuid_or_null(tk_req *r, const char *name, char out[TK_UUID_LEN], const char **p)
{
    const char *v = tk_req_query(r, name);
    *p = NULL;
    if (!v || !*v)
        return 1;
    if (!tk_uuid_valid(v)) {
        tk_respond_error(r, 400, "INVALID_REQUEST", "?%s= must be an account id", name);
        return 0;
    }
    for (int i = 0; i < TK_UUID_LEN - 1; i++)
        out[i] = (char)(v[i] >= 'A' && v[i] <= 'F' ? v[i] + 32 : v[i]);
    out[TK_UUID_LEN - 1] = '\0';
    *p = out;
    return 1;
}

static void export_jsonl(tk_req *r, PGconn *c, const char *const *p)
{
    tk_respond_header(r, "Content-Disposition", "attachment; filename=\"tusko-audit.jsonl\"");
    tk_stream *s = tk_respond_stream(r, 200, "application/x-ndjson");
    char before[32] = "";
    const char *q[5] = {p[0], p[1], p[2], NULL, "1000"};
    for (;;) {
        q[3] = before[0] ? before : NULL;
        PGresult *res = tk_pg_query(c, LIST_SQL, 5, q);
        if (!tk_pg_ok(res) || PQntuples(res) != 1 || PQgetisnull(res, 0, 1)) {
            PQclear(res);
            break;
        }
        char err[120];
        json_t *a = tk_json_parse(PQgetvalue(res, 0, 0), (size_t)PQgetlength(res, 0, 0),
                                  AUDIT_JSON_MAX, err, sizeof err);
        snprintf(before, sizeof before, "%s", PQgetvalue(res, 0, 1));
        PQclear(res);
        size_t i, n = json_array_size(a);
        json_t *e;
        int gone = 0;
        json_array_foreach(a, i, e)
        {
            char *line = tk_json_dumps(e);
            gone = !line || tk_stream_write(s, line, strlen(line)) != TK_OK ||
                   tk_stream_write(s, "\n", 1) != TK_OK;
            free(line);
            if (gone)
                break;
        }
        json_decref(a);
        if (gone || n < AUDIT_EXPORT_BATCH)
            break;
    }
    tk_stream_close(s);
}

void app_audit_route_list(tk_req *r, void *ud)
{
    (void)ud;
    char actor[TK_UUID_LEN], account[TK_UUID_LEN];
    const char *pa, *pc;
    if (!uuid_or_null(r, "actor", actor, &pa) || !uuid_or_null(r, "account", account, &pc))
        return;
    const char *action = tk_req_query(r, "action");
    if (action && (!*action || strlen(action) > 100))
        action = NULL;
    const char *before = tk_req_query(r, "before");
    int64_t b = 0, limit = 100;
    if (before && tk_parse_i64(before, 1, INT64_MAX, &b) != TK_OK) {
        tk_respond_error(r, 400, "INVALID_REQUEST", "?before= must be an entry id");
        return;
    }
    const char *lim = tk_req_query(r, "limit");
    if (lim && tk_parse_i64(lim, 1, APP_AUDIT_PAGE_MAX, &limit) != TK_OK) {
        tk_respond_error(r, 400, "INVALID_REQUEST", "?limit= must be 1 to %d", APP_AUDIT_PAGE_MAX);
        return;
    }
    const char *format = tk_req_query(r, "format");
    int jsonl = format && strcmp(format, "jsonl") == 0;
    if (format && !jsonl && strcmp(format, "json") != 0) {
        tk_respond_error(r, 400, "INVALID_REQUEST", "?format= is json or jsonl");
        return;
    }
    char bs[32], ls[16];
    snprintf(bs, sizeof bs, "%lld", (long long)b);
    snprintf(ls, sizeof ls, "%lld", (long long)limit);
    const char *p[] = {action, pa, pc, before ? bs : NULL, ls};
    PGconn *c = app_db_acquire();
    if (!c) {
        app_respond_db_unavailable(r);
        return;
    }
    if (jsonl) {
        export_jsonl(r, c, p);
        app_db_release(c);
        return;
    }
    PGresult *res = tk_pg_query(c, LIST_SQL, 5, p);
    app_db_release(c);
    if (!tk_pg_ok(res) || PQntuples(res) != 1) {
        PQclear(res);
        app_respond_db_unavailable(r);
        return;
    }
    char err[120];
    json_t *a = tk_json_parse(PQgetvalue(res, 0, 0), (size_t)PQgetlength(res, 0, 0), AUDIT_JSON_MAX,
                              err, sizeof err);
    size_t n = json_array_size(a);
    json_t *next = n == (size_t)limit && !PQgetisnull(res, 0, 1)
                       ? json_string(PQgetvalue(res, 0, 1))
                       : json_null();
    PQclear(res);
    tk_respond_json(r, 200,
                    tk_json_obj("entries", a ? a : json_array(), "next_before", next, NULL));
}
