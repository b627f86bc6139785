#include "app/auth/oidc.h"

#include <pthread.h>
#include <stdarg.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/app.h"
#include "app/audit.h"
#include "app/auth/auth.h"
#include "app/auth/cookie.h"
#include "app/auth/idtoken.h"
#include "app/auth/jwks.h"
#include "app/auth/local.h"
#include "app/auth/secret.h"
#include "app/auth/tokens.h"
#include "app/ratelimit.h"
#include "app/users.h"
#include "app/weburl.h"
#include "lib/httpc.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/pg.h"
#include "lib/query.h"
#include "lib/tktime.h"

#define CACHE_TTL_MS          (3600 * 1000)
#define KID_REFETCH_MS        (10 * 1000)
#define FETCH_TIMEOUT_MS      10000
#define DOC_MAX               (64 * 1024)
#define RETURN_TO_MAX         512
#define OIDC_STARTS_MAX       120 /* sign-ins started per client address per window */
#define OIDC_STARTS_WINDOW_MS (15 * 60 * 1000)

/* ---------- discovery and keys (cached, shared by all threads) ---------- */

static struct {
    pthread_mutex_t lock;
    char *auth_ep, *token_ep, *jwks_uri, *userinfo_ep; /* userinfo_ep may be NULL */
    int auth_basic, auth_post; /* token endpoint auth methods the provider takes */
    int64_t disc_at;           /* monotonic ms; 0: none */
    app_jwks *jwks;
    int64_t jwks_at, kid_refetch_at;
} P = {.lock = PTHREAD_MUTEX_INITIALIZER};

void app_oidc_reset(void)
{
    pthread_mutex_lock(&P.lock);
    free(P.auth_ep);
    free(P.token_ep);
    free(P.jwks_uri);
    free(P.userinfo_ep);
    P.auth_ep = P.token_ep = P.jwks_uri = P.userinfo_ep = NULL;
    app_jwks_free(P.jwks);
    P.jwks = NULL;
    P.disc_at = P.jwks_at = P.kid_refetch_at = 0;
    pthread_mutex_unlock(&P.lock);
}

/* An endpoint must be https, or loopback http when the issuer is too. */
static int endpoint_ok(const char *url)
{
    if (!url)
        return 0;
    if (app_url_is_https(url))
        return 1;
    return app_url_is_loopback_http(url) && app_url_is_loopback_http(app_get()->cfg->oidc_issuer);
}

static tk_status fetch(const char *url, size_t cap, tk_buf *out, char *err, size_t errlen)
{
    tk_httpc_req rq = {.url = url,
                       .headers = (const char *const[]){"Accept: application/json", NULL},
                       .timeout_ms = FETCH_TIMEOUT_MS,
                       .max_response = cap};
    tk_httpc_resp resp;
    tk_status st = tk_httpc_do(&rq, &resp);
    if (st != TK_OK) {
        snprintf(err, errlen, "cannot fetch %s: %s", url,
                 resp.error[0] ? resp.error : tk_status_str(st));
        tk_httpc_resp_free(&resp);
        return TK_ERROR;
    }
    if (resp.status != 200) {
        snprintf(err, errlen, "%s answered HTTP %ld", url, resp.status);
        tk_httpc_resp_free(&resp);
        return TK_ERROR;
    }
    *out = resp.body; /* handed over */
    tk_buf_init(&resp.body, 0);
    tk_httpc_resp_free(&resp);
    return TK_OK;
}

