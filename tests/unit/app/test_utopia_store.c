/* Utopia against a real Postgres: documents, hybrid search ranking on a
 * generated corpus of 2,000+ chunks, memories, dated facts, scoping. */
#include <pthread.h>

#include "app/utopia/dates.h"
#include "app/utopia/db.h"
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

static void fresh_db(const char *tag)
{
    char t[48];
    snprintf(t, sizeof t, "utopia_%s", tag);
    tk_test_fresh_db(t, dburl, sizeof dburl);
}

static PGconn *setup(const char *tag)
{
    fresh_db(tag);
    PGconn *c = PQconnectdb(dburl);
    CHECK(PQstatus(c) == CONNECTION_OK);
    PQclear(PQexec(c, "SET client_min_messages = warning"));
    int applied;
    char err[512];
    if (tk_pg_migrate(c, tk_embed_sql, &applied, err, sizeof err) != TK_OK)
        TK_TEST_FAIL("migrate: %s", err);
    const char *p[] = {U1, U2};
    CHECK(tk_pg_exec(c, "INSERT INTO users (id, email) VALUES ($1, 'a@x'), ($2, 'b@x')", 2, p) ==
          TK_OK);
    utopia_config cfg;
    utopia_config_defaults(&cfg);
    CHECK(utopia_init(&U, &cfg, err, sizeof err) == TK_OK);
    return c;
}

static json_t *add_doc(PGconn *c, const char *user, const char *chat, const char *mime,
                       const char *text)
{
    utopia_doc_in in = {.chat_id = chat, .mime = mime, .data = text, .len = strlen(text)};
    json_t *out;
    char err[256];
    tk_status st = utopia_doc_add(&U, c, user, &in, &out, err, sizeof err);
    if (st != TK_OK)
        TK_TEST_FAIL("doc_add: %s %s", tk_status_str(st), err);
    return out;
}

static json_t *search(PGconn *c, const char *user, const char *q, int kinds, int k)
{
    utopia_search_opts o = {.query = q, .k = k, .kinds = kinds};
    json_t *out;
    char err[256];
    tk_status st = utopia_search(&U, c, user, &o, &out, err, sizeof err);
    if (st != TK_OK)
        TK_TEST_FAIL("search %s: %s %s", q, tk_status_str(st), err);
    return out;
}

static long long count(PGconn *c, const char *sql, const char *arg)
{
    const char *p[] = {arg};
    PGresult *r = tk_pg_query(c, sql, arg ? 1 : 0, p);
    CHECK(tk_pg_ok(r));
    long long n = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return n;
}

TEST(documents_add_list_get_delete_keeps_chat_facts)
{
    PGconn *c = setup("docs");
    json_t *d = add_doc(c, U1, NULL, "text/markdown",
                        "# Travel notes\n\nWe stayed in Lisbon for a week.\n\n## Food\n\n"
                        "The custard tarts were excellent.\n");
    CHECK_STR(tk_json_str(d, "title"), "Travel notes");
    CHECK_STR(tk_json_str(d, "format"), "markdown");
    CHECK_INT(tk_json_int_or(d, "chunks", 0), ==, 2);
    char id[64];
    snprintf(id, sizeof id, "%s", tk_json_str(d, "id"));
    json_decref(d);
    char err[256];
    json_t *out;
    CHECK(utopia_doc_get(&U, c, U1, id, 1, &out, err, sizeof err) == TK_OK);
    json_t *ch = json_object_get(out, "chunks");
    CHECK_INT(json_array_size(ch), ==, 2);
    CHECK_STR(tk_json_str(json_array_get(ch, 1), "heading"), "Travel notes > Food");
    json_decref(out);
    /* another user sees nothing of it */
    CHECK(utopia_doc_get(&U, c, U2, id, 0, &out, err, sizeof err) == TK_ENOENT);
    CHECK(utopia_doc_list(&U, c, U2, NULL, 0, 0, &out, err, sizeof err) == TK_OK);
    CHECK_INT(json_array_size(json_object_get(out, "documents")), ==, 0);
    json_decref(out);
    out = search(c, U2, "custard tarts", UTOPIA_KIND_ALL, 5);
    CHECK_INT(json_array_size(json_object_get(out, "results")), ==, 0);
    json_decref(out);
    /* a fact learned in a chat, and one taken from the document */
    utopia_source chat_src = {.chat_id = CHAT}, doc_src = {.document_id = id};
    utopia_fact_in f1 = {
        .subject = "We", .predicate = "stayed in", .object = "Lisbon", .single = -1};
    utopia_fact_in f2 = {
        .subject = "Custard tarts", .predicate = "rated", .object = "excellent", .single = -1};
    CHECK(utopia_fact_add(&U, c, U1, &f1, &chat_src, 0, &out, err, sizeof err) == TK_OK);
    json_decref(out);
    CHECK(utopia_fact_add(&U, c, U1, &f2, &doc_src, 0, &out, err, sizeof err) == TK_OK);
    json_decref(out);
    CHECK(utopia_memory_add(&U, c, U1, "Prefers window seats", &chat_src, &out, err, sizeof err) ==
          TK_OK);
    json_decref(out);
    CHECK_INT(count(c, "SELECT count(*) FROM utopia_terms WHERE user_id = $1", U1), >, 5);
    out = search(c, U1, "custard tarts", UTOPIA_KIND_CHUNKS, 5);
    CHECK_INT(json_array_size(json_object_get(out, "results")), ==, 1);
    json_decref(out);
    /* delete: chunks and the vocabulary go; the chat's fact and memory stay */
    CHECK(utopia_doc_delete(&U, c, U2, id, &out, err, sizeof err) == TK_ENOENT);
    CHECK(utopia_doc_delete(&U, c, U1, id, &out, err, sizeof err) == TK_OK);
    CHECK_INT(tk_json_int_or(out, "chunks", 0), ==, 2);
    json_decref(out);
    CHECK_INT(count(c, "SELECT count(*) FROM utopia_chunks WHERE document_id = $1", id), ==, 0);
    CHECK_INT(count(c, "SELECT count(*) FROM utopia_terms WHERE user_id = $1", U1), ==, 0);
    CHECK_INT(count(c, "SELECT count(*) FROM utopia_facts WHERE source_chat_id IS NOT NULL", NULL),
              ==, 1);
    CHECK_INT(
        count(c, "SELECT count(*) FROM utopia_facts WHERE source_document_id IS NOT NULL", NULL),
        ==, 0);
    CHECK_INT(count(c, "SELECT count(*) FROM utopia_memories", NULL), ==, 1);
    out = search(c, U1, "custard tarts", UTOPIA_KIND_CHUNKS, 5);
    CHECK_INT(json_array_size(json_object_get(out, "results")), ==, 0);
    json_decref(out);
    CHECK(utopia_recall_facts(&U, c, U1, "we", NULL, 0, &out, err, sizeof err) == TK_OK);
    CHECK_STR(tk_json_str(json_array_get(json_object_get(out, "facts"), 0), "object"), "Lisbon");
    json_decref(out);
    /* refusals */
    utopia_doc_in bad = {.mime = "application/zip", .data = "PK\3\4xx", .len = 6};
    CHECK(utopia_doc_add(&U, c, U1, &bad, &out, err, sizeof err) == TK_EINVAL);
    utopia_doc_in empty = {.mime = "text/plain", .data = "  \n\n ", .len = 5};
    CHECK(utopia_doc_add(&U, c, U1, &empty, &out, err, sizeof err) == TK_EINVAL);
    CHECK(utopia_doc_get(&U, c, U1, "not-a-uuid", 0, &out, err, sizeof err) == TK_EINVAL);
    PQfinish(c);
}

