/*
 * The agent loop: call the model, stream its answer, run the tool calls it
 * makes through the registry, append the results, and go again until the model
 * stops, the step budget or the time limit ends, or the turn is cancelled.
 *
 * Everything here runs on the run's event loop (cfg.env->loop) except the
 * `work` halves of jobs (database writes, blocking tools), which run on the
 * environment's pools and post their `then` halves back. A run is therefore a
 * small state machine; it never holds a thread while it waits. See run.h.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/agent/run.h"

#include "app/agent/history.h"
#include "app/llm/llm.h"
#include "app/observe.h"
#include "app/settings.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/pg.h"
#include "lib/tktime.h"
#include "lib/utf8.h"

enum { RUN_IDLE, RUN_STREAMING, RUN_PERSISTING, RUN_TOOL, RUN_FINISHED };

struct agent_call {
    agent_run *run;
    const agent_tool *tool;
    char id[128];
    char name[72];
    int index;
    json_t *args; /* parsed arguments (an object), or NULL when invalid */
    char *args_text;
    char args_error[160];
    agent_span *span;
    int64_t t0_ns;
    agent_result res;
    json_t *attrs; /* set by the tool: merged into the span and tool_end */
    void *ud;      /* the tool's own (agent_call_set_ud) */
    int finished;  /* agent_call_finish was called */
    int done;      /* its tool_end is out; msg waits for the group */
    json_t *msg;   /* the tool message, appended when the whole group is done */
};

struct agent_run {
    agent_run_cfg cfg;
    char session_id[TK_UUID_LEN], user_id[TK_UUID_LEN], turn_id[TK_UUID_LEN];
    char *system;
    char *label;
    char *parent_span;
    char **tool_names; /* copy of cfg.tools */
    json_t *messages;
    json_t *tools_offered;
    int state;
    int step; /* model calls made */
    int ntool_calls;
    int64_t in_tokens, out_tokens;
    llm_stream *stream;
    agent_span *llm_span;
    /* the tool calls of the current answer, sorted by tool order */
    json_t *calls;
    size_t call_idx;
    /* the calls running now: one, or several parallel ones (agent_tool.parallel) */
    agent_call **group;
    size_t ngroup, npending, gmsg;
    int group_guard;   /* starting or cancelling the group: its end waits */
    int group_closing; /* its messages are being appended */
    char subagent_id[TK_UUID_LEN];
    char parent_call_id[128];
    json_t *tags;        /* a nested run's event tags, NULL for the turn's own */
    json_t *pending_msg; /* a message being stored */
    void (*after_persist)(agent_run *);
    tk_ev_timer *deadline;
    volatile int cancel;
    char final_state[16];
    char err_code[40];
    char err_msg[512];
    char *last_text;
    json_t *turn_state;
};

static void run_step(agent_run *r);
static void run_finish(agent_run *r, const char *state, const char *code, const char *msg);
static void next_tool(agent_run *r);

/* ---------------------------------------------------------------- events */

static void run_emit(agent_run *r, const char *type, json_t *data)
{
    if (!data)
        data = json_object();
    if (r->tags)
        json_object_update(data, r->tags);
    r->cfg.env->emit(r->session_id, r->turn_id, type, data);
}

static void on_text(void *ud, const char *d, size_t n)
{
    agent_run *r = ud;
    /* a nested run's text is tagged, merged only with its own deltas */
    r->cfg.env->emit_text(r->session_id, r->turn_id, r->step,
                          r->tags ? json_deep_copy(r->tags) : NULL, d, n);
}

/* ---------------------------------------------------------------- persistence */

struct persist_job {
    agent_run *r;
    json_t *msg;
    tk_status st;
};

static void persist_work(void *ud)
{
    struct persist_job *j = ud;
    agent_run *r = j->r;
    PGconn *c = r->cfg.env->db_acquire();
    if (!c) {
        j->st = TK_ERROR;
        return;
    }
    char *spans = r->cfg.trace ? agent_trace_take_pending(r->cfg.trace) : NULL;
    if (j->msg) {
        char id[TK_UUID_LEN], step[16];
        tk_uuid7(id);
        snprintf(step, sizeof step, "%d", r->step);
        json_t *calls = json_object_get(j->msg, "tool_calls");
        char *calls_s = calls ? tk_json_dumps(calls) : NULL;
        const char *p[] = {id,
                           r->session_id,
                           tk_json_str_or(j->msg, "role", "assistant"),
                           tk_json_str_or(j->msg, "content", ""),
                           r->turn_id,
                           step,
                           calls_s,
                           tk_json_str(j->msg, "tool_call_id"),
                           tk_json_str(j->msg, "tool_name"),
                           json_is_true(json_object_get(j->msg, "is_error")) ? "true" : "false",
                           json_is_true(json_object_get(j->msg, "partial")) ? "true" : "false",
                           spans ? spans : "[]"};
        /* the message and the spans ended so far, in one round trip */
        j->st = tk_pg_exec(c,
                           "SELECT tusko_message_add($1, $2, $3, $4, $5, $6::int, $7::jsonb, $8, "
                           "$9, $10::boolean, $11::boolean, $12::jsonb)",
                           12, p);
        free(calls_s);
    } else if (spans) {
        const char *p[] = {r->turn_id, spans};
        tk_pg_exec(c, "SELECT tusko_spans_add($1, $2::jsonb)", 2, p);
    }
    free(spans);
    r->cfg.env->db_release(c);
}

