/*
 * run.h — the agent loop: call the model, stream its answer, run the tool
 * calls it makes through the registry (tools.h), append the results,
 * and go again until the model stops, the step budget or the time limit ends,
 * or the run is cancelled. A run is a state machine on one event loop: it
 * holds no thread while it waits; the `work` halves of its jobs (storing a
 * message, a blocking tool) run on the pools its environment names.
 *
 * Everything a run needs from outside comes in its configuration: the chat,
 * the model, the prompt and the budget (agent_run_cfg), and where it runs, the
 * providers' settings and where its events go (agent_run_env, one for the
 * process, set up by turn.c from the settings and the runtime). A run reads no
 * global: a test drives it on a loop of its own (tests/unit/app/test_run.c).
 *
 * Nested loops (subagents: delegate_subagent, tools/subagent.c): an agent_run is
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
#ifndef APP_AGENT_RUN_H
#define APP_AGENT_RUN_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#include "app/agent/trace.h"
#include "app/models.h"
#include "app/agent/tools.h"
#include "lib/common.h"
#include "lib/evloop.h"
#include "lib/httpc_multi.h"
#include "lib/workpool.h"

/* Where a run runs and what it needs of the process: the same for every run
 * (turn.c makes it from the settings and the runtime; a nested run gets its
 * parent's). Borrowed: it outlives every run. */
typedef struct agent_run_env {
    tk_evloop *loop;        /* every callback of the run runs here */
    tk_httpm *http;         /* the loop's HTTP client: the model streams */
    tk_workpool *db_pool;   /* storing messages and spans (runs that persist) */
    tk_workpool *tool_pool; /* blocking tools' `run` */
    PGconn *(*db_acquire)(void);
    void (*db_release)(PGconn *c);
    /* the providers (TUSKO_MODELS' kinds) */
    const char *openai_base_url, *openai_api_key;
    const char *anthropic_base_url, *anthropic_api_key;
    int64_t max_tokens;          /* TUSKO_MAX_TOKENS */
    int64_t llm_idle_timeout_ms; /* TUSKO_LLM_IDLE_TIMEOUT */
    int64_t llm_retries;         /* TUSKO_LLM_RETRIES */
    int64_t tool_result_max;     /* TUSKO_TOOL_RESULT_MAX: characters of a result */
    int64_t turn_timeout_ms;     /* TUSKO_TURN_TIMEOUT, named when the deadline ends a run */
    /* the settings whose absence turns the sandbox lane off, named when a
     * sandbox tool is called anyway ("OPENSANDBOX_URL, ...") */
    const char *execution_missing;
    /* The run's events (steal data): emit queues one; emit_text queues a text
     * delta of the answer at a step, tags NULL for the turn's own run, else a
     * nested run's tags (stolen; deltas merge only with the same tags'). */
    void (*emit)(const char *session_id, const char *turn_id, const char *type, json_t *data);
    void (*emit_text)(const char *session_id, const char *turn_id, int step, json_t *tags,
                      const char *s, size_t n);
} agent_run_env;

typedef struct agent_run agent_run;

typedef struct {
    const agent_run_env *env; /* borrowed; see above */
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
/* A configuration for a nested run inside a tool call: the environment,
 * session, user, turn, model, trace, parent span, deadline, step budget (and its setting), depth
 * (+1) and parent_call_id taken from the call. Cancelling the
 * parent reaches the nested run through the tool's .cancel hook (which calls
 * agent_run_cancel on it). */
agent_run_cfg agent_run_cfg_for_call(agent_call *call);

#endif
