/* The agent loop (agent/run.c) on a real event loop: a stub provider (an
 * OpenAI-compatible server on loopback answering from a script), stub tools in
 * the registry, and an environment of the test's own (its loop, pools and
 * event sink; no database). Steps, budgets, the deadline, cancellation,
 * parallel tool calls and the error paths, each to the letter. */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/agent/run.h"
#include "app/agent/trace.h"
#include "lib/buf.h"
#include "lib/evloop.h"
#include "lib/httpc_multi.h"
#include "lib/httpd.h"
#include "lib/json.h"
#include "lib/tktime.h"
#include "lib/workpool.h"
#include "tk_test.h"

#define SID "01900000-0000-7000-8000-000000000001"
#define UID "01900000-0000-7000-8000-000000000002"
#define TID "01900000-0000-7000-8000-000000000003"

/* ---------------------------------------------------------------- the stub provider */

/* The answers, one a model call, in order. A line of the script is either a
 * list of SSE chunks (each a JSON object sent as "data: ...") ended by
 * [DONE], or one of:
 *   "!500"          an HTTP 500 error
 *   "!hold:<text>"  streams <text>, then keeps the stream open (until cut) */
static const char *const *script;
static size_t nscript;
static int calls;        /* model calls answered */
static json_t *requests; /* every request body, parsed */
static pthread_mutex_t req_mu = PTHREAD_MUTEX_INITIALIZER;

static void send_chunk(tk_stream *s, const char *json)
{
    tk_stream_write(s, "data: ", 6);
    tk_stream_write(s, json, strlen(json));
    tk_stream_write(s, "\n\n", 2);
}

static void h_model(tk_req *r, void *ud)
{
    size_t len = 0;
    const char *body = tk_req_body(r, &len);
    json_t *j = json_loadb(body ? body : "", len, 0, NULL);
    pthread_mutex_lock(&req_mu);
    int n = calls++;
    json_array_append_new(requests, j ? j : json_null());
    pthread_mutex_unlock(&req_mu);
    const char *line = (size_t)n < nscript ? script[n] : script[nscript - 1];
    if (strcmp(line, "!500") == 0) {
        const char *b = "{\"error\":{\"message\":\"the model is down\",\"type\":\"server_error\"}}";
        tk_respond(r, 500, "application/json", b, strlen(b));
        return;
    }
    tk_stream *s = tk_respond_stream(r, 200, "text/event-stream");
    if (strncmp(line, "!hold:", 6) == 0) {
        char c[256];
        snprintf(c, sizeof c, "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%s\"}}]}",
                 line + 6);
        send_chunk(s, c);
        /* a comment now and then: a write notices the client gone */
        for (int i = 0; i < 500 && !tk_stream_closed(s); i++) {
            usleep(10000);
            tk_stream_write(s, ":\n", 2);
        }
        tk_stream_close(s);
        return;
    }
    /* chunks separated by '\n' */
    const char *p = line;
    while (*p) {
        const char *e = strchr(p, '\n');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        char *c = tk_strndup(p, l);
        send_chunk(s, c);
        free(c);
        p += l + (e ? 1 : 0);
    }
    tk_stream_write(s, "data: [DONE]\n\n", 14);
    tk_stream_close(s);
}

/* Script lines. */
#define TEXT(t) "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" t "\"}}]}"
#define CALL(i, id, name, args)                                                                    \
    "{\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":" #i ",\"id\":\"" id         \
    "\",\"type\":\"function\",\"function\":{\"name\":\"" name "\",\"arguments\":" args "}}]}}]}"
#define USAGE(in, out)                                                                             \
    "{\"choices\":[],\"usage\":{\"prompt_tokens\":" #in ",\"completion_tokens\":" #out "}}"

/* ---------------------------------------------------------------- the environment */

static tk_httpd *srv;
static tk_evloop *loop;
static tk_httpm *http;
static tk_workpool *tool_pool, *db_pool;
static char base_url[256];
static agent_run_env env;
static agent_trace *trace;
static const app_model model = {
    .id = "openai:m", .provider = "openai", .model = "m", .kind = APP_PROVIDER_OPENAI};

