/* The HTTP server wrapper and client, against each other on loopback. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <sys/un.h>
#include <fcntl.h>

#include "lib/config.h"
#include "lib/httpc.h"
#include "lib/httpd.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/tktime.h"
#include "tk_test.h"

static int handler_calls;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int quick_served, chunk1_seen;

static void h_echo(tk_req *r, void *ud)
{
    handler_calls++;
    const char *q = tk_req_query(r, "q");
    tk_respond_json(r, 200,
                    tk_json_obj("id", json_string(tk_req_param(r, "id")), "q",
                                q ? json_string(q) : json_null(), "rest",
                                json_string(tk_req_rest(r)), "method",
                                json_string(tk_req_method(r)), NULL));
}

static void h_body(tk_req *r, void *ud)
{
    handler_calls++;
    json_t *j = tk_req_json(r, 0);
    if (!j)
        return;
    size_t len;
    tk_req_body(r, &len);
    tk_respond_json(r, 200,
                    tk_json_obj("len", json_integer((json_int_t)len), "name",
                                json_string(tk_json_str_or(j, "name", "")), NULL));
}

static void h_blocking(tk_req *r, void *ud)
{
    /* Waits until a quick request was served meanwhile: proves this handler does
     * not hold the event loop. */
    pthread_mutex_lock(&mu);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 5;
    while (!quick_served)
        if (pthread_cond_timedwait(&cv, &mu, &ts) != 0)
            break;
    int ok = quick_served;
    pthread_mutex_unlock(&mu);
    tk_respond_json(r, ok ? 200 : 500, tk_json_obj("ok", json_boolean(ok), NULL));
}

static void h_quick(tk_req *r, void *ud)
{
    pthread_mutex_lock(&mu);
    quick_served = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    tk_respond(r, 200, "text/plain", "quick", 5);
}

static void *later(void *arg)
{
    tk_sleep_ms(50);
    tk_respond(arg, 201, "text/plain", "later", 5);
    return NULL;
}

static void h_defer(tk_req *r, void *ud)
{
    tk_req_defer(r);
    pthread_t t;
    pthread_create(&t, NULL, later, r);
    pthread_detach(t);
}

static void h_silent(tk_req *r, void *ud)
{
}

struct producer {
    tk_stream *s;
    size_t max_pending;
    int mode; /* 0: three chunks, wait for client; 1: bulk back-pressure; 2: until closed */
    int closed_seen, on_close_called;
};

