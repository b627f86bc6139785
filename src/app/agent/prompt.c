/* The system prompt of a chat turn: the operator's prompt and the long-term
 * memories that fit. See prompt.h. */
#include "app/agent/prompt.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/app.h"
#include "app/settings.h"
#include "app/utopia/routes.h"
#include "app/utopia/utopia.h"
#include "lib/buf.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/tktime.h"
#include "lib/utf8.h"

/* A lookup takes at most this much of the turn's text (as search_chunks takes
 * at most this much of its query): a long message is looked up by its start. */
#define MEMORY_QUERY_MAX 2000

/* ---------------------------------------------------------------- memories */

static void memories_gather(PGconn *c, const char *user_id, const char *chat_id, const char *text,
                            agent_memory_offer *o)
{
    memset(o, 0, sizeof *o);
    const utopia *u = utopia_app();
    if (!u || u->cfg.memory_budget <= 0 || !text || !*text) {
        o->skipped = 1;
        return;
    }
    o->start_ms = tk_now_ms();
    int64_t t0 = tk_mono_ns();
    /* a search takes at most MEMORY_QUERY_MAX: a long message is looked up by
     * its start, cut at a word */
    char *q = NULL;
    size_t n = strlen(text);
    if (n > MEMORY_QUERY_MAX) {
        size_t cut = tk_utf8_cut(text, n, MEMORY_QUERY_MAX);
        size_t word = cut;
        while (word > MEMORY_QUERY_MAX / 2 && text[word] != ' ' && text[word] != '\n')
            word--;
        q = tk_strndup(text, word > MEMORY_QUERY_MAX / 2 ? word : cut);
    }
    json_t *res = NULL;
    tk_status st = utopia_memory_relevant(u, c, user_id, q ? q : text, chat_id, 0, &res, o->err,
                                          sizeof o->err);
    free(q);
    o->duration_ms = (double)(tk_mono_ns() - t0) / 1e6;
    if (st != TK_OK) {
        if (!o->err[0])
            snprintf(o->err, sizeof o->err, "the memory lookup failed");
        tk_warn("agent", "msg=\"memories not offered\" error=\"%s\"", o->err);
        return;
    }
    o->found = res;
}

#define MEMORY_HEADER                                                                              \
    "\n\n## Long-term memory\nNotes remembered from the user's earlier chats that may matter "     \
    "here (they may be out of date; quote them only when relevant):\n"

/* Appends the memories of o that fit; records the "memory" span. */
static void memories_append(tk_buf *b, const agent_memory_offer *o, agent_trace *t,
                            const char *parent_span)
{
    if (o->skipped)
        return;
    json_t *list = json_object_get(o->found, "memories");
    json_t *offered = json_array();
    long chars = tk_utf8_count(tk_buf_cstr(b), b->len);
    if (chars < 0)
        chars = (long)b->len;
    long header = tk_utf8_count(MEMORY_HEADER, strlen(MEMORY_HEADER));
    int tokens = 0, left_out = 0;
    size_t i;
    json_t *m;
    json_array_foreach(list, i, m)
    {
        const char *text = tk_json_str_or(m, "text", "");
        /* one line per memory: its newlines flattened */
        char *line = tk_asprintf("- %s\n", text);
        for (char *p = line + 2; p[1]; p++)
            if (*p == '\n' || *p == '\r')
                *p = ' ';
        long lc = tk_utf8_count(line, strlen(line));
        if (lc < 0)
            lc = (long)strlen(line);
        /* the system prompt guardrail counts what is added */
        if (chars + (json_array_size(offered) ? 0 : header) + lc > APP_SYSTEM_PROMPT_MAX) {
            left_out++;
            free(line);
            continue;
        }
        if (json_array_size(offered) == 0) {
            tk_buf_append_str(b, MEMORY_HEADER);
            chars += header;
        }
        tk_buf_append_str(b, line);
        chars += lc;
        int cost = (int)(strlen(text) + 3) / 4 + 4;
        tokens += cost;
        char preview[240];
        size_t plen = tk_utf8_cut(text, strlen(text), 200);
        snprintf(preview, sizeof preview, "%.*s%s", (int)plen, text,
                 plen < strlen(text) ? "…" : "");
        json_array_append_new(offered, tk_json_obj("id", json_incref(json_object_get(m, "id")),
                                                   "tokens", json_integer(cost), "score",
                                                   json_incref(json_object_get(m, "score")), "text",
                                                   json_string(preview), NULL));
        free(line);
    }
    if (t) {
        const utopia *u = utopia_app();
        int64_t budget = tk_json_int_or(o->found, "budget", u ? u->cfg.memory_budget : 0);
        json_t *attrs =
            tk_json_obj("count", json_integer((json_int_t)json_array_size(offered)), "tokens",
                        json_integer(tokens), "budget", json_integer(budget), "where",
                        json_string("system prompt"), "memories", offered, NULL);
        if (left_out)
            json_object_set_new(attrs, "left_out_prompt_cap", json_integer(left_out));
        if (o->err[0])
            json_object_set_new(attrs, "error", json_string(o->err));
        agent_span_record(t, parent_span, "memory", "memories offered",
                          o->start_ms ? o->start_ms : tk_now_ms(), o->duration_ms,
                          o->err[0] ? "error" : "ok", attrs);
    } else {
        json_decref(offered);
    }
}