/* what the run emitted, in order: {"type", ...data} */
static json_t *events;
static pthread_mutex_t ev_mu = PTHREAD_MUTEX_INITIALIZER;

static void sink_emit(const char *session_id, const char *turn_id, const char *type, json_t *data)
{
    json_object_set_new(data, "type", json_string(type));
    pthread_mutex_lock(&ev_mu);
    json_array_append_new(events, data);
    pthread_mutex_unlock(&ev_mu);
}

static void sink_text(const char *session_id, const char *turn_id, int step, json_t *tags,
                      const char *s, size_t n)
{
    json_t *e = tags ? tags : json_object();
    json_object_set_new(e, "type", json_string("text"));
    json_object_set_new(e, "step", json_integer(step));
    json_object_set_new(e, "text", json_stringn(s, n));
    pthread_mutex_lock(&ev_mu);
    json_array_append_new(events, e);
    pthread_mutex_unlock(&ev_mu);
}

static PGconn *no_db(void)
{
    return NULL; /* the database is down */
}

static void no_release(PGconn *c)
{
}

static void setup(const char *const *lines, size_t n)
{
    static tk_route routes[] = {
        {"POST", "/v1/chat/completions", h_model, NULL, TK_ROUTE_BLOCKING},
    };
    tk_httpd_config cfg = {.listen = "127.0.0.1:0", .name = "stub-model"};
    char err[256];
    srv = tk_httpd_start(&cfg, routes, TK_ARRAY_LEN(routes), err, sizeof err);
    TK_ASSERT(srv);
    snprintf(base_url, sizeof base_url, "%s/v1", tk_httpd_url(srv));
    script = lines;
    nscript = n;
    requests = json_array();
    events = json_array();
    loop = tk_evloop_new();
    http = tk_httpm_new(loop);
    tool_pool = tk_workpool_new("t-tool", 4, 100);
    db_pool = tk_workpool_new("t-db", 1, 100);
    env = (agent_run_env){.loop = loop,
                          .http = http,
                          .db_pool = db_pool,
                          .tool_pool = tool_pool,
                          .db_acquire = no_db,
                          .db_release = no_release,
                          .openai_base_url = base_url,
                          .openai_api_key = "k",
                          .anthropic_base_url = "http://127.0.0.1:9",
                          .anthropic_api_key = "",
                          .max_tokens = 1000,
                          .llm_idle_timeout_ms = 5000,
                          .llm_retries = 0,
                          .tool_result_max = 20000,
                          .turn_timeout_ms = 120000,
                          .execution_missing = "OPENSANDBOX_URL, OPENSANDBOX_API_KEY",
                          .emit = sink_emit,
                          .emit_text = sink_text};
    agent_lane_set_available(AGENT_LANE_FAST, 1);
    agent_lane_set_available(AGENT_LANE_SANDBOX, 0);
    trace = agent_trace_new(TID);
}

static agent_run *finished;

static void on_done(void *ud, agent_run *run)
{
    finished = run;
    tk_evloop_stop(loop);
}

static agent_run_cfg base_cfg(int max_steps)
{
    agent_run_cfg c = {.env = &env,
                       .session_id = SID,
                       .user_id = UID,
                       .turn_id = TID,
                       .model = &model,
                       .system = "be brief",
                       .messages = json_pack("[{s:s,s:s}]", "role", "user", "content", "hi"),
                       .max_steps = max_steps,
                       .trace = trace,
                       .on_done = on_done};
    return c;
}

struct start {
    agent_run_cfg cfg;
    int64_t cancel_ms; /* > 0: the user cancels the run this long after its start */
    agent_run *run;
};

static void cancel_fire(tk_ev_timer *t, void *ud)
{
    tk_ev_timer_del(t);
    agent_run_cancel(ud, "CANCELLED", "cancelled by the user");
}

static void start_on_loop(void *ud)
{
    struct start *s = ud;
    s->run = agent_run_start(&s->cfg);
    if (s->cancel_ms > 0)
        tk_ev_timer_add(loop, s->cancel_ms, cancel_fire, s->run);
}

