/* SKILL.md: the front matter of a skill in the open SKILL.md format.
 *
 * A SKILL.md is UTF-8 text without NUL bytes that starts with a line "---",
 * then YAML front matter, then a line "---", then the Markdown body. The front
 * matter is read with a small YAML subset (see docs/SKILLS.md): top-level
 * `key: value` lines; plain, 'single' and "double" quoted scalars; block
 * scalars (| and >, with - or + chomping); one level of `key: value` map or
 * `- item` list under a key; comments and blank lines. Anchors, aliases, tags,
 * flow collections ({} []) and tabs in indentation are refused.
 *
 * Keys of the format: name (required, 1-64 characters of a-z 0-9 and single
 * hyphens, neither first nor last, equal to the folder's name when one is
 * given), description (required, 1-1024 characters), license, compatibility
 * (1-500 characters), metadata (a map of string to string), allowed-tools
 * (a string of space-separated tools; a list is joined with spaces). Any
 * other top-level key is kept in `extra` and reported in `warnings`.
 * Lengths are counted in characters (code points). */
#ifndef TK_SKILLMD_H
#define TK_SKILLMD_H

#include <stddef.h>

#include "lib/common.h"

#define TK_SKILL_NAME_MAX        64
#define TK_SKILL_DESCRIPTION_MAX 1024
#define TK_SKILL_COMPAT_MAX      500
#define TK_SKILL_FRONT_MAX       65536 /* bytes of front matter */
#define TK_SKILL_ENTRIES_MAX     128   /* keys, map entries or list items under one key */

typedef struct {
    char *key;
    char *value; /* a scalar; for an extra key holding a map or a list, its lines as written */
} tk_skill_kv;

typedef struct {
    char *name;
    char *description;
    char *license;       /* NULL when absent */
    char *compatibility; /* NULL when absent */
    char *allowed_tools; /* NULL when absent */
    tk_skill_kv *metadata;
    size_t n_metadata;
    tk_skill_kv *extra; /* keys outside the format, kept */
    size_t n_extra;
    char **warnings;
    size_t n_warnings;
    size_t body_off; /* the body is s[body_off..n) */
} tk_skill_md;

/* 1 if s[0..n) is a valid skill name. */
int tk_skillmd_name_valid(const char *s, size_t n);

/* Parse s[0..n). folder, when not NULL, is the name of the skill's folder,
 * which the name must equal. TK_OK and *out filled (free with
 * tk_skillmd_free), or TK_EINVAL with the rule that failed in err and *out
 * zeroed. */
tk_status tk_skillmd_parse(const char *s, size_t n, const char *folder, tk_skill_md *out, char *err,
                           size_t errsz);
void tk_skillmd_free(tk_skill_md *md);

#endif