static void on_close(void *ud)
{
    struct producer *p = ud;
    pthread_mutex_lock(&mu);
    p->on_close_called = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static struct producer prod;

static void *produce(void *arg)
{
    struct producer *p = arg;
    if (p->mode == 0) {
        tk_stream_write(p->s, "chunk1\n", 7);
        pthread_mutex_lock(&mu);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 5;
        while (!chunk1_seen)
            if (pthread_cond_timedwait(&cv, &mu, &ts) != 0)
                break;
        pthread_mutex_unlock(&mu);
        tk_stream_write(p->s, chunk1_seen ? "chunk2\n" : "never\n", 7);
    } else if (p->mode == 1) {
        char block[16384];
        memset(block, 'x', sizeof block);
        for (int i = 0; i < 256; i++) {
            if (tk_stream_write(p->s, block, sizeof block) != TK_OK)
                break;
            size_t pend = tk_stream_pending(p->s);
            if (pend > p->max_pending)
                p->max_pending = pend;
        }
    } else {
        for (int i = 0; i < 2000; i++) {
            if (tk_stream_write(p->s, "tick\n", 5) == TK_ECLOSED) {
                p->closed_seen = 1;
                break;
            }
            tk_sleep_ms(5);
        }
    }
    tk_stream_close(p->s);
    return NULL;
}

static void h_stream(tk_req *r, void *ud)
{
    prod.s = tk_respond_stream(r, 200, "text/plain");
    prod.mode = atoi(tk_req_param(r, "mode"));
    tk_stream_on_close(prod.s, on_close, &prod);
    pthread_t t;
    pthread_create(&t, NULL, produce, &prod);
    pthread_detach(t);
}

static void h_sse(tk_req *r, void *ud)
{
    const char *last = tk_req_header(r, "Last-Event-ID");
    int from = last ? atoi(last) : 0;
    tk_stream *s = tk_respond_sse(r);
    for (int i = from + 1; i <= 3; i++) {
        char id[16], data[32];
        snprintf(id, sizeof id, "%d", i);
        snprintf(data, sizeof data, "event %d\nline two", i);
        tk_stream_sse(s, id, "note", data, strlen(data));
    }
    if (tk_req_query(r, "wait")) {
        /* keep the stream open long enough for a heartbeat */
        tk_sleep_ms(2500);
    }
    tk_stream_close(s);
}

/* GET /whoami: the client address the server sees. */
static void h_whoami(tk_req *r, void *ud)
{
    tk_respond(r, 200, "text/plain", tk_req_client_ip(r), strlen(tk_req_client_ip(r)));
}

/* GET /hold: answered once `released` is set (the request stays in flight). */
static int released;
static void *hold_until_released(void *arg)
{
    pthread_mutex_lock(&mu);
    while (!released)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    tk_respond(arg, 200, "text/plain", "held", 4);
    return NULL;
}

static void h_hold(tk_req *r, void *ud)
{
    tk_req_defer(r);
    pthread_t t;
    pthread_create(&t, NULL, hold_until_released, r);
    pthread_detach(t);
}

static int auth(tk_req *r, void *ud)
{
    const char *k = tk_req_header(r, "X-Key");
    if (k && strcmp(k, "good") == 0)
        return 0;
    tk_respond_error(r, 401, "UNAUTHORIZED", "missing key");
    return 1;
}

static tk_route routes[] = {
    {"GET", "/items/{id}", h_echo, NULL, TK_ROUTE_PUBLIC},
    {"*", "/proxy/{id}/*", h_echo, NULL, TK_ROUTE_PUBLIC},
    {"POST", "/body", h_body, NULL, TK_ROUTE_PUBLIC, 1000},
    {"GET", "/blocking", h_blocking, NULL, TK_ROUTE_PUBLIC | TK_ROUTE_BLOCKING},
    {"GET", "/quick", h_quick, NULL, TK_ROUTE_PUBLIC},
    {"GET", "/defer", h_defer, NULL, TK_ROUTE_PUBLIC},
    {"GET", "/silent", h_silent, NULL, TK_ROUTE_PUBLIC},
    {"GET", "/stream/{mode}", h_stream, NULL, TK_ROUTE_PUBLIC},
    {"GET", "/sse", h_sse, NULL, TK_ROUTE_PUBLIC | TK_ROUTE_BLOCKING},
    {"GET", "/private", h_quick, NULL, 0},
    {"GET", "/whoami", h_whoami, NULL, TK_ROUTE_PUBLIC},
    {"GET", "/hold", h_hold, NULL, TK_ROUTE_PUBLIC},
};

static tk_httpd *srv;
static char base[64];

static void start_with(tk_httpd_config *c)
{
    char err[256];
    c->listen = "127.0.0.1:0";
    c->name = "test";
    c->heartbeat_s = 1;
    c->stream_buffer = 64 * 1024;
    c->auth = auth;
    srv = tk_httpd_start(c, routes, TK_ARRAY_LEN(routes), err, sizeof err);
    if (!srv)
        TK_TEST_FAIL("start: %s", err);
    snprintf(base, sizeof base, "http://127.0.0.1:%d", tk_httpd_port(srv));
}

static void start(unsigned timeout_s, unsigned max_conn)
{
    tk_log_set_level(TK_LOG_ERROR);
    tk_httpd_config c = {.timeout_s = timeout_s, .max_connections = max_conn};
    start_with(&c);
}

static long get(const char *path, tk_httpc_resp *resp, const char *const *headers)
{
    char url[256];
    snprintf(url, sizeof url, "%s%s", base, path);
    tk_httpc_req rq = {.url = url, .headers = headers, .timeout_ms = 10000};
    tk_status st = tk_httpc_do(&rq, resp);
    if (st != TK_OK)
        TK_TEST_FAIL("GET %s: %s", path, resp->error);
    return resp->status;
}

TEST(httpd_routes_params_query_and_request_id)
{
    start(0, 0);
    tk_httpc_resp r;
    CHECK_INT(get("/items/a%20b?q=x%2By", &r, NULL), ==, 200);
    CHECK(strstr(tk_buf_cstr(&r.body), "\"id\":\"a b\"") != NULL);
    CHECK(strstr(tk_buf_cstr(&r.body), "\"q\":\"x+y\"") != NULL);
    char v[64];
    CHECK(tk_httpc_resp_header(&r, "x-request-id", v, sizeof v) != NULL);
    CHECK_INT(strlen(v), ==, 36);
    tk_httpc_resp_free(&r);
    const char *h[] = {"X-Request-ID: my-req-1", NULL};
    CHECK_INT(get("/items/1", &r, h), ==, 200);
    CHECK_STR(tk_httpc_resp_header(&r, "X-Request-ID", v, sizeof v), "my-req-1");
    tk_httpc_resp_free(&r);
    /* a hostile request id is replaced, not echoed */
    const char *h2[] = {"X-Request-ID: a b<script>", NULL};
    CHECK_INT(get("/items/1", &r, h2), ==, 200);
    CHECK(strcmp(tk_httpc_resp_header(&r, "X-Request-ID", v, sizeof v), "a b<script>") != 0);
    tk_httpc_resp_free(&r);
    CHECK_INT(get("/proxy/s1/files/a%2Fb?path=x", &r, NULL), ==, 200);
    CHECK(strstr(tk_buf_cstr(&r.body), "\"rest\":\"/files/a%2Fb\"") != NULL);
    tk_httpc_resp_free(&r);
    CHECK_INT(get("/proxy/s1", &r, NULL), ==, 200);
    CHECK(strstr(tk_buf_cstr(&r.body), "\"rest\":\"/\"") != NULL);
    tk_httpc_resp_free(&r);
    tk_httpd_stop(srv);
}

TEST(httpd_errors_are_uniform_json)
{
    start(0, 0);
    tk_httpc_resp r;
    CHECK_INT(get("/nope", &r, NULL), ==, 404);
    CHECK(strstr(tk_buf_cstr(&r.body), "\"code\":\"NOT_FOUND\"") != NULL);
    CHECK(strstr(tk_buf_cstr(&r.body), "\"message\"") != NULL);
    tk_httpc_resp_free(&r);
    CHECK_INT(get("/body", &r, NULL), ==, 405);
    tk_httpc_resp_free(&r);
    CHECK_INT(get("/items/%zz", &r, NULL), ==, 400);
    tk_httpc_resp_free(&r);
    CHECK_INT(get("/items/a%00b", &r, NULL), ==, 400);
    tk_httpc_resp_free(&r);
    CHECK_INT(get("/silent", &r, NULL), ==, 500);
    tk_httpc_resp_free(&r);
    CHECK_INT(get("/private", &r, NULL), ==, 401);
    CHECK(strstr(tk_buf_cstr(&r.body), "UNAUTHORIZED") != NULL);
    tk_httpc_resp_free(&r);
    const char *h[] = {"X-Key: good", NULL};
    CHECK_INT(get("/private", &r, h), ==, 200);
    tk_httpc_resp_free(&r);
    tk_httpd_stop(srv);
}

static const char *const std_headers[] = {"X-Content-Type-Options", "nosniff", "Content-Type",
                                          "text/x-never", NULL};

TEST(httpd_default_headers_on_every_response)
{
    char err[256];
    tk_log_set_level(TK_LOG_ERROR);
    tk_httpd_config c = {
        .listen = "127.0.0.1:0", .name = "test", .auth = auth, .headers = std_headers};
    srv = tk_httpd_start(&c, routes, TK_ARRAY_LEN(routes), err, sizeof err);
    if (!srv)
        TK_TEST_FAIL("start: %s", err);
    snprintf(base, sizeof base, "http://127.0.0.1:%d", tk_httpd_port(srv));
    const char *paths[] = {"/items/1", "/nope", "/private", "/sse"};
    long want[] = {200, 404, 401, 200};
    for (size_t i = 0; i < TK_ARRAY_LEN(paths); i++) {
        tk_httpc_resp r;
        CHECK_INT(get(paths[i], &r, NULL), ==, want[i]);
        char v[64];
        CHECK_STR(tk_httpc_resp_header(&r, "X-Content-Type-Options", v, sizeof v), "nosniff");
        /* a header the response sets itself is kept */
        CHECK(strcmp(tk_httpc_resp_header(&r, "Content-Type", v, sizeof v), "text/x-never") != 0);
        tk_httpc_resp_free(&r);
    }
    tk_httpd_stop(srv);
}

static long post(const char *path, const char *body, size_t len, int chunked, tk_httpc_resp *resp)
{
    char url[256];
    snprintf(url, sizeof url, "%s%s", base, path);
    const char *hc[] = {"Content-Type: application/json", "Transfer-Encoding: chunked", NULL};
    const char *hn[] = {"Content-Type: application/json", NULL};
    tk_httpc_req rq = {.url = url,
                       .method = "POST",
                       .body = body,
                       .body_len = len,
                       .headers = chunked ? hc : hn,
                       .timeout_ms = 10000};
    tk_status st = tk_httpc_do(&rq, resp);
    if (st != TK_OK)
        return -1;
    return resp->status;
}

TEST(httpd_body_cap_exact_and_one_over)
{
    start(0, 0);
    char body[1100];
    memset(body, ' ', sizeof body);
    memcpy(body, "{\"name\":\"n\"}", 12);
    tk_httpc_resp r;
    handler_calls = 0;
    CHECK_INT(post("/body", body, 1000, 0, &r), ==, 200);
    CHECK(strstr(tk_buf_cstr(&r.body), "\"len\":1000") != NULL);
    tk_httpc_resp_free(&r);
    CHECK_INT(handler_calls, ==, 1);
    /* one byte over, with Content-Length: refused before the body is read */
    CHECK_INT(post("/body", body, 1001, 0, &r), ==, 413);
    CHECK(strstr(tk_buf_cstr(&r.body), "PAYLOAD_TOO_LARGE") != NULL);
    tk_httpc_resp_free(&r);
    /* one byte over, chunked (no length known up front) */
    CHECK_INT(post("/body", body, 1001, 1, &r), ==, 413);
    tk_httpc_resp_free(&r);
    CHECK_INT(post("/body", body, 1000, 1, &r), ==, 200);
    tk_httpc_resp_free(&r);
    CHECK_INT(handler_calls, ==, 2); /* the refused ones never reached the handler */
    CHECK_INT(post("/body", "{\"name\":", 8, 0, &r), ==, 400);
    CHECK(strstr(tk_buf_cstr(&r.body), "INVALID_JSON") != NULL);
    tk_httpc_resp_free(&r);
    CHECK_INT(post("/body", "", 0, 0, &r), ==, 400);
    tk_httpc_resp_free(&r);
    tk_httpd_stop(srv);
}

static void *blocking_client(void *arg)
{
    tk_httpc_resp *r = arg;
    get("/blocking", r, NULL);
    return NULL;
}

TEST(httpd_blocking_route_does_not_hold_the_event_loop)
{
    start(0, 0);
    quick_served = 0;
    tk_httpc_resp rb, rq;
    pthread_t t;
    pthread_create(&t, NULL, blocking_client, &rb);
    tk_sleep_ms(100);
    CHECK_INT(get("/quick", &rq, NULL), ==, 200);
    pthread_join(t, NULL);
    CHECK_INT(rb.status, ==, 200);
    tk_httpc_resp_free(&rb);
    tk_httpc_resp_free(&rq);
    tk_httpd_stop(srv);
}

TEST(httpd_deferred_response_from_another_thread)
{
    start(0, 0);
    tk_httpc_resp r;
    CHECK_INT(get("/defer", &r, NULL), ==, 201);
    CHECK_STR(tk_buf_cstr(&r.body), "later");
    tk_httpc_resp_free(&r);
    tk_httpd_stop(srv);
}

static int on_chunk(const char *d, size_t n, void *ud)
{
    tk_buf *b = ud;
    tk_buf_append(b, d, n);
    if (strstr(tk_buf_cstr(b), "chunk1")) {
        pthread_mutex_lock(&mu);
        chunk1_seen = 1;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
    }
    return 0;
}

TEST(httpd_stream_arrives_incrementally)
{
    start(0, 0);
    memset(&prod, 0, sizeof prod);
    chunk1_seen = 0;
    tk_buf got;
    tk_buf_init(&got, 1 << 20);
    char url[128];
    snprintf(url, sizeof url, "%s/stream/0", base);
    tk_httpc_req rq = {.url = url, .on_data = on_chunk, .ud = &got, .timeout_ms = 10000};
    tk_httpc_resp r;
    CHECK(tk_httpc_do(&rq, &r) == TK_OK);
    /* chunk2 is written only after the client saw chunk1 */
    CHECK_STR(tk_buf_cstr(&got), "chunk1\nchunk2\n");
    tk_httpc_resp_free(&r);
    tk_buf_free(&got);
    tk_httpd_stop(srv);
}

static int slow_reader(const char *d, size_t n, void *ud)
{
    size_t *total = ud;
    *total += n;
    tk_sleep_ms(1);
    return 0;
}

TEST(httpd_stream_back_pressure_bounds_the_queue)
{
    start(0, 0);
    memset(&prod, 0, sizeof prod);
    size_t total = 0;
    char url[128];
    snprintf(url, sizeof url, "%s/stream/1", base);
    tk_httpc_req rq = {.url = url, .on_data = slow_reader, .ud = &total, .timeout_ms = 60000};
    tk_httpc_resp r;
    CHECK(tk_httpc_do(&rq, &r) == TK_OK);
    CHECK_INT(total, ==, 256 * 16384);
    /* the writer waited instead of queueing 4 MiB: at most the buffer plus one write */
    CHECK_INT(prod.max_pending, <=, 64 * 1024 + 16384);
    tk_httpc_resp_free(&r);
    tk_httpd_stop(srv);
}

static int stop_after_some(const char *d, size_t n, void *ud)
{
    size_t *total = ud;
    *total += n;
    return *total > 20;
}

TEST(httpd_stream_notices_client_gone)
{
    start(0, 0);
    memset(&prod, 0, sizeof prod);
    size_t total = 0;
    char url[128];
    snprintf(url, sizeof url, "%s/stream/2", base);
    tk_httpc_req rq = {.url = url, .on_data = stop_after_some, .ud = &total};
    tk_httpc_resp r;
    CHECK(tk_httpc_do(&rq, &r) == TK_AGAIN);
    tk_httpc_resp_free(&r);
    pthread_mutex_lock(&mu);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 8;
    while (!prod.on_close_called)
        if (pthread_cond_timedwait(&cv, &mu, &ts) != 0)
            break;
    pthread_mutex_unlock(&mu);
    CHECK(prod.on_close_called);
    for (int i = 0; i < 200 && !prod.closed_seen; i++)
        tk_sleep_ms(10);
    CHECK(prod.closed_seen);
    tk_httpd_stop(srv);
}

struct sse_got {
    int n;
    char ids[8][8];
    char data[8][64];
};

static int on_ev(const tk_sse_event *e, void *ud)
{
    struct sse_got *g = ud;
    if (g->n < 8) {
        snprintf(g->ids[g->n], 8, "%s", e->id);
        snprintf(g->data[g->n], 64, "%s", e->data);
    }
    g->n++;
    return 0;
}

TEST(httpd_sse_framing_resume_and_heartbeat)
{
    start(0, 0);
    struct sse_got g = {0};
    char url[128];
    snprintf(url, sizeof url, "%s/sse", base);
    tk_httpc_req rq = {.url = url, .on_sse = on_ev, .ud = &g};
    tk_httpc_resp r;
    CHECK(tk_httpc_do(&rq, &r) == TK_OK);
    char ct[64];
    CHECK_STR(tk_httpc_resp_header(&r, "Content-Type", ct, sizeof ct), "text/event-stream");
    CHECK_INT(g.n, ==, 3);
    CHECK_STR(g.data[0], "event 1\nline two");
    CHECK_STR(g.ids[2], "3");
    tk_httpc_resp_free(&r);
    /* resume after event 1 */
    memset(&g, 0, sizeof g);
    const char *h[] = {"Last-Event-ID: 1", NULL};
    rq.headers = h;
    CHECK(tk_httpc_do(&rq, &r) == TK_OK);
    CHECK_INT(g.n, ==, 2);
    CHECK_STR(g.ids[0], "2");
    tk_httpc_resp_free(&r);
    /* a heartbeat comment arrives on an idle stream */
    tk_buf raw;
    tk_buf_init(&raw, 1 << 16);
    snprintf(url, sizeof url, "%s/sse?wait=1", base);
    tk_httpc_req rq2 = {
        .url = url, .on_data = (int (*)(const char *, size_t, void *))on_chunk, .ud = &raw};
    CHECK(tk_httpc_do(&rq2, &r) == TK_OK);
    CHECK(strstr(tk_buf_cstr(&raw), ": ping\n\n") != NULL);
    tk_httpc_resp_free(&r);
    tk_buf_free(&raw);
    tk_httpd_stop(srv);
}

static int raw_connect(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)tk_httpd_port(srv))};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
        TK_TEST_FAIL("connect: %s", strerror(errno));
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

