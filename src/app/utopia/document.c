/*
 * document.c — Utopia's configuration, and documents: add (extract, chunk,
 * index), list, get, delete.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/utopia/chunk.h"
#include "app/utopia/db.h"
#include "app/utopia/embed.h"
#include "app/utopia/utopia.h"
#include "lib/id.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/pg.h"
#include "lib/utf8.h"

int utopia_check_fts_config(const char *value, char *msg, size_t msglen)
{
    size_t n = strlen(value);
    if (n == 0 || n > 63)
        goto bad;
    for (size_t i = 0; i < n; i++)
        if (!(islower((unsigned char)value[i]) || isdigit((unsigned char)value[i]) ||
              value[i] == '_'))
            goto bad;
    return 0;
bad:
    snprintf(msg, msglen, "must name a text search configuration, e.g. english or simple");
    return 1;
}

void utopia_config_defaults(utopia_config *c)
{
    memset(c, 0, sizeof *c);
    c->fts_config = "english";
    c->chunk_size = 1200;
    c->chunk_overlap = 150;
    c->max_document_bytes = 25 << 20;
    c->max_text_bytes = 8 << 20;
    c->extract_timeout_ms = 30000;
    c->extract_memory_mb = 512;
    c->pdftotext = "/usr/bin/pdftotext";
    c->candidates = 200;
    c->memory_budget = 600;
}

tk_status utopia_init(utopia *u, const utopia_config *cfg, char *err, size_t errlen)
{
    memset(u, 0, sizeof *u);
    u->cfg = *cfg;
    if (!u->cfg.fts_config || utopia_check_fts_config(u->cfg.fts_config, err, errlen))
        return TK_EINVAL;
    if (u->cfg.chunk_overlap * 2 >= u->cfg.chunk_size) {
        snprintf(err, errlen, "UTOPIA_CHUNK_OVERLAP must be less than half of UTOPIA_CHUNK_SIZE");
        return TK_EINVAL;
    }
    if (u->cfg.embeddings_model && !u->cfg.embeddings_url) {
        snprintf(err, errlen, "UTOPIA_EMBEDDINGS_MODEL is set but UTOPIA_EMBEDDINGS_URL is not");
        return TK_EINVAL;
    }
    u->embeddings = u->cfg.embeddings_model && u->cfg.embeddings_url;
    u->embed_scan_all = UTOPIA_EMBED_SCAN_ALL;
    u->local.limits.timeout_ms = u->cfg.extract_timeout_ms;
    u->local.limits.cpu_seconds = (u->cfg.extract_timeout_ms + 999) / 1000;
    u->local.limits.memory_bytes = u->cfg.extract_memory_mb << 20;
    u->local.pdftotext = u->cfg.pdftotext;
    u->local.max_input = (size_t)u->cfg.max_document_bytes;
    u->local.max_xml = (size_t)u->cfg.max_text_bytes * 8;
    utopia_local_extractor(&u->extractor, &u->local);
    return TK_OK;
}

/* ---- add ---- */

static const char SQL_DOC_INSERT[] =
    "INSERT INTO utopia_documents (id, user_id, chat_id, title, source, mime, bytes, chars, "
    "nchunks, fts_config, source_chat_id, source_turn_id) VALUES ($1, $2, $3, $4, $5, $6, $7, "
    "$8, $9, $10::regconfig, $11, $12)";

static const char SQL_CHUNKS_INSERT[] =
    "INSERT INTO utopia_chunks (document_id, user_id, chat_id, position, heading, body, tsv, "
    "embedding) SELECT $1, $2, $3, (e->>'p')::int, e->>'h', e->>'t', "
    "setweight(to_tsvector($4::regconfig, $5 || ' ' || (e->>'h')), 'A') || "
    "to_tsvector($4::regconfig, e->>'t'), CASE WHEN e->'e' IS NOT NULL THEN ARRAY(SELECT "
    "x::real FROM json_array_elements_text(e->'e') WITH ORDINALITY AS v(x, o) ORDER BY o) END "
    "FROM json_array_elements($6::json) e";

/* the words of a document's chunks, counted once per chunk */
#define DOC_TERMS                                                                                  \
    "SELECT t, count(*) AS n FROM utopia_chunks c, "                                               \
    "unnest(tsvector_to_array(to_tsvector('simple', c.heading || ' ' || c.body))) t "              \
    "WHERE c.document_id = $2 AND length(t) BETWEEN 2 AND 40 GROUP BY t"

