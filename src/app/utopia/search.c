/*
 * search.c — hybrid search over chunks, memories and facts, fused by
 * reciprocal rank fusion (RRF: score = sum over rankings of 1 / (60 + rank)).
 *
 * Chunks have two rankings, each from a capped candidate set so that a query
 * costs about the same at 10k and 1M chunks:
 *   exact    websearch_to_tsquery (AND of stemmed words, "phrases", -not), the
 *            first `candidates` matches from the GIN index ranked by ts_rank_cd
 *   lenient  OR of the query's rarer words (by their chunk counts in
 *            utopia_terms) plus, for every word the user's vocabulary does not
 *            have, its closest vocabulary words by trigram similarity (typos);
 *            ranked the same way
 * Memories and facts are few per user: full-text (OR) and trigram word
 * similarity over all of a user's rows. Every result carries a citation.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/utopia/db.h"
#include "app/utopia/embed.h"
#include "app/utopia/utopia.h"
#include "lib/id.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/pg.h"
#include "lib/utf8.h"

/* 1. the query's words, each with its chunk count (NULL: not in the vocabulary) */
static const char SQL_WORDS[] =
    "WITH w AS (SELECT DISTINCT x AS w FROM unnest(tsvector_to_array(to_tsvector('simple', $3))) x "
    "  WHERE length(x) BETWEEN 2 AND 40 LIMIT 24) "
    "SELECT json_build_object('total', (SELECT greatest(coalesce(sum(nchunks), 0), 1) FROM "
    "  utopia_documents WHERE user_id = $1), 'words', coalesce(json_agg(json_build_object('w', "
    "w.w, "
    "  'n', t.ndocs, 'stop', numnode(plainto_tsquery($2::regconfig, w.w)) = 0)), '[]')) "
    "FROM w LEFT JOIN utopia_terms t ON t.user_id = $1 AND t.term = w.w";

/* 2. typo candidates of a word missing from the vocabulary: words sharing its
 * first or last letters (btree ranges, each capped at 1,500 words, so a crowded
 * range costs a few milliseconds; the statistics on length(term) of migration
 * 0024 keep the planner on an index scan that stops there), of about its
 * length, by trigram similarity, ties broken by the word (the same candidates
 * whatever the plan) */
static const char SQL_FUZZY[] =
    "SELECT coalesce(json_agg(json_build_object('w', term, 'n', ndocs) ORDER BY sim DESC, ndocs "
    "DESC, term), '[]') FROM (SELECT term, ndocs, similarity(term, $2) AS sim FROM ((SELECT term, "
    "ndocs "
    "FROM utopia_terms WHERE user_id = $1 AND term LIKE $3 AND length(term) BETWEEN length($2) - 2 "
    "AND length($2) + 2 LIMIT 1500) UNION (SELECT term, ndocs FROM utopia_terms WHERE user_id = $1 "
    "AND reverse(term) LIKE $4 AND length(term) BETWEEN length($2) - 2 AND length($2) + 2 LIMIT "
    "1500)) x WHERE term <> $2 ORDER BY 3 DESC, 2 DESC, 1 LIMIT 4) y WHERE sim >= 0.3";

/* 3. the rankings over capped candidate sets, fused: exact, lenient and, with
 * an embeddings model, semantic (dot products of unit vectors $8: over all of
 * a small user's chunks, else over the lexical candidates). Three variants, so
 * that no statement carries a plan for work it will not do: the planner's cost
 * of an unused full scan alone turned on JIT compilation (~50 ms). */
#define CHUNKS_HEAD                                                                                \
    "WITH q AS (SELECT websearch_to_tsquery($2::regconfig, $3) AS tq, "                            \
    "  to_tsquery($2::regconfig, $7) AS lq), "                                                     \
    "fts AS (SELECT c.id, ts_rank_cd(c.tsv, websearch_to_tsquery($2::regconfig, $3)) AS r FROM "   \
    "  (SELECT id, tsv FROM utopia_chunks WHERE user_id = $1 AND ($4::uuid IS NULL OR chat_id = "  \
    "  $4) AND tsv @@ websearch_to_tsquery($2::regconfig, $3) LIMIT $5) c ORDER BY 2 DESC, 1 "     \
    "  LIMIT 100), "                                                                               \
    "len AS (SELECT c.id, ts_rank_cd(c.tsv, to_tsquery($2::regconfig, $7)) AS r FROM (SELECT id, " \
    "  tsv FROM utopia_chunks WHERE user_id = $1 AND ($4::uuid IS NULL OR chat_id = $4) AND tsv "  \
    "  @@ to_tsquery($2::regconfig, $7) LIMIT $5) c ORDER BY 2 DESC, 1 LIMIT 100), "
