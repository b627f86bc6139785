#include "app/auth/auth.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "app/app.h"
#include "app/auth/cookie.h"
#include "app/auth/csrf.h"
#include "app/auth/secret.h"
#include "app/limits.h"
#include "lib/log.h"
#include "lib/tktime.h"

/* How long the hook (on an event thread) waits for a database connection. */
#define AUTH_DB_WAIT_MS 2000
#define CACHE_SLOTS     4096

/* ---------- the cache: direct-mapped by the credential hash ---------- */

struct slot {
    app_user u;
    int64_t until_mono_ms; /* 0: empty */
};

static struct slot cache[CACHE_SLOTS];
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t slot_of(const char *hash)
{
    /* the hash is uniform hex: its first 6 digits pick the slot */
    unsigned long v =
        strtoul((char[7]){hash[0], hash[1], hash[2], hash[3], hash[4], hash[5], 0}, NULL, 16);
    return v % CACHE_SLOTS;
}

static int cache_get(const char *hash, app_user *u)
{
    size_t i = slot_of(hash);
    int hit = 0;
    int64_t now = tk_mono_ms(), wall = tk_now_ms();
    pthread_mutex_lock(&cache_lock);
    struct slot *s = &cache[i];
    if (s->until_mono_ms > now && strcmp(s->u.cred_hash, hash) == 0 &&
        (s->u.expires_ms == 0 || s->u.expires_ms > wall)) {
        *u = s->u;
        hit = 1;
    }
    pthread_mutex_unlock(&cache_lock);
    return hit;
}

static void cache_put(const app_user *u)
{
    size_t i = slot_of(u->cred_hash);
    pthread_mutex_lock(&cache_lock);
    cache[i].u = *u;
    cache[i].until_mono_ms = tk_mono_ms() + APP_AUTH_CACHE_S * 1000;
    pthread_mutex_unlock(&cache_lock);
}

void app_auth_cache_drop(const char *cred_hash)
{
    size_t i = slot_of(cred_hash);
    pthread_mutex_lock(&cache_lock);
    if (strcmp(cache[i].u.cred_hash, cred_hash) == 0)
        cache[i].until_mono_ms = 0;
    pthread_mutex_unlock(&cache_lock);
}

void app_auth_cache_drop_user(const char *user_id)
{
    pthread_mutex_lock(&cache_lock);
    for (size_t i = 0; i < CACHE_SLOTS; i++)
        if (cache[i].until_mono_ms && strcmp(cache[i].u.id, user_id) == 0)
            cache[i].until_mono_ms = 0;
    pthread_mutex_unlock(&cache_lock);
}

void app_auth_cache_clear(void)
{
    pthread_mutex_lock(&cache_lock);
    memset(cache, 0, sizeof cache);
    pthread_mutex_unlock(&cache_lock);
}

/* ---------- lookups ---------- */

static tk_status lookup(const char *sql, const char *hash, app_auth_via via, app_user *u)
{
    memset(u, 0, sizeof *u);
    tk_pg_pool *pool = app_get()->auth_pg ? app_get()->auth_pg : app_get()->pg;
    PGconn *c = tk_pg_acquire(pool, AUTH_DB_WAIT_MS);
    if (!c) {
        tk_error("auth", "msg=\"no database connection for a credential check\"");
        return TK_ERROR;
    }
    const char *p[] = {hash};
    PGresult *r = tk_pg_query(c, sql, 1, p);
    tk_status st = TK_ENOENT;
    if (!tk_pg_ok(r)) {
        st = TK_ERROR;
    } else if (PQntuples(r) == 1) {
        snprintf(u->id, sizeof u->id, "%s", PQgetvalue(r, 0, 0));
        snprintf(u->email, sizeof u->email, "%s", PQgetvalue(r, 0, 1));
        snprintf(u->csrf, sizeof u->csrf, "%s", PQgetvalue(r, 0, 2));
        int64_t e = 0;
        if (!PQgetisnull(r, 0, 3))
            tk_parse_i64(PQgetvalue(r, 0, 3), 0, INT64_MAX, &e);
        u->expires_ms = e;
        u->admin = strcmp(PQgetvalue(r, 0, 4), "t") == 0;
        u->via = via;
        snprintf(u->cred_hash, sizeof u->cred_hash, "%s", hash);
        st = TK_OK;
    }
    PQclear(r);
    if (st == TK_OK) {
        /* best effort, only on a cache miss: roughly when the account was last seen */
        const char *q[] = {u->id};
        tk_pg_exec(c, "UPDATE users SET last_seen_at = now() WHERE id = $1", 1, q);
    }
    if (st == TK_OK && via == APP_AUTH_TOKEN) {
        /* best effort, only on a cache miss: roughly when the token was last used */
        tk_pg_exec(c,
                   "UPDATE api_tokens SET last_used_at = now() WHERE token_hash = "
                   "decode($1, 'hex')",
                   1, p);
    }
    tk_pg_release(pool, c);
    return st;
}