static int corpus_loaded;
static void load_corpus(PGconn *c, int n)
{
    for (int d = 0; d * 50 < n; d++) {
        tk_buf md;
        tk_buf_init(&md, 1 << 22);
        uc_document(d, 50, n, &md);
        json_decref(add_doc(c, U1, NULL, "text/markdown", md.data));
        tk_buf_free(&md);
    }
    corpus_loaded = n;
}

/* rank (1-based) of entity i's chunk in the results, 0 if absent */
static int rank_of(json_t *res, int i)
{
    char want[80];
    uc_heading(i, want, sizeof want);
    size_t j;
    json_t *r;
    json_array_foreach(json_object_get(res, "results"), j, r)
    {
        const char *h = tk_json_str(r, "heading");
        if (h && !strcmp(h, want))
            return (int)j + 1;
    }
    return 0;
}

TEST(search_ranks_exact_inflected_and_typo_queries)
{
    PGconn *c = setup("rank");
    load_corpus(c, 2050);
    CHECK_INT(count(c, "SELECT count(*) FROM utopia_chunks", NULL), >=, 2000);
    int exact1 = 0, infl5 = 0, typo5 = 0, total = 0;
    for (int i = 3; i < 2050; i += 41) {
        char q[160];
        total++;
        uc_query_exact(i, q, sizeof q);
        json_t *r = search(c, U1, q, UTOPIA_KIND_CHUNKS, 5);
        exact1 += rank_of(r, i) == 1;
        if (rank_of(r, i) != 1 && getenv("UTOPIA_DEBUG")) {
            char *d = json_dumps(r, JSON_INDENT(1));
            fprintf(stderr, "%s\n", d);
            free(d);
        }
        json_decref(r);
        uc_query_inflected(i, q, sizeof q);
        r = search(c, U1, q, UTOPIA_KIND_CHUNKS, 5);
        int ri = rank_of(r, i);
        infl5 += ri >= 1 && ri <= 5;
        if (ri == 0)
            fprintf(stderr, "    inflected miss: %s\n", q);
        json_decref(r);
        uc_query_typo(i, q, sizeof q);
        r = search(c, U1, q, UTOPIA_KIND_CHUNKS, 5);
        int rt = rank_of(r, i);
        typo5 += rt >= 1 && rt <= 5;
        if (rt == 0)
            fprintf(stderr, "    typo miss: %s\n", q);
        json_decref(r);
    }
    fprintf(stderr, "    %d queries: exact@1 %d, inflected@5 %d, typo@5 %d\n", total, exact1, infl5,
            typo5);
    CHECK_INT(exact1, ==, total);
    CHECK_INT(infl5, ==, total);
    CHECK_INT(typo5, >=, total * 9 / 10);
    /* results carry what a citation needs */
    json_t *r = search(c, U1, "who founded Kalomiix", UTOPIA_KIND_CHUNKS, 3);
    json_t *top = json_array_get(json_object_get(r, "results"), 0);
    CHECK(tk_json_str(top, "document_id") != NULL);
    CHECK(tk_json_str(top, "title") != NULL);
    CHECK(json_is_integer(json_object_get(top, "position")));
    CHECK(strstr(tk_json_str(top, "snippet"), "**") != NULL);
    CHECK(json_number_value(json_object_get(top, "score")) > 0);
    CHECK(strncmp(tk_json_str(top, "cite"), "[1] Gazetteer volume", 20) == 0);
    json_decref(r);
    /* hostile queries are just text */
    r = search(c, U1, "'; DROP TABLE utopia_chunks; -- \\ ' \" & | ! : * ( )", UTOPIA_KIND_ALL, 5);
    json_decref(r);
    r = search(c, U1, "the and of", UTOPIA_KIND_ALL, 5);
    json_decref(r);
    CHECK_INT(count(c, "SELECT count(*) FROM utopia_chunks", NULL), >=, 2000);
    PQfinish(c);
}

TEST(search_scopes_to_a_chat_and_mixes_kinds)
{
    PGconn *c = setup("scope");
    json_decref(add_doc(c, U1, CHAT, "text/plain", "The chat-only document mentions zebras."));
    json_decref(add_doc(c, U1, NULL, "text/plain", "The library document mentions zebras too."));
    char err[256];
    json_t *out;
    utopia_search_opts o = {
        .query = "zebras", .chat_id = CHAT, .scope_chat = 1, .kinds = UTOPIA_KIND_CHUNKS};
    CHECK(utopia_search(&U, c, U1, &o, &out, err, sizeof err) == TK_OK);
    CHECK_INT(json_array_size(json_object_get(out, "results")), ==, 1);
    CHECK(strstr(tk_json_str(json_array_get(json_object_get(out, "results"), 0), "snippet"),
                 "chat-only"));
    json_decref(out);
    out = search(c, U1, "zebras", UTOPIA_KIND_CHUNKS, 5);
    CHECK_INT(json_array_size(json_object_get(out, "results")), ==, 2);
    json_decref(out);
    /* a memory and a fact about zebras come back alongside the chunks */
    utopia_source src = {.chat_id = CHAT};
    CHECK(utopia_memory_add(&U, c, U1, "The user's favourite animal is the zebra", &src, &out, err,
                            sizeof err) == TK_OK);
    json_decref(out);
    utopia_fact_in f = {
        .subject = "Zebras", .predicate = "live in", .object = "Africa", .single = -1};
    CHECK(utopia_fact_add(&U, c, U1, &f, &src, 0, &out, err, sizeof err) == TK_OK);
    json_decref(out);
    out = search(c, U1, "zebras", UTOPIA_KIND_ALL, 10);
    int kinds = 0;
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(out, "results"), i, r)
    {
        const char *t = tk_json_str(r, "type");
        kinds |= !strcmp(t, "chunk") ? 1 : !strcmp(t, "memory") ? 2 : !strcmp(t, "fact") ? 4 : 0;
        CHECK(tk_json_str(r, "cite") != NULL);
    }
    CHECK_INT(kinds, ==, 7);
    json_decref(out);
    /* typo in a memory search */
    out = search(c, U1, "favorite animl", UTOPIA_KIND_MEMORIES, 5);
    CHECK_INT(json_array_size(json_object_get(out, "results")), ==, 1);
    json_decref(out);
    CHECK(utopia_search(&U, c, U1, &(utopia_search_opts){.query = "x", .scope_chat = 1}, &out, err,
                        sizeof err) == TK_EINVAL);
    CHECK(utopia_search(&U, c, U1, &(utopia_search_opts){.query = ""}, &out, err, sizeof err) ==
          TK_EINVAL);
    PQfinish(c);
}

static json_t *fact(PGconn *c, const char *s, const char *p, const char *o, const char *from,
                    const char *to)
{
    utopia_fact_in f = {.subject = s,
                        .predicate = p,
                        .object = o,
                        .valid_from = from,
                        .valid_to = to,
                        .single = -1};
    utopia_source src = {.chat_id = CHAT};
    json_t *out;
    char err[256];
    tk_status st = utopia_fact_add(&U, c, U1, &f, &src, 0, &out, err, sizeof err);
    if (st != TK_OK)
        TK_TEST_FAIL("fact_add %s %s %s: %s", s, p, o, err);
    return out;
}

/* the object of entity's single current fact with predicate at a date */
static const char *at(PGconn *c, const char *entity, const char *pred, const char *date, char *buf,
                      size_t buflen)
{
    json_t *out;
    char err[256];
    CHECK(utopia_recall_facts(&U, c, U1, entity, date, 0, &out, err, sizeof err) == TK_OK);
    int n = 0;
    buf[0] = 0;
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(out, "facts"), i, f)
    {
        if (!strcmp(tk_json_str(f, "predicate"), pred)) {
            snprintf(buf, buflen, "%s", tk_json_str(f, "object"));
            n++;
        }
    }
    json_decref(out);
    CHECK_INT(n, <=, 1);
    return buf;
}

