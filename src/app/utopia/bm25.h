/*
 * bm25.h — the lexical ranking of chunks: BM25 over the corpus statistics that
 * migration 0030's triggers keep per scope (internal; docs/UTOPIA.md
 * "Ranking").
 *
 * A chunk's score for the query's lexemes t (those of to_tsvector(config,
 * query), plus typo corrections weighted by their similarity w_t < 1):
 *
 *   score = sum_t w_t * idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avglen))
 *   idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))
 *   tf     = occurrences of t in the chunk, an occurrence in the title or a
 *            heading (weight A) counting UTOPIA_BM25_HEADING times
 *   len    = length(tsv), the chunk's distinct lexemes; avglen = total / N
 *
 * with N, total and df those of the scope searched (a chat's chunks, or all
 * of the user's).
 */
#ifndef UTOPIA_BM25_H
#define UTOPIA_BM25_H

#include <jansson.h>
#include <libpq-fe.h>

#include "app/utopia/utopia.h"

#define UTOPIA_BM25_K1      1.2
#define UTOPIA_BM25_B       0.75
#define UTOPIA_BM25_HEADING 2.0

/* idf of a term in df of n chunks */
double utopia_bm25_idf(double n, double df);

/*
 * The chunks ranking of utopia_search: the query (normalised text), scoped to
 * chat when not NULL, k results; qvec the query's embedding as a real[]
 * literal (NULL: no semantic ranking). *out: the results array (chunk objects
 * with "score" = reciprocal-rank-fusion sum, "bm25" = the BM25 score, "ranks").
 */
tk_status utopia_bm25_chunks(const utopia *u, PGconn *c, const char *user_id, const char *chat,
                             const char *q, int k, const char *qvec, json_t **out, char *err,
                             size_t errlen);

#endif
