#include "lib/httpd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "lib/cond.h"
#include "lib/id.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/query.h"
#include "lib/sse.h"
#include "lib/tktime.h"
#include "lib/ws.h"

#define MAX_PARAMS     16
#define WORK_QUEUE_MAX 1024

struct route_rt {
    tk_route r;
    char **segs;
    size_t nsegs;
    int wildcard;
};

struct hdr {
    struct hdr *next;
    char *name, *value;
};

enum { REQ_NEW = 0, REQ_RECEIVING, REQ_DISPATCHED };

/* What a connection waits for: its next request's headers, the rest of a body,
 * or nothing from the client (a handler or a response is under way, or it is
 * a WebSocket now, which its own thread watches). */
enum { CONN_WAIT = 0, CONN_BODY, CONN_BUSY, CONN_WS };

/* Connections and requests in flight of one client address. */
struct client {
    struct client *next;
    tk_ip key;
    unsigned conns; /* direct connections */
    unsigned reqs;  /* forwarded requests in flight (behind a trusted proxy) */
};

#define CLIENT_BUCKETS 1024

/* One open connection (MHD's socket context), from NOTIFY_STARTED to _CLOSED. */
struct conn {
    struct conn *prev, *next;
    struct client *client; /* NULL: not counted (unix socket, trusted proxy) */
    int fd;
    int phase;
    int closing; /* shut down by the limits; MHD closes it */
    unsigned served;
    int64_t since_ms; /* the phase's start */
    uint64_t body_bytes;
    char ip[48];
};

/* The kinds of refusal, each logged at most once per TK_HTTPD_LIMIT_LOG_S. */
enum {
    LIM_PER_IP = 0,
    LIM_HEADERS,
    LIM_IDLE,
    LIM_BODY,
    LIM_FORWARDED,
    LIM_TOTAL,
    LIM_KINDS,
};

struct limlog {
    int64_t last_ms;
    uint64_t pending; /* refusals not yet logged */
    char ip[48];      /* the latest one's client */
};

struct tk_req {
    tk_httpd *h;
    struct MHD_Connection *conn;
    tk_arena *arena;
    char *uri, *path, *qs;
    char method[16];
    char id[40];
    char ip[64];
    struct conn *c;     /* its connection's record */
    struct client *fwd; /* the forwarded client counted for it, or NULL */
    tk_kv *query;
    size_t nquery;
    const struct route_rt *route;
    const char *pnames[MAX_PARAMS], *pvals[MAX_PARAMS];
    size_t nparams;
    const char *rest;
    tk_buf body;
    size_t max_body;
    int state, too_big, body_refused;
    uint64_t discarded, streamed;
    json_t *json;
    void *user;
    int64_t start_ns;

    pthread_mutex_t lock; /* guards what follows */
    struct MHD_Response *resp;
    int status;
    struct hdr *headers;
    int deferred, suspended, queued;
    int refs;             /* MHD's, plus a worker's while it runs the handler */
    struct tk_req *qnext; /* worker queue */
    tk_httpd_ws *ws;      /* the WebSocket it was upgraded to, if any */
};

struct tk_stream {
    tk_httpd *h;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct MHD_Connection *conn; /* NULL once the response is gone */
    tk_buf q;
    size_t cap;
    int refs;
    int suspended, ended, gone, sse, want_writable;
    int64_t last_write_ms;
    void (*on_close)(void *);
    void *on_close_ud;
    void (*on_writable)(void *);
    void *on_writable_ud;
    struct tk_stream *prev, *next;
};

struct tk_httpd {
    struct MHD_Daemon *d;
    tk_httpd_config cfg;
    char name[32];
    struct route_rt *routes;
    size_t nroutes;
    int port;
    char unix_path[108];
    int listen_fd;
    char url[160];

    pthread_mutex_t lock; /* queue, streams, stopping */
    pthread_cond_t qcond, hbcond;
    struct tk_req *qhead, *qtail;
    size_t qlen;
    pthread_t *workers;
    unsigned nworkers;
    pthread_t hb;
    int stopping;
    tk_stream *streams;
    size_t nstreams;
    tk_httpd_ws *wss; /* WebSockets accepted and not yet ended */
    size_t nws, nws_running;
    pthread_cond_t wscond;

    pthread_mutex_t clock; /* connections, clients, limit logs */
    struct conn *conns;
    size_t nconns;
    struct client *clients[CLIENT_BUCKETS];
    struct limlog lim[LIM_KINDS];
};

/* ---------- helpers ---------- */

static void hlog(const char *fmt, va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    tk_warn("httpd", "msg=\"libmicrohttpd: %s\"", msg);
}

static void limit_note(tk_httpd *h, int kind, const char *ip);

static void mhd_logger(void *cls, const char *fmt, va_list ap)
{
    /* said for every connection refused at the total cap: counted instead */
    if (strstr(fmt, "reached connection limit")) {
        limit_note(cls, LIM_TOTAL, "-");
        return;
    }
    hlog(fmt, ap);
}

/* ---------- per-client limits ---------- */

static const char *const lim_what[LIM_KINDS] = {
    [LIM_PER_IP] = "connection refused: too many connections from one client address",
    [LIM_HEADERS] = "connection closed: request line and headers not received in time",
    [LIM_IDLE] = "connection closed: idle between requests for too long",
    [LIM_BODY] = "connection closed: request body arriving below the minimum rate",
    [LIM_FORWARDED] = "request refused (429): too many requests in flight from one client",
    [LIM_TOTAL] = "connection refused: the server is at its connection limit",
};

/* Logs the kind's pending refusals if the interval has passed. clock held. */
static void limit_flush(tk_httpd *h, int kind, int64_t now)
{
    struct limlog *l = &h->lim[kind];
    if (!l->pending || now - l->last_ms < TK_HTTPD_LIMIT_LOG_S * 1000)
        return;
    tk_warn(h->name, "msg=\"%s\" client=%s refusals=%llu interval_s=%d", lim_what[kind], l->ip,
            (unsigned long long)l->pending, TK_HTTPD_LIMIT_LOG_S);
    l->pending = 0;
    l->last_ms = now;
}

static void limit_note_locked(tk_httpd *h, int kind, const char *ip)
{
    struct limlog *l = &h->lim[kind];
    l->pending++;
    snprintf(l->ip, sizeof l->ip, "%s", ip);
    limit_flush(h, kind, tk_mono_ms());
}

static void limit_note(tk_httpd *h, int kind, const char *ip)
{
    pthread_mutex_lock(&h->clock);
    limit_note_locked(h, kind, ip);
    pthread_mutex_unlock(&h->clock);
}

/* The address limits count by: an IPv4 address, or an IPv6 address's /64. */
static tk_ip client_key(const tk_ip *ip)
{
    tk_ip k = tk_ip_unmapped(ip);
    if (k.family == 6)
        memset(k.b + 8, 0, 8);
    return k;
}

static size_t client_bucket(const tk_ip *k)
{
    uint32_t x = 2166136261u;
    for (int i = 0; i < 16; i++)
        x = (x ^ k->b[i]) * 16777619u;
    return (x ^ (uint32_t)k->family) % CLIENT_BUCKETS;
}

/* clock held. create: make the record when there is none. */
static struct client *client_get(tk_httpd *h, const tk_ip *ip, int create)
{
    tk_ip k = client_key(ip);
    size_t b = client_bucket(&k);
    for (struct client *c = h->clients[b]; c; c = c->next)
        if (c->key.family == k.family && memcmp(c->key.b, k.b, 16) == 0)
            return c;
    if (!create)
        return NULL;
    struct client *c = tk_calloc(1, sizeof *c);
    c->key = k;
    c->next = h->clients[b];
    h->clients[b] = c;
    return c;
}

/* clock held: frees the record once nothing counts on it. */
static void client_release(tk_httpd *h, struct client *c)
{
    if (c->conns || c->reqs)
        return;
    struct client **pp = &h->clients[client_bucket(&c->key)];
    while (*pp != c)
        pp = &(*pp)->next;
    *pp = c->next;
    free(c);
}

