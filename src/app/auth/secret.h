/*
 * secret.h — the random secrets behind tokens, session cookies and OIDC state,
 * and how they are stored: only a SHA-256 hash of each reaches the database (the
 * secrets carry 256 bits, so a fast hash is the right one; passwords use argon2id
 * in password.h instead).
 */
#ifndef APP_AUTH_SECRET_H
#define APP_AUTH_SECRET_H

#include <stddef.h>

#define APP_SECRET_BYTES 32
#define APP_SECRET_HEX   (APP_SECRET_BYTES * 2) /* 64 characters */
#define APP_HASH_HEX     64                     /* SHA-256 as hex */
#define APP_TOKEN_PREFIX "tsk_"                 /* personal API tokens */
#define APP_TOKEN_LEN    (4 + APP_SECRET_HEX)   /* "tsk_" + 64 hex */

/* 64 lowercase hex characters from the kernel's random source. */
void app_secret_new(char out[APP_SECRET_HEX + 1]);
/* SHA-256 of len bytes, as lowercase hex. */
void app_sha256_hex(const void *data, size_t len, char out[APP_HASH_HEX + 1]);
/* SHA-256 of len bytes. */
void app_sha256(const void *data, size_t len, unsigned char out[32]);
/* 1 when s is exactly n lowercase hex characters. */
int app_is_hex(const char *s, size_t n);
/* 1 when s looks like a personal API token ("tsk_" + 64 hex). */
int app_token_wellformed(const char *s);
/* base64url without padding of len bytes into out (needs 4*len/3 + 3 bytes). */
void app_b64url(const unsigned char *in, size_t len, char *out, size_t outlen);

#endif
