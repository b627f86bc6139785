/*
 * schedules_tools.h — the agent's tools for scheduled tasks (fast lane, never
 * a sandbox; offered to the turn's own run, not to subagents):
 * schedule_task {prompt, cron, timezone?, notify?, name?}, list_schedules,
 * cancel_schedule {id}. They act as the chat's user, through the same checks
 * as /api/schedules (schedules.h).
 */
#ifndef APP_SCHEDULES_TOOLS_H
#define APP_SCHEDULES_TOOLS_H

void schedules_tools_register(void);

#endif
