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
 * Settings: put SUBAGENT_SETTINGS(cfg) into the program's settings table;
 * agent_subagent_init (from agent_init) checks the models against the
 * allowlist and registers the tool.
 */
#ifndef APP_AGENT_SUBAGENT_H
#define APP_AGENT_SUBAGENT_H

#include <stddef.h>
#include <stdint.h>

#include "lib/common.h"
#include "lib/config.h"

typedef struct {
    int64_t max_depth;  /* SUBAGENT_MAX_DEPTH: nesting allowed (0: no subagents) */
    int64_t result_max; /* SUBAGENT_RESULT_MAX: characters of the answer the parent gets */
    char *researcher_model;
    int64_t researcher_steps;
    char *coder_model;
    int64_t coder_steps;
    char *reviewer_model;
    int64_t reviewer_steps;
} agent_subagent_config;

/* clang-format off */
#define SUBAGENT_SETTINGS(c)                                                                       \
    {"SUBAGENT_MAX_DEPTH", "subagent-max-depth", TK_SET_INT, "1",                                  \
     "how deep subagents nest (1: the agent delegates, subagents do not; 0: no subagents)",        \
     .min = 0, .max = 4, .out = &(c).max_depth},                                                   \
    {"SUBAGENT_RESULT_MAX", "subagent-result-max", TK_SET_INT, "4000",                             \
     "characters of a subagent's answer its parent gets (the rest is cut)", .min = 200,            \
     .max = 200000, .out = &(c).result_max},                                                       \
    {"SUBAGENT_RESEARCHER_MODEL", "subagent-researcher-model", TK_SET_STR, NULL,                   \
     "model of the Researcher (one of TUSKO_MODELS; unset: the chat's model)",                     \
     .out = &(c).researcher_model},                                                                \
    {"SUBAGENT_RESEARCHER_STEPS", "subagent-researcher-steps", TK_SET_INT, "8",                    \
     "model calls of one Researcher run at most", .min = 1, .max = 1000,                           \
     .out = &(c).researcher_steps},                                                                \
    {"SUBAGENT_CODER_MODEL", "subagent-coder-model", TK_SET_STR, NULL,                             \
     "model of the Coder (one of TUSKO_MODELS; unset: the chat's model)",                          \
     .out = &(c).coder_model},                                                                     \
    {"SUBAGENT_CODER_STEPS", "subagent-coder-steps", TK_SET_INT, "12",                             \
     "model calls of one Coder run at most", .min = 1, .max = 1000, .out = &(c).coder_steps},      \
    {"SUBAGENT_REVIEWER_MODEL", "subagent-reviewer-model", TK_SET_STR, NULL,                       \
     "model of the Reviewer (one of TUSKO_MODELS; unset: the chat's model)",                       \
     .out = &(c).reviewer_model},                                                                  \
    {"SUBAGENT_REVIEWER_STEPS", "subagent-reviewer-steps", TK_SET_INT, "6",                        \
     "model calls of one Reviewer run at most", .min = 1, .max = 1000,                             \
     .out = &(c).reviewer_steps}
/* clang-format on */

/* Checks the roles' models against TUSKO_MODELS and registers
 * delegate_subagent (after app_init). TK_EINVAL with a message naming the
 * setting otherwise. */
/* The SUBAGENT_<ROLE>_MODEL settings against TUSKO_MODELS (after app_init):
 * TK_EINVAL with the variable named. `tusko serve` checks them before it
 * migrates, so a bad setting changes nothing. */
tk_status agent_subagent_check_models(char *err, size_t errlen);
tk_status agent_subagent_init(char *err, size_t errlen);

/* A role by name ("researcher", "Coder"...; case-insensitive): its index, or
 * -1. For tests. */
int agent_subagent_role(const char *name);
/* The tools a role's run may call (a new NULL-terminated array of static or
 * registered names; free the array only). For tests and the tool. */
const char **agent_subagent_tools(int role);
/* Cuts text to max characters (code points) at a boundary, saying so (heap). */
char *agent_subagent_cap(const char *text, size_t max_chars, const char *role);

#endif
