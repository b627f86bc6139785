/*
 * Chat turns: POST /api/sessions/{id}/messages and /cancel, the turn around an
 * agent_run (history in, messages and the turn row out), and the recovery of
 * turns whose instance died (kill -9, a crash, a lost host).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/agent/bus.h"
#include "app/agent/events.h"
#include "app/agent/history.h"
#include "app/agent/hub.h"
#include "app/agent/prompt.h"
#include "app/agent/run.h"
#include "app/agent/turn.h"
#include "app/app.h"
#include "app/observe.h"
#include "app/auth/auth.h"
#include "app/models.h"
#include "app/ratelimit.h"
#include "app/sessions.h"
#include "app/skills.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/tktime.h"
#include "lib/utf8.h"

#define CONTENT_MAX_CHARS 100000

typedef struct turn {
    char id[TK_UUID_LEN];
    char session_id[TK_UUID_LEN];
    char user_id[TK_UUID_LEN];
    char message_id[TK_UUID_LEN];
    const app_model *model;
    char *content;
    agent_trace *trace;
    agent_span *root;
    agent_run *run;
    json_t *history;
    agent_prompt_parts prompt; /* what the system prompt needs, found for the turn */
    const char **allow;        /* the tools offered when they are not all: NULL-terminated */
    char invoked[96];          /* "/name" started the message: the skill's span, to record */
    char invoked_digest[SKILLS_DIGEST_HEX];
    int invoked_version;
    int64_t invoked_ms;
    int skip; /* the turn row was no longer queued */
    int prepare_failed;
    int cancel_requested;
    char cancel_code[32];
    char cancel_msg[200];
    int64_t t0_mono;
    char state[16], err_code[40], err[512];
    int steps, tool_calls;
    int64_t in_tokens, out_tokens;
    json_t *end_ev; /* turn_end's data, emitted once the end is stored */
    struct turn *next;
} turn;

/* Where turns run (agent_turns_init). */
static const agent_run_env *env;

void agent_turns_init(const agent_run_env *e)
{
    env = e;
}

/* Loop thread only. */
static turn *active;
static size_t nactive;

size_t agent_turns_active(void)
{
    return nactive;
}

static void turn_unlink(turn *t)
{
    for (turn **pp = &active; *pp; pp = &(*pp)->next)
        if (*pp == t) {
            *pp = t->next;
            nactive--;
            return;
        }
}

static void turn_free(turn *t)
{
    if (t->run)
        agent_run_free(t->run);
    agent_trace_free(t->trace);
    json_decref(t->history);
    json_decref(t->end_ev);
    agent_prompt_parts_free(&t->prompt);
    free(t->allow);
    free(t->content);
    free(t);
}

/* ---------------------------------------------------------------- finish */

/* How long the end of a turn is retried while the database is away (a
 * restart, a crash and its recovery); past it the turn stays running until an
 * instance started later fails it as interrupted. */
#define FINISH_RETRY_MS 60000

/* Stores the end of a turn (its row, the last spans): once stored, the chat
 * takes the next message. */
static tk_status finish_store(turn *t, const char *spans)
{
    PGconn *c = app_db_acquire();
    if (!c)
        return TK_ERROR;
    char steps[16], calls[16], in[24], out[24];
    snprintf(steps, sizeof steps, "%d", t->steps);
    snprintf(calls, sizeof calls, "%d", t->tool_calls);
    snprintf(in, sizeof in, "%lld", (long long)t->in_tokens);
    snprintf(out, sizeof out, "%lld", (long long)t->out_tokens);
    const char *p[] = {t->id,
                       t->state,
                       t->err_code[0] ? t->err_code : NULL,
                       t->err[0] ? t->err : NULL,
                       steps,
                       calls,
                       in,
                       out,
                       t->session_id,
                       spans ? spans : "[]"};
    tk_status st = tk_pg_exec(c,
                              "SELECT tusko_turn_finish($1, $2, $3, $4, $5::int, $6::int, "
                              "$7::bigint, $8::bigint, $9, $10::jsonb)",
                              10, p);
    app_db_release(c);
    return st;
}

static void finish_work(void *ud)
{
    turn *t = ud;
    char *spans = agent_trace_take_pending(t->trace);
    int64_t deadline = tk_mono_ms() + FINISH_RETRY_MS;
    int backoff = 100, tries = 0, stored;
    while (!(stored = finish_store(t, spans) == TK_OK)) {
        if (++tries == 1)
            tk_warn("turn", "msg=\"could not store the end of a turn; trying again\" turn=%s",
                    t->id);
        if (tk_mono_ms() + backoff > deadline) {
            tk_error("turn",
                     "msg=\"could not store the end of a turn\" turn=%s tries=%d "
                     "hint=\"an instance started later fails it as interrupted\"",
                     t->id, tries);
            break;
        }
        tk_sleep_ms(backoff);
        backoff = backoff < 2000 ? backoff * 2 : 2000;
    }
    if (stored && tries > 0)
        tk_info("turn", "msg=\"end of the turn stored\" turn=%s tries=%d", t->id, tries + 1);
    free(spans);
}