static tk_status discover(char *err, size_t errlen)
{
    pthread_mutex_lock(&P.lock);
    int fresh = P.disc_at && tk_mono_ms() - P.disc_at < CACHE_TTL_MS;
    pthread_mutex_unlock(&P.lock);
    if (fresh)
        return TK_OK;
    const char *iss = app_get()->cfg->oidc_issuer;
    size_t il = strlen(iss);
    while (il > 0 && iss[il - 1] == '/')
        il--;
    char url[1024];
    snprintf(url, sizeof url, "%.*s/.well-known/openid-configuration", (int)il, iss);
    tk_buf body;
    if (fetch(url, DOC_MAX, &body, err, errlen) != TK_OK)
        return TK_ERROR;
    char jerr[160];
    json_t *d = tk_json_parse(body.data ? body.data : "", body.len, DOC_MAX, jerr, sizeof jerr);
    tk_buf_free(&body);
    tk_status st = TK_ERROR;
    if (!d || !json_is_object(d)) {
        snprintf(err, errlen, "the discovery document at %s is not a JSON object", url);
        goto out;
    }
    const char *diss = tk_json_str(d, "issuer");
    if (!diss || strcmp(diss, iss) != 0) {
        snprintf(err, errlen,
                 "the discovery document names issuer \"%.200s\", not OIDC_ISSUER \"%.200s\" "
                 "(they must match exactly)",
                 diss ? diss : "", iss);
        goto out;
    }
    const char *ae = tk_json_str(d, "authorization_endpoint");
    const char *te = tk_json_str(d, "token_endpoint");
    const char *ju = tk_json_str(d, "jwks_uri");
    const char *ui = tk_json_str(d, "userinfo_endpoint");
    if (ui && !endpoint_ok(ui))
        ui = NULL;
    if (!endpoint_ok(ae) || !endpoint_ok(te) || !endpoint_ok(ju)) {
        snprintf(err, errlen,
                 "the discovery document lacks https authorization_endpoint, "
                 "token_endpoint or jwks_uri");
        goto out;
    }
    json_t *methods = json_object_get(d, "code_challenge_methods_supported");
    if (json_is_array(methods)) {
        int s256 = 0;
        size_t i;
        json_t *m;
        json_array_foreach(methods, i, m) if (json_is_string(m) &&
                                              strcmp(json_string_value(m), "S256") == 0) s256 = 1;
        if (!s256) {
            snprintf(err, errlen, "the provider does not support PKCE with S256");
            goto out;
        }
    }
    int basic = 1, post = 0;
    json_t *am = json_object_get(d, "token_endpoint_auth_methods_supported");
    if (json_is_array(am)) {
        basic = 0;
        size_t i;
        json_t *m;
        json_array_foreach(am, i, m)
        {
            if (!json_is_string(m))
                continue;
            if (strcmp(json_string_value(m), "client_secret_basic") == 0)
                basic = 1;
            if (strcmp(json_string_value(m), "client_secret_post") == 0)
                post = 1;
        }
    }
    pthread_mutex_lock(&P.lock);
    free(P.auth_ep);
    free(P.token_ep);
    free(P.jwks_uri);
    free(P.userinfo_ep);
    P.userinfo_ep = ui ? tk_strdup(ui) : NULL;
    P.auth_ep = tk_strdup(ae);
    P.token_ep = tk_strdup(te);
    P.jwks_uri = tk_strdup(ju);
    P.auth_basic = basic;
    P.auth_post = post;
    P.disc_at = tk_mono_ms();
    pthread_mutex_unlock(&P.lock);
    st = TK_OK;
out:
    json_decref(d);
    if (st != TK_OK)
        tk_error("oidc", "msg=\"discovery failed\" reason=\"%s\"", err);
    return st;
}

/* Fetches the JWKS (force: even when cached and fresh). */
static tk_status load_keys(int force, char *err, size_t errlen)
{
    pthread_mutex_lock(&P.lock);
    int fresh = P.jwks && tk_mono_ms() - P.jwks_at < CACHE_TTL_MS;
    char *uri = P.jwks_uri ? tk_strdup(P.jwks_uri) : NULL;
    pthread_mutex_unlock(&P.lock);
    if (fresh && !force) {
        free(uri);
        return TK_OK;
    }
    if (!uri) {
        snprintf(err, errlen, "no jwks_uri (discovery has not succeeded)");
        return TK_ERROR;
    }
    tk_buf body;
    tk_status st = fetch(uri, APP_JWKS_MAX_BYTES, &body, err, errlen);
    app_jwks *keys = NULL;
    if (st == TK_OK) {
        st = app_jwks_parse(body.data ? body.data : "", body.len, &keys, err, errlen);
        tk_buf_free(&body);
    }
    if (st == TK_OK) {
        pthread_mutex_lock(&P.lock);
        app_jwks_free(P.jwks);
        P.jwks = keys;
        P.jwks_at = tk_mono_ms();
        pthread_mutex_unlock(&P.lock);
        tk_info("oidc", "msg=\"provider keys loaded\" uri=%s keys=%zu", uri, keys->n);
    } else {
        tk_error("oidc", "msg=\"cannot load the provider's keys\" reason=\"%s\"", err);
    }
    free(uri);
    return st == TK_OK ? TK_OK : TK_ERROR;
}

