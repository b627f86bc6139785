/*
 * bench/search/bench.c — Utopia search: latency and recall.
 *
 *   bench migrate URL              apply the migrations to a database
 *   bench latency URL USER N       N searches through utopia_search over the
 *                                  corpus.sql corpus; prints p50/p99 by kind
 *   bench recall URL               loads the known-answer corpus (2,050 chunks,
 *                                  tests/unit/app/utopia_corpus.h) through the
 *                                  real pipeline and prints recall@1 and @5
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/utopia/utopia.h"
#include "lib/embed.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/pg.h"
#include "lib/tktime.h"
#include "utopia_corpus.h"

extern const struct tk_embed_file tk_embed_sql[];

static PGconn *connect_db(const char *url)
{
    PGconn *c = PQconnectdb(url);
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "bench: %s\n", PQerrorMessage(c));
        exit(1);
    }
    PQclear(PQexec(c, "SET client_min_messages = warning"));
    return c;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* the names corpus.sql gives chunk i */
static const char *const syl[] = {"ka",  "lo",  "mi",  "ren", "tor", "va",  "sel", "dun",
                                  "pha", "gri", "mo",  "len", "sta", "qui", "bre", "zo",
                                  "tan", "fel", "ori", "umb", "che", "ast", "ple", "vin",
                                  "dor", "kes", "mar", "nul", "pes", "rig", "sut", "wel"};
static void name_of(long i, char *out, size_t n)
{
    snprintf(out, n, "%s%s%s%six", syl[i % 32], syl[(i / 32) % 32], syl[(i / 1024) % 32],
             syl[(i / 32768) % 32]);
}
static void vocab_word(long i, char *out, size_t n)
{
    snprintf(out, n, "%s%s%s", syl[i % 32], syl[(i / 32) % 32],
             i >= 1024 ? syl[(i / 1024) % 32] : "");
}

static double pct(int64_t *v, int n, double p)
{
    if (n == 0)
        return 0;
    int k = (int)(p * (n - 1) + 0.5);
    return (double)v[k] / 1e6;
}

static int latency(const char *url, const char *user, int n)
{
    tk_log_set_level(TK_LOG_ERROR);
    PGconn *c = connect_db(url);
    PGresult *r = PQexec(c, "SELECT count(*) FROM utopia_chunks");
    long total = tk_pg_ok(r) ? strtol(PQgetvalue(r, 0, 0), NULL, 10) : 0;
    PQclear(r);
    if (total == 0) {
        fprintf(stderr, "bench: no chunks in %s\n", url);
        return 1;
    }
    utopia u;
    utopia_config cfg;
    utopia_config_defaults(&cfg);
    char err[256];
    utopia_init(&u, &cfg, err, sizeof err);
    const char *kinds[] = {"name (exact)", "name with a typo", "two common words",
                           "three mixed words"};
    int64_t *t[4];
    int cnt[4] = {0};
    for (int k = 0; k < 4; k++)
        t[k] = tk_calloc((size_t)n, sizeof(int64_t));
    unsigned seed = 12345;
    for (int i = 0; i < n + 20; i++) {
        seed = seed * 1103515245u + 12345u;
        int kind = i % 4;
        char q[200], a[40], b[40], w[40];
        long which = (long)(seed >> 4) % total;
        switch (kind) {
        case 0:
            name_of(which, a, sizeof a);
            snprintf(q, sizeof q, "%s", a);
            break;
        case 1: {
            name_of(which, a, sizeof a);
            size_t l = strlen(a);
            char x = a[l / 2];
            a[l / 2] = a[l / 2 + 1];
            a[l / 2 + 1] = x;
            snprintf(q, sizeof q, "%s", a);
            break;
        }
        case 2:
            vocab_word((seed >> 8) % 300, a, sizeof a);
            vocab_word((seed >> 16) % 300, b, sizeof b);
            snprintf(q, sizeof q, "%s %sing", a, b);
            break;
        default:
            vocab_word((seed >> 8) % 4000, a, sizeof a);
            vocab_word((seed >> 12) % 1000, b, sizeof b);
            name_of(which, w, sizeof w);
            snprintf(q, sizeof q, "%ss %s %s", a, b, w);
            break;
        }
        utopia_search_opts o = {.query = q, .k = 8, .kinds = UTOPIA_KIND_CHUNKS};
        json_t *out = NULL;
        int64_t t0 = tk_mono_ns();
        tk_status st = utopia_search(&u, c, user, &o, &out, err, sizeof err);
        int64_t dt = tk_mono_ns() - t0;
        if (st != TK_OK) {
            fprintf(stderr, "bench: search \"%s\": %s\n", q, err);
            return 1;
        }
        json_decref(out);
        if (i >= 20 && cnt[kind] < n) /* the first queries warm the caches */
            t[kind][cnt[kind]++] = dt;
    }
    int64_t *all = tk_calloc((size_t)n + 4, sizeof(int64_t));
    int na = 0;
    printf("%-10ld %-20s %8s %8s %8s\n", total, "query", "n", "p50 ms", "p99 ms");
    for (int k = 0; k < 4; k++) {
        qsort(t[k], (size_t)cnt[k], sizeof(int64_t), cmp_i64);
        printf("%-10s %-20s %8d %8.2f %8.2f\n", "", kinds[k], cnt[k], pct(t[k], cnt[k], 0.5),
               pct(t[k], cnt[k], 0.99));
        memcpy(all + na, t[k], (size_t)cnt[k] * sizeof(int64_t));
        na += cnt[k];
        free(t[k]);
    }
    qsort(all, (size_t)na, sizeof(int64_t), cmp_i64);
    printf("%-10s %-20s %8d %8.2f %8.2f\n", "", "all", na, pct(all, na, 0.5), pct(all, na, 0.99));
    free(all);
    PQfinish(c);
    return 0;
}

