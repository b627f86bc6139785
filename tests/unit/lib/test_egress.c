/*
 * test_egress — the checked forward proxy (lib/egress.c) over real loopback
 * sockets: a page server and an echo server the policy admits by host:port,
 * trap listeners on loopback that refused targets point at (a connection
 * reaching one would sit in its accept queue: a non-blocking accept proves
 * none arrived), and the policy's connect hook, which sees every connect() the
 * proxy makes. Private, link-local and metadata targets are never connected to:
 * the hook proves it without a packet leaving. Names come from a fake resolver.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "lib/egress.h"
#include "lib/log.h"
#include "lib/tktime.h"
#include "tk_test.h"

/* --- sockets --- */

static int listen_on(const char *addr, int *port)
{
    int fam = strchr(addr, ':') ? AF_INET6 : AF_INET;
    int fd = socket(fam, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t sl;
    if (fam == AF_INET) {
        struct sockaddr_in *s = (struct sockaddr_in *)&ss;
        s->sin_family = AF_INET;
        inet_pton(AF_INET, addr, &s->sin_addr);
        sl = sizeof *s;
    } else {
        struct sockaddr_in6 *s = (struct sockaddr_in6 *)&ss;
        s->sin6_family = AF_INET6;
        inet_pton(AF_INET6, addr, &s->sin6_addr);
        sl = sizeof *s;
    }
    if (bind(fd, (struct sockaddr *)&ss, sl) != 0 || listen(fd, 64) != 0) {
        close(fd);
        return -1;
    }
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    *port = fam == AF_INET ? ntohs(((struct sockaddr_in *)&ss)->sin_port)
                           : ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return fd;
}

static int connect_lo(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

static void send_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w <= 0)
            return;
        c += w;
        n -= (size_t)w;
    }
}

/* Reads until EOF (or the receive timeout); NUL-terminated. */
static char *read_all(int fd, size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    for (;;) {
        if (n == cap) {
            cap *= 2;
            b = realloc(b, cap + 1);
        }
        ssize_t r = recv(fd, b + n, cap - n, 0);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    b[n] = '\0';
    if (len)
        *len = n;
    return b;
}

/* Reads until "\r\n\r\n" (the head of an answer); NUL-terminated. */
static void read_head(int fd, char *out, size_t cap)
{
    size_t n = 0;
    while (n + 1 < cap) {
        ssize_t r = recv(fd, out + n, 1, 0);
        if (r <= 0)
            break;
        n++;
        if (n >= 4 && memcmp(out + n - 4, "\r\n\r\n", 4) == 0)
            break;
    }
    out[n] = '\0';
}

/* 1 when a connection is waiting in the trap's accept queue. */
static int trap_hit(int trap)
{
    struct pollfd pf = {trap, POLLIN, 0};
    return poll(&pf, 1, 100) > 0;
}

/* --- the page server: one request per connection --- */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_last_req[8192];
static atomic_int g_served;

static void *page_server(void *arg)
{
    int lfd = (int)(intptr_t)arg;
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0)
            return NULL;
        char req[8192];
        size_t n = 0;
        char *end = NULL;
        while (n + 1 < sizeof req && !end) {
            ssize_t r = recv(fd, req + n, sizeof req - 1 - n, 0);
            if (r <= 0)
                break;
            n += (size_t)r;
            req[n] = '\0';
            end = strstr(req, "\r\n\r\n");
        }
        if (end) {
            const char *cl = strcasestr(req, "\r\nContent-Length:");
            size_t want = cl ? strtoul(cl + 17, NULL, 10) : 0;
            size_t have = n - (size_t)(end + 4 - req);
            while (have < want && n + 1 < sizeof req) {
                ssize_t r = recv(fd, req + n, sizeof req - 1 - n, 0);
                if (r <= 0)
                    break;
                n += (size_t)r;
                have += (size_t)r;
            }
            req[n] = '\0';
        }
        pthread_mutex_lock(&g_mu);
        memcpy(g_last_req, req, n + 1);
        pthread_mutex_unlock(&g_mu);
        size_t body = strstr(req, " /big ") ? 100000 : 5;
        char head[256];
        int hl =
            snprintf(head, sizeof head,
                     "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", body);
        send_all(fd, head, (size_t)hl);
        char *b = malloc(body);
        memset(b, 'x', body);
        if (body == 5)
            memcpy(b, "hello", 5);
        send_all(fd, b, body);
        free(b);
        atomic_fetch_add(&g_served, 1);
        close(fd);
    }
}