static int read_all(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    for (;;) {
        ssize_t r = recv(fd, buf + n, cap - 1 - n, 0);
        if (r <= 0)
            break;
        n += (size_t)r;
        if (n >= cap - 1)
            break;
    }
    buf[n] = 0;
    return (int)n;
}

TEST(httpd_malformed_and_slow_clients)
{
    start(1, 0);
    char buf[4096];
    int fd = raw_connect();
    const char *junk = "GARBAGE\r\n\r\n";
    send(fd, junk, strlen(junk), 0);
    read_all(fd, buf, sizeof buf);
    CHECK(strstr(buf, " 200 ") == NULL);
    close(fd);
    /* a client that sends half a request and stalls is dropped by the timeout */
    fd = raw_connect();
    send(fd, "GET /items/1 HTTP/1.1\r\nHost: x\r\n", 32, 0);
    int64_t t0 = tk_mono_ms();
    int n = read_all(fd, buf, sizeof buf);
    CHECK_INT(n, ==, 0);
    CHECK_INT(tk_mono_ms() - t0, <, 9000);
    close(fd);
    /* headers larger than the per-connection memory limit are refused */
    fd = raw_connect();
    tk_buf req;
    tk_buf_init(&req, 1 << 20);
    tk_buf_append_str(&req, "GET /items/1 HTTP/1.1\r\nHost: x\r\nX-Big: ");
    for (int i = 0; i < 100000; i++)
        tk_buf_append_byte(&req, 'a');
    tk_buf_append_str(&req, "\r\n\r\n");
    send(fd, req.data, req.len, MSG_NOSIGNAL);
    read_all(fd, buf, sizeof buf);
    CHECK(strstr(buf, " 200 ") == NULL);
    tk_buf_free(&req);
    close(fd);
    /* the server still serves */
    tk_httpc_resp r;
    CHECK_INT(get("/items/1", &r, NULL), ==, 200);
    tk_httpc_resp_free(&r);
    tk_httpd_stop(srv);
}

