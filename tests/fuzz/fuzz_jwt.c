/* ID tokens from the network: compact JWS parsing, base64url, JWKS documents,
 * and the ID token check end to end (with a key set parsed from the input). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "app/auth/idtoken.h"
#include "app/auth/jwks.h"
#include "app/auth/jwt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = 0;
    char err[256];
    app_jwt j;
    if (app_jwt_parse(s, size, &j, err, sizeof err) == TK_OK) {
        /* a parsed token always has both objects, an accepted alg and a signature */
        if (!json_is_object(j.header) || !json_is_object(j.payload) || !j.sig || !j.siglen ||
            (j.alg != APP_JWT_RS256 && j.alg != APP_JWT_ES256))
            __builtin_trap();
        app_jwt_free(&j);
    }
    unsigned char *out;
    size_t n;
    if (app_b64url_decode(s, size, &out, &n) == TK_OK) {
        if (n > size)
            __builtin_trap();
        free(out);
    }
    app_jwks *keys = NULL;
    if (app_jwks_parse(s, size, &keys, err, sizeof err) == TK_OK) {
        if (keys->n > APP_JWKS_MAX_KEYS)
            __builtin_trap();
    }
    /* the input as a token against the input as a key set (nothing ever verifies) */
    app_idtoken_expect want = {.issuer = "https://i", .client_id = "c", .nonce = "n", .now_s = 1};
    app_idtoken_claims c;
    if (app_idtoken_verify(s, keys, &want, &c, err, sizeof err) == TK_OK)
        __builtin_trap();
    app_jwks_free(keys);
    free(s);
    return 0;
}
