/* The skills registry: the built-ins parsed at start, a user's set, and the
 * text the agent's skill tools and the prompt's catalogue hand the model.
 * See skills.h. */
#include "app/skills.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/buf.h"
#include "lib/embed.h"
#include "lib/json.h"
#include "lib/pg.h"
#include "lib/utf8.h"

extern const struct tk_embed_file tk_embed_skills[];

#define BUILTIN_MAX 32

static skills_skill builtins[BUILTIN_MAX];
static size_t nbuiltins;

/* ---------------------------------------------------------------- digest */

static int file_cmp(const void *a, const void *b)
{
    return strcmp(((const skills_file_ref *)a)->path, ((const skills_file_ref *)b)->path);
}

/* The digest of a bundle: SKILL.md and the files, in byte order of the paths
 * (files sorted). */
static void bundle_digest(const char *skill_md, size_t md_len, const skills_file_ref *files,
                          size_t n, char out[SKILLS_DIGEST_HEX])
{
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    int md_done = 0;
    for (size_t i = 0; i <= n; i++) {
        const char *path = i < n ? files[i].path : NULL;
        if (!md_done && (!path || strcmp("SKILL.md", path) < 0)) {
            char head[48];
            int k = snprintf(head, sizeof head, "SKILL.md%c%zu%c", 0, md_len, 0);
            crypto_hash_sha256_update(&st, (const unsigned char *)head, (unsigned long long)k);
            crypto_hash_sha256_update(&st, (const unsigned char *)skill_md, md_len);
            md_done = 1;
        }
        if (!path)
            break;
        char size[24];
        int k = snprintf(size, sizeof size, "%zu", files[i].size);
        crypto_hash_sha256_update(&st, (const unsigned char *)path, strlen(path) + 1);
        crypto_hash_sha256_update(&st, (const unsigned char *)size, (unsigned long long)k + 1);
        crypto_hash_sha256_update(&st, files[i].data, files[i].size);
    }
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_final(&st, h);
    sodium_bin2hex(out, SKILLS_DIGEST_HEX, h, sizeof h);
}

/* ---------------------------------------------------------------- built-ins */

static void skill_clear(skills_skill *sk)
{
    free(sk->description);
    free(sk->license);
    free(sk->compatibility);
    free(sk->allowed_tools);
    json_decref(sk->metadata);
    free(sk->skill_md);
    free(sk->body);
    for (size_t i = 0; i < sk->nfiles; i++) {
        free(sk->files[i].path);
        if (sk->owns_data)
            free((void *)sk->files[i].data);
    }
    free(sk->files);
    memset(sk, 0, sizeof *sk);
}

/* Fills sk from a parsed SKILL.md (md) of text s[0..n). */
static void skill_fill(skills_skill *sk, const tk_skill_md *md, const char *s, size_t n)
{
    snprintf(sk->name, sizeof sk->name, "%s", md->name);
    sk->description = tk_strdup(md->description);
    sk->license = md->license ? tk_strdup(md->license) : NULL;
    sk->compatibility = md->compatibility ? tk_strdup(md->compatibility) : NULL;
    sk->allowed_tools = md->allowed_tools ? tk_strdup(md->allowed_tools) : NULL;
    sk->metadata = json_object();
    for (size_t i = 0; i < md->n_metadata; i++)
        json_object_set_new(sk->metadata, md->metadata[i].key, json_string(md->metadata[i].value));
    sk->skill_md = tk_strndup(s, n);
    sk->skill_md_len = n;
    size_t off = md->body_off;
    /* the blank lines right after the front matter are not part of the text */
    while (off < n && (s[off] == '\n' || s[off] == '\r'))
        off++;
    sk->body = tk_strndup(s + off, n - off);
}

tk_status skills_init(char *err, size_t errsz)
{
    return skills_init_table(tk_embed_skills, err, errsz);
}

