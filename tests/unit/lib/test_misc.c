/* Small core modules: time, ids, JSON helpers, config, log. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "lib/common.h"

#include "lib/config.h"
#include "lib/id.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/tktime.h"
#include "tk_test.h"

TEST(time_rfc3339_roundtrip)
{
    char s[40];
    tk_time_rfc3339(1764567604123, s, sizeof s);
    CHECK_STR(s, "2025-12-01T05:40:04.123Z");
    int64_t ms;
    CHECK(tk_time_parse_rfc3339(s, &ms) == TK_OK);
    CHECK_INT(ms, ==, 1764567604123);
    CHECK(tk_time_parse_rfc3339("2025-12-01T07:40:04+02:00", &ms) == TK_OK);
    CHECK_INT(ms, ==, 1764567604000);
    CHECK(tk_time_parse_rfc3339("1970-01-01T00:00:00Z", &ms) == TK_OK);
    CHECK_INT(ms, ==, 0);
    CHECK(tk_time_parse_rfc3339("2024-02-29T12:00:00.5Z", &ms) == TK_OK);
    CHECK_INT(ms, ==, 1709208000500);
    /* years below 1000 keep four digits, so the output parses back */
    CHECK(tk_time_parse_rfc3339("0818-11-24T04:01:08.073Z", &ms) == TK_OK);
    tk_time_rfc3339(ms, s, sizeof s);
    CHECK_STR(s, "0818-11-24T04:01:08.073Z");
}

TEST(time_rfc3339_rejects)
{
    int64_t ms;
    const char *bad[] = {"",
                         "2025",
                         "2025-13-01T00:00:00Z",
                         "2025-12-01 00:00:00",
                         "2025-12-01T25:00:00Z",
                         "2025-12-01T00:00:00",
                         "2025-12-01T00:00:00Zjunk",
                         "2025-12-01T00:00:00.Z",
                         "2025-12-01T00:00:00+0200"};
    for (size_t i = 0; i < TK_ARRAY_LEN(bad); i++)
        if (tk_time_parse_rfc3339(bad[i], &ms) == TK_OK)
            TK_TEST_FAIL("accepted %s", bad[i]);
}

TEST(durations)
{
    int64_t ms;
    CHECK(tk_parse_duration("30m", &ms) == TK_OK && ms == 1800000);
    CHECK(tk_parse_duration("1h30m", &ms) == TK_OK && ms == 5400000);
    CHECK(tk_parse_duration("45s", &ms) == TK_OK && ms == 45000);
    CHECK(tk_parse_duration("500ms", &ms) == TK_OK && ms == 500);
    CHECK(tk_parse_duration("90", &ms) == TK_OK && ms == 90000);
    CHECK(tk_parse_duration("2d", &ms) == TK_OK && ms == 172800000);
    CHECK(tk_parse_duration("", &ms) == TK_EINVAL);
    CHECK(tk_parse_duration("m", &ms) == TK_EINVAL);
    CHECK(tk_parse_duration("10x", &ms) == TK_EINVAL);
    CHECK(tk_parse_duration("-5s", &ms) == TK_EINVAL);
    CHECK(tk_parse_duration("99999999999999999999d", &ms) == TK_EINVAL);
    char out[32];
    tk_format_duration(1800000, out, sizeof out);
    CHECK_STR(out, "30m");
    tk_format_duration(5400000, out, sizeof out);
    CHECK_STR(out, "1h30m");
    tk_format_duration(250, out, sizeof out);
    CHECK_STR(out, "250ms");
}

TEST(uuids)
{
    char a[TK_UUID_LEN], b[TK_UUID_LEN];
    tk_uuid4(a);
    tk_uuid4(b);
    CHECK(tk_uuid_valid(a) && tk_uuid_valid(b));
    CHECK(strcmp(a, b) != 0);
    CHECK(a[14] == '4');
    CHECK(strchr("89ab", a[19]) != NULL);
    tk_uuid7(a);
    tk_sleep_ms(2);
    tk_uuid7(b);
    CHECK(a[14] == '7');
    CHECK(strcmp(a, b) < 0); /* time-ordered */
    CHECK(!tk_uuid_valid("not-a-uuid"));
    CHECK(!tk_uuid_valid("0190a0a0-0000-7000-8000-00000000000g"));
    char tok[65];
    tk_token_hex(tok, 32);
    CHECK_INT(strlen(tok), ==, 64);
}

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