/* Verifies an ID token, refetching the keys once when no cached key fits. */
static tk_status verify_id_token(const char *tok, const char *nonce, app_idtoken_claims *c,
                                 char *err, size_t errlen)
{
    const app_settings *s = app_get()->cfg;
    app_idtoken_expect want = {.issuer = s->oidc_issuer,
                               .client_id = s->oidc_client_id,
                               .nonce = nonce,
                               .admin_claim = s->oidc_admin_claim,
                               .now_s = tk_now_ms() / 1000};
    if (load_keys(0, err, errlen) != TK_OK)
        return TK_ERROR;
    pthread_mutex_lock(&P.lock);
    tk_status st = app_idtoken_verify(tok, P.jwks, &want, c, err, errlen);
    int may_refetch =
        st == TK_ENOENT && (!P.kid_refetch_at || tk_mono_ms() - P.kid_refetch_at >= KID_REFETCH_MS);
    if (may_refetch)
        P.kid_refetch_at = tk_mono_ms();
    pthread_mutex_unlock(&P.lock);
    if (!may_refetch)
        return st;
    tk_info("oidc", "msg=\"unknown signing key: refetching the provider's keys\"");
    if (load_keys(1, err, errlen) != TK_OK)
        return TK_ERROR;
    pthread_mutex_lock(&P.lock);
    st = app_idtoken_verify(tok, P.jwks, &want, c, err, errlen);
    pthread_mutex_unlock(&P.lock);
    return st;
}

/* ---------- helpers ---------- */

static const char *flow_cookie_name(void)
{
    return app_get()->secure_cookies ? "__Host-tusko_oidc" : "tusko_oidc";
}

static void set_flow_cookie(tk_req *r, const char *value, long long max_age)
{
    app_cookie c = {.name = flow_cookie_name(),
                    .value = value,
                    .max_age_s = max_age,
                    .http_only = 1,
                    .secure = app_get()->secure_cookies,
                    .same_site = "Lax"};
    tk_respond_header(r, "Set-Cookie", app_cookie_format(tk_req_arena(r), &c));
}

/* A path on this site: "/..." but not "//..." or "/\...", printable, short. */
static int return_to_ok(const char *s)
{
    if (!s || s[0] != '/' || s[1] == '/' || s[1] == '\\' || strlen(s) > RETURN_TO_MAX)
        return 0;
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p < 0x21 || (unsigned char)*p == 0x7f || *p == '\\')
            return 0;
    return 1;
}

static void redirect_uri(char *out, size_t n)
{
    snprintf(out, n, "%s/api/auth/oidc/callback", app_get()->cfg->public_url);
}

static int oidc_off(tk_req *r)
{
    if (app_get()->oidc_enabled)
        return 0;
    tk_respond_error(r, 404, "OIDC_DISABLED",
                     "OpenID Connect sign-in is not configured on this server");
    return 1;
}

/* ---------- GET /api/auth/oidc/start ---------- */

