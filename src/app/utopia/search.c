/*
 * search.c — hybrid search over chunks, memories and facts, fused by
 * reciprocal rank fusion (RRF: score = sum over rankings of 1 / (60 + rank)).
 *
 * Chunks are ranked by BM25 over the scope's corpus statistics, with typo
 * corrections as weighted terms and the semantic ranking fused in when an
 * embeddings model is configured (bm25.c).
 * Memories and facts are few per user: full-text (OR) and trigram word
 * similarity over all of a user's rows. Every result carries a citation.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/utopia/bm25.h"
#include "app/utopia/db.h"
#include "app/utopia/embed.h"
#include "app/utopia/utopia.h"
#include "lib/id.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/pg.h"

static const char SQL_MEMORIES[] =
    "WITH p AS (SELECT $1::uuid AS uid, $2::regconfig AS cfg, $3::text AS qt, $4::uuid AS chat), "
    "oq AS (SELECT coalesce(to_tsquery(p.cfg, string_agg('''' || replace(replace(x, '\\', "
    "  '\\\\'), '''', '''''') || '''', ' | ')), ''::tsquery) AS tq FROM p, "
    "  unnest(tsvector_to_array(to_tsvector(p.cfg, p.qt))) x GROUP BY p.cfg), "
    "m AS (SELECT * FROM utopia_memories WHERE user_id = (SELECT uid FROM p) AND ((SELECT chat "
    "FROM p) "
    "  IS NULL OR chat_id = (SELECT chat FROM p))), "
    "a AS (SELECT id, row_number() OVER (ORDER BY ts_rank_cd(tsv, oq.tq) DESC, id) AS rk FROM m, "
    "oq "
    "  WHERE tsv @@ oq.tq LIMIT 100), "
    "b AS (SELECT id, row_number() OVER (ORDER BY word_similarity((SELECT qt FROM p), text) DESC, "
    "id) "
    "  AS rk FROM m WHERE word_similarity((SELECT qt FROM p), text) >= 0.45 LIMIT 100), "
    "f AS (SELECT id, sum(1.0 / (60 + rk)) AS score FROM (SELECT * FROM a UNION ALL SELECT * FROM "
    "b) "
    "  r GROUP BY id ORDER BY 2 DESC, 1 LIMIT $5) "
    "SELECT coalesce(json_agg(json_build_object('type', 'memory', 'score', round(f.score::numeric, "
    "6), "
    "  'id', m.id, 'text', m.text, 'chat_id', m.chat_id, 'created_at', "
    "  utopia_date_text(m.created_at, 'second')) ORDER BY f.score DESC, f.id), '[]'::json) "
    "FROM f JOIN utopia_memories m ON m.id = f.id";

static const char SQL_FACTS[] =
    "WITH p AS (SELECT $1::uuid AS uid, $2::regconfig AS cfg, $3::text AS qt), "
    "oq AS (SELECT coalesce(to_tsquery(p.cfg, string_agg('''' || replace(replace(x, '\\', "
    "  '\\\\'), '''', '''''') || '''', ' | ')), ''::tsquery) AS tq FROM p, "
    "  unnest(tsvector_to_array(to_tsvector(p.cfg, p.qt))) x GROUP BY p.cfg), "
    "fa AS (SELECT f.*, s.name AS sname FROM utopia_facts f JOIN utopia_entities s ON s.id = "
    "  f.subject_id WHERE f.user_id = (SELECT uid FROM p) AND f.valid_to IS NULL), "
    "a AS (SELECT id, row_number() OVER (ORDER BY ts_rank_cd(tsv, oq.tq) DESC, id) AS rk FROM fa, "
    "oq "
    "  WHERE tsv @@ oq.tq LIMIT 100), "
    "b AS (SELECT fa.id, row_number() OVER (ORDER BY max(similarity(al.norm, w)) DESC, fa.id) AS "
    "rk "
    "  FROM fa JOIN utopia_aliases al ON al.entity_id IN (fa.subject_id, fa.object_id), p, "
    "  unnest(tsvector_to_array(to_tsvector('simple', p.qt))) w WHERE length(w) >= 3 AND al.norm % "
    "w "
    "  GROUP BY fa.id LIMIT 100), "
    "f AS (SELECT id, sum(1.0 / (60 + rk)) AS score FROM (SELECT * FROM a UNION ALL SELECT * FROM "
    "b) "
    "  r GROUP BY id ORDER BY 2 DESC, 1 LIMIT $4) "
    "SELECT coalesce(json_agg(json_build_object('type', 'fact', 'score', round(f.score::numeric, "
    "6), "
    "  'id', x.id, 'subject', x.sname, 'predicate', x.predicate, 'object', x.object, 'valid_from', "
    "  utopia_date_text(x.valid_from, x.valid_from_precision), 'source', json_strip_nulls("
    "  json_build_object('chat_id', x.source_chat_id, 'turn_id', x.source_turn_id, 'document_id', "
    "  x.source_document_id))) ORDER BY f.score DESC, f.id), '[]'::json) "
    "FROM f JOIN fa x ON x.id = f.id";

static int by_score(const void *a, const void *b)
{
    double x = json_number_value(json_object_get(*(json_t *const *)a, "score"));
    double y = json_number_value(json_object_get(*(json_t *const *)b, "score"));
    return x < y ? 1 : x > y ? -1 : 0;
}

static void cite(json_t *r, int n)
{
    const char *type = json_string_value(json_object_get(r, "type"));
    char buf[400];
    if (!strcmp(type, "chunk")) {
        const char *h = json_string_value(json_object_get(r, "heading"));
        snprintf(buf, sizeof buf, "[%d] %s%s%s, part %lld", n,
                 json_string_value(json_object_get(r, "title")), h && *h ? " — " : "", h ? h : "",
                 (long long)json_integer_value(json_object_get(r, "position")) + 1);
    } else if (!strcmp(type, "memory")) {
        snprintf(buf, sizeof buf, "[%d] memory %s", n,
                 json_string_value(json_object_get(r, "created_at")));
    } else {
        const char *vf = json_string_value(json_object_get(r, "valid_from"));
        snprintf(buf, sizeof buf, "[%d] fact: %s %s %s%s%s", n,
                 json_string_value(json_object_get(r, "subject")),
                 json_string_value(json_object_get(r, "predicate")),
                 json_string_value(json_object_get(r, "object")), vf ? " since " : "",
                 vf ? vf : "");
    }
    json_object_set_new(r, "cite", json_string(buf));
}

tk_status utopia_search(const utopia *u, PGconn *c, const char *user_id,
                        const utopia_search_opts *o, json_t **out, char *err, size_t errlen)
{
    *out = NULL;
    const char *chat = o->scope_chat ? o->chat_id : NULL;
    if (!user_id || !utopia_uuid_ok(user_id) || !utopia_uuid_ok(chat)) {
        snprintf(err, errlen, "bad user or chat id");
        return TK_EINVAL;
    }
    if (o->scope_chat && !o->chat_id) {
        snprintf(err, errlen, "scope \"chat\" needs a chat");
        return TK_EINVAL;
    }
    if (!o->query || !*o->query || strlen(o->query) > 2000) {
        snprintf(err, errlen, "query: 1 to 2000 characters");
        return TK_EINVAL;
    }
    /* the query as normalised text: valid UTF-8, no control characters */
    tk_buf qb;
    tk_buf_init(&qb, TK_CAP_TARGET);
    utopia_text_normalize(&qb, o->query, strlen(o->query), 0);
    const char *q = tk_buf_cstr(&qb);
    int k = o->k <= 0 ? 8 : o->k > 50 ? 50 : o->k;
    int kinds = o->kinds ? o->kinds : UTOPIA_KIND_ALL;
    char ks[8];
    snprintf(ks, sizeof ks, "%d", k);
    json_t *all = json_array();
    tk_status st = TK_OK;
    if (kinds & UTOPIA_KIND_CHUNKS) {
        /* the semantic ranking, when an embeddings model is configured; a
         * failing endpoint costs that ranking only */
        tk_buf qv;
        tk_buf_init(&qv, TK_CAP_MESSAGE);
        if (u->embeddings) {
            float *v = NULL;
            int dim = 0;
            char eerr[256];
            const char *texts[] = {q};
            if (utopia_embed(u, texts, 1, &v, &dim, eerr, sizeof eerr) == TK_OK)
                utopia_embed_literal(v, dim, &qv);
            else
                tk_warn("utopia", "msg=\"query not embedded\" error=\"%s\"", eerr);
            free(v);
        }
        json_t *r = NULL;
        st =
            utopia_bm25_chunks(u, c, user_id, chat, q, k, qv.len ? qv.data : NULL, &r, err, errlen);
        tk_buf_free(&qv);
        if (st != TK_OK)
            goto out;
        json_array_extend(all, r);
        json_decref(r);
    }
    if (kinds & UTOPIA_KIND_MEMORIES) {
        const char *p[] = {user_id, u->cfg.fts_config, q, chat, ks};
        json_t *r = utopia_db_json(c, SQL_MEMORIES, 5, p, NULL, err, errlen);
        if (!r) {
            st = TK_ERROR;
            goto out;
        }
        json_array_extend(all, r);
        json_decref(r);
    }
    if (kinds & UTOPIA_KIND_FACTS) {
        const char *p[] = {user_id, u->cfg.fts_config, q, ks};
        json_t *r = utopia_db_json(c, SQL_FACTS, 4, p, NULL, err, errlen);
        if (!r) {
            st = TK_ERROR;
            goto out;
        }
        json_array_extend(all, r);
        json_decref(r);
    }
    /* merge the kinds by their fused scores (all RRF sums, so comparable) */
    size_t n = json_array_size(all);
    json_t **v = tk_calloc(n ? n : 1, sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = json_incref(json_array_get(all, i));
    qsort(v, n, sizeof *v, by_score);
    json_t *res = json_array();
    for (size_t i = 0; i < n; i++) {
        if ((int)json_array_size(res) < k) {
            cite(v[i], (int)json_array_size(res) + 1);
            json_array_append(res, v[i]);
        }
        json_decref(v[i]);
    }
    free(v);
    *out = tk_json_obj("query", json_string(q), "results", res, NULL);
out:
    json_decref(all);
    tk_buf_free(&qb);
    return st;
}

