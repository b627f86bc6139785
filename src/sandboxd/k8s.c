/* k8s.c — the Pod API client: requests, the rotating token, the watch stream. */
#include "sandboxd/k8s.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/buf.h"
#include "lib/httpc.h"
#include "lib/json.h"
#include "lib/query.h"

static int copy_setting(char *dst, size_t cap, const char *src)
{
    size_t n = src ? strlen(src) : 0;
    if (n >= cap)
        return -1;
    memcpy(dst, src ? src : "", n + 1);
    return 0;
}

/* A DNS-1123 subdomain (pod names, namespaces): it goes into a URL path. */
static int valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 253)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '.'))
            return 0;
    }
    return s[0] != '-' && s[0] != '.' && s[n - 1] != '-' && s[n - 1] != '.';
}

tk_status sbx_k8s_client_init(sbx_k8s_client *c, const char *server, const char *ca_file,
                              const char *token_file, const char *ns, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    if (!server || strncmp(server, "https://", 8) != 0) {
        snprintf(err, errlen, "the API server must be an https:// URL");
        return TK_EINVAL;
    }
    if (copy_setting(c->server, sizeof c->server, server) ||
        copy_setting(c->ca_file, sizeof c->ca_file, ca_file) ||
        copy_setting(c->token_file, sizeof c->token_file, token_file) ||
        copy_setting(c->ns, sizeof c->ns, ns)) {
        snprintf(err, errlen, "a Kubernetes setting is too long");
        return TK_EINVAL;
    }
    size_t n = strlen(c->server);
    while (n > 8 && c->server[n - 1] == '/')
        c->server[--n] = 0;
    if (!valid_name(c->ns)) {
        snprintf(err, errlen, "the namespace \"%s\" is not a valid name", c->ns);
        return TK_EINVAL;
    }
    pthread_mutex_init(&c->mu, NULL);
    c->share = tk_httpc_share_new();
    return TK_OK;
}

tk_status sbx_k8s_client_in_cluster(sbx_k8s_client *c, const char *host, const char *port,
                                    const char *sa_dir, char *err, size_t errlen)
{
    if (!host || !*host || !port || !*port) {
        snprintf(err, errlen, "not in a cluster: KUBERNETES_SERVICE_HOST/PORT are unset");
        return TK_EINVAL;
    }
    char server[512], ca[512], tok[512], nsf[512], ns[254] = "";
    /* an IPv6 service address needs brackets */
    snprintf(server, sizeof server, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host,
             port);
    snprintf(ca, sizeof ca, "%s/ca.crt", sa_dir);
    snprintf(tok, sizeof tok, "%s/token", sa_dir);
    snprintf(nsf, sizeof nsf, "%s/namespace", sa_dir);
    FILE *f = fopen(nsf, "re");
    if (f) {
        size_t r = fread(ns, 1, sizeof ns - 1, f);
        ns[r] = 0;
        fclose(f);
        while (r && (ns[r - 1] == '\n' || ns[r - 1] == ' '))
            ns[--r] = 0;
    }
    return sbx_k8s_client_init(c, server, ca, tok, ns, err, errlen);
}

void sbx_k8s_client_free(sbx_k8s_client *c)
{
    explicit_bzero(c->token, sizeof c->token);
    pthread_mutex_destroy(&c->mu);
    tk_httpc_share_free(c->share);
    c->share = NULL;
}

/* Reads the token file again when it changed (or when forced). Under c->mu. */
static tk_status load_token(sbx_k8s_client *c, int force, char *err, size_t errlen)
{
    if (!c->token_file[0])
        return TK_OK;
    struct stat st;
    if (stat(c->token_file, &st) != 0) {
        snprintf(err, errlen, "token file %s: %s", c->token_file, strerror(errno));
        return TK_ERROR;
    }
    if (!force && c->token[0] && st.st_mtim.tv_sec == c->token_mtime.tv_sec &&
        st.st_mtim.tv_nsec == c->token_mtime.tv_nsec && (long)st.st_size == c->token_size)
        return TK_OK;
    int fd = open(c->token_file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "token file %s: %s", c->token_file, strerror(errno));
        return TK_ERROR;
    }
    char buf[sizeof c->token];
    ssize_t r = read(fd, buf, sizeof buf);
    close(fd);
    if (r < 0 || (size_t)r >= sizeof buf) {
        snprintf(err, errlen, "token file %s: unreadable or too long", c->token_file);
        explicit_bzero(buf, sizeof buf);
        return TK_ERROR;
    }
    while (r && (buf[r - 1] == '\n' || buf[r - 1] == '\r' || buf[r - 1] == ' '))
        r--;
    for (ssize_t i = 0; i < r; i++)
        if ((unsigned char)buf[i] < 0x21 || (unsigned char)buf[i] > 0x7e) {
            snprintf(err, errlen, "token file %s: not a bearer token", c->token_file);
            explicit_bzero(buf, sizeof buf);
            return TK_ERROR;
        }
    memcpy(c->token, buf, (size_t)r);
    c->token[r] = 0;
    explicit_bzero(buf, sizeof buf);
    c->token_mtime = st.st_mtim;
    c->token_size = (long)st.st_size;
    return TK_OK;
}

