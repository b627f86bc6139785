/* /api/schedules (see schedules_api.h). */
#include "app/schedules/schedules_api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/agent/bus.h"
#include "app/app.h"
#include "app/auth/auth.h"
#include "app/schedules/schedules.h"
#include "app/schedules/schedules_runner.h"
#include "lib/id.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/pg.h"
#include "lib/tktime.h"

#define RUNS_DEFAULT 20
#define RUNS_MAX     100

static void not_found(tk_req *r)
{
    tk_respond_error(r, 404, "NOT_FOUND", "no such schedule");
}

/* A connection, or NULL after answering 503. */
static PGconn *db(tk_req *r)
{
    PGconn *c = app_db_acquire();
    if (!c)
        app_respond_db_unavailable(r);
    return c;
}

/* Answers a failed schedules_* call. */
static void respond_status(tk_req *r, tk_status st, const char *err)
{
    switch (st) {
    case TK_EINVAL:
        tk_respond_error(r, 400, "INVALID_SCHEDULE", "%s", err);
        break;
    case TK_EDENIED:
        tk_respond_error(r, 409, "SCHEDULE_LIMIT", "%s", err);
        break;
    case TK_ENOENT:
        not_found(r);
        break;
    default:
        app_respond_db_unavailable(r);
        break;
    }
}

/* A string or absent; non-zero (after a 400) when present and not a string. */
static int body_str(tk_req *r, const json_t *body, const char *key, const char **out)
{
    json_t *v = json_object_get(body, key);
    *out = NULL;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v)) {
        tk_respond_error(r, 400, "INVALID_SCHEDULE", "%s: a string is required", key);
        return 1;
    }
    *out = json_string_value(v);
    return 0;
}

static void h_create(tk_req *r, void *ud)
{
    (void)ud;
    json_t *body = tk_req_json(r, 0);
    if (!body)
        return;
    if (!json_is_object(body)) {
        tk_respond_error(r, 400, "INVALID_SCHEDULE", "the body must be a JSON object");
        return;
    }
    schedules_new n = {0};
    if (body_str(r, body, "name", &n.name) || body_str(r, body, "prompt", &n.prompt) ||
        body_str(r, body, "cron", &n.cron) || body_str(r, body, "timezone", &n.zone) ||
        body_str(r, body, "notify", &n.notify) ||
        body_str(r, body, "missed_policy", &n.missed_policy))
        return;
    json_t *pz = json_object_get(body, "paused");
    if (pz && !json_is_boolean(pz)) {
        tk_respond_error(r, 400, "INVALID_SCHEDULE", "paused: true or false");
        return;
    }
    n.paused = json_is_true(pz);
    json_t *aa = json_object_get(body, "alert_after");
    json_t *pa = json_object_get(body, "pause_after_alert");
    n.alert_after = -1;
    n.pause_after_alert = json_is_true(pa);
    if (aa && (!json_is_integer(aa) || json_integer_value(aa) < 0 ||
               json_integer_value(aa) > SCHEDULES_ALERT_AFTER_MAX)) {
        tk_respond_error(r, 400, "INVALID_SCHEDULE",
                         "alert_after: a whole number from 0 (no alerts) to %d",
                         SCHEDULES_ALERT_AFTER_MAX);
        return;
    }
    if (aa)
        n.alert_after = (int)json_integer_value(aa);
    if (pa && !json_is_boolean(pa)) {
        tk_respond_error(r, 400, "INVALID_SCHEDULE", "pause_after_alert: true or false");
        return;
    }
    PGconn *c = db(r);
    if (!c)
        return;
    json_t *out = NULL;
    char err[512] = "";
    tk_status st = schedules_create(c, app_req_user(r)->id, &n, &out, err, sizeof err);
    app_db_release(c);
    if (st != TK_OK) {
        respond_status(r, st, err);
        return;
    }
    tk_info("schedules", "msg=\"schedule created\" schedule=%s user=%s", tk_json_str(out, "id"),
            app_req_user(r)->id);
    tk_respond_json(r, 201, out);
}

static void h_list(tk_req *r, void *ud)
{
    (void)ud;
    PGconn *c = db(r);
    if (!c)
        return;
    json_t *arr = schedules_list(c, app_req_user(r)->id);
    app_db_release(c);
    if (!arr) {
        app_respond_db_unavailable(r);
        return;
    }
    tk_respond_json(r, 200, tk_json_obj("schedules", arr, NULL));
}

