/*
 * snapshots_api.h — taking, listing and deleting a chat's workspace snapshots
 * (docs/SNAPSHOTS.md), and their routes:
 *   POST   /api/sessions/{id}/snapshots          take one now (blocking worker)
 *   GET    /api/sessions/{id}/snapshots          the chat's, newest first
 *   DELETE /api/sessions/{id}/snapshots/{sid}    the object, then the row
 */
#ifndef APP_SNAPSHOTS_API_H
#define APP_SNAPSHOTS_API_H

#include <jansson.h>

#include "lib/common.h"
#include "lib/httpd.h"

/* Takes a snapshot of the chat's workspace through its existing sandbox.
 * TK_OK with *out the snapshot ({id, key, bytes, sha256, files, status,
 * error, created_at}) or {status: "unchanged", id: the last one's};
 * TK_ENOENT with msg when there is no sandbox ("nothing to snapshot");
 * TK_EDENIED when snapshots are off; TK_ERROR with *out a failed snapshot
 * (its row records the store's error) or msg. Blocking. */
tk_status snapshots_api_take(const char *user_id, const char *session_id, const char *trigger,
                             json_t **out, char *msg, size_t msglen);

/* Applies retention to one chat's snapshots (keep the newest, then the last
 * SNAPSHOT_KEEP_LAST, none older than SNAPSHOT_MAX_AGE); returns how many
 * were deleted. An object that cannot be deleted keeps its row for the next pass. */
int snapshots_api_retain(const char *session_id);

extern const tk_route snapshots_api_routes[];
extern const size_t snapshots_api_nroutes;

#endif
