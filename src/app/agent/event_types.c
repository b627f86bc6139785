/* The types of a chat's event stream (see event_types.h). */
#include "app/agent/event_types.h"

#include <string.h>

#include "lib/common.h"

/* (the last two are never stored and have no id: "stream_closed" ends a
 * stream the user's limit of streams closed, "history" is the replay's first
 * frame) */
const char *const agent_event_types[] = {
    "turn_start",   "text",          "plan",          "plan_update",
    "tool_start",   "tool_output",   "tool_end",      "sandbox_spawn",
    "sandbox_gone", "browser_spawn", "error",         "subagent_start",
    "subagent_end", "turn_end",      "stream_closed", "history",
};
const size_t agent_event_ntypes = TK_ARRAY_LEN(agent_event_types);

int agent_event_type_known(const char *type)
{
    for (size_t i = 0; type && i < agent_event_ntypes; i++)
        if (strcmp(agent_event_types[i], type) == 0)
            return 1;
    return 0;
}

json_t *agent_event_types_json(void)
{
    json_t *a = json_array();
    for (size_t i = 0; i < agent_event_ntypes; i++)
        json_array_append_new(a, json_string(agent_event_types[i]));
    return a;
}
