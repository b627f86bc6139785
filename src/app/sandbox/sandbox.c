/*
 * The sandbox client's two entry points, the per-user quota, the rows that
 * remember each chat's sandbox, the reconciliation with the service, and
 * GET /api/sandboxes.
 */
#include "app/sandbox/sandbox.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "app/app.h"
#include "app/auth/auth.h"
#include "app/sandbox/lifecycle.h"
#include "lib/execd_port.h"
#include "lib/httpc.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/tktime.h"

#define RENEW_EVERY_MS 60000
#define VERIFY_IDLE_MS 60000
#define STALE_CREATING "5 minutes"

int sandbox_configured(void)
{
    return app_get()->execution_enabled;
}

void sandbox_handle_free(sandbox_handle *h)
{
    if (!h)
        return;
    free(h->execd_url);
    if (h->headers) {
        for (char **p = h->headers; *p; p++)
            free(*p);
        free(h->headers);
    }
    h->execd_url = NULL;
    h->headers = NULL;
}

/* The execd URL the service gave: with a scheme, or host/path to which the
 * scheme of OPENSANDBOX_URL is added (upstream's server proxy answers so). */
static char *execd_base(const char *endpoint)
{
    size_t n = strlen(endpoint);
    while (n && endpoint[n - 1] == '/')
        n--;
    if (strncmp(endpoint, "http://", 7) == 0 || strncmp(endpoint, "https://", 8) == 0)
        return tk_strndup(endpoint, n);
    return tk_asprintf("%s://%.*s", sandbox_lifecycle_scheme(), (int)n, endpoint);
}

/* Headers for execd calls: the service key (the proxy checks it) and whatever
 * the endpoint said requests must carry (the execd access token). */
static char **execd_headers(const json_t *hdrs)
{
    size_t n = json_object_size(hdrs);
    char **out = tk_calloc(n + 2, sizeof *out);
    size_t k = 0;
    out[k++] = tk_strdup(sandbox_lifecycle_headers()[0]);
    const char *name;
    json_t *v;
    json_object_foreach((json_t *)hdrs, name, v)
    {
        if (!json_is_string(v) || strpbrk(name, "\r\n:") || strpbrk(json_string_value(v), "\r\n"))
            continue;
        out[k++] = tk_asprintf("%s: %s", name, json_string_value(v));
    }
    out[k] = NULL;
    return out;
}

static int fill_from_row(sandbox_handle *h, PGresult *r, int i)
{
    snprintf(h->id, sizeof h->id, "%s", PQgetvalue(r, i, 0));
    snprintf(h->remote_id, sizeof h->remote_id, "%s", PQgetvalue(r, i, 1));
    sandbox_handle_free(h);
    h->execd_url = tk_strdup(PQgetvalue(r, i, 2));
    json_t *hd = json_loads(PQgetvalue(r, i, 3), 0, NULL);
    /* the stored headers are the endpoint's own; the key is added again */
    h->headers = execd_headers(hd);
    json_decref(hd);
    snprintf(h->bash_session, sizeof h->bash_session, "%s", PQgetvalue(r, i, 4));
    snprintf(h->code_context, sizeof h->code_context, "%s", PQgetvalue(r, i, 5));
    return 1;
}

#define ROW_COLS                                                                                   \
    "id, coalesce(remote_id, ''), coalesce(execd_url, ''), execd_headers::text, "                  \
    "coalesce(bash_session, ''), coalesce(code_context, ''), state, "                              \
    "extract(epoch FROM now() - last_used_at) * 1000, "                                            \
    "coalesce(extract(epoch FROM now() - renewed_at) * 1000, 1e12)"

