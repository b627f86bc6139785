/*
 * utopia.h — Utopia, the chat server's knowledge store: documents and their
 * chunks with hybrid search, long-term memories (notes), and a knowledge graph
 * of entities and dated facts. The C API the tools and routes call
 * (docs/UTOPIA.md describes the model and every JSON shape).
 *
 * Every call takes a connection from the app's pool and the id of the user
 * whose data it touches (every query is scoped by it: one user can never see
 * or change another's rows), returns a tk_status, and on success fills *out
 * with a new jansson reference the caller owns (json_decref it). On failure
 * *out is NULL and err holds a message fit for the user or the model:
 * TK_EINVAL bad input, TK_ENOENT no such thing (of this user), TK_ETOOBIG over
 * a cap, TK_EDENIED refused by policy, TK_ERROR database or extractor failure
 * (logged). Calls are safe from many threads (each with its own connection).
 *
 * Settings: put UTOPIA_SETTINGS(cfg) into the program's settings table, then
 * call utopia_init(&u, &cfg, ...) once.
 */
#ifndef UTOPIA_UTOPIA_H
#define UTOPIA_UTOPIA_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stdint.h>

#include "app/utopia/extract.h"
#include "app/utopia/local.h"
#include "lib/common.h"
#include "lib/config.h"

typedef struct {
    char *fts_config;           /* UTOPIA_FTS_CONFIG: text search configuration */
    int64_t chunk_size;         /* UTOPIA_CHUNK_SIZE: bytes */
    int64_t chunk_overlap;      /* UTOPIA_CHUNK_OVERLAP: bytes */
    int64_t max_document_bytes; /* UTOPIA_MAX_DOCUMENT_BYTES */
    int64_t max_text_bytes;     /* UTOPIA_MAX_TEXT_BYTES: extracted text */
    int64_t extract_timeout_ms; /* UTOPIA_EXTRACT_TIMEOUT */
    int64_t extract_memory_mb;  /* UTOPIA_EXTRACT_MEMORY_MB */
    char *pdftotext;            /* UTOPIA_PDFTOTEXT */
    int64_t candidates;         /* UTOPIA_SEARCH_CANDIDATES: per ranking */
    int64_t memory_budget;      /* UTOPIA_MEMORY_BUDGET_TOKENS */
    char *embeddings_model;     /* UTOPIA_EMBEDDINGS_MODEL (fail-closed: unset = off) */
    char *embeddings_url;       /* UTOPIA_EMBEDDINGS_URL: OpenAI-compatible base URL */
    char *embeddings_api_key;   /* UTOPIA_EMBEDDINGS_API_KEY */
} utopia_config;

int utopia_check_fts_config(const char *value, char *msg, size_t msglen);

