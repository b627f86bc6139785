/*
 * page.c — page actions over CDP (see page.h).
 */
#include "browserd/page.h"

#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/json.h"
#include "lib/tktime.h"
#include "lib/utf8.h"

#define CALL_TIMEOUT 15000

static tk_status pcall(brd_session *s, const char *method, json_t *params, json_t **res, char *err,
                       size_t errlen)
{
    json_t *r = NULL;
    tk_status st = brd_cdp_call(brd_session_cdp(s), brd_session_page(s), method, params,
                                CALL_TIMEOUT, &r, err, errlen);
    if (res)
        *res = r;
    else
        json_decref(r);
    return st;
}

tk_status brd_page_check_url(const char *url, char *err, size_t errlen)
{
    size_t n = strlen(url);
    if (n == 0 || n > BRD_PAGE_MAX_URL) {
        snprintf(err, errlen, "url must be 1 to %d characters", BRD_PAGE_MAX_URL);
        return TK_EINVAL;
    }
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)url[i] < 0x20 || url[i] == 0x7f) {
            snprintf(err, errlen, "url has control characters");
            return TK_EINVAL;
        }
    if (strncasecmp(url, "http://", 7) == 0 || strncasecmp(url, "https://", 8) == 0 ||
        strncasecmp(url, "data:", 5) == 0 || strcmp(url, "about:blank") == 0)
        return TK_OK;
    snprintf(err, errlen, "only http, https and data URLs (and about:blank) may be opened");
    return TK_EDENIED;
}

/* Evaluates expr in the page and gives its value (returned by value). */
static tk_status eval(brd_session *s, const char *expr, json_t **value, char *err, size_t errlen)
{
    *value = NULL;
    json_t *r;
    tk_status st = pcall(s, "Runtime.evaluate",
                         tk_json_obj("expression", json_string(expr), "returnByValue", json_true(),
                                     "awaitPromise", json_true(), NULL),
                         &r, err, errlen);
    if (st != TK_OK)
        return st;
    json_t *ex = json_object_get(r, "exceptionDetails");
    if (ex) {
        snprintf(err, errlen, "the page's script failed: %s",
                 tk_json_str_or(json_object_get(ex, "exception"), "description",
                                tk_json_str_or(ex, "text", "an exception")));
        json_decref(r);
        return TK_ERROR;
    }
    *value = json_incref(json_object_get(json_object_get(r, "result"), "value"));
    json_decref(r);
    if (!*value)
        *value = json_null();
    return TK_OK;
}

static const char INFO_JS[] = "({url: location.href, title: document.title})";

static json_t *clean_info(json_t *v)
{
    const char *url = tk_json_str(v, "url"), *title = tk_json_str(v, "title");
    size_t tn = title ? json_string_length(json_object_get(v, "title")) : 0;
    return tk_json_obj("url", json_string(url && strlen(url) <= BRD_PAGE_MAX_URL ? url : ""),
                       "title", json_stringn(title ? title : "", tk_utf8_cut(title, tn, 1000)),
                       NULL);
}

tk_status brd_page_info(brd_session *s, json_t **info, char *err, size_t errlen)
{
    json_t *v;
    tk_status st = eval(s, INFO_JS, &v, err, errlen);
    if (st != TK_OK)
        return st;
    *info = clean_info(v);
    json_decref(v);
    return TK_OK;
}

tk_status brd_page_goto(brd_session *s, const char *url, int64_t timeout_ms, json_t **info,
                        char *err, size_t errlen)
{
    *info = NULL;
    tk_status st = brd_page_check_url(url, err, errlen);
    if (st != TK_OK)
        return st;
    int status = 0;
    st = brd_session_navigate(s, url, tk_mono_ms() + timeout_ms, &status, err, errlen);
    if (st != TK_OK)
        return st;
    st = brd_page_info(s, info, err, errlen);
    if (st == TK_OK)
        json_object_set_new(*info, "status", json_integer(status));
    return st;
}

/* The markdown walker, links and metadata, all in one evaluation. The page
 * runs it and can change what it sees: the result is checked for shape here. */
