#include "app/markdown.h"

#include <cmark-gfm-core-extensions.h>
#include <cmark-gfm-extension_api.h>
#include <cmark-gfm.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/json.h"

#define MD_BODY_MAX  (1u << 20)
#define MD_TEXTS_MAX 500

static const char *const extensions[] = {"table", "autolink", "strikethrough", "tasklist"};
static pthread_once_t ext_once = PTHREAD_ONCE_INIT;

static void ext_register(void)
{
    cmark_gfm_core_extensions_ensure_registered();
}

int app_markdown_url_ok(const char *url)
{
    if (!url)
        return 0;
    for (const unsigned char *p = (const unsigned char *)url; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return 0;
    if (strncasecmp(url, "https://", 8) == 0)
        return url[8] != '\0' && url[8] != '/';
    if (strncasecmp(url, "http://", 7) == 0)
        return url[7] != '\0' && url[7] != '/';
    if (strncasecmp(url, "mailto:", 7) == 0)
        return url[7] != '\0';
    return 0;
}

/* Text nodes for s, one per line, with hard line breaks between: appended to
 * parent. */
static void append_lines(cmark_node *parent, const char *s)
{
    const char *p = s;
    for (;;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (n > 0) {
            char *line = tk_strndup(p, n);
            cmark_node *t = cmark_node_new(CMARK_NODE_TEXT);
            cmark_node_set_literal(t, line);
            free(line);
            cmark_node_append_child(parent, t);
        }
        if (!nl || nl[1] == '\0')
            break;
        cmark_node_append_child(parent, cmark_node_new(CMARK_NODE_LINEBREAK));
        p = nl + 1;
    }
}

/* Moves node's children in front of it, then frees it. */
static void unwrap(cmark_node *node)
{
    cmark_node *c;
    while ((c = cmark_node_first_child(node)) != NULL) {
        cmark_node_unlink(c);
        cmark_node_insert_before(node, c);
    }
    cmark_node_free(node);
}

static int inside_link(cmark_node *node)
{
    for (cmark_node *p = cmark_node_parent(node); p; p = cmark_node_parent(p))
        if (cmark_node_get_type(p) == CMARK_NODE_LINK)
            return 1;
    return 0;
}

static void fix_node(cmark_node *node)
{
    switch (cmark_node_get_type(node)) {
    case CMARK_NODE_HTML_BLOCK: {
        cmark_node *para = cmark_node_new(CMARK_NODE_PARAGRAPH);
        append_lines(para, cmark_node_get_literal(node));
        cmark_node_replace(node, para);
        cmark_node_free(node);
        break;
    }
    case CMARK_NODE_HTML_INLINE: {
        cmark_node *t = cmark_node_new(CMARK_NODE_TEXT);
        cmark_node_set_literal(t, cmark_node_get_literal(node));
        cmark_node_replace(node, t);
        cmark_node_free(node);
        break;
    }
    case CMARK_NODE_LINK:
        if (!app_markdown_url_ok(cmark_node_get_url(node)))
            unwrap(node);
        else
            cmark_node_set_title(node, ""); /* the model's title text is not shown */
        break;
    case CMARK_NODE_IMAGE: {
        const char *url = cmark_node_get_url(node);
        int ok =
            app_markdown_url_ok(url) && strncasecmp(url, "mailto:", 7) != 0 && !inside_link(node);
        cmark_node *label = cmark_node_new(CMARK_NODE_TEXT);
        cmark_node_set_literal(label, "image: ");
        cmark_node_prepend_child(node, label);
        if (!ok) {
            unwrap(node);
            break;
        }
        cmark_node *link = cmark_node_new(CMARK_NODE_LINK);
        cmark_node_set_url(link, url);
        cmark_node *c;
        while ((c = cmark_node_first_child(node)) != NULL) {
            cmark_node_unlink(c);
            cmark_node_append_child(link, c);
        }
        cmark_node_replace(node, link);
        cmark_node_free(node);
        break;
    }
    default:
        break;
    }
}

static int needs_fix(cmark_node_type t)
{
    return t == CMARK_NODE_HTML_BLOCK || t == CMARK_NODE_HTML_INLINE || t == CMARK_NODE_LINK ||
           t == CMARK_NODE_IMAGE;
}

char *app_markdown_html(const char *md, size_t len)
{
    pthread_once(&ext_once, ext_register);
    int opts = CMARK_OPT_VALIDATE_UTF8 | CMARK_OPT_HARDBREAKS;
    cmark_parser *p = cmark_parser_new(opts);
    for (size_t i = 0; i < TK_ARRAY_LEN(extensions); i++) {
        cmark_syntax_extension *e = cmark_find_syntax_extension(extensions[i]);
        TK_ASSERT(e != NULL);
        cmark_parser_attach_syntax_extension(p, e);
    }
    cmark_parser_feed(p, md ? md : "", md ? len : 0);
    cmark_node *doc = cmark_parser_finish(p);
    TK_ASSERT(doc != NULL);

    /* Collect first, then change: the iterator must not see a tree that
     * moves under it. Nodes inside a changed node are changed too (a link
     * inside an image's alt text, say), so parents come before children and
     * a child moved out by unwrap() keeps its place in the list. */
    size_t n = 0, cap = 16;
    cmark_node **todo = tk_malloc(cap * sizeof *todo);
    cmark_iter *it = cmark_iter_new(doc);
    cmark_event_type ev;
    while ((ev = cmark_iter_next(it)) != CMARK_EVENT_DONE) {
        cmark_node *node = cmark_iter_get_node(it);
        if (ev == CMARK_EVENT_ENTER && needs_fix(cmark_node_get_type(node))) {
            if (n == cap) {
                cap *= 2;
                todo = tk_realloc(todo, cap * sizeof *todo);
            }
            todo[n++] = node;
        }
    }
    cmark_iter_free(it);
    for (size_t i = 0; i < n; i++)
        fix_node(todo[i]);
    free(todo);

    char *html = cmark_render_html(doc, opts, cmark_parser_get_syntax_extensions(p));
    TK_ASSERT(html != NULL);
    cmark_node_free(doc);
    cmark_parser_free(p);
    /* cmark allocated it with its default allocator (malloc): hand it on as is */
    return html;
}

/* ---------- POST /api/markdown ---------- */

static void h_render(tk_req *r, void *ud)
{
    json_t *body = tk_req_json(r, 0);
    if (!body)
        return;
    json_t *text = json_object_get(body, "text");
    json_t *texts = json_object_get(body, "texts");
    if (json_is_string(text) && !texts) {
        char *html = app_markdown_html(json_string_value(text), json_string_length(text));
        tk_respond_json(r, 200, tk_json_obj("html", json_string(html), NULL));
        free(html);
        return;
    }
    if (!json_is_array(texts) || text || json_array_size(texts) > MD_TEXTS_MAX) {
        tk_respond_error(r, 400, "INVALID_REQUEST",
                         "give \"text\" (a string) or \"texts\" (an array of at most %d strings)",
                         MD_TEXTS_MAX);
        return;
    }
    json_t *out = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(texts, i, v)
    {
        if (!json_is_string(v)) {
            json_decref(out);
            tk_respond_error(r, 400, "INVALID_REQUEST", "\"texts\"[%zu] is not a string", i);
            return;
        }
        char *html = app_markdown_html(json_string_value(v), json_string_length(v));
        json_array_append_new(out, json_string(html));
        free(html);
    }
    tk_respond_json(r, 200, tk_json_obj("html", out, NULL));
}

const tk_route app_markdown_routes[] = {
    {"POST", "/api/markdown", h_render, NULL, TK_ROUTE_BLOCKING, MD_BODY_MAX},
};
const size_t app_markdown_nroutes = TK_ARRAY_LEN(app_markdown_routes);
