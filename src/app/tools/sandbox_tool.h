/*
 * sandbox_tool.h — what the sandbox-lane tools (files.c's write_file, exec.c)
 * share: the chat's sandbox for a write or an execution, from
 * getOrCreateOpenSandbox, with its spawn reported (a sandbox_spawn event and
 * span with the attributes of the trace, a sandbox_gone event when it replaced
 * a reaped one) and a quota refusal turned into a 429 error event; and the note
 * a result starts with when the sandbox was replaced. Reads never come here:
 * they use getExistingOpenSandbox and never start a container.
 */
#ifndef APP_TOOLS_SANDBOX_TOOL_H
#define APP_TOOLS_SANDBOX_TOOL_H

#include "app/sandbox/sandbox.h"
#include "app/agent/tools.h"

/* Gets the chat's sandbox for a write/execute (trigger: why, for the span).
 * Returns 1 with *h ready (free it with sandbox_handle_free), 0 with *out
 * filled. Blocking (a tool worker). */
int agent_tool_acquire_sandbox(agent_call *call, const char *trigger, sandbox_handle *h,
                               agent_result *out);
/* "Note: this chat's previous workspace was gone ..." when h replaced a
 * reaped sandbox, else "". */
const char *agent_tool_replaced_note(const sandbox_handle *h);

#endif