/* "Authorization: Bearer …" into out (empty without a token file). */
static tk_status auth_header(sbx_k8s_client *c, int force, char *out, size_t outlen, char *err,
                             size_t errlen)
{
    pthread_mutex_lock(&c->mu);
    tk_status st = load_token(c, force, err, errlen);
    if (st == TK_OK)
        snprintf(out, outlen, c->token[0] ? "Authorization: Bearer %s" : "X-No-Token: 1", c->token);
    pthread_mutex_unlock(&c->mu);
    return st;
}

typedef struct {
    const char *method, *path, *content_type;
    const char *body;
    size_t body_len;
    long timeout_ms;
    int (*on_data)(const char *data, size_t len, void *ud);
    void *ud;
} k8s_call;

static tk_status do_call(sbx_k8s_client *c, const k8s_call *k, tk_httpc_resp *resp, char *err,
                         size_t errlen)
{
    char url[4096];
    if ((size_t)snprintf(url, sizeof url, "%s%s", c->server, k->path) >= sizeof url) {
        snprintf(err, errlen, "request path too long");
        return TK_EINVAL;
    }
    char ctype[128];
    snprintf(ctype, sizeof ctype, "Content-Type: %s",
             k->content_type ? k->content_type : "application/json");
    for (int attempt = 0; attempt < 2; attempt++) {
        char auth[sizeof c->token + 32];
        tk_status st = auth_header(c, attempt > 0, auth, sizeof auth, err, errlen);
        if (st != TK_OK)
            return st;
        const char *headers[] = {auth, ctype, "Accept: application/json", NULL};
        tk_httpc_req req = {
            .method = k->method,
            .url = url,
            .ca_file = c->ca_file[0] ? c->ca_file : NULL,
            .headers = headers,
            .body = k->body,
            .body_len = k->body_len,
            .timeout_ms = k->timeout_ms,
            .connect_timeout_ms = 5000,
            .max_response = K8S_MAX_RESPONSE,
            .on_data = k->on_data,
            .ud = k->ud,
            .cancel = c->cancel,
            .share = c->share,
        };
        st = tk_httpc_do(&req, resp);
        explicit_bzero(auth, sizeof auth);
        if (st == TK_OK && resp->status == 401 && attempt == 0 && c->token_file[0]) {
            tk_httpc_resp_free(resp); /* the token may have rotated: read it again */
            continue;
        }
        if (st != TK_OK && st != TK_AGAIN)
            snprintf(err, errlen, "Kubernetes API %s %s: %s", k->method, k->path, resp->error);
        return st;
    }
    return TK_ERROR;
}

tk_status sbx_k8s_request(sbx_k8s_client *c, const char *method, const char *path,
                          const char *content_type, json_t *body, long timeout_ms, long *status,
                          json_t **out, char *err, size_t errlen)
{
    *status = 0;
    if (out)
        *out = NULL;
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    k8s_call k = {.method = method,
                  .path = path,
                  .content_type = content_type,
                  .body = text,
                  .body_len = text ? strlen(text) : 0,
                  .timeout_ms = timeout_ms ? timeout_ms : 15000};
    tk_httpc_resp resp;
    tk_status st = do_call(c, &k, &resp, err, errlen);
    free(text);
    if (st == TK_OK) {
        *status = resp.status;
        if (out && resp.body.len) {
            char jerr[128];
            *out =
                tk_json_parse(resp.body.data, resp.body.len, K8S_MAX_RESPONSE, jerr, sizeof jerr);
        }
    }
    tk_httpc_resp_free(&resp);
    return st;
}