static char *s_listen, *s_key;
static int64_t s_pool, s_ttl;
static int s_flag;

static tk_setting table[] = {
    {"TT_LISTEN", "listen", TK_SET_STR, "127.0.0.1:1", "listen", .out = &s_listen},
    {"TT_POOL", "pool", TK_SET_INT, "2", "pool", .min = 0, .max = 10, .out = &s_pool},
    {"TT_TTL", "ttl", TK_SET_DURATION, "30m", "ttl", .out = &s_ttl},
    {"TT_FLAG", "flag", TK_SET_BOOL, "false", "flag", .out = &s_flag},
    {"TT_KEY", NULL, TK_SET_STR, NULL, "key", .flags = TK_SET_FAIL_CLOSED | TK_SET_SECRET,
     .out = &s_key},
};

TEST(config_defaults_env_and_flags)
{
    char err[256];
    unsetenv("TT_LISTEN");
    setenv("TT_POOL", "7", 1);
    char *argv[] = {"prog", "--listen", "0.0.0.0:9", "--flag", "--ttl=45s", "cmd", NULL};
    int argi = 1;
    CHECK(tk_config_load(table, TK_ARRAY_LEN(table), 6, argv, &argi, err, sizeof err) == TK_OK);
    CHECK_STR(s_listen, "0.0.0.0:9");
    CHECK_INT(s_pool, ==, 7);
    CHECK_INT(s_ttl, ==, 45000);
    CHECK_INT(s_flag, ==, 1);
    CHECK(s_key == NULL); /* fail closed: unset stays unset */
    CHECK_INT(argi, ==, 5);
    CHECK_STR(table[1].source, "env");
    CHECK_STR(table[0].source, "flag");
    tk_config_free(table, TK_ARRAY_LEN(table));
}

TEST(config_errors_name_the_variable)
{
    char err[256];
    int argi = 1;
    char *argv[] = {"prog", NULL};
    setenv("TT_POOL", "11", 1);
    CHECK(tk_config_load(table, TK_ARRAY_LEN(table), 1, argv, &argi, err, sizeof err) == TK_EINVAL);
    CHECK(strstr(err, "TT_POOL") != NULL);
    setenv("TT_POOL", "3", 1);
    setenv("TT_TTL", "soon", 1);
    CHECK(tk_config_load(table, TK_ARRAY_LEN(table), 1, argv, &argi, err, sizeof err) == TK_EINVAL);
    CHECK(strstr(err, "TT_TTL") != NULL);
    unsetenv("TT_TTL");
    setenv("TT_FLAG", "maybe", 1);
    CHECK(tk_config_load(table, TK_ARRAY_LEN(table), 1, argv, &argi, err, sizeof err) == TK_EINVAL);
    CHECK(strstr(err, "TT_FLAG") != NULL);
    unsetenv("TT_FLAG");
    char *argv2[] = {"prog", "--nope", NULL};
    argi = 1;
    CHECK(tk_config_load(table, TK_ARRAY_LEN(table), 2, argv2, &argi, err, sizeof err) ==
          TK_EINVAL);
    CHECK(strstr(err, "--nope") != NULL);
    char *argv3[] = {"prog", "--pool", NULL};
    argi = 1;
    CHECK(tk_config_load(table, TK_ARRAY_LEN(table), 2, argv3, &argi, err, sizeof err) ==
          TK_EINVAL);
    tk_config_free(table, TK_ARRAY_LEN(table));
}

TEST(config_required)
{
    static char *url;
    tk_setting req[] = {
        {"TT_URL", "url", TK_SET_STR, NULL, "url", .flags = TK_SET_REQUIRED, .out = &url}};
    char err[256];
    char *argv[] = {"prog", NULL};
    int argi = 1;
    unsetenv("TT_URL");
    CHECK(tk_config_load(req, 1, 1, argv, &argi, err, sizeof err) == TK_EINVAL);
    CHECK(strstr(err, "TT_URL is required") != NULL);
}

TEST(constant_time_compare)
{
    CHECK(tk_str_eq_ct("secret", "secret"));
    CHECK(!tk_str_eq_ct("secret", "secreT"));
    CHECK(!tk_str_eq_ct("secret", "secret2"));
    CHECK(!tk_str_eq_ct("", "x"));
    CHECK(tk_str_eq_ct("", ""));
    CHECK(!tk_str_eq_ct(NULL, ""));
}

