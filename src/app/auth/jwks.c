#include "app/auth/jwks.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/param_build.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/json.h"

void app_jwks_free(app_jwks *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        EVP_PKEY_free(s->keys[i].pkey);
    free(s->keys);
    free(s);
}

/* A base64url member of a JWK, decoded; NULL when absent or malformed. */
static unsigned char *member(const json_t *k, const char *name, size_t *len)
{
    const char *v = tk_json_str(k, name);
    unsigned char *out;
    if (!v || app_b64url_decode(v, strlen(v), &out, len) != TK_OK)
        return NULL;
    if (*len == 0) {
        free(out);
        return NULL;
    }
    return out;
}

static EVP_PKEY *from_params(const char *type, OSSL_PARAM_BLD *bld)
{
    EVP_PKEY *pkey = NULL;
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
    if (params && ctx && EVP_PKEY_fromdata_init(ctx) == 1 &&
        EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) != 1)
        pkey = NULL;
    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(params);
    if (pkey) {
        /* the point is on the curve / the modulus is sane */
        EVP_PKEY_CTX *chk = EVP_PKEY_CTX_new_from_pkey(NULL, pkey, NULL);
        if (!chk || EVP_PKEY_public_check(chk) != 1) {
            EVP_PKEY_free(pkey);
            pkey = NULL;
        }
        EVP_PKEY_CTX_free(chk);
    }
    return pkey;
}

static EVP_PKEY *rsa_key(const json_t *k)
{
    size_t nl = 0, el = 0;
    unsigned char *n = member(k, "n", &nl), *e = member(k, "e", &el);
    EVP_PKEY *pkey = NULL;
    if (n && e && nl >= 256 && nl <= 1024 && el <= 8) {
        BIGNUM *bn = BN_bin2bn(n, (int)nl, NULL), *be = BN_bin2bn(e, (int)el, NULL);
        OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
        if (bn && be && bld && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn) &&
            OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, be))
            pkey = from_params("RSA", bld);
        OSSL_PARAM_BLD_free(bld);
        BN_free(bn);
        BN_free(be);
    }
    free(n);
    free(e);
    if (pkey && EVP_PKEY_get_bits(pkey) < 2048) {
        EVP_PKEY_free(pkey);
        pkey = NULL;
    }
    return pkey;
}

static EVP_PKEY *ec_key(const json_t *k)
{
    const char *crv = tk_json_str(k, "crv");
    if (!crv || strcmp(crv, "P-256") != 0)
        return NULL;
    size_t xl = 0, yl = 0;
    unsigned char *x = member(k, "x", &xl), *y = member(k, "y", &yl);
    EVP_PKEY *pkey = NULL;
    if (x && y && xl == 32 && yl == 32) {
        unsigned char pt[65];
        pt[0] = 0x04;
        memcpy(pt + 1, x, 32);
        memcpy(pt + 33, y, 32);
        OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
        if (bld &&
            OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) &&
            OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, pt, sizeof pt))
            pkey = from_params("EC", bld);
        OSSL_PARAM_BLD_free(bld);
    }
    free(x);
    free(y);
    return pkey;
}

tk_status app_jwks_parse(const char *json, size_t len, app_jwks **out, char *err, size_t errlen)
{
    *out = NULL;
    char jerr[160];
    json_t *doc = tk_json_parse(json, len, APP_JWKS_MAX_BYTES, jerr, sizeof jerr);
    if (!doc) {
        snprintf(err, errlen, "the JWKS is not JSON: %s", jerr);
        return TK_EINVAL;
    }
    json_t *keys = json_object_get(doc, "keys");
    if (!json_is_object(doc) || !json_is_array(keys)) {
        json_decref(doc);
        snprintf(err, errlen, "the JWKS has no \"keys\" array");
        return TK_EINVAL;
    }
    app_jwks *s = tk_calloc(1, sizeof *s);
    s->keys = tk_calloc(APP_JWKS_MAX_KEYS, sizeof *s->keys);
    size_t i;
    json_t *k;
    json_array_foreach(keys, i, k)
    {
        if (s->n >= APP_JWKS_MAX_KEYS)
            break;
        if (!json_is_object(k))
            continue;
        const char *use = tk_json_str(k, "use");
        if (json_object_get(k, "use") && (!use || strcmp(use, "sig") != 0))
            continue;
        const char *kty = tk_json_str(k, "kty");
        const char *kid = tk_json_str(k, "kid");
        const char *alg = tk_json_str(k, "alg");
        if (!kty || (kid && strlen(kid) >= sizeof s->keys[0].kid) ||
            (alg && strlen(alg) >= sizeof s->keys[0].alg))
            continue;
        EVP_PKEY *pkey = NULL;
        int type = 0;
        if (strcmp(kty, "RSA") == 0) {
            pkey = rsa_key(k);
            type = EVP_PKEY_RSA;
        } else if (strcmp(kty, "EC") == 0) {
            pkey = ec_key(k);
            type = EVP_PKEY_EC;
        }
        if (!pkey)
            continue;
        app_jwk *j = &s->keys[s->n++];
        snprintf(j->kid, sizeof j->kid, "%s", kid ? kid : "");
        snprintf(j->alg, sizeof j->alg, "%s", alg ? alg : "");
        j->type = type;
        j->pkey = pkey;
    }
    ERR_clear_error();
    json_decref(doc);
    *out = s;
    return TK_OK;
}

size_t app_jwks_each(const app_jwks *s, const char *kid, app_jwt_alg alg,
                     int (*fn)(EVP_PKEY *key, void *ud), void *ud)
{
    const char *want = alg == APP_JWT_RS256 ? "RS256" : "ES256";
    size_t fits = 0;
    for (size_t i = 0; s && i < s->n; i++) {
        const app_jwk *k = &s->keys[i];
        if (kid && strcmp(k->kid, kid) != 0)
            continue;
        if (k->type != app_jwt_alg_key_type(alg) || (k->alg[0] && strcmp(k->alg, want) != 0))
            continue;
        fits++;
        if (fn(k->pkey, ud))
            break;
    }
    return fits;
}
