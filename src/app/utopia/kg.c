/*
 * kg.c — the knowledge graph: entities with aliases, dated facts, timeline
 * upkeep for single-valued predicates, queries by entity, time and
 * neighbourhood.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/utopia/dates.h"
#include "app/utopia/db.h"
#include "app/utopia/utopia.h"
#include "lib/id.h"
#include "lib/json.h"
#include "lib/pg.h"
#include "lib/tktime.h"

/* Predicates known to hold one value at a time (docs/UTOPIA.md). A user's
 * explicit declaration (remember's "single") takes precedence and is kept. */
static const char *const single_builtin[] = {
    "lives_in",        "located_in", "based_in",      "works_at", "works_for",    "employer",
    "job_title",       "title",      "role",          "position", "age",          "birthday",
    "born_on",         "born_in",    "date_of_birth", "died_on",  "spouse",       "married_to",
    "email",           "phone",      "address",       "ceo",      "manager",      "reports_to",
    "status",          "capital",    "population",    "price",    "version",      "timezone",
    "nationality",     "height",     "weight",        "owner",    "headquarters", "name",
    "current_project", "salary",     "plan",          "deadline", "leader",       "president",
    "prime_minister",  "mayor",      "team",
};

static int builtin_single(const char *p)
{
    for (size_t i = 0; i < TK_ARRAY_LEN(single_builtin); i++)
        if (!strcmp(p, single_builtin[i]))
            return 1;
    return !strncmp(p, "favorite_", 9) || !strncmp(p, "favourite_", 10) ||
           !strncmp(p, "current_", 8);
}

/* lower_snake_case; NULL when nothing is left */
static char *norm_predicate(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s);
    if (n > 200)
        return NULL;
    char *o = tk_malloc(n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (isalnum(c))
            o[k++] = (char)tolower(c);
        else if (k && o[k - 1] != '_')
            o[k++] = '_';
    }
    while (k && o[k - 1] == '_')
        k--;
    o[k] = 0;
    if (k == 0 || k > 64 || !isalpha((unsigned char)o[0])) {
        free(o);
        return NULL;
    }
    return o;
}

/* Display form (normalised text) and lookup key (lower case) of a name. */
static int norm_name(const char *s, size_t max, char **display, char **key)
{
    *display = *key = NULL;
    if (!s)
        return -1;
    tk_buf b;
    tk_buf_init(&b, max * 2 + 8);
    if (utopia_text_normalize(&b, s, strlen(s), 0) != TK_OK || b.len == 0 || b.len > max) {
        tk_buf_free(&b);
        return -1;
    }
    /* strip surrounding quotes */
    char *d = tk_buf_steal(&b, NULL);
    size_t n = strlen(d);
    while (n && strchr("\"'`", d[n - 1]))
        d[--n] = 0;
    char *p = d;
    while (*p && strchr("\"'`", *p))
        p++;
    if (!*p) {
        free(d);
        return -1;
    }
    *display = tk_strdup(p);
    free(d);
    *key = tk_strdup(*display);
    for (char *q = *key; *q; q++)
        *q = (char)tolower((unsigned char)*q);
    return 0;
}

/* The entity a name means (TK_ENOENT when none). id: TK_UUID_LEN. Entities are
 * made by utopia_fact_add, in SQL (utopia_entity_resolve). */
static tk_status entity_find(PGconn *c, const char *user_id, const char *name, char *id, char *err,
                             size_t errlen)
{
    char *display, *key;
    if (norm_name(name, 200, &display, &key) != 0) {
        snprintf(err, errlen, "an entity needs a name of 1 to 200 characters");
        return TK_EINVAL;
    }
    tk_status st = TK_OK;
    const char *p[] = {user_id, key};
    PGresult *r = tk_pg_query(
        c, "SELECT entity_id FROM utopia_aliases WHERE user_id = $1 AND norm = $2", 2, p);
    if (!tk_pg_ok(r)) {
        st = TK_ERROR;
        snprintf(err, errlen, "database error resolving an entity");
    } else if (PQntuples(r) == 1) {
        snprintf(id, TK_UUID_LEN, "%s", PQgetvalue(r, 0, 0));
    } else {
        st = TK_ENOENT;
        snprintf(err, errlen, "no entity called \"%s\"", display);
    }
    PQclear(r);
    free(display);
    free(key);
    return st;
}

/* Does an object look like a value (number, date, e-mail, URL, sentence)
 * rather than a name? */
