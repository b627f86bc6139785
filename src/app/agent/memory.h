/*
 * memory.h — the agent's side of Utopia (src/app/utopia/): the fast-lane tools
 * search_chunks, remember, recall_facts and save_document, and the long-term
 * memories offered to the model at the start of a turn.
 *
 * Tools (agent_memory_tools_register, from agent_init; all run in the chat
 * server on the tool pool, never in a sandbox):
 *   search_chunks {query, scope?: "user"|"chat", k?: 1..50}
 *       chunks of documents, memories and facts together, ranked and cited;
 *   remember {fact: {subject, predicate, object, valid_from?, valid_to?,
 *             single?, aliases?, object_kind?}} | {note}
 *       a dated fact in the knowledge graph (the server parses and checks the
 *       dates; a newer single-valued fact closes the older one) and/or a note
 *       in long-term memory; the source is the chat and the turn;
 *   recall_facts {entity, at?}
 *       what was true about an entity at a date (default now);
 *   save_document {title, content, format?: "markdown"|"text", scope?: "user"|"chat"}
 *       a finding kept as a Utopia document (utopia_doc_add, source "agent",
 *       from the chat and turn; at most 256 KiB), found by search_chunks.
 *
 * Memories at the start of a turn: agent_memory_lookup (blocking, with the
 * turn's text) finds the memories that fit in UTOPIA_MEMORY_BUDGET_TOKENS;
 * agent_memory_prompt appends them to the system prompt (within its
 * APP_SYSTEM_PROMPT_MAX characters) and records a "memory" span in the trace
 * saying which were offered and how many tokens they cost.
 */
#ifndef APP_AGENT_MEMORY_H
#define APP_AGENT_MEMORY_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stdint.h>

#include "app/agent/trace.h"

void agent_memory_tools_register(void);

typedef struct {
    json_t *found;      /* utopia_memory_relevant's {memories,tokens,budget}, or NULL */
    int64_t start_ms;   /* wall clock of the lookup */
    double duration_ms; /* its duration */
    int skipped;        /* Utopia is off or the budget is 0: nothing looked up */
    char err[256];      /* the lookup failed (the turn goes on without memories) */
} agent_memory_offer;

/* Blocking (a database worker): the memories relevant to the turn's text. */
void agent_memory_lookup(PGconn *c, const char *user_id, const char *chat_id, const char *text,
                         agent_memory_offer *o);
/* The system prompt to send: base, then the memories that fit (heap; the
 * caller frees it). Records the span under parent_span. */
char *agent_memory_prompt(const char *base, const agent_memory_offer *o, agent_trace *t,
                          const char *parent_span);
void agent_memory_offer_free(agent_memory_offer *o);

#endif
