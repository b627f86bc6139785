/*
 * jwt.h — JSON Web Signatures in compact form (RFC 7515), as ID tokens use them:
 * parsing and signature checks for RS256 (RSASSA-PKCS1-v1_5 with SHA-256, keys of
 * at least 2048 bits) and ES256 (ECDSA P-256 with SHA-256), with OpenSSL.
 *
 * Everything here sees bytes from the network. The parser refuses tokens over
 * APP_JWT_MAX, anything but three base64url parts (no padding), header and
 * payload that are not JSON objects (duplicate keys refused), any "alg" but RS256
 * and ES256 ("none" and HMAC above all), and a "crit" header. A parsed token is
 * not trusted until app_jwt_verify() says so.
 */
#ifndef APP_AUTH_JWT_H
#define APP_AUTH_JWT_H

#include <jansson.h>
#include <openssl/evp.h>
#include <stddef.h>

#include "lib/common.h"

#define APP_JWT_MAX 16384

typedef enum { APP_JWT_RS256 = 1, APP_JWT_ES256 = 2 } app_jwt_alg;

typedef struct {
    json_t *header;  /* owned */
    json_t *payload; /* owned */
    app_jwt_alg alg;
    const char *kid; /* the header's "kid", or NULL; points into header */
    unsigned char *sig;
    size_t siglen;
    char *signing_input; /* "<header>.<payload>" as received (owned) */
    size_t signing_input_len;
} app_jwt;

/* Parses token (len bytes). TK_OK and *out (free with app_jwt_free), or
 * TK_EINVAL with a reason in err. */
tk_status app_jwt_parse(const char *token, size_t len, app_jwt *out, char *err, size_t errlen);
void app_jwt_free(app_jwt *j);

/* The key types an algorithm needs: EVP_PKEY_RSA or EVP_PKEY_EC. */
int app_jwt_alg_key_type(app_jwt_alg alg);

/* Checks the signature with key. TK_OK when it verifies; TK_EDENIED when it does
 * not, or when the key does not fit the algorithm (wrong type, an EC key not on
 * P-256, an RSA key under 2048 bits). */
tk_status app_jwt_verify(const app_jwt *j, EVP_PKEY *key);

/* Strict base64url without padding: TK_OK and *out (heap) / *outlen. */
tk_status app_b64url_decode(const char *in, size_t len, unsigned char **out, size_t *outlen);

#endif
