/* lib/httpd's WebSockets over real sockets: the handshake and its refusals,
 * echo of text and binary, fragments, ping/pong, both close handshakes, the
 * caps (1009), unmasked client frames (1002), a slow reader dropped, the
 * server's idle deadlines not applying, a silent peer dropped by the pings,
 * and tk_httpd_stop closing what is open (1001). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/httpd.h"
#include "lib/log.h"
#include "lib/tktime.h"
#include "lib/ws.h"
#include "tk_test.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int closed_code = -1;
static tk_httpd_ws *last_ws;

static void on_msg(tk_httpd_ws *ws, int op, const char *d, size_t len, void *ud)
{
    if (len == 5 && memcmp(d, "close", 5) == 0) {
        tk_httpd_ws_close(ws, 4000, "asked");
        return;
    }
    if (len == 5 && memcmp(d, "flood", 5) == 0) {
        /* more than max_queue for a peer that does not read */
        static char big[32768];
        for (int i = 0; i < 64; i++)
            if (tk_httpd_ws_send(ws, TK_WS_BINARY, big, sizeof big) != TK_OK)
                break;
        return;
    }
    tk_httpd_ws_send(ws, op, d, len);
}

static void on_close(tk_httpd_ws *ws, int code, void *ud)
{
    pthread_mutex_lock(&mu);
    closed_code = code;
    pthread_mutex_unlock(&mu);
}

static unsigned ping_s;

static void h_ws(tk_req *r, void *ud)
{
    tk_httpd_ws_config c = {.max_frame = 1000,
                            .max_message = 3000,
                            .max_queue = 100000,
                            .ping_s = ping_s,
                            .on_message = on_msg,
                            .on_close = on_close};
    tk_httpd_ws *ws = tk_httpd_ws_accept(r, &c);
    if (ws) {
        pthread_mutex_lock(&mu);
        if (last_ws)
            tk_httpd_ws_unref(last_ws);
        last_ws = ws;
        pthread_mutex_unlock(&mu);
    }
}

static tk_route routes[] = {{"GET", "/ws", h_ws, NULL, TK_ROUTE_PUBLIC}};
static tk_httpd *srv;

static void start(unsigned timeout_s, int64_t header_ms)
{
    tk_log_set_level(TK_LOG_ERROR);
    char err[256];
    tk_httpd_config c = {.listen = "127.0.0.1:0",
                         .name = "t",
                         .timeout_s = timeout_s,
                         .header_timeout_ms = header_ms};
    srv = tk_httpd_start(&c, routes, TK_ARRAY_LEN(routes), err, sizeof err);
    if (!srv)
        TK_TEST_FAIL("start: %s", err);
}

static int dial(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)tk_httpd_port(srv))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        TK_TEST_FAIL("connect");
    struct timeval tv = {.tv_sec = 8};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

/* Sends a request; reads the response head into out. */
static void exchange(int fd, const char *req, char *out, size_t outlen)
{
    if (write(fd, req, strlen(req)) != (ssize_t)strlen(req))
        TK_TEST_FAIL("write");
    size_t n = 0;
    out[0] = '\0';
    while (n + 1 < outlen && !strstr(out, "\r\n\r\n")) {
        ssize_t r = read(fd, out + n, 1);
        if (r <= 0)
            break;
        n++;
        out[n] = '\0';
    }
}

#define KEY "dGhlIHNhbXBsZSBub25jZQ=="

static int open_ws(void)
{
    int fd = dial();
    char head[2048];
    exchange(fd,
             "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: keep-alive, "
             "Upgrade\r\nSec-WebSocket-Key: " KEY "\r\nSec-WebSocket-Version: 13\r\n\r\n",
             head, sizeof head);
    if (!strstr(head, "HTTP/1.1 101") || !strcasestr(head, "upgrade: websocket") ||
        !strstr(head, "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="))
        TK_TEST_FAIL("no 101: %s", head);
    return fd;
}

