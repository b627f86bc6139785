/*
 * schedules.h — what the scheduled tasks' API, tools and scheduler share: a
 * schedule's expression and zone checked and loaded (a "spec"), its next fire
 * times, its JSON, and the operations the API and the tools both offer
 * (create, list, delete), each against Postgres (docs/SCHEDULES.md).
 *
 * The scheduler itself is schedules_runner.h; the routes schedules_api.h; the
 * agent's tools schedules_tools.h.
 */
#ifndef APP_SCHEDULES_H
#define APP_SCHEDULES_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/common.h"
#include "lib/cron.h"
#include "lib/tz.h"

/* How many fire times a schedule's JSON shows. */
#define SCHEDULES_NEXT_SHOWN 5
/* Fire times the shortest-interval check looks at. */
#define SCHEDULES_INTERVAL_SAMPLES 1000
#define SCHEDULES_PROMPT_MAX       32000
#define SCHEDULES_NAME_MAX         200
/* Failed runs in a row that send an alert: the default and the most. */
#define SCHEDULES_ALERT_AFTER_DEFAULT 3
#define SCHEDULES_ALERT_AFTER_MAX     100

typedef struct {
    tk_cron cron;
    tk_tz *tz;
} schedules_spec;

/* Parses the expression and loads the zone; with min_interval_ms > 0 refuses
 * an expression whose fire times (the next SCHEDULES_INTERVAL_SAMPLES after
 * now_s) come closer than that. TK_EINVAL with err naming what ("cron: hour:
 * 24 is out of range 0-23", "timezone: ..."); *out is then empty. */
tk_status schedules_spec_load(const char *cron, const char *zone, int64_t min_interval_ms,
                              int64_t now_s, schedules_spec *out, char *err, size_t errlen);
void schedules_spec_free(schedules_spec *s);
/* The first fire time strictly after after_s (UTC seconds); false: none. */
bool schedules_spec_next(const schedules_spec *s, int64_t after_s, int64_t *next_s);
/* The next n fire times after after_s: [{"utc": "...Z", "local": "...+01:00"}]. */
json_t *schedules_next_json(const schedules_spec *s, int64_t after_s, int n);
/* utc_s as the zone's wall-clock time with its offset, "2026-12-03T09:00:00+01:00". */
void schedules_format_local(const tk_tz *tz, int64_t utc_s, char *out, size_t outlen);
/* utc_s as "2026-12-03T08:00:00Z" (also what Postgres reads as timestamptz). */
void schedules_format_utc(int64_t utc_s, char *out, size_t outlen);

/* A new schedule's fields (strings borrowed; NULL: the default). */
typedef struct {
    const char *name;
    const char *prompt;
    const char *cron;
    const char *zone;          /* NULL: UTC */
    const char *notify;        /* always | failure | never; NULL: failure */
    const char *missed_policy; /* skip | run_once; NULL: skip */
    int paused;
    int alert_after;       /* failed runs in a row that send an alert (0: none); -1: 3 */
    int pause_after_alert; /* 1: the alert pauses the schedule; -1: no */
} schedules_new;

/* Checks and stores a schedule of user_id (the per-user cap, the shortest
 * interval, the zone against Postgres's list). TK_OK with *out its JSON (see
 * schedules_row_json, with "next_fires"), TK_EINVAL (err: the field and why),
 * TK_EDENIED (the cap; err says it), TK_ENOENT (no such user), TK_ERROR. */
tk_status schedules_create(PGconn *c, const char *user_id, const schedules_new *n, json_t **out,
                           char *err, size_t errlen);
/* Changes a user's schedule from a JSON object of the fields to change (name,
 * prompt, cron, timezone, notify, missed_policy, paused). A new expression or
 * zone, and a resume (paused true -> false), compute next_run_at afresh from
 * now: a resume never fires the slots it was paused over. TK_OK (*out the
 * schedule), TK_EINVAL (err), TK_ENOENT, TK_ERROR. */
tk_status schedules_update(PGconn *c, const char *user_id, const char *id, const json_t *patch,
                           json_t **out, char *err, size_t errlen);
/* The user's schedule as JSON (with next_fires), NULL when none (or deleted). */
json_t *schedules_get(PGconn *c, const char *user_id, const char *id, tk_status *st);
/* The user's schedules, oldest first ([] when none); NULL on a database error. */
json_t *schedules_list(PGconn *c, const char *user_id);
/* Deletes (marks deleted; the history stays): TK_OK, TK_ENOENT, TK_ERROR. */
tk_status schedules_delete(PGconn *c, const char *user_id, const char *id);

/* The columns of a schedule as JSON text (a SQL expression on alias s). */
#define SCHEDULES_JSON_SQL                                                                         \
    "jsonb_build_object('id', s.id, 'name', s.name, 'prompt', s.prompt, 'cron', s.cron, "          \
    "'timezone', s.zone, 'notify', s.notify, 'paused', s.paused, 'missed_policy', "                \
    "s.missed_policy, 'alert_after', s.alert_after, 'pause_after_alert', s.pause_after_alert, "    \
    "'paused_reason', s.paused_reason, 'next_run_at', s.next_run_at, 'created_at', s.created_at, " \
    "'updated_at', s.updated_at)::text"

/* Parses a row's JSON text and adds "next_fires" (computed after now_s); NULL
 * on bad JSON. */
json_t *schedules_row_json(const char *text, int64_t now_s);

/* The database's clock, UTC seconds (every instance agrees on it); -1 on error. */
int64_t schedules_db_now(PGconn *c);

#endif