static void *echo_server(void *arg)
{
    int lfd = (int)(intptr_t)arg;
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0)
            return NULL;
        char b[16384];
        ssize_t r;
        while ((r = recv(fd, b, sizeof b, 0)) > 0)
            send_all(fd, b, (size_t)r);
        close(fd);
    }
}

/* --- the fixture --- */

static atomic_int g_connects; /* every connect() the proxy made */

static int on_connect(void *ud, const tk_ip *ip, int port)
{
    (void)ud;
    (void)ip;
    (void)port;
    atomic_fetch_add(&g_connects, 1);
    return 0;
}

static tk_status fake_resolve(void *ud, const char *host, tk_ip *addrs, size_t max, size_t *n,
                              char *err, size_t errlen)
{
    (void)ud;
    (void)max;
    static const struct {
        const char *name, *addr;
    } names[] = {
        {"pages.test", "127.0.0.1"},   /* allowed only on the page server's port */
        {"rebind.test", "127.0.0.1"},  /* the trap's port is not allowed for it */
        {"internal.test", "10.0.0.5"}, /* private */
        {"metadata.test", "169.254.169.254"},
        {"mixed.test", "93.184.215.14"}, /* and a private one below */
    };
    *n = 0;
    for (size_t i = 0; i < TK_ARRAY_LEN(names); i++) {
        if (strcmp(host, names[i].name) == 0) {
            tk_ip_parse(names[i].addr, &addrs[(*n)++]);
            if (strcmp(host, "mixed.test") == 0)
                tk_ip_parse("192.168.1.7", &addrs[(*n)++]);
            return TK_OK;
        }
    }
    snprintf(err, errlen, "no such name");
    return TK_ENOENT;
}

static int g_log_per_sec; /* the fixture's EGRESS_LOG_PER_SEC (0: the default) */

typedef struct {
    tk_ssrf_policy pol;
    tk_egress *e;
    tk_egress_listener *l;
    int proxy_port, page_port, echo_port, trap_port, trap, trap6, trap6_port;
} fixture;

static void fixture_start(fixture *f, const tk_egress_caps *caps, int64_t head_ms)
{
    memset(f, 0, sizeof *f);
    tk_log_set_level(TK_LOG_ERROR);
    int page = listen_on("127.0.0.1", &f->page_port);
    int echo = listen_on("127.0.0.1", &f->echo_port);
    f->trap = listen_on("127.0.0.1", &f->trap_port);
    f->trap6 = listen_on("::1", &f->trap6_port); /* -1 without IPv6 loopback */
    CHECK(page >= 0 && echo >= 0 && f->trap >= 0);
    pthread_t th;
    pthread_create(&th, NULL, page_server, (void *)(intptr_t)page);
    pthread_detach(th);
    pthread_create(&th, NULL, echo_server, (void *)(intptr_t)echo);
    pthread_detach(th);

    tk_ssrf_policy_init(&f->pol);
    f->pol.allow_setting = "EGRESS_ALLOW";
    char list[256], err[256];
    snprintf(list, sizeof list, "127.0.0.1:%d 127.0.0.1:%d pages.test:%d", f->page_port,
             f->echo_port, f->page_port);
    CHECK_INT(tk_ssrf_policy_allow(&f->pol, list, err, sizeof err), ==, TK_OK);
    /* the trap's port is allowed as a port: what refuses it is the address rule */
    snprintf(list, sizeof list, "%d,%d", f->trap_port, f->trap6 >= 0 ? f->trap6_port : 1);
    CHECK_INT(tk_ssrf_policy_allow_ports(&f->pol, list, err, sizeof err), ==, TK_OK);
    f->pol.resolve = fake_resolve;
    f->pol.on_connect = on_connect;
    f->pol.timeout_ms = 2000;

    tk_egress_config cfg = {
        .policy = &f->pol, .head_timeout_ms = head_ms, .log_per_sec = g_log_per_sec};
    f->e = tk_egress_start(&cfg, err, sizeof err);
    CHECK(f->e);
    int lfd = listen_on("127.0.0.1", &f->proxy_port);
    CHECK(lfd >= 0);
    f->l = tk_egress_add_listener(f->e, lfd, "test", caps);
    CHECK(f->l);
}