/* The chat's active row: 'live', 'creating' or none ("" state). */
static tk_status load_active(PGconn *c, const char *session_id, sandbox_handle *h, char *state,
                             size_t slen, int64_t *idle_ms, int64_t *since_renew_ms)
{
    const char *p[] = {session_id};
    PGresult *r = tk_pg_query(c,
                              "SELECT " ROW_COLS " FROM sandboxes WHERE session_id = $1 AND state "
                              "IN ('creating', 'live')",
                              1, p);
    if (!tk_pg_ok(r)) {
        PQclear(r);
        return TK_ERROR;
    }
    state[0] = 0;
    if (PQntuples(r) == 1) {
        fill_from_row(h, r, 0);
        snprintf(state, slen, "%s", PQgetvalue(r, 0, 6));
        double idle = strtod(PQgetvalue(r, 0, 7), NULL), ren = strtod(PQgetvalue(r, 0, 8), NULL);
        *idle_ms = (int64_t)idle;
        *since_renew_ms = (int64_t)ren;
    }
    PQclear(r);
    return TK_OK;
}

static void mark_gone(PGconn *c, const char *id, const char *reason)
{
    const char *p[] = {id, reason};
    tk_pg_exec(
        c,
        "UPDATE sandboxes SET state = 'gone', gone_reason = $2, gone_at = now() WHERE id = $1 "
        "AND state <> 'gone'",
        2, p);
    tk_info("sandbox", "msg=\"sandbox gone\" sandbox=%s reason=\"%s\"", id, reason);
}

/* The latest gone sandbox of the chat the user was not told about yet. */
static int unnoticed_gone(PGconn *c, const char *session_id, char *reason, size_t rlen,
                          char *gone_id)
{
    const char *p[] = {session_id};
    PGresult *r = tk_pg_query(c,
                              "SELECT id, coalesce(gone_reason, 'gone') FROM sandboxes WHERE "
                              "session_id = $1 AND state = 'gone' AND NOT gone_noticed AND "
                              "remote_id IS NOT NULL ORDER BY created_at DESC LIMIT 1",
                              1, p);
    int found = tk_pg_ok(r) && PQntuples(r) == 1;
    if (found) {
        snprintf(gone_id, TK_UUID_LEN, "%s", PQgetvalue(r, 0, 0));
        snprintf(reason, rlen, "%s", PQgetvalue(r, 0, 1));
    }
    PQclear(r);
    return found;
}

static int ever_had(PGconn *c, const char *session_id)
{
    const char *p[] = {session_id};
    PGresult *r = tk_pg_query(
        c, "SELECT 1 FROM sandboxes WHERE session_id = $1 AND remote_id IS NOT NULL LIMIT 1", 1, p);
    int had = tk_pg_ok(r) && PQntuples(r) > 0;
    PQclear(r);
    return had;
}

/* Renews the expiry (timeout = SANDBOX_IDLE_TTL from the last use). */
static void touch(PGconn *c, sandbox_handle *h, int64_t since_renew_ms)
{
    const char *p[] = {h->id};
    if (since_renew_ms >= RENEW_EVERY_MS && h->remote_id[0]) {
        char at[40], path[300];
        tk_time_rfc3339(tk_now_ms() + app_get()->cfg->sandbox_idle_ttl_ms, at, sizeof at);
        snprintf(path, sizeof path, "/sandboxes/%s/renew-expiration", h->remote_id);
        sandbox_lifecycle_resp r;
        sandbox_lifecycle_call("POST", path, tk_json_obj("expiresAt", json_string(at), NULL), 10000,
                               &r);
        if (r.status != 200)
            tk_debug("sandbox", "msg=\"renew-expiration refused\" sandbox=%s status=%ld",
                     h->remote_id, r.status);
        sandbox_lifecycle_resp_free(&r);
        tk_pg_exec(c, "UPDATE sandboxes SET last_used_at = now(), renewed_at = now() WHERE id = $1",
                   1, p);
        return;
    }
    tk_pg_exec(c, "UPDATE sandboxes SET last_used_at = now() WHERE id = $1", 1, p);
}

/* Is the sandbox still there? 1 running (or starting), 0 gone, -1 unknown. */
static int remote_alive(const char *remote_id, char *why, size_t wlen)
{
    char state[32];
    if (sandbox_lifecycle_state(remote_id, state, sizeof state) != TK_OK)
        return -1;
    if (!state[0]) {
        snprintf(why, wlen, "it was reaped or removed by the sandbox service");
        return 0;
    }
    if (strcasecmp(state, "Terminated") == 0 || strcasecmp(state, "Failed") == 0 ||
        strcasecmp(state, "Stopping") == 0) {
        snprintf(why, wlen, "the sandbox service reports it %s", state);
        return 0;
    }
    return 1;
}

