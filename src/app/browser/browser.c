/*
 * The browser client: the Steel API calls, the two entry points, the per-user
 * quota, the rows that remember each chat's browser, and the sweep. See
 * browser.h.
 */
#include "app/browser/browser.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/app.h"
#include "lib/httpc.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/tktime.h"

#define STALE_CREATING "2 minutes"
/* a page step may wait for a load (30 s each at browserd) */
#define ACTIONS_TIMEOUT_MS 180000
#define MAX_ANSWER         (64u << 20) /* 20 full-page screenshots fit */

int browser_configured(void)
{
    return app_get()->browser_enabled;
}

/* ---------- the Steel API ---------- */

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char base[600];
static char key_header[600];

static void init_once(void)
{
    const app_settings *s = app_get()->cfg;
    const char *u = s->steel_url ? s->steel_url : "";
    size_t n = strlen(u);
    while (n && u[n - 1] == '/')
        n--;
    if (n >= 3 && strncmp(u + n - 3, "/v1", 3) == 0)
        n -= 3;
    snprintf(base, sizeof base, "%.*s/v1", (int)n, u);
    snprintf(key_header, sizeof key_header, "steel-api-key: %s",
             s->steel_api_key ? s->steel_api_key : "");
}

typedef struct {
    long status;
    json_t *body;
    char error[300];
} steel_resp;

/* METHOD base+path with an optional JSON body (stolen). TK_OK when an answer
 * arrived (check status); body is its JSON or NULL. */
static tk_status steel_call(const char *method, const char *path, json_t *body, long timeout_ms,
                            const volatile int *cancel, steel_resp *out)
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
                        .timeout_ms = timeout_ms,
                        .max_response = MAX_ANSWER,
                        .cancel = cancel};
    tk_httpc_resp resp;
    tk_status st = tk_httpc_do(&req, &resp);
    free(payload);
    out->status = resp.status;
    if (st != TK_OK) {
        snprintf(out->error, sizeof out->error, "the browser service did not answer %s %s: %s",
                 method, path, resp.error);
    } else if (resp.body.len > 0) {
        out->body = json_loadb(resp.body.data, resp.body.len, 0, NULL);
        if (out->status >= 400) {
            const char *m = tk_json_str(out->body, "message");
            snprintf(out->error, sizeof out->error, "HTTP %ld: %s", out->status,
                     m ? m : "(no message)");
        }
    } else if (out->status >= 400) {
        snprintf(out->error, sizeof out->error, "HTTP %ld", out->status);
    }
    tk_httpc_resp_free(&resp);
    return st;
}

static void steel_resp_free(steel_resp *r)
{
    json_decref(r->body);
    r->body = NULL;
}

/* 1 when the service released the session, 0 when it had ended already or
 * could not be asked (logged). */
static int release_remote(const char *remote_id)
{
    if (!remote_id || !*remote_id)
        return 0;
    char path[300];
    snprintf(path, sizeof path, "/sessions/%s/release", remote_id);
    steel_resp r;
    steel_call("POST", path, json_object(), 30000, NULL, &r);
    if (r.status != 200 && r.status != 404 && r.status != 409)
        tk_warn("browser", "msg=\"release failed\" remote=%s error=\"%s\"", remote_id,
                r.error[0] ? r.error : "?");
    int released = r.status == 200;
    steel_resp_free(&r);
    return released;
}

/* ---------- rows ---------- */

static void mark_gone(PGconn *c, const char *id, const char *reason)
{
    const char *p[] = {id, reason};
    tk_pg_exec(c,
               "UPDATE browsers SET state = 'gone', gone_reason = $2, gone_at = now() WHERE id = "
               "$1 AND state <> 'gone'",
               2, p);
    tk_info("browser", "msg=\"browser gone\" browser=%s reason=\"%s\"", id, reason);
}

/* The chat's active row: state "live", "creating" or "" (none). */
static tk_status load_active(PGconn *c, const char *session_id, browser_handle *h, char *state,
                             size_t slen)
{
    const char *p[] = {session_id};
    PGresult *r = tk_pg_query(c,
                              "SELECT id, coalesce(remote_id, ''), state FROM browsers WHERE "
                              "session_id = $1 AND state IN ('creating', 'live')",
                              1, p);
    if (!tk_pg_ok(r)) {
        PQclear(r);
        return TK_ERROR;
    }
    state[0] = 0;
    if (PQntuples(r) == 1) {
        snprintf(h->id, sizeof h->id, "%s", PQgetvalue(r, 0, 0));
        snprintf(h->remote_id, sizeof h->remote_id, "%s", PQgetvalue(r, 0, 1));
        snprintf(state, slen, "%s", PQgetvalue(r, 0, 2));
    }
    PQclear(r);
    return TK_OK;
}