static int migrate(const char *url)
{
    PGconn *c = connect_db(url);
    int applied;
    char err[512];
    if (tk_pg_migrate(c, tk_embed_sql, &applied, err, sizeof err) != TK_OK) {
        fprintf(stderr, "bench: migrate: %s\n", err);
        return 1;
    }
    PQfinish(c);
    return 0;
}

static int heading_rank(json_t *res, int i)
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

static int recall(const char *url)
{
    tk_log_set_level(TK_LOG_ERROR);
    if (migrate(url))
        return 1;
    PGconn *c = connect_db(url);
    const char *user = "44444444-4444-4444-8444-444444444444";
    const char *p[] = {user};
    PQclear(PQexecParams(
        c, "INSERT INTO users (id, email) VALUES ($1, 'recall@bench') ON CONFLICT DO NOTHING", 1,
        NULL, p, NULL, NULL, 0));
    PQclear(PQexecParams(c, "DELETE FROM utopia_documents WHERE user_id = $1", 1, NULL, p, NULL,
                         NULL, 0));
    PQclear(
        PQexecParams(c, "DELETE FROM utopia_terms WHERE user_id = $1", 1, NULL, p, NULL, NULL, 0));
    utopia u;
    utopia_config cfg;
    utopia_config_defaults(&cfg);
    char err[256];
    utopia_init(&u, &cfg, err, sizeof err);
    const int n = 2050;
    int64_t t0 = tk_mono_ms();
    for (int d = 0; d * 50 < n; d++) {
        tk_buf md;
        tk_buf_init(&md, 1 << 22);
        uc_document(d, 50, n, &md);
        utopia_doc_in in = {.mime = "text/markdown", .data = md.data, .len = md.len};
        json_t *out;
        if (utopia_doc_add(&u, c, user, &in, &out, err, sizeof err) != TK_OK) {
            fprintf(stderr, "bench: doc_add: %s\n", err);
            return 1;
        }
        json_decref(out);
        tk_buf_free(&md);
    }
    int64_t load_ms = tk_mono_ms() - t0;
    PGresult *r = PQexecParams(c, "SELECT count(*) FROM utopia_chunks WHERE user_id = $1", 1, NULL,
                               p, NULL, NULL, 0);
    long chunks = strtol(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    const char *kinds[] = {"exact (who founded <name>)", "inflected (<verb>ing <colour> <good>)",
                           "typo (<name, 2 letters swapped> region founder)"};
    printf("corpus: %ld chunks in %d documents, loaded in %lld ms (extract, chunk, index)\n",
           chunks, (n + 49) / 50, (long long)load_ms);
    printf("%-48s %6s %9s %9s\n", "queries", "n", "recall@1", "recall@5");
    int all1 = 0, all5 = 0, alln = 0;
    for (int k = 0; k < 3; k++) {
        int at1 = 0, at5 = 0, q = 0;
        for (int i = 0; i < n; i += 4) {
            char text[160];
            if (k == 0)
                uc_query_exact(i, text, sizeof text);
            else if (k == 1)
                uc_query_inflected(i, text, sizeof text);
            else
                uc_query_typo(i, text, sizeof text);
            utopia_search_opts o = {.query = text, .k = 5, .kinds = UTOPIA_KIND_CHUNKS};
            json_t *out;
            if (utopia_search(&u, c, user, &o, &out, err, sizeof err) != TK_OK) {
                fprintf(stderr, "bench: search: %s\n", err);
                return 1;
            }
            int rk = heading_rank(out, i);
            json_decref(out);
            at1 += rk == 1;
            at5 += rk >= 1 && rk <= 5;
            q++;
        }
        printf("%-48s %6d %9.3f %9.3f\n", kinds[k], q, (double)at1 / q, (double)at5 / q);
        all1 += at1, all5 += at5, alln += q;
    }
    printf("%-48s %6d %9.3f %9.3f\n", "all", alln, (double)all1 / alln, (double)all5 / alln);
    PQfinish(c);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "migrate"))
        return migrate(argv[2]);
    if (argc >= 5 && !strcmp(argv[1], "latency"))
        return latency(argv[2], argv[3], (int)strtol(argv[4], NULL, 10));
    if (argc >= 3 && !strcmp(argv[1], "recall"))
        return recall(argv[2]);
    fprintf(stderr, "usage: bench migrate URL | latency URL USER N | recall URL\n");
    return 2;
}
