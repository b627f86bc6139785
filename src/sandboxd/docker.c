#include "sandboxd/docker.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "lib/buf.h"
#include "lib/httpc.h"
#include "lib/json.h"
#include "lib/query.h"

struct sbx_docker {
    char host[160];
    char sock[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

sbx_docker *sbx_docker_new(const char *host, char *err, size_t errlen)
{
    if (!host || !*host)
        host = SBX_DOCKER_DEFAULT_HOST;
    const char *path = NULL;
    if (strncmp(host, "unix://", 7) == 0)
        path = host + 7;
    else if (strncmp(host, "unix:", 5) == 0)
        path = host + 5;
    else if (host[0] == '/')
        path = host;
    if (!path) {
        snprintf(err, errlen,
                 "DOCKER_HOST=%s: only a local engine's unix socket is supported "
                 "(unix:///var/run/docker.sock): the docker runtime bind-mounts host folders "
                 "into its containers",
                 host);
        return NULL;
    }
    if (path[0] != '/') {
        snprintf(err, errlen, "DOCKER_HOST=%s: the socket path must be absolute", host);
        return NULL;
    }
    sbx_docker *d = tk_calloc(1, sizeof *d);
    if (strlen(path) >= sizeof d->sock || strlen(host) >= sizeof d->host) {
        snprintf(err, errlen, "DOCKER_HOST=%s: the socket path is too long for a unix socket",
                 host);
        free(d);
        return NULL;
    }
    snprintf(d->sock, sizeof d->sock, "%s", path);
    snprintf(d->host, sizeof d->host, "%s", host);
    return d;
}

void sbx_docker_free(sbx_docker *d)
{
    free(d);
}

const char *sbx_docker_socket(const sbx_docker *d)
{
    return d->sock;
}

const char *sbx_docker_host(const sbx_docker *d)
{
    return d->host;
}

struct call {
    tk_buf body;
    sbx_docker_read_fn rd;
    void *rd_ud;
    int too_big;
    int aborted;
};

static size_t write_cb(char *p, size_t size, size_t nmemb, void *ud)
{
    struct call *c = ud;
    size_t n = size * nmemb;
    if (tk_buf_append(&c->body, p, n) != TK_OK) {
        c->too_big = 1;
        return 0;
    }
    return n;
}

static size_t read_cb(char *p, size_t size, size_t nmemb, void *ud)
{
    struct call *c = ud;
    size_t n = c->rd(p, size * nmemb, c->rd_ud);
    if (n == SBX_DOCKER_READ_ABORT) {
        c->aborted = 1;
        return CURL_READFUNC_ABORT;
    }
    return n;
}

/* Performs one request; the response body lands in c->body. */
static tk_status perform(sbx_docker *d, const char *method, const char *path, const char *ctype,
                         const char *payload, size_t plen, struct call *c, long timeout_ms,
                         long *status, char *err, size_t errlen)
{
    tk_httpc_global_init();
    *status = 0;
    CURL *h = curl_easy_init();
    if (!h)
        tk_oom();
    char url[2048], errbuf[CURL_ERROR_SIZE] = "", hdr[128];
    if ((size_t)snprintf(url, sizeof url, "http://docker%s", path) >= sizeof url) {
        curl_easy_cleanup(h);
        snprintf(err, errlen, "docker: request path too long");
        return TK_EINVAL;
    }
    struct curl_slist *hl = NULL;
    snprintf(hdr, sizeof hdr, "Content-Type: %s", ctype ? ctype : "application/json");
    hl = curl_slist_append(hl, hdr);
    hl = curl_slist_append(hl, "Expect:");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, d->sock);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "tusko-sandboxd/" TUSKO_VERSION);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    if (timeout_ms > 0)
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    if (c->rd) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, read_cb);
        curl_easy_setopt(h, CURLOPT_READDATA, c);
        /* chunked: the size of the stream is not known in advance */
        hl = curl_slist_append(hl, "Transfer-Encoding: chunked");
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    } else if (payload) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, payload);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)plen);
        if (strcmp(method, "POST") != 0)
            curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    } else if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
    } else if (strcmp(method, "GET") != 0) {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    }
    CURLcode rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    long oserr = 0;
    curl_easy_getinfo(h, CURLINFO_OS_ERRNO, &oserr);
    curl_slist_free_all(hl);
    curl_easy_cleanup(h);
    if (rc == CURLE_OK)
        return TK_OK;
    if (c->too_big) {
        snprintf(err, errlen, "docker: %s %s: the answer is larger than %u bytes", method, path,
                 SBX_DOCKER_MAX_RESPONSE);
        return TK_ETOOBIG;
    }
    if (c->aborted) {
        snprintf(err, errlen, "docker: %s %s: the request body could not be produced", method,
                 path);
        return TK_ERROR;
    }
    if (rc == CURLE_COULDNT_CONNECT) {
        snprintf(err, errlen,
                 "no Docker engine answers at DOCKER_HOST=%s (connect %s: %s): start dockerd "
                 "(or install docker.io) or set DOCKER_HOST",
                 d->host, d->sock, oserr ? strerror((int)oserr) : errbuf);
        return TK_ERROR;
    }
    if (rc == CURLE_OPERATION_TIMEDOUT) {
        snprintf(err, errlen, "docker: %s %s: the engine did not answer within %ld ms", method,
                 path, timeout_ms);
        return TK_ETIMEOUT;
    }
    snprintf(err, errlen, "docker: %s %s: %s", method, path,
             errbuf[0] ? errbuf : curl_easy_strerror(rc));
    return TK_ERROR;
}

