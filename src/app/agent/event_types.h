/*
 * event_types.h — the types of a chat's event stream, declared once.
 *
 * Every event a turn (or an upload) emits has one of these types, and the SSE
 * replay's first frame is "history" (docs/AGENT.md, "Events"; docs/API.md).
 * agent_event_emit refuses any other type (a broken invariant: types are
 * program text), and GET /api/agent lists them, so a client that must name
 * the types it listens to (the browser's EventSource hears only those) learns
 * them from the server instead of a copy of this list. A new event type is a
 * line here.
 */
#ifndef APP_AGENT_EVENT_TYPES_H
#define APP_AGENT_EVENT_TYPES_H

#include <jansson.h>
#include <stddef.h>

extern const char *const agent_event_types[];
extern const size_t agent_event_ntypes;

/* Non-zero when type is one of agent_event_types. */
int agent_event_type_known(const char *type);
/* The types as a JSON array of strings (a new reference). */
json_t *agent_event_types_json(void);

#endif
