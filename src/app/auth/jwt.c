#include "app/auth/jwt.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/rsa.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/json.h"

tk_status app_b64url_decode(const char *in, size_t len, unsigned char **out, size_t *outlen)
{
    *out = NULL;
    *outlen = 0;
    if (len % 4 == 1)
        return TK_EINVAL;
    size_t max = len / 4 * 3 + 3;
    unsigned char *b = tk_malloc(max + 1);
    size_t n = 0;
    const char *end = NULL;
    if (len > 0 && sodium_base642bin(b, max, in, len, NULL, &n, &end,
                                     sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0) {
        free(b);
        return TK_EINVAL;
    }
    if (len > 0 && end != in + len) {
        free(b);
        return TK_EINVAL;
    }
    b[n] = 0;
    *out = b;
    *outlen = n;
    return TK_OK;
}

void app_jwt_free(app_jwt *j)
{
    if (!j)
        return;
    json_decref(j->header);
    json_decref(j->payload);
    free(j->sig);
    free(j->signing_input);
    memset(j, 0, sizeof *j);
}

static json_t *decode_json(const char *part, size_t len, const char *what, char *err, size_t errlen)
{
    unsigned char *raw;
    size_t n;
    if (app_b64url_decode(part, len, &raw, &n) != TK_OK) {
        snprintf(err, errlen, "the token's %s is not base64url", what);
        return NULL;
    }
    char jerr[160];
    json_t *j = tk_json_parse((const char *)raw, n, APP_JWT_MAX, jerr, sizeof jerr);
    free(raw);
    if (!j) {
        snprintf(err, errlen, "the token's %s is not JSON: %s", what, jerr);
        return NULL;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        snprintf(err, errlen, "the token's %s is not a JSON object", what);
        return NULL;
    }
    return j;
}

tk_status app_jwt_parse(const char *token, size_t len, app_jwt *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!token || len == 0 || len > APP_JWT_MAX) {
        snprintf(err, errlen, "the token is empty or over %d bytes", APP_JWT_MAX);
        return TK_EINVAL;
    }
    const char *d1 = memchr(token, '.', len);
    const char *d2 = d1 ? memchr(d1 + 1, '.', len - (size_t)(d1 + 1 - token)) : NULL;
    if (!d1 || !d2 || memchr(d2 + 1, '.', len - (size_t)(d2 + 1 - token))) {
        snprintf(err, errlen, "the token does not have three parts");
        return TK_EINVAL;
    }
    size_t hl = (size_t)(d1 - token), pl = (size_t)(d2 - d1 - 1),
           sl = len - (size_t)(d2 + 1 - token);
    if (hl == 0 || pl == 0 || sl == 0) {
        snprintf(err, errlen, "the token has an empty part (unsigned tokens are refused)");
        return TK_EINVAL;
    }
    out->header = decode_json(token, hl, "header", err, errlen);
    if (!out->header)
        goto fail;
    out->payload = decode_json(d1 + 1, pl, "payload", err, errlen);
    if (!out->payload)
        goto fail;
    const char *alg = tk_json_str(out->header, "alg");
    if (alg && strcmp(alg, "RS256") == 0) {
        out->alg = APP_JWT_RS256;
    } else if (alg && strcmp(alg, "ES256") == 0) {
        out->alg = APP_JWT_ES256;
    } else {
        snprintf(err, errlen, "the token's algorithm \"%.20s\" is not accepted (RS256, ES256)",
                 alg ? alg : "(none)");
        goto fail;
    }
    if (json_object_get(out->header, "crit")) {
        snprintf(err, errlen, "the token has critical header parameters, which are unsupported");
        goto fail;
    }
    json_t *kid = json_object_get(out->header, "kid");
    if (kid &&
        (!json_is_string(kid) || strlen(json_string_value(kid)) != json_string_length(kid))) {
        snprintf(err, errlen, "the token's kid is not a string");
        goto fail;
    }
    out->kid = kid ? json_string_value(kid) : NULL;
    if (app_b64url_decode(d2 + 1, sl, &out->sig, &out->siglen) != TK_OK) {
        snprintf(err, errlen, "the token's signature is not base64url");
        goto fail;
    }
    out->signing_input = tk_strndup(token, hl + 1 + pl);
    out->signing_input_len = hl + 1 + pl;
    return TK_OK;
fail:
    app_jwt_free(out);
    return TK_EINVAL;
}

int app_jwt_alg_key_type(app_jwt_alg alg)
{
    return alg == APP_JWT_RS256 ? EVP_PKEY_RSA : EVP_PKEY_EC;
}

/* An ES256 signature is r || s (32 bytes each); OpenSSL wants DER. */
static unsigned char *es256_der(const unsigned char *sig, size_t len, int *derlen)
{
    if (len != 64)
        return NULL;
    ECDSA_SIG *s = ECDSA_SIG_new();
    BIGNUM *r = BN_bin2bn(sig, 32, NULL), *ss = BN_bin2bn(sig + 32, 32, NULL);
    if (!s || !r || !ss) {
        ECDSA_SIG_free(s);
        BN_free(r);
        BN_free(ss);
        return NULL;
    }
    ECDSA_SIG_set0(s, r, ss);
    unsigned char *der = NULL;
    *derlen = i2d_ECDSA_SIG(s, &der);
    ECDSA_SIG_free(s);
    if (*derlen <= 0)
        return NULL;
    return der;
}

static int key_fits(app_jwt_alg alg, EVP_PKEY *key)
{
    if (!key || EVP_PKEY_get_base_id(key) != app_jwt_alg_key_type(alg))
        return 0;
    if (alg == APP_JWT_RS256)
        return EVP_PKEY_get_bits(key) >= 2048;
    char group[64];
    size_t gl = 0;
    if (!EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group, &gl))
        return 0;
    return strcmp(group, "prime256v1") == 0 || strcmp(group, "P-256") == 0;
}

tk_status app_jwt_verify(const app_jwt *j, EVP_PKEY *key)
{
    if (!key_fits(j->alg, key))
        return TK_EDENIED;
    const unsigned char *sig = j->sig;
    size_t siglen = j->siglen;
    unsigned char *der = NULL;
    if (j->alg == APP_JWT_ES256) {
        int dl = 0;
        der = es256_der(j->sig, j->siglen, &dl);
        if (!der)
            return TK_EDENIED;
        sig = der;
        siglen = (size_t)dl;
    }
    tk_status st = TK_EDENIED;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx)
        tk_oom();
    if (EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, key) == 1 &&
        EVP_DigestVerify(ctx, sig, siglen, (const unsigned char *)j->signing_input,
                         j->signing_input_len) == 1)
        st = TK_OK;
    EVP_MD_CTX_free(ctx);
    OPENSSL_free(der);
    ERR_clear_error(); /* a failed check leaves reasons in this thread's queue */
    return st;
}
