/*
 * ssrf_fetch.c — the checked fetch (ssrf.h): every hop checked in full by
 * tk_ssrf_check_until, curl pinned to the admitted addresses, each connect()
 * verified again by tk_ssrf_target_admits, redirects followed here.
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "lib/arena.h"
#include "lib/httpc.h"
#include "lib/log.h"
#include "lib/ssrf.h"
#include "lib/tktime.h"

#define MAX_HEADER_BYTES (256u << 10)

struct hop {
    const tk_ssrf_policy *p;
    const tk_ssrf_target *t;
    const tk_ssrf_fetch_opts *o;
    tk_buf *body;
    size_t cap;
    long status;     /* from the last status line */
    tk_buf location; /* Location of the last response */
    size_t header_bytes;
    int is_redirect; /* a 3xx with a Location: its body is not wanted */
    int location_too_long;
    int redirect_abort, truncated, too_big, cancelled;
    int pin_violation, hook_refused;
    char refused_addr[48];
};

static int redirect_status(long s)
{
    return s == 301 || s == 302 || s == 303 || s == 307 || s == 308;
}

static int sockaddr_ip(const struct sockaddr *sa, socklen_t len, tk_ip *ip, int *port)
{
    memset(ip, 0, sizeof *ip);
    if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        struct sockaddr_in sin;
        memcpy(&sin, sa, sizeof sin);
        ip->family = 4;
        memcpy(ip->b, &sin.sin_addr, 4);
        *port = ntohs(sin.sin_port);
        return 1;
    }
    if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 sin6;
        memcpy(&sin6, sa, sizeof sin6);
        ip->family = 6;
        memcpy(ip->b, &sin6.sin6_addr, 16);
        *port = ntohs(sin6.sin6_port);
        return 1;
    }
    return 0;
}

/* Right before connect(): the address must be one the check admitted, for the
 * port checked, and must pass the address rules again. */
static curl_socket_t open_cb(void *ud, curlsocktype purpose, struct curl_sockaddr *ca)
{
    struct hop *x = ud;
    tk_ip ip;
    int port = 0;
    if (purpose != CURLSOCKTYPE_IPCXN || !sockaddr_ip(&ca->addr, ca->addrlen, &ip, &port)) {
        x->pin_violation = 1;
        snprintf(x->refused_addr, sizeof x->refused_addr, "a non-IP socket");
        return CURL_SOCKET_BAD;
    }
    tk_ip_format(&ip, x->refused_addr, sizeof x->refused_addr);
    if (!tk_ssrf_target_admits(x->p, x->t, &ip, port)) {
        x->pin_violation = 1;
        tk_warn("ssrf", "msg=\"connect refused: not a checked address\" host=%s addr=%s port=%d",
                x->t->host, x->refused_addr, port);
        return CURL_SOCKET_BAD;
    }
    if (x->p->on_connect && x->p->on_connect(x->p->connect_ud, &ip, port) != 0) {
        x->hook_refused = 1;
        return CURL_SOCKET_BAD;
    }
    x->refused_addr[0] = '\0';
    return socket(ca->family, ca->socktype | SOCK_CLOEXEC, ca->protocol);
}

static size_t write_cb(char *data, size_t size, size_t nmemb, void *ud)
{
    struct hop *x = ud;
    size_t n = size * nmemb;
    if (x->is_redirect) {
        x->redirect_abort = 1;
        return 0;
    }
    if (x->body->len + n > x->cap) {
        if (x->o->allow_truncation) {
            size_t room = x->cap - x->body->len;
            if (room && tk_buf_append(x->body, data, room) != TK_OK)
                x->too_big = 1;
            x->truncated = 1;
        } else {
            x->too_big = 1;
        }
        return 0;
    }
    if (tk_buf_append(x->body, data, n) != TK_OK) {
        x->too_big = 1;
        return 0;
    }
    return n;
}

