/*
 * admin.c — the administrators' routes, /api/admin/... (docs/ADMIN.md).
 *
 * Every route here is served through gate(), which answers 403 FORBIDDEN to a
 * caller who is not an admin before the route's own handler runs: no handler
 * of this file can be reached by a user, whatever it forgets. The table is
 * also served (GET /api/admin/routes) so that the integration test tries every
 * one of them as a user.
 */
#include "app/admin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/account.h"
#include "app/app.h"
#include "app/audit.h"
#include "app/auth/auth.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/pg.h"

#define ADMIN_JSON_MAX (16u << 20)

struct inner {
    tk_handler fn;
    void *ud;
};

/* A user id from the path, lower-cased: TK_OK, else TK_EINVAL. */
static tk_status admin_uuid(const char *s, char out[TK_UUID_LEN])
{
    if (!tk_uuid_valid(s))
        return TK_EINVAL;
    for (int i = 0; i < TK_UUID_LEN - 1; i++)
        out[i] = (char)(s[i] >= 'A' && s[i] <= 'F' ? s[i] + 32 : s[i]);
    out[TK_UUID_LEN - 1] = '\0';
    return TK_OK;
}

static void gate(tk_req *r, void *ud)
{
    const struct inner *in = ud;
    if (!auth_require_admin(r))
        return;
    in->fn(r, in->ud);
}

/* Runs sql (one row, one json column) and responds with it parsed. */
static void respond_json_query(tk_req *r, const char *sql, int n, const char *const *p)
{
    PGconn *c = app_db_acquire();
    if (!c) {
        app_respond_db_unavailable(r);
        return;
    }
    PGresult *res = tk_pg_query(c, sql, n, p);
    app_db_release(c);
    if (!tk_pg_ok(res) || PQntuples(res) != 1) {
        PQclear(res);
        app_respond_db_unavailable(r);
        return;
    }
    char err[160];
    json_t *j = tk_json_parse(PQgetvalue(res, 0, 0), (size_t)PQgetlength(res, 0, 0), ADMIN_JSON_MAX,
                              err, sizeof err);
    PQclear(res);
    if (!j) {
        tk_respond_error(r, 500, "INTERNAL", "the answer could not be built: %s", err);
        return;
    }
    tk_respond_json(r, 200, j);
}

/* ---------- users ---------- */

static void h_users(tk_req *r, void *ud)
{
    (void)ud;
    respond_json_query(r,
                       "SELECT json_build_object('users', coalesce(json_agg(json_build_object("
                       "'id', u.id, 'email', u.email, 'name', u.name, 'role', u.role, "
                       "'disabled', u.disabled_at IS NOT NULL, 'disabled_at', u.disabled_at, "
                       "'created_at', u.created_at, 'last_seen_at', u.last_seen_at) "
                       "ORDER BY u.created_at, u.id), '[]'))::text FROM users u",
                       0, NULL);
}

/* Whether another enabled admin than uid exists (under the first-admin lock). */
static int other_admin(PGconn *c, const char *uid)
{
    const char *p[] = {uid};
    PGresult *res =
        tk_pg_query(c,
                    "SELECT pg_advisory_xact_lock(hashtext('tusko.users.first_admin')), "
                    "EXISTS (SELECT 1 FROM users WHERE role = 'admin' AND "
                    "disabled_at IS NULL AND id <> $1)",
                    1, p);
    int yes = tk_pg_ok(res) && PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 1), "t") == 0;
    PQclear(res);
    return yes;
}

