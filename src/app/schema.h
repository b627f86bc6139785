/*
 * schema.h — tusko's database schema: the migrations compiled into the binary
 * (sql/, lib/migrate.h), applied at start-up and by `tusko migrate`, and what a
 * backup records of them.
 */
#ifndef APP_SCHEMA_H
#define APP_SCHEMA_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stddef.h>

#include "lib/common.h"
#include "lib/embed.h"

/* The migrations this build carries, in order (ending with a NULL name). */
const struct tk_embed_file *app_schema_files(void);

/* The migrations applied when a command starts (serve, user, token): a
 * pending migration that declares a lock on a large table is refused (exit 1,
 * saying to run `tusko migrate`), a lock is waited for at most 15 s. Prints
 * the error to stderr; returns the exit status (0 when up to date). */
int app_schema_migrate_at_start(void);

/* `tusko migrate [--status]`: applies every pending migration (also those that
 * lock large tables, saying so first), or with --status lists each migration,
 * applied or pending, with the tables it locks. Returns the exit status. */
int app_cli_migrate(int argc, char **argv);

/* The versions recorded in schema_migrations, as a JSON array in order (new
 * reference); NULL on a database error. An empty array for an empty database. */
json_t *app_schema_applied(PGconn *c);

/* Whether a database at `applied` (an array of versions) can be taken up by
 * this build: every version is one this build has (else TK_EINVAL: it comes
 * from a newer tusko, err names the first unknown one). */
tk_status app_schema_check_known(const json_t *applied, char *err, size_t errlen);

#endif