TEST(httpd_connection_limit)
{
    /* At the limit the server accepts no more: a further client waits in the
     * kernel's backlog, costing the server nothing, until a slot frees. */
    start(30, 4);
    int fds[4];
    for (int i = 0; i < 4; i++)
        fds[i] = raw_connect();
    tk_sleep_ms(100);
    int fd = raw_connect();
    struct timeval tv = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[512];
    send(fd, "GET /items/1 HTTP/1.1\r\nHost: x\r\n\r\n", 35, MSG_NOSIGNAL);
    ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
    CHECK_INT(n, ==, -1); /* no answer while the four are open */
    for (int i = 0; i < 4; i++)
        close(fds[i]);
    tv.tv_sec = 10;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    n = recv(fd, buf, sizeof buf - 1, 0);
    CHECK_INT(n, >, 0);
    buf[n] = 0;
    CHECK(strstr(buf, " 200 ") != NULL);
    close(fd);
    tk_httpd_stop(srv);
}

TEST(httpd_unix_socket)
{
    char err[256], path[64];
    snprintf(path, sizeof path, "/tmp/tk-httpd-%d.sock", getpid());
    char listen[80];
    snprintf(listen, sizeof listen, "unix:%s", path);
    tk_httpd_config c = {.listen = listen, .name = "test"};
    srv = tk_httpd_start(&c, routes, TK_ARRAY_LEN(routes), err, sizeof err);
    CHECK(srv != NULL);
    struct stat st;
    CHECK(stat(path, &st) == 0);
    CHECK_INT(st.st_mode & 0777, ==, 0600);
    tk_httpc_req rq = {.url = "http://sandbox/items/u1", .unix_socket = path};
    tk_httpc_resp r;
    CHECK(tk_httpc_do(&rq, &r) == TK_OK);
    CHECK_INT(r.status, ==, 200);
    CHECK(strstr(tk_buf_cstr(&r.body), "u1") != NULL);
    tk_httpc_resp_free(&r);
    tk_httpd_stop(srv);
    CHECK(stat(path, &st) != 0);
}

