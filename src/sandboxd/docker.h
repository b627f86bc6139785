/*
 * docker.h — a small client of the Docker Engine API over its unix
 * socket (libcurl with CURLOPT_UNIX_SOCKET_PATH). It never runs the docker CLI.
 *
 * DOCKER_HOST names the engine: "unix:///var/run/docker.sock" (the default),
 * "unix:/path" or a plain absolute path. Other schemes (tcp://, ssh://) are
 * refused: the docker runtime bind-mounts host folders into containers, so the
 * engine must run on this host.
 *
 * Requests go to the unversioned API (the engine's own version); the runtime
 * checks the engine's API version once (sbx_docker_version). Every call opens
 * its own connection, so a client may be used from many threads at once.
 * Response bodies are capped (SBX_DOCKER_MAX_RESPONSE).
 */
#ifndef SBX_DOCKER_H
#define SBX_DOCKER_H

#include <jansson.h>
#include <stddef.h>

#include "lib/common.h"

#define SBX_DOCKER_DEFAULT_HOST "unix:///var/run/docker.sock"
#define SBX_DOCKER_MAX_RESPONSE (16u << 20)

typedef struct sbx_docker sbx_docker;

/* Parses host (NULL or "" means SBX_DOCKER_DEFAULT_HOST); does no I/O. NULL
 * with a message in err for a scheme other than unix or a path too long. */
sbx_docker *sbx_docker_new(const char *host, char *err, size_t errlen);
void sbx_docker_free(sbx_docker *d);
/* The socket's path, and the host as given (for messages); valid while d lives. */
const char *sbx_docker_socket(const sbx_docker *d);
const char *sbx_docker_host(const sbx_docker *d);

/* One JSON call. path starts with '/' and may carry an encoded query; body (may
 * be NULL) is stolen. TK_OK whenever the engine answered, whatever the status:
 * *status and *out (the parsed body, or NULL when it was empty or not JSON;
 * the caller owns it). TK_ERROR / TK_ETIMEOUT when it did not, with err saying
 * that no engine answers at DOCKER_HOST and why (the connect errno). */
tk_status sbx_docker_call(sbx_docker *d, const char *method, const char *path, json_t *body,
                          long timeout_ms, long *status, json_t **out, char *err, size_t errlen);

/* The engine's error text of a failed call's body ({"message": ...}), or
 * fallback when it has none. Borrowed from resp. */
const char *sbx_docker_message(const json_t *resp, const char *fallback);

/* Streams a request body from rd (called until it returns 0; SBX_DOCKER_READ_ABORT
 * stops the transfer) to path, e.g. an image import from a tar. The engine
 * answers with JSON progress objects; TK_ERROR with the first "error" among them
 * (or the HTTP status) in err, TK_OK when none reported one. */
#define SBX_DOCKER_READ_ABORT ((size_t)-1)
typedef size_t (*sbx_docker_read_fn)(char *buf, size_t len, void *ud);
tk_status sbx_docker_upload(sbx_docker *d, const char *path, const char *content_type,
                            sbx_docker_read_fn rd, void *ud, long timeout_ms, char *err,
                            size_t errlen);

/* GET /version: the engine's version ("20.10.24") and API version ("1.41").
 * TK_ERROR with err when no engine answers. */
tk_status sbx_docker_version(sbx_docker *d, char *version, size_t vlen, char *api, size_t alen,
                             char *err, size_t errlen);

/* A new string: the query value of a "filters" parameter matching every label
 * of labels[0..n) ("key=value" or "key"), already percent-encoded. */
char *sbx_docker_label_filter(const char *const *labels, size_t n);

#endif
