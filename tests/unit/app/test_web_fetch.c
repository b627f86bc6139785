/* web_fetch's result shaping (src/app/tools/web_fetch.c): a checked fetch's
 * outcome turned into what the model reads, the data the user sees and the
 * span's attributes. */
#include "app/tools/web_fetch.h"
#include "lib/json.h"
#include "tk_test.h"

/* A result as tk_ssrf_fetch leaves it. */
static void result(tk_ssrf_result *r, tk_ssrf_code code, long status, const char *url,
                   const char *ctype, const char *body, size_t len)
{
    memset(r, 0, sizeof *r);
    r->code = code;
    r->status = status;
    r->final_url = url ? strdup(url) : NULL;
    snprintf(r->content_type, sizeof r->content_type, "%s", ctype ? ctype : "");
    tk_buf_init(&r->body, 1 << 22);
    if (body)
        tk_buf_append(&r->body, body, len);
    if (url && code == TK_SSRF_OK) {
        r->hops[0].url = strdup(url);
        r->hops[0].status = status;
        snprintf(r->hops[0].address, sizeof r->hops[0].address, "93.184.215.14");
        r->nhops = 1;
    }
}

static void add_hop(tk_ssrf_result *r, const char *url, long status)
{
    r->hops[r->nhops].url = strdup(url);
    r->hops[r->nhops].status = status;
    r->nhops++;
}

struct shaped {
    agent_result res;
    json_t *attrs;
};

static void shape(const char *url, const tk_ssrf_result *r, size_t max, struct shaped *s)
{
    memset(s, 0, sizeof *s);
    web_fetch_shape(url, r->code == TK_SSRF_OK ? TK_OK : TK_EDENIED, r, max, "WEB_FETCH_MAX_CHARS",
                    &s->res, &s->attrs);
    CHECK(s->res.content != NULL);
    CHECK(s->attrs != NULL && s->res.data != NULL);
}

static void shaped_free(struct shaped *s)
{
    agent_result_free(&s->res);
    json_decref(s->attrs);
}

static int has(const char *hay, const char *needle)
{
    if (!strstr(hay, needle)) {
        fprintf(stderr, "    missing \"%s\" in:\n%s\n", needle, hay);
        return 0;
    }
    return 1;
}

static const char PAGE[] =
    "<html><head><title>Docs home</title></head><body><nav><a href=\"/menu\">Menu</a></nav>"
    "<main><h1>Welcome</h1><p>Read the <a href=\"guide/start.html\">guide</a> or the "
    "<a href=\"https://api.example.org/ref\">reference</a>.</p></main></body></html>";

TEST(web_fetch_html_result)
{
    tk_ssrf_result r;
    result(&r, TK_SSRF_OK, 200, "https://docs.example.com/en/index.html",
           "text/html; charset=utf-8", PAGE, strlen(PAGE));
    struct shaped s;
    shape("https://docs.example.com/en/index.html", &r, 20000, &s);
    const char *t = s.res.content;
    CHECK(!s.res.is_error);
    CHECK(has(t, "URL: https://docs.example.com/en/index.html\nStatus: 200\n"
                 "Content-Type: text/html; charset=utf-8\nTitle: Docs home\n"));
    CHECK(has(t, "\n# Welcome\n\nRead the guide [1] or the reference [2].\n"));
    CHECK(has(t, "\nLinks:\n[1] https://docs.example.com/en/guide/start.html (guide)\n"
                 "[2] https://api.example.org/ref (reference)\n"));
    CHECK(!strstr(t, "Menu") && !strstr(t, "Redirects:") && !strstr(t, "truncated"));
    CHECK_STR(tk_json_str(s.res.data, "format"), "html");
    CHECK_STR(tk_json_str(s.res.data, "title"), "Docs home");
    CHECK_INT(tk_json_int_or(s.res.data, "links", -1), ==, 2);
    CHECK_INT(tk_json_int_or(s.res.data, "status", -1), ==, 200);
    CHECK_STR(tk_json_str(s.attrs, "url"), "https://docs.example.com/en/index.html");
    CHECK_STR(tk_json_str(s.attrs, "code"), "ok");
    CHECK_INT(tk_json_int_or(s.attrs, "status", -1), ==, 200);
    CHECK_INT(tk_json_int_or(s.attrs, "bytes", -1), ==, (long long)strlen(PAGE));
    CHECK(json_object_get(s.attrs, "final_url") == NULL); /* the same as url */
    shaped_free(&s);
    tk_ssrf_result_free(&r);
}