static const char SCRAPE_JS[] =
    "(() => {"
    "const MAX = %u, LINKS = %u;"
    "const abs = (u) => { try { return new URL(u, document.baseURI).href; } catch (e) { return "
    "null; } };"
    "const skip = new Set(['SCRIPT','STYLE','NOSCRIPT','TEMPLATE','SVG','HEAD','IFRAME','CANVAS',"
    "'OBJECT','svg']);"
    "const ws = (t) => t.replace(/\\s+/g, ' ');"
    "const md = (n, ctx) => {"
    " if (n.nodeType === 3) return ctx.pre ? n.data : ws(n.data);"
    " if (n.nodeType !== 1 || skip.has(n.tagName) || n.hidden || "
    "n.getAttribute('aria-hidden') === 'true') return '';"
    " const kids = (c) => Array.from(n.childNodes, (k) => md(k, c || ctx)).join('');"
    " const t = n.tagName;"
    " if (/^H[1-6]$/.test(t)) return '\\n\\n' + '#'.repeat(+t[1]) + ' ' + kids().trim() + "
    "'\\n\\n';"
    " switch (t) {"
    " case 'BR': return '\\n';"
    " case 'HR': return '\\n\\n---\\n\\n';"
    " case 'PRE': return '\\n\\n```\\n' + n.textContent.replace(/\\n$/, '') + '\\n```\\n\\n';"
    " case 'CODE': return '`' + n.textContent + '`';"
    " case 'STRONG': case 'B': { const k = kids().trim(); return k ? '**' + k + '**' : ''; }"
    " case 'EM': case 'I': { const k = kids().trim(); return k ? '*' + k + '*' : ''; }"
    " case 'A': { const k = kids().trim(), h = n.getAttribute('href'), u = h && abs(h);"
    "  return u && !u.startsWith('javascript:') ? '[' + k + '](' + u + ')' : k; }"
    " case 'IMG': { const a = n.getAttribute('alt'), u = abs(n.getAttribute('src') || '');"
    "  return a && u ? '![' + ws(a) + '](' + u + ')' : ''; }"
    " case 'UL': case 'OL': { let i = 0; const d = (ctx.depth || 0);"
    "  return '\\n' + Array.from(n.children, (li) => li.tagName === 'LI' ? '\\n' + '  '.repeat(d) "
    "+ (t === 'OL' ? (++i) + '. ' : '- ') + Array.from(li.childNodes, (k) => md(k, {depth: d + "
    "1})).join('').trim() : '').join('') + '\\n\\n'; }"
    " case 'TABLE': { const rows = Array.from(n.querySelectorAll('tr')).map((r) => '| ' + "
    "Array.from(r.children, (c) => ws(md(c, ctx)).trim().replace(/\\|/g, '\\\\|')).join(' | ') + ' "
    "|');"
    "  if (!rows.length) return ''; const cols = n.querySelector('tr').children.length;"
    "  rows.splice(1, 0, '|' + ' --- |'.repeat(cols)); return '\\n\\n' + rows.join('\\n') + "
    "'\\n\\n'; }"
    " case 'BLOCKQUOTE': return '\\n\\n' + kids().trim().split('\\n').map((l) => '> ' + "
    "l).join('\\n') + '\\n\\n';"
    " case 'P': case 'DIV': case 'SECTION': case 'ARTICLE': case 'MAIN': case 'HEADER':"
    " case 'FOOTER': case 'NAV': case 'ASIDE': case 'FIGURE': case 'FORM': case 'DL': case 'DT':"
    " case 'DD': case 'LI': return '\\n\\n' + kids() + '\\n\\n';"
    " }"
    " return kids();"
    "};"
    "const tidy = (t) => t.split('\\n').map((l) => l.replace(/[ \\t]+$/, '')).join('\\n')"
    ".replace(/\\n{3,}/g, '\\n\\n').trim();"
    "const meta = (k) => { const m = document.querySelector('meta[name=\"' + k + '\"],"
    "meta[property=\"' + k + '\"]'); const c = m && m.getAttribute('content'); return c ? "
    "c.slice(0, 2000) : undefined; };"
    "const links = [];"
    "for (const a of document.querySelectorAll('a[href]')) {"
    " if (links.length >= LINKS) break; const u = abs(a.getAttribute('href'));"
    " if (u) links.push({url: u.slice(0, 8192), text: ws(a.innerText || a.textContent || "
    "'').trim().slice(0, 500)}); }"
    "const ld = []; for (const s of "
    "document.querySelectorAll('script[type=\"application/ld+json\"]')) "
    "{ try { ld.push(JSON.parse(s.textContent)); } catch (e) {} if (ld.length >= 8) break; }"
    "const rel = (r) => { const l = document.querySelector('link[rel~=\"' + r + '\"]'); return l "
    "&& l.getAttribute('href') ? abs(l.getAttribute('href')) : undefined; };"
    "const text = document.body ? document.body.innerText || '' : '';"
    "return {"
    " html: document.documentElement ? document.documentElement.outerHTML.slice(0, MAX) : '',"
    " markdown: document.body ? tidy(md(document.body, {})).slice(0, MAX) : '',"
    " links,"
    " metadata: {title: document.title, language: (document.documentElement && "
    "document.documentElement.lang) || undefined, urlSource: location.href,"
    "  description: meta('description'), keywords: meta('keywords'), author: meta('author'),"
    "  ogTitle: meta('og:title'), ogDescription: meta('og:description'), ogImage: "
    "meta('og:image'),"
    "  ogUrl: meta('og:url'), ogSiteName: meta('og:site_name'), articleAuthor: "
    "meta('article:author'),"
    "  publishedTime: meta('article:published_time'), modifiedTime: "
    "meta('article:modified_time'),"
    "  canonical: rel('canonical'), favicon: rel('icon'), jsonLd: ld.length === 0 ? undefined : "
    "ld.length === 1 ? ld[0] : ld,"
    "  wordCount: text.split(/\\s+/).filter(Boolean).length}"
    "};"
    "})()";

