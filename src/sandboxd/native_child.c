#include "sandboxd/native_child.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <grp.h>
#include <time.h>
#include <unistd.h>

#define FD_LISTEN 3
#define FD_SYNC   4
#define FD_VOL0   5

/* ---------- payloads (shared with the parent) ---------- */

tk_status sbx_native_child_payload(tk_buf *b, char type, const char *const *env,
                                   const char *const *argv)
{
    uint32_t ne = 0, na = 0;
    while (env && env[ne])
        ne++;
    while (argv && argv[na])
        na++;
    if (ne > SBX_NATIVE_CHILD_MAX_STRS || na > SBX_NATIVE_CHILD_MAX_STRS)
        return TK_ETOOBIG;
    tk_status st = tk_buf_append_byte(b, type);
    if (st == TK_OK)
        st = tk_buf_append(b, &ne, 4);
    if (st == TK_OK)
        st = tk_buf_append(b, &na, 4);
    for (uint32_t i = 0; st == TK_OK && i < ne; i++)
        st = tk_buf_append(b, env[i], strlen(env[i]) + 1);
    for (uint32_t i = 0; st == TK_OK && i < na; i++)
        st = tk_buf_append(b, argv[i], strlen(argv[i]) + 1);
    if (st == TK_OK && b->len > SBX_NATIVE_CHILD_MAX_MSG)
        st = TK_ETOOBIG;
    return st;
}

tk_status sbx_native_child_payload_parse(char *msg, size_t len, char **env, char **argv, size_t max)
{
    uint32_t ne, na;
    if (len < 8)
        return TK_EINVAL;
    memcpy(&ne, msg, 4);
    memcpy(&na, msg + 4, 4);
    if (ne > max || na > max)
        return TK_ETOOBIG;
    size_t off = 8;
    for (uint32_t i = 0; i < ne + na; i++) {
        char *s = msg + off;
        char *end = memchr(s, '\0', len - off);
        if (off >= len || !end)
            return TK_EINVAL;
        if (i < ne)
            env[i] = s;
        else
            argv[i - ne] = s;
        off = (size_t)(end - msg) + 1;
    }
    env[ne] = NULL;
    argv[na] = NULL;
    return TK_OK;
}

/* ---------- small helpers: system calls only ---------- */

static const sbx_native_child_cfg *C;

static void send_msg(const void *p, size_t n)
{
    while (send(FD_SYNC, p, n, MSG_NOSIGNAL) < 0 && errno == EINTR)
        ;
}

/* Reports the failing step with errno to the parent and exits. */
_Noreturn static void die(const char *step)
{
    char m[512];
    int e = errno;
    size_t sl = strlen(step);
    if (sl > sizeof m - 6)
        sl = sizeof m - 6;
    m[0] = 'E';
    memcpy(m + 1, &e, 4);
    memcpy(m + 5, step, sl);
    send_msg(m, 5 + sl);
    _exit(120);
}

static void path_join(char *out, size_t n, const char *a, const char *b)
{
    size_t al = strlen(a), bl = strlen(b);
    if (al + bl + 1 >= n) {
        errno = ENAMETOOLONG;
        die("path too long");
    }
    memcpy(out, a, al);
    memcpy(out + al, b, bl + 1);
}

/* The flags the kernel may have locked on a mount (they must be kept on remount). */
static unsigned long locked_flags(const char *path)
{
    struct statvfs sv;
    unsigned long f = 0;
    if (statvfs(path, &sv) != 0)
        return 0;
    if (sv.f_flag & ST_NOSUID)
        f |= MS_NOSUID;
    if (sv.f_flag & ST_NODEV)
        f |= MS_NODEV;
    if (sv.f_flag & ST_NOEXEC)
        f |= MS_NOEXEC;
    if (sv.f_flag & ST_NOATIME)
        f |= MS_NOATIME;
    if (sv.f_flag & ST_NODIRATIME)
        f |= MS_NODIRATIME;
    if (sv.f_flag & ST_RELATIME)
        f |= MS_RELATIME;
    return f;
}