static int cancelled(const sandbox_session *s)
{
    return s->cancel && *s->cancel;
}

tk_status getExistingOpenSandbox(const sandbox_session *s, sandbox_handle *out, char *err,
                                 size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!sandbox_configured()) {
        snprintf(err, errlen,
                 "nothing here yet: code execution is off on this server (%s not set), so "
                 "there is no workspace",
                 app_get()->execution_missing);
        return TK_EDENIED;
    }
    snprintf(out->user_id, sizeof out->user_id, "%s", s->user_id);
    snprintf(out->session_id, sizeof out->session_id, "%s", s->session_id);
    out->cancel = s->cancel;
    PGconn *c = app_db_acquire();
    if (!c) {
        snprintf(err, errlen, "the database did not answer");
        return TK_ERROR;
    }
    char state[16];
    int64_t idle = 0, since_renew = 0;
    tk_status st = load_active(c, s->session_id, out, state, sizeof state, &idle, &since_renew);
    if (st != TK_OK) {
        app_db_release(c);
        snprintf(err, errlen, "the database did not answer");
        return TK_ERROR;
    }
    if (strcmp(state, "live") == 0) {
        touch(c, out, since_renew);
        app_db_release(c);
        return TK_OK;
    }
    char reason[128], gid[TK_UUID_LEN];
    if (strcmp(state, "creating") == 0)
        snprintf(err, errlen, "nothing here yet: the sandbox of this chat is still starting");
    else if (unnoticed_gone(c, s->session_id, reason, sizeof reason, gid))
        snprintf(err, errlen,
                 "nothing here yet: this chat's previous workspace is gone (%s); the next write "
                 "or command starts a fresh one",
                 reason);
    else if (ever_had(c, s->session_id))
        snprintf(err, errlen, "nothing here yet: this chat's workspace is gone");
    else
        snprintf(err, errlen,
                 "nothing here yet: nothing has been written or run in this chat, so it has no "
                 "workspace");
    app_db_release(c);
    sandbox_handle_free(out);
    return TK_ENOENT;
}

/* The pool a create answer came from: tusko-sandboxd says so in X-Sandbox-Pool
 * (and the runtime in X-Sandbox-Runtime); otherwise a sandbox Running at once
 * came from a warm pool. */
static void pool_label(const sandbox_lifecycle_resp *r, int immediate, char *out, size_t outlen)
{
    int warm = r->pool[0] ? strcasecmp(r->pool, "warm") == 0 : immediate;
    if (warm)
        snprintf(out, outlen, "warm · %s",
                 r->runtime[0] ? r->runtime
                 : r->pool[0]  ? "native" /* tusko-sandboxd's only runtime yet */
                               : "opensandbox");
    else
        snprintf(out, outlen, "cold");
}

static void sleep_or_cancel(const sandbox_session *s, int ms)
{
    for (int i = 0; i < ms && !cancelled(s); i += 10)
        tk_sleep_ms(10);
}

/* Creates the remote sandbox for our reserved row; fills out. */
static void delete_remote(const char *remote_id);

/* Asks the new sandbox's execd to confine every path of its command, session
 * and file APIs to /workspace from now on (POST /confine, one way). Anything
 * but its confirmation is TK_ERROR: the sandbox must not be used. */
static tk_status confine_execd(const sandbox_handle *h, char *err, size_t errlen)
{
    long status = 0;
    json_t *out = NULL;
    char *url = tk_asprintf("%s/confine", h->execd_url ? h->execd_url : "");
    tk_status st = tk_httpc_json("POST", url, NULL, (const char *const *)h->headers,
                                 tk_json_obj("confine", json_string("workspace"), NULL), 15000,
                                 &status, &out, err, errlen);
    free(url);
    const char *got = out ? tk_json_str(out, "confine") : NULL;
    int ok = st == TK_OK && status == 200 && got && strcmp(got, "workspace") == 0;
    json_decref(out);
    if (ok)
        return TK_OK;
    if (st == TK_OK)
        snprintf(err, errlen, "execd did not confirm workspace confinement (HTTP %ld)", status);
    return TK_ERROR;
}

