/*
 * pgtool.h — running Postgres's own programs (pg_dump, pg_restore) for tusko
 * backup and restore: found beside the server's version, given the database
 * through the environment (never on the command line, where `ps` would show
 * the password), no shell in between.
 */
#ifndef APP_PGTOOL_H
#define APP_PGTOOL_H

#include <libpq-fe.h>
#include <stddef.h>

#include "lib/buf.h"
#include "lib/common.h"

/* The server's major version (15 for 15.4), or -1. */
int app_pgtool_server_major(PGconn *c);

/* The path of tool `name` (pg_dump, pg_restore) into out: PG_BINDIR/name when
 * set, else /usr/lib/postgresql/<major>/bin/name when present, else `name`
 * (looked up on the PATH). Then checks its version (`name --version`) is at
 * least the server's major: TK_EINVAL with a message saying which is which,
 * TK_ERROR when it cannot be run. version gets its --version line. */
tk_status app_pgtool_find(const char *name, int server_major, char *out, size_t outlen,
                          char *version, size_t vlen, char *err, size_t errlen);

/* Runs argv (argv[0] a path from app_pgtool_find) with the connection of
 * DATABASE_URL in PG* variables, stdin from /dev/null, stdout to out_fd (-1:
 * /dev/null), stderr into `errout` (capped: its first 8 KiB). Returns the
 * exit status (0 is success), or -1 when it could not be started. */
int app_pgtool_run(char *const argv[], int out_fd, tk_buf *errout);

/* SHA-256 of a file as 64 hex digits, and its size; TK_ERROR (errno set). */
tk_status app_sha256_file(const char *path, char hex[65], uint64_t *size);

#endif
