/*
 * docker_spec.h — what the docker runtime asks the engine for, as pure
 * functions (no I/O), so every security setting is visible in one place and
 * unit-tested: the container (entrypoint, user, mounts, limits, isolation,
 * labels), the workspace volume, the limits of an update, the seccomp profile,
 * the environment file execd starts with, and an exec of the entrypoint.
 *
 * A container runs, as the image's "sandbox" user (uid/gid 1000):
 *   /bin/sh -c SBX_DOCKER_SPEC_INIT_SCRIPT   waits for the claim when it is a pool member
 *                                   (reads the FIFO run/claim), sources run/env
 *                                   (execd's settings, its access token, the
 *                                   request's env and entrypoint), leaves a
 *                                   child that starts the entrypoint once the
 *                                   FIFO run/entry says so (after the service
 *                                   closed run/ to the sandbox), then execs
 *                                   tusko-execd, which is from then on the
 *                                   container's process 1 (and reaps the rest)
 * with
 *   /opt/tusko/bin/tusko-execd      the host's build, bound read-only
 *   /run/tusko                      the host folder <state>/sandboxes/<id>/run,
 *                                   where execd binds its socket (execd.sock)
 *   /workspace                      the volume tusko-ws-<id> (a tmpfs of
 *                                   SANDBOX_WORKSPACE_SIZE, kept until deletion)
 *   /tmp, /run                      tmpfs with size limits
 * and: read-only root, network "none", all capabilities dropped,
 * no-new-privileges, our seccomp profile (the native runtime's deny list, see
 * seccomp.h), private ipc/pid/uts/cgroup namespaces, /sys and Docker's usual
 * /proc paths masked, rlimits as native (core 0, nofile 8192, memlock 64 KiB),
 * memory (no swap), NanoCPUs and a pids limit from the request, a bounded log.
 *
 * Labels (the engine is asked by label, never by name, to find containers again):
 *   io.tusko.sandboxd          the service's tag (from its state folder)
 *   io.tusko.sandbox.id        the sandbox id
 *   io.tusko.sandbox.role      "pool" (a warm-pool member when made) or "sandbox"
 *   io.tusko.sandbox.created   RFC 3339
 *   io.tusko.sandbox.expires   RFC 3339 at creation, "" for none
 *   io.tusko.meta.<key>        the owner's metadata at creation
 * Docker cannot change labels later: renewals, metadata patches and claims of
 * pool members are kept in the service's records, which stay authoritative.
 */
#ifndef SBX_DOCKER_SPEC_H
#define SBX_DOCKER_SPEC_H

#include <jansson.h>
#include <stdint.h>

#include "lib/common.h"
#include "sandboxd/limits.h"
#include "sandboxd/runtime.h"

#define SBX_DOCKER_SPEC_LABEL_SERVICE "io.tusko.sandboxd"
#define SBX_DOCKER_SPEC_LABEL_ID      "io.tusko.sandbox.id"
#define SBX_DOCKER_SPEC_LABEL_ROLE    "io.tusko.sandbox.role"
#define SBX_DOCKER_SPEC_LABEL_CREATED "io.tusko.sandbox.created"
#define SBX_DOCKER_SPEC_LABEL_EXPIRES "io.tusko.sandbox.expires"
#define SBX_DOCKER_SPEC_LABEL_META    "io.tusko.meta."

#define SBX_DOCKER_SPEC_UID     1000
#define SBX_DOCKER_SPEC_RUN     "/run/tusko"
#define SBX_DOCKER_SPEC_EXECD   "/opt/tusko/bin/tusko-execd"
#define SBX_DOCKER_SPEC_SOCK    "execd.sock"
#define SBX_DOCKER_SPEC_ENVFILE "env"
#define SBX_DOCKER_SPEC_FIFO    "claim"
#define SBX_DOCKER_SPEC_ENTRY   "entry"

/* The container's command (run by /bin/sh -c as "tusko-init"). */
extern const char sbx_docker_spec_init_script[];

typedef struct {
    const char *image;        /* reference, e.g. tusko-sandbox:<hash> */
    const char *service_tag;  /* io.tusko.sandboxd */
    const char *execd_path;   /* host path of tusko-execd */
    const char *run_dir;      /* host folder bound at /run/tusko */
    const char *volume;       /* the workspace volume's name */
    int64_t tmp_bytes;        /* /tmp size */
    const char *seccomp_json; /* the profile, serialised */
    int64_t created_ms;
    const sbx_spec *spec; /* id, limits, pooled, metadata, expires_ms */
    int egress;           /* the proxy variables in the environment (sandboxd/egress.h) */
} sbx_docker_spec;

/* The body of POST /containers/create. */
json_t *sbx_docker_spec_container(const sbx_docker_spec *c);
/* The body of POST /volumes/create: a local tmpfs volume of bytes owned by the
 * sandbox user, labelled with the service and the sandbox. */
json_t *sbx_docker_spec_volume(const char *name, const char *service_tag, const char *id,
                               int64_t bytes);
/* Memory, MemorySwap (= Memory: no swap), NanoCpus, PidsLimit — for create and
 * POST /containers/{id}/update. */
json_t *sbx_docker_spec_limits(const sbx_limits *l);
/* The seccomp profile in Docker's format: allow by default, then the native
 * runtime's refusals (EPERM), clone with any CLONE_NEW* flag (EPERM), clone3
 * (ENOSYS, so libc falls back to clone), socket(AF_PACKET) (EPERM); for the
 * native architecture and its compat ABIs. NULL with err on an architecture
 * we do not support. */
json_t *sbx_docker_spec_seccomp(char *err, size_t errlen);
/* The run/env file (a new string): "export NAME='value'" lines for execd's own
 * settings (listen socket, workspace, token), then every valid NAME=value of
 * env (NULL-terminated, may be NULL) except EXECD_* names, then "set -- 'arg'..."
 * for the entrypoint argv (NULL or empty: none); every word single-quoted for
 * the shell. */
char *sbx_docker_spec_env_file(const char *token, const char *const *env, const char *const *argv);

/* Non-zero for a sandbox id as this service makes them (a UUID: lower-case hex
 * and dashes) — labels found on the engine are checked before naming paths. */
int sbx_docker_spec_id_ok(const char *id);

#endif
