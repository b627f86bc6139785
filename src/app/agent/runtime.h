/*
 * runtime.h — where the agent's work runs: one event-loop thread, the loop's
 * non-blocking HTTP client, and two bounded pools that report back to it.
 *
 *   agent_loop()       drives every turn's state machine and every model stream
 *                      (curl multi on the loop); a waiting turn holds no thread
 *   agent_http()       the loop's HTTP client (model streams)
 *   agent_db_pool()    database jobs (history in; messages, spans, turn rows out)
 *   agent_tool_pool()  blocking tools' `run` (e.g. sandbox HTTP calls)
 *
 * A leaf: it knows nothing of turns, runs, tools or events. Whoever starts the
 * agent (app/agent_start.c) starts it first and stops it last; the loop (run.c)
 * is handed these through its configuration (run.h), so it runs on any loop.
 */
#ifndef APP_AGENT_RUNTIME_H
#define APP_AGENT_RUNTIME_H

#include <stddef.h>

#include "lib/common.h"
#include "lib/evloop.h"
#include "lib/httpc_multi.h"
#include "lib/workpool.h"

typedef struct {
    unsigned db_workers;   /* database jobs at once */
    unsigned tool_workers; /* blocking tool calls at once */
} agent_runtime_cfg;

/* Makes the loop, its HTTP client and the pools, and starts the loop thread.
 * TK_ERROR with err when the thread cannot start. */
tk_status agent_runtime_start(const agent_runtime_cfg *cfg, char *err, size_t errlen);
/* Whether it is running (between a successful start and the stop). */
int agent_runtime_running(void);
/* Runs fn(ud) on the loop thread and waits for it (not from the loop thread). */
void agent_runtime_call(void (*fn)(void *ud), void *ud);
/* The pools finish what they hold (their completions still reach the loop),
 * then the HTTP client is freed on the loop and the loop thread ends. Nothing
 * may run on the loop any more (the agent made sure no turn is left). */
void agent_runtime_stop(void);

tk_evloop *agent_loop(void);
tk_httpm *agent_http(void);
tk_workpool *agent_db_pool(void);
tk_workpool *agent_tool_pool(void);

#endif