/* turn_end goes out after tusko_turn_finish has stored the end, so a client
 * that sends its next message on seeing it finds the chat free (not 409
 * TURN_IN_PROGRESS) */
static void finish_then(void *ud)
{
    turn *t = ud;
    agent_event_emit(t->session_id, t->id, "turn_end", t->end_ev);
    t->end_ev = NULL;
    turn_unlink(t);
    turn_free(t);
}

static void turn_end(turn *t, const char *state, const char *code, const char *msg)
{
    snprintf(t->state, sizeof t->state, "%s", state);
    snprintf(t->err_code, sizeof t->err_code, "%s", code ? code : "");
    snprintf(t->err, sizeof t->err, "%s", msg ? msg : "");
    int64_t ms = tk_mono_ms() - t->t0_mono;
    tk_metrics_add(app_observe_turns_finished, 1, state);
    tk_metrics_observe(app_observe_turn_seconds, (double)ms / 1000.0, state);
    agent_span_attrs(t->root,
                     tk_json_obj("state", json_string(state), "steps", json_integer(t->steps),
                                 "tool_calls", json_integer(t->tool_calls), "input_tokens",
                                 json_integer(t->in_tokens), "output_tokens",
                                 json_integer(t->out_tokens), NULL));
    if (code && *code)
        agent_span_attrs(t->root, tk_json_obj("error_code", json_string(code), "error",
                                              json_string(msg ? msg : ""), NULL));
    agent_span_end(t->root, strcmp(state, "done") == 0        ? "ok"
                            : strcmp(state, "cancelled") == 0 ? "cancelled"
                                                              : "error");
    json_t *ev = tk_json_obj("state", json_string(state), "steps", json_integer(t->steps),
                             "tool_calls", json_integer(t->tool_calls), "input_tokens",
                             json_integer(t->in_tokens), "output_tokens",
                             json_integer(t->out_tokens), "duration_ms", json_integer(ms), NULL);
    if (code && *code) {
        json_object_set_new(ev, "error_code", json_string(code));
        json_object_set_new(ev, "error", json_string(msg ? msg : ""));
    }
    t->end_ev = ev;
    tk_info("turn", "msg=\"turn ended\" turn=%s state=%s steps=%d tools=%d ms=%lld code=%s", t->id,
            state, t->steps, t->tool_calls, (long long)ms, code && *code ? code : "-");
    if (tk_workpool_submit_then(env->db_pool, env->loop, finish_work, finish_then, t) != TK_OK) {
        finish_work(t); /* the pool is stopping: do it here */
        finish_then(t);
    }
}

static void run_done(void *ud, agent_run *run)
{
    turn *t = ud;
    t->steps = agent_run_steps(run);
    t->tool_calls = agent_run_tool_calls(run);
    t->in_tokens = agent_run_input_tokens(run);
    t->out_tokens = agent_run_output_tokens(run);
    turn_end(t, agent_run_state(run), agent_run_error_code(run), agent_run_error(run));
}

/* ---------------------------------------------------------------- start */

/* A message starting with "/name args" for an enabled skill: the skill is
 * activated before the model runs, as if the model had called activate_skill
 * (the call and its result stored after the user's message, so later turns
 * keep them too), with $ARGUMENTS replaced by args. Blocking. */
