/* Scheduled tasks: the spec, fire times, JSON, create/list/get/delete (see schedules.h). */
#include "app/schedules/schedules.h"

#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "app/app.h"
#include "lib/id.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/pg.h"
#include "lib/utf8.h"

tk_status schedules_spec_load(const char *cron, const char *zone, int64_t min_interval_ms,
                              int64_t now_s, schedules_spec *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    char e[200];
    if (!cron || !*cron) {
        snprintf(err, errlen, "cron: an expression is required");
        return TK_EINVAL;
    }
    if (tk_cron_parse(cron, &out->cron, e, sizeof e) != TK_OK) {
        snprintf(err, errlen, "cron: %s", e);
        return TK_EINVAL;
    }
    if (tk_tz_load(zone ? zone : "UTC", &out->tz, e, sizeof e) != TK_OK) {
        snprintf(err, errlen, "timezone: %s", e);
        out->tz = NULL;
        return TK_EINVAL;
    }
    if (min_interval_ms > 0 && !out->cron.once) {
        int64_t prev, t;
        if (!tk_cron_next(&out->cron, out->tz, now_s, &prev)) {
            snprintf(err, errlen, "cron: the expression does not fire in the next 8 years");
            schedules_spec_free(out);
            return TK_EINVAL;
        }
        for (int i = 0;
             i < SCHEDULES_INTERVAL_SAMPLES && tk_cron_next(&out->cron, out->tz, prev, &t); i++) {
            if ((t - prev) * 1000 < min_interval_ms) {
                char a[40], b[40];
                schedules_format_local(out->tz, prev, a, sizeof a);
                schedules_format_local(out->tz, t, b, sizeof b);
                snprintf(err, errlen,
                         "cron: fires %lld s apart (%s, %s); the shortest interval allowed is "
                         "%lld s",
                         (long long)(t - prev), a, b, (long long)(min_interval_ms / 1000));
                schedules_spec_free(out);
                return TK_EINVAL;
            }
            prev = t;
        }
    }
    return TK_OK;
}

void schedules_spec_free(schedules_spec *s)
{
    if (s->tz)
        tk_tz_free(s->tz);
    s->tz = NULL;
}

bool schedules_spec_next(const schedules_spec *s, int64_t after_s, int64_t *next_s)
{
    return tk_cron_next(&s->cron, s->tz, after_s, next_s);
}

void schedules_format_utc(int64_t utc_s, char *out, size_t outlen)
{
    int64_t days = utc_s >= 0 ? utc_s / 86400 : -((-utc_s + 86399) / 86400);
    int64_t sod = utc_s - days * 86400, y;
    unsigned m, d;
    tk_civil_from_days(days, &y, &m, &d);
    snprintf(out, outlen, "%04lld-%02u-%02uT%02d:%02d:%02dZ", (long long)y, m, d, (int)(sod / 3600),
             (int)(sod % 3600 / 60), (int)(sod % 60));
}

void schedules_format_local(const tk_tz *tz, int64_t utc_s, char *out, size_t outlen)
{
    int32_t off = tk_tz_offset(tz, utc_s);
    int64_t local = utc_s + off;
    int64_t days = local >= 0 ? local / 86400 : -((-local + 86399) / 86400);
    int64_t sod = local - days * 86400, y;
    unsigned m, d;
    tk_civil_from_days(days, &y, &m, &d);
    int a = off < 0 ? -off : off;
    snprintf(out, outlen, "%04lld-%02u-%02uT%02d:%02d:%02d%c%02d:%02d", (long long)y, m, d,
             (int)(sod / 3600), (int)(sod % 3600 / 60), (int)(sod % 60), off < 0 ? '-' : '+',
             a / 3600, a % 3600 / 60);
}

