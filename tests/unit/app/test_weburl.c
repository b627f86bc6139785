/* weburl: origins and their parts, https and loopback checks. */
#include <string.h>

#include "app/weburl.h"
#include "tk_test.h"

TEST(url_origin_and_parts)
{
    char o[300];
    CHECK(app_url_origin("https://Chat.Example.com/", o, sizeof o) == TK_OK);
    CHECK_STR(o, "https://chat.example.com");
    CHECK(app_url_origin("https://chat.example.com:443/x?y", o, sizeof o) == TK_OK);
    CHECK_STR(o, "https://chat.example.com");
    CHECK(app_url_origin("http://127.0.0.1:8080", o, sizeof o) == TK_OK);
    CHECK_STR(o, "http://127.0.0.1:8080");
    CHECK(app_url_origin("HTTP://[::1]:80/", o, sizeof o) == TK_OK);
    CHECK_STR(o, "http://[::1]");
    app_url u;
    CHECK(app_url_parse("https://h:8443/a/b?c#d", &u) == TK_OK);
    CHECK_STR(u.host, "h");
    CHECK_INT(u.port, ==, 8443);
    CHECK_STR(u.path, "/a/b?c#d");
    const char *bad[] = {"ftp://h",
                         "https://",
                         "https://u@h",
                         "https://h:0",
                         "https://h:65536",
                         "https://h:x",
                         "https://[::1",
                         "https://[::1]x",
                         "null",
                         "https://h:",
                         "https://h h",
                         "https://h\\x",
                         NULL};
    for (int i = 0; bad[i]; i++)
        if (app_url_parse(bad[i], &u) == TK_OK)
            TK_TEST_FAIL("accepted %s", bad[i]);
    CHECK(app_url_parse(NULL, &u) != TK_OK);
}

TEST(url_https_and_loopback)
{
    CHECK(app_url_is_https("https://x"));
    CHECK(!app_url_is_https("http://x"));
    CHECK(app_url_is_loopback_http("http://127.0.0.1:9"));
    CHECK(app_url_is_loopback_http("http://127.255.0.1"));
    CHECK(app_url_is_loopback_http("http://localhost:3000/x"));
    CHECK(app_url_is_loopback_http("http://[::1]:9"));
    CHECK(!app_url_is_loopback_http("https://127.0.0.1"));
    CHECK(!app_url_is_loopback_http("http://127.0.0.1.evil.com"));
    CHECK(!app_url_is_loopback_http("http://0x7f.0.0.1"));
    CHECK(!app_url_is_loopback_http("http://2130706433"));
    CHECK(!app_url_is_loopback_http("http://128.0.0.1"));
    CHECK(!app_url_is_loopback_http("http://127.0.0.256"));
    CHECK(!app_url_is_loopback_http("http://localhost.evil.com"));
    CHECK(!app_url_is_loopback_http("http://10.0.0.1"));
}

TEST_MAIN()
