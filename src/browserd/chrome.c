/*
 * chrome.c — one Chromium in namespaces of its own (see chrome.h).
 *
 * Parent (browserd): pipes, argv and environment made before fork (the child
 * of a threaded process allocates nothing). Keeper (our child): unshare the
 * namespaces, map the user when not root, bring up loopback, make the proxy
 * listener and send it back, fork Chromium and wait for it. Chromium's side
 * (the namespace's init): a private mount tree with its own /proc, the pipe on
 * fds 3/4, the process limit, the unprivileged ids, exec.
 */
#include "browserd/chrome.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <net/if.h>
#include <poll.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_ARGS 40

typedef struct {
    const brd_chrome_config *cfg;
    char *argv[MAX_ARGS];
    char *envp[12];
    int to_chrome[2], from_chrome[2], ctl[2], log_fd;
    uid_t host_uid;
    gid_t host_gid;
} launch;

/* Writes a short message to the control socket and exits (child side). */
static _Noreturn void child_fail(int ctl, const char *what)
{
    char msg[200];
    int e = errno;
    int n = snprintf(msg, sizeof msg, "E%s: %s", what, strerror(e));
    if (n > 0 && write(ctl, msg, (size_t)n) < 0)
        _exit(126);
    _exit(127);
}

static int write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

static int loopback_up(void)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -1;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    memcpy(ifr.ifr_name, "lo", 3);
    int rc = ioctl(s, SIOCGIFFLAGS, &ifr);
    if (rc == 0) {
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        rc = ioctl(s, SIOCSIFFLAGS, &ifr);
    }
    close(s);
    return rc;
}

static int proxy_listener(void)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -1;
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(BRD_PROXY_PORT)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s, (struct sockaddr *)&a, sizeof a) != 0 || listen(s, 128) != 0) {
        close(s);
        return -1;
    }
    return s;
}

static int send_fd(int ctl, int fd, pid_t pid)
{
    char tag[16];
    int n = snprintf(tag, sizeof tag, "P%d", (int)pid);
    struct iovec iov = {.iov_base = tag, .iov_len = (size_t)n};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fd >= 0) {
        mh.msg_control = u.buf;
        mh.msg_controllen = sizeof u.buf;
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &fd, sizeof fd);
    }
    return sendmsg(ctl, &mh, MSG_NOSIGNAL) == n ? 0 : -1;
}

/* Chromium's side: never returns. */
static _Noreturn void exec_chrome(launch *L, int in_pidns)
{
    const brd_chrome_config *cfg = L->cfg;
    int ctl = L->ctl[1];
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (in_pidns) {
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
            child_fail(ctl, "mount --make-rprivate /");
        if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
            child_fail(ctl, "mount /proc");
    }
    /* the pipe onto 3 and 4: first out of the way of both */
    int r = fcntl(L->to_chrome[0], F_DUPFD, 10), w = fcntl(L->from_chrome[1], F_DUPFD, 10);
    int logfd = fcntl(L->log_fd, F_DUPFD, 10), c2 = fcntl(ctl, F_DUPFD, 10);
    int devnull = open("/dev/null", O_RDWR);
    if (r < 0 || w < 0 || logfd < 0 || c2 < 0 || devnull < 0)
        child_fail(ctl, "dup");
    ctl = c2;
    if (dup2(devnull, 0) < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0 || dup2(r, 3) < 0 ||
        dup2(w, 4) < 0)
        child_fail(ctl, "dup2");
    /* the control socket stays (close-on-exec) to say whether exec failed */
    if (dup2(ctl, 5) < 0 || fcntl(5, F_SETFD, FD_CLOEXEC) != 0)
        child_fail(ctl, "dup2");
    ctl = 5;
    syscall(SYS_close_range, 6U, ~0U, 0U);
    if (cfg->max_procs > 0 && L->host_uid == 0 && cfg->uid != 0) {
        struct rlimit rl = {(rlim_t)cfg->max_procs, (rlim_t)cfg->max_procs};
        if (setrlimit(RLIMIT_NPROC, &rl) != 0)
            child_fail(ctl, "setrlimit(RLIMIT_NPROC)");
    }
    if (L->host_uid == 0 && cfg->uid != 0) {
        if (syscall(SYS_setgroups, 0, NULL) != 0)
            child_fail(ctl, "setgroups");
        if (syscall(SYS_setresgid, cfg->gid, cfg->gid, cfg->gid) != 0)
            child_fail(ctl, "setresgid");
        if (syscall(SYS_setresuid, cfg->uid, cfg->uid, cfg->uid) != 0)
            child_fail(ctl, "setresuid");
    }
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    if (chdir(cfg->profile_dir) != 0)
        child_fail(ctl, "chdir to the profile");
    execve(L->argv[0], L->argv, L->envp);
    child_fail(ctl, "exec chromium");
}