json_t *schedules_next_json(const schedules_spec *s, int64_t after_s, int n)
{
    json_t *arr = json_array();
    int64_t t = after_s;
    for (int i = 0; i < n && schedules_spec_next(s, t, &t); i++) {
        char u[40], l[48];
        schedules_format_utc(t, u, sizeof u);
        schedules_format_local(s->tz, t, l, sizeof l);
        json_array_append_new(arr,
                              tk_json_obj("utc", json_string(u), "local", json_string(l), NULL));
    }
    return arr;
}

int64_t schedules_db_now(PGconn *c)
{
    PGresult *res =
        tk_pg_query(c, "SELECT floor(extract(epoch FROM clock_timestamp()))::bigint", 0, NULL);
    int64_t v = -1;
    if (tk_pg_ok(res) && PQntuples(res) == 1)
        v = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return v;
}

json_t *schedules_row_json(const char *text, int64_t now_s)
{
    json_t *j = json_loads(text, 0, NULL);
    if (!j)
        return NULL;
    schedules_spec sp;
    char err[256];
    if (schedules_spec_load(tk_json_str(j, "cron"), tk_json_str(j, "timezone"), 0, now_s, &sp, err,
                            sizeof err) == TK_OK) {
        json_object_set_new(j, "next_fires", schedules_next_json(&sp, now_s, SCHEDULES_NEXT_SHOWN));
        schedules_spec_free(&sp);
    } else {
        json_object_set_new(j, "next_fires", json_array());
    }
    return j;
}

static int one_of(const char *v, const char *a, const char *b, const char *c)
{
    return strcmp(v, a) == 0 || strcmp(v, b) == 0 || (c && strcmp(v, c) == 0);
}

/* The text checks of a new schedule's fields. */
static int check_fields(const schedules_new *n, char *err, size_t errlen)
{
    if (!n->prompt || !*n->prompt) {
        snprintf(err, errlen, "prompt: a prompt is required");
        return -1;
    }
    long pc = tk_utf8_count(n->prompt, strlen(n->prompt));
    if (pc < 0 || pc > SCHEDULES_PROMPT_MAX) {
        snprintf(err, errlen, "prompt: at most %d characters of UTF-8 text", SCHEDULES_PROMPT_MAX);
        return -1;
    }
    if (n->name) {
        long nc = tk_utf8_count(n->name, strlen(n->name));
        if (nc < 0 || nc > SCHEDULES_NAME_MAX) {
            snprintf(err, errlen, "name: at most %d characters of UTF-8 text", SCHEDULES_NAME_MAX);
            return -1;
        }
    }
    if (n->notify && !one_of(n->notify, "always", "failure", "never")) {
        snprintf(err, errlen, "notify: one of always, failure, never");
        return -1;
    }
    if (n->missed_policy && !one_of(n->missed_policy, "skip", "run_once", NULL)) {
        snprintf(err, errlen, "missed_policy: skip or run_once");
        return -1;
    }
    if (n->alert_after < -1 || n->alert_after > SCHEDULES_ALERT_AFTER_MAX) {
        snprintf(err, errlen, "alert_after: a whole number from 0 (no alerts) to %d",
                 SCHEDULES_ALERT_AFTER_MAX);
        return -1;
    }
    return 0;
}

/* SCHEDULE_MIN_INTERVAL for this user: admins have none. */
static int64_t min_interval_for(PGconn *c, const char *user_id)
{
    const char *p[] = {user_id};
    PGresult *r = tk_pg_query(c, "SELECT role = 'admin' FROM users WHERE id = $1", 1, p);
    int admin = tk_pg_ok(r) && PQntuples(r) == 1 && PQgetvalue(r, 0, 0)[0] == 't';
    PQclear(r);
    return admin ? 0 : app_get()->cfg->schedules.min_interval_ms;
}

