/*
 * schedules_settings.h — the scheduled tasks' settings (SCHEDULE*_,
 * docs/SCHEDULES.md): the struct they fill and the rows for the program's
 * settings table, apart from the scheduler so the table needs nothing of it.
 */
#ifndef APP_SCHEDULES_SETTINGS_H
#define APP_SCHEDULES_SETTINGS_H

#include <stdint.h>

#include "lib/config.h"

typedef struct {
    int64_t per_user_max;    /* SCHEDULES_PER_USER_MAX */
    int64_t min_interval_ms; /* SCHEDULE_MIN_INTERVAL */
    int64_t run_timeout_ms;  /* SCHEDULE_RUN_TIMEOUT */
    int64_t parallel;        /* SCHEDULE_RUNS_PARALLEL (per instance) */
    int64_t catchup_ms;      /* SCHEDULE_CATCHUP_GRACE */
} schedules_config;

/* clang-format off */
#define SCHEDULES_SETTINGS(c)                                                                      \
    {"SCHEDULES_PER_USER_MAX", "schedules-per-user-max", TK_SET_INT, "20",                         \
     "schedules one user may have (deleted ones do not count)", .min = 1, .max = 100000,           \
     .out = &(c).per_user_max},                                                                    \
    {"SCHEDULE_MIN_INTERVAL", "schedule-min-interval", TK_SET_DURATION, "5m",                      \
     "the shortest time between two fire times of a schedule", .min = 60 * 1000,                   \
     .max = 24LL * 3600 * 1000, .out = &(c).min_interval_ms},                                      \
    {"SCHEDULE_RUN_TIMEOUT", "schedule-run-timeout", TK_SET_DURATION, "10m",                       \
     "a scheduled run still queued or running after this long is cancelled as timed_out",          \
     .min = 1000, .max = 24LL * 3600 * 1000, .out = &(c).run_timeout_ms},                          \
    {"SCHEDULE_RUNS_PARALLEL", "schedule-runs-parallel", TK_SET_INT, "2",                          \
     "scheduled runs one instance runs at the same time (more wait, queued)", .min = 1,            \
     .max = 1000, .out = &(c).parallel},                                                           \
    {"SCHEDULE_CATCHUP_GRACE", "schedule-catchup-grace", TK_SET_DURATION, "6h",                   \
     "run_once schedules: after downtime the newest missed slot runs if it is at most this old",   \
     .min = 60 * 1000, .max = 30LL * 24 * 3600 * 1000, .out = &(c).catchup_ms}
/* clang-format on */

#endif