static int sockaddr_ip(const struct sockaddr *sa, tk_ip *ip)
{
    memset(ip, 0, sizeof *ip);
    if (!sa)
        return 0;
    if (sa->sa_family == AF_INET) {
        ip->family = 4;
        memcpy(ip->b, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        return 1;
    }
    if (sa->sa_family == AF_INET6) {
        ip->family = 6;
        memcpy(ip->b, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        return 1;
    }
    return 0;
}

/* Whether a connection from ip is counted and limited (not a trusted proxy's). */
static int client_counted(const tk_httpd *h, const tk_ip *ip)
{
    return h->cfg.per_ip_limit && !tk_cidr_list_match(h->cfg.trusted, ip);
}

/* MHD's accept policy: refuses a client at its limit before MHD allocates anything. */
static enum MHD_Result accept_cb(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    tk_httpd *h = cls;
    tk_ip ip;
    if (!sockaddr_ip(addr, &ip) || !client_counted(h, &ip))
        return MHD_YES;
    pthread_mutex_lock(&h->clock);
    struct client *c = client_get(h, &ip, 0);
    int over = c && c->conns >= h->cfg.per_ip_limit;
    if (over) {
        char s[48];
        tk_ip_format(&ip, s, sizeof s);
        limit_note_locked(h, LIM_PER_IP, s);
    }
    pthread_mutex_unlock(&h->clock);
    return over ? MHD_NO : MHD_YES;
}

static void conn_notify(void *cls, struct MHD_Connection *mc, void **socket_context,
                        enum MHD_ConnectionNotificationCode toe)
{
    tk_httpd *h = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        struct conn *c = tk_calloc(1, sizeof *c);
        const union MHD_ConnectionInfo *fi =
            MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *ai =
            MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        c->fd = fi ? fi->connect_fd : -1;
        c->since_ms = tk_mono_ms();
        tk_ip ip;
        int have_ip = ai && sockaddr_ip(ai->client_addr, &ip);
        snprintf(c->ip, sizeof c->ip, "%s", have_ip ? "" : "unix");
        if (have_ip)
            tk_ip_format(&ip, c->ip, sizeof c->ip);
        pthread_mutex_lock(&h->clock);
        c->next = h->conns;
        if (h->conns)
            h->conns->prev = c;
        h->conns = c;
        h->nconns++;
        if (have_ip && client_counted(h, &ip)) {
            c->client = client_get(h, &ip, 1);
            /* a second line of defence: accept_cb's check and this count are
             * not one step, so two threads may both have let one in */
            if (++c->client->conns > h->cfg.per_ip_limit && c->fd >= 0) {
                shutdown(c->fd, SHUT_RDWR);
                c->closing = 1;
                limit_note_locked(h, LIM_PER_IP, c->ip);
            }
        }
        pthread_mutex_unlock(&h->clock);
        *socket_context = c;
        return;
    }
    struct conn *c = *socket_context;
    if (!c)
        return;
    *socket_context = NULL;
    pthread_mutex_lock(&h->clock);
    if (c->prev)
        c->prev->next = c->next;
    else
        h->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    h->nconns--;
    if (c->client) {
        c->client->conns--;
        client_release(h, c->client);
    }
    pthread_mutex_unlock(&h->clock);
    free(c);
}

static void conn_phase(tk_httpd *h, struct conn *c, int phase)
{
    if (!c)
        return;
    pthread_mutex_lock(&h->clock);
    if (phase == CONN_WAIT && c->phase != CONN_WAIT)
        c->served++;
    if (phase != c->phase) {
        c->phase = phase;
        c->since_ms = tk_mono_ms();
        c->body_bytes = 0;
    }
    pthread_mutex_unlock(&h->clock);
}

static void conn_body(tk_httpd *h, struct conn *c, size_t n)
{
    if (!c)
        return;
    pthread_mutex_lock(&h->clock);
    c->body_bytes += n;
    pthread_mutex_unlock(&h->clock);
}

/*
 * Closes what the deadlines say must go (the heartbeat thread, each second).
 * shutdown() under clock: MHD reports a connection closed (conn_notify, which
 * takes clock) before it closes the descriptor, so fd is still this
 * connection's. MHD then reads the end and closes it on its own thread.
 */
static void limits_sweep(tk_httpd *h)
{
    int64_t now = tk_mono_ms();
    int64_t hdr = h->cfg.header_timeout_ms, idle = (int64_t)h->cfg.timeout_s * 1000;
    pthread_mutex_lock(&h->clock);
    int near_cap = h->nconns * 4 >= (size_t)h->cfg.max_connections * 3;
    for (struct conn *c = h->conns; c; c = c->next) {
        if (c->closing || c->fd < 0)
            continue;
        int64_t age = now - c->since_ms;
        int kind = -1;
        if (c->phase == CONN_WAIT) {
            if (c->served == 0 && age > hdr)
                kind = LIM_HEADERS;
            else if (c->served > 0 && age > (near_cap ? hdr : idle))
                kind = LIM_IDLE;
        } else if (c->phase == CONN_BODY && h->cfg.min_body_rate > 0) {
            int64_t allowed =
                hdr + (int64_t)(c->body_bytes * 1000 / (uint64_t)h->cfg.min_body_rate);
            if (age > allowed)
                kind = LIM_BODY;
        }
        if (kind < 0)
            continue;
        shutdown(c->fd, SHUT_RDWR);
        c->closing = 1;
        limit_note_locked(h, kind, c->ip);
    }
    for (int k = 0; k < LIM_KINDS; k++)
        limit_flush(h, k, now);
    pthread_mutex_unlock(&h->clock);
}

size_t tk_httpd_connection_count(tk_httpd *h)
{
    pthread_mutex_lock(&h->clock);
    size_t n = h->nconns;
    pthread_mutex_unlock(&h->clock);
    return n;
}

tk_status tk_listen_parse(const char *listen, char *host, size_t hostlen, int *port,
                          char *unix_path, size_t pathlen)
{
    host[0] = '\0';
    unix_path[0] = '\0';
    *port = 0;
    if (!listen || !*listen)
        return TK_EINVAL;
    if (strncmp(listen, "unix:", 5) == 0) {
        const char *p = listen + 5;
        if (!*p || strlen(p) >= pathlen || strlen(p) >= sizeof(((struct sockaddr_un *)0)->sun_path))
            return TK_EINVAL;
        snprintf(unix_path, pathlen, "%s", p);
        return TK_OK;
    }
    const char *colon;
    if (listen[0] == '[') {
        const char *rb = strchr(listen, ']');
        if (!rb || rb[1] != ':')
            return TK_EINVAL;
        size_t hl = (size_t)(rb - listen - 1);
        if (hl == 0 || hl >= hostlen)
            return TK_EINVAL;
        memcpy(host, listen + 1, hl);
        host[hl] = '\0';
        colon = rb + 1;
    } else {
        colon = strrchr(listen, ':');
        if (!colon)
            return TK_EINVAL;
        size_t hl = (size_t)(colon - listen);
        if (hl >= hostlen)
            return TK_EINVAL;
        memcpy(host, listen, hl);
        host[hl] = '\0';
        if (hl == 0)
            snprintf(host, hostlen, "0.0.0.0");
    }
    int64_t p;
    if (tk_parse_i64(colon + 1, 0, 65535, &p) != TK_OK)
        return TK_EINVAL;
    *port = (int)p;
    return TK_OK;
}

tk_status tk_listen_fd(const char *listen, int *fd)
{
    *fd = -1;
    if (!listen || strncmp(listen, "fd:", 3) != 0)
        return TK_ENOENT;
    int64_t n;
    if (tk_parse_i64(listen + 3, 0, 65535, &n) != TK_OK)
        return TK_EINVAL;
    *fd = (int)n;
    return TK_OK;
}

/* An inherited listening socket ("fd:N", socket activation): used as it is. */
static int adopt_listener(tk_httpd *h, int fd, const char *addr, char *err, size_t errlen)
{
    int acc = 0;
    socklen_t al = sizeof acc;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) < 0 || !acc) {
        snprintf(err, errlen, "listen address \"%s\": fd %d is not a listening socket", addr, fd);
        return -1;
    }
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    struct sockaddr_storage got;
    socklen_t gl = sizeof got;
    memset(&got, 0, sizeof got);
    if (getsockname(fd, (struct sockaddr *)&got, &gl) == 0 && got.ss_family == AF_UNIX) {
        struct sockaddr_un *su = (struct sockaddr_un *)&got;
        snprintf(h->url, sizeof h->url, "unix:%.100s", su->sun_path);
    } else if (got.ss_family == AF_INET || got.ss_family == AF_INET6) {
        char ip[INET6_ADDRSTRLEN] = "";
        if (got.ss_family == AF_INET) {
            inet_ntop(AF_INET, &((struct sockaddr_in *)&got)->sin_addr, ip, sizeof ip);
            h->port = ntohs(((struct sockaddr_in *)&got)->sin_port);
            snprintf(h->url, sizeof h->url, "http://%s:%d", ip, h->port);
        } else {
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&got)->sin6_addr, ip, sizeof ip);
            h->port = ntohs(((struct sockaddr_in6 *)&got)->sin6_port);
            snprintf(h->url, sizeof h->url, "http://[%s]:%d", ip, h->port);
        }
    } else {
        snprintf(h->url, sizeof h->url, "%s", addr);
    }
    return fd;
}