static void bind_ro(const char *src, const char *dst, unsigned long extra, const char *step)
{
    if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) != 0)
        die(step);
    if (mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | extra | locked_flags(dst),
              NULL) != 0)
        die(step);
}

static void tmpfs(const char *dst, unsigned long flags, const char *opts, const char *step)
{
    if (mount("tmpfs", dst, "tmpfs", flags, opts) != 0)
        die(step);
}

static void touch(const char *path, const char *step)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        die(step);
    close(fd);
}

/* The raw system calls: libc's setresuid() and friends signal every thread they
 * believe exists (the copied thread list of the parent) and would wait forever. */
static long xsetresuid(uid_t u)
{
    return syscall(SYS_setresuid, u, u, u);
}

static long xsetresgid(gid_t g)
{
    return syscall(SYS_setresgid, g, g, g);
}

/* ---------- set-up steps ---------- */

static void step_fds(void)
{
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull < 0)
        die("fds: open /dev/null");
    /* move the two descriptors we keep out of the way first, then into place */
    int l = fcntl(C->listen_fd, F_DUPFD_CLOEXEC, 100);
    int s = fcntl(C->sync_fd, F_DUPFD_CLOEXEC, 100);
    if (l < 0 || s < 0)
        die("fds: dup");
    if (dup2(devnull, 0) < 0 || dup2(devnull, 1) < 0 || dup2(devnull, 2) < 0)
        die("fds: dup2 stdio");
    if (dup3(l, FD_LISTEN, O_CLOEXEC) < 0 || dup3(s, FD_SYNC, O_CLOEXEC) < 0)
        die("fds: dup3");
    /* the volumes' mounts: out of the way, then to 5.. */
    int vtmp[16];
    for (size_t i = 0; i < C->nvols; i++) {
        vtmp[i] = fcntl(C->vol_fds[i], F_DUPFD_CLOEXEC, 200);
        if (vtmp[i] < 0)
            die("fds: dup a volume");
    }
    for (size_t i = 0; i < C->nvols; i++)
        if (dup3(vtmp[i], FD_VOL0 + (int)i, O_CLOEXEC) < 0)
            die("fds: dup3 a volume");
    unsigned first = FD_VOL0 + (unsigned)C->nvols;
    if (syscall(SYS_close_range, first, ~0U, 0U) != 0) {
        for (int fd = (int)first; fd < 65536; fd++)
            close(fd);
    }
}

static char g_msg[SBX_NATIVE_CHILD_MAX_MSG + 64];
static char *g_req_env[SBX_NATIVE_CHILD_MAX_STRS + 1];
static char *g_req_argv[SBX_NATIVE_CHILD_MAX_STRS + 1];

/* Receives one message into g_msg; returns its length (0 when the parent has gone). */
static ssize_t recv_msg(void)
{
    ssize_t n;
    do
        n = recv(FD_SYNC, g_msg, sizeof g_msg - 1, 0);
    while (n < 0 && errno == EINTR);
    return n;
}

static void step_wait_go(void)
{
    ssize_t n = recv_msg();
    if (n <= 0) {
        errno = n < 0 ? errno : EPIPE;
        die("wait_go: the parent went away");
    }
    if (g_msg[0] != 'G' ||
        sbx_native_child_payload_parse(g_msg + 1, (size_t)n - 1, g_req_env, g_req_argv,
                                       SBX_NATIVE_CHILD_MAX_STRS) != TK_OK) {
        errno = EPROTO;
        die("wait_go: bad message");
    }
}

/* The parent moves us into our cgroups while we mount (a v1 cgroup migration
 * waits for an RCU grace period: milliseconds we spend on the mounts instead);
 * 'A' says it is done. */
static void step_wait_attached(void)
{
    char m[8];
    ssize_t n;
    do
        n = recv(FD_SYNC, m, sizeof m, 0);
    while (n < 0 && errno == EINTR);
    if (n != 1 || m[0] != 'A') {
        errno = n < 0 ? errno : EPROTO;
        die("attached: no word from the parent");
    }
    if (unshare(CLONE_NEWCGROUP) != 0)
        die("cgroupns: unshare(CLONE_NEWCGROUP)");
}