static const char SQL_TERMS_ADD[] =
    "INSERT INTO utopia_terms (user_id, term, ndocs) SELECT $1, t, n FROM (" DOC_TERMS
    ") d ORDER BY t ON CONFLICT (user_id, term) DO UPDATE SET ndocs = utopia_terms.ndocs + "
    "EXCLUDED.ndocs";

/* (an upsert in the words' order, as SQL_TERMS_ADD: two writers lock the rows
 * they share in the same order) */
static const char SQL_TERMS_SUB[] =
    "INSERT INTO utopia_terms AS x (user_id, term, ndocs) SELECT $1, t, -n FROM (" DOC_TERMS
    ") d ORDER BY t ON CONFLICT (user_id, term) DO UPDATE SET ndocs = x.ndocs + EXCLUDED.ndocs";
static const char SQL_TERMS_GC[] =
    "DELETE FROM utopia_terms x USING (" DOC_TERMS ") d WHERE x.user_id = $1 AND x.term = d.t "
    "AND x.ndocs <= 0";

static const char SQL_DOC_JSON[] =
    "SELECT json_build_object('id', id, 'title', title, 'mime', mime, 'source', source, "
    "'chat_id', chat_id, 'source_chat_id', source_chat_id, 'source_turn_id', source_turn_id, "
    "'bytes', bytes, 'chars', chars, 'chunks', nchunks, 'created_at', "
    "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')) "
    "FROM utopia_documents WHERE id = $1 AND user_id = $2";

static char *clean_title(const char *t, size_t max)
{
    tk_buf b;
    tk_buf_init(&b, max * 4 + 8);
    utopia_text_normalize(&b, t, strlen(t), 0);
    /* cut on a character boundary */
    if (b.len > max) {
        b.len = tk_utf8_cut(b.data, b.len, max);
        b.data[b.len] = 0;
    }
    return tk_buf_steal(&b, NULL);
}

