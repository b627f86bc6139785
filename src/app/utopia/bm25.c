/*
 * bm25.c — chunks ranked by BM25 (bm25.h), top-k without scoring every chunk
 * that holds a common word, typo corrections as weighted query terms, and the
 * semantic ranking (when configured) fused by reciprocal rank.
 *
 * Top-k (MaxScore): a term adds at most w_t * (k1 + 1) to a score. The
 * query's terms are taken rarest first into the "essential" set while their
 * document frequencies sum to at most UTOPIA_SEARCH_CANDIDATES: every chunk
 * holding one of them is scored (the GIN index finds them; the sum bounds
 * their number). The others are common; a chunk holding only those scores at
 * most the sum of their bounds, so when the k-th best score so far is above
 * it the ranking is exact and nothing more is read. Otherwise (a query of
 * common words only, or too few matches) up to the cap more chunks are scored,
 * taken by which of the common terms they hold (common_tiers): the subsets of
 * terms that can add the most to a score first.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/utopia/bm25.h"
#include "app/utopia/db.h"
#include "lib/buf.h"
#include "lib/json.h"
#include "lib/utf8.h"

double utopia_bm25_idf(double n, double df)
{
    return log(1.0 + (n - df + 0.5) / (df + 0.5));
}

/* ---- typo corrections ---- */

/* the query's words ('simple' lexemes), whether the user's vocabulary
 * (utopia_terms) has them, and whether the configuration drops them */
static const char SQL_WORDS[] =
    "WITH w AS (SELECT DISTINCT x AS w FROM unnest(tsvector_to_array(to_tsvector('simple', $3))) x "
    "  WHERE length(x) BETWEEN 2 AND 40 LIMIT 24) "
    "SELECT coalesce(json_agg(json_build_object('w', w.w, 'known', t.term IS NOT NULL, 'stop', "
    "  numnode(plainto_tsquery($2::regconfig, w.w)) = 0)), '[]') "
    "FROM w LEFT JOIN utopia_terms t ON t.user_id = $1 AND t.term = w.w";

/* typo candidates of a word missing from the vocabulary: words sharing its
 * first or last letters (btree ranges, each capped at 1,500 words, so a crowded
 * range costs a few milliseconds; the statistics on length(term) of migration
 * 0024 keep the planner on an index scan that stops there), of about its
 * length, by trigram similarity, ties broken by the word (the same candidates
 * whatever the plan) */
static const char SQL_FUZZY[] =
    "SELECT coalesce(json_agg(json_build_object('w', term, 'sim', sim) ORDER BY sim DESC, ndocs "
    "DESC, term), '[]') FROM (SELECT term, ndocs, similarity(term, $2) AS sim FROM ((SELECT term, "
    "ndocs FROM utopia_terms WHERE user_id = $1 AND term LIKE $3 AND length(term) BETWEEN "
    "length($2) - 2 AND length($2) + 2 LIMIT 1500) UNION (SELECT term, ndocs FROM utopia_terms "
    "WHERE user_id = $1 AND reverse(term) LIKE $4 AND length(term) BETWEEN length($2) - 2 AND "
    "length($2) + 2 LIMIT 1500)) x WHERE term <> $2 ORDER BY 3 DESC, 2 DESC, 1 LIMIT 4) y WHERE "
    "sim >= 0.3";

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

/* appends s to a Postgres array literal being built in b ("{" ... "}") */
static void array_add(tk_buf *b, const char *s)
{
    tk_buf_append(b, b->len > 1 ? ",\"" : "\"", b->len > 1 ? 2 : 1);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            tk_buf_append(b, "\\", 1);
        tk_buf_append(b, s, 1);
    }
    tk_buf_append(b, "\"", 1);
}

/* The closest vocabulary words of the query's words that the vocabulary lacks
 * (at most 6 words of 4 or more letters, 4 candidates each): *words and *sims
 * are array literals for SQL_STATS. */
