#include "sandboxd/meta.h"
#include "sandboxd/env.h"
#include "sandboxd/api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/json.h"
#include "lib/log.h"
#include "lib/prog.h"
#include "lib/query.h"
#include "lib/tktime.h"
#include "sandboxd/proxy.h"

#define MAX_ENV  256
#define MAX_ARGV 256

int sbx_api_auth(tk_req *r, void *ud)
{
    sbx_api *a = ud;
    if (a->insecure_no_auth)
        return 0;
    const char *k = tk_req_header(r, "OPEN-SANDBOX-API-KEY");
    if (!k || !tk_str_eq_ct(k, a->api_key)) {
        tk_respond_error(r, 401, "UNAUTHORIZED", "a valid OPEN-SANDBOX-API-KEY header is required");
        return 1;
    }
    return 0;
}

static void respond_result(tk_req *r, const sbx_service_result *res)
{
    tk_respond_error(r, res->status, res->code, "%s", res->message);
}

static const char *native_arch(void)
{
#if defined(__x86_64__)
    return "amd64";
#elif defined(__aarch64__)
    return "arm64";
#else
    return "unknown";
#endif
}

#define BAD(...)                                                                                   \
    do {                                                                                           \
        *code = "INVALID_REQUEST";                                                                 \
        snprintf(msg, msglen, __VA_ARGS__);                                                        \
        return 400;                                                                                \
    } while (0)