static void invoke_skill(PGconn *c, turn *t, const skills_skill *sk, const char *args)
{
    char call_id[64];
    snprintf(call_id, sizeof call_id, "skill_%s", t->id);
    json_t *argv = tk_json_obj("name", json_string(sk->name), "arguments", json_string(args), NULL);
    char *argv_s = tk_json_dumps(argv);
    json_decref(argv);
    json_t *calls = json_array();
    json_array_append_new(calls, tk_json_obj("id", json_string(call_id), "name",
                                             json_string("activate_skill"), "arguments",
                                             json_string(argv_s), NULL));
    char *content = skills_activation(sk, args);
    char *calls_s = tk_json_dumps(calls);
    char id1[TK_UUID_LEN], id2[TK_UUID_LEN];
    tk_uuid7(id1);
    tk_uuid7(id2);
    const char *p1[] = {id1,     t->session_id, "assistant", "",      t->id,   "0",
                        calls_s, NULL,          NULL,        "false", "false", "[]"};
    const char *p2[] = {id2,  t->session_id, "tool",           content, t->id,   "0",
                        NULL, call_id,       "activate_skill", "false", "false", "[]"};
    const char *sql = "SELECT tusko_message_add($1, $2, $3, $4, $5, $6::int, $7::jsonb, $8, $9, "
                      "$10::boolean, $11::boolean, $12::jsonb)";
    if (tk_pg_exec(c, sql, 12, p1) != TK_OK || tk_pg_exec(c, sql, 12, p2) != TK_OK)
        tk_warn("turn", "msg=\"the skill invoked was not stored\" turn=%s skill=%s", t->id,
                sk->name);
    free(calls_s);
    json_array_append_new(t->history, tk_json_obj("role", json_string("assistant"), "content",
                                                  json_string(""), "tool_calls", calls, NULL));
    json_array_append_new(t->history,
                          tk_json_obj("role", json_string("tool"), "tool_call_id",
                                      json_string(call_id), "content", json_string(content), NULL));
    free(content);
    free(argv_s);
    snprintf(t->invoked, sizeof t->invoked, "%s", sk->name);
    snprintf(t->invoked_digest, sizeof t->invoked_digest, "%s", sk->digest);
    t->invoked_version = sk->version;
    t->invoked_ms = tk_now_ms();
}

/* With no skill enabled the skill tools are not offered: every other tool is. */
static const char **tools_without_skills(void)
{
    size_t n = agent_tools_count(), k = 0;
    const char **allow = tk_calloc(n + 1, sizeof *allow);
    for (size_t i = 0; i < n; i++)
        if (!agent_tools_at(i)->needs_skills)
            allow[k++] = agent_tools_at(i)->name;
    return allow;
}

static void prepare_work(void *ud)
{
    turn *t = ud;
    PGconn *c = app_db_acquire();
    if (!c) {
        t->prepare_failed = 1;
        return;
    }
    /* running now, and the conversation: one round trip */
    char lim[16];
    snprintf(lim, sizeof lim, "%d", AGENT_HISTORY_MAX);
    const char *p[] = {t->id, t->session_id, lim};
    PGresult *r =
        tk_pg_query(c, "SELECT started, history FROM tusko_turn_start($1, $2, $3::int)", 3, p);
    if (!tk_pg_ok(r) || PQntuples(r) != 1) {
        t->prepare_failed = 1;
    } else if (strcmp(PQgetvalue(r, 0, 0), "t") != 0) {
        t->skip = 1;
    } else {
        t->history = json_loads(PQgetvalue(r, 0, 1), 0, NULL);
        if (!t->history)
            t->prepare_failed = 1;
    }
    PQclear(r);
    /* what the system prompt needs (a failure only costs its part) */
    if (!t->skip && !t->prepare_failed) {
        agent_prompt_gather(c, t->user_id, t->session_id, t->content, &t->prompt);
        const char *args = NULL;
        const skills_skill *sk = skills_invocation(t->prompt.skills.set, t->content, &args);
        if (sk)
            invoke_skill(c, t, sk, args);
        if (t->prompt.skills.set->n == 0)
            t->allow = tools_without_skills();
    }
    app_db_release(c);
}

static void prepare_then(void *ud)
{
    turn *t = ud;
    if (t->skip) {
        turn_unlink(t);
        turn_free(t);
        return;
    }
    t->trace = agent_trace_new(t->id);
    t->root = agent_span_begin(t->trace, NULL, "turn", "turn");
    agent_span_attrs(t->root, tk_json_obj("model", json_string(t->model->id), "session_id",
                                          json_string(t->session_id), NULL));
    agent_event_emit(t->session_id, t->id, "turn_start",
                     tk_json_obj("model", json_string(t->model->id), "message_id",
                                 json_string(t->message_id), "content",
                                 json_string(t->content ? t->content : ""), NULL));
    if (t->prepare_failed) {
        agent_event_emit(t->session_id, t->id, "error",
                         tk_json_obj("code", json_string("DB_UNAVAILABLE"), "message",
                                     json_string("the conversation could not be loaded"), NULL));
        turn_end(t, "failed", "DB_UNAVAILABLE", "the conversation could not be loaded");
        return;
    }
    if (t->cancel_requested) {
        turn_end(t, "cancelled", t->cancel_code, t->cancel_msg);
        return;
    }
    const app_settings *s = app_get()->cfg;
    if (t->invoked[0])
        agent_span_record(
            t->trace, agent_span_id(t->root), "skill", t->invoked, t->invoked_ms, 0, "ok",
            tk_json_obj("skill", json_string(t->invoked), "version",
                        json_integer(t->invoked_version), "digest", json_string(t->invoked_digest),
                        "invoked_by", json_string("user"), NULL));
    char *system = agent_prompt_build(&t->prompt, t->trace, agent_span_id(t->root));
    agent_run_cfg cfg = {.env = env,
                         .session_id = t->session_id,
                         .user_id = t->user_id,
                         .turn_id = t->id,
                         .model = t->model,
                         .system = system,
                         .messages = t->history,
                         .tools = t->allow,
                         .max_steps = (int)s->step_budget,
                         .deadline_mono_ms = t->t0_mono + s->turn_timeout_ms,
                         .trace = t->trace,
                         .parent_span = agent_span_id(t->root),
                         .persist = 1,
                         .on_done = run_done,
                         .ud = t};
    t->history = NULL; /* owned by the run */
    t->run = agent_run_start(&cfg);
    free(system); /* the run keeps its own copy */
}

