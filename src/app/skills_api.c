/* /api/skills: the caller's skills (the built-ins and their own), uploads,
 * versions, enable/disable, export, delete. See docs/SKILLS.md and docs/API.md.
 * Another user's skill is 404, like a skill that does not exist. */
#include "app/skills_api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/app.h"
#include "app/auth/auth.h"
#include "app/skill_bundle.h"
#include "app/skills.h"
#include "lib/id.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/pg.h"

/* Skills one user may install, at most (each a name; versions are kept). */
#define SKILLS_PER_USER_MAX 100
/* Versions of one skill kept, at most: the oldest not in use goes. */
#define SKILL_VERSIONS_MAX 20

/* A shared skill is changed by the admin who installed it only. */
#define SHARED_NOT_YOURS                                                                           \
    "%s was installed for everyone by an admin, who alone changes or deletes it; disable it for "  \
    "yourself instead (PATCH {\"enabled\": false})"

static PGconn *db(tk_req *r)
{
    PGconn *c = app_db_acquire();
    if (!c)
        app_respond_db_unavailable(r);
    return c;
}

/* The caller's skills (all, enabled or not), or NULL with the answer sent. */
static skills_set *caller_skills(tk_req *r, PGconn *c)
{
    skills_set *s = skills_for_user(c, app_req_user(r)->id, 1);
    if (!s)
        app_respond_db_unavailable(r);
    return s;
}

static void not_found(tk_req *r, const char *name)
{
    tk_respond_error(r, 404, "SKILL_NOT_FOUND", "no skill is called \"%.64s\"", name ? name : "");
}

/* The caller's skill named by the route, with the connection and the set it
 * is in (release both); NULL with the answer sent and nothing held. */
static const skills_skill *lookup(tk_req *r, PGconn **cp, skills_set **sp)
{
    const char *name = tk_req_param(r, "name");
    PGconn *c = db(r);
    if (!c)
        return NULL;
    skills_set *s = caller_skills(r, c);
    const skills_skill *sk = s ? skills_set_find(s, name) : NULL;
    if (s && !sk)
        not_found(r, name);
    if (!sk) {
        skills_set_free(s);
        app_db_release(c);
        return NULL;
    }
    *cp = c;
    *sp = s;
    return sk;
}

static void h_list(tk_req *r, void *ud)
{
    (void)ud;
    PGconn *c = db(r);
    if (!c)
        return;
    skills_set *s = caller_skills(r, c);
    app_db_release(c);
    if (!s)
        return;
    json_t *list = json_array();
    for (size_t i = 0; i < s->n; i++)
        json_array_append_new(list, skills_json(s->v[i], s->on[i], 0));
    skills_set_free(s);
    tk_respond_json(r, 200, tk_json_obj("skills", list, NULL));
}

/* The versions of a user's skill: [{version, digest, bytes, created_at}]. */
static json_t *versions_of(PGconn *c, const char *skill_id)
{
    const char *p[] = {skill_id};
    PGresult *res = tk_pg_query(
        c,
        "SELECT coalesce(jsonb_agg(jsonb_build_object('version', version, 'digest', digest, "
        "'bytes', bytes, 'created_at', created_at) ORDER BY version), '[]')::text FROM "
        "skill_versions WHERE skill_id = $1",
        1, p);
    json_t *v =
        tk_pg_ok(res) && PQntuples(res) == 1 ? json_loads(PQgetvalue(res, 0, 0), 0, NULL) : NULL;
    PQclear(res);
    return v ? v : json_array();
}

static void h_get(tk_req *r, void *ud)
{
    (void)ud;
    PGconn *c;
    skills_set *s;
    const skills_skill *sk = lookup(r, &c, &s);
    if (!sk)
        return;
    {
        json_t *j = skills_json(sk, skills_set_enabled(s, sk), 1);
        json_object_set_new(j, "skill_md", json_string(sk->skill_md));
        if (sk->builtin)
            json_object_set_new(
                j, "versions",
                json_pack("[{s:i,s:s,s:n}]", "version", 1, "digest", sk->digest, "created_at"));
        else
            json_object_set_new(j, "versions", versions_of(c, sk->id));
        tk_respond_json(r, 200, j);
    }
    skills_set_free(s);
    app_db_release(c);
}

