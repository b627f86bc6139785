/*
 * The built-in tools of this issue.
 *
 *   fast lane     plan_task, list_files, preview
 *   sandbox lane  write_file, read_file, execute_command, execute_code
 *
 * Writes and executions get their sandbox from getOrCreateOpenSandbox (and
 * report a spawn: a sandbox_spawn event and span with the attributes of the
 * trace); reads (list_files, preview, read_file) from getExistingOpenSandbox,
 * so they never start a container.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/agent/agent.h"
#include "app/agent/files.h"
#include "app/agent/workspace.h"
#include "app/app.h"
#include "app/sandbox/sandbox.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/tktime.h"

/* ---------------------------------------------------------------- plan_task */

#define PLAN_MIN 3
#define PLAN_MAX 5

static const char *const STATUSES[] = {"pending", "in_progress", "done", "skipped", "blocked"};

static int valid_status(const char *s)
{
    for (size_t i = 0; i < TK_ARRAY_LEN(STATUSES); i++)
        if (strcmp(s, STATUSES[i]) == 0)
            return 1;
    return 0;
}

static json_t *plan_load(PGconn *c, const char *sid)
{
    const char *p[] = {sid};
    PGresult *r = tk_pg_query(c, "SELECT plan::text FROM plans WHERE session_id = $1", 1, p);
    json_t *j = NULL;
    if (tk_pg_ok(r) && PQntuples(r) == 1)
        j = json_loads(PQgetvalue(r, 0, 0), 0, NULL);
    PQclear(r);
    return j;
}

static tk_status plan_save(PGconn *c, const char *sid, const json_t *plan)
{
    char *s = tk_json_dumps(plan);
    const char *p[] = {sid, s};
    tk_status st = tk_pg_exec(c,
                              "INSERT INTO plans (session_id, plan) VALUES ($1, $2::jsonb) ON "
                              "CONFLICT (session_id) DO UPDATE SET plan = excluded.plan, "
                              "updated_at = now()",
                              2, p);
    free(s);
    return st;
}

static void plan_text(const json_t *plan, tk_buf *b)
{
    tk_buf_printf(b, "Plan: %s\n", tk_json_str_or(plan, "goal", ""));
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(plan, "milestones"), i, m)
    {
        tk_buf_printf(b, "%zu. [%s] %s\n", i + 1, tk_json_str_or(m, "status", "pending"),
                      tk_json_str_or(m, "title", ""));
    }
}

