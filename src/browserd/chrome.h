/*
 * chrome.h — starting and stopping one Chromium driven over its pipe.
 *
 * Each Chromium gets a profile folder of its own and, when `isolate` is set,
 * namespaces of its own: a network namespace holding only loopback (its one
 * way out is the proxy listener browserd makes in that namespace and serves
 * from outside it), a PID namespace (Chromium is its init: killing it ends
 * every process it started), mount, IPC and UTS namespaces, and a private
 * /proc. It runs as the unprivileged uid/gid given (as root-in-a-user-namespace
 * mapped to browserd's own uid when browserd is not root), with RLIMIT_NPROC
 * as its process limit (the uid is its own, so the count is its own).
 *
 * Lifetime: brd_chrome_start's caller owns the returned pipe ends and the proxy
 * listener; brd_chrome_kill ends the namespace and reaps it.
 */
#ifndef BRD_CHROME_H
#define BRD_CHROME_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/common.h"

/* The proxy's address inside a browser's network namespace. */
#define BRD_PROXY_PORT 3128

typedef struct {
    const char *chromium;    /* the executable */
    const char *profile_dir; /* made (0700, owned by uid) before the start */
    const char *log_path;    /* Chromium's stderr (NULL: /dev/null) */
    int isolate;             /* namespaces and the proxy listener */
    uid_t uid;               /* when root: the uid/gid Chromium runs as */
    gid_t gid;
    long max_procs; /* RLIMIT_NPROC when run as its own uid (0: none) */
    int width, height;
    const char *user_agent;   /* NULL: Chromium's */
    int headless;             /* 0 runs headful (needs a display) */
    int64_t start_timeout_ms; /* the launcher's word and the exec (0: 20 s) */
} brd_chrome_config;

typedef struct {
    pid_t pid;    /* Chromium (the namespace's init) as browserd sees it */
    pid_t keeper; /* the process between (our child) waiting for it; 0 without */
    int wfd, rfd; /* the pipe: we write its fd 3, read its fd 4 */
    int proxy_fd; /* listening in its namespace (-1 without isolate) */
} brd_chrome;

tk_status brd_chrome_start(const brd_chrome_config *cfg, brd_chrome *out, char *err, size_t errlen);
/* SIGKILL and reap (does not close the fds). */
void brd_chrome_kill(brd_chrome *c);
/* Non-zero while Chromium runs (a zombie counts as gone). */
int brd_chrome_running(const brd_chrome *c);

/* Removes a folder and everything under it (no symlink followed). */
tk_status brd_chrome_rm_tree(const char *path);

#endif
