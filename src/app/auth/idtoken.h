/*
 * idtoken.h — OpenID Connect ID token validation (OIDC Core 3.1.3.7): the
 * signature against the provider's JWKS, then iss, aud/azp, exp, iat, nbf and
 * nonce. Pure: no network, no clock of its own (now is passed in).
 */
#ifndef APP_AUTH_IDTOKEN_H
#define APP_AUTH_IDTOKEN_H

#include <stdint.h>

#include "app/auth/jwks.h"
#include "lib/common.h"

#define APP_IDTOKEN_SKEW_S 120 /* clock skew tolerated, seconds */

typedef struct {
    const char *issuer;    /* must equal "iss" exactly */
    const char *client_id; /* must be in "aud" (and be "azp" when that is present) */
    const char *nonce;     /* must equal "nonce" (constant-time) */
    int64_t now_s;         /* seconds since the epoch */
    /* OIDC_ADMIN_CLAIM: "name=value" (the claim is that string, or an array
     * holding it) or "name" (the claim is true); NULL: no claim makes admins */
    const char *admin_claim;
} app_idtoken_expect;

typedef struct {
    char sub[256];
    char email[255]; /* "" when absent */
    int email_verified;
    char name[256]; /* "" when absent */
    int admin;      /* the admin claim (app_idtoken_expect.admin_claim) holds */
} app_idtoken_claims;

/* Whether payload p satisfies the admin claim spec (see admin_claim above). */
int auth_idtoken_admin_claim(const json_t *p, const char *spec);

/*
 * TK_OK with the claims; TK_ENOENT when no key in keys fits the token (kid
 * unknown: refetch the JWKS and try once more); TK_EDENIED when the signature or
 * a claim check fails; TK_EINVAL when the token is malformed. err says which.
 */
tk_status app_idtoken_verify(const char *token, const app_jwks *keys,
                             const app_idtoken_expect *want, app_idtoken_claims *out, char *err,
                             size_t errlen);

#endif
