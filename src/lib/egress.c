/*
 * egress.c — the checked forward proxy (egress.h). One event loop relays; the
 * checks (which may resolve a name) run on a worker pool and come back to the
 * loop. A connection moves through:
 *   HEAD     reading the request head (capped, deadline head_timeout)
 *   CHECK    the target checked on a worker; the client is not read meanwhile
 *   CONNECT  non-blocking connect to the admitted addresses in turn
 *   RELAY    bytes both ways (CONNECT), or the request sent on and the
 *            response relayed (absolute-form HTTP)
 *   ANSWER   our own answer (a refusal) written, then the connection drained
 *            briefly and closed
 */
#include "lib/egress.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/arena.h"
#include "lib/evloop.h"
#include "lib/log.h"
#include "lib/tktime.h"
#include "lib/workpool.h"

#define PIPE_CAP      65536 /* bytes buffered per direction */
#define ACCEPT_BATCH  64
#define DRAIN_MS      1000 /* after our answer: read and drop what the client still sends */
#define DRAIN_MAX     65536
#define LOOKUP_QUEUE  1024
#define DEFAULT_CONNS 64

/* ------------------------------------------------------------------------- */
/* Settings                                                                  */
/* ------------------------------------------------------------------------- */

static char *opt_allow, *opt_deny, *opt_ports, *opt_max_bytes;
static int64_t opt_head_ms, opt_connect_ms, opt_idle_ms, opt_max_conns, opt_log_per_sec;

static int check_size(const char *v, char *msg, size_t msglen)
{
    uint64_t n;
    if (!tk_ssrf_parse_size(v, &n)) {
        snprintf(msg, msglen, "is not a size (bytes, or with K, M, G: \"512M\"; 0: no cap)");
        return 1;
    }
    return 0;
}

tk_setting tk_egress_settings[] = {
    {"EGRESS_ALLOW", "egress-allow", TK_SET_STR, NULL,
     "hosts, CIDRs and host:port the egress proxy admits beyond the built-in address rules "
     "(\"127.0.0.1:8123,10.1.0.0/16\")",
     .out = &opt_allow},
    {"EGRESS_DENY", "egress-deny", TK_SET_STR, NULL,
     "hosts, CIDRs and host:port the egress proxy refuses (wins over EGRESS_ALLOW)",
     .out = &opt_deny},
    {"EGRESS_ALLOWED_PORTS", "egress-allowed-ports", TK_SET_STR, NULL,
     "ports the egress proxy allows beyond 80 and 443 (\"8080,8443\")", .out = &opt_ports},
    {"EGRESS_HEAD_TIMEOUT", "egress-head-timeout", TK_SET_DURATION, "10s",
     "a request head must reach the egress proxy within this", .min = 100, .max = 600000,
     .out = &opt_head_ms},
    {"EGRESS_CONNECT_TIMEOUT", "egress-connect-timeout", TK_SET_DURATION, "10s",
     "the egress proxy's name lookup and connect, each", .min = 100, .max = 600000,
     .out = &opt_connect_ms},
    {"EGRESS_IDLE_TIMEOUT", "egress-idle-timeout", TK_SET_DURATION, "5m",
     "an egress connection with no byte either way for this long is closed", .min = 1000,
     .max = 24LL * 3600 * 1000, .out = &opt_idle_ms},
    {"EGRESS_MAX_BYTES", "egress-max-bytes", TK_SET_STR, "0",
     "bytes one browser or sandbox may move through the egress proxy, both ways (0: no cap)",
     .out = &opt_max_bytes, .check = check_size},
    {"EGRESS_MAX_CONNS", "egress-max-conns", TK_SET_INT, "64",
     "connections one browser or sandbox may hold open through the egress proxy (0: no cap)",
     .min = 0, .max = 65536, .out = &opt_max_conns},
    {"EGRESS_LOG_PER_SEC", "egress-log-per-sec", TK_SET_INT, "10",
     "egress refusals logged a second (the rest are counted)", .min = 0, .max = 100000,
     .out = &opt_log_per_sec},
};
const size_t tk_egress_nsettings = TK_ARRAY_LEN(tk_egress_settings);

tk_status tk_egress_from_settings(tk_ssrf_policy *p, tk_egress_config *cfg, tk_egress_caps *caps,
                                  char *err, size_t errlen)
{
    tk_ssrf_policy_init(p);
    p->allow_setting = "EGRESS_ALLOW";
    p->deny_setting = "EGRESS_DENY";
    p->ports_setting = "EGRESS_ALLOWED_PORTS";
    char e[320];
    if (tk_ssrf_policy_allow(p, opt_allow, e, sizeof e) != TK_OK) {
        snprintf(err, errlen, "EGRESS_ALLOW: %s", e);
        goto fail;
    }
    if (tk_ssrf_policy_deny(p, opt_deny, e, sizeof e) != TK_OK) {
        snprintf(err, errlen, "EGRESS_DENY: %s", e);
        goto fail;
    }
    if (tk_ssrf_policy_allow_ports(p, opt_ports, e, sizeof e) != TK_OK) {
        snprintf(err, errlen, "EGRESS_ALLOWED_PORTS: %s", e);
        goto fail;
    }
    memset(cfg, 0, sizeof *cfg);
    cfg->policy = p;
    cfg->head_timeout_ms = opt_head_ms;
    cfg->connect_timeout_ms = opt_connect_ms;
    cfg->idle_timeout_ms = opt_idle_ms;
    cfg->log_per_sec = opt_log_per_sec ? (int)opt_log_per_sec : -1;
    if (opt_connect_ms > 0)
        p->timeout_ms = (long)opt_connect_ms; /* bounds the lookups */
    uint64_t mb = 0;
    if (opt_max_bytes && *opt_max_bytes && !tk_ssrf_parse_size(opt_max_bytes, &mb)) {
        snprintf(err, errlen, "EGRESS_MAX_BYTES: \"%s\" is not a size", opt_max_bytes);
        goto fail;
    }
    caps->max_bytes = mb;
    caps->max_conns = (unsigned)opt_max_conns;
    return TK_OK;
fail:
    tk_ssrf_policy_free(p);
    return TK_EINVAL;
}

/* ------------------------------------------------------------------------- */
/* The request head                                                          */
/* ------------------------------------------------------------------------- */

