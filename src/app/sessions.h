/*
 * sessions.h — chat sessions (the conversations in the sidebar) and their
 * messages: the /api/sessions routes, plus what the agent's routes under
 * /api/sessions/{id}/... use to check ownership.
 *
 * Isolation: every query is scoped by the caller's user id. Another user's
 * session id, a deleted one and a malformed one all answer 404 NOT_FOUND — never
 * 403, so ids cannot be probed.
 *
 * JSON shapes come from the rows themselves (to_jsonb(row) minus user_id), so a
 * column another migration adds to chat_sessions or messages shows up in the API
 * without a change here. Never add a secret column to these tables.
 */
#ifndef APP_SESSIONS_H
#define APP_SESSIONS_H

#include <libpq-fe.h>

#include "lib/common.h"
#include "lib/httpd.h"
#include "lib/id.h"

#define APP_TITLE_MAX 200 /* characters */

/* TK_OK when session_id is a session of user_id; TK_ENOENT when it is not (or is
 * not a UUID); TK_ERROR on a database error. */
tk_status app_session_owned(PGconn *c, const char *user_id, const char *session_id);

/*
 * For a handler of a route with {id} (a chat session): returns the id when the
 * caller owns it; otherwise responds (404 NOT_FOUND, 503 on a database error) and
 * returns NULL. Uses c (the caller's connection). Blocking: TK_ROUTE_BLOCKING.
 *
 *   PGconn *c = app_db_acquire(); if (!c) { app_respond_db_unavailable(r); return; }
 *   const char *sid = app_req_session(r, c);
 *   if (sid) { ... }
 *   app_db_release(c);
 */
const char *app_req_session(tk_req *r, PGconn *c);

/* Sets the session's updated_at to now (it moves to the top of the list). */
tk_status app_session_touch(PGconn *c, const char *session_id);

/* Appends a message; id gets its id. role: system, user, assistant, tool. */
tk_status app_message_add(PGconn *c, const char *session_id, const char *role, const char *content,
                          char id[TK_UUID_LEN]);

/*
 * Called after a chat session was deleted (its row, messages and anything with
 * ON DELETE CASCADE are gone): release what lives outside the database, e.g.
 * cancel its turn and its sandbox. Runs on the worker thread that handled the
 * DELETE. Register at start-up, before the server starts; at most 8 hooks.
 */
typedef void (*app_session_deleted_fn)(const char *session_id, const char *user_id, void *ud);
void app_sessions_on_delete(app_session_deleted_fn fn, void *ud);

/* CHAT_RETENTION: deletes up to `max` chats not touched (updated_at) for
 * retention_ms and without a queued or running turn, then runs the delete
 * hooks for each, as DELETE /api/sessions/{id} does. Returns how many went,
 * -1 on a database error. Blocking (the hooks call the sandbox service). */
int app_sessions_retention_sweep(PGconn *c, int64_t retention_ms, int max);

extern const tk_route app_sessions_routes[];
extern const size_t app_sessions_nroutes;

#endif