/* ---- memories ---- */

tk_status utopia_memory_add(const utopia *u, PGconn *c, const char *user_id, const char *text,
                            const utopia_source *src, json_t **out, char *err, size_t errlen)
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
    tk_buf b;
    tk_buf_init(&b, 16384);
    if (!text || utopia_text_normalize(&b, text, strlen(text), 1) != TK_OK || b.len == 0 ||
        b.len > 4000) {
        tk_buf_free(&b);
        snprintf(err, errlen, "note: 1 to 4000 characters");
        return TK_EINVAL;
    }
    char id[TK_UUID_LEN];
    tk_uuid7(id);
    const char *p[] = {id,     user_id,          src->chat_id, src->turn_id, src->document_id,
                       b.data, u->cfg.fts_config};
    *out = utopia_db_json(
        c,
        "WITH i AS (INSERT INTO utopia_memories (id, user_id, chat_id, turn_id, document_id, text, "
        "tsv) VALUES ($1, $2, $3, $4, $5, $6, to_tsvector($7::regconfig, $6)) RETURNING *) "
        "SELECT json_build_object('memory', json_build_object('id', id, 'text', text, 'chat_id', "
        "chat_id, 'created_at', utopia_date_text(created_at, 'second'))) FROM i",
        7, p, NULL, err, errlen);
    tk_buf_free(&b);
    return *out ? TK_OK : TK_ERROR;
}

