/*
 * isolate.c — the contained child process for untrusted-format extractors.
 *
 * Parent side: build the seccomp program (libseccomp allocates, so this is done
 * before fork), make the pipes, fork, pump stdin/stdout/stderr with poll, reap.
 * Child side: only async-signal-safe system calls between fork and execve.
 */
#include "app/utopia/isolate.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/landlock.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <unistd.h>

#include "lib/tktime.h"

#if defined(__SANITIZE_ADDRESS__)
#define UTOPIA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UTOPIA_ASAN 1
#endif
#endif
#ifndef UTOPIA_ASAN
#define UTOPIA_ASAN 0
#endif

/* ---- the seccomp program ---- */

static const int denied[] = {
    SCMP_SYS(socket),
    SCMP_SYS(socketpair),
    SCMP_SYS(connect),
    SCMP_SYS(bind),
    SCMP_SYS(listen),
    SCMP_SYS(accept),
    SCMP_SYS(accept4),
    SCMP_SYS(ptrace),
    SCMP_SYS(process_vm_readv),
    SCMP_SYS(process_vm_writev),
    SCMP_SYS(mount),
    SCMP_SYS(umount2),
    SCMP_SYS(pivot_root),
    SCMP_SYS(chroot),
    SCMP_SYS(unshare),
    SCMP_SYS(setns),
    SCMP_SYS(kexec_load),
    SCMP_SYS(kexec_file_load),
    SCMP_SYS(init_module),
    SCMP_SYS(finit_module),
    SCMP_SYS(delete_module),
    SCMP_SYS(bpf),
    SCMP_SYS(perf_event_open),
    SCMP_SYS(keyctl),
    SCMP_SYS(add_key),
    SCMP_SYS(request_key),
    SCMP_SYS(userfaultfd),
    SCMP_SYS(io_uring_setup),
    SCMP_SYS(io_uring_enter),
    SCMP_SYS(io_uring_register),
    SCMP_SYS(personality),
    SCMP_SYS(reboot),
    SCMP_SYS(swapon),
    SCMP_SYS(swapoff),
    SCMP_SYS(acct),
    SCMP_SYS(quotactl),
    SCMP_SYS(open_by_handle_at),
    SCMP_SYS(name_to_handle_at),
    SCMP_SYS(execveat),
    SCMP_SYS(fork),
    SCMP_SYS(vfork),
    SCMP_SYS(kill),
    SCMP_SYS(tkill),
    SCMP_SYS(rt_sigqueueinfo),
    SCMP_SYS(rt_tgsigqueueinfo),
    SCMP_SYS(pidfd_open),
    SCMP_SYS(pidfd_getfd),
    SCMP_SYS(pidfd_send_signal),
    SCMP_SYS(creat),
    SCMP_SYS(unlink),
    SCMP_SYS(unlinkat),
    SCMP_SYS(rename),
    SCMP_SYS(renameat),
    SCMP_SYS(renameat2),
    SCMP_SYS(rmdir),
    SCMP_SYS(mkdir),
    SCMP_SYS(mkdirat),
    SCMP_SYS(link),
    SCMP_SYS(linkat),
    SCMP_SYS(symlink),
    SCMP_SYS(symlinkat),
    SCMP_SYS(chmod),
    SCMP_SYS(fchmod),
    SCMP_SYS(fchmodat),
    SCMP_SYS(chown),
    SCMP_SYS(fchown),
    SCMP_SYS(lchown),
    SCMP_SYS(fchownat),
    SCMP_SYS(truncate),
    SCMP_SYS(mknod),
    SCMP_SYS(mknodat),
    SCMP_SYS(setxattr),
    SCMP_SYS(lsetxattr),
    SCMP_SYS(fsetxattr),
    SCMP_SYS(removexattr),
    SCMP_SYS(lremovexattr),
    SCMP_SYS(fremovexattr),
    SCMP_SYS(utimensat),
    SCMP_SYS(utimes),
    SCMP_SYS(utime),
    SCMP_SYS(futimesat),
    SCMP_SYS(setuid),
    SCMP_SYS(setgid),
    SCMP_SYS(setreuid),
    SCMP_SYS(setregid),
    SCMP_SYS(setresuid),
    SCMP_SYS(setresgid),
    SCMP_SYS(setgroups),
    SCMP_SYS(setfsuid),
    SCMP_SYS(setfsgid),
    SCMP_SYS(settimeofday),
    SCMP_SYS(clock_settime),
    SCMP_SYS(adjtimex),
    SCMP_SYS(sethostname),
    SCMP_SYS(setdomainname),
    SCMP_SYS(iopl),
    SCMP_SYS(ioperm),
    SCMP_SYS(fanotify_init),
    SCMP_SYS(memfd_secret),
    SCMP_SYS(move_mount),
    SCMP_SYS(open_tree),
    SCMP_SYS(fsopen),
    SCMP_SYS(fsmount),
    SCMP_SYS(fsconfig),
    SCMP_SYS(fspick),
    SCMP_SYS(mount_setattr),
    SCMP_SYS(landlock_create_ruleset),
};