tk_status skills_init_table(const struct tk_embed_file *table, char *err, size_t errsz)
{
    for (size_t i = 0; i < nbuiltins; i++)
        skill_clear(&builtins[i]);
    nbuiltins = 0;
    for (const struct tk_embed_file *f = table; f->name; f++) {
        const char *slash = strchr(f->name, '/');
        if (!slash) {
            snprintf(err, errsz, "skills/%s: a file outside a skill's folder", f->name);
            return TK_EINVAL;
        }
        if (strcmp(slash + 1, "SKILL.md") != 0)
            continue;
        if (nbuiltins == BUILTIN_MAX) {
            snprintf(err, errsz, "skills/: more than %d built-in skills", BUILTIN_MAX);
            return TK_EINVAL;
        }
        char folder[TK_SKILL_NAME_MAX + 2];
        size_t flen = (size_t)(slash - f->name);
        if (flen >= sizeof folder) {
            snprintf(err, errsz, "skills/%.*s: the folder's name is too long", (int)flen, f->name);
            return TK_EINVAL;
        }
        memcpy(folder, f->name, flen);
        folder[flen] = 0;
        tk_skill_md md;
        char why[256];
        if (tk_skillmd_parse((const char *)f->data, f->size, folder, &md, why, sizeof why) !=
            TK_OK) {
            snprintf(err, errsz, "skills/%s: %s", f->name, why);
            return TK_EINVAL;
        }
        if (md.n_warnings) {
            /* a built-in keeps to the six keys of the format */
            snprintf(err, errsz, "skills/%s: %s", f->name, md.warnings[0]);
            tk_skillmd_free(&md);
            return TK_EINVAL;
        }
        skills_skill *sk = &builtins[nbuiltins++];
        skill_fill(sk, &md, (const char *)f->data, f->size);
        tk_skillmd_free(&md);
        sk->builtin = 1;
        sk->enabled = 1;
        sk->version = 1;
        /* its other files */
        size_t cap = 0;
        for (const struct tk_embed_file *g = table; g->name; g++) {
            if (strncmp(g->name, folder, flen) != 0 || g->name[flen] != '/' || g == f)
                continue;
            if (sk->nfiles == cap) {
                cap = cap ? cap * 2 : 8;
                sk->files = tk_realloc(sk->files, cap * sizeof *sk->files);
            }
            sk->files[sk->nfiles++] = (skills_file_ref){
                .path = tk_strdup(g->name + flen + 1), .data = g->data, .size = g->size};
        }
        if (sk->nfiles)
            qsort(sk->files, sk->nfiles, sizeof *sk->files, file_cmp);
        bundle_digest(sk->skill_md, sk->skill_md_len, sk->files, sk->nfiles, sk->digest);
    }
    /* a folder without SKILL.md is a mistake in skills/ */
    for (const struct tk_embed_file *f = table; f->name; f++) {
        const char *slash = strchr(f->name, '/');
        int found = 0;
        for (size_t i = 0; i < nbuiltins && !found; i++)
            found = strlen(builtins[i].name) == (size_t)(slash - f->name) &&
                    strncmp(builtins[i].name, f->name, (size_t)(slash - f->name)) == 0;
        if (!found) {
            snprintf(err, errsz, "skills/%s: its folder has no SKILL.md", f->name);
            return TK_EINVAL;
        }
    }
    return TK_OK;
}

void skills_digest(const char *skill_md, size_t md_len, const skills_file_ref *files, size_t n,
                   char out[SKILLS_DIGEST_HEX])
{
    skills_file_ref *sorted = tk_calloc(n + 1, sizeof *sorted);
    if (n)
        memcpy(sorted, files, n * sizeof *files);
    qsort(sorted, n, sizeof *sorted, file_cmp);
    bundle_digest(skill_md, md_len, sorted, n, out);
    free(sorted);
}

size_t skills_builtin_count(void)
{
    return nbuiltins;
}

const skills_skill *skills_builtin_at(size_t i)
{
    return i < nbuiltins ? &builtins[i] : NULL;
}

const skills_skill *skills_builtin_find(const char *name)
{
    for (size_t i = 0; name && i < nbuiltins; i++)
        if (strcmp(builtins[i].name, name) == 0)
            return &builtins[i];
    return NULL;
}

int skills_name_reserved(const char *name)
{
    return skills_builtin_find(name) != NULL;
}

/* ---------------------------------------------------------------- sets */

static int set_cmp(const void *a, const void *b)
{
    return strcmp((*(const skills_skill *const *)a)->name, (*(const skills_skill *const *)b)->name);
}