int sbx_api_parse_create(sbx_api *api, const json_t *b, sbx_service_create_req *req,
                         const char **code, char *msg, size_t msglen)
{
    sbx_service *svc = api->svc;
    memset(req, 0, sizeof *req);
    if (!json_is_object(b))
        BAD("the body must be a JSON object");
    json_t *v;
    if ((v = json_object_get(b, "snapshotId")) && !json_is_null(v))
        BAD("snapshotId: snapshots are not supported by this service; create from image \"%s\"",
            SBX_IMAGE_NAME);
    if ((v = json_object_get(b, "credentialProxy")) && json_is_object(v) &&
        tk_json_bool_or(v, "enabled", 0))
        BAD("credentialProxy is not supported by this service");
    if ((v = json_object_get(b, "platform")) && !json_is_null(v)) {
        const char *os = tk_json_str(v, "os"), *arch = tk_json_str(v, "arch");
        if (!json_is_object(v) || !os || !arch)
            BAD("platform needs os and arch");
        if (strcmp(os, "linux") != 0 || strcmp(arch, native_arch()) != 0)
            BAD("platform %s/%s cannot be served here (this host is linux/%s)", os, arch,
                native_arch());
    }
    /* extensions */
    int pool_mode = 0;
    if ((v = json_object_get(b, "extensions")) && !json_is_null(v)) {
        if (!json_is_object(v))
            BAD("extensions must be an object of strings");
        const char *k;
        json_t *e;
        json_object_foreach(v, k, e)
        {
            if (!json_is_string(e))
                BAD("extensions.%.60s must be a string", k);
            const char *s = json_string_value(e);
            if (strcmp(k, "poolRef") == 0) {
                if (strcmp(s, svc->cfg.pool_name) != 0)
                    BAD("extensions.poolRef \"%.60s\" names no pool here (the pool is \"%s\")", s,
                        svc->cfg.pool_name);
                pool_mode = 1;
            } else if (strcmp(k, "access.renew.extend.seconds") == 0) {
                if (tk_parse_i64(s, 300, 86400, &req->renew_extend_s) != TK_OK)
                    BAD("extensions.access.renew.extend.seconds must be an integer from 300 to "
                        "86400");
            }
        }
    }
    /* image */
    v = json_object_get(b, "image");
    if (!v || json_is_null(v)) {
        if (!pool_mode)
            BAD("image is required (use {\"uri\": \"%s\"})", SBX_IMAGE_NAME);
        req->image = SBX_IMAGE_NAME;
    } else {
        const char *uri = json_is_object(v) ? tk_json_str(v, "uri") : NULL;
        if (!uri)
            BAD("image must be an object with a uri");
        if (!sbx_image_uri_matches(&svc->img, uri))
            BAD("unknown image \"%.100s\": this service runs the image \"%s\"", uri,
                SBX_IMAGE_NAME);
        req->image = uri;
    }
    /* entrypoint */
    v = json_object_get(b, "entrypoint");
    if (v && !json_is_null(v)) {
        if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > MAX_ARGV)
            BAD("entrypoint must be an array of 1 to %d strings", MAX_ARGV);
        size_t i;
        json_t *a;
        json_array_foreach(v, i, a)
        {
            if (!json_is_string(a) || (i == 0 && !json_string_length(a)))
                BAD("entrypoint[%zu] must be a non-empty string", i);
        }
        req->entrypoint = v;
    } else if (!pool_mode) {
        BAD("entrypoint is required with image (e.g. [\"tail\", \"-f\", \"/dev/null\"])");
    }
    /* timeout */
    v = json_object_get(b, "timeout");
    if (v && !json_is_null(v)) {
        int64_t t;
        if (tk_json_int(b, "timeout", &t) != TK_OK)
            BAD("timeout must be an integer number of seconds or null");
        if (t < svc->cfg.min_timeout_s || t > svc->cfg.max_timeout_s)
            BAD("timeout must be between %lld and %lld seconds", (long long)svc->cfg.min_timeout_s,
                (long long)svc->cfg.max_timeout_s);
        req->timeout_s = t;
    }
    /* limits */
    if (sbx_limits_from_json(json_object_get(b, "resourceLimits"), &svc->cfg.policy, &req->limits,
                             msg, msglen) != TK_OK) {
        *code = "INVALID_REQUEST";
        return 400;
    }
    /* env */
    v = json_object_get(b, "env");
    if (v && !json_is_null(v)) {
        if (!json_is_object(v) || json_object_size(v) > MAX_ENV)
            BAD("env must be an object of at most %d strings", MAX_ENV);
        const char *k;
        json_t *e;
        size_t total = 0;
        json_object_foreach(v, k, e)
        {
            if (!sbx_env_name_valid(k))
                BAD("env: \"%.60s\" is not a valid variable name", k);
            if (!json_is_string(e))
                BAD("env.%.60s must be a string", k);
            total += strlen(k) + json_string_length(e) + 2;
        }
        if (total > 48 * 1024)
            BAD("env is larger than 48 KiB");
        req->env = v;
    }
    /* metadata */
    v = json_object_get(b, "metadata");
    if (sbx_meta_check(v, msg, msglen) != TK_OK) {
        *code = "INVALID_REQUEST";
        return 400;
    }
    req->metadata = v && !json_is_null(v) ? v : NULL;
    /* networkPolicy: the sandbox's own rules on the egress proxy (netpol.h) */
    {
        sbx_netpol *np = NULL;
        if (sbx_netpol_parse(json_object_get(b, "networkPolicy"), &np, msg, msglen) != TK_OK) {
            *code = "INVALID_REQUEST";
            return 400;
        }
        int admits_any = np && (np->default_allow || np->n);
        if (np && !svc->cfg.rtc.egress && admits_any) {
            free(np);
            BAD("networkPolicy: sandboxes have no way out here (SANDBOX_NETWORK=none, or a runtime "
                "without the egress proxy); leave networkPolicy out or deny everything");
        }
        req->netpol = np;
    }
    /* volumes (last: the only part that allocates) */
    sbx_volume_policy vp = {.host_allow = svc->cfg.host_volume_allow,
                            .state_dir = svc->cfg.state_dir};
    int vst = sbx_volume_parse_all(json_object_get(b, "volumes"), req->metadata, &vp, &req->volumes,
                                   msg, msglen);
    if (vst) {
        free(req->netpol);
        req->netpol = NULL;
        *code = vst == 403 ? "FORBIDDEN" : vst == 404 ? "NOT_FOUND" : "INVALID_REQUEST";
        return vst;
    }
    if (req->volumes && svc->cfg.runtime && strcmp(svc->cfg.runtime, "kubernetes") == 0) {
        free(req->volumes);
        req->volumes = NULL;
        free(req->netpol);
        req->netpol = NULL;
        BAD("volumes are not supported by the kubernetes runtime yet (native and docker serve "
            "them)");
    }
    return 0;
}

/* ---------- handlers ---------- */