static tk_status create_remote(PGconn *c, const sandbox_session *s, sandbox_handle *out, char *err,
                               size_t errlen)
{
    const app_settings *cfg = app_get()->cfg;
    json_t *body = tk_json_obj(
        "image", tk_json_obj("uri", json_string(cfg->sandbox_image), NULL), "entrypoint",
        json_pack("[s,s,s]", "tail", "-f", "/dev/null"), "timeout",
        json_integer(cfg->sandbox_idle_ttl_ms / 1000), "resourceLimits",
        tk_json_obj("cpu", json_string(cfg->sandbox_cpu), "memory",
                    json_string(cfg->sandbox_memory), NULL),
        "metadata",
        tk_json_obj("app", json_string("tusko"), "user", json_string(s->user_id), "session",
                    json_string(s->session_id), "sandbox", json_string(out->id), NULL),
        NULL);
    sandbox_lifecycle_resp r;
    sandbox_lifecycle_call("POST", "/sandboxes", body, 60000, &r);
    if (r.status != 202 && r.status != 200 && r.status != 201) {
        char m[300];
        sandbox_lifecycle_error_text(&r, m, sizeof m);
        snprintf(err, errlen, "the sandbox service refused to create a sandbox: %s", m);
        sandbox_lifecycle_resp_free(&r);
        return TK_ERROR;
    }
    const char *rid = tk_json_str(r.body, "id");
    if (!rid || !*rid || strlen(rid) >= sizeof out->remote_id || strpbrk(rid, "/?#%\r\n ")) {
        snprintf(err, errlen, "the sandbox service answered a create without a usable id");
        sandbox_lifecycle_resp_free(&r);
        return TK_ERROR;
    }
    snprintf(out->remote_id, sizeof out->remote_id, "%s", rid);
    const char *st0 = tk_json_str(json_object_get(r.body, "status"), "state");
    int immediate = st0 && strcmp(st0, "Running") == 0;
    pool_label(&r, immediate, out->spawn.pool, sizeof out->spawn.pool);
    sandbox_lifecycle_resp_free(&r);
    {
        const char *p[] = {out->id, out->remote_id, out->spawn.pool};
        tk_pg_exec(c, "UPDATE sandboxes SET remote_id = $2, pool = $3 WHERE id = $1", 3, p);
    }
    /* wait until it runs */
    int64_t deadline = tk_mono_ms() + cfg->sandbox_start_timeout_ms;
    int wait = 20;
    char state[32] = "";
    while (!immediate) {
        if (sandbox_lifecycle_state(out->remote_id, state, sizeof state) == TK_OK) {
            if (strcmp(state, "Running") == 0)
                break;
            if (!state[0] || strcasecmp(state, "Failed") == 0 ||
                strcasecmp(state, "Terminated") == 0) {
                snprintf(err, errlen, "the new sandbox did not start (%s)",
                         state[0] ? state : "it vanished");
                return TK_ERROR;
            }
        }
        if (cancelled(s)) {
            snprintf(err, errlen, "cancelled while the sandbox was starting");
            return TK_ECLOSED;
        }
        if (tk_mono_ms() > deadline) {
            char d[32];
            tk_format_duration(cfg->sandbox_start_timeout_ms, d, sizeof d);
            snprintf(err, errlen, "the new sandbox was not ready within %s (SANDBOX_START_TIMEOUT)",
                     d);
            return TK_ETIMEOUT;
        }
        sleep_or_cancel(s, wait);
        wait = wait < 500 ? wait * 2 : 500;
    }
    char path[300];
    snprintf(path, sizeof path, "/sandboxes/%s/endpoints/%d?use_server_proxy=true", out->remote_id,
             TK_EXECD_PORT);
    sandbox_lifecycle_call("GET", path, NULL, 30000, &r);
    const char *ep = tk_json_str(r.body, "endpoint");
    if (r.status != 200 || !ep || !*ep) {
        char m[300];
        sandbox_lifecycle_error_text(&r, m, sizeof m);
        snprintf(err, errlen, "the sandbox service gave no execd endpoint: %s", m);
        sandbox_lifecycle_resp_free(&r);
        return TK_ERROR;
    }
    json_t *hdrs = json_object_get(r.body, "headers");
    if (!json_is_object(hdrs))
        hdrs = NULL;
    sandbox_handle_free(out);
    out->execd_url = execd_base(ep);
    out->headers = execd_headers(hdrs);
    /* Defense in depth: besides the client's own check of every path
     * (agent_ws_path, app/workspace.h), execd itself keeps tusko's sandboxes to /workspace.
     * Fail closed: a sandbox that did not confirm is deleted, never used. */
    char cerr[300];
    if (confine_execd(out, cerr, sizeof cerr) != TK_OK) {
        snprintf(err, errlen, "the new sandbox refused workspace confinement: %s", cerr);
        sandbox_lifecycle_resp_free(&r);
        delete_remote(out->remote_id);
        return TK_ERROR;
    }
    char *hs = hdrs ? tk_json_dumps(hdrs) : tk_strdup("{}");
    const char *p[] = {out->id, out->execd_url, hs};
    tk_status st = tk_pg_exec(c,
                              "UPDATE sandboxes SET state = 'live', execd_url = $2, execd_headers "
                              "= $3::jsonb, ready_at = now(), last_used_at = now(), renewed_at = "
                              "now() WHERE id = $1",
                              3, p);
    free(hs);
    sandbox_lifecycle_resp_free(&r);
    if (st != TK_OK) {
        snprintf(err, errlen, "the database did not record the new sandbox");
        return TK_ERROR;
    }
    return TK_OK;
}

