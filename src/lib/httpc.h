/*
 * httpc.h — the HTTP client wrapper over libcurl (blocking, one request per call;
 * safe to use from many threads at once).
 *
 * A response body is either buffered into a capped tk_buf (TK_ETOOBIG past the
 * cap, the transfer aborted), handed to on_data as it arrives, or parsed as
 * Server-Sent Events (both "data:" lines and the bare JSON-object events of
 * OpenSandbox's execd) and handed to on_sse one event at a time.
 * Redirects are never followed. Targets may be unix sockets.
 */
#ifndef TK_HTTPC_H
#define TK_HTTPC_H

#include <jansson.h>
#include <stddef.h>

#include "lib/buf.h"
#include "lib/common.h"
#include "lib/sse.h"

typedef struct {
    const char *method; /* default GET, or POST when a body is given */
    const char *url;
    const char *unix_socket;    /* connect here instead of the URL's host */
    const char *ca_file;        /* verify the server against this CA bundle (PEM) */
    const char *const *headers; /* "Name: value" strings, NULL-terminated */
    const void *body;
    size_t body_len;
    long timeout_ms;         /* whole transfer; 0 means 30 s; -1 means none */
    long connect_timeout_ms; /* 0 means 10 s */
    size_t max_response;     /* cap on a buffered body; 0 means 8 MiB */
    /* Streaming: return 0 to go on, non-zero to stop the transfer (TK_AGAIN). */
    int (*on_data)(const char *data, size_t len, void *ud);
    tk_sse_cb on_sse; /* set to parse the body as SSE */
    size_t max_event; /* SSE event cap; 0 means 1 MiB */
    void *ud;
    /* Polled during the transfer: non-zero aborts it (TK_ECLOSED). */
    const volatile int *cancel;
    /* When set (tk_httpc_share_new), connections, TLS sessions and DNS answers
     * are kept between calls made with it: a call to the same server reuses an
     * idle connection instead of a new TCP and TLS handshake. */
    struct tk_httpc_share *share;
} tk_httpc_req;

typedef struct {
    long status;     /* 0 when no response was received */
    tk_buf body;     /* empty when streamed */
    tk_buf headers;  /* raw response header lines of the final response */
    char error[256]; /* a description when the call failed */
} tk_httpc_resp;

/* Performs the request. TK_OK when a response arrived (whatever its status);
 * TK_ETIMEOUT, TK_ETOOBIG, TK_AGAIN (stopped by a callback), TK_ECLOSED
 * (cancelled) or TK_ERROR (connection failure, with resp->error) otherwise. */
tk_status tk_httpc_do(const tk_httpc_req *req, tk_httpc_resp *resp);
void tk_httpc_resp_free(tk_httpc_resp *resp);
/* A response header's value (case-insensitive name), copied into out; NULL if absent. */
const char *tk_httpc_resp_header(const tk_httpc_resp *resp, const char *name, char *out,
                                 size_t outlen);

/* A JSON call: sends body (may be NULL; the reference is stolen) and parses the response as JSON
 * when it is one (*out is NULL otherwise). Returns like tk_httpc_do. */
tk_status tk_httpc_json(const char *method, const char *url, const char *unix_socket,
                        const char *const *headers, json_t *body, long timeout_ms, long *status,
                        json_t **out, char *err, size_t errlen);

/* A cache of connections shared by the calls given it, from any thread. */
typedef struct tk_httpc_share tk_httpc_share;
tk_httpc_share *tk_httpc_share_new(void);
void tk_httpc_share_free(tk_httpc_share *s);

/* Must be called once before threads start (curl_global_init). */
void tk_httpc_global_init(void);

#endif
