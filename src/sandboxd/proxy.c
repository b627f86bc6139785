#include "sandboxd/proxy.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/buf.h"
#include "lib/cond.h"
#include "lib/execd_port.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/tktime.h"

#define PROXY_MAX 512

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_active;
static volatile int g_stopping;

typedef struct {
    sbx_service *svc;
    tk_req *req;
    char id[SBX_ID_MAX];
    char sock[108];
    char *url;
    char method[16];
    struct curl_slist *hdrs;
    long status;
    tk_buf rhdrs; /* forwarded response headers, "name\0value\0" pairs */
    char ctype[256];
    tk_stream *stream;
    int client_gone;
} job;

int sbx_proxy_active(void)
{
    pthread_mutex_lock(&g_mu);
    int n = g_active;
    pthread_mutex_unlock(&g_mu);
    return n;
}

void sbx_proxy_shutdown(long timeout_ms)
{
    g_stopping = 1;
    int64_t deadline = tk_mono_ms() + timeout_ms;
    pthread_mutex_lock(&g_mu);
    while (g_active > 0 && tk_mono_ms() < deadline)
        tk_cond_wait_ms(&g_cv, &g_mu, 20);
    pthread_mutex_unlock(&g_mu);
}

/* Request headers that are not passed upstream: hop-by-hop ones, what curl sets
 * itself, and our own credential. */
static int skip_request_header(const char *name)
{
    static const char *const skip[] = {
        "host",
        "connection",
        "keep-alive",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "proxy-authorization",
        "proxy-connection",
        "content-length",
        "expect",
        "open-sandbox-api-key",
        "accept-encoding",
    };
    for (size_t i = 0; i < TK_ARRAY_LEN(skip); i++)
        if (strcasecmp(name, skip[i]) == 0)
            return 1;
    return 0;
}

static int forward_response_header(const char *name)
{
    static const char *const keep[] = {
        "content-disposition", "content-encoding",       "cache-control", "last-modified", "etag",
        "content-language",    "x-content-type-options",
    };
    for (size_t i = 0; i < TK_ARRAY_LEN(keep); i++)
        if (strcasecmp(name, keep[i]) == 0)
            return 1;
    return strncasecmp(name, "x-", 2) == 0 && strcasecmp(name, "x-request-id") != 0;
}

static int add_header(const char *name, const char *value, void *ud)
{
    job *j = ud;
    if (skip_request_header(name))
        return 0;
    if (strpbrk(name, "\r\n") || strpbrk(value, "\r\n"))
        return 0;
    char *line = tk_asprintf("%s: %s", name, value);
    j->hdrs = curl_slist_append(j->hdrs, line);
    free(line);
    return 0;
}

static size_t on_header(char *buf, size_t size, size_t n, void *ud)
{
    job *j = ud;
    size_t len = size * n;
    if (len >= 5 && strncmp(buf, "HTTP/", 5) == 0) {
        /* a new response (after a 100 Continue, say): start over */
        tk_buf_reset(&j->rhdrs);
        j->ctype[0] = '\0';
        const char *sp = memchr(buf, ' ', len);
        j->status = sp ? strtol(sp + 1, NULL, 10) : 0;
        return len;
    }
    const char *colon = memchr(buf, ':', len);
    if (!colon)
        return len;
    size_t nl = (size_t)(colon - buf);
    const char *v = colon + 1;
    size_t vl = len - nl - 1;
    while (vl && (*v == ' ' || *v == '\t')) {
        v++;
        vl--;
    }
    while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
        vl--;
    char name[128];
    if (nl == 0 || nl >= sizeof name)
        return len;
    memcpy(name, buf, nl);
    name[nl] = '\0';
    if (strcasecmp(name, "content-type") == 0) {
        snprintf(j->ctype, sizeof j->ctype, "%.*s", (int)vl, v);
    } else if (forward_response_header(name)) {
        if (tk_buf_append(&j->rhdrs, name, nl + 1) == TK_OK)
            if (tk_buf_append(&j->rhdrs, v, vl) == TK_OK)
                tk_buf_append_byte(&j->rhdrs, '\0');
    }
    return len;
}

static void set_headers(job *j)
{
    for (size_t off = 0; off < j->rhdrs.len;) {
        const char *name = j->rhdrs.data + off;
        const char *val = name + strlen(name) + 1;
        off = (size_t)(val - j->rhdrs.data) + strlen(val) + 1;
        tk_respond_header(j->req, name, val);
    }
}

static size_t on_data(char *buf, size_t size, size_t n, void *ud)
{
    job *j = ud;
    size_t len = size * n;
    if (!j->stream) {
        set_headers(j);
        j->stream = tk_respond_stream(j->req, (int)(j->status ? j->status : 502),
                                      j->ctype[0] ? j->ctype : "application/octet-stream");
    }
    if (tk_stream_write(j->stream, buf, len) != TK_OK) {
        j->client_gone = 1;
        return 0; /* aborts the transfer */
    }
    return len;
}

