/*
 * native_child.h — the child side of the native runtime: what runs inside the
 * new namespaces, from the moment clone() returns until the sandbox dies.
 *
 * The child is a copy of the service's memory made by a raw clone() of a
 * multi-threaded process, so it must not allocate (a lock another thread held
 * at clone time stays held in the copy) and uses only system calls, stack and
 * static buffers, and what the parent prepared in sbx_native_child_cfg before clone.
 *
 * Steps, in order (each reports its name and errno to the parent on failure):
 *   fds        stdin/out/err to /dev/null, the listening socket to fd 3, the
 *              sync socket to fd 4, every other descriptor closed
 *   wait_go    block until the parent has written the uid/gid maps
 *   ids        in a user namespace: become its root (uid/gid 0 inside)
 *   hostname   "sandbox" in the new UTS namespace
 *   private    every mount MS_PRIVATE, so nothing propagates back to the host
 *   root       bind the image onto itself (the new root)
 *   workspace  a tmpfs with a size limit, owned by the sandbox user
 *   tmp, run   tmpfs with size limits
 *   volumes    each volume's detached mount (prepared by the parent: fds 5..)
 *              attached at its target; a tmpfs on /mnt first when a target
 *              lies there (the image's /mnt is read-only and shared)
 *   dev        a tmpfs with null zero full random urandom tty bound from the
 *              host, devpts (newinstance), shm, the /proc/self/fd links; then
 *              read-only
 *   execd      a tmpfs at /opt/tusko/bin holding the host's tusko-execd bound
 *              read-only; then read-only
 *   proc       a fresh procfs for the new pid namespace; sys, sysrq-trigger,
 *              irq, bus read-only
 *   root_ro    the image read-only (keeping the flags the kernel locked)
 *   pivot      pivot_root into it and detach the old root
 *   lo         bring up the loopback interface of the empty network namespace
 *   rlimits    core 0, nofile, memlock
 *   attached   wait until the parent has moved us into our cgroups (it does so
 *              while we mount), then unshare(CLONE_NEWCGROUP): the cgroup
 *              namespace starts at the sandbox's own group. Nothing untrusted
 *              has run yet; execd starts inside the limits.
 *   drop       supplementary groups cleared, capability bounding set emptied,
 *              uid/gid to the sandbox user (which clears every capability),
 *              ambient and inheritable sets cleared
 *   nnp        no_new_privs, not dumpable
 *   seccomp    the filter (last)
 *   then the child is the sandbox's init (pid 1): it starts execd (fd 3 as
 *   EXECD_LISTEN=fd:3), reports ready, starts the entrypoint when one is given,
 *   reaps every orphan, restarts execd if it dies, and applies a claim (env and
 *   entrypoint for a pooled sandbox) when the parent sends one.
 *
 * Messages on the sync socket (SOCK_SEQPACKET): parent → child 'G' (go) or 'C'
 * (claim), each followed by a payload (sbx_native_child_payload_*), and 'A' (attached
 * to the cgroups); child → parent 'R' (ready) or 'E' + errno (4 bytes) + the
 * failing step's text.
 */
#ifndef SBX_NATIVE_CHILD_H
#define SBX_NATIVE_CHILD_H

#include <linux/filter.h>
#include <stddef.h>
#include <sys/types.h>

#include "lib/buf.h"
#include "lib/common.h"

#define SBX_NATIVE_CHILD_MAX_MSG  65536
#define SBX_NATIVE_CHILD_MAX_STRS 1024

typedef struct {
    const char *rootfs;         /* host path of the image's root */
    const char *execd_path;     /* host path of tusko-execd */
    const char *workspace_opts; /* tmpfs options for /workspace */
    const char *tmp_opts;       /* tmpfs options for /tmp */
    int userns;                 /* in a new user namespace: become its root after the maps */
    uid_t uid;                  /* the sandbox user, as seen inside */
    gid_t gid;
    int listen_fd; /* execd's listening socket (becomes fd 3) */
    int sync_fd;   /* the child's end of the sync socket (becomes fd 4) */
    const struct sock_fprog *filter;
    const char *const *execd_env; /* execd's environment, NULL-terminated */
    const char *const *user_env;  /* the entrypoint's base environment */
    /* volumes: detached mounts (open_tree) the child attaches at their targets
     * (absolute paths inside, under /mnt, /workspace or /tmp) */
    const int *vol_fds;
    const char *const *vol_targets;
    size_t nvols;
} sbx_native_child_cfg;

/* Runs the steps and the init loop; never returns. */
_Noreturn void sbx_native_child_main(const sbx_native_child_cfg *c);

/* Payloads: u32 nenv, u32 nargv, then nenv + nargv NUL-terminated strings.
 * Appends to b (parent side; allocates). TK_ETOOBIG past SBX_NATIVE_CHILD_MAX_MSG. */
tk_status sbx_native_child_payload(tk_buf *b, char type, const char *const *env,
                                   const char *const *argv);
/* Parses a payload in place (child side; no allocation): env and argv point
 * into msg, each NULL-terminated, at most max entries each. */
tk_status sbx_native_child_payload_parse(char *msg, size_t len, char **env, char **argv,
                                         size_t max);

#endif
