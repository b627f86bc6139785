/* delegate_subagent: Researcher, Coder and Reviewer, each its own nested agent
 * loop. See subagent.h. */
#include "app/tools/subagent.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "app/agent/run.h"
#include "app/agent/events.h"
#include "app/app.h"
#include "app/models.h"
#include "lib/buf.h"
#include "lib/id.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/tktime.h"
#include "lib/utf8.h"

#define TASK_MAX_CHARS    20000
#define CONTEXT_MAX_CHARS 60000

enum { ROLE_RESEARCHER, ROLE_CODER, ROLE_REVIEWER, NROLES };

typedef struct {
    const char *name;  /* the label of its events, "researcher" */
    const char *title; /* "Researcher" */
    const char *prompt;
} role_def;

static const role_def ROLES[NROLES] = {
    {"researcher", "Researcher",
     "You are the Researcher, a subagent of Tusko. Another agent gave you one research task; "
     "you work alone and your final answer goes back to it, not to the user.\n"
     "- Look things up with your tools: search_chunks searches the user's documents, long-term "
     "memories and facts (quote results by their [n] labels); recall_facts answers what was "
     "true about a person, company or place at a date; web_fetch (when you have it) reads a "
     "web page.\n"
     "- You cannot write files or run code, and you need not: you only find things out.\n"
     "- Stop as soon as you can answer. End with a concise answer (at most about 250 words): "
     "the findings first, each with its source, then what you could not find."},
    {"coder", "Coder",
     "You are the Coder, a subagent of Tusko. Another agent gave you one coding task; you work "
     "alone and your final answer goes back to it, not to the user.\n"
     "- You work in the chat's own sandbox, in /workspace: the same files the main agent "
     "wrote are there, and what you write stays there for it. Use write_file, read_file, "
     "execute_command (a persistent bash session) and execute_code (a persistent Python "
     "kernel); list_files and preview to look around.\n"
     "- Check your work by running it.\n"
     "- End with a concise summary (at most about 200 words): what you changed (file paths), "
     "how you checked it, the result, and anything left to do."},
    {"reviewer", "Reviewer",
     "You are the Reviewer, a subagent of Tusko. Another agent asked you to review something; "
     "you work alone and your final answer goes back to it, not to the user.\n"
     "- Your tools only read: list_files, preview and read_file (the chat's /workspace) and "
     "search_chunks (the user's documents and memories). You change nothing.\n"
     "- Answer with findings, most important first, one per line: severity (high, medium, "
     "low), where (file and line, or the section), what is wrong, and the fix you suggest. "
     "Say \"No findings\" when there are none. Be concise (at most about 250 words)."},
};

static const agent_subagent_config *conf(void)
{
    return &app_get()->cfg->subagent;
}

static const char *role_model_setting(int role)
{
    const agent_subagent_config *c = conf();
    return role == ROLE_RESEARCHER ? c->researcher_model
           : role == ROLE_CODER    ? c->coder_model
                                   : c->reviewer_model;
}

static const char *const ROLE_STEPS_SETTING[NROLES] = {
    "SUBAGENT_RESEARCHER_STEPS", "SUBAGENT_CODER_STEPS", "SUBAGENT_REVIEWER_STEPS"};

static int role_steps(int role)
{
    const agent_subagent_config *c = conf();
    return (int)(role == ROLE_RESEARCHER ? c->researcher_steps
                 : role == ROLE_CODER    ? c->coder_steps
                                         : c->reviewer_steps);
}

int agent_subagent_role(const char *name)
{
    if (!name)
        return -1;
    for (int i = 0; i < NROLES; i++)
        if (strcasecmp(name, ROLES[i].name) == 0)
            return i;
    return -1;
}

static void push(const char ***list, size_t *n, size_t *cap, const char *name)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*list)[i], name) == 0)
            return;
    if (*n + 2 > *cap) {
        *cap = *cap ? *cap * 2 : 16;
        *list = realloc(*list, *cap * sizeof **list);
        TK_ASSERT(*list);
    }
    (*list)[(*n)++] = name;
    (*list)[*n] = NULL;
}

