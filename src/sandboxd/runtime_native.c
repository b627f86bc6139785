/*
 * runtime_native.c — the native runtime, parent side: each sandbox is a fresh
 * set of Linux namespaces (mount, pid, net, ipc, uts, cgroup, and user where
 * the kernel allows) around the read-only image, in its own cgroups, with
 * tusko-execd as the first process behind the sandbox's init.
 *
 * Parent-side steps of start(), in order (the child's are in native_child.h):
 *   dir       <state>/sandboxes/<id>/ (0700)
 *   socket    execd's listening unix socket bound at <dir>/execd.sock by us, so
 *             connections queue before execd runs and the sandbox never sees
 *             the path (execd gets the socket as fd 3: EXECD_LISTEN=fd:3)
 *   cgroup    the group with memory, pids and cpu limits
 *   clone     the child in new namespaces
 *   maps      uid_map/gid_map: inside 0..65535 → host SBX_UID_BASE.. (user ns)
 *   go        the payload (env, entrypoint) to the child, which starts mounting
 *   attach    meanwhile the child into its cgroups (a v1 migration costs an RCU
 *             grace period), then 'A'; wait for 'R'. On cgroup v2 the child is
 *             born in its group instead (clone3 with CLONE_INTO_CGROUP), falling
 *             back to clone + attach when the kernel refuses.
 * Any failure undoes what was done, in reverse.
 */
#include <dirent.h>
#include <errno.h>
#include <linux/sched.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/buf.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/tktime.h"
#include "sandboxd/cgroup.h"
#include "sandboxd/egress.h"
#include "sandboxd/image.h"
#include "sandboxd/native_child.h"
#include "sandboxd/runtime.h"
#include "sandboxd/seccomp.h"

/* Host ids that the sandbox's 0..65535 map to (with a user namespace). */
#define SBX_UID_BASE  200000000u
#define SBX_UID_COUNT 65536u
/* The sandbox user inside (the image's "sandbox", home /workspace). */
#define SBX_USER_ID 1000u

typedef struct {
    char state_dir[PATH_MAX];
    /* where execd sockets go when <state>/sandboxes/<id>/execd.sock would not fit
     * a unix socket path: /run/tusko-sandboxd.<hash>/ (0700); "" otherwise */
    char short_dir[64];
    sbx_image img;
    char execd_path[PATH_MAX];
    sbx_cgroups *cg;
    struct sock_fprog filter;
    int userns;
    uid_t uid; /* the sandbox user as the child sets it */
    gid_t gid;
    char ws_opts[128];
    char tmp_opts[128];
    char desc[512];
    tk_egress *egress; /* SANDBOX_NETWORK=proxy; NULL: none */
    tk_egress_caps egress_caps;
} native_rt;

typedef struct {
    sbx_instance base; /* id, sock */
    char dir[PATH_MAX];
    pid_t pid;
    unsigned long long starttime;
    int sync_fd; /* -1 once attached after a restart */
    int pidfd;
    int own_child;
    int exited;
    tk_egress *eg;              /* the proxy serving it (SANDBOX_NETWORK=proxy) */
    tk_egress_listener *egress; /* its listener there, or NULL */
} native_inst;

static native_rt *RT(sbx_runtime *rt)
{
    return rt->impl;
}

static native_inst *NI(sbx_instance *in)
{
    return (native_inst *)in;
}

static int native_alive(sbx_runtime *rt, sbx_instance *inst);

/* Field 22 of /proc/<pid>/stat: the start time in clock ticks since boot. */
static unsigned long long proc_starttime(pid_t pid)
{
    char p[64], buf[1024];
    snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *s = strrchr(buf, ')');
    if (!s)
        return 0;
    s++;
    /* after ")": field 3 is state; starttime is field 22 → 20 fields on */
    int field = 2;
    for (char *q = s; *q; q++) {
        if (*q == ' ') {
            field++;
            if (field == 22)
                return strtoull(q + 1, NULL, 10);
        }
    }
    return 0;
}

static tk_status write_proc(pid_t pid, const char *file, const char *value, char *err,
                            size_t errlen)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/%s", (int)pid, file);
    int fd = open(p, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "maps: open %s: %s", p, strerror(errno));
        return TK_ERROR;
    }
    ssize_t w = write(fd, value, strlen(value));
    int e = errno;
    close(fd);
    if (w != (ssize_t)strlen(value)) {
        snprintf(err, errlen, "maps: write %s: %s", p, strerror(e));
        return TK_ERROR;
    }
    return TK_OK;
}

