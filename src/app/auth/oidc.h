/*
 * oidc.h — sign-in through OpenID Connect: the authorization code flow with PKCE
 * (S256), state and nonce, discovery, the token exchange, and the ID token
 * checked against the provider's JWKS (idtoken.h). On when OIDC_ISSUER and
 * OIDC_CLIENT_ID are set (needs TUSKO_PUBLIC_URL; see docs/AUTH.md).
 *
 *   GET /api/auth/oidc/start[?return_to=/path]  → 302 to the provider. Stores the
 *       flow (hashed state, code_verifier, nonce) in oidc_flows for 10 minutes and
 *       binds it to this browser with the tusko_oidc cookie.
 *   GET /api/auth/oidc/callback?code=&state=    → the flow is consumed (once),
 *       the code exchanged, the ID token verified; the user found by (issuer,
 *       subject), linked by verified email when OIDC_LINK_BY_EMAIL, or created;
 *       then a sign-in session as with a password, and 302 to return_to.
 *
 * Discovery and keys are fetched on first use (not at start-up, so tusko starts
 * while the provider is away) and cached for an hour; a token with an unknown
 * kid refetches the JWKS at once (at most once per 10 s). Plain http is accepted
 * for the issuer and its endpoints only on loopback addresses.
 */
#ifndef APP_AUTH_OIDC_H
#define APP_AUTH_OIDC_H

#include "lib/httpd.h"

#define APP_OIDC_FLOW_TTL_S 600

/* Forgets cached discovery and keys (tests). */
void app_oidc_reset(void);

extern const tk_route app_oidc_routes[];
extern const size_t app_oidc_nroutes;

#endif
