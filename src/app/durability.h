/*
 * durability.h — does the database keep what it acknowledges?
 *
 * Tusko's promises (a message whose POST was answered is stored, an event a
 * client saw is stored) hold across a crash of the machine only when Postgres
 * runs with fsync, synchronous_commit and full_page_writes on — its defaults.
 * `tusko serve` reads them at start and warns, naming each one that is off
 * (docs/OPERATIONS.md, "Durability").
 */
#ifndef APP_DURABILITY_H
#define APP_DURABILITY_H

#include <libpq-fe.h>
#include <stddef.h>

/* Writes the unsafe settings ("fsync=off synchronous_commit=off") into out
 * ("" when none) and returns how many there are; -1 when they could not be
 * read (out then says why). */
int app_durability_unsafe(PGconn *c, char *out, size_t outlen);

/* Logs a warning when the database runs with an unsafe setting (or the
 * settings cannot be read). */
void app_durability_check(PGconn *c);

#endif