const char **agent_subagent_tools(int role)
{
    const char **list = NULL;
    size_t n = 0, cap = 0;
    push(&list, &n, &cap, "delegate_subagent"); /* offered only below SUBAGENT_MAX_DEPTH */
    if (role == ROLE_RESEARCHER) {
        /* the fast lane (never a sandbox), less the chat's plan, and web_fetch
         * by name: included once it is registered */
        for (size_t i = 0; i < agent_tools_count(); i++) {
            const agent_tool *t = agent_tools_at(i);
            if (t->lane == AGENT_LANE_FAST && strcmp(t->name, "plan_task") != 0)
                push(&list, &n, &cap, t->name);
        }
        push(&list, &n, &cap, "web_fetch");
    } else if (role == ROLE_CODER) {
        for (size_t i = 0; i < agent_tools_count(); i++) {
            const agent_tool *t = agent_tools_at(i);
            if (t->lane == AGENT_LANE_SANDBOX)
                push(&list, &n, &cap, t->name);
        }
        push(&list, &n, &cap, "list_files");
        push(&list, &n, &cap, "preview");
        push(&list, &n, &cap, "search_chunks");
    } else {
        /* the reviewer only reads, and does not delegate */
        n = 0;
        push(&list, &n, &cap, "list_files");
        push(&list, &n, &cap, "preview");
        push(&list, &n, &cap, "read_file");
        push(&list, &n, &cap, "search_chunks");
    }
    return list;
}

char *agent_subagent_cap(const char *text, size_t max_chars, const char *role)
{
    size_t chars = 0, cut = tk_utf8_cut_chars(text, strlen(text), max_chars, &chars);
    if (chars <= max_chars)
        return tk_strdup(text);
    return tk_asprintf("%.*s\n[... the %s's answer was %zu characters; the first %zu are shown "
                       "(SUBAGENT_RESULT_MAX)]",
                       (int)cut, text, role, chars, max_chars);
}

/* ---------------------------------------------------------------- the tool */

typedef struct {
    agent_call *call;
    agent_run *run;
    agent_span *span;
    int role;
    const app_model *model;
    char id[TK_UUID_LEN];
    char session_id[TK_UUID_LEN], turn_id[TK_UUID_LEN];
    json_t *tags;
    int64_t t0_ns;
} sub_state;

static void sub_emit(sub_state *st, const char *type, json_t *data)
{
    json_object_update(data, st->tags);
    agent_event_emit(st->session_id, st->turn_id, type, data);
}

static void sub_done(void *ud, agent_run *run)
{
    sub_state *st = ud;
    agent_call *call = st->call;
    const role_def *rd = &ROLES[st->role];
    const char *state = agent_run_state(run);
    const char *text = agent_run_text(run);
    double ms = (double)(tk_mono_ns() - st->t0_ns) / 1e6;
    int steps = agent_run_steps(run), calls = agent_run_tool_calls(run);
    int64_t in = agent_run_input_tokens(run), outt = agent_run_output_tokens(run);
    agent_call_add_usage(call, in, outt);
    char *capped = agent_subagent_cap(text, (size_t)conf()->result_max, rd->name);
    agent_result res = {0};
    int done = strcmp(state, "done") == 0;
    if (done && *text) {
        agent_result_text(&res, "%s subagent (%d model call%s, %d tool call%s):\n%s", rd->title,
                          steps, steps == 1 ? "" : "s", calls, calls == 1 ? "" : "s", capped);
    } else if (done) {
        agent_result_error(&res, "the %s finished without an answer", rd->name);
    } else if (strcmp(agent_run_error_code(run), "STEP_BUDGET") == 0) {
        /* the parent goes on: it is told why there is no answer, and that
         * asking again the same way would end the same */
        agent_result_error(&res,
                           "the %s subagent ran out of steps: it used all %d model calls of its "
                           "budget (%s) without a final answer; split the task or do the rest "
                           "yourself%s%s",
                           rd->name, steps, ROLE_STEPS_SETTING[st->role],
                           *text ? ". Its last answer:\n" : "", *text ? capped : "");
    } else if (strcmp(state, "cancelled") == 0) {
        agent_result_error(
            &res, "stopped: the turn was cancelled (the %s subagent was interrupted)", rd->name);
    } else {
        agent_result_error(&res, "the %s subagent failed (%s: %s)%s%s", rd->name,
                           agent_run_error_code(run), agent_run_error(run),
                           *text ? "; its last answer:\n" : "", *text ? capped : "");
    }
    json_t *summary = tk_json_obj("subagent_id", json_string(st->id), "role", json_string(rd->name),
                                  "model", json_string(st->model->id), "state", json_string(state),
                                  "steps", json_integer(steps), "tool_calls", json_integer(calls),
                                  "input_tokens", json_integer(in), "output_tokens",
                                  json_integer(outt), "duration_ms", json_real(ms), NULL);
    agent_span_attrs(st->span,
                     tk_json_obj("state", json_string(state), "steps", json_integer(steps),
                                 "tool_calls", json_integer(calls), "input_tokens",
                                 json_integer(in), "output_tokens", json_integer(outt),
                                 "result_chars", json_integer((json_int_t)strlen(capped)), NULL));
    if (!done && agent_run_error_code(run)[0])
        agent_span_attrs(st->span, tk_json_obj("error_code", json_string(agent_run_error_code(run)),
                                               "error", json_string(agent_run_error(run)), NULL));
    agent_span_end(st->span, done ? "ok" : strcmp(state, "cancelled") == 0 ? "cancelled" : "error");
    json_t *ev = json_deep_copy(summary);
    json_object_del(ev, "subagent_id");
    json_object_set_new(ev, "result", json_string(res.content ? res.content : ""));
    if (!done) {
        json_object_set_new(ev, "error_code", json_string(agent_run_error_code(run)));
        json_object_set_new(ev, "error", json_string(agent_run_error(run)));
    }
    sub_emit(st, "subagent_end", ev);
    agent_call_set_attrs(call,
                         tk_json_obj("subagent", json_string(st->id), "role", json_string(rd->name),
                                     "subagent_state", json_string(state), NULL));
    res.data = summary;
    tk_info("agent",
            "msg=\"subagent ended\" turn=%s role=%s subagent=%s state=%s steps=%d tools=%d ms=%.0f",
            st->turn_id, rd->name, st->id, state, steps, calls, ms);
    free(capped);
    agent_run_free(run);
    json_decref(st->tags);
    agent_call_set_ud(call, NULL);
    free(st);
    agent_call_finish(call, &res);
}

