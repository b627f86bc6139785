/* The Utopia tools (search_chunks, remember, recall_facts, save_document). See
 * memory.h. */
#include "app/tools/memory.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/agent/run.h"
#include "app/app.h"
#include "app/utopia/routes.h"
#include "app/utopia/utopia.h"
#include "lib/buf.h"
#include "lib/json.h"
#include "lib/utf8.h"

/* Results the model is shown at most (the search may find more). */
#define SEARCH_K_DEFAULT 8
#define SEARCH_K_MAX     50
#define QUERY_MAX_BYTES  2000
#define SNIPPET_MAX      900
/* save_document: a finding, not a library (uploads take the big files) */
#define SAVE_CONTENT_MAX (256 * 1024)
#define SAVE_TITLE_MAX   300

/* The store and a connection, or an error result. */
static int begin(agent_result *out, const utopia **u, PGconn **c)
{
    *u = utopia_app();
    if (!*u) {
        agent_result_error(out, "Utopia (documents and memory) is not configured on this server");
        return 0;
    }
    *c = app_db_acquire();
    if (!*c) {
        agent_result_error(out, "the knowledge store did not answer (no database connection); try "
                                "again");
        return 0;
    }
    return 1;
}

/* Appends s, cut to max bytes at a UTF-8 boundary, with "…" when cut. */
static void append_cut(tk_buf *b, const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n <= max) {
        tk_buf_append(b, s, n);
        return;
    }
    tk_buf_append(b, s, tk_utf8_cut(s, n, max));
    tk_buf_append_str(b, "…");
}

/* ---------------------------------------------------------------- search_chunks */

static void run_search_chunks(agent_call *call, const json_t *args, agent_result *out)
{
    json_t *jq = json_object_get(args, "query");
    if (!json_is_string(jq) || json_string_length(jq) == 0) {
        agent_result_error(out, "\"query\" (the words to look for) is required");
        return;
    }
    if (json_string_length(jq) > QUERY_MAX_BYTES) {
        agent_result_error(out,
                           "\"query\" is too long (at most %d bytes): search for the key "
                           "words",
                           QUERY_MAX_BYTES);
        return;
    }
    const char *scope = tk_json_str_or(args, "scope", "user");
    if (strcmp(scope, "user") != 0 && strcmp(scope, "chat") != 0) {
        agent_result_error(out, "\"scope\" is \"user\" (everything of the user, the default) or "
                                "\"chat\" (this chat's documents and memories)");
        return;
    }
    json_t *jk = json_object_get(args, "k");
    int64_t k = SEARCH_K_DEFAULT;
    if (jk && !json_is_null(jk)) {
        if (!json_is_integer(jk) || json_integer_value(jk) < 1 ||
            json_integer_value(jk) > SEARCH_K_MAX) {
            agent_result_error(out, "\"k\" is the number of results, 1 to %d", SEARCH_K_MAX);
            return;
        }
        k = json_integer_value(jk);
    }
    const utopia *u;
    PGconn *c;
    if (!begin(out, &u, &c))
        return;
    utopia_search_opts o = {.query = json_string_value(jq),
                            .chat_id = agent_call_session(call),
                            .scope_chat = strcmp(scope, "chat") == 0,
                            .k = (int)k,
                            .kinds = UTOPIA_KIND_ALL};
    json_t *res = NULL;
    char err[512] = "";
    tk_status st = utopia_search(u, c, agent_call_user(call), &o, &res, err, sizeof err);
    app_db_release(c);
    if (st != TK_OK) {
        agent_result_error(out, "the search failed: %s", err[0] ? err : "internal error");
        return;
    }
    json_t *results = json_object_get(res, "results");
    size_t n = json_array_size(results);
    tk_buf b;
    tk_buf_init(&b, 4u << 20);
    if (n == 0) {
        tk_buf_printf(&b, "Nothing found for \"%s\" in %s documents, memories or facts.",
                      json_string_value(jq), o.scope_chat ? "this chat's" : "the user's");
    } else {
        tk_buf_printf(&b, "%zu result%s for \"%s\" (cite them by their [n]):\n", n,
                      n == 1 ? "" : "s", json_string_value(jq));
    }
    size_t i;
    json_t *r;
    int nchunk = 0, nmem = 0, nfact = 0;
    json_array_foreach(results, i, r)
    {
        const char *type = tk_json_str_or(r, "type", "");
        tk_buf_printf(&b, "\n%s\n", tk_json_str_or(r, "cite", ""));
        if (strcmp(type, "chunk") == 0) {
            nchunk++;
            append_cut(&b, tk_json_str_or(r, "snippet", ""), SNIPPET_MAX);
            tk_buf_append_byte(&b, '\n');
        } else if (strcmp(type, "memory") == 0) {
            nmem++;
            append_cut(&b, tk_json_str_or(r, "text", ""), SNIPPET_MAX);
            tk_buf_append_byte(&b, '\n');
        } else {
            nfact++;
            const char *vf = tk_json_str(r, "valid_from");
            tk_buf_printf(&b, "%s — %s — %s%s%s\n", tk_json_str_or(r, "subject", ""),
                          tk_json_str_or(r, "predicate", ""), tk_json_str_or(r, "object", ""),
                          vf ? " (true since " : "", vf ? vf : "");
            if (vf)
                tk_buf_append_str(&b, ")\n");
        }
    }
    agent_call_set_attrs(call,
                         tk_json_obj("results", json_integer((json_int_t)n), "chunks",
                                     json_integer(nchunk), "memories", json_integer(nmem), "facts",
                                     json_integer(nfact), "scope", json_string(scope), NULL));
    agent_result_take(out, tk_buf_steal(&b, NULL), 0);
    out->data = res;
}