#define SEM_DOT  "(SELECT sum(a * b) FROM unnest(c.embedding, $8::real[]) t(a, b))"
#define SEM_NONE "sem AS (SELECT NULL::bigint AS id, NULL::real AS r WHERE false), "
#define SEM_ALL                                                                                    \
    "sem AS (SELECT id, r FROM (SELECT c.id, " SEM_DOT " AS r FROM utopia_chunks c WHERE "         \
    "  c.user_id = $1 AND ($4::uuid IS NULL OR c.chat_id = $4) AND c.embedding IS NOT NULL AND "   \
    "  array_length(c.embedding, 1) = array_length($8::real[], 1)) s WHERE r > 0 ORDER BY 2 "      \
    "  DESC, 1 LIMIT 100), "
#define SEM_CANDIDATES                                                                             \
    "sem AS (SELECT id, r FROM (SELECT c.id, " SEM_DOT " AS r FROM (SELECT id FROM fts UNION "     \
    "  SELECT id FROM len) ids JOIN utopia_chunks c ON c.id = ids.id WHERE c.embedding IS NOT "    \
    "  NULL AND array_length(c.embedding, 1) = array_length($8::real[], 1)) s WHERE r > 0 "        \
    "  ORDER BY 2 DESC, 1 LIMIT 100), "
#define CHUNKS_TAIL                                                                                \
    "rk AS (SELECT id, row_number() OVER (ORDER BY r DESC, id) AS exact, NULL::bigint AS "         \
    "  lenient, NULL::bigint AS semantic FROM fts "                                                \
    "  UNION ALL SELECT id, NULL, row_number() OVER (ORDER BY r DESC, id), NULL FROM len "         \
    "  UNION ALL SELECT id, NULL, NULL, row_number() OVER (ORDER BY r DESC, id) FROM sem), "       \
    "fused AS (SELECT id, sum(1.0 / (60 + coalesce(exact, lenient, semantic))) AS score, "         \
    "  min(exact) AS exact, min(lenient) AS lenient, min(semantic) AS semantic FROM rk GROUP BY "  \
    "  id ORDER BY 2 DESC, 1 LIMIT $6) "                                                           \
    "SELECT coalesce(json_agg(json_build_object('type', 'chunk', 'score', "                        \
    "  round(f.score::numeric, 6), 'document_id', c.document_id, 'title', d.title, 'position', "   \
    "  c.position, 'heading', c.heading, 'chat_id', c.chat_id, 'ranks', "                          \
    "  json_strip_nulls(json_build_object('exact', f.exact, 'lenient', f.lenient, 'semantic', "    \
    "  f.semantic)), 'snippet', ts_headline($2::regconfig, c.body, (SELECT tq || lq FROM q), "     \
    "  'StartSel=**, StopSel=**, MaxWords=40, MinWords=15, MaxFragments=2, "                       \
    "  FragmentDelimiter=\" … \"')) ORDER BY f.score DESC, f.id), '[]'::json) "                  \
    "FROM fused f JOIN utopia_chunks c ON c.id = f.id JOIN utopia_documents d ON d.id = "          \
    "c.document_id"
static const char SQL_CHUNKS[] = CHUNKS_HEAD SEM_NONE CHUNKS_TAIL;
static const char SQL_CHUNKS_SEM_ALL[] = CHUNKS_HEAD SEM_ALL CHUNKS_TAIL;
static const char SQL_CHUNKS_SEM_CAND[] = CHUNKS_HEAD SEM_CANDIDATES CHUNKS_TAIL;

/* LIKE pattern of s's first n characters, or of its last n reversed */
static void like_prefix(const char *s, size_t n, int reverse_it, char *out, size_t outlen)
{
    size_t len = strlen(s);
    char tmp[200];
    if (len >= sizeof tmp)
        len = sizeof tmp - 1;
    if (reverse_it) {
        /* reverse by characters, as Postgres' reverse() does */
        size_t k = 0;
        for (size_t i = len; i > 0;) {
            size_t j = tk_utf8_cut(s, len, i - 1); /* where the last character starts */
            memcpy(tmp + k, s + j, i - j);
            k += i - j;
            i = j;
        }
        tmp[k] = 0;
    } else {
        memcpy(tmp, s, len);
        tmp[len] = 0;
    }
    size_t o = 0, end = tk_utf8_cut_chars(tmp, strlen(tmp), n, NULL);
    for (size_t i = 0; i < end && o + 3 < outlen; i++) {
        if (tmp[i] == '%' || tmp[i] == '_' || tmp[i] == '\\')
            out[o++] = '\\';
        out[o++] = tmp[i];
    }
    out[o++] = '%';
    out[o] = 0;
}

typedef struct {
    const char *w;
    int64_t n;
} term_df;