struct start_msg {
    turn *t;
};

static void start_on_loop(void *ud)
{
    turn *t = ud;
    t->t0_mono = tk_mono_ms();
    tk_metrics_add(app_observe_turns_started, 1);
    t->next = active;
    active = t;
    nactive++;
    if (tk_workpool_submit_then(env->db_pool, env->loop, prepare_work, prepare_then, t) != TK_OK) {
        t->prepare_failed = 1;
        prepare_then(t);
    }
}

/* ---------------------------------------------------------------- cancel */

struct cancel_msg {
    char turn_id[TK_UUID_LEN];
    char session_id[TK_UUID_LEN];
    char code[32];
    char msg[200];
};

static void cancel_on_loop(void *ud)
{
    struct cancel_msg *m = ud;
    for (turn *t = active; t; t = t->next) {
        if ((m->turn_id[0] && strcmp(t->id, m->turn_id) == 0) ||
            (m->session_id[0] && strcmp(t->session_id, m->session_id) == 0)) {
            if (t->run) {
                agent_run_cancel(t->run, m->code, m->msg);
            } else if (!t->cancel_requested) {
                t->cancel_requested = 1;
                snprintf(t->cancel_code, sizeof t->cancel_code, "%s", m->code);
                snprintf(t->cancel_msg, sizeof t->cancel_msg, "%s", m->msg);
            }
        }
    }
    free(m);
}

void agent_turn_cancel_local(const char *turn_id, const char *session_id, const char *code,
                             const char *msg)
{
    struct cancel_msg *m = tk_calloc(1, sizeof *m);
    snprintf(m->turn_id, sizeof m->turn_id, "%s", turn_id ? turn_id : "");
    snprintf(m->session_id, sizeof m->session_id, "%s", session_id ? session_id : "");
    snprintf(m->code, sizeof m->code, "%s", code);
    snprintf(m->msg, sizeof m->msg, "%s", msg);
    tk_evloop_post(env->loop, cancel_on_loop, m);
}

static void shutdown_on_loop(void *ud)
{
    for (turn *t = active; t; t = t->next) {
        if (t->run)
            agent_run_cancel(t->run, "SHUTDOWN", "the server is shutting down");
        else if (!t->cancel_requested) {
            t->cancel_requested = 1;
            snprintf(t->cancel_code, sizeof t->cancel_code, "SHUTDOWN");
            snprintf(t->cancel_msg, sizeof t->cancel_msg, "the server is shutting down");
        }
    }
}

void agent_turns_cancel_all(void)
{
    tk_evloop_post(env->loop, shutdown_on_loop, NULL);
}

/* The cross-instance cancel: NOTIFY tusko_cancel '<turn id>'. */
void agent_turn_on_cancel_notify(const char *channel, const char *payload, void *ud)
{
    if (tk_uuid_valid(payload))
        agent_turn_cancel_local(payload, NULL, "CANCELLED", "cancelled by the user");
}

/* ---------------------------------------------------------------- routes */