static void delete_remote(const char *remote_id)
{
    if (!remote_id || !*remote_id)
        return;
    char path[300];
    snprintf(path, sizeof path, "/sandboxes/%s", remote_id);
    sandbox_lifecycle_resp r;
    sandbox_lifecycle_call("DELETE", path, NULL, 30000, &r);
    sandbox_lifecycle_resp_free(&r);
}

/* Checks the user's live sandboxes with the service and marks the ones it no
 * longer has gone (so a reaped sandbox frees its quota slot). */
static void reconcile_user(PGconn *c, const char *user_id)
{
    const char *p[] = {user_id};
    PGresult *r = tk_pg_query(c,
                              "SELECT id, remote_id FROM sandboxes WHERE user_id = $1 AND state = "
                              "'live' AND remote_id IS NOT NULL",
                              1, p);
    for (int i = 0; tk_pg_ok(r) && i < PQntuples(r); i++) {
        char why[128];
        if (remote_alive(PQgetvalue(r, i, 1), why, sizeof why) == 0)
            mark_gone(c, PQgetvalue(r, i, 0), why);
    }
    PQclear(r);
}

tk_status getOrCreateOpenSandbox(const sandbox_session *s, sandbox_handle *out,
                                 sandbox_quota *quota, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (quota)
        quota->live = quota->max = 0;
    if (!sandbox_configured()) {
        snprintf(err, errlen, "code execution is off on this server (%s not set)",
                 app_get()->execution_missing);
        return TK_EDENIED;
    }
    const app_settings *cfg = app_get()->cfg;
    snprintf(out->user_id, sizeof out->user_id, "%s", s->user_id);
    snprintf(out->session_id, sizeof out->session_id, "%s", s->session_id);
    out->cancel = s->cancel;
    PGconn *c = app_db_acquire();
    if (!c) {
        snprintf(err, errlen, "the database did not answer");
        return TK_ERROR;
    }
    int64_t t0 = tk_mono_ns(), wall0 = tk_now_ms();
    int64_t wait_deadline = tk_mono_ms() + cfg->sandbox_start_timeout_ms + 5000;
    tk_status st = TK_ERROR;
    int reconciled = 0;
    for (;;) {
        char state[16];
        int64_t idle = 0, since_renew = 0;
        if (load_active(c, s->session_id, out, state, sizeof state, &idle, &since_renew) != TK_OK) {
            snprintf(err, errlen, "the database did not answer");
            goto out;
        }
        if (strcmp(state, "live") == 0) {
            char why[128];
            if (idle >= VERIFY_IDLE_MS && remote_alive(out->remote_id, why, sizeof why) == 0) {
                mark_gone(c, out->id, why);
                continue; /* create a new one below */
            }
            touch(c, out, since_renew);
            st = TK_OK;
            goto out;
        }
        if (strcmp(state, "creating") == 0) {
            /* another call is creating this chat's sandbox: wait for it */
            if (tk_mono_ms() > wait_deadline || cancelled(s)) {
                snprintf(err, errlen, "the sandbox of this chat is still starting; try again");
                st = cancelled(s) ? TK_ECLOSED : TK_ETIMEOUT;
                goto out;
            }
            sleep_or_cancel(s, 100);
            continue;
        }
        /* none: reserve a slot */
        char gone_reason[128] = "", gone_id[TK_UUID_LEN] = "";
        int replaced = unnoticed_gone(c, s->session_id, gone_reason, sizeof gone_reason, gone_id);
        tk_uuid4(out->id);
        char maxs[16];
        snprintf(maxs, sizeof maxs, "%lld", (long long)cfg->max_sandboxes_per_user);
        const char *p[] = {out->id, s->user_id, s->session_id, maxs, STALE_CREATING};
        PGresult *r = tk_pg_query(c,
                                  "SELECT outcome, coalesce(sandbox_id::text, ''), live FROM "
                                  "tusko_sandbox_reserve($1, $2, $3, $4::int, $5::interval)",
                                  5, p);
        if (!tk_pg_ok(r) || PQntuples(r) != 1) {
            PQclear(r);
            snprintf(err, errlen, "the database did not answer");
            goto out;
        }
        char outcome[16];
        snprintf(outcome, sizeof outcome, "%s", PQgetvalue(r, 0, 0));
        int64_t live64 = 0;
        tk_parse_i64(PQgetvalue(r, 0, 2), 0, 1 << 30, &live64);
        int live = (int)live64;
        PQclear(r);
        if (strcmp(outcome, "exists") == 0)
            continue; /* someone else reserved it meanwhile */
        if (strcmp(outcome, "quota") == 0) {
            if (!reconciled) {
                reconciled = 1;
                reconcile_user(c, s->user_id); /* a reaped one frees its slot */
                continue;
            }
            if (quota) {
                quota->live = live;
                quota->max = (int)cfg->max_sandboxes_per_user;
            }
            snprintf(err, errlen,
                     "sandbox quota reached (HTTP 429): %d of %lld live sandboxes per user are in "
                     "use (MAX_SANDBOXES_PER_USER); finish or delete another chat's sandbox first",
                     live, (long long)cfg->max_sandboxes_per_user);
            st = TK_EDENIED;
            goto out;
        }
        /* reserved: create it */
        out->spawn.created = 1;
        out->spawn.replaced = replaced;
        snprintf(out->spawn.gone_reason, sizeof out->spawn.gone_reason, "%s", gone_reason);
        out->spawn.live = live;
        out->spawn.max = (int)cfg->max_sandboxes_per_user;
        st = create_remote(c, s, out, err, errlen);
        if (st != TK_OK) {
            /* free the slot; remove what may have been made */
            delete_remote(out->remote_id);
            const char *q[] = {out->id};
            tk_pg_exec(c, "DELETE FROM sandboxes WHERE id = $1", 1, q);
            out->spawn.created = 0;
            goto out;
        }
        if (replaced) {
            const char *q[] = {s->session_id};
            tk_pg_exec(c,
                       "UPDATE sandboxes SET gone_noticed = true WHERE session_id = $1 AND state = "
                       "'gone'",
                       1, q);
        }
        snprintf(out->spawn.remote_id, sizeof out->spawn.remote_id, "%s", out->remote_id);
        out->spawn.started_ms = wall0;
        out->spawn.duration_ms = (double)(tk_mono_ns() - t0) / 1e6;
        tk_info("sandbox",
                "msg=\"sandbox created\" sandbox=%s remote=%s session=%s user=%s pool=\"%s\" "
                "quota=\"%d of %d\" ms=%.1f",
                out->id, out->remote_id, s->session_id, s->user_id, out->spawn.pool, live,
                out->spawn.max, out->spawn.duration_ms);
        st = TK_OK;
        goto out;
    }
out:
    app_db_release(c);
    if (st != TK_OK)
        sandbox_handle_free(out);
    return st;
}

