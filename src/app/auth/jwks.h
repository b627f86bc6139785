/*
 * jwks.h — JSON Web Key Sets (RFC 7517) as OpenID providers publish them:
 * public signing keys, RSA (n, e) and EC P-256 (x, y), made into OpenSSL keys.
 *
 * Keys that cannot serve ID token checks are skipped, not errors: "use" other
 * than "sig", other key types and curves, RSA under 2048 bits, malformed members.
 * At most APP_JWKS_MAX_KEYS are kept. A set with no usable key parses (n == 0):
 * the caller's lookups then fail.
 */
#ifndef APP_AUTH_JWKS_H
#define APP_AUTH_JWKS_H

#include <openssl/evp.h>
#include <stddef.h>

#include "app/auth/jwt.h"
#include "lib/common.h"

#define APP_JWKS_MAX_KEYS  64
#define APP_JWKS_MAX_BYTES (256 * 1024)

typedef struct {
    char kid[128]; /* "" when the key has none */
    int type;      /* EVP_PKEY_RSA or EVP_PKEY_EC */
    char alg[16];  /* the key's "alg", or "" */
    EVP_PKEY *pkey;
} app_jwk;

typedef struct {
    app_jwk *keys;
    size_t n;
} app_jwks;

/* Parses a JWKS document. TK_EINVAL (with err) when it is not a JSON object
 * with a "keys" array. Free with app_jwks_free. */
tk_status app_jwks_parse(const char *json, size_t len, app_jwks **out, char *err, size_t errlen);
void app_jwks_free(app_jwks *s);

/*
 * Keys that may verify a token signed with alg: with kid, the key with that kid
 * (if its type fits alg and its own "alg", when given, is alg); without kid,
 * every key that fits. Calls fn for each until it returns non-zero; returns
 * how many keys fitted (0: the caller should refetch the set once).
 */
size_t app_jwks_each(const app_jwks *s, const char *kid, app_jwt_alg alg,
                     int (*fn)(EVP_PKEY *key, void *ud), void *ud);

#endif
