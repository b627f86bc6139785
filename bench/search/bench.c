/*
 * bench/search/bench.c — Utopia search: latency and recall.
 *
 *   bench migrate URL              apply the migrations to a database
 *   bench latency URL USER N       N searches through utopia_search over the
 *                                  corpus.sql corpus; prints p50/p99 by kind
 *   bench recall URL               loads the known-answer corpus (2,050 chunks,
 *                                  tests/unit/app/utopia_corpus.h) through the
 *                                  real pipeline and prints recall@1 and @5
 *   bench realtext URL DIR OUT     loads the manual pages realtext.py wrote to
 *                                  DIR through the real pipeline, runs its
 *                                  queries through utopia_search and through
 *                                  ts_rank_cd (the query's words OR-ed), and
 *                                  writes both rankings and the chunks to OUT
 *                                  for reference.py
 *   bench upload URL DIR N         N uploads of one ~1,000-chunk document made
 *                                  of DIR's pages into one scope, then their
 *                                  deletions; prints the time of each
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

/* the whole of a file, NUL-terminated; exits when it cannot be read */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "bench: %s: %m\n", path);
        exit(1);
    }
    tk_buf b;
    tk_buf_init(&b, (size_t)1 << 30);
    char tmp[65536];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0)
        tk_buf_append(&b, tmp, n);
    fclose(f);
    return tk_buf_steal(&b, len);
}