/* The settings table entries, to splice into a program's table. */
#define UTOPIA_SETTINGS(c)                                                                         \
    {"UTOPIA_FTS_CONFIG",                                                                          \
     "utopia-fts-config",                                                                          \
     TK_SET_STR,                                                                                   \
     "english",                                                                                    \
     "Postgres text search configuration for documents and memories",                              \
     .out = &(c).fts_config,                                                                       \
     .check = utopia_check_fts_config},                                                            \
        {"UTOPIA_CHUNK_SIZE",          "utopia-chunk-size", TK_SET_INT,   "1200",                  \
         "target chunk size in bytes", .min = 200,          .max = 20000, .out = &(c).chunk_size}, \
        {"UTOPIA_CHUNK_OVERLAP",                                                                   \
         "utopia-chunk-overlap",                                                                   \
         TK_SET_INT,                                                                               \
         "150",                                                                                    \
         "bytes a chunk repeats from the one before",                                              \
         .min = 0,                                                                                 \
         .max = 5000,                                                                              \
         .out = &(c).chunk_overlap},                                                               \
        {"UTOPIA_MAX_DOCUMENT_BYTES",                                                              \
         "utopia-max-document-bytes",                                                              \
         TK_SET_INT,                                                                               \
         "26214400",                                                                               \
         "largest document accepted",                                                              \
         .min = 1024,                                                                              \
         .max = 1073741824,                                                                        \
         .out = &(c).max_document_bytes},                                                          \
        {"UTOPIA_MAX_TEXT_BYTES",                                                                  \
         "utopia-max-text-bytes",                                                                  \
         TK_SET_INT,                                                                               \
         "8388608",                                                                                \
         "most text kept from one document",                                                       \
         .min = 1024,                                                                              \
         .max = 268435456,                                                                         \
         .out = &(c).max_text_bytes},                                                              \
        {"UTOPIA_EXTRACT_TIMEOUT",                                                                 \
         "utopia-extract-timeout",                                                                 \
         TK_SET_DURATION,                                                                          \
         "30s",                                                                                    \
         "wall-clock limit of the PDF/DOCX extractor",                                             \
         .min = 100,                                                                               \
         .max = 600000,                                                                            \
         .out = &(c).extract_timeout_ms},                                                          \
        {"UTOPIA_EXTRACT_MEMORY_MB",                                                               \
         "utopia-extract-memory-mb",                                                               \
         TK_SET_INT,                                                                               \
         "512",                                                                                    \
         "address-space limit of the PDF/DOCX extractor",                                          \
         .min = 64,                                                                                \
         .max = 16384,                                                                             \
         .out = &(c).extract_memory_mb},                                                           \
        {"UTOPIA_PDFTOTEXT",                                                                       \
         "utopia-pdftotext",                                                                       \
         TK_SET_STR,                                                                               \
         "/usr/bin/pdftotext",                                                                     \
         "pdftotext (poppler-utils) for PDF text",                                                 \
         .out = &(c).pdftotext},                                                                   \
        {"UTOPIA_SEARCH_CANDIDATES",                                                               \
         "utopia-search-candidates",                                                               \
         TK_SET_INT,                                                                               \
         "200",                                                                                    \
         "chunks BM25 scores for the rarer words of a query",                                      \
         .min = 10,                                                                                \
         .max = 100000,                                                                            \
         .out = &(c).candidates},                                                                  \
        {"UTOPIA_MEMORY_BUDGET_TOKENS",                                                            \
         "utopia-memory-budget-tokens",                                                            \
         TK_SET_INT,                                                                               \
         "600",                                                                                    \
         "memories offered at the start of a turn, in tokens",                                     \
         .min = 0,                                                                                 \
         .max = 100000,                                                                            \
         .out = &(c).memory_budget},                                                               \
        {"UTOPIA_EMBEDDINGS_MODEL",                                                                \
         "utopia-embeddings-model",                                                                \
         TK_SET_STR,                                                                               \
         NULL,                                                                                     \
         "embeddings model; unset: no embeddings ranking",                                         \
         .flags = TK_SET_FAIL_CLOSED,                                                              \
         .out = &(c).embeddings_model},                                                            \
        {"UTOPIA_EMBEDDINGS_URL",                                                                  \
         "utopia-embeddings-url",                                                                  \
         TK_SET_STR,                                                                               \
         NULL,                                                                                     \
         "OpenAI-compatible base URL for /v1/embeddings",                                          \
         .flags = TK_SET_FAIL_CLOSED,                                                              \
         .out = &(c).embeddings_url,                                                               \
         .check = tk_config_check_url},                                                            \
    {                                                                                              \
        "UTOPIA_EMBEDDINGS_API_KEY", NULL, TK_SET_STR, NULL, "API key for the embeddings URL",     \
            .flags = TK_SET_FAIL_CLOSED | TK_SET_SECRET, .out = &(c).embeddings_api_key            \
    }

/* Defaults, for tests and tools (strings are static; do not free them). */
void utopia_config_defaults(utopia_config *c);

typedef struct {
    utopia_config cfg;
    utopia_local_config local;
    utopia_extractor extractor; /* PDF/DOCX; replace to extract elsewhere */
    int embeddings;             /* 1 when an embeddings model is configured */
    /* Users with at most this many chunks have all ranked by similarity; above,
     * only the lexical candidates are (UTOPIA_EMBED_SCAN_ALL; tests lower it). */
    int64_t embed_scan_all;
} utopia;

/* Checks the configuration and sets u up (u keeps pointers into cfg's strings). */
tk_status utopia_init(utopia *u, const utopia_config *cfg, char *err, size_t errlen);

/* Where a memory or fact came from. All fields may be NULL. */
typedef struct {
    const char *chat_id;
    const char *turn_id;
    const char *document_id;
} utopia_source;

/* ---- documents ---- */

typedef struct {
    const char *chat_id; /* NULL: the user's library */
    const char *title;   /* NULL: the first heading, else the file name, else "Untitled" */
    const char *source;  /* "upload" (default), "agent", a URL... */
    /* may be NULL: the chat and turn that saved it (an agent's finding; the
     * document_id is not used) */
    const utopia_source *from;
    const char *mime;     /* may be NULL: detected */
    const char *filename; /* may be NULL */
    const void *data;
    size_t len;
} utopia_doc_in;

/* Extracts, chunks, indexes. out: {id,title,mime,source,chat_id,source_chat_id,
 * source_turn_id,bytes,chars,chunks,created_at,format}. */
tk_status utopia_doc_add(const utopia *u, PGconn *c, const char *user_id, const utopia_doc_in *in,
                         json_t **out, char *err, size_t errlen);
/* out: {documents:[{id,title,mime,source,chat_id,source_chat_id,source_turn_id,bytes,chars,
 * chunks,created_at}]} newest first. */
tk_status utopia_doc_list(const utopia *u, PGconn *c, const char *user_id, const char *chat_id,
                          int limit, int offset, json_t **out, char *err, size_t errlen);