static void persist_then(void *ud)
{
    struct persist_job *j = ud;
    agent_run *r = j->r;
    tk_status st = j->st;
    json_decref(j->msg);
    free(j);
    void (*next)(agent_run *) = r->after_persist;
    r->after_persist = NULL;
    if (st != TK_OK) {
        run_finish(r, "failed", "STORAGE_FAILED",
                   "the answer could not be stored (the database did not answer)");
        return;
    }
    next(r);
}

/* Appends msg to the conversation (steals it), stores it when the run persists,
 * then continues with next. */
static void append_then(agent_run *r, json_t *msg, void (*next)(agent_run *))
{
    json_t *clean = json_deep_copy(msg);
    json_object_del(clean, "partial");
    json_object_del(clean, "tool_name");
    json_array_append_new(r->messages, clean);
    if (!r->cfg.persist) {
        json_decref(msg);
        next(r);
        return;
    }
    struct persist_job *j = tk_calloc(1, sizeof *j);
    j->r = r;
    j->msg = msg;
    r->state = RUN_PERSISTING;
    r->after_persist = next;
    if (tk_workpool_submit_then(r->cfg.env->db_pool, r->cfg.env->loop, persist_work, persist_then,
                                j) != TK_OK) {
        j->st = TK_ERROR;
        persist_then(j);
    }
}

/* ---------------------------------------------------------------- finish */

struct done_job {
    agent_run *r;
};

static void report_done(tk_ev_timer *t, void *ud)
{
    agent_run *r = ud;
    tk_ev_timer_del(t);
    if (r->cfg.on_done)
        r->cfg.on_done(r->cfg.ud, r);
}

static void run_finish(agent_run *r, const char *state, const char *code, const char *msg)
{
    if (r->state == RUN_FINISHED)
        return;
    r->state = RUN_FINISHED;
    /* code and msg may point into r itself (stop_now) */
    char c[sizeof r->err_code], m[sizeof r->err_msg];
    snprintf(c, sizeof c, "%s", code ? code : "");
    snprintf(m, sizeof m, "%s", msg ? msg : "");
    snprintf(r->final_state, sizeof r->final_state, "%s", state);
    memcpy(r->err_code, c, sizeof c);
    memcpy(r->err_msg, m, sizeof m);
    if (r->deadline) {
        tk_ev_timer_del(r->deadline);
        r->deadline = NULL;
    }
    if (r->stream) {
        llm_stream_free(r->stream);
        r->stream = NULL;
    }
    /* report on a fresh loop iteration: never inside a callback of ours */
    tk_ev_timer_add(r->cfg.env->loop, 0, report_done, r);
}

static void stop_now(agent_run *r)
{
    const char *code = r->err_code[0] ? r->err_code : "CANCELLED";
    const char *state = strcmp(code, "CANCELLED") == 0 ? "cancelled" : "failed";
    run_finish(r, state, code, r->err_msg[0] ? r->err_msg : "the turn was cancelled");
}

/* ---------------------------------------------------------------- the model */

static void fill_provider(const agent_run_env *s, const app_model *m, llm_provider *p, char *err,
                          size_t errlen)
{
    memset(p, 0, sizeof *p);
    p->name = m->provider;
    if (m->kind == APP_PROVIDER_ANTHROPIC) {
        p->kind = LLM_ANTHROPIC;
        p->base_url = s->anthropic_base_url;
        p->api_key = s->anthropic_api_key;
        if (!p->api_key || !*p->api_key)
            snprintf(err, errlen, "the model %s needs ANTHROPIC_API_KEY, which is not set", m->id);
    } else {
        p->kind = LLM_OPENAI;
        p->base_url = s->openai_base_url;
        p->api_key = s->openai_api_key;
        if (!p->api_key || !*p->api_key)
            snprintf(err, errlen, "the model %s needs OPENAI_API_KEY, which is not set", m->id);
    }
}

static int tool_order(const json_t *c)
{
    const agent_tool *t = agent_tools_find(tk_json_str_or(c, "name", ""));
    return t ? t->order : 0;
}

