/*
 * json.h — small helpers over jansson.
 *
 * Parsing untrusted input: tk_json_parse refuses duplicate keys, input past
 * max_len and documents nested deeper than TK_JSON_MAX_DEPTH.
 * Getters return NULL / a default when the key is absent or of the wrong type, so
 * handlers can validate with one check each.
 */
#ifndef TK_JSON_H
#define TK_JSON_H

#include <jansson.h>
#include <stdint.h>

#include "lib/buf.h"
#include "lib/common.h"

#define TK_JSON_MAX_DEPTH 64

/* Parses len bytes. On failure returns NULL and writes a message to err. */
json_t *tk_json_parse(const char *data, size_t len, size_t max_len, char *err, size_t errlen);

const char *tk_json_str(const json_t *obj, const char *key);
/* The string, or def when absent or not a string. */
const char *tk_json_str_or(const json_t *obj, const char *key, const char *def);
/* TK_OK and *out when key holds an integer (a real with no fraction is accepted);
 * TK_ENOENT when absent; TK_EINVAL when of another type. */
tk_status tk_json_int(const json_t *obj, const char *key, int64_t *out);
int64_t tk_json_int_or(const json_t *obj, const char *key, int64_t def);
/* 1/0 for true/false, def when absent or not a boolean. */
int tk_json_bool_or(const json_t *obj, const char *key, int def);

/* Serialises compactly into b (appending). TK_ETOOBIG past b's cap. */
tk_status tk_json_dump_buf(const json_t *j, tk_buf *b);
/* Serialises compactly into a new heap string. */
char *tk_json_dumps(const json_t *j);

/* Appends n bytes of s as a JSON string: quoted, with '"', '\\' and the
 * control characters escaped (\n \r \t, the others as \u00XX) and every other
 * byte as it is (s is expected to be UTF-8 already). Faster than building a
 * json_t for a string that is written once. TK_ETOOBIG past b's cap (b then
 * holds a prefix). */
tk_status tk_json_quote(tk_buf *b, const char *s, size_t n);

/* Builds an object from pairs: tk_json_obj("a", json_string("x"), "b", json_integer(1), NULL).
 * Steals the references; a NULL value is skipped. */
json_t *tk_json_obj(const char *key, ...);

#endif
