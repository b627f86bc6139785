/* tusko's small parsers of untrusted input: cookies, URLs/origins, the model
 * allowlist, UTF-8 character counts, email addresses. */
#include "app/auth/cookie.h"
#include "app/models.h"
#include "app/settings.h"
#include "app/users.h"
#include "app/weburl.h"
#include "tk_test.h"

TEST(cookie_get_finds_exact_names)
{
    tk_arena *a = tk_arena_new(0);
    CHECK_STR(app_cookie_get(a, "a=1; tusko_session=abc; b=2", "tusko_session"), "abc");
    CHECK_STR(app_cookie_get(a, "tusko_session=abc", "tusko_session"), "abc");
    CHECK_STR(app_cookie_get(a, "  tusko_session = abc ;x=1", "tusko_session"), "abc");
    CHECK_STR(app_cookie_get(a, "x=\"quoted\"", "x"), "quoted");
    CHECK_STR(app_cookie_get(a, "x=", "x"), "");
    /* the first of two wins; prefixes and suffixes are other names */
    CHECK_STR(app_cookie_get(a, "x=1; x=2", "x"), "1");
    CHECK(app_cookie_get(a, "xtusko_session=abc; tusko_sessionx=abc", "tusko_session") == NULL);
    CHECK(app_cookie_get(a, "__Host-tusko_session=abc", "tusko_session") == NULL);
    CHECK_STR(app_cookie_get(a, "__Host-tusko_session=abc", "__Host-tusko_session"), "abc");
    /* pairs without '=' are skipped; empty and odd headers are safe */
    CHECK_STR(app_cookie_get(a, "junk; ; x=1", "x"), "1");
    CHECK(app_cookie_get(a, "", "x") == NULL);
    CHECK(app_cookie_get(a, ";;;;", "x") == NULL);
    CHECK(app_cookie_get(a, "=1", "x") == NULL);
    CHECK(app_cookie_get(a, NULL, "x") == NULL);
    CHECK(app_cookie_get(a, "x=1", "") == NULL);
    CHECK_STR(app_cookie_get(a, "x=\"", "x"), "\"");
    tk_arena_free(a);
}

TEST(cookie_get_refuses_oversized_headers)
{
    tk_arena *a = tk_arena_new(0);
    size_t n = APP_COOKIE_HEADER_MAX + 10;
    char *h = malloc(n + 1);
    memset(h, 'a', n);
    memcpy(h, "x=1;", 4);
    h[n] = 0;
    CHECK(app_cookie_get(a, h, "x") == NULL);
    h[APP_COOKIE_HEADER_MAX] = 0;
    CHECK_STR(app_cookie_get(a, h, "x"), "1");
    free(h);
    tk_arena_free(a);
}

TEST(cookie_format_flags)
{
    tk_arena *a = tk_arena_new(0);
    app_cookie c = {.name = "tusko_session",
                    .value = "abc",
                    .max_age_s = 60,
                    .http_only = 1,
                    .secure = 1,
                    .same_site = "Lax"};
    CHECK_STR(app_cookie_format(a, &c),
              "tusko_session=abc; Path=/; Max-Age=60; HttpOnly; Secure; SameSite=Lax");
    app_cookie d = {.name = "t", .value = "", .max_age_s = 0};
    CHECK_STR(app_cookie_format(a, &d), "t=; Path=/; Max-Age=0; SameSite=Lax");
    app_cookie e = {.name = "t", .value = "v", .max_age_s = -1, .same_site = "Strict"};
    CHECK_STR(app_cookie_format(a, &e), "t=v; Path=/; SameSite=Strict");
    tk_arena_free(a);
}

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