static void h_start(tk_req *r, void *ud)
{
    if (oidc_off(r))
        return;
    const app_settings *s = app_get()->cfg;
    const char *rt = tk_req_query(r, "return_to");
    if (rt && !return_to_ok(rt)) {
        tk_respond_error(r, 400, "INVALID_REQUEST", "return_to must be a path on this site");
        return;
    }
    char err[512];
    if (discover(err, sizeof err) != TK_OK) {
        tk_respond_error(r, 502, "OIDC_PROVIDER", "the sign-in provider is unavailable: %s", err);
        return;
    }
    char state[APP_SECRET_HEX + 1], nonce[APP_SECRET_HEX + 1], browser[APP_SECRET_HEX + 1];
    app_secret_new(state);
    app_secret_new(nonce);
    app_secret_new(browser);
    /* PKCE: a 43-character verifier (32 random bytes), challenge = b64url(sha256) */
    unsigned char vb[32], ch[32];
    tk_random_bytes(vb, sizeof vb);
    char verifier[64], challenge[64];
    app_b64url(vb, sizeof vb, verifier, sizeof verifier);
    app_sha256(verifier, strlen(verifier), ch);
    app_b64url(ch, sizeof ch, challenge, sizeof challenge);
    char sh[APP_HASH_HEX + 1], bh[APP_HASH_HEX + 1], ttl[16];
    app_sha256_hex(state, strlen(state), sh);
    app_sha256_hex(browser, strlen(browser), bh);
    snprintf(ttl, sizeof ttl, "%d", APP_OIDC_FLOW_TTL_S);
    PGconn *c = app_db_acquire();
    if (!c) {
        app_respond_db_unavailable(r);
        return;
    }
    /* each start stores a row: an address may start at most OIDC_STARTS_MAX per window */
    char key[128];
    snprintf(key, sizeof key, "oidc:ip:%s", tk_req_client_ip(r));
    int64_t retry = 0;
    tk_status lim = app_ratelimit_take_key(c, key, OIDC_STARTS_MAX, OIDC_STARTS_WINDOW_MS, &retry);
    if (lim != TK_OK) {
        app_db_release(c);
        if (lim == TK_EDENIED) {
            char v[24];
            snprintf(v, sizeof v, "%lld", (long long)((retry + 999) / 1000));
            tk_respond_header(r, "Retry-After", v);
            tk_respond_error(r, 429, "TOO_MANY_ATTEMPTS",
                             "too many sign-ins started from this address; try again in %s s", v);
        } else {
            app_respond_db_unavailable(r);
        }
        return;
    }
    tk_pg_exec(c, "DELETE FROM oidc_flows WHERE expires_at < now()", 0, NULL);
    const char *p[] = {sh, bh, verifier, nonce, rt ? rt : "/", ttl};
    tk_status st =
        tk_pg_exec(c,
                   "INSERT INTO oidc_flows (state_hash, browser_hash, code_verifier, "
                   "nonce, return_to, expires_at) VALUES (decode($1, 'hex'), "
                   "decode($2, 'hex'), $3, $4, $5, now() + make_interval(secs => $6::int))",
                   6, p);
    app_db_release(c);
    if (st != TK_OK) {
        app_respond_db_unavailable(r);
        return;
    }
    tk_arena *a = tk_req_arena(r);
    char ru[600];
    redirect_uri(ru, sizeof ru);
    pthread_mutex_lock(&P.lock);
    char *ae = tk_arena_strdup(a, P.auth_ep);
    pthread_mutex_unlock(&P.lock);
    char *loc = tk_arena_printf(
        a,
        "%s%sresponse_type=code&client_id=%s&redirect_uri=%s&scope=%s&state=%s&nonce=%s"
        "&code_challenge=%s&code_challenge_method=S256",
        ae, strchr(ae, '?') ? "&" : "?", tk_percent_encode(a, s->oidc_client_id),
        tk_percent_encode(a, ru), tk_percent_encode(a, s->oidc_scopes), state, nonce, challenge);
    set_flow_cookie(r, browser, APP_OIDC_FLOW_TTL_S);
    tk_respond_header(r, "Location", loc);
    tk_respond_header(r, "Cache-Control", "no-store");
    tk_respond(r, 302, "text/plain", "", 0);
}

/* ---------- GET /api/auth/oidc/callback ---------- */

struct flow {
    char verifier[128], nonce[128], return_to[RETURN_TO_MAX + 1];
};

