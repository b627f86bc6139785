/*
 * auth.h — who is calling: the server's auth hook and what handlers read.
 *
 * Every route not marked TK_ROUTE_PUBLIC passes app_auth_hook first (server.c
 * installs it), which accepts either
 *   - `Authorization: Bearer tsk_...` — a personal API token (`tusko token
 *     create`), for scripts and tests; exempt from CSRF checks; or
 *   - the session cookie set by a sign-in (POST /api/auth/login or OIDC) —
 *     then every write (any method but GET/HEAD/OPTIONS) must also pass the CSRF
 *     check (csrf.h): an X-CSRF-Token header equal to the session's token, and
 *     no cross-site Origin / Sec-Fetch-Site.
 * Otherwise it answers 401 {"code":"UNAUTHORIZED"} (403 CSRF_FAILED for a failed
 * CSRF check) and the handler never runs. An Authorization header that is present
 * but bad is refused even when a good cookie is also sent.
 *
 * Handlers then call app_req_user(r), which is never NULL behind the hook:
 *
 *   static void h_list(tk_req *r, void *ud) {
 *       const app_user *u = app_req_user(r);
 *       ... WHERE user_id = $1 ... u->id ...
 *   }
 *
 * The credential lookups run on the HTTP event thread, so results are cached in
 * memory for APP_AUTH_CACHE_S seconds (bounded, keyed by the credential's hash).
 * Signing out drops the entry at once on this instance; other instances notice
 * within APP_AUTH_CACHE_S.
 */
#ifndef APP_AUTH_AUTH_H
#define APP_AUTH_AUTH_H

#include <stdint.h>

#include "app/auth/secret.h"
#include "lib/httpd.h"
#include "lib/id.h"

#define APP_AUTH_CACHE_S 15
#define APP_EMAIL_MAX    254

typedef enum { APP_AUTH_TOKEN = 1, APP_AUTH_COOKIE = 2 } app_auth_via;

typedef struct {
    char id[TK_UUID_LEN];             /* users.id */
    char email[APP_EMAIL_MAX + 1];    /* "" when the account has none */
    app_auth_via via;                 /* how this request authenticated */
    char csrf[APP_SECRET_HEX + 1];    /* cookie sessions: the CSRF token; else "" */
    char cred_hash[APP_HASH_HEX + 1]; /* hash of the token or session cookie */
    int64_t expires_ms;               /* when the credential expires; 0: never */
    int admin;                        /* users.role is 'admin' (read with the credential) */
} app_user;

/* 1 when the caller is an admin. Else responds 403 FORBIDDEN and returns 0.
 * Every /api/admin/... route passes it first (admin.c's gate). */
int auth_require_admin(tk_req *r);

/* The caller, or NULL on a TK_ROUTE_PUBLIC route. Lives as long as the request. */
const app_user *app_req_user(const tk_req *r);

/* The hook server.c installs (tk_httpd_config.auth). */
int app_auth_hook(tk_req *r, void *ud);

/* Resolves a credential without a request (also used by the hook). TK_OK and *u
 * filled; TK_ENOENT for an unknown/expired credential; TK_ERROR when the
 * database could not answer. */
tk_status app_auth_token(const char *token, app_user *u);
tk_status app_auth_session(const char *cookie_secret, app_user *u);

/* Forgets cached credentials: one (by its hash), or every one of a user. */
void app_auth_cache_drop(const char *cred_hash);
void app_auth_cache_drop_user(const char *user_id);
/* Empties the cache (tests). */
void app_auth_cache_clear(void);

/* The session cookie's name: "__Host-tusko_session" when cookies are Secure
 * (TUSKO_PUBLIC_URL is https), else "tusko_session". Likewise the CSRF cookie. */
const char *app_session_cookie_name(void);
const char *app_csrf_cookie_name(void);

/* Responds 401 UNAUTHORIZED with a WWW-Authenticate header. */
void app_respond_unauthorized(tk_req *r, const char *message);

#endif