static void step_namespaces(void)
{
    if (C->userns && (xsetresgid(0) != 0 || xsetresuid(0) != 0))
        die("ids: become root of the user namespace");
    if (sethostname("sandbox", 7) != 0)
        die("hostname: sethostname");
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        die("private: mount --make-rprivate /");
}

/* mkdir -p of path (absolute, beneath the new root); components that exist are kept */
static void mkdir_p(char *path, const char *step)
{
    for (char *s = path + 1;; s++) {
        if (*s == '/' || *s == '\0') {
            char c = *s;
            *s = '\0';
            if (mkdir(path, 0755) != 0 && errno != EEXIST)
                die(step);
            *s = c;
            if (!c)
                break;
        }
    }
}

static void step_volumes(const char *r)
{
    char p[4096];
    int mnt_done = 0;
    for (size_t i = 0; i < C->nvols; i++) {
        const char *t = C->vol_targets[i];
        if (!mnt_done && strncmp(t, "/mnt/", 5) == 0) {
            path_join(p, sizeof p, r, "/mnt");
            tmpfs(p, MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=64k,nr_inodes=256,mode=0755",
                  "volumes: mount tmpfs on /mnt (does the image have it?)");
            mnt_done = 1;
        }
        path_join(p, sizeof p, r, t);
        mkdir_p(p, "volumes: make the mount point");
        if (syscall(SYS_move_mount, FD_VOL0 + (int)i, "", AT_FDCWD, p, MOVE_MOUNT_F_EMPTY_PATH) !=
            0)
            die("volumes: attach a volume (move_mount)");
        close(FD_VOL0 + (int)i);
    }
}

static void step_mounts(void)
{
    char p[4096], q[4096];
    const char *r = C->rootfs;
    /* root: the image bound onto itself becomes the new root */
    if (mount(r, r, NULL, MS_BIND, NULL) != 0)
        die("root: bind the image");
    path_join(p, sizeof p, r, "/workspace");
    tmpfs(p, MS_NOSUID | MS_NODEV, C->workspace_opts, "workspace: mount tmpfs on /workspace");
    path_join(p, sizeof p, r, "/tmp");
    tmpfs(p, MS_NOSUID | MS_NODEV, C->tmp_opts, "tmp: mount tmpfs on /tmp");
    path_join(p, sizeof p, r, "/run");
    tmpfs(p, MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=1m,mode=0755", "run: mount tmpfs on /run");
    step_volumes(r);
    path_join(p, sizeof p, r, "/run/lock");
    if (mkdir(p, 01777) != 0 || chmod(p, 01777) != 0)
        die("run: mkdir /run/lock");

    /* dev */
    char dev[4096];
    path_join(dev, sizeof dev, r, "/dev");
    tmpfs(dev, MS_NOSUID | MS_NOEXEC, "size=64k,nr_inodes=64,mode=0755",
          "dev: mount tmpfs on /dev");
    static const char *const nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};
    for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++) {
        path_join(q, sizeof q, "/dev/", nodes[i]);
        path_join(p, sizeof p, dev, q + 4);
        touch(p, "dev: create a device mount point");
        if (mount(q, p, NULL, MS_BIND, NULL) != 0)
            die("dev: bind a device from the host");
    }
    path_join(p, sizeof p, dev, "/pts");
    if (mkdir(p, 0755) != 0)
        die("dev: mkdir /dev/pts");
    if (mount("devpts", p, "devpts", MS_NOSUID | MS_NOEXEC,
              "newinstance,ptmxmode=0666,mode=0620") != 0)
        die("dev: mount devpts");
    path_join(p, sizeof p, dev, "/shm");
    if (mkdir(p, 01777) != 0)
        die("dev: mkdir /dev/shm");
    tmpfs(p, MS_NOSUID | MS_NODEV, "size=64m,mode=1777", "dev: mount tmpfs on /dev/shm");
    static const char *const links[][2] = {
        {"/ptmx", "pts/ptmx"},          {"/fd", "/proc/self/fd"},
        {"/stdin", "/proc/self/fd/0"},  {"/stdout", "/proc/self/fd/1"},
        {"/stderr", "/proc/self/fd/2"},
    };
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
        path_join(p, sizeof p, dev, links[i][0]);
        if (symlink(links[i][1], p) != 0)
            die("dev: symlink");
    }
    if (mount(NULL, dev, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC,
              "size=64k,nr_inodes=64,mode=0755") != 0)
        die("dev: remount /dev read-only");

    /* execd: the host's build, read-only, at /opt/tusko/bin/tusko-execd */
    char bin[4096];
    path_join(bin, sizeof bin, r, "/opt/tusko/bin");
    tmpfs(bin, MS_NOSUID | MS_NODEV, "size=16k,nr_inodes=16,mode=0755",
          "execd: mount tmpfs on /opt/tusko/bin (does the image have it?)");
    path_join(p, sizeof p, bin, "/tusko-execd");
    touch(p, "execd: create /opt/tusko/bin/tusko-execd");
    if (chmod(p, 0755) != 0)
        die("execd: chmod");
    if (mount(C->execd_path, p, NULL, MS_BIND, NULL) != 0)
        die("execd: bind the host's tusko-execd");
    if (mount(NULL, p, NULL,
              MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | locked_flags(p), NULL) != 0)
        die("execd: remount read-only");
    if (mount(NULL, bin, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
              "size=16k,nr_inodes=16,mode=0755") != 0)
        die("execd: remount /opt/tusko/bin read-only");

    /* proc */
    char proc[4096];
    path_join(proc, sizeof proc, r, "/proc");
    if (mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
        die("proc: mount proc");
    static const char *const ro[] = {"/sys", "/sysrq-trigger", "/irq", "/bus"};
    for (size_t i = 0; i < sizeof ro / sizeof ro[0]; i++) {
        path_join(p, sizeof p, proc, ro[i]);
        if (access(p, F_OK) != 0)
            continue;
        bind_ro(p, p, MS_NOSUID | MS_NODEV | MS_NOEXEC, "proc: read-only /proc/sys and friends");
    }

    /* the image itself read-only */
    if (mount(NULL, r, NULL,
              MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | locked_flags(r), NULL) != 0)
        die("root_ro: remount the image read-only");
}