tk_status schedules_create(PGconn *c, const char *user_id, const schedules_new *n, json_t **out,
                           char *err, size_t errlen)
{
    *out = NULL;
    if (check_fields(n, err, errlen) != 0)
        return TK_EINVAL;
    int64_t now = schedules_db_now(c);
    if (now < 0)
        return TK_ERROR;
    const schedules_config *cfg = &app_get()->cfg->schedules;
    schedules_spec sp;
    if (schedules_spec_load(n->cron, n->zone, min_interval_for(c, user_id), now, &sp, err,
                            errlen) != TK_OK)
        return TK_EINVAL;
    int64_t next;
    char nexts[40];
    int has_next = schedules_spec_next(&sp, now, &next);
    schedules_spec_free(&sp);
    if (!has_next) {
        snprintf(err, errlen, "cron: the time is in the past");
        return TK_EINVAL;
    }
    schedules_format_utc(next, nexts, sizeof nexts);
    char id[TK_UUID_LEN], max[24], alert[16];
    tk_uuid7(id);
    snprintf(max, sizeof max, "%lld", (long long)cfg->per_user_max);
    snprintf(alert, sizeof alert, "%d",
             n->alert_after < 0 ? SCHEDULES_ALERT_AFTER_DEFAULT : n->alert_after);
    const char *p[] = {id,
                       user_id,
                       n->name ? n->name : "",
                       n->prompt,
                       n->cron,
                       n->zone ? n->zone : "UTC",
                       n->notify ? n->notify : "failure",
                       n->paused ? "true" : "false",
                       n->missed_policy ? n->missed_policy : "skip",
                       nexts,
                       max,
                       alert,
                       n->pause_after_alert > 0 ? "true" : "false"};
    PGresult *res = tk_pg_query(c,
                                "SELECT outcome FROM tusko_schedule_create($1, $2, $3, $4, $5, $6, "
                                "$7, $8::boolean, $9, $10::timestamptz, $11::int, $12::int, "
                                "$13::boolean)",
                                13, p);
    tk_status st = TK_ERROR;
    if (tk_pg_ok(res) && PQntuples(res) == 1) {
        const char *o = PQgetvalue(res, 0, 0);
        if (strcmp(o, "ok") == 0)
            st = TK_OK;
        else if (strcmp(o, "limit") == 0) {
            snprintf(err, errlen, "at most %lld schedules per user (SCHEDULES_PER_USER_MAX)",
                     (long long)cfg->per_user_max);
            st = TK_EDENIED;
        } else
            st = TK_ENOENT;
    } else if (strcmp(tk_pg_sqlstate(res), "22023") == 0) {
        snprintf(err, errlen, "timezone: \"%s\" is not a zone Postgres knows", n->zone);
        st = TK_EINVAL;
    }
    PQclear(res);
    if (st != TK_OK)
        return st;
    *out = schedules_get(c, user_id, id, &st);
    return *out ? TK_OK : TK_ERROR;
}

json_t *schedules_get(PGconn *c, const char *user_id, const char *id, tk_status *st)
{
    *st = TK_ENOENT;
    if (!tk_uuid_valid(id))
        return NULL;
    const char *p[] = {id, user_id};
    PGresult *res = tk_pg_query(c,
                                "SELECT " SCHEDULES_JSON_SQL ", floor(extract(epoch FROM "
                                "clock_timestamp()))::bigint FROM schedules s WHERE id = $1 AND "
                                "user_id = $2 AND deleted_at IS NULL",
                                2, p);
    json_t *j = NULL;
    if (!tk_pg_ok(res))
        *st = TK_ERROR;
    else if (PQntuples(res) == 1) {
        j = schedules_row_json(PQgetvalue(res, 0, 0), strtoll(PQgetvalue(res, 0, 1), NULL, 10));
        *st = j ? TK_OK : TK_ERROR;
    }
    PQclear(res);
    return j;
}