tk_status utopia_doc_add(const utopia *u, PGconn *c, const char *user_id, const utopia_doc_in *in,
                         json_t **out, char *err, size_t errlen)
{
    *out = NULL;
    const char *src_chat = in->from ? in->from->chat_id : NULL;
    const char *src_turn = in->from ? in->from->turn_id : NULL;
    if (!user_id || !utopia_uuid_ok(user_id) || !utopia_uuid_ok(in->chat_id) ||
        !utopia_uuid_ok(src_chat) || !utopia_uuid_ok(src_turn)) {
        snprintf(err, errlen, "bad user or chat id");
        return TK_EINVAL;
    }
    if (in->len > (size_t)u->cfg.max_document_bytes) {
        snprintf(err, errlen, "the document is %zu bytes; at most %lld are accepted", in->len,
                 (long long)u->cfg.max_document_bytes);
        return TK_ETOOBIG;
    }
    utopia_format fmt = utopia_format_detect(in->mime, in->filename, in->data, in->len);
    if (fmt == UTOPIA_FMT_UNKNOWN) {
        snprintf(err, errlen,
                 "unsupported file type (text, Markdown, HTML, CSV, JSON, PDF and DOCX are)");
        return TK_EINVAL;
    }
    utopia_blocks b;
    utopia_blocks_init(&b, (size_t)u->cfg.max_text_bytes);
    utopia_chunks ch = {0};
    char *title = NULL, *chunks_json = NULL;
    json_t *arr = NULL;
    tk_status st = utopia_extract(fmt, in->data, in->len, &u->extractor, &b, err, errlen);
    if (st != TK_OK)
        goto out;
    utopia_chunk_blocks(&b, (size_t)u->cfg.chunk_size, (size_t)u->cfg.chunk_overlap, &ch);
    if (ch.n == 0) {
        snprintf(err, errlen, "no text found in the document");
        st = TK_EINVAL;
        goto out;
    }
    /* a first heading names a document only in formats that have headings */
    int headed = fmt == UTOPIA_FMT_MARKDOWN || fmt == UTOPIA_FMT_HTML || fmt == UTOPIA_FMT_DOCX;
    const char *t = in->title && *in->title             ? in->title
                    : headed && utopia_blocks_title(&b) ? utopia_blocks_title(&b)
                    : in->filename && *in->filename     ? in->filename
                                                        : "Untitled";
    title = clean_title(t, 300);
    if (!*title) {
        free(title);
        title = tk_strdup("Untitled");
    }
    /* vectors for the semantic ranking; without them the document is still
     * found by words */
    float *vecs = NULL;
    int dim = 0;
    if (u->embeddings) {
        char **texts = tk_calloc(ch.n, sizeof *texts);
        for (size_t i = 0; i < ch.n; i++)
            texts[i] = tk_asprintf("%s\n%s", ch.v[i].heading, ch.v[i].text);
        char eerr[256];
        if (utopia_embed(u, (const char *const *)texts, ch.n, &vecs, &dim, eerr, sizeof eerr) !=
            TK_OK)
            tk_warn("utopia", "msg=\"document not embedded\" error=\"%s\"", eerr);
        for (size_t i = 0; i < ch.n; i++)
            free(texts[i]);
        free(texts);
    }
    arr = json_array();
    size_t chars = 0;
    for (size_t i = 0; i < ch.n; i++) {
        json_t *e = NULL;
        if (vecs) {
            e = json_array();
            for (int k = 0; k < dim; k++)
                json_array_append_new(e, json_real(vecs[(size_t)i * dim + k]));
        }
        json_array_append_new(
            arr, tk_json_obj("p", json_integer((json_int_t)i), "h", json_string(ch.v[i].heading),
                             "t", json_stringn(ch.v[i].text, ch.v[i].len), "e", e, NULL));
        chars += ch.v[i].len;
    }
    free(vecs);
    int embedded = dim > 0;
    chunks_json = tk_json_dumps(arr);
    char id[TK_UUID_LEN], bytes[24], nchars[24], nchunks[24];
    tk_uuid7(id);
    snprintf(bytes, sizeof bytes, "%zu", in->len);
    snprintf(nchars, sizeof nchars, "%zu", chars);
    snprintf(nchunks, sizeof nchunks, "%zu", ch.n);
    const char *source = in->source && *in->source ? in->source : "upload";
    const char *p1[] = {
        id,     user_id, in->chat_id,       title,    source,  utopia_format_mime(fmt), bytes,
        nchars, nchunks, u->cfg.fts_config, src_chat, src_turn};
    const char *p2[] = {id, user_id, in->chat_id, u->cfg.fts_config, title, chunks_json};
    const char *p3[] = {user_id, id};
    if ((st = utopia_db_exec(c, "BEGIN", 0, NULL, NULL, err, errlen)) != TK_OK)
        goto out;
    if ((st = utopia_db_exec(c, SQL_DOC_INSERT, 12, p1, NULL, err, errlen)) != TK_OK ||
        (st = utopia_db_exec(c, SQL_CHUNKS_INSERT, 6, p2, NULL, err, errlen)) != TK_OK ||
        (st = utopia_db_exec(c, SQL_TERMS_ADD, 2, p3, NULL, err, errlen)) != TK_OK ||
        (st = utopia_db_exec(c, "COMMIT", 0, NULL, NULL, err, errlen)) != TK_OK) {
        char e2[64];
        utopia_db_exec(c, "ROLLBACK", 0, NULL, NULL, e2, sizeof e2);
        goto out;
    }
    const char *p4[] = {id, user_id};
    *out = utopia_db_json(c, SQL_DOC_JSON, 2, p4, NULL, err, errlen);
    if (!*out) {
        st = TK_ERROR;
        goto out;
    }
    json_object_set_new(*out, "format", json_string(utopia_format_name(fmt)));
    if (u->embeddings)
        json_object_set_new(*out, "embedded", json_boolean(embedded));
    tk_info("utopia", "msg=\"document added\" id=%s format=%s bytes=%zu chunks=%zu", id,
            utopia_format_name(fmt), in->len, ch.n);
out:
    json_decref(arr);
    free(chunks_json);
    free(title);
    utopia_chunks_free(&ch);
    utopia_blocks_free(&b);
    return st;
}

/* ---- list, get, delete ---- */

tk_status utopia_doc_list(const utopia *u, PGconn *c, const char *user_id, const char *chat_id,
                          int limit, int offset, json_t **out, char *err, size_t errlen)
{
    (void)u;
    *out = NULL;
    if (!user_id || !utopia_uuid_ok(user_id) || !utopia_uuid_ok(chat_id)) {
        snprintf(err, errlen, "bad user or chat id");
        return TK_EINVAL;
    }
    utopia_db_page pg = utopia_db_page_of(limit, offset, 100, 500);
    const char *p[] = {user_id, chat_id, pg.limit, pg.offset};
    *out = utopia_db_json(
        c,
        "SELECT json_build_object('documents', coalesce(json_agg(json_build_object('id', id, "
        "'title', title, 'mime', mime, 'source', source, 'chat_id', chat_id, 'source_chat_id', "
        "source_chat_id, 'source_turn_id', source_turn_id, 'bytes', bytes, 'chars', chars, "
        "'chunks', nchunks, 'created_at', to_char(created_at AT TIME ZONE 'UTC', "
        "'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')) ORDER BY created_at DESC, id DESC), '[]'::json)) "
        "FROM (SELECT * FROM utopia_documents WHERE user_id = $1 AND ($2::uuid IS NULL OR "
        "chat_id = $2) ORDER BY created_at DESC, id DESC LIMIT $3 OFFSET $4) d",
        4, p, NULL, err, errlen);
    return *out ? TK_OK : TK_ERROR;
}