static int open_listener(tk_httpd *h, const char *addr, char *err, size_t errlen)
{
    char host[128], path[108];
    int port;
    int inherited;
    tk_status fs = tk_listen_fd(addr, &inherited);
    if (fs == TK_OK)
        return adopt_listener(h, inherited, addr, err, errlen);
    if (fs == TK_EINVAL) {
        snprintf(err, errlen, "bad listen address \"%s\" (fd:N needs a descriptor number)", addr);
        return -1;
    }
    if (tk_listen_parse(addr, host, sizeof host, &port, path, sizeof path) != TK_OK) {
        snprintf(err, errlen, "bad listen address \"%s\" (use host:port, [v6]:port or unix:/path)",
                 addr ? addr : "");
        return -1;
    }
    int fd;
    if (path[0]) {
        struct sockaddr_un sun = {.sun_family = AF_UNIX};
        snprintf(sun.sun_path, sizeof sun.sun_path, "%s", path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            goto sockerr;
        unlink(path);
        mode_t old = umask(0177);
        int rc = bind(fd, (struct sockaddr *)&sun, sizeof sun);
        umask(old);
        if (rc < 0) {
            snprintf(err, errlen, "bind %s: %s", path, strerror(errno));
            close(fd);
            return -1;
        }
        snprintf(h->unix_path, sizeof h->unix_path, "%s", path);
        snprintf(h->url, sizeof h->url, "unix:%s", path);
    } else {
        struct sockaddr_storage ss;
        socklen_t sl;
        memset(&ss, 0, sizeof ss);
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
            s4->sin_family = AF_INET;
            s4->sin_port = htons((uint16_t)port);
            sl = sizeof *s4;
        } else if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
            s6->sin6_family = AF_INET6;
            s6->sin6_port = htons((uint16_t)port);
            sl = sizeof *s6;
        } else if (strcmp(host, "localhost") == 0) {
            s4->sin_family = AF_INET;
            s4->sin_port = htons((uint16_t)port);
            s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            sl = sizeof *s4;
        } else {
            snprintf(err, errlen, "listen address \"%s\": host must be a numeric address", addr);
            return -1;
        }
        fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            goto sockerr;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (ss.ss_family == AF_INET6)
            setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
        if (bind(fd, (struct sockaddr *)&ss, sl) < 0) {
            snprintf(err, errlen, "bind %s: %s", addr, strerror(errno));
            close(fd);
            return -1;
        }
        struct sockaddr_storage got;
        socklen_t gl = sizeof got;
        getsockname(fd, (struct sockaddr *)&got, &gl);
        h->port = ntohs(got.ss_family == AF_INET ? ((struct sockaddr_in *)&got)->sin_port
                                                 : ((struct sockaddr_in6 *)&got)->sin6_port);
        const char *shown = host;
        if (strcmp(host, "0.0.0.0") == 0 || strcmp(host, "localhost") == 0)
            shown = "127.0.0.1";
        else if (strcmp(host, "::") == 0)
            shown = "::1";
        if (ss.ss_family == AF_INET6)
            snprintf(h->url, sizeof h->url, "http://[%s]:%d", shown, h->port);
        else
            snprintf(h->url, sizeof h->url, "http://%s:%d", shown, h->port);
    }
    if (listen(fd, 1024) < 0) {
        snprintf(err, errlen, "listen %s: %s", addr, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
sockerr:
    snprintf(err, errlen, "socket: %s", strerror(errno));
    return -1;
}

static tk_status compile_routes(tk_httpd *h, const tk_route *routes, size_t n, char *err,
                                size_t errlen)
{
    h->routes = tk_calloc(n ? n : 1, sizeof *h->routes);
    h->nroutes = n;
    for (size_t i = 0; i < n; i++) {
        struct route_rt *rt = &h->routes[i];
        rt->r = routes[i];
        const char *p = routes[i].pattern;
        if (!p || p[0] != '/') {
            snprintf(err, errlen, "route pattern must start with '/': %s", p ? p : "(null)");
            return TK_EINVAL;
        }
        size_t count = 0;
        for (const char *c = p; *c; c++)
            count += *c == '/';
        rt->segs = tk_calloc(count + 1, sizeof *rt->segs);
        const char *s = p + 1;
        while (*s) {
            const char *e = strchr(s, '/');
            size_t len = e ? (size_t)(e - s) : strlen(s);
            if (len) {
                char *seg = tk_strndup(s, len);
                if (strcmp(seg, "*") == 0) {
                    if (e && e[1]) {
                        snprintf(err, errlen, "'*' must end the pattern: %s", p);
                        free(seg);
                        return TK_EINVAL;
                    }
                    rt->wildcard = 1;
                    free(seg);
                } else {
                    rt->segs[rt->nsegs++] = seg;
                }
            }
            if (!e)
                break;
            s = e + 1;
        }
    }
    return TK_OK;
}

static void free_routes(tk_httpd *h)
{
    for (size_t i = 0; i < h->nroutes; i++) {
        for (size_t j = 0; j < h->routes[i].nsegs; j++)
            free(h->routes[i].segs[j]);
        free(h->routes[i].segs);
    }
    free(h->routes);
}

/* Offsets of each raw segment's start, for computing the raw rest of a '*'. */
static size_t raw_offset_of_segment(const char *path, size_t k)
{
    size_t seen = 0;
    size_t i = 0, len = strlen(path);
    while (i < len) {
        while (i < len && path[i] == '/')
            i++;
        if (i >= len)
            break;
        if (seen == k)
            return i;
        while (i < len && path[i] != '/')
            i++;
        seen++;
    }
    return len;
}

/* 0: matched; 1: path matched, method did not; 2: no match. */
static int match_route(tk_req *r, const struct route_rt *rt, char **segs, size_t nsegs)
{
    if (nsegs < rt->nsegs || (!rt->wildcard && nsegs != rt->nsegs))
        return 2;
    size_t np = 0;
    for (size_t i = 0; i < rt->nsegs; i++) {
        const char *ps = rt->segs[i];
        size_t pl = strlen(ps);
        if (pl >= 2 && ps[0] == '{' && ps[pl - 1] == '}') {
            if (np < MAX_PARAMS) {
                r->pnames[np] = ps;
                r->pvals[np] = segs[i];
                np++;
            }
        } else if (strcmp(ps, segs[i]) != 0) {
            return 2;
        }
    }
    if (strcmp(rt->r.method, "*") != 0 && strcmp(rt->r.method, r->method) != 0 &&
        !(strcmp(r->method, "HEAD") == 0 && strcmp(rt->r.method, "GET") == 0))
        return 1;
    r->nparams = np;
    if (rt->wildcard) {
        size_t off = raw_offset_of_segment(r->path, rt->nsegs);
        r->rest = off < strlen(r->path) ? r->path + off - 1 : "/";
    }
    return 0;
}

/* ---------- responses ---------- */

static void add_std_headers(tk_req *r, struct MHD_Response *resp)
{
    MHD_add_response_header(resp, "X-Request-ID", r->id);
    for (struct hdr *x = r->headers; x; x = x->next)
        MHD_add_response_header(resp, x->name, x->value);
    const char *const *d = r->h->cfg.headers;
    for (size_t i = 0; d && d[i] && d[i + 1]; i += 2)
        if (!MHD_get_response_header(resp, d[i]))
            MHD_add_response_header(resp, d[i], d[i + 1]);
}

/* Stores a response; resumes the connection if it waits. Takes ownership of resp. */
static void set_response(tk_req *r, int status, struct MHD_Response *resp)
{
    int resume = 0;
    pthread_mutex_lock(&r->lock);
    if (r->resp || r->queued) {
        pthread_mutex_unlock(&r->lock);
        tk_error("httpd", "msg=\"second response for one request ignored\" path=%s", r->path);
        MHD_destroy_response(resp);
        return;
    }
    r->resp = resp;
    r->status = status;
    if (r->suspended) {
        r->suspended = 0;
        resume = 1;
    }
    pthread_mutex_unlock(&r->lock);
    if (resume)
        MHD_resume_connection(r->conn);
}

void tk_respond_header(tk_req *r, const char *name, const char *value)
{
    struct hdr *x = tk_arena_xalloc(r->arena, sizeof *x);
    x->name = tk_arena_strdup(r->arena, name);
    x->value = tk_arena_strdup(r->arena, value);
    pthread_mutex_lock(&r->lock);
    x->next = r->headers;
    r->headers = x;
    pthread_mutex_unlock(&r->lock);
}

void tk_respond(tk_req *r, int status, const char *content_type, const void *body, size_t len)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!resp)
        tk_oom();
    if (content_type)
        MHD_add_response_header(resp, "Content-Type", content_type);
    set_response(r, status, resp);
}

void tk_respond_json(tk_req *r, int status, json_t *j)
{
    char *s = tk_json_dumps(j);
    json_decref(j);
    size_t len = strlen(s);
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, s, MHD_RESPMEM_MUST_FREE);
    if (!resp)
        tk_oom();
    MHD_add_response_header(resp, "Content-Type", "application/json");
    set_response(r, status, resp);
}

void tk_respond_error(tk_req *r, int status, const char *code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tk_respond_json(r, status,
                    tk_json_obj("code", json_string(code), "message", json_string(msg), NULL));
}

void tk_respond_empty(tk_req *r, int status)
{
    tk_respond(r, status, NULL, "", 0);
}

void tk_respond_fd(tk_req *r, int status, const char *content_type, int fd, off_t off, uint64_t len)
{
    struct MHD_Response *resp = MHD_create_response_from_fd_at_offset64(len, fd, (uint64_t)off);
    if (!resp) {
        close(fd);
        tk_respond_error(r, 500, "INTERNAL_ERROR", "cannot send file");
        return;
    }
    if (content_type)
        MHD_add_response_header(resp, "Content-Type", content_type);
    set_response(r, status, resp);
}

void tk_req_defer(tk_req *r)
{
    pthread_mutex_lock(&r->lock);
    r->deferred = 1;
    pthread_mutex_unlock(&r->lock);
}