/* Runs cfg on the loop until on_done; returns the run (free it). */
static agent_run *run_until_done(agent_run_cfg cfg, int64_t cancel_ms)
{
    struct start s = {.cfg = cfg, .cancel_ms = cancel_ms};
    finished = NULL;
    tk_evloop_post(loop, start_on_loop, &s);
    tk_evloop_run(loop);
    TK_ASSERT(finished && finished == s.run);
    return finished;
}

static agent_run *run_to_end(agent_run_cfg cfg)
{
    return run_until_done(cfg, 0);
}

static void teardown(agent_run *r)
{
    agent_run_free(r);
    agent_trace_free(trace);
    tk_workpool_free(tool_pool);
    tk_workpool_free(db_pool);
    tk_httpm_free(http);
    tk_evloop_free(loop);
    tk_httpd_stop(srv);
    json_decref(requests);
    json_decref(events);
}

/* the events of a type, in order */
static size_t count_type(const char *type)
{
    size_t n = 0, i;
    json_t *e;
    json_array_foreach(events, i, e) n += strcmp(tk_json_str_or(e, "type", ""), type) == 0;
    return n;
}

static json_t *nth_of(const char *type, size_t k)
{
    size_t i;
    json_t *e;
    json_array_foreach(events, i, e) if (strcmp(tk_json_str_or(e, "type", ""), type) == 0 &&
                                         k-- == 0) return e;
    return NULL;
}

/* the types in order, text deltas merged into one "text" */
static char *types(void)
{
    tk_buf b;
    tk_buf_init(&b, 1 << 16);
    const char *last = "";
    size_t i;
    json_t *e;
    json_array_foreach(events, i, e)
    {
        const char *t = tk_json_str_or(e, "type", "");
        if (strcmp(t, "text") == 0 && strcmp(last, "text") == 0)
            continue;
        tk_buf_printf(&b, "%s%s", b.len ? " " : "", t);
        last = t;
    }
    return tk_buf_steal(&b, NULL);
}

/* the messages the model was sent in request k */
static json_t *sent(size_t k)
{
    return json_object_get(json_array_get(requests, k), "messages");
}

/* ---------------------------------------------------------------- stub tools */

static void run_echo(agent_call *call, const json_t *args, agent_result *out)
{
    char *a = tk_json_dumps(args);
    agent_result_text(out, "echo %s", a);
    free(a);
}

static void run_fail(agent_call *call, const json_t *args, agent_result *out)
{
    agent_result_error(out, "it broke");
}

static void run_big(agent_call *call, const json_t *args, agent_result *out)
{
    agent_result_text(out, "%s", "0123456789abcdefghij"); /* 20 characters */
}

/* waits for the cancel flag (at most 5 s) */
static void run_wait(agent_call *call, const json_t *args, agent_result *out)
{
    for (int i = 0; i < 500 && !agent_call_cancelled(call); i++)
        usleep(10000);
    if (agent_call_cancelled(call))
        agent_result_error(out, "stopped");
    else
        agent_result_text(out, "never cancelled");
}

/* parallel: how many run at once */
static int par_now, par_max;
static pthread_mutex_t par_mu = PTHREAD_MUTEX_INITIALIZER;

static void run_par(agent_call *call, const json_t *args, agent_result *out)
{
    pthread_mutex_lock(&par_mu);
    if (++par_now > par_max)
        par_max = par_now;
    pthread_mutex_unlock(&par_mu);
    usleep(200000);
    pthread_mutex_lock(&par_mu);
    par_now--;
    pthread_mutex_unlock(&par_mu);
    agent_result_text(out, "par %s", tk_json_str_or(args, "n", "?"));
}

/* asynchronous: finishes from a timer on the loop */
static void async_fire(tk_ev_timer *t, void *ud)
{
    tk_ev_timer_del(t);
    agent_call *call = ud;
    agent_result res = {0};
    agent_result_text(&res, "later, on the loop");
    agent_call_finish(call, &res);
}

static void start_async(agent_call *call, const json_t *args)
{
    agent_call_emit(call, "plan", tk_json_obj("goal", json_string("async"), NULL));
    tk_ev_timer_add(loop, 50, async_fire, call);
}

