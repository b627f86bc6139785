#include "execd/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/common.h"
#include "lib/cond.h"
#include "lib/log.h"

struct execd_proc {
    pid_t pid;
    int efd;    /* eventfd, written once when reaped */
    int refs;   /* the caller's and the reaper's */
    int reaped; /* guarded by reg_lock */
    int kill_on_exit;
    int status;
    struct execd_proc *next;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t reg_cond = PTHREAD_COND_INITIALIZER;
static struct execd_proc *reg_head; /* unreaped children */
static size_t reg_live;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void unref_locked(struct execd_proc *p)
{
    if (--p->refs == 0) {
        close(p->efd);
        free(p);
    }
}

static void *reaper_main(void *arg)
{
    (void)arg;
    for (;;) {
        siginfo_t si;
        memset(&si, 0, sizeof si);
        /* Wait without reaping, so the pid stays ours until we hold the lock. */
        if (waitid(P_ALL, 0, &si, WEXITED | WNOWAIT) < 0) {
            if (errno == EINTR)
                continue;
            /* No children at all: wait for a spawn (or check again shortly, in
             * case an orphan was reparented to us meanwhile). */
            pthread_mutex_lock(&reg_lock);
            if (!reg_head)
                tk_cond_wait_ms(&reg_cond, &reg_lock, 1000);
            pthread_mutex_unlock(&reg_lock);
            continue;
        }
        if (si.si_pid <= 0)
            continue;
        pthread_mutex_lock(&reg_lock);
        struct execd_proc **pp = &reg_head, *p = NULL;
        for (; *pp; pp = &(*pp)->next) {
            if ((*pp)->pid == si.si_pid) {
                p = *pp;
                break;
            }
        }
        /* The leader is a zombie: its pid still names the group, so the group
         * can be finished off safely before the pid is released. */
        if (p && p->kill_on_exit)
            kill(-p->pid, SIGKILL);
        int status = 0;
        pid_t r = waitpid(si.si_pid, &status, WNOHANG);
        if (r == si.si_pid && p) {
            *pp = p->next;
            p->reaped = 1;
            p->status = status;
            reg_live--;
            uint64_t one = 1;
            if (write(p->efd, &one, sizeof one) < 0)
                tk_warn("proc", "msg=\"eventfd write failed\" err=\"%s\"", strerror(errno));
            unref_locked(p);
        } else if (r == si.si_pid) {
            tk_debug("proc", "msg=\"reaped an orphan\" pid=%d", (int)r);
        }
        pthread_mutex_unlock(&reg_lock);
    }
    return NULL;
}

static void init_reaper(void)
{
    /* see tk_fd_table_reserve: grown before the first thread */
    (void)tk_fd_table_reserve(1024);
    signal(SIGCHLD, SIG_DFL);
    if (getpid() != 1 && prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
        tk_warn("proc", "msg=\"cannot become a child subreaper\" err=\"%s\"", strerror(errno));
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &a, reaper_main, NULL) != 0)
        tk_panic(__FILE__, __LINE__, "pthread_create(reaper)");
    pthread_attr_destroy(&a);
}

void execd_proc_init(void)
{
    pthread_once(&init_once, init_reaper);
}

/* ---------- spawning ----------
 *
 * The child is made with clone(CLONE_VM | CLONE_VFORK): it runs in execd's
 * memory, on a stack of its own, until its execve, while the calling thread
 * waits. No page table is copied and no page is copied on write, which fork()
 * of this multi-threaded process did on every command (measured: ~0.5 ms for
 * the fork and ~0.7 ms of child set-up and exec on 2 busy cores, against
 * ~0.1 ms now). The price is discipline in the child, the same as glibc's
 * posix_spawn: it runs with every signal blocked until it has reset every
 * disposition (no handler of execd's may run on its stack), it calls only
 * system call wrappers, and it changes ids through raw system calls (libc's
 * setresuid() and friends would signal execd's threads). It reports a failing
 * step in ctx, which the parent reads once the clone returns (the child has
 * then exec'd or exited). */

enum { STEP_STDIO = 1, STEP_PGRP, STEP_CWD, STEP_GROUPS, STEP_GID, STEP_UID, STEP_EXEC };

