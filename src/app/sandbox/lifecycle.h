/*
 * lifecycle.h — the OpenSandbox lifecycle API (specs/opensandbox/
 * sandbox-lifecycle.yml) as blocking calls, for the sandbox client only.
 * Base: OPENSANDBOX_URL (+ "/v1" unless it ends so); auth header
 * OPEN-SANDBOX-API-KEY: OPENSANDBOX_API_KEY.
 */
#ifndef APP_SANDBOX_LIFECYCLE_H
#define APP_SANDBOX_LIFECYCLE_H

#include <jansson.h>
#include <stddef.h>

#include "lib/common.h"

/* The result of a lifecycle call: HTTP status (0: none), parsed JSON body or
 * NULL, and a readable error. */
typedef struct {
    long status;
    json_t *body;
    char error[400];
    char pool[16];    /* X-Sandbox-Pool of a create answer (tusko-sandboxd), or "" */
    char runtime[32]; /* X-Sandbox-Runtime, or "" */
} sandbox_lifecycle_resp;

void sandbox_lifecycle_resp_free(sandbox_lifecycle_resp *r);

/* Performs METHOD base+path with an optional JSON body (stolen). TK_OK when a
 * response arrived (check status). */
tk_status sandbox_lifecycle_call(const char *method, const char *path, json_t *body,
                                 long timeout_ms, sandbox_lifecycle_resp *out);

/* The "Name: value" headers every request to the service carries (the key);
 * NULL-terminated, static. */
const char *const *sandbox_lifecycle_headers(void);
/* The scheme of OPENSANDBOX_URL ("http" or "https"). */
const char *sandbox_lifecycle_scheme(void);
/* A message for an error response ("HTTP 409: <message from the body>"). */
void sandbox_lifecycle_error_text(const sandbox_lifecycle_resp *r, char *out, size_t outlen);

/* The state of a sandbox: "Running", ..., or "" when the service does not
 * know it (404: deleted, reaped). TK_ERROR when the service did not answer. */
tk_status sandbox_lifecycle_state(const char *remote_id, char *state, size_t len);

#endif