json_t *schedules_list(PGconn *c, const char *user_id)
{
    const char *p[] = {user_id};
    PGresult *res = tk_pg_query(c,
                                "SELECT " SCHEDULES_JSON_SQL ", floor(extract(epoch FROM "
                                "clock_timestamp()))::bigint FROM schedules s WHERE user_id = $1 "
                                "AND deleted_at IS NULL ORDER BY created_at, id",
                                1, p);
    if (!tk_pg_ok(res)) {
        PQclear(res);
        return NULL;
    }
    json_t *arr = json_array();
    for (int i = 0; i < PQntuples(res); i++) {
        json_t *j =
            schedules_row_json(PQgetvalue(res, i, 0), strtoll(PQgetvalue(res, i, 1), NULL, 10));
        if (j)
            json_array_append_new(arr, j);
    }
    PQclear(res);
    return arr;
}

tk_status schedules_delete(PGconn *c, const char *user_id, const char *id)
{
    if (!tk_uuid_valid(id))
        return TK_ENOENT;
    const char *p[] = {id, user_id};
    PGresult *res = tk_pg_query(c,
                                "UPDATE schedules SET deleted_at = now(), updated_at = now(), "
                                "next_run_at = NULL WHERE id = $1 AND user_id = $2 AND deleted_at "
                                "IS NULL",
                                2, p);
    tk_status st = TK_ERROR;
    if (tk_pg_ok(res))
        st = strtol(PQcmdTuples(res), NULL, 10) == 1 ? TK_OK : TK_ENOENT;
    PQclear(res);
    return st;
}

/* A string field of a patch: 0 absent, 1 *v set, -1 wrong type (err set). */
static int patch_str(const json_t *patch, const char *key, const char **v, char *err, size_t errlen)
{
    json_t *x = json_object_get(patch, key);
    if (!x)
        return 0;
    if (!json_is_string(x)) {
        snprintf(err, errlen, "%s: a string is required", key);
        return -1;
    }
    *v = json_string_value(x);
    return 1;
}

