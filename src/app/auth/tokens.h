/*
 * tokens.h — personal API tokens and sign-in sessions in the database.
 * The secrets themselves are returned once and never stored (secret.h).
 */
#ifndef APP_AUTH_TOKENS_H
#define APP_AUTH_TOKENS_H

#include <libpq-fe.h>
#include <stdint.h>

#include "app/auth/secret.h"
#include "lib/common.h"

/* Creates an API token for user_id; out gets "tsk_<64 hex>". */
tk_status app_token_create(PGconn *c, const char *user_id, const char *name,
                           char out[APP_TOKEN_LEN + 1]);

/* Creates a sign-in session lasting ttl_ms: secret gets the cookie value, csrf
 * the session's CSRF token. method is "password" or "oidc". */
tk_status app_websession_create(PGconn *c, const char *user_id, const char *method, int64_t ttl_ms,
                                const char *client_ip, const char *user_agent,
                                char secret[APP_SECRET_HEX + 1], char csrf[APP_SECRET_HEX + 1]);
/* Ends the session whose cookie hash is given (and drops it from the cache). */
tk_status app_websession_delete(PGconn *c, const char *cred_hash);
/* Deletes expired sessions and OIDC flows; returns how many rows went. */
long app_websession_sweep(PGconn *c);

#endif