static void on_model_done(void *ud, llm_result *res);

static void run_step(agent_run *r)
{
    if (r->state == RUN_FINISHED)
        return;
    if (r->cancel) {
        stop_now(r);
        return;
    }
    if (r->stream) {
        llm_stream_free(r->stream);
        r->stream = NULL;
    }
    if (r->step >= r->cfg.max_steps) {
        char m[200];
        snprintf(m, sizeof m, "stopped after %d model calls: the step budget (%s) is used up",
                 r->step, r->cfg.steps_setting ? r->cfg.steps_setting : "TUSKO_STEP_BUDGET");
        run_emit(r, "error",
                 tk_json_obj("code", json_string("STEP_BUDGET"), "message", json_string(m), NULL));
        run_finish(r, "failed", "STEP_BUDGET", m);
        return;
    }
    char perr[200] = "";
    llm_provider prov;
    fill_provider(r->cfg.env, r->cfg.model, &prov, perr, sizeof perr);
    if (perr[0]) {
        run_emit(r, "error",
                 tk_json_obj("code", json_string("PROVIDER_NOT_CONFIGURED"), "message",
                             json_string(perr), NULL));
        run_finish(r, "failed", "PROVIDER_NOT_CONFIGURED", perr);
        return;
    }
    const agent_run_env *s = r->cfg.env;
    json_t *window = agent_history_window(r->messages, AGENT_HISTORY_MAX);
    long remaining = 0;
    if (r->cfg.deadline_mono_ms > 0) {
        remaining = (long)(r->cfg.deadline_mono_ms - tk_mono_ms());
        if (remaining < 1)
            remaining = 1;
    }
    llm_request req = {.model = r->cfg.model->model,
                       .system = r->system,
                       .messages = window,
                       .tools = r->tools_offered,
                       .max_tokens = s->max_tokens,
                       .idle_timeout_ms = (long)s->llm_idle_timeout_ms,
                       .timeout_ms = remaining,
                       .max_retries = (int)s->llm_retries};
    r->step++;
    r->llm_span = agent_span_begin(r->cfg.trace, r->parent_span, "llm", r->cfg.model->id);
    agent_span_attrs(
        r->llm_span,
        tk_json_obj("provider", json_string(r->cfg.model->provider), "model",
                    json_string(r->cfg.model->model), "step", json_integer(r->step), "messages",
                    json_integer((json_int_t)json_array_size(window)), "tools",
                    json_integer((json_int_t)json_array_size(r->tools_offered)), NULL));
    llm_callbacks cb = {.on_text = on_text, .on_done = on_model_done};
    r->state = RUN_STREAMING;
    r->stream = llm_stream_start(s->http, s->loop, &prov, &req, &cb, r);
    json_decref(window);
}

static void after_assistant(agent_run *r);

