/* lines: output split into lines as upstream execd does, cut on UTF-8 boundaries. */
#include <string.h>

#include "execd/lines.h"
#include "tk_test.h"

struct got {
    char lines[32][128];
    int n;
};

static void collect(void *ud, const char *t, size_t len)
{
    struct got *g = ud;
    if (g->n < 32)
        snprintf(g->lines[g->n++], 128, "%.*s", (int)len, t);
}

TEST(lines_split_like_upstream)
{
    execd_lines l;
    execd_lines_init(&l, 1024);
    struct got g = {0};
    const char *in = "a\nb\r\nc\rd\n\n\r\n";
    /* fed one byte at a time: boundaries must not matter */
    for (size_t i = 0; in[i]; i++)
        execd_lines_feed(&l, in + i, 1, collect, &g);
    execd_lines_feed(&l, "tail", 4, collect, &g);
    CHECK_INT(g.n, ==, 6);
    CHECK_STR(g.lines[0], "a");
    CHECK_STR(g.lines[1], "b");
    CHECK_STR(g.lines[2], "c");
    CHECK_STR(g.lines[3], "d");
    CHECK_STR(g.lines[4], "\n");
    CHECK_STR(g.lines[5], "\n");
    CHECK(execd_lines_due(&l, 100) >= 0);
    execd_lines_flush(&l, collect, &g);
    CHECK_STR(g.lines[6], "tail");
    CHECK(execd_lines_due(&l, 100) < 0);
    execd_lines_free(&l);
}

TEST(lines_cut_long_lines_on_utf8_boundaries)
{
    execd_lines l;
    execd_lines_init(&l, 16);
    struct got g = {0};
    /* 15 ASCII bytes then a 2-byte character straddling the cap */
    execd_lines_feed(&l, "aaaaaaaaaaaaaaa\xc3\xa9zz\n", 20, collect, &g);
    CHECK_INT(g.n, ==, 2);
    CHECK_STR(g.lines[0], "aaaaaaaaaaaaaaa");
    CHECK_STR(g.lines[1], "\xc3\xa9zz");
    execd_lines_free(&l);
}

TEST_MAIN()
