#include "lib/httpc.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "lib/json.h"

struct xfer {
    const tk_httpc_req *req;
    tk_httpc_resp *resp;
    tk_sse_parser sse;
    int too_big, stopped, cancelled;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

void tk_httpc_global_init(void)
{
    pthread_once(&curl_once, curl_init_once);
}

static size_t write_cb(char *p, size_t size, size_t nmemb, void *ud)
{
    struct xfer *x = ud;
    size_t n = size * nmemb;
    if (x->req->on_sse) {
        tk_status st = tk_sse_feed(&x->sse, p, n);
        if (st == TK_ETOOBIG) {
            x->too_big = 1;
            return 0;
        }
        if (st == TK_AGAIN) {
            x->stopped = 1;
            return 0;
        }
        return n;
    }
    if (x->req->on_data) {
        if (x->req->on_data(p, n, x->req->ud) != 0) {
            x->stopped = 1;
            return 0;
        }
        return n;
    }
    if (tk_buf_append(&x->resp->body, p, n) != TK_OK) {
        x->too_big = 1;
        return 0;
    }
    return n;
}

static size_t header_cb(char *p, size_t size, size_t nmemb, void *ud)
{
    struct xfer *x = ud;
    size_t n = size * nmemb;
    /* A new status line (after a 100 Continue) starts the header set again. */
    if (n >= 5 && strncmp(p, "HTTP/", 5) == 0)
        tk_buf_reset(&x->resp->headers);
    if (tk_buf_append(&x->resp->headers, p, n) != TK_OK)
        return 0;
    return n;
}

static int progress_cb(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    struct xfer *x = ud;
    if (x->req->cancel && *x->req->cancel) {
        x->cancelled = 1;
        return 1;
    }
    return 0;
}

/* a shared connection cache (tk_httpc_share_new below) */
struct tk_httpc_share {
    CURLSH *sh;
    pthread_mutex_t mu[CURL_LOCK_DATA_LAST];
};

tk_status tk_httpc_do(const tk_httpc_req *req, tk_httpc_resp *resp)
{
    tk_httpc_global_init();
    memset(resp, 0, sizeof *resp);
    tk_buf_init(&resp->body, req->max_response ? req->max_response : 8u << 20);
    tk_buf_init(&resp->headers, TK_CAP_HEADERS);
    struct xfer x = {.req = req, .resp = resp};
    if (req->on_sse)
        tk_sse_parser_init(&x.sse, 1 << 20, req->max_event ? req->max_event : 1 << 20, req->on_sse,
                           req->ud);
    CURL *c = curl_easy_init();
    if (!c)
        tk_oom();
    struct curl_slist *hl = NULL;
    for (const char *const *h = req->headers; h && *h; h++)
        hl = curl_slist_append(hl, *h);
    if (req->body && !req->headers)
        hl = curl_slist_append(hl, "Content-Type: application/json");
    hl = curl_slist_append(hl, "Expect:");
    curl_easy_setopt(c, CURLOPT_URL, req->url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_cb);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &x);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, progress_cb);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &x);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, resp->error);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "tusko/" TUSKO_VERSION);
    long to = req->timeout_ms == 0 ? 30000 : req->timeout_ms;
    if (to > 0)
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, to);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                     req->connect_timeout_ms ? req->connect_timeout_ms : 10000L);
    if (req->unix_socket)
        curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, req->unix_socket);
    if (req->ca_file)
        curl_easy_setopt(c, CURLOPT_CAINFO, req->ca_file);
    if (req->share)
        curl_easy_setopt(c, CURLOPT_SHARE, req->share->sh);
    const char *method = req->method ? req->method : (req->body ? "POST" : "GET");
    if (req->body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, req->body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
    }
    if (strcmp(method, "GET") == 0 && !req->body)
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    else if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    else if (strcmp(method, "POST") != 0 || !req->body)
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);

    CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->status);
    tk_status st = TK_OK;
    if (rc != CURLE_OK) {
        if (x.too_big) {
            st = TK_ETOOBIG;
            snprintf(resp->error, sizeof resp->error, "response larger than the cap");
        } else if (x.stopped) {
            st = TK_AGAIN;
        } else if (x.cancelled) {
            st = TK_ECLOSED;
            snprintf(resp->error, sizeof resp->error, "cancelled");
        } else if (rc == CURLE_OPERATION_TIMEDOUT) {
            st = TK_ETIMEOUT;
        } else {
            st = TK_ERROR;
        }
        if (!resp->error[0])
            snprintf(resp->error, sizeof resp->error, "%s", curl_easy_strerror(rc));
    }
    if (req->on_sse) {
        tk_sse_finish(&x.sse);
        tk_sse_parser_free(&x.sse);
    }
    curl_slist_free_all(hl);
    curl_easy_cleanup(c);
    return st;
}