#define PARAMS "{\"type\":\"object\"}"
static const agent_tool stub_tools[] = {
    {.name = "echo", .description = "echo", .parameters = PARAMS, .run = run_echo},
    {.name = "fail", .description = "fail", .parameters = PARAMS, .run = run_fail},
    {.name = "big", .description = "big", .parameters = PARAMS, .run = run_big},
    {.name = "wait", .description = "wait", .parameters = PARAMS, .run = run_wait},
    {.name = "par", .description = "par", .parameters = PARAMS, .run = run_par, .parallel = 1},
    {.name = "later", .description = "later", .parameters = PARAMS, .start = start_async},
    {.name = "first", .description = "first", .parameters = PARAMS, .run = run_echo, .order = -10},
    {.name = "box",
     .description = "box",
     .parameters = PARAMS,
     .run = run_echo,
     .lane = AGENT_LANE_SANDBOX},
};

__attribute__((constructor)) static void register_stubs(void)
{
    for (size_t i = 0; i < TK_ARRAY_LEN(stub_tools); i++)
        agent_tools_register(&stub_tools[i]);
}

/* ---------------------------------------------------------------- steps */

TEST(run_answers_in_one_step)
{
    static const char *const s[] = {TEXT("Hel") "\n" TEXT("lo.") "\n" USAGE(7, 3)};
    setup(s, 1);
    agent_run *r = run_to_end(base_cfg(5));
    CHECK_STR(agent_run_state(r), "done");
    CHECK_STR(agent_run_text(r), "Hello.");
    CHECK_INT(agent_run_steps(r), ==, 1);
    CHECK_INT(agent_run_tool_calls(r), ==, 0);
    CHECK_INT(agent_run_input_tokens(r), ==, 7);
    CHECK_INT(agent_run_output_tokens(r), ==, 3);
    CHECK_STR(agent_run_error_code(r), "");
    char *t = types();
    CHECK_STR(t, "text");
    free(t);
    CHECK_STR(tk_json_str_or(nth_of("text", 0), "text", ""), "Hel");
    CHECK_INT(tk_json_int_or(nth_of("text", 0), "step", 0), ==, 1);
    /* the model was sent the system prompt, the conversation and the tools */
    json_t *req = json_array_get(requests, 0);
    CHECK_STR(tk_json_str_or(req, "model", ""), "m");
    CHECK_STR(tk_json_str_or(json_array_get(sent(0), 0), "role", ""), "system");
    CHECK_STR(tk_json_str_or(json_array_get(sent(0), 0), "content", ""), "be brief");
    CHECK_STR(tk_json_str_or(json_array_get(sent(0), 1), "content", ""), "hi");
    CHECK_INT(json_array_size(json_object_get(req, "tools")), ==, 7); /* not the sandbox's box */
    teardown(r);
}

TEST(run_calls_a_tool_then_answers)
{
    static const char *const s[] = {CALL(0, "c1", "echo", "\"{\\\"x\\\":1}\""), TEXT("Done.")};
    setup(s, 2);
    agent_run *r = run_to_end(base_cfg(5));
    CHECK_STR(agent_run_state(r), "done");
    CHECK_STR(agent_run_text(r), "Done.");
    CHECK_INT(agent_run_steps(r), ==, 2);
    CHECK_INT(agent_run_tool_calls(r), ==, 1);
    char *t = types();
    CHECK_STR(t, "tool_start tool_end text");
    free(t);
    json_t *st = nth_of("tool_start", 0);
    CHECK_STR(tk_json_str_or(st, "call_id", ""), "c1");
    CHECK_STR(tk_json_str_or(st, "name", ""), "echo");
    CHECK_STR(tk_json_str_or(st, "lane", ""), "fast");
    CHECK_INT(tk_json_int_or(st, "step", 0), ==, 1);
    CHECK_INT(tk_json_int_or(json_object_get(st, "arguments"), "x", 0), ==, 1);
    json_t *en = nth_of("tool_end", 0);
    CHECK(json_is_true(json_object_get(en, "ok")));
    CHECK_STR(tk_json_str_or(en, "result", ""), "echo {\"x\":1}");
    CHECK_INT(tk_json_int_or(en, "result_size", 0), ==, 12);
    /* the second call carries the assistant's call and the tool's result */
    json_t *m = sent(1);
    CHECK_INT(json_array_size(m), ==, 4);
    CHECK_STR(tk_json_str_or(json_array_get(m, 2), "role", ""), "assistant");
    CHECK_STR(tk_json_str_or(json_array_get(m, 3), "role", ""), "tool");
    CHECK_STR(tk_json_str_or(json_array_get(m, 3), "tool_call_id", ""), "c1");
    CHECK_STR(tk_json_str_or(json_array_get(m, 3), "content", ""), "echo {\"x\":1}");
    teardown(r);
}

