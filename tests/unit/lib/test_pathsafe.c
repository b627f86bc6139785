/* lib/pathsafe: the lexical rules, kernel resolution beneath the root (openat2
 * and the O_NOFOLLOW walk), and a symlink swapped in by a racing thread. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/pathsafe.h"
#include "tk_test.h"

static char base[256], root[300], outside[300];

static void setup(tk_pathsafe *ws)
{
    snprintf(base, sizeof base, "/tmp/tk-pathsafe-XXXXXX");
    CHECK(mkdtemp(base) != NULL);
    snprintf(root, sizeof root, "%s/ws", base);
    snprintf(outside, sizeof outside, "%s/outside", base);
    CHECK(mkdir(root, 0755) == 0);
    CHECK(mkdir(outside, 0755) == 0);
    char err[256];
    CHECK(tk_pathsafe_init(ws, root, err, sizeof err) == TK_OK);
}

static void sh(const char *fmt, const char *arg)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, fmt, arg, arg, arg);
    pid_t p = fork();
    if (p == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(p, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void teardown(tk_pathsafe *ws)
{
    tk_pathsafe_close(ws);
    sh("rm -rf '%s'", base);
}

static tk_status rel_of(tk_pathsafe *ws, const char *p, char *out)
{
    char why[256];
    return tk_pathsafe_rel(ws, p, strlen(p), out, TK_PATHSAFE_PATH_MAX, why, sizeof why);
}

TEST(rel_accepts_and_normalises)
{
    tk_pathsafe ws;
    setup(&ws);
    char rel[TK_PATHSAFE_PATH_MAX], abs[600];
    struct {
        const char *in, *out;
    } ok[] = {
        {"a.txt", "a.txt"},
        {"./a/./b/", "a/b"},
        {"a//b///c", "a/b/c"},
        {"a/b/../c", "a/c"},
        {".", ""},
        {"a/..", ""},
        {"100%.txt", "100%.txt"},
        {"caf\xc3\xa9", "caf\xc3\xa9"},
        {"with space/and:colon", "with space/and:colon"},
    };
    for (size_t i = 0; i < TK_ARRAY_LEN(ok); i++) {
        CHECK_INT(rel_of(&ws, ok[i].in, rel), ==, TK_OK);
        CHECK_STR(rel, ok[i].out);
    }
    snprintf(abs, sizeof abs, "%s/x/y", root);
    CHECK_INT(rel_of(&ws, abs, rel), ==, TK_OK);
    CHECK_STR(rel, "x/y");
    snprintf(abs, sizeof abs, "%s//x/../z/", root);
    CHECK_INT(rel_of(&ws, abs, rel), ==, TK_OK);
    CHECK_STR(rel, "z");
    CHECK_INT(rel_of(&ws, root, rel), ==, TK_OK);
    CHECK_STR(rel, "");
    char disp[TK_PATHSAFE_PATH_MAX + 8];
    tk_pathsafe_display(&ws, "x/y", disp, sizeof disp);
    snprintf(abs, sizeof abs, "%s/x/y", root);
    CHECK_STR(disp, abs);
    teardown(&ws);
}

TEST(rel_refuses_with_the_rule_named)
{
    tk_pathsafe ws;
    setup(&ws);
    char rel[TK_PATHSAFE_PATH_MAX], why[256];
    struct {
        const char *in;
        size_t len;
        const char *rule;
    } bad[] = {
        {"", 0, "empty"},
        {"a\0b", 3, "NUL"},
        {"..", 2, "climbs out"},
        {"../etc/passwd", 13, "climbs out"},
        {"a/../../b", 9, "climbs out"},
        {"/etc/passwd", 11, "outside the workspace"},
        {"/", 1, "outside the workspace"},
        {"~", 1, "'~'"},
        {"~root/x", 7, "'~'"},
        {"a/../~x", 7, "'~'"},
        {"$HOME/x", 7, "'$'"},
        {"a/${X}", 6, "'$'"},
        {"%2e%2e/x", 8, "percent-escape"},
        {"..\\..\\etc", 9, "backslash"},
        {"a\nb", 3, "control character"},
        {"\xc0\xae\xc0\xae/etc", 8, "UTF-8"},
        {"\xff", 1, "UTF-8"},
    };
    for (size_t i = 0; i < TK_ARRAY_LEN(bad); i++) {
        why[0] = '\0';
        CHECK_INT(tk_pathsafe_rel(&ws, bad[i].in, bad[i].len, rel, sizeof rel, why, sizeof why), ==,
                  TK_EDENIED);
        if (!strstr(why, bad[i].rule))
            TK_TEST_FAIL("case %zu: \"%s\" does not name \"%s\"", i, why, bad[i].rule);
    }
    /* a root-prefixed path that only looks like the root */
    char sib[600];
    snprintf(sib, sizeof sib, "%s2/x", root);
    CHECK_INT(rel_of(&ws, sib, rel), ==, TK_EDENIED);
    snprintf(sib, sizeof sib, "%s/../outside/x", root);
    CHECK_INT(rel_of(&ws, sib, rel), ==, TK_EDENIED);
    /* long paths and long components */
    char *longp = malloc(5000);
    memset(longp, 'a', 4999);
    longp[4999] = '\0';
    CHECK_INT(tk_pathsafe_rel(&ws, longp, 4999, rel, sizeof rel, why, sizeof why), ==, TK_EDENIED);
    CHECK(strstr(why, "longer than 4096"));
    longp[256] = '\0';
    CHECK_INT(tk_pathsafe_rel(&ws, longp, 256, rel, sizeof rel, why, sizeof why), ==, TK_EDENIED);
    CHECK(strstr(why, "component is longer than 255"));
    free(longp);
    teardown(&ws);
}