/* Waits up to timeout_ms for one message from the child. */
static tk_status wait_reply(native_inst *in, long timeout_ms, const char *what, char *err,
                            size_t errlen)
{
    struct pollfd pf = {in->sync_fd, POLLIN, 0};
    int n;
    do
        n = poll(&pf, 1, (int)timeout_ms);
    while (n < 0 && errno == EINTR);
    if (n == 0) {
        snprintf(err, errlen, "%s: the sandbox did not answer within %ld ms", what, timeout_ms);
        return TK_ETIMEOUT;
    }
    char m[600];
    ssize_t r;
    do
        r = recv(in->sync_fd, m, sizeof m - 1, 0);
    while (r < 0 && errno == EINTR);
    if (r <= 0) {
        int st = 0;
        if (in->own_child && waitpid(in->pid, &st, WNOHANG) == in->pid)
            in->exited = 1;
        snprintf(err, errlen, "%s: the sandbox's child exited during set-up (status %d)", what, st);
        return TK_ERROR;
    }
    if (m[0] == 'R')
        return TK_OK;
    if (m[0] == 'E' && r >= 5) {
        int e;
        memcpy(&e, m + 1, 4);
        m[r] = '\0';
        snprintf(err, errlen, "%s: child step \"%s\" failed: %s", what, m + 5,
                 e ? strerror(e) : "error");
        return TK_ERROR;
    }
    snprintf(err, errlen, "%s: unexpected message from the sandbox", what);
    return TK_ERROR;
}

/* Waits until execd answers on its socket (a pool member's: a claim should find
 * it loaded and serving, not still starting). The connection itself always
 * succeeds (we bound the socket); the answer comes once execd serves. */
static tk_status wait_served(native_inst *in, long timeout_ms, char *err, size_t errlen)
{
    static const char req[] = "GET /healthz HTTP/1.0\r\n\r\n";
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    snprintf(sun.sun_path, sizeof sun.sun_path, "%s", in->base.sock);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    tk_status st = TK_ERROR;
    if (fd < 0 || connect(fd, (struct sockaddr *)&sun, sizeof sun) != 0 ||
        send(fd, req, sizeof req - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof req - 1)) {
        snprintf(err, errlen, "ready: connect to execd: %s", strerror(errno));
        goto out;
    }
    int64_t end = tk_mono_ms() + timeout_ms;
    for (;;) {
        struct pollfd pf[2] = {{fd, POLLIN, 0}, {in->pidfd, POLLIN, 0}};
        int64_t left = end - tk_mono_ms();
        if (left <= 0) {
            snprintf(err, errlen, "ready: execd did not answer within %ld ms", timeout_ms);
            st = TK_ETIMEOUT;
            goto out;
        }
        int n = poll(pf, in->pidfd >= 0 ? 2 : 1, (int)left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(err, errlen, "ready: poll: %s", strerror(errno));
            goto out;
        }
        if (pf[1].revents) {
            snprintf(err, errlen, "ready: the sandbox's init exited");
            goto out;
        }
        if (pf[0].revents) {
            char b[16];
            ssize_t r = recv(fd, b, sizeof b, MSG_DONTWAIT);
            if (r > 0) {
                st = TK_OK;
            } else {
                snprintf(err, errlen, "ready: execd closed the connection without an answer");
            }
            goto out;
        }
    }
out:
    if (fd >= 0)
        close(fd);
    return st;
}

/* Serves the sandbox's way out: a listener in its network namespace handed to
 * the proxy. */
static tk_status attach_egress(native_rt *r, native_inst *in, char *err, size_t errlen)
{
    in->eg = r->egress;
    in->egress = sbx_egress_attach(r->egress, &r->egress_caps, in->pid, in->base.id, err, errlen);
    return in->egress ? TK_OK : TK_ERROR;
}

static void instance_free(native_inst *in)
{
    if (in->egress) /* forgotten, not torn down: its way out goes all the same */
        tk_egress_remove_listener(in->eg, in->egress);
    if (in->sync_fd >= 0)
        close(in->sync_fd);
    if (in->pidfd >= 0)
        close(in->pidfd);
    free(in);
}

