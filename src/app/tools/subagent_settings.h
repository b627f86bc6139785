/*
 * subagent_settings.h — delegate_subagent's settings (SUBAGENT_*, docs/AGENT.md):
 * the struct they fill and the rows for the program's settings table. Apart
 * from the tool (subagent.h) so that the settings table names them without
 * reaching into the agent.
 */
#ifndef APP_TOOLS_SUBAGENT_SETTINGS_H
#define APP_TOOLS_SUBAGENT_SETTINGS_H

#include <stdint.h>

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

#endif
