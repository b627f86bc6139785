/*
 * limits.h — a sandbox's resource limits and the quantities a request gives
 * them in (cpu "500m", memory "512Mi", pids "256"). Pure functions over
 * untrusted strings. (Metadata rules are in meta.h, environment names in
 * env.h.)
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
tk_status sbx_limits_parse_cpu(const char *s, int64_t *millis);
/* Bytes: "512Mi", "1Gi", "1G", "100M", "1k", "1048576"; binary (Ki..Ei) and decimal
 * (k, K, M, G, T, P, E) suffixes; also lower-case "m"/"g" as binary for settings
 * ("1g"). TK_EINVAL on junk, TK_ETOOBIG past INT64_MAX. */
tk_status sbx_limits_parse_bytes(const char *s, int64_t *bytes);

/* Bounds applied to a request's limits. */
typedef struct {
    sbx_limits def; /* used for keys the request leaves out */
    sbx_limits min;
    sbx_limits max;
} sbx_limits_policy;

/* Reads a resourceLimits object (NULL: all defaults) into out. Keys: cpu, memory,
 * pids; "gpu" "0" is accepted, any other gpu count and any other key are refused.
 * On TK_EINVAL msg says which key and why. */
tk_status sbx_limits_from_json(const json_t *obj, const sbx_limits_policy *pol, sbx_limits *out,
                               char *msg, size_t msglen);

#endif
