/*
 * schedules_runner.h — the scheduler: one thread per instance with a
 * connection of its own (LISTEN tusko_schedules). Each round it
 *   1. claims due schedules, one transaction each (SELECT ... FOR UPDATE SKIP
 *      LOCKED): the run rows of the slots since next_run_at (missed, skipped
 *      when the previous run still goes, or queued for this instance), their
 *      unique (schedule, slot) key the backstop, next_run_at advanced to the
 *      next fire time after now;
 *   2. times out runs queued or running for longer than SCHEDULE_RUN_TIMEOUT
 *      (their turns cancelled through NOTIFY tusko_cancel);
 *   3. starts this instance's queued runs, at most SCHEDULE_RUNS_PARALLEL at
 *      once: a chat of its own (origin 'scheduled'), the prompt submitted as
 *      the owner (agent_turn_submit); the run ends with its turn (a trigger);
 * then sleeps until the next due time, a run's deadline, or a notification.
 * Started and stopped by app/agent_start.c, after the agent is up.
 */
#ifndef APP_SCHEDULES_RUNNER_H
#define APP_SCHEDULES_RUNNER_H

#include <stddef.h>

#include "lib/common.h"

/* A slot claimed more than this long after its time counts as missed. */
#define SCHEDULES_RUNNER_LATE_S 60
/* Missed slots recorded per claim at most (the newest); older ones are counted
 * in the oldest recorded row's error. */
#define SCHEDULES_RUNNER_MISSED_KEEP 100

tk_status schedules_runner_start(char *err, size_t errlen);
/* Stops the thread; this instance's runs still queued are marked failed. */
void schedules_runner_stop(void);
/* Wakes the thread now (a run was queued here); any thread, never blocks. */
void schedules_runner_wake(void);

#endif
