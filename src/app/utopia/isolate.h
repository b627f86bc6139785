/*
 * isolate.h — runs a program on untrusted input in a contained child process.
 *
 * The parent (the chat server) forks; the child, before execve, takes these
 * steps in order and exits with status 126 and a line on stderr naming the
 * step that failed (the parent turns that into TK_ERROR — it never runs the
 * program half-contained):
 *
 *   1. rlimits: CPU seconds, address space (skipped only when the program is
 *      this very binary built with AddressSanitizer, whose shadow memory needs
 *      terabytes of address space: ASan's own RSS limit is set instead), file size 0
 *      (no regular file can be written), no core dumps, 64 descriptors
 *   2. a new network namespace (and a user namespace when not root): no
 *      interface but a down loopback
 *   3. when running as root: uid/gid 65534, no supplementary groups
 *   4. every descriptor but stdin/stdout/stderr closed; cwd "/"; a minimal env
 *   5. no_new_privs
 *   6. Landlock: read and execute only under /usr, /bin, /lib*, the program
 *      itself and a few files (ld.so.cache, fonts); no TCP bind or connect; no
 *      signals to, or abstract sockets of, processes outside
 *   7. a seccomp filter (built in the parent): no sockets, no ptrace or
 *      process_vm, no namespaces or mounts, no new processes (threads only),
 *      no signals to other processes, no opening files for writing, no
 *      removing/renaming/linking/chmod, no bpf/perf/keyctl/io_uring/modules,
 *      and execve only of the one program (compared by pointer)
 *
 * The parent feeds `in` on stdin and reads stdout into a capped buffer at the
 * same time (no deadlock on large inputs), keeps the first bytes of stderr,
 * and kills the child's whole process group at the wall-clock deadline or when
 * stdout passes its cap. Safe to call from several threads at once.
 */
#ifndef UTOPIA_ISOLATE_H
#define UTOPIA_ISOLATE_H

#include <stddef.h>
#include <stdint.h>

#include "lib/buf.h"
#include "lib/common.h"

typedef struct {
    int64_t timeout_ms;   /* wall clock; 0 means 20 s */
    int64_t cpu_seconds;  /* RLIMIT_CPU; 0 means 10 */
    int64_t memory_bytes; /* RLIMIT_AS; 0 means 512 MiB */
    /* Extra paths the program may read (NULL-terminated; NULL for none). */
    const char *const *read_paths;
} utopia_isolate_limits;

typedef struct {
    int exited;        /* 1 when the child exited by itself */
    int exit_code;     /* its status when exited */
    int signal;        /* the signal that ended it, or 0 */
    int timed_out;     /* killed at the deadline */
    int output_capped; /* killed because stdout passed out's cap */
    int setup_failed;  /* a containment step failed (exit 126 before exec) */
    char stderr_head[512];
} utopia_isolate_result;

/*
 * Runs `path` with argv (argv[0] may be any name) contained as above. stdout is
 * appended to out (its cap is the output cap). Returns TK_OK when the child ran
 * and exited with status 0; otherwise TK_ETIMEOUT, TK_ETOOBIG (output cap),
 * TK_ERROR (setup failed, or it failed / was killed: see res and err).
 */
tk_status utopia_isolate_run(const char *path, char *const argv[], const void *in, size_t inlen,
                             const utopia_isolate_limits *lim, tk_buf *out,
                             utopia_isolate_result *res, char *err, size_t errlen);

/* The path of the running executable (resolved /proc/self/exe), for re-running
 * this binary as a helper; NULL if unknown. Static storage. */
const char *utopia_isolate_self_exe(void);

#endif