tk_status app_auth_token(const char *token, app_user *u)
{
    if (!app_token_wellformed(token))
        return TK_ENOENT;
    char hash[APP_HASH_HEX + 1];
    app_sha256_hex(token, strlen(token), hash);
    if (cache_get(hash, u) && u->via == APP_AUTH_TOKEN)
        return TK_OK;
    tk_status st = lookup(
        "SELECT u.id, coalesce(u.email, ''), '', "
        "(extract(epoch FROM t.expires_at) * 1000)::bigint, u.role = 'admin' "
        "FROM api_tokens t JOIN users u ON u.id = t.user_id "
        "WHERE t.token_hash = decode($1, 'hex') AND (t.expires_at IS NULL OR t.expires_at > now()) "
        "AND u.disabled_at IS NULL",
        hash, APP_AUTH_TOKEN, u);
    if (st == TK_OK)
        cache_put(u);
    return st;
}

tk_status app_auth_session(const char *secret, app_user *u)
{
    if (!app_is_hex(secret, APP_SECRET_HEX))
        return TK_ENOENT;
    char hash[APP_HASH_HEX + 1];
    app_sha256_hex(secret, APP_SECRET_HEX, hash);
    if (cache_get(hash, u) && u->via == APP_AUTH_COOKIE)
        return TK_OK;
    tk_status st = lookup("SELECT u.id, coalesce(u.email, ''), s.csrf_token, "
                          "(extract(epoch FROM s.expires_at) * 1000)::bigint, u.role = 'admin' "
                          "FROM web_sessions s JOIN users u ON u.id = s.user_id "
                          "WHERE s.token_hash = decode($1, 'hex') AND s.expires_at > now() "
                          "AND u.disabled_at IS NULL",
                          hash, APP_AUTH_COOKIE, u);
    if (st == TK_OK)
        cache_put(u);
    return st;
}

/* ---------- the hook ---------- */

const char *app_session_cookie_name(void)
{
    return app_get()->secure_cookies ? "__Host-tusko_session" : "tusko_session";
}

const char *app_csrf_cookie_name(void)
{
    return app_get()->secure_cookies ? "__Host-tusko_csrf" : "tusko_csrf";
}

void app_respond_unauthorized(tk_req *r, const char *message)
{
    tk_respond_header(r, "WWW-Authenticate", "Bearer realm=\"tusko\"");
    tk_respond_error(r, 401, "UNAUTHORIZED", "%s", message);
}

const app_user *app_req_user(const tk_req *r)
{
    return tk_req_user(r);
}

int auth_require_admin(tk_req *r)
{
    const app_user *u = app_req_user(r);
    if (u && u->admin)
        return 1;
    tk_warn("auth", "msg=\"admin route refused\" user=%s path=%s", u ? u->id : "-", tk_req_path(r));
    tk_respond_error(r, 403, "FORBIDDEN", "this needs an administrator");
    return 0;
}

static int safe_method(const char *m)
{
    return strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0 || strcmp(m, "OPTIONS") == 0;
}

int app_auth_hook(tk_req *r, void *ud)
{
    app_user *u = tk_arena_xalloc(tk_req_arena(r), sizeof *u);
    const char *authz = tk_req_header(r, "Authorization");
    if (authz) {
        if (strncasecmp(authz, "Bearer ", 7) != 0) {
            app_respond_unauthorized(r, "the Authorization header must be \"Bearer <token>\"");
            return 1;
        }
        const char *tok = authz + 7;
        while (*tok == ' ')
            tok++;
        tk_status st = app_auth_token(tok, u);
        if (st == TK_ERROR) {
            app_respond_db_unavailable(r);
            return 1;
        }
        if (st != TK_OK) {
            app_respond_unauthorized(r, "the API token is not valid");
            return 1;
        }
        char hash[APP_HASH_HEX + 1];
        app_sha256_hex(tok, strlen(tok), hash);
        if (!app_limits_token_take(r, hash, tk_now_ms()))
            return 1;
        if (tk_httpd_req_upload(r) && !app_limits_upload_begin(r, u->id))
            return 1;
        tk_req_set_user(r, u);
        return 0;
    }
    const char *secret =
        app_cookie_get(tk_req_arena(r), tk_req_header(r, "Cookie"), app_session_cookie_name());
    if (!secret) {
        app_respond_unauthorized(r, "sign in first, or send an API token as "
                                    "\"Authorization: Bearer <token>\"");
        return 1;
    }
    tk_status st = app_auth_session(secret, u);
    if (st == TK_ERROR) {
        app_respond_db_unavailable(r);
        return 1;
    }
    if (st != TK_OK) {
        app_respond_unauthorized(r, "the sign-in session has expired or ended; sign in again");
        return 1;
    }
    if (!safe_method(tk_req_method(r))) {
        char why[200];
        if (app_csrf_check(r, u->csrf, why, sizeof why) != 0) {
            tk_warn("auth", "msg=\"CSRF check failed\" user=%s reason=\"%s\"", u->id, why);
            tk_respond_error(r, 403, "CSRF_FAILED", "%s", why);
            return 1;
        }
    }
    if (tk_httpd_req_upload(r) && !app_limits_upload_begin(r, u->id))
        return 1;
    tk_req_set_user(r, u);
    return 0;
}