static void h_create(tk_req *r, void *ud)
{
    sbx_api *a = ud;
    json_t *b = tk_req_json(r, 0);
    if (!b)
        return;
    sbx_service_create_req req;
    const char *code = NULL;
    char msg[512];
    int st = sbx_api_parse_create(a, b, &req, &code, msg, sizeof msg);
    if (st) {
        tk_respond_error(r, st, code, "%s", msg);
        return;
    }
    sbx_sandbox *s;
    int pooled;
    sbx_service_result res;
    int64_t t0 = tk_mono_ns();
    tk_status cst = sbx_service_create(a->svc, &req, &s, &pooled, &res);
    free(req.volumes);
    free(req.netpol); /* NULL when the sandbox took it */
    if (cst != TK_OK) {
        respond_result(r, &res);
        return;
    }
    double ms = (double)(tk_mono_ns() - t0) / 1e6;
    pthread_mutex_lock(&a->svc->mu);
    json_t *j = sbx_sandbox_json(s, 0);
    pthread_mutex_unlock(&a->svc->mu);
    tk_info("api", "msg=\"sandbox created\" id=%s pool=%s ms=%.2f", s->id, pooled ? "warm" : "cold",
            ms);
    char loc[128];
    snprintf(loc, sizeof loc, "/v1/sandboxes/%s", s->id);
    tk_respond_header(r, "Location", loc);
    tk_respond_header(r, "X-Sandbox-Pool", pooled ? "warm" : "cold");
    sbx_service_unref(a->svc, s);
    tk_respond_json(r, 202, j);
}

static void h_list(tk_req *r, void *ud)
{
    sbx_api *a = ud;
    tk_arena *ar = tk_req_arena(r);
    const char *qs = tk_req_query_string(r);
    tk_kv *items;
    size_t n;
    if (tk_query_parse(ar, qs, strlen(qs), TK_QUERY_MAX_ITEMS, &items, &n) != TK_OK) {
        tk_respond_error(r, 400, "INVALID_REQUEST", "malformed query string");
        return;
    }
    sbx_state *states = tk_arena_xalloc(ar, (n ? n : 1) * sizeof *states);
    sbx_service_list_query q = {.states = states, .page = 1, .page_size = 20};
    const char *meta = NULL;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(items[i].name, "state") == 0) {
            if (sbx_sandbox_state_parse(items[i].value, &states[q.nstates]) != TK_OK) {
                tk_respond_error(r, 400, "INVALID_REQUEST",
                                 "state \"%.40s\" is not a sandbox state", items[i].value);
                return;
            }
            q.nstates++;
        } else if (strcmp(items[i].name, "metadata") == 0) {
            meta = items[i].value;
        } else if (strcmp(items[i].name, "page") == 0) {
            if (tk_parse_i64(items[i].value, 1, 1000000, &q.page) != TK_OK) {
                tk_respond_error(r, 400, "INVALID_REQUEST", "page must be an integer >= 1");
                return;
            }
        } else if (strcmp(items[i].name, "pageSize") == 0) {
            if (tk_parse_i64(items[i].value, 1, 200, &q.page_size) != TK_OK) {
                tk_respond_error(r, 400, "INVALID_REQUEST",
                                 "pageSize must be an integer from 1 to 200");
                return;
            }
        }
    }
    if (meta && sbx_meta_filter_parse(ar, meta, (const char ***)&q.meta_keys,
                                      (const char ***)&q.meta_values, &q.nmeta) != TK_OK) {
        tk_respond_error(r, 400, "INVALID_REQUEST",
                         "metadata filter must be key=value pairs joined by &");
        return;
    }
    tk_respond_json(r, 200, sbx_service_list(a->svc, &q));
}

static void h_get(tk_req *r, void *ud)
{
    sbx_api *a = ud;
    sbx_service_result res;
    json_t *j = sbx_service_get_json(a->svc, tk_req_param(r, "id"), &res);
    if (!j) {
        respond_result(r, &res);
        return;
    }
    tk_respond_json(r, 200, j);
}

static void h_delete(tk_req *r, void *ud)
{
    sbx_api *a = ud;
    sbx_service_result res;
    if (sbx_service_delete(a->svc, tk_req_param(r, "id"), &res) != TK_OK) {
        respond_result(r, &res);
        return;
    }
    tk_respond_empty(r, 204);
}

static void h_pause(tk_req *r, void *ud)
{
    sbx_api *a = ud;
    sbx_service_result res;
    if (sbx_service_pause(a->svc, tk_req_param(r, "id"), &res) != TK_OK) {
        respond_result(r, &res);
        return;
    }
    tk_respond_empty(r, 202);
}

static void h_resume(tk_req *r, void *ud)
{
    sbx_api *a = ud;
    sbx_service_result res;
    if (sbx_service_resume(a->svc, tk_req_param(r, "id"), &res) != TK_OK) {
        respond_result(r, &res);
        return;
    }
    tk_respond_empty(r, 202);
}