static size_t header_cb(char *data, size_t size, size_t nmemb, void *ud)
{
    struct hop *x = ud;
    size_t n = size * nmemb;
    x->header_bytes += n;
    if (x->header_bytes > MAX_HEADER_BYTES)
        return 0;
    if (n >= 5 && strncasecmp(data, "HTTP/", 5) == 0) {
        /* A new response (after a 1xx): start over. */
        const char *sp = memchr(data, ' ', n);
        long st = 0;
        if (sp) {
            size_t k = (size_t)(sp - data) + 1;
            for (int d = 0; d < 3 && k < n && data[k] >= '0' && data[k] <= '9'; d++, k++)
                st = st * 10 + (data[k] - '0');
        }
        x->status = st;
        x->is_redirect = 0;
        x->location_too_long = 0;
        tk_buf_reset(&x->location);
        return n;
    }
    if (n >= 9 && strncasecmp(data, "location:", 9) == 0) {
        const char *v = data + 9;
        size_t vl = n - 9;
        while (vl && (*v == ' ' || *v == '\t')) {
            v++;
            vl--;
        }
        while (vl &&
               (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' ' || v[vl - 1] == '\t'))
            vl--;
        tk_buf_reset(&x->location);
        x->location_too_long = tk_buf_append(&x->location, v, vl) != TK_OK;
        return n;
    }
    if ((n == 2 && data[0] == '\r') || (n == 1 && data[0] == '\n'))
        x->is_redirect =
            redirect_status(x->status) && (x->location.len > 0 || x->location_too_long);
    return n;
}

static int progress_cb(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    struct hop *x = ud;
    if (x->o->cancel && *x->o->cancel) {
        x->cancelled = 1;
        return 1;
    }
    return 0;
}

static int header_is_host(const char *h)
{
    while (*h == ' ' || *h == '\t')
        h++;
    if (strncasecmp(h, "host", 4) != 0)
        return 0;
    h += 4;
    while (*h == ' ' || *h == '\t')
        h++;
    return *h == ':';
}

static tk_status set_result(tk_ssrf_result *r, tk_ssrf_code code, tk_status st, const char *fmt,
                            ...) __attribute__((format(printf, 4, 5)));
static tk_status set_result(tk_ssrf_result *r, tk_ssrf_code code, tk_status st, const char *fmt,
                            ...)
{
    r->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->reason, sizeof r->reason, fmt, ap);
    va_end(ap);
    return st;
}

static void copy_text(char *out, size_t outlen, const char *s)
{
    size_t j = 0;
    for (; s && *s && j + 1 < outlen; s++) {
        unsigned char c = (unsigned char)*s;
        out[j++] = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
    }
    out[j] = '\0';
}

/*
 * One request to a checked target. Returns TK_OK with a response (x->status,
 * x->location), or an error already set in r.
 */
