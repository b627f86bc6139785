/*
 * The workspace's files as the model sees them.
 *
 *   fast lane     list_files, preview
 *   sandbox lane  write_file, read_file
 *
 * A write gets its sandbox from getOrCreateOpenSandbox (sandbox_tool.h: a
 * spawn is reported); reads (list_files, preview, read_file) from
 * getExistingOpenSandbox, so they never start a container. See files.h.
 */
#include "app/tools/files.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/app.h"
#include "app/files.h"
#include "app/sandbox/execd.h"
#include "app/sandbox/sandbox.h"
#include "app/agent/tools.h"
#include "app/tools/office.h"
#include "app/tools/sandbox_tool.h"
#include "app/workspace.h"
#include "lib/json.h"

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
    json_t *jpages = json_object_get(args, "pages");
    char pages[32] = "";
    if (json_is_string(jpages))
        snprintf(pages, sizeof pages, "%s", json_string_value(jpages));
    else if (json_is_integer(jpages))
        snprintf(pages, sizeof pages, "%lld", (long long)json_integer_value(jpages));
    tk_status st = agent_files_preview(agent_call_user(call), agent_call_session(call),
                                       json_string_value(jp), json_string_length(jp), max, pages,
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
    if (strcmp(kind, "error") == 0) {
        agent_result_error(out, "%s", tk_json_str_or(res, "error", "the file cannot be read"));
        json_decref(res);
        return;
    }
    if (strcmp(kind, "pages") == 0 || strcmp(kind, "sheets") == 0)
        agent_result_take(out, tools_office_preview_text(res), 0);
    else if (strcmp(kind, "text") == 0)
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
    sandbox_session s = {.user_id = agent_call_user(call),
                         .session_id = agent_call_session(call),
                         .cancel = agent_call_cancel_flag(call)};
    sandbox_handle h;
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
    st = sandbox_execd_read_head(&h, p, cap, &data, &truncated, msg, sizeof msg);
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
    sandbox_handle_free(&h);
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
        sandbox_handle h;
        if (!agent_tool_acquire_sandbox(call, "first write to /workspace this session", &h, out))
            return;
        tk_status st = sandbox_execd_write_file(&h, p, json_string_value(jc),
                                                json_string_length(jc), msg, sizeof msg);
        if (st == TK_OK) {
            agent_result_text(out, "%swrote %zu bytes to %s", agent_tool_replaced_note(&h),
                              json_string_length(jc), p);
            out->data = tk_json_obj("path", json_string(p), "size",
                                    json_integer((json_int_t)json_string_length(jc)), NULL);
            sandbox_handle_free(&h);
            return;
        }
        int gone = h.gone;
        sandbox_handle_free(&h);
        if (!gone || attempt == 1) {
            agent_result_error(out, "the write failed: %s", msg);
            return;
        }
        /* the sandbox went away under us: the next acquire makes a new one */
    }
}

static const agent_tool tools[] = {
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
     .description =
         "Show the user a preview of a file in the workspace: text; a picture for images; a "
         "picture of every slide or page of .pptx .ppt .odp .docx .doc .odt .pdf, with each "
         "one's text (title, body, speaker notes) returned to you; one table per sheet of "
         ".xlsx .xls .ods .csv (formula values computed). At most 30 slides or 20 pages a "
         "call: pages \"21-40\" for more. Use it to check a deck or document you made.",
     .parameters = "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
                   "\"pages\":{\"type\":\"string\",\"description\":\"slides or pages to "
                   "show, e.g. \\\"21-40\\\"\"},\"max_chars\":{\"type\":\"integer\"}},"
                   "\"required\":[\"path\"]}",
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
};

void agent_files_tools_register(void)
{
    agent_tools_register_table(tools, TK_ARRAY_LEN(tools));
}