TEST(models_parse_and_find)
{
    char err[256];
    app_model_list *l;
    CHECK(app_models_parse("openai:gpt-4o-mini, anthropic:claude-sonnet-4,openai:llama3:8b,", &l,
                           err, sizeof err) == TK_OK);
    CHECK_INT(app_models_list_count(l), ==, 3);
    const app_model *m = app_models_list_at(l, 2);
    CHECK_STR(m->id, "openai:llama3:8b");
    CHECK_STR(m->provider, "openai");
    CHECK_STR(m->model, "llama3:8b");
    CHECK_INT(m->kind, ==, APP_PROVIDER_OPENAI);
    CHECK_INT(app_models_list_at(l, 1)->kind, ==, APP_PROVIDER_ANTHROPIC);
    CHECK(app_models_list_find(l, "anthropic:claude-sonnet-4") == app_models_list_at(l, 1));
    CHECK(app_models_list_find(l, "claude-sonnet-4") == app_models_list_at(l, 1));
    CHECK(app_models_list_find(l, "openai:claude-sonnet-4") == NULL);
    CHECK(app_models_list_find(l, "gpt-4") == NULL);
    CHECK(app_models_list_find(l, "") == NULL);
    CHECK(app_models_list_find(l, NULL) == NULL);
    CHECK(app_models_list_at(l, 3) == NULL);
    app_models_free(l);
    /* a bare name two providers share is ambiguous */
    CHECK(app_models_parse("openai:m,anthropic:m", &l, err, sizeof err) == TK_OK);
    CHECK(app_models_list_find(l, "m") == NULL);
    CHECK(app_models_list_find(l, "anthropic:m") != NULL);
    app_models_free(l);
    CHECK(app_models_parse("", &l, err, sizeof err) == TK_OK);
    CHECK_INT(app_models_list_count(l), ==, 0);
    app_models_free(l);
    CHECK(app_models_parse(NULL, &l, err, sizeof err) == TK_OK);
    app_models_free(l);
}

TEST(models_parse_refuses)
{
    const char *bad[] = {"gpt-4o",
                         "openai:",
                         ":gpt",
                         "mistral:large",
                         "openai:a,,openai:b",
                         "openai:a,openai:a",
                         "openai:a b",
                         ",",
                         "openai:a\"b",
                         "OpenAI:gpt",
                         NULL};
    char err[256];
    for (int i = 0; bad[i]; i++) {
        app_model_list *l = NULL;
        if (app_models_parse(bad[i], &l, err, sizeof err) == TK_OK)
            TK_TEST_FAIL("accepted \"%s\"", bad[i]);
        CHECK(l == NULL);
        CHECK(err[0] != 0);
    }
    char big[300] = "openai:";
    memset(big + 7, 'm', 250);
    big[257] = 0;
    app_model_list *l = NULL;
    CHECK(app_models_parse(big, &l, err, sizeof err) != TK_OK);
}

TEST(utf8_chars)
{
    CHECK_INT(app_utf8_chars("", 0), ==, 0);
    CHECK_INT(app_utf8_chars("abc", 3), ==, 3);
    CHECK_INT(app_utf8_chars("\xc3\xa9t\xc3\xa9", 5), ==, 3);
    CHECK_INT(app_utf8_chars("\xe6\x97\xa5", 3), ==, 1);
    CHECK_INT(app_utf8_chars("\xf0\x9f\x98\x80", 4), ==, 1);
    CHECK_INT(app_utf8_chars("\xc3", 1), ==, -1);             /* cut */
    CHECK_INT(app_utf8_chars("\xe6\x97", 2), ==, -1);         /* cut */
    CHECK_INT(app_utf8_chars("\xc0\xaf", 2), ==, -1);         /* overlong */
    CHECK_INT(app_utf8_chars("\xed\xa0\x80", 3), ==, -1);     /* surrogate */
    CHECK_INT(app_utf8_chars("\xf4\x90\x80\x80", 4), ==, -1); /* past U+10FFFF */
    CHECK_INT(app_utf8_chars("\xff", 1), ==, -1);
    CHECK_INT(app_utf8_chars("\x80", 1), ==, -1);
    CHECK_INT(app_utf8_chars("a\xc3(", 3), ==, -1);
}

TEST(email_normalize)
{
    char e[256];
    CHECK(app_email_normalize("  Alice@Example.COM ", e, sizeof e) == TK_OK);
    CHECK_STR(e, "alice@example.com");
    const char *bad[] = {"", "alice", "@x", "x@", "a@b@c", "a b@c", "a\n@b", "a<@b", "a\"@b", NULL};
    for (int i = 0; bad[i]; i++)
        if (app_email_normalize(bad[i], e, sizeof e) == TK_OK)
            TK_TEST_FAIL("accepted \"%s\"", bad[i]);
    char longer[300];
    memset(longer, 'a', 260);
    memcpy(longer + 250, "@x.com", 7);
    CHECK(app_email_normalize(longer, e, sizeof e) != TK_OK);
    CHECK(app_email_normalize(NULL, e, sizeof e) != TK_OK);
}

TEST_MAIN()
