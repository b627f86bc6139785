/* lib/json: parsing with its refusals, getters, capped dumps. */
#include <string.h>

#include "lib/buf.h"
#include "lib/json.h"
#include "tk_test.h"

TEST(json_parse_and_getters)
{
    char err[200];
    const char *doc = "{\"a\":\"x\",\"n\":5,\"r\":2.0,\"f\":1.5,\"t\":true,\"h\":1e300}";
    json_t *j = tk_json_parse(doc, strlen(doc), 1000, err, sizeof err);
    CHECK(j != NULL);
    CHECK_STR(tk_json_str(j, "a"), "x");
    CHECK(tk_json_str(j, "n") == NULL);
    int64_t v;
    CHECK(tk_json_int(j, "n", &v) == TK_OK && v == 5);
    CHECK(tk_json_int(j, "r", &v) == TK_OK && v == 2);
    CHECK(tk_json_int(j, "f", &v) == TK_EINVAL);
    CHECK(tk_json_int(j, "h", &v) == TK_EINVAL); /* out of range, no UB */
    CHECK(tk_json_int(j, "missing", &v) == TK_ENOENT);
    CHECK(tk_json_bool_or(j, "t", 0) == 1);
    CHECK(tk_json_bool_or(j, "a", 7) == 7);
    json_decref(j);
}

TEST(json_refuses_duplicates_depth_and_size)
{
    char err[200];
    const char *dup = "{\"a\":1,\"a\":2}";
    CHECK(tk_json_parse(dup, strlen(dup), 1000, err, sizeof err) == NULL);
    char deep[200];
    memset(deep, '[', 100);
    memset(deep + 100, ']', 100);
    CHECK(tk_json_parse(deep, 200, 1000, err, sizeof err) == NULL);
    CHECK(strstr(err, "deeper") != NULL);
    CHECK(tk_json_parse("[1,2,3]", 7, 6, err, sizeof err) == NULL);
    CHECK(tk_json_parse("{\"a\":", 5, 100, err, sizeof err) == NULL);
    CHECK(strstr(err, "invalid JSON") != NULL);
    /* brackets inside strings do not count as depth */
    char s[300];
    snprintf(s, sizeof s, "[\"%.*s\"]", 200,
             "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
             "[[[[[[[");
    json_t *j = tk_json_parse(s, strlen(s), 1000, err, sizeof err);
    CHECK(j != NULL);
    json_decref(j);
}

TEST(json_dump_respects_cap)
{
    json_t *j = tk_json_obj("k", json_string("0123456789"), "skip", NULL, NULL);
    tk_buf b;
    tk_buf_init(&b, 8);
    CHECK(tk_json_dump_buf(j, &b) == TK_ETOOBIG);
    CHECK_INT(b.len, ==, 0);
    tk_buf_free(&b);
    tk_buf_init(&b, 100);
    CHECK(tk_json_dump_buf(j, &b) == TK_OK);
    CHECK_STR(tk_buf_cstr(&b), "{\"k\":\"0123456789\"}");
    tk_buf_free(&b);
    json_decref(j);
}

TEST(json_quote_escapes_to_the_letter)
{
    tk_buf b;
    tk_buf_init(&b, 256);
    const char s[] = "a\"b\\c\nd\re\tf\x01\x08\x0c\x1f\x7f/\xc3\xa9";
    CHECK(tk_json_quote(&b, s, sizeof s - 1) == TK_OK);
    CHECK_STR(tk_buf_cstr(&b),
              "\"a\\\"b\\\\c\\nd\\re\\tf\\u0001\\u0008\\u000c\\u001f\x7f/\xc3\xa9\"");
    /* a NUL inside the length is escaped too; the empty string is "" */
    tk_buf_reset(&b);
    CHECK(tk_json_quote(&b, "x\0y", 3) == TK_OK);
    CHECK_STR(tk_buf_cstr(&b), "\"x\\u0000y\"");
    tk_buf_reset(&b);
    CHECK(tk_json_quote(&b, "", 0) == TK_OK);
    CHECK_STR(tk_buf_cstr(&b), "\"\"");
    tk_buf_free(&b);
}

TEST(json_quote_parses_back_to_every_ascii_byte)
{
    char s[128];
    for (int i = 0; i < 128; i++)
        s[i] = (char)i;
    tk_buf b;
    tk_buf_init(&b, 4096);
    CHECK(tk_json_quote(&b, s, sizeof s) == TK_OK);
    json_error_t e;
    json_t *j = json_loadb(b.data, b.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    CHECK(j != NULL && json_is_string(j));
    CHECK_INT(json_string_length(j), ==, sizeof s);
    CHECK(memcmp(json_string_value(j), s, sizeof s) == 0);
    json_decref(j);
    tk_buf_free(&b);
}

TEST(json_quote_refuses_past_the_cap)
{
    tk_buf b;
    tk_buf_init(&b, 6);
    CHECK(tk_json_quote(&b, "abcd", 4) == TK_OK); /* "abcd" with its quotes: 6 */
    tk_buf_reset(&b);
    CHECK(tk_json_quote(&b, "abcde", 5) == TK_ETOOBIG);
    tk_buf_reset(&b);
    CHECK(tk_json_quote(&b, "ab\n", 3) == TK_OK);
    tk_buf_reset(&b);
    CHECK(tk_json_quote(&b, "abc\n", 4) == TK_ETOOBIG); /* the escape does not fit */
    tk_buf_free(&b);
}

TEST_MAIN()
