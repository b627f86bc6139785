/*
 * events.h — the queue of a chat's stored events and its writer: emitted by
 * turns and tools, stored in Postgres, numbered, then handed to the hub
 * (hub.h), which delivers them to SSE listeners on this instance; other
 * instances hear of them through the bus (bus.h). An event that must never be
 * stored (a live view's frame) does not come here: agent_hub_publish_transient.
 *
 * Emitting (any thread, never blocks on the database):
 *
 *   agent_event_emit(session_id, turn_id, "tool_start",
 *                    tk_json_obj("call_id", json_string(id), "lane", json_string("fast"), NULL));
 *   agent_event_text(session_id, turn_id, step, delta, len);
 *
 * The writer thread takes what is queued (group commit: a small batch waits up
 * to 20 ms for company), merges adjacent text deltas of a turn, appends the
 * batch in one statement (tusko_events_append), NOTIFYs, and only then delivers:
 * whatever a client saw is stored, so a reload replays exactly it and a resumed
 * stream (Last-Event-ID) neither skips nor repeats an event. Event numbers grow
 * across all sessions (one sequence); a session's events are written by the one
 * instance running its turn, in order.
 *
 * Every event's data is a JSON object {"type","turn_id","at",...payload}; the
 * SSE frame is "id: <seq>\nevent: <type>\ndata: <json>". Types are listed in
 * event_types.c and docs/AGENT.md (text, turn_start, plan, plan_update, tool_start, tool_output,
 * tool_end, sandbox_spawn, sandbox_gone, error, turn_end). A replay asked for
 * by turns (?turns=N: from the N-th last turn_start) starts with one frame
 * without an id, "event: history", saying whether earlier events exist and
 * the seq the replayed range starts at (docs/API.md).
 */
#ifndef APP_AGENT_EVENTS_H
#define APP_AGENT_EVENTS_H

#include <jansson.h>
#include <stddef.h>

#include "lib/common.h"

/* Queues an event; steals data (an object; NULL means {}). turn_id may be NULL. */
void agent_event_emit(const char *session_id, const char *turn_id, const char *type, json_t *data);
/* Queues a text delta of a turn's answer at a step. */
void agent_event_text(const char *session_id, const char *turn_id, int step, const char *s,
                      size_t n);

/* Queues a text delta of a nested run (a subagent): a "text" event carrying
 * tags (steals them: {agent, subagent_id, parent_call_id, depth}); deltas merge
 * only with the same subagent's. */
void agent_event_text_tagged(const char *session_id, const char *turn_id, int step, json_t *tags,
                             const char *s, size_t n);

/* Starts the hub, the bus and the writer (after app_init; register bus
 * channels and ticks first). */
tk_status agent_events_start(char *err, size_t errlen);
/* Stores what is queued, then stops the writer and the bus. */
void agent_events_stop(void);
/* Blocks until every event queued before the call is stored (tests, shutdown). */
void agent_events_flush(void);

#endif
