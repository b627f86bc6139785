/* Utopia's BM25 against a real Postgres: scores on a tiny corpus to the
 * letter (computed by hand), and the corpus statistics equal to a recount
 * after adds, deletes, re-indexing, concurrent writers, a user's deletion and
 * the migration of chunks stored before it. */
#include <math.h>
#include <pthread.h>

#include "app/utopia/bm25.h"
#include "app/utopia/utopia.h"
#include "lib/embed.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/pg.h"
#include "tk_test.h"
#include "tk_test_pg.h"
#include "utopia_corpus.h"

extern const struct tk_embed_file tk_embed_sql[];

static char dburl[512];
static const char *U1 = "11111111-1111-4111-8111-111111111111";
static const char *U2 = "22222222-2222-4222-8222-222222222222";
static const char *CHAT = "33333333-3333-4333-8333-333333333333";
static utopia U;

static PGconn *connect_db(void)
{
    PGconn *c = PQconnectdb(dburl);
    CHECK(PQstatus(c) == CONNECTION_OK);
    PQclear(PQexec(c, "SET client_min_messages = warning"));
    return c;
}

/* a fresh database migrated with the migrations in files (NULL: all) */
static PGconn *setup(const char *tag, const struct tk_embed_file *files)
{
    char t[48];
    snprintf(t, sizeof t, "bm25_%s", tag);
    tk_test_fresh_db(t, dburl, sizeof dburl);
    PGconn *c = connect_db();
    int applied;
    char err[512];
    if (tk_pg_migrate(c, files ? files : tk_embed_sql, &applied, err, sizeof err) != TK_OK)
        TK_TEST_FAIL("migrate: %s", err);
    const char *p[] = {U1, U2};
    CHECK(tk_pg_exec(c, "INSERT INTO users (id, email) VALUES ($1, 'a@x'), ($2, 'b@x')", 2, p) ==
          TK_OK);
    utopia_config cfg;
    utopia_config_defaults(&cfg);
    CHECK(utopia_init(&U, &cfg, err, sizeof err) == TK_OK);
    return c;
}

static char *add_doc(PGconn *c, const char *user, const char *chat, const char *title,
                     const char *mime, const char *text)
{
    utopia_doc_in in = {
        .chat_id = chat, .title = title, .mime = mime, .data = text, .len = strlen(text)};
    json_t *out;
    char err[256];
    tk_status st = utopia_doc_add(&U, c, user, &in, &out, err, sizeof err);
    if (st != TK_OK)
        TK_TEST_FAIL("doc_add: %s %s", tk_status_str(st), err);
    char *id = tk_strdup(tk_json_str(out, "id"));
    json_decref(out);
    return id;
}

/* the results of a search (valid until the next one) */
static json_t *last;
static json_t *search(PGconn *c, const char *q, const char *chat)
{
    utopia_search_opts o = {
        .query = q, .k = 10, .kinds = UTOPIA_KIND_CHUNKS, .chat_id = chat, .scope_chat = !!chat};
    json_t *out;
    char err[256];
    tk_status st = utopia_search(&U, c, U1, &o, &out, err, sizeof err);
    if (st != TK_OK)
        TK_TEST_FAIL("search %s: %s %s", q, tk_status_str(st), err);
    json_decref(last);
    last = out;
    return json_object_get(out, "results");
}

/* the results' documents (by their ids' position in ids) and BM25 scores */
static void expect(PGconn *c, const char *q, const char *chat, char **ids, int n,
                   const int *want_doc, const double *want_score)
{
    json_t *res = search(c, q, chat);
    CHECK_INT((int)json_array_size(res), ==, n);
    for (int i = 0; i < n; i++) {
        json_t *r = json_array_get(res, (size_t)i);
        const char *doc = tk_json_str(r, "document_id");
        int which = -1;
        for (int j = 0; ids[j]; j++)
            if (doc && !strcmp(doc, ids[j]))
                which = j;
        double got = json_number_value(json_object_get(r, "bm25"));
        if (which != want_doc[i] || fabs(got - want_score[i]) > 1e-6)
            TK_TEST_FAIL("\"%s\" result %d: document d%d score %.6f, want d%d %.6f", q, i + 1,
                         which + 1, got, want_doc[i] + 1, want_score[i]);
        CHECK_INT(tk_json_int_or(json_object_get(r, "ranks"), "bm25", 0), ==, i + 1);
    }
}