TEST(facts_changed_twice_answer_three_dates)
{
    PGconn *c = setup("facts");
    char b[64];
    json_decref(fact(c, "Alice Smith", "lives in", "Paris", "2019-04", NULL));
    json_t *r2 = fact(c, "Alice Smith", "Lives_In", "Berlin", "June 2021", NULL);
    CHECK_INT(json_array_size(json_object_get(r2, "closed")), ==, 1);
    json_decref(r2);
    json_decref(fact(c, "alice smith", "lives-in", "Tokyo", "2023-09-15", NULL));
    CHECK_STR(at(c, "Alice Smith", "lives_in", "2020-01-01", b, sizeof b), "Paris");
    CHECK_STR(at(c, "alice smith", "lives_in", "2022", b, sizeof b), "Berlin");
    CHECK_STR(at(c, "ALICE SMITH", "lives_in", "today", b, sizeof b), "Tokyo");
    CHECK_STR(at(c, "Alice Smith", "lives_in", "2019-01-01", b, sizeof b), "");
    /* the old facts are kept, closed, with their history */
    json_t *out;
    char err[256];
    CHECK(utopia_fact_list(&U, c, U1, "Alice Smith", 0, 0, &out, err, sizeof err) == TK_OK);
    json_t *fs = json_object_get(out, "facts");
    int lives = 0;
    size_t i;
    json_t *f;
    json_array_foreach(fs, i, f)
    {
        if (strcmp(tk_json_str(f, "predicate"), "lives_in"))
            continue;
        lives++;
        if (!strcmp(tk_json_str(f, "object"), "Paris")) {
            CHECK_STR(tk_json_str(f, "valid_from"), "2019-04");
            CHECK_STR(tk_json_str(f, "valid_to"), "2021-06");
            CHECK(!json_is_true(json_object_get(f, "current")));
        }
    }
    CHECK_INT(lives, ==, 3);
    json_decref(out);
    /* a fact learned late about an earlier time slots into the timeline */
    json_decref(fact(c, "Alice Smith", "lives in", "Lyon", "2017", NULL));
    CHECK_STR(at(c, "Alice Smith", "lives_in", "2018-06-01", b, sizeof b), "Lyon");
    CHECK_STR(at(c, "Alice Smith", "lives_in", "2020-01-01", b, sizeof b), "Paris");
    /* restating the current fact is a duplicate, not a change */
    json_t *d = fact(c, "Alice Smith", "lives in", "tokyo", NULL, NULL);
    CHECK(json_is_true(json_object_get(d, "duplicate")));
    json_decref(d);
    /* multi-valued predicates accumulate */
    json_decref(fact(c, "Alice Smith", "likes", "Jazz", NULL, NULL));
    json_decref(fact(c, "Alice Smith", "likes", "Chess", NULL, NULL));
    CHECK(utopia_recall_facts(&U, c, U1, "Alice Smith", NULL, 0, &out, err, sizeof err) == TK_OK);
    int likes = 0;
    json_array_foreach(json_object_get(out, "facts"), i, f) likes +=
        !strcmp(tk_json_str(f, "predicate"), "likes");
    CHECK_INT(likes, ==, 2);
    json_decref(out);
    /* "no longer": a valid_to closes the open fact */
    json_decref(fact(c, "Alice Smith", "likes", "Chess", NULL, "2024-01-01"));
    CHECK(utopia_recall_facts(&U, c, U1, "Alice Smith", NULL, 0, &out, err, sizeof err) == TK_OK);
    likes = 0;
    json_array_foreach(json_object_get(out, "facts"), i, f) likes +=
        !strcmp(tk_json_str(f, "predicate"), "likes");
    CHECK_INT(likes, ==, 1);
    json_decref(out);
    /* deleting the Berlin fact reopens Paris up to Tokyo */
    PGresult *q = tk_pg_query(c, "SELECT id FROM utopia_facts WHERE object = 'Berlin'", 0, NULL);
    char berlin[64];
    snprintf(berlin, sizeof berlin, "%s", PQgetvalue(q, 0, 0));
    PQclear(q);
    CHECK(utopia_fact_delete(&U, c, U1, berlin, &out, err, sizeof err) == TK_OK);
    json_decref(out);
    CHECK_STR(at(c, "Alice Smith", "lives_in", "2022", b, sizeof b), "Paris");
    CHECK_STR(at(c, "Alice Smith", "lives_in", "now", b, sizeof b), "Tokyo");
    CHECK(utopia_fact_delete(&U, c, U1, berlin, &out, err, sizeof err) == TK_ENOENT);
    PQfinish(c);
}

/* ---- utopia_fact_add, every answer to the letter ---- */

static char seen_ids[32][40];
static int nseen;

/* A copy of an answer with its ids named: CHAT is "CHAT", other ids "#1",
 * "#2"... in the order first seen (the same id keeps its name across
 * answers); recorded_at (the database's clock) is "REC". */
static json_t *named(const json_t *v, const char *key)
{
    if (json_is_object(v)) {
        json_t *o = json_object();
        const char *k;
        json_t *m;
        json_object_foreach((json_t *)v, k, m) json_object_set_new(o, k, named(m, k));
        return o;
    }
    if (json_is_array(v)) {
        json_t *a = json_array();
        for (size_t i = 0; i < json_array_size(v); i++)
            json_array_append_new(a, named(json_array_get(v, i), NULL));
        return a;
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (key && !strcmp(key, "recorded_at"))
            return json_string("REC");
        if (!strcmp(s, CHAT))
            return json_string("CHAT");
        if (strlen(s) == 36 && utopia_uuid_ok(s)) {
            int k = 0;
            while (k < nseen && strcmp(seen_ids[k], s))
                k++;
            if (k == nseen)
                snprintf(seen_ids[nseen++], sizeof seen_ids[0], "%s", s);
            char nm[8];
            snprintf(nm, sizeof nm, "#%d", k + 1);
            return json_string(nm);
        }
    }
    return json_deep_copy(v);
}

#define NOW_MS 1736899200000LL /* 2025-01-15T00:00:00Z */

/* fact_add's status and, on TK_OK, its answer as compact JSON with ids named */
static char *add_letter(PGconn *c, const utopia_fact_in *f, tk_status want, char *err)
{
    utopia_source src = {.chat_id = CHAT};
    json_t *out = NULL;
    err[0] = 0;
    tk_status st = utopia_fact_add(&U, c, U1, f, &src, NOW_MS, &out, err, 256);
    if (st != want)
        TK_TEST_FAIL("fact_add %s %s %s: %s (%s), want %s", f->subject, f->predicate, f->object,
                     tk_status_str(st), err, tk_status_str(want));
    if (st != TK_OK) {
        if (out)
            TK_TEST_FAIL("an answer with an error");
        return NULL;
    }
    json_t *n = named(out, NULL);
    json_decref(out);
    char *s = json_dumps(n, JSON_COMPACT);
    json_decref(n);
    return s;
}

static void check_letter(PGconn *c, const utopia_fact_in *f, const char *want)
{
    char err[256];
    char *got = add_letter(c, f, TK_OK, err);
    if (strcmp(got, want) != 0)
        TK_TEST_FAIL("fact_add %s %s %s:\n      got  %s\n      want %s", f->subject, f->predicate,
                     f->object, got, want);
    free(got);
}

static void check_refused(PGconn *c, const utopia_fact_in *f, const char *want_err)
{
    char err[256];
    add_letter(c, f, TK_EINVAL, err);
    if (strncmp(err, want_err, strlen(want_err)) != 0)
        TK_TEST_FAIL("fact_add %s: error \"%s\", want \"%s...\"", f->subject ? f->subject : "-",
                     err, want_err);
}

#define FACT_SRC "\"source\":{\"chat_id\":\"CHAT\"}"

