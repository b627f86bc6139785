/*
 * subagent.h — delegate_subagent {role, task, context?}: a nested agent loop
 * (an agent_run inside the tool call, on the same event loop: no thread waits
 * for it) with the role's own system prompt, tools, step budget and model.
 *
 *   researcher  the fast-lane tools (search_chunks, recall_facts, remember,
 *               list_files, preview, ...) and web_fetch when it is registered;
 *               never a sandbox
 *   coder       the sandbox-lane tools, in the PARENT chat's sandbox (the same
 *               session, so getOrCreateOpenSandbox reuses it: never a second
 *               one), plus list_files, preview, search_chunks
 *   reviewer    read-only: list_files, preview, read_file, search_chunks;
 *               answers with findings
 *
 * The subagent's events carry {agent, subagent_id, parent_call_id, depth} (and
 * parent_subagent_id when its parent is itself a subagent), between a
 * subagent_start and a subagent_end; its spans hang under a "subagent" span
 * under the delegate_subagent tool span. The parent gets the final text, cut
 * at SUBAGENT_RESULT_MAX characters. Delegate calls of one answer run at the
 * same time; cancelling the turn cancels them; a subagent at
 * SUBAGENT_MAX_DEPTH is not offered delegate_subagent, and called anyway it
 * refuses.
 *
 * Settings (subagent_settings.h): SUBAGENT_SETTINGS(cfg) in the program's
 * settings table; app_agent_start checks the models against the allowlist
 * (agent_subagent_check_models), then registers the tool.
 */
#ifndef APP_TOOLS_SUBAGENT_H
#define APP_TOOLS_SUBAGENT_H

#include <stddef.h>
#include <stdint.h>

#include "app/tools/subagent_settings.h"
#include "lib/common.h"

/* The SUBAGENT_<ROLE>_MODEL settings against TUSKO_MODELS (after app_init):
 * TK_EINVAL with the variable named. `tusko serve` checks them before it
 * migrates, so a bad setting changes nothing. */
tk_status agent_subagent_check_models(char *err, size_t errlen);
/* Registers delegate_subagent (once, at start-up). */
void agent_subagent_tools_register(void);

/* A role by name ("researcher", "Coder"...; case-insensitive): its index, or
 * -1. For tests. */
int agent_subagent_role(const char *name);
/* The tools a role's run may call (a new NULL-terminated array of static or
 * registered names; free the array only). For tests and the tool. */
const char **agent_subagent_tools(int role);
/* Cuts text to max characters (code points) at a boundary, saying so (heap). */
char *agent_subagent_cap(const char *text, size_t max_chars, const char *role);

#endif