int tk_req_responded(const tk_req *r)
{
    tk_req *m = (tk_req *)r;
    pthread_mutex_lock(&m->lock);
    int v = m->resp != NULL || m->queued;
    pthread_mutex_unlock(&m->lock);
    return v;
}

/* ---------- streams ---------- */

static void stream_unref(tk_stream *s)
{
    tk_httpd *h = s->h;
    pthread_mutex_lock(&h->lock);
    pthread_mutex_lock(&s->lock);
    int last = --s->refs == 0;
    pthread_mutex_unlock(&s->lock);
    if (last) {
        if (s->prev)
            s->prev->next = s->next;
        else if (h->streams == s)
            h->streams = s->next;
        if (s->next)
            s->next->prev = s->prev;
        h->nstreams--;
    }
    pthread_mutex_unlock(&h->lock);
    if (last) {
        tk_buf_free(&s->q);
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->cond);
        free(s);
    }
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    tk_stream *s = cls;
    void (*writable)(void *) = NULL;
    void *wud = NULL;
    pthread_mutex_lock(&s->lock);
    if (s->q.len > 0) {
        size_t n = s->q.len < max ? s->q.len : max;
        memcpy(buf, s->q.data, n);
        tk_buf_consume(&s->q, n);
        if (s->want_writable && s->q.len < s->cap / 2) {
            s->want_writable = 0;
            writable = s->on_writable;
            wud = s->on_writable_ud;
        }
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
        if (writable)
            writable(wud);
        return (ssize_t)n;
    }
    if (s->ended || s->h->stopping) {
        pthread_mutex_unlock(&s->lock);
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    s->suspended = 1;
    MHD_suspend_connection(s->conn);
    pthread_mutex_unlock(&s->lock);
    return 0;
}

static void stream_free_cb(void *cls)
{
    tk_stream *s = cls;
    void (*fn)(void *) = NULL;
    void *ud = NULL;
    pthread_mutex_lock(&s->lock);
    s->gone = 1;
    s->conn = NULL;
    s->suspended = 0;
    fn = s->on_close;
    ud = s->on_close_ud;
    s->on_close = NULL;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    if (fn)
        fn(ud);
    stream_unref(s);
}

static tk_stream *stream_new(tk_req *r, int status, const char *content_type, int sse)
{
    tk_httpd *h = r->h;
    tk_stream *s = tk_calloc(1, sizeof *s);
    s->h = h;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    s->cap = h->cfg.stream_buffer;
    /* The queue may exceed the soft cap by one write; the hard cap is 4x. */
    tk_buf_init(&s->q, s->cap * 4 + 65536);
    s->refs = 2; /* the producer and the MHD response */
    s->sse = sse;
    s->conn = r->conn;
    s->last_write_ms = tk_mono_ms();
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384,
                                                                  stream_reader, s, stream_free_cb);
    if (!resp)
        tk_oom();
    MHD_add_response_header(resp, "Content-Type", content_type);
    if (sse) {
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
        MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    }
    pthread_mutex_lock(&h->lock);
    s->next = h->streams;
    if (h->streams)
        h->streams->prev = s;
    h->streams = s;
    h->nstreams++;
    pthread_mutex_unlock(&h->lock);
    set_response(r, status, resp);
    return s;
}

tk_stream *tk_respond_stream(tk_req *r, int status, const char *content_type)
{
    return stream_new(r, status, content_type ? content_type : "application/octet-stream", 0);
}

tk_stream *tk_respond_sse(tk_req *r)
{
    return stream_new(r, 200, "text/event-stream", 1);
}

static tk_status stream_put(tk_stream *s, const void *data, size_t len, int block)
{
    int resume = 0;
    struct MHD_Connection *conn = NULL;
    pthread_mutex_lock(&s->lock);
    while (!s->gone && !s->ended && s->q.len >= s->cap) {
        if (!block) {
            s->want_writable = 1;
            pthread_mutex_unlock(&s->lock);
            return TK_AGAIN;
        }
        pthread_cond_wait(&s->cond, &s->lock);
    }
    if (s->gone || s->ended) {
        pthread_mutex_unlock(&s->lock);
        return TK_ECLOSED;
    }
    if (tk_buf_append(&s->q, data, len) != TK_OK) {
        pthread_mutex_unlock(&s->lock);
        return TK_ETOOBIG;
    }
    s->last_write_ms = tk_mono_ms();
    if (s->suspended) {
        s->suspended = 0;
        resume = 1;
        conn = s->conn;
    }
    pthread_mutex_unlock(&s->lock);
    if (resume && conn)
        MHD_resume_connection(conn);
    return TK_OK;
}

tk_status tk_stream_write(tk_stream *s, const void *data, size_t len)
{
    return stream_put(s, data, len, 1);
}

tk_status tk_stream_try_write(tk_stream *s, const void *data, size_t len)
{
    return stream_put(s, data, len, 0);
}

tk_status tk_stream_sse(tk_stream *s, const char *id, const char *event, const char *data,
                        size_t len)
{
    tk_buf b;
    tk_buf_init(&b, len * 2 + 1024);
    tk_status st = tk_sse_format(&b, id, event, data, len);
    if (st == TK_OK)
        st = tk_stream_write(s, b.data, b.len);
    tk_buf_free(&b);
    return st;
}

size_t tk_stream_pending(tk_stream *s)
{
    pthread_mutex_lock(&s->lock);
    size_t n = s->q.len;
    pthread_mutex_unlock(&s->lock);
    return n;
}

int tk_stream_closed(tk_stream *s)
{
    pthread_mutex_lock(&s->lock);
    int g = s->gone;
    pthread_mutex_unlock(&s->lock);
    return g;
}

void tk_stream_on_close(tk_stream *s, void (*fn)(void *ud), void *ud)
{
    pthread_mutex_lock(&s->lock);
    int gone = s->gone;
    if (!gone) {
        s->on_close = fn;
        s->on_close_ud = ud;
    }
    pthread_mutex_unlock(&s->lock);
    if (gone && fn)
        fn(ud);
}

void tk_stream_on_writable(tk_stream *s, void (*fn)(void *ud), void *ud)
{
    pthread_mutex_lock(&s->lock);
    s->on_writable = fn;
    s->on_writable_ud = ud;
    pthread_mutex_unlock(&s->lock);
}

void tk_stream_close(tk_stream *s)
{
    int resume = 0;
    struct MHD_Connection *conn = NULL;
    pthread_mutex_lock(&s->lock);
    s->ended = 1;
    s->on_writable = NULL;
    if (s->suspended) {
        s->suspended = 0;
        resume = 1;
        conn = s->conn;
    }
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    if (resume && conn)
        MHD_resume_connection(conn);
    stream_unref(s);
}

size_t tk_httpd_stream_count(tk_httpd *h)
{
    pthread_mutex_lock(&h->lock);
    size_t n = h->nstreams;
    pthread_mutex_unlock(&h->lock);
    return n;
}

/* Heartbeats: a comment on every SSE stream idle for heartbeat_s. The write also
 * wakes a suspended connection, which is how a vanished client is noticed. */
static void *heartbeat_main(void *arg)
{
    tk_httpd *h = arg;
    pthread_mutex_lock(&h->lock);
    while (!h->stopping) {
        tk_cond_wait_ms(&h->hbcond, &h->lock, 1000);
        if (h->stopping)
            break;
        pthread_mutex_unlock(&h->lock);
        limits_sweep(h);
        pthread_mutex_lock(&h->lock);
        if (h->stopping)
            break;
        int64_t now = tk_mono_ms(), hb = (int64_t)h->cfg.heartbeat_s * 1000;
        size_t n = 0, cap = h->nstreams;
        tk_stream **due = cap ? tk_malloc(cap * sizeof *due) : NULL;
        for (tk_stream *s = h->streams; s && n < cap; s = s->next) {
            pthread_mutex_lock(&s->lock);
            if (s->sse && !s->gone && !s->ended && now - s->last_write_ms >= hb) {
                s->refs++;
                due[n++] = s;
            }
            pthread_mutex_unlock(&s->lock);
        }
        pthread_mutex_unlock(&h->lock);
        for (size_t i = 0; i < n; i++) {
            tk_stream_try_write(due[i], ": ping\n\n", 8);
            stream_unref(due[i]);
        }
        free(due);
        pthread_mutex_lock(&h->lock);
    }
    pthread_mutex_unlock(&h->lock);
    return NULL;
}

/* ---------- WebSockets ---------- */

enum { WS_PENDING = 0, WS_OPEN, WS_DONE };

#define WS_CLOSE_WAIT_MS 5000

struct tk_httpd_ws {
    tk_httpd *h;
    tk_httpd_ws_config cfg;
    pthread_mutex_t mu; /* what follows */
    int refs;           /* the caller's and the connection's */
    int state;
    int fd, wake;
    struct MHD_UpgradeResponseHandle *urh;
    tk_buf out;     /* whole frames queued for the peer */
    int close_sent; /* our close frame is queued: nothing more is */
    int close_got;  /* the peer's close was read */
    int code;       /* the close code reported to on_close */
    int64_t close_deadline;
    char *extra; /* bytes MHD read past the request */
    size_t nextra;
    tk_httpd_ws *prev, *next; /* the server's list (its lock) */
};