static void on_model_done(void *ud, llm_result *res)
{
    agent_run *r = ud;
    if (r->state != RUN_STREAMING)
        return;
    if (res->input_tokens > 0)
        r->in_tokens += res->input_tokens;
    if (res->output_tokens > 0)
        r->out_tokens += res->output_tokens;
    const char *mid = r->cfg.model->id;
    tk_metrics_add(app_observe_llm_calls, 1, mid, res->st == TK_OK ? "ok" : "error");
    if (res->input_tokens > 0)
        tk_metrics_add(app_observe_tokens, (double)res->input_tokens, mid, "input");
    if (res->output_tokens > 0)
        tk_metrics_add(app_observe_tokens, (double)res->output_tokens, mid, "output");
    if (res->ttft_ms >= 0)
        tk_metrics_observe(app_observe_first_token, (double)res->ttft_ms / 1000.0, mid);
    agent_span_attrs(
        r->llm_span,
        tk_json_obj("input_tokens",
                    res->input_tokens >= 0 ? json_integer(res->input_tokens) : json_null(),
                    "output_tokens",
                    res->output_tokens >= 0 ? json_integer(res->output_tokens) : json_null(),
                    "ttft_ms", res->ttft_ms >= 0 ? json_integer(res->ttft_ms) : json_null(),
                    "stop_reason", json_string(res->stop_reason), "attempts",
                    json_integer(res->attempts), "http_status", json_integer(res->http_status),
                    "tool_calls", json_integer((json_int_t)res->ncalls), NULL));
    if (res->st != TK_OK)
        agent_span_attrs(r->llm_span, tk_json_obj("error", json_string(res->error), "code",
                                                  json_string(res->code), NULL));
    agent_span_end(r->llm_span, res->st == TK_OK ? "ok" : "error");
    r->llm_span = NULL;

    const char *text = tk_buf_cstr(&res->text);
    free(r->last_text);
    r->last_text = tk_strdup(text);
    json_t *msg = tk_json_obj("role", json_string("assistant"), "content", json_string(text), NULL);
    json_t *calls = json_array();
    if (res->st == TK_OK) {
        for (size_t i = 0; i < res->ncalls; i++) {
            const char *id = res->calls[i].id;
            char gen[48];
            if (!id || !*id) {
                snprintf(gen, sizeof gen, "call_%d_%zu", r->step, i);
                id = gen;
            }
            const char *args = tk_buf_cstr(&res->calls[i].arguments);
            json_array_append_new(calls, tk_json_obj("id", json_string(id), "name",
                                                     json_string(res->calls[i].name), "arguments",
                                                     json_string(*args ? args : "{}"), NULL));
        }
    }
    if (json_array_size(calls) > 0)
        json_object_set(msg, "tool_calls", calls);
    if (res->st != TK_OK)
        json_object_set_new(msg, "partial", json_true());
    /* the tool calls, sorted so that plan_task (order < 0) runs first */
    json_decref(r->calls);
    r->calls = json_array();
    for (int pass = 0; pass < 2; pass++) {
        size_t i;
        json_t *c;
        json_array_foreach(calls, i, c)
        {
            if ((tool_order(c) < 0) == (pass == 0))
                json_array_append(r->calls, c);
        }
    }
    json_decref(calls);
    r->call_idx = 0;
    if (res->st != TK_OK) {
        /* keep what was streamed, then end the turn with the provider's error */
        char code[48];
        snprintf(code, sizeof code, "MODEL_%s", res->code[0] ? res->code : "error");
        for (char *p = code; *p; p++)
            if (*p >= 'a' && *p <= 'z')
                *p = (char)(*p - 'a' + 'A');
        if (strcmp(res->code, "cancelled") == 0) {
            /* cancelled: stop_now reports it */
        } else {
            run_emit(r, "error",
                     tk_json_obj("code", json_string(code), "message", json_string(res->error),
                                 "http_status",
                                 res->http_status ? json_integer(res->http_status) : json_null(),
                                 "kept_chars", json_integer((json_int_t)res->text.len), NULL));
            snprintf(r->err_code, sizeof r->err_code, "%s", code);
            snprintf(r->err_msg, sizeof r->err_msg, "%s", res->error);
        }
        if (res->text.len == 0) {
            json_decref(msg);
            stop_now(r);
            return;
        }
        r->cancel = 1;
        append_then(r, msg, after_assistant);
        return;
    }
    if (res->text.len == 0 && json_array_size(r->calls) == 0) {
        /* an empty answer: nothing to store */
        json_decref(msg);
        run_finish(r, "done", NULL, NULL);
        return;
    }
    append_then(r, msg, after_assistant);
}

static void after_assistant(agent_run *r)
{
    if (r->cancel) {
        /* answer the calls that will not run, so the conversation stays paired */
        stop_now(r);
        return;
    }
    if (json_array_size(r->calls) == 0) {
        run_finish(r, "done", NULL, NULL);
        return;
    }
    next_tool(r);
}

/* ---------------------------------------------------------------- tools */

static void call_free(agent_call *c)
{
    json_decref(c->args);
    free(c->args_text);
    agent_result_free(&c->res);
    json_decref(c->attrs);
    json_decref(c->msg);
    free(c);
}

static void call_done(agent_call *c);
static void group_done(agent_run *r);

static void tool_then(void *ud)
{
    agent_call *c = ud;
    call_done(c);
}

static void tool_work(void *ud)
{
    agent_call *c = ud;
    c->tool->run(c, c->args, &c->res);
}

static char *cap_content(const char *s, size_t max_chars, size_t *orig_chars)
{
    /* counts characters; cuts at a character boundary */
    size_t chars = 0, cut = tk_utf8_cut_chars(s, strlen(s), max_chars, &chars);
    *orig_chars = chars;
    if (chars <= max_chars)
        return tk_strdup(s);
    return tk_asprintf("%.*s\n[... cut: %zu of %zu characters shown (TUSKO_TOOL_RESULT_MAX)]",
                       (int)cut, s, max_chars, chars);
}

/* A call has its result: end its span, tell the user (tool_end), and keep its
 * tool message until every call of the group is done. */