static json_t *capped_string(json_t *v, size_t max)
{
    if (!json_is_string(v))
        return json_string("");
    size_t n = json_string_length(v);
    return n <= max ? json_incref(v)
                    : json_stringn(json_string_value(v), tk_utf8_cut(json_string_value(v), n, max));
}

tk_status brd_page_scrape(brd_session *s, unsigned formats, json_t **out, char *err, size_t errlen)
{
    *out = NULL;
    char js[sizeof SCRAPE_JS + 32];
    snprintf(js, sizeof js, SCRAPE_JS, (unsigned)BRD_PAGE_MAX_TEXT, (unsigned)BRD_PAGE_MAX_LINKS);
    json_t *v;
    tk_status st = eval(s, js, &v, err, errlen);
    if (st != TK_OK)
        return st;
    if (!json_is_object(v)) {
        json_decref(v);
        snprintf(err, errlen, "the page gave no scrape result");
        return TK_ERROR;
    }
    json_t *content = json_object();
    if (formats & BRD_PAGE_HTML)
        json_object_set_new(content, "html",
                            capped_string(json_object_get(v, "html"), BRD_PAGE_MAX_TEXT));
    if (formats & BRD_PAGE_MARKDOWN)
        json_object_set_new(content, "markdown",
                            capped_string(json_object_get(v, "markdown"), BRD_PAGE_MAX_TEXT));
    json_t *links = json_array();
    size_t i;
    json_t *l;
    json_array_foreach(json_object_get(v, "links"), i, l)
    {
        if (i >= BRD_PAGE_MAX_LINKS)
            break;
        const char *u = tk_json_str(l, "url"), *t = tk_json_str(l, "text");
        if (!u || strlen(u) > BRD_PAGE_MAX_URL)
            continue;
        json_array_append_new(links,
                              tk_json_obj("url", json_string(u), "text",
                                          capped_string(json_object_get(l, "text"), 500), NULL));
        (void)t;
    }
    /* metadata: strings kept as they are (capped), jsonLd and wordCount as given */
    json_t *meta = json_object(), *m = json_object_get(v, "metadata");
    const char *k;
    json_t *mv;
    json_object_foreach(m, k, mv)
    {
        if (json_is_string(mv))
            json_object_set_new(meta, k, capped_string(mv, BRD_PAGE_MAX_URL));
        else if (strcmp(k, "jsonLd") == 0 || (strcmp(k, "wordCount") == 0 && json_is_integer(mv)))
            json_object_set(meta, k, mv);
    }
    char now[40];
    tk_time_rfc3339(tk_now_ms(), now, sizeof now);
    json_object_set_new(meta, "timestamp", json_string(now));
    *out = tk_json_obj("content", content, "links", links, "metadata", meta, NULL);
    json_decref(v);
    return TK_OK;
}

