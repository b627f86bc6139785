/* The non-blocking HTTP client (curl multi on the event loop) against the HTTP
 * server wrapper on loopback: many concurrent streams on one thread, buffered
 * bodies, cancellation from inside callbacks, timeouts. */
#include <pthread.h>
#include <unistd.h>

#include "lib/httpc_multi.h"
#include "lib/httpd.h"
#include "lib/log.h"
#include "lib/tktime.h"
#include "tk_test.h"

/* --- server --- */

static void h_json(tk_req *r, void *ud)
{
    tk_respond(r, 200, "application/json", "{\"ok\":true}", 11);
}

static void h_status(tk_req *r, void *ud)
{
    tk_respond_error(r, 418, "TEAPOT", "short and stout");
}

/* 5 chunks, 20 ms apart, on a worker thread */
static void h_slow(tk_req *r, void *ud)
{
    tk_stream *s = tk_respond_stream(r, 200, "text/plain");
    for (int i = 0; i < 5; i++) {
        char c = (char)('a' + i);
        if (tk_stream_write(s, &c, 1) != TK_OK)
            break;
        usleep(20000);
    }
    tk_stream_close(s);
}

/* sends nothing for 3 s (a suspended stream cannot notice the client going) */
static void h_hang(tk_req *r, void *ud)
{
    tk_stream *s = tk_respond_stream(r, 200, "text/plain");
    for (int i = 0; i < 300 && !tk_stream_closed(s); i++)
        usleep(10000);
    tk_stream_close(s);
}

static void h_echo(tk_req *r, void *ud)
{
    size_t n;
    const char *b = tk_req_body(r, &n);
    tk_respond(r, 200, "application/octet-stream", b, n);
}

static tk_httpd *srv;
static char base[128];

static void start_server(void)
{
    static tk_route routes[] = {
        {"GET", "/json", h_json},
        {"GET", "/status", h_status},
        {"GET", "/slow", h_slow, NULL, TK_ROUTE_BLOCKING},
        {"GET", "/hang", h_hang, NULL, TK_ROUTE_BLOCKING},
        {"POST", "/echo", h_echo},
    };
    tk_httpd_config cfg = {.listen = "127.0.0.1:0", .name = "t", .workers = 64};
    char err[256];
    srv = tk_httpd_start(&cfg, routes, TK_ARRAY_LEN(routes), err, sizeof err);
    if (!srv) {
        fprintf(stderr, "server: %s\n", err);
        exit(1);
    }
    snprintf(base, sizeof base, "%s", tk_httpd_url(srv));
}

/* --- client harness: the loop runs on the test's thread --- */

struct ctx {
    tk_evloop *l;
    tk_httpm *m;
    int done, want;
    int ok, fail;
    long last_status;
    tk_status last_st;
    char body[256];
    size_t got;
    tk_httpm_xfer *x;
    int cancel_after;
};

static void maybe_stop(struct ctx *c)
{
    if (c->done >= c->want)
        tk_evloop_stop(c->l);
}

static void on_done(tk_httpm_xfer *x, const tk_httpm_result *r, void *ud)
{
    struct ctx *c = ud;
    c->done++;
    c->last_status = r->status;
    c->last_st = r->st;
    if (r->st == TK_OK)
        c->ok++;
    else
        c->fail++;
    if (r->body->len)
        snprintf(c->body, sizeof c->body, "%s", tk_buf_cstr(r->body));
    maybe_stop(c);
}

static void setup(struct ctx *c, int want)
{
    memset(c, 0, sizeof *c);
    c->l = tk_evloop_new();
    c->m = tk_httpm_new(c->l);
    c->want = want;
}

static void teardown(struct ctx *c)
{
    tk_httpm_free(c->m);
    tk_evloop_free(c->l);
}

static void watchdog(tk_ev_timer *t, void *ud)
{
    struct ctx *c = ud;
    tk_ev_timer_del(t);
    tk_evloop_stop(c->l);
}

TEST(httpm_buffers_a_json_body)
{
    start_server();
    struct ctx c;
    setup(&c, 1);
    char url[256];
    snprintf(url, sizeof url, "%s/json", base);
    tk_httpm_req r = {.url = url, .on_done = on_done, .ud = &c};
    CHECK(tk_httpm_start(c.m, &r) != NULL);
    tk_evloop_run(c.l);
    CHECK_INT(c.ok, ==, 1);
    CHECK_INT(c.last_status, ==, 200);
    CHECK_STR(c.body, "{\"ok\":true}");
    CHECK_INT(tk_httpm_active(c.m), ==, 0);
    teardown(&c);
    tk_httpd_stop(srv);
}