static int looks_like_value(const char *o)
{
    size_t n = strlen(o), words = 1;
    if (n == 0 || n > 80)
        return 1;
    if (!isupper((unsigned char)o[0]) && !((unsigned char)o[0] & 0x80))
        return 1;
    for (size_t i = 0; i < n; i++) {
        if (o[i] == ' ')
            words++;
        if (o[i] == '@' || o[i] == '/' || o[i] == ':')
            return 1;
    }
    return words > 6;
}

#define FACT_JSON(f, s) "utopia_fact_json(" f ", " s ".name)"

/* The subject, the aliases and the object as the SQL function takes them
 * (sql/0028_utopia_fact_add.sql): normalised here, looked up there. */
struct fact_names {
    char *sdisp, *skey; /* the subject */
    char *edisp, *ekey; /* the object as an entity name, when it may be one */
    const char *mode;   /* "none", "find" or "create" */
    json_t *aliases;    /* [[name, norm], ...] */
};

static void fact_names_free(struct fact_names *n)
{
    free(n->sdisp);
    free(n->skey);
    free(n->edisp);
    free(n->ekey);
    json_decref(n->aliases);
}

static tk_status fact_names(const utopia_fact_in *f, const char *odisp, struct fact_names *n,
                            char *err, size_t errlen)
{
    memset(n, 0, sizeof *n);
    n->aliases = json_array();
    if (norm_name(f->subject, 200, &n->sdisp, &n->skey) != 0) {
        snprintf(err, errlen, "an entity needs a name of 1 to 200 characters");
        return TK_EINVAL;
    }
    if (json_is_array(f->aliases)) {
        size_t i;
        json_t *a;
        json_array_foreach(f->aliases, i, a)
        {
            char *ad, *ak;
            if (i >= 20 || !json_is_string(a) || norm_name(json_string_value(a), 200, &ad, &ak))
                continue;
            json_array_append_new(n->aliases, json_pack("[ss]", ad, ak));
            free(ad);
            free(ak);
        }
    }
    /* the object: an entity or a value */
    int want_entity = f->object_kind ? !strcmp(f->object_kind, "entity") : -1;
    n->mode = "none";
    if (want_entity != 0) {
        if (norm_name(odisp, 200, &n->edisp, &n->ekey) != 0) {
            snprintf(err, errlen, "an entity needs a name of 1 to 200 characters");
            return TK_EINVAL;
        }
        n->mode = want_entity == 1 || !looks_like_value(odisp) ? "create" : "find";
    }
    return TK_OK;
}