/* Builds the filter allowing execve of `path` only; the program is copied
 * into *prog (free prog->filter). */
static tk_status build_filter(const char *path, struct sock_fprog *prog, char *err, size_t errlen)
{
    tk_status st = TK_ERROR;
    int fd = -1;
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx) {
        snprintf(err, errlen, "seccomp_init failed");
        return TK_ERROR;
    }
    int rc = 0;
    for (size_t i = 0; i < TK_ARRAY_LEN(denied) && rc == 0; i++)
        if (denied[i] >= 0)
            rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), denied[i], 0);
    /* execve of anything but the one path the child was started for */
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(execve), 1,
                              SCMP_A0(SCMP_CMP_NE, (scmp_datum_t)(uintptr_t)path));
    /* threads yes, processes no */
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                              SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0));
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(openat2), 0);
    /* no opening for writing or creating */
    static const struct {
        scmp_datum_t mask, val;
    } wflags[] = {{O_ACCMODE, O_WRONLY}, {O_ACCMODE, O_RDWR}, {O_CREAT, O_CREAT}};
    for (size_t i = 0; i < TK_ARRAY_LEN(wflags) && rc == 0; i++) {
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(openat), 1,
                              SCMP_A2(SCMP_CMP_MASKED_EQ, wflags[i].mask, wflags[i].val));
        if (rc == 0)
            rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(open), 1,
                                  SCMP_A1(SCMP_CMP_MASKED_EQ, wflags[i].mask, wflags[i].val));
    }
    if (rc != 0) {
        snprintf(err, errlen, "seccomp_rule_add: %s", strerror(-rc));
        goto out;
    }
    fd = memfd_create("utopia-seccomp", MFD_CLOEXEC);
    if (fd < 0 || seccomp_export_bpf(ctx, fd) != 0) {
        snprintf(err, errlen, "seccomp_export_bpf failed");
        goto out;
    }
    off_t size = lseek(fd, 0, SEEK_END);
    if (size <= 0 || size % (off_t)sizeof(struct sock_filter) != 0 || size > 65536) {
        snprintf(err, errlen, "seccomp program of odd size %lld", (long long)size);
        goto out;
    }
    prog->len = (unsigned short)(size / (off_t)sizeof(struct sock_filter));
    prog->filter = tk_malloc((size_t)size);
    if (pread(fd, prog->filter, (size_t)size, 0) != size) {
        free(prog->filter);
        prog->filter = NULL;
        snprintf(err, errlen, "reading the seccomp program failed");
        goto out;
    }
    st = TK_OK;
out:
    if (fd >= 0)
        close(fd);
    seccomp_release(ctx);
    return st;
}

/* ---- child side (async-signal-safe only) ---- */

static void child_fail(const char *step)
{
    int e = errno;
    char msg[160];
    size_t n = 0;
    const char *pre = "isolate: setup failed: ";
    for (const char *p = pre; *p && n < sizeof msg - 1; p++)
        msg[n++] = *p;
    for (const char *p = step; *p && n < sizeof msg - 1; p++)
        msg[n++] = *p;
    const char *es = strerrordesc_np(e);
    if (es && n < sizeof msg - 3) {
        msg[n++] = ':';
        msg[n++] = ' ';
        for (const char *p = es; *p && n < sizeof msg - 1; p++)
            msg[n++] = *p;
    }
    msg[n++] = '\n';
    if (write(2, msg, n) < 0) {
    }
    _exit(126);
}