TEST(run_orders_calls_and_finishes_async_tools)
{
    /* "first" (order < 0) runs before the calls the model gave earlier; "later"
     * finishes on the loop from a timer */
    static const char *const s[] = {
        CALL(0, "a", "later", "\"{}\"") "\n" CALL(1, "b", "first", "\"{}\""), TEXT("ok")};
    setup(s, 2);
    agent_run *r = run_to_end(base_cfg(5));
    CHECK_STR(agent_run_state(r), "done");
    char *t = types();
    CHECK_STR(t, "tool_start tool_end tool_start plan tool_end text");
    free(t);
    CHECK_STR(tk_json_str_or(nth_of("tool_start", 0), "name", ""), "first");
    CHECK_STR(tk_json_str_or(nth_of("tool_end", 1), "result", ""), "later, on the loop");
    CHECK_STR(tk_json_str_or(nth_of("plan", 0), "call_id", ""), "a");
    teardown(r);
}

/* ---------------------------------------------------------------- budgets */

TEST(run_ends_at_the_step_budget)
{
    static const char *const s[] = {CALL(0, "c", "echo", "\"{}\"")};
    setup(s, 1);
    agent_run *r = run_to_end(base_cfg(3));
    CHECK_STR(agent_run_state(r), "failed");
    CHECK_STR(agent_run_error_code(r), "STEP_BUDGET");
    CHECK_STR(agent_run_error(r),
              "stopped after 3 model calls: the step budget (TUSKO_STEP_BUDGET) is used up");
    CHECK_INT(agent_run_steps(r), ==, 3);
    CHECK_INT(agent_run_tool_calls(r), ==, 3);
    CHECK_INT(calls, ==, 3);
    json_t *e = nth_of("error", 0);
    CHECK_STR(tk_json_str_or(e, "code", ""), "STEP_BUDGET");
    CHECK_STR(tk_json_str_or(e, "message", ""), agent_run_error(r));
    teardown(r);
}

TEST(run_names_its_own_budget_setting)
{
    static const char *const s[] = {CALL(0, "c", "echo", "\"{}\"")};
    setup(s, 1);
    agent_run_cfg c = base_cfg(1);
    c.steps_setting = "SUBAGENT_CODER_STEPS";
    agent_run *r = run_to_end(c);
    CHECK_STR(agent_run_error(r),
              "stopped after 1 model calls: the step budget (SUBAGENT_CODER_STEPS) is used up");
    teardown(r);
}

TEST(run_ends_at_its_deadline_during_a_tool)
{
    static const char *const s[] = {CALL(0, "c", "wait", "\"{}\""), TEXT("never")};
    setup(s, 2);
    agent_run_cfg c = base_cfg(5);
    c.deadline_mono_ms = tk_mono_ms() + 300;
    agent_run *r = run_to_end(c);
    CHECK_STR(agent_run_state(r), "failed");
    CHECK_STR(agent_run_error_code(r), "TURN_TIMEOUT");
    CHECK_STR(agent_run_error(r), "the turn ran out of time (TUSKO_TURN_TIMEOUT is 2m)");
    CHECK_STR(tk_json_str_or(nth_of("error", 0), "code", ""), "TURN_TIMEOUT");
    /* the tool saw the flag; its result is the call's end */
    CHECK_STR(tk_json_str_or(nth_of("tool_end", 0), "result", ""), "stopped");
    CHECK(json_is_false(json_object_get(nth_of("tool_end", 0), "ok")));
    CHECK_INT(calls, ==, 1);
    teardown(r);
}