TEST(fact_add_answers_to_the_letter)
{
    PGconn *c = setup("letter");
    nseen = 0;

    /* refusals, before anything is written */
    char err[256];
    utopia_source bad = {.chat_id = "not-an-id"};
    json_t *out = NULL;
    utopia_fact_in ok = {
        .subject = "Alice Smith", .predicate = "lives in", .object = "Paris", .single = -1};
    CHECK(utopia_fact_add(&U, c, U1, &ok, &bad, NOW_MS, &out, err, sizeof err) == TK_EINVAL);
    CHECK_STR(err, "bad user, chat, turn or document id");
    CHECK(utopia_fact_add(&U, c, "nope", &ok, NULL, NOW_MS, &out, err, sizeof err) == TK_EINVAL);
    CHECK_STR(err, "bad user, chat, turn or document id");
    CHECK(out == NULL);
    char longname[600];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    check_refused(c, &(utopia_fact_in){.subject = "A", .predicate = "!!", .object = "x"},
                  "predicate: a short phrase such as \"lives in\" or \"works_at\"");
    check_refused(c, &(utopia_fact_in){.subject = "", .predicate = "likes", .object = "x"},
                  "subject: required");
    check_refused(c, &(utopia_fact_in){.predicate = "likes", .object = "x"}, "subject: required");
    check_refused(c, &(utopia_fact_in){.subject = "A", .predicate = "likes", .object = longname},
                  "object: required, at most 500 characters");
    check_refused(c, &(utopia_fact_in){.subject = "A", .predicate = "likes", .object = "  "},
                  "object: required, at most 500 characters");
    check_refused(
        c,
        &(utopia_fact_in){.subject = "A", .predicate = "likes", .object = "x", .object_kind = "y"},
        "object_kind: \"entity\" or \"value\"");
    check_refused(
        c,
        &(utopia_fact_in){.subject = "A", .predicate = "likes", .object = "x", .valid_from = "??"},
        "valid_from: ");
    check_refused(
        c, &(utopia_fact_in){.subject = "A", .predicate = "likes", .object = "x", .valid_to = "??"},
        "valid_to: ");
    check_refused(c,
                  &(utopia_fact_in){.subject = "A",
                                    .predicate = "likes",
                                    .object = "x",
                                    .valid_from = "2020",
                                    .valid_to = "2019"},
                  "valid_to is before valid_from");
    longname[201] = 0;
    check_refused(c, &(utopia_fact_in){.subject = longname, .predicate = "likes", .object = "x"},
                  "an entity needs a name of 1 to 200 characters");
    check_refused(
        c,
        &(utopia_fact_in){
            .subject = "A", .predicate = "likes", .object = longname, .object_kind = "entity"},
        "an entity needs a name of 1 to 200 characters");
    CHECK_INT(count(c, "SELECT count(*) FROM utopia_facts WHERE user_id = $1", U1), ==, 0);
    CHECK_INT(count(c, "SELECT count(*) FROM utopia_entities WHERE user_id = $1", U1), ==, 0);
    CHECK_INT(count(c, "SELECT count(*) FROM utopia_predicates WHERE user_id = $1", U1), ==, 0);

    /* a new fact: the subject and a name-like object become entities */
    check_letter(c,
                 &(utopia_fact_in){.subject = "Alice Smith",
                                   .predicate = "lives in",
                                   .object = "Paris",
                                   .valid_from = "2019-04",
                                   .single = -1},
                 "{\"fact\":{\"id\":\"#1\",\"subject\":\"Alice Smith\",\"subject_id\":\"#2\","
                 "\"predicate\":\"lives_in\",\"object\":\"Paris\",\"object_id\":\"#3\","
                 "\"valid_from\":\"2019-04\",\"valid_from_precision\":\"month\",\"valid_to\":null,"
                 "\"recorded_at\":\"REC\",\"current\":true," FACT_SRC ",\"single_valued\":true},"
                 "\"closed\":[],\"alias_conflicts\":[]}");
    /* a single-valued predicate: the new value closes the one in force */
    check_letter(c,
                 &(utopia_fact_in){.subject = "alice smith",
                                   .predicate = "Lives_In",
                                   .object = "Berlin",
                                   .valid_from = "June 2021",
                                   .single = -1},
                 "{\"fact\":{\"id\":\"#4\",\"subject\":\"Alice Smith\",\"subject_id\":\"#2\","
                 "\"predicate\":\"lives_in\",\"object\":\"Berlin\",\"object_id\":\"#5\","
                 "\"valid_from\":\"2021-06\",\"valid_from_precision\":\"month\",\"valid_to\":null,"
                 "\"recorded_at\":\"REC\",\"current\":true," FACT_SRC ",\"single_valued\":true},"
                 "\"closed\":[\"#1\"],\"alias_conflicts\":[]}");
    CHECK_INT(count(c,
                    "SELECT count(*) FROM utopia_facts f JOIN utopia_facts b ON b.id = f.closed_by "
                    "WHERE f.object = 'Paris' AND b.object = 'Berlin' AND f.valid_to = "
                    "'2021-06-01T00:00:00Z' AND f.valid_to_precision = 'month' AND f.user_id = $1",
                    U1),
              ==, 1);
    /* an earlier fact learned late ends where the next one starts (valid_to
     * at that fact's precision, closed by it), and closes nothing */
    check_letter(c,
                 &(utopia_fact_in){.subject = "Alice Smith",
                                   .predicate = "lives in",
                                   .object = "Lyon",
                                   .valid_from = "2017",
                                   .single = -1},
                 "{\"fact\":{\"id\":\"#6\",\"subject\":\"Alice Smith\",\"subject_id\":\"#2\","
                 "\"predicate\":\"lives_in\",\"object\":\"Lyon\",\"object_id\":\"#7\","
                 "\"valid_from\":\"2017\",\"valid_from_precision\":\"year\",\"valid_to\":"
                 "\"2019-04\",\"recorded_at\":\"REC\",\"current\":false," FACT_SRC
                 ",\"single_valued\":true},\"closed\":[],\"alias_conflicts\":[]}");
    CHECK_INT(count(c,
                    "SELECT count(*) FROM utopia_facts f JOIN utopia_facts b ON b.id = f.closed_by "
                    "WHERE f.object = 'Lyon' AND b.object = 'Paris' AND f.user_id = $1",
                    U1),
              ==, 1);
    /* restating the open fact: a duplicate, nothing written */
    check_letter(
        c,
        &(utopia_fact_in){
            .subject = "Alice Smith", .predicate = "lives in", .object = "berlin", .single = -1},
        "{\"fact\":{\"id\":\"#4\",\"subject\":\"Alice Smith\",\"subject_id\":\"#2\","
        "\"predicate\":\"lives_in\",\"object\":\"Berlin\",\"object_id\":\"#5\","
        "\"valid_from\":\"2021-06\",\"valid_from_precision\":\"month\",\"valid_to\":null,"
        "\"recorded_at\":\"REC\",\"current\":true," FACT_SRC "},\"duplicate\":true,"
        "\"closed\":[],\"alias_conflicts\":[]}");
    /* restated with an end: "no longer" closes it, at its own start at the latest */
    check_letter(c,
                 &(utopia_fact_in){.subject = "Alice Smith",
                                   .predicate = "lives in",
                                   .object = "Berlin",
                                   .valid_to = "2024-02-03",
                                   .single = -1},
                 "{\"fact\":{\"id\":\"#4\",\"subject\":\"Alice Smith\",\"subject_id\":\"#2\","
                 "\"predicate\":\"lives_in\",\"object\":\"Berlin\",\"object_id\":\"#5\","
                 "\"valid_from\":\"2021-06\",\"valid_from_precision\":\"month\",\"valid_to\":"
                 "\"2024-02-03\",\"recorded_at\":\"REC\",\"current\":false," FACT_SRC
                 "},\"duplicate\":true,\"closed\":[\"#4\"],\"alias_conflicts\":[]}");
    CHECK_INT(count(c, "SELECT count(*) FROM utopia_facts WHERE user_id = $1", U1), ==, 3);

    /* values: a value-like object is no entity; "entity" makes one anyway;
     * "value" never links; no start given is the recording time */
    check_letter(c,
                 &(utopia_fact_in){
                     .subject = "Alice Smith", .predicate = "age", .object = "42", .single = -1},
                 "{\"fact\":{\"id\":\"#8\",\"subject\":\"Alice Smith\",\"subject_id\":\"#2\","
                 "\"predicate\":\"age\",\"object\":\"42\",\"object_id\":null,"
                 "\"valid_from\":\"2025-01-15T00:00:00Z\",\"valid_from_precision\":\"recorded\","
                 "\"valid_to\":null,\"recorded_at\":\"REC\",\"current\":true," FACT_SRC
                 ",\"single_valued\":true},\"closed\":[],\"alias_conflicts\":[]}");
    check_letter(c,
                 &(utopia_fact_in){.subject = "Bob",
                                   .predicate = "likes",
                                   .object = "42",
                                   .object_kind = "entity",
                                   .single = -1},
                 "{\"fact\":{\"id\":\"#9\",\"subject\":\"Bob\",\"subject_id\":\"#10\","
                 "\"predicate\":\"likes\",\"object\":\"42\",\"object_id\":\"#11\","
                 "\"valid_from\":\"2025-01-15T00:00:00Z\",\"valid_from_precision\":\"recorded\","
                 "\"valid_to\":null,\"recorded_at\":\"REC\",\"current\":true," FACT_SRC
                 ",\"single_valued\":false},\"closed\":[],\"alias_conflicts\":[]}");
    /* now that "42" is an entity, a guessed object links to it; "value" does not */
    check_letter(
        c, &(utopia_fact_in){.subject = "Bob", .predicate = "hates", .object = "42", .single = -1},
        "{\"fact\":{\"id\":\"#12\",\"subject\":\"Bob\",\"subject_id\":\"#10\","
        "\"predicate\":\"hates\",\"object\":\"42\",\"object_id\":\"#11\","
        "\"valid_from\":\"2025-01-15T00:00:00Z\",\"valid_from_precision\":\"recorded\","
        "\"valid_to\":null,\"recorded_at\":\"REC\",\"current\":true," FACT_SRC
        ",\"single_valued\":false},\"closed\":[],\"alias_conflicts\":[]}");
    check_letter(c,
                 &(utopia_fact_in){.subject = "Bob",
                                   .predicate = "fears",
                                   .object = "Paris",
                                   .object_kind = "value",
                                   .single = -1},
                 "{\"fact\":{\"id\":\"#13\",\"subject\":\"Bob\",\"subject_id\":\"#10\","
                 "\"predicate\":\"fears\",\"object\":\"Paris\",\"object_id\":null,"
                 "\"valid_from\":\"2025-01-15T00:00:00Z\",\"valid_from_precision\":\"recorded\","
                 "\"valid_to\":null,\"recorded_at\":\"REC\",\"current\":true," FACT_SRC
                 ",\"single_valued\":false},\"closed\":[],\"alias_conflicts\":[]}");
    /* an end without a start: from the unknown past, closing nothing */
    check_letter(c,
                 &(utopia_fact_in){.subject = "Bob",
                                   .predicate = "works at",
                                   .object = "Initech",
                                   .valid_to = "2020",
                                   .single = -1},
                 "{\"fact\":{\"id\":\"#14\",\"subject\":\"Bob\",\"subject_id\":\"#10\","
                 "\"predicate\":\"works_at\",\"object\":\"Initech\",\"object_id\":\"#15\","
                 "\"valid_from\":null,\"valid_from_precision\":\"unknown\",\"valid_to\":\"2020\","
                 "\"recorded_at\":\"REC\",\"current\":false," FACT_SRC
                 ",\"single_valued\":true},\"closed\":[],\"alias_conflicts\":[]}");

    /* aliases: a new one is added, one that names another entity is a
     * conflict, bad and extra ones (past 20) are skipped */
    json_error_t je;
    json_t *al = json_loads("[\"Bobby\", \"alice smith\", 7, \"\", \"Bob\", \"b1\", \"b2\", "
                            "\"b3\", \"b4\", \"b5\", \"b6\", \"b7\", \"b8\", \"b9\", \"b10\", "
                            "\"b11\", \"b12\", \"b13\", \"b14\", \"b15\", \"Paris\", \"b17\"]",
                            0, &je);
    CHECK(al != NULL);
    check_letter(
        c,
        &(utopia_fact_in){
            .subject = "Bob", .predicate = "plays", .object = "chess", .aliases = al, .single = -1},
        "{\"fact\":{\"id\":\"#16\",\"subject\":\"Bob\",\"subject_id\":\"#10\","
        "\"predicate\":\"plays\",\"object\":\"chess\",\"object_id\":null,"
        "\"valid_from\":\"2025-01-15T00:00:00Z\",\"valid_from_precision\":\"recorded\","
        "\"valid_to\":null,\"recorded_at\":\"REC\",\"current\":true," FACT_SRC
        ",\"single_valued\":false},\"closed\":[],\"alias_conflicts\":[\"alice smith\"]}");
    json_decref(al);
    CHECK_INT(count(c,
                    "SELECT count(*) FROM utopia_aliases a JOIN utopia_entities e ON e.id = "
                    "a.entity_id WHERE e.name = 'Bob' AND a.user_id = $1",
                    U1),
              ==, 17); /* bob, bobby, b1..b15 (the 21st entry, "Paris", and after: not read) */
    /* "Bobby" now means Bob */
    check_letter(
        c,
        &(utopia_fact_in){.subject = "bobby", .predicate = "plays", .object = "go", .single = -1},
        "{\"fact\":{\"id\":\"#17\",\"subject\":\"Bob\",\"subject_id\":\"#10\","
        "\"predicate\":\"plays\",\"object\":\"go\",\"object_id\":null,"
        "\"valid_from\":\"2025-01-15T00:00:00Z\",\"valid_from_precision\":\"recorded\","
        "\"valid_to\":null,\"recorded_at\":\"REC\",\"current\":true," FACT_SRC
        ",\"single_valued\":false},\"closed\":[],\"alias_conflicts\":[]}");

    /* cardinality declared by the user: the first declaration is kept */
    check_letter(c,
                 &(utopia_fact_in){.subject = "Bob",
                                   .predicate = "drives",
                                   .object = "a Volvo",
                                   .valid_from = "2010",
                                   .single = 1},
                 "{\"fact\":{\"id\":\"#18\",\"subject\":\"Bob\",\"subject_id\":\"#10\","
                 "\"predicate\":\"drives\",\"object\":\"a Volvo\",\"object_id\":null,"
                 "\"valid_from\":\"2010\",\"valid_from_precision\":\"year\",\"valid_to\":null,"
                 "\"recorded_at\":\"REC\",\"current\":true," FACT_SRC
                 ",\"single_valued\":true},\"closed\":[],\"alias_conflicts\":[]}");
    check_letter(c,
                 &(utopia_fact_in){.subject = "Bob",
                                   .predicate = "drives",
                                   .object = "a Saab",
                                   .valid_from = "2015",
                                   .single = 0},
                 "{\"fact\":{\"id\":\"#19\",\"subject\":\"Bob\",\"subject_id\":\"#10\","
                 "\"predicate\":\"drives\",\"object\":\"a Saab\",\"object_id\":null,"
                 "\"valid_from\":\"2015\",\"valid_from_precision\":\"year\",\"valid_to\":null,"
                 "\"recorded_at\":\"REC\",\"current\":true," FACT_SRC
                 ",\"single_valued\":true},\"closed\":[\"#18\"],\"alias_conflicts\":[]}");
    /* a built-in single predicate declared many-valued by the user */
    check_letter(
        c,
        &(utopia_fact_in){
            .subject = "Carol", .predicate = "email", .object = "c@home.example", .single = 0},
        "{\"fact\":{\"id\":\"#20\",\"subject\":\"Carol\",\"subject_id\":\"#21\","
        "\"predicate\":\"email\",\"object\":\"c@home.example\",\"object_id\":null,"
        "\"valid_from\":\"2025-01-15T00:00:00Z\",\"valid_from_precision\":\"recorded\","
        "\"valid_to\":null,\"recorded_at\":\"REC\",\"current\":true," FACT_SRC
        ",\"single_valued\":false},\"closed\":[],\"alias_conflicts\":[]}");
    check_letter(
        c,
        &(utopia_fact_in){
            .subject = "Carol", .predicate = "email", .object = "c@work.example", .single = -1},
        "{\"fact\":{\"id\":\"#22\",\"subject\":\"Carol\",\"subject_id\":\"#21\","
        "\"predicate\":\"email\",\"object\":\"c@work.example\",\"object_id\":null,"
        "\"valid_from\":\"2025-01-15T00:00:00Z\",\"valid_from_precision\":\"recorded\","
        "\"valid_to\":null,\"recorded_at\":\"REC\",\"current\":true," FACT_SRC
        ",\"single_valued\":false},\"closed\":[],\"alias_conflicts\":[]}");
    /* a long value, guessed: today refused, as the object is looked up as an
     * entity name first (at most 200 characters) */
    char longvalue[260];
    memset(longvalue, 'v', sizeof longvalue - 1);
    longvalue[sizeof longvalue - 1] = 0;
    check_refused(c,
                  &(utopia_fact_in){
                      .subject = "Carol", .predicate = "said", .object = longvalue, .single = -1},
                  "an entity needs a name of 1 to 200 characters");
    check_letter(c,
                 &(utopia_fact_in){.subject = "Carol",
                                   .predicate = "said",
                                   .object = "vvvv",
                                   .object_kind = "value",
                                   .single = -1},
                 "{\"fact\":{\"id\":\"#23\",\"subject\":\"Carol\",\"subject_id\":\"#21\","
                 "\"predicate\":\"said\",\"object\":\"vvvv\",\"object_id\":null,"
                 "\"valid_from\":\"2025-01-15T00:00:00Z\",\"valid_from_precision\":\"recorded\","
                 "\"valid_to\":null,\"recorded_at\":\"REC\",\"current\":true," FACT_SRC
                 ",\"single_valued\":false},\"closed\":[],\"alias_conflicts\":[]}");
    /* a database error: TK_ERROR naming the call, and nothing of the fact is
     * left (its new subject and alias are rolled back with it) */
    long long entities = count(c, "SELECT count(*) FROM utopia_entities WHERE user_id = $1", U1);
    long long aliases = count(c, "SELECT count(*) FROM utopia_aliases WHERE user_id = $1", U1);
    CHECK(tk_pg_exec(c, "ALTER TABLE utopia_facts RENAME TO utopia_facts_away", 0, NULL) == TK_OK);
    add_letter(
        c,
        &(utopia_fact_in){.subject = "Erin", .predicate = "likes", .object = "tea", .single = -1},
        TK_ERROR, err);
    CHECK_STR(err, "database error in SELECT utopia_fact_add($1, $2, $3, $4, ");
    CHECK(tk_pg_exec(c, "ALTER TABLE utopia_facts_away RENAME TO utopia_facts", 0, NULL) == TK_OK);
    CHECK_INT(count(c, "SELECT count(*) FROM utopia_entities WHERE user_id = $1", U1), ==,
              entities);
    CHECK_INT(count(c, "SELECT count(*) FROM utopia_aliases WHERE user_id = $1", U1), ==, aliases);
    PQfinish(c);
}