static tk_status pods_path(sbx_k8s_client *c, const char *name, const char *selector, char *out,
                           size_t outlen, char *err, size_t errlen)
{
    if (name && !valid_name(name)) {
        snprintf(err, errlen, "not a pod name");
        return TK_EINVAL;
    }
    tk_buf b;
    tk_buf_init(&b, outlen - 1);
    tk_status st = tk_buf_printf(&b, "/api/v1/namespaces/%s/pods", c->ns);
    if (st == TK_OK && name)
        st = tk_buf_printf(&b, "/%s", name);
    if (st == TK_OK && selector && *selector) {
        st = tk_buf_append_str(&b, "?labelSelector=");
        if (st == TK_OK)
            st = tk_percent_append(&b, selector, NULL);
    }
    if (st == TK_OK)
        snprintf(out, outlen, "%s", tk_buf_cstr(&b));
    else
        snprintf(err, errlen, "request path too long");
    tk_buf_free(&b);
    return st;
}

tk_status sbx_k8s_pods_list(sbx_k8s_client *c, const char *selector, long *status, json_t **out,
                            char *err, size_t errlen)
{
    char path[2048];
    tk_status st = pods_path(c, NULL, selector, path, sizeof path, err, errlen);
    if (st != TK_OK)
        return st;
    /* pages of 500, joined; a continue token that expired (410) starts again */
    json_t *items = json_array();
    json_t *last = NULL;
    char cont[1024] = "";
    for (int pages = 0; pages < 1000; pages++) {
        char p[4096];
        tk_buf b;
        tk_buf_init(&b, sizeof p - 1);
        tk_buf_printf(&b, "%s%slimit=500", path, strchr(path, '?') ? "&" : "?");
        if (cont[0]) {
            tk_buf_append_str(&b, "&continue=");
            tk_percent_append(&b, cont, NULL);
        }
        snprintf(p, sizeof p, "%s", tk_buf_cstr(&b));
        tk_buf_free(&b);
        json_t *page = NULL;
        st = sbx_k8s_request(c, "GET", p, NULL, NULL, 0, status, &page, err, errlen);
        if (st != TK_OK || *status != 200) {
            json_decref(items);
            json_decref(last);
            *out = page;
            return st;
        }
        json_array_extend(items, json_object_get(page, "items"));
        json_decref(last);
        last = page;
        const char *next =
            json_string_value(json_object_get(json_object_get(page, "metadata"), "continue"));
        if (!next || !*next)
            break;
        if (strlen(next) >= sizeof cont) {
            snprintf(err, errlen, "continue token too long");
            json_decref(items);
            json_decref(last);
            *out = NULL;
            return TK_ETOOBIG;
        }
        snprintf(cont, sizeof cont, "%s", next);
    }
    json_object_set_new(last, "items", items);
    *out = last;
    return TK_OK;
}

/* One call on a pod (name) or on the collection (name NULL); body is stolen. */
static tk_status pod_call(sbx_k8s_client *c, const char *method, const char *name,
                          const char *content_type, json_t *body, long *status, json_t **out,
                          char *err, size_t errlen)
{
    char path[512];
    tk_status st = pods_path(c, name, NULL, path, sizeof path, err, errlen);
    if (st != TK_OK) {
        json_decref(body);
        return st;
    }
    return sbx_k8s_request(c, method, path, content_type, body, 0, status, out, err, errlen);
}

tk_status sbx_k8s_pod_create(sbx_k8s_client *c, json_t *pod, long *status, json_t **out, char *err,
                             size_t errlen)
{
    return pod_call(c, "POST", NULL, NULL, pod, status, out, err, errlen);
}

tk_status sbx_k8s_pod_get(sbx_k8s_client *c, const char *name, long *status, json_t **out,
                          char *err, size_t errlen)
{
    return pod_call(c, "GET", name, NULL, NULL, status, out, err, errlen);
}

tk_status sbx_k8s_pod_patch(sbx_k8s_client *c, const char *name, const char *patch_type,
                            json_t *patch, long *status, json_t **out, char *err, size_t errlen)
{
    const char *ct = strcmp(patch_type, "json") == 0 ? "application/json-patch+json"
                                                     : "application/merge-patch+json";
    return pod_call(c, "PATCH", name, ct, patch, status, out, err, errlen);
}

