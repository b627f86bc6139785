/* Per-user and per-token limits held in this process (docs/SECURITY.md,
 * section 7): uploads in flight per user (USER_MAX_UPLOADS) and requests a
 * minute per API token (API_TOKEN_RATE_LIMIT). The event streams a user holds
 * are counted by the hub (agent/hub.c) and the active turns in Postgres
 * (tusko_turn_create), since those must hold across instances.
 *
 *   if (!app_limits_upload_begin(r, u->id)) { ...429 sent... }
 */
#ifndef TUSKO_APP_LIMITS_H
#define TUSKO_APP_LIMITS_H

#include <stdint.h>

#include "lib/httpd.h"

/* Counts r as one of user_id's uploads in flight until r is freed. 1 if
 * within USER_MAX_UPLOADS; else 0 after answering 429 TOO_MANY_UPLOADS. */
int app_limits_upload_begin(tk_req *r, const char *user_id);
/* Uploads of user_id in flight here now (tests). */
int64_t app_limits_uploads(const char *user_id);

/* One request of the API token whose hash is token_hash (hex): 1 if within
 * API_TOKEN_RATE_LIMIT this minute; else 0 after answering 429 RATE_LIMITED
 * with Retry-After. now_ms: the clock (tk_now_ms). */
int app_limits_token_take(tk_req *r, const char *token_hash, int64_t now_ms);

#endif