/* ---------------------------------------------------------------- remember */

static void fact_line(tk_buf *b, const json_t *f)
{
    const char *vf = tk_json_str(f, "valid_from"), *vt = tk_json_str(f, "valid_to");
    const char *prec = tk_json_str_or(f, "valid_from_precision", "");
    tk_buf_printf(b, "%s — %s — %s", tk_json_str_or(f, "subject", ""),
                  tk_json_str_or(f, "predicate", ""), tk_json_str_or(f, "object", ""));
    if (vf && strcmp(prec, "unknown") != 0 && strcmp(prec, "recorded") != 0)
        tk_buf_printf(b, ", from %s", vf);
    else if (vf && strcmp(prec, "recorded") == 0)
        tk_buf_printf(b, ", from %s (when it was recorded)", vf);
    if (vt)
        tk_buf_printf(b, " until %s", vt);
    else
        tk_buf_append_str(b, ", still true");
}

static void run_remember(agent_call *call, const json_t *args, agent_result *out)
{
    json_t *fact = json_object_get(args, "fact");
    json_t *note = json_object_get(args, "note");
    /* a fact given as a sentence is kept as a note (and the model is told how
     * to record a dated fact) */
    json_t *use = json_deep_copy(args);
    int fact_as_note = 0;
    if (json_is_string(fact)) {
        if (json_is_string(note)) {
            json_decref(use);
            agent_result_error(out, "\"fact\" must be an object {subject, predicate, object, "
                                    "valid_from?, valid_to?} (give a sentence as \"note\")");
            return;
        }
        json_object_set(use, "note", fact);
        json_object_del(use, "fact");
        fact_as_note = 1;
    } else if (fact && !json_is_object(fact) && !json_is_null(fact)) {
        json_decref(use);
        agent_result_error(out, "\"fact\" must be an object {subject, predicate, object, "
                                "valid_from?, valid_to?}");
        return;
    }
    if (json_is_null(fact))
        json_object_del(use, "fact");
    if (note && !json_is_string(note) && !json_is_null(note)) {
        json_decref(use);
        agent_result_error(out, "\"note\" must be a string");
        return;
    }
    const utopia *u;
    PGconn *c;
    if (!begin(out, &u, &c)) {
        json_decref(use);
        return;
    }
    utopia_source src = {.chat_id = agent_call_session(call), .turn_id = agent_call_turn(call)};
    json_t *res = NULL;
    char err[512] = "";
    tk_status st =
        utopia_remember(u, c, agent_call_user(call), use, &src, 0, &res, err, sizeof err);
    app_db_release(c);
    json_decref(use);
    if (st != TK_OK) {
        agent_result_error(out, "not remembered: %s", err[0] ? err : "internal error");
        return;
    }
    tk_buf b;
    tk_buf_init(&b, 1 << 20);
    json_t *f = json_object_get(res, "fact");
    json_t *closed = json_object_get(res, "closed");
    json_t *dup = json_object_get(res, "duplicate");
    if (json_is_object(f)) {
        if (json_is_true(dup))
            tk_buf_append_str(&b, "Already known (nothing changed): ");
        else
            tk_buf_append_str(&b, "Recorded the fact: ");
        fact_line(&b, f);
        tk_buf_append_str(&b, ".");
        if (json_array_size(closed) > 0)
            tk_buf_printf(&b,
                          " It replaces %zu earlier fact%s, now closed at its start (kept in the "
                          "history, so earlier dates still answer with it).",
                          json_array_size(closed), json_array_size(closed) == 1 ? "" : "s");
        json_t *conf = json_object_get(res, "alias_conflicts");
        if (json_array_size(conf) > 0) {
            char *cs = tk_json_dumps(conf);
            tk_buf_printf(&b, " Aliases already used by other entities, not moved: %s.", cs);
            free(cs);
        }
    }
    json_t *m = json_object_get(res, "memory");
    if (json_is_object(m)) {
        if (b.len)
            tk_buf_append_byte(&b, '\n');
        tk_buf_append_str(&b, "Saved to long-term memory");
        tk_buf_append_str(&b, fact_as_note ? " as a note (to record a dated fact, give \"fact\" as "
                                             "{subject, predicate, object, valid_from?, "
                                             "valid_to?})."
                                           : ".");
    }
    agent_call_set_attrs(call,
                         tk_json_obj("fact", json_boolean(json_is_object(f)), "note",
                                     json_boolean(json_is_object(m)), "closed",
                                     json_integer((json_int_t)json_array_size(closed)), NULL));
    agent_result_take(out, tk_buf_steal(&b, NULL), 0);
    out->data = res;
}

