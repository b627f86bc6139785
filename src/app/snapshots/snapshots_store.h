/*
 * snapshots_store.h — the object store of the snapshots: a tk_s3 made from the
 * S3_* settings, and `tusko s3`, the operator's check of it.
 */
#ifndef APP_SNAPSHOTS_STORE_H
#define APP_SNAPSHOTS_STORE_H

#include "app/snapshots/snapshots_settings.h"
#include "lib/s3.h"

/* A client for the configured store; NULL with err when S3_ENDPOINT is unset
 * (TK_ENOENT in *why) or a setting is incomplete (TK_EINVAL). */
tk_s3 *snapshots_store_open(const snapshots_config *c, tk_status *why, char *err, size_t errlen);

/* Checks the store with one ListObjectsV2 max-keys=1 under the prefix. */
tk_status snapshots_store_check(tk_s3 *s3, const snapshots_config *c, char *err, size_t errlen);

/* `tusko s3 check | ls [PREFIX] | put KEY FILE | get KEY FILE | rm KEY | uploads [PREFIX]
 *  | abort KEY UPLOAD_ID`: exit 0 on success, 1 on a store error, 2 on bad usage. */
int snapshots_store_cli(int argc, char **argv, const snapshots_config *c);

#endif