/* Kills the sandbox's processes and frees its cgroups and socket. */
static void teardown(native_rt *r, native_inst *in)
{
    char err[512];
    if (in->pid > 0 && !in->exited) {
        int same = in->own_child || proc_starttime(in->pid) == in->starttime;
        if (same) {
            if (in->pidfd >= 0)
                syscall(SYS_pidfd_send_signal, in->pidfd, SIGKILL, NULL, 0);
            else
                kill(in->pid, SIGKILL);
        }
    }
    if (in->egress) {
        tk_egress_remove_listener(in->eg, in->egress);
        in->egress = NULL;
    }
    /* killing init kills its pid namespace; thawing lets frozen tasks die */
    sbx_cgroup_kill_all(r->cg, in->base.id);
    if (in->pid > 0 && !in->exited) {
        if (in->own_child) {
            int st;
            while (waitpid(in->pid, &st, 0) < 0 && errno == EINTR)
                ;
        } else if (in->pidfd >= 0) {
            struct pollfd pf = {in->pidfd, POLLIN, 0};
            poll(&pf, 1, 5000);
        }
        in->exited = 1;
    }
    if (sbx_cgroup_remove(r->cg, in->base.id, 5000, err, sizeof err) != TK_OK)
        tk_error("native", "msg=\"cannot remove the sandbox's cgroup\" id=%s error=\"%s\"",
                 in->base.id, err);
    if (in->base.sock[0])
        unlink(in->base.sock);
}

/* One volume's detached mount (open_tree OPEN_TREE_CLONE), nosuid, nodev and
 * read-only when asked: the child attaches it (move_mount) at its target. The
 * source is opened here, as the service's own user, without following any
 * symlink (sandboxd/volume.h). */
static int volume_tree(native_rt *r, const sbx_volumes *vs, const sbx_volume *v, char *err,
                       size_t errlen)
{
    int src;
    if (v->named) {
        char dir[SBX_VOLUME_PATH_MAX];
        snprintf(dir, sizeof dir, "%s/volumes", r->state_dir);
        if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
            snprintf(err, errlen, "volume: mkdir %s: %s", dir, strerror(errno));
            return -1;
        }
        int base = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (base < 0) {
            snprintf(err, errlen, "volume: %s: %s", dir, strerror(errno));
            return -1;
        }
        if (mkdirat(base, vs->owner, 0700) != 0 && errno != EEXIST) {
            snprintf(err, errlen, "volume: mkdir %s/%s: %s", dir, vs->owner, strerror(errno));
            close(base);
            return -1;
        }
        char rel[SBX_VOLUME_PATH_MAX * 2 + 130];
        snprintf(rel, sizeof rel, "%s/%s%s%s", vs->owner, v->claim, v->sub[0] ? "/" : "", v->sub);
        /* the owner's folder stays root's; the volume and its subPath are the sandbox user's */
        int own = openat(base, vs->owner, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        close(base);
        if (own < 0) {
            snprintf(err, errlen, "volume: %s/%s: %s", dir, vs->owner, strerror(errno));
            return -1;
        }
        src = sbx_volume_mkdirs(own, rel + strlen(vs->owner) + 1, SBX_UID_BASE + SBX_USER_ID, err,
                                errlen);
        close(own);
        if (src < 0)
            return -1;
    } else {
        src = sbx_volume_open(v->host, NULL, err, errlen);
        if (src < 0)
            return -1;
    }
    int tree =
        (int)syscall(SYS_open_tree, src, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
    int e = errno;
    close(src);
    if (tree < 0) {
        snprintf(err, errlen, "volume %s: open_tree: %s", v->name, strerror(e));
        return -1;
    }
    struct mount_attr ma = {.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                        (v->ro ? MOUNT_ATTR_RDONLY : 0)};
    if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &ma, sizeof ma) != 0) {
        snprintf(err, errlen, "volume %s: mount_setattr: %s", v->name, strerror(errno));
        close(tree);
        return -1;
    }
    return tree;
}

static tk_status native_delete_volume(sbx_runtime *rt, const char *owner, const char *claim,
                                      char *err, size_t errlen)
{
    return sbx_volume_native_delete(RT(rt)->state_dir, owner, claim, err, errlen);
}