static void send_frame(int fd, int fin, int op, const void *data, size_t len, int masked)
{
    unsigned char key[4] = {1, 2, 3, 4}, hdr[TK_WS_MAX_HEADER];
    size_t hn = tk_ws_header(hdr, fin, op, len, masked ? key : NULL);
    char *buf = malloc(hn + len + 1);
    memcpy(buf, hdr, hn);
    memcpy(buf + hn, data, len);
    if (masked)
        tk_ws_mask(buf + hn, len, key, 0);
    if (write(fd, buf, hn + len) != (ssize_t)(hn + len))
        TK_TEST_FAIL("write frame");
    free(buf);
}

static int read_n(int fd, unsigned char *p, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, p + got, n - got);
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

/* One server frame: its opcode (-1 when the socket ended), payload in buf. */
static int read_frame(int fd, char *buf, size_t cap, size_t *len)
{
    unsigned char h[10];
    if (read_n(fd, h, 2) != 0)
        return -1;
    if (h[1] & 0x80)
        TK_TEST_FAIL("a server frame was masked");
    uint64_t n = h[1] & 0x7f;
    if (n == 126) {
        read_n(fd, h + 2, 2);
        n = ((uint64_t)h[2] << 8) | h[3];
    } else if (n == 127) {
        read_n(fd, h + 2, 8);
        n = 0;
        for (int i = 2; i < 10; i++)
            n = (n << 8) | h[i];
    }
    if (n > cap)
        TK_TEST_FAIL("frame of %llu bytes", (unsigned long long)n);
    if (read_n(fd, (unsigned char *)buf, (size_t)n) != 0)
        return -1;
    *len = (size_t)n;
    return h[0] & 0x0f;
}

static int close_code_of(const char *p, size_t n)
{
    return n >= 2 ? (((unsigned char)p[0] << 8) | (unsigned char)p[1]) : 0;
}

static int wait_closed(int want)
{
    for (int i = 0; i < 200; i++) {
        pthread_mutex_lock(&mu);
        int c = closed_code;
        pthread_mutex_unlock(&mu);
        if (c == want)
            return 1;
        tk_sleep_ms(20);
    }
    return 0;
}

static int socket_ended(int fd)
{
    char b[64];
    ssize_t r;
    while ((r = read(fd, b, sizeof b)) > 0) {
    }
    return r == 0;
}

TEST(httpd_ws_handshake_echo_and_client_close)
{
    start(0, 0);
    int fd = open_ws();
    char buf[4096];
    size_t n;
    send_frame(fd, 1, TK_WS_TEXT, "hello", 5, 1);
    CHECK_INT(read_frame(fd, buf, sizeof buf, &n), ==, TK_WS_TEXT);
    CHECK_MEM(buf, "hello", 5);
    CHECK_INT(n, ==, 5);
    /* a binary message in three fragments, a ping between them */
    send_frame(fd, 0, TK_WS_BINARY, "ab", 2, 1);
    send_frame(fd, 1, TK_WS_PING, "pp", 2, 1);
    send_frame(fd, 0, TK_WS_CONT, "\0c", 2, 1);
    send_frame(fd, 1, TK_WS_CONT, "d", 1, 1);
    CHECK_INT(read_frame(fd, buf, sizeof buf, &n), ==, TK_WS_PONG);
    CHECK_MEM(buf, "pp", 2);
    CHECK_INT(read_frame(fd, buf, sizeof buf, &n), ==, TK_WS_BINARY);
    CHECK_INT(n, ==, 5);
    CHECK_MEM(buf, "ab\0cd", 5);
    /* 2000 bytes in frames of 1000: within the message cap */
    char big[1000];
    memset(big, 'x', sizeof big);
    send_frame(fd, 0, TK_WS_TEXT, big, 1000, 1);
    send_frame(fd, 1, TK_WS_CONT, big, 1000, 1);
    CHECK_INT(read_frame(fd, buf, sizeof buf, &n), ==, TK_WS_TEXT);
    CHECK_INT(n, ==, 2000);
    CHECK_INT(tk_httpd_ws_count(srv), ==, 1);
    /* the client closes: the code is echoed, the socket ends */
    char pl[125];
    size_t pn = tk_ws_close_payload(pl, 1000, "bye");
    send_frame(fd, 1, TK_WS_CLOSE, pl, pn, 1);
    CHECK_INT(read_frame(fd, buf, sizeof buf, &n), ==, TK_WS_CLOSE);
    CHECK_INT(close_code_of(buf, n), ==, 1000);
    CHECK(socket_ended(fd));
    CHECK(wait_closed(1000));
    for (int i = 0; i < 100 && tk_httpd_connection_count(srv) > 0; i++)
        tk_sleep_ms(20);
    CHECK_INT(tk_httpd_connection_count(srv), ==, 0);
    CHECK_INT(tk_httpd_ws_count(srv), ==, 0);
    close(fd);
    tk_httpd_stop(srv);
}