tk_status brd_page_text(brd_session *s, size_t max_chars, char **text, char *err, size_t errlen)
{
    *text = NULL;
    char js[160];
    snprintf(js, sizeof js, "(document.body ? document.body.innerText || '' : '').slice(0, %zu)",
             max_chars);
    json_t *v;
    tk_status st = eval(s, js, &v, err, errlen);
    if (st != TK_OK)
        return st;
    const char *t = json_is_string(v) ? json_string_value(v) : "";
    size_t n = json_is_string(v) ? json_string_length(v) : 0;
    /* characters from the page, bytes here: a UTF-8 character is at most 4 */
    *text = tk_strndup(t, tk_utf8_cut(t, n, max_chars * 4));
    json_decref(v);
    return TK_OK;
}

/* ---------- the outline ---------- */

static const char *const REF_ROLES[] = {
    "link",     "button",  "textbox",    "searchbox",     "checkbox",         "radio",
    "combobox", "listbox", "option",     "menuitem",      "menuitemcheckbox", "tab",
    "switch",   "slider",  "spinbutton", "menuitemradio", "treeitem",
};
static const char *const SHOWN_ROLES[] = {
    "heading", "img",         "image",        "navigation",  "main",     "form",
    "dialog",  "alertdialog", "banner",       "contentinfo", "search",   "table",
    "row",     "cell",        "columnheader", "list",        "listitem", "article",
    "region",  "alert",       "status",       "paragraph",
};

static int in_list(const char *s, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(s, list[i]) == 0)
            return 1;
    return 0;
}

static const char *ax_value(const json_t *node, const char *key)
{
    return tk_json_str(json_object_get(node, key), "value");
}

typedef struct {
    const json_t *nodes;
    json_t *index; /* nodeId -> position */
    json_t *seen;  /* nodeIds walked */
    tk_buf out;
    int full;
    int64_t *refs;
    size_t nrefs, cap;
} outline;

static void put(outline *o, int depth, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void put(outline *o, int depth, const char *fmt, ...)
{
    if (o->full)
        return;
    char line[600];
    int d = depth > 20 ? 20 : depth;
    int n = snprintf(line, sizeof line, "%*s", d * 2, "");
    va_list ap;
    va_start(ap, fmt);
    if (vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap) >= (int)(sizeof line - (size_t)n))
        line[tk_utf8_whole(line, strlen(line))] = '\0'; /* cut short: not inside a character */
    va_end(ap);
    if (o->out.len + strlen(line) + 2 > BRD_PAGE_MAX_OUTLINE - 32) {
        tk_buf_append(&o->out, "… (outline cut)\n", strlen("… (outline cut)\n"));
        o->full = 1;
        return;
    }
    tk_buf_append(&o->out, line, strlen(line));
    tk_buf_append_byte(&o->out, '\n');
}

static void snip(char *out, size_t outlen, const char *s)
{
    size_t j = 0;
    int sp = 0;
    for (const char *p = s; *p && j + 5 < outlen; p++) {
        unsigned char c = (unsigned char)*p;
        if (c <= ' ') {
            sp = j > 0;
            continue;
        }
        if (sp)
            out[j++] = ' ';
        sp = 0;
        out[j++] = c == '"' ? '\'' : (char)c;
    }
    /* cut short: drop a character the cap split */
    out[tk_utf8_whole(out, j)] = '\0';
}