TEST(web_fetch_redirects_listed_and_links_resolved_against_the_final_url)
{
    tk_ssrf_result r;
    result(&r, TK_SSRF_OK, 200, NULL, "text/html", PAGE, strlen(PAGE));
    add_hop(&r, "http://example.com/old", 301);
    add_hop(&r, "https://example.com/new/", 302);
    add_hop(&r, "https://www.example.com/final/page", 200);
    r.final_url = strdup("https://www.example.com/final/page");
    struct shaped s;
    shape("http://example.com/old", &r, 20000, &s);
    CHECK(has(s.res.content, "URL: https://www.example.com/final/page\n"));
    CHECK(has(s.res.content, "Redirects: http://example.com/old (301) -> https://example.com/new/ "
                             "(302) -> https://www.example.com/final/page (200)\n"));
    CHECK(has(s.res.content, "[1] https://www.example.com/final/guide/start.html (guide)"));
    CHECK_STR(tk_json_str(s.attrs, "final_url"), "https://www.example.com/final/page");
    CHECK_INT(tk_json_int_or(s.attrs, "redirects", -1), ==, 2);
    CHECK_INT(json_array_size(json_object_get(s.res.data, "hops")), ==, 3);
    shaped_free(&s);
    tk_ssrf_result_free(&r);
}

TEST(web_fetch_truncation_note_and_links_of_the_shown_part)
{
    tk_buf b;
    tk_buf_init(&b, 1 << 20);
    tk_buf_append_str(&b, "<p>Start <a href=\"/first\">first</a>.</p><p>");
    for (int i = 0; i < 500; i++)
        tk_buf_append_str(&b, "lorem ipsum ");
    tk_buf_append_str(&b, "</p><p><a href=\"/late\">late link</a></p>");
    tk_ssrf_result r;
    result(&r, TK_SSRF_OK, 200, "http://example.com/", "text/html", b.data, b.len);
    struct shaped s;
    memset(&s, 0, sizeof s);
    web_fetch_shape("http://example.com/", TK_OK, &r, 300, "max_chars", &s.res, &s.attrs);
    const char *t = s.res.content;
    CHECK(has(t, "[... truncated: "));
    CHECK(has(t, " characters shown (max_chars is 300); fetch again with a larger max_chars"));
    CHECK(has(t, "[1] http://example.com/first (first)"));
    CHECK(!strstr(t, "/late") && !strstr(t, "[2]"));
    CHECK(json_is_true(json_object_get(s.res.data, "text_truncated")));
    long long shown = tk_json_int_or(s.res.data, "chars_shown", -1);
    CHECK(shown > 200 && shown <= 300);
    CHECK_INT(tk_json_int_or(s.res.data, "chars_total", -1), >, 6000);
    /* the cut fell on a word boundary */
    const char *body = strstr(t, "Start first [1].");
    CHECK(body != NULL);
    const char *end = strstr(body, "\n\n[... truncated");
    CHECK(end != NULL && (end[-1] == 'm' || end[-1] == 'r'));
    shaped_free(&s);
    tk_ssrf_result_free(&r);
    tk_buf_free(&b);
}

TEST(web_fetch_json_pretty_printed)
{
    const char *body = "{\"name\":\"tusko\",\"tags\":[1,2],\"nested\":{\"ok\":true}}";
    tk_ssrf_result r;
    result(&r, TK_SSRF_OK, 200, "https://api.example.com/v1/x", "application/json", body,
           strlen(body));
    struct shaped s;
    shape("https://api.example.com/v1/x", &r, 20000, &s);
    CHECK(has(s.res.content, "{\n  \"name\": \"tusko\",\n  \"tags\": [\n    1,\n    2\n  ],\n"
                             "  \"nested\": {\n    \"ok\": true\n  }\n}"));
    CHECK_STR(tk_json_str(s.res.data, "format"), "json");
    shaped_free(&s);
    tk_ssrf_result_free(&r);
    /* +json types too; invalid JSON comes as it is, with a note */
    body = "{\"a\": 1,, oops";
    result(&r, TK_SSRF_OK, 200, "https://api.example.com/v1/y", "application/problem+json", body,
           strlen(body));
    shape("https://api.example.com/v1/y", &r, 20000, &s);
    CHECK(has(s.res.content, "Note: this is not valid JSON, so it is shown as it came\n"));
    CHECK(has(s.res.content, "\n{\"a\": 1,, oops\n"));
    shaped_free(&s);
    tk_ssrf_result_free(&r);
}