static void call_done(agent_call *c)
{
    agent_run *r = c->run;
    if (c->done)
        return;
    c->done = 1;
    if (!c->res.content)
        agent_result_text(&c->res, "(no output)");
    size_t chars = 0;
    char *content = cap_content(c->res.content, (size_t)r->cfg.env->tool_result_max, &chars);
    int cancelled = c->res.is_error && r->cancel;
    double ms = (double)(tk_mono_ns() - c->t0_ns) / 1e6;
    agent_span_attrs(c->span, tk_json_obj("result_size", json_integer((json_int_t)strlen(content)),
                                          "result_chars", json_integer((json_int_t)chars),
                                          "is_error", json_boolean(c->res.is_error), NULL));
    if (c->attrs)
        agent_span_attrs(c->span, json_deep_copy(c->attrs));
    agent_span_end(c->span, cancelled ? "cancelled" : c->res.is_error ? "error" : "ok");
    /* what the user sees: a preview of the result and the tool's data */
    size_t plen = tk_utf8_cut(content, strlen(content), 4000);
    json_t *ev = tk_json_obj(
        "call_id", json_string(c->id), "name", json_string(c->name), "lane",
        json_string(agent_lane_name(c->tool ? c->tool->lane : AGENT_LANE_FAST)), "ok",
        json_boolean(!c->res.is_error), "duration_ms", json_real(ms), "result_size",
        json_integer((json_int_t)strlen(content)), "result", json_stringn(content, plen), NULL);
    if (c->res.data)
        json_object_set(ev, "data", c->res.data);
    if (c->attrs)
        json_object_update(ev, c->attrs);
    run_emit(r, "tool_end", ev);
    c->msg = tk_json_obj("role", json_string("tool"), "tool_call_id", json_string(c->id),
                         "tool_name", json_string(c->name), "content", json_string(content), NULL);
    if (c->res.is_error)
        json_object_set_new(c->msg, "is_error", json_true());
    free(content);
    TK_ASSERT(r->npending > 0);
    r->npending--;
    if (r->npending == 0 && !r->group_guard)
        group_done(r);
}

static void group_free(agent_run *r)
{
    for (size_t i = 0; i < r->ngroup; i++)
        if (r->group[i])
            call_free(r->group[i]);
    free(r->group);
    r->group = NULL;
    r->ngroup = r->npending = r->gmsg = 0;
    r->group_closing = 0;
}

/* Appends the group's tool messages in the model's order, then goes on. */
static void group_append(agent_run *r)
{
    if (r->gmsg < r->ngroup) {
        agent_call *c = r->group[r->gmsg++];
        json_t *m = c->msg;
        c->msg = NULL;
        append_then(r, m, group_append);
        return;
    }
    r->call_idx += r->ngroup;
    group_free(r);
    next_tool(r);
}

static void group_done(agent_run *r)
{
    if (r->group_closing || !r->group)
        return;
    r->group_closing = 1;
    r->gmsg = 0;
    group_append(r);
}

static int name_allowed(const agent_run *r, const char *name)
{
    if (!r->tool_names)
        return 1;
    for (char **p = r->tool_names; *p; p++)
        if (strcmp(*p, name) == 0)
            return 1;
    return 0;
}

static const agent_tool *tool_of(const json_t *tc)
{
    return agent_tools_find(tk_json_str_or(tc, "name", ""));
}

