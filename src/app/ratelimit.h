/*
 * ratelimit.h — rate limits shared by every tusko instance, kept in Postgres
 * (sql/0004_ratelimit.sql): at most `max` events per key in any sliding window,
 * checked and recorded atomically (a per-key advisory lock), so a burst across
 * many instances cannot overshoot. Refused attempts are not recorded.
 *
 * The chat limit: CHAT_RATE_LIMIT_MAX chat requests per user per minute. The
 * handler of POST /api/sessions/{id}/messages calls, before anything else:
 *
 *   int retry;
 *   tk_status st = app_ratelimit_take(app_req_user(r)->id, &retry);
 *   if (st == TK_EDENIED) { app_ratelimit_respond(r, retry); return; }   // 429
 *   if (st != TK_OK) { app_respond_db_unavailable(r); return; }          // 503
 *
 * All functions block on the database: call from worker threads only.
 */
#ifndef APP_RATELIMIT_H
#define APP_RATELIMIT_H

#include <libpq-fe.h>
#include <stdint.h>

#include "lib/common.h"
#include "lib/httpd.h"

#define APP_CHAT_WINDOW_MS 60000
/* The chat limit's key: APP_CHAT_RATE_KEY followed by the user id (the agent's
 * one-round-trip turn creation takes from the same key in SQL). */
#define APP_CHAT_RATE_KEY "chat:"

/* One chat request for user_id: TK_OK (allowed, counted), TK_EDENIED (over
 * CHAT_RATE_LIMIT_MAX in the last minute; *retry_after_s is how long until one
 * is allowed, >= 1), TK_ERROR (no database). Takes its own pooled connection. */
tk_status app_ratelimit_take(const char *user_id, int *retry_after_s);

/* The same on any key, limit and window, on the caller's connection. On
 * TK_EDENIED *retry_after_ms is > 0. */
tk_status app_ratelimit_take_key(PGconn *c, const char *key, int64_t max, int64_t window_ms,
                                 int64_t *retry_after_ms);
/* Undoes the most recent take on key (a sign-in that succeeded was not a failure). */
tk_status app_ratelimit_untake_key(PGconn *c, const char *key);
/* Forgets every event of key. */
tk_status app_ratelimit_reset_key(PGconn *c, const char *key);

/* Responds 429 RATE_LIMITED with Retry-After: retry_after_s. */
void app_ratelimit_respond(tk_req *r, int retry_after_s);

#endif