/* realtext.py's manifest: the document files, in order */
static char **manifest(const char *dir, size_t *n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/manifest.txt", dir);
    char *m = slurp(path, NULL);
    char **v = NULL;
    *n = 0;
    for (char *line = strtok(m, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#')
            continue;
        char *tab = strchr(line, '\t');
        if (tab)
            *tab = 0;
        v = tk_realloc(v, (*n + 1) * sizeof *v);
        v[(*n)++] = tk_strdup(line);
    }
    free(m);
    return v;
}

/* A migrated database with an empty store for user, and Utopia with the
 * default settings (cfg holds them; u points into it). NULL on failure. */
static PGconn *open_store(const char *url, const char *user, const char *email, utopia *u,
                          utopia_config *cfg)
{
    tk_log_set_level(TK_LOG_ERROR);
    if (migrate(url))
        return NULL;
    PGconn *c = connect_db(url);
    const char *p[] = {user, email};
    PQclear(PQexecParams(c, "INSERT INTO users (id, email) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                         2, NULL, p, NULL, NULL, 0));
    PQclear(PQexecParams(c, "DELETE FROM utopia_documents WHERE user_id = $1", 1, NULL, p, NULL,
                         NULL, 0));
    PQclear(
        PQexecParams(c, "DELETE FROM utopia_terms WHERE user_id = $1", 1, NULL, p, NULL, NULL, 0));
    utopia_config_defaults(cfg);
    /* BENCH_SEARCH_CANDIDATES: UTOPIA_SEARCH_CANDIDATES for an A/B */
    const char *cand = getenv("BENCH_SEARCH_CANDIDATES");
    if (cand && *cand)
        cfg->candidates = strtoll(cand, NULL, 10);
    char err[256];
    if (utopia_init(u, cfg, err, sizeof err) != TK_OK) {
        fprintf(stderr, "bench: %s\n", err);
        PQfinish(c);
        return NULL;
    }
    return c;
}

typedef struct {
    char id[40];
    const char *file;
} doc_file;

static int by_id(const void *a, const void *b)
{
    return strcmp(((const doc_file *)a)->id, ((const doc_file *)b)->id);
}

static const char *file_of(const doc_file *v, size_t n, const char *id)
{
    doc_file key;
    snprintf(key.id, sizeof key.id, "%s", id ? id : "");
    const doc_file *d = bsearch(&key, v, n, sizeof *v, by_id);
    return d ? d->file : "?";
}

/* the documents of a ranked list of chunks, each once, in order */
static void write_docs(FILE *f, const doc_file *v, size_t n, const char *const *ids, size_t nids)
{
    const char *seen[64];
    size_t ns = 0;
    for (size_t i = 0; i < nids; i++) {
        const char *fn = file_of(v, n, ids[i]);
        size_t j;
        for (j = 0; j < ns && strcmp(seen[j], fn); j++)
            ;
        if (j < ns || ns == TK_ARRAY_LEN(seen))
            continue;
        seen[ns++] = fn;
        fprintf(f, "%s%s", ns > 1 ? " " : "", fn);
    }
    fputc('\n', f);
}

static const char SQL_TS_RANK_CD[] =
    "WITH q AS (SELECT to_tsquery('english', coalesce(string_agg('''' || replace(replace(x, "
    "'\\', '\\\\'), '''', '''''') || '''', ' | '), '')) AS tq FROM "
    "unnest(tsvector_to_array(to_tsvector('english', $2))) x) "
    "SELECT c.document_id FROM utopia_chunks c, q WHERE c.user_id = $1 AND c.tsv @@ q.tq "
    "ORDER BY ts_rank_cd(c.tsv, q.tq) DESC, c.id LIMIT 50";

static int realtext(const char *url, const char *dir, const char *outdir)
{
    const char *user = "55555555-5555-4555-8555-555555555555";
    utopia u;
    utopia_config cfg;
    PGconn *c = open_store(url, user, "realtext@bench", &u, &cfg);
    if (!c)
        return 1;
    char err[256];
    size_t nfiles;
    char **files = manifest(dir, &nfiles);
    doc_file *docs = tk_calloc(nfiles, sizeof *docs);
    int64_t t0 = tk_mono_ms();
    for (size_t i = 0; i < nfiles; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/docs/%s", dir, files[i]);
        size_t len;
        char *md = slurp(path, &len);
        utopia_doc_in in = {.mime = "text/markdown", .filename = files[i], .data = md, .len = len};
        json_t *out;
        if (utopia_doc_add(&u, c, user, &in, &out, err, sizeof err) != TK_OK) {
            fprintf(stderr, "bench: %s: %s\n", files[i], err);
            return 1;
        }
        snprintf(docs[i].id, sizeof docs[i].id, "%s", tk_json_str(out, "id"));
        docs[i].file = files[i];
        json_decref(out);
        free(md);
    }
    int64_t load_ms = tk_mono_ms() - t0;
    qsort(docs, nfiles, sizeof *docs, by_id);
    PGresult *r = tk_pg_query(c,
                              "SELECT count(*), sum(length(body)) FROM utopia_chunks WHERE "
                              "user_id = $1",
                              1, &user);
    printf("loaded %zu documents, %s chunks (%s bytes of text) in %lld ms\n", nfiles,
           PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1), (long long)load_ms);
    PQclear(r);
    char path[1024];
    snprintf(path, sizeof path, "%s/queries.tsv", dir);
    char *qs = slurp(path, NULL);
    snprintf(path, sizeof path, "%s/utopia.tsv", outdir);
    FILE *fu = fopen(path, "w");
    snprintf(path, sizeof path, "%s/ts_rank_cd.tsv", outdir);
    FILE *ft = fopen(path, "w");
    if (!fu || !ft) {
        fprintf(stderr, "bench: cannot write to %s\n", outdir);
        return 1;
    }
    int64_t *lat = NULL;
    int nq = 0;
    for (char *line = strtok(qs, "\n"); line; line = strtok(NULL, "\n")) {
        char *q = strchr(line, '\t');
        if (!q)
            continue;
        *q++ = 0;
        utopia_search_opts o = {.query = q, .k = 50, .kinds = UTOPIA_KIND_CHUNKS};
        json_t *out;
        int64_t s0 = tk_mono_ns();
        if (utopia_search(&u, c, user, &o, &out, err, sizeof err) != TK_OK) {
            fprintf(stderr, "bench: search \"%s\": %s\n", q, err);
            return 1;
        }
        lat = tk_realloc(lat, (size_t)(nq + 1) * sizeof *lat);
        lat[nq++] = tk_mono_ns() - s0;
        json_t *res = json_object_get(out, "results");
        const char *ids[64];
        size_t n = 0;
        for (; n < json_array_size(res) && n < TK_ARRAY_LEN(ids); n++)
            ids[n] = tk_json_str(json_array_get(res, n), "document_id");
        fprintf(fu, "%s\t", line);
        write_docs(fu, docs, nfiles, ids, n);
        json_decref(out);
        const char *p[] = {user, q};
        r = tk_pg_query(c, SQL_TS_RANK_CD, 2, p);
        if (!tk_pg_ok(r)) {
            fprintf(stderr, "bench: ts_rank_cd: %s\n", PQresultErrorMessage(r));
            return 1;
        }
        n = 0;
        for (; n < (size_t)PQntuples(r) && n < TK_ARRAY_LEN(ids); n++)
            ids[n] = PQgetvalue(r, (int)n, 0);
        fprintf(ft, "%s\t", line);
        write_docs(ft, docs, nfiles, ids, n);
        PQclear(r);
    }
    fclose(fu);
    fclose(ft);
    qsort(lat, (size_t)nq, sizeof *lat, cmp_i64);
    printf("%d queries through utopia_search (k = 50): p50 %.2f ms, p99 %.2f ms\n", nq,
           pct(lat, nq, 0.5), pct(lat, nq, 0.99));
    free(lat);
    free(qs);
    /* the chunks, for the reference ranking */
    snprintf(path, sizeof path, "%s/chunks.jsonl", outdir);
    FILE *fc = fopen(path, "w");
    r = tk_pg_query(c,
                    "SELECT c.document_id, json_build_object('title', d.title, 'heading', "
                    "c.heading, 'body', c.body) FROM utopia_chunks c JOIN utopia_documents d ON "
                    "d.id = c.document_id WHERE c.user_id = $1 ORDER BY c.id",
                    1, &user);
    if (!fc || !tk_pg_ok(r)) {
        fprintf(stderr, "bench: chunks: %s\n", fc ? PQresultErrorMessage(r) : "cannot write");
        return 1;
    }
    for (int i = 0; i < PQntuples(r); i++) {
        const char *j = PQgetvalue(r, i, 1);
        fprintf(fc, "{\"doc\":\"%s\",%s\n", file_of(docs, nfiles, PQgetvalue(r, i, 0)), j + 1);
    }
    PQclear(r);
    fclose(fc);
    for (size_t i = 0; i < nfiles; i++)
        free(files[i]);
    free(files);
    free(docs);
    PQfinish(c);
    return 0;
}

/* One Markdown document of about `bytes` bytes: DIR's pages in order, each
 * page's title demoted to a section. */
static char *big_document(const char *dir, size_t bytes, int variant)
{
    size_t nfiles;
    char **files = manifest(dir, &nfiles);
    tk_buf b;
    tk_buf_init(&b, bytes * 2 + (1 << 20));
    tk_buf_printf(&b, "# Manual pages, volume %d\n\n", variant);
    for (size_t i = 0; i < nfiles && b.len < bytes; i++) {
        char path[1024];
        /* each variant starts at another page, so uploads differ */
        snprintf(path, sizeof path, "%s/docs/%s", dir, files[(i + (size_t)variant * 97) % nfiles]);
        char *md = slurp(path, NULL);
        tk_buf_printf(&b, "#%s\n\n", md);
        free(md);
    }
    for (size_t i = 0; i < nfiles; i++)
        free(files[i]);
    free(files);
    return tk_buf_steal(&b, NULL);
}

static int upload(const char *url, const char *dir, int n)
{
    const char *user = "66666666-6666-4666-8666-666666666666";
    utopia u;
    utopia_config cfg;
    PGconn *c = open_store(url, user, "upload@bench", &u, &cfg);
    if (!c)
        return 1;
    char err[256];
    char **ids = tk_calloc((size_t)n, sizeof *ids);
    int64_t *add = tk_calloc((size_t)n, sizeof *add), *del = tk_calloc((size_t)n, sizeof *del);
    printf("%-8s %8s %10s %10s\n", "upload", "chunks", "add ms", "delete ms");
    for (int i = 0; i < n; i++) {
        char *md = big_document(dir, 560000, i);
        utopia_doc_in in = {.mime = "text/markdown", .data = md, .len = strlen(md)};
        json_t *out;
        int64_t t0 = tk_mono_ns();
        if (utopia_doc_add(&u, c, user, &in, &out, err, sizeof err) != TK_OK) {
            fprintf(stderr, "bench: upload: %s\n", err);
            return 1;
        }
        add[i] = tk_mono_ns() - t0;
        ids[i] = tk_strdup(tk_json_str(out, "id"));
        printf("%-8d %8lld %10.1f\n", i + 1, (long long)tk_json_int_or(out, "chunks", 0),
               (double)add[i] / 1e6);
        json_decref(out);
        free(md);
    }
    for (int i = n - 1; i >= 0; i--) {
        json_t *out;
        int64_t t0 = tk_mono_ns();
        if (utopia_doc_delete(&u, c, user, ids[i], &out, err, sizeof err) != TK_OK) {
            fprintf(stderr, "bench: delete: %s\n", err);
            return 1;
        }
        del[i] = tk_mono_ns() - t0;
        json_decref(out);
        free(ids[i]);
    }
    qsort(add, (size_t)n, sizeof *add, cmp_i64);
    qsort(del, (size_t)n, sizeof *del, cmp_i64);
    printf("median of %d: add %.1f ms, delete %.1f ms\n", n, pct(add, n, 0.5), pct(del, n, 0.5));
    free(ids);
    free(add);
    free(del);
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
    if (argc >= 5 && !strcmp(argv[1], "realtext"))
        return realtext(argv[2], argv[3], argv[4]);
    if (argc >= 5 && !strcmp(argv[1], "upload"))
        return upload(argv[2], argv[3], (int)strtol(argv[4], NULL, 10));
    fprintf(stderr, "usage: bench migrate URL | latency URL USER N | recall URL | realtext URL "
                    "DIR OUT | upload URL DIR N\n");
    return 2;
}