static int is_tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* Hop-by-hop headers (and Host, which we write): never sent on. */
static int header_dropped(const char *name, size_t n)
{
    static const char *const drop[] = {"connection",
                                       "proxy-connection",
                                       "keep-alive",
                                       "proxy-authorization",
                                       "proxy-authenticate",
                                       "te",
                                       "trailer",
                                       "upgrade",
                                       "host",
                                       "transfer-encoding"};
    for (size_t i = 0; i < TK_ARRAY_LEN(drop); i++)
        if (strlen(drop[i]) == n && strncasecmp(drop[i], name, n) == 0)
            return 1;
    return 0;
}

static tk_egress_parse_rc bad(tk_egress_parse_rc rc, char *why, size_t whylen, const char *msg)
{
    snprintf(why, whylen, "%s", msg);
    return rc;
}

/* "host:port" or "[v6]:port" of a CONNECT. */
static int parse_authority(const char *s, size_t n, tk_egress_req *r)
{
    size_t hs, he, pc;
    if (n && s[0] == '[') {
        const char *close = memchr(s, ']', n);
        if (!close)
            return 0;
        hs = 1;
        he = (size_t)(close - s);
        pc = he + 1;
        for (size_t i = hs; i < he; i++)
            if (!(isxdigit((unsigned char)s[i]) || s[i] == ':' || s[i] == '.'))
                return 0;
    } else {
        const char *colon = memchr(s, ':', n);
        if (!colon)
            return 0;
        hs = 0;
        he = (size_t)(colon - s);
        pc = he;
        for (size_t i = hs; i < he; i++) {
            unsigned char c = (unsigned char)s[i];
            if (!(isalnum(c) || c == '-' || c == '.' || c == '_'))
                return 0;
        }
    }
    if (he == hs || he - hs > TK_HOST_MAX || pc >= n || s[pc] != ':')
        return 0;
    size_t pl = n - pc - 1;
    if (pl < 1 || pl > 5)
        return 0;
    int port = 0;
    for (size_t i = pc + 1; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        port = port * 10 + (s[i] - '0');
    }
    if (port < 1 || port > 65535)
        return 0;
    memcpy(r->host, s + hs, he - hs);
    r->host[he - hs] = '\0';
    r->port = port;
    return 1;
}

/* 1 when the comma-separated list v[0..n) names the header name[0..nl). */
static int list_names(const char *v, size_t n, const char *name, size_t nl)
{
    size_t i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        size_t s = i;
        while (i < n && v[i] != ',' && v[i] != ' ' && v[i] != '\t')
            i++;
        if (i > s && i - s == nl && strncasecmp(v + s, name, nl) == 0)
            return 1;
    }
    return 0;
}

/* Drops the kept headers that a Connection header names (RFC 9110 7.6.1). */
static void drop_connection_listed(tk_egress_req *r, const char *const *cv, const size_t *cn,
                                   size_t nc)
{
    size_t k = 0;
    for (size_t i = 0; i < r->nkeep; i++) {
        const char *p = r->keep[i].p;
        size_t nl = (size_t)((const char *)memchr(p, ':', r->keep[i].n) - p);
        int named = 0;
        for (size_t j = 0; j < nc && !named; j++)
            named = list_names(cv[j], cn[j], p, nl);
        if (!named)
            r->keep[k++] = r->keep[i];
    }
    r->nkeep = k;
}