tk_status utopia_fact_add(const utopia *u, PGconn *c, const char *user_id, const utopia_fact_in *f,
                          const utopia_source *src, int64_t now_ms, json_t **out, char *err,
                          size_t errlen)
{
    *out = NULL;
    utopia_source none = {0};
    if (!src)
        src = &none;
    if (!user_id || !utopia_uuid_ok(user_id) || !utopia_uuid_ok(src->chat_id) ||
        !utopia_uuid_ok(src->turn_id) || !utopia_uuid_ok(src->document_id)) {
        snprintf(err, errlen, "bad user, chat, turn or document id");
        return TK_EINVAL;
    }
    if (now_ms == 0)
        now_ms = tk_now_ms();
    char *pred = norm_predicate(f->predicate);
    char *odisp = NULL, *okey = NULL;
    struct fact_names names = {0};
    json_t *res = NULL;
    tk_status st = TK_EINVAL;
    if (!pred) {
        snprintf(err, errlen, "predicate: a short phrase such as \"lives in\" or \"works_at\"");
        goto out;
    }
    if (!f->subject || !*f->subject) {
        snprintf(err, errlen, "subject: required");
        goto out;
    }
    if (norm_name(f->object, 500, &odisp, &okey) != 0) {
        snprintf(err, errlen, "object: required, at most 500 characters");
        goto out;
    }
    if (f->object_kind && strcmp(f->object_kind, "entity") && strcmp(f->object_kind, "value")) {
        snprintf(err, errlen, "object_kind: \"entity\" or \"value\"");
        goto out;
    }
    /* dates: liberal in, strict out */
    int64_t from = now_ms, to = 0;
    const char *from_prec = "recorded", *to_prec = NULL;
    char derr[160];
    if (f->valid_from && *f->valid_from &&
        utopia_date_parse(f->valid_from, now_ms, &from, &from_prec, derr, sizeof derr) != TK_OK) {
        snprintf(err, errlen, "valid_from: %s", derr);
        goto out;
    }
    int has_to = f->valid_to && *f->valid_to;
    if (has_to &&
        utopia_date_parse(f->valid_to, now_ms, &to, &to_prec, derr, sizeof derr) != TK_OK) {
        snprintf(err, errlen, "valid_to: %s", derr);
        goto out;
    }
    int from_given = f->valid_from && *f->valid_from;
    if (has_to && from_given && to < from) {
        snprintf(err, errlen, "valid_to is before valid_from");
        goto out;
    }
    if ((st = fact_names(f, odisp, &names, err, errlen)) != TK_OK)
        goto out;
    char fromts[40], tots[40] = "";
    if (!from_given && has_to) {
        snprintf(fromts, sizeof fromts, "-infinity");
        from_prec = "unknown";
    } else {
        tk_time_rfc3339(from, fromts, sizeof fromts);
    }
    if (has_to)
        tk_time_rfc3339(to, tots, sizeof tots);
    char id[TK_UUID_LEN], snew[TK_UUID_LEN], onew[TK_UUID_LEN];
    tk_uuid7(snew);
    tk_uuid7(onew);
    tk_uuid7(id);
    char *aliases = tk_json_dumps(names.aliases);
    const char *p[] = {user_id,
                       id,
                       f->subject,
                       names.sdisp,
                       names.skey,
                       snew,
                       aliases,
                       pred,
                       f->single < 0 ? NULL
                       : f->single   ? "true"
                                     : "false",
                       builtin_single(pred) ? "true" : "false",
                       odisp,
                       okey,
                       names.mode,
                       names.edisp,
                       names.ekey,
                       onew,
                       fromts,
                       from_prec,
                       has_to ? tots : NULL,
                       to_prec,
                       src->chat_id,
                       src->turn_id,
                       src->document_id,
                       u->cfg.fts_config};
    /* one round trip, one transaction */
    res = utopia_db_json(c,
                         "SELECT utopia_fact_add($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, "
                         "$12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24)",
                         24, p, NULL, err, errlen);
    free(aliases);
    json_t *fj = json_object_get(res, "fact");
    if (!json_is_object(fj)) {
        if (res)
            snprintf(err, errlen, "the database did not return the fact");
        st = TK_ERROR;
        goto out;
    }
    json_t *closed = json_object_get(res, "closed"),
           *conflicts = json_object_get(res, "alias_conflicts");
    if (!json_is_array(closed) || !json_is_array(conflicts)) {
        snprintf(err, errlen, "the database did not return the fact");
        st = TK_ERROR;
        goto out;
    }
    json_incref(fj);
    json_incref(closed);
    json_incref(conflicts);
    if (json_is_true(json_object_get(res, "duplicate"))) {
        *out = tk_json_obj("fact", fj, "duplicate", json_true(), "closed", closed,
                           "alias_conflicts", conflicts, NULL);
    } else {
        json_object_set(fj, "single_valued", json_object_get(res, "single"));
        *out = tk_json_obj("fact", fj, "closed", closed, "alias_conflicts", conflicts, NULL);
    }
    st = TK_OK;
out:
    json_decref(res);
    fact_names_free(&names);
    free(pred);
    free(odisp);
    free(okey);
    return st;
}

/* ---- queries ---- */

static tk_status parse_at(const char *at, int64_t now_ms, char *ts, size_t tslen, char *err,
                          size_t errlen)
{
    int64_t ms = now_ms ? now_ms : tk_now_ms();
    const char *prec;
    char derr[160];
    if (at && *at && utopia_date_parse(at, ms, &ms, &prec, derr, sizeof derr) != TK_OK) {
        snprintf(err, errlen, "at: %s", derr);
        return TK_EINVAL;
    }
    tk_time_rfc3339(ms, ts, tslen);
    return TK_OK;
}

