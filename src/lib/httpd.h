/*
 * httpd.h — the HTTP server wrapper over libmicrohttpd.
 *
 * Routing by method and path pattern, request bodies with a hard cap, uniform
 * JSON errors {"code","message"} with an X-Request-ID header, streamed responses
 * and Server-Sent Events with back-pressure and heartbeats.
 *
 * Threads: MHD runs `threads` epoll loops. Handlers run on those threads and must
 * not block for long; a route marked TK_ROUTE_BLOCKING runs on a worker thread
 * instead (its connection is suspended meanwhile), so it may block freely.
 * Responses may be produced from any thread: a handler may return without
 * responding after tk_req_defer() and respond later.
 *
 * Caps: a request body above the route's max_body is refused with 413 before any
 * of it is stored (with Content-Length, before any of it is read); headers are
 * bounded by the per-connection memory limit; idle connections time out; the
 * number of connections, total and per client address, is capped.
 *
 * Per-client limits (docs/SECURITY.md, "Load and abuse"):
 *   - connections per client address (per_ip_limit; an IPv6 client is its /64):
 *     one over the limit is closed as it is accepted, before a request exists;
 *   - the request line and headers must arrive within header_timeout_ms of the
 *     connection opening (of the previous response ending, on a kept-alive
 *     connection, within timeout_s; within header_timeout_ms there too while
 *     over 3/4 of max_connections are open), else the connection is closed;
 *   - a request body must arrive at min_body_rate bytes/s on average after a
 *     grace of header_timeout_ms, else the connection is closed;
 *   - behind a proxy in `trusted`, the client address is taken from
 *     X-Forwarded-For (lib/cidr.h), the proxy's own connections are not
 *     counted, and a forwarded client with per_ip_limit requests in flight is
 *     answered 429 TOO_MANY_CONNECTIONS.
 * Each kind of refusal is logged at most once per TK_HTTPD_LIMIT_LOG_S seconds,
 * with the number of refusals since the last line.
 *
 * Lifetimes: a tk_req and everything in its arena live until the request is
 * complete (the response sent or the client gone). A tk_stream outlives its
 * request until both the connection and the producer are done with it.
 */
#ifndef TK_HTTPD_H
#define TK_HTTPD_H

#include <jansson.h>
#include <stddef.h>
#include <sys/types.h>

#include "lib/arena.h"
#include "lib/buf.h"
#include "lib/cidr.h"
#include "lib/common.h"

#define TK_HTTPD_LIMIT_LOG_S 10

typedef struct tk_httpd tk_httpd;
typedef struct tk_req tk_req;
typedef struct tk_stream tk_stream;

typedef void (*tk_handler)(tk_req *req, void *ud);
/* Streamed request bodies: called for each chunk; return non-zero to refuse the
 * request (respond first with tk_respond_error, else 400 is sent). */
typedef int (*tk_body_fn)(tk_req *req, const char *data, size_t len, void *ud);

enum {
    TK_ROUTE_PUBLIC = 1 << 0,   /* skip the server's auth hook */
    TK_ROUTE_BLOCKING = 1 << 1, /* run the handler on a worker thread */
    TK_ROUTE_QUIET = 1 << 2,    /* do not log each request (health checks) */
};

typedef struct {
    const char *method;  /* "GET", "POST", ...; "*" for any */
    const char *pattern; /* "/v1/sandboxes/{id}", "/proxy/{port}/..." ("*" last matches the rest) */
    tk_handler fn;
    void *ud;
    unsigned flags;
    size_t max_body;    /* 0: the server's default */
    tk_body_fn on_body; /* non-NULL: the body is streamed to it, not buffered */
} tk_route;

typedef struct {
    const char *listen;          /* "127.0.0.1:8080", "[::1]:0", ":8080", "unix:/path", "fd:3" */
    const char *name;            /* component name in logs */
    size_t max_body;             /* default request body cap; 0 means 1 MiB */
    unsigned threads;            /* MHD event-loop threads; 0 means 2 */
    unsigned workers;            /* worker threads for blocking routes; 0 means 16 */
    unsigned max_connections;    /* 0 means 4096 */
    unsigned per_ip_limit;       /* connections per client address; 0 means no limit */
    unsigned timeout_s;          /* idle connection timeout; 0 means 60 */
    int64_t header_timeout_ms;   /* request line and headers; 0 means 10 s */
    int64_t min_body_rate;       /* bytes/s a body must average; 0 means no minimum */
    const tk_cidr_list *trusted; /* proxies whose X-Forwarded-For is believed; NULL: none */
    unsigned heartbeat_s;        /* SSE heartbeat interval; 0 means 15 */
    size_t stream_buffer;        /* bytes a stream queues before writers wait; 0 means 256 KiB */
    /* Called before every route not marked TK_ROUTE_PUBLIC: return 0 to go on,
     * non-zero after responding (e.g. 401). */
    int (*auth)(tk_req *req, void *ud);
    void *ud;
    /* Headers added to every response (routes, errors, streams): "Name", "value"
     * pairs ending with NULL. Not copied: must outlive the server. A header a
     * response sets itself (tk_respond_header, Content-Type...) is not replaced. */
    const char *const *headers;
} tk_httpd_config;