static tk_status typo_corrections(PGconn *c, const char *user_id, const char *cfg, const char *q,
                                  tk_buf *words, tk_buf *sims, char *err, size_t errlen)
{
    tk_buf_append(words, "{", 1);
    tk_buf_append(sims, "{", 1);
    const char *p1[] = {user_id, cfg, q};
    json_t *wj = utopia_db_json(c, SQL_WORDS, 3, p1, NULL, err, errlen);
    if (!wj)
        return TK_ERROR;
    tk_status st = TK_OK;
    int lookups = 0;
    size_t i;
    json_t *w;
    json_array_foreach(wj, i, w)
    {
        const char *word = tk_json_str(w, "w");
        if (!word || json_is_true(json_object_get(w, "stop")) ||
            json_is_true(json_object_get(w, "known")))
            continue;
        size_t wl = strlen(word);
        if (wl < 4 || lookups >= 6)
            continue;
        lookups++;
        size_t keep = wl >= 8 ? 4 : 3;
        char pre[128], suf[128];
        like_prefix(word, keep, 0, pre, sizeof pre);
        like_prefix(word, keep, 1, suf, sizeof suf);
        const char *p2[] = {user_id, word, pre, suf};
        json_t *fz = utopia_db_json(c, SQL_FUZZY, 4, p2, NULL, err, errlen);
        if (!fz) {
            st = TK_ERROR;
            break;
        }
        size_t j;
        json_t *f;
        json_array_foreach(fz, j, f)
        {
            const char *cw = tk_json_str(f, "w");
            if (!cw)
                continue;
            array_add(words, cw);
            tk_buf_printf(sims, "%s%.6f", sims->len > 1 ? "," : "",
                          json_number_value(json_object_get(f, "sim")));
        }
        json_decref(fz);
    }
    json_decref(wj);
    tk_buf_append(words, "}", 1);
    tk_buf_append(sims, "}", 1);
    return st;
}

/* ---- statistics ---- */

/* the query's lexemes (weight 1) and its corrections' lexemes (weight: the
 * similarity), each with its document frequency in the scope, and the scope's
 * chunks and total length */
static const char SQL_STATS[] =
    "WITH q AS (SELECT lexeme AS t, 1.0::float8 AS wt FROM unnest(to_tsvector($2::regconfig, $3)) "
    "  LIMIT 32), "
    "x AS (SELECT l.lexeme AS t, max(z.sim) AS wt FROM unnest($5::text[], $6::float8[]) z(w, sim), "
    "  unnest(to_tsvector($2::regconfig, z.w)) l WHERE l.lexeme NOT IN (SELECT t FROM q) GROUP BY "
    "  1), "
    "a AS (SELECT * FROM q UNION ALL SELECT * FROM x) "
    "SELECT json_build_object('n', coalesce(sum(nchunks), 0), 'len', coalesce(sum(total_len), 0), "
    "  'terms', (SELECT coalesce(json_agg(json_build_object('t', a.t, 'wt', a.wt, 'df', (SELECT "
    "  coalesce(sum(df), 0) FROM utopia_bm25_terms y WHERE y.user_id = $1 AND y.term = a.t AND "
    "  ($4::uuid IS NULL OR y.chat_id = $4))) ORDER BY a.t), '[]') FROM a)) "
    "FROM utopia_bm25_scopes WHERE user_id = $1 AND ($4::uuid IS NULL OR chat_id = $4)";

/* ---- the ranking ---- */

#define SCOPE "user_id = $1 AND ($3::uuid IS NULL OR chat_id = $3)"
/* the occurrences of the query's lexemes in tsvector v, all of weight A */
#define ONLY_TERMS(v) "ts_filter(setweight(setweight(" v ", 'D'), 'A', $4::text[]), '{a}')"
/* BM25 of the chunks of relation src (id, tsv) */
#define SCORE(src)                                                                                 \
    "SELECT c.id, (SELECT sum(z.wt * f.tf * ($14::float8 + 1) / (f.tf + $14::float8 * (1 - "       \
    "  $15::float8 + $15::float8 * length(c.tsv) / $11::float8))) FROM (SELECT a.lexeme, "         \
    "  array_length(a.positions, 1) + ($16::float8 - 1) * coalesce(array_length(h.positions, 1), " \
    "  0) AS tf FROM unnest(" ONLY_TERMS("c.tsv") ") a LEFT JOIN unnest(" ONLY_TERMS(              \
        "ts_filter(c.tsv, '{a}')") ") h ON h.lexeme = a.lexeme) f JOIN unnest($4::text[], "        \
                                   "$5::float8[]) z(t, wt) ON z.t = f.lexeme) AS r FROM " src " c"