/* The user's own skills into s->own (their current versions). */
static tk_status load_own(PGconn *c, const char *user_id, skills_set *s)
{
    const char *p[] = {user_id};
    PGresult *r = tk_pg_query(
        c,
        "SELECT s.id, s.name, s.version, v.digest, v.skill_md, coalesce((SELECT "
        "jsonb_agg(jsonb_build_array(f.path, length(f.data)) ORDER BY f.path COLLATE \"C\") FROM "
        "skill_files f WHERE f.skill_id = s.id AND f.version = s.version), '[]'), "
        "coalesce(st.enabled, true), s.shared, s.user_id = $1 FROM skills s JOIN skill_versions "
        "v ON v.skill_id = s.id AND v.version = s.version LEFT JOIN skill_settings st ON "
        "st.user_id = $1 AND st.name = s.name WHERE s.user_id = $1 OR (s.shared AND NOT EXISTS "
        "(SELECT 1 FROM skills o WHERE o.user_id = $1 AND o.name = s.name)) ORDER BY s.name",
        1, p);
    if (!tk_pg_ok(r)) {
        PQclear(r);
        return TK_ERROR;
    }
    int n = PQntuples(r);
    s->own = tk_calloc((size_t)n + 1, sizeof *s->own);
    for (int i = 0; i < n; i++) {
        const char *md_text = PQgetvalue(r, i, 4);
        size_t md_len = (size_t)PQgetlength(r, i, 4);
        tk_skill_md md;
        char why[256];
        if (tk_skillmd_parse(md_text, md_len, PQgetvalue(r, i, 1), &md, why, sizeof why) != TK_OK)
            continue; /* stored only once valid: a rule changed since; left out */
        skills_skill *sk = &s->own[s->nown++];
        skill_fill(sk, &md, md_text, md_len);
        tk_skillmd_free(&md);
        snprintf(sk->id, sizeof sk->id, "%s", PQgetvalue(r, i, 0));
        sk->version = atoi(PQgetvalue(r, i, 2));
        snprintf(sk->digest, sizeof sk->digest, "%s", PQgetvalue(r, i, 3));
        sk->enabled = PQgetvalue(r, i, 6)[0] == 't';
        sk->shared = PQgetvalue(r, i, 7)[0] == 't';
        sk->mine = PQgetvalue(r, i, 8)[0] == 't';
        json_t *files = json_loads(PQgetvalue(r, i, 5), 0, NULL);
        sk->files = tk_calloc(json_array_size(files) + 1, sizeof *sk->files);
        size_t k;
        json_t *f;
        json_array_foreach(files, k, f)
        {
            sk->files[sk->nfiles++] =
                (skills_file_ref){.path = tk_strdup(json_string_value(json_array_get(f, 0))),
                                  .size = (size_t)json_integer_value(json_array_get(f, 1))};
        }
        json_decref(files);
    }
    PQclear(r);
    return TK_OK;
}

skills_set *skills_for_user(PGconn *c, const char *user_id, int all)
{
    skills_set *s = tk_calloc(1, sizeof *s);
    json_t *off = json_object(); /* built-ins the user turned off */
    if (c && user_id) {
        if (load_own(c, user_id, s) != TK_OK) {
            json_decref(off);
            skills_set_free(s);
            return NULL;
        }
        const char *p[] = {user_id};
        PGresult *r = tk_pg_query(
            c, "SELECT name FROM skill_settings WHERE user_id = $1 AND NOT enabled", 1, p);
        if (!tk_pg_ok(r)) {
            PQclear(r);
            json_decref(off);
            skills_set_free(s);
            return NULL;
        }
        for (int i = 0; i < PQntuples(r); i++)
            json_object_set_new(off, PQgetvalue(r, i, 0), json_true());
        PQclear(r);
    }
    s->v = tk_calloc(nbuiltins + s->nown + 1, sizeof *s->v);
    for (size_t i = 0; i < nbuiltins; i++) {
        if (!all && json_object_get(off, builtins[i].name))
            continue;
        s->v[s->n++] = &builtins[i];
    }
    for (size_t i = 0; i < s->nown; i++)
        if (all || s->own[i].enabled)
            s->v[s->n++] = &s->own[i];
    if (s->n > 1)
        qsort(s->v, s->n, sizeof *s->v, set_cmp);
    s->on = tk_calloc(s->n + 1, 1);
    for (size_t i = 0; i < s->n; i++)
        s->on[i] = s->v[i]->builtin ? !json_object_get(off, s->v[i]->name) : s->v[i]->enabled;
    json_decref(off);
    return s;
}

