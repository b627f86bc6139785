/*
 * query.h — parsing of request targets: percent-decoding, path segments and
 * query strings. These see raw bytes from the network: every function caps what
 * it accepts and refuses what it cannot represent safely (NUL, bad escapes).
 */
#ifndef TK_QUERY_H
#define TK_QUERY_H

#include <stddef.h>

#include "lib/arena.h"
#include "lib/buf.h"
#include "lib/common.h"

#define TK_QUERY_MAX_ITEMS   128
#define TK_PATH_MAX_SEGMENTS 64

typedef struct {
    const char *name;
    const char *value; /* "" for a bare "name" */
} tk_kv;

/*
 * Decodes %XX escapes (and '+' as a space when plus_space). Refuses a bad escape
 * and an encoded or raw NUL (TK_EINVAL). The result is NUL-terminated, in `a`.
 */
tk_status tk_percent_decode(tk_arena *a, const char *s, size_t len, int plus_space, char **out,
                            size_t *outlen);

/* Parses "a=1&b=x%20y" into at most max_items pairs (TK_ETOOBIG past it). */
tk_status tk_query_parse(tk_arena *a, const char *qs, size_t len, size_t max_items, tk_kv **items,
                         size_t *n);
/* First value of name, or NULL. */
const char *tk_query_get(const tk_kv *items, size_t n, const char *name);

/*
 * Splits an absolute path ("/v1/sandboxes/x") into decoded segments. Empty
 * segments from repeated or trailing slashes are dropped. Refuses paths that do
 * not start with '/', bad escapes, NUL, and more than TK_PATH_MAX_SEGMENTS.
 */
tk_status tk_path_split(tk_arena *a, const char *path, size_t len, char ***segs, size_t *n);

/*
 * Percent-encoding, for a query value or a path: the unreserved characters
 * (A-Z a-z 0-9 - . _ ~) and the bytes listed in keep (NULL or "" for none; "/"
 * keeps the slashes of a path) are kept, every other byte becomes %XX (upper
 * case hex). tk_percent_append appends s so encoded to b (TK_ETOOBIG past its
 * cap leaves b as it was); tk_percent_encode returns it in a, keeping nothing.
 */
tk_status tk_percent_append(tk_buf *b, const char *s, const char *keep);
char *tk_percent_encode(tk_arena *a, const char *s);

#endif
