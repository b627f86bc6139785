/* The semantic ranking: embeddings from an OpenAI-compatible /v1/embeddings
 * (here a fake on loopback whose vectors put synonyms together), fused with the
 * lexical rankings; a failing endpoint costs only that ranking. */
#include <pthread.h>

#include "app/utopia/embed.h"
#include "app/utopia/utopia.h"
#include "lib/embed.h"
#include "lib/httpc.h"
#include "lib/httpd.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/pg.h"
#include "tk_test.h"
#include "tk_test_pg.h"

extern const struct tk_embed_file tk_embed_sql[];

static char dburl[512];
static const char *U1 = "11111111-1111-4111-8111-111111111111";
static char last_auth[256], last_model[64];
static int calls;

static int bucket(const char *w)
{
    static const char *const groups[][4] = {{"car", "automobile", "vehicle", NULL},
                                            {"doctor", "physician", "medic", NULL}};
    for (int g = 0; g < 2; g++)
        for (int i = 0; groups[g][i]; i++)
            if (!strcmp(w, groups[g][i]))
                return g;
    unsigned h = 5381;
    for (const char *p = w; *p; p++)
        h = h * 33 + (unsigned char)*p;
    return 2 + (int)(h % 30);
}

static void h_embeddings(tk_req *r, void *ud)
{
    int fail = ud != NULL;
    __atomic_add_fetch(&calls, 1, __ATOMIC_SEQ_CST);
    const char *a = tk_req_header(r, "authorization");
    snprintf(last_auth, sizeof last_auth, "%s", a ? a : "");
    json_t *body = tk_req_json(r, 0);
    if (!body)
        return;
    snprintf(last_model, sizeof last_model, "%s", tk_json_str_or(body, "model", ""));
    if (fail) {
        tk_respond_error(r, 500, "BROKEN", "the embeddings service is down");
        return;
    }
    json_t *data = json_array();
    size_t i;
    json_t *in;
    json_array_foreach(json_object_get(body, "input"), i, in)
    {
        double v[32] = {0};
        char word[64];
        size_t k = 0;
        for (const char *p = json_string_value(in);; p++) {
            if (*p && ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))) {
                if (k < sizeof word - 1)
                    word[k++] = (char)(*p | 0x20);
                continue;
            }
            if (k >= 3) {
                word[k] = 0;
                v[bucket(word)] += 1;
            }
            k = 0;
            if (!*p)
                break;
        }
        json_t *e = json_array();
        for (int d = 0; d < 32; d++)
            json_array_append_new(e, json_real(v[d]));
        json_array_append_new(
            data, tk_json_obj("index", json_integer((json_int_t)i), "embedding", e, NULL));
    }
    tk_respond_json(r, 200, tk_json_obj("data", data, NULL));
}

static tk_httpd *H;
static char base[128];

static void start_fake(void)
{
    static const tk_route routes[] = {
        {"POST", "/ok/v1/embeddings", h_embeddings, NULL, TK_ROUTE_PUBLIC},
        {"POST", "/down/v1/embeddings", h_embeddings, (void *)1, TK_ROUTE_PUBLIC},
    };
    tk_httpd_config hc = {.listen = "127.0.0.1:0", .name = "fake"};
    char err[256];
    H = tk_httpd_start(&hc, routes, TK_ARRAY_LEN(routes), err, sizeof err);
    if (!H)
        TK_TEST_FAIL("fake server: %s", err);
    snprintf(base, sizeof base, "%s", tk_httpd_url(H));
}

static PGconn *setup(const char *tag)
{
    char t[48];
    snprintf(t, sizeof t, "utopia_%s", tag);
    tk_test_fresh_db(t, dburl, sizeof dburl);
    tk_httpc_global_init();
    PGconn *c = PQconnectdb(dburl);
    CHECK(PQstatus(c) == CONNECTION_OK);
    PQclear(PQexec(c, "SET client_min_messages = warning"));
    int applied;
    char err[512];
    CHECK(tk_pg_migrate(c, tk_embed_sql, &applied, err, sizeof err) == TK_OK);
    const char *p[] = {U1};
    CHECK(tk_pg_exec(c, "INSERT INTO users (id, email) VALUES ($1, 'a@x')", 1, p) == TK_OK);
    start_fake();
    return c;
}

static void init_u(utopia *u, const char *path)
{
    static char url[256];
    utopia_config cfg;
    utopia_config_defaults(&cfg);
    if (path) {
        snprintf(url, sizeof url, "%s%s", base, path);
        cfg.embeddings_model = "test-embed-1";
        cfg.embeddings_url = url;
        cfg.embeddings_api_key = "sk-test";
    }
    char err[256];
    CHECK(utopia_init(u, &cfg, err, sizeof err) == TK_OK);
}

static json_t *add(const utopia *u, PGconn *c, const char *text)
{
    utopia_doc_in in = {.mime = "text/plain", .data = text, .len = strlen(text)};
    json_t *out;
    char err[256];
    if (utopia_doc_add(u, c, U1, &in, &out, err, sizeof err) != TK_OK)
        TK_TEST_FAIL("doc_add: %s", err);
    return out;
}

