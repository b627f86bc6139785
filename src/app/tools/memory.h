/*
 * memory.h — the agent's side of Utopia (src/app/utopia/): the fast-lane tools
 * search_chunks, remember, recall_facts and save_document, and the long-term
 * memories offered to the model at the start of a turn.
 *
 * Tools (agent_memory_tools_register, from app_agent_start; all run in the chat
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
 * The memories offered at the start of a turn are the prompt's (prompt.h).
 */
#ifndef APP_TOOLS_MEMORY_H
#define APP_TOOLS_MEMORY_H

void agent_memory_tools_register(void);

#endif