static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    job *j = ud;
    if (g_stopping)
        return 1;
    if (j->stream && tk_stream_closed(j->stream)) {
        j->client_gone = 1;
        return 1;
    }
    return 0;
}

static void *proxy_main(void *arg)
{
    job *j = arg;
    tk_log_set_request_id(tk_req_id(j->req));
    CURL *c = curl_easy_init();
    if (!c)
        tk_oom();
    size_t blen = 0;
    const char *body = tk_req_body(j->req, &blen);
    curl_easy_setopt(c, CURLOPT_URL, j->url);
    if (j->sock[0])
        curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, j->sock);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http");
    curl_easy_setopt(c, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
    if (strcmp(j->method, "HEAD") == 0) {
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    } else if (strcmp(j->method, "GET") != 0) {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, j->method);
    }
    if (blen > 0 || strcmp(j->method, "POST") == 0 || strcmp(j->method, "PUT") == 0 ||
        strcmp(j->method, "PATCH") == 0) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, blen ? body : "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)blen);
        if (strcmp(j->method, "POST") != 0)
            curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, j->method);
    }
    j->hdrs = curl_slist_append(j->hdrs, "Expect:");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, j->hdrs);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, j);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, j);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, j);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    CURLcode rc = curl_easy_perform(c);
    if (j->stream) {
        if (rc != CURLE_OK && !j->client_gone)
            tk_warn("proxy", "msg=\"upstream transfer ended early\" id=%s error=\"%s\"", j->id,
                    curl_easy_strerror(rc));
        tk_stream_close(j->stream);
    } else if (rc == CURLE_OK) {
        set_headers(j);
        tk_respond(j->req, (int)j->status, j->ctype[0] ? j->ctype : "application/octet-stream", "",
                   0);
    } else {
        tk_respond_error(j->req, 502, "EXECD_UNREACHABLE", "the sandbox's execd did not answer: %s",
                         curl_easy_strerror(rc));
    }
    curl_easy_cleanup(c);
    curl_slist_free_all(j->hdrs);
    sbx_service_proxy_end(j->svc, j->id);
    tk_buf_free(&j->rhdrs);
    free(j->url);
    free(j);
    pthread_mutex_lock(&g_mu);
    g_active--;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
    return NULL;
}

static json_t *policy_status(const sbx_netpol *np)
{
    sbx_netpol open = {.default_allow = 1};
    const sbx_netpol *p = np ? np : &open;
    return tk_json_obj("status", json_string("ok"), "mode",
                       json_string(p->default_allow ? "allow_all" : "deny_all"), "enforcementMode",
                       json_string("proxy"), "policy", sbx_netpol_json(p), NULL);
}

/* /v1/sandboxes/{id}/proxy/18080/policy — GET, PATCH, DELETE of egress-api.yaml
 * on the sandbox's egress proxy (netpol.h), with OPENSANDBOX-EGRESS-AUTH (the
 * endpoint's header for that port). A change holds from the next connection. */
static void egress_api(tk_req *r, sbx_service *svc, const char *id)
{
    const char *rest = tk_req_rest(r), *m = tk_req_method(r);
    if (strcmp(rest, "/policy") != 0) {
        tk_respond_error(r, 404, "NOT_FOUND",
                         "the egress API here serves /policy (the credential vault is not served)");
        return;
    }
    int get = strcmp(m, "GET") == 0, patch = strcmp(m, "PATCH") == 0,
        del = strcmp(m, "DELETE") == 0;
    if (!get && !patch && !del) {
        tk_respond_error(r, 405, "METHOD_NOT_ALLOWED", "/policy takes GET, PATCH or DELETE");
        return;
    }
    json_t *body = NULL;
    if (!get && !(body = tk_req_json(r, 0)))
        return;
    const char *auth = tk_req_header(r, "OPENSANDBOX-EGRESS-AUTH");
    char msg[300];
    pthread_mutex_lock(&svc->mu);
    sbx_sandbox *s = svc->list;
    while (s && strcmp(s->id, id) != 0)
        s = s->next;
    if (!s || s->state == SBX_TERMINATED || s->state == SBX_FAILED || s->state == SBX_POOLED) {
        pthread_mutex_unlock(&svc->mu);
        tk_respond_error(r, 404, "NOT_FOUND", "no sandbox %s", id);
        return;
    }
    if (!s->egress_token[0] || !tk_str_eq_ct(auth, s->egress_token)) {
        pthread_mutex_unlock(&svc->mu);
        tk_respond_error(r, 401, "UNAUTHORIZED",
                         "a valid OPENSANDBOX-EGRESS-AUTH header is required (the egress "
                         "endpoint's)");
        return;
    }
    if (!svc->cfg.rtc.egress && !get) {
        pthread_mutex_unlock(&svc->mu);
        tk_respond_error(
            r, 400, "INVALID_REQUEST",
            "sandboxes have no way out here (SANDBOX_NETWORK=none): no policy to change");
        return;
    }
    tk_status st = TK_OK;
    if (!get) {
        sbx_netpol *np = s->netpol;
        int made = 0;
        if (!np) { /* no policy yet: the open one, to be narrowed */
            np = calloc(1, sizeof *np);
            if (np) {
                np->default_allow = 1;
                made = 1;
            }
        }
        st = !np     ? TK_ERROR
             : patch ? sbx_netpol_patch(np, body, msg, sizeof msg)
                     : sbx_netpol_delete(np, body, msg, sizeof msg);
        if (st == TK_OK && made)
            s->netpol = np;
        else if (made)
            free(np);
        if (st == TK_OK) {
            sbx_service_save_locked(svc, s);
            tk_info("egress", "msg=\"policy changed\" id=%s method=%s rules=%zu default=%s", id, m,
                    s->netpol ? s->netpol->n : 0,
                    s->netpol && !s->netpol->default_allow ? "deny" : "allow");
        }
    }
    json_t *out = st == TK_OK ? policy_status(s->netpol) : NULL;
    if (patch || del) /* the spec's mutation answers carry no policy */
        json_object_del(out, "policy");
    pthread_mutex_unlock(&svc->mu);
    if (st == TK_EINVAL)
        tk_respond_error(r, 400, "INVALID_REQUEST", "%s", msg);
    else if (st != TK_OK)
        tk_respond_error(r, 500, "RUNTIME_ERROR", "the policy could not be changed");
    else
        tk_respond_json(r, 200, out);
}