static void run_plan_task(agent_call *call, const json_t *args, agent_result *out)
{
    const char *goal = tk_json_str(args, "goal");
    json_t *ms = json_object_get(args, "milestones");
    json_t *upd = json_object_get(args, "update");
    if (!goal && !upd) {
        agent_result_error(out, "give \"goal\" and 3-5 \"milestones\" to make a plan, or "
                                "\"update\" to change milestone statuses");
        return;
    }
    PGconn *c = app_db_acquire();
    if (!c) {
        agent_result_error(out, "the plan could not be stored (no database)");
        return;
    }
    json_t *plan = NULL;
    const char *event = "plan";
    if (goal) {
        size_t n = json_array_size(ms);
        if (!json_is_array(ms) || n < PLAN_MIN || n > PLAN_MAX) {
            agent_result_error(out, "a plan needs %d to %d milestones (got %zu)", PLAN_MIN,
                               PLAN_MAX, n);
            goto out;
        }
        json_t *list = json_array();
        size_t i;
        json_t *m;
        json_array_foreach(ms, i, m)
        {
            const char *title = json_is_string(m) ? json_string_value(m) : tk_json_str(m, "title");
            if (!title || !*title) {
                json_decref(list);
                agent_result_error(out, "milestone %zu has no title", i + 1);
                goto out;
            }
            /* work starts on the first milestone as soon as the plan is made */
            json_array_append_new(list, tk_json_obj("index", json_integer((json_int_t)i + 1),
                                                    "title", json_string(title), "status",
                                                    json_string(i == 0 ? "in_progress" : "pending"),
                                                    NULL));
        }
        plan = tk_json_obj("goal", json_string(goal), "milestones", list, "turn_id",
                           json_string(agent_call_turn(call)), NULL);
    } else {
        event = "plan_update";
        plan = plan_load(c, agent_call_session(call));
        if (!plan) {
            agent_result_error(out, "there is no plan to update yet: make one with \"goal\" and "
                                    "\"milestones\"");
            goto out;
        }
        json_t *list = json_object_get(plan, "milestones");
        json_t *items = json_is_array(upd) ? json_incref(upd) : json_pack("[O]", upd);
        size_t i;
        json_t *u;
        json_array_foreach(items, i, u)
        {
            int64_t idx = tk_json_int_or(u, "milestone", 0);
            const char *status = tk_json_str_or(u, "status", "");
            if (idx < 1 || (size_t)idx > json_array_size(list) || !valid_status(status)) {
                json_decref(items);
                agent_result_error(out,
                                   "each update needs \"milestone\" (1-%zu) and \"status\" "
                                   "(pending, in_progress, done, skipped, blocked)",
                                   json_array_size(list));
                goto out;
            }
            json_t *m = json_array_get(list, (size_t)idx - 1);
            json_object_set_new(m, "status", json_string(status));
            const char *note = tk_json_str(u, "note");
            if (note)
                json_object_set_new(m, "note", json_string(note));
        }
        json_decref(items);
        /* the next pending milestone starts when the current one is done */
        int in_progress = 0;
        json_t *m;
        json_array_foreach(list, i, m) in_progress |=
            strcmp(tk_json_str_or(m, "status", ""), "in_progress") == 0;
        if (!in_progress)
            json_array_foreach(list, i, m)
            {
                if (strcmp(tk_json_str_or(m, "status", ""), "pending") == 0) {
                    json_object_set_new(m, "status", json_string("in_progress"));
                    break;
                }
            }
    }
    if (plan_save(c, agent_call_session(call), plan) != TK_OK) {
        agent_result_error(out, "the plan could not be stored");
        goto out;
    }
    agent_call_emit(call, event,
                    tk_json_obj("goal", json_incref(json_object_get(plan, "goal")), "milestones",
                                json_deep_copy(json_object_get(plan, "milestones")), NULL));
    tk_buf b;
    tk_buf_init(&b, 1 << 20);
    plan_text(plan, &b);
    tk_buf_append_str(&b, goal ? "Work on milestone 1 now; mark milestones done with plan_task "
                                 "{\"update\": [{\"milestone\": N, \"status\": \"done\"}]}."
                               : "Plan updated.");
    agent_result_take(out, tk_buf_steal(&b, NULL), 0);
    out->data = json_deep_copy(plan);
out:
    json_decref(plan);
    app_db_release(c);
}

/* ---------------------------------------------------------------- reads */

static void run_list_files(agent_call *call, const json_t *args, agent_result *out)
{
    json_t *jp = json_object_get(args, "path");
    const char *path = json_is_string(jp) ? json_string_value(jp) : NULL;
    size_t plen = json_is_string(jp) ? json_string_length(jp) : 0;
    int depth = (int)tk_json_int_or(args, "depth", 1);
    json_t *res = NULL;
    char msg[512];
    tk_status st = agent_files_list(agent_call_user(call), agent_call_session(call), path, plen,
                                    depth, agent_call_cancel_flag(call), &res, msg, sizeof msg);
    if (st == TK_ENOENT) {
        agent_result_text(out, "%s", msg); /* not an error: an empty workspace */
        return;
    }
    if (st != TK_OK) {
        agent_result_error(out, "%s", msg);
        return;
    }
    tk_buf b;
    tk_buf_init(&b, 8u << 20);
    json_t *entries = json_object_get(res, "entries");
    tk_buf_printf(&b, "%s (%zu entries)\n", tk_json_str_or(res, "path", ""),
                  json_array_size(entries));
    size_t i;
    json_t *e;
    json_array_foreach(entries, i, e)
    {
        const char *type = tk_json_str_or(e, "type", "file");
        if (strcmp(type, "directory") == 0)
            tk_buf_printf(&b, "%s/\n", tk_json_str_or(e, "path", ""));
        else
            tk_buf_printf(&b, "%s  (%lld bytes)\n", tk_json_str_or(e, "path", ""),
                          (long long)tk_json_int_or(e, "size", 0));
    }
    agent_result_take(out, tk_buf_steal(&b, NULL), 0);
    out->data = res;
}

