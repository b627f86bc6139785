/*
 * tk_test.h — the in-tree unit test runner.
 *
 * A test is a plain function declared with TEST(name). Each test runs in its own
 * forked child with a timeout (TK_TEST_TIMEOUT seconds, default 20), so a crash,
 * a hang or leaked state in one test cannot affect another. The binary prints one
 * line per test and ends with "N passed, N failed"; the exit status is non-zero
 * when any test failed.
 *
 *   #include "tk_test.h"
 *   TEST(buf_refuses_past_cap) { CHECK(tk_buf_append(&b, "x", 1) == TK_ETOOBIG); }
 *   TEST_MAIN()
 *
 * Checks: CHECK(expr), CHECK_INT(a, op, b), CHECK_STR(a, b), CHECK_MEM(a, b, n).
 * A failed check reports file:line and the values, and fails the test at once.
 * Run a subset with arguments: ./test_buf buf_ (prefix match).
 */
#ifndef TK_TEST_H
#define TK_TEST_H

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef void (*tk_test_fn)(void);

struct tk_test_case {
    const char *name;
    tk_test_fn fn;
};

#define TK_TEST_MAX 512
static struct tk_test_case tk_test_cases[TK_TEST_MAX];
static int tk_test_ncases;

static inline void tk_test_register(const char *name, tk_test_fn fn)
{
    if (tk_test_ncases >= TK_TEST_MAX) {
        fprintf(stderr, "tk_test: too many tests (max %d)\n", TK_TEST_MAX);
        abort();
    }
    tk_test_cases[tk_test_ncases].name = name;
    tk_test_cases[tk_test_ncases].fn = fn;
    tk_test_ncases++;
}

#define TEST(name)                                                                                 \
    static void test_##name(void);                                                                 \
    __attribute__((constructor)) static void test_register_##name(void)                            \
    {                                                                                              \
        tk_test_register(#name, test_##name);                                                      \
    }                                                                                              \
    static void test_##name(void)

#define TK_TEST_FAIL(...)                                                                          \
    do {                                                                                           \
        fprintf(stderr, "    %s:%d: ", __FILE__, __LINE__);                                        \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
        fflush(stderr);                                                                            \
        _exit(1);                                                                                  \
    } while (0)

#define CHECK(expr)                                                                                \
    do {                                                                                           \
        if (!(expr))                                                                               \
            TK_TEST_FAIL("CHECK(%s) failed", #expr);                                               \
    } while (0)

#define CHECK_INT(a, op, b)                                                                        \
    do {                                                                                           \
        long long tk_a_ = (long long)(a), tk_b_ = (long long)(b);                                  \
        if (!(tk_a_ op tk_b_))                                                                     \
            TK_TEST_FAIL("CHECK_INT(%s %s %s) failed: %lld vs %lld", #a, #op, #b, tk_a_, tk_b_);   \
    } while (0)

#define CHECK_STR(a, b)                                                                            \
    do {                                                                                           \
        const char *tk_a_ = (a), *tk_b_ = (b);                                                     \
        if (tk_a_ == NULL || tk_b_ == NULL || strcmp(tk_a_, tk_b_) != 0)                           \
            TK_TEST_FAIL("CHECK_STR(%s, %s) failed: \"%s\" vs \"%s\"", #a, #b,                     \
                         tk_a_ ? tk_a_ : "(null)", tk_b_ ? tk_b_ : "(null)");                      \
    } while (0)

#define CHECK_MEM(a, b, n)                                                                         \
    do {                                                                                           \
        if (memcmp((a), (b), (n)) != 0)                                                            \
            TK_TEST_FAIL("CHECK_MEM(%s, %s, %s) failed", #a, #b, #n);                              \
    } while (0)

static inline int tk_test_selected(int argc, char **argv, const char *name)
{
    if (argc < 2)
        return 1;
    for (int i = 1; i < argc; i++)
        if (strncmp(name, argv[i], strlen(argv[i])) == 0)
            return 1;
    return 0;
}

static inline int tk_test_run_one(const struct tk_test_case *tc, int timeout)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        perror("tk_test: fork");
        return 0;
    }
    if (pid == 0) {
        alarm((unsigned)timeout);
        tc->fn();
        fflush(stdout);
        fflush(stderr);
        exit(0); /* exit, not _exit: LeakSanitizer runs at exit */
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 1;
    if (WIFSIGNALED(status))
        fprintf(stderr, "    %s: %s\n", tc->name,
                WTERMSIG(status) == SIGALRM ? "timed out" : strsignal(WTERMSIG(status)));
    return 0;
}

static inline int tk_test_main(int argc, char **argv)
{
    int timeout = 20, passed = 0, failed = 0;
    const char *t = getenv("TK_TEST_TIMEOUT");
    if (t && *t)
        timeout = (int)strtol(t, NULL, 10);
    if (timeout <= 0)
        timeout = 20;
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 0; i < tk_test_ncases; i++) {
        const struct tk_test_case *tc = &tk_test_cases[i];
        if (!tk_test_selected(argc, argv, tc->name))
            continue;
        if (tk_test_run_one(tc, timeout)) {
            printf("ok   %s\n", tc->name);
            passed++;
        } else {
            printf("FAIL %s\n", tc->name);
            failed++;
        }
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

#define TEST_MAIN()                                                                                \
    int main(int argc, char **argv)                                                                \
    {                                                                                              \
        return tk_test_main(argc, argv);                                                           \
    }

#endif
