/*
 * api.h — browserd's HTTP API: Steel's sessions, health and page actions
 * over lib/httpd (docs/BROWSERD.md lists what is served).
 *
 * Every route but /v1/health and /healthz needs the `steel-api-key` header,
 * compared in constant time with the configured key (there is no way to
 * serve without one).
 */
#ifndef BRD_API_H
#define BRD_API_H

#include <stddef.h>
#include <stdint.h>

#include "browserd/session.h"
#include "lib/httpd.h"

typedef struct {
    brd_session_mgr *mgr;
    const char *api_key;
    int64_t max_timeout_ms;
} brd_api;

/* The httpd auth hook (ud: the brd_api). */
int brd_api_auth(tk_req *r, void *ud);
/* The routes, with ud set to api; *n gets their number. Static storage: one
 * brd_api per process. */
const tk_route *brd_api_routes(brd_api *api, size_t *n);

/* Checks a CreateSession body and fills req (cookies point into b). 0, or an
 * HTTP status with msg. */
int brd_api_parse_create(const brd_api *api, const json_t *b, brd_session_req *req,
                         json_t **cookies, char *msg, size_t msglen);

#endif