TEST(httpd_ws_refusals_before_the_upgrade)
{
    start(0, 0);
    struct {
        const char *req, *status, *also;
    } cases[] = {
        {"GET /ws HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 400", "WEBSOCKET_REQUIRED"},
        {"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nSec-WebSocket-Key: " KEY
         "\r\nSec-WebSocket-Version: 13\r\n\r\n",
         "HTTP/1.1 400", "WEBSOCKET_REQUIRED"},
        {"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Key: " KEY "\r\nSec-WebSocket-Version: 8\r\n\r\n",
         "HTTP/1.1 426", "Sec-WebSocket-Version: 13"},
        {"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Key: " KEY "\r\n\r\n",
         "HTTP/1.1 426", "Sec-WebSocket-Version: 13"},
        {"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Key: c2hvcnQ=\r\nSec-WebSocket-Version: 13\r\n\r\n",
         "HTTP/1.1 400", "WEBSOCKET_KEY"},
    };
    for (size_t i = 0; i < TK_ARRAY_LEN(cases); i++) {
        int fd = dial();
        char head[4096];
        exchange(fd, cases[i].req, head, sizeof head);
        /* the body follows the head: read a little more for the code */
        ssize_t r = read(fd, head + strlen(head), sizeof head - strlen(head) - 1);
        if (r > 0)
            head[strlen(head) + (size_t)r] = '\0';
        if (!strstr(head, cases[i].status) || !strstr(head, cases[i].also))
            TK_TEST_FAIL("case %zu: %s", i, head);
        close(fd);
    }
    CHECK_INT(tk_httpd_ws_count(srv), ==, 0);
    tk_httpd_stop(srv);
}

static void expect_close(int fd, int code)
{
    static char buf[70000];
    size_t n;
    int op;
    while ((op = read_frame(fd, buf, sizeof buf, &n)) != TK_WS_CLOSE)
        if (op < 0)
            TK_TEST_FAIL("the socket ended without a close frame (wanted %d)", code);
    CHECK_INT(close_code_of(buf, n), ==, code);
    /* the echo (the server may have gone already) */
    unsigned char echo[8] = {0x88, 0x82, 0, 0, 0, 0, (unsigned char)buf[0], (unsigned char)buf[1]};
    if (send(fd, echo, sizeof echo, MSG_NOSIGNAL) < 0) {
    }
    CHECK(socket_ended(fd));
    close(fd);
}

TEST(httpd_ws_caps_and_protocol_errors)
{
    start(0, 0);
    char big[3001];
    memset(big, 'y', sizeof big);
    /* a frame over max_frame */
    int fd = open_ws();
    send_frame(fd, 1, TK_WS_TEXT, big, 1001, 1);
    expect_close(fd, 1009);
    CHECK(wait_closed(1009));
    /* a message over max_message, in frames within max_frame */
    fd = open_ws();
    for (int i = 0; i < 3; i++)
        send_frame(fd, 0, i ? TK_WS_CONT : TK_WS_TEXT, big, 1000, 1);
    send_frame(fd, 1, TK_WS_CONT, big, 1, 1);
    expect_close(fd, 1009);
    /* an unmasked client frame */
    fd = open_ws();
    send_frame(fd, 1, TK_WS_TEXT, "plain", 5, 0);
    expect_close(fd, 1002);
    CHECK(wait_closed(1002));
    /* text that is not UTF-8 */
    fd = open_ws();
    send_frame(fd, 1, TK_WS_TEXT, "\xff\xfe", 2, 1);
    expect_close(fd, 1007);
    tk_httpd_stop(srv);
}