int sandbox_check_gone(sandbox_handle *h)
{
    if (!h->remote_id[0])
        return 0;
    char why[128];
    if (remote_alive(h->remote_id, why, sizeof why) != 0)
        return 0;
    PGconn *c = app_db_acquire();
    if (c) {
        mark_gone(c, h->id, why);
        app_db_release(c);
    }
    return 1;
}

void sandbox_release_session(const char *session_id)
{
    if (!sandbox_configured())
        return;
    PGconn *c = app_db_acquire();
    if (!c)
        return;
    const char *p[] = {session_id};
    PGresult *r =
        tk_pg_query(c,
                    "UPDATE sandboxes SET state = 'gone', gone_reason = 'chat deleted', "
                    "gone_at = now(), gone_noticed = true WHERE session_id = $1 AND state "
                    "<> 'gone' RETURNING coalesce(remote_id, '')",
                    1, p);
    for (int i = 0; tk_pg_ok(r) && i < PQntuples(r); i++)
        delete_remote(PQgetvalue(r, i, 0));
    PQclear(r);
    app_db_release(c);
}

tk_status sandbox_release_user(PGconn *c, const char *user_id, int *released, char *err,
                               size_t errlen)
{
    *released = 0;
    const char *p[] = {user_id};
    PGresult *r = tk_pg_query(c,
                              "SELECT id, coalesce(remote_id, '') FROM sandboxes WHERE user_id = "
                              "$1 AND state <> 'gone' ORDER BY created_at",
                              1, p);
    if (!tk_pg_ok(r)) {
        PQclear(r);
        snprintf(err, errlen, "the database did not answer");
        return TK_ERROR;
    }
    tk_status st = TK_OK;
    for (int i = 0; i < PQntuples(r) && st == TK_OK; i++) {
        const char *id = PQgetvalue(r, i, 0), *rid = PQgetvalue(r, i, 1);
        if (*rid) {
            if (!sandbox_configured()) {
                snprintf(err, errlen,
                         "sandbox %s cannot be released: the sandbox service is not configured "
                         "(OPENSANDBOX_URL, OPENSANDBOX_API_KEY)",
                         rid);
                st = TK_ERROR;
                break;
            }
            char path[300];
            snprintf(path, sizeof path, "/sandboxes/%s", rid);
            sandbox_lifecycle_resp lr;
            sandbox_lifecycle_call("DELETE", path, NULL, 30000, &lr);
            /* 404: the service no longer has it, which is what was wanted */
            int gone = (lr.status >= 200 && lr.status < 300) || lr.status == 404;
            if (!gone) {
                char why[400];
                sandbox_lifecycle_error_text(&lr, why, sizeof why);
                snprintf(err, errlen, "the sandbox service did not delete sandbox %s: %s", rid,
                         lr.status ? why : lr.error);
                st = TK_ERROR;
            }
            sandbox_lifecycle_resp_free(&lr);
            if (!gone)
                break;
            if (lr.status != 404)
                (*released)++;
        }
        /* (a row without a remote id is a creation that never finished) */
        mark_gone(c, id, "account deleted");
    }
    PQclear(r);
    return st;
}