static void ll_allow(int ruleset, const char *path, __u64 access)
{
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0)
        return; /* absent paths are simply not allowed */
    struct stat sb;
    if (fstat(fd, &sb) == 0 && !S_ISDIR(sb.st_mode))
        access &= LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE;
    struct landlock_path_beneath_attr pb = {.allowed_access = access, .parent_fd = fd};
    if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) != 0)
        child_fail("landlock_add_rule");
    close(fd);
}

/* The ruleset attribute as of ABI 6, declared here so that older kernel
 * headers still build; the size passed tells the kernel which fields exist. */
struct ll_ruleset_attr {
    __u64 handled_access_fs;
    __u64 handled_access_net; /* ABI 4 */
    __u64 scoped;             /* ABI 6 */
};
#define LL_FS_REFER                   (1ULL << 13)
#define LL_FS_TRUNCATE                (1ULL << 14)
#define LL_FS_IOCTL_DEV               (1ULL << 15)
#define LL_NET_BIND_TCP               (1ULL << 0)
#define LL_NET_CONNECT_TCP            (1ULL << 1)
#define LL_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LL_SCOPE_SIGNAL               (1ULL << 1)

static void child_landlock(const char *path, const char *const *extra)
{
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    if (abi < 1)
        child_fail("landlock (the kernel has no Landlock: Linux 5.13 or later with lsm=landlock)");
    struct ll_ruleset_attr ra = {0};
    ra.handled_access_fs =
        LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE |
        LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_REMOVE_DIR |
        LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR |
        LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK |
        LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM;
    size_t rasize = sizeof(__u64);
    if (abi >= 2)
        ra.handled_access_fs |= LL_FS_REFER;
    if (abi >= 3)
        ra.handled_access_fs |= LL_FS_TRUNCATE;
    if (abi >= 4) {
        ra.handled_access_net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP;
        rasize = 2 * sizeof(__u64);
    }
    if (abi >= 5)
        ra.handled_access_fs |= LL_FS_IOCTL_DEV;
    if (abi >= 6) {
        ra.scoped = LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL;
        rasize = sizeof ra;
    }
    int rs = (int)syscall(SYS_landlock_create_ruleset, &ra, rasize, 0);
    if (rs < 0)
        child_fail("landlock_create_ruleset");
    const __u64 rx =
        LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
    static const char *const sys_paths[] = {"/usr",         "/bin",           "/lib",
                                            "/lib64",       "/lib32",         "/etc/ld.so.cache",
                                            "/etc/fonts",   "/etc/localtime", "/dev/null",
                                            "/dev/urandom", "/proc/self"};
    for (size_t i = 0; i < TK_ARRAY_LEN(sys_paths); i++)
        ll_allow(rs, sys_paths[i], rx);
    ll_allow(rs, path, rx);
    for (size_t i = 0; extra && extra[i]; i++)
        ll_allow(rs, extra[i], rx);
    if (syscall(SYS_landlock_restrict_self, rs, 0) != 0)
        child_fail("landlock_restrict_self");
    close(rs);
}

static void child_rlimit(int res, rlim_t v, const char *what)
{
    struct rlimit rl = {v, v};
    if (setrlimit(res, &rl) != 0)
        child_fail(what);
}

static void child_main(const char *path, char *const argv[], char *const envp[], int in, int out,
                       int errfd, const utopia_isolate_limits *lim, const struct sock_fprog *prog,
                       int asan_child)
{
    if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(errfd, 2) < 0)
        _exit(126);
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    /* 1. rlimits */
    child_rlimit(RLIMIT_CPU, (rlim_t)lim->cpu_seconds, "RLIMIT_CPU");
    if (!asan_child)
        child_rlimit(RLIMIT_AS, (rlim_t)lim->memory_bytes, "RLIMIT_AS");
    child_rlimit(RLIMIT_FSIZE, 0, "RLIMIT_FSIZE");
    child_rlimit(RLIMIT_CORE, 0, "RLIMIT_CORE");
    child_rlimit(RLIMIT_NOFILE, 64, "RLIMIT_NOFILE");
    /* 2. no network: a namespace of its own */
    if (unshare(CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) != 0) {
        if (errno != EPERM ||
            unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) != 0)
            child_fail("unshare(CLONE_NEWNET) (needs user namespaces: sysctl "
                       "kernel.unprivileged_userns_clone=1)");
    }
    /* 3. never root */
    if (geteuid() == 0) {
        if (setgroups(0, NULL) != 0 || setresgid(65534, 65534, 65534) != 0 ||
            setresuid(65534, 65534, 65534) != 0)
            child_fail("dropping root to uid 65534");
    }
    /* 4. descriptors, cwd */
    if (syscall(SYS_close_range, 3U, ~0U, 0) != 0)
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
    if (chdir("/") != 0)
        child_fail("chdir /");
    /* 5. */
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        child_fail("PR_SET_NO_NEW_PRIVS");
    /* 6. */
    child_landlock(path, lim->read_paths);
    /* 7. seccomp, last */
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, prog) != 0)
        child_fail("seccomp filter");
    execve(path, argv, envp);
    child_fail("execve");
}