/* The keeper: the namespaces, the listener, Chromium, then wait for it. */
static _Noreturn void keeper(launch *L)
{
    int ctl = L->ctl[1];
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    setsid();
    int flags = CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS;
    if (L->host_uid != 0)
        flags |= CLONE_NEWUSER;
    if (unshare(flags) != 0)
        child_fail(ctl, "unshare (namespaces)");
    if (L->host_uid != 0) {
        char map[64];
        snprintf(map, sizeof map, "0 %u 1", (unsigned)L->host_uid);
        if (write_file("/proc/self/setgroups", "deny") != 0 ||
            write_file("/proc/self/uid_map", map) != 0)
            child_fail(ctl, "uid_map");
        snprintf(map, sizeof map, "0 %u 1", (unsigned)L->host_gid);
        if (write_file("/proc/self/gid_map", map) != 0)
            child_fail(ctl, "gid_map");
    }
    if (loopback_up() != 0)
        child_fail(ctl, "loopback up");
    int lfd = proxy_listener();
    if (lfd < 0)
        child_fail(ctl, "the proxy listener");
    pid_t pid = fork();
    if (pid < 0)
        child_fail(ctl, "fork");
    if (pid == 0) {
        close(lfd);
        exec_chrome(L, 1);
    }
    if (send_fd(ctl, lfd, pid) != 0)
        _exit(125);
    close(lfd);
    close(ctl);
    close(L->to_chrome[0]);
    close(L->from_chrome[1]);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

/* In a child of the threaded browserd: closes every fd from 3 on but keep[]
 * (the other launches' pipes and control sockets, made by other threads and
 * inherited by this fork, must not stay open here: the keeper never execs,
 * and an end held here would hide another browser's exit). */
static void close_others(int *keep, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
            int t = keep[j];
            keep[j] = keep[j - 1];
            keep[j - 1] = t;
        }
    unsigned from = 3;
    for (int i = 0; i < n; i++) {
        if (keep[i] < 3)
            continue;
        if ((unsigned)keep[i] > from)
            syscall(SYS_close_range, from, (unsigned)keep[i] - 1, 0U);
        from = (unsigned)keep[i] + 1;
    }
    syscall(SYS_close_range, from, ~0U, 0U);
}

static void add_arg(launch *L, int *n, char *a)
{
    if (*n < MAX_ARGS - 1)
        L->argv[(*n)++] = a;
}

static void free_launch(launch *L)
{
    for (int i = 0; L->argv[i]; i++)
        free(L->argv[i]);
    for (int i = 0; L->envp[i]; i++)
        free(L->envp[i]);
}

static void close2(int p[2])
{
    if (p[0] >= 0)
        close(p[0]);
    if (p[1] >= 0)
        close(p[1]);
    p[0] = p[1] = -1;
}

/* Waits until ctl is readable or closed, at most ms. 0 when it is. */
static int wait_ctl(int ctl, int ms)
{
    struct pollfd p = {.fd = ctl, .events = POLLIN};
    int rc;
    while ((rc = poll(&p, 1, ms)) < 0 && errno == EINTR)
        ;
    return rc > 0 ? 0 : -1;
}