static void resolution_cases(int walk)
{
    tk_pathsafe ws;
    setup(&ws);
    tk_pathsafe_force_walk(walk);
    sh("cd '%s' && mkdir -p d/e && echo hi > d/f && ln -s /etc etc-link && ln -s .. up && "
       "ln -s d/f inner-link && ln -s ../outside out-dir",
       root);
    char why[256];
    int fd;
    /* plain files and directories */
    CHECK_INT(tk_pathsafe_open(&ws, "d/f", O_RDONLY, 0, 0, &fd, why, sizeof why), ==, TK_OK);
    char b[8] = {0};
    CHECK_INT(read(fd, b, sizeof b), ==, 3);
    CHECK_STR(b, "hi\n");
    close(fd);
    CHECK_INT(tk_pathsafe_open(&ws, "nope", O_RDONLY, 0, 0, &fd, why, sizeof why), ==, TK_ENOENT);
    CHECK_INT(tk_pathsafe_open(&ws, "d/f/x", O_RDONLY, 0, 0, &fd, why, sizeof why), ==, TK_ENOENT);
    /* symlinks leading out are refused, followed or not */
    CHECK_INT(tk_pathsafe_open(&ws, "etc-link/passwd", O_RDONLY, 0, 0, &fd, why, sizeof why), ==,
              TK_EDENIED);
    CHECK_INT(tk_pathsafe_open(&ws, "etc-link/passwd", O_RDONLY, 0, TK_PATHSAFE_FOLLOW, &fd, why,
                               sizeof why),
              ==, TK_EDENIED);
    CHECK_INT(
        tk_pathsafe_open(&ws, "up/outside", O_RDONLY, 0, TK_PATHSAFE_FOLLOW, &fd, why, sizeof why),
        ==, TK_EDENIED);
    CHECK_INT(tk_pathsafe_open(&ws, "out-dir", O_RDONLY | O_DIRECTORY, 0, TK_PATHSAFE_FOLLOW, &fd,
                               why, sizeof why),
              ==, TK_EDENIED);
    /* writing through a symlink to outside never creates anything there */
    CHECK_INT(
        tk_pathsafe_open(&ws, "out-dir/new", O_WRONLY | O_CREAT, 0644, 0, &fd, why, sizeof why), ==,
        TK_EDENIED);
    CHECK_INT(tk_pathsafe_open(&ws, "out-dir/new", O_WRONLY | O_CREAT, 0644, TK_PATHSAFE_FOLLOW,
                               &fd, why, sizeof why),
              ==, TK_EDENIED);
    char p[600];
    snprintf(p, sizeof p, "%s/new", outside);
    CHECK(access(p, F_OK) != 0);
    /* a symlink that stays inside: followed for reads (openat2 only), never for writes */
    tk_status st =
        tk_pathsafe_open(&ws, "inner-link", O_RDONLY, 0, TK_PATHSAFE_FOLLOW, &fd, why, sizeof why);
    if (walk) {
        CHECK_INT(st, ==, TK_EDENIED);
    } else {
        CHECK_INT(st, ==, TK_OK);
        close(fd);
    }
    CHECK_INT(tk_pathsafe_open(&ws, "inner-link", O_RDONLY, 0, 0, &fd, why, sizeof why), ==,
              TK_EDENIED);
    CHECK(strstr(why, "symlink"));
    /* the parent walk */
    char leaf[TK_PATHSAFE_NAME_MAX + 1];
    int dfd;
    CHECK_INT(
        tk_pathsafe_open_parent(&ws, "d/e/new.txt", 0, &dfd, leaf, sizeof leaf, why, sizeof why),
        ==, TK_OK);
    CHECK_STR(leaf, "new.txt");
    close(dfd);
    CHECK_INT(
        tk_pathsafe_open_parent(&ws, "out-dir/x", 0, &dfd, leaf, sizeof leaf, why, sizeof why), ==,
        TK_EDENIED);
    CHECK_INT(tk_pathsafe_open_parent(&ws, "", 0, &dfd, leaf, sizeof leaf, why, sizeof why), ==,
              TK_EDENIED);
    CHECK_INT(tk_pathsafe_open_parent(&ws, "m/n/o/p", TK_PATHSAFE_MKDIRS, &dfd, leaf, sizeof leaf,
                                      why, sizeof why),
              ==, TK_OK);
    close(dfd);
    snprintf(p, sizeof p, "%s/m/n/o", root);
    struct stat sb;
    CHECK(stat(p, &sb) == 0 && S_ISDIR(sb.st_mode));
    CHECK_INT(tk_pathsafe_open_parent(&ws, "out-dir/a/b", TK_PATHSAFE_MKDIRS, &dfd, leaf,
                                      sizeof leaf, why, sizeof why),
              ==, TK_EDENIED);
    snprintf(p, sizeof p, "%s/a", outside);
    CHECK(access(p, F_OK) != 0);
    tk_pathsafe_force_walk(0);
    teardown(&ws);
}