tk_status utopia_recall_facts(const utopia *u, PGconn *c, const char *user_id, const char *entity,
                              const char *at, int64_t now_ms, json_t **out, char *err,
                              size_t errlen)
{
    (void)u;
    *out = NULL;
    if (!user_id || !utopia_uuid_ok(user_id)) {
        snprintf(err, errlen, "bad user id");
        return TK_EINVAL;
    }
    char ts[40], eid[TK_UUID_LEN];
    tk_status st = parse_at(at, now_ms, ts, sizeof ts, err, errlen);
    if (st != TK_OK)
        return st;
    if ((st = entity_find(c, user_id, entity, eid, err, errlen)) != TK_OK) {
        if (st == TK_ENOENT) {
            /* a near name, by trigrams, to be helpful */
            char *d, *k;
            if (norm_name(entity, 200, &d, &k) == 0) {
                const char *p[] = {user_id, k};
                PGresult *r = tk_pg_query(c,
                                          "SELECT alias FROM utopia_aliases WHERE user_id = $1 AND "
                                          "norm % $2 ORDER BY similarity(norm, $2) DESC LIMIT 1",
                                          2, p);
                if (tk_pg_ok(r) && PQntuples(r) == 1) {
                    size_t l = strlen(err);
                    snprintf(err + l, errlen - l, " (did you mean \"%s\"?)", PQgetvalue(r, 0, 0));
                }
                PQclear(r);
                free(d);
                free(k);
            }
        }
        return st;
    }
    const char *p[] = {user_id, eid, ts};
    *out = utopia_db_json(
        c,
        "SELECT json_build_object('entity', (SELECT json_build_object('id', e.id, 'name', e.name, "
        "'aliases', (SELECT coalesce(json_agg(alias ORDER BY alias), '[]') FROM utopia_aliases "
        "WHERE entity_id = e.id)) FROM utopia_entities e WHERE e.id = $2), 'at', "
        "utopia_date_text($3::timestamptz, 'second'), 'facts', coalesce((SELECT "
        "json_agg(" FACT_JSON("f", "s") " ORDER BY f.predicate, f.valid_from) FROM utopia_facts f "
                                        "JOIN utopia_entities s ON s.id = "
                                        "f.subject_id WHERE f.user_id = $1 AND (f.subject_id = $2 "
                                        "OR f.object_id = $2) AND "
                                        "f.valid_from <= $3::timestamptz AND (f.valid_to IS NULL "
                                        "OR f.valid_to > $3::timestamptz)), '[]'::json))",
        3, p, NULL, err, errlen);
    return *out ? TK_OK : TK_ERROR;
}

tk_status utopia_fact_list(const utopia *u, PGconn *c, const char *user_id, const char *entity,
                           int limit, int offset, json_t **out, char *err, size_t errlen)
{
    (void)u;
    *out = NULL;
    if (!user_id || !utopia_uuid_ok(user_id)) {
        snprintf(err, errlen, "bad user id");
        return TK_EINVAL;
    }
    char eid[TK_UUID_LEN] = "";
    if (entity && *entity) {
        tk_status st = entity_find(c, user_id, entity, eid, err, errlen);
        if (st != TK_OK)
            return st;
    }
    utopia_db_page pg = utopia_db_page_of(limit, offset, 200, 1000);
    const char *p[] = {user_id, eid[0] ? eid : NULL, pg.limit, pg.offset};
    *out = utopia_db_json(
        c,
        "SELECT json_build_object('facts', coalesce(json_agg(" FACT_JSON(
            "f",
            "s") " ORDER BY s.name, f.predicate, f.valid_from), '[]'::json)) FROM (SELECT * FROM "
                 "utopia_facts WHERE user_id = $1 AND ($2::uuid IS NULL OR subject_id = $2 OR "
                 "object_id = "
                 "$2) ORDER BY recorded_at DESC, id LIMIT $3 OFFSET $4) f JOIN utopia_entities s "
                 "ON s.id = "
                 "f.subject_id",
        4, p, NULL, err, errlen);
    return *out ? TK_OK : TK_ERROR;
}

tk_status utopia_fact_delete(const utopia *u, PGconn *c, const char *user_id, const char *id,
                             json_t **out, char *err, size_t errlen)
{
    (void)u;
    return utopia_db_delete_one(c, "DELETE FROM utopia_facts WHERE user_id = $1 AND id = $2",
                                "fact", user_id, id, out, err, errlen);
}