/* Reads the child's word: "P<pid>" (with the listener when isolated) or "E...". */
static tk_status read_ctl(int ctl, int ms, pid_t *pid, int *lfd, char *err, size_t errlen)
{
    char buf[256];
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = {.iov_base = buf, .iov_len = sizeof buf - 1};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    ssize_t n;
    if (wait_ctl(ctl, ms) != 0) {
        snprintf(err, errlen, "the launcher said nothing within %d ms", ms);
        return TK_ETIMEOUT;
    }
    while ((n = recvmsg(ctl, &mh, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
        ;
    if (n <= 0) {
        snprintf(err, errlen, "the launcher ended without a word");
        return TK_ERROR;
    }
    buf[n] = '\0';
    *lfd = -1;
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    if (cm && cm->cmsg_type == SCM_RIGHTS)
        memcpy(lfd, CMSG_DATA(cm), sizeof *lfd);
    if (buf[0] != 'P') {
        snprintf(err, errlen, "starting chromium: %s", buf[0] == 'E' ? buf + 1 : buf);
        if (*lfd >= 0)
            close(*lfd);
        return TK_ERROR;
    }
    *pid = (pid_t)atoi(buf + 1);
    return TK_OK;
}

tk_status brd_chrome_start(const brd_chrome_config *cfg, brd_chrome *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->wfd = out->rfd = out->proxy_fd = -1;
    launch L = {.cfg = cfg, .host_uid = geteuid(), .host_gid = getegid()};
    int wait_ms = cfg->start_timeout_ms > 0 ? (int)cfg->start_timeout_ms : 20000;
    L.to_chrome[0] = L.to_chrome[1] = L.from_chrome[0] = L.from_chrome[1] = -1;
    L.ctl[0] = L.ctl[1] = -1;
    int n = 0;
    add_arg(&L, &n, tk_strdup(cfg->chromium));
    if (cfg->headless)
        add_arg(&L, &n, tk_strdup("--headless"));
    static const char *const fixed[] = {
        "--no-sandbox", /* the namespaces and the unprivileged uid are the sandbox */
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--no-default-browser-check",
        "--remote-debugging-pipe",
        "--disable-gpu",
        "--mute-audio",
        "--password-store=basic",
        "--disable-breakpad",
        "--disable-crash-reporter",
        "--disable-domain-reliability",
        "--disable-features=Translate,MediaRouter,OptimizationHints,DialMediaRouteProvider",
        "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
        "--webrtc-ip-handling-policy=disable_non_proxied_udp",
    };
    for (size_t i = 0; i < TK_ARRAY_LEN(fixed); i++)
        add_arg(&L, &n, tk_strdup(fixed[i]));
    add_arg(&L, &n, tk_asprintf("--user-data-dir=%s", cfg->profile_dir));
    add_arg(&L, &n,
            tk_asprintf("--window-size=%d,%d", cfg->width > 0 ? cfg->width : 1280,
                        cfg->height > 0 ? cfg->height : 800));
    if (cfg->isolate) {
        add_arg(&L, &n, tk_asprintf("--proxy-server=http://127.0.0.1:%d", BRD_PROXY_PORT));
        /* loopback too goes through the proxy (Chromium bypasses it by default) */
        add_arg(&L, &n, tk_strdup("--proxy-bypass-list=<-loopback>"));
    }
    if (cfg->user_agent && cfg->user_agent[0])
        add_arg(&L, &n, tk_asprintf("--user-agent=%s", cfg->user_agent));
    add_arg(&L, &n, tk_strdup("about:blank"));
    L.argv[n] = NULL;
    int e = 0;
    L.envp[e++] = tk_asprintf("HOME=%s", cfg->profile_dir);
    L.envp[e++] = tk_asprintf("XDG_CONFIG_HOME=%s/.config", cfg->profile_dir);
    L.envp[e++] = tk_asprintf("XDG_CACHE_HOME=%s/.cache", cfg->profile_dir);
    L.envp[e++] = tk_asprintf("TMPDIR=%s", cfg->profile_dir);
    L.envp[e++] = tk_strdup("PATH=/usr/local/bin:/usr/bin:/bin");
    L.envp[e++] = tk_strdup("LANG=C.UTF-8");
    L.envp[e] = NULL;

    tk_status st = TK_ERROR;
    L.log_fd = open(cfg->log_path ? cfg->log_path : "/dev/null",
                    O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (L.log_fd < 0) {
        snprintf(err, errlen, "open %s: %s", cfg->log_path, strerror(errno));
        goto out;
    }
    if (pipe2(L.to_chrome, O_CLOEXEC) != 0 || pipe2(L.from_chrome, O_CLOEXEC) != 0 ||
        socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, L.ctl) != 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        goto out;
    }
    pid_t child = fork();
    if (child < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        goto out;
    }
    if (child == 0) {
        close(L.ctl[0]);
        close(L.to_chrome[1]);
        close(L.from_chrome[0]);
        int keep[] = {L.ctl[1], L.to_chrome[0], L.from_chrome[1], L.log_fd};
        close_others(keep, (int)TK_ARRAY_LEN(keep));
        if (cfg->isolate)
            keeper(&L);
        setsid();
        exec_chrome(&L, 0);
    }
    close(L.ctl[1]);
    L.ctl[1] = -1;
    close(L.to_chrome[0]);
    L.to_chrome[0] = -1;
    close(L.from_chrome[1]);
    L.from_chrome[1] = -1;
    if (cfg->isolate) {
        out->keeper = child;
        int lfd;
        if (read_ctl(L.ctl[0], wait_ms, &out->pid, &lfd, err, errlen) != TK_OK) {
            kill(child, SIGKILL);
            waitpid(child, NULL, 0);
            goto out;
        }
        out->proxy_fd = lfd;
    } else {
        out->pid = child;
    }
    /* an exec that failed says so on the control socket; one that worked closes it */
    {
        char buf[256];
        ssize_t m = 0;
        if (wait_ctl(L.ctl[0], wait_ms) != 0) {
            m = snprintf(buf, sizeof buf, "E: no exec within %d ms", wait_ms);
        } else {
            while ((m = read(L.ctl[0], buf, sizeof buf - 1)) < 0 && errno == EINTR)
                ;
        }
        if (m > 0) {
            buf[m] = '\0';
            snprintf(err, errlen, "starting chromium: %s", buf[0] == 'E' ? buf + 1 : buf);
            brd_chrome_kill(out);
            if (out->proxy_fd >= 0)
                close(out->proxy_fd);
            out->proxy_fd = -1;
            goto out;
        }
    }
    out->wfd = L.to_chrome[1];
    out->rfd = L.from_chrome[0];
    L.to_chrome[1] = L.from_chrome[0] = -1;
    st = TK_OK;
out:
    close2(L.to_chrome);
    close2(L.from_chrome);
    close2(L.ctl);
    if (L.log_fd >= 0)
        close(L.log_fd);
    free_launch(&L);
    return st;
}

void brd_chrome_kill(brd_chrome *c)
{
    if (c->pid <= 0)
        return;
    if (c->keeper > 0) {
        /* the namespace's init: the kernel ends the rest, and its exit (which
         * the keeper waits for, then exits too) comes after all of them are
         * gone; killing the keeper as well would return before that */
        kill(c->pid, SIGKILL);
        while (waitpid(c->keeper, NULL, 0) < 0 && errno == EINTR)
            ;
    } else {
        kill(-c->pid, SIGKILL);
        kill(c->pid, SIGKILL);
        while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    c->pid = c->keeper = 0;
}

int brd_chrome_running(const brd_chrome *c)
{
    if (c->pid <= 0)
        return 0;
    siginfo_t si;
    memset(&si, 0, sizeof si);
    pid_t who = c->keeper > 0 ? c->keeper : c->pid;
    if (waitid(P_PID, (id_t)who, &si, WEXITED | WNOHANG | WNOWAIT) != 0)
        return 0;
    return si.si_pid == 0;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    if (flag == FTW_DP || flag == FTW_D)
        return rmdir(path) == 0 || errno == ENOENT ? 0 : -1;
    return unlink(path) == 0 || errno == ENOENT ? 0 : -1;
}

tk_status brd_chrome_rm_tree(const char *path)
{
    if (nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT)
        return TK_ERROR;
    return TK_OK;
}
