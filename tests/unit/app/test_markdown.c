/* Markdown to safe HTML (app/markdown.c): what model output may contain must
 * come out as text, never as markup, script or a dangerous link. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "app/markdown.h"
#include "tk_test.h"

static char *md(const char *s)
{
    return app_markdown_html(s, strlen(s));
}

#define CHECK_HAS(html, needle)                                                                    \
    do {                                                                                           \
        if (!strstr((html), (needle)))                                                             \
            TK_TEST_FAIL("expected %s in:\n%s", (needle), (html));                                 \
    } while (0)
#define CHECK_HASNT(html, needle)                                                                  \
    do {                                                                                           \
        if (strcasestr((html), (needle)))                                                          \
            TK_TEST_FAIL("did not expect %s in:\n%s", (needle), (html));                           \
    } while (0)

TEST(markdown_basics)
{
    char *h = md("# Title\n\nSome **bold** and `code` and ~~gone~~.\n\n- a\n- b\n");
    CHECK_HAS(h, "<h1>Title</h1>");
    CHECK_HAS(h, "<strong>bold</strong>");
    CHECK_HAS(h, "<code>code</code>");
    CHECK_HAS(h, "<del>gone</del>");
    CHECK_HAS(h, "<li>a</li>");
    free(h);
    /* single newlines are line breaks */
    h = md("one\ntwo");
    CHECK_HAS(h, "one<br />\ntwo");
    free(h);
}

TEST(markdown_code_blocks_carry_their_language)
{
    char *h = md("```python\nprint('<b>')\n```\n");
    CHECK_HAS(h, "<pre><code class=\"language-python\">print('&lt;b&gt;')\n</code></pre>");
    free(h);
}

TEST(markdown_gfm_tables_and_autolinks_and_tasks)
{
    char *h =
        md("| a | b |\n|:-|-:|\n| 1 | 2 |\n\nsee https://example.com/x?y=1 now\n\n- [x] done\n");
    CHECK_HAS(h, "<table>");
    CHECK_HAS(h, "<th align=\"left\">a</th>");
    CHECK_HAS(h, "<td align=\"right\">2</td>");
    CHECK_HAS(h, "<a href=\"https://example.com/x?y=1\">https://example.com/x?y=1</a>");
    CHECK_HAS(h, "checked=\"\" disabled=\"\"");
    CHECK_HASNT(h, "style=");
    free(h);
}

TEST(markdown_raw_html_is_text)
{
    char *h = md("<script>alert(1)</script>\n\nhi <img src=x onerror=alert(2)> there\n\n"
                 "<div onclick=\"alert(3)\">\nx\n</div>\n");
    CHECK_HASNT(h, "<script");
    CHECK_HASNT(h, "<img");
    CHECK_HASNT(h, "<div");
    CHECK_HAS(h, "&lt;script&gt;alert(1)&lt;/script&gt;");
    CHECK_HAS(h, "hi &lt;img src=x onerror=alert(2)&gt; there");
    CHECK_HAS(h, "&lt;div onclick=&quot;alert(3)&quot;&gt;<br />");
    free(h);
    /* inside inline and block code too (it always was) */
    h = md("`<script>` and\n\n    <script>x</script>\n");
    CHECK_HASNT(h, "<script");
    free(h);
}

TEST(markdown_dangerous_links_are_unlinked)
{
    const char *cases[] = {
        "[click](javascript:alert(1))",    "[click](JaVaScRiPt:alert(1))",
        "[click](vbscript:msgbox)",        "[click](data:text/html;base64,PHNjcmlwdD4=)",
        "[click](/api/auth/logout)",       "[click](//evil.example/x)",
        "[click](file:///etc/passwd)",     "<javascript:alert(1)>",
        "[click][r]\n\n[r]: javascript:x", "[click](java\tscript:x)",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *h = md(cases[i]);
        CHECK_HASNT(h, "<a");
        CHECK_HASNT(h, "javascript:alert(1)\"");
        free(h);
    }
    char *h = md("[click](javascript:alert(1))");
    CHECK_HAS(h, "<p>click</p>");
    free(h);
    h = md("[ok](https://example.com \"a title\") [mail](mailto:a@b.example)");
    CHECK_HAS(h, "<a href=\"https://example.com\">ok</a>");
    CHECK_HAS(h, "<a href=\"mailto:a@b.example\">mail</a>");
    free(h);
}

TEST(markdown_images_become_links)
{
    char *h = md("![a chart](https://example.com/c.png) ![x](javascript:alert(1)) "
                 "[![inner](https://example.com/i.png)](https://example.com/)");
    CHECK_HASNT(h, "<img");
    CHECK_HAS(h, "<a href=\"https://example.com/c.png\">image: a chart</a>");
    CHECK_HAS(h, "image: x");
    CHECK_HASNT(h, "javascript:");
    /* an image inside a link is not a link inside a link */
    CHECK_HAS(h, "<a href=\"https://example.com/\">image: inner</a>");
    free(h);
}

TEST(markdown_odd_bytes)
{
    char *h = app_markdown_html("a\0b\xff\xfe", 5);
    CHECK(h != NULL);
    CHECK_HAS(h, "a\xef\xbf\xbd"); /* NUL and invalid UTF-8 become U+FFFD */
    free(h);
    h = app_markdown_html("", 0);
    CHECK_STR(h, "");
    free(h);
    h = app_markdown_html(NULL, 0);
    CHECK_STR(h, "");
    free(h);
}

TEST(markdown_url_ok)
{
    CHECK(app_markdown_url_ok("https://a.example/"));
    CHECK(app_markdown_url_ok("HTTP://a.example"));
    CHECK(app_markdown_url_ok("mailto:x@y.example"));
    CHECK(!app_markdown_url_ok("https://"));
    CHECK(!app_markdown_url_ok("https:///x"));
    CHECK(!app_markdown_url_ok("javascript:alert(1)"));
    CHECK(!app_markdown_url_ok("/relative"));
    CHECK(!app_markdown_url_ok("https://a.example/\x01"));
    CHECK(!app_markdown_url_ok(NULL));
}

TEST_MAIN()