#define CHUNKS_HEAD                                                                                \
    "WITH e AS (SELECT id, tsv FROM utopia_chunks WHERE $6::tsquery IS NOT NULL AND " SCOPE        \
    "  AND tsv @@ $6::tsquery LIMIT $10), "                                                        \
    "es AS (" SCORE("e") "), "                                                                     \
                         "th AS (SELECT coalesce((SELECT r FROM es ORDER BY r DESC OFFSET "        \
                         "$9::int - 1 LIMIT 1), 0) "                                               \
                         "  AS v), "                                                               \
                         "x AS (SELECT c.id, c.tsv FROM unnest($7::tsquery[]) q(tq) CROSS JOIN "   \
                         "LATERAL (SELECT id, "                                                    \
                         "  tsv FROM utopia_chunks WHERE " SCOPE                                   \
                         " AND tsv @@ q.tq LIMIT $10) c WHERE (SELECT v FROM "                     \
                         "  th) < $8::float8 LIMIT $10), "                                         \
                         "xs AS (" SCORE("x") "), "                                                \
                                              "bm AS (SELECT id, max(r) AS r FROM (SELECT * FROM " \
                                              "es UNION ALL SELECT * FROM xs) s WHERE r > "        \
                                              "  0 GROUP BY id ORDER BY 2 DESC, 1 LIMIT 100), "
#define SEM_DOT  "(SELECT sum(a * b) FROM unnest(c.embedding, $17::real[]) t(a, b))"
#define SEM_NONE "sem AS (SELECT NULL::bigint AS id, NULL::real AS r WHERE false), "
#define SEM_ALL                                                                                    \
    "sem AS (SELECT id, r FROM (SELECT c.id, " SEM_DOT " AS r FROM utopia_chunks c WHERE "         \
    "  c.user_id = $1 AND ($3::uuid IS NULL OR c.chat_id = $3) AND c.embedding IS NOT NULL AND "   \
    "  array_length(c.embedding, 1) = array_length($17::real[], 1)) s WHERE r > 0 ORDER BY 2 "     \
    "  DESC, 1 LIMIT 100), "
#define SEM_CANDIDATES                                                                             \
    "sem AS (SELECT id, r FROM (SELECT c.id, " SEM_DOT " AS r FROM bm JOIN utopia_chunks c ON "    \
    "  c.id = bm.id WHERE c.embedding IS NOT NULL AND array_length(c.embedding, 1) = "             \
    "  array_length($17::real[], 1)) s WHERE r > 0 ORDER BY 2 DESC, 1 LIMIT 100), "
#define CHUNKS_TAIL                                                                                 \
    "rk AS (SELECT id, r, row_number() OVER (ORDER BY r DESC, id) AS bm25, NULL::bigint AS "        \
    "  semantic FROM bm UNION ALL SELECT id, NULL, NULL, row_number() OVER (ORDER BY r DESC, id) "  \
    "  FROM sem), "                                                                                 \
    "fused AS (SELECT id, sum(1.0 / (60 + coalesce(bm25, semantic))) AS score, max(r) AS r, "       \
    "  min(bm25) AS bm25, min(semantic) AS semantic FROM rk GROUP BY id ORDER BY 2 DESC, 3 DESC "   \
    "  NULLS LAST, 1 LIMIT $12) "                                                                   \
    "SELECT coalesce(json_agg(json_build_object('type', 'chunk', 'score', "                         \
    "  round(f.score::numeric, 6), 'bm25', round(f.r::numeric, 6), 'document_id', c.document_id, "  \
    "  'title', d.title, 'position', c.position, 'heading', c.heading, 'chat_id', c.chat_id, "      \
    "  'ranks', json_strip_nulls(json_build_object('bm25', f.bm25, 'semantic', f.semantic)), "      \
    "  'snippet', CASE WHEN $13::tsquery IS NULL THEN left(c.body, 300) ELSE "                      \
    "  ts_headline($2::regconfig, c.body, $13::tsquery, 'StartSel=**, StopSel=**, MaxWords=40, "    \
    "  MinWords=15, MaxFragments=2, FragmentDelimiter=\" … \"') END) ORDER BY f.score DESC, f.r " \
    "  DESC NULLS LAST, f.id), '[]'::json) "                                                        \
    "FROM fused f JOIN utopia_chunks c ON c.id = f.id JOIN utopia_documents d ON d.id = "           \
    "c.document_id"
