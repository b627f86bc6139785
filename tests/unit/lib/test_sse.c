/* lib/sse: the incremental, capped parser and the formatter. */
#include <string.h>

#include "lib/sse.h"
#include "tk_test.h"

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