/* ---------- reconciliation ---------- */

void sandbox_sweep_now(void)
{
    if (!sandbox_configured())
        return;
    PGconn *c = app_db_acquire();
    if (!c)
        return;
    /* the service's live sandboxes of ours */
    json_t *alive = json_object();
    int complete = 1;
    for (int page = 1; page <= 100; page++) {
        char path[200];
        snprintf(path, sizeof path, "/sandboxes?metadata=app%%3Dtusko&page=%d&pageSize=100", page);
        sandbox_lifecycle_resp r;
        sandbox_lifecycle_call("GET", path, NULL, 20000, &r);
        if (r.status != 200) {
            complete = 0;
            sandbox_lifecycle_resp_free(&r);
            break;
        }
        size_t i;
        json_t *it;
        json_array_foreach(json_object_get(r.body, "items"), i, it)
        {
            const char *id = tk_json_str(it, "id");
            const char *state = tk_json_str(json_object_get(it, "status"), "state");
            if (id && state && strcasecmp(state, "Terminated") != 0 &&
                strcasecmp(state, "Failed") != 0 && strcasecmp(state, "Stopping") != 0)
                json_object_set_new(alive, id, json_true());
        }
        int more =
            json_is_true(json_object_get(json_object_get(r.body, "pagination"), "hasNextPage"));
        sandbox_lifecycle_resp_free(&r);
        if (!more)
            break;
    }
    if (complete) {
        PGresult *r = tk_pg_query(c,
                                  "SELECT id, remote_id FROM sandboxes WHERE state = 'live' AND "
                                  "remote_id IS NOT NULL AND ready_at < now() - interval '30 "
                                  "seconds'",
                                  0, NULL);
        for (int i = 0; tk_pg_ok(r) && i < PQntuples(r); i++) {
            const char *rid = PQgetvalue(r, i, 1);
            if (json_object_get(alive, rid))
                continue;
            /* not listed: make sure (a list filter the service does not honour
             * must not wrongly reap) */
            char why[128];
            if (remote_alive(rid, why, sizeof why) == 0)
                mark_gone(c, PQgetvalue(r, i, 0), why);
        }
        PQclear(r);
    }
    json_decref(alive);
    /* sandboxes of deleted chats */
    PGresult *r = tk_pg_query(c,
                              "UPDATE sandboxes s SET state = 'gone', gone_reason = 'chat "
                              "deleted', gone_at = now(), gone_noticed = true WHERE state <> "
                              "'gone' AND created_at < now() - interval '1 minute' AND NOT EXISTS "
                              "(SELECT 1 FROM chat_sessions c WHERE c.id = s.session_id) "
                              "RETURNING coalesce(remote_id, '')",
                              0, NULL);
    for (int i = 0; tk_pg_ok(r) && i < PQntuples(r); i++)
        delete_remote(PQgetvalue(r, i, 0));
    PQclear(r);
    app_db_release(c);
}