/* ---------------------------------------------------------------- recall_facts */

static void run_recall_facts(agent_call *call, const json_t *args, agent_result *out)
{
    const char *entity = tk_json_str(args, "entity");
    if (!entity || !*entity) {
        agent_result_error(out, "\"entity\" (a name, e.g. \"Alice\") is required");
        return;
    }
    json_t *jat = json_object_get(args, "at");
    if (jat && !json_is_null(jat) && !json_is_string(jat)) {
        agent_result_error(out, "\"at\" is a date such as \"2024-03-05\" or \"March 2024\"");
        return;
    }
    const char *at = json_is_string(jat) && json_string_length(jat) ? json_string_value(jat) : NULL;
    const utopia *u;
    PGconn *c;
    if (!begin(out, &u, &c))
        return;
    json_t *res = NULL;
    char err[512] = "";
    tk_status st =
        utopia_recall_facts(u, c, agent_call_user(call), entity, at, 0, &res, err, sizeof err);
    app_db_release(c);
    if (st == TK_ENOENT) {
        /* not a failure: nothing is known yet */
        agent_result_text(out, "Nothing is known about \"%s\": %s", entity, err);
        agent_call_set_attrs(call, tk_json_obj("facts", json_integer(0), NULL));
        return;
    }
    if (st != TK_OK) {
        agent_result_error(out, "%s", err[0] ? err : "the facts could not be read");
        return;
    }
    json_t *e = json_object_get(res, "entity");
    json_t *facts = json_object_get(res, "facts");
    tk_buf b;
    tk_buf_init(&b, 4u << 20);
    tk_buf_printf(&b, "%s", tk_json_str_or(e, "name", entity));
    json_t *aliases = json_object_get(e, "aliases");
    if (json_array_size(aliases) > 0) {
        tk_buf_append_str(&b, " (also ");
        size_t i;
        json_t *a;
        json_array_foreach(aliases, i, a)
            tk_buf_printf(&b, "%s%s", i ? ", " : "", json_string_value(a));
        tk_buf_append_str(&b, ")");
    }
    size_t n = json_array_size(facts);
    tk_buf_printf(&b, ": %zu fact%s true %s%s%s\n", n, n == 1 ? "" : "s", at ? "on " : "now (",
                  at ? at : tk_json_str_or(res, "at", ""), at ? ":" : "):");
    size_t i;
    json_t *f;
    json_array_foreach(facts, i, f)
    {
        tk_buf_append_str(&b, "- ");
        fact_line(&b, f);
        tk_buf_append_byte(&b, '\n');
    }
    if (n == 0)
        tk_buf_append_str(&b, "(none at that date)\n");
    agent_call_set_attrs(call, tk_json_obj("facts", json_integer((json_int_t)n), NULL));
    agent_result_take(out, tk_buf_steal(&b, NULL), 0);
    out->data = res;
}

