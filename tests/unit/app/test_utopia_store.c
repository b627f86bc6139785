/* Utopia against a real Postgres: documents, hybrid search ranking on a
 * generated corpus of 2,000+ chunks, memories, dated facts, scoping. */
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
