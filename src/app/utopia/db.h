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
/* 1 for NULL or a valid UUID. */
int utopia_uuid_ok(const char *s);

#endif