tk_status skills_load_files(PGconn *c, skills_set *s, const skills_skill *sk)
{
    if (sk->builtin || sk->owns_data)
        return TK_OK;
    skills_skill *own = NULL;
    for (size_t i = 0; i < s->nown; i++)
        if (&s->own[i] == sk)
            own = &s->own[i];
    if (!own)
        return TK_EINVAL;
    char ver[16];
    snprintf(ver, sizeof ver, "%d", own->version);
    const char *p[] = {own->id, ver};
    PGresult *r = PQexecParams(c,
                               "SELECT path, data FROM skill_files WHERE skill_id = $1 AND "
                               "version = $2::int",
                               2, NULL, p, NULL, NULL, 1);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        PQclear(r);
        return TK_ERROR;
    }
    for (int i = 0; i < PQntuples(r); i++) {
        char *path = tk_strndup(PQgetvalue(r, i, 0), (size_t)PQgetlength(r, i, 0));
        for (size_t k = 0; k < own->nfiles; k++) {
            if (strcmp(own->files[k].path, path) == 0 && !own->files[k].data) {
                size_t n = (size_t)PQgetlength(r, i, 1);
                unsigned char *d = tk_malloc(n + 1);
                memcpy(d, PQgetvalue(r, i, 1), n);
                d[n] = 0;
                own->files[k].data = d;
                own->files[k].size = n;
            }
        }
        free(path);
    }
    PQclear(r);
    own->owns_data = 1;
    for (size_t k = 0; k < own->nfiles; k++)
        if (!own->files[k].data) {
            own->files[k].data = tk_calloc(1, 1);
            own->files[k].size = 0;
        }
    return TK_OK;
}

const skills_skill *skills_set_find(const skills_set *s, const char *name)
{
    for (size_t i = 0; s && name && i < s->n; i++)
        if (strcmp(s->v[i]->name, name) == 0)
            return s->v[i];
    return NULL;
}

void skills_set_free(skills_set *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nown; i++)
        skill_clear(&s->own[i]);
    free(s->own);
    free(s->v);
    free(s->on);
    free(s);
}

int skills_set_enabled(const skills_set *s, const skills_skill *sk)
{
    for (size_t i = 0; s && s->on && i < s->n; i++)
        if (s->v[i] == sk)
            return s->on[i];
    return 0;
}

const skills_file_ref *skills_file(const skills_skill *sk, const char *path)
{
    if (!sk || !path)
        return NULL;
    /* "./references/x.md" is "references/x.md"; nothing else is rewritten */
    while (path[0] == '.' && path[1] == '/')
        path += 2;
    for (size_t i = 0; i < sk->nfiles; i++)
        if (strcmp(sk->files[i].path, path) == 0)
            return &sk->files[i];
    return NULL;
}

/* ---------------------------------------------------------------- text */

/* s escaped for the XML-like tags the model reads. */
static void append_escaped(tk_buf *b, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<':
            tk_buf_append_str(b, "&lt;");
            break;
        case '>':
            tk_buf_append_str(b, "&gt;");
            break;
        case '&':
            tk_buf_append_str(b, "&amp;");
            break;
        case '"':
            tk_buf_append_str(b, "&quot;");
            break;
        default:
            tk_buf_append(b, s, 1);
        }
    }
}

static long chars_of(const char *s, size_t n)
{
    return (long)tk_utf8_chars(s, n);
}

#define CATALOGUE_OPEN  "<available_skills>\n"
#define CATALOGUE_CLOSE "</available_skills>"

char *skills_catalogue(const skills_set *s, long budget, size_t *shown)
{
    *shown = 0;
    tk_buf b;
    tk_buf_init(&b, 1u << 20);
    if (!s || s->n == 0) {
        tk_buf_append_str(&b, "");
        return tk_buf_steal(&b, NULL);
    }
    long used = chars_of(CATALOGUE_OPEN CATALOGUE_CLOSE, strlen(CATALOGUE_OPEN CATALOGUE_CLOSE));
    tk_buf_append_str(&b, CATALOGUE_OPEN);
    for (size_t i = 0; i < s->n; i++) {
        tk_buf e;
        tk_buf_init(&e, 1u << 16);
        tk_buf_append_str(&e, "<skill><name>");
        append_escaped(&e, s->v[i]->name);
        tk_buf_append_str(&e, "</name><description>");
        append_escaped(&e, s->v[i]->description);
        tk_buf_append_str(&e, "</description></skill>\n");
        long c = chars_of(e.data, e.len);
        if (used + c <= budget) {
            tk_buf_append(&b, e.data, e.len);
            used += c;
            (*shown)++;
        }
        tk_buf_free(&e);
    }
    if (*shown == 0) {
        tk_buf_free(&b);
        tk_buf_init(&b, 16);
        tk_buf_append_str(&b, "");
        return tk_buf_steal(&b, NULL);
    }
    tk_buf_append_str(&b, CATALOGUE_CLOSE);
    return tk_buf_steal(&b, NULL);
}