TEST(httpd_inherited_listen_fd)
{
    /* socket activation: the caller binds, the server serves on "fd:N" and never
     * unlinks the path it did not create */
    char err[256], path[64], addr[32];
    snprintf(path, sizeof path, "/tmp/tk-httpd-fd-%d.sock", getpid());
    unlink(path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    snprintf(sun.sun_path, sizeof sun.sun_path, "%s", path);
    CHECK(bind(fd, (struct sockaddr *)&sun, sizeof sun) == 0);
    snprintf(addr, sizeof addr, "fd:%d", fd);
    tk_httpd_config c = {.listen = addr, .name = "test"};
    /* not yet listening: refused with a message */
    CHECK(tk_httpd_start(&c, routes, TK_ARRAY_LEN(routes), err, sizeof err) == NULL);
    CHECK(strstr(err, "not a listening socket") != NULL);
    CHECK(listen(fd, 16) == 0);
    srv = tk_httpd_start(&c, routes, TK_ARRAY_LEN(routes), err, sizeof err);
    CHECK(srv != NULL);
    char want[96];
    snprintf(want, sizeof want, "unix:%s", path);
    CHECK_STR(tk_httpd_url(srv), want);
    tk_httpc_req rq = {.url = "http://sandbox/items/u2", .unix_socket = path};
    tk_httpc_resp r;
    CHECK(tk_httpc_do(&rq, &r) == TK_OK);
    CHECK_INT(r.status, ==, 200);
    tk_httpc_resp_free(&r);
    tk_httpd_stop(srv);
    struct stat st;
    CHECK(stat(path, &st) == 0);
    unlink(path);
    int got;
    CHECK(tk_listen_fd("fd:3", &got) == TK_OK);
    CHECK_INT(got, ==, 3);
    CHECK(tk_listen_fd("fd:x", &got) == TK_EINVAL);
    CHECK(tk_listen_fd("unix:/x", &got) == TK_ENOENT);
    char msg[128];
    CHECK(tk_config_check_listen("fd:3", msg, sizeof msg) == 0);
    CHECK(tk_config_check_listen("fd:", msg, sizeof msg) != 0);
}

TEST(httpc_response_cap_and_json_helper)
{
    start(0, 0);
    char url[128];
    snprintf(url, sizeof url, "%s/stream/1", base);
    tk_httpc_req rq = {.url = url, .max_response = 1000};
    tk_httpc_resp r;
    CHECK(tk_httpc_do(&rq, &r) == TK_ETOOBIG);
    CHECK_INT(r.body.len, <=, 1000);
    tk_httpc_resp_free(&r);
    snprintf(url, sizeof url, "%s/body", base);
    long status;
    json_t *out;
    char err[256];
    CHECK(tk_httpc_json("POST", url, NULL, NULL, tk_json_obj("name", json_string("zed"), NULL),
                        5000, &status, &out, err, sizeof err) == TK_OK);
    CHECK_INT(status, ==, 200);
    CHECK_STR(tk_json_str(out, "name"), "zed");
    json_decref(out);
    /* a refused connection is an error with a message, not a crash */
    CHECK(tk_httpc_json("GET", "http://127.0.0.1:1/x", NULL, NULL, NULL, 2000, &status, &out, err,
                        sizeof err) == TK_ERROR);
    CHECK(strlen(err) > 0);
    tk_httpd_stop(srv);
}

TEST(listen_parse)
{
    char host[64], path[108];
    int port;
    CHECK(tk_listen_parse("127.0.0.1:8080", host, sizeof host, &port, path, sizeof path) == TK_OK);
    CHECK_STR(host, "127.0.0.1");
    CHECK_INT(port, ==, 8080);
    CHECK(tk_listen_parse("[::1]:0", host, sizeof host, &port, path, sizeof path) == TK_OK);
    CHECK_STR(host, "::1");
    CHECK(tk_listen_parse(":9", host, sizeof host, &port, path, sizeof path) == TK_OK);
    CHECK_STR(host, "0.0.0.0");
    CHECK(tk_listen_parse("unix:/run/x.sock", host, sizeof host, &port, path, sizeof path) ==
          TK_OK);
    CHECK_STR(path, "/run/x.sock");
    CHECK(tk_listen_parse("nohost", host, sizeof host, &port, path, sizeof path) == TK_EINVAL);
    CHECK(tk_listen_parse("1.2.3.4:99999", host, sizeof host, &port, path, sizeof path) ==
          TK_EINVAL);
    CHECK(tk_listen_parse("[::1:80", host, sizeof host, &port, path, sizeof path) == TK_EINVAL);
    CHECK(tk_listen_parse("unix:", host, sizeof host, &port, path, sizeof path) == TK_EINVAL);
}

/* ---------- per-client limits ---------- */

/* A TCP connection to the server from the loopback address src (127.0.0.0/8). */
static int connect_from(const char *src)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in me = {.sin_family = AF_INET};
    inet_pton(AF_INET, src, &me.sin_addr);
    if (bind(fd, (struct sockaddr *)&me, sizeof me) < 0)
        TK_TEST_FAIL("bind %s: %s", src, strerror(errno));
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)tk_httpd_port(srv))};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
        TK_TEST_FAIL("connect from %s: %s", src, strerror(errno));
    return fd;
}