static void h_get(tk_req *r, void *ud)
{
    (void)ud;
    PGconn *c = db(r);
    if (!c)
        return;
    tk_status st;
    json_t *j = schedules_get(c, app_req_user(r)->id, tk_req_param(r, "id"), &st);
    app_db_release(c);
    if (!j)
        respond_status(r, st, "");
    else
        tk_respond_json(r, 200, j);
}

static void h_patch(tk_req *r, void *ud)
{
    (void)ud;
    json_t *body = tk_req_json(r, 0);
    if (!body)
        return;
    PGconn *c = db(r);
    if (!c)
        return;
    json_t *out = NULL;
    char err[512] = "";
    tk_status st = schedules_update(c, app_req_user(r)->id, tk_req_param(r, "id"), body, &out, err,
                                    sizeof err);
    app_db_release(c);
    if (st != TK_OK)
        respond_status(r, st, err);
    else
        tk_respond_json(r, 200, out);
}

static void h_delete(tk_req *r, void *ud)
{
    (void)ud;
    PGconn *c = db(r);
    if (!c)
        return;
    tk_status st = schedules_delete(c, app_req_user(r)->id, tk_req_param(r, "id"));
    app_db_release(c);
    if (st != TK_OK) {
        respond_status(r, st, "");
        return;
    }
    tk_info("schedules", "msg=\"schedule deleted\" schedule=%s user=%s", tk_req_param(r, "id"),
            app_req_user(r)->id);
    tk_respond_empty(r, 204);
}

/* The owner's schedule (deleted ones too: their history stays readable)? */
static int owns(tk_req *r, PGconn *c, const char *id)
{
    if (!tk_uuid_valid(id)) {
        not_found(r);
        return 0;
    }
    const char *p[] = {id, app_req_user(r)->id};
    PGresult *res = tk_pg_query(c, "SELECT 1 FROM schedules WHERE id = $1 AND user_id = $2", 2, p);
    int ok = tk_pg_ok(res), n = ok ? PQntuples(res) : 0;
    PQclear(res);
    if (!ok)
        app_respond_db_unavailable(r);
    else if (!n)
        not_found(r);
    return ok && n;
}

#define RUN_JSON_SQL                                                                               \
    "jsonb_build_object('id', r.id, 'schedule_id', r.schedule_id, 'scheduled_for', "               \
    "r.scheduled_for, 'trigger', r.trigger, 'status', r.status, 'session_id', r.session_id, "      \
    "'created_at', r.created_at, 'started_at', r.started_at, 'finished_at', r.finished_at, "       \
    "'error', r.error, 'summary', r.summary)::text"

static void h_runs(tk_req *r, void *ud)
{
    (void)ud;
    int64_t limit = RUNS_DEFAULT;
    const char *lv = tk_req_query(r, "limit");
    if (lv && tk_parse_i64(lv, 1, RUNS_MAX, &limit) != TK_OK) {
        tk_respond_error(r, 400, "INVALID_REQUEST", "\"limit\" must be an integer from 1 to %d",
                         RUNS_MAX);
        return;
    }
    /* before: the scheduled_for of the last run of the previous page */
    const char *before = tk_req_query(r, "before");
    int64_t ms;
    if (before && tk_time_parse_rfc3339(before, &ms) != TK_OK) {
        tk_respond_error(r, 400, "INVALID_REQUEST", "\"before\" must be an RFC 3339 time");
        return;
    }
    PGconn *c = db(r);
    if (!c)
        return;
    const char *id = tk_req_param(r, "id");
    if (!owns(r, c, id)) {
        app_db_release(c);
        return;
    }
    char lim[24];
    snprintf(lim, sizeof lim, "%lld", (long long)limit + 1);
    const char *p[] = {id, before, lim};
    PGresult *res = tk_pg_query(c,
                                "SELECT " RUN_JSON_SQL ", r.scheduled_for FROM schedule_runs r "
                                "WHERE r.schedule_id = $1 AND ($2::timestamptz IS NULL OR "
                                "r.scheduled_for < $2::timestamptz) ORDER BY r.scheduled_for DESC "
                                "LIMIT $3::int",
                                3, p);
    app_db_release(c);
    if (!tk_pg_ok(res)) {
        PQclear(res);
        app_respond_db_unavailable(r);
        return;
    }
    json_t *arr = json_array();
    int n = PQntuples(res), more = n > limit;
    for (int i = 0; i < n && i < limit; i++) {
        json_t *j = json_loads(PQgetvalue(res, i, 0), 0, NULL);
        if (j)
            json_array_append_new(arr, j);
    }
    json_t *next = json_null();
    if (more) {
        json_t *last = json_array_get(arr, json_array_size(arr) - 1);
        const char *sf = last ? tk_json_str(last, "scheduled_for") : NULL;
        if (sf)
            next = json_string(sf);
    }
    PQclear(res);
    tk_respond_json(
        r, 200,
        tk_json_obj("runs", arr, "has_more", json_boolean(more), "next_before", next, NULL));
}