tk_status schedules_update(PGconn *c, const char *user_id, const char *id, const json_t *patch,
                           json_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!json_is_object(patch)) {
        snprintf(err, errlen, "the body must be a JSON object");
        return TK_EINVAL;
    }
    static const char *const known[] = {
        "name",          "prompt", "cron",        "timezone",          "notify",
        "missed_policy", "paused", "alert_after", "pause_after_alert", NULL};
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)patch, key, val)
    {
        int ok = 0;
        for (size_t i = 0; known[i]; i++)
            ok |= strcmp(key, known[i]) == 0;
        if (!ok) {
            snprintf(err, errlen, "%s: not a field of a schedule", key);
            return TK_EINVAL;
        }
    }
    tk_status st;
    json_t *cur = schedules_get(c, user_id, id, &st);
    if (!cur)
        return st;
    schedules_new n = {.name = tk_json_str(cur, "name"),
                       .prompt = tk_json_str(cur, "prompt"),
                       .cron = tk_json_str(cur, "cron"),
                       .zone = tk_json_str(cur, "timezone"),
                       .notify = tk_json_str(cur, "notify"),
                       .missed_policy = tk_json_str(cur, "missed_policy"),
                       .paused = json_is_true(json_object_get(cur, "paused")),
                       .alert_after = (int)json_integer_value(json_object_get(cur, "alert_after")),
                       .pause_after_alert =
                           json_is_true(json_object_get(cur, "pause_after_alert"))};
    int was_paused = n.paused;
    int rc = 0, cron_changed = 0, zone_changed = 0;
    const char *cron = n.cron, *zone = n.zone;
    if ((rc = patch_str(patch, "name", &n.name, err, errlen)) < 0 ||
        (rc = patch_str(patch, "prompt", &n.prompt, err, errlen)) < 0 ||
        (rc = patch_str(patch, "notify", &n.notify, err, errlen)) < 0 ||
        (rc = patch_str(patch, "missed_policy", &n.missed_policy, err, errlen)) < 0 ||
        (cron_changed = patch_str(patch, "cron", &n.cron, err, errlen)) < 0 ||
        (zone_changed = patch_str(patch, "timezone", &n.zone, err, errlen)) < 0) {
        json_decref(cur);
        return TK_EINVAL;
    }
    cron_changed = cron_changed && strcmp(cron, n.cron) != 0;
    zone_changed = zone_changed && strcmp(zone, n.zone) != 0;
    json_t *pz = json_object_get(patch, "paused");
    if (pz && !json_is_boolean(pz)) {
        snprintf(err, errlen, "paused: true or false");
        json_decref(cur);
        return TK_EINVAL;
    }
    if (pz)
        n.paused = json_is_true(pz);
    json_t *aa = json_object_get(patch, "alert_after");
    json_t *pa = json_object_get(patch, "pause_after_alert");
    if (aa && !json_is_integer(aa)) {
        snprintf(err, errlen, "alert_after: a whole number from 0 (no alerts) to %d",
                 SCHEDULES_ALERT_AFTER_MAX);
        json_decref(cur);
        return TK_EINVAL;
    }
    if (pa && !json_is_boolean(pa)) {
        snprintf(err, errlen, "pause_after_alert: true or false");
        json_decref(cur);
        return TK_EINVAL;
    }
    if (aa) /* out of int's range is out of range: check_fields says so */
        n.alert_after = json_integer_value(aa) < 0 || json_integer_value(aa) > INT_MAX
                            ? INT_MAX
                            : (int)json_integer_value(aa);
    if (pa)
        n.pause_after_alert = json_is_true(pa);
    tk_status out_st = TK_EINVAL;
    if (check_fields(&n, err, errlen) != 0)
        goto done;
    int recompute = cron_changed || zone_changed || (was_paused && !n.paused);
    char nexts[40], alert[16];
    snprintf(alert, sizeof alert, "%d", n.alert_after);
    int has_next = 1;
    if (recompute) {
        int64_t now = schedules_db_now(c), next = 0;
        schedules_spec sp;
        if (now < 0) {
            out_st = TK_ERROR;
            goto done;
        }
        int64_t mi = cron_changed || zone_changed ? min_interval_for(c, user_id) : 0;
        if (schedules_spec_load(n.cron, n.zone, mi, now, &sp, err, errlen) != TK_OK)
            goto done;
        has_next = schedules_spec_next(&sp, now, &next);
        schedules_spec_free(&sp);
        if (has_next)
            schedules_format_utc(next, nexts, sizeof nexts);
    }
    const char *p[] = {id,
                       user_id,
                       n.name,
                       n.prompt,
                       n.cron,
                       n.zone,
                       n.notify,
                       n.missed_policy,
                       n.paused ? "true" : "false",
                       recompute ? "1" : "0",
                       recompute && has_next ? nexts : NULL,
                       alert,
                       n.pause_after_alert ? "true" : "false"};
    /* a schedule no longer paused has no reason to be */
    PGresult *res = tk_pg_query(
        c,
        "UPDATE schedules SET name = $3, prompt = $4, cron = $5, zone = $6, notify = $7, "
        "missed_policy = $8, paused = $9::boolean, next_run_at = CASE WHEN $10 = '1' THEN "
        "$11::timestamptz ELSE next_run_at END, alert_after = $12::int, pause_after_alert = "
        "$13::boolean, paused_reason = CASE WHEN $9::boolean THEN paused_reason END, updated_at = "
        "now() WHERE id = $1 AND user_id = $2 AND deleted_at IS NULL",
        13, p);
    if (tk_pg_ok(res))
        out_st = strtol(PQcmdTuples(res), NULL, 10) == 1 ? TK_OK : TK_ENOENT;
    else if (strcmp(tk_pg_sqlstate(res), "22023") == 0)
        snprintf(err, errlen, "timezone: \"%s\" is not a zone Postgres knows", n.zone);
    else
        out_st = TK_ERROR;
    PQclear(res);
    if (out_st == TK_OK) {
        *out = schedules_get(c, user_id, id, &out_st);
        if (!*out)
            out_st = TK_ERROR;
    }
done:
    json_decref(cur);
    return out_st;
}
