/* lib/log: its settings, one line per event, escaping, JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "tk_test.h"

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

TEST_MAIN()
