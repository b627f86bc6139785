/* JWS parsing and signatures (RS256, ES256), JWKS parsing, ID token claim
 * checks — with keys made here by OpenSSL and tokens signed here. */
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>
#include <sodium.h>

#include "app/auth/idtoken.h"
#include "app/auth/jwks.h"
#include "app/auth/jwt.h"
#include "app/auth/secret.h"
#include "tk_test.h"

static char *b64u(const void *p, size_t n)
{
    size_t l = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
    char *o = malloc(l);
    sodium_bin2base64(o, l, p, n, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
    return o;
}

static char *b64u_str(const char *s)
{
    return b64u(s, strlen(s));
}

static EVP_PKEY *rsa_new(int bits)
{
    EVP_PKEY *k = EVP_RSA_gen((unsigned)bits);
    CHECK(k != NULL);
    return k;
}

static EVP_PKEY *ec_new(const char *curve)
{
    EVP_PKEY *k = EVP_EC_gen(curve);
    CHECK(k != NULL);
    return k;
}

static char *bn_b64u(EVP_PKEY *k, const char *param, int pad)
{
    BIGNUM *bn = NULL;
    CHECK(EVP_PKEY_get_bn_param(k, param, &bn) == 1);
    int n = pad ? pad : BN_num_bytes(bn);
    unsigned char *buf = malloc((size_t)n);
    BN_bn2binpad(bn, buf, n);
    char *o = b64u(buf, (size_t)n);
    free(buf);
    BN_free(bn);
    return o;
}

/* A public JWK (JSON object text) for k. */
static char *jwk_of(EVP_PKEY *k, const char *kid, const char *extra)
{
    char *out = malloc(4096);
    if (EVP_PKEY_get_base_id(k) == EVP_PKEY_RSA) {
        char *n = bn_b64u(k, OSSL_PKEY_PARAM_RSA_N, 0), *e = bn_b64u(k, OSSL_PKEY_PARAM_RSA_E, 0);
        snprintf(out, 4096, "{\"kty\":\"RSA\",\"kid\":\"%s\",\"n\":\"%s\",\"e\":\"%s\"%s}", kid, n,
                 e, extra ? extra : "");
        free(n);
        free(e);
    } else {
        char *x = bn_b64u(k, OSSL_PKEY_PARAM_EC_PUB_X, 32),
             *y = bn_b64u(k, OSSL_PKEY_PARAM_EC_PUB_Y, 32);
        snprintf(out, 4096,
                 "{\"kty\":\"EC\",\"crv\":\"P-256\",\"kid\":\"%s\",\"x\":\"%s\",\"y\":\"%s\"%s}",
                 kid, x, y, extra ? extra : "");
        free(x);
        free(y);
    }
    return out;
}

/* Signs header.payload with k (RS256 or ES256 by key type) into a compact JWS. */
static char *sign(EVP_PKEY *k, const char *header, const char *payload)
{
    char *h = b64u_str(header), *p = b64u_str(payload);
    size_t il = strlen(h) + strlen(p) + 2;
    char *input = malloc(il);
    snprintf(input, il, "%s.%s", h, p);
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    CHECK(EVP_DigestSignInit(c, NULL, EVP_sha256(), NULL, k) == 1);
    size_t sl = 0;
    CHECK(EVP_DigestSign(c, NULL, &sl, (unsigned char *)input, strlen(input)) == 1);
    unsigned char *sig = malloc(sl);
    CHECK(EVP_DigestSign(c, sig, &sl, (unsigned char *)input, strlen(input)) == 1);
    EVP_MD_CTX_free(c);
    char *s64;
    if (EVP_PKEY_get_base_id(k) == EVP_PKEY_EC) {
        const unsigned char *q = sig;
        ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &q, (long)sl);
        unsigned char raw[64];
        BN_bn2binpad(ECDSA_SIG_get0_r(es), raw, 32);
        BN_bn2binpad(ECDSA_SIG_get0_s(es), raw + 32, 32);
        ECDSA_SIG_free(es);
        s64 = b64u(raw, 64);
    } else {
        s64 = b64u(sig, sl);
    }
    size_t tl = strlen(input) + strlen(s64) + 2;
    char *tok = malloc(tl);
    snprintf(tok, tl, "%s.%s", input, s64);
    free(h);
    free(p);
    free(input);
    free(sig);
    free(s64);
    return tok;
}