tk_status sbx_docker_call(sbx_docker *d, const char *method, const char *path, json_t *body,
                          long timeout_ms, long *status, json_t **out, char *err, size_t errlen)
{
    *out = NULL;
    char *payload = body ? tk_json_dumps(body) : NULL;
    json_decref(body);
    struct call c = {0};
    tk_buf_init(&c.body, SBX_DOCKER_MAX_RESPONSE);
    tk_status st = perform(d, method, path, NULL, payload, payload ? strlen(payload) : 0, &c,
                           timeout_ms, status, err, errlen);
    free(payload);
    if (st == TK_OK && c.body.len > 0) {
        char jerr[128];
        *out = tk_json_parse(c.body.data, c.body.len, c.body.max, jerr, sizeof jerr);
        if (!*out) {
            /* plain-text answers (e.g. "page not found") become a message */
            char msg[512];
            snprintf(msg, sizeof msg, "%.*s", (int)TK_MIN(c.body.len, sizeof msg - 1), c.body.data);
            msg[strcspn(msg, "\r\n")] = '\0';
            *out = tk_json_obj("message", json_string(msg), NULL);
        }
    }
    tk_buf_free(&c.body);
    return st;
}

const char *sbx_docker_message(const json_t *resp, const char *fallback)
{
    const char *m = resp ? tk_json_str(resp, "message") : NULL;
    return m && *m ? m : fallback;
}

tk_status sbx_docker_upload(sbx_docker *d, const char *path, const char *content_type,
                            sbx_docker_read_fn rd, void *ud, long timeout_ms, char *err,
                            size_t errlen)
{
    struct call c = {.rd = rd, .rd_ud = ud};
    tk_buf_init(&c.body, SBX_DOCKER_MAX_RESPONSE);
    long status = 0;
    tk_status st =
        perform(d, "POST", path, content_type, NULL, 0, &c, timeout_ms, &status, err, errlen);
    if (st != TK_OK)
        goto out;
    /* The answer: JSON objects one after the other ({"status":...}, {"error":...}). */
    const char *p = tk_buf_cstr(&c.body), *end = p + c.body.len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        char jerr[64];
        json_t *j = len ? tk_json_parse(p, len, len + 1, jerr, sizeof jerr) : NULL;
        const char *e = j ? tk_json_str(j, "error") : NULL;
        if (!e && j && json_is_object(json_object_get(j, "errorDetail")))
            e = tk_json_str(json_object_get(j, "errorDetail"), "message");
        if (e && st == TK_OK) {
            snprintf(err, errlen, "docker: POST %s: %s", path, e);
            st = TK_ERROR;
        }
        json_decref(j);
        p += len + 1;
    }
    if (st == TK_OK && (status < 200 || status >= 300)) {
        char msg[256];
        snprintf(msg, sizeof msg, "%.*s", (int)TK_MIN(c.body.len, sizeof msg - 1),
                 c.body.len ? c.body.data : "");
        msg[strcspn(msg, "\r\n")] = '\0';
        snprintf(err, errlen, "docker: POST %s: status %ld: %s", path, status, msg);
        st = TK_ERROR;
    }
out:
    tk_buf_free(&c.body);
    return st;
}

tk_status sbx_docker_version(sbx_docker *d, char *version, size_t vlen, char *api, size_t alen,
                             char *err, size_t errlen)
{
    long status;
    json_t *j = NULL;
    tk_status st = sbx_docker_call(d, "GET", "/version", NULL, 10000, &status, &j, err, errlen);
    if (st != TK_OK)
        return st;
    if (status != 200 || !json_is_object(j)) {
        snprintf(err, errlen, "the engine at DOCKER_HOST=%s answered GET /version with %ld: %s",
                 d->host, status, sbx_docker_message(j, "no JSON"));
        json_decref(j);
        return TK_ERROR;
    }
    snprintf(version, vlen, "%s", tk_json_str_or(j, "Version", "?"));
    snprintf(api, alen, "%s", tk_json_str_or(j, "ApiVersion", "?"));
    json_decref(j);
    return TK_OK;
}

char *sbx_docker_label_filter(const char *const *labels, size_t n)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, json_string(labels[i]));
    json_t *f = tk_json_obj("label", arr, NULL);
    char *s = tk_json_dumps(f);
    json_decref(f);
    tk_buf e;
    tk_buf_init(&e, strlen(s) * 3); /* the most it can take */
    tk_percent_append(&e, s, NULL);
    free(s);
    return tk_buf_steal(&e, NULL);
}
