#include "app/upload.h"

#include <stdio.h>
#include <string.h>

#include "app/agent/events.h"
#include "app/workspace.h"
#include "app/app.h"
#include "app/auth/auth.h"
#include "app/sessions.h"
#include "app/sandbox/execd.h"
#include "app/sandbox/sandbox.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/tktime.h"

/* Tells the chat that the upload started its sandbox (the same event a tool's
 * first write makes, without a turn). */
static void announce_spawn(const char *sid, const sandbox_handle *h)
{
    const app_settings *cfg = app_get()->cfg;
    char ttl[32], quota[64], idle[64];
    tk_format_duration(cfg->sandbox_idle_ttl_ms, ttl, sizeof ttl);
    snprintf(idle, sizeof idle, "%s, then reaped", ttl);
    snprintf(quota, sizeof quota, "%d of %d live per user", h->spawn.live, h->spawn.max);
    agent_event_emit(sid, NULL, "sandbox_spawn",
                     tk_json_obj("tier", json_string("sandbox"), "trigger",
                                 json_string("file upload to /workspace"), "call",
                                 json_string("getOrCreateOpenSandbox"), "pool",
                                 json_string(h->spawn.pool), "quota", json_string(quota),
                                 "credentials", json_string("fail-closed, from env only"),
                                 "idle_ttl", json_string(idle), "sandbox_id", json_string(h->id),
                                 "duration_ms", json_real(h->spawn.duration_ms), NULL));
}

static void h_upload(tk_req *r, void *ud)
{
    const app_ctx *a = app_get();
    const app_user *u = app_req_user(r);
    PGconn *c = app_db_acquire();
    if (!c) {
        app_respond_db_unavailable(r);
        return;
    }
    const char *sid = app_req_session(r, c);
    app_db_release(c);
    if (!sid)
        return;
    if (!a->execution_enabled) {
        tk_respond_error(r, 409, "EXECUTION_OFF",
                         "execution is off on this server (%s not set): files cannot be "
                         "written",
                         a->execution_missing);
        return;
    }
    const char *qp = tk_req_query(r, "path");
    char path[AGENT_WS_PATH_MAX + 32], msg[512];
    if (!qp || agent_ws_path(qp, strlen(qp), path, sizeof path, msg, sizeof msg) != TK_OK) {
        tk_respond_error(r, 400, "INVALID_PATH", "%s",
                         qp ? msg : "give ?path=/workspace/<name> (the file to write)");
        return;
    }
    if (strcmp(path, AGENT_WS_ROOT) == 0) {
        tk_respond_error(r, 400, "INVALID_PATH", "the path names /workspace itself, not a file");
        return;
    }
    size_t len = 0;
    const char *body = tk_req_body(r, &len);
    if ((int64_t)len > a->cfg->download_max) {
        tk_respond_error(r, 413, "TOO_LARGE",
                         "the file is larger than %lld bytes (TUSKO_DOWNLOAD_MAX)",
                         (long long)a->cfg->download_max);
        return;
    }
    sandbox_session s = {
        .user_id = u->id, .session_id = sid, .trigger = "file upload to /workspace"};
    sandbox_handle h;
    sandbox_quota q = {0};
    tk_status st = getOrCreateOpenSandbox(&s, &h, &q, msg, sizeof msg);
    if (st == TK_EDENIED && q.max > 0) {
        tk_respond_error(r, 429, "SANDBOX_QUOTA", "%s", msg);
        return;
    }
    if (st != TK_OK) {
        tk_respond_error(r, 502, "SANDBOX_UNAVAILABLE", "%s", msg);
        return;
    }
    if (h.spawn.created)
        announce_spawn(sid, &h);
    st = sandbox_execd_write_file(&h, path, body ? body : "", len, msg, sizeof msg);
    int started = h.spawn.created;
    sandbox_handle_free(&h);
    if (st != TK_OK) {
        tk_respond_error(r, 502, "SANDBOX_UNAVAILABLE", "the file could not be written: %s", msg);
        return;
    }
    tk_info("upload", "msg=\"file uploaded\" session=%s user=%s path=\"%s\" size=%zu", sid, u->id,
            path, len);
    tk_respond_json(r, 201,
                    tk_json_obj("path", json_string(path), "size", json_integer((json_int_t)len),
                                "sandbox_started", json_boolean(started), NULL));
}

const tk_route app_upload_routes[] = {
    {"PUT", "/api/sessions/{id}/files/upload", h_upload, NULL, TK_ROUTE_BLOCKING, APP_UPLOAD_MAX},
};
const size_t app_upload_nroutes = TK_ARRAY_LEN(app_upload_routes);
