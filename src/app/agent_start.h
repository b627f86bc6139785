/*
 * agent_start.h — the agent assembled: what POST /api/sessions/{id}/messages
 * sets in motion, started after app_init and before the server, stopped after
 * it. The one place that knows every part, as server.c's route sets are:
 *
 *   the runtime        agent/runtime.h: the event loop thread, its HTTP client,
 *                      the database and tool pools
 *   the tool families  tools/: a table in agent_start.c, registered in its
 *                      order (GET /api/agent lists them so), and the lanes
 *                      they are offered on
 *   the turns          agent/turn.h, with the run environment (agent/run.h:
 *                      the runtime, the providers' settings, the event sink)
 *   the events         agent/events.h: the writer and the LISTEN thread, the
 *                      cross-instance cancel
 *   background ticks   on the LISTEN thread's connection every ~10 s: the
 *                      recovery of dead instances' turns, the events sweep
 *                      (hourly) and the sandbox sweep (a minute, on a tool
 *                      worker)
 *   a deleted chat     its turn stopped, its events deleted, its sandbox
 *                      released
 *
 * A new tool family is one row of the table; a new background job one line in
 * on_tick.
 */
#ifndef APP_AGENT_START_H
#define APP_AGENT_START_H

#include <stddef.h>

#include "lib/common.h"

/* Starts everything above (after app_init, before the server). TK_EINVAL with
 * a message naming the setting for a bad setting (a SUBAGENT_<ROLE>_MODEL
 * outside TUSKO_MODELS), TK_ERROR otherwise. */
tk_status app_agent_start(char *err, size_t errlen);
/* Cancels running turns (marked failed "server shutting down"), stores what is
 * queued and stops everything. After the server stopped. */
void app_agent_stop(void);

#endif