/* 1 when the server ends the connection without an answer within wait_s (it
 * closes or resets it), 0 when it answers, -1 when it is still open. */
static int ended_unanswered(int fd, int wait_s)
{
    struct timeval tv = {wait_s, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[256];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n > 0)
        return 0;
    if (n == 0 || errno == ECONNRESET)
        return 1;
    return -1;
}

/* An HTTP/1.1 exchange on a new connection from src: the status, 0 if the
 * connection ended without one. */
static int request_from(const char *src, const char *path, const char *xff, char *body,
                        size_t bodylen)
{
    int fd = connect_from(src);
    char req[512];
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n%s%s%s\r\n", path,
             xff ? "X-Forwarded-For: " : "", xff ? xff : "", xff ? "\r\n" : "");
    send(fd, req, strlen(req), MSG_NOSIGNAL);
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[4096];
    int n = read_all(fd, buf, sizeof buf);
    close(fd);
    int status = 0;
    if (n < 12 || sscanf(buf, "HTTP/1.1 %d", &status) != 1)
        return 0;
    const char *b = strstr(buf, "\r\n\r\n");
    if (body && b)
        snprintf(body, bodylen, "%s", b + 4);
    return status;
}

TEST(httpd_limits_one_client_holding_connections_does_not_starve_another)
{
    /* 127.0.0.1 opens 1,000 connections and sends half a request line on each:
     * past 16 they are closed as they are accepted, the 16 held ones go at the
     * header deadline, and meanwhile 127.0.0.2 is answered. */
    tk_log_set_level(TK_LOG_ERROR);
    tk_httpd_config c = {.timeout_s = 60, .per_ip_limit = 16, .header_timeout_ms = 2000};
    start_with(&c);
    enum { N = 1000 };
    static int fds[N];
    for (int i = 0; i < N; i++) {
        fds[i] = connect_from("127.0.0.1");
        send(fds[i], "GET /items/", 11, MSG_NOSIGNAL);
    }
    char body[64] = "";
    CHECK_INT(request_from("127.0.0.2", "/whoami", NULL, body, sizeof body), ==, 200);
    CHECK_STR(body, "127.0.0.2");
    /* the attacker's own new requests are not served past its limit */
    CHECK_INT(request_from("127.0.0.1", "/items/1", NULL, NULL, 0), ==, 0);
    /* every connection of the flood ends unanswered: those past the limit at
     * once, the held ones at the header deadline (2 s; 10 s is the margin) */
    int ended = 0;
    for (int i = 0; i < N; i++)
        ended += ended_unanswered(fds[i], 10) == 1;
    CHECK_INT(ended, ==, N);
    /* the server's count drops when libmicrohttpd reports each close, a little
     * after the client sees its end: wait for it (up to 5 s) */
    for (int i = 0; i < 250 && tk_httpd_connection_count(srv) > 1; i++)
        usleep(20000);
    CHECK_INT(tk_httpd_connection_count(srv), <=, 1);
    /* and once they are gone the client is served again */
    CHECK_INT(request_from("127.0.0.1", "/items/1", NULL, NULL, 0), ==, 200);
    for (int i = 0; i < N; i++)
        close(fds[i]);
    tk_httpd_stop(srv);
}