static void walk(outline *o, const json_t *node, int depth, const char *parent_name, int level)
{
    if (o->full || level > 200 || !json_is_object(node))
        return;
    const char *nid = tk_json_str(node, "nodeId");
    if (!nid || json_object_get(o->seen, nid))
        return;
    json_object_set_new(o->seen, nid, json_true());
    const char *role = ax_value(node, "role");
    const char *name = ax_value(node, "name");
    int ignored = json_is_true(json_object_get(node, "ignored"));
    int shown = 0;
    char nm[200] = "";
    if (name)
        snip(nm, sizeof nm, name);
    if (!ignored && role) {
        json_t *bid = json_object_get(node, "backendDOMNodeId");
        if (in_list(role, REF_ROLES, TK_ARRAY_LEN(REF_ROLES)) && json_is_integer(bid)) {
            if (o->nrefs == o->cap) {
                o->cap = o->cap ? o->cap * 2 : 64;
                o->refs = tk_realloc(o->refs, o->cap * sizeof *o->refs);
            }
            o->refs[o->nrefs++] = json_integer_value(bid);
            const char *val = ax_value(node, "value");
            char vv[120] = "";
            if (val && val[0])
                snip(vv, sizeof vv, val);
            put(o, depth, "- %s \"%s\"%s%s%s [@e%zu]", role, nm, vv[0] ? " value=\"" : "", vv,
                vv[0] ? "\"" : "", o->nrefs);
            shown = 1;
        } else if (strcmp(role, "StaticText") == 0) {
            if (nm[0] && (!parent_name || strcmp(nm, parent_name) != 0))
                put(o, depth, "- text \"%s\"", nm);
            return; /* its children are inline text boxes */
        } else if (strcmp(role, "heading") == 0) {
            int lvl = 0;
            size_t i;
            json_t *p;
            json_array_foreach(json_object_get(node, "properties"), i, p)
            {
                const char *pn = tk_json_str(p, "name");
                if (pn && strcmp(pn, "level") == 0)
                    lvl = (int)json_integer_value(
                        json_object_get(json_object_get(p, "value"), "value"));
            }
            if (lvl > 0)
                put(o, depth, "- heading \"%s\" level=%d", nm, lvl);
            else
                put(o, depth, "- heading \"%s\"", nm);
            shown = 1;
        } else if (in_list(role, SHOWN_ROLES, TK_ARRAY_LEN(SHOWN_ROLES)) &&
                   (nm[0] || strcmp(role, "img") != 0)) {
            if (nm[0])
                put(o, depth, "- %s \"%s\"", role, nm);
            else
                put(o, depth, "- %s", role);
            shown = 1;
        }
    }
    size_t i;
    json_t *cid;
    json_array_foreach(json_object_get(node, "childIds"), i, cid)
    {
        const char *id = json_string_value(cid);
        json_t *pos = id ? json_object_get(o->index, id) : NULL;
        if (!pos)
            continue;
        walk(o, json_array_get(o->nodes, (size_t)json_integer_value(pos)), depth + shown,
             shown ? nm : parent_name, level + 1);
    }
}

char *brd_page_outline_of(const json_t *nodes, int64_t **refs, size_t *nrefs)
{
    outline o = {.nodes = nodes, .index = json_object(), .seen = json_object()};
    tk_buf_init(&o.out, BRD_PAGE_MAX_OUTLINE);
    const json_t *root = NULL;
    size_t i;
    json_t *n;
    json_array_foreach(nodes, i, n)
    {
        const char *id = tk_json_str(n, "nodeId");
        if (!id)
            continue;
        /* a node listed twice keeps its first place (no cycles through a repeat) */
        if (!json_object_get(o.index, id))
            json_object_set_new(o.index, id, json_integer((json_int_t)i));
        if (!root && !json_object_get(n, "parentId"))
            root = n;
    }
    if (root)
        walk(&o, root, 0, NULL, 0);
    json_decref(o.index);
    json_decref(o.seen);
    *refs = o.refs;
    *nrefs = o.nrefs;
    char *text = tk_strndup(o.out.data ? o.out.data : "", o.out.len);
    tk_buf_free(&o.out);
    return text;
}

tk_status brd_page_outline(brd_session *s, char **text, char *err, size_t errlen)
{
    *text = NULL;
    json_t *r;
    tk_status st = pcall(s, "Accessibility.getFullAXTree", NULL, &r, err, errlen);
    if (st != TK_OK)
        return st;
    int64_t *refs;
    size_t nrefs;
    *text = brd_page_outline_of(json_object_get(r, "nodes"), &refs, &nrefs);
    json_decref(r);
    brd_session_set_refs(s, refs, nrefs);
    return TK_OK;
}

/* ---------- acting ---------- */

static tk_status node_of(brd_session *s, const char *ref, int64_t *id, char *err, size_t errlen)
{
    const char *p = ref;
    if (p[0] == '@')
        p++;
    int64_t n = 0;
    if (p[0] != 'e' || tk_parse_i64(p + 1, 1, 1000000, &n) != TK_OK) {
        snprintf(err, errlen, "a ref looks like @e12 (from the page's outline)");
        return TK_EINVAL;
    }
    *id = brd_session_ref(s, (size_t)n);
    if (!*id) {
        snprintf(err, errlen, "no element @e%lld in the last outline (read the page again)",
                 (long long)n);
        return TK_ENOENT;
    }
    return TK_OK;
}