static void h_renew(tk_req *r, void *ud)
{
    sbx_api *a = ud;
    json_t *b = tk_req_json(r, 0);
    if (!b)
        return;
    const char *e = json_is_object(b) ? tk_json_str(b, "expiresAt") : NULL;
    int64_t ms;
    if (!e || tk_time_parse_rfc3339(e, &ms) != TK_OK) {
        tk_respond_error(r, 400, "INVALID_REQUEST", "expiresAt must be an RFC 3339 date-time");
        return;
    }
    sbx_service_result res;
    int64_t got;
    if (sbx_service_renew(a->svc, tk_req_param(r, "id"), ms, &got, &res) != TK_OK) {
        respond_result(r, &res);
        return;
    }
    char buf[40];
    tk_time_rfc3339(got, buf, sizeof buf);
    tk_respond_json(r, 200, tk_json_obj("expiresAt", json_string(buf), NULL));
}

/* DELETE /v1/volumes/{claimName}?owner= — ours: removes a named volume of the
 * owner (the `user` metadata its sandboxes were created with; "_default"
 * without). */
static void h_delete_volume(tk_req *r, void *ud)
{
    sbx_api *a = ud;
    const char *claim = tk_req_param(r, "name");
    const char *owner = tk_req_query(r, "owner");
    if (!owner || !*owner)
        owner = "_default";
    if (!sbx_volume_name_ok(claim)) {
        tk_respond_error(r, 400, "INVALID_REQUEST", "a volume name is a DNS label");
        return;
    }
    if (strlen(owner) > 63 || strspn(owner, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                            "0123456789_-") != strlen(owner)) {
        tk_respond_error(r, 400, "INVALID_REQUEST", "owner must be a plain name");
        return;
    }
    sbx_runtime *rt = a->svc->rt;
    if (!rt || !rt->ops->delete_volume) {
        tk_respond_error(r, 501, "NOT_IMPLEMENTED", "this runtime has no named volumes to delete");
        return;
    }
    char err[512];
    tk_status st = rt->ops->delete_volume(rt, owner, claim, err, sizeof err);
    if (st == TK_OK)
        tk_respond_empty(r, 204);
    else if (st == TK_ENOENT)
        tk_respond_error(r, 404, "NOT_FOUND", "no volume %s of owner %s", claim, owner);
    else if (st == TK_EDENIED)
        tk_respond_error(r, 409, "IN_USE", "volume %s is used by a sandbox: %s", claim, err);
    else
        tk_respond_error(r, 500, "RUNTIME_ERROR", "%s", err);
}

static void h_patch_metadata(tk_req *r, void *ud)
{
    sbx_api *a = ud;
    json_t *b = tk_req_json(r, 0);
    if (!b)
        return;
    if (!json_is_object(b)) {
        tk_respond_error(r, 400, "INVALID_REQUEST",
                         "the body must be a JSON object (a merge patch)");
        return;
    }
    const char *k;
    json_t *v;
    char msg[256];
    json_object_foreach(b, k, v)
    {
        if (!json_is_null(v) && !json_is_string(v)) {
            tk_respond_error(r, 400, "INVALID_REQUEST", "metadata.%.60s must be a string or null",
                             k);
            return;
        }
        if (!sbx_meta_key_valid(k, msg, sizeof msg) ||
            (json_is_string(v) && !sbx_meta_value_valid(json_string_value(v), msg, sizeof msg))) {
            tk_respond_error(r, 400, "INVALID_REQUEST", "%s", msg);
            return;
        }
    }
    sbx_service_result res;
    json_t *out;
    if (sbx_service_patch_metadata(a->svc, tk_req_param(r, "id"), b, &out, &res) != TK_OK) {
        respond_result(r, &res);
        return;
    }
    tk_respond_json(r, 200, out);
}

static int host_ok(const char *h)
{
    if (!h || !*h || strlen(h) > 255)
        return 0;
    for (const char *p = h; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              strchr(".-:[]", *p)))
            return 0;
    return 1;
}