static void step_pivot(void)
{
    if (chdir(C->rootfs) != 0)
        die("pivot: chdir to the image");
    if (syscall(SYS_pivot_root, ".", ".") != 0)
        die("pivot: pivot_root");
    if (umount2(".", MNT_DETACH) != 0)
        die("pivot: detach the old root");
    if (chdir("/") != 0)
        die("pivot: chdir /");
    /* stdio again, from the sandbox's own /dev: nothing may refer to the old root */
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(devnull, 1) < 0 || dup2(devnull, 2) < 0)
        die("pivot: reopen /dev/null");
    close(devnull);
}

static void step_lo(void)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        die("lo: socket");
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    memcpy(ifr.ifr_name, "lo", 3);
    if (ioctl(s, SIOCGIFFLAGS, &ifr) != 0)
        die("lo: SIOCGIFFLAGS");
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0)
        die("lo: SIOCSIFFLAGS");
    close(s);
}

static void step_rlimits(void)
{
    struct rlimit core = {0, 0}, nofile = {8192, 8192}, memlock = {65536, 65536};
    if (setrlimit(RLIMIT_CORE, &core) != 0 || setrlimit(RLIMIT_NOFILE, &nofile) != 0 ||
        setrlimit(RLIMIT_MEMLOCK, &memlock) != 0)
        die("rlimits: setrlimit");
}

static void step_drop(void)
{
    if (syscall(SYS_setgroups, 0, NULL) != 0)
        die("drop: setgroups");
    for (int cap = 0; cap <= 63; cap++) {
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL)
            die("drop: PR_CAPBSET_DROP");
    }
    if (xsetresgid(C->gid) != 0)
        die("drop: setresgid");
    if (xsetresuid(C->uid) != 0)
        die("drop: setresuid");
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof d);
    if (syscall(SYS_capset, &h, d) != 0)
        die("drop: capset");
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
        die("drop: clear ambient capabilities");
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        die("nnp: PR_SET_NO_NEW_PRIVS");
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
        die("nnp: PR_SET_DUMPABLE");
}