tk_status agent_turn_submit(const char *user_id, const char *session_id, const char *content,
                            const app_model *model, agent_submit *out)
{
    memset(out, 0, sizeof *out);
    if (!session_id || !tk_uuid_valid(session_id))
        return TK_ENOENT;
    if (!model && !app_models_default())
        return TK_EINVAL;
    /* the allowlist as a Postgres array: the chat's own model is used only if
     * it is still allowed, else the default */
    tk_buf allowed;
    tk_buf_init(&allowed, 1 << 20);
    tk_buf_append_byte(&allowed, '{');
    for (size_t i = 0; i < app_models_count(); i++) {
        tk_buf_printf(&allowed, "%s\"", i ? "," : "");
        for (const char *q = app_models_at(i)->id; *q; q++) {
            if (*q == '"' || *q == '\\')
                tk_buf_append_byte(&allowed, '\\');
            tk_buf_append_byte(&allowed, *q);
        }
        tk_buf_append_byte(&allowed, '"');
    }
    tk_buf_append_byte(&allowed, '}');
    turn *t = tk_calloc(1, sizeof *t);
    tk_uuid7(t->id);
    tk_uuid7(t->message_id);
    snprintf(t->session_id, sizeof t->session_id, "%s", session_id);
    snprintf(t->user_id, sizeof t->user_id, "%s", user_id);
    t->content = tk_strdup(content);
    PGconn *c = app_db_acquire();
    if (!c) {
        tk_buf_free(&allowed);
        turn_free(t);
        return TK_ERROR;
    }
    /* one round trip: the rate limit, the ownership check, the model, the user
     * message and the queued turn (tusko_turn_create) */
    char rkey[96], rmax[24], rwin[24], amax[24];
    snprintf(rkey, sizeof rkey, APP_CHAT_RATE_KEY "%s", user_id);
    snprintf(amax, sizeof amax, "%lld", (long long)app_get()->cfg->user_max_active_turns);
    snprintf(rmax, sizeof rmax, "%lld", (long long)app_get()->cfg->chat_rate_limit_max);
    snprintf(rwin, sizeof rwin, "%d milliseconds", APP_CHAT_WINDOW_MS);
    const char *p[] = {t->message_id,
                       session_id,
                       user_id,
                       content,
                       t->id,
                       model ? model->id : NULL,
                       tk_buf_cstr(&allowed),
                       app_models_default()->id,
                       agent_bus_instance_id(),
                       rkey,
                       rmax,
                       rwin,
                       amax};
    PGresult *res = tk_pg_query(c,
                                "SELECT outcome, model, busy_turn, retry_after_ms FROM "
                                "tusko_turn_create($1, $2, $3, $4, $5, $6, $7::text[], $8, $9, "
                                "$10, $11::int, $12::interval, $13::int)",
                                13, p);
    tk_buf_free(&allowed);
    tk_status st = TK_ERROR;
    if (tk_pg_ok(res) && PQntuples(res) == 1) {
        const char *outcome = PQgetvalue(res, 0, 0);
        if (strcmp(outcome, "rate_limited") == 0) {
            tk_metrics_add(app_observe_refusals, 1, "rate_limit");
            int64_t ms = 1000;
            tk_parse_i64(PQgetvalue(res, 0, 3), 0, INT64_MAX, &ms);
            out->retry_after_s = (int)((ms + 999) / 1000);
            if (out->retry_after_s < 1)
                out->retry_after_s = 1;
            st = TK_EDENIED;
        } else if (strcmp(outcome, "too_many_turns") == 0) {
            tk_metrics_add(app_observe_refusals, 1, "too_many_turns");
            out->active_max = (int)app_get()->cfg->user_max_active_turns;
            snprintf(out->busy_turn, sizeof out->busy_turn, "%s", PQgetvalue(res, 0, 2));
            st = TK_EDENIED;
        } else if (strcmp(outcome, "ok") == 0) {
            t->model = app_models_find(PQgetvalue(res, 0, 1));
            st = t->model ? TK_OK : TK_ERROR;
        } else if (strcmp(outcome, "busy") == 0) {
            snprintf(out->busy_turn, sizeof out->busy_turn, "%s", PQgetvalue(res, 0, 2));
            st = TK_AGAIN;
        } else {
            st = TK_ENOENT;
        }
    } else if (strcmp(tk_pg_sqlstate(res), "23505") == 0) {
        st = TK_AGAIN; /* a concurrent second turn met the unique index */
    }
    PQclear(res);
    app_db_release(c);
    if (st != TK_OK) {
        turn_free(t);
        if (st == TK_EDENIED && out->active_max)
            tk_info("ratelimit", "msg=\"user at USER_MAX_ACTIVE_TURNS\" user=%s max=%d", user_id,
                    out->active_max);
        else if (st == TK_EDENIED)
            tk_info("ratelimit", "msg=\"chat rate limit reached\" user=%s retry_after_s=%d",
                    user_id, out->retry_after_s);
        return st;
    }
    snprintf(out->turn_id, sizeof out->turn_id, "%s", t->id);
    snprintf(out->message_id, sizeof out->message_id, "%s", t->message_id);
    out->model = t->model;
    tk_evloop_post(env->loop, start_on_loop, t);
    return TK_OK;
}