static tk_status do_hop(const tk_ssrf_policy *p, const tk_ssrf_target *t, const char *method,
                        const tk_ssrf_fetch_opts *o, int send_headers, long remaining_ms,
                        long timeout_ms, size_t cap, struct hop *x, tk_ssrf_result *r,
                        tk_ssrf_hop *hop)
{
    tk_status st = TK_OK;
    char errbuf[CURL_ERROR_SIZE] = "";
    struct curl_slist *resolve = NULL, *headers = NULL;
    CURL *c = curl_easy_init();
    if (!c)
        tk_oom();

    memset(x, 0, sizeof *x);
    x->p = p;
    x->t = t;
    x->o = o;
    x->body = &r->body;
    x->cap = cap;
    tk_buf_init(&x->location, TK_URL_MAX);
    tk_buf_reset(&r->body);
    r->truncated = 0;

    if (t->host_type == TK_HOST_NAME) {
        /* Pin: curl resolves nothing itself; it connects to these or to nothing. */
        tk_buf pin;
        tk_buf_init(&pin, TK_CAP_TARGET);
        tk_buf_printf(&pin, "%s:%d:", t->host, t->port);
        for (size_t i = 0; i < t->naddrs; i++) {
            char a[48];
            tk_ip_format(&t->addrs[i], a, sizeof a);
            tk_buf_printf(&pin, t->addrs[i].family == 6 ? "%s[%s]" : "%s%s", i ? "," : "", a);
        }
        resolve = curl_slist_append(NULL, tk_buf_cstr(&pin));
        tk_buf_free(&pin);
        if (!resolve)
            tk_oom();
        curl_easy_setopt(c, CURLOPT_RESOLVE, resolve);
    }
    if (send_headers)
        for (const char *const *h = o->headers; h && *h; h++)
            if (!header_is_host(*h))
                headers = curl_slist_append(headers, *h);
    headers = curl_slist_append(headers, "Expect:");

    curl_easy_setopt(c, CURLOPT_URL, t->url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 0L);
    curl_easy_setopt(c, CURLOPT_PROXY, "");
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_cb);
    curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, x);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_cb);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, progress_cb);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, x);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_USERAGENT, o->user_agent ? o->user_agent : "tusko/" TUSKO_VERSION);
    curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, remaining_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, TK_MIN(remaining_ms, 10000L));
    int head = strcmp(method, "HEAD") == 0;
    if (!o->allow_truncation && !head) /* refuse early on a Content-Length over the cap */
        curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)cap);
    if (head)
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    else
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);

    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    hop->status = status;
    char *pip = NULL;
    tk_ip cip;
    if (curl_easy_getinfo(c, CURLINFO_PRIMARY_IP, &pip) == CURLE_OK && pip &&
        tk_ip_parse(pip, &cip))
        tk_ip_format(&cip, hop->address, sizeof hop->address);
    char *ct = NULL;
    if (curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK && ct)
        copy_text(r->content_type, sizeof r->content_type, ct);
    else
        r->content_type[0] = '\0';
    x->status = status ? status : x->status;

    if (rc == CURLE_OK ||
        (rc == CURLE_WRITE_ERROR && (x->redirect_abort || x->truncated) && !x->too_big)) {
        st = TK_OK;
    } else if (x->pin_violation) {
        st = set_result(r, TK_SSRF_BLOCKED_ADDRESS, TK_EDENIED,
                        "the connection to %s was refused: not an address the check admitted "
                        "for %s",
                        x->refused_addr, t->host);
    } else if (x->hook_refused) {
        st = set_result(r, TK_SSRF_FETCH_FAILED, TK_ERROR, "the connect hook refused %s port %d",
                        x->refused_addr, t->port);
    } else if (x->cancelled) {
        st = set_result(r, TK_SSRF_CANCELLED, TK_ECLOSED, "the fetch was cancelled");
    } else if (x->too_big || rc == CURLE_FILESIZE_EXCEEDED) {
        st = set_result(r, TK_SSRF_TOO_LARGE, TK_ETOOBIG,
                        "the response body of %s is larger than %zu bytes", t->url, cap);
    } else if (rc == CURLE_OPERATION_TIMEDOUT) {
        st = set_result(r, TK_SSRF_TIMEOUT, TK_ETIMEOUT,
                        "no complete response from %s within %ld ms (the fetch's time limit)",
                        t->url, timeout_ms);
    } else {
        st = set_result(r, TK_SSRF_FETCH_FAILED, TK_ERROR, "%s: %s", t->url,
                        errbuf[0] ? errbuf : curl_easy_strerror(rc));
    }
    r->truncated = x->truncated && st == TK_OK;
    curl_slist_free_all(headers);
    curl_slist_free_all(resolve);
    curl_easy_cleanup(c);
    return st;
}

