/*
 * agent.h — turns and the agent loop: everything POST /api/sessions/{id}/messages
 * sets in motion.
 *
 * Threads: one event loop (agent_loop()) drives every turn's state machine and
 * every model stream (curl multi); blocking work runs on two bounded pools and
 * reports back to the loop: the database pool (loading history, storing
 * messages, spans and turn rows) and the tool pool (tools' `run`, e.g. sandbox
 * HTTP calls). A waiting turn holds no thread: a few hundred bytes of state, a
 * curl handle and its buffers.
 *
 * A turn: the POST handler checks auth, the rate limit and the model allowlist,
 * stores the user message and a 'queued' turn row (one active turn per chat,
 * enforced by a unique index), answers 202 and posts the turn to the loop. The
 * loop loads the history, then runs an agent_run (below) that calls the model,
 * runs tools, stores each message, and ends with a turn_end event and the final
 * turn row. A restart marks the turns of a dead instance failed (see turn.c).
 *
 * Nested loops (subagents; delegate_subagent in a later issue): an agent_run is
 * the loop itself, independent of the chat turn around it. An asynchronous tool
 * (agent_tool.start) can start one with its own system prompt, tool list, step
 * budget and in-memory history, its spans under the tool call's span, its
 * events tagged with a label, and finish the tool call from on_done:
 *
 *   static void sub_done(void *ud, agent_run *run) {
 *       agent_call *call = ud;
 *       agent_result res = {0};
 *       if (strcmp(agent_run_state(run), "done") == 0)
 *           agent_result_text(&res, "%s", agent_run_text(run));
 *       else
 *           agent_result_error(&res, "the researcher failed: %s", agent_run_error(run));
 *       agent_run_free(run);
 *       agent_call_finish(call, &res);
 *   }
 *   static void start_delegate(agent_call *call, const json_t *args) {
 *       agent_run_cfg cfg = agent_run_cfg_for_call(call);   // session, user, turn, trace, cancel
 *       cfg.system = RESEARCHER_PROMPT;
 *       cfg.messages = one_user_message(tk_json_str(args, "task"));
 *       cfg.tools = (const char *const[]){"search_chunks", "web_fetch", NULL};
 *       cfg.max_steps = 8;
 *       cfg.label = "researcher";
 *       cfg.on_done = sub_done;
 *       cfg.ud = call;
 *       agent_run_start(&cfg);
 *   }
 */
#ifndef APP_AGENT_AGENT_H
#define APP_AGENT_AGENT_H

#include <jansson.h>

#include "app/agent/tools.h"
#include "app/agent/trace.h"
#include "app/models.h"
#include "lib/common.h"
#include "lib/evloop.h"
#include "lib/httpc_multi.h"
#include "lib/httpd.h"
#include "lib/workpool.h"

/* Starts the loop thread, the pools, the event threads; registers the built-in
 * tools and the session-delete hook. After app_init, before the server. */
tk_status agent_init(char *err, size_t errlen);
/* Cancels running turns (marked failed "server shutting down"), stores what is
 * queued and stops everything. After the server stopped. */
void agent_shutdown(void);

tk_evloop *agent_loop(void);
tk_httpm *agent_http(void); /* the loop's non-blocking HTTP client */
tk_workpool *agent_db_pool(void);
tk_workpool *agent_tool_pool(void);

/* The agent's routes are in turn.h, events.h, trace.h, files.h and
 * sandbox/sandbox.h, each one line in server.c's route sets. */

/* ---------------------------------------------------------------- runs */

typedef struct agent_run agent_run;

typedef struct {
    const char *session_id, *user_id, *turn_id;
    const app_model *model;
    const char *system;       /* capped at APP_SYSTEM_PROMPT_MAX characters */
    json_t *messages;         /* the conversation so far (stolen) */
    const char *const *tools; /* allowed tool names (NULL-terminated), NULL: all available */
    int max_steps;            /* model calls at most */
    /* The setting max_steps comes from, named in the error when the budget
     * ends (a static string); NULL: "TUSKO_STEP_BUDGET". */
    const char *steps_setting;
    int64_t deadline_mono_ms; /* 0: none */
    agent_trace *trace;       /* borrowed; outlives the run */
    const char *parent_span;  /* NULL: top level of the turn */
    const char *label;        /* NULL for the turn itself; e.g. "researcher" */
    int persist;              /* store each message in the chat (the turn's own run) */
    int depth;                /* 0: the turn's own run; a nested run: its parent's + 1 */
    /* A nested run's events all carry "agent" (label), "subagent_id",
     * "parent_call_id" (the tool call that started it) and "depth", so a
     * client can nest them under that call; its text deltas are "text" events
     * with those tags (never merged into the turn's answer). */
    const char *subagent_id;
    const char *parent_call_id;
    const char *parent_subagent_id; /* set (and tagged) when the parent is itself nested */
    void (*on_done)(void *ud, agent_run *run); /* loop thread */
    void *ud;
} agent_run_cfg;

/* Loop thread. The run reports once through on_done (even when cancelled). */
agent_run *agent_run_start(const agent_run_cfg *cfg);
/* Stops the run (model stream at once, a running tool at its next check). */
void agent_run_cancel(agent_run *r, const char *code, const char *message);
/* After on_done: "done", "failed" or "cancelled"; the last answer's text; the
 * error code and message when not done; counters. */
const char *agent_run_state(const agent_run *r);
const char *agent_run_text(const agent_run *r);
const char *agent_run_error_code(const agent_run *r);
const char *agent_run_error(const agent_run *r);
int agent_run_steps(const agent_run *r);
int agent_run_tool_calls(const agent_run *r);
int64_t agent_run_input_tokens(const agent_run *r);
int64_t agent_run_output_tokens(const agent_run *r);
void agent_run_free(agent_run *r);
/* A configuration for a nested run inside a tool call: session, user, turn,
 * model, trace, parent span, deadline, step budget (and its setting), depth
 * (+1) and parent_call_id taken from the call. Cancelling the
 * parent reaches the nested run through the tool's .cancel hook (which calls
 * agent_run_cancel on it). */
agent_run_cfg agent_run_cfg_for_call(agent_call *call);

#endif
