/*
 * httpc_multi.h — non-blocking HTTP client: libcurl's multi_socket interface
 * driven by an event loop (evloop.h), as curl's docs/examples/ephiperfifo.c.
 *
 * Thousands of transfers (model streams that mostly wait) share one thread: a
 * transfer costs a curl easy handle, its receive buffer and this small struct.
 * Everything here runs on the loop's thread: start, cancel and every callback.
 *
 *   tk_httpm *m = tk_httpm_new(loop);
 *   tk_httpm_req r = {.url = u, .body = json, .body_len = n, .headers = hdrs,
 *                     .on_data = feed, .on_done = finished, .ud = turn};
 *   tk_httpm_xfer *x = tk_httpm_start(m, &r);
 *   ...
 *   tk_httpm_cancel(x);   // no on_done afterwards; safe inside any callback
 *
 * The request strings and body are copied: the caller's may go once start
 * returns. A body is buffered into a capped tk_buf unless on_data takes it.
 * Redirects are never followed.
 */
#ifndef TK_HTTPC_MULTI_H
#define TK_HTTPC_MULTI_H

#include <stddef.h>
#include <stdint.h>

#include "lib/buf.h"
#include "lib/common.h"
#include "lib/evloop.h"

typedef struct tk_httpm tk_httpm;
typedef struct tk_httpm_xfer tk_httpm_xfer;

typedef struct {
    tk_status st;          /* TK_OK when a response arrived (whatever its status);
                              TK_ETIMEOUT, TK_ETOOBIG, TK_AGAIN (stopped by on_data),
                              TK_ERROR (connection failure) otherwise */
    long status;           /* HTTP status, 0 when none arrived */
    const tk_buf *body;    /* the buffered body (empty when on_data took it) */
    const tk_buf *headers; /* raw header lines of the final response */
    const char *error;     /* a description when st != TK_OK, else "" */
} tk_httpm_result;

typedef struct {
    const char *method; /* default GET, or POST with a body */
    const char *url;
    const char *unix_socket;    /* connect here instead of the URL's host */
    const char *const *headers; /* "Name: value", NULL-terminated */
    const void *body;
    size_t body_len;
    /* 0: the body is copied at start. 1: it is used where it is (no copy) and
     * must stay valid and unchanged until on_done runs or the transfer is
     * cancelled (an LLM request keeps its body for retries anyway). */
    int body_borrowed;
    long timeout_ms;         /* whole transfer; 0 means no limit */
    long connect_timeout_ms; /* 0 means 10 s */
    long idle_timeout_ms;    /* TK_ETIMEOUT when nothing arrives this long; 0: never */
    size_t max_response;     /* cap on a buffered body; 0 means 8 MiB */
    /* Streaming: each piece of the body with the response's status. Return 0 to
     * go on, non-zero to stop (the transfer then ends with TK_AGAIN). */
    int (*on_data)(tk_httpm_xfer *x, long status, const char *data, size_t len, void *ud);
    /* Called once when the transfer ends, unless it was cancelled. The result
     * and its buffers are valid during the call only; x is freed right after. */
    void (*on_done)(tk_httpm_xfer *x, const tk_httpm_result *res, void *ud);
    void *ud;
} tk_httpm_req;

/* Must be created and used on the loop's thread (or before the loop starts). */
tk_httpm *tk_httpm_new(tk_evloop *loop);
/* Cancels every transfer (no on_done) and frees the client. Loop thread. */
void tk_httpm_free(tk_httpm *m);

/* Starts a transfer. NULL only when curl refuses the request (bad URL...); then
 * nothing is called. */
tk_httpm_xfer *tk_httpm_start(tk_httpm *m, const tk_httpm_req *req);
/* Stops a transfer; on_done is not called. Safe inside callbacks (also x's own). */
void tk_httpm_cancel(tk_httpm_xfer *x);

/* Transfers in progress. */
size_t tk_httpm_active(const tk_httpm *m);

#endif