static void ws_wake(tk_httpd_ws *ws)
{
    uint64_t one = 1;
    if (ws->wake >= 0 && write(ws->wake, &one, sizeof one) < 0 && errno != EAGAIN)
        tk_warn("httpd", "msg=\"could not wake a WebSocket\" error=\"%s\"", strerror(errno));
}

/* Queues a frame (mu held). force: past max_queue (a close frame, which has
 * room kept for it). */
static tk_status ws_queue_locked(tk_httpd_ws *ws, int op, const void *data, size_t len, int force)
{
    if (!force && ws->out.len + TK_WS_MAX_HEADER + len > ws->cfg.max_queue)
        return TK_ETOOBIG;
    unsigned char hdr[TK_WS_MAX_HEADER];
    size_t hn = tk_ws_header(hdr, 1, op, len, NULL);
    size_t before = ws->out.len;
    if (tk_buf_append(&ws->out, hdr, hn) != TK_OK ||
        (len && tk_buf_append(&ws->out, data, len) != TK_OK)) {
        ws->out.len = before;
        return TK_ETOOBIG;
    }
    return TK_OK;
}

/* Queues our close frame once (mu held). */
static void ws_close_locked(tk_httpd_ws *ws, int code, const char *reason)
{
    if (ws->close_sent || ws->state == WS_DONE)
        return;
    char pl[125];
    size_t n = tk_ws_close_payload(pl, code, reason);
    ws_queue_locked(ws, TK_WS_CLOSE, pl, n, 1);
    ws->close_sent = 1;
    ws->code = code;
    ws->close_deadline = tk_mono_ms() + WS_CLOSE_WAIT_MS;
}

static void ws_free(tk_httpd_ws *ws)
{
    tk_buf_free(&ws->out);
    if (ws->wake >= 0)
        close(ws->wake);
    free(ws->extra);
    pthread_mutex_destroy(&ws->mu);
    free(ws);
}

void tk_httpd_ws_unref(tk_httpd_ws *ws)
{
    if (!ws)
        return;
    pthread_mutex_lock(&ws->mu);
    int last = --ws->refs == 0;
    pthread_mutex_unlock(&ws->mu);
    if (last)
        ws_free(ws);
}

/* The end of a WebSocket (its thread, or the request's end when the 101 was
 * never sent): on_close, off the server's list, the connection's reference. */
static void ws_finish(tk_httpd_ws *ws, int code, int running)
{
    pthread_mutex_lock(&ws->mu);
    ws->state = WS_DONE;
    tk_buf_free(&ws->out);
    pthread_mutex_unlock(&ws->mu);
    if (ws->cfg.on_close)
        ws->cfg.on_close(ws, code, ws->cfg.ud);
    if (ws->urh)
        MHD_upgrade_action(ws->urh, MHD_UPGRADE_ACTION_CLOSE);
    tk_httpd *h = ws->h;
    pthread_mutex_lock(&h->lock);
    if (ws->prev)
        ws->prev->next = ws->next;
    else if (h->wss == ws)
        h->wss = ws->next;
    if (ws->next)
        ws->next->prev = ws->prev;
    h->nws--;
    if (running)
        h->nws_running--;
    pthread_cond_broadcast(&h->wscond);
    pthread_mutex_unlock(&h->lock);
    tk_httpd_ws_unref(ws);
}

/* Each frame the reader gives (the connection's thread). */
static int ws_frame(void *ud, int op, const char *data, size_t len)
{
    tk_httpd_ws *ws = ud;
    if (op == TK_WS_TEXT || op == TK_WS_BINARY) {
        pthread_mutex_lock(&ws->mu);
        int closing = ws->close_sent;
        pthread_mutex_unlock(&ws->mu);
        if (!closing && ws->cfg.on_message)
            ws->cfg.on_message(ws, op, data, len, ws->cfg.ud);
        return 0;
    }
    pthread_mutex_lock(&ws->mu);
    if (op == TK_WS_PING && !ws->close_sent) {
        if (ws_queue_locked(ws, TK_WS_PONG, data, len, 0) != TK_OK)
            ws_close_locked(ws, 1008, "the peer reads too slowly");
    } else if (op == TK_WS_CLOSE) {
        ws->close_got = 1;
        if (!ws->close_sent) {
            /* echo the code (RFC 6455 5.5.1) and end once it is sent */
            char pl[2];
            int code = len >= 2 ? (((unsigned char)data[0] << 8) | (unsigned char)data[1]) : 1005;
            memcpy(pl, data, len >= 2 ? 2 : 0);
            ws_queue_locked(ws, TK_WS_CLOSE, pl, len >= 2 ? 2 : 0, 1);
            ws->close_sent = 1;
            ws->code = code;
            ws->close_deadline = tk_mono_ms() + WS_CLOSE_WAIT_MS;
        }
    }
    pthread_mutex_unlock(&ws->mu);
    return 0;
}

static void *ws_main(void *arg)
{
    tk_httpd_ws *ws = arg;
    tk_ws_reader rd;
    tk_ws_reader_init(&rd, 1, ws->cfg.max_frame, ws->cfg.max_message);
    int fl = fcntl(ws->fd, F_GETFL);
    if (fl >= 0)
        fcntl(ws->fd, F_SETFL, fl | O_NONBLOCK);
    char *chunk = tk_malloc(64 << 10);
    int reading = 1, code = 1006;
    int64_t ping_ms = (int64_t)ws->cfg.ping_s * 1000;
    int64_t last_rx = tk_mono_ms(), last_ping = last_rx;
    if (ws->nextra) {
        int rc = tk_ws_reader_feed(&rd, ws->extra, ws->nextra, ws_frame, ws);
        if (rc) {
            pthread_mutex_lock(&ws->mu);
            ws_close_locked(ws, rc, NULL);
            pthread_mutex_unlock(&ws->mu);
            reading = 0;
        }
    }
    for (;;) {
        int64_t now = tk_mono_ms();
        pthread_mutex_lock(&ws->mu);
        int want_out = ws->out.len > 0, closing = ws->close_sent, got = ws->close_got;
        int64_t deadline = ws->close_deadline;
        if (closing)
            code = ws->code;
        pthread_mutex_unlock(&ws->mu);
        if (rd.closed)
            reading = 0;
        if (closing && !want_out && (got || !reading))
            break; /* the handshake is done (or the peer broke the protocol) */
        if (closing && now >= deadline) {
            code = got ? code : 1006;
            break;
        }
        if (!closing && now - last_rx >= 2 * ping_ms) {
            code = 1006; /* a peer that says nothing, not even pong */
            break;
        }
        if (!closing && now - last_rx >= ping_ms && now - last_ping >= ping_ms) {
            pthread_mutex_lock(&ws->mu);
            ws_queue_locked(ws, TK_WS_PING, "", 0, 1);
            pthread_mutex_unlock(&ws->mu);
            last_ping = now;
            continue;
        }
        struct pollfd p[2] = {
            {.fd = ws->fd, .events = (short)((reading ? POLLIN : 0) | (want_out ? POLLOUT : 0))},
            {.fd = ws->wake, .events = POLLIN}};
        int n = poll(p, 2, 250);
        if (n < 0 && errno != EINTR)
            break;
        if (n <= 0)
            continue;
        if (p[1].revents & POLLIN) {
            uint64_t v;
            if (read(ws->wake, &v, sizeof v) < 0 && errno != EAGAIN)
                break;
        }
        if (p[0].revents & (POLLERR | POLLNVAL))
            break;
        if (p[0].revents & POLLOUT) {
            pthread_mutex_lock(&ws->mu);
            ssize_t w = send(ws->fd, ws->out.data, ws->out.len, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w > 0)
                tk_buf_consume(&ws->out, (size_t)w);
            pthread_mutex_unlock(&ws->mu);
            if (w < 0 && errno != EAGAIN && errno != EINTR)
                break;
        }
        if (p[0].revents & (POLLIN | POLLHUP)) {
            ssize_t r = recv(ws->fd, chunk, 64 << 10, MSG_DONTWAIT);
            if (r < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            if (r <= 0)
                break; /* the peer went (or half-closed) */
            last_rx = tk_mono_ms();
            int rc = tk_ws_reader_feed(&rd, chunk, (size_t)r, ws_frame, ws);
            if (rc) {
                pthread_mutex_lock(&ws->mu);
                ws_close_locked(ws, rc, rc == TK_WS_CLOSE_TOO_BIG ? "message too big" : NULL);
                pthread_mutex_unlock(&ws->mu);
                reading = 0;
            }
        }
    }
    free(chunk);
    tk_ws_reader_free(&rd);
    shutdown(ws->fd, SHUT_RDWR);
    ws_finish(ws, code, 1);
    return NULL;
}

/* MHD's word that the 101 went out: the socket is ours now. */
static void ws_upgraded(void *cls, struct MHD_Connection *conn, void *con_cls, const char *extra_in,
                        size_t extra_in_size, MHD_socket sock,
                        struct MHD_UpgradeResponseHandle *urh)
{
    tk_httpd_ws *ws = cls;
    tk_req *r = con_cls;
    if (r)
        conn_phase(ws->h, r->c, CONN_WS);
    pthread_mutex_lock(&ws->mu);
    ws->fd = sock;
    ws->urh = urh;
    ws->state = WS_OPEN;
    if (extra_in_size) {
        ws->extra = tk_malloc(extra_in_size);
        memcpy(ws->extra, extra_in, extra_in_size);
        ws->nextra = extra_in_size;
    }
    pthread_mutex_unlock(&ws->mu);
    tk_httpd *h = ws->h;
    pthread_mutex_lock(&h->lock);
    int stopping = h->stopping;
    h->nws_running++;
    pthread_mutex_unlock(&h->lock);
    if (stopping) {
        pthread_mutex_lock(&ws->mu);
        ws_close_locked(ws, 1001, "the server is stopping");
        pthread_mutex_unlock(&ws->mu);
    }
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &a, ws_main, ws) != 0) {
        tk_error("httpd", "msg=\"no thread for a WebSocket\"");
        ws_finish(ws, 1011, 1);
    }
    pthread_attr_destroy(&a);
}