static tk_status native_start(sbx_runtime *rt, const sbx_spec *spec, sbx_instance **out, char *err,
                              size_t errlen)
{
    int vol_fds[SBX_VOLUMES_MAX];
    const char *vol_targets[SBX_VOLUMES_MAX];
    size_t nvol = 0;
    native_rt *r = RT(rt);
    *out = NULL;
    native_inst *in = tk_calloc(1, sizeof *in);
    in->sync_fd = -1;
    in->pidfd = -1;
    in->own_child = 1;
    snprintf(in->base.id, sizeof in->base.id, "%s", spec->id);
    int lfd = -1, sv[2] = {-1, -1};
    char *tok_env = NULL;
    tk_buf go;
    tk_buf_init(&go, SBX_NATIVE_CHILD_MAX_MSG);

    /* dir */
    snprintf(in->dir, sizeof in->dir, "%s/sandboxes/%s", r->state_dir, spec->id);
    if (mkdir(in->dir, 0700) < 0 && errno != EEXIST) {
        snprintf(err, errlen, "dir: mkdir %s: %s", in->dir, strerror(errno));
        goto fail;
    }
    /* socket */
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    if (r->short_dir[0])
        snprintf(in->base.sock, sizeof in->base.sock, "%s/%s.sock", r->short_dir, spec->id);
    else
        snprintf(in->base.sock, sizeof in->base.sock, "%s/execd.sock", in->dir);
    if (strlen(in->base.sock) >= sizeof sun.sun_path - 1) {
        snprintf(err, errlen, "socket: the path %s is too long for a unix socket", in->base.sock);
        in->base.sock[0] = '\0';
        goto fail;
    }
    snprintf(sun.sun_path, sizeof sun.sun_path, "%s", in->base.sock);
    lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    unlink(in->base.sock);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sun, sizeof sun) < 0 || listen(lfd, 128) < 0) {
        snprintf(err, errlen, "socket: bind %s: %s", in->base.sock, strerror(errno));
        goto fail;
    }
    /* cgroup */
    if (sbx_cgroup_create(r->cg, in->base.id, &spec->limits, err, errlen) != TK_OK)
        goto fail;
    /* the child's configuration, prepared before clone (the child cannot allocate) */
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        snprintf(err, errlen, "socketpair: %s", strerror(errno));
        goto fail;
    }
    tok_env = tk_asprintf("EXECD_ACCESS_TOKEN=%s", spec->execd_token);
    const char *execd_env[24], *user_env[24];
    size_t ne = 0, nu = 0;
    static const char *const common[] = {
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME=/workspace",
        "LANG=C.UTF-8",
        "USER=sandbox",
        "LOGNAME=sandbox",
        "SHELL=/bin/bash",
    };
    for (size_t i = 0; i < TK_ARRAY_LEN(common); i++) {
        execd_env[ne++] = common[i];
        user_env[nu++] = common[i];
    }
    for (size_t i = 0; r->egress && sbx_egress_env[i]; i++) {
        execd_env[ne++] = sbx_egress_env[i];
        user_env[nu++] = sbx_egress_env[i];
    }
    execd_env[ne++] = "EXECD_LISTEN=fd:3";
    execd_env[ne++] = "EXECD_WORKSPACE=/workspace";
    execd_env[ne++] = tok_env;
    execd_env[ne] = NULL;
    user_env[nu] = NULL;
    if (sbx_native_child_payload(&go, 'G', spec->env, spec->entrypoint) != TK_OK) {
        snprintf(err, errlen, "the environment and entrypoint are larger than %d bytes",
                 SBX_NATIVE_CHILD_MAX_MSG);
        goto fail;
    }
    for (size_t i = 0; spec->volumes && i < spec->volumes->n; i++) {
        vol_fds[i] = volume_tree(r, spec->volumes, &spec->volumes->v[i], err, errlen);
        if (vol_fds[i] < 0)
            goto fail;
        vol_targets[i] = spec->volumes->v[i].target;
        nvol++;
    }
    sbx_native_child_cfg cc = {
        .vol_fds = vol_fds,
        .vol_targets = vol_targets,
        .nvols = nvol,
        .rootfs = r->img.rootfs,
        .execd_path = r->execd_path,
        .workspace_opts = r->ws_opts,
        .tmp_opts = r->tmp_opts,
        .userns = r->userns,
        .uid = r->uid,
        .gid = r->gid,
        .listen_fd = lfd,
        .sync_fd = sv[1],
        .filter = &r->filter,
        .execd_env = execd_env,
        .user_env = user_env,
    };
    /* clone */
    int64_t t_prep = tk_mono_ns();
    unsigned long flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
                          (r->userns ? CLONE_NEWUSER : 0) | SIGCHLD;
    /* v2: born in its cgroup (clone3 + CLONE_INTO_CGROUP), no migration to pay */
    pid_t pid = -1;
    int born_in_cgroup = 0;
    int cgfd = sbx_cgroup_open_dir(r->cg, in->base.id);
    if (cgfd >= 0) {
        struct clone_args ca;
        memset(&ca, 0, sizeof ca);
        ca.flags = (flags & ~(unsigned long)0xff) | CLONE_INTO_CGROUP;
        ca.exit_signal = SIGCHLD;
        ca.cgroup = (uint64_t)cgfd;
        pid = (pid_t)syscall(SYS_clone3, &ca, sizeof ca);
        if (pid == 0)
            sbx_native_child_main(&cc);
        close(cgfd);
        born_in_cgroup = pid > 0;
    }
    if (pid < 0)
        pid = (pid_t)syscall(SYS_clone, flags, 0, 0, 0, 0);
    if (pid == 0)
        sbx_native_child_main(&cc);
    if (pid < 0) {
        snprintf(err, errlen, "clone: %s", strerror(errno));
        goto fail;
    }
    int64_t t_clone = tk_mono_ns();
    for (; nvol; nvol--) /* the child has its copies */
        close(vol_fds[nvol - 1]);
    in->pid = pid;
    in->sync_fd = sv[0];
    sv[0] = -1;
    close(sv[1]);
    sv[1] = -1;
    close(lfd);
    lfd = -1;
    /* maps */
    if (r->userns) {
        char map[64];
        snprintf(map, sizeof map, "0 %u %u\n", SBX_UID_BASE, SBX_UID_COUNT);
        if (write_proc(pid, "uid_map", map, err, errlen) != TK_OK ||
            write_proc(pid, "gid_map", map, err, errlen) != TK_OK)
            goto fail;
    }
    int64_t t_maps = tk_mono_ns();
    /* go: the child mounts while we attach it */
    if (send(in->sync_fd, go.data, go.len, MSG_NOSIGNAL) != (ssize_t)go.len) {
        snprintf(err, errlen, "go: send: %s", strerror(errno));
        goto fail;
    }
    /* attach */
    if (!born_in_cgroup && sbx_cgroup_attach(r->cg, in->base.id, pid, err, errlen) != TK_OK)
        goto fail;
    if (send(in->sync_fd, "A", 1, MSG_NOSIGNAL) != 1) {
        snprintf(err, errlen, "attach: send: %s", strerror(errno));
        goto fail;
    }
    in->starttime = proc_starttime(pid);
    in->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    int64_t t_go = tk_mono_ns();
    if (wait_reply(in, 10000, "start", err, errlen) != TK_OK)
        goto fail;
    /* its loopback is up: the proxy listener in its namespace, before any
     * code of the user's runs */
    if (r->egress && attach_egress(r, in, err, errlen) != TK_OK)
        goto fail;
    int64_t t_ready = tk_mono_ns();
    /* a pool member is ready once execd serves: a claim should not find it
     * still loading (its start-up would compete with the first command) */
    if (spec->pooled && wait_served(in, 10000, err, errlen) != TK_OK)
        goto fail;
    tk_debug("native",
             "msg=\"started\" id=%s clone_ms=%.3f maps_ms=%.3f attach_ms=%.3f child_ms=%.3f "
             "served_ms=%.3f",
             in->base.id, (double)(t_clone - t_prep) / 1e6, (double)(t_maps - t_clone) / 1e6,
             (double)(t_go - t_maps) / 1e6, (double)(t_ready - t_go) / 1e6,
             (double)(tk_mono_ns() - t_ready) / 1e6);
    free(tok_env);
    tk_buf_free(&go);
    *out = &in->base;
    return TK_OK;