static void run_preview(agent_call *call, const json_t *args, agent_result *out)
{
    json_t *jp = json_object_get(args, "path");
    if (!json_is_string(jp)) {
        agent_result_error(out, "\"path\" is required");
        return;
    }
    long max = (long)tk_json_int_or(args, "max_chars", 4000);
    if (max < 1 || max > 20000)
        max = 4000;
    json_t *res = NULL;
    char msg[512];
    tk_status st = agent_files_preview(agent_call_user(call), agent_call_session(call),
                                       json_string_value(jp), json_string_length(jp), max,
                                       agent_call_cancel_flag(call), &res, msg, sizeof msg);
    if (st == TK_ENOENT && strncmp(msg, "nothing here yet", 16) == 0) {
        agent_result_text(out, "%s", msg);
        return;
    }
    if (st != TK_OK) {
        agent_result_error(out, "%s", msg);
        return;
    }
    const char *kind = tk_json_str_or(res, "kind", "binary");
    if (strcmp(kind, "text") == 0)
        agent_result_text(out, "%s (%lld bytes)%s:\n%s", tk_json_str_or(res, "path", ""),
                          (long long)tk_json_int_or(res, "size", 0),
                          json_is_true(json_object_get(res, "truncated")) ? ", start shown" : "",
                          tk_json_str_or(res, "text", ""));
    else
        agent_result_text(out, "%s: %s, %lld bytes (shown to the user as %s)",
                          tk_json_str_or(res, "path", ""), tk_json_str_or(res, "mime", ""),
                          (long long)tk_json_int_or(res, "size", 0), kind);
    out->data = res;
}

static void run_read_file(agent_call *call, const json_t *args, agent_result *out)
{
    json_t *jp = json_object_get(args, "path");
    if (!json_is_string(jp)) {
        agent_result_error(out, "\"path\" is required");
        return;
    }
    char p[AGENT_WS_PATH_MAX + 32], msg[512];
    if (agent_ws_path(json_string_value(jp), json_string_length(jp), p, sizeof p, msg,
                      sizeof msg) != TK_OK) {
        agent_result_error(out, "%s", msg);
        return;
    }
    sbx_session s = {.user_id = agent_call_user(call),
                     .session_id = agent_call_session(call),
                     .cancel = agent_call_cancel_flag(call)};
    sbx_handle h;
    tk_status st = getExistingOpenSandbox(&s, &h, msg, sizeof msg);
    if (st != TK_OK) {
        if (st == TK_ENOENT)
            agent_result_text(out, "%s", msg);
        else
            agent_result_error(out, "%s", msg);
        return;
    }
    size_t cap = (size_t)app_get()->cfg->tool_result_max * 4 + 1024;
    tk_buf data;
    tk_buf_init(&data, cap);
    int truncated = 0;
    st = sbx_read_head(&h, p, cap, &data, &truncated, msg, sizeof msg);
    if (st != TK_OK) {
        if (h.gone)
            agent_result_text(out, "nothing here yet: this chat's workspace is gone (the sandbox "
                                   "was reaped); the next write or command starts a fresh one");
        else
            agent_result_error(out, "%s", msg);
    } else if (data.len && memchr(data.data, 0, data.len)) {
        agent_result_text(out,
                          "%s is a binary file (%s); use preview or execute_code to inspect it", p,
                          agent_mime_of(p));
    } else {
        agent_result_text(out, "%s%s", data.data ? data.data : "",
                          truncated ? "\n[... the file is longer; only its start is shown]" : "");
    }
    tk_buf_free(&data);
    sbx_handle_free(&h);
}

/* ---------------------------------------------------------------- the sandbox */

/* Gets the chat's sandbox for a write/execute. Reports a spawn (event + span),
 * a gone workspace, or a quota refusal (a 429 error event and the result).
 * Returns 1 with *h ready, 0 with *out filled. */