TEST(httpd_limits_header_deadline_is_not_reset_by_trickling_bytes)
{
    /* a byte every 300 ms keeps an idle timer of 60 s from ever firing; the
     * header deadline (1 s) ends it all the same */
    tk_log_set_level(TK_LOG_ERROR);
    tk_httpd_config c = {.timeout_s = 60, .header_timeout_ms = 1000};
    start_with(&c);
    int fd = connect_from("127.0.0.1");
    const char *req =
        "GET /items/1 HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    int closed = 0;
    for (size_t i = 0; i < strlen(req) && !closed; i++) {
        if (send(fd, req + i, 1, MSG_NOSIGNAL) != 1)
            closed = 1;
        else if (ended_unanswered(fd, 0) == 1)
            closed = 1;
        tk_sleep_ms(300);
    }
    CHECK(closed); /* within 33 x 300 ms, well under the idle timeout */
    close(fd);
    /* a request sent at once is served */
    CHECK_INT(request_from("127.0.0.1", "/items/1", NULL, NULL, 0), ==, 200);
    tk_httpd_stop(srv);
}

TEST(httpd_limits_slow_body_is_closed_and_a_steady_one_served)
{
    tk_log_set_level(TK_LOG_ERROR);
    tk_httpd_config c = {.timeout_s = 60, .header_timeout_ms = 1000, .min_body_rate = 1000};
    start_with(&c);
    /* 10 bytes every 200 ms is 50 bytes/s: closed before the 900-byte body is in */
    int fd = connect_from("127.0.0.1");
    const char *head = "POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 900\r\n\r\n{\"name\":\"";
    send(fd, head, strlen(head), MSG_NOSIGNAL);
    int closed = 0;
    for (int sent = 0; sent < 880 && !closed; sent += 10) {
        if (send(fd, "aaaaaaaaaa", 10, MSG_NOSIGNAL) != 10 || ended_unanswered(fd, 0) == 1)
            closed = 1;
        tk_sleep_ms(200);
    }
    CHECK(closed);
    close(fd);
    /* the same body at once is served */
    tk_httpc_resp r;
    char body[901];
    memset(body, 'a', sizeof body);
    memcpy(body, "{\"name\":\"", 9);
    memcpy(body + 897, "\"}\n", 3);
    CHECK_INT(post("/body", body, 900, 0, &r), ==, 200);
    tk_httpc_resp_free(&r);
    tk_httpd_stop(srv);
}