/* Starts the call at calls[idx] as slot `slot` of the group. */
static void start_call(agent_run *r, size_t idx, size_t slot)
{
    json_t *tc = json_array_get(r->calls, idx);
    agent_call *c = tk_calloc(1, sizeof *c);
    c->run = r;
    c->index = (int)idx;
    snprintf(c->id, sizeof c->id, "%s", tk_json_str_or(tc, "id", ""));
    snprintf(c->name, sizeof c->name, "%s", tk_json_str_or(tc, "name", ""));
    c->args_text = tk_strdup(tk_json_str_or(tc, "arguments", "{}"));
    c->t0_ns = tk_mono_ns();
    r->group[slot] = c;
    r->ntool_calls++;
    c->tool = agent_tools_find(c->name);
    agent_lane lane = c->tool ? c->tool->lane : AGENT_LANE_FAST;
    char jerr[128];
    json_t *args = tk_json_parse(c->args_text, strlen(c->args_text), 1 << 20, jerr, sizeof jerr);
    if (json_is_object(args)) {
        c->args = args;
    } else {
        json_decref(args);
        snprintf(c->args_error, sizeof c->args_error, "%s",
                 jerr[0] ? jerr : "the arguments must be a JSON object");
    }
    c->span = agent_span_begin(r->cfg.trace, r->parent_span, "tool", c->name);
    agent_span_attrs(c->span, tk_json_obj("lane", json_string(agent_lane_name(lane)), "call_id",
                                          json_string(c->id), "step", json_integer(r->step), NULL));
    if (r->ngroup > 1)
        agent_span_attrs(c->span,
                         tk_json_obj("parallel", json_integer((json_int_t)r->ngroup), NULL));
    run_emit(r, "tool_start",
             tk_json_obj("call_id", json_string(c->id), "name", json_string(c->name), "lane",
                         json_string(agent_lane_name(lane)), "arguments",
                         c->args ? json_incref(c->args) : json_string(c->args_text), "step",
                         json_integer(r->step), NULL));
    if (r->cancel) {
        agent_result_error(&c->res, "not run: the turn was stopped");
        call_done(c);
        return;
    }
    if (!c->tool) {
        agent_result_error(&c->res, "there is no tool named \"%s\"", c->name);
        call_done(c);
        return;
    }
    if (!name_allowed(r, c->name)) {
        /* a nested run's own tool set: nothing else runs, whatever the model asks */
        tk_buf b;
        tk_buf_init(&b, 1 << 16);
        for (char **p = r->tool_names; *p; p++)
            if (agent_tools_find(*p))
                tk_buf_printf(&b, "%s%s", b.len ? ", " : "", *p);
        agent_result_error(&c->res, "%s is not one of the tools of this %s%s (its tools: %s)",
                           c->name, r->label ? r->label : "agent", r->label ? " subagent" : "",
                           b.len ? tk_buf_cstr(&b) : "none");
        tk_buf_free(&b);
        call_done(c);
        return;
    }
    if (!agent_lane_available(c->tool->lane) || (c->tool->available && !c->tool->available())) {
        if (c->tool->lane == AGENT_LANE_SANDBOX)
            agent_result_error(&c->res,
                               "%s is not available: code execution is off on this server (%s "
                               "not set), so nothing can be written or run",
                               c->name, r->cfg.env->execution_missing);
        else
            agent_result_error(&c->res, "%s is not available on this server", c->name);
        call_done(c);
        return;
    }
    if (!c->args) {
        agent_result_error(&c->res, "the arguments of %s are not valid JSON: %s", c->name,
                           c->args_error);
        call_done(c);
        return;
    }
    if (c->tool->start) {
        c->tool->start(c, c->args);
        return;
    }
    if (tk_workpool_submit_then(r->cfg.env->tool_pool, r->cfg.env->loop, tool_work, tool_then, c) !=
        TK_OK) {
        agent_result_error(&c->res, "the server is too busy to run %s now; try again", c->name);
        call_done(c);
    }
}

static void next_tool(agent_run *r)
{
    if (r->state == RUN_FINISHED)
        return;
    size_t total = json_array_size(r->calls);
    if (r->call_idx >= total) {
        run_step(r);
        return;
    }
    /* one call, or a run of consecutive parallel ones */
    size_t n = 1;
    const agent_tool *t0 = tool_of(json_array_get(r->calls, r->call_idx));
    if (t0 && t0->parallel)
        while (r->call_idx + n < total && n < AGENT_PARALLEL_MAX) {
            const agent_tool *t = tool_of(json_array_get(r->calls, r->call_idx + n));
            if (!t || !t->parallel)
                break;
            n++;
        }
    r->group = tk_calloc(n, sizeof *r->group);
    r->ngroup = r->npending = n;
    r->gmsg = 0;
    r->group_closing = 0;
    r->state = RUN_TOOL;
    r->group_guard++;
    for (size_t i = 0; i < n; i++)
        start_call(r, r->call_idx + i, i);
    r->group_guard--;
    if (r->npending == 0 && !r->group_guard)
        group_done(r);
}

/* ---------------------------------------------------------------- deadline */

static void deadline_fire(tk_ev_timer *t, void *ud)
{
    agent_run *r = ud;
    tk_ev_timer_del(t);
    r->deadline = NULL;
    char m[160];
    char d[32];
    tk_format_duration(r->cfg.env->turn_timeout_ms, d, sizeof d);
    snprintf(m, sizeof m, "the turn ran out of time (TUSKO_TURN_TIMEOUT is %s)", d);
    run_emit(r, "error",
             tk_json_obj("code", json_string("TURN_TIMEOUT"), "message", json_string(m), NULL));
    agent_run_cancel(r, "TURN_TIMEOUT", m);
}

/* ---------------------------------------------------------------- API */