static int acquire(agent_call *call, const char *trigger, sbx_handle *h, agent_result *out)
{
    sbx_session s = {.user_id = agent_call_user(call),
                     .session_id = agent_call_session(call),
                     .trigger = trigger,
                     .cancel = agent_call_cancel_flag(call)};
    sbx_quota q;
    char err[512];
    tk_status st = getOrCreateOpenSandbox(&s, h, &q, err, sizeof err);
    if (st == TK_EDENIED && q.max > 0) {
        agent_call_emit(call, "error",
                        tk_json_obj("code", json_string("SANDBOX_QUOTA"), "http_status",
                                    json_integer(429), "message", json_string(err), "live",
                                    json_integer(q.live), "max", json_integer(q.max), NULL));
        agent_call_set_attrs(call, tk_json_obj("quota_refused", json_true(), NULL));
        agent_result_error(out, "%s", err);
        return 0;
    }
    if (st != TK_OK) {
        agent_result_error(out, "%s", err);
        return 0;
    }
    if (!h->spawn.created)
        return 1;
    const app_settings *cfg = app_get()->cfg;
    char ttl[32], quota[64], idle[64];
    tk_format_duration(cfg->sandbox_idle_ttl_ms, ttl, sizeof ttl);
    snprintf(idle, sizeof idle, "%s, then reaped", ttl);
    snprintf(quota, sizeof quota, "%d of %d live per user", h->spawn.live, h->spawn.max);
    if (h->spawn.replaced) {
        char m[300];
        snprintf(m, sizeof m,
                 "this chat's previous workspace is gone (%s); a fresh sandbox was started, so "
                 "earlier files and state are not there",
                 h->spawn.gone_reason);
        agent_call_emit(call, "sandbox_gone",
                        tk_json_obj("reason", json_string(h->spawn.gone_reason), "message",
                                    json_string(m), NULL));
    }
    json_t *attrs = tk_json_obj(
        "tier", json_string("sandbox"), "trigger",
        json_string(h->spawn.replaced ? "the previous sandbox is gone; first write since"
                                      : trigger),
        "call", json_string("getOrCreateOpenSandbox"), "pool", json_string(h->spawn.pool), "quota",
        json_string(quota), "credentials", json_string("fail-closed, from env only"), "idle_ttl",
        json_string(idle), "sandbox_id", json_string(h->id), "remote_id", json_string(h->remote_id),
        "replaced", json_boolean(h->spawn.replaced), NULL);
    agent_span_record(agent_call_trace(call), agent_call_span_id(call), "sandbox_spawn", "sandbox",
                      h->spawn.started_ms, h->spawn.duration_ms, "ok", json_deep_copy(attrs));
    json_object_set_new(attrs, "duration_ms", json_real(h->spawn.duration_ms));
    agent_call_emit(call, "sandbox_spawn", attrs);
    return 1;
}

static const char *replaced_note(const sbx_handle *h)
{
    return h->spawn.replaced ? "Note: this chat's previous workspace was gone (reaped), so a "
                               "fresh sandbox was started; earlier files and state are not "
                               "there.\n"
                             : "";
}

static void run_write_file(agent_call *call, const json_t *args, agent_result *out)
{
    json_t *jp = json_object_get(args, "path");
    json_t *jc = json_object_get(args, "content");
    if (!json_is_string(jp) || !json_is_string(jc)) {
        agent_result_error(out, "\"path\" and \"content\" (strings) are required");
        return;
    }
    char p[AGENT_WS_PATH_MAX + 32], msg[512];
    if (agent_ws_path(json_string_value(jp), json_string_length(jp), p, sizeof p, msg,
                      sizeof msg) != TK_OK) {
        agent_result_error(out, "refused: %s", msg);
        return;
    }
    if (strcmp(p, AGENT_WS_ROOT) == 0) {
        agent_result_error(out, "refused: give a file path under %s", AGENT_WS_ROOT);
        return;
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        sbx_handle h;
        if (!acquire(call, "first write to /workspace this session", &h, out))
            return;
        tk_status st =
            sbx_write_file(&h, p, json_string_value(jc), json_string_length(jc), msg, sizeof msg);
        if (st == TK_OK) {
            agent_result_text(out, "%swrote %zu bytes to %s", replaced_note(&h),
                              json_string_length(jc), p);
            out->data = tk_json_obj("path", json_string(p), "size",
                                    json_integer((json_int_t)json_string_length(jc)), NULL);
            sbx_handle_free(&h);
            return;
        }
        int gone = h.gone;
        sbx_handle_free(&h);
        if (!gone || attempt == 1) {
            agent_result_error(out, "the write failed: %s", msg);
            return;
        }
        /* the sandbox went away under us: the next acquire makes a new one */
    }
}