/* Waits a little for what an action started (a navigation) to settle. */
static void settle(brd_session *s)
{
    tk_sleep_ms(150);
    int64_t until = tk_mono_ms() + 5000;
    while (tk_mono_ms() < until) {
        json_t *v;
        char err[64];
        if (eval(s, "document.readyState", &v, err, sizeof err) != TK_OK)
            return;
        int done = json_is_string(v) && strcmp(json_string_value(v), "complete") == 0;
        json_decref(v);
        if (done)
            return;
        tk_sleep_ms(50);
    }
}

static tk_status mouse(brd_session *s, const char *type, double x, double y, char *err,
                       size_t errlen)
{
    return pcall(s, "Input.dispatchMouseEvent",
                 tk_json_obj("type", json_string(type), "x", json_real(x), "y", json_real(y),
                             "button", json_string("left"), "clickCount",
                             json_integer(strcmp(type, "mouseMoved") == 0 ? 0 : 1), NULL),
                 NULL, err, errlen);
}

tk_status brd_page_click(brd_session *s, const char *ref, char *err, size_t errlen)
{
    int64_t id;
    tk_status st = node_of(s, ref, &id, err, errlen);
    if (st != TK_OK)
        return st;
    pcall(s, "DOM.scrollIntoViewIfNeeded", tk_json_obj("backendNodeId", json_integer(id), NULL),
          NULL, err, errlen);
    json_t *r;
    st = pcall(s, "DOM.getContentQuads", tk_json_obj("backendNodeId", json_integer(id), NULL), &r,
               err, errlen);
    if (st != TK_OK)
        return st;
    json_t *q = json_array_get(json_object_get(r, "quads"), 0);
    if (json_array_size(q) != 8) {
        json_decref(r);
        snprintf(err, errlen, "%s is not visible on the page", ref);
        return TK_ERROR;
    }
    double x = 0, y = 0;
    for (size_t i = 0; i < 8; i += 2) {
        x += json_number_value(json_array_get(q, i)) / 4;
        y += json_number_value(json_array_get(q, i + 1)) / 4;
    }
    json_decref(r);
    if ((st = mouse(s, "mouseMoved", x, y, err, errlen)) != TK_OK ||
        (st = mouse(s, "mousePressed", x, y, err, errlen)) != TK_OK ||
        (st = mouse(s, "mouseReleased", x, y, err, errlen)) != TK_OK)
        return st;
    settle(s);
    return TK_OK;
}

static tk_status key(brd_session *s, const char *type, char *err, size_t errlen)
{
    return pcall(s, "Input.dispatchKeyEvent",
                 tk_json_obj("type", json_string(type), "key", json_string("Enter"), "code",
                             json_string("Enter"), "windowsVirtualKeyCode", json_integer(13),
                             "text", strcmp(type, "keyDown") == 0 ? json_string("\r") : NULL, NULL),
                 NULL, err, errlen);
}

tk_status brd_page_type(brd_session *s, const char *ref, const char *text, int submit, char *err,
                        size_t errlen)
{
    int64_t id;
    tk_status st = node_of(s, ref, &id, err, errlen);
    if (st != TK_OK)
        return st;
    json_t *r;
    st = pcall(s, "DOM.resolveNode", tk_json_obj("backendNodeId", json_integer(id), NULL), &r, err,
               errlen);
    if (st != TK_OK)
        return st;
    const char *obj = tk_json_str(json_object_get(r, "object"), "objectId");
    if (!obj) {
        json_decref(r);
        snprintf(err, errlen, "%s is gone from the page", ref);
        return TK_ERROR;
    }
    /* what was in the field goes: typing replaces it */
    json_t *r2;
    st = pcall(s, "Runtime.callFunctionOn",
               tk_json_obj("objectId", json_string(obj), "functionDeclaration",
                           json_string("function() { this.focus(); if ('value' in this) { "
                                       "this.value = ''; } else if (this.isContentEditable) { "
                                       "this.textContent = ''; } }"),
                           NULL),
               &r2, err, errlen);
    json_decref(r);
    json_decref(r2);
    if (st != TK_OK)
        return st;
    if (text[0] && (st = pcall(s, "Input.insertText", tk_json_obj("text", json_string(text), NULL),
                               NULL, err, errlen)) != TK_OK)
        return st;
    if (submit) {
        if ((st = key(s, "keyDown", err, errlen)) != TK_OK ||
            (st = key(s, "keyUp", err, errlen)) != TK_OK)
            return st;
        settle(s);
    }
    return TK_OK;
}