tk_status sbx_k8s_pod_delete(sbx_k8s_client *c, const char *name, const char *uid,
                             int grace_seconds, long *status, char *err, size_t errlen)
{
    json_t *opts =
        json_pack("{s:s,s:s,s:i,s:s}", "kind", "DeleteOptions", "apiVersion", "v1",
                  "gracePeriodSeconds", grace_seconds, "propagationPolicy", "Background");
    if (uid && *uid)
        json_object_set_new(opts, "preconditions", json_pack("{s:s}", "uid", uid));
    return pod_call(c, "DELETE", name, NULL, opts, status, NULL, err, errlen);
}

void sbx_k8s_watch_parser_init(sbx_k8s_watch_parser *p, size_t max_line, sbx_k8s_watch_cb cb,
                               void *ud)
{
    memset(p, 0, sizeof *p);
    p->max = max_line;
    p->cb = cb;
    p->ud = ud;
}

void sbx_k8s_watch_parser_free(sbx_k8s_watch_parser *p)
{
    free(p->line);
    p->line = NULL;
}

static int emit_line(sbx_k8s_watch_parser *p)
{
    int stop = 0;
    if (p->len && !p->overflow) {
        char jerr[128];
        json_t *ev = tk_json_parse(p->line, p->len, p->max, jerr, sizeof jerr);
        const char *type = json_string_value(json_object_get(ev, "type"));
        json_t *obj = json_object_get(ev, "object");
        if (type && json_is_object(obj))
            stop = p->cb(type, obj, p->ud);
        json_decref(ev);
    }
    p->len = 0;
    p->overflow = 0;
    return stop;
}

int sbx_k8s_watch_parser_feed(sbx_k8s_watch_parser *p, const char *data, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        const char *nl = memchr(data + i, '\n', len - i);
        size_t n = nl ? (size_t)(nl - (data + i)) : len - i;
        if (!p->overflow && n) {
            if (p->len + n > p->max) {
                p->overflow = 1;
            } else {
                if (p->len + n > p->cap) {
                    size_t cap = p->cap ? p->cap : 4096;
                    while (cap < p->len + n)
                        cap *= 2;
                    char *q = realloc(p->line, cap);
                    if (!q)
                        tk_oom();
                    p->line = q;
                    p->cap = cap;
                }
                memcpy(p->line + p->len, data + i, n);
                p->len += n;
            }
        }
        i += n;
        if (nl && emit_line(p))
            return 1;
    }
    return 0;
}

static int watch_data(const char *data, size_t len, void *ud)
{
    return sbx_k8s_watch_parser_feed(ud, data, len);
}

tk_status sbx_k8s_pods_watch(sbx_k8s_client *c, const char *selector, const char *resource_version,
                             int timeout_s, sbx_k8s_watch_cb cb, void *ud, long *status, char *err,
                             size_t errlen)
{
    *status = 0;
    char path[2048];
    tk_status st = pods_path(c, NULL, selector, path, sizeof path, err, errlen);
    if (st != TK_OK)
        return st;
    tk_buf b;
    tk_buf_init(&b, 4095);
    tk_buf_printf(&b, "%s%swatch=1&allowWatchBookmarks=true&timeoutSeconds=%d", path,
                  strchr(path, '?') ? "&" : "?", timeout_s);
    if (resource_version && *resource_version) {
        tk_buf_append_str(&b, "&resourceVersion=");
        tk_percent_append(&b, resource_version, NULL);
    }
    sbx_k8s_watch_parser wp;
    sbx_k8s_watch_parser_init(&wp, K8S_MAX_EVENT, cb, ud);
    k8s_call k = {.method = "GET",
                  .path = tk_buf_cstr(&b),
                  .timeout_ms = (long)(timeout_s + 30) * 1000,
                  .on_data = watch_data,
                  .ud = &wp};
    tk_httpc_resp resp;
    st = do_call(c, &k, &resp, err, errlen);
    if (st == TK_OK || st == TK_AGAIN)
        *status = resp.status;
    tk_httpc_resp_free(&resp);
    sbx_k8s_watch_parser_free(&wp);
    tk_buf_free(&b);
    return st;
}

const char *sbx_k8s_status_message(const json_t *body, const char *def)
{
    const char *m = json_string_value(json_object_get(body, "message"));
    return m && *m ? m : def;
}