tk_egress_parse_rc tk_egress_parse_request(const char *buf, size_t len, tk_egress_req *r, char *why,
                                           size_t whylen)
{
    memset(r, 0, sizeof *r);
    r->content_length = -1;
    why[0] = '\0';
    size_t lim = len < TK_EGRESS_MAX_HEAD ? len : TK_EGRESS_MAX_HEAD;
    const char *end = NULL;
    for (size_t i = 0; i + 3 < lim; i++) {
        if (buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' && buf[i + 3] == '\n') {
            end = buf + i;
            break;
        }
    }
    if (!end) {
        if (len >= TK_EGRESS_MAX_HEAD)
            return bad(TK_EGRESS_PARSE_TOO_LONG, why, whylen,
                       "the request head is larger than 32768 bytes");
        /* Fail early on what can never become a request. */
        for (size_t i = 0; i < len; i++) {
            unsigned char c = (unsigned char)buf[i];
            if (c == '\n' && (i == 0 || buf[i - 1] != '\r'))
                return bad(TK_EGRESS_PARSE_BAD, why, whylen, "a bare LF in the request head");
            if (c == 0)
                return bad(TK_EGRESS_PARSE_BAD, why, whylen, "a NUL byte in the request head");
        }
        return TK_EGRESS_PARSE_MORE;
    }
    r->head_len = (size_t)(end - buf) + 4;
    const char *p = buf, *lend = memchr(buf, '\r', (size_t)(end - buf) + 1);
    if (!lend || lend[1] != '\n')
        return bad(TK_EGRESS_PARSE_BAD, why, whylen, "a bare CR in the request line");
    /* request line: method SP target SP HTTP/1.x */
    const char *sp1 = memchr(p, ' ', (size_t)(lend - p));
    if (!sp1 || sp1 == p || (size_t)(sp1 - p) >= sizeof r->method)
        return bad(TK_EGRESS_PARSE_BAD, why, whylen, "no method in the request line");
    for (const char *q = p; q < sp1; q++)
        if (!is_tchar((unsigned char)*q))
            return bad(TK_EGRESS_PARSE_BAD, why, whylen, "the method is not a token");
    memcpy(r->method, p, (size_t)(sp1 - p));
    r->method[sp1 - p] = '\0';
    const char *ts = sp1 + 1;
    const char *sp2 = memchr(ts, ' ', (size_t)(lend - ts));
    if (!sp2 || sp2 == ts)
        return bad(TK_EGRESS_PARSE_BAD, why, whylen, "no target in the request line");
    size_t tl = (size_t)(sp2 - ts);
    if (tl > TK_URL_MAX)
        return bad(TK_EGRESS_PARSE_TOO_LONG, why, whylen, "the request target is too long");
    for (size_t i = 0; i < tl; i++) {
        unsigned char c = (unsigned char)ts[i];
        if (c <= 0x20 || c == 0x7f)
            return bad(TK_EGRESS_PARSE_BAD, why, whylen, "a control character in the target");
    }
    memcpy(r->target, ts, tl);
    r->target[tl] = '\0';
    const char *vs = sp2 + 1;
    if (lend - vs != 8 || memcmp(vs, "HTTP/1.", 7) != 0 || (vs[7] != '0' && vs[7] != '1'))
        return bad(TK_EGRESS_PARSE_BAD, why, whylen, "not HTTP/1.0 or HTTP/1.1");
    r->minor = vs[7] - '0';

    /* headers */
    int has_te = 0;
    const char *conn_v[8];
    size_t conn_n[8], nconn = 0;
    p = lend + 2;
    while (p < end + 2) {
        const char *le = p;
        while (le < end + 2 && *le != '\r' && *le != '\n')
            le++;
        if (le >= end + 2 || *le != '\r' || le[1] != '\n')
            return bad(TK_EGRESS_PARSE_BAD, why, whylen, "a header line does not end in CRLF");
        if (le == p)
            break; /* the empty line (only at end) */
        if (*p == ' ' || *p == '\t')
            return bad(TK_EGRESS_PARSE_BAD, why, whylen, "folded header lines are refused");
        const char *colon = memchr(p, ':', (size_t)(le - p));
        if (!colon || colon == p)
            return bad(TK_EGRESS_PARSE_BAD, why, whylen, "a header line without a name");
        for (const char *q = p; q < colon; q++)
            if (!is_tchar((unsigned char)*q))
                return bad(TK_EGRESS_PARSE_BAD, why, whylen, "a header name is not a token");
        const char *v = colon + 1, *ve = le;
        for (const char *q = v; q < ve; q++) {
            unsigned char c = (unsigned char)*q;
            if ((c < 0x20 && c != '\t') || c == 0x7f)
                return bad(TK_EGRESS_PARSE_BAD, why, whylen,
                           "a control character in a header value");
        }
        while (v < ve && (*v == ' ' || *v == '\t'))
            v++;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
            ve--;
        size_t nl = (size_t)(colon - p);
        if (nl == 14 && strncasecmp(p, "content-length", 14) == 0) {
            long long cl = 0;
            if (v == ve || ve - v > 15)
                return bad(TK_EGRESS_PARSE_BAD, why, whylen, "Content-Length is not a number");
            for (const char *q = v; q < ve; q++) {
                if (*q < '0' || *q > '9')
                    return bad(TK_EGRESS_PARSE_BAD, why, whylen, "Content-Length is not a number");
                cl = cl * 10 + (*q - '0');
            }
            if (r->content_length >= 0 && r->content_length != cl)
                return bad(TK_EGRESS_PARSE_BAD, why, whylen, "two different Content-Lengths");
            r->content_length = cl;
        } else if (nl == 17 && strncasecmp(p, "transfer-encoding", 17) == 0) {
            has_te = 1;
        } else if (nl == 10 && strncasecmp(p, "connection", 10) == 0 && nconn < 8) {
            conn_v[nconn] = v; /* the headers it names are hop-by-hop too */
            conn_n[nconn++] = (size_t)(ve - v);
        }
        if (!header_dropped(p, nl)) {
            if (r->nkeep >= TK_EGRESS_MAX_HEADERS)
                return bad(TK_EGRESS_PARSE_TOO_LONG, why, whylen, "more than 128 headers");
            r->keep[r->nkeep].p = p;
            r->keep[r->nkeep].n = (size_t)(le - p) + 2;
            r->nkeep++;
        }
        p = le + 2;
    }

    drop_connection_listed(r, conn_v, conn_n, nconn);

    if (strcmp(r->method, "CONNECT") == 0) {
        if (has_te || r->content_length > 0)
            return bad(TK_EGRESS_PARSE_BAD, why, whylen, "a CONNECT with a body");
        if (!parse_authority(r->target, tl, r))
            return bad(TK_EGRESS_PARSE_BAD, why, whylen,
                       "the CONNECT target is not host:port or [IPv6]:port");
        r->kind = TK_EGRESS_REQ_CONNECT;
        return TK_EGRESS_PARSE_OK;
    }
    if (tl >= 7 && strncasecmp(r->target, "http://", 7) == 0) {
        if (has_te)
            return bad(TK_EGRESS_PARSE_LENGTH, why, whylen,
                       "request bodies need a Content-Length (chunked uploads are not relayed)");
        r->kind = TK_EGRESS_REQ_HTTP;
        return TK_EGRESS_PARSE_OK;
    }
    if (r->target[0] == '/' || strcmp(r->target, "*") == 0)
        return bad(TK_EGRESS_PARSE_METHOD, why, whylen,
                   "this is a forward proxy: send absolute-form requests (http://host/path) or "
                   "CONNECT");
    if (strstr(r->target, "://"))
        return bad(TK_EGRESS_PARSE_METHOD, why, whylen,
                   "only http:// is served in absolute form; use CONNECT for https and others");
    return bad(TK_EGRESS_PARSE_BAD, why, whylen, "the request target is not a URL");
}

/* ------------------------------------------------------------------------- */
/* The proxy                                                                 */
/* ------------------------------------------------------------------------- */

enum { S_HEAD = 1, S_CHECK, S_CONNECT, S_RELAY, S_ANSWER };

typedef struct {
    char *b;
    size_t len, off; /* data is b[off..len) */
} pipebuf;

typedef struct conn conn;

struct tk_egress_listener {
    tk_egress *e;
    int fd;
    tk_ev_io *w;
    tk_ev_timer *backoff; /* accepting paused (out of descriptors), resumed by this */
    char tag[96];
    tk_egress_caps caps;
    tk_egress_stats st;
    conn *conns;
    tk_egress_listener *next, *prev;
};

struct conn {
    tk_egress_listener *l; /* NULL once orphaned (its listener went during a check) */
    tk_egress *e;
    conn *next, *prev;
    int state;
    int cfd, ufd;
    tk_ev_io *cw, *uw;
    tk_ev_timer *timer;
    char *head; /* the request head as read (TK_EGRESS_MAX_HEAD) */
    size_t hlen;
    tk_egress_req *req;
    /* filled on the worker */
    tk_ssrf_target t;
    tk_status check_st;
    char tag[96];       /* the listener's, copied when the check starts */
    int policy_refused; /* the admit hook said no */
    char policy_why[256];
    size_t next_addr;
    pipebuf c2u, u2c;
    int c_eof, u_eof;    /* no more reading from that side */
    int u_shut, c_shut;  /* we shut down writing to that side */
    long long body_left; /* HTTP: request body bytes still to forward */
    size_t drained;      /* ANSWER: bytes read and dropped */
    int relayed_counted;
};