static const char *step_name(int s)
{
    switch (s) {
    case STEP_STDIO:
        return "setting up stdio";
    case STEP_PGRP:
        return "setpgid";
    case STEP_CWD:
        return "fchdir to the working directory";
    case STEP_GROUPS:
        return "setgroups";
    case STEP_GID:
        return "setgid";
    case STEP_UID:
        return "setuid";
    case STEP_EXEC:
        return "execve";
    }
    return "spawn";
}

#define CHILD_STACK (64u << 10)

typedef struct {
    const execd_spawn_opts *o;
    int devnull;
    const gid_t *groups;
    int ngroups; /* -1: leave the groups */
    gid_t gid;
    /* written by the child */
    volatile int step, err;
} spawn_ctx;

TK_NO_ASAN static _Noreturn void child_fail(spawn_ctx *x, int step, int e)
{
    x->err = e;
    x->step = step;
    for (;;)
        syscall(SYS_exit_group, 127); /* not _exit(): a sanitizer's runs exit hooks */
}

/* Moves fd out of the 0..4 range so dup2 into place cannot clobber another. */
TK_NO_ASAN static int lift(spawn_ctx *x, int fd)
{
    if (fd < 0 || fd > 4)
        return fd;
    int n = fcntl(fd, F_DUPFD, 10);
    if (n < 0)
        child_fail(x, STEP_STDIO, errno);
    return n;
}

/* In the child: system calls only from here to execve. */
TK_NO_ASAN static int child_main(void *arg)
{
    spawn_ctx *x = arg;
    const execd_spawn_opts *o = x->o;
    /* A clean signal state first: execd has handlers and ignores some. */
    tk_child_default_signals();
    int in = lift(x, o->stdin_fd >= 0 ? o->stdin_fd : x->devnull);
    int out = lift(x, o->stdout_fd >= 0 ? o->stdout_fd : x->devnull);
    int er = lift(x, o->stderr_fd >= 0 ? o->stderr_fd : x->devnull);
    int extra[2] = {-1, -1};
    for (int i = 0; i < o->nextra && i < 2; i++)
        extra[i] = lift(x, o->extra_fds[i]);
    if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(er, 2) < 0)
        child_fail(x, STEP_STDIO, errno);
    for (int i = 0; i < 2; i++)
        if (extra[i] >= 0 && dup2(extra[i], 3 + i) < 0)
            child_fail(x, STEP_STDIO, errno);
    if (setpgid(0, 0) < 0)
        child_fail(x, STEP_PGRP, errno);
    if (o->cwd_fd >= 0 && fchdir(o->cwd_fd) < 0)
        child_fail(x, STEP_CWD, errno);
    if (x->ngroups >= 0 && syscall(SYS_setgroups, (size_t)x->ngroups, x->groups) < 0)
        child_fail(x, STEP_GROUPS, errno);
    if ((o->set_gid || o->set_uid) && syscall(SYS_setresgid, x->gid, x->gid, x->gid) < 0)
        child_fail(x, STEP_GID, errno);
    if (o->set_uid && syscall(SYS_setresuid, o->uid, o->uid, o->uid) < 0)
        child_fail(x, STEP_UID, errno);
    /* No fd but stdio (and the kept ones) survives, whatever its flags. */
    unsigned first = 3 + (unsigned)(o->nextra > 2 ? 2 : o->nextra);
    syscall(SYS_close_range, first, ~0U, 0);
    uint64_t none = 0;
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, sizeof none);
    execve(o->path, o->argv, o->envp);
    child_fail(x, STEP_EXEC, errno);
}