static void h_user_patch(tk_req *r, void *ud)
{
    (void)ud;
    const app_user *me = app_req_user(r);
    const char *uid = tk_req_param(r, "id");
    char tmp[TK_UUID_LEN];
    if (!uid || admin_uuid(uid, tmp) != TK_OK) {
        tk_respond_error(r, 404, "NOT_FOUND", "no such user");
        return;
    }
    json_t *body = tk_req_json(r, 0);
    if (!body)
        return;
    json_t *jrole = json_object_get(body, "role");
    json_t *jdis = json_object_get(body, "disabled");
    const char *role = json_string_value(jrole);
    if ((jrole && (!role || (strcmp(role, "admin") != 0 && strcmp(role, "user") != 0))) ||
        (jdis && !json_is_boolean(jdis)) || (!jrole && !jdis)) {
        tk_respond_error(r, 400, "INVALID_REQUEST",
                         "give \"role\" (\"admin\" or \"user\") and/or \"disabled\" (true/false)");
        return;
    }
    int demote = role && strcmp(role, "user") == 0;
    int disable = jdis && json_is_true(jdis);
    PGconn *c = app_db_acquire();
    if (!c) {
        app_respond_db_unavailable(r);
        return;
    }
    const char *p[] = {tmp, role, jdis ? (disable ? "true" : "false") : NULL};
    tk_status st = tk_pg_exec(c, "BEGIN", 0, NULL);
    if (st == TK_OK && (demote || disable) && !other_admin(c, tmp)) {
        /* is the user an enabled admin? then they are the last one */
        PGresult *q = tk_pg_query(c,
                                  "SELECT 1 FROM users WHERE id = $1 AND role = 'admin' AND "
                                  "disabled_at IS NULL",
                                  1, p);
        int last = tk_pg_ok(q) && PQntuples(q) == 1;
        PQclear(q);
        if (last) {
            tk_pg_exec(c, "ROLLBACK", 0, NULL);
            app_db_release(c);
            tk_respond_error(r, 409, "LAST_ADMIN",
                             "this is the only enabled admin: make another admin first");
            return;
        }
    }
    PGresult *res = NULL;
    if (st == TK_OK)
        res = tk_pg_query(
            c,
            "UPDATE users SET role = coalesce($2, role), disabled_at = CASE WHEN $3::boolean "
            "IS NULL THEN disabled_at WHEN $3::boolean THEN coalesce(disabled_at, now()) END "
            "WHERE id = $1 RETURNING json_build_object('id', id, 'email', email, 'role', role, "
            "'disabled', disabled_at IS NOT NULL)::text",
            3, p);
    int found = res && tk_pg_ok(res) && PQntuples(res) == 1;
    if (found && disable)
        /* sign the account out everywhere: its sessions end now */
        st = tk_pg_exec(c, "DELETE FROM web_sessions WHERE user_id = $1", 1, p);
    if (found && st == TK_OK)
        st = app_audit(c, me->id, tk_req_client_ip(r), "user.update", tmp, NULL, json_incref(body));
    if (res && tk_pg_ok(res) && st == TK_OK)
        st = tk_pg_exec(c, "COMMIT", 0, NULL);
    else
        tk_pg_exec(c, "ROLLBACK", 0, NULL);
    app_db_release(c);
    if (!res || !tk_pg_ok(res) || st != TK_OK) {
        PQclear(res);
        app_respond_db_unavailable(r);
        return;
    }
    if (!found) {
        PQclear(res);
        tk_respond_error(r, 404, "NOT_FOUND", "no such user");
        return;
    }
    /* its credentials stop at once on this instance (others: APP_AUTH_CACHE_S) */
    app_auth_cache_drop_user(tmp);
    char err[160];
    json_t *j = tk_json_parse(PQgetvalue(res, 0, 0), (size_t)PQgetlength(res, 0, 0), ADMIN_JSON_MAX,
                              err, sizeof err);
    PQclear(res);
    tk_info("admin", "msg=\"user updated\" admin=%s user=%s", me->id, tmp);
    tk_respond_json(r, 200, j ? j : json_object());
}

static void h_user_delete(tk_req *r, void *ud)
{
    (void)ud;
    const app_user *me = app_req_user(r);
    const char *uid = tk_req_param(r, "id");
    char tmp[TK_UUID_LEN];
    if (!uid || admin_uuid(uid, tmp) != TK_OK) {
        tk_respond_error(r, 404, "NOT_FOUND", "no such user");
        return;
    }
    if (strcmp(tmp, me->id) == 0) {
        tk_respond_error(r, 409, "SELF",
                         "an admin does not delete their own account here (DELETE /api/me)");
        return;
    }
    PGconn *c = app_db_acquire();
    if (!c) {
        app_respond_db_unavailable(r);
        return;
    }
    char actor[64];
    snprintf(actor, sizeof actor, "admin:%s", me->id);
    json_t *answer = NULL;
    char err[600];
    tk_status st = app_account_delete(c, tmp, actor, &answer, err, sizeof err);
    app_db_release(c);
    app_auth_cache_drop_user(tmp);
    if (st == TK_OK) {
        tk_info("admin", "msg=\"user deleted\" admin=%s user=%s", me->id, tmp);
        tk_respond_json(r, 200, answer);
    } else if (st == TK_ENOENT) {
        tk_respond_error(r, 404, "NOT_FOUND", "no such user");
    } else if (st == TK_EDENIED) {
        tk_respond_error(r, 409, "TURN_IN_PROGRESS", "%s", err);
    } else {
        tk_respond_error(r, 503, "DELETE_FAILED",
                         "the account was not deleted (its rows are all there): %s", err);
    }
}

/* ---------- the table ---------- */

static void h_routes(tk_req *r, void *ud);

#define R(m, p, fn, fl)                                                                            \
    {                                                                                              \
        m, p, gate, &(struct inner){fn, NULL}, TK_ROUTE_BLOCKING | (fl), 65536                     \
    }

const tk_route admin_routes[] = {
    R("GET", "/api/admin/routes", h_routes, 0),
    R("GET", "/api/admin/users", h_users, 0),
    R("PATCH", "/api/admin/users/{id}", h_user_patch, 0),
    R("DELETE", "/api/admin/users/{id}", h_user_delete, 0),
    R("GET", "/api/admin/audit", app_audit_route_list, 0),
};
const size_t admin_nroutes = TK_ARRAY_LEN(admin_routes);

static void h_routes(tk_req *r, void *ud)
{
    (void)ud;
    json_t *a = json_array();
    for (size_t i = 0; i < admin_nroutes; i++)
        json_array_append_new(a, tk_json_obj("method", json_string(admin_routes[i].method), "path",
                                             json_string(admin_routes[i].pattern), NULL));
    tk_respond_json(r, 200, tk_json_obj("routes", a, NULL));
}
