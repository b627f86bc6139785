/*
 * server.h — the tusko HTTP server: one route table assembled from every
 * module's route array, the auth hook, and the security headers (headers.h) on
 * every response.
 *
 * Adding routes (see src/app/README.md):
 *   1. in your module's header:  extern const tk_route agent_routes[];
 *                                extern const size_t agent_nroutes;
 *   2. in your .c file: the array (paths under /api/..., flags as in httpd.h:
 *      TK_ROUTE_BLOCKING for anything that touches the database or blocks;
 *      TK_ROUTE_PUBLIC only for what must work signed out) and
 *      const size_t agent_nroutes = TK_ARRAY_LEN(agent_routes);
 *   3. one line in the `sets` table in server.c.
 * Routes match in table order, first match wins; patterns with {param} and a
 * trailing '*' as in httpd.h. Every non-public route runs app_auth_hook first,
 * so handlers may call app_req_user(r) and never see NULL.
 */
#ifndef APP_SERVER_H
#define APP_SERVER_H

#include "lib/httpd.h"
#include "lib/prog.h"

/* Starts serving on TUSKO_LISTEN (app_init must have run). NULL with err. */
tk_httpd *app_server_start(const tk_prog *prog, char *err, size_t errlen);

#endif