static app_jwks *jwks_of(const char *keys_json)
{
    char err[256];
    app_jwks *s;
    char doc[16384];
    snprintf(doc, sizeof doc, "{\"keys\":[%s]}", keys_json);
    if (app_jwks_parse(doc, strlen(doc), &s, err, sizeof err) != TK_OK)
        TK_TEST_FAIL("jwks: %s", err);
    return s;
}

/* OIDC_ADMIN_CLAIM: claim=value against a string or an array; a bare claim
 * against true; anything else is no admin */
TEST(idtoken_admin_claim)
{
    json_t *p = json_loads("{\"groups\":[\"staff\",\"tusko-admins\"],\"role\":\"ops\","
                           "\"is_admin\":true,\"no\":false,\"n\":1,\"nul\":\"a\\u0000b\"}",
                           JSON_ALLOW_NUL, NULL);
    CHECK(p != NULL);
    CHECK(auth_idtoken_admin_claim(p, "groups=tusko-admins"));
    CHECK(!auth_idtoken_admin_claim(p, "groups=tusko"));
    CHECK(auth_idtoken_admin_claim(p, "role=ops"));
    CHECK(!auth_idtoken_admin_claim(p, "role=op"));
    CHECK(auth_idtoken_admin_claim(p, "is_admin"));
    CHECK(!auth_idtoken_admin_claim(p, "no"));
    CHECK(!auth_idtoken_admin_claim(p, "n"));
    CHECK(!auth_idtoken_admin_claim(p, "n=1"));
    CHECK(!auth_idtoken_admin_claim(p, "nul=a"));
    CHECK(!auth_idtoken_admin_claim(p, "groups"));
    CHECK(!auth_idtoken_admin_claim(p, "missing=x"));
    CHECK(!auth_idtoken_admin_claim(p, "=x"));
    CHECK(!auth_idtoken_admin_claim(p, ""));
    CHECK(!auth_idtoken_admin_claim(p, NULL));
    json_decref(p);
}

TEST(b64url_strict)
{
    unsigned char *o;
    size_t n;
    CHECK(app_b64url_decode("aGk", 3, &o, &n) == TK_OK);
    CHECK_INT(n, ==, 2);
    CHECK(memcmp(o, "hi", 2) == 0);
    free(o);
    CHECK(app_b64url_decode("aGk=", 4, &o, &n) != TK_OK); /* padding */
    CHECK(app_b64url_decode("a+/k", 4, &o, &n) != TK_OK); /* not the URL alphabet */
    CHECK(app_b64url_decode("a", 1, &o, &n) != TK_OK);
    CHECK(app_b64url_decode("a Gk", 4, &o, &n) != TK_OK);
}