TEST(run_cuts_a_long_result_at_tool_result_max)
{
    static const char *const s[] = {CALL(0, "c", "big", "\"{}\""), TEXT("ok")};
    setup(s, 2);
    env.tool_result_max = 10;
    agent_run *r = run_to_end(base_cfg(5));
    CHECK_STR(agent_run_state(r), "done");
    CHECK_STR(tk_json_str_or(json_array_get(sent(1), 3), "content", ""),
              "0123456789\n[... cut: 10 of 20 characters shown (TUSKO_TOOL_RESULT_MAX)]");
    teardown(r);
}

/* ---------------------------------------------------------------- cancellation */

TEST(run_cancelled_while_streaming_keeps_the_partial_answer)
{
    static const char *const s[] = {"!hold:So far"};
    setup(s, 1);
    agent_run *r = run_until_done(base_cfg(5), 200);
    CHECK_STR(agent_run_state(r), "cancelled");
    CHECK_STR(agent_run_error_code(r), "CANCELLED");
    CHECK_STR(agent_run_error(r), "cancelled by the user");
    CHECK_STR(agent_run_text(r), "So far");
    CHECK_INT(count_type("error"), ==, 0);
    teardown(r);
}

TEST(run_cancelled_during_a_tool_answers_the_calls_left)
{
    /* two calls: the running one sees the flag, the next is not run */
    static const char *const s[] = {
        CALL(0, "w", "wait", "\"{}\"") "\n" CALL(1, "e", "echo", "\"{}\""), TEXT("never")};
    setup(s, 2);
    agent_run *r = run_until_done(base_cfg(5), 200);
    CHECK_STR(agent_run_state(r), "cancelled");
    CHECK_INT(calls, ==, 1);
    char *t = types();
    CHECK_STR(t, "tool_start tool_end tool_start tool_end");
    free(t);
    CHECK_STR(tk_json_str_or(nth_of("tool_end", 0), "result", ""), "stopped");
    CHECK_STR(tk_json_str_or(nth_of("tool_end", 1), "result", ""), "not run: the turn was stopped");
    teardown(r);
}

/* ---------------------------------------------------------------- parallel calls */

TEST(run_runs_parallel_calls_together_and_keeps_their_order)
{
    static const char *const s[] = {
        CALL(0, "p1", "par", "\"{\\\"n\\\":\\\"1\\\"}\"") "\n" CALL(
            1, "p2", "par",
            "\"{\\\"n\\\":\\\"2\\\"}\"") "\n" CALL(2, "p3", "par",
                                                   "\"{\\\"n\\\":\\\"3\\\"}\"") "\n" CALL(3, "e",
                                                                                          "echo",
                                                                                          "\"{}\""),
        TEXT("ok")};
    setup(s, 2);
    par_now = par_max = 0;
    agent_run *r = run_to_end(base_cfg(5));
    CHECK_STR(agent_run_state(r), "done");
    CHECK_INT(par_max, ==, 3); /* the three at once; the echo after them */
    CHECK_INT(agent_run_tool_calls(r), ==, 4);
    /* the results in the model's order, then the one after the group */
    json_t *m = sent(1);
    CHECK_INT(json_array_size(m), ==, 7);
    const char *ids[] = {"p1", "p2", "p3", "e"};
    const char *res[] = {"par 1", "par 2", "par 3", "echo {}"};
    for (int i = 0; i < 4; i++) {
        CHECK_STR(tk_json_str_or(json_array_get(m, (size_t)(3 + i)), "tool_call_id", ""), ids[i]);
        CHECK_STR(tk_json_str_or(json_array_get(m, (size_t)(3 + i)), "content", ""), res[i]);
    }
    /* the group's three start before any ends; the echo after them */
    char *t = types();
    CHECK(strncmp(t,
                  "tool_start tool_start tool_start tool_end tool_end tool_end tool_start "
                  "tool_end",
                  strlen("tool_start tool_start tool_start tool_end tool_end tool_end tool_start "
                         "tool_end")) == 0);
    free(t);
    teardown(r);
}

/* ---------------------------------------------------------------- errors */