fail:
    for (; nvol; nvol--)
        close(vol_fds[nvol - 1]);
    if (lfd >= 0)
        close(lfd);
    if (sv[0] >= 0)
        close(sv[0]);
    if (sv[1] >= 0)
        close(sv[1]);
    teardown(r, in);
    instance_free(in);
    free(tok_env);
    tk_buf_free(&go);
    return TK_ERROR;
}

static tk_status native_claim(sbx_runtime *rt, sbx_instance *inst, const sbx_spec *spec, char *err,
                              size_t errlen)
{
    native_inst *in = NI(inst);
    native_rt *r = RT(rt);
    int64_t t0 = tk_mono_ns();
    if (sbx_cgroup_set_limits(r->cg, in->base.id, &spec->limits, err, errlen) != TK_OK)
        return TK_ERROR;
    int64_t t1 = tk_mono_ns();
    if (in->sync_fd < 0) {
        snprintf(err, errlen,
                 "claim: no channel to the sandbox's init (it was found after a restart)");
        return TK_ERROR;
    }
    tk_buf b;
    tk_buf_init(&b, SBX_NATIVE_CHILD_MAX_MSG);
    tk_status st = sbx_native_child_payload(&b, 'C', spec->env, spec->entrypoint);
    if (st != TK_OK) {
        snprintf(err, errlen, "the environment and entrypoint are larger than %d bytes",
                 SBX_NATIVE_CHILD_MAX_MSG);
    } else if (send(in->sync_fd, b.data, b.len, MSG_NOSIGNAL) != (ssize_t)b.len) {
        snprintf(err, errlen, "claim: send: %s", strerror(errno));
        st = TK_ERROR;
    } else if (spec->env && spec->env[0]) {
        /* a new environment means a new execd: no request may reach the old one */
        st = wait_reply(in, 5000, "claim", err, errlen);
    } else {
        /* execd stays as it is; the init starts the entrypoint on its own time
         * (its answer is left unread) */
        st = native_alive(rt, inst) ? TK_OK : TK_ERROR;
        if (st != TK_OK)
            snprintf(err, errlen, "claim: the pooled sandbox has exited");
    }
    tk_buf_free(&b);
    tk_debug("native", "msg=\"claimed\" id=%s limits_ms=%.3f init_ms=%.3f", in->base.id,
             (double)(t1 - t0) / 1e6, (double)(tk_mono_ns() - t1) / 1e6);
    return st;
}