/* Consumes the flow named by state (once), if this browser started it. */
static tk_status take_flow(PGconn *c, const char *state, const char *browser, struct flow *f)
{
    char sh[APP_HASH_HEX + 1];
    app_sha256_hex(state, strlen(state), sh);
    const char *p[] = {sh};
    PGresult *res = tk_pg_query(c,
                                "DELETE FROM oidc_flows WHERE state_hash = decode($1, 'hex') "
                                "RETURNING encode(browser_hash, 'hex'), code_verifier, nonce, "
                                "return_to, expires_at > now()",
                                1, p);
    tk_status st = TK_ENOENT;
    if (!tk_pg_ok(res)) {
        st = TK_ERROR;
    } else if (PQntuples(res) == 1) {
        char bh[APP_HASH_HEX + 1] = "";
        if (browser)
            app_sha256_hex(browser, strlen(browser), bh);
        int same_browser = browser && tk_str_eq_ct(bh, PQgetvalue(res, 0, 0));
        int live = strcmp(PQgetvalue(res, 0, 4), "t") == 0;
        if (same_browser && live) {
            snprintf(f->verifier, sizeof f->verifier, "%s", PQgetvalue(res, 0, 1));
            snprintf(f->nonce, sizeof f->nonce, "%s", PQgetvalue(res, 0, 2));
            snprintf(f->return_to, sizeof f->return_to, "%s", PQgetvalue(res, 0, 3));
            st = TK_OK;
        } else {
            st = TK_EDENIED;
        }
    }
    PQclear(res);
    return st;
}

/* The code for an ID token at the token endpoint. *id_token (heap) on TK_OK. */
static tk_status exchange(tk_arena *a, const char *code, const struct flow *f, char **id_token,
                          char **access_token, char *err, size_t errlen)
{
    const app_settings *s = app_get()->cfg;
    char ru[600];
    redirect_uri(ru, sizeof ru);
    pthread_mutex_lock(&P.lock);
    char *te = tk_arena_strdup(a, P.token_ep);
    int basic = P.auth_basic, post = P.auth_post;
    pthread_mutex_unlock(&P.lock);
    const char *secret = s->oidc_client_secret;
    const char *forced = s->oidc_token_auth;
    int use_post = secret && (forced ? strcmp(forced, "client_secret_post") == 0 : !basic && post);
    int use_basic = secret && !use_post;
    char *body = tk_arena_printf(
        a, "grant_type=authorization_code&code=%s&redirect_uri=%s&code_verifier=%s",
        tk_percent_encode(a, code), tk_percent_encode(a, ru), tk_percent_encode(a, f->verifier));
    if (!use_basic)
        body = tk_arena_printf(a, "%s&client_id=%s", body, tk_percent_encode(a, s->oidc_client_id));
    if (use_post)
        body = tk_arena_printf(a, "%s&client_secret=%s", body, tk_percent_encode(a, secret));
    const char *hdrs[4] = {"Content-Type: application/x-www-form-urlencoded",
                           "Accept: application/json", NULL, NULL};
    if (use_basic) {
        char *cred = tk_arena_printf(a, "%s:%s", tk_percent_encode(a, s->oidc_client_id),
                                     tk_percent_encode(a, secret));
        size_t cl = strlen(cred);
        size_t bl = sodium_base64_ENCODED_LEN(cl, sodium_base64_VARIANT_ORIGINAL);
        char *b64 = tk_arena_xalloc(a, bl);
        sodium_bin2base64(b64, bl, (const unsigned char *)cred, cl, sodium_base64_VARIANT_ORIGINAL);
        hdrs[2] = tk_arena_printf(a, "Authorization: Basic %s", b64);
    }
    tk_httpc_req rq = {.method = "POST",
                       .url = te,
                       .headers = hdrs,
                       .body = body,
                       .body_len = strlen(body),
                       .timeout_ms = FETCH_TIMEOUT_MS,
                       .max_response = DOC_MAX};
    tk_httpc_resp resp;
    tk_status st = tk_httpc_do(&rq, &resp);
    if (st != TK_OK) {
        snprintf(err, errlen, "the token endpoint cannot be reached: %s", resp.error);
        tk_httpc_resp_free(&resp);
        return TK_ERROR;
    }
    char jerr[160];
    json_t *j = tk_json_parse(tk_buf_cstr(&resp.body), resp.body.len, DOC_MAX, jerr, sizeof jerr);
    st = TK_EDENIED;
    if (resp.status != 200) {
        snprintf(err, errlen, "the token endpoint refused the code (HTTP %ld%s%.100s)", resp.status,
                 j && tk_json_str(j, "error") ? ": " : "", j ? tk_json_str_or(j, "error", "") : "");
    } else if (!j || !tk_json_str(j, "id_token")) {
        snprintf(err, errlen, "the token endpoint's answer has no id_token");
    } else {
        *id_token = tk_strdup(tk_json_str(j, "id_token"));
        const char *at = tk_json_str(j, "access_token");
        *access_token = at && strlen(at) < 8192 ? tk_strdup(at) : NULL;
        st = TK_OK;
    }
    json_decref(j);
    tk_httpc_resp_free(&resp);
    return st;
}