TEST(web_fetch_text_as_it_is)
{
    const char *body = "line one\n  indented <b>not html</b>\n\tTab\n";
    tk_ssrf_result r;
    result(&r, TK_SSRF_OK, 200, "http://example.com/a.txt", "text/plain", body, strlen(body));
    struct shaped s;
    shape("http://example.com/a.txt", &r, 20000, &s);
    CHECK(has(s.res.content, "\n\nline one\n  indented <b>not html</b>\n\tTab\n"));
    CHECK_STR(tk_json_str(s.res.data, "format"), "text");
    shaped_free(&s);
    tk_ssrf_result_free(&r);
    /* a latin-1 text and invalid UTF-8 both come out as valid UTF-8 */
    body = "caf\xE9 \x80";
    result(&r, TK_SSRF_OK, 200, "http://example.com/l1", "text/csv; charset=ISO-8859-1", body,
           strlen(body));
    shape("http://example.com/l1", &r, 20000, &s);
    CHECK(has(s.res.content, "caf\xC3\xA9 \xE2\x82\xAC"));
    shaped_free(&s);
    tk_ssrf_result_free(&r);
    body = "bad \xFF\xFE bytes";
    result(&r, TK_SSRF_OK, 200, "http://example.com/u", "text/plain; charset=utf-8", body,
           strlen(body));
    shape("http://example.com/u", &r, 20000, &s);
    CHECK(has(s.res.content, "bad \xEF\xBF\xBD\xEF\xBF\xBD bytes"));
    shaped_free(&s);
    tk_ssrf_result_free(&r);
}

TEST(web_fetch_other_types_described_not_dumped)
{
    static const char png[] = "\x89PNG\r\n\x1a\n\0\0\0\rIHDR binary";
    tk_ssrf_result r;
    result(&r, TK_SSRF_OK, 200, "http://example.com/i.png", "image/png", png, sizeof png - 1);
    struct shaped s;
    shape("http://example.com/i.png", &r, 20000, &s);
    CHECK(has(s.res.content, "The response is image/png, 23 bytes; its content is not shown"));
    CHECK(!strstr(s.res.content, "PNG") && !strstr(s.res.content, "IHDR"));
    CHECK(!s.res.is_error);
    CHECK_STR(tk_json_str(s.res.data, "format"), "other");
    shaped_free(&s);
    tk_ssrf_result_free(&r);
    /* without a Content-Type: sniffed */
    result(&r, TK_SSRF_OK, 200, "http://example.com/n", "", "  <!DOCTYPE html><title>T</title>x",
           34);
    shape("http://example.com/n", &r, 20000, &s);
    CHECK_STR(tk_json_str(s.res.data, "format"), "html");
    CHECK(has(s.res.content, "Content-Type: (none)\nTitle: T\n"));
    shaped_free(&s);
    tk_ssrf_result_free(&r);
    result(&r, TK_SSRF_OK, 200, "http://example.com/b", "", "ab\0cd", 5);
    shape("http://example.com/b", &r, 20000, &s);
    CHECK_STR(tk_json_str(s.res.data, "format"), "other");
    shaped_free(&s);
    tk_ssrf_result_free(&r);
}

TEST(web_fetch_empty_error_status_and_cut_body)
{
    tk_ssrf_result r;
    result(&r, TK_SSRF_OK, 204, "http://example.com/e", "", NULL, 0);
    struct shaped s;
    shape("http://example.com/e", &r, 20000, &s);
    CHECK(has(s.res.content, "Status: 204\n"));
    CHECK(has(s.res.content, "(the response has no body)"));
    shaped_free(&s);
    tk_ssrf_result_free(&r);
    /* a 404 is an error result, with the page's text */
    const char *nf = "<h1>Not found</h1><p>No such page.</p>";
    result(&r, TK_SSRF_OK, 404, "http://example.com/missing", "text/html", nf, strlen(nf));
    shape("http://example.com/missing", &r, 20000, &s);
    CHECK(s.res.is_error);
    CHECK(has(s.res.content, "Status: 404\n"));
    CHECK(has(s.res.content, "# Not found\n\nNo such page."));
    shaped_free(&s);
    tk_ssrf_result_free(&r);
    /* a body cut at FETCH_MAX_BYTES says so */
    result(&r, TK_SSRF_OK, 200, "http://example.com/big", "text/plain", "aaaa", 4);
    r.truncated = 1;
    shape("http://example.com/big", &r, 20000, &s);
    CHECK(has(s.res.content, "Size: 4 bytes (the response is larger: only its first 4 bytes were "
                             "read, FETCH_MAX_BYTES)"));
    CHECK(json_is_true(json_object_get(s.attrs, "body_truncated")));
    shaped_free(&s);
    tk_ssrf_result_free(&r);
}

