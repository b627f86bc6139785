/*
 * pg.h — a Postgres connection pool over libpq, and schema migrations.
 *
 * The pool opens connections on demand up to `size`; tk_pg_acquire waits for a
 * free one (or until timeout) and replaces a connection found broken. Use one
 * connection per unit of work and give it back:
 *
 *   PGconn *c = tk_pg_acquire(pool, 5000);
 *   PGresult *r = tk_pg_query(c, "select id from users where email = $1", 1, (const char*[]){e});
 *   ...
 *   PQclear(r);
 *   tk_pg_release(pool, c);
 *
 * Migrations: see migrate.h (tk_pg_migrate is tk_migrate without options).
 */
#ifndef TK_PG_H
#define TK_PG_H

#include <libpq-fe.h>

#include "lib/buf.h"
#include "lib/common.h"
#include "lib/embed.h"

typedef struct tk_pg_pool tk_pg_pool;

/* Connects once to check the settings; NULL with a message on failure. */
tk_pg_pool *tk_pg_pool_new(const char *conninfo, int size, char *err, size_t errlen);
void tk_pg_pool_free(tk_pg_pool *p);
/* NULL when no connection could be had within timeout_ms. */
PGconn *tk_pg_acquire(tk_pg_pool *p, int timeout_ms);
void tk_pg_release(tk_pg_pool *p, PGconn *c);

/* PQexecParams with text parameters. Returns the result (never NULL); check it
 * with tk_pg_ok. Logs failures with the statement's first words. */
PGresult *tk_pg_query(PGconn *c, const char *sql, int nparams, const char *const *params);
/* 1 when r is a command or tuples result. */
int tk_pg_ok(const PGresult *r);
/* Runs a statement and reports only success (TK_OK) or failure. */
tk_status tk_pg_exec(PGconn *c, const char *sql, int nparams, const char *const *params);
/* The SQLSTATE of a failed result, or "". */
const char *tk_pg_sqlstate(const PGresult *r);

/* Appends one element of a Postgres array literal ("{a,b}") to b: a comma
 * first unless first, then s double-quoted with '"' and '\\' escaped, or NULL
 * (unquoted) when s is NULL. The caller writes the braces. TK_ETOOBIG past
 * b's cap. */
tk_status tk_pg_array_elem(tk_buf *b, const char *s, int first);

/* Applies pending migrations from `files` (sorted by name), each in its own
 * transaction; *applied counts them. tk_migrate (migrate.h) with no options. */
tk_status tk_pg_migrate(PGconn *c, const struct tk_embed_file *files, int *applied, char *err,
                        size_t errlen);

#endif