/* ---------------------------------------------------------------- save_document */

static void run_save_document(agent_call *call, const json_t *args, agent_result *out)
{
    json_t *jt = json_object_get(args, "title");
    json_t *jc = json_object_get(args, "content");
    if (!json_is_string(jt) || json_string_length(jt) == 0) {
        agent_result_error(out, "\"title\" (a short name for the document, e.g. \"Saffron "
                                "harvest: findings\") is required");
        return;
    }
    long tchars = tk_utf8_count(json_string_value(jt), json_string_length(jt));
    if (tchars < 0 || tchars > SAVE_TITLE_MAX) {
        agent_result_error(out, "\"title\" must be UTF-8 text of at most %d characters",
                           SAVE_TITLE_MAX);
        return;
    }
    if (!json_is_string(jc) || json_string_length(jc) == 0) {
        agent_result_error(out, "\"content\" (the finding itself, as Markdown or plain text) is "
                                "required");
        return;
    }
    const char *format = tk_json_str_or(args, "format", "markdown");
    if (strcmp(format, "markdown") != 0 && strcmp(format, "text") != 0) {
        agent_result_error(out, "\"format\" is \"markdown\" (the default) or \"text\"; other "
                                "formats are uploaded by the user");
        return;
    }
    const char *scope = tk_json_str_or(args, "scope", "user");
    if (strcmp(scope, "user") != 0 && strcmp(scope, "chat") != 0) {
        agent_result_error(out, "\"scope\" is \"user\" (the user's library, found from every "
                                "chat; the default) or \"chat\" (this chat only, deleted with "
                                "it)");
        return;
    }
    const utopia *u;
    PGconn *c;
    if (!begin(out, &u, &c))
        return;
    size_t len = json_string_length(jc);
    size_t max = SAVE_CONTENT_MAX < (size_t)u->cfg.max_document_bytes
                     ? SAVE_CONTENT_MAX
                     : (size_t)u->cfg.max_document_bytes;
    if (len > max) {
        app_db_release(c);
        agent_result_error(out,
                           "not saved: \"content\" is %zu bytes; at most %zu are accepted — save "
                           "the key findings, or split them into several documents",
                           len, max);
        return;
    }
    utopia_source from = {.chat_id = agent_call_session(call), .turn_id = agent_call_turn(call)};
    int chat = strcmp(scope, "chat") == 0;
    utopia_doc_in in = {
        .chat_id = chat ? agent_call_session(call) : NULL,
        .title = json_string_value(jt),
        .source = "agent",
        .mime = strcmp(format, "text") == 0 ? "text/plain" : "text/markdown",
        .data = json_string_value(jc),
        .len = len,
        .from = &from,
    };
    json_t *res = NULL;
    char err[512] = "";
    tk_status st = utopia_doc_add(u, c, agent_call_user(call), &in, &res, err, sizeof err);
    app_db_release(c);
    if (st != TK_OK) {
        agent_result_error(out, "not saved: %s", err[0] ? err : "internal error");
        return;
    }
    int64_t chunks = tk_json_int_or(res, "chunks", 0);
    agent_call_set_attrs(call, tk_json_obj("document_id", json_incref(json_object_get(res, "id")),
                                           "chunks", json_integer((json_int_t)chunks), "bytes",
                                           json_integer((json_int_t)len), "scope",
                                           json_string(scope), NULL));
    agent_result_text(out,
                      "Saved the document \"%s\" (%lld chunk%s, %zu bytes) to %s. search_chunks "
                      "finds it from now on; the user sees it in the Memory tab (id %s).",
                      tk_json_str_or(res, "title", json_string_value(jt)), (long long)chunks,
                      chunks == 1 ? "" : "s", len,
                      chat ? "this chat's documents" : "the user's library",
                      tk_json_str_or(res, "id", ""));
    out->data = res;
}

/* ---------------------------------------------------------------- registry */