/* Stores b as a new version of the caller's skill of its name (blocking, in
 * one transaction). *version gets the version in use after it; *created 1
 * when it is a new version, 0 when the digest equals the one in use. */
static tk_status store(PGconn *c, const char *user_id, const skill_bundle *b, int shared,
                       int *version, int *created, char *err, size_t errsz)
{
    *created = 0;
    if (tk_pg_exec(c, "BEGIN", 0, NULL) != TK_OK) {
        snprintf(err, errsz, "the database did not answer");
        return TK_ERROR;
    }
    tk_status st = TK_ERROR;
    char id[TK_UUID_LEN];
    tk_uuid7(id);
    const char *p1[] = {id, user_id, b->name};
    /* a name another user shares with everyone is theirs (one skill a name
     * for each user); checked again by the unique index when sharing */
    PGresult *taken = tk_pg_query(c,
                                  "SELECT 1 FROM skills WHERE shared AND name = $2 AND user_id <> "
                                  "$1",
                                  2, p1 + 1);
    int is_taken = tk_pg_ok(taken) && PQntuples(taken) > 0;
    if (!tk_pg_ok(taken)) {
        PQclear(taken);
        snprintf(err, errsz, "the database did not answer");
        goto done;
    }
    PQclear(taken);
    if (is_taken) {
        snprintf(err, errsz,
                 "\"%s\" is the name of a skill an admin installed for everyone; choose another "
                 "name",
                 b->name);
        st = TK_EINVAL;
        goto done;
    }
    /* the row of the name (locked), made if new */
    if (tk_pg_exec(c,
                   "INSERT INTO skills (id, user_id, name, version) VALUES ($1, $2, $3, 1) ON "
                   "CONFLICT (user_id, name) DO NOTHING",
                   3, p1) != TK_OK) {
        snprintf(err, errsz, "the database did not answer");
        goto done;
    }
    PGresult *res = tk_pg_query(
        c, "SELECT id FROM skills WHERE user_id = $1 AND name = $2 FOR UPDATE", 2, p1 + 1);
    if (!tk_pg_ok(res) || PQntuples(res) != 1) {
        PQclear(res);
        snprintf(err, errsz, "the database did not answer");
        goto done;
    }
    int is_new = strcmp(PQgetvalue(res, 0, 0), id) == 0;
    snprintf(id, sizeof id, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    if (is_new) {
        const char *pc[] = {user_id};
        PGresult *n = tk_pg_query(c, "SELECT count(*) FROM skills WHERE user_id = $1", 1, pc);
        int count = tk_pg_ok(n) ? atoi(PQgetvalue(n, 0, 0)) : SKILLS_PER_USER_MAX + 1;
        PQclear(n);
        if (count > SKILLS_PER_USER_MAX) {
            snprintf(err, errsz, "at most %d skills a user (delete one first)",
                     SKILLS_PER_USER_MAX);
            st = TK_EDENIED;
            goto done;
        }
    }
    /* the same bundle as the version in use: nothing new */
    const char *p2[] = {id};
    res = tk_pg_query(c,
                      "SELECT s.version, v.digest, (SELECT max(version) FROM skill_versions WHERE "
                      "skill_id = s.id) FROM skills s LEFT JOIN skill_versions v ON v.skill_id = "
                      "s.id AND v.version = s.version WHERE s.id = $1",
                      1, p2);
    if (!tk_pg_ok(res) || PQntuples(res) != 1) {
        PQclear(res);
        snprintf(err, errsz, "the database did not answer");
        goto done;
    }
    int in_use = atoi(PQgetvalue(res, 0, 0));
    int same = !PQgetisnull(res, 0, 1) && strcmp(PQgetvalue(res, 0, 1), b->digest) == 0;
    int next = PQgetisnull(res, 0, 2) ? 1 : atoi(PQgetvalue(res, 0, 2)) + 1;
    PQclear(res);
    if (same) {
        *version = in_use;
        st = TK_OK;
        goto done;
    }
    char ver[16], bytes[24];
    snprintf(ver, sizeof ver, "%d", next);
    snprintf(bytes, sizeof bytes, "%zu", b->bytes);
    const char *p3[] = {id, ver, b->digest, b->skill_md, bytes};
    if (tk_pg_exec(c,
                   "INSERT INTO skill_versions (skill_id, version, digest, skill_md, bytes) "
                   "VALUES ($1, $2::int, $3, $4, $5::bigint)",
                   5, p3) != TK_OK) {
        snprintf(err, errsz, "the database did not answer");
        goto done;
    }
    for (size_t i = 0; i < b->nfiles; i++) {
        const char *pf[] = {id, ver, b->files[i].path, (const char *)b->files[i].data};
        int lens[] = {0, 0, 0, (int)b->files[i].size};
        int fmts[] = {0, 0, 0, 1};
        PGresult *fr = PQexecParams(c,
                                    "INSERT INTO skill_files (skill_id, version, path, data) "
                                    "VALUES ($1, $2::int, $3, $4)",
                                    4, NULL, pf, lens, fmts, 0);
        int ok = PQresultStatus(fr) == PGRES_COMMAND_OK;
        PQclear(fr);
        if (!ok) {
            snprintf(err, errsz, "the database did not answer");
            goto done;
        }
    }
    const char *p4[] = {id, ver};
    if (tk_pg_exec(c, "UPDATE skills SET version = $2::int, updated_at = now() WHERE id = $1", 2,
                   p4) != TK_OK) {
        snprintf(err, errsz, "the database did not answer");
        goto done;
    }
    /* the oldest versions past the cap go (never the one in use) */
    char keep[16];
    snprintf(keep, sizeof keep, "%d", SKILL_VERSIONS_MAX);
    const char *p5[] = {id, keep};
    if (tk_pg_exec(c,
                   "DELETE FROM skill_versions WHERE skill_id = $1 AND version IN (SELECT "
                   "version FROM skill_versions WHERE skill_id = $1 ORDER BY version DESC OFFSET "
                   "$2::int)",
                   2, p5) != TK_OK) {
        snprintf(err, errsz, "the database did not answer");
        goto done;
    }
    *version = next;
    *created = 1;
    st = TK_OK;
done:
    if (st == TK_OK && shared) { /* an admin's upload for everyone shares the skill */
        const char *ps[] = {id};
        PGresult *sr = tk_pg_query(c, "UPDATE skills SET shared = true WHERE id = $1", 1, ps);
        if (!tk_pg_ok(sr)) {
            snprintf(err, errsz, "the database did not answer");
            st = TK_ERROR;
        }
        PQclear(sr);
    }
    if (tk_pg_exec(c, st == TK_OK ? "COMMIT" : "ROLLBACK", 0, NULL) != TK_OK && st == TK_OK) {
        snprintf(err, errsz, "the database did not answer");
        st = TK_ERROR;
    }
    return st;
}

static void h_post(tk_req *r, void *ud)
{
    (void)ud;
    size_t len = 0;
    const char *body = tk_req_body(r, &len);
    if (!body || len == 0) {
        tk_respond_error(r, 400, "SKILL_INVALID",
                         "send a SKILL.md, or a .zip or .skill file, as the request body");
        return;
    }
    /* ?for=everyone: an admin installs the skill for every user */
    const char *for_ = tk_req_query(r, "for");
    int shared = for_ && strcmp(for_, "everyone") == 0;
    if (for_ && !shared && strcmp(for_, "me") != 0) {
        tk_respond_error(r, 400, "INVALID_REQUEST", "for: \"me\" (the default) or \"everyone\"");
        return;
    }
    if (shared && !app_req_user(r)->admin) {
        tk_respond_error(r, 403, "FORBIDDEN", "only an admin installs a skill for everyone");
        return;
    }
    skill_bundle b;
    char err[512];
    /* every check before anything is stored */
    if (skill_bundle_parse(body, len, &b, err, sizeof err) != TK_OK) {
        tk_respond_error(r, 400, "SKILL_INVALID", "%s", err);
        return;
    }
    if (skills_name_reserved(b.name)) {
        tk_respond_error(r, 409, "SKILL_NAME_RESERVED",
                         "\"%s\" is the name of a built-in skill; choose another name", b.name);
        skill_bundle_free(&b);
        return;
    }
    PGconn *c = db(r);
    if (!c) {
        skill_bundle_free(&b);
        return;
    }
    int version = 0, created = 0;
    tk_status st = store(c, app_req_user(r)->id, &b, shared, &version, &created, err, sizeof err);
    if (st == TK_EDENIED) {
        tk_respond_error(r, 409, "SKILL_LIMIT", "%s", err);
    } else if (st == TK_EINVAL) {
        tk_respond_error(r, 409, "SKILL_NAME_SHARED", "%s", err);
    } else if (st != TK_OK) {
        tk_error("skills", "msg=\"a skill was not stored\" name=%s", b.name);
        app_respond_db_unavailable(r);
    } else {
        skills_set *s = skills_for_user(c, app_req_user(r)->id, 1);
        const skills_skill *sk = s ? skills_set_find(s, b.name) : NULL;
        json_t *j = sk ? skills_json(sk, skills_set_enabled(s, sk), 0)
                       : tk_json_obj("name", json_string(b.name), NULL);
        json_object_set_new(j, "warnings", json_incref(b.warnings));
        json_object_set_new(j, "created", json_boolean(created));
        tk_info("skills",
                "msg=\"skill stored\" name=%s version=%d digest=%s created=%d for_everyone=%d",
                b.name, version, b.digest, created, shared);
        tk_respond_json(r, created ? 201 : 200, j);
        skills_set_free(s);
    }
    app_db_release(c);
    skill_bundle_free(&b);
}

static void h_patch(tk_req *r, void *ud)
{
    (void)ud;
    json_t *body = tk_req_json(r, 0);
    if (!body)
        return;
    json_t *en = json_object_get(body, "enabled"), *ver = json_object_get(body, "version");
    if ((en && !json_is_boolean(en)) || (ver && !json_is_integer(ver)) || (!en && !ver)) {
        tk_respond_error(r, 400, "INVALID_REQUEST",
                         "give \"enabled\" (true or false) and/or \"version\" (a number)");
        return;
    }
    PGconn *c;
    skills_set *s;
    const skills_skill *sk = lookup(r, &c, &s);
    const char *uid = app_req_user(r)->id;
    if (!sk)
        return;
    if (ver) {
        if (sk->builtin) {
            tk_respond_error(r, 409, "SKILL_BUILTIN", "a built-in skill has one version");
            goto out;
        }
        if (!sk->mine) {
            tk_respond_error(r, 403, "SKILL_SHARED", SHARED_NOT_YOURS, sk->name);
            goto out;
        }
        char v[24];
        snprintf(v, sizeof v, "%lld", (long long)json_integer_value(ver));
        const char *p[] = {sk->id, v};
        PGresult *res = tk_pg_query(c,
                                    "UPDATE skills s SET version = $2::int, updated_at = now() "
                                    "WHERE id = $1 AND EXISTS (SELECT 1 FROM skill_versions WHERE "
                                    "skill_id = $1 AND version = $2::int) RETURNING version",
                                    2, p);
        int ok = tk_pg_ok(res), n = ok ? PQntuples(res) : 0;
        PQclear(res);
        if (!ok) {
            app_respond_db_unavailable(r);
            goto out;
        }
        if (n == 0) {
            tk_respond_error(r, 400, "SKILL_VERSION_NOT_FOUND", "the skill %s has no version %s",
                             sk->name, v);
            goto out;
        }
    }
    if (en) {
        const char *p[] = {uid, sk->name, json_is_true(en) ? "true" : "false"};
        if (tk_pg_exec(c,
                       "INSERT INTO skill_settings (user_id, name, enabled) VALUES ($1, $2, "
                       "$3::boolean) ON CONFLICT (user_id, name) DO UPDATE SET enabled = "
                       "EXCLUDED.enabled",
                       3, p) != TK_OK) {
            app_respond_db_unavailable(r);
            goto out;
        }
    }
    {
        char nm[TK_SKILL_NAME_MAX + 1];
        snprintf(nm, sizeof nm, "%s", sk->name);
        skills_set_free(s);
        s = skills_for_user(c, uid, 1);
        sk = s ? skills_set_find(s, nm) : NULL;
        if (sk)
            tk_respond_json(r, 200, skills_json(sk, skills_set_enabled(s, sk), 0));
        else
            app_respond_db_unavailable(r);
    }
out:
    skills_set_free(s);
    app_db_release(c);
}

static void h_delete(tk_req *r, void *ud)
{
    (void)ud;
    PGconn *c;
    skills_set *s;
    const skills_skill *sk = lookup(r, &c, &s);
    if (!sk)
        return;
    if (sk->builtin) {
        tk_respond_error(r, 409, "SKILL_BUILTIN",
                         "built-in skills cannot be deleted; disable it instead (PATCH "
                         "{\"enabled\": false})");
    } else if (!sk->mine) {
        tk_respond_error(r, 403, "SKILL_SHARED", SHARED_NOT_YOURS, sk->name);
    } else {
        const char *p[] = {sk->id, app_req_user(r)->id}, *q[] = {app_req_user(r)->id, sk->name};
        if (tk_pg_exec(c, "DELETE FROM skills WHERE id = $1 AND user_id = $2", 2, p) != TK_OK ||
            tk_pg_exec(c, "DELETE FROM skill_settings WHERE user_id = $1 AND name = $2", 2, q) !=
                TK_OK)
            app_respond_db_unavailable(r);
        else
            tk_respond(r, 204, NULL, NULL, 0);
    }
    skills_set_free(s);
    app_db_release(c);
}

static void h_export(tk_req *r, void *ud)
{
    (void)ud;
    PGconn *c;
    skills_set *s;
    const skills_skill *sk = lookup(r, &c, &s);
    if (!sk)
        return;
    if (skills_load_files(c, s, sk) != TK_OK) {
        app_respond_db_unavailable(r);
    } else {
        tk_buf z;
        tk_buf_init(&z, SKILL_BUNDLE_TOTAL_MAX + (8u << 20));
        if (skill_bundle_zip(sk->name, sk->skill_md, sk->skill_md_len, sk->files, sk->nfiles, &z) !=
            TK_OK) {
            tk_respond_error(r, 500, "INTERNAL", "the skill could not be written as a zip");
        } else {
            char cd[128];
            snprintf(cd, sizeof cd, "attachment; filename=\"%s.skill\"", sk->name);
            tk_respond_header(r, "Content-Disposition", cd);
            tk_respond_header(r, "X-Skill-Digest", sk->digest);
            tk_respond(r, 200, "application/zip", z.data, z.len);
        }
        tk_buf_free(&z);
    }
    skills_set_free(s);
    app_db_release(c);
}

const tk_route skills_api_routes[] = {
    {"GET", "/api/skills", h_list, NULL, TK_ROUTE_BLOCKING},
    {"POST", "/api/skills", h_post, NULL, TK_ROUTE_BLOCKING, SKILL_BUNDLE_UPLOAD_MAX},
    {"GET", "/api/skills/{name}/export", h_export, NULL, TK_ROUTE_BLOCKING},
    {"GET", "/api/skills/{name}", h_get, NULL, TK_ROUTE_BLOCKING},
    {"PATCH", "/api/skills/{name}", h_patch, NULL, TK_ROUTE_BLOCKING, 4096},
    {"DELETE", "/api/skills/{name}", h_delete, NULL, TK_ROUTE_BLOCKING},
};
const size_t skills_api_nroutes = TK_ARRAY_LEN(skills_api_routes);