static void h_run_now(tk_req *r, void *ud)
{
    (void)ud;
    const char *id = tk_req_param(r, "id");
    if (!tk_uuid_valid(id)) {
        not_found(r);
        return;
    }
    PGconn *c = db(r);
    if (!c)
        return;
    char run[TK_UUID_LEN];
    tk_uuid7(run);
    const char *p[] = {id, app_req_user(r)->id, run, agent_bus_instance_id()};
    PGresult *res =
        tk_pg_query(c, "SELECT outcome, run FROM tusko_schedule_run_now($1, $2, $3, $4)", 4, p);
    app_db_release(c);
    if (!tk_pg_ok(res) || PQntuples(res) != 1) {
        PQclear(res);
        app_respond_db_unavailable(r);
        return;
    }
    const char *o = PQgetvalue(res, 0, 0);
    if (strcmp(o, "missing") == 0)
        not_found(r);
    else if (strcmp(o, "busy") == 0)
        tk_respond_json(r, 409,
                        tk_json_obj("code", json_string("RUN_IN_PROGRESS"), "message",
                                    json_string("a run of this schedule is queued or running"),
                                    "run_id", json_string(PQgetvalue(res, 0, 1)), NULL));
    else {
        schedules_runner_wake();
        tk_info("schedules", "msg=\"run now\" schedule=%s run=%s", id, run);
        tk_respond_json(
            r, 202, tk_json_obj("run_id", json_string(run), "status", json_string("queued"), NULL));
    }
    PQclear(res);
}

/* What an expression would do, before it is saved: its next five fire times,
 * or 400 with why not (the same checks as create). */
static void h_preview(tk_req *r, void *ud)
{
    (void)ud;
    const char *cron = tk_req_query(r, "cron"), *zone = tk_req_query(r, "timezone");
    PGconn *c = db(r);
    if (!c)
        return;
    int64_t now = schedules_db_now(c);
    app_db_release(c);
    if (now < 0) {
        app_respond_db_unavailable(r);
        return;
    }
    schedules_spec sp;
    char err[512];
    int64_t mi = app_req_user(r)->admin ? 0 : app_get()->cfg->schedules.min_interval_ms;
    if (schedules_spec_load(cron, zone && *zone ? zone : NULL, mi, now, &sp, err, sizeof err) !=
        TK_OK) {
        tk_respond_error(r, 400, "INVALID_SCHEDULE", "%s", err);
        return;
    }
    json_t *next = schedules_next_json(&sp, now, SCHEDULES_NEXT_SHOWN);
    schedules_spec_free(&sp);
    tk_respond_json(r, 200, tk_json_obj("next_fires", next, NULL));
}

const tk_route schedules_api_routes[] = {
    {"GET", "/api/schedules/preview", h_preview, NULL, TK_ROUTE_BLOCKING},
    {"POST", "/api/schedules", h_create, NULL, TK_ROUTE_BLOCKING, 65536},
    {"GET", "/api/schedules", h_list, NULL, TK_ROUTE_BLOCKING},
    {"GET", "/api/schedules/{id}", h_get, NULL, TK_ROUTE_BLOCKING},
    {"PATCH", "/api/schedules/{id}", h_patch, NULL, TK_ROUTE_BLOCKING, 65536},
    {"DELETE", "/api/schedules/{id}", h_delete, NULL, TK_ROUTE_BLOCKING},
    {"GET", "/api/schedules/{id}/runs", h_runs, NULL, TK_ROUTE_BLOCKING},
    {"POST", "/api/schedules/{id}/run", h_run_now, NULL, TK_ROUTE_BLOCKING, 1024},
};
const size_t schedules_api_nroutes = TK_ARRAY_LEN(schedules_api_routes);
