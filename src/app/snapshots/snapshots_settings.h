/*
 * snapshots_settings.h — the object store's and the snapshots' settings
 * (S3_*, SNAPSHOT_*; docs/SNAPSHOTS.md): the struct they fill and the rows for
 * the program's settings table. S3_ENDPOINT unset: snapshots are off.
 */
#ifndef APP_SNAPSHOTS_SETTINGS_H
#define APP_SNAPSHOTS_SETTINGS_H

#include <stdint.h>

#include "lib/config.h"

typedef struct {
    char *endpoint;        /* S3_ENDPOINT; NULL: snapshots are off */
    char *region;          /* S3_REGION */
    char *bucket;          /* S3_BUCKET */
    char *prefix;          /* S3_PREFIX */
    char *access_key;      /* S3_ACCESS_KEY_ID */
    char *secret_key;      /* S3_SECRET_ACCESS_KEY */
    char *path_style;      /* S3_FORCE_PATH_STYLE: auto, true or false */
    int64_t part_mib;      /* S3_PART_SIZE in MiB */
    int64_t multipart_mib; /* S3_MULTIPART_THRESHOLD in MiB */
    int64_t max_attempts;  /* S3_MAX_ATTEMPTS */
    int64_t timeout_ms;    /* S3_TIMEOUT: one request */
    int64_t keep_last;     /* SNAPSHOT_KEEP_LAST */
    int64_t max_age_ms;    /* SNAPSHOT_MAX_AGE */
    int64_t max_mib;       /* SNAPSHOT_MAX_SIZE in MiB (the archive, and a restore's files) */
    int before_reap;       /* SNAPSHOT_BEFORE_REAP */
} snapshots_config;

int snapshots_store_check_path_style(const char *v, char *msg, size_t msglen);

/* clang-format off */
#define SNAPSHOTS_SETTINGS(c)                                                                      \
    {"S3_ENDPOINT", "s3-endpoint", TK_SET_STR, NULL,                                               \
     "the S3-compatible store for workspace snapshots (https://s3.eu-west-1.amazonaws.com, "      \
     "http://minio:9000); unset: snapshots are off", .out = &(c).endpoint,                        \
     .check = tk_config_check_url},                                                                \
    {"S3_REGION", "s3-region", TK_SET_STR, "us-east-1", "the store's region (signs requests)",   \
     .out = &(c).region},                                                                          \
    {"S3_BUCKET", "s3-bucket", TK_SET_STR, NULL, "the bucket snapshots go into",                  \
     .out = &(c).bucket},                                                                          \
    {"S3_PREFIX", "s3-prefix", TK_SET_STR, "tusko",                                                \
     "the key prefix: objects are <prefix>/<user>/<chat>/<time>-<id>.tar.gz",                    \
     .out = &(c).prefix},                                                                          \
    {"S3_ACCESS_KEY_ID", "s3-access-key-id", TK_SET_STR, NULL, "the store's access key id",       \
     .out = &(c).access_key},                                                                      \
    {"S3_SECRET_ACCESS_KEY", NULL, TK_SET_STR, NULL, "the store's secret access key",             \
     .flags = TK_SET_SECRET, .out = &(c).secret_key},                                              \
    {"S3_FORCE_PATH_STYLE", "s3-force-path-style", TK_SET_STR, "auto",                            \
     "path-style URLs (endpoint/bucket/key): auto (on unless the endpoint is amazonaws.com), "    \
     "true or false", .out = &(c).path_style, .check = snapshots_store_check_path_style},               \
    {"S3_PART_SIZE", "s3-part-size", TK_SET_INT, "16",                                             \
     "MiB per part of a multipart upload", .min = 5, .max = 5120, .out = &(c).part_mib},          \
    {"S3_MULTIPART_THRESHOLD", "s3-multipart-threshold", TK_SET_INT, "64",                         \
     "MiB from which a snapshot goes up as a multipart upload (below: one PutObject)",            \
     .min = 5, .max = 5120, .out = &(c).multipart_mib},                                            \
    {"S3_MAX_ATTEMPTS", "s3-max-attempts", TK_SET_INT, "4",                                        \
     "tries per request to the store (retries on 5xx and network errors)", .min = 1, .max = 10,   \
     .out = &(c).max_attempts},                                                                    \
    {"S3_TIMEOUT", "s3-timeout", TK_SET_DURATION, "10m", "the longest one request may take",     \
     .min = 1000, .max = 24 * 3600 * 1000LL, .out = &(c).timeout_ms},                             \
    {"SNAPSHOT_KEEP_LAST", "snapshot-keep-last", TK_SET_INT, "5",                                  \
     "snapshots kept per chat (the newest is always kept)", .min = 1, .max = 1000,                \
     .out = &(c).keep_last},                                                                       \
    {"SNAPSHOT_MAX_AGE", "snapshot-max-age", TK_SET_DURATION, "30d",                               \
     "snapshots older than this are deleted (except a chat's newest)", .min = 60 * 1000,          \
     .max = 3650 * 24 * 3600 * 1000LL, .out = &(c).max_age_ms},                                    \
    {"SNAPSHOT_MAX_SIZE", "snapshot-max-size", TK_SET_INT, "2048",                                 \
     "MiB: the largest snapshot archive taken, and the most a restore may write", .min = 1,      \
     .max = 1024 * 1024, .out = &(c).max_mib},                                                     \
    {"SNAPSHOT_BEFORE_REAP", "snapshot-before-reap", TK_SET_BOOL, "false",                         \
     "snapshot a chat's workspace before its idle sandbox is reaped (not done yet: read and "     \
     "ignored, see docs/SNAPSHOTS.md)", .out = &(c).before_reap}
/* clang-format on */

#endif
