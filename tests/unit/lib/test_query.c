/* lib/query: percent-decoding and encoding, query strings, path segments. */
#include <string.h>

#include "lib/query.h"
#include "tk_test.h"

TEST(percent_decode)
{
    tk_arena *a = tk_arena_new(0);
    char *out;
    size_t n;
    CHECK(tk_percent_decode(a, "a%20b+c", 7, 1, &out, &n) == TK_OK);
    CHECK_STR(out, "a b c");
    CHECK(tk_percent_decode(a, "a%20b+c", 7, 0, &out, &n) == TK_OK);
    CHECK_STR(out, "a b+c");
    CHECK(tk_percent_decode(a, "%2F%2e%2E", 9, 0, &out, &n) == TK_OK);
    CHECK_STR(out, "/..");
    const char *bad[] = {"%", "%4", "%zz", "%00", "a%0", "%g1"};
    for (size_t i = 0; i < TK_ARRAY_LEN(bad); i++)
        if (tk_percent_decode(a, bad[i], strlen(bad[i]), 0, &out, &n) == TK_OK)
            TK_TEST_FAIL("accepted %s", bad[i]);
    CHECK(tk_percent_decode(a, "a\0b", 3, 0, &out, &n) == TK_EINVAL);
    tk_arena_free(a);
}

TEST(query_parse)
{
    tk_arena *a = tk_arena_new(0);
    tk_kv *kv;
    size_t n;
    const char *qs = "a=1&b=x%20y&&flag&c=&a=2&e=%3D%26";
    CHECK(tk_query_parse(a, qs, strlen(qs), 16, &kv, &n) == TK_OK);
    CHECK_INT(n, ==, 6);
    CHECK_STR(tk_query_get(kv, n, "a"), "1");
    CHECK_STR(tk_query_get(kv, n, "b"), "x y");
    CHECK_STR(tk_query_get(kv, n, "flag"), "");
    CHECK_STR(tk_query_get(kv, n, "c"), "");
    CHECK_STR(tk_query_get(kv, n, "e"), "=&");
    CHECK(tk_query_get(kv, n, "zzz") == NULL);
    CHECK(tk_query_parse(a, "", 0, 16, &kv, &n) == TK_OK && n == 0);
    CHECK(tk_query_parse(a, "a=%zz", 5, 16, &kv, &n) == TK_EINVAL);
    CHECK(tk_query_parse(a, "a&b&c", 5, 2, &kv, &n) == TK_ETOOBIG);
    tk_arena_free(a);
}

TEST(path_split)
{
    tk_arena *a = tk_arena_new(0);
    char **s;
    size_t n;
    CHECK(tk_path_split(a, "/v1/sandboxes/x%2Fy//z/", 23, &s, &n) == TK_OK);
    CHECK_INT(n, ==, 4);
    CHECK_STR(s[0], "v1");
    CHECK_STR(s[2], "x/y");
    CHECK_STR(s[3], "z");
    CHECK(s[4] == NULL);
    CHECK(tk_path_split(a, "/", 1, &s, &n) == TK_OK && n == 0);
    CHECK(tk_path_split(a, "relative", 8, &s, &n) == TK_EINVAL);
    CHECK(tk_path_split(a, "/a%00", 5, &s, &n) == TK_EINVAL);
    char deep[300] = "";
    for (int i = 0; i < 70; i++)
        strcat(deep, "/a");
    CHECK(tk_path_split(a, deep, strlen(deep), &s, &n) == TK_ETOOBIG);
    CHECK_STR(tk_percent_encode(a, "a b/c~"), "a%20b%2Fc~");
    tk_arena_free(a);
}

TEST(percent_encoding_keeps_unreserved_and_what_is_asked)
{
    tk_arena *a = tk_arena_new(0);
    CHECK_STR(tk_percent_encode(a, ""), "");
    CHECK_STR(tk_percent_encode(a, "tusko-sandbox:abc d/e&f=g"),
              "tusko-sandbox%3Aabc%20d%2Fe%26f%3Dg");
    CHECK_STR(tk_percent_encode(a, "AZaz09-._~+%\x7f\xc3\xa9"), "AZaz09-._~%2B%25%7F%C3%A9");
    tk_arena_free(a);

    tk_buf b;
    tk_buf_init(&b, 64);
    CHECK(tk_percent_append(&b, "", NULL) == TK_OK);
    CHECK_STR(tk_buf_cstr(&b), "");
    CHECK(tk_buf_append_str(&b, "/files?path=") == TK_OK);
    CHECK(tk_percent_append(&b, "/workspace/a b/\xc3\xa9.txt", "/") == TK_OK);
    CHECK_STR(tk_buf_cstr(&b), "/files?path=/workspace/a%20b/%C3%A9.txt");
    tk_buf_reset(&b);
    CHECK(tk_percent_append(&b, "a/b?c", "") == TK_OK);
    CHECK_STR(tk_buf_cstr(&b), "a%2Fb%3Fc");
    tk_buf_reset(&b);
    CHECK(tk_percent_append(&b, "k=v&x", "=&") == TK_OK);
    CHECK_STR(tk_buf_cstr(&b), "k=v&x");
    tk_buf_free(&b);

    /* over the cap: nothing is appended, not even the part that fits */
    tk_buf small;
    tk_buf_init(&small, 10);
    CHECK(tk_buf_append_str(&small, "x=abc") == TK_OK);
    CHECK(tk_percent_append(&small, "ab c", NULL) == TK_ETOOBIG); /* 6 more: 11 */
    CHECK_STR(tk_buf_cstr(&small), "x=abc");
    CHECK(tk_percent_append(&small, "a b", NULL) == TK_OK); /* 5 more: exactly the cap */
    CHECK_STR(tk_buf_cstr(&small), "x=abca%20b");
    CHECK(tk_percent_append(&small, "", NULL) == TK_OK);
    CHECK(tk_percent_append(&small, "a", NULL) == TK_ETOOBIG);
    CHECK_STR(tk_buf_cstr(&small), "x=abca%20b");
    tk_buf_free(&small);
}

TEST_MAIN()
