/* Parsers of untrusted input: percent-decoding, paths, query strings, SSE. */
#include "lib/query.h"
#include "lib/sse.h"
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

struct evs {
    int n;
    char ev[8][32];
    char data[8][128];
    char id[8][32];
    long retry[8];
    int stop_after;
};

static int collect(const tk_sse_event *e, void *ud)
{
    struct evs *v = ud;
    if (v->n < 8) {
        snprintf(v->ev[v->n], 32, "%s", e->event);
        snprintf(v->data[v->n], 128, "%s", e->data);
        snprintf(v->id[v->n], 32, "%s", e->id);
        v->retry[v->n] = e->retry_ms;
    }
    v->n++;
    return v->stop_after && v->n >= v->stop_after;
}

TEST(sse_parse_fields_and_line_ends)
{
    struct evs v = {0};
    tk_sse_parser p;
    tk_sse_parser_init(&p, 1024, 4096, collect, &v);
    const char *s = "\xEF\xBB\xBF: comment\nid: 1\nevent: delta\ndata: a\ndata:b\n\n"
                    "data: crlf\r\n\r\n"
                    "data: cr\r\rretry: 3000\ndata: r\n\n"
                    "event: ignored-no-data\n\n"
                    "data\n\n";
    CHECK(tk_sse_feed(&p, s, strlen(s)) == TK_OK);
    /* "data" with no value still makes an event with empty data (WHATWG) */
    CHECK_INT(v.n, ==, 5);
    CHECK_STR(v.data[4], "");
    CHECK_STR(v.ev[0], "delta");
    CHECK_STR(v.data[0], "a\nb");
    CHECK_STR(v.id[0], "1");
    CHECK_STR(v.ev[1], "message");
    CHECK_STR(v.data[1], "crlf");
    CHECK_STR(v.id[1], "1"); /* the last id persists */
    CHECK_STR(v.data[2], "cr");
    CHECK_INT(v.retry[3], ==, 3000);
    CHECK_STR(v.data[3], "r");
    tk_sse_parser_free(&p);
}

TEST(sse_bare_json_events_as_execd_sends)
{
    struct evs v = {0};
    tk_sse_parser p;
    tk_sse_parser_init(&p, 1024, 4096, collect, &v);
    const char *s =
        "{\"type\":\"init\",\"text\":\"abc\"}\n\n{\"type\":\"stdout\",\"text\":\"x\"}\n\n";
    CHECK(tk_sse_feed(&p, s, strlen(s)) == TK_OK);
    CHECK_INT(v.n, ==, 2);
    CHECK_STR(v.data[0], "{\"type\":\"init\",\"text\":\"abc\"}");
    CHECK_STR(v.data[1], "{\"type\":\"stdout\",\"text\":\"x\"}");
    tk_sse_parser_free(&p);
}

TEST(sse_byte_by_byte_equals_whole)
{
    const char *s = "id: 7\nevent: e\ndata: hello\r\ndata: world\r\n\r\n{\"j\":1}\n\n";
    struct evs whole = {0}, bytes = {0};
    tk_sse_parser p;
    tk_sse_parser_init(&p, 1024, 4096, collect, &whole);
    tk_sse_feed(&p, s, strlen(s));
    tk_sse_parser_free(&p);
    tk_sse_parser_init(&p, 1024, 4096, collect, &bytes);
    for (size_t i = 0; i < strlen(s); i++)
        CHECK(tk_sse_feed(&p, s + i, 1) == TK_OK);
    tk_sse_parser_free(&p);
    CHECK_INT(whole.n, ==, 2);
    CHECK_INT(bytes.n, ==, 2);
    for (int i = 0; i < 2; i++) {
        CHECK_STR(whole.data[i], bytes.data[i]);
        CHECK_STR(whole.ev[i], bytes.ev[i]);
    }
}

TEST(sse_caps)
{
    struct evs v = {0};
    tk_sse_parser p;
    tk_sse_parser_init(&p, 16, 32, collect, &v);
    CHECK(tk_sse_feed(&p, "data: 0123456789abcdefXYZ\n", 27) == TK_ETOOBIG);
    tk_sse_parser_free(&p);
    tk_sse_parser_init(&p, 64, 32, collect, &v);
    const char *s = "data: 0123456789\ndata: 0123456789\ndata: 0123456789\ndata: 0123456789\n\n";
    CHECK(tk_sse_feed(&p, s, strlen(s)) == TK_ETOOBIG);
    CHECK_INT(v.n, ==, 0);
    tk_sse_parser_free(&p);
}

TEST(sse_stop_from_callback)
{
    struct evs v = {.stop_after = 1};
    tk_sse_parser p;
    tk_sse_parser_init(&p, 1024, 1024, collect, &v);
    const char *s = "data: 1\n\ndata: 2\n\n";
    CHECK(tk_sse_feed(&p, s, strlen(s)) == TK_AGAIN);
    CHECK_INT(v.n, ==, 1);
    tk_sse_parser_free(&p);
}

TEST(sse_unterminated_event_is_dropped_at_end)
{
    struct evs v = {0};
    tk_sse_parser p;
    tk_sse_parser_init(&p, 1024, 1024, collect, &v);
    CHECK(tk_sse_feed(&p, "data: partial\n", 14) == TK_OK);
    tk_sse_finish(&p);
    CHECK_INT(v.n, ==, 0);
    tk_sse_parser_free(&p);
}

TEST(sse_format_roundtrip)
{
    tk_buf b;
    tk_buf_init(&b, 4096);
    CHECK(tk_sse_format(&b, "42", "tool", "line1\nline2\r\nline3", 18) == TK_OK);
    CHECK_STR(tk_buf_cstr(&b), "id: 42\nevent: tool\ndata: line1\ndata: line2\ndata: line3\n\n");
    tk_buf_reset(&b);
    /* an id or event carrying a newline is dropped, never split into fields */
    CHECK(tk_sse_format(&b, "1\ndata: evil", "x\ny", "d", 1) == TK_OK);
    CHECK_STR(tk_buf_cstr(&b), "data: d\n\n");
    tk_buf_reset(&b);
    CHECK(tk_sse_format(&b, NULL, NULL, "", 0) == TK_OK);
    CHECK_STR(tk_buf_cstr(&b), "data: \n\n");
    struct evs v = {0};
    tk_sse_parser p;
    tk_sse_parser_init(&p, 1024, 1024, collect, &v);
    tk_buf_reset(&b);
    tk_sse_format(&b, "9", "e", "a\nb", 3);
    tk_sse_comment(&b, "ping");
    CHECK(tk_sse_feed(&p, b.data, b.len) == TK_OK);
    CHECK_INT(v.n, ==, 1);
    CHECK_STR(v.data[0], "a\nb");
    CHECK_STR(v.id[0], "9");
    tk_sse_parser_free(&p);
    tk_buf_free(&b);
}

TEST_MAIN()