static tk_status native_pause(sbx_runtime *rt, sbx_instance *in, char *err, size_t errlen)
{
    return sbx_cgroup_freeze(RT(rt)->cg, in->id, 1, 5000, err, errlen);
}

static tk_status native_resume(sbx_runtime *rt, sbx_instance *in, char *err, size_t errlen)
{
    return sbx_cgroup_freeze(RT(rt)->cg, in->id, 0, 5000, err, errlen);
}

static void native_teardown(sbx_runtime *rt, sbx_instance *in)
{
    teardown(RT(rt), NI(in));
}

static void native_release(sbx_instance *in)
{
    instance_free(NI(in));
}

static int native_alive(sbx_runtime *rt, sbx_instance *inst)
{
    (void)rt;
    native_inst *in = NI(inst);
    if (in->exited)
        return 0;
    if (in->own_child) {
        int st;
        pid_t p = waitpid(in->pid, &st, WNOHANG);
        if (p == in->pid || (p < 0 && errno == ECHILD)) {
            in->exited = 1;
            return 0;
        }
        return 1;
    }
    if (in->pidfd >= 0) {
        struct pollfd pf = {in->pidfd, POLLIN, 0};
        if (poll(&pf, 1, 0) > 0) {
            in->exited = 1;
            return 0;
        }
        return 1;
    }
    if (proc_starttime(in->pid) != in->starttime) {
        in->exited = 1;
        return 0;
    }
    return 1;
}

static json_t *native_save(sbx_instance *inst)
{
    native_inst *in = NI(inst);
    return tk_json_obj("pid", json_integer(in->pid), "starttime",
                       json_integer((json_int_t)in->starttime), "socket",
                       json_string(in->base.sock), NULL);
}

static tk_status native_attach(sbx_runtime *rt, const char *id, const json_t *saved, int paused,
                               sbx_instance **out, char *err, size_t errlen)
{
    native_rt *r = RT(rt);
    *out = NULL;
    int64_t pid = tk_json_int_or(saved, "pid", 0), start = tk_json_int_or(saved, "starttime", 0);
    if (pid <= 0 || start <= 0) {
        snprintf(err, errlen, "attach: the record has no process");
        return TK_ENOENT;
    }
    if (proc_starttime((pid_t)pid) != (unsigned long long)start) {
        snprintf(err, errlen, "attach: process %lld is gone", (long long)pid);
        return TK_ENOENT;
    }
    if (sbx_cgroup_count(r->cg, id) <= 0) {
        snprintf(err, errlen, "attach: the cgroup of %s is gone or empty", id);
        return TK_ENOENT;
    }
    native_inst *in = tk_calloc(1, sizeof *in);
    in->sync_fd = -1;
    in->pid = (pid_t)pid;
    in->starttime = (unsigned long long)start;
    in->pidfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
    snprintf(in->base.id, sizeof in->base.id, "%s", id);
    snprintf(in->dir, sizeof in->dir, "%s/sandboxes/%s", r->state_dir, id);
    const char *saved_sock = tk_json_str(saved, "socket");
    if (saved_sock && strlen(saved_sock) < sizeof in->base.sock)
        snprintf(in->base.sock, sizeof in->base.sock, "%s", saved_sock);
    else
        snprintf(in->base.sock, sizeof in->base.sock, "%s/execd.sock", in->dir);
    struct stat sb;
    if (stat(in->base.sock, &sb) != 0 || !S_ISSOCK(sb.st_mode)) {
        snprintf(err, errlen, "attach: %s is gone", in->base.sock);
        in->base.sock[0] = '\0';
        teardown(r, in);
        instance_free(in);
        return TK_ENOENT;
    }
    /* the old listener went with the process that held it: a new one (without
     * it the sandbox has no way out, which fails closed) */
    char eerr[300];
    if (r->egress && attach_egress(r, in, eerr, sizeof eerr) != TK_OK)
        tk_error("native",
                 "msg=\"no egress for a sandbox found after a restart\" id=%s error=\"%s\"", id,
                 eerr);
    int frozen = sbx_cgroup_frozen(r->cg, id);
    if (frozen != paused) {
        char e2[256];
        sbx_cgroup_freeze(r->cg, id, paused, 5000, e2, sizeof e2);
    }
    *out = &in->base;
    return TK_OK;
}