/* Two contradicting facts at once, from two connections: whatever the order,
 * one timeline comes out (the subject made once; for a single-valued predicate
 * exactly one fact open, the other closed by it where it starts). */
struct racer {
    const char *subject, *object, *from;
    pthread_barrier_t *go;
    tk_status st;
    char err[256];
};

static void *race_one(void *arg)
{
    struct racer *r = arg;
    PGconn *c = PQconnectdb(dburl);
    utopia_fact_in f = {.subject = r->subject,
                        .predicate = "lives in",
                        .object = r->object,
                        .valid_from = r->from,
                        .single = -1};
    utopia_source src = {.chat_id = CHAT};
    json_t *out = NULL;
    pthread_barrier_wait(r->go);
    r->st = PQstatus(c) == CONNECTION_OK
                ? utopia_fact_add(&U, c, U1, &f, &src, NOW_MS, &out, r->err, sizeof r->err)
                : TK_ERROR;
    json_decref(out);
    PQfinish(c);
    return NULL;
}

TEST(contradicting_facts_at_once_make_one_timeline)
{
    PGconn *c = setup("race");
    for (int round = 0; round < 24; round++) {
        char subject[32];
        snprintf(subject, sizeof subject, "Dave %d", round);
        int same_day = round % 2; /* the same start, or two starts */
        if (round >= 4) /* a subject that exists already: only the timeline lock orders them */
            json_decref(fact(c, subject, "likes", "tea", NULL, NULL));
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, 2);
        struct racer a = {subject, "Paris", "2020-03", &go}, b = {subject, "Berlin", NULL, &go};
        b.from = same_day ? "2020-03" : "2021-07";
        pthread_t ta, tb;
        CHECK(pthread_create(&ta, NULL, race_one, &a) == 0);
        CHECK(pthread_create(&tb, NULL, race_one, &b) == 0);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        pthread_barrier_destroy(&go);
        if (a.st != TK_OK || b.st != TK_OK)
            TK_TEST_FAIL("round %d: %s (%s) / %s (%s)", round, tk_status_str(a.st), a.err,
                         tk_status_str(b.st), b.err);
        const char *p[] = {U1, subject};
        PGresult *r = tk_pg_query(
            c,
            "SELECT (SELECT count(*) FROM utopia_entities WHERE user_id = $1 AND name = $2), "
            "count(*), count(*) FILTER (WHERE f.valid_to IS NULL), "
            "count(*) FILTER (WHERE f.valid_to IS NOT NULL AND f.closed_by IS NOT NULL AND "
            "f.valid_to = (SELECT o.valid_from FROM utopia_facts o WHERE o.id = f.closed_by)) "
            "FROM utopia_facts f JOIN utopia_entities e ON e.id = f.subject_id "
            "WHERE f.user_id = $1 AND e.name = $2 AND f.predicate = 'lives_in'",
            2, p);
        CHECK(tk_pg_ok(r));
        if (strcmp(PQgetvalue(r, 0, 0), "1") || strcmp(PQgetvalue(r, 0, 1), "2") ||
            strcmp(PQgetvalue(r, 0, 2), "1") || strcmp(PQgetvalue(r, 0, 3), "1"))
            TK_TEST_FAIL("round %d (%s): entities %s, facts %s, open %s, closed by the other %s",
                         round, same_day ? "same start" : "two starts", PQgetvalue(r, 0, 0),
                         PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 2), PQgetvalue(r, 0, 3));
        PQclear(r);
        if (!same_day) { /* the later start is the one open */
            r = tk_pg_query(c,
                            "SELECT f.object FROM utopia_facts f JOIN utopia_entities e ON e.id = "
                            "f.subject_id WHERE f.user_id = $1 AND e.name = $2 AND f.valid_to IS "
                            "NULL AND f.predicate = 'lives_in'",
                            2, p);
            CHECK(tk_pg_ok(r) && PQntuples(r) == 1);
            CHECK_STR(PQgetvalue(r, 0, 0), "Berlin");
            PQclear(r);
        }
    }
    PQfinish(c);
}

