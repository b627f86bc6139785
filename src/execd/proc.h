/*
 * proc.h — child processes: spawning with a clean slate, and one reaper for all.
 *
 * execd_proc_spawn forks and execs with: its own process group (so an interrupt
 * reaches everything the command started), the given stdio, cwd as an fd,
 * optional uid/gid (with the user's supplementary groups), a default signal
 * mask and dispositions, and no inherited fd but 0, 1 and 2.
 *
 * One reaper thread waits for every child (and, as a child subreaper or PID 1,
 * for orphans too). It reaps under the registry lock, so a process group is only
 * ever signalled while its leader is unreaped — its pid cannot have been reused.
 * Exit is announced on an eventfd (execd_proc_exit_fd) for poll loops.
 */
#ifndef EXECD_PROC_H
#define EXECD_PROC_H

#include <stddef.h>
#include <sys/types.h>

typedef struct execd_proc execd_proc;

typedef struct {
    const char *path;     /* program to exec */
    char *const *argv;    /* NULL-terminated */
    char *const *envp;    /* NULL-terminated */
    int cwd_fd;           /* directory fd to fchdir to; -1 keeps execd's */
    int stdin_fd;         /* -1: /dev/null */
    int stdout_fd;        /* -1: /dev/null */
    int stderr_fd;        /* -1: /dev/null; may equal stdout_fd */
    int set_uid, set_gid; /* non-zero: switch to uid / gid */
    uid_t uid;
    gid_t gid;
    int extra_fds[2]; /* kept open in the child as fds 3 and 4 ... */
    int nextra;       /* ... for the first nextra of them */
} execd_spawn_opts;

/* Starts the reaper (once, before the first spawn) and makes execd a child
 * subreaper so that orphaned descendants are reaped too. */
void execd_proc_init(void);

/* Starts a child. On failure returns NULL with a message (exec errors such as a
 * missing program or a refused uid are reported here too). The caller owns the
 * result: execd_proc_release() it. */
execd_proc *execd_proc_spawn(const execd_spawn_opts *o, char *err, size_t errlen);

pid_t execd_proc_pid(const execd_proc *p);
/* Readable (an eventfd) once the child has been reaped. */
int execd_proc_exit_fd(const execd_proc *p);
/* 1 and the wait status once reaped, else 0. */
int execd_proc_status(execd_proc *p, int *status);
/* Sends sig to the child's whole process group while the child is unreaped.
 * Returns 0 when sent, -1 when the child has already been reaped. */
int execd_proc_kill_group(execd_proc *p, int sig);
/* Asks the reaper to SIGKILL what is left of the group when the leader exits
 * (while its pid still names the group). Used once an interrupt has begun. */
void execd_proc_kill_group_on_exit(execd_proc *p);
/* Sends sig to the child alone while it is unreaped. */
int execd_proc_kill(execd_proc *p, int sig);
/* Drops the caller's reference; the reaper keeps its own until the child exits. */
void execd_proc_release(execd_proc *p);

/* Number of children spawned and not yet reaped (for metrics and tests). */
size_t execd_proc_live(void);

/* Describes a wait status the way Go's exec does: "exit status 1",
 * "signal: killed". And the exit code we report: the status, or 128 + signal. */
void execd_proc_describe(int status, char *out, size_t outlen);
int execd_proc_exit_code(int status);

#endif