struct out_ctx {
    agent_call *call;
};

static void on_output(void *ud, const char *stream, const char *text, size_t len)
{
    struct out_ctx *x = ud;
    agent_call_output(x->call, stream, text, len);
}

static void exec_result(agent_result *out, const sbx_handle *h, const sbx_exec_result *r,
                        int is_code)
{
    tk_buf b;
    tk_buf_init(&b, 64u << 20);
    tk_buf_append_str(&b, replaced_note(h));
    if (r->restarted)
        tk_buf_printf(&b, "Note: the %s had to be restarted; earlier %s state is gone.\n",
                      is_code ? "Python kernel" : "shell", is_code ? "Python" : "shell");
    if (r->timed_out)
        tk_buf_printf(&b, "timed out after %lld ms (TUSKO_COMMAND_TIMEOUT or the timeout given)\n",
                      (long long)r->duration_ms);
    else if (is_code)
        tk_buf_printf(&b, "%s\n", r->error[0] ? r->error : "ok");
    else
        tk_buf_printf(&b, "exit code %d\n", r->exit_code);
    tk_buf_append(&b, r->output.data ? r->output.data : "", r->output.len);
    if (r->truncated)
        tk_buf_append_str(&b, "\n[... output cut]");
    size_t i;
    json_t *res;
    json_array_foreach(r->results, i, res)
    {
        const char *k;
        json_t *v;
        json_object_foreach(res, k, v)
        {
            if (strcmp(k, "text/plain") != 0 && json_is_string(v))
                tk_buf_printf(&b, "\n[%s output, %zu bytes, shown to the user]", k,
                              json_string_length(v));
        }
    }
    int failed = r->timed_out || (is_code ? r->error[0] != 0 : r->exit_code != 0);
    agent_result_take(out, tk_buf_steal(&b, NULL), failed);
}

static long timeout_of(const json_t *args)
{
    long max = (long)app_get()->cfg->command_timeout_ms;
    int64_t t = tk_json_int_or(args, "timeout_s", 0);
    if (t > 0 && t * 1000 < max)
        return (long)t * 1000;
    return max;
}

static void run_exec(agent_call *call, const json_t *args, agent_result *out, int is_code)
{
    const char *key = is_code ? "code" : "command";
    json_t *jc = json_object_get(args, key);
    if (!json_is_string(jc) || json_string_length(jc) == 0) {
        agent_result_error(out, "\"%s\" is required", key);
        return;
    }
    if (memchr(json_string_value(jc), 0, json_string_length(jc))) {
        agent_result_error(out, "the %s contains a NUL byte", key);
        return;
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        sbx_handle h;
        if (!acquire(call, is_code ? "first code run this session" : "first command this session",
                     &h, out))
            return;
        sbx_exec_result r;
        sbx_exec_result_init(&r, (size_t)app_get()->cfg->tool_result_max * 4 + 4096);
        struct out_ctx x = {.call = call};
        tk_status st =
            is_code
                ? sbx_run_code(&h, json_string_value(jc), timeout_of(args), on_output, &x, &r)
                : sbx_run_command(&h, json_string_value(jc), timeout_of(args), on_output, &x, &r);
        agent_call_set_attrs(call, tk_json_obj("exit_code", json_integer(r.exit_code), "exec_ms",
                                               json_integer(r.duration_ms), NULL));
        if (st == TK_OK) {
            exec_result(out, &h, &r, is_code);
            if (r.results)
                out->data = tk_json_obj("results", json_incref(r.results), NULL);
        } else if (st == TK_ECLOSED) {
            agent_result_error(out, "stopped: the turn was cancelled (the %s was interrupted)",
                               is_code ? "code" : "command");
        } else if (h.gone && attempt == 0) {
            sbx_exec_result_free(&r);
            sbx_handle_free(&h);
            continue; /* reaped meanwhile: the next acquire makes a new one */
        } else {
            agent_result_error(out, "could not run it: %s", r.error);
        }
        sbx_exec_result_free(&r);
        sbx_handle_free(&h);
        return;
    }
}