struct tk_egress {
    tk_egress_config cfg;
    tk_evloop *loop;
    tk_workpool *pool;
    tk_egress_listener *listeners;
    conn *orphans;
    int stopping;
    int64_t log_window;
    int log_count;
    unsigned long long log_suppressed;
};

static void conn_update(conn *c);

/* --- rate-limited refusal log --- */

static void log_refusal(tk_egress *e, const char *tag, int status, const char *code,
                        const char *target, const char *reason)
{
    int64_t now = tk_mono_ms();
    if (now - e->log_window >= 1000) {
        e->log_window = now;
        e->log_count = 0;
    }
    if (e->log_count >= e->cfg.log_per_sec) {
        e->log_suppressed++;
        return;
    }
    e->log_count++;
    char t[96];
    tk_str_snip(t, sizeof t, target ? target : "-", target ? strlen(target) : 1);
    tk_info("egress",
            "msg=\"refused\" listener=\"%s\" status=%d code=%s target=\"%s\" reason=\"%s\" "
            "suppressed_before=%llu",
            tag, status, code, t, reason, e->log_suppressed);
    e->log_suppressed = 0;
}

/* --- connection lifetime --- */

static void conn_unlink(conn *c)
{
    conn **head = c->l ? &c->l->conns : &c->e->orphans;
    if (c->prev)
        c->prev->next = c->next;
    else
        *head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->next = c->prev = NULL;
}

static void conn_link(conn *c, conn **head)
{
    c->prev = NULL;
    c->next = *head;
    if (*head)
        (*head)->prev = c;
    *head = c;
}

/* Closes the sockets and watchers; the struct stays while a check runs. */
static void conn_close_fds(conn *c)
{
    if (c->cw)
        tk_ev_io_del(c->cw);
    if (c->uw)
        tk_ev_io_del(c->uw);
    c->cw = c->uw = NULL;
    if (c->timer)
        tk_ev_timer_del(c->timer);
    c->timer = NULL;
    if (c->cfd >= 0)
        close(c->cfd);
    if (c->ufd >= 0)
        close(c->ufd);
    c->cfd = c->ufd = -1;
}

static void conn_free(conn *c)
{
    conn_close_fds(c);
    tk_ssrf_target_free(&c->t);
    free(c->head);
    free(c->req);
    free(c->c2u.b);
    free(c->u2c.b);
    free(c);
}

/* Ends a connection. During a check the worker still owns part of it: it is
 * moved to the orphans and freed when the check comes back. */
static void conn_end(conn *c)
{
    if (c->l)
        c->l->st.conns--;
    conn_unlink(c);
    if (c->state == S_CHECK) {
        conn_close_fds(c);
        c->l = NULL;
        conn_link(c, &c->e->orphans);
        return;
    }
    conn_free(c);
}

static const char *status_text(int status)
{
    switch (status) {
    case 400:
        return "Bad Request";
    case 403:
        return "Forbidden";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 411:
        return "Length Required";
    case 431:
        return "Request Header Fields Too Large";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    }
    return "Error";
}

