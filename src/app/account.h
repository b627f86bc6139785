/*
 * account.h — a user's data taken out and deleted: GET /api/me/export,
 * DELETE /api/me, `tusko user export` and `tusko user delete`.
 *
 * Which tables hold a user's rows is read from the catalog at the time
 * (sql/0040_account_data.sql, tusko_user_tables): a `user_id uuid` column or a
 * reference to a table that holds them, so a table added later is exported
 * and deleted with the rest.
 */
#ifndef APP_ACCOUNT_H
#define APP_ACCOUNT_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stddef.h>

#include "lib/common.h"
#include "lib/httpd.h"

#define APP_EXPORT_FORMAT         "tusko-export"
#define APP_EXPORT_FORMAT_VERSION 1

/* Writes the user's data as a zip archive to fd (a new, empty regular file:
 * headers are patched in place),
 * in one REPEATABLE READ snapshot: tables/<table>.json (every row of every
 * table holding the user's, as a JSON array, without the columns named in the
 * manifest's "omitted": secrets and search indexes), downloads/<id>/<name>
 * (each stored download's bytes) and manifest.json (last: what is where, with
 * row counts, sizes and SHA-256s). TK_ENOENT for no such user; TK_ERROR with
 * err otherwise. */
tk_status app_account_export(PGconn *c, const char *user_id, int fd, char *err, size_t errlen);

/* Deletes the user and all of it: their sandboxes through the sandbox service
 * first, then every row (tusko_user_delete), with an audit_log entry naming
 * actor ("self", "cli"). *answer: {"deleted": {table: rows...},
 * "sandboxes_released": n}. TK_ENOENT no such user; TK_EDENIED a turn is
 * queued or running (err names it); TK_ERROR with err (the sandbox service
 * or the database failed; nothing of the account's rows was deleted). */
tk_status app_account_delete(PGconn *c, const char *user_id, const char *actor, json_t **answer,
                             char *err, size_t errlen);

extern const tk_route app_account_routes[];
extern const size_t app_account_nroutes;

#endif