TEST(httpm_reports_error_status_and_posts_a_body)
{
    start_server();
    struct ctx c;
    setup(&c, 2);
    char u1[256], u2[256];
    snprintf(u1, sizeof u1, "%s/status", base);
    snprintf(u2, sizeof u2, "%s/echo", base);
    tk_httpm_req r1 = {.url = u1, .on_done = on_done, .ud = &c};
    tk_httpm_start(c.m, &r1);
    char body[] = "hello body";
    const char *hdrs[] = {"Content-Type: text/plain", NULL};
    tk_httpm_req r2 = {
        .url = u2, .body = body, .body_len = 10, .headers = hdrs, .on_done = on_done, .ud = &c};
    tk_httpm_start(c.m, &r2);
    memset(body, 'X', 10); /* the body was copied */
    tk_evloop_run(c.l);
    CHECK_INT(c.ok, ==, 2);
    /* one of the two bodies is the echo */
    teardown(&c);
    tk_httpd_stop(srv);
}

/* A copied body is sent as it was at start; a borrowed one as it is when sent
 * (no copy is made: what the caller changes before the loop runs goes out). */
TEST(httpm_copies_a_body_unless_borrowed)
{
    start_server();
    char u[256];
    snprintf(u, sizeof u, "%s/echo", base);
    for (int borrowed = 0; borrowed <= 1; borrowed++) {
        struct ctx c;
        setup(&c, 1);
        char body[] = "hello body";
        tk_httpm_req r = {.url = u,
                          .body = body,
                          .body_len = 10,
                          .body_borrowed = borrowed,
                          .on_done = on_done,
                          .ud = &c};
        CHECK(tk_httpm_start(c.m, &r) != NULL);
        memcpy(body, "HELLO BODY", 10);
        tk_evloop_run(c.l);
        CHECK_INT(c.ok, ==, 1);
        CHECK_INT(c.last_status, ==, 200);
        CHECK_STR(c.body, borrowed ? "HELLO BODY" : "hello body");
        teardown(&c);
    }
    tk_httpd_stop(srv);
}

struct stream_ctx {
    struct ctx *c;
    char seen[8];
    size_t n;
};

static struct stream_ctx streams[200];

static int on_piece(tk_httpm_xfer *x, long status, const char *d, size_t len, void *ud)
{
    struct stream_ctx *s = ud;
    for (size_t i = 0; i < len && s->n < sizeof s->seen - 1; i++)
        s->seen[s->n++] = d[i];
    return 0;
}

static void on_stream_done(tk_httpm_xfer *x, const tk_httpm_result *r, void *ud)
{
    struct stream_ctx *s = ud;
    on_done(x, r, s->c);
}

TEST(httpm_runs_many_streams_on_one_thread)
{
    start_server();
    struct ctx c;
    int n = 60;
    setup(&c, n);
    char url[256];
    snprintf(url, sizeof url, "%s/slow", base);
    for (int i = 0; i < n; i++) {
        streams[i] = (struct stream_ctx){.c = &c};
        tk_httpm_req r = {
            .url = url, .on_data = on_piece, .on_done = on_stream_done, .ud = &streams[i]};
        CHECK(tk_httpm_start(c.m, &r) != NULL);
    }
    CHECK_INT(tk_httpm_active(c.m), ==, n);
    tk_evloop_run(c.l);
    CHECK_INT(c.ok, ==, n);
    for (int i = 0; i < n; i++)
        CHECK_STR(streams[i].seen, "abcde");
    teardown(&c);
    tk_httpd_stop(srv);
}

/* Cancelling from inside the transfer's own data callback: no on_done, no leak,
 * and the loop goes on to finish another transfer. */
static int cancel_in_piece(tk_httpm_xfer *x, long status, const char *d, size_t len, void *ud)
{
    struct ctx *c = ud;
    c->got += len;
    tk_httpm_cancel(x);
    return 0;
}