static void fixture_stop(fixture *f)
{
    tk_egress_stop(f->e);
    tk_ssrf_policy_free(&f->pol);
}

/* One request through the proxy; the whole answer. */
static char *through(fixture *f, const char *req, size_t *len)
{
    int fd = connect_lo(f->proxy_port);
    CHECK(fd >= 0);
    send_all(fd, req, strlen(req));
    char *a = read_all(fd, len);
    close(fd);
    return a;
}

/* --- tests --- */

TEST(egress_relays_absolute_form_http)
{
    fixture f;
    fixture_start(&f, NULL, 0);
    char req[512];
    snprintf(req, sizeof req,
             "GET http://127.0.0.1:%d/hello?x=1 HTTP/1.1\r\nHost: elsewhere.test\r\n"
             "Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic eA==\r\nX-Test: 1\r\n\r\n",
             f.page_port);
    char *a = through(&f, req, NULL);
    CHECK(strncmp(a, "HTTP/1.1 200 OK\r\n", 17) == 0);
    CHECK(strstr(a, "\r\n\r\nhello"));
    free(a);
    pthread_mutex_lock(&g_mu);
    char host[64];
    snprintf(host, sizeof host, "\r\nHost: 127.0.0.1:%d\r\n", f.page_port);
    CHECK(strncmp(g_last_req, "GET /hello?x=1 HTTP/1.1\r\n", 25) == 0);
    CHECK(strstr(g_last_req, host));
    CHECK(strstr(g_last_req, "\r\nX-Test: 1\r\n"));
    CHECK(strstr(g_last_req, "\r\nConnection: close\r\n"));
    CHECK(!strcasestr(g_last_req, "proxy-"));
    CHECK(!strstr(g_last_req, "elsewhere"));
    pthread_mutex_unlock(&g_mu);

    /* a body with Content-Length; and the same server by an allowed name */
    snprintf(req, sizeof req,
             "POST http://pages.test:%d/form HTTP/1.1\r\nContent-Length: 11\r\n\r\nhello=world",
             f.page_port);
    a = through(&f, req, NULL);
    CHECK(strstr(a, "200 OK"));
    free(a);
    pthread_mutex_lock(&g_mu);
    CHECK(strncmp(g_last_req, "POST /form HTTP/1.1\r\n", 21) == 0);
    CHECK(strstr(g_last_req, "\r\n\r\nhello=world"));
    pthread_mutex_unlock(&g_mu);

    tk_egress_stats st;
    tk_egress_listener_stats(f.e, f.l, &st);
    CHECK_INT(st.relayed, ==, 2);
    CHECK_INT(st.refused, ==, 0);
    CHECK_INT(atomic_load(&g_connects), ==, 2);
    fixture_stop(&f);
}