static void h_endpoint(tk_req *r, void *ud)
{
    sbx_api *a = ud;
    const char *id = tk_req_param(r, "id");
    int64_t port;
    if (tk_parse_i64(tk_req_param(r, "port"), 1, 65535, &port) != TK_OK) {
        tk_respond_error(r, 400, "INVALID_REQUEST", "port must be an integer from 1 to 65535");
        return;
    }
    if (tk_req_query(r, "expires")) {
        tk_respond_error(r, 400, "INVALID_REQUEST",
                         "signed endpoints (expires) are not supported; use use_server_proxy=true");
        return;
    }
    const char *usp = tk_req_query(r, "use_server_proxy");
    int dummy;
    if (usp && tk_config_parse_bool(usp, &dummy) != TK_OK) {
        tk_respond_error(r, 400, "INVALID_REQUEST", "use_server_proxy must be true or false");
        return;
    }
    sbx_sandbox *sb = sbx_service_get(a->svc, id);
    if (!sb) {
        tk_respond_error(r, 404, "NOT_FOUND", "no sandbox %s", id);
        return;
    }
    pthread_mutex_lock(&a->svc->mu);
    int gone = sb->state == SBX_TERMINATED || sb->state == SBX_FAILED;
    char token[SBX_TOKEN_MAX];
    snprintf(token, sizeof token, "%s", port == SBX_EGRESS_API_PORT ? sb->egress_token : sb->token);
    pthread_mutex_unlock(&a->svc->mu);
    sbx_service_unref(a->svc, sb);
    if (gone) {
        tk_respond_error(r, 404, "NOT_FOUND", "sandbox %s is gone", id);
        return;
    }
    const char *host = tk_req_header(r, "Host");
    if (!host_ok(host))
        host = a->public_host;
    /* Only the server proxy reaches a native sandbox (it has no network), so the
     * answer is the proxied route whether or not use_server_proxy was asked for. */
    char ep[512];
    snprintf(ep, sizeof ep, "%s/v1/sandboxes/%s/proxy/%lld", host, id, (long long)port);
    json_t *j = tk_json_obj("endpoint", json_string(ep), "headers",
                            tk_json_obj(port == SBX_EGRESS_API_PORT ? "OPENSANDBOX-EGRESS-AUTH"
                                                                    : "X-EXECD-ACCESS-TOKEN",
                                        json_string(token), NULL),
                            NULL);
    tk_respond_json(r, 200, j);
}

static void h_snapshots(tk_req *r, void *ud)
{
    tk_respond_error(r, 501, "NOT_IMPLEMENTED", "snapshots are not supported by this service");
}

size_t sbx_api_routes(sbx_api *api, const void *prog, tk_route *routes, size_t max)
{
    static const struct {
        const char *method, *path;
        tk_handler fn;
        unsigned flags;
    } base[] = {
        {"POST", "/sandboxes", h_create, TK_ROUTE_BLOCKING},
        {"GET", "/sandboxes", h_list, 0},
        {"GET", "/sandboxes/{id}", h_get, 0},
        {"DELETE", "/sandboxes/{id}", h_delete, TK_ROUTE_BLOCKING},
        {"PATCH", "/sandboxes/{id}/metadata", h_patch_metadata, 0},
        {"DELETE", "/volumes/{name}", h_delete_volume, TK_ROUTE_BLOCKING},
        {"POST", "/sandboxes/{id}/pause", h_pause, TK_ROUTE_BLOCKING},
        {"POST", "/sandboxes/{id}/resume", h_resume, TK_ROUTE_BLOCKING},
        {"POST", "/sandboxes/{id}/renew-expiration", h_renew, 0},
        {"GET", "/sandboxes/{id}/endpoints/{port}", h_endpoint, 0},
        {"*", "/sandboxes/{id}/proxy/{port}/*", sbx_proxy_handle, 0},
        {"*", "/sandboxes/{id}/snapshots", h_snapshots, 0},
        {"*", "/snapshots", h_snapshots, 0},
        {"*", "/snapshots/{sid}", h_snapshots, 0},
    };
    static char paths[2 * TK_ARRAY_LEN(base)][128];
    size_t n = 0;
    if (max < 3 + 2 * TK_ARRAY_LEN(base))
        return 0;
    n += tk_prog_routes(prog, routes, 3); /* /healthz, /readyz, /metrics */
    for (int prefix = 0; prefix < 2; prefix++) {
        for (size_t i = 0; i < TK_ARRAY_LEN(base); i++) {
            char *p = paths[prefix * TK_ARRAY_LEN(base) + i];
            snprintf(p, 128, "%s%s", prefix ? "" : "/v1", base[i].path);
            void *ud = base[i].fn == sbx_proxy_handle ? (void *)api->svc : (void *)api;
            size_t max_body = base[i].fn == sbx_proxy_handle ? (size_t)64 << 20 : 0;
            routes[n++] =
                (tk_route){base[i].method, p, base[i].fn, ud, base[i].flags, max_body, NULL};
        }
    }
    return n;
}