TEST(str_snip_quotes_untrusted_text_short)
{
    char out[128];
    tk_str_snip(out, sizeof out, "plain-text", 10);
    CHECK_STR(out, "plain-text");
    tk_str_snip(out, sizeof out, "a \"b\"\n\x01\xc3\xa9", 9);
    CHECK_STR(out, "a??b?????");
    tk_str_snip(out, sizeof out, "abc", 2); /* len bounds it */
    CHECK_STR(out, "ab");
    char longs[200];
    memset(longs, 'x', sizeof longs);
    tk_str_snip(out, sizeof out, longs, sizeof longs);
    CHECK_INT(strlen(out), ==, 83);
    CHECK_STR(out + 80, "...");
    tk_str_snip(out, 5, longs, sizeof longs); /* out's size bounds it too */
    CHECK_STR(out, "xxxx");
}

TEST(log_settings_are_checked)
{
    char err[160];
    unsetenv("LOG_LEVEL");
    unsetenv("LOG_FORMAT");
    CHECK(tk_log_check_env(err, sizeof err) == TK_OK);
    setenv("LOG_LEVEL", "WARN", 1);
    setenv("LOG_FORMAT", "json", 1);
    CHECK(tk_log_check_env(err, sizeof err) == TK_OK);
    setenv("LOG_LEVEL", "loud", 1);
    CHECK(tk_log_check_env(err, sizeof err) == TK_EINVAL);
    CHECK(strstr(err, "LOG_LEVEL") != NULL);
    CHECK(strstr(err, "loud") != NULL);
    setenv("LOG_LEVEL", "debug", 1);
    setenv("LOG_FORMAT", "xml", 1);
    CHECK(tk_log_check_env(err, sizeof err) == TK_EINVAL);
    CHECK(strstr(err, "LOG_FORMAT") != NULL);
    unsetenv("LOG_LEVEL");
    unsetenv("LOG_FORMAT");
}

TEST(log_is_one_line_per_event)
{
    char path[] = "/tmp/tklogXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    fflush(stderr);
    dup2(fd, 2);
    tk_log_init("t");
    tk_log_set_request_id("req-1");
    tk_info("comp", "msg=\"%s\" k=%d", "two\nlines\rand\x01", 5);
    tk_debug("comp", "msg=hidden");
    tk_log_set_request_id(NULL);
    setenv("LOG_FORMAT", "json", 1);
    tk_log_init("t");
    tk_warn("comp", "msg=\"q\\\"\"");
    unsetenv("LOG_FORMAT");
    fflush(stderr);
    char buf[2048] = {0};
    pread(fd, buf, sizeof buf - 1, 0);
    unlink(path);
    int lines = 0;
    for (char *p = buf; *p; p++)
        lines += *p == '\n';
    CHECK_INT(lines, ==, 2);
    CHECK(strstr(buf, " info t comp req=req-1 msg=\"two\\nlines\\rand\\u0001\" k=5\n") != NULL);
    CHECK(strstr(buf, "hidden") == NULL);
    CHECK(strstr(buf, "\"level\":\"warn\"") != NULL);
    CHECK(strstr(buf, "\"event\":\"msg=\\\"q\\\\\\\"\\\"\"") != NULL);
}

static long fd_table_size(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long n = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "FDSize:", 7) == 0)
            n = strtol(line + 7, NULL, 10);
    if (f)
        fclose(f);
    return n;
}

TEST(fd_table_reserve_grows_the_table)
{
    struct rlimit rl = {.rlim_cur = 2048, .rlim_max = 2048};
    CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
    long before = fd_table_size();
    CHECK_INT(before, >, 0);
    CHECK_INT(before, <, 1024);
    CHECK_INT(tk_fd_table_reserve(1024), ==, 1024);
    CHECK_INT(fd_table_size(), >=, 1024);
    /* the descriptor it used is closed again */
    int fd = open("/dev/null", O_RDONLY);
    CHECK_INT(fd, <, 16);
    close(fd);
}

TEST(fd_table_reserve_stops_at_the_limit)
{
    struct rlimit rl = {.rlim_cur = 100, .rlim_max = 100};
    CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
    CHECK_INT(tk_fd_table_reserve(4096), ==, 100);
    CHECK_INT(fd_table_size(), >=, 100);
}

TEST_MAIN()