char *skills_activation(const skills_skill *sk, const char *arguments)
{
    tk_buf b;
    tk_buf_init(&b, 8u << 20);
    tk_buf_printf(&b, "<skill_content name=\"%s\" version=\"%d\" digest=\"%s\">\n", sk->name,
                  sk->version, sk->digest);
    const char *a = arguments ? arguments : "";
    const char *p = sk->body;
    for (const char *q; (q = strstr(p, "$ARGUMENTS"));) {
        tk_buf_append(&b, p, (size_t)(q - p));
        tk_buf_append_str(&b, a);
        p = q + strlen("$ARGUMENTS");
    }
    tk_buf_append_str(&b, p);
    if (b.len && b.data[b.len - 1] != '\n')
        tk_buf_append_str(&b, "\n");
    tk_buf_append_str(&b, "</skill_content>\n");
    tk_buf_printf(&b, "<skill_resources skill=\"%s\">\n", sk->name);
    for (size_t i = 0; i < sk->nfiles; i++) {
        tk_buf_append_str(&b, "<file>");
        append_escaped(&b, sk->files[i].path);
        tk_buf_printf(&b, "</file> (%zu bytes)\n", sk->files[i].size);
    }
    tk_buf_append_str(&b, "</skill_resources>\n");
    if (sk->nfiles)
        tk_buf_printf(&b,
                      "Read a file with read_skill_file {\"name\": \"%s\", \"path\": ...}; run a "
                      "script with run_skill_script (it is copied into /workspace/.skills/%s/ "
                      "the first time).\n",
                      sk->name, sk->name);
    return tk_buf_steal(&b, NULL);
}

const skills_skill *skills_invocation(const skills_set *s, const char *text, const char **args)
{
    if (!text || text[0] != '/')
        return NULL;
    const char *p = text + 1;
    size_t n = 0;
    while (p[n] && p[n] != ' ' && p[n] != '\n' && p[n] != '\r' && p[n] != '\t')
        n++;
    if (n == 0 || n > TK_SKILL_NAME_MAX || !tk_skillmd_name_valid(p, n))
        return NULL;
    char name[TK_SKILL_NAME_MAX + 1];
    memcpy(name, p, n);
    name[n] = 0;
    const skills_skill *sk = skills_set_find(s, name);
    if (!sk)
        return NULL;
    const char *rest = p + n;
    while (*rest == ' ' || *rest == '\t' || *rest == '\n' || *rest == '\r')
        rest++;
    if (args)
        *args = rest;
    return sk;
}

json_t *skills_json(const skills_skill *sk, int enabled, int full)
{
    json_t *o = tk_json_obj(
        "name", json_string(sk->name), "description", json_string(sk->description), "builtin",
        json_boolean(sk->builtin), "shared", json_boolean(sk->shared), "mine",
        json_boolean(sk->mine), "enabled", json_boolean(enabled), "version",
        json_integer(sk->version), "digest", json_string(sk->digest), "license",
        sk->license ? json_string(sk->license) : json_null(), "compatibility",
        sk->compatibility ? json_string(sk->compatibility) : json_null(), "allowed_tools",
        sk->allowed_tools ? json_string(sk->allowed_tools) : json_null(), "metadata",
        json_incref(sk->metadata), NULL);
    if (full) {
        json_object_set_new(o, "body", json_string(sk->body));
        json_t *files = json_array();
        for (size_t i = 0; i < sk->nfiles; i++)
            json_array_append_new(files,
                                  tk_json_obj("path", json_string(sk->files[i].path), "size",
                                              json_integer((json_int_t)sk->files[i].size), NULL));
        json_object_set_new(o, "files", files);
    }
    return o;
}