/* out: the document, with "chunks":[{position,heading,text}] when with_chunks. */
tk_status utopia_doc_get(const utopia *u, PGconn *c, const char *user_id, const char *doc_id,
                         int with_chunks, json_t **out, char *err, size_t errlen);
/* Removes the document and its chunks (and facts whose source is it); facts and
 * memories learned from chats stay. out: {deleted:true,chunks:N}. */
tk_status utopia_doc_delete(const utopia *u, PGconn *c, const char *user_id, const char *doc_id,
                            json_t **out, char *err, size_t errlen);

/* ---- search ---- */

enum {
    UTOPIA_KIND_CHUNKS = 1,
    UTOPIA_KIND_MEMORIES = 2,
    UTOPIA_KIND_FACTS = 4,
    UTOPIA_KIND_ALL = 7
};

typedef struct {
    const char *query;
    const char *chat_id; /* with scope_chat: only this chat's documents and memories */
    int scope_chat;
    int k;     /* results wanted; default 8, at most 50 */
    int kinds; /* UTOPIA_KIND_*; 0 means all */
} utopia_search_opts;

/* Hybrid search over chunks, memories and facts together, fused and cited:
 * out: {query, results:[{type:"chunk"|"memory"|"fact", score, cite, ...}]}. */
tk_status utopia_search(const utopia *u, PGconn *c, const char *user_id,
                        const utopia_search_opts *o, json_t **out, char *err, size_t errlen);

/* ---- memories (notes) ---- */

tk_status utopia_memory_add(const utopia *u, PGconn *c, const char *user_id, const char *text,
                            const utopia_source *src, json_t **out, char *err, size_t errlen);
tk_status utopia_memory_list(const utopia *u, PGconn *c, const char *user_id, int limit, int offset,
                             json_t **out, char *err, size_t errlen);
tk_status utopia_memory_delete(const utopia *u, PGconn *c, const char *user_id, const char *id,
                               json_t **out, char *err, size_t errlen);
/* The memories most relevant to a turn's text that fit in budget_tokens
 * (estimated as bytes / 4; <= 0 means the setting): out: {memories:[{id,text,
 * score}], tokens, budget}. */
tk_status utopia_memory_relevant(const utopia *u, PGconn *c, const char *user_id,
                                 const char *turn_text, const char *chat_id, int budget_tokens,
                                 json_t **out, char *err, size_t errlen);

/* ---- the knowledge graph ---- */

typedef struct {
    const char *subject;
    const char *predicate;
    const char *object;
    const char *valid_from;  /* liberal date text (dates.h); NULL: when recorded */
    const char *valid_to;    /* NULL: open */
    int single;              /* 1 single-valued, 0 many, -1 as known (default) */
    const json_t *aliases;   /* array of strings for the subject, may be NULL */
    const char *object_kind; /* "entity", "value" or NULL (guess) */
} utopia_fact_in;

/* Records a fact; a single-valued predicate closes the open fact it replaces
 * (valid_to = the new valid_from), never deletes it. out: {fact:{...},
 * closed:[ids], duplicate_of?}. now_ms: the "now" of relative dates (0: now). */
tk_status utopia_fact_add(const utopia *u, PGconn *c, const char *user_id, const utopia_fact_in *f,
                          const utopia_source *src, int64_t now_ms, json_t **out, char *err,
                          size_t errlen);
/* The remember tool: args {fact:{subject,predicate,object,valid_from?,valid_to?,
 * single?,aliases?}} or {note:"..."} (or both). */
tk_status utopia_remember(const utopia *u, PGconn *c, const char *user_id, const json_t *args,
                          const utopia_source *src, int64_t now_ms, json_t **out, char *err,
                          size_t errlen);
/* Facts true at `at` (liberal date text; NULL: now) with the entity as subject or
 * object: out: {entity:{id,name,aliases}, at, facts:[...]}; TK_ENOENT when the
 * entity is unknown. */
tk_status utopia_recall_facts(const utopia *u, PGconn *c, const char *user_id, const char *entity,
                              const char *at, int64_t now_ms, json_t **out, char *err,
                              size_t errlen);
/* Every fact about an entity (or all, when entity is NULL), past ones included. */
tk_status utopia_fact_list(const utopia *u, PGconn *c, const char *user_id, const char *entity,
                           int limit, int offset, json_t **out, char *err, size_t errlen);
/* Deletes a fact; a fact it had closed is reopened up to where it ended. */
tk_status utopia_fact_delete(const utopia *u, PGconn *c, const char *user_id, const char *id,
                             json_t **out, char *err, size_t errlen);
/* Entities and facts within `hops` (1..3) of an entity, true at `at` (NULL: now). */
tk_status utopia_neighbourhood(const utopia *u, PGconn *c, const char *user_id, const char *entity,
                               int hops, const char *at, int64_t now_ms, json_t **out, char *err,
                               size_t errlen);

#endif
