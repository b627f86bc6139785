#include "app/auth/local.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/app.h"
#include "app/audit.h"
#include "app/auth/auth.h"
#include "app/auth/cookie.h"
#include "app/auth/csrf.h"
#include "app/auth/password.h"
#include "app/auth/tokens.h"
#include "app/ratelimit.h"
#include "app/users.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/pg.h"
#include "lib/tktime.h"

static void set_cookies(tk_req *r, const char *secret, const char *csrf, long long max_age_s)
{
    const app_ctx *a = app_get();
    tk_arena *ar = tk_req_arena(r);
    app_cookie sc = {.name = app_session_cookie_name(),
                     .value = secret,
                     .max_age_s = max_age_s,
                     .http_only = 1,
                     .secure = a->secure_cookies,
                     .same_site = "Lax"};
    app_cookie cc = {.name = app_csrf_cookie_name(),
                     .value = csrf,
                     .max_age_s = max_age_s,
                     .http_only = 0,
                     .secure = a->secure_cookies,
                     .same_site = "Strict"};
    tk_respond_header(r, "Set-Cookie", app_cookie_format(ar, &sc));
    tk_respond_header(r, "Set-Cookie", app_cookie_format(ar, &cc));
    tk_respond_header(r, "Cache-Control", "no-store");
}

tk_status app_signin_start_session(tk_req *r, PGconn *pgconn, const char *user_id,
                                   const char *method, char *csrf_out, size_t csrflen,
                                   long long *expires_ms)
{
    const app_ctx *a = app_get();
    char secret[APP_SECRET_HEX + 1], csrf[APP_SECRET_HEX + 1];
    int64_t ttl = a->cfg->session_ttl_ms;
    tk_status st = app_websession_create(pgconn, user_id, method, ttl, tk_req_client_ip(r),
                                         tk_req_header(r, "User-Agent"), secret, csrf);
    if (st != TK_OK)
        return st;
    set_cookies(r, secret, csrf, (long long)(ttl / 1000));
    app_websession_sweep(pgconn); /* expired sessions and flows go now and then: at sign-ins */
    snprintf(csrf_out, csrflen, "%s", csrf);
    *expires_ms = tk_now_ms() + ttl;
    tk_info("auth", "msg=\"signed in\" user=%s method=%s ip=%s", user_id, method,
            tk_req_client_ip(r));
    app_audit(pgconn, user_id, tk_req_client_ip(r), "auth.login", user_id, NULL,
              tk_json_obj("method", json_string(method), NULL));
    return TK_OK;
}

static void respond_throttled(tk_req *r, int64_t retry_ms)
{
    char v[24];
    long long s = (long long)((retry_ms + 999) / 1000);
    snprintf(v, sizeof v, "%lld", s < 1 ? 1 : s);
    tk_respond_header(r, "Retry-After", v);
    tk_respond_error(r, 429, "TOO_MANY_ATTEMPTS", "too many failed sign-ins; try again in %s s", v);
}