TEST(jwt_parse_refusals)
{
    char err[256];
    app_jwt j;
    char *h_none = b64u_str("{\"alg\":\"none\"}"), *h_hs = b64u_str("{\"alg\":\"HS256\"}"),
         *h_rs = b64u_str("{\"alg\":\"RS256\"}"),
         *h_crit = b64u_str("{\"alg\":\"RS256\",\"crit\":[\"x\"]}"), *h_arr = b64u_str("[1]"),
         *h_dup = b64u_str("{\"alg\":\"RS256\",\"alg\":\"none\"}"),
         *h_kid = b64u_str("{\"alg\":\"RS256\",\"kid\":7}"), *p = b64u_str("{\"sub\":\"x\"}");
    char t[2048];
    const char *cases[][3] = {{h_none, p, "c2ln"}, {h_hs, p, "c2ln"},    {h_rs, p, ""},
                              {h_crit, p, "c2ln"}, {h_arr, p, "c2ln"},   {h_dup, p, "c2ln"},
                              {h_kid, p, "c2ln"},  {h_rs, "!!", "c2ln"}, {h_rs, p, "c2ln="}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(t, sizeof t, "%s.%s.%s", cases[i][0], cases[i][1], cases[i][2]);
        if (app_jwt_parse(t, strlen(t), &j, err, sizeof err) == TK_OK)
            TK_TEST_FAIL("accepted case %zu: %s", i, t);
    }
    snprintf(t, sizeof t, "%s.%s", h_rs, p);
    CHECK(app_jwt_parse(t, strlen(t), &j, err, sizeof err) != TK_OK);
    snprintf(t, sizeof t, "%s.%s.c2ln.c2ln", h_rs, p);
    CHECK(app_jwt_parse(t, strlen(t), &j, err, sizeof err) != TK_OK);
    CHECK(app_jwt_parse("", 0, &j, err, sizeof err) != TK_OK);
    snprintf(t, sizeof t, "%s.%s.c2ln", h_rs, p);
    CHECK(app_jwt_parse(t, strlen(t), &j, err, sizeof err) == TK_OK);
    CHECK_INT(j.alg, ==, APP_JWT_RS256);
    CHECK(j.kid == NULL);
    CHECK_INT(j.siglen, ==, 3);
    app_jwt_free(&j);
    char *big = malloc(APP_JWT_MAX + 100);
    memset(big, 'a', APP_JWT_MAX + 99);
    big[APP_JWT_MAX + 99] = 0;
    CHECK(app_jwt_parse(big, strlen(big), &j, err, sizeof err) != TK_OK);
    free(big);
    free(h_none), free(h_hs), free(h_rs), free(h_crit), free(h_arr), free(h_dup), free(h_kid),
        free(p);
}

TEST(jwt_rs256_and_es256_signatures)
{
    EVP_PKEY *rsa = rsa_new(2048), *rsa2 = rsa_new(2048), *ec = ec_new("P-256");
    char err[256];
    app_jwt j;
    char *t = sign(rsa, "{\"alg\":\"RS256\",\"kid\":\"r1\"}", "{\"sub\":\"a\"}");
    CHECK(app_jwt_parse(t, strlen(t), &j, err, sizeof err) == TK_OK);
    CHECK_STR(j.kid, "r1");
    CHECK_INT(app_jwt_verify(&j, rsa), ==, TK_OK);
    CHECK_INT(app_jwt_verify(&j, rsa2), ==, TK_EDENIED);
    CHECK_INT(app_jwt_verify(&j, ec), ==, TK_EDENIED); /* wrong key type */
    j.signing_input[j.signing_input_len - 1] ^= 1;     /* tamper with the payload */
    CHECK_INT(app_jwt_verify(&j, rsa), ==, TK_EDENIED);
    app_jwt_free(&j);
    free(t);
    t = sign(ec, "{\"alg\":\"ES256\"}", "{\"sub\":\"a\"}");
    CHECK(app_jwt_parse(t, strlen(t), &j, err, sizeof err) == TK_OK);
    CHECK_INT(j.alg, ==, APP_JWT_ES256);
    CHECK_INT(j.siglen, ==, 64);
    CHECK_INT(app_jwt_verify(&j, ec), ==, TK_OK);
    CHECK_INT(app_jwt_verify(&j, rsa), ==, TK_EDENIED);
    j.sig[5] ^= 0x40;
    CHECK_INT(app_jwt_verify(&j, ec), ==, TK_EDENIED);
    j.siglen = 63;
    CHECK_INT(app_jwt_verify(&j, ec), ==, TK_EDENIED);
    app_jwt_free(&j);
    free(t);
    /* an RS256 token cannot be passed off as ES256 with the same bytes */
    t = sign(rsa, "{\"alg\":\"ES256\"}", "{\"sub\":\"a\"}");
    CHECK(app_jwt_parse(t, strlen(t), &j, err, sizeof err) == TK_OK);
    CHECK_INT(app_jwt_verify(&j, rsa), ==, TK_EDENIED);
    app_jwt_free(&j);
    free(t);
    EVP_PKEY_free(rsa);
    EVP_PKEY_free(rsa2);
    EVP_PKEY_free(ec);
}