TEST(httpd_ws_server_close_and_a_slow_reader)
{
    start(0, 0);
    int fd = open_ws();
    send_frame(fd, 1, TK_WS_TEXT, "close", 5, 1);
    char buf[4096];
    size_t n;
    CHECK_INT(read_frame(fd, buf, sizeof buf, &n), ==, TK_WS_CLOSE);
    CHECK_INT(close_code_of(buf, n), ==, 4000);
    CHECK_MEM(buf + 2, "asked", 5);
    /* the server waits for the echo */
    tk_sleep_ms(100);
    CHECK_INT(tk_httpd_ws_count(srv), ==, 1);
    char pl[2] = {(char)(4000 >> 8), (char)(4000 & 0xff)};
    send_frame(fd, 1, TK_WS_CLOSE, pl, 2, 1);
    CHECK(socket_ended(fd));
    CHECK(wait_closed(4000));
    close(fd);
    /* a peer that does not read while 2 MiB is sent to it: dropped with 1008
     * (queued frames are never more than max_queue) */
    fd = open_ws();
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    send_frame(fd, 1, TK_WS_TEXT, "flood", 5, 1);
    tk_sleep_ms(300);
    expect_close(fd, 1008);
    tk_httpd_stop(srv);
}

TEST(httpd_ws_outlives_the_idle_deadlines_and_pings_a_silent_peer)
{
    /* idle 1 s, headers 300 ms: neither applies to a WebSocket */
    ping_s = 1;
    start(1, 300);
    int fd = open_ws();
    char buf[4096];
    size_t n;
    /* a ping within about a second; answered, the connection stays */
    int64_t t0 = tk_mono_ms();
    CHECK_INT(read_frame(fd, buf, sizeof buf, &n), ==, TK_WS_PING);
    CHECK_INT(tk_mono_ms() - t0, <, 2500);
    send_frame(fd, 1, TK_WS_PONG, "", 0, 1);
    CHECK_INT(read_frame(fd, buf, sizeof buf, &n), ==, TK_WS_PING);
    send_frame(fd, 1, TK_WS_PONG, "", 0, 1);
    send_frame(fd, 1, TK_WS_TEXT, "still", 5, 1);
    CHECK_INT(read_frame(fd, buf, sizeof buf, &n), ==, TK_WS_TEXT);
    CHECK_MEM(buf, "still", 5);
    CHECK_INT(tk_mono_ms() - t0, >, 1500);
    /* now silent: dropped after twice the ping interval */
    int op;
    while ((op = read_frame(fd, buf, sizeof buf, &n)) == TK_WS_PING) {
    }
    CHECK_INT(op, ==, -1);
    CHECK(wait_closed(1006));
    close(fd);
    tk_httpd_stop(srv);
}

TEST(httpd_ws_stop_closes_open_sockets)
{
    start(0, 0);
    int fd = open_ws();
    int fd2 = open_ws();
    CHECK_INT(tk_httpd_ws_count(srv), ==, 2);
    int64_t t0 = tk_mono_ms();
    tk_httpd_stop(srv); /* waits for the echo at most 5 s */
    char buf[4096];
    size_t n;
    CHECK_INT(read_frame(fd, buf, sizeof buf, &n), ==, TK_WS_CLOSE);
    CHECK_INT(close_code_of(buf, n), ==, 1001);
    CHECK(socket_ended(fd));
    CHECK(socket_ended(fd2));
    CHECK_INT(tk_mono_ms() - t0, <, 9000);
    pthread_mutex_lock(&mu);
    CHECK(tk_httpd_ws_send(last_ws, TK_WS_TEXT, "x", 1) == TK_ECLOSED);
    pthread_mutex_unlock(&mu);
    close(fd);
    close(fd2);
}

TEST_MAIN()
