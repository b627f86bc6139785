/*
 * multipart.h — an incremental multipart/form-data parser (RFC 7578 / 2046).
 *
 * Fed arbitrary chunks of an untrusted body; never holds more than a bounded
 * lookahead (the part headers, at most MP_HEADER_MAX bytes, or the delimiter's
 * length): part bodies are passed straight through to the callback, so a body
 * of any size streams in constant memory. Anything malformed — a missing
 * boundary, headers too large, too many parts, data after a closing boundary
 * that never came — is an error with a message.
 */
#ifndef EXECD_MULTIPART_H
#define EXECD_MULTIPART_H

#include <stddef.h>

#include "lib/buf.h"
#include "lib/common.h"

#define EXECD_MP_HEADER_MAX   8192 /* bytes of one part's header block */
#define EXECD_MP_PARTS_MAX    4096 /* parts in one body */
#define EXECD_MP_BOUNDARY_MAX 70   /* RFC 2046 */

typedef struct {
    char name[256];         /* form field name ("metadata", "file") */
    char filename[256];     /* "" when the part has none */
    char content_type[128]; /* "" when absent */
} execd_mp_part;

/* Each returns 0 to go on, non-zero to stop (execd_mp_feed then fails with
 * TK_EDENIED and the callback's own message in err, if it wrote one). */
typedef struct {
    int (*begin)(void *ud, const execd_mp_part *p, char *err, size_t errlen);
    int (*data)(void *ud, const char *d, size_t n, char *err, size_t errlen);
    int (*end)(void *ud, char *err, size_t errlen);
} execd_mp_cb;

typedef struct {
    char delim[EXECD_MP_BOUNDARY_MAX + 5]; /* "\r\n--" boundary */
    size_t dlen;
    int state;
    tk_buf buf; /* lookahead */
    size_t parts;
    int in_part;
    execd_mp_cb cb;
    void *ud;
} execd_mp;

/* Finds the boundary parameter of a multipart/form-data Content-Type. */
tk_status execd_mp_boundary(const char *content_type, char *out, size_t outlen);

void execd_mp_init(execd_mp *m, const char *boundary, const execd_mp_cb *cb, void *ud);
void execd_mp_free(execd_mp *m);
/* TK_OK, TK_EINVAL (malformed; message in err) or TK_EDENIED (a callback refused). */
tk_status execd_mp_feed(execd_mp *m, const char *d, size_t n, char *err, size_t errlen);
/* Call at the end of the body: TK_EINVAL unless the closing boundary was seen. */
tk_status execd_mp_finish(execd_mp *m, char *err, size_t errlen);

#endif