static const agent_tool tools[] = {
    {.name = "search_chunks",
     .lane = AGENT_LANE_FAST,
     .description =
         "Search the user's knowledge: their uploaded documents (as chunks), long-term memories "
         "and known facts, together, ranked (full text, typo-tolerant). Each result has a "
         "citation label [n] to quote. scope \"chat\" limits it to this chat's documents and "
         "memories. Runs in the chat server: no sandbox.",
     .parameters = "{\"type\":\"object\",\"properties\":{\"query\":{\"type\":\"string\","
                   "\"description\":\"words to look for\"},\"scope\":{\"type\":\"string\","
                   "\"enum\":[\"user\",\"chat\"]},\"k\":{\"type\":\"integer\",\"minimum\":1,"
                   "\"maximum\":50}},\"required\":[\"query\"]}",
     .run = run_search_chunks},
    {.name = "remember",
     .lane = AGENT_LANE_FAST,
     .description =
         "Store something in long-term memory, across chats. Either a fact for the knowledge "
         "graph — {\"fact\": {\"subject\", \"predicate\", \"object\", \"valid_from\"?, "
         "\"valid_to\"?}} with dates when they are known (\"2024-03-05\", \"March 2024\", \"last "
         "year\"); a newer fact replaces an older one of the same kind (lives_in, works_at...) "
         "from its date on, without erasing it — or a free-text {\"note\": \"...\"}.",
     .parameters =
         "{\"type\":\"object\",\"properties\":{\"fact\":{\"type\":\"object\",\"properties\":{"
         "\"subject\":{\"type\":\"string\"},\"predicate\":{\"type\":\"string\"},\"object\":{"
         "\"type\":\"string\"},\"valid_from\":{\"type\":\"string\",\"description\":\"when it "
         "became true\"},\"valid_to\":{\"type\":\"string\",\"description\":\"when it stopped "
         "being true\"},\"single\":{\"type\":\"boolean\",\"description\":\"true: one object at a "
         "time (lives_in); false: many (likes)\"},\"aliases\":{\"type\":\"array\",\"items\":{"
         "\"type\":\"string\"}},\"object_kind\":{\"type\":\"string\",\"enum\":[\"entity\","
         "\"value\"]}},\"required\":[\"subject\",\"predicate\",\"object\"]},\"note\":{\"type\":"
         "\"string\"}}}",
     .run = run_remember},
    {.name = "recall_facts",
     .lane = AGENT_LANE_FAST,
     .description = "What the knowledge graph knows about an entity (a person, a company, a "
                    "place): its facts true at a date (\"at\", default now), as subject or "
                    "object, with when each became true.",
     .parameters = "{\"type\":\"object\",\"properties\":{\"entity\":{\"type\":\"string\"},"
                   "\"at\":{\"type\":\"string\",\"description\":\"a date, e.g. 2023-06-01\"}},"
                   "\"required\":[\"entity\"]}",
     .run = run_recall_facts},
    {.name = "save_document",
     .lane = AGENT_LANE_FAST,
     .description =
         "Save a finding as a document in the user's knowledge store, beside their uploads: "
         "search_chunks finds it later (in this chat and, by default, every other), and the user "
         "sees it in the Memory tab. Use it for what is worth keeping and longer than a note — a "
         "summary of research, notes from a page, a decision with its reasons. Give a short "
         "title and the content as Markdown (headings become sections) or plain text, at most "
         "256 KiB. For a single fact or a short note use remember. Runs in the chat server: no "
         "sandbox.",
     .parameters =
         "{\"type\":\"object\",\"properties\":{\"title\":{\"type\":\"string\","
         "\"description\":\"a short name for the document\"},\"content\":{\"type\":"
         "\"string\",\"description\":\"the finding, as Markdown or plain text\"},\"format\":{"
         "\"type\":\"string\",\"enum\":[\"markdown\",\"text\"],\"description\":\"default "
         "markdown\"},\"scope\":{\"type\":\"string\",\"enum\":[\"user\",\"chat\"],"
         "\"description\":\"user (default): the user's library, found from every chat; chat: "
         "this chat only, deleted with it\"}},\"required\":[\"title\",\"content\"]}",
     .run = run_save_document},
};

void agent_memory_tools_register(void)
{
    agent_tools_register_table(tools, TK_ARRAY_LEN(tools));
}