TEST(graph_aliases_neighbourhood_and_remember)
{
    PGconn *c = setup("graph");
    json_t *out;
    char err[256];
    json_error_t je;
    json_t *args = json_loads("{\"fact\": {\"subject\": \"Robert Jones\", \"aliases\": [\"Bob\"], "
                              "\"predicate\": \"works at\", \"object\": \"Acme Corp\", "
                              "\"valid_from\": \"since March 2022\"}, \"note\": \"Bob likes "
                              "short answers\"}",
                              0, &je);
    utopia_source src = {.chat_id = CHAT};
    CHECK(utopia_remember(&U, c, U1, args, &src, 0, &out, err, sizeof err) == TK_OK);
    CHECK(json_object_get(out, "fact") && json_object_get(out, "memory"));
    CHECK_STR(tk_json_str(json_object_get(out, "fact"), "valid_from"), "2022-03");
    json_decref(out);
    json_decref(args);
    json_decref(fact(c, "Acme Corp", "located in", "Springfield", "2010", NULL));
    json_decref(fact(c, "Springfield", "in country", "Freedonia", NULL, NULL));
    /* the alias finds the same entity */
    CHECK(utopia_recall_facts(&U, c, U1, "bob", NULL, 0, &out, err, sizeof err) == TK_OK);
    CHECK_STR(tk_json_str(json_object_get(out, "entity"), "name"), "Robert Jones");
    json_decref(out);
    CHECK(utopia_neighbourhood(&U, c, U1, "Bob", 1, NULL, 0, &out, err, sizeof err) == TK_OK);
    CHECK_INT(json_array_size(json_object_get(out, "entities")), ==, 2);
    json_decref(out);
    CHECK(utopia_neighbourhood(&U, c, U1, "Bob", 3, NULL, 0, &out, err, sizeof err) == TK_OK);
    CHECK_INT(json_array_size(json_object_get(out, "entities")), ==, 4);
    CHECK_INT(json_array_size(json_object_get(out, "facts")), ==, 3);
    json_decref(out);
    /* before Bob joined, Acme was not his neighbour */
    CHECK(utopia_neighbourhood(&U, c, U1, "Bob", 2, "2021", 0, &out, err, sizeof err) == TK_OK);
    CHECK_INT(json_array_size(json_object_get(out, "entities")), ==, 1);
    json_decref(out);
    /* unknown entities, with a suggestion */
    CHECK(utopia_recall_facts(&U, c, U1, "Robert Jnes", NULL, 0, &out, err, sizeof err) ==
          TK_ENOENT);
    CHECK(strstr(err, "did you mean") != NULL);
    /* validation of what a model sends */
    const char *bad[] = {
        "{}",
        "{\"fact\": {\"subject\": \"x\", \"predicate\": \"!!\", \"object\": \"y\"}}",
        "{\"fact\": {\"subject\": \"x\", \"predicate\": \"p\"}}",
        "{\"fact\": {\"subject\": \"x\", \"predicate\": \"p\", \"object\": \"y\", \"valid_from\": "
        "\"05/03/2024\"}}",
        "{\"fact\": {\"subject\": \"x\", \"predicate\": \"p\", \"object\": \"y\", \"valid_from\": "
        "\"2024\", \"valid_to\": \"2020\"}}",
        "{\"note\": \"\"}",
    };
    for (size_t i = 0; i < TK_ARRAY_LEN(bad); i++) {
        args = json_loads(bad[i], 0, &je);
        CHECK(args != NULL);
        CHECK(utopia_remember(&U, c, U1, args, &src, 0, &out, err, sizeof err) == TK_EINVAL);
        json_decref(args);
    }
    /* the other user's graph is empty */
    CHECK(utopia_recall_facts(&U, c, U2, "Bob", NULL, 0, &out, err, sizeof err) == TK_ENOENT);
    PQfinish(c);
}