TEST(httpm_cancel_inside_own_callback)
{
    start_server();
    struct ctx c;
    setup(&c, 1);
    char u1[256], u2[256];
    snprintf(u1, sizeof u1, "%s/slow", base);
    snprintf(u2, sizeof u2, "%s/json", base);
    tk_httpm_req r1 = {.url = u1, .on_data = cancel_in_piece, .on_done = on_done, .ud = &c};
    tk_httpm_start(c.m, &r1);
    /* the loop stops on the first on_done: it must be the other transfer's */
    tk_httpm_req r2 = {.url = u2, .on_done = on_done, .ud = &c};
    tk_httpm_start(c.m, &r2);
    tk_ev_timer_add(c.l, 5000, watchdog, &c);
    tk_evloop_run(c.l);
    CHECK_INT(c.done, ==, 1);
    CHECK_INT(c.ok, ==, 1);
    CHECK_STR(c.body, "{\"ok\":true}");
    /* let the cancelled stream's data arrive and be refused */
    CHECK_INT(tk_httpm_active(c.m), <=, 1);
    teardown(&c);
    tk_httpd_stop(srv);
}

static void cancel_timer(tk_ev_timer *t, void *ud)
{
    struct ctx *c = ud;
    tk_ev_timer_del(t);
    tk_httpm_cancel(c->x);
    CHECK_INT(tk_httpm_active(c->m), ==, 0);
    tk_evloop_stop(c->l);
}

TEST(httpm_cancel_from_a_timer_frees_at_once)
{
    start_server();
    struct ctx c;
    setup(&c, 99);
    char url[256];
    snprintf(url, sizeof url, "%s/hang", base);
    tk_httpm_req r = {.url = url, .on_data = on_piece, .on_done = on_done, .ud = &c};
    c.x = tk_httpm_start(c.m, &r);
    tk_ev_timer_add(c.l, 50, cancel_timer, &c);
    tk_evloop_run(c.l);
    CHECK_INT(c.done, ==, 0);
    teardown(&c);
    tk_httpd_stop(srv);
}

TEST(httpm_idle_timeout_ends_a_silent_stream)
{
    start_server();
    struct ctx c;
    setup(&c, 1);
    char url[256];
    snprintf(url, sizeof url, "%s/hang", base);
    struct stream_ctx s = {.c = &c};
    tk_httpm_req r = {.url = url,
                      .idle_timeout_ms = 1000,
                      .on_data = on_piece,
                      .on_done = on_stream_done,
                      .ud = &s};
    tk_httpm_start(c.m, &r);
    tk_ev_timer_add(c.l, 8000, watchdog, &c);
    tk_evloop_run(c.l);
    CHECK_INT(c.done, ==, 1);
    CHECK(c.last_st == TK_ETIMEOUT);
    teardown(&c);
    tk_httpd_stop(srv);
}

TEST(httpm_connection_refused_is_an_error)
{
    struct ctx c;
    setup(&c, 1);
    tk_httpm_req r = {.url = "http://127.0.0.1:1/x", .on_done = on_done, .ud = &c};
    tk_httpm_start(c.m, &r);
    tk_evloop_run(c.l);
    CHECK_INT(c.fail, ==, 1);
    CHECK(c.last_st == TK_ERROR);
    teardown(&c);
}

/* Starting a new transfer from inside a data callback (curl forbids re-entrant
 * adds; the client defers it). */
static char chain_url[256];
static int chain_piece(tk_httpm_xfer *x, long status, const char *d, size_t len, void *ud)
{
    struct ctx *c = ud;
    if (!c->cancel_after) {
        c->cancel_after = 1;
        tk_httpm_req r = {.url = chain_url, .on_done = on_done, .ud = c};
        CHECK(tk_httpm_start(c->m, &r) != NULL);
    }
    return 0;
}

TEST(httpm_start_inside_a_callback)
{
    start_server();
    struct ctx c;
    setup(&c, 2);
    char url[256];
    snprintf(url, sizeof url, "%s/slow", base);
    snprintf(chain_url, sizeof chain_url, "%s/json", base);
    tk_httpm_req r = {.url = url, .on_data = chain_piece, .on_done = on_done, .ud = &c};
    tk_httpm_start(c.m, &r);
    tk_evloop_run(c.l);
    CHECK_INT(c.ok, ==, 2);
    teardown(&c);
    tk_httpd_stop(srv);
}

static int stop_piece(tk_httpm_xfer *x, long status, const char *d, size_t len, void *ud)
{
    return 1;
}

TEST(httpm_receiver_can_stop_a_stream)
{
    start_server();
    struct ctx c;
    setup(&c, 1);
    char url[256];
    snprintf(url, sizeof url, "%s/slow", base);
    tk_httpm_req r = {.url = url, .on_data = stop_piece, .on_done = on_done, .ud = &c};
    tk_httpm_start(c.m, &r);
    tk_evloop_run(c.l);
    CHECK(c.last_st == TK_AGAIN);
    teardown(&c);
    tk_httpd_stop(srv);
}

TEST_MAIN()