agent_run *agent_run_start(const agent_run_cfg *cfg)
{
    agent_run *r = tk_calloc(1, sizeof *r);
    r->cfg = *cfg;
    snprintf(r->session_id, sizeof r->session_id, "%s", cfg->session_id);
    snprintf(r->user_id, sizeof r->user_id, "%s", cfg->user_id);
    snprintf(r->turn_id, sizeof r->turn_id, "%s", cfg->turn_id);
    /* the system prompt guardrail, whatever the caller passed */
    const char *sys = cfg->system ? cfg->system : "";
    r->system = tk_strndup(sys, tk_utf8_cut_chars(sys, strlen(sys), APP_SYSTEM_PROMPT_MAX, NULL));
    r->label = cfg->label ? tk_strdup(cfg->label) : NULL;
    r->parent_span = cfg->parent_span ? tk_strdup(cfg->parent_span) : NULL;
    r->cfg.system = r->system;
    r->cfg.label = r->label;
    r->cfg.parent_span = r->parent_span;
    if (cfg->tools) {
        size_t n = 0;
        while (cfg->tools[n])
            n++;
        r->tool_names = tk_calloc(n + 1, sizeof *r->tool_names);
        for (size_t i = 0; i < n; i++)
            r->tool_names[i] = tk_strdup(cfg->tools[i]);
        r->cfg.tools = (const char *const *)r->tool_names;
    }
    r->messages = cfg->messages ? cfg->messages : json_array();
    r->cfg.messages = NULL;
    r->tools_offered = agent_tools_offered_at(r->cfg.tools, r->cfg.depth);
    if (r->label || cfg->subagent_id) {
        snprintf(r->subagent_id, sizeof r->subagent_id, "%s",
                 cfg->subagent_id ? cfg->subagent_id : "");
        snprintf(r->parent_call_id, sizeof r->parent_call_id, "%s",
                 cfg->parent_call_id ? cfg->parent_call_id : "");
        r->tags = json_object();
        if (r->label)
            json_object_set_new(r->tags, "agent", json_string(r->label));
        if (r->subagent_id[0])
            json_object_set_new(r->tags, "subagent_id", json_string(r->subagent_id));
        if (r->parent_call_id[0])
            json_object_set_new(r->tags, "parent_call_id", json_string(r->parent_call_id));
        if (cfg->parent_subagent_id && *cfg->parent_subagent_id)
            json_object_set_new(r->tags, "parent_subagent_id",
                                json_string(cfg->parent_subagent_id));
        json_object_set_new(r->tags, "depth", json_integer(r->cfg.depth));
    }
    r->cfg.subagent_id = r->subagent_id;
    r->cfg.parent_call_id = r->parent_call_id;
    r->cfg.parent_subagent_id = NULL; /* only in the tags */
    r->turn_state = json_object();
    if (r->cfg.max_steps <= 0)
        r->cfg.max_steps = 1;
    if (cfg->deadline_mono_ms > 0) {
        int64_t left = cfg->deadline_mono_ms - tk_mono_ms();
        r->deadline = tk_ev_timer_add(cfg->env->loop, left > 0 ? left : 0, deadline_fire, r);
    }
    run_step(r);
    return r;
}

void agent_run_cancel(agent_run *r, const char *code, const char *message)
{
    if (!r || r->state == RUN_FINISHED)
        return;
    if (!r->cancel) {
        snprintf(r->err_code, sizeof r->err_code, "%s", code ? code : "CANCELLED");
        snprintf(r->err_msg, sizeof r->err_msg, "%s", message ? message : "the turn was cancelled");
    }
    r->cancel = 1;
    if (r->state == RUN_STREAMING && r->stream) {
        /* keep what was streamed */
        llm_stream_cancel(r->stream);
        llm_result *res = llm_stream_result(r->stream);
        if (r->llm_span) {
            agent_span_attrs(
                r->llm_span,
                tk_json_obj("cancelled", json_true(), "ttft_ms",
                            res->ttft_ms >= 0 ? json_integer(res->ttft_ms) : json_null(), NULL));
            agent_span_end(r->llm_span, "cancelled");
            r->llm_span = NULL;
        }
        if (res->text.len > 0) {
            free(r->last_text);
            r->last_text = tk_strdup(tk_buf_cstr(&res->text));
            json_t *msg =
                tk_json_obj("role", json_string("assistant"), "content",
                            json_string(tk_buf_cstr(&res->text)), "partial", json_true(), NULL);
            json_decref(r->calls);
            r->calls = json_array();
            append_then(r, msg, after_assistant);
            return;
        }
        stop_now(r);
        return;
    }
    if (r->state == RUN_TOOL && r->group && !r->group_closing) {
        /* asynchronous tools (subagents) are told; blocking ones see the flag */
        r->group_guard++;
        for (size_t i = 0; i < r->ngroup; i++) {
            agent_call *c = r->group[i];
            if (c && !c->done && c->tool && c->tool->start && c->tool->cancel)
                c->tool->cancel(c);
        }
        r->group_guard--;
        if (r->npending == 0 && !r->group_guard)
            group_done(r);
    }
    /* RUN_TOOL (blocking): the tool sees the flag; RUN_PERSISTING: the next
     * step checks it */
}

const char *agent_run_state(const agent_run *r)
{
    return r->final_state[0] ? r->final_state : "running";
}

const char *agent_run_text(const agent_run *r)
{
    return r->last_text ? r->last_text : "";
}

const char *agent_run_error_code(const agent_run *r)
{
    return r->err_code;
}

