/*
 * prompt.h — the system prompt of a chat turn, assembled in one place.
 *
 * The prompt is built in two halves, because one half blocks:
 *
 *   agent_prompt_gather   on a database worker, before the turn's run starts:
 *                         looks up what the prompt needs from the store (today
 *                         the long-term memories relevant to the turn's text);
 *   agent_prompt_build    on the loop thread: the prompt itself, in this order:
 *                           1. the operator's prompt (TUSKO_SYSTEM_PROMPT,
 *                              app_get()->system_prompt),
 *                           2. the catalogue of the user's enabled skills, under
 *                              "## Skills", in at most SKILLS_PROMPT_BUDGET
 *                              characters (the rest: the list_skills tool),
 *                           3. the memories that fit, under "## Long-term memory",
 *                         all within APP_SYSTEM_PROMPT_MAX characters; each part
 *                         records a span in the turn's trace saying what it added.
 *
 * A new part of the prompt is one member of
 * agent_prompt_parts filled in agent_prompt_gather, one appender called by
 * agent_prompt_build after the memories, and its release in
 * agent_prompt_parts_free. Nothing else builds a turn's system prompt; a
 * subagent's prompt is its role's (tools/subagent.c).
 */
#ifndef APP_AGENT_PROMPT_H
#define APP_AGENT_PROMPT_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stdint.h>

#include "app/agent/trace.h"
#include "app/skills.h"

/* The memories found for a turn's text. */
typedef struct {
    json_t *found;      /* utopia_memory_relevant's {memories,tokens,budget}, or NULL */
    int64_t start_ms;   /* wall clock of the lookup */
    double duration_ms; /* its duration */
    int skipped;        /* Utopia is off or the budget is 0: nothing looked up */
    char err[256];      /* the lookup failed (the turn goes on without memories) */
} agent_memory_offer;

/* The skills the user has enabled (their catalogue goes into the prompt). */
typedef struct {
    skills_set *set; /* never NULL after agent_prompt_gather */
    int64_t start_ms;
    double duration_ms;
} agent_skills_offer;

/* What agent_prompt_gather found, one member a part of the prompt. */
typedef struct {
    agent_memory_offer mem;
    agent_skills_offer skills;
} agent_prompt_parts;

/* Blocking (a database worker): fills *p for the turn of user_id in chat_id
 * whose message is text. A part that fails is left out of the prompt (and its
 * span says why); the turn goes on. */
void agent_prompt_gather(PGconn *c, const char *user_id, const char *chat_id, const char *text,
                         agent_prompt_parts *p);
/* The system prompt to send (heap; the caller frees it): the operator's prompt,
 * then what p holds that fits. Records each part's span under parent_span of
 * t (t NULL: no spans). */
char *agent_prompt_build(const agent_prompt_parts *p, agent_trace *t, const char *parent_span);
void agent_prompt_parts_free(agent_prompt_parts *p);

/* The "## Documents" section naming the document libraries an image.json
 * (build.sh's, its "document_libraries") lists, and how to check a deck with
 * preview (heap; "" when the file is absent or lists none). The prompt uses
 * SANDBOX_IMAGE_INFO's, read once. */
char *agent_prompt_documents(const char *image_json);

#endif
