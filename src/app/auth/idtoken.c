#include "app/auth/idtoken.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lib/json.h"

struct try_ctx {
    const app_jwt *jwt;
    int ok;
};

static int try_key(EVP_PKEY *key, void *ud)
{
    struct try_ctx *t = ud;
    if (app_jwt_verify(t->jwt, key) == TK_OK)
        t->ok = 1;
    return t->ok;
}

/* A string claim without embedded NULs, or NULL. */
static const char *claim_str(const json_t *o, const char *name)
{
    json_t *v = json_object_get(o, name);
    if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
        return NULL;
    return json_string_value(v);
}

/* A NumericDate claim: TK_OK and *out; TK_ENOENT when absent; TK_EINVAL otherwise. */
static tk_status claim_time(const json_t *o, const char *name, int64_t *out)
{
    json_t *v = json_object_get(o, name);
    if (!v)
        return TK_ENOENT;
    double d;
    if (json_is_integer(v))
        d = (double)json_integer_value(v);
    else if (json_is_real(v))
        d = json_real_value(v);
    else
        return TK_EINVAL;
    if (!isfinite(d) || d < 0 || d > 1e13)
        return TK_EINVAL;
    *out = (int64_t)d;
    return TK_OK;
}

static int aud_ok(const json_t *p, const char *client_id, char *err, size_t errlen)
{
    json_t *aud = json_object_get(p, "aud");
    int found = 0, n = 0;
    if (json_is_string(aud)) {
        found = strcmp(json_string_value(aud), client_id) == 0;
        n = 1;
    } else if (json_is_array(aud)) {
        size_t i;
        json_t *a;
        json_array_foreach(aud, i, a)
        {
            n++;
            if (json_is_string(a) && strcmp(json_string_value(a), client_id) == 0)
                found = 1;
        }
    }
    if (!found) {
        snprintf(err, errlen, "the ID token is not for this client (aud)");
        return 0;
    }
    json_t *azp = json_object_get(p, "azp");
    if (azp && (!json_is_string(azp) || strcmp(json_string_value(azp), client_id) != 0)) {
        snprintf(err, errlen, "the ID token was issued to another party (azp)");
        return 0;
    }
    if (n > 1 && !azp) {
        snprintf(err, errlen, "the ID token has several audiences and no azp");
        return 0;
    }
    return 1;
}

tk_status app_idtoken_verify(const char *token, const app_jwks *keys,
                             const app_idtoken_expect *want, app_idtoken_claims *out, char *err,
                             size_t errlen)
{
    memset(out, 0, sizeof *out);
    app_jwt j;
    if (!token || app_jwt_parse(token, strlen(token), &j, err, errlen) != TK_OK)
        return TK_EINVAL;
    tk_status st = TK_EDENIED;
    struct try_ctx t = {.jwt = &j};
    size_t fits = app_jwks_each(keys, j.kid, j.alg, try_key, &t);
    if (fits == 0) {
        snprintf(err, errlen, "no key of the provider fits the ID token (kid %.60s)",
                 j.kid ? j.kid : "(none)");
        st = TK_ENOENT;
        goto out;
    }
    if (!t.ok) {
        snprintf(err, errlen, "the ID token's signature does not verify");
        goto out;
    }
    /* from here the payload is the provider's word */
    const json_t *p = j.payload;
    const char *iss = claim_str(p, "iss");
    if (!iss || strcmp(iss, want->issuer) != 0) {
        snprintf(err, errlen, "the ID token's issuer is not %s", want->issuer);
        goto out;
    }
    if (!aud_ok(p, want->client_id, err, errlen))
        goto out;
    int64_t exp = 0, iat = 0, nbf = 0;
    if (claim_time(p, "exp", &exp) != TK_OK) {
        snprintf(err, errlen, "the ID token has no valid exp");
        goto out;
    }
    if (exp + APP_IDTOKEN_SKEW_S <= want->now_s) {
        snprintf(err, errlen, "the ID token has expired");
        goto out;
    }
    if (claim_time(p, "iat", &iat) != TK_OK || iat > want->now_s + APP_IDTOKEN_SKEW_S) {
        snprintf(err, errlen, "the ID token has no valid iat (or one in the future)");
        goto out;
    }
    tk_status ns = claim_time(p, "nbf", &nbf);
    if (ns == TK_EINVAL || (ns == TK_OK && nbf > want->now_s + APP_IDTOKEN_SKEW_S)) {
        snprintf(err, errlen, "the ID token is not valid yet (nbf)");
        goto out;
    }
    const char *nonce = claim_str(p, "nonce");
    if (!nonce || !want->nonce || !tk_str_eq_ct(nonce, want->nonce)) {
        snprintf(err, errlen, "the ID token's nonce does not match this sign-in");
        goto out;
    }
    const char *sub = claim_str(p, "sub");
    if (!sub || !sub[0] || strlen(sub) >= sizeof out->sub) {
        snprintf(err, errlen, "the ID token has no valid sub");
        goto out;
    }
    snprintf(out->sub, sizeof out->sub, "%s", sub);
    const char *email = claim_str(p, "email");
    if (email && strlen(email) < sizeof out->email)
        snprintf(out->email, sizeof out->email, "%s", email);
    json_t *ev = json_object_get(p, "email_verified");
    /* some providers send "true" as a string */
    out->email_verified =
        json_is_true(ev) || (json_is_string(ev) && strcmp(json_string_value(ev), "true") == 0);
    const char *name = claim_str(p, "name");
    if (name && strlen(name) < sizeof out->name)
        snprintf(out->name, sizeof out->name, "%s", name);
    out->admin = auth_idtoken_admin_claim(p, want->admin_claim);
    st = TK_OK;
out:
    app_jwt_free(&j);
    return st;
}

int auth_idtoken_admin_claim(const json_t *p, const char *spec)
{
    if (!spec || !*spec || !json_is_object(p))
        return 0;
    const char *eq = strchr(spec, '=');
    size_t nlen = eq ? (size_t)(eq - spec) : strlen(spec);
    char name[128];
    if (nlen == 0 || nlen >= sizeof name)
        return 0;
    memcpy(name, spec, nlen);
    name[nlen] = '\0';
    json_t *v = json_object_get(p, name);
    if (!eq)
        return json_is_true(v);
    const char *want = eq + 1;
    if (json_is_string(v))
        return strlen(json_string_value(v)) == json_string_length(v) &&
               strcmp(json_string_value(v), want) == 0;
    if (json_is_array(v)) {
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e)
        {
            if (json_is_string(e) && strlen(json_string_value(e)) == json_string_length(e) &&
                strcmp(json_string_value(e), want) == 0)
                return 1;
        }
    }
    return 0;
}