TEST(memories_relevant_within_a_budget)
{
    PGconn *c = setup("mem");
    json_t *out;
    char err[256];
    const char *notes[] = {"The user is allergic to peanuts", "The user's daughter is named Mia",
                           "The user prefers metric units", "The user is learning Portuguese"};
    for (size_t i = 0; i < 4; i++) {
        CHECK(utopia_memory_add(&U, c, U1, notes[i], NULL, &out, err, sizeof err) == TK_OK);
        json_decref(out);
    }
    CHECK(utopia_memory_relevant(&U, c, U1, "Suggest a snack without peanuts", NULL, 100, &out, err,
                                 sizeof err) == TK_OK);
    json_t *m = json_object_get(out, "memories");
    CHECK_INT(json_array_size(m), >=, 1);
    CHECK(strstr(tk_json_str(json_array_get(m, 0), "text"), "peanuts") != NULL);
    CHECK_INT(tk_json_int_or(out, "tokens", 0), <=, 100);
    json_decref(out);
    /* a budget smaller than any memory offers none */
    CHECK(utopia_memory_relevant(&U, c, U1, "peanuts", NULL, 3, &out, err, sizeof err) == TK_OK);
    CHECK_INT(json_array_size(json_object_get(out, "memories")), ==, 0);
    json_decref(out);
    CHECK(utopia_memory_list(&U, c, U1, 0, 0, &out, err, sizeof err) == TK_OK);
    json_t *all = json_object_get(out, "memories");
    CHECK_INT(json_array_size(all), ==, 4);
    char id[64];
    snprintf(id, sizeof id, "%s", tk_json_str(json_array_get(all, 0), "id"));
    json_decref(out);
    CHECK(utopia_memory_delete(&U, c, U2, id, &out, err, sizeof err) == TK_ENOENT);
    CHECK(utopia_memory_delete(&U, c, U1, id, &out, err, sizeof err) == TK_OK);
    json_decref(out);
    PQfinish(c);
}

/* Deleting a memory and deleting a fact answer alike: bad ids refused with the
 * kind named, none and another user's "no such ...", the own one deleted once. */
TEST(memory_and_fact_deletes_refuse_bad_ids_and_others)
{
    PGconn *c = setup("del");
    json_t *out;
    char err[256];
    CHECK(utopia_memory_add(&U, c, U1, "The user keeps bees", NULL, &out, err, sizeof err) ==
          TK_OK);
    char mem[64], fct[64];
    snprintf(mem, sizeof mem, "%s", tk_json_str(json_object_get(out, "memory"), "id"));
    json_decref(out);
    out = fact(c, "Bees", "make", "Honey", NULL, NULL);
    snprintf(fct, sizeof fct, "%s", tk_json_str(json_object_get(out, "fact"), "id"));
    json_decref(out);
    CHECK_INT(strlen(mem), ==, 36);
    CHECK_INT(strlen(fct), ==, 36);
    const char *none = "44444444-4444-4444-8444-444444444444";
    struct {
        tk_status (*del)(const utopia *, PGconn *, const char *, const char *, json_t **, char *,
                         size_t);
        const char *id, *bad, *missing;
    } kinds[] = {
        {utopia_memory_delete, mem, "bad user or memory id", "no such memory"},
        {utopia_fact_delete, fct, "bad user or fact id", "no such fact"},
    };
    for (size_t i = 0; i < TK_ARRAY_LEN(kinds); i++) {
        const char *bad_ids[][2] = {{U1, "nope"}, {U1, NULL}, {"nope", kinds[i].id}, {NULL, none}};
        for (size_t j = 0; j < TK_ARRAY_LEN(bad_ids); j++) {
            out = json_true();
            err[0] = 0;
            CHECK(kinds[i].del(&U, c, bad_ids[j][0], bad_ids[j][1], &out, err, sizeof err) ==
                  TK_EINVAL);
            CHECK(out == NULL);
            CHECK_STR(err, kinds[i].bad);
        }
        const char *missing[][2] = {{U1, none}, {U2, kinds[i].id}};
        for (size_t j = 0; j < TK_ARRAY_LEN(missing); j++) {
            err[0] = 0;
            CHECK(kinds[i].del(&U, c, missing[j][0], missing[j][1], &out, err, sizeof err) ==
                  TK_ENOENT);
            CHECK(out == NULL);
            CHECK_STR(err, kinds[i].missing);
        }
        CHECK(kinds[i].del(&U, c, U1, kinds[i].id, &out, err, sizeof err) == TK_OK);
        json_t *want = json_pack("{s:b}", "deleted", 1);
        CHECK(json_equal(out, want));
        json_decref(want);
        json_decref(out);
        CHECK(kinds[i].del(&U, c, U1, kinds[i].id, &out, err, sizeof err) == TK_ENOENT);
        CHECK_STR(err, kinds[i].missing);
    }
    /* a database error is an error, not "none" */
    PQclear(PQexec(c, "ALTER TABLE utopia_facts RENAME TO utopia_facts_gone"));
    CHECK(utopia_fact_delete(&U, c, U1, none, &out, err, sizeof err) == TK_ERROR);
    CHECK(out == NULL);
    CHECK(strncmp(err, "database error in DELETE FROM utopia_facts", 42) == 0);
    PQfinish(c);
}