static void h_post_message(tk_req *r, void *ud)
{
    const app_user *u = app_req_user(r);
    json_t *body = tk_req_json(r, 0);
    if (!body)
        return;
    if (!json_is_object(body)) {
        tk_respond_error(r, 400, "INVALID_REQUEST", "the body must be a JSON object");
        return;
    }
    json_t *jc = json_object_get(body, "content");
    if (!json_is_string(jc)) {
        tk_respond_error(r, 400, "INVALID_REQUEST", "\"content\" (a string) is required");
        return;
    }
    const char *content = json_string_value(jc);
    size_t clen = json_string_length(jc);
    long chars = tk_utf8_count(content, clen);
    if (chars < 1 || chars > CONTENT_MAX_CHARS || memchr(content, 0, clen)) {
        tk_respond_error(r, 400, "INVALID_REQUEST", "\"content\" must be 1 to %d characters",
                         CONTENT_MAX_CHARS);
        return;
    }
    json_t *jm = json_object_get(body, "model");
    if (jm && !json_is_null(jm) && !json_is_string(jm)) {
        tk_respond_error(r, 400, "MODEL_NOT_ALLOWED", "\"model\" must be one of GET /api/models");
        return;
    }
    /* the allowlist: a named model outside it reaches no provider. The chat
     * rate limit (shared by every instance) comes first: taken here for a
     * refused model, else in the same round trip as the turn. */
    const app_model *model = NULL;
    if (jm && json_is_string(jm)) {
        model = json_string_length(jm) ? app_models_find(json_string_value(jm)) : NULL;
        if (!model) {
            int retry = 0;
            tk_status st = app_ratelimit_take(u->id, &retry);
            if (st == TK_EDENIED) {
                app_ratelimit_respond(r, retry);
                return;
            }
            if (st != TK_OK) {
                app_respond_db_unavailable(r);
                return;
            }
            tk_respond_error(r, 400, "MODEL_NOT_ALLOWED",
                             "the model \"%s\" is not allowed here (see GET /api/models)",
                             json_string_value(jm));
            return;
        }
    }
    agent_submit sub;
    tk_status st = agent_turn_submit(u->id, tk_req_param(r, "id"), content, model, &sub);
    switch (st) {
    case TK_OK:
        break;
    case TK_EDENIED:
        if (sub.active_max) {
            char msg[200];
            snprintf(msg, sizeof msg,
                     "your chats are already answering %d messages at once "
                     "(USER_MAX_ACTIVE_TURNS); wait for one to end or cancel it",
                     sub.active_max);
            tk_respond_header(r, "Retry-After", "5");
            tk_respond_json(r, 429,
                            tk_json_obj("code", json_string("TOO_MANY_ACTIVE_TURNS"), "message",
                                        json_string(msg), "turn_id",
                                        sub.busy_turn[0] ? json_string(sub.busy_turn) : json_null(),
                                        NULL));
            return;
        }
        app_ratelimit_respond(r, sub.retry_after_s);
        return;
    case TK_ENOENT:
        tk_respond_error(r, 404, "NOT_FOUND", "no such chat session");
        return;
    case TK_AGAIN:
        tk_respond_json(r, 409,
                        tk_json_obj("code", json_string("TURN_IN_PROGRESS"), "message",
                                    json_string("this chat is still answering; wait for the turn "
                                                "to end or cancel it"),
                                    "turn_id",
                                    sub.busy_turn[0] ? json_string(sub.busy_turn) : json_null(),
                                    NULL));
        return;
    case TK_EINVAL:
        tk_respond_error(r, 503, "NO_MODELS",
                         "no model is allowed on this server (TUSKO_MODELS is empty)");
        return;
    default:
        app_respond_db_unavailable(r);
        return;
    }
    char loc[96];
    snprintf(loc, sizeof loc, "/api/turns/%s/trace", sub.turn_id);
    tk_respond_header(r, "Location", loc);
    tk_respond_json(r, 202,
                    tk_json_obj("turn_id", json_string(sub.turn_id), "message_id",
                                json_string(sub.message_id), "session_id",
                                json_string(tk_req_param(r, "id")), "model",
                                json_string(sub.model->id), "state", json_string("queued"), NULL));
}

static void h_cancel(tk_req *r, void *ud)
{
    PGconn *c = app_db_acquire();
    if (!c) {
        app_respond_db_unavailable(r);
        return;
    }
    const char *sid = app_req_session(r, c);
    if (!sid) {
        app_db_release(c);
        return;
    }
    const char *p[] = {sid};
    PGresult *res = tk_pg_query(c,
                                "SELECT id, instance_id FROM turns WHERE session_id = $1 AND state "
                                "IN ('queued', 'running')",
                                1, p);
    if (!tk_pg_ok(res)) {
        PQclear(res);
        app_db_release(c);
        app_respond_db_unavailable(r);
        return;
    }
    if (PQntuples(res) == 0) {
        PQclear(res);
        app_db_release(c);
        tk_respond_json(r, 200,
                        tk_json_obj("cancelled", json_false(), "turn_id", json_null(), "message",
                                    json_string("no turn is running"), NULL));
        return;
    }
    char tid[TK_UUID_LEN], inst[TK_UUID_LEN];
    snprintf(tid, sizeof tid, "%s", PQgetvalue(res, 0, 0));
    snprintf(inst, sizeof inst, "%s", PQgetvalue(res, 0, 1));
    PQclear(res);
    if (strcmp(inst, agent_bus_instance_id()) == 0) {
        agent_turn_cancel_local(tid, NULL, "CANCELLED", "cancelled by the user");
    } else {
        const char *q[] = {tid};
        tk_pg_exec(c, "SELECT pg_notify('tusko_cancel', $1)", 1, q);
    }
    app_db_release(c);
    tk_respond_json(r, 202,
                    tk_json_obj("cancelled", json_true(), "turn_id", json_string(tid), NULL));
}