static size_t format_answer(char *out, size_t outlen, int status, const char *code,
                            const char *reason)
{
    char body[TK_SSRF_REASON_MAX + 64];
    size_t bl = 0;
    for (const char *s = reason; *s && bl + 2 < sizeof body; s++) {
        unsigned char ch = (unsigned char)*s;
        body[bl++] = (ch < 0x20 || ch == 0x7f) ? ' ' : (char)ch;
    }
    body[bl++] = '\n';
    body[bl] = '\0';
    int n = snprintf(out, outlen,
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                     "X-Tusko-Egress: %s\r\nConnection: close\r\nProxy-Connection: close\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     status, status_text(status), code, bl, body);
    return n < 0 ? 0 : (size_t)n >= outlen ? outlen - 1 : (size_t)n;
}

/* Our own answer: queued for the client, then the connection is drained and
 * closed. Logged (rate-limited) and counted as a refusal. */
static void conn_answer(conn *c, int status, const char *code, const char *reason)
{
    const char *target = c->req ? c->req->target : NULL;
    if (c->l) {
        c->l->st.refused++;
        snprintf(c->l->st.last_refusal, sizeof c->l->st.last_refusal, "%s %s", code,
                 target ? target : "-");
        log_refusal(c->e, c->l->tag, status, code, target, reason);
    }
    if (c->ufd >= 0) {
        if (c->uw)
            tk_ev_io_del(c->uw);
        c->uw = NULL;
        close(c->ufd);
        c->ufd = -1;
    }
    c->u2c.off = 0;
    c->u2c.len = format_answer(c->u2c.b, PIPE_CAP, status, code, reason);
    c->c2u.len = c->c2u.off = 0;
    c->state = S_ANSWER;
    c->drained = 0;
    tk_ev_timer_rearm(c->timer, DRAIN_MS);
    conn_update(c);
}

/* --- socket I/O --- */

/* Bytes the listener may still move; SIZE_MAX-ish when no cap. */
static size_t cap_room(conn *c, size_t want)
{
    if (!c->l || !c->l->caps.max_bytes)
        return want;
    uint64_t used = c->l->st.bytes, max = c->l->caps.max_bytes;
    if (used >= max)
        return 0;
    return (uint64_t)want > max - used ? (size_t)(max - used) : want;
}

static void count_bytes(conn *c, size_t n)
{
    if (c->l)
        c->l->st.bytes += n;
}

/* Reads into pb. Returns bytes read, 0 at EOF, -1 on EAGAIN, -2 on error. */
static ssize_t read_into(int fd, pipebuf *pb, size_t room)
{
    if (pb->off && pb->off == pb->len)
        pb->off = pb->len = 0;
    if (pb->off && pb->len == PIPE_CAP) {
        memmove(pb->b, pb->b + pb->off, pb->len - pb->off);
        pb->len -= pb->off;
        pb->off = 0;
    }
    size_t space = PIPE_CAP - pb->len;
    if (space > room)
        space = room;
    if (space == 0)
        return -1;
    ssize_t n;
    do
        n = recv(fd, pb->b + pb->len, space, 0);
    while (n < 0 && errno == EINTR);
    if (n > 0) {
        pb->len += (size_t)n;
        return n;
    }
    if (n == 0)
        return 0;
    return errno == EAGAIN || errno == EWOULDBLOCK ? -1 : -2;
}

/* Writes from pb. 0 ok (maybe partial), -2 on error. */
static int write_from(int fd, pipebuf *pb)
{
    while (pb->off < pb->len) {
        ssize_t n = send(fd, pb->b + pb->off, pb->len - pb->off, MSG_NOSIGNAL);
        if (n > 0) {
            pb->off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        return -2;
    }
    pb->off = pb->len = 0;
    return 0;
}

static int conn_timeout_ms(conn *c)
{
    tk_egress_config *cfg = &c->e->cfg;
    switch (c->state) {
    case S_HEAD:
        return (int)cfg->head_timeout_ms;
    case S_CONNECT:
        return (int)cfg->connect_timeout_ms;
    default:
        return (int)cfg->idle_timeout_ms;
    }
}

/* Sets both watchers' interest from the state and buffers; ends the
 * connection when both directions are done. */
static void conn_update(conn *c)
{
    int cev = 0, uev = 0;
    switch (c->state) {
    case S_HEAD:
        cev = TK_EV_READ;
        break;
    case S_CHECK:
        break;
    case S_CONNECT:
        uev = TK_EV_WRITE;
        break;
    case S_ANSWER:
        if (c->u2c.len > c->u2c.off)
            cev = TK_EV_WRITE;
        else
            cev = TK_EV_READ;
        break;
    case S_RELAY: {
        int reading_client = !c->c_eof && c->c2u.len < PIPE_CAP;
        if (c->req->kind == TK_EGRESS_REQ_HTTP && c->body_left <= 0)
            reading_client = 0;
        if (reading_client)
            cev |= TK_EV_READ;
        if (c->u2c.len > c->u2c.off)
            cev |= TK_EV_WRITE;
        if (!c->u_eof && c->u2c.len < PIPE_CAP)
            uev |= TK_EV_READ;
        if (c->c2u.len > c->c2u.off)
            uev |= TK_EV_WRITE;
        /* the client's side is done: tell upstream (tunnels only) */
        int c_done = c->c_eof && c->c2u.len == c->c2u.off;
        if (c_done && !c->u_shut && c->req->kind == TK_EGRESS_REQ_CONNECT) {
            shutdown(c->ufd, SHUT_WR);
            c->u_shut = 1;
        }
        int u_done = c->u_eof && c->u2c.len == c->u2c.off;
        if (u_done && (c_done || c->req->kind == TK_EGRESS_REQ_HTTP)) {
            conn_end(c);
            return;
        }
        if (u_done && !c->c_shut) {
            shutdown(c->cfd, SHUT_WR);
            c->c_shut = 1;
        }
        break;
    }
    }
    if (c->cw)
        tk_ev_io_modify(c->cw, cev);
    if (c->uw)
        tk_ev_io_modify(c->uw, uev);
}

static void on_timer(tk_ev_timer *t, void *ud)
{
    conn *c = ud;
    (void)t;
    switch (c->state) {
    case S_HEAD:
        conn_answer(c, 408, "timeout", "the request head did not arrive in time");
        return;
    case S_CONNECT: {
        char r[TK_SSRF_REASON_MAX];
        snprintf(r, sizeof r, "%s:%d did not accept the connection within %lld ms", c->t.host,
                 c->t.port, (long long)c->e->cfg.connect_timeout_ms);
        conn_answer(c, 504, "timeout", r);
        return;
    }
    default:
        conn_end(c); /* idle, or an answer that was not read in time */
        return;
    }
}

static void relay_failed(conn *c)
{
    conn_end(c);
}

/* The listener's byte cap is spent: nothing more is read from either side;
 * what was read is still delivered, then the connection ends. */
static void byte_cap_reached(conn *c)
{
    c->c_eof = c->u_eof = 1;
    c->body_left = 0;
    if (c->l) {
        snprintf(c->l->st.last_refusal, sizeof c->l->st.last_refusal, "byte_cap %s",
                 c->req ? c->req->target : "-");
        log_refusal(c->e, c->l->tag, 0, "byte_cap", c->req ? c->req->target : NULL,
                    "the byte cap was reached mid-connection");
    }
    conn_update(c);
}

/* --- the states --- */

static void start_check(conn *c);
static void try_connect(conn *c);

static void head_read(conn *c)
{
    size_t room = cap_room(c, TK_EGRESS_MAX_HEAD - c->hlen);
    if (room == 0) {
        if (c->l && c->l->caps.max_bytes && c->l->st.bytes >= c->l->caps.max_bytes) {
            conn_answer(c, 403, "byte_cap", "the byte cap of this browser or sandbox is reached");
            return;
        }
    }
    ssize_t n;
    do
        n = recv(c->cfd, c->head + c->hlen, room, 0);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    if (n <= 0) {
        conn_end(c);
        return;
    }
    c->hlen += (size_t)n;
    count_bytes(c, (size_t)n);
    if (!c->req)
        c->req = tk_malloc(sizeof *c->req);
    char why[160];
    tk_egress_parse_rc rc = tk_egress_parse_request(c->head, c->hlen, c->req, why, sizeof why);
    switch (rc) {
    case TK_EGRESS_PARSE_MORE:
        return;
    case TK_EGRESS_PARSE_OK:
        start_check(c);
        return;
    case TK_EGRESS_PARSE_BAD:
        conn_answer(c, 400, "bad_request", why);
        return;
    case TK_EGRESS_PARSE_METHOD:
        conn_answer(c, 405, "not_served", why);
        return;
    case TK_EGRESS_PARSE_LENGTH:
        conn_answer(c, 411, "length_required", why);
        return;
    case TK_EGRESS_PARSE_TOO_LONG:
        conn_answer(c, 431, "too_large", why);
        return;
    }
}

static void check_work(void *ud)
{
    conn *c = ud;
    tk_egress_req *r = c->req;
    const tk_ssrf_policy *p = c->e->cfg.policy;
    if (r->kind == TK_EGRESS_REQ_CONNECT) {
        char h[TK_HOST_MAX + 3];
        snprintf(h, sizeof h, strchr(r->host, ':') ? "[%s]" : "%s", r->host);
        c->check_st = tk_ssrf_check_host(p, h, r->port, &c->t);
    } else {
        c->check_st = tk_ssrf_check(p, r->target, &c->t);
    }
    c->policy_refused = 0;
    if (c->check_st == TK_OK && c->t.code == TK_SSRF_OK && c->e->cfg.admit &&
        !c->e->cfg.admit(c->e->cfg.admit_ud, c->tag, c->t.host, c->t.addrs, c->t.naddrs,
                         c->policy_why, sizeof c->policy_why))
        c->policy_refused = 1;
}

static int refusal_status(tk_ssrf_code code)
{
    switch (code) {
    case TK_SSRF_DNS_FAILED:
    case TK_SSRF_FETCH_FAILED:
        return 502;
    case TK_SSRF_TIMEOUT:
        return 504;
    case TK_SSRF_BAD_URL:
        return 400;
    default:
        return 403;
    }
}

static void check_done(void *ud)
{
    conn *c = ud;
    if (!c->l) { /* orphaned while the check ran */
        conn_unlink(c);
        conn_free(c);
        return;
    }
    c->state = S_HEAD; /* not S_CHECK any more: conn_end frees at once */
    if (c->check_st != TK_OK || c->t.code != TK_SSRF_OK) {
        conn_answer(c, refusal_status(c->t.code), tk_ssrf_code_str(c->t.code), c->t.reason);
        return;
    }
    if (c->policy_refused) {
        conn_answer(c, 403, "policy", c->policy_why);
        return;
    }
    c->next_addr = 0;
    try_connect(c);
}

static void start_check(conn *c)
{
    snprintf(c->tag, sizeof c->tag, "%s", c->l ? c->l->tag : "");
    c->state = S_CHECK;
    conn_update(c);
    if (tk_workpool_submit_then(c->e->pool, c->e->loop, check_work, check_done, c) != TK_OK) {
        c->state = S_HEAD;
        conn_answer(c, 503, "busy", "too many lookups at once; try again");
    }
}

static void on_upstream(tk_ev_io *w, int fd, int revents, void *ud);

/* Connects to the next admitted address; answers 502 when none is left. */
static void try_connect(conn *c)
{
    const tk_ssrf_policy *p = c->e->cfg.policy;
    while (c->next_addr < c->t.naddrs) {
        const tk_ip *ip = &c->t.addrs[c->next_addr++];
        if (!tk_ssrf_target_admits(p, &c->t, ip, c->t.port))
            continue; /* never: the check admitted it; kept as the last word */
        if (p->on_connect && p->on_connect(p->connect_ud, ip, c->t.port) != 0)
            continue;
        struct sockaddr_storage ss;
        socklen_t sl;
        memset(&ss, 0, sizeof ss);
        if (ip->family == 4) {
            struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
            sin->sin_family = AF_INET;
            sin->sin_port = htons((uint16_t)c->t.port);
            memcpy(&sin->sin_addr, ip->b, 4);
            sl = sizeof *sin;
        } else {
            struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
            sin6->sin6_family = AF_INET6;
            sin6->sin6_port = htons((uint16_t)c->t.port);
            memcpy(&sin6->sin6_addr, ip->b, 16);
            sl = sizeof *sin6;
        }
        int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        int rc;
        do
            rc = connect(fd, (struct sockaddr *)&ss, sl);
        while (rc < 0 && errno == EINTR);
        if (rc < 0 && errno != EINPROGRESS) {
            close(fd);
            continue;
        }
        c->ufd = fd;
        c->uw = tk_ev_io_add(c->e->loop, fd, TK_EV_WRITE, on_upstream, c);
        if (!c->uw) {
            close(fd);
            c->ufd = -1;
            continue;
        }
        c->state = S_CONNECT;
        tk_ev_timer_rearm(c->timer, conn_timeout_ms(c));
        conn_update(c);
        return;
    }
    char r[TK_SSRF_REASON_MAX];
    snprintf(r, sizeof r, "could not connect to %s port %d (%zu address%s tried)", c->t.host,
             c->t.port, c->t.naddrs, c->t.naddrs == 1 ? "" : "es");
    conn_answer(c, 502, "connect_failed", r);
}

/* Connected: the tunnel's answer, or the request sent on. */
static void connected(conn *c)
{
    c->state = S_RELAY;
    if (c->l && !c->relayed_counted) {
        c->l->st.relayed++;
        c->relayed_counted = 1;
    }
    tk_egress_req *r = c->req;
    size_t extra = c->hlen - r->head_len; /* bytes after the head */
    if (r->kind == TK_EGRESS_REQ_CONNECT) {
        static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
        memcpy(c->u2c.b, ok, sizeof ok - 1);
        c->u2c.len = sizeof ok - 1;
        c->u2c.off = 0;
        memcpy(c->c2u.b, c->head + r->head_len, extra);
        c->c2u.len = extra;
        c->c2u.off = 0;
        c->body_left = 1;
    } else {
        tk_arena *a = tk_arena_new(4 * TK_URL_MAX + 4096);
        tk_url u;
        size_t n = 0;
        if (tk_url_parse(a, c->t.url, strlen(c->t.url), &u, NULL) != TK_OK) {
            tk_arena_free(a);
            conn_answer(c, 400, "bad_url", "the URL could not be parsed again");
            return;
        }
        const char *authority = u.origin + strlen(u.scheme) + 3;
        int w = snprintf(c->c2u.b, PIPE_CAP, "%s %s HTTP/1.%d\r\nHost: %s\r\n", r->method, u.path,
                         r->minor, authority);
        n = w > 0 ? (size_t)w : 0;
        tk_arena_free(a);
        for (size_t i = 0; i < r->nkeep && n + r->keep[i].n < PIPE_CAP - 64; i++) {
            memcpy(c->c2u.b + n, r->keep[i].p, r->keep[i].n);
            n += r->keep[i].n;
        }
        static const char tail[] = "Connection: close\r\n\r\n";
        memcpy(c->c2u.b + n, tail, sizeof tail - 1);
        n += sizeof tail - 1;
        long long body = r->content_length > 0 ? r->content_length : 0;
        size_t take = (long long)extra < body ? extra : (size_t)body;
        if (take > PIPE_CAP - n)
            take = PIPE_CAP - n; /* cannot happen: the head cap is half the buffer */
        memcpy(c->c2u.b + n, c->head + r->head_len, take);
        n += take;
        c->c2u.len = n;
        c->c2u.off = 0;
        c->body_left = body - (long long)take;
    }
    free(c->head);
    c->head = NULL;
    tk_ev_timer_rearm(c->timer, conn_timeout_ms(c));
    conn_update(c);
}

/* One side's event during the relay: read from it into its pipe, write the
 * other pipe to it. client: the side is the client's. */
static void relay_event(conn *c, int fd, int revents, int client)
{
    pipebuf *in = client ? &c->c2u : &c->u2c, *out = client ? &c->u2c : &c->c2u;
    int *eof = client ? &c->c_eof : &c->u_eof;
    int body = client && c->req->kind == TK_EGRESS_REQ_HTTP; /* reads only the body */
    if (revents & (TK_EV_READ | TK_EV_ERROR)) {
        if (!*eof && in->len < PIPE_CAP && !(body && c->body_left <= 0)) {
            size_t room = cap_room(c, PIPE_CAP);
            if (body && (long long)room > c->body_left)
                room = (size_t)c->body_left;
            if (room == 0) {
                byte_cap_reached(c);
                return;
            }
            ssize_t n = read_into(fd, in, room);
            if (n > 0) {
                count_bytes(c, (size_t)n);
                if (body)
                    c->body_left -= n;
                tk_ev_timer_rearm(c->timer, conn_timeout_ms(c));
                /* on at once: the other side is usually writable, which saves
                 * a turn of the loop and two changes of interest per chunk */
                int dst = client ? c->ufd : c->cfd;
                if (dst >= 0 && write_from(dst, in) != 0) {
                    relay_failed(c);
                    return;
                }
            } else if (n == 0) {
                *eof = 1;
            } else if (n == -2) {
                relay_failed(c);
                return;
            }
        } else if (revents & TK_EV_ERROR) {
            /* hung up (or failed) while we were not reading from it: a client
             * is gone; upstream sends nothing more and can take nothing more */
            if (client || out->len > out->off) {
                relay_failed(c);
                return;
            }
            *eof = 1;
            tk_ev_io_del(c->uw); /* level-triggered: stop hearing it */
            c->uw = NULL;
            conn_update(c);
            return;
        }
    }
    if ((revents & TK_EV_WRITE) && out->len > out->off) {
        if (write_from(fd, out) != 0) {
            relay_failed(c);
            return;
        }
        tk_ev_timer_rearm(c->timer, conn_timeout_ms(c));
    }
    conn_update(c);
}

static void on_upstream(tk_ev_io *w, int fd, int revents, void *ud)
{
    conn *c = ud;
    (void)w;
    if (c->state == S_CONNECT) {
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr != 0) {
            tk_ev_io_del(c->uw);
            c->uw = NULL;
            close(c->ufd);
            c->ufd = -1;
            try_connect(c);
            return;
        }
        connected(c);
        return;
    }
    if (c->state == S_RELAY)
        relay_event(c, fd, revents, 0);
}

static void on_client(tk_ev_io *w, int fd, int revents, void *ud)
{
    conn *c = ud;
    (void)w;
    switch (c->state) {
    case S_HEAD:
        if (revents & (TK_EV_READ | TK_EV_ERROR))
            head_read(c);
        return;
    case S_ANSWER:
        if (c->u2c.len > c->u2c.off) {
            if (write_from(fd, &c->u2c) != 0) {
                conn_end(c);
                return;
            }
            if (c->u2c.len == 0)
                shutdown(fd, SHUT_WR);
        } else if (revents & (TK_EV_READ | TK_EV_ERROR)) {
            char junk[4096];
            ssize_t n = recv(fd, junk, sizeof junk, 0);
            if (n > 0)
                c->drained += (size_t)n;
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) || c->drained > DRAIN_MAX) {
                conn_end(c);
                return;
            }
        }
        conn_update(c);
        return;
    case S_RELAY:
        relay_event(c, fd, revents, 1);
        return;
    default:
        if (revents & TK_EV_ERROR) /* hung up during a connect */
            conn_end(c);
        return;
    }
}

