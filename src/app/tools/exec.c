/* execute_command and execute_code: a command in the chat's persistent bash
 * session, Python in its persistent kernel, both in the chat's sandbox
 * (getOrCreateOpenSandbox), their output streamed as tool_output. See exec.h. */
#include "app/tools/exec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/app.h"
#include "app/sandbox/execd.h"
#include "app/sandbox/sandbox.h"
#include "app/agent/tools.h"
#include "app/tools/sandbox_tool.h"
#include "lib/json.h"

struct out_ctx {
    agent_call *call;
};

static void on_output(void *ud, const char *stream, const char *text, size_t len)
{
    struct out_ctx *x = ud;
    agent_call_output(x->call, stream, text, len);
}

static void exec_result(agent_result *out, const sandbox_handle *h, const sandbox_execd_result *r,
                        int is_code)
{
    tk_buf b;
    tk_buf_init(&b, 64u << 20);
    tk_buf_append_str(&b, agent_tool_replaced_note(h));
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
        sandbox_handle h;
        if (!agent_tool_acquire_sandbox(
                call, is_code ? "first code run this session" : "first command this session", &h,
                out))
            return;
        sandbox_execd_result r;
        sandbox_execd_result_init(&r, (size_t)app_get()->cfg->tool_result_max * 4 + 4096);
        struct out_ctx x = {.call = call};
        tk_status st = is_code ? sandbox_execd_run_code(&h, json_string_value(jc), timeout_of(args),
                                                        on_output, &x, &r)
                               : sandbox_execd_run_command(&h, json_string_value(jc),
                                                           timeout_of(args), on_output, &x, &r);
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
            sandbox_execd_result_free(&r);
            sandbox_handle_free(&h);
            continue; /* reaped meanwhile: the next acquire makes a new one */
        } else {
            agent_result_error(out, "could not run it: %s", r.error);
        }
        sandbox_execd_result_free(&r);
        sandbox_handle_free(&h);
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

static const agent_tool tools[] = {
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

void agent_exec_tools_register(void)
{
    agent_tools_register_table(tools, TK_ARRAY_LEN(tools));
}
