/* snapshot_workspace (see snapshots_tools.h). */
#include "app/snapshots/snapshots_tools.h"

#include <jansson.h>
#include <string.h>

#include "app/agent/tools.h"
#include "app/snapshots/snapshots.h"
#include "app/snapshots/snapshots_api.h"
#include "lib/json.h"

/* Only the turn's own run, and only while snapshots are on. */
static int offered(int depth)
{
    return depth == 0 && snapshots_enabled();
}

static void run_snapshot(agent_call *call, const json_t *args, agent_result *out)
{
    json_t *s = NULL;
    char msg[512];
    tk_status st = snapshots_api_take(agent_call_user(call), agent_call_session(call), "tool", &s,
                                      msg, sizeof msg);
    if (st == TK_OK && strcmp(tk_json_str_or(s, "status", ""), "unchanged") == 0)
        agent_result_text(out, "the workspace has not changed since snapshot %s: nothing stored",
                          tk_json_str_or(s, "id", "?"));
    else if (st == TK_OK)
        agent_result_text(out, "snapshot %s stored: %lld files, %lld bytes, sha256 %s",
                          tk_json_str_or(s, "id", "?"),
                          (long long)json_integer_value(json_object_get(s, "files")),
                          (long long)json_integer_value(json_object_get(s, "bytes")),
                          tk_json_str_or(s, "sha256", ""));
    else if (st == TK_ENOENT)
        agent_result_text(out, "%s", msg);
    else
        agent_result_error(out, "the snapshot failed: %s",
                           s ? tk_json_str_or(s, "error", msg) : msg);
    json_decref(s);
}

static const agent_tool tools[] = {
    {.name = "snapshot_workspace",
     .description = "Save a snapshot of this chat's /workspace (a tar.gz with a manifest) to the "
                    "server's object store, e.g. when the user asks to back up or checkpoint "
                    "their work. Stores nothing when nothing changed since the last snapshot.",
     .parameters = "{\"type\":\"object\",\"properties\":{}}",
     .lane = AGENT_LANE_FAST,
     .run = run_snapshot,
     .offered_at = offered},
};

void snapshots_tools_register(void)
{
    agent_tools_register_table(tools, TK_ARRAY_LEN(tools));
}