/* Claims the ID token lacks (email, name) from the userinfo endpoint, whose
 * "sub" must be the ID token's (OIDC Core 5.3.2). Best effort: the sign-in goes
 * on without them. */
static void userinfo(tk_arena *a, const char *access_token, app_idtoken_claims *cl)
{
    pthread_mutex_lock(&P.lock);
    char *ui = P.userinfo_ep ? tk_arena_strdup(a, P.userinfo_ep) : NULL;
    pthread_mutex_unlock(&P.lock);
    if (!ui || !access_token)
        return;
    const char *hdrs[] = {tk_arena_printf(a, "Authorization: Bearer %s", access_token),
                          "Accept: application/json", NULL};
    tk_httpc_req rq = {
        .url = ui, .headers = hdrs, .timeout_ms = FETCH_TIMEOUT_MS, .max_response = DOC_MAX};
    tk_httpc_resp resp;
    tk_status st = tk_httpc_do(&rq, &resp);
    char jerr[160];
    json_t *j =
        st == TK_OK && resp.status == 200
            ? tk_json_parse(tk_buf_cstr(&resp.body), resp.body.len, DOC_MAX, jerr, sizeof jerr)
            : NULL;
    const char *sub = j ? tk_json_str(j, "sub") : NULL;
    if (!sub || strcmp(sub, cl->sub) != 0) {
        tk_warn("oidc", "msg=\"userinfo unusable\" status=%ld", resp.status);
    } else {
        const char *email = tk_json_str(j, "email");
        json_t *ev = json_object_get(j, "email_verified");
        if (!cl->email[0] && email && strlen(email) < sizeof cl->email &&
            strlen(email) == json_string_length(json_object_get(j, "email"))) {
            snprintf(cl->email, sizeof cl->email, "%s", email);
            cl->email_verified = json_is_true(ev) ||
                                 (json_is_string(ev) && strcmp(json_string_value(ev), "true") == 0);
        }
        const char *name = tk_json_str(j, "name");
        if (!cl->name[0] && name && strlen(name) < sizeof cl->name)
            snprintf(cl->name, sizeof cl->name, "%s", name);
    }
    json_decref(j);
    tk_httpc_resp_free(&resp);
}

/* Finds or creates the user of (issuer, subject). TK_EDENIED: the email belongs
 * to another account and linking by email is off. */