static void h_login(tk_req *r, void *ud)
{
    const app_ctx *a = app_get();
    char why[200];
    if (app_csrf_check_origin(r, why, sizeof why) != 0) {
        tk_respond_error(r, 403, "CSRF_FAILED", "%s", why);
        return;
    }
    json_t *body = tk_req_json(r, 0);
    if (!body)
        return;
    const char *email_in = tk_json_str(body, "email");
    const char *password = tk_json_str(body, "password");
    char email[APP_EMAIL_MAX + 1];
    if (!email_in || !password || app_email_normalize(email_in, email, sizeof email) != TK_OK) {
        tk_respond_error(r, 400, "INVALID_REQUEST",
                         "give \"email\" (an email address) and \"password\" (a string)");
        return;
    }
    if (strlen(password) > APP_PASSWORD_MAX ||
        strlen(password) != json_string_length(json_object_get(body, "password"))) {
        tk_respond_error(r, 400, "INVALID_REQUEST", "the password is too long or malformed");
        return;
    }
    PGconn *c = app_db_acquire();
    if (!c) {
        app_respond_db_unavailable(r);
        return;
    }
    char kacct[APP_EMAIL_MAX + 32], kip[128];
    snprintf(kacct, sizeof kacct, "login:acct:%s", email);
    snprintf(kip, sizeof kip, "login:ip:%s", tk_req_client_ip(r));
    int64_t max = a->cfg->login_max_failures, retry = 0;
    char *hash = NULL;
    tk_status st = app_ratelimit_take_key(c, kacct, max, APP_LOGIN_WINDOW_MS, &retry);
    if (st == TK_OK) {
        st = app_ratelimit_take_key(c, kip, max * 3, APP_LOGIN_WINDOW_MS, &retry);
        if (st != TK_OK)
            app_ratelimit_untake_key(c, kacct);
    }
    if (st == TK_EDENIED) {
        tk_warn("auth", "msg=\"sign-in throttled\" email=\"%s\" ip=%s", email, tk_req_client_ip(r));
        respond_throttled(r, retry);
        goto out;
    }
    if (st != TK_OK) {
        app_respond_db_unavailable(r);
        goto out;
    }
    char uid[TK_UUID_LEN] = "";
    st = app_user_find_email(c, email, uid, &hash);
    if (st == TK_ERROR) {
        app_respond_db_unavailable(r);
        goto out;
    }
    int rehash = 0;
    st = app_password_verify(hash, password, &rehash);
    if (st == TK_AGAIN) {
        app_ratelimit_untake_key(c, kacct);
        app_ratelimit_untake_key(c, kip);
        tk_respond_header(r, "Retry-After", "5");
        tk_respond_error(r, 503, "BUSY", "the server is busy signing others in; try again");
        goto out;
    }
    if (st != TK_OK) {
        tk_warn("auth", "msg=\"sign-in failed\" email=\"%s\" ip=%s", email, tk_req_client_ip(r));
        app_audit(
            c, NULL, tk_req_client_ip(r), "auth.login_failed", uid[0] ? uid : NULL, NULL,
            tk_json_obj("email", json_string(email), "method", json_string("password"), NULL));
        tk_respond_error(r, 401, "INVALID_CREDENTIALS", "wrong email or password");
        goto out;
    }
    st = app_users_disabled(c, uid);
    if (st != TK_OK) {
        if (st == TK_EDENIED) {
            app_audit(
                c, NULL, tk_req_client_ip(r), "auth.login_failed", uid, NULL,
                tk_json_obj("email", json_string(email), "reason", json_string("disabled"), NULL));
            tk_respond_error(r, 403, "ACCOUNT_DISABLED", "this account is disabled");
        } else {
            app_respond_db_unavailable(r);
        }
        goto out;
    }
    /* a success is not a failure: clear the account's count, give back the address's */
    app_ratelimit_reset_key(c, kacct);
    app_ratelimit_untake_key(c, kip);
    if (rehash) {
        char nh[crypto_pwhash_STRBYTES];
        if (app_password_hash(password, nh) == TK_OK) {
            const char *p[] = {nh, uid};
            tk_pg_exec(c, "UPDATE users SET password_hash = $1 WHERE id = $2", 2, p);
        }
    }
    char csrf[APP_SECRET_HEX + 1];
    long long exp = 0;
    if (app_signin_start_session(r, c, uid, "password", csrf, sizeof csrf, &exp) != TK_OK) {
        app_respond_db_unavailable(r);
        goto out;
    }
    char ts[40];
    tk_time_rfc3339(exp, ts, sizeof ts);
    tk_respond_json(
        r, 200,
        tk_json_obj("user", tk_json_obj("id", json_string(uid), "email", json_string(email), NULL),
                    "csrf_token", json_string(csrf), "expires_at", json_string(ts), NULL));
out:
    if (hash) {
        sodium_memzero(hash, strlen(hash));
        free(hash);
    }
    app_db_release(c);
}

static void clear_cookies(tk_req *r)
{
    const app_ctx *a = app_get();
    tk_arena *ar = tk_req_arena(r);
    app_cookie sc = {.name = app_session_cookie_name(),
                     .value = "",
                     .max_age_s = 0,
                     .http_only = 1,
                     .secure = a->secure_cookies,
                     .same_site = "Lax"};
    app_cookie cc = {.name = app_csrf_cookie_name(),
                     .value = "",
                     .max_age_s = 0,
                     .secure = a->secure_cookies,
                     .same_site = "Strict"};
    tk_respond_header(r, "Set-Cookie", app_cookie_format(ar, &sc));
    tk_respond_header(r, "Set-Cookie", app_cookie_format(ar, &cc));
}

static void h_logout(tk_req *r, void *ud)
{
    const app_user *u = app_req_user(r);
    if (u->via == APP_AUTH_COOKIE) {
        PGconn *c = app_db_acquire();
        if (!c) {
            app_respond_db_unavailable(r);
            return;
        }
        tk_status st = app_websession_delete(c, u->cred_hash);
        app_db_release(c);
        if (st != TK_OK) {
            app_respond_db_unavailable(r);
            return;
        }
        tk_info("auth", "msg=\"signed out\" user=%s", u->id);
    }
    clear_cookies(r);
    tk_respond_empty(r, 204);
}

static void h_config(tk_req *r, void *ud)
{
    const app_ctx *a = app_get();
    tk_respond_json(
        r, 200,
        tk_json_obj("password", json_true(), "oidc", json_boolean(a->oidc_enabled), "oidc_start",
                    a->oidc_enabled ? json_string("/api/auth/oidc/start") : json_null(), NULL));
}

const tk_route app_local_routes[] = {
    {"POST", "/api/auth/login", h_login, NULL, TK_ROUTE_PUBLIC | TK_ROUTE_BLOCKING, 8192},
    {"POST", "/api/auth/logout", h_logout, NULL, TK_ROUTE_BLOCKING, 1024},
    {"GET", "/api/auth/config", h_config, NULL, TK_ROUTE_PUBLIC},
};
const size_t app_local_nroutes = TK_ARRAY_LEN(app_local_routes);
