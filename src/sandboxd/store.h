/*
 * store.h — the service's state on disk, for restarts (kill -9 included).
 *
 *   <state_dir>/            0700, root
 *     sandboxes/<id>/       0700: one folder a sandbox (pool members too)
 *       sandbox.json        the record (sbx_sandbox_record), replaced atomically
 *       execd.sock          the runtime's execd socket (native runtime)
 *
 * Records are written to sandbox.json.tmp and renamed over the old one, so a
 * crash leaves the old or the new record, never half of one.
 */
#ifndef SBX_STORE_H
#define SBX_STORE_H

#include <jansson.h>
#include <stddef.h>

#include "lib/common.h"

/* Makes <state_dir>/sandboxes (0700). */
tk_status sbx_store_init(const char *state_dir, char *err, size_t errlen);
/* Writes rec (borrowed) as the record of id, making its folder. */
tk_status sbx_store_save(const char *state_dir, const char *id, const json_t *rec, char *err,
                         size_t errlen);
/* Reads a record (new reference) or NULL with a message. */
json_t *sbx_store_load(const char *state_dir, const char *id, char *err, size_t errlen);
/* Removes the folder of id and every file in it. */
void sbx_store_remove(const char *state_dir, const char *id);
/* The ids that have a folder (heap array of heap strings). */
size_t sbx_store_list(const char *state_dir, char ***ids);

#endif