static void step_seccomp(void)
{
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, C->filter, 0, 0) != 0)
        die("seccomp: install the filter");
}

/* ---------- the init ---------- */

static char *g_execd_env[2 * SBX_NATIVE_CHILD_MAX_STRS + 16];
static char *g_user_env[2 * SBX_NATIVE_CHILD_MAX_STRS + 16];

static size_t name_len(const char *kv)
{
    const char *eq = strchr(kv, '=');
    return eq ? (size_t)(eq - kv) : strlen(kv);
}

/* out = base with each of add replacing the entry of the same name or appended;
 * names starting with skip_prefix (when non-NULL) are not taken from add. */
static void merge_env(char **out, size_t max, const char *const *base, char *const *add,
                      const char *skip_prefix)
{
    size_t n = 0;
    for (; base && base[n] && n < max; n++)
        out[n] = (char *)base[n];
    for (size_t i = 0; add && add[i]; i++) {
        if (skip_prefix && strncmp(add[i], skip_prefix, strlen(skip_prefix)) == 0)
            continue;
        size_t kl = name_len(add[i]);
        size_t j;
        for (j = 0; j < n; j++)
            if (name_len(out[j]) == kl && strncmp(out[j], add[i], kl) == 0)
                break;
        if (j < n)
            out[j] = add[i];
        else if (n < max)
            out[n++] = add[i];
    }
    out[n] = NULL;
}

static const char *env_get(char *const *env, const char *name)
{
    size_t kl = strlen(name);
    for (size_t i = 0; env[i]; i++)
        if (strncmp(env[i], name, kl) == 0 && env[i][kl] == '=')
            return env[i] + kl + 1;
    return NULL;
}

/* execve with a PATH search that does not allocate. */
TK_NO_ASAN static void exec_path(char *const argv[], char *const envp[])
{
    const char *file = argv[0];
    if (strchr(file, '/')) {
        execve(file, argv, envp);
        return;
    }
    const char *path = env_get(envp, "PATH");
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    char buf[4096];
    size_t fl = strlen(file);
    for (const char *p = path;;) {
        const char *e = strchr(p, ':');
        size_t dl = e ? (size_t)(e - p) : strlen(p);
        if (dl + fl + 2 < sizeof buf) {
            memcpy(buf, p, dl);
            buf[dl] = '/';
            memcpy(buf + dl + 1, file, fl + 1);
            execve(buf, argv, envp);
        }
        if (!e)
            break;
        p = e + 1;
    }
}

/* Starts argv. The child is a clone(CLONE_VM | CLONE_VFORK) that shares our
 * memory, on a stack of its own, until its execve, while we wait: the init is a
 * copy of the service's large address space, and copying its page tables for
 * every execd and entrypoint (a fork) took ~0.5 ms of kernel time on a core,
 * during a claim. The child resets every signal disposition while all signals
 * are blocked, and calls only system call wrappers. keep_listen: execd gets
 * fd 3. */

typedef struct {
    char *const *argv;
    char *const *envp;
    int keep_listen;
} spawn_args;

static char g_spawn_stack[64 << 10] __attribute__((aligned(64)));

/* Not _exit(): a sanitizer's interceptor runs exit hooks (a leak check) there. */
TK_NO_ASAN static _Noreturn void child_exit(int code)
{
    for (;;)
        syscall(SYS_exit_group, code);
}

TK_NO_ASAN static int spawn_child(void *arg)
{
    const spawn_args *a = arg;
    tk_child_default_signals();
    setsid();
    if (a->keep_listen) {
        int fl = fcntl(FD_LISTEN, F_GETFD);
        fcntl(FD_LISTEN, F_SETFD, fl & ~FD_CLOEXEC);
        syscall(SYS_close_range, 4U, ~0U, 0U);
    } else {
        syscall(SYS_close_range, 3U, ~0U, 0U);
    }
    if (chdir("/workspace") != 0 && chdir("/") != 0)
        child_exit(126);
    uint64_t none = 0;
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, sizeof none);
    exec_path(a->argv, a->envp);
    child_exit(127);
}