/* Starts serving. NULL with a message in err on failure (e.g. address in use). */
tk_httpd *tk_httpd_start(const tk_httpd_config *cfg, const tk_route *routes, size_t nroutes,
                         char *err, size_t errlen);
/* The bound TCP port (useful with port 0); 0 for a unix socket. */
int tk_httpd_port(const tk_httpd *h);
/* Where it serves: "http://127.0.0.1:8080" (a wildcard host shown as loopback) or
 * "unix:/path". Programs log it as url=... once listening; test harnesses read it. */
const char *tk_httpd_url(const tk_httpd *h);
/* Ends every stream, waits for worker threads, closes all connections. */
void tk_httpd_stop(tk_httpd *h);
/* Number of open streams (for tests and metrics). */
size_t tk_httpd_stream_count(tk_httpd *h);
/* Number of open connections (for tests and metrics). */
size_t tk_httpd_connection_count(tk_httpd *h);

/* --- the request --- */

tk_arena *tk_req_arena(tk_req *r);
const char *tk_req_method(const tk_req *r);
const char *tk_req_path(const tk_req *r);         /* raw (still encoded) path, no query */
const char *tk_req_query_string(const tk_req *r); /* raw query without '?', or "" */
const char *tk_req_id(const tk_req *r);
/* The client's address: the peer's, or the one X-Forwarded-For names when the
 * peer is a trusted proxy; "unix" for unix sockets. */
const char *tk_req_client_ip(const tk_req *r);
/* A {name} from the route pattern, decoded; NULL if the pattern has none. */
const char *tk_req_param(const tk_req *r, const char *name);
/* What '*' matched: the raw path remainder starting with '/', or "/" when empty. */
const char *tk_req_rest(const tk_req *r);
/* A decoded query parameter (first occurrence), or NULL. */
const char *tk_req_query(const tk_req *r, const char *name);
/* A request header (case-insensitive), or NULL. */
const char *tk_req_header(const tk_req *r, const char *name);
/* Calls fn for every request header; stop by returning non-zero. */
void tk_req_headers_each(const tk_req *r, int (*fn)(const char *name, const char *value, void *ud),
                         void *ud);
/* 1 if the request's route takes bodies over the server's default cap (an
 * upload route: its body may be large), else 0. */
int tk_httpd_req_upload(const tk_req *r);
/* The buffered body (empty for streamed-body routes). */
const char *tk_req_body(const tk_req *r, size_t *len);
/* The body parsed as JSON (owned by the request). On a parse error responds 400
 * INVALID_JSON and returns NULL. An empty body is NULL without a response when
 * allow_empty, else 400. */
json_t *tk_req_json(tk_req *r, int allow_empty);
/* A place for the auth hook to hang the caller's identity. */
void tk_req_set_user(tk_req *r, void *user);
void *tk_req_user(const tk_req *r);
/* Non-zero once a response was given. */
int tk_req_responded(const tk_req *r);

/* --- responses (each may be called once per request, from any thread) --- */

