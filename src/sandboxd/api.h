/*
 * api.h — the OpenSandbox lifecycle API (specs/opensandbox/sandbox-lifecycle.yml)
 * as tk_httpd routes, served under /v1 and under /.
 *
 * Every route but /healthz needs the OPEN-SANDBOX-API-KEY header (compared in
 * constant time), the server proxy included. Errors are {"code","message"} with
 * an X-Request-ID header.
 */
#ifndef SBX_API_H
#define SBX_API_H

#include <stddef.h>

#include "lib/httpd.h"
#include "sandboxd/service.h"

typedef struct {
    sbx_service *svc;
    const char *api_key; /* NULL only with insecure_no_auth */
    int insecure_no_auth;
    const char *public_host; /* host[:port] for endpoints when the request has no Host */
} sbx_api;

/* The auth hook for tk_httpd_config.auth (ud: the sbx_api). */
int sbx_api_auth(tk_req *r, void *ud);
/* Fills routes (at most max) and returns how many; prog is for /healthz. */
size_t sbx_api_routes(sbx_api *api, const void *prog, tk_route *routes, size_t max);

/* Request validation, exposed for unit tests: parses a create body into req
 * (borrowing from body). Returns 0, or an HTTP status with code and msg. */
int sbx_api_parse_create(sbx_api *api, const json_t *body, sbx_service_create_req *req,
                         const char **code, char *msg, size_t msglen);

#endif
