/*
 * web_fetch.c — the web_fetch tool: a checked fetch (lib/ssrf.h) turned into
 * text the model can read (see web_fetch.h).
 */
#include "app/tools/web_fetch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "app/app.h"
#include "app/tools/html_text.h"
#include "lib/buf.h"
#include "lib/json.h"
#include "lib/url.h"
#include "lib/utf8.h"

#define RESULT_MAX  (64u << 20) /* a hard cap on the result buffer (the text is capped first) */
#define BACKOFF_MAX 200         /* a cut looks this far back for a word boundary */

enum format { F_HTML, F_JSON, F_TEXT, F_OTHER };

static const char *format_name(enum format f)
{
    static const char *const names[] = {"html", "json", "text", "other"};
    return names[f];
}

/* The media type ("text/html"), lower case, and its charset parameter. */
static void media_type(const char *ct, char *type, size_t tl, char *charset, size_t cl)
{
    type[0] = charset[0] = '\0';
    if (!ct)
        return;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    size_t n = strcspn(ct, ";");
    while (n > 0 && (ct[n - 1] == ' ' || ct[n - 1] == '\t'))
        n--;
    size_t k = 0;
    for (; k < n && k + 1 < tl; k++)
        type[k] = (char)(ct[k] >= 'A' && ct[k] <= 'Z' ? ct[k] + 32 : ct[k]);
    type[k] = '\0';
    for (const char *p = ct + strcspn(ct, ";"); *p; p++) {
        if (strncasecmp(p, "charset=", 8) == 0) {
            p += 8;
            if (*p == '"')
                p++;
            size_t m = strcspn(p, "\"; \t");
            snprintf(charset, cl, "%.*s", (int)TK_MIN(m, cl - 1), p);
            return;
        }
    }
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* What the body is: by its declared type, or sniffed when none is declared. */
static enum format format_of(const char *type, const char *body, size_t len)
{
    if (!strcmp(type, "text/html") || !strcmp(type, "application/xhtml+xml"))
        return F_HTML;
    if (!strcmp(type, "application/json") || !strcmp(type, "text/json") || ends_with(type, "+json"))
        return F_JSON;
    static const char *const texts[] = {
        "application/xml",          "application/javascript", "application/ecmascript",
        "application/x-javascript", "application/yaml",       "application/x-yaml",
        "application/toml",         "application/x-ndjson",   "application/x-sh",
        "application/sql",          "application/csv",        "application/x-www-form-urlencoded"};
    if (!strncmp(type, "text/", 5) || ends_with(type, "+xml"))
        return F_TEXT;
    for (size_t i = 0; i < TK_ARRAY_LEN(texts); i++)
        if (!strcmp(type, texts[i]))
            return F_TEXT;
    if (type[0])
        return F_OTHER;
    /* no Content-Type: look at the start */
    size_t i = 0;
    if (len >= 3 && !memcmp(body, "\xEF\xBB\xBF", 3))
        i = 3;
    while (i < len && (body[i] == ' ' || body[i] == '\t' || body[i] == '\r' || body[i] == '\n'))
        i++;
    if (len - i >= 5 && (!strncasecmp(body + i, "<!doc", 5) || !strncasecmp(body + i, "<html", 5)))
        return F_HTML;
    if (i < len && (body[i] == '{' || body[i] == '['))
        return F_JSON;
    if (memchr(body, 0, TK_MIN(len, (size_t)4096)))
        return F_OTHER;
    return F_TEXT;
}

/* Byte offset where max characters end (len when the text is not longer);
 * *total gets the characters of the whole text. A cut backs off to a space or
 * line break when one is near. */
static size_t cut_at(const char *s, size_t len, size_t max, size_t *total)
{
    size_t cut = tk_utf8_cut_chars(s, len, max, total);
    if (cut == len)
        return len;
    for (size_t k = cut; k > 0 && cut - k < BACKOFF_MAX; k--)
        if (s[k - 1] == ' ' || s[k - 1] == '\n')
            return k - 1 > 0 ? k - 1 : cut;
    return cut;
}

static int is_refusal(tk_ssrf_code c)
{
    switch (c) {
    case TK_SSRF_BAD_URL:
    case TK_SSRF_BAD_SCHEME:
    case TK_SSRF_USERINFO:
    case TK_SSRF_BAD_PORT:
    case TK_SSRF_DENIED_HOST:
    case TK_SSRF_BLOCKED_ADDRESS:
    case TK_SSRF_REDIRECT_BLOCKED:
    case TK_SSRF_TOO_MANY_REDIRECTS:
        return 1;
    default:
        return 0;
    }
}

static const char *hint_of(tk_ssrf_code c)
{
    switch (c) {
    case TK_SSRF_BAD_URL:
    case TK_SSRF_BAD_SCHEME:
    case TK_SSRF_USERINFO:
        return "Only absolute http:// and https:// URLs without a user name or password can be "
               "fetched.";
    case TK_SSRF_BAD_PORT:
        return "Only ports 80 and 443 (and any the operator allows in SSRF_ALLOWED_PORTS) can be "
               "fetched.";
    case TK_SSRF_DENIED_HOST:
        return "The server's operator has denied this host (SSRF_DENY).";
    case TK_SSRF_BLOCKED_ADDRESS:
        return "Nothing was sent to it: fetches made for the agent may not reach loopback, "
               "private, link-local, cloud metadata or other internal addresses. Do not retry "
               "it; if the user needs an intranet host, the server's operator can admit it with "
               "SSRF_ALLOW.";
    case TK_SSRF_REDIRECT_BLOCKED:
        return "The site redirected to a URL the outbound fetch check refuses; that target was "
               "not fetched.";
    case TK_SSRF_TOO_MANY_REDIRECTS:
        return "The site redirected more often than FETCH_MAX_REDIRECTS allows.";
    case TK_SSRF_DNS_FAILED:
        return "The host name could not be resolved; check the URL.";
    case TK_SSRF_TIMEOUT:
        return "No complete response arrived within FETCH_TIMEOUT; the site may be slow or down.";
    case TK_SSRF_FETCH_FAILED:
        return "The connection or the HTTP exchange failed; the site may be down.";
    case TK_SSRF_TOO_LARGE:
        return "The response is larger than FETCH_MAX_BYTES.";
    case TK_SSRF_CANCELLED:
        return "The turn was stopped.";
    default:
        return "";
    }
}

static void hops_line(tk_buf *b, const tk_ssrf_result *r, const char *tail)
{
    tk_buf_append_str(b, "Redirects: ");
    for (size_t i = 0; i < r->nhops; i++)
        tk_buf_printf(b, "%s%s (%ld)", i ? " -> " : "", r->hops[i].url, r->hops[i].status);
    if (tail)
        tk_buf_printf(b, " -> %s", tail);
    tk_buf_append_str(b, "\n");
}

static json_t *hops_json(const tk_ssrf_result *r)
{
    json_t *a = json_array();
    for (size_t i = 0; i < r->nhops; i++)
        json_array_append_new(a, tk_json_obj("url", json_string(r->hops[i].url), "status",
                                             json_integer(r->hops[i].status), "address",
                                             json_string(r->hops[i].address), NULL));
    return a;
}

/* Strings from the network are made valid UTF-8 before they reach JSON. */
static json_t *jstr(const char *s)
{
    tk_buf b;
    tk_buf_init(&b, 64u << 10);
    html_text_utf8(s ? s : "", s ? strlen(s) : 0, 0, &b);
    json_t *j = json_stringn(b.data ? b.data : "", b.len);
    tk_buf_free(&b);
    return j;
}

static void shape_failure(const char *url, const tk_ssrf_result *r, agent_result *out,
                          json_t **attrs)
{
    const char *code = tk_ssrf_code_str(r->code);
    const char *shown = r->final_url ? r->final_url : url;
    tk_buf b;
    tk_buf_init(&b, RESULT_MAX);
    if (r->code == TK_SSRF_CANCELLED) {
        tk_buf_printf(&b, "stopped: the turn was cancelled while fetching %s\n", shown);
    } else {
        int refused = is_refusal(r->code);
        tk_buf_printf(&b, "web_fetch %s: %s", refused ? "refused this URL" : "failed", code);
        if (r->code == TK_SSRF_REDIRECT_BLOCKED)
            tk_buf_printf(&b, " (the redirect target: %s)", tk_ssrf_code_str(r->cause));
        tk_buf_printf(&b, "\nURL: %s\n", r->nhops ? r->hops[0].url : shown);
        if (r->nhops > 0 && (r->code == TK_SSRF_REDIRECT_BLOCKED ||
                             r->code == TK_SSRF_TOO_MANY_REDIRECTS || r->nhops > 1))
            hops_line(&b, r, refused ? "refused" : NULL);
        tk_buf_printf(&b, "Reason: %s\n%s\n", r->reason, hint_of(r->code));
    }
    char *text = tk_buf_steal(&b, NULL);
    tk_buf v;
    tk_buf_init(&v, RESULT_MAX);
    html_text_utf8(text, strlen(text), 0, &v);
    free(text);
    agent_result_take(out, tk_buf_steal(&v, NULL), 1);
    json_t *data =
        tk_json_obj("url", jstr(url), "code", json_string(code), "reason", jstr(r->reason), "hops",
                    hops_json(r), "elapsed_ms", json_integer(r->elapsed_ms), NULL);
    if (r->final_url)
        json_object_set_new(data, "final_url", jstr(r->final_url));
    if (r->code == TK_SSRF_REDIRECT_BLOCKED)
        json_object_set_new(data, "cause", json_string(tk_ssrf_code_str(r->cause)));
    out->data = data;
    *attrs =
        tk_json_obj("url", jstr(url), "code", json_string(code), "status", json_integer(r->status),
                    "bytes", json_integer(0), "reason", jstr(r->reason), NULL);
    if (r->code == TK_SSRF_REDIRECT_BLOCKED)
        json_object_set_new(*attrs, "cause", json_string(tk_ssrf_code_str(r->cause)));
    if (r->nhops > 0)
        json_object_set_new(*attrs, "redirects", json_integer((json_int_t)r->nhops - 1));
}

/* The body as text (for JSON and text formats); html_text_utf8 keeps it valid. */
static void body_text(enum format f, const tk_ssrf_result *r, int cp1252, tk_buf *text,
                      const char **note)
{
    const char *body = r->body.data ? r->body.data : "";
    size_t len = r->body.len;
    if (len >= 3 && !memcmp(body, "\xEF\xBB\xBF", 3))
        body += 3, len -= 3;
    if (f == F_JSON) {
        char err[160];
        json_t *j = r->truncated ? NULL : tk_json_parse(body, len, len + 1, err, sizeof err);
        if (j) {
            char *s = json_dumps(j, JSON_INDENT(2) | JSON_ENCODE_ANY);
            json_decref(j);
            if (s) {
                html_text_utf8(s, strlen(s), 0, text);
                free(s);
                return;
            }
        }
        *note = r->truncated ? "the JSON is cut at the fetch cap, so it is shown as it came"
                             : "this is not valid JSON, so it is shown as it came";
    }
    html_text_utf8(body, len, cp1252, text);
}

void web_fetch_shape(const char *url, tk_status st, const tk_ssrf_result *r, size_t max_chars,
                     const char *cap_name, agent_result *out, json_t **attrs)
{
    (void)st;
    *attrs = NULL;
    if (r->code != TK_SSRF_OK) {
        shape_failure(url, r, out, attrs);
        return;
    }
    if (max_chars < 1)
        max_chars = 1;
    char type[128], charset[64];
    media_type(r->content_type, type, sizeof type, charset, sizeof charset);
    const char *body = r->body.data ? r->body.data : "";
    size_t blen = r->body.len;
    enum format f = format_of(type, body, blen);
    int cp1252 = html_text_charset_is_1252(charset);

    tk_buf b;
    tk_buf_init(&b, RESULT_MAX);
    tk_buf_printf(&b, "URL: %s\nStatus: %ld\nContent-Type: %s\n", r->final_url ? r->final_url : url,
                  r->status, r->content_type[0] ? r->content_type : "(none)");
    if (r->nhops > 1)
        hops_line(&b, r, NULL);

    html_text_doc doc;
    memset(&doc, 0, sizeof doc);
    tk_buf text;
    tk_buf_init(&text, RESULT_MAX);
    const char *note = NULL;
    if (f == F_HTML) {
        tk_arena *a = tk_arena_new(0);
        tk_url base;
        const char *fu = r->final_url ? r->final_url : url;
        int have_base = tk_url_parse(a, fu, strlen(fu), &base, NULL) == TK_OK;
        html_text_opts o = {.charset = charset[0] ? charset : NULL};
        html_text_reduce(body, blen, have_base ? &base : NULL, &o, &doc);
        tk_arena_free(a);
        if (doc.title[0])
            tk_buf_printf(&b, "Title: %s\n", doc.title);
        tk_buf_append(&text, doc.text, doc.text_len);
    } else if (f != F_OTHER) {
        body_text(f, r, cp1252, &text, &note);
    }
    tk_buf_printf(&b, "Size: %zu bytes", blen);
    if (r->truncated)
        tk_buf_printf(&b,
                      " (the response is larger: only its first %zu bytes were read, "
                      "FETCH_MAX_BYTES)",
                      blen);
    tk_buf_append_str(&b, "\n");
    if (note)
        tk_buf_printf(&b, "Note: %s\n", note);

    size_t total = 0, cut = text.len, shown_chars = 0;
    size_t nlinks = 0;
    int cut_text = 0;
    if (f == F_OTHER) {
        tk_buf_printf(&b,
                      "\nThe response is %s, %zu bytes; its content is not shown (web_fetch "
                      "returns HTML, JSON and text).\n",
                      type[0] ? type : "of an unknown type", blen);
    } else if (text.len == 0) {
        tk_buf_append_str(&b, blen == 0 ? "\n(the response has no body)\n"
                                        : "\n(no readable text in the response)\n");
    } else {
        cut = cut_at(text.data, text.len, max_chars, &total);
        cut_text = cut < text.len || doc.truncated;
        shown_chars = tk_utf8_chars(text.data, cut);
        tk_buf_append_str(&b, "\n");
        tk_buf_append(&b, text.data, cut);
        tk_buf_append_str(&b, "\n");
        if (cut_text)
            tk_buf_printf(&b,
                          "\n[... truncated: %zu of %s%zu characters shown (%s is %zu); fetch "
                          "again with a larger max_chars to see more]\n",
                          shown_chars, doc.truncated ? "more than " : "", total, cap_name,
                          max_chars);
        if (f == F_HTML) {
            for (size_t i = 0; i < doc.nlinks; i++)
                if (doc.links[i].at != SIZE_MAX && doc.links[i].at <= cut)
                    nlinks = i + 1;
            if (nlinks) {
                tk_buf_append_str(&b, "\nLinks:\n");
                for (size_t i = 0; i < nlinks; i++) {
                    const html_link *l = &doc.links[i];
                    tk_buf_printf(&b, "[%zu] %s%s%s%s\n", i + 1, l->url, l->text[0] ? " (" : "",
                                  l->text, l->text[0] ? ")" : "");
                }
                if (!cut_text && doc.links_more)
                    tk_buf_printf(&b, "[... and %zu more links, not numbered]\n", doc.links_more);
            }
        }
    }
    char *raw = tk_buf_steal(&b, NULL);
    tk_buf v;
    tk_buf_init(&v, RESULT_MAX);
    html_text_utf8(raw, strlen(raw), 0, &v);
    free(raw);
    agent_result_take(out, tk_buf_steal(&v, NULL), r->status >= 400);

    json_t *data = tk_json_obj(
        "url", jstr(url), "final_url", jstr(r->final_url ? r->final_url : url), "status",
        json_integer(r->status), "content_type", jstr(r->content_type), "format",
        json_string(format_name(f)), "bytes", json_integer((json_int_t)blen), "body_truncated",
        json_boolean(r->truncated), "text_truncated", json_boolean(cut_text), "chars_shown",
        json_integer((json_int_t)shown_chars), "chars_total", json_integer((json_int_t)total),
        "links", json_integer((json_int_t)nlinks), "hops", hops_json(r), "elapsed_ms",
        json_integer(r->elapsed_ms), "code", json_string("ok"), NULL);
    if (f == F_HTML)
        json_object_set_new(data, "title", jstr(doc.title));
    out->data = data;
    *attrs = tk_json_obj("url", jstr(url), "code", json_string("ok"), "status",
                         json_integer(r->status), "bytes", json_integer((json_int_t)blen),
                         "content_type", jstr(r->content_type), NULL);
    if (r->final_url && strcmp(r->final_url, url) != 0)
        json_object_set_new(*attrs, "final_url", jstr(r->final_url));
    if (r->nhops > 1)
        json_object_set_new(*attrs, "redirects", json_integer((json_int_t)r->nhops - 1));
    if (r->truncated)
        json_object_set_new(*attrs, "body_truncated", json_true());
    html_text_doc_free(&doc);
    tk_buf_free(&text);
}

/* ------------------------------------------------------------------ tool */

static const char *const ACCEPT =
    "Accept: text/html,application/xhtml+xml,application/json;q=0.9,text/plain;q=0.8,*/*;q=0.5";

static void run_web_fetch(agent_call *call, const json_t *args, agent_result *out)
{
    json_t *ju = json_object_get(args, "url");
    if (!json_is_string(ju) || json_string_length(ju) == 0) {
        agent_result_error(out, "\"url\" (an http:// or https:// URL) is required");
        return;
    }
    if (strlen(json_string_value(ju)) != json_string_length(ju)) {
        agent_result_error(out, "the URL contains a NUL byte");
        return;
    }
    const app_ctx *a = app_get();
    size_t cap = (size_t)a->cfg->web_fetch_max_chars, max = cap;
    const char *cap_name = "WEB_FETCH_MAX_CHARS";
    int64_t asked;
    tk_status ms = tk_json_int(args, "max_chars", &asked);
    if (ms == TK_EINVAL) {
        agent_result_error(out, "\"max_chars\" must be an integer (at most %zu)", cap);
        return;
    }
    if (ms == TK_OK && asked > 0 && (size_t)asked < cap) {
        max = (size_t)TK_MAX(asked, (int64_t)WEB_FETCH_MIN_CHARS);
        cap_name = "max_chars";
    }
    if (!a->ssrf) {
        agent_result_error(out, "web_fetch is not available: the outbound fetch policy is not "
                                "loaded");
        return;
    }
    const char *const headers[] = {ACCEPT, "Accept-Language: en;q=0.9, *;q=0.5", NULL};
    tk_ssrf_fetch_opts o = {.method = "GET",
                            .headers = headers,
                            .allow_truncation = 1,
                            .cancel = agent_call_cancel_flag(call)};
    tk_ssrf_result r;
    tk_status st = tk_ssrf_fetch(a->ssrf, json_string_value(ju), &o, &r);
    json_t *attrs = NULL;
    web_fetch_shape(json_string_value(ju), st, &r, max, cap_name, out, &attrs);
    if (attrs)
        agent_call_set_attrs(call, attrs);
    tk_ssrf_result_free(&r);
}

static const agent_tool web_fetch_tool = {
    .name = "web_fetch",
    .lane = AGENT_LANE_FAST,
    .description =
        "Fetch a web page or API URL (http or https) and read it as text: HTML comes back as the "
        "page's title, main text and a numbered list of its links (absolute URLs); JSON "
        "pretty-printed; plain text as it is. Long pages are cut (max_chars). Internal, "
        "private and loopback addresses are refused by the server.",
    .parameters = "{\"type\":\"object\",\"properties\":{\"url\":{\"type\":\"string\","
                  "\"description\":\"an absolute http:// or https:// URL\"},\"max_chars\":{"
                  "\"type\":\"integer\",\"minimum\":100,\"description\":\"characters of text to "
                  "return at most (the server's limit applies)\"}},\"required\":[\"url\"]}",
    .run = run_web_fetch,
};

void web_fetch_register(void)
{
    agent_tools_register(&web_fetch_tool);
}