tk_status utopia_doc_get(const utopia *u, PGconn *c, const char *user_id, const char *doc_id,
                         int with_chunks, json_t **out, char *err, size_t errlen)
{
    (void)u;
    *out = NULL;
    if (!user_id || !doc_id || !utopia_uuid_ok(user_id) || !utopia_uuid_ok(doc_id)) {
        snprintf(err, errlen, "bad user or document id");
        return TK_EINVAL;
    }
    const char *p[] = {doc_id, user_id};
    int none = 0;
    *out = utopia_db_json(c, SQL_DOC_JSON, 2, p, &none, err, errlen);
    if (!*out) {
        if (none)
            snprintf(err, errlen, "no such document");
        return none ? TK_ENOENT : TK_ERROR;
    }
    if (with_chunks) {
        json_t *ch = utopia_db_json(
            c,
            "SELECT coalesce(json_agg(json_build_object('position', position, 'heading', heading, "
            "'text', body) ORDER BY position), '[]'::json) FROM utopia_chunks WHERE document_id = "
            "$1 AND user_id = $2",
            2, p, NULL, err, errlen);
        if (!ch) {
            json_decref(*out);
            *out = NULL;
            return TK_ERROR;
        }
        json_object_set_new(*out, "chunks", ch);
    }
    return TK_OK;
}

tk_status utopia_doc_delete(const utopia *u, PGconn *c, const char *user_id, const char *doc_id,
                            json_t **out, char *err, size_t errlen)
{
    (void)u;
    *out = NULL;
    if (!user_id || !doc_id || !utopia_uuid_ok(user_id) || !utopia_uuid_ok(doc_id)) {
        snprintf(err, errlen, "bad user or document id");
        return TK_EINVAL;
    }
    const char *p[] = {user_id, doc_id};
    long n = 0;
    tk_status st;
    if ((st = utopia_db_exec(c, "BEGIN", 0, NULL, NULL, err, errlen)) != TK_OK)
        return st;
    PGresult *r = tk_pg_query(c,
                              "SELECT nchunks FROM utopia_documents WHERE user_id = $1 AND id = $2 "
                              "FOR UPDATE",
                              2, p);
    if (!tk_pg_ok(r) || PQntuples(r) == 0) {
        st = tk_pg_ok(r) ? TK_ENOENT : TK_ERROR;
        snprintf(err, errlen, st == TK_ENOENT ? "no such document" : "database error");
        PQclear(r);
        goto fail;
    }
    n = strtol(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    /* the scope's statistics row before the vocabulary, in the order of an
     * add (its chunks' trigger, then the vocabulary), so an add and a delete
     * never wait for each other in a cycle */
    if ((st = utopia_db_exec(c,
                             "SELECT 1 FROM utopia_bm25_scopes WHERE user_id = $1 AND chat_id = "
                             "(SELECT coalesce(chat_id, '00000000-0000-0000-0000-000000000000') "
                             "FROM utopia_documents WHERE user_id = $1 AND id = $2) FOR UPDATE",
                             2, p, NULL, err, errlen)) != TK_OK)
        goto fail;
    /* the vocabulary first (it is computed from the chunks), then the rest
     * cascades: chunks, facts whose source is this document */
    if ((st = utopia_db_exec(c, SQL_TERMS_SUB, 2, p, NULL, err, errlen)) != TK_OK ||
        (st = utopia_db_exec(c, SQL_TERMS_GC, 2, p, NULL, err, errlen)) != TK_OK ||
        (st = utopia_db_exec(c, "DELETE FROM utopia_documents WHERE user_id = $1 AND id = $2", 2, p,
                             NULL, err, errlen)) != TK_OK ||
        (st = utopia_db_exec(c, "COMMIT", 0, NULL, NULL, err, errlen)) != TK_OK)
        goto fail;
    *out = tk_json_obj("deleted", json_true(), "chunks", json_integer(n), NULL);
    return TK_OK;
fail : {
    char e2[64];
    utopia_db_exec(c, "ROLLBACK", 0, NULL, NULL, e2, sizeof e2);
}
    return st;
}