static void touch(PGconn *c, const char *id)
{
    const char *p[] = {id};
    tk_pg_exec(c, "UPDATE browsers SET last_used_at = now() WHERE id = $1", 1, p);
}

/* The reason the chat's latest browser ended, when it had one. */
static int last_gone(PGconn *c, const char *session_id, char *reason, size_t rlen)
{
    const char *p[] = {session_id};
    PGresult *r = tk_pg_query(c,
                              "SELECT coalesce(gone_reason, 'ended') FROM browsers WHERE "
                              "session_id = $1 AND state = 'gone' AND remote_id IS NOT NULL "
                              "ORDER BY created_at DESC LIMIT 1",
                              1, p);
    int found = tk_pg_ok(r) && PQntuples(r) == 1;
    if (found)
        snprintf(reason, rlen, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    return found;
}

int browser_live_count(PGconn *c, const char *user_id)
{
    const char *p[] = {user_id};
    PGresult *r = tk_pg_query(c,
                              "SELECT count(*) FROM browsers WHERE user_id = $1 AND state IN "
                              "('creating', 'live')",
                              1, p);
    int n = tk_pg_ok(r) && PQntuples(r) == 1 ? atoi(PQgetvalue(r, 0, 0)) : 0;
    PQclear(r);
    return n;
}

static int cancelled(const browser_session *s)
{
    return s->cancel && *s->cancel;
}

static void off_message(char *err, size_t errlen)
{
    snprintf(err, errlen, "the browser is off on this server (%s not set)",
             app_get()->browser_missing);
}

tk_status browser_get_existing(const browser_session *s, browser_handle *out, char *err,
                               size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->cancel = s->cancel;
    if (!browser_configured()) {
        off_message(err, errlen);
        return TK_EDENIED;
    }
    PGconn *c = app_db_acquire();
    if (!c) {
        snprintf(err, errlen, "the database did not answer");
        return TK_ERROR;
    }
    char state[16], reason[128];
    tk_status st = load_active(c, s->session_id, out, state, sizeof state);
    if (st != TK_OK) {
        snprintf(err, errlen, "the database did not answer");
    } else if (strcmp(state, "live") == 0) {
        touch(c, out->id);
    } else if (strcmp(state, "creating") == 0) {
        snprintf(err, errlen, "the browser of this chat is still starting; try again");
        st = TK_ENOENT;
    } else if (last_gone(c, s->session_id, reason, sizeof reason)) {
        snprintf(err, errlen,
                 "no page is open: this chat's browser has ended (%s); browser_navigate to a URL "
                 "starts a new one",
                 reason);
        st = TK_ENOENT;
    } else {
        snprintf(err, errlen,
                 "no page is open: this chat has no browser yet; browser_navigate to a URL first");
        st = TK_ENOENT;
    }
    app_db_release(c);
    return st;
}

/* Creates the remote session of our reserved row. */
static tk_status create_remote(PGconn *c, const browser_session *s, browser_handle *out, char *err,
                               size_t errlen)
{
    const app_settings *cfg = app_get()->cfg;
    json_t *body = tk_json_obj("timeout", json_integer(cfg->browser_session_timeout_ms), NULL);
    steel_resp r;
    steel_call("POST", "/sessions", body, 120000, s->cancel, &r);
    if (r.status != 200 && r.status != 201) {
        if (r.status == 429)
            snprintf(err, errlen,
                     "the browser service is at its limit of sessions (%s); try again later",
                     r.error);
        else
            snprintf(err, errlen, "the browser service did not create a browser: %s",
                     r.error[0] ? r.error : "no answer");
        steel_resp_free(&r);
        return TK_ERROR;
    }
    const char *rid = tk_json_str(r.body, "id");
    if (!rid || !*rid || strlen(rid) >= sizeof out->remote_id || strpbrk(rid, "/?#%\r\n \"\\")) {
        snprintf(err, errlen, "the browser service answered a create without a usable id");
        steel_resp_free(&r);
        return TK_ERROR;
    }
    snprintf(out->remote_id, sizeof out->remote_id, "%s", rid);
    const char *pool = tk_json_str(r.body, "pool");
    snprintf(out->spawn.pool, sizeof out->spawn.pool, "%s",
             pool && strcmp(pool, "warm") == 0 ? "warm" : "cold");
    steel_resp_free(&r);
    const char *p[] = {out->id, out->remote_id, out->spawn.pool};
    if (tk_pg_exec(c,
                   "UPDATE browsers SET remote_id = $2, pool = $3, state = 'live', ready_at = "
                   "now(), last_used_at = now() WHERE id = $1 AND state = 'creating'",
                   3, p) != TK_OK) {
        snprintf(err, errlen, "the database did not record the new browser");
        return TK_ERROR;
    }
    return TK_OK;
}

tk_status browser_get_or_create(const browser_session *s, browser_handle *out, browser_quota *quota,
                                char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->cancel = s->cancel;
    if (quota)
        quota->live = quota->max = 0;
    if (!browser_configured()) {
        off_message(err, errlen);
        return TK_EDENIED;
    }
    const app_settings *cfg = app_get()->cfg;
    PGconn *c = app_db_acquire();
    if (!c) {
        snprintf(err, errlen, "the database did not answer");
        return TK_ERROR;
    }
    int64_t t0 = tk_mono_ns(), wall0 = tk_now_ms();
    int64_t wait_deadline = tk_mono_ms() + 130000;
    tk_status st = TK_ERROR;
    for (;;) {
        char state[16];
        if (load_active(c, s->session_id, out, state, sizeof state) != TK_OK) {
            snprintf(err, errlen, "the database did not answer");
            goto out;
        }
        if (strcmp(state, "live") == 0) {
            touch(c, out->id);
            st = TK_OK;
            goto out;
        }
        if (strcmp(state, "creating") == 0) {
            /* another call is creating this chat's browser: wait for it */
            if (tk_mono_ms() > wait_deadline || cancelled(s)) {
                snprintf(err, errlen, "the browser of this chat is still starting; try again");
                st = cancelled(s) ? TK_ECLOSED : TK_ETIMEOUT;
                goto out;
            }
            for (int i = 0; i < 10 && !cancelled(s); i++)
                tk_sleep_ms(10);
            continue;
        }
        char gone_reason[128] = "";
        int replaced = last_gone(c, s->session_id, gone_reason, sizeof gone_reason);
        tk_uuid4(out->id);
        char maxs[16];
        snprintf(maxs, sizeof maxs, "%lld", (long long)cfg->max_browsers_per_user);
        const char *p[] = {out->id, s->user_id, s->session_id, maxs, STALE_CREATING};
        PGresult *r = tk_pg_query(c,
                                  "SELECT outcome, live FROM tusko_browser_reserve($1, $2, $3, "
                                  "$4::int, $5::interval)",
                                  5, p);
        if (!tk_pg_ok(r) || PQntuples(r) != 1) {
            PQclear(r);
            snprintf(err, errlen, "the database did not answer");
            goto out;
        }
        char outcome[16];
        snprintf(outcome, sizeof outcome, "%s", PQgetvalue(r, 0, 0));
        int live = atoi(PQgetvalue(r, 0, 1));
        PQclear(r);
        if (strcmp(outcome, "exists") == 0)
            continue;
        if (strcmp(outcome, "quota") == 0) {
            if (quota) {
                quota->live = live;
                quota->max = (int)cfg->max_browsers_per_user;
            }
            snprintf(err, errlen,
                     "browser quota reached (HTTP 429): %d of %lld live browsers per user are in "
                     "use (MAX_BROWSERS_PER_USER); they end after BROWSER_IDLE_TTL unused, or "
                     "when their chat is deleted",
                     live, (long long)cfg->max_browsers_per_user);
            st = TK_EDENIED;
            goto out;
        }
        out->spawn.created = 1;
        out->spawn.replaced = replaced;
        snprintf(out->spawn.gone_reason, sizeof out->spawn.gone_reason, "%s", gone_reason);
        out->spawn.live = live;
        out->spawn.max = (int)cfg->max_browsers_per_user;
        st = create_remote(c, s, out, err, errlen);
        if (st != TK_OK) {
            release_remote(out->remote_id);
            const char *q[] = {out->id};
            tk_pg_exec(c, "DELETE FROM browsers WHERE id = $1", 1, q);
            out->spawn.created = 0;
            goto out;
        }
        out->spawn.started_ms = wall0;
        out->spawn.duration_ms = (double)(tk_mono_ns() - t0) / 1e6;
        tk_info("browser",
                "msg=\"browser created\" browser=%s remote=%s session=%s user=%s pool=%s "
                "quota=\"%d of %d\" ms=%.1f",
                out->id, out->remote_id, s->session_id, s->user_id, out->spawn.pool, live,
                out->spawn.max, out->spawn.duration_ms);
        goto out;
    }
out:
    app_db_release(c);
    return st;
}

tk_status browser_actions(browser_handle *h, json_t *steps, json_t **answer, char *err,
                          size_t errlen)
{
    *answer = NULL;
    char path[300];
    snprintf(path, sizeof path, "/sessions/%s/actions", h->remote_id);
    steel_resp r;
    steel_call("POST", path, tk_json_obj("steps", json_incref(steps), NULL), ACTIONS_TIMEOUT_MS,
               h->cancel, &r);
    if (r.status == 200 && json_is_object(r.body) &&
        json_is_array(json_object_get(r.body, "results"))) {
        *answer = r.body;
        r.body = NULL;
        return TK_OK;
    }
    tk_status st = TK_ERROR;
    if (r.status == 404 || r.status == 409) {
        h->gone = 1;
        PGconn *c = app_db_acquire();
        if (c) {
            mark_gone(c, h->id, "the browser service ended it");
            app_db_release(c);
        }
        snprintf(err, errlen, "this chat's browser has ended (the browser service ended it)");
        st = TK_ENOENT;
    } else if (h->cancel && *h->cancel) {
        snprintf(err, errlen, "cancelled");
        st = TK_ECLOSED;
    } else {
        snprintf(err, errlen, "%s", r.error[0] ? r.error : "the browser service answered no steps");
    }
    steel_resp_free(&r);
    return st;
}

void browser_release_session(const char *session_id)
{
    if (!browser_configured())
        return;
    PGconn *c = app_db_acquire();
    if (!c)
        return;
    const char *p[] = {session_id};
    PGresult *r = tk_pg_query(c,
                              "UPDATE browsers SET state = 'gone', gone_reason = 'chat deleted', "
                              "gone_at = now() WHERE session_id = $1 AND state <> 'gone' "
                              "RETURNING coalesce(remote_id, '')",
                              1, p);
    app_db_release(c);
    for (int i = 0; tk_pg_ok(r) && i < PQntuples(r); i++)
        release_remote(PQgetvalue(r, i, 0));
    PQclear(r);
}

int browser_release_user(PGconn *c, const char *user_id)
{
    const char *p[] = {user_id};
    /* every browser of the account, live or stuck in creation (no turn of it
     * runs: the caller checked); the rows go with the account, so this is the
     * last moment anything knows of the remote sessions */
    PGresult *r =
        tk_pg_query(c,
                    "UPDATE browsers SET state = 'gone', gone_reason = 'account deleted', "
                    "gone_at = now() WHERE user_id = $1 AND state <> 'gone' RETURNING "
                    "coalesce(remote_id, '')",
                    1, p);
    int n = 0;
    for (int i = 0; tk_pg_ok(r) && i < PQntuples(r); i++) {
        const char *rid = PQgetvalue(r, i, 0);
        if (!*rid)
            continue;
        if (browser_configured())
            n += release_remote(rid);
        else
            tk_warn("browser",
                    "msg=\"browser not released: STEEL_URL is not set; the service ends it at "
                    "its timeout\" remote=%s",
                    rid);
    }
    PQclear(r);
    return n;
}

void browser_sweep_now(void)
{
    if (!browser_configured())
        return;
    PGconn *c = app_db_acquire();
    if (!c)
        return;
    char ttl[32];
    snprintf(ttl, sizeof ttl, "%lld milliseconds", (long long)app_get()->cfg->browser_idle_ttl_ms);
    const char *p[] = {ttl};
    /* unused for BROWSER_IDLE_TTL, or of a chat deleted meanwhile */
    PGresult *r =
        tk_pg_query(c,
                    "UPDATE browsers b SET state = 'gone', gone_at = now(), gone_reason = CASE "
                    "WHEN NOT EXISTS (SELECT 1 FROM chat_sessions s WHERE s.id = b.session_id) "
                    "THEN 'chat deleted' ELSE 'idle for BROWSER_IDLE_TTL' END WHERE state = "
                    "'live' AND (last_used_at < now() - $1::interval OR NOT EXISTS (SELECT 1 "
                    "FROM chat_sessions s WHERE s.id = b.session_id)) RETURNING id, "
                    "coalesce(remote_id, ''), gone_reason",
                    1, p);
    app_db_release(c);
    for (int i = 0; tk_pg_ok(r) && i < PQntuples(r); i++) {
        tk_info("browser", "msg=\"browser released\" browser=%s remote=%s reason=\"%s\"",
                PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), PQgetvalue(r, i, 2));
        release_remote(PQgetvalue(r, i, 1));
    }
    PQclear(r);
}