/* Three variants, so that no statement carries a plan for work it will not do:
 * the planner's cost of an unused full scan alone turned on JIT compilation
 * (~50 ms). */
static const char SQL_CHUNKS[] = CHUNKS_HEAD SEM_NONE CHUNKS_TAIL;
static const char SQL_CHUNKS_SEM_ALL[] = CHUNKS_HEAD SEM_ALL CHUNKS_TAIL;
static const char SQL_CHUNKS_SEM_CAND[] = CHUNKS_HEAD SEM_CANDIDATES CHUNKS_TAIL;

typedef struct {
    const char *t;
    double df, wt, w; /* w: wt * idf */
} qterm;

static int by_df(const void *a, const void *b)
{
    const qterm *x = a, *y = b;
    return x->df < y->df ? -1 : x->df > y->df ? 1 : strcmp(x->t, y->t);
}

/* appends lexeme t to a tsquery's source, joined by op (the tsquery input
 * syntax takes a quoted lexeme as it is, without parsing or stemming it) */
static void tsq_add(tk_buf *b, const char *op, const char *t)
{
    if (b->len)
        tk_buf_printf(b, " %s ", op);
    tk_buf_append(b, "'", 1);
    for (; *t; t++) {
        if (*t == '\'' || *t == '\\')
            tk_buf_append(b, "\\", 1);
        tk_buf_append(b, t, 1);
    }
    tk_buf_append(b, "'", 1);
}

/* The candidates among the chunks of common terms (t, n of them, rarest
 * first), as a tsquery[] literal of disjoint tiers: the chunks holding exactly
 * a subset of the TIER_TERMS rarest (the others absent), subsets by the sum of
 * their terms' weights, heaviest first, so chunks are taken in the order of
 * what their common terms can add to a score rather than the index's; then,
 * with more terms, the chunks holding any of the rest. */
#define TIER_TERMS 6
static void common_tiers(const qterm *t, size_t n, tk_buf *out)
{
    size_t m = n < TIER_TERMS ? n : TIER_TERMS;
    unsigned sets[1u << TIER_TERMS];
    double wsum[1u << TIER_TERMS];
    size_t ns = 0;
    for (unsigned s = 1; s < (1u << m); s++) {
        double w = 0;
        for (size_t i = 0; i < m; i++)
            if (s & (1u << i))
                w += t[i].w;
        /* insertion by weight, heaviest first (ties: the larger set) */
        size_t j = ns++;
        while (j > 0 && (wsum[j - 1] < w || (wsum[j - 1] == w && sets[j - 1] < s))) {
            sets[j] = sets[j - 1];
            wsum[j] = wsum[j - 1];
            j--;
        }
        sets[j] = s;
        wsum[j] = w;
    }
    tk_buf q;
    tk_buf_init(&q, TK_CAP_SMALL);
    tk_buf_append(out, "{", 1);
    for (size_t k = 0; k < ns; k++) {
        tk_buf_reset(&q);
        for (size_t i = 0; i < m; i++)
            if (sets[k] & (1u << i))
                tsq_add(&q, "&", t[i].t);
        for (size_t i = 0; i < m; i++)
            if (!(sets[k] & (1u << i))) {
                tk_buf_append(&q, " & !", 4);
                tsq_add(&q, "", t[i].t);
            }
        array_add(out, tk_buf_cstr(&q));
    }
    if (n > m) {
        tk_buf_reset(&q);
        for (size_t i = m; i < n; i++)
            tsq_add(&q, "|", t[i].t);
        array_add(out, tk_buf_cstr(&q));
    }
    tk_buf_append(out, "}", 1);
    tk_buf_free(&q);
}