/* A list's page: a limit outside 1..max is the default, a negative offset 0. */
TEST(list_pages_clamp_limit_and_offset)
{
    struct {
        int limit, offset, def, max;
        const char *want_limit, *want_offset;
    } cases[] = {
        {1, 0, 100, 500, "1", "0"},
        {500, 7, 100, 500, "500", "7"},
        {501, 7, 100, 500, "100", "7"},
        {0, -1, 100, 500, "100", "0"},
        {-3, 2147483647, 200, 1000, "200", "2147483647"},
        {1000, 0, 200, 1000, "1000", "0"},
        {1001, 0, 200, 1000, "200", "0"},
    };
    for (size_t i = 0; i < TK_ARRAY_LEN(cases); i++) {
        utopia_db_page pg =
            utopia_db_page_of(cases[i].limit, cases[i].offset, cases[i].def, cases[i].max);
        CHECK_STR(pg.limit, cases[i].want_limit);
        CHECK_STR(pg.offset, cases[i].want_offset);
    }
}

TEST(dates_liberal_in_strict_out)
{
    /* now = 2026-12-01T05:00:00Z */
    int64_t now = 1796101200000LL, ms;
    const char *prec;
    char err[160], out[40];
    struct {
        const char *in, *want, *prec;
    } ok[] = {
        {"2024-03-05", "2024-03-05", "day"},
        {"2024-03", "2024-03", "month"},
        {"2024", "2024", "year"},
        {"in 2019", "2019", "year"},
        {"since March 2022", "2022-03", "month"},
        {"Mar 2022", "2022-03", "month"},
        {"5 March 2024", "2024-03-05", "day"},
        {"March 5th, 2024", "2024-03-05", "day"},
        {"the 5th of March 2024", "2024-03-05", "day"},
        {"31/12/2024", "2024-12-31", "day"},
        {"12/31/2024", "2024-12-31", "day"},
        {"31.12.2024", "2024-12-31", "day"},
        {"2024/02/29", "2024-02-29", "day"},
        {"Q3 2024", "2024-07", "month"},
        {"yesterday", "2026-11-30", "day"},
        {"last year", "2025", "year"},
        {"3 months ago", "2026-09", "month"},
        {"2 days ago", "2026-11-29", "day"},
        {"2024-03-05T10:20:30Z", "2024-03-05T10:20:30.000Z", "second"},
        {"2024-03-05 10:20", "2024-03-05T10:20:00.000Z", "minute"},
        {"2024-03-05T10:20:30+02:00", "2024-03-05T08:20:30.000Z", "second"},
    };
    for (size_t i = 0; i < TK_ARRAY_LEN(ok); i++) {
        if (utopia_date_parse(ok[i].in, now, &ms, &prec, err, sizeof err) != TK_OK)
            TK_TEST_FAIL("%s: %s", ok[i].in, err);
        utopia_date_format(ms, prec, out, sizeof out);
        if (strcmp(out, ok[i].want) || strcmp(prec, ok[i].prec))
            TK_TEST_FAIL("%s: got %s (%s), want %s (%s)", ok[i].in, out, prec, ok[i].want,
                         ok[i].prec);
    }
    const char *bad[] = {"05/03/2024",
                         "2023-02-29",
                         "2024-13-01",
                         "next tuesday-ish",
                         "",
                         "yesterday evening maybe",
                         "99999",
                         "32 March 2024",
                         "2024-03-05T25:00"};
    for (size_t i = 0; i < TK_ARRAY_LEN(bad); i++)
        if (utopia_date_parse(bad[i], now, &ms, &prec, err, sizeof err) == TK_OK)
            TK_TEST_FAIL("\"%s\" should be refused", bad[i]);
}

/* The settings table's defaults (what the server runs with) are the ones
 * utopia_config_defaults gives tests and bench/search. */
TEST(settings_defaults_match_config_defaults)
{
    utopia_config got, want;
    memset(&got, 0, sizeof got);
    utopia_config_defaults(&want);
    tk_setting table[] = {UTOPIA_SETTINGS(got)};
    for (size_t i = 0; i < TK_ARRAY_LEN(table); i++)
        unsetenv(table[i].env);
    char *argv[] = {"test", NULL};
    int argi = 1;
    char err[256];
    if (tk_config_load(table, TK_ARRAY_LEN(table), 1, argv, &argi, err, sizeof err) != TK_OK)
        TK_TEST_FAIL("load: %s", err);
    CHECK_STR(got.fts_config, want.fts_config);
    CHECK_INT(got.chunk_size, ==, want.chunk_size);
    CHECK_INT(got.chunk_overlap, ==, want.chunk_overlap);
    CHECK_INT(got.max_document_bytes, ==, want.max_document_bytes);
    CHECK_INT(got.max_text_bytes, ==, want.max_text_bytes);
    CHECK_INT(got.extract_timeout_ms, ==, want.extract_timeout_ms);
    CHECK_INT(got.extract_memory_mb, ==, want.extract_memory_mb);
    CHECK_STR(got.pdftotext, want.pdftotext);
    CHECK_INT(got.candidates, ==, want.candidates);
    CHECK_INT(got.memory_budget, ==, want.memory_budget);
    CHECK(got.embeddings_model == NULL && want.embeddings_model == NULL);
    CHECK(got.embeddings_url == NULL && want.embeddings_url == NULL);
    tk_config_free(table, TK_ARRAY_LEN(table));
}

/* What search speed at scale relies on (docs/UTOPIA.md, "Measured"): a
 * chunk's tsvector kept in its row (STORAGE MAIN: compressed there if need
 * be, the body moved out first), and statistics on the vocabulary's word
 * lengths (the typo lookup's plan). Speed itself is measured in bench/search. */
TEST(schema_keeps_tsvectors_inline_and_word_length_statistics)
{
    PGconn *c = setup("storage");
    CHECK(count(c,
                "SELECT count(*) FROM pg_attribute WHERE attrelid = 'utopia_chunks'::regclass AND "
                "attname = 'tsv' AND attstorage = 'm'",
                NULL) == 1);
    CHECK(count(c,
                "SELECT count(*) FROM pg_attribute WHERE attrelid = 'utopia_chunks'::regclass AND "
                "attname = 'body' AND attstorage = 'x'",
                NULL) == 1);
    CHECK(count(c,
                "SELECT count(*) FROM pg_statistic_ext WHERE stxname = 'utopia_terms_length' AND "
                "stxrelid = 'utopia_terms'::regclass",
                NULL) == 1);
    PQfinish(c);
}

TEST_MAIN()