tk_status utopia_memory_list(const utopia *u, PGconn *c, const char *user_id, int limit, int offset,
                             json_t **out, char *err, size_t errlen)
{
    (void)u;
    *out = NULL;
    if (!user_id || !utopia_uuid_ok(user_id)) {
        snprintf(err, errlen, "bad user id");
        return TK_EINVAL;
    }
    utopia_db_page pg = utopia_db_page_of(limit, offset, 200, 1000);
    const char *p[] = {user_id, pg.limit, pg.offset};
    *out = utopia_db_json(
        c,
        "SELECT json_build_object('memories', coalesce(json_agg(json_build_object('id', id, "
        "'text', text, 'chat_id', chat_id, 'turn_id', turn_id, 'created_at', "
        "utopia_date_text(created_at, 'second')) ORDER BY created_at DESC, id DESC), '[]'::json)) "
        "FROM (SELECT * FROM utopia_memories WHERE user_id = $1 ORDER BY created_at DESC, id DESC "
        "LIMIT $2 OFFSET $3) m",
        3, p, NULL, err, errlen);
    return *out ? TK_OK : TK_ERROR;
}

tk_status utopia_memory_delete(const utopia *u, PGconn *c, const char *user_id, const char *id,
                               json_t **out, char *err, size_t errlen)
{
    (void)u;
    return utopia_db_delete_one(c, "DELETE FROM utopia_memories WHERE user_id = $1 AND id = $2",
                                "memory", user_id, id, out, err, errlen);
}

tk_status utopia_memory_relevant(const utopia *u, PGconn *c, const char *user_id,
                                 const char *turn_text, const char *chat_id, int budget_tokens,
                                 json_t **out, char *err, size_t errlen)
{
    (void)chat_id; /* memories are the user's, across chats */
    *out = NULL;
    int budget = budget_tokens > 0 ? budget_tokens : (int)u->cfg.memory_budget;
    json_t *picked = json_array();
    int used = 0;
    if (turn_text && *turn_text && budget > 0) {
        utopia_search_opts o = {.query = turn_text, .k = 20, .kinds = UTOPIA_KIND_MEMORIES};
        json_t *r = NULL;
        tk_status st = utopia_search(u, c, user_id, &o, &r, err, errlen);
        if (st != TK_OK) {
            json_decref(picked);
            return st;
        }
        size_t i;
        json_t *m;
        json_array_foreach(json_object_get(r, "results"), i, m)
        {
            /* about four bytes a token, and a few for the list's framing */
            int cost = (int)(strlen(json_string_value(json_object_get(m, "text"))) + 3) / 4 + 4;
            if (used + cost > budget)
                continue;
            used += cost;
            json_array_append_new(picked,
                                  tk_json_obj("id", json_incref(json_object_get(m, "id")), "text",
                                              json_incref(json_object_get(m, "text")), "score",
                                              json_incref(json_object_get(m, "score")), NULL));
        }
        json_decref(r);
    }
    *out = tk_json_obj("memories", picked, "tokens", json_integer(used), "budget",
                       json_integer(budget), NULL);
    return TK_OK;
}