void sbx_proxy_handle(tk_req *r, void *ud)
{
    sbx_service *svc = ud;
    const char *id = tk_req_param(r, "id"), *port = tk_req_param(r, "port");
    int64_t p;
    if (!port || tk_parse_i64(port, 1, 65535, &p) != TK_OK) {
        tk_respond_error(r, 400, "INVALID_REQUEST", "port must be a number from 1 to 65535");
        return;
    }
    if (p == SBX_EGRESS_API_PORT && id && strlen(id) < SBX_ID_MAX) {
        egress_api(r, svc, id);
        return;
    }
    if (p != TK_EXECD_PORT) {
        tk_respond_error(
            r, 404, "PORT_NOT_SERVED",
            "nothing is reachable on port %lld of a sandbox here: the proxy serves execd on %d",
            (long long)p, TK_EXECD_PORT);
        return;
    }
    if (!id || strlen(id) >= SBX_ID_MAX) {
        tk_respond_error(r, 404, "NOT_FOUND", "no such sandbox");
        return;
    }
    pthread_mutex_lock(&g_mu);
    if (g_stopping || g_active >= PROXY_MAX) {
        pthread_mutex_unlock(&g_mu);
        tk_respond_error(r, 503, "UNAVAILABLE", "too many proxied requests in flight; try again");
        return;
    }
    g_active++;
    pthread_mutex_unlock(&g_mu);
    job *j = tk_calloc(1, sizeof *j);
    j->svc = svc;
    j->req = r;
    snprintf(j->id, sizeof j->id, "%s", id);
    snprintf(j->method, sizeof j->method, "%s", tk_req_method(r));
    tk_buf_init(&j->rhdrs, TK_CAP_HEADERS);
    sbx_service_result res;
    if (sbx_service_proxy_begin(svc, id, j->sock, sizeof j->sock, &res) != TK_OK) {
        if (res.status == 429)
            tk_respond_header(r, "Retry-After", "1");
        tk_respond_error(r, res.status, res.code, "%s", res.message);
        tk_buf_free(&j->rhdrs);
        free(j);
        pthread_mutex_lock(&g_mu);
        g_active--;
        pthread_cond_broadcast(&g_cv);
        pthread_mutex_unlock(&g_mu);
        return;
    }
    const char *qs = tk_req_query_string(r);
    /* execd over TCP (a pod's IP, from the runtime) or its unix socket */
    int tcp = strncmp(j->sock, "tcp:", 4) == 0;
    j->url = tk_asprintf("http://%s%s%s%s", tcp ? j->sock + 4 : "sandbox", tk_req_rest(r),
                         qs[0] ? "?" : "", qs);
    if (tcp)
        j->sock[0] = '\0';
    tk_req_headers_each(r, add_header, j);
    tk_req_defer(r);
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&at, 256 * 1024);
    if (pthread_create(&t, &at, proxy_main, j) != 0) {
        pthread_attr_destroy(&at);
        tk_respond_error(r, 503, "UNAVAILABLE", "cannot start a proxy thread");
        sbx_service_proxy_end(svc, id);
        curl_slist_free_all(j->hdrs);
        tk_buf_free(&j->rhdrs);
        free(j->url);
        free(j);
        pthread_mutex_lock(&g_mu);
        g_active--;
        pthread_cond_broadcast(&g_cv);
        pthread_mutex_unlock(&g_mu);
        return;
    }
    pthread_attr_destroy(&at);
}