TEST(jwt_weak_keys_refused)
{
    EVP_PKEY *small = rsa_new(1024), *p384 = ec_new("P-384");
    char err[256];
    app_jwt j;
    char *t = sign(small, "{\"alg\":\"RS256\"}", "{}");
    CHECK(app_jwt_parse(t, strlen(t), &j, err, sizeof err) == TK_OK);
    CHECK_INT(app_jwt_verify(&j, small), ==, TK_EDENIED);
    app_jwt_free(&j);
    free(t);
    t = sign(p384, "{\"alg\":\"ES256\"}", "{}");
    CHECK(app_jwt_parse(t, strlen(t), &j, err, sizeof err) == TK_OK);
    CHECK_INT(app_jwt_verify(&j, p384), ==, TK_EDENIED);
    app_jwt_free(&j);
    free(t);
    EVP_PKEY_free(small);
    EVP_PKEY_free(p384);
}

TEST(jwks_parse_keeps_usable_keys)
{
    EVP_PKEY *rsa = rsa_new(2048), *ec = ec_new("P-256"), *small = rsa_new(1024);
    char *a = jwk_of(rsa, "r1", ",\"use\":\"sig\",\"alg\":\"RS256\""), *b = jwk_of(ec, "e1", NULL),
         *c = jwk_of(rsa, "enc", ",\"use\":\"enc\""), *d = jwk_of(small, "small", NULL);
    char keys[16384];
    snprintf(keys, sizeof keys,
             "%s,%s,%s,%s,{\"kty\":\"oct\",\"k\":\"c2VjcmV0\"},"
             "{\"kty\":\"EC\",\"crv\":\"P-384\",\"x\":\"AA\",\"y\":\"AA\"},"
             "{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"%s\",\"y\":\"%s\"},"
             "{\"kty\":\"RSA\",\"n\":\"!!\",\"e\":\"AQAB\"},7,\"x\",{}",
             a, b, c, d,
             "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", /* (0, 1): not on the curve */
             "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAE");
    app_jwks *s = jwks_of(keys);
    CHECK_INT(s->n, ==, 2);
    CHECK_STR(s->keys[0].kid, "r1");
    CHECK_INT(s->keys[0].type, ==, EVP_PKEY_RSA);
    CHECK_STR(s->keys[1].kid, "e1");
    CHECK_INT(s->keys[1].type, ==, EVP_PKEY_EC);
    app_jwks_free(s);
    char err[256];
    const char *bad[] = {"", "[]", "{}", "{\"keys\":{}}", "{\"keys\":[] ", NULL};
    for (int i = 0; bad[i]; i++) {
        app_jwks *x = NULL;
        if (app_jwks_parse(bad[i], strlen(bad[i]), &x, err, sizeof err) == TK_OK)
            TK_TEST_FAIL("accepted \"%s\"", bad[i]);
    }
    free(a), free(b), free(c), free(d);
    EVP_PKEY_free(rsa);
    EVP_PKEY_free(ec);
    EVP_PKEY_free(small);
}

/* ---------- ID tokens ---------- */

static EVP_PKEY *K_RSA, *K_EC;
static app_jwks *KEYS;

static void keys_setup(void)
{
    K_RSA = rsa_new(2048);
    K_EC = ec_new("P-256");
    char *a = jwk_of(K_RSA, "r1", NULL), *b = jwk_of(K_EC, "e1", ",\"alg\":\"ES256\"");
    char both[8192];
    snprintf(both, sizeof both, "%s,%s", a, b);
    KEYS = jwks_of(both);
    free(a);
    free(b);
}

#define NOW 1800000000LL
static const app_idtoken_expect WANT = {
    .issuer = "https://id.example.com", .client_id = "tusko", .nonce = "n-123", .now_s = NOW};

/* An ID token with the given claims JSON, signed by key with kid. */
static tk_status check(EVP_PKEY *key, const char *kid, const char *claims, app_idtoken_claims *c)
{
    char hdr[128];
    if (kid)
        snprintf(hdr, sizeof hdr, "{\"alg\":\"%s\",\"kid\":\"%s\"}",
                 EVP_PKEY_get_base_id(key) == EVP_PKEY_RSA ? "RS256" : "ES256", kid);
    else
        snprintf(hdr, sizeof hdr, "{\"alg\":\"%s\"}",
                 EVP_PKEY_get_base_id(key) == EVP_PKEY_RSA ? "RS256" : "ES256");
    char *t = sign(key, hdr, claims);
    char err[256];
    tk_status st = app_idtoken_verify(t, KEYS, &WANT, c, err, sizeof err);
    free(t);
    return st;
}

