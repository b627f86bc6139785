/*
 * hub.h — a chat's events on their way to its SSE listeners on this instance:
 * GET /api/sessions/{id}/events replays what is stored, then follows live.
 *
 *   stored events   the writer (events.c) stores a batch, then hands each event
 *                   to agent_hub_publish with its seq: listeners get it once,
 *                   in seq order, with "id: <seq>", and a reload or a resumed
 *                   stream (Last-Event-ID) replays it from Postgres. Events
 *                   another instance stored arrive through the bus (its NOTIFY
 *                   on tusko_events) and are read from Postgres; so is whatever
 *                   a listener missed (a long replay, a queue past its cap).
 *   transient       agent_hub_publish_transient: fanned out at once to the
 *   events          chat's live listeners and never stored: no id (a client's
 *                   Last-Event-ID does not move), not replayed, not seen by a
 *                   listener still replaying, by other instances, or by a
 *                   client whose stream is full (the frame is dropped for it).
 *                   For what is stale a second later (a browser's live view).
 *                   Not ordered with the stored events around it.
 *
 * A listener too slow for the stored events is ended (it reconnects and
 * resumes with Last-Event-ID). Frames are "id: <seq>\nevent: <type>\ndata:
 * <json>" (docs/API.md); a replay asked for by turns (?turns=N) starts with a
 * "history" frame without an id.
 */
#ifndef APP_AGENT_HUB_H
#define APP_AGENT_HUB_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/httpd.h"

/* Hands a stored event (data: its JSON, len bytes) to every live listener of
 * its chat; queues it for a listener still replaying. Writer thread. */
void agent_hub_publish(const char *session_id, int64_t seq, const char *type, const char *data,
                       size_t len);

/* Sends an event that is never stored to the chat's live listeners on this
 * instance (any thread; never blocks, never touches the database). type is a
 * declared event type (event_types.c); steals data (an object; NULL means {}),
 * which gets "type", "turn_id" (NULL: null) and "at" like a stored event.
 * Returns how many listeners it was written to. */
size_t agent_hub_publish_transient(const char *session_id, const char *turn_id, const char *type,
                                   json_t *data);

/* Registers the hub with the bus (the tusko_events channel, the catch-up of
 * listeners that are behind). Before agent_bus_start; once. */
void agent_hub_start(void);

/* GET /api/sessions/{id}/events */
extern const tk_route agent_hub_routes[];
extern const size_t agent_hub_nroutes;

#endif
