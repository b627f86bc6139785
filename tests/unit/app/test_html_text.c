/* The HTML-to-text reducer (src/app/tools/html_text.c). */
#include <stdint.h>

#include "app/tools/html_text.h"
#include "lib/arena.h"
#include "tk_test.h"

static tk_arena *arena;
static tk_url base;

static const tk_url *page(const char *url)
{
    if (!arena)
        arena = tk_arena_new(0);
    CHECK(tk_url_parse(arena, url, strlen(url), &base, NULL) == TK_OK);
    return &base;
}

static void reduce(const char *html, html_text_doc *d)
{
    html_text_reduce(html, strlen(html), page("https://example.com/dir/page.html"), NULL, d);
}

static int contains(const char *hay, const char *needle)
{
    return strstr(hay, needle) != NULL;
}

/* Valid UTF-8 without NUL or controls but tab and newline. */
static int clean_utf8(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        if (c < 0x80) {
            if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7F)
                return 0;
            i++;
            continue;
        }
        size_t k = (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : 9;
        if (k == 9 || i + k >= n)
            return 0;
        for (size_t j = 1; j <= k; j++)
            if ((p[i + j] & 0xC0) != 0x80)
                return 0;
        i += k + 1;
    }
    return 1;
}

static const char ARTICLE[] =
    "<!DOCTYPE html><html><head><meta charset=\"utf-8\">"
    "<title>  Example &amp; Co \xE2\x80\x94\n Home </title>"
    "<style>body { color: red } p::after { content: 'STYLE' }</style>"
    "<script>var x = \"<p>SCRIPT</p>\"; if (a < b) {}</script>"
    "</head><body>"
    "<header class=\"site\"><a href=\"/\">Logo</a><nav><a href=\"/about\">About</a></nav></header>"
    "<main><article>"
    "<header><h1>The Headline</h1><p>By Ann</p></header>"
    "<p>First paragraph with a <a href=\"other.html\">relative link</a>\n   and  an "
    "<a href=\"https://ext.example.org/x?a=1&amp;b=2\">absolute one</a>.</p>"
    "<h2>Details</h2><p>Second paragraph.<br>After a break.</p>"
    "<aside>ASIDE related stories</aside>"
    "<form><label>FORM search</label><input name=q><button>Go</button></form>"
    "<p>Again the <a href=\"other.html\">same link</a>.</p>"
    "</article></main>"
    "<footer>FOOTER copyright <a href=\"/legal\">Legal</a></footer>"
    "</body></html>";

TEST(html_title_and_main_text)
{
    html_text_doc d;
    reduce(ARTICLE, &d);
    CHECK_STR(d.title, "Example & Co \xE2\x80\x94 Home");
    CHECK(d.main_only);
    CHECK(!d.truncated);
    /* the article's own header is kept; the page's banner, nav, aside, form, footer are not */
    CHECK(strncmp(d.text,
                  "# The Headline\n\nBy Ann\n\nFirst paragraph with a relative link [1] "
                  "and an absolute one [2].\n\n## Details\n\nSecond paragraph.\nAfter a "
                  "break.\n\nAgain the same link [1].",
                  d.text_len) == 0);
    CHECK_INT(d.text_len, ==, strlen(d.text));
    CHECK(!contains(d.text, "Logo") && !contains(d.text, "About"));
    CHECK(!contains(d.text, "ASIDE") && !contains(d.text, "FORM") && !contains(d.text, "Go"));
    CHECK(!contains(d.text, "FOOTER") && !contains(d.text, "Legal"));
    CHECK(!contains(d.text, "SCRIPT") && !contains(d.text, "STYLE"));
    CHECK(!contains(d.text, "Example & Co")); /* the title is apart */
    html_text_doc_free(&d);
}

TEST(html_without_main_keeps_the_body_and_drops_the_chrome)
{
    html_text_doc d;
    reduce("<body><nav>Menu</nav><div role=\"navigation\">Crumbs</div><div role=banner>B</div>"
           "<section><header><h2>Section head</h2></header><p>Body text</p></section>"
           "<header>Site banner</header><footer>Site footer</footer></body>",
           &d);
    CHECK(!d.main_only);
    CHECK_STR(d.text, "## Section head\n\nBody text");
    html_text_doc_free(&d);
}

