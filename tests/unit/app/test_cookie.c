/* auth/cookie: Cookie parsing (untrusted input) and Set-Cookie formatting. */
#include <string.h>

#include "app/auth/cookie.h"
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

TEST_MAIN()
