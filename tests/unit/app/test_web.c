/* The web UI's static files (app/web.c): names, content types, ETags, and the
 * embedded table the Makefile builds from web/. */
#include <string.h>

#include "app/web.h"
#include "lib/embed.h"
#include "tk_test.h"

extern const struct tk_embed_file tk_embed_web[];

TEST(web_name_ok)
{
    CHECK(app_web_name_ok("index.html"));
    CHECK(app_web_name_ok("js/app.js"));
    CHECK(app_web_name_ok("vendor/highlight/LICENSE"));
    CHECK(!app_web_name_ok(""));
    CHECK(!app_web_name_ok(NULL));
    CHECK(!app_web_name_ok("/etc/passwd"));
    CHECK(!app_web_name_ok("../secret"));
    CHECK(!app_web_name_ok("js/../../x"));
    CHECK(!app_web_name_ok("js//app.js"));
    CHECK(!app_web_name_ok("js/"));
    CHECK(!app_web_name_ok("js/%2e%2e/x"));
    CHECK(!app_web_name_ok("js\\app.js"));
    CHECK(!app_web_name_ok("js/app.js?x"));
    CHECK(!app_web_name_ok("a b"));
}

TEST(web_content_types)
{
    CHECK_STR(app_web_content_type("index.html"), "text/html; charset=utf-8");
    CHECK_STR(app_web_content_type("js/app.js"), "text/javascript; charset=utf-8");
    CHECK_STR(app_web_content_type("css/app.css"), "text/css; charset=utf-8");
    CHECK_STR(app_web_content_type("icon.svg"), "image/svg+xml");
    CHECK_STR(app_web_content_type("vendor/highlight/LICENSE"), "text/plain; charset=utf-8");
    CHECK_STR(app_web_content_type("x.js.map"), "text/plain; charset=utf-8");
}

TEST(web_etag_match)
{
    const char *e = "\"0123456789abcdef\"";
    CHECK(app_web_etag_match("\"0123456789abcdef\"", e));
    CHECK(app_web_etag_match("W/\"0123456789abcdef\"", e));
    CHECK(app_web_etag_match("\"x\", \"0123456789abcdef\"", e));
    CHECK(app_web_etag_match("\"x\",\"0123456789abcdef\" ", e));
    CHECK(app_web_etag_match("*", e));
    CHECK(!app_web_etag_match("\"0123456789abcde\"", e));
    CHECK(!app_web_etag_match("0123456789abcdef", e));
    CHECK(!app_web_etag_match("", e));
    CHECK(!app_web_etag_match(NULL, e));
    CHECK(!app_web_etag_match(",,, ,", e));
}

TEST(web_table_has_the_page_and_only_good_names)
{
    CHECK(tk_embed_find(tk_embed_web, "index.html") != NULL);
    size_t n = 0;
    for (const struct tk_embed_file *f = tk_embed_web; f->name; f++, n++)
        if (!app_web_name_ok(f->name))
            TK_TEST_FAIL("web/%s has a name the server will not serve", f->name);
    CHECK_INT(n, >, 0);
}

TEST_MAIN()