TEST(html_links_resolved_numbered_once)
{
    html_text_doc d;
    reduce("<p><a href=\"other.html\">Rel</a> <a href=\"/abs/path?x=1\">Root</a> "
           "<a href=\"//cdn.example.net/a\">Proto</a> <a href=\"HTTP://EXAMPLE.com:80/./b/../c\">"
           "Norm</a> <a href=\"#top\">Top</a> <a href=\"mailto:a@example.com\">Mail</a> "
           "<a href=\"javascript:alert(1)\">JS</a> <a href=\"?q=1&copy=2&amp;r=3\">Query</a> "
           "<a href=\" other.html \">Again</a> <a href=\"ftp://example.com/f\">FTP</a> "
           "<a href=\"http://[::1]:99999/\">Badport</a> <a>No href</a>.</p>",
           &d);
    CHECK_INT(d.nlinks, ==, 5);
    CHECK_STR(d.links[0].url, "https://example.com/dir/other.html");
    CHECK_STR(d.links[0].text, "Rel");
    CHECK_STR(d.links[1].url, "https://example.com/abs/path?x=1");
    CHECK_STR(d.links[2].url, "https://cdn.example.net/a");
    CHECK_STR(d.links[3].url, "http://example.com/c");
    CHECK_STR(d.links[4].url, "https://example.com/dir/page.html?q=1&copy=2&r=3");
    CHECK(contains(d.text, "Rel [1] Root [2] Proto [3] Norm [4] Top Mail JS Query [5] Again [1] "
                           "FTP Badport No href."));
    /* each link's offset is just past its first marker */
    for (size_t i = 0; i < d.nlinks; i++) {
        char m[16];
        snprintf(m, sizeof m, "[%zu]", i + 1);
        CHECK(d.links[i].at >= strlen(m) && d.links[i].at <= d.text_len);
        CHECK(memcmp(d.text + d.links[i].at - strlen(m), m, strlen(m)) == 0);
    }
    html_text_doc_free(&d);
}

TEST(html_base_href_and_no_base)
{
    html_text_doc d;
    reduce("<head><base href=\"https://static.example.org/docs/\"></head><a href=\"guide.html\">G"
           "</a>",
           &d);
    CHECK_INT(d.nlinks, ==, 1);
    CHECK_STR(d.links[0].url, "https://static.example.org/docs/guide.html");
    html_text_doc_free(&d);
    const char *h = "<a href=\"guide.html\">rel</a> <a href=\"https://example.org/x\">abs</a>";
    html_text_reduce(h, strlen(h), NULL, NULL, &d);
    CHECK_INT(d.nlinks, ==, 1);
    CHECK_STR(d.links[0].url, "https://example.org/x");
    CHECK_STR(d.text, "rel abs [1]");
    html_text_doc_free(&d);
}

TEST(html_scripts_styles_and_hidden_dropped)
{
    html_text_doc d;
    reduce("<p>a</p><script type=module>document.write('<p>S1</p>') // </scrip</script>"
           "<SCRIPT>S2</SCRIPT ><style>.x{}</style ><noscript>Enable JS</noscript>"
           "<template><p>T</p></template><svg><title>SVG title</title><text>S</text></svg>"
           "<!-- a <p>comment</p> --><div hidden>H1</div><div aria-hidden=\"true\">H2</div>"
           "<div aria-hidden=\"false\">shown</div><iframe>IF</iframe><textarea>TA</textarea>"
           "<select><option>O1</select><object>OB</object><canvas>C</canvas><p>b</p>",
           &d);
    CHECK_STR(d.text, "a\n\nshown\n\nb");
    CHECK_STR(d.title, "");
    html_text_doc_free(&d);
}

TEST(html_entities_decoded)
{
    html_text_doc d;
    reduce("<p>&lt;tag&gt; &amp;&amp &copy; &copy2024 &#169; &#xA9; &#X1F600; &eacute;t&eacute; "
           "&Omega;&hellip;&euro; &#150; &#0; &#xD800; &#x110000; &#99999999999; &foo; &notit; "
           "&#; &#x; & x&nbsp;&nbsp;y</p>",
           &d);
    CHECK_STR(d.text, "<tag> && \xC2\xA9 \xC2\xA9"
                      "2024 \xC2\xA9 \xC2\xA9 \xF0\x9F\x98\x80 \xC3\xA9t\xC3\xA9 "
                      "\xCE\xA9\xE2\x80\xA6\xE2\x82\xAC \xE2\x80\x93 \xEF\xBF\xBD \xEF\xBF\xBD "
                      "\xEF\xBF\xBD \xEF\xBF\xBD &foo; \xC2\xACit; &#; &#x; & x y");
    html_text_doc_free(&d);
}