/* The request ended without the upgrade (the client went before the 101). */
static void ws_request_done(tk_req *r)
{
    tk_httpd_ws *ws = r->ws;
    r->ws = NULL;
    pthread_mutex_lock(&ws->mu);
    int pending = ws->state == WS_PENDING;
    pthread_mutex_unlock(&ws->mu);
    if (pending)
        ws_finish(ws, 1006, 0);
}

/* Whether a comma-separated header value has token (case-insensitive). */
static int has_token(const char *v, const char *token)
{
    size_t tl = strlen(token);
    while (v && *v) {
        while (*v == ' ' || *v == '\t' || *v == ',')
            v++;
        const char *e = v;
        while (*e && *e != ',')
            e++;
        const char *end = e;
        while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
            end--;
        if ((size_t)(end - v) == tl && strncasecmp(v, token, tl) == 0)
            return 1;
        v = e;
    }
    return 0;
}

int tk_httpd_ws_requested(const tk_req *r)
{
    return has_token(tk_req_header(r, "Upgrade"), "websocket");
}

tk_httpd_ws *tk_httpd_ws_accept(tk_req *r, const tk_httpd_ws_config *cfg)
{
    const char *ver = tk_req_header(r, "Sec-WebSocket-Version");
    char acc[29];
    if (strcmp(r->method, "GET") != 0 || !tk_httpd_ws_requested(r) ||
        !has_token(tk_req_header(r, "Connection"), "upgrade")) {
        tk_respond_error(r, 400, "WEBSOCKET_REQUIRED",
                         "this endpoint speaks WebSocket only (a GET with Upgrade: websocket and "
                         "Connection: Upgrade)");
        return NULL;
    }
    if (!ver || strcmp(ver, "13") != 0) {
        tk_respond_header(r, "Sec-WebSocket-Version", "13");
        tk_respond_error(r, 426, "WEBSOCKET_VERSION", "only WebSocket version 13 is spoken");
        return NULL;
    }
    if (tk_ws_accept_key(tk_req_header(r, "Sec-WebSocket-Key"), acc) != 0) {
        tk_respond_error(r, 400, "WEBSOCKET_KEY",
                         "Sec-WebSocket-Key must be the base64 of 16 bytes");
        return NULL;
    }
    tk_httpd_ws *ws = tk_calloc(1, sizeof *ws);
    ws->h = r->h;
    ws->cfg = *cfg;
    if (!ws->cfg.max_frame)
        ws->cfg.max_frame = 1 << 20;
    if (!ws->cfg.max_message)
        ws->cfg.max_message = ws->cfg.max_frame;
    if (!ws->cfg.max_queue)
        ws->cfg.max_queue = 2 * ws->cfg.max_message + (1 << 20);
    if (!ws->cfg.ping_s)
        ws->cfg.ping_s = 30;
    pthread_mutex_init(&ws->mu, NULL);
    ws->refs = 2;
    ws->fd = -1;
    ws->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (ws->wake < 0)
        tk_oom();
    /* room past max_queue for the closing frame */
    tk_buf_init(&ws->out, ws->cfg.max_queue + 256);
    struct MHD_Response *resp = MHD_create_response_for_upgrade(ws_upgraded, ws);
    if (!resp)
        tk_oom();
    MHD_add_response_header(resp, "Upgrade", "websocket");
    MHD_add_response_header(resp, "Connection", "Upgrade");
    MHD_add_response_header(resp, "Sec-WebSocket-Accept", acc);
    tk_httpd *h = r->h;
    pthread_mutex_lock(&h->lock);
    ws->next = h->wss;
    if (h->wss)
        h->wss->prev = ws;
    h->wss = ws;
    h->nws++;
    pthread_mutex_unlock(&h->lock);
    r->ws = ws;
    set_response(r, 101, resp);
    return ws;
}

tk_status tk_httpd_ws_send(tk_httpd_ws *ws, int opcode, const void *data, size_t len)
{
    pthread_mutex_lock(&ws->mu);
    if (ws->close_sent || ws->state == WS_DONE) {
        pthread_mutex_unlock(&ws->mu);
        return TK_ECLOSED;
    }
    tk_status st = ws_queue_locked(ws, opcode, data, len, 0);
    if (st == TK_ETOOBIG)
        ws_close_locked(ws, 1008, "the peer reads too slowly");
    pthread_mutex_unlock(&ws->mu);
    ws_wake(ws);
    return st;
}

void tk_httpd_ws_close(tk_httpd_ws *ws, int code, const char *reason)
{
    pthread_mutex_lock(&ws->mu);
    ws_close_locked(ws, code, reason);
    pthread_mutex_unlock(&ws->mu);
    ws_wake(ws);
}

size_t tk_httpd_ws_count(tk_httpd *h)
{
    pthread_mutex_lock(&h->lock);
    size_t n = h->nws;
    pthread_mutex_unlock(&h->lock);
    return n;
}

/* ---------- request lifecycle ---------- */

static void *uri_log_cb(void *cls, const char *uri, struct MHD_Connection *conn)
{
    tk_httpd *h = cls;
    tk_req *r = tk_calloc(1, sizeof *r);
    r->h = h;
    r->conn = conn;
    r->arena = tk_arena_new(0);
    r->start_ns = tk_mono_ns();
    pthread_mutex_init(&r->lock, NULL);
    r->refs = 1;
    const char *q = strchr(uri, '?');
    size_t plen = q ? (size_t)(q - uri) : strlen(uri);
    r->uri = tk_arena_strdup(r->arena, uri);
    r->path = tk_arena_strndup(r->arena, uri, plen);
    r->qs = tk_arena_strdup(r->arena, q ? q + 1 : "");
    r->max_body = h->cfg.max_body;
    tk_buf_init(&r->body, r->max_body);
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    r->c = ci ? ci->socket_context : NULL;
    return r;
}

static void req_free(tk_req *r)
{
    if (r->json)
        json_decref(r->json);
    struct MHD_Response *resp = r->queued ? NULL : r->resp;
    if (resp)
        MHD_destroy_response(resp);
    tk_buf_free(&r->body);
    tk_arena_free(r->arena);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

static void req_unref(tk_req *r)
{
    pthread_mutex_lock(&r->lock);
    int last = --r->refs == 0;
    pthread_mutex_unlock(&r->lock);
    if (last)
        req_free(r);
}

static void request_done(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    tk_req *r = *con_cls;
    if (!r)
        return;
    *con_cls = NULL;
    if (r->ws)
        ws_request_done(r);
    else
        conn_phase(r->h, r->c, CONN_WAIT);
    if (r->fwd) {
        pthread_mutex_lock(&r->h->clock);
        r->fwd->reqs--;
        client_release(r->h, r->fwd);
        pthread_mutex_unlock(&r->h->clock);
        r->fwd = NULL;
    }
    int quiet = r->route && (r->route->r.flags & TK_ROUTE_QUIET);
    if (!quiet) {
        double ms = (double)(tk_mono_ns() - r->start_ns) / 1e6;
        const char *how = toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "ok" : "aborted";
        tk_log_set_request_id(r->id);
        tk_log(r->status >= 500 ? TK_LOG_WARN : TK_LOG_INFO, r->h->name,
               "method=%s path=%s status=%d ms=%.1f end=%s", r->method[0] ? r->method : "-",
               r->path, r->status, ms, how);
        tk_log_set_request_id(NULL);
    }
    req_unref(r);
}

static enum MHD_Result xff_collect(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value)
{
    tk_buf *b = cls;
    if (key && value && strcasecmp(key, "X-Forwarded-For") == 0) {
        if (b->len)
            tk_buf_append(b, ",", 1);
        tk_buf_append(b, value, strlen(value));
    }
    return MHD_YES;
}

/* The client's address; behind a trusted proxy, X-Forwarded-For's (and the
 * forwarded client's requests in flight are counted: 1 when over the limit). */
static int fill_client_ip(tk_req *r)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    snprintf(r->ip, sizeof r->ip, "unknown");
    if (!ci || !ci->client_addr)
        return 0;
    const struct sockaddr *sa = ci->client_addr;
    tk_ip peer, client;
    if (!sockaddr_ip(sa, &peer)) {
        if (sa->sa_family == AF_UNIX)
            snprintf(r->ip, sizeof r->ip, "unix");
        return 0;
    }
    int believed = 0;
    if (r->h->cfg.trusted && r->h->cfg.trusted->n && tk_cidr_list_match(r->h->cfg.trusted, &peer)) {
        /* all of them: headers are bounded by the connection's memory limit */
        tk_buf x;
        tk_buf_init(&x, TK_CAP_HEADERS);
        MHD_get_connection_values(r->conn, MHD_HEADER_KIND, xff_collect, &x);
        believed = tk_forwarded_client(&peer, x.data, x.len, r->h->cfg.trusted, &client);
        tk_buf_free(&x);
    }
    if (!believed)
        client = peer;
    tk_ip_format(&client, r->ip, sizeof r->ip);
    if (!believed || !r->h->cfg.per_ip_limit)
        return 0;
    int over = 0;
    pthread_mutex_lock(&r->h->clock);
    struct client *c = client_get(r->h, &client, 1);
    if (c->reqs >= r->h->cfg.per_ip_limit) {
        over = 1;
        limit_note_locked(r->h, LIM_FORWARDED, r->ip);
        client_release(r->h, c);
    } else {
        c->reqs++;
        r->fwd = c;
    }
    pthread_mutex_unlock(&r->h->clock);
    return over;
}