TEST(egress_relays_connect_tunnels_both_ways)
{
    fixture f;
    fixture_start(&f, NULL, 0);
    int fd = connect_lo(f.proxy_port);
    char req[256];
    /* the first bytes of the tunnel come with the request, as TLS clients do */
    snprintf(req, sizeof req, "CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\nping",
             f.echo_port, f.echo_port);
    send_all(fd, req, strlen(req));
    char head[512];
    read_head(fd, head, sizeof head);
    CHECK_STR(head, "HTTP/1.1 200 Connection established\r\n\r\n");
    char b[4];
    CHECK_INT(recv(fd, b, 4, MSG_WAITALL), ==, 4);
    CHECK(memcmp(b, "ping", 4) == 0);
    /* 4 MB each way: more than the buffers hold, so back-pressure works */
    size_t big = 4u << 20, got = 0;
    char *out = malloc(big), *in = malloc(big);
    for (size_t i = 0; i < big; i++)
        out[i] = (char)(i * 7 + 3);
    /* one thread: interleave sends and receives */
    size_t sent = 0;
    while (got < big) {
        if (sent < big) {
            ssize_t w = send(fd, out + sent, big - sent > 65536 ? 65536 : big - sent,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w > 0)
                sent += (size_t)w;
        }
        ssize_t r = recv(fd, in + got, big - got, MSG_DONTWAIT);
        if (r > 0)
            got += (size_t)r;
        else if (r == 0)
            break;
        else if (sent == big)
            poll(&(struct pollfd){fd, POLLIN, 0}, 1, 1000);
    }
    CHECK_INT(got, ==, big);
    CHECK(memcmp(in, out, big) == 0);
    /* the client ends its side: the echo server sees EOF, ends, we see EOF */
    shutdown(fd, SHUT_WR);
    CHECK_INT(recv(fd, b, 1, 0), ==, 0);
    close(fd);
    free(out);
    free(in);
    tk_egress_stats st;
    tk_egress_listener_stats(f.e, f.l, &st);
    CHECK_INT(st.relayed, ==, 1);
    CHECK(st.bytes >= 2 * big);
    fixture_stop(&f);
}

/* Every refused target: answered 403 with the code, no connect() made (the
 * hook saw none), and the loopback traps saw no connection. */
