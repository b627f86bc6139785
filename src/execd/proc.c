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
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/common.h"
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
            if (!reg_head) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_sec += 1;
                pthread_cond_timedwait(&reg_cond, &reg_lock, &ts);
            }
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

/* In the child: only async-signal-safe calls from here to execve. */
static _Noreturn void child_fail(int errfd, int step, int e)
{
    int msg[2] = {step, e};
    ssize_t w = write(errfd, msg, sizeof msg);
    (void)w;
    _exit(127);
}

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

/* Moves fd out of the 0..4 range so dup2 into place cannot clobber another. */
static int lift(int fd, int errfd)
{
    if (fd < 0 || fd > 4)
        return fd;
    int n = fcntl(fd, F_DUPFD, 10);
    if (n < 0)
        child_fail(errfd, STEP_STDIO, errno);
    return n;
}

execd_proc *execd_proc_spawn(const execd_spawn_opts *o, char *err, size_t errlen)
{
    execd_proc_init();
    /* Everything the child needs is prepared before fork. */
    gid_t groups[256];
    int ngroups = -1;
    gid_t gid = o->gid;
    if (o->set_uid) {
        struct passwd pw, *res = NULL;
        char pwbuf[4096];
        if (getpwuid_r(o->uid, &pw, pwbuf, sizeof pwbuf, &res) == 0 && res) {
            if (!o->set_gid)
                gid = pw.pw_gid;
            int n = (int)TK_ARRAY_LEN(groups);
            if (getgrouplist(pw.pw_name, gid, groups, &n) >= 0)
                ngroups = n;
            else
                ngroups = 0;
        } else {
            if (!o->set_gid)
                gid = (gid_t)o->uid; /* no passwd entry: never keep root's group */
            ngroups = 0;
        }
    } else if (o->set_gid) {
        ngroups = 0;
    }
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull < 0) {
        snprintf(err, errlen, "open /dev/null: %s", strerror(errno));
        return NULL;
    }
    int ep[2];
    if (pipe2(ep, O_CLOEXEC) < 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        close(devnull);
        return NULL;
    }
    struct execd_proc *p = tk_calloc(1, sizeof *p);
    p->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (p->efd < 0) {
        snprintf(err, errlen, "eventfd: %s", strerror(errno));
        close(ep[0]);
        close(ep[1]);
        close(devnull);
        free(p);
        return NULL;
    }
    p->refs = 2;

    pthread_mutex_lock(&reg_lock);
    pid_t pid = fork();
    if (pid == 0) {
        /* child */
        int efd = ep[1];
        int in = lift(o->stdin_fd >= 0 ? o->stdin_fd : devnull, efd);
        int out = lift(o->stdout_fd >= 0 ? o->stdout_fd : devnull, efd);
        int er = lift(o->stderr_fd >= 0 ? o->stderr_fd : devnull, efd);
        int extra[2] = {-1, -1};
        for (int i = 0; i < o->nextra && i < 2; i++)
            extra[i] = lift(o->extra_fds[i], efd);
        if (efd <= 4) {
            int n = fcntl(efd, F_DUPFD_CLOEXEC, 10);
            if (n < 0)
                _exit(127);
            efd = n;
        }
        if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(er, 2) < 0)
            child_fail(efd, STEP_STDIO, errno);
        for (int i = 0; i < 2; i++)
            if (extra[i] >= 0 && dup2(extra[i], 3 + i) < 0)
                child_fail(efd, STEP_STDIO, errno);
        if (setpgid(0, 0) < 0)
            child_fail(efd, STEP_PGRP, errno);
        if (o->cwd_fd >= 0 && fchdir(o->cwd_fd) < 0)
            child_fail(efd, STEP_CWD, errno);
        if (ngroups >= 0 && setgroups((size_t)ngroups, groups) < 0)
            child_fail(efd, STEP_GROUPS, errno);
        if ((o->set_gid || o->set_uid) && setresgid(gid, gid, gid) < 0)
            child_fail(efd, STEP_GID, errno);
        if (o->set_uid && setresuid(o->uid, o->uid, o->uid) < 0)
            child_fail(efd, STEP_UID, errno);
        /* A clean signal state: execd blocks and ignores some. */
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        for (int s = 1; s < NSIG; s++)
            if (s != SIGKILL && s != SIGSTOP)
                sigaction(s, &dfl, NULL);
        /* glibc's sigaction refuses the two signals it keeps for itself (32 and
         * 33), so an SIG_IGN inherited on them (GNU make sets one) would reach
         * the command; reset them with the raw system call. */
        for (int s = 32; s <= 33; s++) {
            struct {
                void *handler;
                unsigned long flags;
                void *restorer;
                uint64_t mask;
            } ks = {0};
            ks.handler = (void *)SIG_DFL;
            syscall(SYS_rt_sigaction, s, &ks, NULL, sizeof ks.mask);
        }
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        /* No fd but stdio (and the kept one) survives, whatever its flags. */
        unsigned first = 3 + (unsigned)(o->nextra > 2 ? 2 : o->nextra);
        if (efd >= (int)first) {
            /* keep the error pipe (it is close-on-exec) */
            if (efd > (int)first)
                syscall(SYS_close_range, first, (unsigned)efd - 1, 0);
            syscall(SYS_close_range, (unsigned)efd + 1, ~0U, 0);
        } else {
            syscall(SYS_close_range, first, ~0U, 0);
        }
        execve(o->path, o->argv, o->envp);
        child_fail(efd, STEP_EXEC, errno);
    }
    if (pid < 0) {
        int e = errno;
        pthread_mutex_unlock(&reg_lock);
        snprintf(err, errlen, "fork: %s", strerror(e));
        close(ep[0]);
        close(ep[1]);
        close(devnull);
        close(p->efd);
        free(p);
        return NULL;
    }
    /* The parent also sets the group, so it exists before anyone signals it. */
    setpgid(pid, pid);
    p->pid = pid;
    p->next = reg_head;
    reg_head = p;
    reg_live++;
    pthread_cond_signal(&reg_cond);
    pthread_mutex_unlock(&reg_lock);
    close(ep[1]);
    close(devnull);
    int msg[2];
    ssize_t n;
    do
        n = read(ep[0], msg, sizeof msg);
    while (n < 0 && errno == EINTR);
    close(ep[0]);
    if (n == (ssize_t)sizeof msg) {
        snprintf(err, errlen, "%s failed: %s", step_name(msg[0]), strerror(msg[1]));
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