TEST(web_fetch_refusal_is_a_clear_error_result)
{
    tk_ssrf_result r;
    result(&r, TK_SSRF_BLOCKED_ADDRESS, 0, "http://169.254.169.254/latest/meta-data/", NULL, NULL,
           0);
    snprintf(r.reason, sizeof r.reason,
             "169.254.169.254 is link-local (169.254.0.0/16): a cloud metadata service");
    struct shaped s;
    shape("http://169.254.169.254/latest/meta-data/", &r, 20000, &s);
    const char *t = s.res.content;
    CHECK(s.res.is_error);
    CHECK(has(t, "web_fetch refused this URL: blocked_address\n"
                 "URL: http://169.254.169.254/latest/meta-data/\n"
                 "Reason: 169.254.169.254 is link-local (169.254.0.0/16): a cloud metadata "
                 "service\nNothing was sent to it"));
    CHECK(has(t, "SSRF_ALLOW"));
    CHECK_STR(tk_json_str(s.attrs, "code"), "blocked_address");
    CHECK_STR(tk_json_str(s.attrs, "url"), "http://169.254.169.254/latest/meta-data/");
    CHECK_INT(tk_json_int_or(s.attrs, "status", -1), ==, 0);
    CHECK_INT(tk_json_int_or(s.attrs, "bytes", -1), ==, 0);
    CHECK(has(tk_json_str(s.attrs, "reason"), "link-local"));
    CHECK_STR(tk_json_str(s.res.data, "code"), "blocked_address");
    shaped_free(&s);
    tk_ssrf_result_free(&r);
    /* a URL that does not parse: no final URL at all */
    result(&r, TK_SSRF_BAD_SCHEME, 0, NULL, NULL, NULL, 0);
    snprintf(r.reason, sizeof r.reason, "the scheme \"file\" is not http or https");
    shape("file:///etc/passwd", &r, 20000, &s);
    CHECK(has(s.res.content, "web_fetch refused this URL: bad_scheme\nURL: file:///etc/passwd\n"));
    CHECK(has(s.res.content, "Only absolute http:// and https:// URLs"));
    shaped_free(&s);
    tk_ssrf_result_free(&r);
}

TEST(web_fetch_redirect_refusal_names_the_hops_and_the_cause)
{
    tk_ssrf_result r;
    result(&r, TK_SSRF_REDIRECT_BLOCKED, 302, "http://example.com/go", NULL, NULL, 0);
    r.cause = TK_SSRF_BLOCKED_ADDRESS;
    add_hop(&r, "http://example.com/go", 302);
    snprintf(r.reason, sizeof r.reason,
             "the redirect from http://example.com/go to http://10.0.0.5/admin was refused: "
             "10.0.0.5 is private (10.0.0.0/8) (blocked_address)");
    struct shaped s;
    shape("http://example.com/go", &r, 20000, &s);
    CHECK(s.res.is_error);
    CHECK(has(s.res.content, "web_fetch refused this URL: redirect_blocked (the redirect target: "
                             "blocked_address)\nURL: http://example.com/go\n"
                             "Redirects: http://example.com/go (302) -> refused\n"
                             "Reason: the redirect from http://example.com/go to "
                             "http://10.0.0.5/admin was refused"));
    CHECK_STR(tk_json_str(s.attrs, "code"), "redirect_blocked");
    CHECK_STR(tk_json_str(s.attrs, "cause"), "blocked_address");
    CHECK_STR(tk_json_str(s.res.data, "cause"), "blocked_address");
    shaped_free(&s);
    tk_ssrf_result_free(&r);
}

TEST(web_fetch_failures_and_cancel)
{
    static const struct {
        tk_ssrf_code code;
        const char *want;
    } cases[] = {
        {TK_SSRF_DNS_FAILED, "web_fetch failed: dns_failed\n"},
        {TK_SSRF_TIMEOUT, "web_fetch failed: timeout\n"},
        {TK_SSRF_FETCH_FAILED, "web_fetch failed: fetch_failed\n"},
        {TK_SSRF_TOO_MANY_REDIRECTS, "web_fetch refused this URL: too_many_redirects\n"},
        {TK_SSRF_CANCELLED, "stopped: the turn was cancelled while fetching http://x.example/"},
    };
    for (size_t i = 0; i < TK_ARRAY_LEN(cases); i++) {
        tk_ssrf_result r;
        result(&r, cases[i].code, 0, "http://x.example/", NULL, NULL, 0);
        snprintf(r.reason, sizeof r.reason, "why \xFF not");
        struct shaped s;
        shape("http://x.example/", &r, 20000, &s);
        CHECK(s.res.is_error);
        CHECK(has(s.res.content, cases[i].want));
        CHECK_STR(tk_json_str(s.attrs, "code"), tk_ssrf_code_str(cases[i].code));
        /* bytes from the network never break the JSON */
        CHECK(tk_json_str(s.attrs, "reason") != NULL);
        shaped_free(&s);
        tk_ssrf_result_free(&r);
    }
}

TEST_MAIN()
