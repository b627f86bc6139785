/*
 * db.h — the few Postgres helpers Utopia's modules share (internal).
 *
 * Most of Utopia's answers are built as JSON by Postgres itself (json_agg,
 * json_build_object) and parsed once here, so the C side stays small.
 */
#ifndef UTOPIA_DB_H
#define UTOPIA_DB_H

#include <jansson.h>
#include <libpq-fe.h>

#include "lib/common.h"

/* Runs a statement whose first row's first column is JSON and parses it.
 * NULL on a database error (message in err, logged) or when there is no row
 * (*none set to 1 if given). */
json_t *utopia_db_json(PGconn *c, const char *sql, int n, const char *const *params, int *none,
                       char *err, size_t errlen);
/* Runs a statement; TK_OK or TK_ERROR with a message. *rows (if given) gets
 * the affected row count. */
tk_status utopia_db_exec(PGconn *c, const char *sql, int n, const char *const *params, long *rows,
                         char *err, size_t errlen);
/* Deletes one of the caller's rows: sql is a constant DELETE with $1 the user
 * and $2 the row's id. *out is {"deleted": true}; TK_EINVAL "bad user or <what>
 * id" for an id that is not a UUID, TK_ENOENT "no such <what>" when no row is
 * the caller's, TK_ERROR on a database error. */
tk_status utopia_db_delete_one(PGconn *c, const char *sql, const char *what, const char *user_id,
                               const char *id, json_t **out, char *err, size_t errlen);
/* A list's page as the text of its LIMIT and OFFSET parameters: a limit
 * outside 1..max is def, a negative offset 0. */
typedef struct {
    char limit[16], offset[16];
} utopia_db_page;
utopia_db_page utopia_db_page_of(int limit, int offset, int def, int max);
/* 1 for NULL or a valid UUID. */
int utopia_uuid_ok(const char *s);

#endif