static void native_sweep(sbx_runtime *rt, const char *const *keep, size_t n)
{
    native_rt *r = RT(rt);
    char **names;
    size_t count = sbx_cgroup_list(r->cg, &names);
    for (size_t i = 0; i < count; i++) {
        int kept = 0;
        for (size_t j = 0; j < n; j++)
            if (strcmp(names[i], keep[j]) == 0)
                kept = 1;
        if (kept)
            continue;
        char err[256];
        tk_info("native", "msg=\"removing a leftover sandbox cgroup\" id=%s", names[i]);
        if (sbx_cgroup_remove(r->cg, names[i], 5000, err, sizeof err) != TK_OK)
            tk_error("native", "msg=\"cannot remove a leftover cgroup\" id=%s error=\"%s\"",
                     names[i], err);
    }
    sbx_cgroup_list_free(names, count);
    if (r->short_dir[0]) {
        DIR *d = opendir(r->short_dir);
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL) {
            char id[SBX_ID_MAX];
            size_t l = strlen(de->d_name);
            if (l < 6 || l - 5 >= sizeof id || strcmp(de->d_name + l - 5, ".sock") != 0)
                continue;
            memcpy(id, de->d_name, l - 5);
            id[l - 5] = '\0';
            int kept = 0;
            for (size_t j = 0; j < n; j++)
                if (strcmp(id, keep[j]) == 0)
                    kept = 1;
            if (!kept)
                unlinkat(dirfd(d), de->d_name, 0);
        }
        if (d)
            closedir(d);
    }
}

static const char *native_describe(sbx_runtime *rt)
{
    return RT(rt)->desc;
}

static void native_free(sbx_runtime *rt)
{
    if (!rt)
        return;
    native_rt *r = RT(rt);
    if (r->short_dir[0])
        rmdir(r->short_dir); /* only when no sandbox is left */
    sbx_cgroup_close(r->cg);
    sbx_seccomp_free(&r->filter);
    free(r);
    free(rt);
}

static const sbx_runtime_ops native_ops = {
    .name = "native",
    .start = native_start,
    .claim = native_claim,
    .pause = native_pause,
    .resume = native_resume,
    .teardown = native_teardown,
    .release = native_release,
    .alive = native_alive,
    .save = native_save,
    .attach = native_attach,
    .sweep = native_sweep,
    .describe = native_describe,
    .free = native_free,
    .delete_volume = native_delete_volume,
};