/* Adds a response header; call before responding. */
void tk_respond_header(tk_req *r, const char *name, const char *value);
void tk_respond(tk_req *r, int status, const char *content_type, const void *body, size_t len);
/* Steals the reference to j. */
void tk_respond_json(tk_req *r, int status, json_t *j);
void tk_respond_error(tk_req *r, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void tk_respond_empty(tk_req *r, int status);
/* Sends len bytes of fd from off; takes ownership of fd. */
void tk_respond_fd(tk_req *r, int status, const char *content_type, int fd, off_t off,
                   uint64_t len);

/* Marks the request as answered later: the handler returns without responding and
 * some thread responds afterwards. */
void tk_req_defer(tk_req *r);

/* --- streams --- */

/* Starts a chunked response. The returned stream belongs to the caller until
 * tk_stream_close. */
tk_stream *tk_respond_stream(tk_req *r, int status, const char *content_type);
/* Same for Server-Sent Events: text/event-stream, no caching, heartbeats. */
tk_stream *tk_respond_sse(tk_req *r);

/* Queues bytes. Blocks while more than the stream buffer is queued
 * (back-pressure). TK_ECLOSED once the client has gone. */
tk_status tk_stream_write(tk_stream *s, const void *data, size_t len);
/* Never blocks: TK_AGAIN when the buffer is full (nothing queued). */
tk_status tk_stream_try_write(tk_stream *s, const void *data, size_t len);
/* Writes one SSE event (see tk_sse_format). */
tk_status tk_stream_sse(tk_stream *s, const char *id, const char *event, const char *data,
                        size_t len);
/* Bytes queued and not yet sent. */
size_t tk_stream_pending(tk_stream *s);
/* Non-zero once the client has gone. */
int tk_stream_closed(tk_stream *s);
/* Called once (from an MHD thread) when the client goes away or the response ends.
 * Set it right after creating the stream. */
void tk_stream_on_close(tk_stream *s, void (*fn)(void *ud), void *ud);
/* Called (from an MHD thread) when the queue drains below half the buffer after a
 * tk_stream_try_write returned TK_AGAIN. For event-loop producers. */
void tk_stream_on_writable(tk_stream *s, void (*fn)(void *ud), void *ud);
/* Ends the response after what is queued; the caller must not use s afterwards. */
void tk_stream_close(tk_stream *s);

/* --- WebSockets (RFC 6455, version 13) ---
 *
 * A GET handler may take its connection over as a WebSocket:
 *
 *   tk_httpd_ws_config wc = {.on_message = msg, .on_close = gone, .ud = me};
 *   tk_httpd_ws *ws = tk_httpd_ws_accept(req, &wc);  // NULL: answered 400/426
 *   ... tk_httpd_ws_send(ws, TK_WS_TEXT, "hi", 2);    // from any thread
 *   ... on_close runs once; then tk_httpd_ws_unref(ws)
 *
 * The handshake is checked (Upgrade: websocket, Connection: upgrade, a
 * Sec-WebSocket-Key of 16 bytes, Sec-WebSocket-Version 13: another version is
 * 426 with Sec-WebSocket-Version: 13, anything else wrong 400); no
 * subprotocol and no extension is agreed. Once the 101 is sent, the
 * connection has a thread of its own: it reads frames with lib/ws's reader
 * (client frames must be masked; a frame over max_frame or a message over
 * max_message is closed with 1009, a protocol error with 1002, bad UTF-8 with
 * 1007), answers pings, pings an idle peer every ping_s and drops one that
 * says nothing for twice that, and does the close handshake (a peer's close
 * is echoed; ours waits up to 5 s for the echo). Writes never block the
 * sender: they are queued, and a peer that lets more than max_queue bytes
 * pile up is dropped (1008). The connection counts in the server's
 * connection limits while it is open, and neither the idle nor the header
 * deadlines apply to it. tk_httpd_stop closes every WebSocket (1001) and
 * waits for their threads. */

typedef struct tk_httpd_ws tk_httpd_ws;

typedef struct {
    size_t max_frame;   /* a frame's payload at most; 0 means 1 MiB */
    size_t max_message; /* a message (fragments joined); 0 means max_frame */
    size_t max_queue;   /* bytes queued for the peer at most; 0 means 2 x max_message + 1 MiB */
    unsigned ping_s;    /* ping an idle peer this often; 0 means 30 */
    /* A whole text or binary message (on the connection's thread). */
    void (*on_message)(tk_httpd_ws *ws, int opcode, const char *data, size_t len, void *ud);
    /* Once, when the connection has ended (the close code seen or sent; 1006
     * when it just went); sends fail TK_ECLOSED from then on. */
    void (*on_close)(tk_httpd_ws *ws, int code, void *ud);
    void *ud;
} tk_httpd_ws_config;

/* Non-zero when the request asks for a WebSocket (an Upgrade: websocket header). */
int tk_httpd_ws_requested(const tk_req *r);
/* Accepts the upgrade (see above): the connection, with a reference for the
 * caller, or NULL after responding 400/426. */
tk_httpd_ws *tk_httpd_ws_accept(tk_req *r, const tk_httpd_ws_config *cfg);
/* Queues one message (TK_WS_TEXT or TK_WS_BINARY) as a single frame. TK_ECLOSED
 * once closing or closed; TK_ETOOBIG when it would pass max_queue (the peer is
 * then dropped). Never blocks. */
tk_status tk_httpd_ws_send(tk_httpd_ws *ws, int opcode, const void *data, size_t len);
/* Starts the close handshake with code and reason (idempotent). */
void tk_httpd_ws_close(tk_httpd_ws *ws, int code, const char *reason);
/* Drops the caller's reference (the connection itself holds one until it ends). */
void tk_httpd_ws_unref(tk_httpd_ws *ws);
/* Number of open WebSockets (for tests and metrics). */
size_t tk_httpd_ws_count(tk_httpd *h);

/* "fd:N" names an inherited listening socket (socket activation; the server
 * uses it as it is and never unlinks its path): TK_OK with *fd set, TK_ENOENT
 * when listen is another form, TK_EINVAL when N is malformed. */
tk_status tk_listen_fd(const char *listen, int *fd);

/* Parses a listen address. host gets "127.0.0.1"/"::1"/...; for unix sockets
 * *unix_path is set instead. */
tk_status tk_listen_parse(const char *listen, char *host, size_t hostlen, int *port,
                          char *unix_path, size_t pathlen);

#endif