tk_status tk_ssrf_fetch(const tk_ssrf_policy *p, const char *url, const tk_ssrf_fetch_opts *opts,
                        tk_ssrf_result *r)
{
    static const tk_ssrf_fetch_opts defaults;
    const tk_ssrf_fetch_opts *o = opts ? opts : &defaults;
    int64_t start = tk_mono_ms();
    memset(r, 0, sizeof *r);
    size_t cap = o->max_bytes   ? o->max_bytes
                 : p->max_bytes ? p->max_bytes
                                : TK_SSRF_DEFAULT_MAX_BYTES;
    tk_buf_init(&r->body, cap);
    long timeout = o->timeout_ms > 0   ? o->timeout_ms
                   : p->timeout_ms > 0 ? p->timeout_ms
                                       : TK_SSRF_DEFAULT_TIMEOUT_MS;
    int max_redirects = o->max_redirects == TK_SSRF_NO_REDIRECTS ? 0
                        : o->max_redirects > 0                   ? o->max_redirects
                                                                 : p->max_redirects;
    max_redirects = TK_MAX(0, TK_MIN(max_redirects, TK_SSRF_MAX_REDIRECTS));
    const char *method = o->method ? o->method : "GET";
    tk_httpc_global_init();

    tk_status st;
    tk_arena *a = tk_arena_new(0);
    tk_ssrf_target t;
    memset(&t, 0, sizeof t);
    char *first_origin = NULL;
    const char *next = url;
    struct hop x;
    memset(&x, 0, sizeof x);

    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        st = set_result(r, TK_SSRF_FETCH_FAILED, TK_EINVAL,
                        "only GET and HEAD are supported by the checked fetch");
        goto out;
    }
    for (const char *const *hd = o->headers; hd && *hd; hd++) {
        if (strpbrk(*hd, "\r\n") || !strchr(*hd, ':')) {
            st = set_result(r, TK_SSRF_FETCH_FAILED, TK_EINVAL,
                            "a request header is not one \"Name: value\" line");
            goto out;
        }
    }
    for (size_t h = 0;; h++) {
        st = tk_ssrf_check_until(p, next, start + timeout, timeout, &t);
        if (st != TK_OK) {
            if (h == 0) {
                set_result(r, t.code, st, "%s", t.reason);
                r->final_url = t.url ? tk_strdup(t.url) : NULL;
            } else if (t.code == TK_SSRF_TIMEOUT) { /* the redirect target's lookup */
                set_result(r, t.code, st, "%s", t.reason);
            } else {
                r->cause = t.code;
                set_result(r, TK_SSRF_REDIRECT_BLOCKED, TK_EDENIED,
                           "the redirect from %s to %s was refused: %s (%s)", r->hops[h - 1].url,
                           t.url ? t.url : "an invalid URL", t.reason, tk_ssrf_code_str(t.code));
                st = TK_EDENIED;
            }
            break;
        }
        tk_url cur;
        if (tk_url_parse(a, t.url, strlen(t.url), &cur, NULL) != TK_OK) {
            st = set_result(r, TK_SSRF_BAD_URL, TK_EDENIED, "the URL could not be parsed again");
            break;
        }
        if (h == 0)
            first_origin = tk_arena_strdup(a, cur.origin);
        int64_t remaining = timeout - (tk_mono_ms() - start);
        if (remaining <= 0) {
            st = set_result(r, TK_SSRF_TIMEOUT, TK_ETIMEOUT,
                            "no complete response within %ld ms (the fetch's time limit)", timeout);
            break;
        }
        tk_ssrf_hop *hop = &r->hops[r->nhops++];
        hop->url = tk_strdup(t.url);
        free(r->final_url);
        r->final_url = tk_strdup(t.url);
        int same_origin = strcmp(cur.origin, first_origin) == 0;
        st = do_hop(p, &t, method, o, same_origin, (long)remaining, timeout, cap, &x, r, hop);
        r->status = hop->status;
        if (st != TK_OK)
            break;
        if (!x.is_redirect) {
            set_result(r, TK_SSRF_OK, TK_OK, "fetched %s (status %ld)", t.url, r->status);
            break;
        }
        /* A redirect: resolve the Location and check the target in full. */
        tk_url target;
        tk_url_err ue;
        if (x.location_too_long ||
            tk_url_resolve(a, &cur, x.location.data, x.location.len, &target, &ue) != TK_OK) {
            char shown[96];
            tk_str_snip(shown, sizeof shown, tk_buf_cstr(&x.location), x.location.len);
            r->cause = x.location_too_long ? TK_SSRF_BAD_URL : tk_ssrf_url_fault_code(ue.fault);
            st = set_result(r, TK_SSRF_REDIRECT_BLOCKED, TK_EDENIED,
                            "the redirect from %s to \"%s\" was refused: %s (%s)", t.url, shown,
                            x.location_too_long ? "the Location is too long" : ue.reason,
                            tk_ssrf_code_str(r->cause));
            break;
        }
        if (h >= (size_t)max_redirects) {
            st = set_result(r, TK_SSRF_TOO_MANY_REDIRECTS, TK_EDENIED,
                            "more than %d redirect%s (the next was to %s)", max_redirects,
                            max_redirects == 1 ? "" : "s", target.href);
            break;
        }
        if (r->status == 303)
            method = strcmp(method, "HEAD") == 0 ? "HEAD" : "GET";
        next = target.href;
        tk_buf_free(&x.location);
        tk_ssrf_target_free(&t);
    }
out:
    if (r->code != TK_SSRF_OK)
        tk_info("ssrf", "msg=\"fetch failed\" code=%s cause=%s host=%s", tk_ssrf_code_str(r->code),
                r->code == TK_SSRF_REDIRECT_BLOCKED ? tk_ssrf_code_str(r->cause) : "-",
                t.host[0] ? t.host : "-");
    if (r->code != TK_SSRF_OK || r->status == 0 || x.is_redirect)
        tk_buf_reset(&r->body);
    tk_buf_free(&x.location);
    tk_ssrf_target_free(&t);
    tk_arena_free(a);
    r->elapsed_ms = tk_mono_ms() - start;
    return st;
}

void tk_ssrf_result_free(tk_ssrf_result *r)
{
    for (size_t i = 0; i < r->nhops; i++)
        free(r->hops[i].url);
    r->nhops = 0;
    free(r->final_url);
    r->final_url = NULL;
    tk_buf_free(&r->body);
}