static int valid_request_id(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 36)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.'))
            return 0;
    }
    return 1;
}

/* Finds the route; responds 404/405/400 itself when there is none. */
static void route_request(tk_req *r)
{
    char **segs;
    size_t nsegs;
    tk_status st = tk_path_split(r->arena, r->path, strlen(r->path), &segs, &nsegs);
    if (st != TK_OK) {
        tk_respond_error(r, 400, "INVALID_PATH", "the request path is malformed");
        return;
    }
    if (tk_query_parse(r->arena, r->qs, strlen(r->qs), TK_QUERY_MAX_ITEMS, &r->query, &r->nquery) !=
        TK_OK) {
        tk_respond_error(r, 400, "INVALID_QUERY",
                         "the query string is malformed (a bad percent-escape, or an encoded "
                         "NUL byte, which is never accepted)");
        return;
    }
    int method_mismatch = 0;
    for (size_t i = 0; i < r->h->nroutes; i++) {
        int m = match_route(r, &r->h->routes[i], segs, nsegs);
        if (m == 0) {
            r->route = &r->h->routes[i];
            if (r->route->r.max_body)
                r->body.max = r->max_body = r->route->r.max_body;
            return;
        }
        if (m == 1)
            method_mismatch = 1;
    }
    if (method_mismatch)
        tk_respond_error(r, 405, "METHOD_NOT_ALLOWED", "method %s is not allowed here", r->method);
    else
        tk_respond_error(r, 404, "NOT_FOUND", "no such endpoint");
}

static void run_handler(tk_req *r)
{
    tk_log_set_request_id(r->id);
    r->route->r.fn(r, r->route->r.ud);
    tk_log_set_request_id(NULL);
}

static int req_deferred(tk_req *r)
{
    pthread_mutex_lock(&r->lock);
    int d = r->deferred;
    pthread_mutex_unlock(&r->lock);
    return d;
}

static void *worker_main(void *arg)
{
    tk_httpd *h = arg;
    pthread_mutex_lock(&h->lock);
    for (;;) {
        while (!h->qhead && !h->stopping)
            pthread_cond_wait(&h->qcond, &h->lock);
        if (!h->qhead && h->stopping)
            break;
        tk_req *r = h->qhead;
        h->qhead = r->qnext;
        if (!h->qhead)
            h->qtail = NULL;
        h->qlen--;
        int stopping = h->stopping;
        pthread_mutex_unlock(&h->lock);
        if (stopping)
            tk_respond_error(r, 503, "UNAVAILABLE", "the server is shutting down");
        else
            run_handler(r);
        if (!tk_req_responded(r) && !req_deferred(r))
            tk_respond_error(r, 500, "INTERNAL_ERROR", "the handler gave no response");
        req_unref(r);
        pthread_mutex_lock(&h->lock);
    }
    pthread_mutex_unlock(&h->lock);
    return NULL;
}

static enum MHD_Result queue_stored(tk_req *r)
{
    enum MHD_Result ret = MHD_YES;
    pthread_mutex_lock(&r->lock);
    if (r->resp && !r->queued) {
        struct MHD_Response *resp = r->resp;
        r->queued = 1;
        pthread_mutex_unlock(&r->lock);
        add_std_headers(r, resp);
        ret = MHD_queue_response(r->conn, (unsigned)r->status, resp);
        MHD_destroy_response(resp); /* MHD holds its own reference now */
        pthread_mutex_lock(&r->lock);
        r->resp = NULL;
        pthread_mutex_unlock(&r->lock);
        return ret;
    }
    if (!r->resp && !r->queued && r->deferred) {
        r->suspended = 1;
        MHD_suspend_connection(r->conn);
    }
    pthread_mutex_unlock(&r->lock);
    return ret;
}

static enum MHD_Result access_cb(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls)
{
    tk_httpd *h = cls;
    tk_req *r = *con_cls;
    if (!r)
        return MHD_NO;
    if (r->state == REQ_NEW) {
        r->state = REQ_RECEIVING;
        snprintf(r->method, sizeof r->method, "%s", method);
        conn_phase(h, r->c, CONN_BODY);
        int over = fill_client_ip(r);
        const char *rid = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Request-ID");
        if (rid && valid_request_id(rid))
            snprintf(r->id, sizeof r->id, "%s", rid);
        else
            tk_uuid7(r->id);
        if (over) {
            tk_respond_header(r, "Retry-After", "1");
            tk_respond_error(r, 429, "TOO_MANY_CONNECTIONS",
                             "too many requests at once from your address (at most %u)",
                             h->cfg.per_ip_limit);
        } else {
            route_request(r);
        }
        if (!tk_req_responded(r)) {
            const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
            int64_t n;
            if (cl && tk_parse_i64(cl, 0, INT64_MAX, &n) == TK_OK && (uint64_t)n > r->max_body) {
                tk_respond_error(r, 413, "PAYLOAD_TOO_LARGE",
                                 "request body of %lld bytes is over the limit of %zu bytes",
                                 (long long)n, r->max_body);
            } else if (!(r->route->r.flags & TK_ROUTE_PUBLIC) && h->cfg.auth) {
                tk_log_set_request_id(r->id);
                h->cfg.auth(r, h->cfg.ud);
                tk_log_set_request_id(NULL);
            }
        }
        if (tk_req_responded(r)) {
            r->state = REQ_DISPATCHED;
            return queue_stored(r);
        }
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        conn_body(h, r->c, n);
        if (r->state != REQ_RECEIVING || r->too_big || r->body_refused) {
            /* Discard what we refused, but not forever. */
            r->discarded += n;
            return r->discarded > (uint64_t)r->max_body * 4 + (1u << 20) ? MHD_NO : MHD_YES;
        }
        if (r->route->r.on_body) {
            if (r->streamed + n > r->max_body) {
                r->too_big = 1;
                return MHD_YES;
            }
            r->streamed += n;
            if (r->route->r.on_body(r, upload_data, n, r->route->r.ud) != 0)
                r->body_refused = 1;
            return MHD_YES;
        }
        if (tk_buf_append(&r->body, upload_data, n) != TK_OK)
            r->too_big = 1;
        return MHD_YES;
    }
    conn_phase(h, r->c, CONN_BUSY);
    if (r->state == REQ_RECEIVING) {
        r->state = REQ_DISPATCHED;
        if (r->too_big) {
            if (!tk_req_responded(r))
                tk_respond_error(r, 413, "PAYLOAD_TOO_LARGE",
                                 "request body is over the limit of %zu bytes", r->max_body);
        } else if (r->body_refused) {
            if (!tk_req_responded(r))
                tk_respond_error(r, 400, "INVALID_REQUEST", "the request body was refused");
        } else if (r->route->r.flags & TK_ROUTE_BLOCKING) {
            pthread_mutex_lock(&h->lock);
            int busy = h->qlen >= WORK_QUEUE_MAX || h->stopping;
            pthread_mutex_unlock(&h->lock);
            if (busy) {
                tk_respond_error(r, 503, "UNAVAILABLE", "the server is busy; try again");
            } else {
                /* Suspend first (no lock of ours but the request's is held while
                 * calling into MHD), then hand the request to a worker. */
                pthread_mutex_lock(&r->lock);
                r->suspended = 1;
                r->refs++; /* the worker's */
                MHD_suspend_connection(conn);
                pthread_mutex_unlock(&r->lock);
                pthread_mutex_lock(&h->lock);
                r->qnext = NULL;
                if (h->qtail)
                    h->qtail->qnext = r;
                else
                    h->qhead = r;
                h->qtail = r;
                h->qlen++;
                pthread_cond_signal(&h->qcond);
                pthread_mutex_unlock(&h->lock);
                return MHD_YES;
            }
        } else {
            run_handler(r);
            if (!tk_req_responded(r) && !req_deferred(r))
                tk_respond_error(r, 500, "INTERNAL_ERROR", "the handler gave no response");
        }
    }
    return queue_stored(r);
}