/* ---------- GET /api/sandboxes ---------- */

static void h_list(tk_req *r, void *ud)
{
    PGconn *c = app_db_acquire();
    if (!c) {
        app_respond_db_unavailable(r);
        return;
    }
    char ttl[24];
    snprintf(ttl, sizeof ttl, "%lld", (long long)(app_get()->cfg->sandbox_idle_ttl_ms / 1000));
    const char *p[] = {app_req_user(r)->id, ttl};
    PGresult *res = tk_pg_query(
        c,
        "SELECT coalesce(jsonb_agg(jsonb_build_object('id', id, 'session_id', session_id, "
        "'remote_id', remote_id, 'state', state, 'pool', pool, 'created_at', created_at, "
        "'ready_at', ready_at, 'last_used_at', last_used_at, 'reaped_after', last_used_at + "
        "make_interval(secs => $2::int)) ORDER BY created_at), '[]')::text, count(*) FROM "
        "sandboxes WHERE user_id = $1 AND state IN ('creating', 'live')",
        2, p);
    if (!tk_pg_ok(res)) {
        app_respond_db_unavailable(r);
    } else {
        json_t *items = json_loads(PQgetvalue(res, 0, 0), 0, NULL);
        int64_t n = 0;
        tk_parse_i64(PQgetvalue(res, 0, 1), 0, INT64_MAX, &n);
        tk_respond_json(r, 200,
                        tk_json_obj("sandboxes", items ? items : json_array(), "live",
                                    json_integer(n), "max",
                                    json_integer(app_get()->cfg->max_sandboxes_per_user),
                                    "execution", json_boolean(sandbox_configured()), NULL));
    }
    PQclear(res);
    app_db_release(c);
}

const tk_route sandbox_routes[] = {
    {"GET", "/api/sandboxes", h_list, NULL, TK_ROUTE_BLOCKING},
};
const size_t sandbox_nroutes = TK_ARRAY_LEN(sandbox_routes);
