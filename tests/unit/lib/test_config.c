/* lib/config: settings tables from the environment and flags. */
#include <stdlib.h>
#include <string.h>

#include "lib/config.h"
#include "tk_test.h"

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

TEST_MAIN()
