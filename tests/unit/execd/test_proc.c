/* execd/proc: spawning with a clean slate, exit statuses, group kills, reaping. */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
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

/* Reads everything from fd into buf (NUL-terminated). */
static void slurp(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    ssize_t r;
    while (n + 1 < cap && (r = read(fd, buf + n, cap - 1 - n)) > 0)
        n += (size_t)r;
    buf[n] = '\0';
}

static execd_proc *spawn_opts(execd_spawn_opts *o, const char *script, int out)
{
    char *argv[] = {"sh", "-c", (char *)script, NULL};
    o->path = "/bin/sh";
    o->argv = argv;
    o->envp = envp;
    o->stdin_fd = -1;
    o->stdout_fd = out;
    o->stderr_fd = out;
    char err[256];
    execd_proc *p = execd_proc_spawn(o, err, sizeof err);
    if (!p)
        TK_TEST_FAIL("spawn: %s", err);
    return p;
}

TEST(cwd_extra_fds_and_own_process_group)
{
    int pfd[2], xfd[2];
    CHECK(pipe2(pfd, O_CLOEXEC) == 0);
    CHECK(pipe2(xfd, O_CLOEXEC) == 0);
    int dir = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    CHECK(dir >= 0);
    execd_spawn_opts o = {.cwd_fd = dir, .extra_fds = {xfd[1]}, .nextra = 1};
    execd_proc *p = spawn_opts(&o, "pwd; echo extra >&3; ps -o pgid= -p $$; echo $$", pfd[1]);
    close(pfd[1]);
    close(xfd[1]);
    char buf[256], x[64];
    slurp(pfd[0], buf, sizeof buf);
    slurp(xfd[0], x, sizeof x);
    CHECK_INT(execd_proc_exit_code(wait_exit(p)), ==, 0);
    CHECK(strncmp(buf, "/tmp\n", 5) == 0);
    CHECK_STR(x, "extra\n");
    /* the pgid printed equals the child's pid */
    char *nl = strchr(buf + 5, '\n');
    CHECK(nl);
    long pgid = strtol(buf + 5, NULL, 10), pid = strtol(nl + 1, NULL, 10);
    CHECK_INT(pgid, ==, pid);
    CHECK_INT(pid, ==, (long)execd_proc_pid(p));
    execd_proc_release(p);
    close(pfd[0]);
    close(xfd[0]);
    close(dir);
}

/* Every thread of ours still has uid and gid 0 (ids are per thread in Linux). */
static void check_all_threads_root(void)
{
    DIR *d = opendir("/proc/self/task");
    CHECK(d);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char path[300], buf[4096];
        snprintf(path, sizeof path, "/proc/self/task/%s/status", de->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        CHECK(fd >= 0);
        slurp(fd, buf, sizeof buf);
        close(fd);
        if (!strstr(buf, "Uid:\t0\t0\t0\t0\n") || !strstr(buf, "Gid:\t0\t0\t0\t0\n"))
            TK_TEST_FAIL("thread %s has other ids:\n%s", de->d_name, buf);
        n++;
    }
    closedir(d);
    CHECK(n >= 2); /* this one and the reaper at least */
}

/* The child shares our memory until it execs: its id changes must be its own
 * (raw system calls, not libc's, which would change every thread of ours). */
TEST(uid_and_gid_change_the_child_only)
{
    if (geteuid() != 0) {
        printf("    (skipped: needs root)\n");
        return;
    }
    int pfd[2];
    CHECK(pipe2(pfd, O_CLOEXEC) == 0);
    execd_spawn_opts o = {.cwd_fd = -1, .set_uid = 1, .uid = 65534, .set_gid = 1, .gid = 65533};
    execd_proc *p = spawn_opts(&o, "id -u; id -g; id -G", pfd[1]);
    close(pfd[1]);
    char buf[256];
    slurp(pfd[0], buf, sizeof buf);
    CHECK_INT(execd_proc_exit_code(wait_exit(p)), ==, 0);
    execd_proc_release(p);
    close(pfd[0]);
    if (strncmp(buf, "65534\n65533\n", 12) != 0)
        TK_TEST_FAIL("the child's ids: %s", buf);
    check_all_threads_root();
}

TEST(the_callers_signal_mask_is_kept)
{
    sigset_t b, cur;
    sigemptyset(&b);
    sigaddset(&b, SIGUSR1);
    pthread_sigmask(SIG_SETMASK, &b, NULL);
    execd_proc *p = spawn_sh("exit 0", -1);
    pthread_sigmask(SIG_SETMASK, NULL, &cur);
    CHECK(sigismember(&cur, SIGUSR1));
    CHECK(!sigismember(&cur, SIGTERM));
    CHECK(!sigismember(&cur, SIGCHLD));
    CHECK_INT(execd_proc_exit_code(wait_exit(p)), ==, 0);
    execd_proc_release(p);
}

TEST(a_failing_step_is_named)
{
    int f = open("/dev/null", O_RDONLY | O_CLOEXEC); /* not a directory */
    CHECK(f >= 0);
    char *argv[] = {"sh", "-c", "exit 0", NULL};
    execd_spawn_opts o = {.path = "/bin/sh",
                          .argv = argv,
                          .envp = envp,
                          .cwd_fd = f,
                          .stdin_fd = -1,
                          .stdout_fd = -1,
                          .stderr_fd = -1};
    char err[256];
    CHECK(execd_proc_spawn(&o, err, sizeof err) == NULL);
    CHECK(strstr(err, "fchdir"));
    CHECK(strstr(err, "Not a directory"));
    close(f);
}

static void *spawn_many(void *arg)
{
    int base = (int)(intptr_t)arg;
    for (int i = 0; i < 40; i++) {
        char script[32];
        int code = (base * 40 + i) % 200;
        snprintf(script, sizeof script, "exit %d", code);
        execd_proc *p = spawn_sh(script, -1);
        if (execd_proc_exit_code(wait_exit(p)) != code)
            return (void *)1;
        execd_proc_release(p);
    }
    return NULL;
}

/* Several threads spawning at once: each child's context and stack are its own. */
TEST(concurrent_spawns)
{
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        CHECK(pthread_create(&t[i], NULL, spawn_many, (void *)(intptr_t)i) == 0);
    for (int i = 0; i < 4; i++) {
        void *r;
        CHECK(pthread_join(t[i], &r) == 0);
        CHECK(r == NULL);
    }
}

TEST_MAIN()