static long long count(PGconn *c, const char *sql, const char *arg)
{
    const char *p[] = {arg};
    PGresult *r = tk_pg_query(c, sql, arg ? 1 : 0, p);
    if (!tk_pg_ok(r))
        TK_TEST_FAIL("%s: %s", sql, PQresultErrorMessage(r));
    long long n = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return n;
}

TEST(bm25_scores_to_the_letter)
{
    PGconn *c = setup("letter", NULL);
    /* lexemes (english): d1 untitl(A) cat:2 chase mice sleep: length 5;
     * d2 untitl(A) dog chase cat: 4; d3 cat(A) care(A) bird sing: 4;
     * d4 untitl(A) fish swim: 3. N 4, total length 16, average 4. */
    char *ids[] = {add_doc(c, U1, NULL, NULL, "text/plain", "Cats chase mice. Cats sleep."),
                   add_doc(c, U1, NULL, NULL, "text/plain", "Dogs chase cats."),
                   add_doc(c, U1, NULL, "Cat care", "text/plain", "Birds sing."),
                   add_doc(c, U1, NULL, NULL, "text/plain", "Fish swim."), NULL};
    CHECK_INT(count(c,
                    "SELECT nchunks * 1000 + total_len FROM utopia_bm25_scopes WHERE user_id = $1 "
                    "AND chat_id = '00000000-0000-0000-0000-000000000000'",
                    U1),
              ==, 4016);
    CHECK_INT(count(c, "SELECT df FROM utopia_bm25_terms WHERE user_id = $1 AND term = 'cat'", U1),
              ==, 3);
    CHECK_INT(
        count(c, "SELECT df FROM utopia_bm25_terms WHERE user_id = $1 AND term = 'chase'", U1), ==,
        2);
    /* idf(cat) = ln(1 + (4 - 3 + 0.5) / (3 + 0.5)) = ln(10/7) = 0.356675
     * idf(chase) = ln(1 + (4 - 2 + 0.5) / (2 + 0.5)) = ln 2 = 0.693147
     * K(len) = 1.2 * (0.25 + 0.75 * len / 4): K(5) = 1.425, K(4) = 1.2
     * d3: cat once, in the title: tf 1 + (2 - 1) * 1 = 2
     *   0.356675 * 2 * 2.2 / (2 + 1.2) = 0.490428
     * d1: tf 2: 0.356675 * 4.4 / 3.425 = 0.458210
     * d2: tf 1: 0.356675 * 2.2 / 2.2 = 0.356675 */
    expect(c, "cats", NULL, ids, 3, (int[]){2, 0, 1},
           (double[]){0.49042804791575706, 0.45821014695778767, 0.3566749439387324});
    /* + chase: d1 + 0.693147 * 2.2 / (1 + 1.425) = 1.087045, d2 + 0.693147 * 1 = 1.049822;
     * the same words inflected and with stop words and punctuation */
    double both[] = {1.0870447025173258, 1.0498221244986776, 0.49042804791575706};
    expect(c, "cats chase", NULL, ids, 3, (int[]){0, 1, 2}, both);
    expect(c, "The cat is chasing!", NULL, ids, 3, (int[]){0, 1, 2}, both);
    /* a chat's own statistics: its one chunk, untitl(A) cat:3, length 2 = the
     * average; idf = ln(1 + 0.5 / 1.5) = 0.287682, tf 3: 0.287682 * 6.6 / 4.2 = 0.452071 */
    char *chat_ids[] = {add_doc(c, U1, CHAT, NULL, "text/plain", "Cats, cats, cats."), NULL};
    expect(c, "cats", CHAT, chat_ids, 1, (int[]){0}, (double[]){log(4.0 / 3.0) * 6.6 / 4.2});
    /* and the user's whole store now: N 5, total 18, df(cat) 4 */
    double idf = log(1 + 1.5 / 4.5), avg = 18.0 / 5;
    json_t *r = search(c, "cats", NULL);
    CHECK_INT((int)json_array_size(r), ==, 4);
    double d2 = json_number_value(json_object_get(json_array_get(r, 3), "bm25"));
    CHECK(fabs(d2 - idf * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 4 / avg))) < 1e-6);
    CHECK_STR(tk_json_str(json_array_get(r, 3), "document_id"), ids[1]);
    /* a word no chunk has, and only stop words: nothing */
    CHECK_INT((int)json_array_size(search(c, "zebra", NULL)), ==, 0);
    CHECK_INT((int)json_array_size(search(c, "the and of", NULL)), ==, 0);
    for (int i = 0; ids[i]; i++)
        free(ids[i]);
    free(chat_ids[0]);
    json_decref(last);
    last = NULL;
    PQfinish(c);
}