/* ---------- accessors ---------- */

tk_arena *tk_req_arena(tk_req *r)
{
    return r->arena;
}
const char *tk_req_method(const tk_req *r)
{
    return r->method;
}
const char *tk_req_path(const tk_req *r)
{
    return r->path;
}
const char *tk_req_query_string(const tk_req *r)
{
    return r->qs;
}
const char *tk_req_id(const tk_req *r)
{
    return r->id;
}
const char *tk_req_client_ip(const tk_req *r)
{
    return r->ip;
}
const char *tk_req_rest(const tk_req *r)
{
    return r->rest ? r->rest : "/";
}
void tk_req_set_user(tk_req *r, void *user)
{
    r->user = user;
}
void *tk_req_user(const tk_req *r)
{
    return r->user;
}

const char *tk_req_param(const tk_req *r, const char *name)
{
    size_t nl = strlen(name);
    for (size_t i = 0; i < r->nparams; i++) {
        const char *p = r->pnames[i];
        if (strlen(p) == nl + 2 && strncmp(p + 1, name, nl) == 0)
            return r->pvals[i];
    }
    return NULL;
}

const char *tk_req_query(const tk_req *r, const char *name)
{
    return tk_query_get(r->query, r->nquery, name);
}

const char *tk_req_header(const tk_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

struct hdr_iter {
    int (*fn)(const char *, const char *, void *);
    void *ud;
};

static enum MHD_Result hdr_iter_cb(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value)
{
    struct hdr_iter *it = cls;
    return it->fn(key, value ? value : "", it->ud) ? MHD_NO : MHD_YES;
}

void tk_req_headers_each(const tk_req *r, int (*fn)(const char *name, const char *value, void *ud),
                         void *ud)
{
    struct hdr_iter it = {fn, ud};
    MHD_get_connection_values(r->conn, MHD_HEADER_KIND, hdr_iter_cb, &it);
}

int tk_httpd_req_upload(const tk_req *r)
{
    return r->route && r->route->r.max_body > r->h->cfg.max_body;
}

const char *tk_req_body(const tk_req *r, size_t *len)
{
    if (len)
        *len = r->route && r->route->r.on_body ? 0 : r->body.len;
    return tk_buf_cstr(&r->body);
}

json_t *tk_req_json(tk_req *r, int allow_empty)
{
    if (r->json)
        return r->json;
    size_t len;
    const char *body = tk_req_body(r, &len);
    size_t i = 0;
    while (i < len && (body[i] == ' ' || body[i] == '\n' || body[i] == '\r' || body[i] == '\t'))
        i++;
    if (i == len) {
        if (!allow_empty)
            tk_respond_error(r, 400, "INVALID_JSON", "a JSON request body is required");
        return NULL;
    }
    char err[256];
    r->json = tk_json_parse(body, len, r->max_body, err, sizeof err);
    if (!r->json)
        tk_respond_error(r, 400, "INVALID_JSON", "%s", err);
    return r->json;
}

/* ---------- start / stop ---------- */

tk_httpd *tk_httpd_start(const tk_httpd_config *cfg, const tk_route *routes, size_t nroutes,
                         char *err, size_t errlen)
{
    tk_httpd *h = tk_calloc(1, sizeof *h);
    h->cfg = *cfg;
    snprintf(h->name, sizeof h->name, "%s", cfg->name ? cfg->name : "http");
    if (!h->cfg.max_body)
        h->cfg.max_body = 1 << 20;
    if (!h->cfg.threads)
        h->cfg.threads = 2;
    if (!h->cfg.workers)
        h->cfg.workers = 16;
    if (!h->cfg.max_connections)
        h->cfg.max_connections = 4096;
    if (!h->cfg.timeout_s)
        h->cfg.timeout_s = 60;
    if (!h->cfg.heartbeat_s)
        h->cfg.heartbeat_s = 15;
    if (!h->cfg.stream_buffer)
        h->cfg.stream_buffer = 256 * 1024;
    if (h->cfg.header_timeout_ms <= 0)
        h->cfg.header_timeout_ms = 10000;
    if (h->unix_path[0] || (cfg->listen && strncmp(cfg->listen, "unix:", 5) == 0))
        h->cfg.per_ip_limit = 0;
    pthread_mutex_init(&h->lock, NULL);
    pthread_mutex_init(&h->clock, NULL);
    pthread_cond_init(&h->qcond, NULL);
    pthread_cond_init(&h->hbcond, NULL);
    pthread_cond_init(&h->wscond, NULL);
    h->listen_fd = -1;
    if (compile_routes(h, routes, nroutes, err, errlen) != TK_OK)
        goto fail;
    h->listen_fd = open_listener(h, cfg->listen, err, errlen);
    if (h->listen_fd < 0)
        goto fail;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_ALLOW_UPGRADE | MHD_USE_ERROR_LOG;
    struct MHD_OptionItem opts[20];
    int k = 0;
    opts[k++] = (struct MHD_OptionItem){MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_logger, h};
    opts[k++] = (struct MHD_OptionItem){MHD_OPTION_LISTEN_SOCKET, h->listen_fd, NULL};
    opts[k++] = (struct MHD_OptionItem){MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)uri_log_cb, h};
    opts[k++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)request_done, h};
    opts[k++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT,
                                        (intptr_t)h->cfg.max_connections, NULL};
    opts[k++] =
        (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)h->cfg.timeout_s, NULL};
    opts[k++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_MEMORY_LIMIT, 64 * 1024, NULL};
    if (h->cfg.threads > 1)
        opts[k++] =
            (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)h->cfg.threads, NULL};
    opts[k++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)conn_notify, h};
    opts[k++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    h->d = MHD_start_daemon(flags, 0, accept_cb, h, access_cb, h, MHD_OPTION_ARRAY, opts,
                            MHD_OPTION_END);
    if (!h->d) {
        snprintf(err, errlen, "cannot start the HTTP server on %s", cfg->listen);
        goto fail;
    }
    h->nworkers = h->cfg.workers;
    h->workers = tk_calloc(h->nworkers, sizeof *h->workers);
    for (unsigned i = 0; i < h->nworkers; i++)
        pthread_create(&h->workers[i], NULL, worker_main, h);
    pthread_create(&h->hb, NULL, heartbeat_main, h);
    return h;
fail:
    if (h->listen_fd >= 0)
        close(h->listen_fd);
    free_routes(h);
    free(h);
    return NULL;
}

int tk_httpd_port(const tk_httpd *h)
{
    return h->port;
}

const char *tk_httpd_url(const tk_httpd *h)
{
    return h->url;
}

void tk_httpd_stop(tk_httpd *h)
{
    if (!h)
        return;
    pthread_mutex_lock(&h->lock);
    h->stopping = 1;
    pthread_cond_broadcast(&h->qcond);
    pthread_cond_broadcast(&h->hbcond);
    pthread_mutex_unlock(&h->lock);
    for (unsigned i = 0; i < h->nworkers; i++)
        pthread_join(h->workers[i], NULL);
    pthread_join(h->hb, NULL);
    /* End every stream so suspended connections finish. */
    pthread_mutex_lock(&h->lock);
    for (tk_stream *s = h->streams; s; s = s->next) {
        struct MHD_Connection *conn = NULL;
        pthread_mutex_lock(&s->lock);
        if (s->suspended) {
            s->suspended = 0;
            conn = s->conn;
        }
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
        if (conn)
            MHD_resume_connection(conn);
    }
    /* Close every WebSocket and wait for their threads (each hands its socket
     * back to MHD, which must have them all before it stops). */
    for (tk_httpd_ws *ws = h->wss; ws; ws = ws->next) {
        pthread_mutex_lock(&ws->mu);
        ws_close_locked(ws, 1001, "the server is stopping");
        pthread_mutex_unlock(&ws->mu);
        ws_wake(ws);
    }
    int64_t until = tk_mono_ms() + WS_CLOSE_WAIT_MS + 2000;
    while (h->nws_running > 0 && tk_mono_ms() < until)
        tk_cond_wait_ms(&h->wscond, &h->lock, 200);
    pthread_mutex_unlock(&h->lock);
    MHD_stop_daemon(h->d);
    if (h->listen_fd >= 0)
        close(h->listen_fd);
    if (h->unix_path[0])
        unlink(h->unix_path);
    free_routes(h);
    free(h->workers);
    /* Streams still held by producers stay valid; they see TK_ECLOSED. They keep
     * a pointer to h only for unref, so h must outlive them: leak-free shutdown
     * needs producers to close their streams before tk_httpd_stop returns. */
    pthread_mutex_lock(&h->lock);
    int streams_left = h->streams != NULL;
    pthread_mutex_unlock(&h->lock);
    if (!streams_left) {
        pthread_mutex_destroy(&h->lock);
        pthread_mutex_destroy(&h->clock);
        pthread_cond_destroy(&h->qcond);
        pthread_cond_destroy(&h->hbcond);
        pthread_cond_destroy(&h->wscond);
        free(h);
    }
}