static tk_status find_or_create(PGconn *c, const app_idtoken_claims *cl, char uid[TK_UUID_LEN])
{
    const char *iss = app_get()->cfg->oidc_issuer;
    char email[APP_EMAIL_MAX + 1] = "";
    if (cl->email[0] && cl->email_verified &&
        app_email_normalize(cl->email, email, sizeof email) != TK_OK)
        email[0] = '\0';
    const char *p[] = {iss, cl->sub, cl->email[0] ? cl->email : NULL};
    for (int attempt = 0; attempt < 2; attempt++) {
        PGresult *res = tk_pg_query(c,
                                    "UPDATE user_identities SET last_login_at = now(), email = $3 "
                                    "WHERE issuer = $1 AND subject = $2 RETURNING user_id",
                                    3, p);
        if (!tk_pg_ok(res)) {
            PQclear(res);
            return TK_ERROR;
        }
        if (PQntuples(res) == 1) {
            snprintf(uid, TK_UUID_LEN, "%s", PQgetvalue(res, 0, 0));
            PQclear(res);
            return TK_OK;
        }
        PQclear(res);
        /* a new identity: link by verified email, or a new account */
        tk_status st = TK_ENOENT;
        if (email[0]) {
            st = app_user_find_email(c, email, uid, NULL);
            if (st == TK_ERROR)
                return st;
            if (st == TK_OK && !app_get()->cfg->oidc_link_by_email)
                return TK_EDENIED;
        }
        if (tk_pg_exec(c, "BEGIN", 0, NULL) != TK_OK)
            return TK_ERROR;
        if (st != TK_OK &&
            app_user_create(c, email[0] ? email : NULL, NULL, cl->name[0] ? cl->name : NULL,
                            cl->admin, NULL, uid) != TK_OK) {
            tk_pg_exec(c, "ROLLBACK", 0, NULL);
            continue; /* e.g. the email was taken meanwhile: look again */
        }
        const char *q[] = {iss, cl->sub, uid, cl->email[0] ? cl->email : NULL};
        res = tk_pg_query(c,
                          "INSERT INTO user_identities (issuer, subject, user_id, email) "
                          "VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING RETURNING user_id",
                          4, q);
        int made = tk_pg_ok(res) && PQntuples(res) == 1;
        PQclear(res);
        if (made && tk_pg_exec(c, "COMMIT", 0, NULL) == TK_OK) {
            tk_info("oidc", "msg=\"%s\" user=%s issuer=%s",
                    st == TK_OK ? "identity linked by email" : "user created", uid, iss);
            return TK_OK;
        }
        tk_pg_exec(c, "ROLLBACK", 0, NULL); /* another sign-in created it first */
    }
    return TK_ERROR;
}

/* A failed callback. The callback is a browser's navigation back from the
 * provider: a browser (Accept: text/html) is sent to the sign-in page with
 * ?error=CODE&error_description=..., which shows the reason; any other client
 * gets the JSON error with its status. */