/* rows of the statistics that differ from a recount of the chunks */
static long long stats_off(PGconn *c)
{
    return count(
        c,
        "WITH s AS (SELECT user_id, coalesce(chat_id, '00000000-0000-0000-0000-000000000000') AS "
        "chat_id, count(*) AS n, sum(length(tsv)) AS len FROM utopia_chunks GROUP BY 1, 2), "
        "t AS (SELECT user_id, t AS term, coalesce(chat_id, "
        "'00000000-0000-0000-0000-000000000000') AS chat_id, count(*)::int AS df FROM "
        "utopia_chunks, unnest(tsvector_to_array(tsv)) t GROUP BY 1, 2, 3) "
        "SELECT (SELECT count(*) FROM (SELECT * FROM s EXCEPT SELECT user_id, chat_id, nchunks, "
        "total_len FROM utopia_bm25_scopes) a) + (SELECT count(*) FROM (SELECT user_id, chat_id, "
        "nchunks, total_len FROM utopia_bm25_scopes EXCEPT SELECT * FROM s) b) + (SELECT count(*) "
        "FROM (SELECT * FROM t EXCEPT SELECT user_id, term, chat_id, df FROM utopia_bm25_terms) c) "
        "+ (SELECT count(*) FROM (SELECT user_id, term, chat_id, df FROM utopia_bm25_terms EXCEPT "
        "SELECT * FROM t) d)",
        NULL);
}

static char *corpus_doc(PGconn *c, const char *user, const char *chat, int d)
{
    tk_buf md;
    tk_buf_init(&md, 1 << 22);
    uc_document(d, 20, 400, &md);
    char *id = add_doc(c, user, chat, NULL, "text/markdown", md.data);
    tk_buf_free(&md);
    return id;
}

static void delete_doc(PGconn *c, const char *user, const char *id)
{
    json_t *out;
    char err[256];
    if (utopia_doc_delete(&U, c, user, id, &out, err, sizeof err) != TK_OK)
        TK_TEST_FAIL("doc_delete: %s", err);
    json_decref(out);
}

struct writer {
    pthread_barrier_t *go;
    int first;       /* corpus document numbers first..first+2 */
    const char *del; /* a document to delete meanwhile, or NULL */
    int failed;
};

static void *write_some(void *arg)
{
    struct writer *w = arg;
    PGconn *c = connect_db();
    pthread_barrier_wait(w->go);
    for (int i = 0; i < 3; i++) {
        tk_buf md;
        tk_buf_init(&md, 1 << 22);
        uc_document(w->first + i, 20, 400, &md);
        utopia_doc_in in = {.mime = "text/markdown", .data = md.data, .len = md.len};
        json_t *out;
        char err[256];
        w->failed |= utopia_doc_add(&U, c, U1, &in, &out, err, sizeof err) != TK_OK;
        if (!w->failed)
            json_decref(out);
        tk_buf_free(&md);
        if (w->del && i == 1) {
            w->failed |= utopia_doc_delete(&U, c, U1, w->del, &out, err, sizeof err) != TK_OK;
            if (!w->failed)
                json_decref(out);
        }
    }
    PQfinish(c);
    return NULL;
}

