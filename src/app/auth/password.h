/*
 * password.h — local account passwords: argon2id through libsodium
 * (crypto_pwhash_str, the "interactive" cost: 64 MiB, 2 passes).
 *
 * Hashing is deliberately expensive, so at most APP_PASSWORD_PARALLEL hashes run
 * at once in the process (each needs 64 MiB); callers wait up to
 * APP_PASSWORD_WAIT_MS for a turn and get TK_AGAIN past it. Blocking: call from
 * worker threads only.
 */
#ifndef APP_AUTH_PASSWORD_H
#define APP_AUTH_PASSWORD_H

#include <sodium.h>

#include "lib/common.h"

#define APP_PASSWORD_MIN      8
#define APP_PASSWORD_MAX      1024
#define APP_PASSWORD_PARALLEL 2
#define APP_PASSWORD_WAIT_MS  10000

/* Initializes libsodium; aborts if it cannot (call once at start). */
void app_password_init(void);

/* Hashes a password into out (crypto_pwhash_STRBYTES). TK_EINVAL when the
 * password is shorter than APP_PASSWORD_MIN or longer than APP_PASSWORD_MAX
 * bytes; TK_AGAIN when busy. */
tk_status app_password_hash(const char *password, char out[crypto_pwhash_STRBYTES]);

/* Verifies a password against a stored hash. hash NULL (no such user, or no
 * local password) still spends the same work on a dummy hash, so timing does not
 * tell whether the account exists. Returns TK_OK on a match, TK_EDENIED on a
 * mismatch, TK_AGAIN when busy. *rehash is set when the hash should be redone with
 * today's parameters. */
tk_status app_password_verify(const char *hash, const char *password, int *rehash);

#endif