/* ---------------------------------------------------------------- skills */

#define SKILLS_HEADER                                                                              \
    "\n\n## Skills\nSkills are instructions for particular kinds of work. When the user's "        \
    "request matches a skill's description, call activate_skill with its name first and follow "   \
    "what it returns."

/* Appends the catalogue of o's skills that fits; records the "skills" span. */
static void skills_append(tk_buf *b, const agent_skills_offer *o, agent_trace *t,
                          const char *parent_span)
{
    if (!o->set || o->set->n == 0)
        return;
    long chars = tk_utf8_count(tk_buf_cstr(b), b->len);
    if (chars < 0)
        chars = (long)b->len;
    const char *more = "\nMore skills than fit here: list_skills names them all.";
    long fixed = tk_utf8_count(SKILLS_HEADER "\n", strlen(SKILLS_HEADER "\n")) +
                 tk_utf8_count(more, strlen(more));
    long budget = (long)app_get()->cfg->skills_prompt_budget;
    if (budget > APP_SYSTEM_PROMPT_MAX - chars)
        budget = APP_SYSTEM_PROMPT_MAX - chars;
    budget -= fixed;
    size_t shown = 0;
    char *cat = budget > 0 ? skills_catalogue(o->set, budget, &shown) : NULL;
    if (shown) {
        tk_buf_append_str(b, SKILLS_HEADER "\n");
        tk_buf_append_str(b, cat);
        if (shown < o->set->n)
            tk_buf_append_str(b, more);
    }
    if (t) {
        json_t *names = json_array();
        for (size_t i = 0; i < shown; i++)
            json_array_append_new(names, json_string(o->set->v[i]->name));
        agent_span_record(t, parent_span, "skills", "skills offered",
                          o->start_ms ? o->start_ms : tk_now_ms(), o->duration_ms, "ok",
                          tk_json_obj("enabled", json_integer((json_int_t)o->set->n), "shown",
                                      json_integer((json_int_t)shown), "chars",
                                      json_integer(cat ? tk_utf8_count(cat, strlen(cat)) : 0),
                                      "budget", json_integer(app_get()->cfg->skills_prompt_budget),
                                      "skills", names, NULL));
    }
    free(cat);
}

/* ---------------------------------------------------------------- documents */

/* The document libraries of the sandbox image (SANDBOX_IMAGE_INFO's
 * "document_libraries"), as the prompt names them; "" when the file is absent
 * or names none. Read once. */
static char *doc_section;
static pthread_once_t doc_once = PTHREAD_ONCE_INIT;

static void doc_section_load(void)
{
    const app_settings *cfg = app_get() ? app_get()->cfg : NULL;
    const char *path = cfg ? cfg->sandbox_image_info : NULL;
    doc_section = agent_prompt_documents(path);
}

