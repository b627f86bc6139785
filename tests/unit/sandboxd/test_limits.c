/* Request parsing: quantities, limits, env names, metadata rules and filters. */
#include "lib/arena.h"
#include "lib/json.h"
#include "sandboxd/meta.h"
#include "sandboxd/env.h"
#include "sandboxd/limits.h"
#include "tk_test.h"

TEST(cpu_quantities)
{
    int64_t m;
    CHECK(sbx_limits_parse_cpu("500m", &m) == TK_OK);
    CHECK_INT(m, ==, 500);
    CHECK(sbx_limits_parse_cpu("1", &m) == TK_OK);
    CHECK_INT(m, ==, 1000);
    CHECK(sbx_limits_parse_cpu("0.25", &m) == TK_OK);
    CHECK_INT(m, ==, 250);
    CHECK(sbx_limits_parse_cpu("2.5", &m) == TK_OK);
    CHECK_INT(m, ==, 2500);
    CHECK(sbx_limits_parse_cpu(".5", &m) == TK_OK);
    CHECK_INT(m, ==, 500);
    const char *bad[] = {"",  "-1", "1.2345", "abc", "1m5",
                         "m", "1.", "1e3",    " 1",  "99999999999999999999"};
    for (size_t i = 0; i < TK_ARRAY_LEN(bad); i++)
        CHECK(sbx_limits_parse_cpu(bad[i], &m) == TK_EINVAL);
}

TEST(byte_quantities)
{
    int64_t b;
    CHECK(sbx_limits_parse_bytes("512Mi", &b) == TK_OK);
    CHECK_INT(b, ==, 512LL << 20);
    CHECK(sbx_limits_parse_bytes("1Gi", &b) == TK_OK);
    CHECK_INT(b, ==, 1LL << 30);
    CHECK(sbx_limits_parse_bytes("1G", &b) == TK_OK);
    CHECK_INT(b, ==, 1000000000LL);
    CHECK(sbx_limits_parse_bytes("1g", &b) == TK_OK);
    CHECK_INT(b, ==, 1LL << 30);
    CHECK(sbx_limits_parse_bytes("64m", &b) == TK_OK);
    CHECK_INT(b, ==, 64LL << 20);
    CHECK(sbx_limits_parse_bytes("1048576", &b) == TK_OK);
    CHECK_INT(b, ==, 1048576);
    CHECK(sbx_limits_parse_bytes("8Ei", &b) == TK_ETOOBIG);
    CHECK(sbx_limits_parse_bytes("99999999999999999999", &b) == TK_ETOOBIG);
    const char *bad[] = {"", "Mi", "1.5Gi", "-1", "1 Gi", "1GiB", "1x"};
    for (size_t i = 0; i < TK_ARRAY_LEN(bad); i++)
        CHECK(sbx_limits_parse_bytes(bad[i], &b) == TK_EINVAL);
}

static const sbx_limits_policy pol = {
    .def = {.memory_bytes = 2LL << 30, .cpu_millis = 1000, .pids = 512},
    .min = {.memory_bytes = 32LL << 20, .cpu_millis = 10, .pids = 16},
    .max = {.memory_bytes = 8LL << 30, .cpu_millis = 2000, .pids = 4096},
};

static tk_status lim(const char *js, sbx_limits *l, char *msg)
{
    char err[128];
    json_t *j = tk_json_parse(js, strlen(js), 4096, err, sizeof err);
    TK_ASSERT(j);
    tk_status st = sbx_limits_from_json(j, &pol, l, msg, 256);
    json_decref(j);
    return st;
}

TEST(limits_from_json)
{
    sbx_limits l;
    char msg[256];
    CHECK(sbx_limits_from_json(NULL, &pol, &l, msg, sizeof msg) == TK_OK);
    CHECK_INT(l.memory_bytes, ==, 2LL << 30);
    CHECK_INT(l.pids, ==, 512);
    CHECK(lim("{\"cpu\":\"500m\",\"memory\":\"256Mi\",\"pids\":\"64\"}", &l, msg) == TK_OK);
    CHECK_INT(l.cpu_millis, ==, 500);
    CHECK_INT(l.memory_bytes, ==, 256LL << 20);
    CHECK_INT(l.pids, ==, 64);
    CHECK(lim("{\"memory\":\"1Gi\"}", &l, msg) == TK_OK);
    CHECK_INT(l.cpu_millis, ==, 1000); /* default kept */
    CHECK(lim("{\"gpu\":\"0\"}", &l, msg) == TK_OK);
    CHECK(lim("{\"gpu\":\"1\"}", &l, msg) == TK_EINVAL);
    CHECK(lim("{\"cpu\":\"4\"}", &l, msg) == TK_EINVAL); /* over the max */
    CHECK(strstr(msg, "between") != NULL);
    CHECK(lim("{\"memory\":\"1Mi\"}", &l, msg) == TK_EINVAL); /* under the min */
    CHECK(lim("{\"pids\":\"8\"}", &l, msg) == TK_EINVAL);
    CHECK(lim("{\"pids\":\"lots\"}", &l, msg) == TK_EINVAL);
    CHECK(lim("{\"disk\":\"1Gi\"}", &l, msg) == TK_EINVAL);
    CHECK(strstr(msg, "disk") != NULL);
    CHECK(lim("{\"cpu\":[1]}", &l, msg) == TK_EINVAL);
    CHECK(lim("[]", &l, msg) == TK_EINVAL);
}

