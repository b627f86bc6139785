/* lib/log: its settings, one line per event, escaping, JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/json.h"
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

/* A message at its 4,095-byte limit with every byte escaped (6 bytes each)
 * still comes out as one whole line, in both formats. */
TEST(log_line_of_the_worst_case_message_is_whole)
{
    char path[] = "/tmp/tklogXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    fflush(stderr);
    dup2(fd, 2);
    static char msg[5000];
    memset(msg, 0x01, 4095);
    msg[4095] = 0;
    tk_log_init("t");
    tk_log_set_request_id("req-\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02");
    tk_warn("comp", "%s", msg);
    setenv("LOG_FORMAT", "json", 1);
    tk_log_init("t");
    tk_warn("comp", "%s", msg);
    unsetenv("LOG_FORMAT");
    fflush(stderr);
    static char buf[80000];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    unlink(path);
    CHECK(n > 0);
    buf[n] = 0;
    char *nl = strchr(buf, '\n');
    CHECK(nl != NULL);
    CHECK_INT(nl[-1], ==, '1');                           /* the text line ends with its message */
    CHECK_INT(nl - strstr(buf, "\\u0001"), ==, 4095 * 6); /* all of it */
    char *j = nl + 1;
    CHECK(strlen(j) > 4095 * 6 && j[strlen(j) - 1] == '\n');
    char err[128];
    json_t *o = tk_json_parse(j, strlen(j) - 1, 1 << 20, err, sizeof err);
    CHECK(o != NULL);
    CHECK_INT(strlen(tk_json_str(o, "event")), ==, 4095);
    json_decref(o);
}

TEST_MAIN()