execd_proc *execd_proc_spawn(const execd_spawn_opts *o, char *err, size_t errlen)
{
    execd_proc_init();
    /* Everything the child needs is prepared before the clone. */
    gid_t groups[256];
    spawn_ctx x = {.o = o, .groups = groups, .ngroups = -1, .gid = o->gid};
    if (o->set_uid) {
        struct passwd pw, *res = NULL;
        char pwbuf[4096];
        if (getpwuid_r(o->uid, &pw, pwbuf, sizeof pwbuf, &res) == 0 && res) {
            if (!o->set_gid)
                x.gid = pw.pw_gid;
            int n = (int)TK_ARRAY_LEN(groups);
            if (getgrouplist(pw.pw_name, x.gid, groups, &n) >= 0)
                x.ngroups = n;
            else
                x.ngroups = 0;
        } else {
            if (!o->set_gid)
                x.gid = (gid_t)o->uid; /* no passwd entry: never keep root's group */
            x.ngroups = 0;
        }
    } else if (o->set_gid) {
        x.ngroups = 0;
    }
    x.devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (x.devnull < 0) {
        snprintf(err, errlen, "open /dev/null: %s", strerror(errno));
        return NULL;
    }
    /* the child's stack, with a guard page below it */
    char *stack = mmap(NULL, CHILD_STACK + 4096, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) {
        snprintf(err, errlen, "mmap a stack: %s", strerror(errno));
        close(x.devnull);
        return NULL;
    }
    mprotect(stack, 4096, PROT_NONE);
    struct execd_proc *p = tk_calloc(1, sizeof *p);
    p->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (p->efd < 0) {
        snprintf(err, errlen, "eventfd: %s", strerror(errno));
        munmap(stack, CHILD_STACK + 4096);
        close(x.devnull);
        free(p);
        return NULL;
    }
    p->refs = 2;

    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_mutex_lock(&reg_lock);
    pid_t pid = clone(child_main, stack + CHILD_STACK + 4096, CLONE_VM | CLONE_VFORK | SIGCHLD, &x);
    int e = errno;
    /* the child has exec'd or exited: its stack and our mask are ours again */
    if (pid < 0) {
        pthread_mutex_unlock(&reg_lock);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        snprintf(err, errlen, "clone: %s", strerror(e));
        munmap(stack, CHILD_STACK + 4096);
        close(x.devnull);
        close(p->efd);
        free(p);
        return NULL;
    }
    p->pid = pid;
    p->next = reg_head;
    reg_head = p;
    reg_live++;
    pthread_cond_signal(&reg_cond);
    pthread_mutex_unlock(&reg_lock);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    munmap(stack, CHILD_STACK + 4096);
    close(x.devnull);
    if (x.step) {
        snprintf(err, errlen, "%s failed: %s", step_name(x.step), strerror(x.err));
        execd_proc_release(p); /* the reaper collects the child */
        return NULL;
    }
    return p;
}

pid_t execd_proc_pid(const execd_proc *p)
{
    return p->pid;
}

int execd_proc_exit_fd(const execd_proc *p)
{
    return p->efd;
}

int execd_proc_status(execd_proc *p, int *status)
{
    pthread_mutex_lock(&reg_lock);
    int r = p->reaped;
    if (r && status)
        *status = p->status;
    pthread_mutex_unlock(&reg_lock);
    return r;
}

int execd_proc_kill_group(execd_proc *p, int sig)
{
    pthread_mutex_lock(&reg_lock);
    int r = -1;
    if (!p->reaped)
        r = kill(-p->pid, sig) == 0 || errno == ESRCH ? 0 : -1;
    pthread_mutex_unlock(&reg_lock);
    return r;
}

int execd_proc_kill(execd_proc *p, int sig)
{
    pthread_mutex_lock(&reg_lock);
    int r = -1;
    if (!p->reaped)
        r = kill(p->pid, sig) == 0 ? 0 : -1;
    pthread_mutex_unlock(&reg_lock);
    return r;
}

void execd_proc_kill_group_on_exit(execd_proc *p)
{
    pthread_mutex_lock(&reg_lock);
    p->kill_on_exit = 1;
    pthread_mutex_unlock(&reg_lock);
}

void execd_proc_release(execd_proc *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&reg_lock);
    unref_locked(p);
    pthread_mutex_unlock(&reg_lock);
}

size_t execd_proc_live(void)
{
    pthread_mutex_lock(&reg_lock);
    size_t n = reg_live;
    pthread_mutex_unlock(&reg_lock);
    return n;
}

void execd_proc_describe(int status, char *out, size_t outlen)
{
    if (WIFEXITED(status)) {
        snprintf(out, outlen, "exit status %d", WEXITSTATUS(status));
    } else if (WIFSIGNALED(status)) {
        const char *d = sigabbrev_np(WTERMSIG(status));
        int s = WTERMSIG(status);
        /* Go's wording: "signal: killed", "signal: terminated", ... */
        const char *desc = sigdescr_np(s);
        char low[64];
        snprintf(low, sizeof low, "%s", desc ? desc : (d ? d : "unknown"));
        for (char *c = low; *c; c++)
            if (*c >= 'A' && *c <= 'Z')
                *c = (char)(*c - 'A' + 'a');
        snprintf(out, outlen, "signal: %s", low);
    } else {
        snprintf(out, outlen, "wait status %d", status);
    }
}

int execd_proc_exit_code(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return 255;
}