TEST(statistics_equal_a_recount_after_deletes_reindexing_and_concurrent_writers)
{
    PGconn *c = setup("recount", NULL);
    char *lib[4], *chat[2], *other[2];
    for (int i = 0; i < 4; i++)
        lib[i] = corpus_doc(c, U1, NULL, i);
    for (int i = 0; i < 2; i++) {
        chat[i] = corpus_doc(c, U1, CHAT, 4 + i);
        other[i] = corpus_doc(c, U2, NULL, 6 + i);
    }
    CHECK_INT(count(c, "SELECT count(*) FROM utopia_bm25_scopes", NULL), ==, 3);
    CHECK_INT(count(c, "SELECT count(*) FROM utopia_bm25_terms", NULL), >, 100);
    CHECK_INT(stats_off(c), ==, 0);
    /* deletes: of one scope's document, of a whole scope */
    delete_doc(c, U1, lib[1]);
    CHECK_INT(stats_off(c), ==, 0);
    delete_doc(c, U1, chat[0]);
    delete_doc(c, U1, chat[1]);
    CHECK_INT(stats_off(c), ==, 0);
    CHECK_INT(count(c, "SELECT count(*) FROM utopia_bm25_scopes WHERE chat_id = $1", CHAT), ==, 0);
    CHECK_INT(count(c, "SELECT count(*) FROM utopia_bm25_terms WHERE chat_id = $1", CHAT), ==, 0);
    /* re-indexing in place: other lexemes (another configuration), one chunk
     * moved to a chat */
    const char *p[] = {lib[2]};
    CHECK(tk_pg_exec(c,
                     "UPDATE utopia_chunks SET tsv = to_tsvector('simple', body) WHERE "
                     "document_id = $1",
                     1, p) == TK_OK);
    CHECK(tk_pg_exec(c,
                     "UPDATE utopia_chunks SET chat_id = '33333333-3333-4333-8333-333333333333' "
                     "WHERE document_id = $1 AND position = 0",
                     1, p) == TK_OK);
    CHECK_INT(stats_off(c), ==, 0);
    CHECK_INT(count(c, "SELECT count(*) FROM utopia_bm25_scopes WHERE chat_id = $1", CHAT), ==, 1);
    /* four writers into one scope at once, one of them deleting meanwhile */
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 4);
    struct writer w[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct writer){&go, 8 + 3 * i, i == 0 ? lib[3] : NULL, 0};
        CHECK(pthread_create(&th[i], NULL, write_some, &w[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK_INT(w[i].failed, ==, 0);
    }
    pthread_barrier_destroy(&go);
    CHECK_INT(count(c,
                    "SELECT nchunks FROM utopia_bm25_scopes WHERE user_id = $1 AND chat_id = "
                    "'00000000-0000-0000-0000-000000000000'",
                    U1),
              ==,
              count(c,
                    "SELECT count(*) FROM utopia_chunks WHERE user_id = $1 AND chat_id IS "
                    "NULL",
                    U1));
    CHECK_INT(stats_off(c), ==, 0);
    /* a user's deletion cascades to the chunks, and their counts go with them */
    CHECK(tk_pg_exec(c, "DELETE FROM users WHERE id = $1", 1, &U2) == TK_OK);
    CHECK_INT(count(c, "SELECT count(*) FROM utopia_bm25_terms WHERE user_id = $1", U2), ==, 0);
    CHECK_INT(count(c, "SELECT count(*) FROM utopia_bm25_scopes WHERE user_id = $1", U2), ==, 0);
    CHECK_INT(stats_off(c), ==, 0);
    /* and everything: nothing left */
    CHECK(tk_pg_exec(c, "DELETE FROM utopia_documents", 0, NULL) == TK_OK);
    CHECK_INT(count(c, "SELECT count(*) FROM utopia_bm25_terms", NULL) +
                  count(c, "SELECT count(*) FROM utopia_bm25_scopes", NULL),
              ==, 0);
    for (int i = 0; i < 4; i++)
        free(lib[i]);
    for (int i = 0; i < 2; i++)
        free(chat[i]), free(other[i]);
    PQfinish(c);
}

TEST(the_migration_counts_the_chunks_stored_before_it)
{
    /* the migrations before 0030, then documents, then the rest */
    size_t n = 0;
    while (tk_embed_sql[n].name)
        n++;
    struct tk_embed_file *before = tk_calloc(n + 1, sizeof *before);
    for (size_t i = 0, j = 0; i < n; i++)
        if (strcmp(tk_embed_sql[i].name, "0030") < 0)
            before[j++] = tk_embed_sql[i];
    PGconn *c = setup("upgrade", before);
    CHECK_INT(count(c, "SELECT count(*) FROM pg_class WHERE relname = 'utopia_bm25_terms'", NULL),
              ==, 0);
    char *a = corpus_doc(c, U1, NULL, 0), *b = corpus_doc(c, U1, CHAT, 1),
         *d = corpus_doc(c, U2, NULL, 2);
    int applied;
    char err[512];
    if (tk_pg_migrate(c, tk_embed_sql, &applied, err, sizeof err) != TK_OK)
        TK_TEST_FAIL("migrate: %s", err);
    CHECK_INT(applied, >=, 1);
    CHECK_INT(count(c, "SELECT count(*) FROM utopia_bm25_scopes", NULL), ==, 3);
    CHECK_INT(stats_off(c), ==, 0);
    /* and they rank by them */
    char q[160];
    uc_query_exact(5, q, sizeof q);
    CHECK_INT((int)json_array_size(search(c, q, NULL)), >=, 1);
    delete_doc(c, U1, a);
    CHECK_INT(stats_off(c), ==, 0);
    free(a), free(b), free(d);
    free(before);
    json_decref(last);
    last = NULL;
    PQfinish(c);
}

/* Every word of the query common (more chunks than UTOPIA_SEARCH_CANDIDATES,
 * lowered to 4 here), no chunk holding all of them: the chunks scored are
 * picked by which words they hold, the heaviest combination first, so the one
 * chunk with the two rarer words is found although eight chunks holding only
 * the commonest come first in the table (and the index). */
TEST(common_words_pick_candidates_by_the_words_they_hold)
{
    PGconn *c = setup("common", NULL);
    U.cfg.candidates = 4;
    char *ids[20];
    int n = 0;
    for (int i = 0; i < 8; i++)
        ids[n++] = add_doc(c, U1, NULL, NULL, "text/plain", "Epsilon and filler text.");
    for (int i = 0; i < 5; i++)
        ids[n++] = add_doc(c, U1, NULL, NULL, "text/plain", "Gamma and filler text.");
    for (int i = 0; i < 5; i++)
        ids[n++] = add_doc(c, U1, NULL, NULL, "text/plain", "Delta and filler text.");
    char *want = add_doc(c, U1, NULL, NULL, "text/plain", "Gamma delta.");
    json_t *res = search(c, "gamma delta epsilon", NULL);
    CHECK_INT((int)json_array_size(res), >=, 1);
    CHECK_STR(tk_json_str(json_array_get(res, 0), "document_id"), want);
    /* its score is the formula's over the scope: N 19, df(gamma) = df(delta)
     * = 6; lexemes: untitl(A) gamma delta, length 3, tf 1 each; the others
     * untitl(A) and three words of the body, length 4 */
    double avg = (18 * 4 + 3) / 19.0, idf = log(1 + (19 - 6 + 0.5) / 6.5);
    double want_score = 2 * idf * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 3 / avg));
    double got = json_number_value(json_object_get(json_array_get(res, 0), "bm25"));
    if (fabs(got - want_score) > 1e-6)
        TK_TEST_FAIL("score %.6f, want %.6f", got, want_score);
    for (int i = 0; i < n; i++)
        free(ids[i]);
    free(want);
    json_decref(last);
    last = NULL;
    U.cfg.candidates = 200;
    PQfinish(c);
}

TEST_MAIN()