/* --- accepting --- */

static void refuse_at_accept(tk_egress_listener *l, int fd, const char *code, const char *reason)
{
    char buf[1024];
    size_t n = format_answer(buf, sizeof buf, 403, code, reason);
    ssize_t w = send(fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)w;
    shutdown(fd, SHUT_WR);
    close(fd);
    l->st.refused++;
    snprintf(l->st.last_refusal, sizeof l->st.last_refusal, "%s", code);
    log_refusal(l->e, l->tag, 403, code, NULL, reason);
}

static void on_backoff(tk_ev_timer *t, void *ud)
{
    tk_egress_listener *l = ud;
    (void)t;
    tk_ev_timer_del(l->backoff);
    l->backoff = NULL;
    tk_ev_io_modify(l->w, TK_EV_READ);
}

static void on_listener(tk_ev_io *w, int fd, int revents, void *ud)
{
    tk_egress_listener *l = ud;
    (void)w;
    (void)revents;
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK && !l->backoff) {
                /* out of descriptors (or memory): the listener stays readable,
                 * so stop hearing it for a moment instead of spinning */
                tk_warn("egress", "msg=\"accept failed; pausing\" listener=\"%s\" errno=%d", l->tag,
                        errno);
                tk_ev_io_modify(l->w, 0);
                l->backoff = tk_ev_timer_add(l->e->loop, 200, on_backoff, l);
            }
            return;
        }
        l->st.conns_total++;
        if (l->caps.max_conns && l->st.conns >= l->caps.max_conns) {
            char r[128];
            snprintf(r, sizeof r, "more than %u connections at once (EGRESS_MAX_CONNS)",
                     l->caps.max_conns);
            refuse_at_accept(l, cfd, "conn_cap", r);
            continue;
        }
        conn *c = tk_calloc(1, sizeof *c);
        c->l = l;
        c->e = l->e;
        c->cfd = cfd;
        c->ufd = -1;
        c->state = S_HEAD;
        c->head = tk_malloc(TK_EGRESS_MAX_HEAD);
        c->c2u.b = tk_malloc(PIPE_CAP);
        c->u2c.b = tk_malloc(PIPE_CAP);
        c->cw = tk_ev_io_add(l->e->loop, cfd, TK_EV_READ, on_client, c);
        c->timer = tk_ev_timer_add(l->e->loop, l->e->cfg.head_timeout_ms, on_timer, c);
        conn_link(c, &l->conns);
        l->st.conns++;
        if (!c->cw) {
            conn_end(c);
            continue;
        }
    }
}