/* Can this process make a user namespace with a full id map? */
static int probe_userns(void)
{
    pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
    if (pid == 0) {
        /* wait for the map, then exit */
        usleep(1000 * 50);
        _exit(0);
    }
    if (pid < 0)
        return 0;
    char map[64], err[128];
    snprintf(map, sizeof map, "0 %u %u\n", SBX_UID_BASE, SBX_UID_COUNT);
    int ok = write_proc(pid, "uid_map", map, err, sizeof err) == TK_OK &&
             write_proc(pid, "gid_map", map, err, sizeof err) == TK_OK;
    kill(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
    return ok;
}

/* A short stable tag for the state dir, so services with different state dirs
 * keep apart in the cgroup tree. */
static unsigned long long fnv1a(const char *s)
{
    unsigned long long h = 1469598103934665603ULL;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

static char *opt_userns;

static int check_userns(const char *v, char *msg, size_t msglen)
{
    if (strcmp(v, "auto") && strcmp(v, "on") && strcmp(v, "off")) {
        snprintf(msg, msglen, "must be auto, on or off");
        return 1;
    }
    return 0;
}

static tk_setting native_settings[] = {
    {"SANDBOX_USERNS", "userns", TK_SET_STR, "auto",
     "run sandboxes in a user namespace: auto, on, off", .out = &opt_userns, .check = check_userns},
};

static sbx_runtime *native_open(const sbx_runtime_config *cfg, char *err, size_t errlen)
{
    native_rt *r = tk_calloc(1, sizeof *r);
    snprintf(r->state_dir, sizeof r->state_dir, "%s", cfg->state_dir);
    if (geteuid() != 0) {
        snprintf(err, errlen,
                 "the native runtime needs root (namespaces, cgroups, mounts); "
                 "run tusko-sandboxd as root");
        goto fail;
    }
    if (sbx_image_find(cfg->image_dir, &r->img, err, errlen) != TK_OK)
        goto fail;
    if (!realpath(cfg->execd_path, r->execd_path) || access(r->execd_path, X_OK) != 0) {
        snprintf(err, errlen,
                 "SANDBOX_EXECD_PATH: no executable tusko-execd at %s (build it with make)",
                 cfg->execd_path);
        goto fail;
    }
    if (sbx_seccomp_build(&r->filter, err, errlen) != TK_OK)
        goto fail;
    char group[64];
    snprintf(group, sizeof group, "tusko-sandboxd.%08llx", fnv1a(r->state_dir) & 0xffffffffULL);
    r->cg = sbx_cgroup_open(group, NULL, err, errlen);
    if (!r->cg)
        goto fail;
    /* <state>/sandboxes/<36-char id>/execd.sock must fit sun_path (107 bytes) */
    if (strlen(r->state_dir) + 58 > 107) {
        snprintf(r->short_dir, sizeof r->short_dir, "/run/tusko-sandboxd.%08llx",
                 fnv1a(r->state_dir) & 0xffffffffULL);
        if (mkdir(r->short_dir, 0700) < 0 && errno != EEXIST) {
            snprintf(err, errlen,
                     "mkdir %s (for execd sockets: the state dir's path is too long for them): %s",
                     r->short_dir, strerror(errno));
            goto fail;
        }
        chmod(r->short_dir, 0700);
    }
    const char *u = opt_userns ? opt_userns : "auto";
    if (strcmp(u, "off") == 0) {
        r->userns = 0;
    } else {
        r->userns = probe_userns();
        if (!r->userns && strcmp(u, "on") == 0) {
            snprintf(err, errlen,
                     "SANDBOX_USERNS=on but this kernel refuses user namespaces with an id map "
                     "(check /proc/sys/user/max_user_namespaces)");
            goto fail;
        }
    }
    if (r->userns) {
        r->uid = SBX_USER_ID;
        r->gid = SBX_USER_ID;
    } else {
        r->uid = SBX_UID_BASE + SBX_USER_ID;
        r->gid = SBX_UID_BASE + SBX_USER_ID;
    }
    snprintf(r->ws_opts, sizeof r->ws_opts, "size=%lld,mode=0755,uid=%u,gid=%u",
             (long long)cfg->workspace_bytes, (unsigned)r->uid, (unsigned)r->gid);
    snprintf(r->tmp_opts, sizeof r->tmp_opts, "size=%lld,mode=1777", (long long)cfg->tmp_bytes);
    r->egress = cfg->egress;
    r->egress_caps = cfg->egress_caps;
    snprintf(r->desc, sizeof r->desc,
             "native namespaces=mnt,pid,net,ipc,uts,cgroup%s cgroups=\"%s\" group=%s seccomp=%u "
             "network=%s image=%s execd=%s%s%s",
             r->userns ? ",user" : "", sbx_cgroup_describe(r->cg), group, (unsigned)r->filter.len,
             r->egress ? "proxy" : "none", r->img.rootfs, r->execd_path,
             r->short_dir[0] ? " sockets=" : "", r->short_dir);
    sbx_runtime *rt = tk_calloc(1, sizeof *rt);
    rt->ops = &native_ops;
    rt->impl = r;
    return rt;
fail:
    if (r->cg)
        sbx_cgroup_close(r->cg);
    sbx_seccomp_free(&r->filter);
    free(r);
    return NULL;
}

const sbx_runtime_kind sbx_runtime_native = {
    .name = "native",
    .settings = native_settings,
    .nsettings = TK_ARRAY_LEN(native_settings),
    .open = native_open,
};
