/*
 * history.h — what of a conversation goes to the model: at most the last N
 * messages (AGENT_HISTORY_MAX, the guardrail), starting at a user message, with
 * every tool result kept paired with the call that asked for it (providers
 * refuse an unanswered call or an orphan result).
 */
#ifndef APP_AGENT_HISTORY_H
#define APP_AGENT_HISTORY_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stddef.h>

#include "lib/common.h"

#define AGENT_HISTORY_MAX 200

/* A new array of neutral messages (llm.h): a suffix of msgs of at most max
 * messages, cut so that it starts with a user message when there is one, with
 * tool calls that have no result removed (an assistant message left empty goes
 * too) and tool results whose call is outside the window or missing dropped.
 * The order of what remains is unchanged. */
json_t *agent_history_window(const json_t *msgs, size_t max);

/* A select-list expression: the last $3 messages of chat session $2 as a JSON
 * array text of neutral messages, oldest first. */
#define AGENT_HISTORY_SQL                                                                          \
    "(SELECT coalesce(jsonb_agg(jsonb_strip_nulls(jsonb_build_object('role', role, 'content', "    \
    "content, 'tool_calls', tool_calls, 'tool_call_id', tool_call_id, 'is_error', CASE WHEN "      \
    "is_error THEN true END)) ORDER BY seq), '[]')::text FROM (SELECT * FROM messages WHERE "      \
    "session_id = $2 AND role <> 'system' ORDER BY seq DESC LIMIT $3::int) m)"

/* Loads the last `max` messages of a chat session as neutral messages (blocking).
 * NULL on a database error. */
json_t *agent_history_load(PGconn *c, const char *session_id, size_t max);

#endif
