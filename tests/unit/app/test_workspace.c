/* agent/workspace: the client's path check, before a path is sent to a sandbox. */
#include <string.h>

#include "app/workspace.h"
#include "tk_test.h"

static const char *ws(const char *in)
{
    static char out[5000], err[200];
    if (agent_ws_path(in, strlen(in), out, sizeof out, err, sizeof err) != TK_OK)
        return NULL;
    return out;
}

TEST(workspace_paths_normalised)
{
    CHECK_STR(ws("a.txt"), "/workspace/a.txt");
    CHECK_STR(ws("./a//b/./c.txt"), "/workspace/a/b/c.txt");
    CHECK_STR(ws("/workspace"), "/workspace");
    CHECK_STR(ws("/workspace/"), "/workspace");
    CHECK_STR(ws("/workspace/x/y"), "/workspace/x/y");
    CHECK_STR(ws("dir/"), "/workspace/dir");
    CHECK_STR(ws("weird name & more (1).txt"), "/workspace/weird name & more (1).txt");
    CHECK_STR(ws("r\xc3\xa9sum\xc3\xa9.txt"), "/workspace/r\xc3\xa9sum\xc3\xa9.txt");
}

/* The client applies execd's own rules (lib/pathsafe), so what execd would
 * refuse is refused here first, with the same rule named. */
TEST(workspace_paths_refused_as_execd_would)
{
    const char *bad[][2] = {{"weird $name.txt", "$"},
                            {"a\\b", "backslash"},
                            {"bad\xff.txt", "UTF-8"},
                            {"a%2e%2e/b", "percent"}};
    for (size_t i = 0; i < TK_ARRAY_LEN(bad); i++) {
        char out[100], err[200] = "";
        CHECK(agent_ws_path(bad[i][0], strlen(bad[i][0]), out, sizeof out, err, sizeof err) ==
              TK_EINVAL);
        if (!strstr(err, bad[i][1]))
            TK_TEST_FAIL("\"%s\": the message \"%s\" does not name %s", bad[i][0], err, bad[i][1]);
    }
}

TEST(workspace_paths_refused)
{
    const char *bad[] = {"",
                         "../etc/passwd",
                         "a/../../b",
                         "/etc/passwd",
                         "/workspacex/a",
                         "/work",
                         "~/x",
                         "~",
                         "a/\x01b",
                         "a\nb",
                         "/workspace/../etc",
                         "..",
                         "/",
                         "//workspace/a"};
    for (size_t i = 0; i < TK_ARRAY_LEN(bad); i++) {
        if (ws(bad[i]) != NULL)
            TK_TEST_FAIL("accepted \"%s\" as %s", bad[i], ws(bad[i]));
    }
    char out[100], err[100];
    CHECK(agent_ws_path("a\0b", 3, out, sizeof out, err, sizeof err) == TK_EINVAL);
    CHECK(strstr(err, "NUL") != NULL);
    char longp[5000];
    memset(longp, 'a', sizeof longp - 1);
    longp[sizeof longp - 1] = 0;
    CHECK(ws(longp) == NULL);
}

TEST_MAIN()
