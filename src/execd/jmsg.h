/*
 * jmsg.h — the Jupyter messaging protocol (v5.3) on the wire: a message is the
 * multipart frames [identities or topic...] "<IDS|MSG>" signature header
 * parent_header metadata content [buffers...], the signature being the hex
 * HMAC-SHA256 of the four JSON parts under the connection's key.
 *
 * Everything received comes from the kernel, which runs user code: decoding
 * refuses a bad or missing signature (compared in constant time), caps sizes
 * and never trusts field types.
 */
#ifndef EXECD_JMSG_H
#define EXECD_JMSG_H

#include <jansson.h>
#include <stddef.h>

#include "lib/common.h"

#define EXECD_JMSG_MAX (64u << 20) /* largest JSON part accepted */

typedef struct {
    const void *data;
    size_t len;
} execd_frame;

/* A message to send: six frames from "<IDS|MSG>" to content, heap-owned. */
typedef struct {
    char *part[4]; /* header, parent_header, metadata, content (JSON text) */
    size_t len[4];
    char sig[65];
    char msg_id[40];
} execd_jmsg_out;

/* A received message. */
typedef struct {
    json_t *header, *parent, *metadata, *content; /* owned; never NULL once decoded */
    const char *msg_type;                         /* "" when absent */
    const char *parent_id;                        /* "" when absent */
} execd_jmsg;

/* hex(HMAC-SHA256(key, parts...)) into out (65 bytes). */
void execd_jmsg_sign(const char *key, size_t keylen, const char *const *parts, const size_t *lens,
                     size_t n, char out[65]);

/* Builds a request of msg_type in session; content is stolen (NULL: {}). */
void execd_jmsg_build(execd_jmsg_out *m, const char *key, const char *session, const char *msg_type,
                      json_t *content);
void execd_jmsg_out_free(execd_jmsg_out *m);

/* Decodes frames; TK_EINVAL with a message for anything malformed or unsigned. */
tk_status execd_jmsg_decode(const char *key, size_t keylen, const execd_frame *frames, size_t n,
                            execd_jmsg *m, char *err, size_t errlen);
void execd_jmsg_free(execd_jmsg *m);

#endif
