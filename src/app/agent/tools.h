/*
 * tools.h — the tool registry: every tool the agent can call, with its lane,
 * and what a running tool may use of its call (agent_call_*, implemented by
 * the loop, run.c). The tools themselves live in src/app/tools/, one file a
 * family (plan, files, exec, web_fetch, memory, subagent); nothing here or in
 * the rest of agent/ knows them.
 *
 * A tool declares its lane, and the lane decides whether it is offered at all:
 *   fast     runs in the chat server (planning, look-ups, memory, subagents,
 *            listing and previewing files) — always available;
 *   sandbox  writes or executes in the chat's sandbox — only when OPENSANDBOX_URL
 *            and OPENSANDBOX_API_KEY are set (fail-closed), and it must reach the
 *            sandbox through getOrCreateOpenSandbox (writes/executes) or
 *            getExistingOpenSandbox (reads) only;
 *   browser  drives an isolated browser session — only when the browser service
 *            is configured (agent_lane_set_available; off until there is one).
 *
 * Adding a tool family is one file under src/app/tools/ and one row:
 *
 *   static void run_remember(agent_call *call, const json_t *args, agent_result *out)
 *   {
 *       const char *fact = tk_json_str(args, "fact");
 *       if (!fact) { agent_result_error(out, "\"fact\" is required"); return; }
 *       ... blocking work is fine here: this runs on a worker thread ...
 *       agent_result_text(out, "remembered");
 *   }
 *   static const agent_tool remember_tool = {
 *       .name = "remember", .lane = AGENT_LANE_FAST,
 *       .description = "Store a fact in long-term memory.",
 *       .parameters = "{\"type\":\"object\",\"properties\":{\"fact\":{\"type\":\"string\"}},"
 *                     "\"required\":[\"fact\"]}",
 *       .run = run_remember,
 *   };
 *   void utopia_tools_register(void) { agent_tools_register(&remember_tool); }
 *
 * and utopia_tools_register one row of tool_families[] in app/agent_start.c.
 * Two ways to run:
 *   - run (blocking): called on a worker of the bounded tool pool; may block on
 *     the network or the database; returns by filling *out.
 *   - start (asynchronous): called on the agent's event-loop thread and must not
 *     block; it finishes later with agent_call_finish (on the loop thread), e.g.
 *     after a nested agent loop ends (delegate_subagent, see run.h) or a
 *     multi-stream HTTP call completes.
 * While running, a tool may emit events (agent_call_emit / agent_call_output),
 * record spans (agent_call_span_begin/end) and must poll agent_call_cancelled
 * (or pass agent_call_cancel_flag to the HTTP client) so that a cancelled turn
 * stops its work.
 */
#ifndef APP_AGENT_TOOLS_H
#define APP_AGENT_TOOLS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "app/agent/trace.h"
#include "lib/common.h"

typedef enum { AGENT_LANE_FAST = 0, AGENT_LANE_SANDBOX = 1, AGENT_LANE_BROWSER = 2 } agent_lane;
#define AGENT_LANES 3

const char *agent_lane_name(agent_lane lane); /* "fast", "sandbox", "browser" */
/* Whether a lane's tools are offered: fast always; sandbox when the sandbox
 * service is configured; browser once agent_lane_set_available turns it on. */
int agent_lane_available(agent_lane lane);
void agent_lane_set_available(agent_lane lane, int on);

typedef struct agent_call agent_call; /* one running tool call */

/* What a tool answers: the text the model sees (capped by the loop), whether it
 * is an error, and optional structured data shown to the user in tool_end. */
typedef struct {
    int is_error;
    char *content; /* heap */
    json_t *data;  /* owned; may be NULL */
} agent_result;