tk_status utopia_neighbourhood(const utopia *u, PGconn *c, const char *user_id, const char *entity,
                               int hops, const char *at, int64_t now_ms, json_t **out, char *err,
                               size_t errlen)
{
    (void)u;
    *out = NULL;
    if (!user_id || !utopia_uuid_ok(user_id)) {
        snprintf(err, errlen, "bad user id");
        return TK_EINVAL;
    }
    if (hops < 1)
        hops = 1;
    if (hops > 3)
        hops = 3;
    char ts[40], eid[TK_UUID_LEN], h[4];
    tk_status st = parse_at(at, now_ms, ts, sizeof ts, err, errlen);
    if (st != TK_OK || (st = entity_find(c, user_id, entity, eid, err, errlen)) != TK_OK)
        return st;
    snprintf(h, sizeof h, "%d", hops);
    const char *p[] = {user_id, eid, ts, h};
    /* breadth-first over facts true at $3, in either direction, at most 200 edges */
    *out = utopia_db_json(
        c,
        "WITH RECURSIVE live AS (SELECT * FROM utopia_facts WHERE user_id = $1 AND valid_from <= "
        "$3::timestamptz AND (valid_to IS NULL OR valid_to > $3::timestamptz)), "
        "walk(entity_id, depth) AS (SELECT $2::uuid, 0 UNION SELECT CASE WHEN l.subject_id = "
        "w.entity_id THEN l.object_id ELSE l.subject_id END, w.depth + 1 FROM walk w JOIN live l "
        "ON (l.subject_id = w.entity_id AND l.object_id IS NOT NULL) OR l.object_id = "
        "w.entity_id WHERE w.depth < $4::int), "
        "nodes AS (SELECT entity_id, min(depth) AS depth FROM walk GROUP BY entity_id LIMIT 200), "
        "edges AS (SELECT DISTINCT l.* FROM live l JOIN nodes n ON (l.subject_id = n.entity_id "
        "OR l.object_id = n.entity_id) AND n.depth < $4::int LIMIT 200) "
        "SELECT json_build_object('entity', (SELECT name FROM utopia_entities WHERE id = $2), "
        "'at', utopia_date_text($3::timestamptz, 'second'), 'hops', $4::int, "
        "'entities', (SELECT coalesce(json_agg(json_build_object('id', e.id, 'name', e.name, "
        "'depth', n.depth) ORDER BY n.depth, e.name), '[]') FROM nodes n JOIN utopia_entities e "
        "ON e.id = n.entity_id), "
        "'facts', (SELECT coalesce(json_agg(" FACT_JSON(
            "f", "s") " ORDER BY s.name, f.predicate), "
                      "'[]') FROM edges f JOIN utopia_entities s ON s.id = f.subject_id))",
        4, p, NULL, err, errlen);
    return *out ? TK_OK : TK_ERROR;
}

tk_status utopia_remember(const utopia *u, PGconn *c, const char *user_id, const json_t *args,
                          const utopia_source *src, int64_t now_ms, json_t **out, char *err,
                          size_t errlen)
{
    *out = NULL;
    const json_t *fact = json_object_get(args, "fact");
    const json_t *note = json_object_get(args, "note");
    if (!json_is_object(args) || (!json_is_object(fact) && !json_is_string(note))) {
        snprintf(err, errlen,
                 "remember takes {\"fact\": {\"subject\", \"predicate\", \"object\", "
                 "\"valid_from\"?, \"valid_to\"?}} or {\"note\": \"...\"}");
        return TK_EINVAL;
    }
    json_t *res = json_object();
    tk_status st = TK_OK;
    if (json_is_object(fact)) {
        const json_t *single = json_object_get(fact, "single");
        utopia_fact_in f = {
            .subject = tk_json_str(fact, "subject"),
            .predicate = tk_json_str(fact, "predicate"),
            .object = tk_json_str(fact, "object"),
            .valid_from = tk_json_str(fact, "valid_from"),
            .valid_to = tk_json_str(fact, "valid_to"),
            .single = json_is_boolean(single) ? json_is_true(single) : -1,
            .aliases = json_object_get(fact, "aliases"),
            .object_kind = tk_json_str(fact, "object_kind"),
        };
        json_t *r = NULL;
        if ((st = utopia_fact_add(u, c, user_id, &f, src, now_ms, &r, err, errlen)) != TK_OK)
            goto out;
        json_object_update(res, r);
        json_decref(r);
    }
    if (json_is_string(note)) {
        json_t *r = NULL;
        if ((st = utopia_memory_add(u, c, user_id, json_string_value(note), src, &r, err,
                                    errlen)) != TK_OK)
            goto out;
        json_object_update(res, r);
        json_decref(r);
    }
    *out = res;
    res = NULL;
out:
    json_decref(res);
    return st;
}
