/* execd/proc: spawning with a clean slate, exit statuses, group kills, reaping. */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "execd/proc.h"
#include "lib/tktime.h"
#include "tk_test.h"

static char *envp[] = {"PATH=/usr/bin:/bin", NULL};

static int wait_exit(execd_proc *p)
{
    struct pollfd pf = {.fd = execd_proc_exit_fd(p), .events = POLLIN};
    CHECK(poll(&pf, 1, 10000) == 1);
    int st;
    CHECK(execd_proc_status(p, &st));
    return st;
}

static execd_proc *spawn_sh(const char *script, int out)
{
    char *argv[] = {"sh", "-c", (char *)script, NULL};
    execd_spawn_opts o = {.path = "/bin/sh",
                          .argv = argv,
                          .envp = envp,
                          .cwd_fd = -1,
                          .stdin_fd = -1,
                          .stdout_fd = out,
                          .stderr_fd = out};
    char err[256];
    execd_proc *p = execd_proc_spawn(&o, err, sizeof err);
    if (!p)
        TK_TEST_FAIL("spawn: %s", err);
    return p;
}

TEST(exit_status_and_description)
{
    execd_proc *p = spawn_sh("exit 3", -1);
    int st = wait_exit(p);
    CHECK_INT(execd_proc_exit_code(st), ==, 3);
    char d[64];
    execd_proc_describe(st, d, sizeof d);
    CHECK_STR(d, "exit status 3");
    CHECK_INT(execd_proc_kill_group(p, SIGKILL), ==, -1); /* reaped: never signalled */
    execd_proc_release(p);
}

TEST(no_fds_leak_and_signals_are_default)
{
    int pfd[2];
    CHECK(pipe2(pfd, O_CLOEXEC) == 0);
    int leak = open("/dev/null", O_RDONLY); /* deliberately without O_CLOEXEC */
    CHECK(leak >= 0);
    signal(SIGPIPE, SIG_IGN);
    sigset_t b;
    sigemptyset(&b);
    sigaddset(&b, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &b, NULL);
    /* no pipeline: a pipe of the shell's own would show up in a listing */
    execd_proc *p =
        spawn_sh("ls /proc/self/fd; grep -E '^(SigBlk|SigIgn)' /proc/self/status", pfd[1]);
    close(pfd[1]);
    char buf[512] = {0};
    size_t n = 0;
    ssize_t r;
    while ((r = read(pfd[0], buf + n, sizeof buf - 1 - n)) > 0)
        n += (size_t)r;
    wait_exit(p);
    execd_proc_release(p);
    /* 0 1 2, and the directory ls itself opens */
    if (strncmp(buf, "0\n1\n2\n3\nSig", 11) != 0)
        TK_TEST_FAIL("fds seen by the child: %s", buf);
    if (!strstr(buf, "SigBlk:\t0000000000000000") || !strstr(buf, "SigIgn:\t0000000000000000"))
        TK_TEST_FAIL("signal state seen by the child:\n%s", buf);
    close(leak);
}

TEST(group_kill_reaches_grandchildren)
{
    int pfd[2];
    CHECK(pipe2(pfd, O_CLOEXEC) == 0);
    execd_proc *p = spawn_sh("sleep 300 & echo $!; wait", pfd[1]);
    close(pfd[1]);
    char buf[32] = {0};
    CHECK(read(pfd[0], buf, sizeof buf - 1) > 0);
    int child = (int)strtol(buf, NULL, 10);
    CHECK(child > 1);
    CHECK(kill(child, 0) == 0);
    CHECK_INT(execd_proc_kill_group(p, SIGTERM), ==, 0);
    int st = wait_exit(p);
    CHECK(WIFSIGNALED(st));
    char d[64];
    execd_proc_describe(st, d, sizeof d);
    CHECK_STR(d, "signal: terminated");
    CHECK_INT(execd_proc_exit_code(st), ==, 143);
    /* the grandchild got the signal too (and, orphaned, is reaped by us) */
    int64_t end = tk_mono_ms() + 10000;
    while (kill(child, 0) == 0 && tk_mono_ms() < end)
        tk_sleep_ms(10);
    CHECK(kill(child, 0) != 0);
    execd_proc_release(p);
    close(pfd[0]);
}

TEST(exec_failure_is_reported)
{
    char *argv[] = {"nope", NULL};
    execd_spawn_opts o = {.path = "/no/such/program",
                          .argv = argv,
                          .envp = envp,
                          .cwd_fd = -1,
                          .stdin_fd = -1,
                          .stdout_fd = -1,
                          .stderr_fd = -1};
    char err[256];
    CHECK(execd_proc_spawn(&o, err, sizeof err) == NULL);
    CHECK(strstr(err, "execve failed"));
    CHECK(strstr(err, "No such file"));
}

TEST_MAIN()