const tk_route agent_turn_routes[] = {
    {"POST", "/api/sessions/{id}/messages", h_post_message, NULL, TK_ROUTE_BLOCKING, 1 << 20},
    {"POST", "/api/sessions/{id}/cancel", h_cancel, NULL, TK_ROUTE_BLOCKING},
};
const size_t agent_turn_nroutes = TK_ARRAY_LEN(agent_turn_routes);

/* ---------------------------------------------------------------- recovery */

/* Two events of a recovered turn, stored on c (the LISTEN connection) inside
 * the caller's transaction, with a NOTIFY for the other instances: their seqs
 * and data, which the caller gives this instance's listeners once committed. */
struct direct_events {
    int64_t seq[2];
    const char *type[2];
    char *data[2];
};

static tk_status append_events_direct(PGconn *c, const char *sid, const char *tid, const char *t1,
                                      json_t *d1, const char *t2, json_t *d2,
                                      struct direct_events *out)
{
    char at[40];
    tk_time_rfc3339(tk_now_ms(), at, sizeof at);
    json_t *ds[2] = {d1, d2};
    const char *ts[2] = {t1, t2};
    memset(out, 0, sizeof *out);
    for (int i = 0; i < 2; i++) {
        json_object_set_new(ds[i], "type", json_string(ts[i]));
        json_object_set_new(ds[i], "turn_id", json_string(tid));
        json_object_set_new(ds[i], "at", json_string(at));
        out->data[i] = tk_json_dumps(ds[i]);
        out->type[i] = ts[i];
        json_decref(ds[i]);
    }
    json_t *sids = json_pack("[s,s]", sid, sid), *tids = json_pack("[s,s]", tid, tid),
           *types = json_pack("[s,s]", t1, t2),
           *datas = json_pack("[s,s]", out->data[0], out->data[1]);
    char *a = tk_json_dumps(sids), *b = tk_json_dumps(tids), *cc = tk_json_dumps(types),
         *d = tk_json_dumps(datas);
    const char *p[] = {a, b, cc, d};
    PGresult *r = tk_pg_query(c,
                              "SELECT seq FROM tusko_events_append("
                              "ARRAY(SELECT jsonb_array_elements_text($1::jsonb))::uuid[], "
                              "ARRAY(SELECT jsonb_array_elements_text($2::jsonb))::uuid[], "
                              "ARRAY(SELECT jsonb_array_elements_text($3::jsonb)), "
                              "ARRAY(SELECT jsonb_array_elements_text($4::jsonb))) ORDER BY ord",
                              4, p);
    tk_status st = TK_ERROR;
    if (tk_pg_ok(r) && PQntuples(r) == 2 &&
        tk_parse_i64(PQgetvalue(r, 0, 0), 1, INT64_MAX, &out->seq[0]) == TK_OK &&
        tk_parse_i64(PQgetvalue(r, 1, 0), 1, INT64_MAX, &out->seq[1]) == TK_OK) {
        /* the other instances fetch them (this one's own NOTIFY is skipped) */
        char payload[128];
        snprintf(payload, sizeof payload, "%s|%s:%s", agent_bus_instance_id(), sid,
                 PQgetvalue(r, 1, 0));
        const char *q[] = {payload};
        st = tk_pg_exec(c, "SELECT pg_notify('tusko_events', $1)", 1, q);
    }
    PQclear(r);
    free(a);
    free(b);
    free(cc);
    free(d);
    json_decref(sids);
    json_decref(tids);
    json_decref(types);
    json_decref(datas);
    return st;
}

