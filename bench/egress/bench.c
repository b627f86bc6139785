/*
 * bench/egress — what the checked way out costs, on loopback, in one process:
 *   throughput  a 256 MiB download over one TCP connection, direct and through
 *               the proxy's CONNECT tunnel (the path HTTPS takes);
 *   latency     a small HTTP request on a new connection each time, direct and
 *               through the proxy in absolute form (check, connect, relay),
 *               p50 and p99 over RUNS requests; and a refused request
 *               (answered 403 by the proxy, nothing connected).
 * Prints a markdown table. RUNS (default 2000), MIB (default 256).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/egress.h"
#include "lib/log.h"
#include "lib/tktime.h"

static int listen_lo(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sl) != 0 || listen(fd, 512) != 0)
        exit(1);
    getsockname(fd, (struct sockaddr *)&a, &sl);
    *port = ntohs(a.sin_port);
    return fd;
}

static int connect_lo(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        exit(1);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static size_t g_bytes;

/* The source: on each connection, reads a request head, then sends g_bytes (a
 * path of /small: a 2-byte HTTP answer) and closes. */
static void *source(void *arg)
{
    int lfd = (int)(intptr_t)arg;
    static char chunk[1 << 16];
    memset(chunk, 'x', sizeof chunk);
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0)
            return NULL;
        char req[4096];
        size_t n = 0;
        while (n < sizeof req - 1) {
            ssize_t r = recv(fd, req + n, sizeof req - 1 - n, 0);
            if (r <= 0)
                break;
            n += (size_t)r;
            req[n] = '\0';
            if (strstr(req, "\r\n\r\n"))
                break;
        }
        if (strstr(req, " /small ")) {
            static const char a[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close"
                                    "\r\n\r\nok";
            send(fd, a, sizeof a - 1, MSG_NOSIGNAL);
        } else {
            for (size_t left = g_bytes; left;) {
                size_t k = left < sizeof chunk ? left : sizeof chunk;
                ssize_t w = send(fd, chunk, k, MSG_NOSIGNAL);
                if (w <= 0)
                    break;
                left -= (size_t)w;
            }
        }
        close(fd);
    }
}

static void send_str(int fd, const char *s)
{
    send(fd, s, strlen(s), MSG_NOSIGNAL);
}

/* Reads to EOF; bytes read. */
static size_t drain(int fd)
{
    static char b[1 << 16];
    size_t total = 0;
    ssize_t r;
    while ((r = recv(fd, b, sizeof b, 0)) > 0)
        total += (size_t)r;
    return total;
}

static double download(int port, int via_proxy, int target_port)
{
    int fd = connect_lo(port);
    char req[256];
    int64_t t0 = tk_mono_ns();
    if (via_proxy) {
        snprintf(req, sizeof req, "CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\nGET /big HTTP/1.1\r\n\r\n",
                 target_port);
    } else {
        snprintf(req, sizeof req, "GET /big HTTP/1.1\r\n\r\n");
    }
    send_str(fd, req);
    size_t got = drain(fd);
    double s = (double)(tk_mono_ns() - t0) / 1e9;
    close(fd);
    if (got < g_bytes) {
        fprintf(stderr, "short download: %zu of %zu\n", got, g_bytes);
        exit(1);
    }
    return (double)g_bytes / (1 << 20) / s;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* p50 and p99 in microseconds of RUNS requests. */
static void latency(int port, const char *req, int runs, double *p50, double *p99)
{
    double *t = malloc(sizeof *t * (size_t)runs);
    for (int i = 0; i < runs; i++) {
        int64_t t0 = tk_mono_ns();
        int fd = connect_lo(port);
        send_str(fd, req);
        drain(fd);
        close(fd);
        t[i] = (double)(tk_mono_ns() - t0) / 1e3;
    }
    qsort(t, (size_t)runs, sizeof *t, cmp);
    *p50 = t[runs / 2];
    *p99 = t[runs * 99 / 100];
    free(t);
}

int main(void)
{
    tk_log_set_level(TK_LOG_ERROR);
    int runs = getenv("RUNS") ? atoi(getenv("RUNS")) : 2000;
    int mib = getenv("MIB") ? atoi(getenv("MIB")) : 256;
    g_bytes = (size_t)mib << 20;
    int sport, pport;
    int slfd = listen_lo(&sport);
    pthread_t th;
    pthread_create(&th, NULL, source, (void *)(intptr_t)slfd);

    tk_ssrf_policy pol;
    tk_ssrf_policy_init(&pol);
    char list[64], err[256];
    snprintf(list, sizeof list, "127.0.0.1:%d", sport);
    if (tk_ssrf_policy_allow(&pol, list, err, sizeof err) != TK_OK)
        return 1;
    tk_egress_config cfg = {.policy = &pol, .log_per_sec = -1};
    tk_egress *e = tk_egress_start(&cfg, err, sizeof err);
    if (!e)
        return 1;
    int plfd = listen_lo(&pport);
    tk_egress_listener *l = tk_egress_add_listener(e, plfd, "bench", NULL);
    if (!l)
        return 1;

    double d_direct = 0, d_proxy = 0;
    for (int i = 0; i < 3; i++) { /* best of three */
        double a = download(sport, 0, 0), b = download(pport, 1, sport);
        d_direct = a > d_direct ? a : d_direct;
        d_proxy = b > d_proxy ? b : d_proxy;
    }
    char direct_req[64], proxy_req[128], refused_req[128];
    snprintf(direct_req, sizeof direct_req, "GET /small HTTP/1.1\r\nHost: x\r\n\r\n");
    snprintf(proxy_req, sizeof proxy_req, "GET http://127.0.0.1:%d/small HTTP/1.1\r\n\r\n", sport);
    snprintf(refused_req, sizeof refused_req, "GET http://169.254.169.254/small HTTP/1.1\r\n\r\n");
    double l50[3], l99[3];
    latency(sport, direct_req, runs, &l50[0], &l99[0]);
    latency(pport, proxy_req, runs, &l50[1], &l99[1]);
    latency(pport, refused_req, runs, &l50[2], &l99[2]);

    printf("| path (loopback, one process) | download MiB/s (%d MiB, best of 3) | small request "
           "p50 µs | "
           "p99 µs (%d runs) |\n",
           mib, runs);
    printf("|---|---|---|---|\n");
    printf("| direct | %.0f | %.0f | %.0f |\n", d_direct, l50[0], l99[0]);
    printf("| through tk_egress (CONNECT for the download, absolute-form for the request) | %.0f "
           "(%.0f%% of direct) | %.0f | %.0f |\n",
           d_proxy, 100 * d_proxy / d_direct, l50[1], l99[1]);
    printf("| refused by tk_egress (169.254.169.254, 403, nothing connected) | — | %.0f | %.0f |\n",
           l50[2], l99[2]);
    tk_egress_remove_listener(e, l);
    tk_egress_stop(e);
    tk_ssrf_policy_free(&pol);
    return 0;
}