/* --- calls made on the loop, waited for --- */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    void (*fn)(void *);
    void *ud;
} sync_call;

static void sync_run(void *ud)
{
    sync_call *s = ud;
    s->fn(s->ud);
    pthread_mutex_lock(&s->mu);
    s->done = 1;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void on_loop(tk_egress *e, void (*fn)(void *), void *ud)
{
    if (tk_evloop_on_loop(e->loop)) {
        fn(ud);
        return;
    }
    sync_call s = {.done = 0, .fn = fn, .ud = ud};
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    tk_evloop_post(e->loop, sync_run, &s);
    pthread_mutex_lock(&s.mu);
    while (!s.done)
        pthread_cond_wait(&s.cv, &s.mu);
    pthread_mutex_unlock(&s.mu);
    pthread_cond_destroy(&s.cv);
    pthread_mutex_destroy(&s.mu);
}

struct add_args {
    tk_egress *e;
    tk_egress_listener *l;
    int ok;
};

static void add_on_loop(void *ud)
{
    struct add_args *a = ud;
    tk_egress_listener *l = a->l;
    if (a->e->stopping)
        return;
    l->w = tk_ev_io_add(a->e->loop, l->fd, TK_EV_READ, on_listener, l);
    if (!l->w)
        return;
    l->prev = NULL;
    l->next = a->e->listeners;
    if (l->next)
        l->next->prev = l;
    a->e->listeners = l;
    a->ok = 1;
}

tk_egress_listener *tk_egress_add_listener(tk_egress *e, int listen_fd, const char *tag,
                                           const tk_egress_caps *caps)
{
    int fl = fcntl(listen_fd, F_GETFL);
    if (fl < 0 || fcntl(listen_fd, F_SETFL, fl | O_NONBLOCK) != 0) {
        close(listen_fd);
        return NULL;
    }
    tk_egress_listener *l = tk_calloc(1, sizeof *l);
    l->e = e;
    l->fd = listen_fd;
    snprintf(l->tag, sizeof l->tag, "%s", tag ? tag : "-");
    if (caps)
        l->caps = *caps;
    struct add_args a = {e, l, 0};
    on_loop(e, add_on_loop, &a);
    if (!a.ok) {
        close(listen_fd);
        free(l);
        return NULL;
    }
    tk_debug("egress", "msg=\"listener added\" listener=\"%s\" max_bytes=%llu max_conns=%u", l->tag,
             (unsigned long long)l->caps.max_bytes, l->caps.max_conns);
    return l;
}

static void remove_on_loop(void *ud)
{
    tk_egress_listener *l = ud;
    tk_egress *e = l->e;
    while (l->conns)
        conn_end(l->conns);
    if (l->backoff)
        tk_ev_timer_del(l->backoff);
    if (l->w)
        tk_ev_io_del(l->w);
    close(l->fd);
    if (l->prev)
        l->prev->next = l->next;
    else
        e->listeners = l->next;
    if (l->next)
        l->next->prev = l->prev;
    free(l);
}

void tk_egress_remove_listener(tk_egress *e, tk_egress_listener *l)
{
    if (l)
        on_loop(e, remove_on_loop, l);
}

struct stats_args {
    tk_egress_listener *l;
    tk_egress_stats *out;
};

static void stats_on_loop(void *ud)
{
    struct stats_args *a = ud;
    *a->out = a->l->st;
}

void tk_egress_listener_stats(tk_egress *e, tk_egress_listener *l, tk_egress_stats *out)
{
    struct stats_args a = {l, out};
    on_loop(e, stats_on_loop, &a);
}

tk_egress *tk_egress_start(const tk_egress_config *cfg, char *err, size_t errlen)
{
    if (!cfg || !cfg->policy) {
        snprintf(err, errlen, "the egress proxy needs a policy");
        return NULL;
    }
    tk_egress *e = tk_calloc(1, sizeof *e);
    e->cfg = *cfg;
    if (e->cfg.head_timeout_ms <= 0)
        e->cfg.head_timeout_ms = 10000;
    if (e->cfg.connect_timeout_ms <= 0)
        e->cfg.connect_timeout_ms = 10000;
    if (e->cfg.idle_timeout_ms <= 0)
        e->cfg.idle_timeout_ms = 300000;
    if (e->cfg.lookup_threads == 0)
        e->cfg.lookup_threads = 4;
    if (e->cfg.log_per_sec == 0)
        e->cfg.log_per_sec = 10;
    else if (e->cfg.log_per_sec < 0)
        e->cfg.log_per_sec = 0; /* none */
    e->loop = tk_evloop_new();
    e->pool = tk_workpool_new("egress-dns", e->cfg.lookup_threads, LOOKUP_QUEUE);
    if (tk_evloop_start(e->loop, "egress") != TK_OK) {
        snprintf(err, errlen, "could not start the egress proxy's thread");
        tk_workpool_free(e->pool);
        tk_evloop_free(e->loop);
        free(e);
        return NULL;
    }
    return e;
}

static void stop_on_loop(void *ud)
{
    tk_egress *e = ud;
    e->stopping = 1;
    while (e->listeners)
        remove_on_loop(e->listeners);
}

void tk_egress_stop(tk_egress *e)
{
    if (!e)
        return;
    on_loop(e, stop_on_loop, e);
    /* checks still running finish; their completions free the orphans */
    tk_workpool_free(e->pool);
    tk_evloop_stop(e->loop);
    tk_evloop_join(e->loop);
    while (e->orphans) { /* completions the loop did not run */
        conn *c = e->orphans;
        e->orphans = c->next;
        conn_free(c);
    }
    tk_evloop_free(e->loop);
    free(e);
}