TEST(env_names)
{
    CHECK(sbx_env_name_valid("PATH"));
    CHECK(sbx_env_name_valid("_x1"));
    CHECK(!sbx_env_name_valid(""));
    CHECK(!sbx_env_name_valid("1A"));
    CHECK(!sbx_env_name_valid("A-B"));
    CHECK(!sbx_env_name_valid("A=B"));
    CHECK(!sbx_env_name_valid("A B"));
}

TEST(metadata_rules)
{
    char msg[256];
    CHECK(sbx_meta_key_valid("owner", msg, sizeof msg));
    CHECK(sbx_meta_key_valid("tusko.dev/session", msg, sizeof msg));
    CHECK(sbx_meta_key_valid("a.b_c-d", msg, sizeof msg));
    CHECK(!sbx_meta_key_valid("opensandbox.io/x", msg, sizeof msg));
    CHECK(strstr(msg, "reserved") != NULL);
    CHECK(!sbx_meta_key_valid("", msg, sizeof msg));
    CHECK(!sbx_meta_key_valid("-a", msg, sizeof msg));
    CHECK(!sbx_meta_key_valid("UPPER.Case/x", msg, sizeof msg)); /* prefix must be lower case */
    CHECK(!sbx_meta_key_valid("a/b/c", msg, sizeof msg));
    char longk[80];
    memset(longk, 'a', 64);
    longk[64] = '\0';
    CHECK(!sbx_meta_key_valid(longk, msg, sizeof msg));
    CHECK(sbx_meta_value_valid("", msg, sizeof msg));
    CHECK(sbx_meta_value_valid("0190f3a2-7c1e-7abc-9def-0123456789ab", msg, sizeof msg));
    CHECK(!sbx_meta_value_valid("with space", msg, sizeof msg));
    CHECK(!sbx_meta_value_valid("trailing-", msg, sizeof msg));
    CHECK(!sbx_meta_value_valid(longk, msg, sizeof msg));
    char err[64];
    json_t *ok = tk_json_parse("{\"a\":\"b\"}", 9, 100, err, sizeof err);
    json_t *bad = tk_json_parse("{\"a\":1}", 7, 100, err, sizeof err);
    CHECK(sbx_meta_check(ok, msg, sizeof msg) == TK_OK);
    CHECK(sbx_meta_check(bad, msg, sizeof msg) == TK_EINVAL);
    CHECK(sbx_meta_check(NULL, msg, sizeof msg) == TK_OK);
    json_decref(ok);
    json_decref(bad);
}

TEST(metadata_filter)
{
    tk_arena *a = tk_arena_new(0);
    const char **k, **v;
    size_t n;
    CHECK(sbx_meta_filter_parse(a, "project=Apollo&note=Demo%20Test&flag", &k, &v, &n) == TK_OK);
    CHECK_INT(n, ==, 3);
    CHECK_STR(k[0], "project");
    CHECK_STR(v[0], "Apollo");
    CHECK_STR(k[1], "note");
    CHECK_STR(v[1], "Demo Test");
    CHECK_STR(k[2], "flag");
    CHECK(v[2] == NULL);
    char err[64];
    const char *js = "{\"project\":\"Apollo\",\"note\":\"Demo Test\",\"flag\":\"\"}";
    json_t *m = tk_json_parse(js, strlen(js), 1000, err, sizeof err);
    CHECK(sbx_meta_matches(m, k, v, n));
    CHECK(sbx_meta_matches(m, k, v, 0));
    CHECK(sbx_meta_filter_parse(a, "project=Zeus", &k, &v, &n) == TK_OK);
    CHECK(!sbx_meta_matches(m, k, v, n));
    CHECK(sbx_meta_filter_parse(a, "missing", &k, &v, &n) == TK_OK);
    CHECK(!sbx_meta_matches(m, k, v, n));
    CHECK(sbx_meta_filter_parse(a, "bad=%zz", &k, &v, &n) != TK_OK);
    json_decref(m);
    tk_arena_free(a);
}

TEST_MAIN()
