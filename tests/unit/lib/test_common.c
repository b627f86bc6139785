/* lib/common: constant-time compare, the message quoter, the descriptor table. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "lib/common.h"
#include "tk_test.h"

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