static json_t *find(const utopia *u, PGconn *c, const char *q)
{
    utopia_search_opts o = {.query = q, .kinds = UTOPIA_KIND_CHUNKS, .k = 5};
    json_t *out;
    char err[256];
    if (utopia_search(u, c, U1, &o, &out, err, sizeof err) != TK_OK)
        TK_TEST_FAIL("search: %s", err);
    return json_object_get(out, "results") ? out : NULL;
}

TEST(semantic_ranking_finds_synonyms)
{
    PGconn *c = setup("emb");
    utopia u, plain;
    init_u(&u, "/ok/v1");
    init_u(&plain, NULL);
    json_t *d = add(&u, c, "Automobile repair manual: how to change the oil filter.");
    CHECK(json_is_true(json_object_get(d, "embedded")));
    json_decref(d);
    json_decref(add(&u, c, "Physician visiting hours are from nine to five."));
    json_decref(add(&u, c, "The garden needs watering twice a week."));
    CHECK_STR(last_model, "test-embed-1");
    CHECK_STR(last_auth, "Bearer sk-test");
    /* no word in common with "car": only the embeddings find it */
    json_t *r = find(&u, c, "car");
    json_t *top = json_array_get(json_object_get(r, "results"), 0);
    CHECK(top != NULL);
    CHECK(strstr(tk_json_str(top, "snippet"), "Automobile") != NULL);
    CHECK_INT(tk_json_int_or(json_object_get(top, "ranks"), "semantic", 0), ==, 1);
    json_decref(r);
    r = find(&u, c, "doctor");
    top = json_array_get(json_object_get(r, "results"), 0);
    CHECK(strstr(tk_json_str(top, "snippet"), "Physician") != NULL);
    json_decref(r);
    /* the same store without a model: words only */
    r = find(&plain, c, "car");
    CHECK_INT(json_array_size(json_object_get(r, "results")), ==, 0);
    json_decref(r);
    /* a large user: similarity re-ranks the lexical candidates only */
    u.embed_scan_all = 0;
    r = find(&u, c, "car");
    CHECK_INT(json_array_size(json_object_get(r, "results")), ==, 0);
    json_decref(r);
    /* (the two candidates tie: BM25 ranks the shorter Physician chunk first,
     * similarity the Automobile one; the tie goes to BM25) */
    r = find(&u, c, "car oil hours");
    CHECK_INT(json_array_size(json_object_get(r, "results")), ==, 2);
    json_t *second = json_array_get(json_object_get(r, "results"), 1);
    CHECK(strstr(tk_json_str(second, "snippet"), "Automobile") != NULL);
    CHECK_INT(tk_json_int_or(json_object_get(second, "ranks"), "semantic", 0), ==, 1);
    CHECK_INT(tk_json_int_or(json_object_get(second, "ranks"), "bm25", 0), ==, 2);
    top = json_array_get(json_object_get(r, "results"), 0);
    CHECK_INT(tk_json_int_or(json_object_get(top, "ranks"), "semantic", 0), ==, 2);
    json_decref(r);
    u.embed_scan_all = 5000;
    /* exact words still win */
    r = find(&u, c, "garden watering");
    top = json_array_get(json_object_get(r, "results"), 0);
    CHECK(strstr(tk_json_str(top, "snippet"), "garden") != NULL);
    CHECK(json_object_get(json_object_get(top, "ranks"), "bm25") != NULL);
    json_decref(r);
    PQfinish(c);
}

TEST(failing_endpoint_costs_only_the_semantic_ranking)
{
    PGconn *c = setup("embdown");
    utopia u;
    init_u(&u, "/down/v1");
    json_t *d = add(&u, c, "Automobile repair manual.");
    CHECK(json_is_false(json_object_get(d, "embedded")));
    json_decref(d);
    json_t *r = find(&u, c, "automobile");
    CHECK_INT(json_array_size(json_object_get(r, "results")), ==, 1);
    json_decref(r);
    /* and the embedding client itself reports it */
    float *v;
    int dim;
    char err[256];
    const char *t[] = {"x"};
    CHECK(utopia_embed(&u, t, 1, &v, &dim, err, sizeof err) == TK_ERROR);
    CHECK(strstr(err, "500") != NULL);
    PQfinish(c);
}

TEST(embeddings_are_unit_vectors_in_batches)
{
    PGconn *c = setup("embvec");
    utopia u;
    init_u(&u, "/ok/v1");
    const char *texts[70];
    for (int i = 0; i < 70; i++)
        texts[i] = i % 2 ? "car car doctor" : "garden";
    float *v;
    int dim;
    char err[256];
    calls = 0;
    CHECK(utopia_embed(&u, texts, 70, &v, &dim, err, sizeof err) == TK_OK);
    CHECK_INT(dim, ==, 32);
    CHECK_INT(calls, ==, 3); /* 32 + 32 + 6 */
    for (int i = 0; i < 70; i++) {
        double n = 0;
        for (int k = 0; k < dim; k++)
            n += (double)v[i * dim + k] * v[i * dim + k];
        CHECK(n > 0.999 && n < 1.001);
    }
    free(v);
    PQfinish(c);
}

TEST_MAIN()
