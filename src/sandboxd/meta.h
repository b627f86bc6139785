/*
 * meta.h — a sandbox's metadata: keys and values (Kubernetes label rules),
 * whole objects, and the list filter's metadata query. Pure functions over
 * untrusted strings; no allocation except where a prototype says so.
 */
#ifndef SBX_META_H
#define SBX_META_H

#include <jansson.h>
#include <stddef.h>

#include "lib/arena.h"
#include "lib/common.h"

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
