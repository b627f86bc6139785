/*
 * s3.h — a small client of S3-compatible object stores (AWS S3, MinIO and its
 * forks, Ceph RGW, Garage, R2 ...) over libcurl, signed with SigV4.
 *
 * libcurl 7.88 (Debian 12) signs with CURLOPT_AWS_SIGV4 "aws:amz:<region>:s3"
 * but adds no x-amz-content-sha256, signs a streamed body as empty, and signs
 * the query string exactly as written. So every request here carries
 * x-amz-content-sha256 with the hex SHA-256 of its body (computed before the
 * request, bodies are files read with pread or small buffers), and every URL is
 * built canonical: keys percent-encoded except unreserved bytes and '/', query
 * parameters sorted by name, encoded, and a value-less one written "name=".
 *
 * Every request is retried on a 5xx answer or a network error, up to
 * max_attempts in all, with a doubling pause (a streamed GetObject only while
 * nothing has been handed to the caller). Every response body that is parsed
 * (XML: errors, listings, upload ids) is capped at TK_S3_XML_MAX.
 * The secret key never leaves this file except into libcurl's signer.
 *
 *   tk_s3 *s3 = tk_s3_new(&cfg, err, sizeof err);
 *   tk_s3_result r;
 *   tk_s3_put_fd(s3, "p/a.tar.gz", fd, size, sha256_hex, meta, "application/gzip", &r);
 */
#ifndef TK_S3_H
#define TK_S3_H

#include <stddef.h>
#include <stdint.h>

#include "lib/common.h"

#define TK_S3_XML_MAX   (1u << 20) /* an XML answer parsed (a listing page is ~300 KiB) */
#define TK_S3_KEY_MAX   1024       /* S3's own limit on a key, in bytes */
#define TK_S3_MIN_PART  (5ll << 20)
#define TK_S3_MAX_PARTS 10000

typedef struct {
    const char *endpoint; /* http(s)://host[:port][/base], no query */
    const char *region;   /* e.g. us-east-1 */
    const char *bucket;
    const char *access_key; /* access key id */
    const char *secret_key;
    int path_style;        /* 1: endpoint/bucket/key; 0: bucket.host/key */
    int64_t part_size;     /* multipart part size in bytes (>= 5 MiB) */
    int64_t multipart_min; /* objects at least this big go up in parts */
    int max_attempts;      /* tries per request, >= 1 */
    long timeout_ms;       /* per request; 0: none (a stalled transfer still ends) */
    long retry_pause_ms;   /* first pause between tries (doubled each time); 0: 200 ms */
} tk_s3_config;

typedef struct tk_s3 tk_s3;

/* The outcome of a call: status is the last HTTP status (0 with no answer);
 * code and message come from the store's <Error> (or name the network error). */
typedef struct {
    long status;
    char code[64];
    char message[256];
    char etag[128];
    int attempts; /* requests sent for the call, retries included */
} tk_s3_result;

/* NULL with err on a bad configuration (missing field, part size out of range,
 * endpoint not http(s)). The strings are copied. */
tk_s3 *tk_s3_new(const tk_s3_config *cfg, char *err, size_t errlen);
void tk_s3_free(tk_s3 *s3);

/* Each returns TK_OK on a 2xx answer, TK_ENOENT on 404 (GetObject, HeadObject),
 * TK_EINVAL for a bad key, TK_ETOOBIG for an answer over a cap, TK_ERROR
 * otherwise; r (never NULL) says why. */

/* PutObject of a small buffer (x-amz-content-sha256 computed here). */
tk_status tk_s3_put(tk_s3 *s3, const char *key, const void *data, size_t len,
                    const char *content_type, const char *const *meta, tk_s3_result *r);
/* Uploads size bytes of fd (read with pread from offset 0, so it may be retried):
 * one PutObject below multipart_min, else a multipart upload whose every part
 * carries its own SHA-256; a multipart upload that fails is aborted. sha256_hex
 * is the whole body's hash (the PutObject's payload hash). meta: NULL-terminated
 * "name: value" pairs sent as x-amz-meta-<name>. */