TEST(html_charsets_and_invalid_utf8)
{
    html_text_doc d;
    /* windows-1252 from the Content-Type */
    const char *h = "<title>Caf\xE9</title><p>\x93quoted\x94 \x80 na\xEFve</p>";
    html_text_opts o = {.charset = "ISO-8859-1"};
    html_text_reduce(h, strlen(h), NULL, &o, &d);
    CHECK_STR(d.title, "Caf\xC3\xA9");
    CHECK_STR(d.text, "\xE2\x80\x9Cquoted\xE2\x80\x9D \xE2\x82\xAC na\xC3\xAFve");
    html_text_doc_free(&d);
    /* from <meta http-equiv> when the header says nothing */
    h = "<meta http-equiv=\"Content-Type\" content=\"text/html; charset=windows-1252\"><p>\xE9</p>";
    html_text_reduce(h, strlen(h), NULL, NULL, &d);
    CHECK_STR(d.text, "\xC3\xA9");
    html_text_doc_free(&d);
    /* UTF-8: invalid bytes become U+FFFD, controls are dropped */
    h = "<p>ok \xC3\xA9 \xFF \xC0\xAF \xED\xA0\x80 \xE2\x82 x\x01\x7F\xC2\x85y</p>";
    html_text_reduce(h, strlen(h), NULL, NULL, &d);
    CHECK(clean_utf8(d.text, d.text_len));
    CHECK(strncmp(d.text, "ok \xC3\xA9 \xEF\xBF\xBD \xEF\xBF\xBD\xEF\xBF\xBD", 13) == 0);
    CHECK(contains(d.text, "xy"));
    html_text_doc_free(&d);
    CHECK(html_text_charset_is_1252("Windows-1252"));
    CHECK(html_text_charset_is_1252("\"latin1\""));
    CHECK(html_text_charset_is_1252("us-ascii"));
    CHECK(!html_text_charset_is_1252("utf-8"));
    CHECK(!html_text_charset_is_1252("shift_jis"));
    CHECK(!html_text_charset_is_1252(NULL));
}

TEST(html_lists_tables_pre)
{
    html_text_doc d;
    reduce("<h3>Lists</h3><ul><li>one<li>two<ul><li>nested a<li>nested b</ul><li>three</ul>"
           "<ol><li>first</li><li><p>second</p></li></ol>"
           "<table><tr><th>Name<th>Value<tr><td>a<td><p>1</p><tr><td>b</td><td>2</td></table>"
           "<pre>\nint main(void) {\n    return  0;\n}</pre><p>  spaced \n\t out  </p>",
           &d);
    CHECK_STR(d.text, "### Lists\n\n- one\n- two\n  - nested a\n  - nested b\n- three\n\n"
                      "1. first\n2. second\n\nName | Value\na | 1\nb | 2\n\n"
                      "```\nint main(void) {\n    return  0;\n}\n```\n\nspaced out");
    html_text_doc_free(&d);
}

TEST(html_main_fallbacks)
{
    html_text_doc d;
    /* a <main> that scripts would fill: the body is used */
    reduce("<body><div id=app><main></main></div><p>Server text</p></body>", &d);
    CHECK(!d.main_only);
    CHECK_STR(d.text, "Server text");
    html_text_doc_free(&d);
    /* the whole page inside one form (old web frameworks): read leniently */
    reduce("<body><form id=aspnetForm><h1>Webforms</h1><p>All inside a form.</p></form></body>",
           &d);
    CHECK_STR(d.text, "# Webforms\n\nAll inside a form.");
    html_text_doc_free(&d);
    /* role=main counts as main */
    reduce("<div>chrome</div><div role=\"main\"><p>content</p></div>", &d);
    CHECK(d.main_only);
    CHECK_STR(d.text, "content");
    html_text_doc_free(&d);
}

TEST(html_text_cap)
{
    /* 3-byte characters: the cut never splits one */
    tk_buf b;
    tk_buf_init(&b, 1 << 20);
    tk_buf_append_str(&b, "<p>");
    for (int i = 0; i < 1000; i++)
        tk_buf_append_str(&b, "\xE2\x82\xAC");
    tk_buf_append_str(&b, "</p>");
    html_text_doc d;
    for (size_t cap = 1; cap < 40; cap++) {
        html_text_opts o = {.max_text = cap};
        html_text_reduce(b.data, b.len, NULL, &o, &d);
        CHECK(d.truncated);
        CHECK_INT(d.text_len, <=, cap);
        CHECK_INT(d.text_len % 3, ==, 0);
        CHECK(clean_utf8(d.text, d.text_len));
        html_text_doc_free(&d);
    }
    html_text_reduce(b.data, b.len, NULL, NULL, &d);
    CHECK(!d.truncated);
    CHECK_INT(d.text_len, ==, 3000);
    html_text_doc_free(&d);
    tk_buf_free(&b);
}