tk_status utopia_bm25_chunks(const utopia *u, PGconn *c, const char *user_id, const char *chat,
                             const char *q, int k, const char *qvec, json_t **out, char *err,
                             size_t errlen)
{
    *out = NULL;
    const char *cfg = u->cfg.fts_config;
    tk_buf words, sims;
    tk_buf_init(&words, TK_CAP_SMALL);
    tk_buf_init(&sims, TK_CAP_SMALL);
    tk_status st = typo_corrections(c, user_id, cfg, q, &words, &sims, err, errlen);
    json_t *stats = NULL;
    if (st != TK_OK)
        goto out;
    const char *p1[] = {user_id, cfg, q, chat, tk_buf_cstr(&words), tk_buf_cstr(&sims)};
    if (!(stats = utopia_db_json(c, SQL_STATS, 6, p1, NULL, err, errlen))) {
        st = TK_ERROR;
        goto out;
    }
    double n = (double)tk_json_int_or(stats, "n", 0);
    double total = (double)tk_json_int_or(stats, "len", 0);
    json_t *tj = json_object_get(stats, "terms");
    qterm terms[64] = {0};
    size_t nt = 0;
    tk_buf all, terms_lit, wts_lit, ess, tiers;
    tk_buf_init(&all, TK_CAP_SMALL);
    tk_buf_init(&terms_lit, TK_CAP_SMALL);
    tk_buf_init(&wts_lit, TK_CAP_SMALL);
    tk_buf_init(&ess, TK_CAP_SMALL);
    tk_buf_init(&tiers, TK_CAP_SMALL);
    size_t i;
    json_t *t;
    json_array_foreach(tj, i, t)
    {
        const char *lex = tk_json_str(t, "t");
        if (!lex)
            continue;
        double wt = json_number_value(json_object_get(t, "wt"));
        tsq_add(&all, "|", lex); /* for the snippet */
        double df = (double)tk_json_int_or(t, "df", 0);
        if (df <= 0 || nt == TK_ARRAY_LEN(terms))
            continue;
        terms[nt++] = (qterm){lex, df, wt, wt * utopia_bm25_idf(n, df)};
    }
    qsort(terms, nt, sizeof *terms, by_df);
    /* the essential terms: the rarest, while their chunks fit the cap */
    double cap = (double)u->cfg.candidates, cum = 0, ub_rest = 0;
    size_t ne = 0;
    while (ne < nt && cum + terms[ne].df <= cap)
        cum += terms[ne++].df;
    tk_buf_append(&terms_lit, "{", 1);
    tk_buf_append(&wts_lit, "{", 1);
    for (i = 0; i < nt; i++) {
        array_add(&terms_lit, terms[i].t);
        tk_buf_printf(&wts_lit, "%s%.17g", i ? "," : "", terms[i].w);
        if (i < ne) {
            tsq_add(&ess, "|", terms[i].t);
        } else {
            ub_rest += terms[i].w * (UTOPIA_BM25_K1 + 1);
        }
    }
    tk_buf_append(&terms_lit, "}", 1);
    tk_buf_append(&wts_lit, "}", 1);
    common_tiers(terms + ne, nt - ne, &tiers);
    if (nt == 0 && !qvec) {
        *out = json_array();
        goto done;
    }
    char ks[16], capv[24], ubv[40], avgv[40], k1[24], b[24], hw[24];
    snprintf(capv, sizeof capv, "%lld", (long long)u->cfg.candidates);
    snprintf(ubv, sizeof ubv, "%.17g", ub_rest);
    snprintf(avgv, sizeof avgv, "%.17g", n > 0 ? total / n : 1.0);
    snprintf(ks, sizeof ks, "%d", k);
    snprintf(k1, sizeof k1, "%.17g", UTOPIA_BM25_K1);
    snprintf(b, sizeof b, "%.17g", UTOPIA_BM25_B);
    snprintf(hw, sizeof hw, "%.17g", UTOPIA_BM25_HEADING);
    const char *p[] = {user_id,
                       cfg,
                       chat,
                       tk_buf_cstr(&terms_lit),
                       tk_buf_cstr(&wts_lit),
                       ess.len ? ess.data : NULL,
                       tk_buf_cstr(&tiers),
                       ubv,
                       ks,
                       capv,
                       avgv,
                       ks,
                       all.len ? all.data : NULL,
                       k1,
                       b,
                       hw,
                       qvec};
    const char *sql = !qvec                    ? SQL_CHUNKS
                      : n <= u->embed_scan_all ? SQL_CHUNKS_SEM_ALL
                                               : SQL_CHUNKS_SEM_CAND;
    if (!(*out = utopia_db_json(c, sql, qvec ? 17 : 16, p, NULL, err, errlen)))
        st = TK_ERROR;
done:
    tk_buf_free(&all);
    tk_buf_free(&terms_lit);
    tk_buf_free(&wts_lit);
    tk_buf_free(&ess);
    tk_buf_free(&tiers);
out:
    json_decref(stats);
    tk_buf_free(&words);
    tk_buf_free(&sims);
    return st;
}
