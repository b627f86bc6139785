/*
 * limits.h — parsing and validation of what a create request carries: resource
 * quantities (cpu "500m", memory "512Mi", pids "256"), environment names,
 * metadata keys and values (Kubernetes label rules) and the list filter's
 * metadata query. Pure functions over untrusted strings; no allocation except
 * where a prototype says so.
 */
#ifndef SBX_LIMITS_H
#define SBX_LIMITS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/arena.h"
#include "lib/common.h"

/* The resource limits of one sandbox. */
typedef struct {
    int64_t memory_bytes; /* memory (and tmpfs pages written) the sandbox may use */
    int64_t cpu_millis;   /* CPU bandwidth in thousandths of a core (1000 = 1 core) */
    int64_t pids;         /* processes and threads at once */
} sbx_limits;

/* Kubernetes-style quantities. "500m" → 500, "1" → 1000, "0.25" → 250, "2.5" → 2500.
 * TK_EINVAL on anything else (negative, empty, junk, more than 3 decimals). */
tk_status sbx_parse_cpu(const char *s, int64_t *millis);
/* Bytes: "512Mi", "1Gi", "1G", "100M", "1k", "1048576"; binary (Ki..Ei) and decimal
 * (k, K, M, G, T, P, E) suffixes; also lower-case "m"/"g" as binary for settings
 * ("1g"). TK_EINVAL on junk, TK_ETOOBIG past INT64_MAX. */
tk_status sbx_parse_bytes(const char *s, int64_t *bytes);

/* Bounds applied to a request's limits. */
typedef struct {
    sbx_limits def; /* used for keys the request leaves out */
    sbx_limits min;
    sbx_limits max;
} sbx_limit_policy;

/* Reads a resourceLimits object (NULL: all defaults) into out. Keys: cpu, memory,
 * pids; "gpu" "0" is accepted, any other gpu count and any other key are refused.
 * On TK_EINVAL msg says which key and why. */
tk_status sbx_limits_from_json(const json_t *obj, const sbx_limit_policy *pol, sbx_limits *out,
                               char *msg, size_t msglen);

/* An environment variable name: [A-Za-z_][A-Za-z0-9_]*, at most 255 bytes. */
int sbx_env_name_valid(const char *s);

/* Metadata keys: an optional DNS-subdomain prefix and '/', then a name of at most
 * 63 characters [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?. The prefix
 * "opensandbox.io/" is reserved. Values: at most 63 characters of the same
 * alphabet (empty allowed). Returns 1 when valid, else 0 with a reason in msg. */
int sbx_meta_key_valid(const char *k, char *msg, size_t msglen);
int sbx_meta_value_valid(const char *v, char *msg, size_t msglen);

/* Checks a whole metadata object (values must be strings; at most 64 keys). */
tk_status sbx_meta_check(const json_t *obj, char *msg, size_t msglen);

/*
 * The list filter "metadata" parameter, already percent-decoded once by the HTTP
 * layer: "project=Apollo&note=Demo%20Test" — pairs joined by '&', each value
 * percent-decoded once more. Pairs go into a (arena-owned arrays). A pair without
 * '=' matches on the key's presence (value NULL).
 */
tk_status sbx_meta_filter_parse(tk_arena *a, const char *s, const char ***keys,
                                const char ***values, size_t *n);
/* Non-zero when metadata (an object of strings) holds every pair. */
int sbx_meta_matches(const json_t *metadata, const char *const *keys, const char *const *values,
                     size_t n);

#endif