static void run_execute_command(agent_call *call, const json_t *args, agent_result *out)
{
    run_exec(call, args, out, 0);
}

static void run_execute_code(agent_call *call, const json_t *args, agent_result *out)
{
    run_exec(call, args, out, 1);
}

/* ---------------------------------------------------------------- registry */

static const agent_tool tools[] = {
    {.name = "plan_task",
     .lane = AGENT_LANE_FAST,
     .order = -10,
     .description =
         "Make a plan before starting multi-step work: a named goal and 3 to 5 milestones, shown "
         "to the user at once. Later, update milestone statuses with {\"update\": [{\"milestone\": "
         "N, \"status\": \"done\"}]} (statuses: pending, in_progress, done, skipped, blocked).",
     .parameters =
         "{\"type\":\"object\",\"properties\":{\"goal\":{\"type\":\"string\"},\"milestones\":"
         "{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":3,\"maxItems\":5},"
         "\"update\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"
         "\"milestone\":{\"type\":\"integer\"},\"status\":{\"type\":\"string\",\"enum\":["
         "\"pending\",\"in_progress\",\"done\",\"skipped\",\"blocked\"]},\"note\":{\"type\":"
         "\"string\"}},\"required\":[\"milestone\",\"status\"]}}}}",
     .run = run_plan_task},
    {.name = "list_files",
     .lane = AGENT_LANE_FAST,
     .description = "List the files of this chat's workspace (/workspace). Never starts a "
                    "sandbox: with nothing written yet it says so.",
     .parameters = "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\","
                   "\"description\":\"a folder under /workspace (default /workspace)\"},"
                   "\"depth\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":5}}}",
     .run = run_list_files},
    {.name = "preview",
     .lane = AGENT_LANE_FAST,
     .description = "Show the user a preview of a file in the workspace (text, or a picture for "
                    "images); returns the start of a text file.",
     .parameters = "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
                   "\"max_chars\":{\"type\":\"integer\"}},\"required\":[\"path\"]}",
     .run = run_preview},
    {.name = "write_file",
     .lane = AGENT_LANE_SANDBOX,
     .changes_files = 1,
     .description = "Write a text file into the chat's workspace (/workspace; relative paths are "
                    "taken under it). Folders are created as needed.",
     .parameters = "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
                   "\"content\":{\"type\":\"string\"}},\"required\":[\"path\",\"content\"]}",
     .run = run_write_file},
    {.name = "read_file",
     .lane = AGENT_LANE_SANDBOX,
     .description = "Read a text file from the chat's workspace.",
     .parameters = "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}},"
                   "\"required\":[\"path\"]}",
     .run = run_read_file},
    {.name = "execute_command",
     .lane = AGENT_LANE_SANDBOX,
     .changes_files = 1,
     .description = "Run a shell command in the chat's sandbox, in a persistent bash session "
                    "that starts in /workspace: the working directory, exported variables and "
                    "files persist across calls and turns.",
     .parameters = "{\"type\":\"object\",\"properties\":{\"command\":{\"type\":\"string\"},"
                   "\"timeout_s\":{\"type\":\"integer\",\"minimum\":1}},\"required\":["
                   "\"command\"]}",
     .run = run_execute_command},
    {.name = "execute_code",
     .lane = AGENT_LANE_SANDBOX,
     .changes_files = 1,
     .description = "Run Python in the chat's persistent kernel (a Jupyter kernel in the "
                    "sandbox): variables, imports and pandas DataFrames persist across calls "
                    "and turns. The value of the last expression is returned; charts come back "
                    "as images.",
     .parameters = "{\"type\":\"object\",\"properties\":{\"code\":{\"type\":\"string\"},"
                   "\"timeout_s\":{\"type\":\"integer\",\"minimum\":1}},\"required\":[\"code\"]}",
     .run = run_execute_code},
};

void agent_builtin_tools_register(void)
{
    for (size_t i = 0; i < TK_ARRAY_LEN(tools); i++)
        agent_tools_register(&tools[i]);
}