TEST(egress_refuses_loopback_private_link_local_metadata)
{
    fixture f;
    fixture_start(&f, NULL, 0);
    char t[64], t6[64];
    snprintf(t, sizeof t, "%d", f.trap_port);
    snprintf(t6, sizeof t6, "%d", f.trap6 >= 0 ? f.trap6_port : 1);
    struct {
        const char *fmt; /* %s: the trap's port */
        const char *code;
        const char *why;
    } cases[] = {
        {"GET http://127.0.0.1:%s/ HTTP/1.1\r\n\r\n", "blocked_address", "loopback"},
        {"CONNECT 127.0.0.1:%s HTTP/1.1\r\n\r\n", "blocked_address", "loopback"},
        {"CONNECT 127.0.0.2:%s HTTP/1.1\r\n\r\n", "blocked_address", "loopback"},
        {"GET http://[::1]:%s/ HTTP/1.1\r\n\r\n", "blocked_address", "loopback (::1/128)"},
        {"CONNECT [::ffff:127.0.0.1]:%s HTTP/1.1\r\n\r\n", "blocked_address", "IPv4-mapped"},
        {"CONNECT 0.0.0.0:%s HTTP/1.1\r\n\r\n", "blocked_address", "unspecified"},
        {"GET http://2130706433:%s/ HTTP/1.1\r\n\r\n", "blocked_address", "loopback"},
        {"GET http://rebind.test:%s/ HTTP/1.1\r\n\r\n", "blocked_address",
         "rebind.test resolves to 127.0.0.1, which is loopback"},
        {"CONNECT rebind.test:%s HTTP/1.1\r\n\r\n", "blocked_address", "loopback"},
        {"GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\n\r\n", "blocked_address",
         "cloud metadata"},
        {"CONNECT 169.254.169.254:443 HTTP/1.1\r\n\r\n", "blocked_address", "cloud metadata"},
        {"CONNECT metadata.test:80 HTTP/1.1\r\n\r\n", "blocked_address", "169.254.169.254"},
        {"CONNECT 169.254.1.1:443 HTTP/1.1\r\n\r\n", "blocked_address", "link-local"},
        {"CONNECT [fe80::1]:443 HTTP/1.1\r\n\r\n", "blocked_address", "link-local"},
        {"CONNECT 10.0.0.5:443 HTTP/1.1\r\n\r\n", "blocked_address", "private"},
        {"GET http://192.168.1.1/ HTTP/1.1\r\n\r\n", "blocked_address", "private"},
        {"CONNECT 172.16.0.1:443 HTTP/1.1\r\n\r\n", "blocked_address", "private"},
        {"CONNECT [fd00::1]:443 HTTP/1.1\r\n\r\n", "blocked_address", "unique-local"},
        {"CONNECT internal.test:443 HTTP/1.1\r\n\r\n", "blocked_address",
         "internal.test resolves to 10.0.0.5"},
        {"CONNECT mixed.test:443 HTTP/1.1\r\n\r\n", "blocked_address", "192.168.1.7"},
        {"CONNECT 100.100.100.200:80 HTTP/1.1\r\n\r\n", "blocked_address", "Alibaba"},
        {"CONNECT 93.184.215.14:25 HTTP/1.1\r\n\r\n", "bad_port", "port 25 is not allowed"},
        {"CONNECT nosuch.test:443 HTTP/1.1\r\n\r\n", "dns_failed", "could not be resolved"},
        {"GET http://user:pw@pages.test/ HTTP/1.1\r\n\r\n", "userinfo", NULL},
        {"GET https://127.0.0.1:%s/ HTTP/1.1\r\n\r\n", "not_served", "use CONNECT"},
        {"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "not_served", "absolute-form"},
        {"GET ftp://127.0.0.1:%s/ HTTP/1.1\r\n\r\n", "not_served", NULL},
        {"CONNECT 127.0.0.1 HTTP/1.1\r\n\r\n", "bad_request", "host:port"},
        {"CONNECT a/b:443 HTTP/1.1\r\n\r\n", "bad_request", "host:port"},
        {"GET http://127.0.0.1:%s/ HTTP/1.1\r\nBad Header\r\n\r\n", "bad_request", NULL},
        {"GET http://127.0.0.1:%s/ HTTP/1.1\r\nX: a\r\n b\r\n\r\n", "bad_request", "folded"},
        {"POST http://127.0.0.1:%s/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
         "length_required", NULL},
        {"GET http://127.0.0.1:%s/ HTTP/2.0\r\n\r\n", "bad_request", NULL},
    };
    for (size_t i = 0; i < TK_ARRAY_LEN(cases); i++) {
        if (strstr(cases[i].fmt, "::1") && f.trap6 < 0)
            continue;
        char req[512];
        snprintf(req, sizeof req, cases[i].fmt, strstr(cases[i].fmt, "[::1]") ? t6 : t);
        char *a = through(&f, req, NULL);
        char want[96];
        snprintf(want, sizeof want, "\r\nX-Tusko-Egress: %s\r\n", cases[i].code);
        if (!strstr(a, want))
            TK_TEST_FAIL("%s: answer \"%.300s\" lacks %s", req, a, cases[i].code);
        if (strcmp(cases[i].code, "blocked_address") == 0 ||
            strcmp(cases[i].code, "bad_port") == 0 || strcmp(cases[i].code, "userinfo") == 0)
            CHECK(strncmp(a, "HTTP/1.1 403 Forbidden\r\n", 24) == 0);
        if (cases[i].why && !strstr(a, cases[i].why))
            TK_TEST_FAIL("%s: answer \"%.300s\" lacks \"%s\"", req, a, cases[i].why);
        free(a);
        if (atomic_load(&g_connects) != 0)
            TK_TEST_FAIL("%s: the proxy made a connect()", req);
        if (trap_hit(f.trap) || (f.trap6 >= 0 && trap_hit(f.trap6)))
            TK_TEST_FAIL("%s: a connection reached the trap", req);
    }
    tk_egress_stats st;
    tk_egress_listener_stats(f.e, f.l, &st);
    CHECK_INT(st.relayed, ==, 0);
    CHECK(st.refused >= 30);
    CHECK(st.last_refusal[0]);
    /* the allowed port of the same address still works: the refusals were the rules */
    char req[256];
    snprintf(req, sizeof req, "GET http://127.0.0.1:%d/ HTTP/1.1\r\n\r\n", f.page_port);
    char *a = through(&f, req, NULL);
    CHECK(strstr(a, "200 OK"));
    free(a);
    fixture_stop(&f);
}

TEST(egress_denylist_wins_over_the_allowlist)
{
    fixture f;
    fixture_start(&f, NULL, 0);
    char d[64], err[256];
    snprintf(d, sizeof d, "127.0.0.1:%d", f.page_port);
    CHECK_INT(tk_ssrf_policy_deny(&f.pol, d, err, sizeof err), ==, TK_OK);
    char req[256];
    snprintf(req, sizeof req, "GET http://127.0.0.1:%d/ HTTP/1.1\r\n\r\n", f.page_port);
    char *a = through(&f, req, NULL);
    CHECK(strstr(a, "403 Forbidden"));
    CHECK(strstr(a, "X-Tusko-Egress: denied_host"));
    free(a);
    CHECK_INT(atomic_load(&g_served), ==, 0);
    fixture_stop(&f);
}

TEST(egress_connection_cap)
{
    fixture f;
    tk_egress_caps caps = {.max_conns = 2};
    fixture_start(&f, &caps, 0);
    /* two connections held open with half a request head */
    int a = connect_lo(f.proxy_port), b = connect_lo(f.proxy_port);
    send_all(a, "GET http://", 11);
    send_all(b, "GET http://", 11);
    usleep(100 * 1000);
    char req[256];
    snprintf(req, sizeof req, "GET http://127.0.0.1:%d/ HTTP/1.1\r\n\r\n", f.page_port);
    char *r = through(&f, req, NULL);
    CHECK(strstr(r, "403 Forbidden"));
    CHECK(strstr(r, "X-Tusko-Egress: conn_cap"));
    free(r);
    CHECK_INT(atomic_load(&g_served), ==, 0);
    close(a);
    close(b);
    usleep(200 * 1000);
    r = through(&f, req, NULL);
    CHECK(strstr(r, "200 OK"));
    free(r);
    fixture_stop(&f);
}

TEST(egress_byte_cap)
{
    fixture f;
    tk_egress_caps caps = {.max_bytes = 20000};
    fixture_start(&f, &caps, 0);
    char req[256];
    snprintf(req, sizeof req, "GET http://127.0.0.1:%d/big HTTP/1.1\r\n\r\n", f.page_port);
    size_t n;
    char *r = through(&f, req, &n);
    CHECK(strstr(r, "200 OK")); /* the answer began, and was cut at the cap */
    CHECK(n < 20000);
    free(r);
    tk_egress_stats st;
    tk_egress_listener_stats(f.e, f.l, &st);
    CHECK_INT(st.bytes, <=, 20000);
    CHECK_INT(st.bytes, >=, 19000);
    /* spent: the next request is refused before anything is sent on */
    int before = atomic_load(&g_connects);
    r = through(&f, req, NULL);
    CHECK(strstr(r, "X-Tusko-Egress: byte_cap"));
    free(r);
    CHECK_INT(atomic_load(&g_connects), ==, before);
    fixture_stop(&f);
}

TEST(egress_head_caps_and_deadline)
{
    fixture f;
    fixture_start(&f, NULL, 300);
    /* a head over the cap */
    int fd = connect_lo(f.proxy_port);
    char *big = malloc(TK_EGRESS_MAX_HEAD + 100);
    memcpy(big, "GET http://127.0.0.1/ HTTP/1.1\r\nX: ", 35);
    memset(big + 35, 'a', TK_EGRESS_MAX_HEAD + 100 - 35);
    send_all(fd, big, TK_EGRESS_MAX_HEAD + 100);
    free(big);
    char *a = read_all(fd, NULL);
    CHECK(strstr(a, "431 Request Header Fields Too Large"));
    free(a);
    close(fd);
    /* a head that does not come: 408 at the deadline */
    fd = connect_lo(f.proxy_port);
    send_all(fd, "GET http://127.0.0.1/", 21);
    a = read_all(fd, NULL);
    CHECK(strstr(a, "408 Request Timeout"));
    free(a);
    close(fd);
    CHECK_INT(atomic_load(&g_connects), ==, 0);
    fixture_stop(&f);
}

TEST(egress_remove_listener_closes_its_connections)
{
    fixture f;
    fixture_start(&f, NULL, 0);
    int fd = connect_lo(f.proxy_port);
    char req[128];
    snprintf(req, sizeof req, "CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n", f.echo_port);
    send_all(fd, req, strlen(req));
    char head[256];
    read_head(fd, head, sizeof head);
    CHECK(strstr(head, "200 Connection established"));
    tk_egress_remove_listener(f.e, f.l);
    char b;
    CHECK_INT(recv(fd, &b, 1, 0), ==, 0); /* closed by the proxy */
    close(fd);
    CHECK_INT(connect_lo(f.proxy_port), ==, -1); /* and nothing listens any more */
    fixture_stop(&f);
}

/* Refusals are logged at most log_per_sec lines a second; each line counts the
 * ones left out before it, so nothing is lost from the count. */
TEST(egress_refusals_are_logged_rate_limited)
{
    char path[] = "/tmp/egress-log-XXXXXX";
    int lf = mkstemp(path);
    CHECK(lf >= 0);
    unlink(path);
    CHECK(dup2(lf, 2) == 2);
    g_log_per_sec = 3;
    fixture f;
    fixture_start(&f, NULL, 0);
    tk_log_set_level(TK_LOG_INFO);
    char req[128];
    snprintf(req, sizeof req, "CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n", f.trap_port);
    int64_t t0 = tk_mono_ms();
    for (int i = 0; i < 20; i++)
        free(through(&f, req, NULL));
    int64_t spent = tk_mono_ms() - t0;
    usleep(1100 * 1000); /* a new second: the next refusal is logged with the count */
    free(through(&f, req, NULL));
    fixture_stop(&f);
    off_t n = lseek(lf, 0, SEEK_END);
    char *log = malloc((size_t)n + 1);
    CHECK(pread(lf, log, (size_t)n, 0) == n);
    log[n] = '\0';
    int lines = 0;
    long counted = 0;
    for (char *p = log; (p = strstr(p, "msg=\"refused\"")); p++) {
        lines++;
        char *sb = strstr(p, "suppressed_before=");
        CHECK(sb);
        counted += 1 + strtol(sb + 18, NULL, 10);
    }
    CHECK_INT(counted, ==, 21); /* every refusal accounted for */
    CHECK_INT(lines, >=, 2);
    CHECK_INT(lines, <=, 3 * (spent / 1000 + 2) + 1);
    CHECK_INT(lines, <, 21);
    free(log);
    close(lf);
}

TEST(egress_parser_drops_hop_by_hop_headers)
{
    const char *h =
        "GET http://a.test/x HTTP/1.0\r\nHost: b\r\nConnection: keep-alive, X-Secret\r\n"
        "X-Secret: s\r\n"
        "Keep-Alive: 5\r\nTE: trailers\r\nUpgrade: websocket\r\nAccept: */*\r\n"
        "Content-Length: 3\r\n\r\nabc";
    tk_egress_req r;
    char why[160];
    CHECK_INT(tk_egress_parse_request(h, strlen(h), &r, why, sizeof why), ==, TK_EGRESS_PARSE_OK);
    CHECK_INT(r.kind, ==, TK_EGRESS_REQ_HTTP);
    CHECK_INT(r.minor, ==, 0);
    CHECK_INT(r.content_length, ==, 3);
    CHECK_INT(r.head_len, ==, strlen(h) - 3);
    CHECK_INT(r.nkeep, ==, 2);
    CHECK(strncmp(r.keep[0].p, "Accept: */*\r\n", r.keep[0].n) == 0);
    CHECK(strncmp(r.keep[1].p, "Content-Length: 3\r\n", r.keep[1].n) == 0);
    /* incomplete heads ask for more; junk that can never be a head does not */
    CHECK_INT(tk_egress_parse_request(h, 20, &r, why, sizeof why), ==, TK_EGRESS_PARSE_MORE);
    CHECK_INT(tk_egress_parse_request("GET x\n", 6, &r, why, sizeof why), ==, TK_EGRESS_PARSE_BAD);
    const char *c = "CONNECT [2001:db8::1]:8443 HTTP/1.1\r\n\r\n";
    CHECK_INT(tk_egress_parse_request(c, strlen(c), &r, why, sizeof why), ==, TK_EGRESS_PARSE_OK);
    CHECK_STR(r.host, "2001:db8::1");
    CHECK_INT(r.port, ==, 8443);
    const char *two =
        "POST http://a.test/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n";
    CHECK_INT(tk_egress_parse_request(two, strlen(two), &r, why, sizeof why), ==,
              TK_EGRESS_PARSE_BAD);
}

TEST_MAIN()