/* ---- parent side ---- */

static pthread_once_t self_once = PTHREAD_ONCE_INIT;
static char self_exe[4096];
static void self_init(void)
{
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    self_exe[n > 0 ? n : 0] = 0;
}

const char *utopia_isolate_self_exe(void)
{
    pthread_once(&self_once, self_init);
    return self_exe[0] ? self_exe : NULL;
}

static void set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

tk_status utopia_isolate_run(const char *path, char *const argv[], const void *in, size_t inlen,
                             const utopia_isolate_limits *limits, tk_buf *out,
                             utopia_isolate_result *res, char *err, size_t errlen)
{
    utopia_isolate_limits lim = limits ? *limits : (utopia_isolate_limits){0};
    if (lim.timeout_ms <= 0)
        lim.timeout_ms = 20000;
    if (lim.cpu_seconds <= 0)
        lim.cpu_seconds = 10;
    if (lim.memory_bytes <= 0)
        lim.memory_bytes = (int64_t)512 << 20;
    memset(res, 0, sizeof *res);
    snprintf(err, errlen, "%s", "");
    /* the program path must live at the same address in the child: it does,
     * after fork; a private copy keeps the caller's string out of it */
    char *exe = tk_strdup(path);
    struct sock_fprog prog = {0};
    if (build_filter(exe, &prog, err, errlen) != TK_OK) {
        free(exe);
        return TK_ERROR;
    }
    char asan_opts[128];
    snprintf(asan_opts, sizeof asan_opts,
             "ASAN_OPTIONS=detect_leaks=0:hard_rss_limit_mb=%lld:allocator_may_return_null=1",
             (long long)(lim.memory_bytes >> 20));
    /* this binary re-executed under AddressSanitizer cannot take an address
     * space limit (its shadow memory); its allocator's RSS limit stands in */
    const char *self = utopia_isolate_self_exe();
    int asan_child = UTOPIA_ASAN && self && strcmp(self, exe) == 0;
    char *envp[] = {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", asan_child ? asan_opts : NULL, NULL};

    int inp[2] = {-1, -1}, outp[2] = {-1, -1}, errp[2] = {-1, -1};
    tk_status st = TK_ERROR;
    pid_t pid = -1;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, inp) != 0 ||
        pipe2(outp, O_CLOEXEC) != 0 || pipe2(errp, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "pipes: %s", strerror(errno));
        goto out;
    }
    pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        goto out;
    }
    if (pid == 0)
        child_main(exe, argv, envp, inp[1], outp[1], errp[1], &lim, &prog, asan_child);
    close(inp[1]), close(outp[1]), close(errp[1]);
    inp[1] = outp[1] = errp[1] = -1;
    shutdown(inp[0], SHUT_RD);
    set_nonblock(inp[0]), set_nonblock(outp[0]), set_nonblock(errp[0]);

    int64_t deadline = tk_mono_ms() + lim.timeout_ms;
    size_t sent = 0, errn = 0;
    int out_open = 1, err_open = 1, killed = 0;
    if (inlen == 0) {
        close(inp[0]);
        inp[0] = -1;
    }
    while (out_open || err_open) {
        int64_t left = deadline - tk_mono_ms();
        if (left <= 0) {
            res->timed_out = 1;
            break;
        }
        struct pollfd pf[3];
        int n = 0, iin = -1, iout = -1, ierr = -1;
        if (inp[0] >= 0)
            iin = n, pf[n++] = (struct pollfd){.fd = inp[0], .events = POLLOUT};
        if (out_open)
            iout = n, pf[n++] = (struct pollfd){.fd = outp[0], .events = POLLIN};
        if (err_open)
            ierr = n, pf[n++] = (struct pollfd){.fd = errp[0], .events = POLLIN};
        int pr = poll(pf, (nfds_t)n, (int)TK_MIN(left, 1000));
        if (pr < 0 && errno != EINTR)
            break;
        if (pr <= 0)
            continue;
        if (iin >= 0 && (pf[iin].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t w = send(inp[0], (const char *)in + sent, TK_MIN(inlen - sent, (size_t)65536),
                             MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w > 0)
                sent += (size_t)w;
            if ((w < 0 && errno != EAGAIN && errno != EINTR) || sent == inlen) {
                close(inp[0]); /* EOF for the child (or it stopped reading) */
                inp[0] = -1;
            }
        }
        if (iout >= 0 && (pf[iout].revents & (POLLIN | POLLHUP | POLLERR))) {
            char buf[65536];
            ssize_t r = read(outp[0], buf, sizeof buf);
            if (r > 0) {
                if (tk_buf_append(out, buf, (size_t)r) != TK_OK) {
                    res->output_capped = 1;
                    break;
                }
            } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
                out_open = 0;
            }
        }
        if (ierr >= 0 && (pf[ierr].revents & (POLLIN | POLLHUP | POLLERR))) {
            char buf[4096];
            ssize_t r = read(errp[0], buf, sizeof buf);
            if (r > 0) {
                size_t room = sizeof res->stderr_head - 1 - errn;
                size_t take = TK_MIN(room, (size_t)r);
                memcpy(res->stderr_head + errn, buf, take);
                errn += take;
                res->stderr_head[errn] = 0;
            } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
                err_open = 0;
            }
        }
    }
    if (res->timed_out || res->output_capped) {
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        killed = 1;
    }
    /* stdout closed: the child is about to exit; wait for it, to the deadline */
    int status = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, killed ? 0 : WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR) {
            status = 0;
            break;
        }
        if (w == 0 && tk_mono_ms() >= deadline) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            res->timed_out = killed = 1;
        } else if (w == 0) {
            tk_sleep_ms(2);
        }
    }
    pid = -1;
    /* strip the trailing newline of the first stderr line for messages */
    char *nl = strchr(res->stderr_head, '\n');
    char first[200];
    snprintf(first, sizeof first, "%.*s", nl ? (int)(nl - res->stderr_head) : 199,
             res->stderr_head);
    if (WIFEXITED(status)) {
        res->exited = 1;
        res->exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        res->signal = WTERMSIG(status);
    }
    if (res->timed_out) {
        snprintf(err, errlen, "the extractor ran past its %lld ms deadline and was killed",
                 (long long)lim.timeout_ms);
        st = TK_ETIMEOUT;
    } else if (res->output_capped) {
        snprintf(err, errlen, "the extractor's output passed its cap of %zu bytes", out->max);
        st = TK_ETOOBIG;
    } else if (res->exited && res->exit_code == 126 &&
               strncmp(res->stderr_head, "isolate: setup failed", 21) == 0) {
        res->setup_failed = 1;
        snprintf(err, errlen, "%s", first);
        st = TK_ERROR;
    } else if (res->exited && res->exit_code == 0) {
        st = TK_OK;
    } else if (res->signal) {
        snprintf(err, errlen, "the extractor was killed by signal %d (%s)%s%s", res->signal,
                 strsignal(res->signal), *first ? ": " : "", first);
        if (res->signal == SIGXCPU)
            st = TK_ETIMEOUT;
        else
            st = TK_ERROR;
    } else {
        snprintf(err, errlen, "the extractor failed (exit status %d)%s%s", res->exit_code,
                 *first ? ": " : "", first);
        st = TK_ERROR;
    }
out:
    for (int i = 0; i < 2; i++) {
        if (inp[i] >= 0)
            close(inp[i]);
        if (outp[i] >= 0)
            close(outp[i]);
        if (errp[i] >= 0)
            close(errp[i]);
    }
    free(prog.filter);
    free(exe);
    return st;
}
