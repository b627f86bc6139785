/*
 * skills.h — the skills a user's turns may use (docs/SKILLS.md): the built-in
 * ones compiled into the binary from skills/ (read-only, their names
 * reserved), and the helpers the agent's skill tools and the system prompt's
 * catalogue share.
 *
 * Built-ins are parsed once at start (skills_init) with the strict SKILL.md
 * rules (tk_skillmd_parse, the folder's name as the name, no key outside the
 * format): a broken built-in stops the start with the file and the rule.
 *
 * A skill's files are everything in its folder but SKILL.md, by their path
 * relative to the folder ("scripts/build.py"); only a listed path can be read
 * (skills_file), so nothing outside a skill is reachable through it. Its
 * digest is the SHA-256 of the normalised bundle: for each file in byte order
 * of the paths, SKILL.md included, the path, a NUL, the size in decimal, a NUL
 * and the bytes.
 */
#ifndef APP_SKILLS_H
#define APP_SKILLS_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stddef.h>

#include "lib/common.h"
#include "lib/skillmd.h"

#define SKILLS_DIGEST_HEX 65 /* 64 hex digits and a NUL */

typedef struct {
    char *path; /* relative to the skill's folder */
    const unsigned char *data;
    size_t size;
} skills_file_ref;

typedef struct {
    char id[40]; /* a user's skill: skills.id; "" for a built-in */
    char name[TK_SKILL_NAME_MAX + 1];
    char *description;
    char *license, *compatibility, *allowed_tools; /* NULL when absent */
    json_t *metadata;                              /* an object of strings */
    char *skill_md;                                /* SKILL.md as written */
    size_t skill_md_len;
    char *body;             /* the Markdown after the front matter */
    skills_file_ref *files; /* sorted by path; SKILL.md not among them */
    size_t nfiles;
    char digest[SKILLS_DIGEST_HEX];
    int version;
    int builtin;
    int enabled;
    int shared;    /* an admin's skill for everyone */
    int mine;      /* the caller's own (a built-in is nobody's) */
    int owns_data; /* a user's skill whose files' data was loaded (skills_load_files) */
} skills_skill;

/* Parses the built-ins (tk_embed_skills). TK_OK, or TK_EINVAL with the
 * folder and the rule in err. Once, at start, before serving. */
tk_status skills_init(char *err, size_t errsz);
/* The same from another table (tests): the built-ins are replaced. */
struct tk_embed_file;
tk_status skills_init_table(const struct tk_embed_file *table, char *err, size_t errsz);
size_t skills_builtin_count(void);
const skills_skill *skills_builtin_at(size_t i);
const skills_skill *skills_builtin_find(const char *name);
/* 1 when a built-in has this name (no upload may take it). */
int skills_name_reserved(const char *name);

/* The skills of one user for one purpose (a turn's catalogue, a tool call):
 * an array of borrowed or owned skills. */
typedef struct {
    const skills_skill **v;
    unsigned char *on; /* whether v[i] is enabled for this user */
    size_t n;
    skills_skill *own; /* from the store: the user's own, and the skills admins
                          share with everyone (but those of a name the user has) */
    size_t nown;
} skills_set;

/* The skills user_id may use (blocking: c is a database connection, NULL for
 * the built-ins alone, all enabled), enabled ones only unless all; sorted by
 * name. Stored skills (the user's own and the shared ones) come with their
 * file list, not the files' data
 * (skills_load_files). NULL when the store failed. */
skills_set *skills_for_user(PGconn *c, const char *user_id, int all);
/* Loads the data of the files of sk (one of s's, a user's skill; a built-in
 * has it already). Blocking. */
tk_status skills_load_files(PGconn *c, skills_set *s, const skills_skill *sk);
/* The digest of a bundle (SKILL.md's text and the files, any order). */
void skills_digest(const char *skill_md, size_t md_len, const skills_file_ref *files, size_t n,
                   char out[SKILLS_DIGEST_HEX]);
const skills_skill *skills_set_find(const skills_set *s, const char *name);
/* Whether sk (one of s's) is enabled for the set's user. */
int skills_set_enabled(const skills_set *s, const skills_skill *sk);
void skills_set_free(skills_set *s);

/* The file path of skill sk (NULL when no such file: only listed paths). */
const skills_file_ref *skills_file(const skills_skill *sk, const char *path);

/* The catalogue for the system prompt (heap; "" when s is empty): an
 * <available_skills> list of name and description, at most budget characters
 * in all; *shown gets how many skills it holds (the rest: list_skills). */
char *skills_catalogue(const skills_set *s, long budget, size_t *shown);
/* What activation hands the model (heap): the body with $ARGUMENTS replaced by
 * arguments ("" when NULL) inside <skill_content name version digest>, then the
 * skill's files under <skill_resources> (listed, not read). */
char *skills_activation(const skills_skill *sk, const char *arguments);

/* A message that starts with "/name" (then a space, a newline or its end) for
 * a name of s: that skill, *args pointing at the rest after the spaces. NULL
 * otherwise. */
const skills_skill *skills_invocation(const skills_set *s, const char *text, const char **args);

/* A skill as JSON for the API: {name, description, builtin, enabled, version,
 * digest, license, compatibility, allowed_tools, metadata} and, when full,
 * body and files [{path, size}]. */
json_t *skills_json(const skills_skill *sk, int enabled, int full);

#endif