TEST(run_answers_bad_calls_with_error_results)
{
    static const char *const s[] = {
        CALL(0, "u", "nope", "\"{}\"") "\n" CALL(1, "j", "echo", "\"{not json\"") "\n" CALL(
            2, "f", "fail", "\"{}\"") "\n" CALL(3, "b", "box", "\"{}\""),
        TEXT("ok")};
    setup(s, 2);
    agent_run *r = run_to_end(base_cfg(5));
    CHECK_STR(agent_run_state(r), "done");
    json_t *m = sent(1);
    CHECK_STR(tk_json_str_or(json_array_get(m, 3), "content", ""),
              "there is no tool named \"nope\"");
    CHECK(strncmp(tk_json_str_or(json_array_get(m, 4), "content", ""),
                  "the arguments of echo are not valid JSON: ", 42) == 0);
    CHECK_STR(tk_json_str_or(json_array_get(m, 5), "content", ""), "it broke");
    CHECK_STR(tk_json_str_or(json_array_get(m, 6), "content", ""),
              "box is not available: code execution is off on this server (OPENSANDBOX_URL, "
              "OPENSANDBOX_API_KEY not set), so nothing can be written or run");
    for (size_t i = 0; i < 4; i++)
        CHECK(json_is_false(json_object_get(nth_of("tool_end", i), "ok")));
    CHECK_STR(tk_json_str_or(nth_of("tool_end", 3), "lane", ""), "sandbox");
    teardown(r);
}

TEST(run_offers_only_its_own_tools)
{
    static const char *const s[] = {CALL(0, "c", "fail", "\"{}\""), TEXT("ok")};
    setup(s, 2);
    agent_run_cfg c = base_cfg(5);
    c.tools = (const char *const[]){"echo", "gone", NULL};
    c.label = "researcher";
    agent_run *r = run_to_end(c);
    CHECK_INT(json_array_size(json_object_get(json_array_get(requests, 0), "tools")), ==, 1);
    CHECK_STR(tk_json_str_or(json_array_get(sent(1), 3), "content", ""),
              "fail is not one of the tools of this researcher subagent (its tools: echo)");
    /* a labelled run's events carry its tags */
    CHECK_STR(tk_json_str_or(nth_of("tool_start", 0), "agent", ""), "researcher");
    CHECK_STR(tk_json_str_or(nth_of("text", 0), "agent", ""), "researcher");
    CHECK_INT(tk_json_int_or(nth_of("text", 0), "depth", -1), ==, 0);
    teardown(r);
}

TEST(run_fails_on_a_model_error)
{
    static const char *const s[] = {"!500"};
    setup(s, 1);
    agent_run *r = run_to_end(base_cfg(5));
    CHECK_STR(agent_run_state(r), "failed");
    CHECK(strncmp(agent_run_error_code(r), "MODEL_", 6) == 0);
    json_t *e = nth_of("error", 0);
    CHECK_STR(tk_json_str_or(e, "code", ""), agent_run_error_code(r));
    CHECK_INT(tk_json_int_or(e, "http_status", 0), ==, 500);
    CHECK_INT(tk_json_int_or(e, "kept_chars", -1), ==, 0);
    CHECK(strstr(agent_run_error(r), "the model is down") != NULL);
    teardown(r);
}

TEST(run_fails_without_the_providers_key)
{
    static const char *const s[] = {TEXT("never")};
    setup(s, 1);
    env.openai_api_key = "";
    agent_run *r = run_to_end(base_cfg(5));
    CHECK_STR(agent_run_state(r), "failed");
    CHECK_STR(agent_run_error_code(r), "PROVIDER_NOT_CONFIGURED");
    CHECK_STR(agent_run_error(r), "the model openai:m needs OPENAI_API_KEY, which is not set");
    CHECK_STR(tk_json_str_or(nth_of("error", 0), "code", ""), "PROVIDER_NOT_CONFIGURED");
    CHECK_INT(calls, ==, 0);
    teardown(r);
}

TEST(run_fails_when_its_answer_cannot_be_stored)
{
    static const char *const s[] = {TEXT("kept?")};
    setup(s, 1);
    agent_run_cfg c = base_cfg(5);
    c.persist = 1; /* the environment's database is down */
    agent_run *r = run_to_end(c);
    CHECK_STR(agent_run_state(r), "failed");
    CHECK_STR(agent_run_error_code(r), "STORAGE_FAILED");
    CHECK_STR(agent_run_error(r), "the answer could not be stored (the database did not answer)");
    teardown(r);
}

TEST_MAIN()