void agent_result_text(agent_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void agent_result_error(agent_result *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Takes ownership of a heap string as the content. */
void agent_result_take(agent_result *r, char *content, int is_error);
void agent_result_free(agent_result *r);

typedef struct agent_tool {
    const char *name;        /* [a-z_]{1,64}, unique */
    const char *description; /* what the model reads */
    const char *parameters;  /* JSON Schema of the arguments (an object) */
    agent_lane lane;
    void (*run)(agent_call *call, const json_t *args, agent_result *out);
    void (*start)(agent_call *call, const json_t *args);
    /* Asynchronous tools: called on the loop thread when the turn is cancelled
     * while the tool runs; it must still finish with agent_call_finish. */
    void (*cancel)(agent_call *call);
    /* Optional: 0 hides the tool even when its lane is available. */
    int (*available)(void);
    int order; /* tools with a lower order run first among calls of one answer */
    /* Non-zero: consecutive calls of parallel tools in one answer run at the
     * same time (at most AGENT_PARALLEL_MAX); their results are appended in
     * the order the model gave them. Others run one by one. */
    int parallel;
    /* Optional: 0 leaves the tool out of what a run at this depth is offered
     * (0: the turn's own run, 1: a subagent, ...). Called anyway, it runs and
     * must refuse by itself (delegate_subagent past SUBAGENT_MAX_DEPTH). */
    int (*offered_at)(int depth);
    /* Non-zero: a call that ends well may have changed the chat's files (the
     * web UI then reloads its Files tab). Declared by GET /api/agent. */
    int changes_files;
    /* Non-zero: offered only to a turn whose user has a skill enabled (the
     * skill tools); the turn leaves it out otherwise. */
    int needs_skills;
} agent_tool;

/* Parallel calls of one answer running at once, at most. */
#define AGENT_PARALLEL_MAX 8

/* Registers a tool (at start-up, before serving). The struct must outlive the
 * process (a static). A duplicate name aborts (a broken invariant). */
void agent_tools_register(const agent_tool *t);
/* Registers n tools of a family's table, in its order. */
void agent_tools_register_table(const agent_tool *tools, size_t n);
const agent_tool *agent_tools_find(const char *name);
size_t agent_tools_count(void);
const agent_tool *agent_tools_at(size_t i);
/* The tools offered now, in the neutral format of llm.h (a new array).
 * allow: NULL for every available tool, or a NULL-terminated list of names
 * (a subagent's own tool set). */
json_t *agent_tools_offered(const char *const *allow);
/* The same for a run at a depth (see agent_tool.offered_at). */
json_t *agent_tools_offered_at(const char *const *allow, int depth);
/* What a client needs to know of every registered tool, in registration
 * order (a new array): [{"name", "lane", "changes_files", "offered"}], offered
 * being whether the turn's own run is offered it now. */
json_t *agent_tools_catalog(void);

/* --- what a running tool may use (any thread, unless said otherwise);
 *     implemented by the loop (run.c), which owns the call --- */

const char *agent_call_id(const agent_call *c); /* the model's tool call id */
const char *agent_call_name(const agent_call *c);
const char *agent_call_session(const agent_call *c); /* chat session id */
const char *agent_call_user(const agent_call *c);    /* user id */
const char *agent_call_turn(const agent_call *c);    /* turn id */
int agent_call_step(const agent_call *c);
/* The depth of the run making the call: 0 for the turn's own run, 1 for a
 * subagent's, ... */
int agent_call_depth(const agent_call *c);
/* The label of the run making the call ("researcher"...), NULL for the turn's. */
const char *agent_call_agent(const agent_call *c);
/* A pointer of the tool's own for this call (asynchronous tools: the state the
 * .cancel hook needs). Loop thread only. */
void agent_call_set_ud(agent_call *c, void *ud);
void *agent_call_ud(const agent_call *c);
/* Adds a nested run's model usage to the run making the call (the turn's
 * totals then include its subagents). Loop thread only. */
void agent_call_add_usage(agent_call *c, int64_t input_tokens, int64_t output_tokens);
/* The span of this tool call (parent for spans the tool records). */
agent_trace *agent_call_trace(agent_call *c);
const char *agent_call_span_id(const agent_call *c);

/* Non-zero once the turn was cancelled or ran out of time. */
int agent_call_cancelled(const agent_call *c);
const volatile int *agent_call_cancel_flag(const agent_call *c);

/* Emits an event of the turn (steals data), e.g. "plan" or "sandbox_spawn". */
void agent_call_emit(agent_call *c, const char *type, json_t *data);
/* Streams a piece of output as a tool_output event ({call_id, stream, text}). */
void agent_call_output(agent_call *c, const char *stream, const char *text, size_t len);
/* Attributes merged into this call's span and tool_end event (steals attrs). */
void agent_call_set_attrs(agent_call *c, json_t *attrs);

/* Asynchronous tools: the result (moved out of *res). Loop thread only. */
void agent_call_finish(agent_call *c, agent_result *res);

/* The loop's per-turn state a fast-lane tool may keep (plan_task): a JSON object
 * that lives as long as the turn. Loop thread only. */
json_t *agent_call_turn_state(agent_call *c);

#endif