tk_status tk_s3_put_fd(tk_s3 *s3, const char *key, int fd, int64_t size, const char *sha256_hex,
                       const char *content_type, const char *const *meta, tk_s3_result *r);

/* Multipart steps (tk_s3_put_fd uses them): upload_id gets the store's id. */
tk_status tk_s3_multipart_create(tk_s3 *s3, const char *key, const char *content_type,
                                 const char *const *meta, char *upload_id, size_t idlen,
                                 tk_s3_result *r);
/* Part part_no (1..10000) = len bytes of fd at off; etag (the store's) into r->etag. */
tk_status tk_s3_multipart_part(tk_s3 *s3, const char *key, const char *upload_id, int part_no,
                               int fd, int64_t off, int64_t len, tk_s3_result *r);
tk_status tk_s3_multipart_complete(tk_s3 *s3, const char *key, const char *upload_id,
                                   char *const *etags, int nparts, tk_s3_result *r);
tk_status tk_s3_multipart_abort(tk_s3 *s3, const char *key, const char *upload_id, tk_s3_result *r);

/* GetObject, handed to on_data as it arrives (non-zero from on_data stops it,
 * TK_AGAIN); more than max_bytes (0: no cap) is TK_ETOOBIG. meta_sha256 (may be
 * NULL, 65 bytes) gets the object's x-amz-meta-sha256 when it has one. */
tk_status tk_s3_get(tk_s3 *s3, const char *key, int64_t max_bytes,
                    int (*on_data)(const char *data, size_t len, void *ud), void *ud,
                    char *meta_sha256, tk_s3_result *r);
tk_status tk_s3_delete(tk_s3 *s3, const char *key, tk_s3_result *r);

typedef struct {
    char *key;
    int64_t size;
    char last_modified[40]; /* as the store wrote it (ISO 8601) */
} tk_s3_object;

typedef struct {
    tk_s3_object *items;
    size_t n;
    int truncated;
    char *next_token; /* NextContinuationToken, NULL when none */
} tk_s3_list;

/* One page of ListObjectsV2 (max_keys 1..1000; token NULL for the first page). */
tk_status tk_s3_list_objects(tk_s3 *s3, const char *prefix, const char *token, int max_keys,
                             tk_s3_list *out, tk_s3_result *r);
void tk_s3_list_free(tk_s3_list *l);

typedef struct {
    char *key;
    char *upload_id;
    char initiated[40];
} tk_s3_upload;

typedef struct {
    tk_s3_upload *items;
    size_t n;
    int truncated;
    char *next_key_marker, *next_upload_id_marker;
} tk_s3_uploads;

/* One page of ListMultipartUploads under prefix. */
tk_status tk_s3_list_uploads(tk_s3 *s3, const char *prefix, const char *key_marker,
                             const char *upload_id_marker, tk_s3_uploads *out, tk_s3_result *r);
void tk_s3_uploads_free(tk_s3_uploads *u);

/* --- the XML answers (input from the network; exposed for tests and fuzzing) --- */

/* <Error><Code>..</Code><Message>..</Message></Error>: TK_OK when one was found. */
tk_status tk_s3_parse_error(const char *xml, size_t len, char *code, size_t codelen, char *message,
                            size_t msglen);
tk_status tk_s3_parse_list(const char *xml, size_t len, tk_s3_list *out);
tk_status tk_s3_parse_uploads(const char *xml, size_t len, tk_s3_uploads *out);
/* The text of the first <name> element (entities decoded) into out: TK_ENOENT
 * when absent, TK_ETOOBIG when it does not fit, TK_EINVAL for bad XML text. */
tk_status tk_s3_xml_text(const char *xml, size_t len, const char *name, char *out, size_t outlen);

/* Percent-encodes s for a URL path (keep_slash) or a query value into out. */
tk_status tk_s3_encode(const char *s, int keep_slash, char *out, size_t outlen);
/* Hex SHA-256 (65 bytes) of a buffer. */
void tk_s3_sha256_hex(const void *data, size_t len, char out[65]);

#endif
