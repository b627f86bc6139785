#include "app/sandbox/lifecycle.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/app.h"
#include "lib/httpc.h"
#include "lib/json.h"
#include "lib/log.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char base[600];
static char key_header[600];
static const char *headers[2];
static char scheme[8] = "http";

static void init_once(void)
{
    const app_settings *s = app_get()->cfg;
    const char *u = s->opensandbox_url ? s->opensandbox_url : "";
    size_t n = strlen(u);
    while (n && u[n - 1] == '/')
        n--;
    if (n >= 3 && strncmp(u + n - 3, "/v1", 3) == 0)
        snprintf(base, sizeof base, "%.*s", (int)n, u);
    else
        snprintf(base, sizeof base, "%.*s/v1", (int)n, u);
    snprintf(key_header, sizeof key_header, "OPEN-SANDBOX-API-KEY: %s",
             s->opensandbox_api_key ? s->opensandbox_api_key : "");
    headers[0] = key_header;
    headers[1] = NULL;
    if (strncmp(u, "https:", 6) == 0)
        snprintf(scheme, sizeof scheme, "https");
}

const char *const *sandbox_lifecycle_headers(void)
{
    pthread_once(&once, init_once);
    return headers;
}

const char *sandbox_lifecycle_scheme(void)
{
    pthread_once(&once, init_once);
    return scheme;
}

void sandbox_lifecycle_resp_free(sandbox_lifecycle_resp *r)
{
    json_decref(r->body);
    r->body = NULL;
}

tk_status sandbox_lifecycle_call(const char *method, const char *path, json_t *body,
                                 long timeout_ms, sandbox_lifecycle_resp *out)
{
    pthread_once(&once, init_once);
    memset(out, 0, sizeof *out);
    char url[1200];
    snprintf(url, sizeof url, "%s%s", base, path);
    char *payload = body ? tk_json_dumps(body) : NULL;
    json_decref(body);
    const char *hdrs[] = {key_header, "Content-Type: application/json", "Accept: application/json",
                          NULL};
    tk_httpc_req req = {.method = method,
                        .url = url,
                        .headers = hdrs,
                        .body = payload,
                        .body_len = payload ? strlen(payload) : 0,
                        .timeout_ms = timeout_ms ? timeout_ms : 30000,
                        .max_response = 8u << 20};
    tk_httpc_resp resp;
    tk_status st = tk_httpc_do(&req, &resp);
    free(payload);
    out->status = resp.status;
    if (st != TK_OK) {
        snprintf(out->error, sizeof out->error, "%s %s: %s", method, path, resp.error);
    } else if (resp.body.len > 0) {
        char jerr[200];
        out->body = tk_json_parse(resp.body.data, resp.body.len, resp.body.max, jerr, sizeof jerr);
        if (!out->body)
            snprintf(out->error, sizeof out->error, "%s %s: status %ld, body is not JSON (%s)",
                     method, path, resp.status, jerr);
    }
    tk_httpc_resp_header(&resp, "X-Sandbox-Pool", out->pool, sizeof out->pool);
    tk_httpc_resp_header(&resp, "X-Sandbox-Runtime", out->runtime, sizeof out->runtime);
    tk_httpc_resp_free(&resp);
    return st;
}

void sandbox_lifecycle_error_text(const sandbox_lifecycle_resp *r, char *out, size_t outlen)
{
    const char *m = tk_json_str(r->body, "message");
    const char *c = tk_json_str(r->body, "code");
    if (r->status == 0)
        snprintf(out, outlen, "the sandbox service did not answer (%s)", r->error);
    else if (m)
        snprintf(out, outlen, "HTTP %ld%s%s: %s", r->status, c ? " " : "", c ? c : "", m);
    else
        snprintf(out, outlen, "HTTP %ld", r->status);
}

tk_status sandbox_lifecycle_state(const char *remote_id, char *state, size_t len)
{
    char path[300];
    snprintf(path, sizeof path, "/sandboxes/%s", remote_id);
    sandbox_lifecycle_resp r;
    tk_status st = sandbox_lifecycle_call("GET", path, NULL, 10000, &r);
    if (st != TK_OK || r.status >= 500 || r.status == 401 || r.status == 0) {
        sandbox_lifecycle_resp_free(&r);
        return TK_ERROR;
    }
    if (r.status == 404) {
        snprintf(state, len, "%s", "");
    } else {
        const char *s = tk_json_str(json_object_get(r.body, "status"), "state");
        snprintf(state, len, "%s", s ? s : "Unknown");
    }
    sandbox_lifecycle_resp_free(&r);
    return TK_OK;
}