static int keepalive_request(int fd)
{
    const char *req = "GET /items/1 HTTP/1.1\r\nHost: x\r\n\r\n";
    send(fd, req, strlen(req), MSG_NOSIGNAL);
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[2048];
    ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    return strstr(buf, " 200 ") != NULL;
}

TEST(httpd_limits_idle_keepalive_closed_sooner_near_the_cap)
{
    tk_log_set_level(TK_LOG_ERROR);
    tk_httpd_config c = {.timeout_s = 60, .header_timeout_ms = 1000, .max_connections = 16};
    start_with(&c);
    /* far from the cap a kept-alive connection may idle (3 s here) */
    int fd = connect_from("127.0.0.1");
    CHECK(keepalive_request(fd));
    CHECK_INT(ended_unanswered(fd, 3), ==, -1);
    CHECK(keepalive_request(fd));
    /* with 12 of 16 slots busy (requests in flight) it goes at the header deadline */
    released = 0;
    int held[12];
    for (int i = 0; i < 12; i++) {
        held[i] = connect_from("127.0.0.3");
        send(held[i], "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n", 31, MSG_NOSIGNAL);
    }
    CHECK_INT(ended_unanswered(fd, 10), ==, 1);
    close(fd);
    pthread_mutex_lock(&mu);
    released = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < 12; i++) {
        CHECK_INT(ended_unanswered(held[i], 10), ==, 0); /* answered */
        close(held[i]);
    }
    tk_httpd_stop(srv);
}

TEST(httpd_limits_forwarded_client_behind_a_trusted_proxy)
{
    tk_log_set_level(TK_LOG_ERROR);
    tk_cidr_list trusted;
    char err[256];
    CHECK(tk_cidr_list_parse("127.0.0.1/32, 10.0.0.0/8", &trusted, err, sizeof err) == TK_OK);
    tk_httpd_config c = {.timeout_s = 60, .per_ip_limit = 2, .trusted = &trusted};
    start_with(&c);
    char body[64];
    /* from the proxy: the rightmost untrusted entry is the client */
    CHECK_INT(request_from("127.0.0.1", "/whoami", "198.51.100.1, 203.0.113.9, 10.1.2.3", body,
                           sizeof body),
              ==, 200);
    CHECK_STR(body, "203.0.113.9");
    /* garbage ends the walk at the last trusted hop */
    CHECK_INT(
        request_from("127.0.0.1", "/whoami", "203.0.113.9, unknown, 10.1.2.3", body, sizeof body),
        ==, 200);
    CHECK_STR(body, "10.1.2.3");
    /* from anyone else the header is ignored */
    CHECK_INT(request_from("127.0.0.2", "/whoami", "203.0.113.9", body, sizeof body), ==, 200);
    CHECK_STR(body, "127.0.0.2");
    /* the proxy holds more connections than the per-address limit; a forwarded
     * client with two requests in flight is answered 429 on the third, another
     * client is served */
    released = 0;
    int held[2];
    for (int i = 0; i < 2; i++) {
        held[i] = connect_from("127.0.0.1");
        const char *req = "GET /hold HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 203.0.113.9\r\n\r\n";
        send(held[i], req, strlen(req), MSG_NOSIGNAL);
    }
    tk_sleep_ms(200);
    CHECK_INT(request_from("127.0.0.1", "/whoami", "203.0.113.9", body, sizeof body), ==, 429);
    CHECK(strstr(body, "TOO_MANY_CONNECTIONS") != NULL);
    CHECK_INT(request_from("127.0.0.1", "/whoami", "203.0.113.10", body, sizeof body), ==, 200);
    CHECK_STR(body, "203.0.113.10");
    pthread_mutex_lock(&mu);
    released = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < 2; i++) {
        CHECK_INT(ended_unanswered(held[i], 10), ==, 0);
        close(held[i]);
    }
    /* its requests done, the client is served again */
    tk_sleep_ms(100);
    CHECK_INT(request_from("127.0.0.1", "/whoami", "203.0.113.9", body, sizeof body), ==, 200);
    tk_httpd_stop(srv);
    tk_cidr_list_free(&trusted);
}

TEST(httpd_limits_refusals_are_logged_once_per_interval)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/tk-httpd-log-%d", getpid());
    int lf = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);
    CHECK(lf >= 0);
    fflush(stderr);
    dup2(lf, 2);
    tk_log_set_level(TK_LOG_WARN);
    tk_httpd_config c = {.timeout_s = 60, .per_ip_limit = 1};
    start_with(&c);
    int keep = connect_from("127.0.0.1");
    send(keep, "GET /", 5, MSG_NOSIGNAL);
    tk_sleep_ms(100);
    for (int i = 0; i < 200; i++) {
        int fd = connect_from("127.0.0.1");
        ended_unanswered(fd, 10);
        close(fd);
    }
    close(keep);
    tk_httpd_stop(srv);
    fflush(stderr);
    char buf[65536];
    ssize_t n = pread(lf, buf, sizeof buf - 1, 0);
    CHECK(n > 0);
    buf[n] = 0;
    unlink(path);
    int lines = 0;
    for (char *p = buf; (p = strstr(p, "too many connections from one client")); p++)
        lines++;
    CHECK_INT(lines, ==, 1);
    CHECK(strstr(buf, "client=127.0.0.1") != NULL);
}

TEST_MAIN()
