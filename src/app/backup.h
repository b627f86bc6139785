/*
 * backup.h — `tusko backup` and `tusko restore` (docs/OPERATIONS.md, "Backup
 * and restore").
 *
 * A backup is one tar archive (lib/tar.h), written while tusko serves:
 *
 *   manifest.json          format, tusko's version, the schema (the applied
 *                          migrations), Postgres's and pg_dump's versions, the
 *                          rows of every table, every member with its size and
 *                          SHA-256, the data kinds and whether each was present
 *   database.dump          pg_dump --format=custom of the whole database, taken
 *                          in the snapshot the manifest was read in (downloads,
 *                          memories, documents… are all rows: they are in it)
 *   data/<kind>/<path>     the files of each data kind kept outside Postgres,
 *                          under TUSKO_DATA_DIR/<kind>/ (today: skills/, the
 *                          user-installed skills, which may not exist yet)
 *
 * A new kind of data kept in files is one row of kinds[] in backup.c: backups
 * and restores carry it from then on, and a restore by an older tusko refuses
 * an archive holding a kind it does not know.
 *
 * A restore reads the manifest first, refuses a format, schema or kind this
 * build does not know, a non-empty target (database or data folders) unless
 * --force, and any other connection to the database; then extracts every
 * member checking its size and SHA-256 against the manifest, before anything
 * of the target is touched; then pg_restore in one transaction, the row counts
 * checked against the manifest, the data folders moved into place, and the
 * schema migrated to this build.
 */
#ifndef APP_BACKUP_H
#define APP_BACKUP_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* A kind of data kept in files, under TUSKO_DATA_DIR/<name>/ (the archive's
 * data/<name>/). */
typedef struct {
    const char *name;
    const char *what; /* for messages: "user-installed skills" */
} app_backup_kind;

/* Every kind this build backs up and restores. */
const app_backup_kind *app_backup_kinds(size_t *n);

/* The archive's format and its version (manifest "format", "format_version"). */
#define APP_BACKUP_FORMAT         "tusko-backup"
#define APP_BACKUP_FORMAT_VERSION 1
/* The largest manifest a restore reads. */
#define APP_BACKUP_MANIFEST_MAX (16 << 20)

/* `tusko backup [--out FILE] [--schedule]`: the exit status. */
int app_cli_backup(int argc, char **argv);
/* `tusko restore FILE [--force]`: the exit status. */
int app_cli_restore(int argc, char **argv);

/* mkdir -p: path and the folders above it (new ones with mode); -1 (errno). */
int app_backup_mkdir_p(const char *path, unsigned mode);

/* Whether `name` is the name of a scheduled backup: tusko-YYYYMMDDTHHMMSSZ.tar */
int app_backup_is_scheduled_name(const char *name);

#endif
