/*
 * proxy.h — the server proxy: /sandboxes/{id}/proxy/{port}/... forwarded to the
 * sandbox's execd over its unix socket, any method, streamed both ways as far as
 * the HTTP layer allows (request bodies are buffered up to a cap; responses are
 * streamed as they arrive, so execd's Server-Sent Events pass through one event
 * at a time, with back-pressure: a slow client slows the upstream read).
 *
 * Each proxied request runs its upstream curl transfer on a thread of its own,
 * writing into a tk_stream; the caller's OPEN-SANDBOX-API-KEY is never
 * forwarded, the execd access token the client got from the endpoint is.
 */
#ifndef SBX_PROXY_H
#define SBX_PROXY_H

#include "lib/httpd.h"
#include "sandboxd/service.h"

/* The route handler (ud: the sbx_service). */
/* The port whose proxied route is the egress API (egress-api.yaml's /policy),
 * served by sandboxd itself, as upstream's egress sidecar serves it. */
#define SBX_EGRESS_API_PORT 18080

void sbx_proxy_handle(tk_req *r, void *ud);
/* Proxied requests in flight (their threads). */
int sbx_proxy_active(void);
/* Makes every transfer in flight stop soon and refuses new ones; waits up to
 * timeout_ms for them to end. */
void sbx_proxy_shutdown(long timeout_ms);

#endif
