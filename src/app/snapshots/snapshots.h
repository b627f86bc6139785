/*
 * snapshots.h — workspace snapshots to an S3-compatible store (docs/SNAPSHOTS.md).
 *
 * At start-up (snapshots_start) the store configured by S3_* is checked once
 * with ListObjectsV2 max-keys=1 in the background: a failure is one log line
 * and the feature off (snapshots_enabled() 0, the API answers 503
 * SNAPSHOTS_OFF), never a crash. Then this prefix's multipart uploads older
 * than a day are aborted (left by a process that died mid-upload).
 */
#ifndef APP_SNAPSHOTS_SNAPSHOTS_H
#define APP_SNAPSHOTS_SNAPSHOTS_H

#include <stddef.h>

#include "app/snapshots/snapshots_settings.h"
#include "lib/common.h"
#include "lib/s3.h"

/* The S3_* and SNAPSHOT_* rows, kept here (tusko's main loads them with the
 * settings table of app/settings.c); snapshots_cfg() holds what they load. */
tk_setting *snapshots_settings(size_t *n);
void snapshots_settings_free(void);

tk_status snapshots_start(char *err, size_t errlen);
void snapshots_stop(void);
/* 1 once the store answered the start-up check. */
int snapshots_enabled(void);
/* Why the feature is off ("" when on or not yet checked). */
const char *snapshots_off_reason(void);
/* The store's client (NULL when off); owned by this module. */
tk_s3 *snapshots_store(void);
const snapshots_config *snapshots_cfg(void);

/* Aborts the multipart uploads under prefix started more than older_ms ago;
 * returns how many were aborted, -1 when the store would not list them. */
int snapshots_abort_stale(tk_s3 *s3, const char *prefix, int64_t older_ms);

#endif