static void recover_turn(PGconn *c, const char *tid, const char *sid)
{
    const char *p[] = {tid};
    if (tk_pg_exec(c, "BEGIN", 0, NULL) != TK_OK)
        return;
    PGresult *r = tk_pg_query(c,
                              "SELECT state FROM turns WHERE id = $1 AND state IN ('queued', "
                              "'running') FOR UPDATE",
                              1, p);
    int live = tk_pg_ok(r) && PQntuples(r) == 1;
    PQclear(r);
    if (!live) {
        tk_pg_exec(c, "ROLLBACK", 0, NULL);
        return;
    }
    /* keep what was streamed after the last stored answer */
    const char *ps[] = {tid, sid};
    r = tk_pg_query(
        c,
        "WITH last AS (SELECT coalesce(max(step), 0) AS s FROM messages WHERE turn_id = $1 AND "
        "role = 'assistant'), ev AS (SELECT seq, data::jsonb AS d FROM events WHERE session_id = "
        "$2 AND turn_id = $1 AND type = 'text'), txt AS (SELECT (d->>'step')::int AS step, "
        "string_agg(d->>'delta', "
        "'' ORDER BY seq) AS t FROM ev, last WHERE (d->>'step')::int > last.s AND NOT d ? "
        "'subagent_id' GROUP BY 1 ORDER "
        "BY 1 DESC LIMIT 1) SELECT step, t FROM txt",
        2, ps);
    if (tk_pg_ok(r) && PQntuples(r) == 1 && PQgetlength(r, 0, 1) > 0) {
        char id[TK_UUID_LEN];
        tk_uuid7(id);
        const char *q[] = {id, sid, PQgetvalue(r, 0, 1), tid, PQgetvalue(r, 0, 0)};
        tk_pg_exec(c,
                   "INSERT INTO messages (id, session_id, role, content, turn_id, step, partial) "
                   "VALUES ($1, $2, 'assistant', $3, $4, $5::int, true)",
                   5, q);
    }
    PQclear(r);
    const char *msg = "the server stopped during this turn; what was streamed before is kept";
    const char *u[] = {tid, msg};
    tk_pg_exec(c,
               "UPDATE turns SET state = 'failed', error_code = 'INTERRUPTED', error = $2, "
               "finished_at = now() WHERE id = $1",
               2, u);
    struct direct_events ev;
    tk_status st = append_events_direct(
        c, sid, tid, "error",
        tk_json_obj("code", json_string("INTERRUPTED"), "message", json_string(msg), NULL),
        "turn_end",
        tk_json_obj("state", json_string("failed"), "error_code", json_string("INTERRUPTED"),
                    "error", json_string(msg), NULL),
        &ev);
    if (st == TK_OK)
        st = tk_pg_exec(c, "COMMIT", 0, NULL);
    else
        tk_pg_exec(c, "ROLLBACK", 0, NULL);
    if (st == TK_OK) {
        /* this instance's listeners get them now, through the hub like every
         * stored event (its own NOTIFY is not for it): before the chat, free
         * from this commit on, can stream anything of its next turn, which
         * they would otherwise receive first and then skip these as old */
        for (int i = 0; i < 2; i++)
            agent_hub_publish(sid, ev.seq[i], ev.type[i], ev.data[i], strlen(ev.data[i]));
        tk_warn("turn", "msg=\"interrupted turn marked failed\" turn=%s session=%s", tid, sid);
    }
    free(ev.data[0]);
    free(ev.data[1]);
}

/* Every ~10 s on the LISTEN connection: turns left queued or running by an
 * instance that no longer holds its advisory lock (it died) are failed. */
void agent_turns_recover(PGconn *c, void *ud)
{
    const char *me[] = {agent_bus_instance_id()};
    PGresult *r = tk_pg_query(c,
                              "SELECT DISTINCT instance_id FROM turns WHERE state IN ('queued', "
                              "'running') AND instance_id <> $1",
                              1, me);
    if (!tk_pg_ok(r)) {
        PQclear(r);
        return;
    }
    for (int i = 0; i < PQntuples(r); i++) {
        const char *inst = PQgetvalue(r, i, 0);
        const char *p[] = {inst};
        PGresult *l =
            tk_pg_query(c, "SELECT pg_try_advisory_lock(" AGENT_BUS_INSTANCE_LOCK_SQL ")", 1, p);
        int dead = tk_pg_ok(l) && strcmp(PQgetvalue(l, 0, 0), "t") == 0;
        PQclear(l);
        if (!dead)
            continue;
        PGresult *t = tk_pg_query(c,
                                  "SELECT id, session_id FROM turns WHERE instance_id = $1 AND "
                                  "state IN ('queued', 'running')",
                                  1, p);
        for (int k = 0; tk_pg_ok(t) && k < PQntuples(t); k++)
            recover_turn(c, PQgetvalue(t, k, 0), PQgetvalue(t, k, 1));
        PQclear(t);
        PGresult *u =
            tk_pg_query(c, "SELECT pg_advisory_unlock(" AGENT_BUS_INSTANCE_LOCK_SQL ")", 1, p);
        PQclear(u);
    }
    PQclear(r);
}