const char *agent_run_error(const agent_run *r)
{
    return r->err_msg;
}

int agent_run_steps(const agent_run *r)
{
    return r->step;
}

int agent_run_tool_calls(const agent_run *r)
{
    return r->ntool_calls;
}

int64_t agent_run_input_tokens(const agent_run *r)
{
    return r->in_tokens;
}

int64_t agent_run_output_tokens(const agent_run *r)
{
    return r->out_tokens;
}

void agent_run_free(agent_run *r)
{
    if (!r)
        return;
    if (r->deadline)
        tk_ev_timer_del(r->deadline);
    if (r->stream)
        llm_stream_free(r->stream);
    json_decref(r->messages);
    json_decref(r->tools_offered);
    json_decref(r->calls);
    json_decref(r->turn_state);
    json_decref(r->tags);
    if (r->group)
        group_free(r);
    if (r->tool_names) {
        for (char **p = r->tool_names; *p; p++)
            free(*p);
        free(r->tool_names);
    }
    free(r->system);
    free(r->label);
    free(r->parent_span);
    free(r->last_text);
    free(r);
}

agent_run_cfg agent_run_cfg_for_call(agent_call *call)
{
    agent_run *p = call->run;
    agent_run_cfg cfg = {.env = p->cfg.env,
                         .session_id = p->session_id,
                         .user_id = p->user_id,
                         .turn_id = p->turn_id,
                         .model = p->cfg.model,
                         .max_steps = p->cfg.max_steps,
                         .steps_setting = p->cfg.steps_setting,
                         .deadline_mono_ms = p->cfg.deadline_mono_ms,
                         .trace = p->cfg.trace,
                         .parent_span = agent_span_id(call->span),
                         .depth = p->cfg.depth + 1,
                         .parent_call_id = call->id,
                         .parent_subagent_id = p->subagent_id[0] ? p->subagent_id : NULL};
    return cfg;
}

/* ---------------------------------------------------------------- agent_call */

const char *agent_call_id(const agent_call *c)
{
    return c->id;
}

const char *agent_call_name(const agent_call *c)
{
    return c->name;
}

const char *agent_call_session(const agent_call *c)
{
    return c->run->session_id;
}

const char *agent_call_user(const agent_call *c)
{
    return c->run->user_id;
}

const char *agent_call_turn(const agent_call *c)
{
    return c->run->turn_id;
}

int agent_call_step(const agent_call *c)
{
    return c->run->step;
}

int agent_call_depth(const agent_call *c)
{
    return c->run->cfg.depth;
}

const char *agent_call_agent(const agent_call *c)
{
    return c->run->label;
}

void agent_call_set_ud(agent_call *c, void *ud)
{
    c->ud = ud;
}

void *agent_call_ud(const agent_call *c)
{
    return c->ud;
}

void agent_call_add_usage(agent_call *c, int64_t input_tokens, int64_t output_tokens)
{
    if (input_tokens > 0)
        c->run->in_tokens += input_tokens;
    if (output_tokens > 0)
        c->run->out_tokens += output_tokens;
}

agent_trace *agent_call_trace(agent_call *c)
{
    return c->run->cfg.trace;
}

const char *agent_call_span_id(const agent_call *c)
{
    return agent_span_id(c->span);
}

int agent_call_cancelled(const agent_call *c)
{
    return c->run->cancel != 0;
}

const volatile int *agent_call_cancel_flag(const agent_call *c)
{
    return &c->run->cancel;
}

void agent_call_emit(agent_call *c, const char *type, json_t *data)
{
    if (!data)
        data = json_object();
    if (!json_object_get(data, "call_id"))
        json_object_set_new(data, "call_id", json_string(c->id));
    run_emit(c->run, type, data);
}

void agent_call_output(agent_call *c, const char *stream, const char *text, size_t len)
{
    if (len == 0)
        return;
    run_emit(c->run, "tool_output",
             tk_json_obj("call_id", json_string(c->id), "name", json_string(c->name), "stream",
                         json_string(stream), "text", json_stringn(text, len), NULL));
}

void agent_call_set_attrs(agent_call *c, json_t *attrs)
{
    if (!json_is_object(attrs)) {
        json_decref(attrs);
        return;
    }
    if (!c->attrs)
        c->attrs = json_object();
    json_object_update(c->attrs, attrs);
    json_decref(attrs);
}

void agent_call_finish(agent_call *c, agent_result *res)
{
    if (c->finished)
        return;
    c->finished = 1;
    agent_result_free(&c->res);
    c->res = *res;
    memset(res, 0, sizeof *res);
    call_done(c);
}

json_t *agent_call_turn_state(agent_call *c)
{
    return c->run->turn_state;
}
