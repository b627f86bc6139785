/*
 * seccomp.h — the system-call filter every sandbox process runs under.
 *
 * A deny list on top of dropped capabilities and namespaces, built once with
 * libseccomp and exported as a classic BPF program so the sandbox's child side
 * can install it with one prctl() and no allocation. The filter checks the
 * architecture first (a call from any other ABI — i386 through int 0x80, x32 —
 * kills the process), then refuses with EPERM: the mount family (mount, umount2,
 * pivot_root, chroot, open_tree, move_mount, fsopen, fsconfig, fsmount, fspick,
 * mount_setattr), ptrace and process_vm_readv/writev, kexec_load and
 * kexec_file_load, init_module, finit_module and delete_module, bpf,
 * perf_event_open, keyctl, add_key and request_key, unshare and setns, clone
 * with any CLONE_NEW* flag (clone3 answers ENOSYS so libc falls back to clone),
 * reboot, swapon/swapoff, acct, quotactl, the clock setters, iopl/ioperm,
 * userfaultfd, open_by_handle_at and name_to_handle_at, io_uring, syslog,
 * lookup_dcookie, vhangup, nfsservctl, uselib, kcmp, pidfd_getfd, fanotify_init,
 * and sockets of the packet family.
 */
#ifndef SBX_SECCOMP_H
#define SBX_SECCOMP_H

#include <linux/filter.h>
#include <stddef.h>

#include "lib/common.h"

/* Builds the filter into prog (prog->filter is heap memory: sbx_seccomp_free).
 * TK_ERROR with a message when the architecture is not supported. */
tk_status sbx_seccomp_build(struct sock_fprog *prog, char *err, size_t errlen);
void sbx_seccomp_free(struct sock_fprog *prog);
/* The names of the refused calls, NULL-terminated (for docs and tests). */
extern const char *const sbx_seccomp_denied[];

#endif