static char *claims(const char *over)
{
    static char buf[2048];
    snprintf(buf, sizeof buf,
             "{\"iss\":\"https://id.example.com\",\"aud\":\"tusko\",\"sub\":\"u-1\","
             "\"exp\":%lld,\"iat\":%lld,\"nonce\":\"n-123\",\"email\":\"a@example.com\","
             "\"email_verified\":true%s%s}",
             NOW + 300, NOW - 10, over ? "," : "", over ? over : "");
    return buf;
}

TEST(idtoken_accepts_a_good_token_rs256_and_es256)
{
    keys_setup();
    app_idtoken_claims c;
    CHECK_INT(check(K_RSA, "r1", claims(NULL), &c), ==, TK_OK);
    CHECK_STR(c.sub, "u-1");
    CHECK_STR(c.email, "a@example.com");
    CHECK_INT(c.email_verified, ==, 1);
    CHECK_INT(check(K_EC, "e1", claims("\"name\":\"A\""), &c), ==, TK_OK);
    CHECK_STR(c.name, "A");
    /* no kid: any key of the right type */
    CHECK_INT(check(K_EC, NULL, claims(NULL), &c), ==, TK_OK);
    /* aud as an array with azp */
    const char *arr =
        "{\"iss\":\"https://id.example.com\",\"aud\":[\"tusko\",\"api\"],\"azp\":"
        "\"tusko\",\"sub\":\"u\",\"exp\":1800000300,\"iat\":1800000000,\"nonce\":\"n-123\","
        "\"email_verified\":\"true\",\"email\":\"b@x.y\"}";
    CHECK_INT(check(K_RSA, "r1", arr, &c), ==, TK_OK);
    CHECK_INT(c.email_verified, ==, 1);
    /* within the clock skew */
    char late[512];
    snprintf(late, sizeof late,
             "{\"iss\":\"https://id.example.com\",\"aud\":\"tusko\",\"sub\":\"u\",\"exp\":%lld,"
             "\"iat\":%lld,\"nonce\":\"n-123\"}",
             NOW - APP_IDTOKEN_SKEW_S + 5, NOW + APP_IDTOKEN_SKEW_S - 5);
    CHECK_INT(check(K_RSA, "r1", late, &c), ==, TK_OK);
    CHECK_STR(c.email, "");
    CHECK_INT(c.email_verified, ==, 0);
}