char *agent_prompt_documents(const char *image_json)
{
    if (!image_json || !*image_json)
        return tk_strdup("");
    char err[256];
    json_t *j = json_load_file(image_json, JSON_REJECT_DUPLICATES, NULL);
    json_t *libs = json_object_get(j, "document_libraries");
    if (!json_is_array(libs) || json_array_size(libs) == 0) {
        snprintf(err, sizeof err, "%s", j ? "it lists no document_libraries" : "not readable");
        tk_info("agent",
                "msg=\"no document libraries named in the prompt\" image_info=%s why=\"%s\"",
                image_json, err);
        json_decref(j);
        return tk_strdup("");
    }
    tk_buf py, other;
    tk_buf_init(&py, 4096);
    tk_buf_init(&other, 4096);
    int has_pptx = 0, has_pptxgenjs = 0, has_lo = 0;
    size_t i;
    json_t *l;
    json_array_foreach(libs, i, l)
    {
        const char *name = tk_json_str_or(l, "name", "");
        const char *lang = tk_json_str_or(l, "language", "");
        const char *ver = tk_json_str_or(l, "version", "");
        if (!*name || strlen(name) > 64 || strlen(ver) > 32)
            continue;
        tk_buf *b = strcmp(lang, "python") == 0 ? &py : &other;
        tk_buf_printf(b, "%s%s%s%s%s", b->len ? ", " : "", name, *ver ? " " : "", ver,
                      strcmp(lang, "node") == 0 ? " (Node.js: require(\"pptxgenjs\"))" : "");
        has_pptx |= strcmp(name, "python-pptx") == 0;
        has_pptxgenjs |= strcmp(name, "pptxgenjs") == 0;
        has_lo |= strcmp(name, "libreoffice") == 0;
    }
    tk_buf b;
    tk_buf_init(&b, 16384);
    tk_buf_append_str(&b, "\n\n## Documents\nThe sandbox holds these document libraries, and "
                          "only these: ");
    if (py.len)
        tk_buf_printf(&b, "Python: %s. ", tk_buf_cstr(&py));
    if (other.len)
        tk_buf_printf(&b, "Other: %s. ", tk_buf_cstr(&other));
    if (!has_pptx && has_pptxgenjs)
        tk_buf_append_str(&b, "python-pptx is NOT installed: write decks with pptxgenjs in "
                              "Node.js (execute_command: node script.js). ");
    tk_buf_append_str(&b, "Do not install packages (there is no network). After writing a "
                          "deck, document or sheet, call preview on it: ");
    tk_buf_append_str(&b, has_lo ? "the user sees a picture of every slide or page, and you get "
                                   "each one's text back to check."
                                 : "without LibreOffice in the image the user sees its text only.");
    tk_buf_free(&py);
    tk_buf_free(&other);
    json_decref(j);
    return tk_buf_steal(&b, NULL);
}

/* ---------------------------------------------------------------- the prompt */

void agent_prompt_gather(PGconn *c, const char *user_id, const char *chat_id, const char *text,
                         agent_prompt_parts *p)
{
    memset(p, 0, sizeof *p);
    p->skills.start_ms = tk_now_ms();
    int64_t t0 = tk_mono_ns();
    p->skills.set = skills_for_user(c, user_id, 0);
    if (!p->skills.set) { /* the store failed: no skill this turn (the user may have
                             turned some off) */
        tk_warn("agent", "msg=\"skills not offered: the store failed\"");
        p->skills.set = tk_calloc(1, sizeof *p->skills.set);
    }
    p->skills.duration_ms = (double)(tk_mono_ns() - t0) / 1e6;
    memories_gather(c, user_id, chat_id, text, &p->mem);
}

char *agent_prompt_build(const agent_prompt_parts *p, agent_trace *t, const char *parent_span)
{
    const char *base = app_get()->system_prompt;
    tk_buf b;
    tk_buf_init(&b, (size_t)APP_SYSTEM_PROMPT_MAX * 4 + 1024);
    tk_buf_append_str(&b, base ? base : "");
    pthread_once(&doc_once, doc_section_load);
    if (doc_section && *doc_section &&
        tk_utf8_count(tk_buf_cstr(&b), b.len) + (long)strlen(doc_section) <= APP_SYSTEM_PROMPT_MAX)
        tk_buf_append_str(&b, doc_section);
    skills_append(&b, &p->skills, t, parent_span);
    memories_append(&b, &p->mem, t, parent_span);
    return tk_buf_steal(&b, NULL);
}

void agent_prompt_parts_free(agent_prompt_parts *p)
{
    json_decref(p->mem.found);
    p->mem.found = NULL;
    skills_set_free(p->skills.set);
    p->skills.set = NULL;
}
