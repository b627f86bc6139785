/*
 * migrate.h — schema migrations: numbered SQL files ("0001_users.sql", ...)
 * applied in name order, each once, each in a transaction of its own together
 * with the row in schema_migrations that records it.
 *
 * - One transaction each: a migration either happened and is recorded, or did
 *   not happen. A migration that fails (or a process killed half-way) leaves
 *   the ones before it applied and itself not; running again goes on from
 *   there. A migration's text must not end the transaction itself (COMMIT,
 *   ROLLBACK): that is refused, and it is rolled back.
 * - One process at a time: the whole run holds a session advisory lock, so two
 *   instances starting at once never both migrate; the second waits and then
 *   finds nothing to do.
 * - Migrations that hold a lock stopping chat while they work through a table
 *   (an index build, a rewrite, an UPDATE of every row) say so in a comment line
 *
 *       -- locks: events, messages
 *
 *   naming the tables. At start-up (opts->at_start) such a pending migration is
 *   applied only when each table it names holds at most TK_MIGRATE_SMALL_ROWS
 *   rows; otherwise nothing is applied and the answer is TK_EDENIED with a
 *   message saying to run `tusko migrate` first. tests/unit/app/
 *   test_migrations.c checks every migration's declaration against what it
 *   does (docs/OPERATIONS.md, "Upgrades").
 */
#ifndef TK_MIGRATE_H
#define TK_MIGRATE_H

#include <libpq-fe.h>
#include <stddef.h>

#include "lib/common.h"
#include "lib/embed.h"

/* A table this small is locked for a moment only, even by a migration that
 * works through it: such a migration may run at start-up. */
#define TK_MIGRATE_SMALL_ROWS 10000
/* The tables one migration may declare, and the longest name. */
#define TK_MIGRATE_MAX_LOCKS 8
#define TK_MIGRATE_NAME_MAX  64

typedef struct {
    /* start-up (tusko serve): refuse locking migrations on tables over
     * TK_MIGRATE_SMALL_ROWS, and wait at most lock_timeout_ms for a lock */
    int at_start;
    int lock_timeout_ms; /* 0: no limit */
} tk_migrate_opts;

/* Applies the pending migrations of `files` (sorted by name, ending with a NULL
 * name). *applied counts those applied, also when a later one failed. TK_OK;
 * TK_EDENIED (at start-up, a locking migration on a large table: nothing was
 * applied; err says which and what to do); TK_ERROR (err names the migration
 * and Postgres's message). opts NULL: everything, no lock timeout. */
tk_status tk_migrate(PGconn *c, const struct tk_embed_file *files, const tk_migrate_opts *opts,
                     int *applied, char *err, size_t errlen);

/* The tables a migration declares with "-- locks:" lines, into names (up to
 * TK_MIGRATE_MAX_LOCKS); returns how many, or -1 for a malformed line. */
int tk_migrate_locks(const struct tk_embed_file *f, char names[][TK_MIGRATE_NAME_MAX]);

/* 1 (its keyword into word) when sql has a statement that controls the
 * transaction itself (BEGIN, COMMIT, ROLLBACK, END, SAVEPOINT, VACUUM …);
 * function bodies, strings and comments are skipped. tk_migrate refuses such
 * a migration before running it. */
int tk_migrate_transaction_control(const char *sql, size_t n, char *word, size_t wlen);

/* One migration's state, for `tusko migrate --status`. */
typedef struct {
    const char *name;
    int applied;
    int nlocks;
    char locks[TK_MIGRATE_MAX_LOCKS][TK_MIGRATE_NAME_MAX];
    long long rows[TK_MIGRATE_MAX_LOCKS]; /* rows in each (at most SMALL+1 counted), -1: no table */
} tk_migration_state;

/* Fills states[i] for every file (states has room for all of them); returns
 * how many, or -1 with err on a database error. */
int tk_migrate_status(PGconn *c, const struct tk_embed_file *files, tk_migration_state *states,
                      char *err, size_t errlen);

#endif