static pid_t spawn(char *const argv[], char *const envp[], int keep_listen)
{
    spawn_args a = {argv, envp, keep_listen};
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, &old);
    pid_t pid = clone(spawn_child, g_spawn_stack + sizeof g_spawn_stack,
                      CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
    sigprocmask(SIG_SETMASK, &old, NULL);
    return pid;
}

static pid_t g_execd;
static char *g_execd_argv[] = {"/opt/tusko/bin/tusko-execd", NULL};

static void start_execd(void)
{
    g_execd = spawn(g_execd_argv, g_execd_env, 1);
}

static void apply_request(void)
{
    merge_env(g_execd_env, TK_ARRAY_LEN(g_execd_env) - 1, C->execd_env, g_req_env, "EXECD_");
    merge_env(g_user_env, TK_ARRAY_LEN(g_user_env) - 1, C->user_env, g_req_env, NULL);
}

_Noreturn static void init_loop(void)
{
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);
    int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0)
        die("init: signalfd");

    apply_request();
    start_execd();
    if (g_execd < 0)
        die("init: start execd");
    send_msg("R", 1);
    if (g_req_argv[0])
        spawn(g_req_argv, g_user_env, 0);

    int sync_open = 1;
    int fails = 0;
    struct timespec last_start;
    clock_gettime(CLOCK_MONOTONIC, &last_start);
    for (;;) {
        struct pollfd pf[2] = {{sfd, POLLIN, 0}, {FD_SYNC, POLLIN, 0}};
        int timeout = g_execd > 0 ? -1 : 100; /* execd died: start it again in 100 ms */
        int n = poll(pf, sync_open ? 2 : 1, timeout);
        if (n < 0 && errno != EINTR)
            _exit(121);
        if (pf[0].revents & POLLIN) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) > 0)
                ;
            int st;
            pid_t p;
            while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
                if (p == g_execd)
                    g_execd = 0;
            }
        }
        if (sync_open && (pf[1].revents & (POLLIN | POLLHUP | POLLERR))) {
            ssize_t m = recv_msg();
            if (m <= 0) {
                /* the service went away (it may come back and find us by pid) */
                close(FD_SYNC);
                sync_open = 0;
            } else if (g_msg[0] == 'C' && sbx_native_child_payload_parse(
                                              g_msg + 1, (size_t)m - 1, g_req_env, g_req_argv,
                                              SBX_NATIVE_CHILD_MAX_STRS) == TK_OK) {
                if (g_req_env[0] && g_execd > 0) {
                    /* execd's environment is fixed at exec: start a new one */
                    kill(g_execd, SIGKILL);
                    int st;
                    while (waitpid(g_execd, &st, 0) < 0 && errno == EINTR)
                        ;
                    g_execd = 0;
                }
                apply_request();
                if (g_execd <= 0) {
                    start_execd();
                    clock_gettime(CLOCK_MONOTONIC, &last_start);
                }
                /* answer first: the entrypoint starts while the service replies */
                send_msg(g_execd > 0 ? "R" : "E\0\0\0\0claim: start execd", g_execd > 0 ? 1 : 23);
                if (g_req_argv[0])
                    spawn(g_req_argv, g_user_env, 0);
            } else {
                send_msg("E\0\0\0\0claim: bad message", 23);
            }
        }
        if (g_execd == 0) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            long ms = (now.tv_sec - last_start.tv_sec) * 1000 +
                      (now.tv_nsec - last_start.tv_nsec) / 1000000;
            if (ms < 100)
                continue;
            fails = ms < 2000 ? fails + 1 : 0;
            if (fails > 20)
                _exit(122); /* execd keeps dying: let the sandbox fail */
            start_execd();
            last_start = now;
        }
    }
}

_Noreturn void sbx_native_child_main(const sbx_native_child_cfg *c)
{
    C = c;
    setsid();
    prctl(PR_SET_NAME, "sbx-init", 0, 0, 0);
    step_fds();
    step_wait_go();
    step_namespaces();
    step_mounts();
    step_pivot();
    step_lo();
    step_rlimits();
    step_wait_attached();
    step_drop();
    step_seccomp();
    init_loop();
}