void tk_httpc_resp_free(tk_httpc_resp *resp)
{
    tk_buf_free(&resp->body);
    tk_buf_free(&resp->headers);
}

const char *tk_httpc_resp_header(const tk_httpc_resp *resp, const char *name, char *out,
                                 size_t outlen)
{
    const char *p = tk_buf_cstr(&resp->headers);
    size_t nl = strlen(name);
    while (*p) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
            const char *v = p + nl + 1;
            size_t vl = len - nl - 1;
            while (vl && (*v == ' ' || *v == '\t')) {
                v++;
                vl--;
            }
            while (vl && (v[vl - 1] == '\r' || v[vl - 1] == ' '))
                vl--;
            snprintf(out, outlen, "%.*s", (int)vl, v);
            return out;
        }
        if (!e)
            break;
        p = e + 1;
    }
    return NULL;
}

tk_status tk_httpc_json(const char *method, const char *url, const char *unix_socket,
                        const char *const *headers, json_t *body, long timeout_ms, long *status,
                        json_t **out, char *err, size_t errlen)
{
    *out = NULL;
    char *payload = body ? tk_json_dumps(body) : NULL;
    json_decref(body);
    const char *hdrs[34];
    size_t k = 0;
    for (const char *const *h = headers; h && *h && k < 30; h++)
        hdrs[k++] = *h;
    hdrs[k++] = "Content-Type: application/json";
    hdrs[k++] = "Accept: application/json";
    hdrs[k] = NULL;
    tk_httpc_req req = {
        .method = method,
        .url = url,
        .unix_socket = unix_socket,
        .headers = hdrs,
        .body = payload,
        .body_len = payload ? strlen(payload) : 0,
        .timeout_ms = timeout_ms,
    };
    tk_httpc_resp resp;
    tk_status st = tk_httpc_do(&req, &resp);
    free(payload);
    *status = resp.status;
    if (st != TK_OK) {
        snprintf(err, errlen, "%s %s: %s", method, url, resp.error);
    } else if (resp.body.len > 0) {
        char jerr[200];
        *out = tk_json_parse(resp.body.data, resp.body.len, resp.body.max, jerr, sizeof jerr);
        if (!*out)
            snprintf(err, errlen, "%s %s: status %ld, body is not JSON (%s)", method, url,
                     resp.status, jerr);
    }
    tk_httpc_resp_free(&resp);
    return st;
}

/* ---------- a shared connection cache ---------- */

static void share_lock(CURL *c, curl_lock_data data, curl_lock_access access, void *ud)
{
    (void)c;
    (void)access;
    pthread_mutex_lock(&((tk_httpc_share *)ud)->mu[data]);
}

static void share_unlock(CURL *c, curl_lock_data data, void *ud)
{
    (void)c;
    pthread_mutex_unlock(&((tk_httpc_share *)ud)->mu[data]);
}

tk_httpc_share *tk_httpc_share_new(void)
{
    tk_httpc_share *s = tk_calloc(1, sizeof *s);
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_init(&s->mu[i], NULL);
    s->sh = curl_share_init();
    if (!s->sh)
        tk_oom();
    curl_share_setopt(s->sh, CURLSHOPT_LOCKFUNC, share_lock);
    curl_share_setopt(s->sh, CURLSHOPT_UNLOCKFUNC, share_unlock);
    curl_share_setopt(s->sh, CURLSHOPT_USERDATA, s);
    curl_share_setopt(s->sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
    curl_share_setopt(s->sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    curl_share_setopt(s->sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    return s;
}

void tk_httpc_share_free(tk_httpc_share *s)
{
    if (!s)
        return;
    curl_share_cleanup(s->sh);
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_destroy(&s->mu[i]);
    free(s);
}