TEST(resolution_with_openat2)
{
    resolution_cases(0);
}

TEST(resolution_with_the_walk)
{
    resolution_cases(1);
}

/* A racing thread swaps "swap" between a real directory and a symlink to the
 * outside directory while files are created under it. Nothing may ever appear
 * outside. */
static volatile int stop_race;

static void *swapper(void *arg)
{
    char d[600], t[600];
    snprintf(d, sizeof d, "%s/swap", root);
    snprintf(t, sizeof t, "%s/swap.tmp", root);
    while (!stop_race) {
        mkdir(t, 0755);
        rename(t, d); /* fails while d is a non-empty dir; fine */
        unlink(t);
        symlink(outside, t);
        if (rename(t, d) != 0) {
            /* d is a directory: move it away, put the link in */
            char away[650];
            snprintf(away, sizeof away, "%s/away-%d", root, rand());
            rename(d, away);
            rename(t, d);
        }
        unlink(t);
    }
    return NULL;
}

static void race(int walk)
{
    tk_pathsafe ws;
    setup(&ws);
    tk_pathsafe_force_walk(walk);
    pthread_t th;
    stop_race = 0;
    pthread_create(&th, NULL, swapper, NULL);
    char why[256], leaf[TK_PATHSAFE_NAME_MAX + 1];
    int created = 0;
    for (int i = 0; i < 3000; i++) {
        int fd = -1;
        tk_status st;
        if (i % 2) {
            st = tk_pathsafe_open(&ws, "swap/file", O_WRONLY | O_CREAT, 0644,
                                  i % 4 == 1 ? TK_PATHSAFE_FOLLOW : 0, &fd, why, sizeof why);
        } else {
            int dfd;
            st = tk_pathsafe_open_parent(&ws, "swap/file", 0, &dfd, leaf, sizeof leaf, why,
                                         sizeof why);
            if (st == TK_OK) {
                fd = openat(dfd, leaf, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
                close(dfd);
            }
        }
        if (fd >= 0) {
            created++;
            close(fd);
        }
    }
    stop_race = 1;
    pthread_join(th, NULL);
    char p[600];
    snprintf(p, sizeof p, "%s/file", outside);
    if (access(p, F_OK) == 0)
        TK_TEST_FAIL("a file was created outside the workspace through the swapped symlink");
    if (getenv("RACE_DEBUG"))
        fprintf(stderr, "created=%d of 3000\n", created);
    tk_pathsafe_force_walk(0);
    teardown(&ws);
}

TEST(race_symlink_swap_openat2)
{
    race(0);
}

TEST(race_symlink_swap_walk)
{
    race(1);
}

TEST(init_refuses_bad_roots)
{
    tk_pathsafe ws;
    char err[256];
    CHECK_INT(tk_pathsafe_init(&ws, "relative/path", err, sizeof err), ==, TK_EINVAL);
    CHECK_INT(tk_pathsafe_init(&ws, "/no/such/dir/anywhere", err, sizeof err), ==, TK_ERROR);
    CHECK(strstr(err, "EXECD_WORKSPACE"));
    CHECK_INT(tk_pathsafe_init(&ws, "/tmp/../etc", err, sizeof err), ==, TK_EINVAL);
    CHECK_INT(tk_pathsafe_init(&ws, "/tmp//", err, sizeof err), ==, TK_OK);
    CHECK_STR(ws.root, "/tmp");
    tk_pathsafe_close(&ws);
}

/* The lexical rules against a root given as a string: what tusko checks before
 * it sends a path to a sandbox. */
static const char *chk(const char *in, unsigned flags, char *why)
{
    static char out[5000];
    char w[256];
    if (tk_pathsafe_check("/workspace", in, strlen(in), flags, out, sizeof out, why ? why : w,
                          256) != TK_OK)
        return NULL;
    return out;
}

TEST(check_against_a_root_string_normalises_to_an_absolute_path)
{
    for (unsigned f = 0; f <= TK_PATHSAFE_STRICT; f += TK_PATHSAFE_STRICT) {
        CHECK_STR(chk("a.txt", f, NULL), "/workspace/a.txt");
        CHECK_STR(chk("./a//b/./c.txt", f, NULL), "/workspace/a/b/c.txt");
        CHECK_STR(chk("/workspace", f, NULL), "/workspace");
        CHECK_STR(chk("/workspace/", f, NULL), "/workspace");
        CHECK_STR(chk("/workspace/x/y", f, NULL), "/workspace/x/y");
        CHECK_STR(chk("/workspace//x", f, NULL), "/workspace/x");
        CHECK_STR(chk("dir/", f, NULL), "/workspace/dir");
        CHECK_STR(chk(".", f, NULL), "/workspace");
        CHECK_STR(chk("caf\xc3\xa9 menu.txt", f, NULL), "/workspace/caf\xc3\xa9 menu.txt");
    }
    /* ".." that stays inside: resolved, unless strict */
    CHECK_STR(chk("a/../b", 0, NULL), "/workspace/b");
    CHECK_STR(chk("/workspace/a/..", 0, NULL), "/workspace");
    /* a root of "/" */
    char out[64], why[256];
    CHECK(tk_pathsafe_check("/", "/etc/x", 6, TK_PATHSAFE_STRICT, out, sizeof out, why,
                            sizeof why) == TK_OK);
    CHECK_STR(out, "/etc/x");
    CHECK(tk_pathsafe_check("/", "a", 1, 0, out, sizeof out, why, sizeof why) == TK_OK);
    CHECK_STR(out, "/a");
}

TEST(check_strict_refuses_every_dot_dot_and_names_the_rule)
{
    static const char *const bad[] = {"",
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
                                      "//workspace/a",
                                      "/./workspace/a",
                                      "a/../b",
                                      "/workspace/a/.."};
    for (size_t i = 0; i < TK_ARRAY_LEN(bad); i++)
        if (chk(bad[i], TK_PATHSAFE_STRICT, NULL) != NULL)
            TK_TEST_FAIL("accepted \"%s\" as %s", bad[i], chk(bad[i], TK_PATHSAFE_STRICT, NULL));
    char why[256];
    CHECK(chk("a/../b", TK_PATHSAFE_STRICT, why) == NULL);
    CHECK_STR(why, "\"..\" is not allowed in a path");
    CHECK(chk("../x", TK_PATHSAFE_STRICT, why) == NULL);
    CHECK_STR(why, "\"..\" is not allowed in a path");
    CHECK(chk("../x", 0, why) == NULL);
    CHECK_STR(why, "'..' climbs out of the workspace");
    CHECK(chk("//workspace/a", TK_PATHSAFE_STRICT, why) == NULL);
    CHECK_STR(why, "the absolute path is outside the workspace /workspace");
    CHECK_STR(chk("//workspace/a", 0, NULL), "/workspace/a");
    CHECK(chk("/etc/passwd", TK_PATHSAFE_STRICT, why) == NULL);
    CHECK_STR(why, "the absolute path is outside the workspace /workspace");
    CHECK(chk("", TK_PATHSAFE_STRICT, why) == NULL);
    CHECK_STR(why, "the path is empty");
    CHECK(chk("~/x", TK_PATHSAFE_STRICT, why) == NULL);
    CHECK_STR(why, "the path starts with '~' (home directories are never expanded in paths)");
    CHECK(chk("a\nb", TK_PATHSAFE_STRICT, why) == NULL);
    CHECK_STR(why, "the path contains a control character (0x0a)");
    /* the rules execd applies, the same in both modes */
    for (unsigned f = 0; f <= TK_PATHSAFE_STRICT; f += TK_PATHSAFE_STRICT) {
        CHECK(chk("weird $name.txt", f, why) == NULL);
        CHECK_STR(why, "the path contains '$' (variables are never expanded in paths)");
        CHECK(chk("a\\b", f, why) == NULL);
        CHECK(strstr(why, "backslash") != NULL);
        CHECK(chk("a%2e%2e", f, why) == NULL);
        CHECK(strstr(why, "percent-escape") != NULL);
        CHECK(chk("bad\xff", f, why) == NULL);
        CHECK_STR(why, "the path is not valid UTF-8");
    }
    char out[100];
    CHECK(tk_pathsafe_check("/workspace", "a\0b", 3, TK_PATHSAFE_STRICT, out, sizeof out, why,
                            sizeof why) == TK_EDENIED);
    CHECK_STR(why, "the path contains a NUL byte");
    CHECK_STR(out, "");
    char longp[5000];
    memset(longp, 'a', sizeof longp - 1);
    longp[sizeof longp - 1] = 0;
    CHECK(chk(longp, TK_PATHSAFE_STRICT, why) == NULL);
    CHECK_STR(why, "the path is longer than 4096 bytes");
    /* the absolute result must fit out */
    CHECK(tk_pathsafe_check("/workspace", "abcdef", 6, 0, out, 14, why, sizeof why) == TK_EDENIED);
    CHECK_STR(why, "the path is too long");
    CHECK_STR(out, "");
    CHECK(tk_pathsafe_check("/workspace", "abcdef", 6, 0, out, 18, why, sizeof why) == TK_OK);
    CHECK_STR(out, "/workspace/abcdef");
}

TEST_MAIN()