static int by_df(const void *a, const void *b)
{
    const term_df *x = a, *y = b;
    return x->n < y->n ? -1 : x->n > y->n ? 1 : strcmp(x->w, y->w);
}

/* Stages 1–2: the lenient query's source text for to_tsquery. */
static tk_status lenient_query(const utopia *u, PGconn *c, const char *user_id, const char *q,
                               char **tsq, int64_t *total_out, char *err, size_t errlen)
{
    *tsq = NULL;
    const char *p1[] = {user_id, u->cfg.fts_config, q};
    json_t *wj = utopia_db_json(c, SQL_WORDS, 3, p1, NULL, err, errlen);
    if (!wj)
        return TK_ERROR;
    int64_t total = tk_json_int_or(wj, "total", 1);
    *total_out = total;
    json_t *words = json_object_get(wj, "words");
    json_t *fuzzy = json_array(); /* keeps the candidates' strings alive */
    term_df cand[24 * 5] = {0};
    size_t nc = 0;
    tk_status st = TK_OK;
    size_t i;
    json_t *w;
    int fuzzy_lookups = 0;
    json_array_foreach(words, i, w)
    {
        const char *word = tk_json_str(w, "w");
        if (!word || json_is_true(json_object_get(w, "stop")))
            continue;
        json_t *n = json_object_get(w, "n");
        if (json_is_integer(n)) {
            if (nc < TK_ARRAY_LEN(cand))
                cand[nc++] = (term_df){word, json_integer_value(n)};
            continue;
        }
        size_t wl = strlen(word);
        if (wl < 4 || fuzzy_lookups >= 6)
            continue;
        fuzzy_lookups++;
        size_t keep = wl >= 8 ? 4 : 3;
        char pre[128], suf[128];
        like_prefix(word, keep, 0, pre, sizeof pre);
        like_prefix(word, keep, 1, suf, sizeof suf);
        const char *p2[] = {user_id, word, pre, suf};
        json_t *fz = utopia_db_json(c, SQL_FUZZY, 4, p2, NULL, err, errlen);
        if (!fz) {
            st = TK_ERROR;
            goto out;
        }
        size_t j;
        json_t *f;
        json_array_foreach(fz, j, f)
        {
            if (nc < TK_ARRAY_LEN(cand) && tk_json_str(f, "w"))
                cand[nc++] = (term_df){tk_json_str(f, "w"), tk_json_int_or(f, "n", 1)};
        }
        json_array_append_new(fuzzy, fz);
    }
    /* the rarer words: those in at most 5% of the chunks, else (when a word
     * was corrected) the two rarest */
    qsort(cand, nc, sizeof *cand, by_df);
    int64_t thr = total / 20 > 20 ? total / 20 : 20;
    size_t nsel = 0;
    for (i = 0; i < nc; i++)
        nsel += cand[i].n <= thr;
    /* the lenient query's source, 'a' | 'b': parsed by to_tsquery in stage 4,
     * where the planner folds it to a constant (it is immutable) */
    tk_buf src;
    tk_buf_init(&src, TK_CAP_SMALL);
    /* only common words and no typos: the exact ranking already says it all */
    for (i = 0; i < nc && i < 12 && (nsel > 0 || fuzzy_lookups > 0); i++) {
        if (!(cand[i].n <= thr || (nsel == 0 && i < 2)))
            continue;
        if (strpbrk(cand[i].w, "'\\"))
            continue; /* the default parser never makes such words; be safe */
        tk_buf_printf(&src, "%s'%s'", src.len ? " | " : "", cand[i].w);
    }
    *tsq = tk_buf_steal(&src, NULL);
out:
    json_decref(fuzzy);
    json_decref(wj);
    return st;
}

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
    char ks[8], cand[16];
    snprintf(ks, sizeof ks, "%d", k);
    snprintf(cand, sizeof cand, "%lld", (long long)u->cfg.candidates);
    json_t *all = json_array();
    tk_status st = TK_OK;
    if (kinds & UTOPIA_KIND_CHUNKS) {
        char *lq = NULL;
        int64_t total = 0;
        if ((st = lenient_query(u, c, user_id, q, &lq, &total, err, errlen)) != TK_OK)
            goto out;
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
        const char *p[] = {user_id, u->cfg.fts_config,      q, chat, cand, ks,
                           lq,      qv.len ? qv.data : NULL};
        const char *sql = !qv.len                      ? SQL_CHUNKS
                          : total <= u->embed_scan_all ? SQL_CHUNKS_SEM_ALL
                                                       : SQL_CHUNKS_SEM_CAND;
        json_t *r = utopia_db_json(c, sql, qv.len ? 8 : 7, p, NULL, err, errlen);
        tk_buf_free(&qv);
        free(lq);
        if (!r) {
            st = TK_ERROR;
            goto out;
        }
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