static void callback_fail(tk_req *r, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void callback_fail(tk_req *r, int status, const char *code, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *accept = tk_req_header(r, "Accept");
    if (!accept || !strstr(accept, "text/html")) {
        tk_respond_error(r, status, code, "%s", msg);
        return;
    }
    tk_arena *a = tk_req_arena(r);
    char *loc =
        tk_arena_printf(a, "/?error=%s&error_description=%s", code, tk_percent_encode(a, msg));
    tk_respond_header(r, "Location", loc);
    tk_respond_header(r, "Cache-Control", "no-store");
    tk_respond(r, 302, "text/plain", "", 0);
}

static void h_callback(tk_req *r, void *ud)
{
    if (oidc_off(r))
        return;
    tk_arena *a = tk_req_arena(r);
    const char *perr = tk_req_query(r, "error");
    const char *code = tk_req_query(r, "code");
    const char *state = tk_req_query(r, "state");
    const char *browser = app_cookie_get(a, tk_req_header(r, "Cookie"), flow_cookie_name());
    if (!state || !app_is_hex(state, APP_SECRET_HEX)) {
        callback_fail(r, 400, "OIDC_STATE", "the sign-in callback has no valid state");
        return;
    }
    char err[512];
    char *id_token = NULL, *access_token = NULL;
    struct flow f;
    PGconn *c = app_db_acquire();
    if (!c) {
        app_respond_db_unavailable(r);
        return;
    }
    tk_status st = take_flow(c, state, browser, &f);
    if (st == TK_ERROR) {
        app_respond_db_unavailable(r);
        goto out;
    }
    if (st != TK_OK) {
        tk_warn("oidc", "msg=\"callback refused\" reason=\"%s\" ip=%s",
                st == TK_ENOENT ? "unknown or used state" : "another browser or expired",
                tk_req_client_ip(r));
        callback_fail(r, 400, "OIDC_STATE",
                      "this sign-in is unknown, expired, already used or was started in "
                      "another browser; start again");
        goto out;
    }
    set_flow_cookie(r, "", 0);
    if (perr) {
        callback_fail(r, 401, "OIDC_DENIED", "the provider refused the sign-in: %.100s", perr);
        goto out;
    }
    if (!code || !*code || strlen(code) > 2048) {
        callback_fail(r, 400, "OIDC_STATE", "the sign-in callback has no code");
        goto out;
    }
    if (discover(err, sizeof err) != TK_OK) {
        callback_fail(r, 502, "OIDC_PROVIDER", "the sign-in provider is unavailable: %s", err);
        goto out;
    }
    st = exchange(a, code, &f, &id_token, &access_token, err, sizeof err);
    if (st != TK_OK) {
        tk_warn("oidc", "msg=\"token exchange failed\" reason=\"%s\"", err);
        callback_fail(r, 502, "OIDC_TOKEN", "%s", err);
        goto out;
    }
    app_idtoken_claims cl;
    st = verify_id_token(id_token, f.nonce, &cl, err, sizeof err);
    if (st != TK_OK) {
        tk_warn("oidc", "msg=\"ID token refused\" reason=\"%s\"", err);
        callback_fail(r, st == TK_ERROR ? 502 : 401, "OIDC_ID_TOKEN", "%s", err);
        goto out;
    }
    if (!cl.email[0] || !cl.name[0])
        userinfo(a, access_token, &cl);
    char uid[TK_UUID_LEN];
    st = find_or_create(c, &cl, uid);
    if (st == TK_EDENIED) {
        callback_fail(r, 409, "EMAIL_IN_USE",
                      "an account with the email %s already exists; sign in with its password, "
                      "or ask the administrator to link accounts (OIDC_LINK_BY_EMAIL)",
                      cl.email);
        goto out;
    }
    if (st != TK_OK) {
        app_respond_db_unavailable(r);
        goto out;
    }
    /* the admin claim makes an admin at each sign-in; its absence demotes no
     * one (an admin may have made the account one) */
    if (cl.admin && app_users_set_admin(c, uid, 1) != TK_OK) {
        app_respond_db_unavailable(r);
        goto out;
    }
    st = app_users_disabled(c, uid);
    if (st == TK_EDENIED) {
        app_audit(
            c, NULL, tk_req_client_ip(r), "auth.login_failed", uid, NULL,
            tk_json_obj("method", json_string("oidc"), "reason", json_string("disabled"), NULL));
        callback_fail(r, 403, "ACCOUNT_DISABLED", "this account is disabled");
        goto out;
    }
    if (st != TK_OK) {
        app_respond_db_unavailable(r);
        goto out;
    }
    char csrf[APP_SECRET_HEX + 1];
    long long exp;
    if (app_signin_start_session(r, c, uid, "oidc", csrf, sizeof csrf, &exp) != TK_OK) {
        app_respond_db_unavailable(r);
        goto out;
    }
    tk_respond_header(r, "Location", f.return_to);
    tk_respond(r, 302, "text/plain", "", 0);
out:
    if (id_token) {
        sodium_memzero(id_token, strlen(id_token));
        free(id_token);
    }
    if (access_token) {
        sodium_memzero(access_token, strlen(access_token));
        free(access_token);
    }
    app_db_release(c);
}

const tk_route app_oidc_routes[] = {
    {"GET", "/api/auth/oidc/start", h_start, NULL, TK_ROUTE_PUBLIC | TK_ROUTE_BLOCKING},
    {"GET", "/api/auth/oidc/callback", h_callback, NULL, TK_ROUTE_PUBLIC | TK_ROUTE_BLOCKING},
};
const size_t app_oidc_nroutes = TK_ARRAY_LEN(app_oidc_routes);
