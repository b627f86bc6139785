#include "sandboxd/seccomp.h"

#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

const char *const sbx_seccomp_denied[] = {
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "bpf",
    "perf_event_open",
    "keyctl",
    "add_key",
    "request_key",
    "unshare",
    "setns",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "quotactl_fd",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "iopl",
    "ioperm",
    "userfaultfd",
    "open_by_handle_at",
    "name_to_handle_at",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "syslog",
    "lookup_dcookie",
    "vhangup",
    "nfsservctl",
    "uselib",
    "create_module",
    "get_kernel_syms",
    "query_module",
    "sysfs",
    "_sysctl",
    "pidfd_getfd",
    "fanotify_init",
    "kcmp",
    NULL,
};

tk_status sbx_seccomp_build(struct sock_fprog *prog, char *err, size_t errlen)
{
    memset(prog, 0, sizeof *prog);
    uint32_t arch = seccomp_arch_native();
    if (arch != SCMP_ARCH_X86_64 && arch != SCMP_ARCH_AARCH64) {
        snprintf(err, errlen,
                 "seccomp: this architecture (libseccomp token %u) is not supported; "
                 "sandboxes need x86_64 or aarch64",
                 arch);
        return TK_ERROR;
    }
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx) {
        snprintf(err, errlen, "seccomp_init failed");
        return TK_ERROR;
    }
    tk_status st = TK_ERROR;
    int memfd = -1;
    /* Calls from a foreign ABI are killed (the filter's first check). */
    if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) != 0)
        seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL);
    for (size_t i = 0; sbx_seccomp_denied[i]; i++) {
        int nr = seccomp_syscall_resolve_name(sbx_seccomp_denied[i]);
        if (nr == __NR_SCMP_ERROR || nr < 0)
            continue; /* not on this architecture */
        int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
        if (rc != 0) {
            snprintf(err, errlen, "seccomp: rule for %s: %s", sbx_seccomp_denied[i], strerror(-rc));
            goto out;
        }
    }
    /* clone: refuse any new namespace; clone3 passes flags in memory that a
     * filter cannot read, so it is refused with ENOSYS and libc falls back. */
    int rc;
    const uint64_t flags[] = {CLONE_NEWNS,  CLONE_NEWUTS, CLONE_NEWIPC,    CLONE_NEWUSER,
                              CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP, 0x00000080ULL};
    for (size_t i = 0; i < TK_ARRAY_LEN(flags); i++) {
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                              SCMP_A0(SCMP_CMP_MASKED_EQ, flags[i], flags[i]));
        if (rc != 0) {
            snprintf(err, errlen, "seccomp: clone rule: %s", strerror(-rc));
            goto out;
        }
    }
    int nr3 = seccomp_syscall_resolve_name("clone3");
    if (nr3 >= 0 && seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr3, 0) != 0) {
        snprintf(err, errlen, "seccomp: clone3 rule failed");
        goto out;
    }
    /* packet sockets (raw frames) */
    if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
                         SCMP_A0(SCMP_CMP_EQ, AF_PACKET)) != 0) {
        snprintf(err, errlen, "seccomp: socket rule failed");
        goto out;
    }
    memfd = memfd_create("sbx-seccomp", MFD_CLOEXEC);
    if (memfd < 0) {
        snprintf(err, errlen, "seccomp: memfd_create: %s", strerror(errno));
        goto out;
    }
    rc = seccomp_export_bpf(ctx, memfd);
    if (rc != 0) {
        snprintf(err, errlen, "seccomp_export_bpf: %s", strerror(-rc));
        goto out;
    }
    off_t len = lseek(memfd, 0, SEEK_END);
    if (len <= 0 || len % (off_t)sizeof(struct sock_filter) != 0 || len > 65536) {
        snprintf(err, errlen, "seccomp: bad exported program size %lld", (long long)len);
        goto out;
    }
    prog->filter = tk_malloc((size_t)len);
    if (pread(memfd, prog->filter, (size_t)len, 0) != len) {
        snprintf(err, errlen, "seccomp: reading the program: %s", strerror(errno));
        free(prog->filter);
        prog->filter = NULL;
        goto out;
    }
    prog->len = (unsigned short)(len / (off_t)sizeof(struct sock_filter));
    st = TK_OK;
out:
    if (memfd >= 0)
        close(memfd);
    seccomp_release(ctx);
    return st;
}

void sbx_seccomp_free(struct sock_fprog *prog)
{
    free(prog->filter);
    prog->filter = NULL;
    prog->len = 0;
}
