/*
 * skill_bundle.h — an uploaded skill checked before anything is stored, and a
 * skill written out as a .skill (zip) file.
 *
 * An upload is a SKILL.md on its own, or a zip (.zip or .skill) holding
 * SKILL.md at its root or in one top folder (named as the skill). Refused,
 * each with the rule named:
 *   - more than SKILL_BUNDLE_UPLOAD_MAX bytes (20 MiB), more than
 *     SKILL_BUNDLE_ENTRIES_MAX entries (1,000), a file over
 *     SKILL_BUNDLE_FILE_MAX (10 MiB) or more than SKILL_BUNDLE_TOTAL_MAX
 *     (100 MiB) unpacked, declared or actual (inflation is bounded by the
 *     declared size: a zip bomb stops there);
 *   - entry names that are absolute, contain "..", ".", an empty component, a
 *     backslash, a NUL or control character, are not UTF-8, or are longer than
 *     1,024 bytes; a name whose local header differs from the directory's;
 *   - symlinks and any entry that is not a regular file or a folder (by its
 *     Unix mode), encrypted entries, zip64, methods other than stored and
 *     deflate, a CRC that does not match;
 *   - the same path twice; entries outside the one top folder; no SKILL.md;
 *   - a SKILL.md that breaks the format (tk_skillmd_parse, the folder's name
 *     as the name) or is not UTF-8.
 * `__MACOSX/` entries and `.DS_Store` files are left out.
 */
#ifndef APP_SKILL_BUNDLE_H
#define APP_SKILL_BUNDLE_H

#include <jansson.h>
#include <stddef.h>

#include "app/skills.h"
#include "lib/buf.h"
#include "lib/common.h"

#define SKILL_BUNDLE_UPLOAD_MAX  ((size_t)20 << 20)
#define SKILL_BUNDLE_TOTAL_MAX   ((size_t)100 << 20)
#define SKILL_BUNDLE_FILE_MAX    ((size_t)10 << 20)
#define SKILL_BUNDLE_ENTRIES_MAX 1000
#define SKILL_BUNDLE_PATH_MAX    1024

typedef struct {
    char name[TK_SKILL_NAME_MAX + 1];
    char *description;
    char *skill_md; /* SKILL.md's text */
    size_t skill_md_len;
    skills_file_ref *files; /* the other files, sorted by path; data owned */
    size_t nfiles;
    size_t bytes; /* SKILL.md and the files */
    char digest[SKILLS_DIGEST_HEX];
    json_t *warnings; /* array of strings (keys outside the format, kept) */
} skill_bundle;

/* Checks an upload (SKILL.md text, or a zip by its "PK\3\4" start) and fills
 * *out (free with skill_bundle_free). TK_OK, or TK_EINVAL with the rule in
 * err (nothing filled). */
tk_status skill_bundle_parse(const void *data, size_t len, skill_bundle *out, char *err,
                             size_t errsz);
void skill_bundle_free(skill_bundle *b);

/* A .skill file of a skill: a zip with one top folder named as the skill,
 * SKILL.md and every file, stored (no compression). Parsing it again gives the
 * same digest. */
tk_status skill_bundle_zip(const char *name, const char *skill_md, size_t md_len,
                           const skills_file_ref *files, size_t n, tk_buf *out);

#endif