tk_status brd_page_scroll(brd_session *s, const char *direction, int amount, char *err,
                          size_t errlen)
{
    int dx = 0, dy = 0;
    char js[200];
    const char *a = amount > 0 ? NULL : "innerHeight * 0.8";
    if (strcmp(direction, "down") == 0)
        dy = 1;
    else if (strcmp(direction, "up") == 0)
        dy = -1;
    else if (strcmp(direction, "right") == 0)
        dx = 1;
    else if (strcmp(direction, "left") == 0)
        dx = -1;
    else {
        snprintf(err, errlen, "direction is up, down, left or right");
        return TK_EINVAL;
    }
    if (a)
        snprintf(js, sizeof js, "window.scrollBy(%d * innerWidth * 0.8, %d * innerHeight * 0.8)",
                 dx, dy);
    else
        snprintf(js, sizeof js, "window.scrollBy(%d, %d)", dx * amount, dy * amount);
    json_t *v;
    tk_status st = eval(s, js, &v, err, errlen);
    json_decref(v);
    return st;
}

static tk_status decode(const json_t *r, tk_buf *out, char *err, size_t errlen)
{
    const char *data = tk_json_str(r, "data");
    if (!data) {
        snprintf(err, errlen, "the browser gave no data");
        return TK_ERROR;
    }
    size_t n = strlen(data), max = n / 4 * 3 + 3;
    if (max > BRD_PAGE_MAX_IMAGE) {
        snprintf(err, errlen, "the capture is over %u bytes", (unsigned)BRD_PAGE_MAX_IMAGE);
        return TK_ETOOBIG;
    }
    if (tk_buf_reserve(out, max) != TK_OK)
        return TK_ETOOBIG;
    size_t got = 0;
    if (sodium_base642bin((unsigned char *)out->data + out->len, max, data, n, NULL, &got, NULL,
                          sodium_base64_VARIANT_ORIGINAL) != 0) {
        snprintf(err, errlen, "the browser's data is not base64");
        return TK_ERROR;
    }
    out->len += got;
    return TK_OK;
}

tk_status brd_page_screenshot(brd_session *s, const char *format, int full_page, tk_buf *out,
                              char *err, size_t errlen)
{
    int png = format && strcmp(format, "png") == 0;
    json_t *params = tk_json_obj("format", json_string(png ? "png" : "jpeg"), "quality",
                                 png ? NULL : json_integer(80), NULL);
    if (full_page) {
        json_t *m;
        tk_status st = pcall(s, "Page.getLayoutMetrics", NULL, &m, err, errlen);
        if (st != TK_OK) {
            json_decref(params);
            return st;
        }
        json_t *cs = json_object_get(m, "cssContentSize");
        double w = json_number_value(json_object_get(cs, "width"));
        double h = json_number_value(json_object_get(cs, "height"));
        json_decref(m);
        if (w < 1)
            w = 1;
        if (h < 1)
            h = 1;
        if (w > BRD_PAGE_MAX_HEIGHT)
            w = BRD_PAGE_MAX_HEIGHT;
        if (h > BRD_PAGE_MAX_HEIGHT)
            h = BRD_PAGE_MAX_HEIGHT;
        json_object_set_new(params, "captureBeyondViewport", json_true());
        json_object_set_new(params, "clip",
                            tk_json_obj("x", json_integer(0), "y", json_integer(0), "width",
                                        json_real(w), "height", json_real(h), "scale",
                                        json_integer(1), NULL));
    }
    json_t *r;
    tk_status st = pcall(s, "Page.captureScreenshot", params, &r, err, errlen);
    if (st != TK_OK)
        return st;
    st = decode(r, out, err, errlen);
    json_decref(r);
    return st;
}

tk_status brd_page_pdf(brd_session *s, tk_buf *out, char *err, size_t errlen)
{
    json_t *r;
    tk_status st = pcall(s, "Page.printToPDF", tk_json_obj("printBackground", json_true(), NULL),
                         &r, err, errlen);
    if (st != TK_OK)
        return st;
    st = decode(r, out, err, errlen);
    json_decref(r);
    return st;
}