static void refuse(agent_call *call, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void refuse(agent_call *call, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    agent_result res = {0};
    agent_result_error(&res, "%s", msg);
    agent_call_finish(call, &res);
}

static int chars_of(const json_t *s)
{
    long n = tk_utf8_count(json_string_value(s), json_string_length(s));
    return n < 0 ? -1 : (int)n;
}

static void start_delegate(agent_call *call, const json_t *args)
{
    int depth = agent_call_depth(call);
    int max = (int)conf()->max_depth;
    if (max == 0) {
        refuse(call, "refused: subagents are off on this server (SUBAGENT_MAX_DEPTH is 0)");
        return;
    }
    if (depth >= max) {
        /* the depth limit: a subagent at SUBAGENT_MAX_DEPTH does not delegate */
        refuse(call,
               "refused: a subagent cannot delegate further — this %s subagent runs at depth %d "
               "and SUBAGENT_MAX_DEPTH is %d; do the work yourself with your own tools",
               agent_call_agent(call) ? agent_call_agent(call) : "", depth, max);
        return;
    }
    const char *rname = tk_json_str(args, "role");
    int role = agent_subagent_role(rname);
    if (role < 0) {
        refuse(call, "\"role\" must be one of researcher, coder, reviewer");
        return;
    }
    json_t *jt = json_object_get(args, "task");
    if (!json_is_string(jt) || json_string_length(jt) == 0) {
        refuse(call, "\"task\" (what the subagent should do) is required");
        return;
    }
    json_t *jc = json_object_get(args, "context");
    if (jc && !json_is_null(jc) && !json_is_string(jc)) {
        refuse(call, "\"context\" must be a string");
        return;
    }
    if (chars_of(jt) < 0 || chars_of(jt) > TASK_MAX_CHARS ||
        (json_is_string(jc) && (chars_of(jc) < 0 || chars_of(jc) > CONTEXT_MAX_CHARS))) {
        refuse(call, "\"task\" is at most %d characters of UTF-8 text, \"context\" %d",
               TASK_MAX_CHARS, CONTEXT_MAX_CHARS);
        return;
    }
    if (memchr(json_string_value(jt), 0, json_string_length(jt)) ||
        (json_is_string(jc) && memchr(json_string_value(jc), 0, json_string_length(jc)))) {
        refuse(call, "the task contains a NUL byte");
        return;
    }
    if (role == ROLE_CODER && !agent_lane_available(AGENT_LANE_SANDBOX)) {
        refuse(call,
               "the coder is not available: code execution is off on this server (%s not set), "
               "so nothing can be written or run",
               app_get()->execution_missing);
        return;
    }
    const role_def *rd = &ROLES[role];
    agent_run_cfg cfg = agent_run_cfg_for_call(call);
    const char *mname = role_model_setting(role);
    const app_model *model = mname && *mname ? app_models_find(mname) : cfg.model;
    if (!model)
        model = cfg.model; /* checked at start; the allowlist does not change */
    sub_state *st = tk_calloc(1, sizeof *st);
    st->call = call;
    st->role = role;
    st->model = model;
    st->t0_ns = tk_mono_ns();
    tk_uuid7(st->id);
    snprintf(st->session_id, sizeof st->session_id, "%s", agent_call_session(call));
    snprintf(st->turn_id, sizeof st->turn_id, "%s", agent_call_turn(call));
    st->tags = tk_json_obj("agent", json_string(rd->name), "subagent_id", json_string(st->id),
                           "parent_call_id", json_string(agent_call_id(call)), "depth",
                           json_integer(depth + 1), NULL);
    if (cfg.parent_subagent_id)
        json_object_set_new(st->tags, "parent_subagent_id", json_string(cfg.parent_subagent_id));
    const char **tools = agent_subagent_tools(role);
    /* what it is offered (the registry filters lanes, availability and depth) */
    json_t *offered = agent_tools_offered_at(tools, depth + 1);
    json_t *names = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(offered, i, t) json_array_append(names, json_object_get(t, "name"));
    json_decref(offered);
    st->span =
        agent_span_begin(agent_call_trace(call), agent_call_span_id(call), "subagent", rd->name);
    agent_span_attrs(st->span,
                     tk_json_obj("role", json_string(rd->name), "subagent_id", json_string(st->id),
                                 "model", json_string(model->id), "depth", json_integer(depth + 1),
                                 "max_steps", json_integer(role_steps(role)), "tools",
                                 json_deep_copy(names), "lane",
                                 json_string(role == ROLE_CODER ? "sandbox" : "fast"), NULL));
    json_t *start = tk_json_obj("role", json_string(rd->name), "model", json_string(model->id),
                                "task", json_incref(jt), "max_steps",
                                json_integer(role_steps(role)), "tools", names, NULL);
    if (json_is_string(jc))
        json_object_set(start, "context", jc);
    sub_emit(st, "subagent_start", start);
    /* the conversation: one user message with the task (and the context) */
    tk_buf m;
    tk_buf_init(&m, 1u << 20);
    tk_buf_printf(&m, "Task: %s", json_string_value(jt));
    if (json_is_string(jc) && json_string_length(jc))
        tk_buf_printf(&m, "\n\nContext from the agent that delegated this:\n%s",
                      json_string_value(jc));
    json_t *msgs = json_pack("[{s:s,s:s}]", "role", "user", "content", tk_buf_cstr(&m));
    tk_buf_free(&m);
    cfg.model = model;
    cfg.system = rd->prompt;
    cfg.messages = msgs;
    cfg.tools = tools;
    cfg.max_steps = role_steps(role);
    cfg.steps_setting = ROLE_STEPS_SETTING[role];
    cfg.parent_span = agent_span_id(st->span);
    cfg.label = rd->name;
    cfg.subagent_id = st->id;
    cfg.persist = 0;
    cfg.on_done = sub_done;
    cfg.ud = st;
    agent_call_set_ud(call, st);
    tk_info("agent", "msg=\"subagent started\" turn=%s role=%s subagent=%s depth=%d model=%s",
            st->turn_id, rd->name, st->id, depth + 1, model->id);
    st->run = agent_run_start(&cfg); /* copies the tool names; reports through sub_done */
    free(tools);
}

static void cancel_delegate(agent_call *call)
{
    sub_state *st = agent_call_ud(call);
    if (st && st->run)
        agent_run_cancel(st->run, "CANCELLED", "the turn was cancelled");
}

static int offered_at(int depth)
{
    return depth < (int)conf()->max_depth;
}

static const agent_tool delegate_tool = {
    .name = "delegate_subagent",
    .lane = AGENT_LANE_FAST,
    .parallel = 1,
    .description =
        "Hand a self-contained part of the work to a subagent with its own tools and budget, "
        "and get its concise answer back. Roles: \"researcher\" looks things up (the user's "
        "documents, memory and facts, the web when available; never runs code), \"coder\" "
        "writes and runs code in this chat's sandbox (the same /workspace), \"reviewer\" reads "
        "files and documents and returns findings without changing anything. Several "
        "delegate_subagent calls in one answer run at the same time. Give the task everything "
        "it needs in \"task\" and \"context\": the subagent does not see this conversation.",
    .parameters = "{\"type\":\"object\",\"properties\":{\"role\":{\"type\":\"string\",\"enum\":["
                  "\"researcher\",\"coder\",\"reviewer\"]},\"task\":{\"type\":\"string\","
                  "\"description\":\"what to do, self-contained\"},\"context\":{\"type\":"
                  "\"string\",\"description\":\"facts, file names, constraints it needs\"}},"
                  "\"required\":[\"role\",\"task\"]}",
    .start = start_delegate,
    .cancel = cancel_delegate,
    .offered_at = offered_at,
};

tk_status agent_subagent_check_models(char *err, size_t errlen)
{
    static const char *const names[NROLES] = {"SUBAGENT_RESEARCHER_MODEL", "SUBAGENT_CODER_MODEL",
                                              "SUBAGENT_REVIEWER_MODEL"};
    for (int i = 0; i < NROLES; i++) {
        const char *m = role_model_setting(i);
        if (m && *m && !app_models_find(m)) {
            snprintf(err, errlen,
                     "%s: \"%s\" is not one of TUSKO_MODELS (the allowlist); name an allowed "
                     "model or unset it to use the chat's model",
                     names[i], m);
            return TK_EINVAL;
        }
    }
    return TK_OK;
}

void agent_subagent_tools_register(void)
{
    agent_tools_register(&delegate_tool);
}