TEST(html_link_cap)
{
    tk_buf b;
    tk_buf_init(&b, 1 << 20);
    for (int i = 0; i < 10; i++)
        tk_buf_printf(&b, "<a href=\"/p%d\">l%d</a> <a href=\"/p%d\">again</a> ", i, i, i);
    html_text_doc d;
    html_text_opts o = {.max_links = 3};
    html_text_reduce(b.data, b.len, page("http://example.com/"), &o, &d);
    CHECK_INT(d.nlinks, ==, 3);
    CHECK_INT(d.links_more, ==, 14); /* the anchors of the 7 links beyond the cap */
    CHECK(contains(d.text, "l2 [3] again [3] l3 again l4"));
    CHECK(!contains(d.text, "[4]"));
    html_text_doc_free(&d);
    tk_buf_free(&b);
}

TEST(html_title_and_link_text_caps)
{
    tk_buf b;
    tk_buf_init(&b, 1 << 20);
    tk_buf_append_str(&b, "<title>");
    for (int i = 0; i < 400; i++)
        tk_buf_append_str(&b, "ab ");
    tk_buf_append_str(&b, "</title><a href=\"/x\">");
    for (int i = 0; i < 400; i++)
        tk_buf_append_str(&b, "word ");
    tk_buf_append_str(&b, "</a>");
    html_text_doc d;
    html_text_reduce(b.data, b.len, page("http://example.com/"), NULL, &d);
    CHECK_INT(strlen(d.title), <=, HTML_TEXT_TITLE_MAX);
    CHECK_INT(strlen(d.title), >, HTML_TEXT_TITLE_MAX - 4);
    CHECK_INT(d.nlinks, ==, 1);
    CHECK_INT(strlen(d.links[0].text), <=, HTML_TEXT_LINK_TEXT_MAX);
    CHECK(strncmp(d.links[0].text, "word word", 9) == 0);
    html_text_doc_free(&d);
    tk_buf_free(&b);
}

TEST(html_deep_and_broken_markup)
{
    tk_buf b;
    tk_buf_init(&b, 16 << 20);
    for (int i = 0; i < 100000; i++)
        tk_buf_append_str(&b, "<div><span>");
    tk_buf_append_str(&b, "deep");
    for (int i = 0; i < 100000; i++)
        tk_buf_append_str(&b, "<li><td><tr><p></a></div>");
    html_text_doc d;
    html_text_reduce(b.data, b.len, NULL, NULL, &d);
    CHECK(contains(d.text, "deep"));
    html_text_doc_free(&d);
    tk_buf_free(&b);
    /* constructs cut by the end of the input */
    static const char *const cut[] = {"<p>x</p><a href=\"y", "<p>x</p><!-- never closed",
                                      "<p>x</p><script>s",   "<p>x</p><title>t",
                                      "<p>x</p><",           "<p>x</p></",
                                      "<p>x</p><a href=y",   "<p>x</p>&#x1F6",
                                      "<p>x</p><!DOCTYPE",   "<p>x</p>\xE2\x82"};
    for (size_t i = 0; i < TK_ARRAY_LEN(cut); i++) {
        html_text_reduce(cut[i], strlen(cut[i]), NULL, NULL, &d);
        CHECK(strncmp(d.text, "x", 1) == 0);
        CHECK(clean_utf8(d.text, d.text_len));
        html_text_doc_free(&d);
    }
    /* stray end tags, a '<' that is text, attributes without values, odd quotes */
    reduce("</div></p><p a b=c d='e' f=\"g>h\">1 < 2 and 3<4 </nav></header>ok</p>", &d);
    CHECK_STR(d.text, "1 < 2 and 3<4 ok");
    html_text_doc_free(&d);
    html_text_reduce("", 0, NULL, NULL, &d);
    CHECK_STR(d.text, "");
    CHECK_STR(d.title, "");
    CHECK_INT(d.nlinks, ==, 0);
    html_text_doc_free(&d);
}

TEST(html_utf8_sanitiser)
{
    tk_buf b;
    tk_buf_init(&b, 1 << 10);
    CHECK_INT(html_text_utf8("a\x00"
                             "b\xFF\x1B"
                             "c\t\n\xC3\xA9",
                             10, 0, &b),
              ==, 10);
    CHECK_STR(tk_buf_cstr(&b), "ab\xEF\xBF\xBD"
                               "c\t\n\xC3\xA9");
    tk_buf_free(&b);
    tk_buf_init(&b, 1 << 10);
    html_text_utf8("\xE9\x80\x81", 3, 1, &b); /* windows-1252; 0x81 is undefined (a C1) */
    CHECK_STR(tk_buf_cstr(&b), "\xC3\xA9\xE2\x82\xAC");
    tk_buf_free(&b);
    /* stops before a character that does not fit */
    tk_buf_init(&b, 4);
    CHECK_INT(html_text_utf8("ab\xE2\x82\xAC", 5, 0, &b), ==, 2);
    CHECK_STR(tk_buf_cstr(&b), "ab");
    tk_buf_free(&b);
}

TEST_MAIN()