TEST(idtoken_refuses_bad_claims)
{
    keys_setup();
    app_idtoken_claims c;
    char buf[1024];
    struct {
        const char *claims;
        const char *why;
    } cases[] = {
        {"{\"iss\":\"https://evil.example.com\",\"aud\":\"tusko\",\"sub\":\"u\",\"exp\":1800000300,"
         "\"iat\":1800000000,\"nonce\":\"n-123\"}",
         "issuer"},
        {"{\"iss\":\"https://id.example.com/\",\"aud\":\"tusko\",\"sub\":\"u\",\"exp\":1800000300,"
         "\"iat\":1800000000,\"nonce\":\"n-123\"}",
         "issuer with a slash"},
        {"{\"iss\":\"https://id.example.com\",\"aud\":\"other\",\"sub\":\"u\",\"exp\":1800000300,"
         "\"iat\":1800000000,\"nonce\":\"n-123\"}",
         "audience"},
        {"{\"iss\":\"https://id.example.com\",\"aud\":[\"other\",\"tusko\"],\"sub\":\"u\",\"exp\":"
         "1800000300,\"iat\":1800000000,\"nonce\":\"n-123\"}",
         "several audiences, no azp"},
        {"{\"iss\":\"https://id.example.com\",\"aud\":\"tusko\",\"azp\":\"other\",\"sub\":\"u\","
         "\"exp\":1800000300,\"iat\":1800000000,\"nonce\":\"n-123\"}",
         "azp"},
        {"{\"iss\":\"https://id.example.com\",\"aud\":\"tusko\",\"sub\":\"u\",\"exp\":1799999000,"
         "\"iat\":1799998000,\"nonce\":\"n-123\"}",
         "expired"},
        {"{\"iss\":\"https://id.example.com\",\"aud\":\"tusko\",\"sub\":\"u\",\"iat\":1800000000,"
         "\"nonce\":\"n-123\"}",
         "no exp"},
        {"{\"iss\":\"https://"
         "id.example.com\",\"aud\":\"tusko\",\"sub\":\"u\",\"exp\":\"1800000300\","
         "\"iat\":1800000000,\"nonce\":\"n-123\"}",
         "exp as a string"},
        {"{\"iss\":\"https://id.example.com\",\"aud\":\"tusko\",\"sub\":\"u\",\"exp\":1800009000,"
         "\"iat\":1800008000,\"nonce\":\"n-123\"}",
         "issued in the future"},
        {"{\"iss\":\"https://id.example.com\",\"aud\":\"tusko\",\"sub\":\"u\",\"exp\":1800009000,"
         "\"iat\":1800000000,\"nbf\":1800008000,\"nonce\":\"n-123\"}",
         "not before"},
        {"{\"iss\":\"https://id.example.com\",\"aud\":\"tusko\",\"sub\":\"u\",\"exp\":1800000300,"
         "\"iat\":1800000000,\"nonce\":\"n-124\"}",
         "nonce"},
        {"{\"iss\":\"https://id.example.com\",\"aud\":\"tusko\",\"sub\":\"u\",\"exp\":1800000300,"
         "\"iat\":1800000000}",
         "no nonce"},
        {"{\"iss\":\"https://id.example.com\",\"aud\":\"tusko\",\"sub\":\"\",\"exp\":1800000300,"
         "\"iat\":1800000000,\"nonce\":\"n-123\"}",
         "empty sub"},
        {"{\"iss\":\"https://id.example.com\",\"aud\":\"tusko\",\"sub\":\"a\\u0000b\",\"exp\":"
         "1800000300,\"iat\":1800000000,\"nonce\":\"n-123\"}",
         "NUL in sub"},
        {"{\"iss\":\"https://id.example.com\",\"aud\":\"tusko\",\"exp\":1800000300,\"iat\":"
         "1800000000,\"nonce\":\"n-123\"}",
         "no sub"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(buf, sizeof buf, "%s", cases[i].claims);
        tk_status st = check(K_RSA, "r1", buf, &c);
        if (st != TK_EDENIED)
            TK_TEST_FAIL("%s: got %d, want TK_EDENIED", cases[i].why, st);
    }
}

TEST(idtoken_signature_and_keys)
{
    keys_setup();
    app_idtoken_claims c;
    /* unknown kid: the caller refetches */
    CHECK_INT(check(K_RSA, "r9", claims(NULL), &c), ==, TK_ENOENT);
    /* the right kid but another key signed it */
    EVP_PKEY *other = rsa_new(2048);
    CHECK_INT(check(other, "r1", claims(NULL), &c), ==, TK_EDENIED);
    EVP_PKEY_free(other);
    /* an EC key cannot be used for an RS256 token, even by kid */
    CHECK_INT(check(K_RSA, "e1", claims(NULL), &c), ==, TK_ENOENT);
    /* malformed */
    char err[256];
    CHECK_INT(app_idtoken_verify("a.b.c", KEYS, &WANT, &c, err, sizeof err), ==, TK_EINVAL);
    CHECK_INT(app_idtoken_verify(NULL, KEYS, &WANT, &c, err, sizeof err), ==, TK_EINVAL);
    /* no keys at all */
    app_jwks *none = jwks_of("");
    char *t = sign(K_RSA, "{\"alg\":\"RS256\",\"kid\":\"r1\"}", claims(NULL));
    CHECK_INT(app_idtoken_verify(t, none, &WANT, &c, err, sizeof err), ==, TK_ENOENT);
    free(t);
    app_jwks_free(none);
}

TEST_MAIN()
