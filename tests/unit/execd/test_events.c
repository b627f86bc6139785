/* events: the event objects of command and code output, framed as upstream
 * execd frames them, text made valid UTF-8. */
#include <string.h>

#include "execd/events.h"
#include "lib/json.h"
#include "tk_test.h"

TEST(events_are_upstream_framed_and_clean_utf8)
{
    tk_buf b;
    tk_buf_init(&b, 1 << 16);
    CHECK_INT(execd_ev_text(&b, "stdout",
                            "x\xff"
                            "y",
                            3),
              ==, TK_OK);
    const char *s = tk_buf_cstr(&b);
    CHECK(strncmp(s, "{\"type\":\"stdout\",\"text\":\"x\xef\xbf\xbdy\",\"timestamp\":", 44) == 0);
    CHECK(b.len > 2 && s[b.len - 1] == '\n' && s[b.len - 2] == '\n');
    tk_buf_reset(&b);
    CHECK_INT(execd_ev_error(&b, "CommandExecError", "7", NULL), ==, TK_OK);
    char err[128];
    json_t *j = tk_json_parse(b.data, b.len - 2, 1 << 16, err, sizeof err);
    CHECK(j != NULL);
    json_t *e = json_object_get(j, "error");
    CHECK_STR(tk_json_str(e, "ename"), "CommandExecError");
    CHECK_STR(tk_json_str(e, "evalue"), "7");
    CHECK_INT(json_array_size(json_object_get(e, "traceback")), ==, 1);
    json_decref(j);
    /* the cap is honoured: nothing partial is left behind */
    tk_buf small;
    tk_buf_init(&small, 20);
    CHECK_INT(execd_ev_text(&small, "stdout", "0123456789012345678901234567890", 31), ==,
              TK_ETOOBIG);
    CHECK_INT(small.len, ==, 0);
    tk_buf_free(&small);
    tk_buf_free(&b);
}

static void check_json_text(const char *in, size_t n, const char *want)
{
    json_t *j = execd_json_text(in, n);
    CHECK(json_is_string(j));
    CHECK_INT(json_string_length(j), ==, strlen(want));
    CHECK_MEM(json_string_value(j), want, strlen(want));
    json_decref(j);
}

TEST(json_text_keeps_valid_text_and_replaces_each_invalid_byte)
{
    json_t *j = execd_json_text("a\0b", 3);
    CHECK_INT(json_string_length(j), ==, 3); /* NUL is valid JSON (\\u0000) */
    json_decref(j);
    check_json_text("caf\xc3\xa9", 5, "caf\xc3\xa9");
    /* every byte that starts no valid sequence becomes one U+FFFD */
    check_json_text("a\xff"
                    "b",
                    3,
                    "a\xef\xbf\xbd"
                    "b");
    check_json_text("\xe2\x82", 2, "\xef\xbf\xbd\xef\xbf\xbd");                 /* cut short */
    check_json_text("\xc0\xaf", 2, "\xef\xbf\xbd\xef\xbf\xbd");                 /* overlong */
    check_json_text("\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"); /* surrogate */
    check_json_text("\xf4\x90\x80\x80!", 5,
                    "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd!"); /* > U+10FFFF */
    /* once cleaning, a NUL is replaced too; valid sequences around it are kept */
    check_json_text("\xc3\xa9\0\xff", 4, "\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd");
}

TEST_MAIN()
