/*
 * id.h — identifiers and secrets from the kernel's random source.
 */
#ifndef TK_ID_H
#define TK_ID_H

#include <stddef.h>

#define TK_UUID_LEN 37 /* 36 characters and the NUL */

/* Fills buf with n cryptographically random bytes; aborts if the kernel cannot. */
void tk_random_bytes(void *buf, size_t n);
/* A random (version 4) UUID. */
void tk_uuid4(char out[TK_UUID_LEN]);
/* A time-ordered (version 7) UUID: sorts by creation time. */
void tk_uuid7(char out[TK_UUID_LEN]);
/* Checks the 8-4-4-4-12 hex form (any version). */
int tk_uuid_valid(const char *s);
/* nbytes random bytes as lowercase hex into out (needs 2*nbytes + 1). */
void tk_token_hex(char *out, size_t nbytes);

#endif
