/*
 * runtime.h — what a sandbox runtime provides to the lifecycle service.
 *
 * The API layer (api.c, service.c, pool.c, reaper.c) knows sandboxes only
 * through this interface, so a runtime is one file that fills a
 * sbx_runtime_ops table and describes itself in a sbx_runtime_kind (its name,
 * its own settings, its open()): runtime_native.c (Linux namespaces, the
 * default), runtime_docker.c (the Docker Engine API) and runtime_k8s.c (Pods
 * through a Kubernetes API server). runtime.c lists them and selects one
 * (SANDBOX_RUNTIME).
 *
 * The contract every runtime keeps:
 * - A sandbox runs tusko-execd, reachable by HTTP either over a unix socket on
 *   the host that only this service can open (sock; native, docker: nothing of
 *   the sandbox is reachable over the network) or, for the kubernetes runtime,
 *   over TCP at the pod's IP (tcp), fenced by the namespace's NetworkPolicy.
 *   Requests to execd must carry the sandbox's access token
 *   (X-EXECD-ACCESS-TOKEN), which the runtime hands to execd — or, when execd
 *   was started before the request (a warm pod), takes from it (token).
 * - start() returns once a connection to the socket will be served (it may be
 *   queued until execd accepts it), or fails having freed everything it made;
 *   TK_EDENIED when the platform refused for want of capacity (a cluster's
 *   quota: the service answers 503 CAPACITY), TK_ECLOSED or TK_ETIMEOUT when
 *   it did not answer in time (503 UNAVAILABLE).
 * - pause()/resume(): TK_EDENIED when the runtime cannot pause (501).
 * - claim() turns a pooled sandbox (started with no request) into a request's:
 *   limits, environment and entrypoint. A runtime that cannot change something
 *   after start may restart what it must (native restarts execd when env is set).
 * - destroy() frees everything the sandbox holds — processes, mounts, cgroups,
 *   volumes, files under its state directory — and is safe to call on a sandbox
 *   that is half made or already gone. It frees the instance (the runtime's
 *   teardown, then its release).
 * - save()/attach() make restarts safe: save() returns what the runtime needs to
 *   find the sandbox again (stored by the service in the sandbox's record);
 *   attach() finds it after a restart of the service (kill -9 included) and
 *   fails when it is gone. sweep() then removes whatever the runtime holds for
 *   sandboxes the service does not know (half-made ones).
 *
 * Threads: every function may be called from any thread, for different
 * instances at once; calls on one instance are serialised by the caller.
 * Errors: tk_status, with an operator-readable message in err (the failing
 * step and the path or syscall).
 */
#ifndef SBX_RUNTIME_H
#define SBX_RUNTIME_H

#include <jansson.h>
#include <stddef.h>

#include "lib/common.h"
#include "lib/config.h"
#include "lib/egress.h"
#include "lib/execd_port.h"
#include "sandboxd/limits.h"
#include "sandboxd/volume.h"

/* Longest sandbox id (a UUID) and execd token (hex) with their NULs. */
#define SBX_ID_MAX    40
#define SBX_TOKEN_MAX 72

typedef struct sbx_runtime sbx_runtime;
typedef struct sbx_instance sbx_instance; /* a runtime's handle on one sandbox */

/* What to run. Strings are borrowed for the call. */
typedef struct {
    const char *id;          /* the sandbox id; names its state directory */
    const char *execd_token; /* EXECD_ACCESS_TOKEN for its execd */
    sbx_limits limits;
    const char *const *env;        /* "NAME=value", NULL-terminated, or NULL */
    const char *const *entrypoint; /* argv, NULL-terminated, or NULL for none */

    /* Added for the docker runtime (zero when not known; native ignores them): */
    int pooled;                 /* started for the warm pool: a claim() will follow */
    const json_t *metadata;     /* the owner's metadata (labels), or NULL */
    int64_t expires_ms;         /* expiry at creation (labels), 0 for none */
    const sbx_volumes *volumes; /* checked volumes (sandboxd/volume.h), or NULL */
} sbx_spec;

/* Settings shared by every runtime (the program's configuration). A runtime's
 * own settings are in its sbx_runtime_kind. */
typedef struct {
    const char *state_dir;   /* absolute; the runtime may use <state_dir>/sandboxes/<id>/ */
    const char *image_dir;   /* the sandbox root filesystem (a folder holding rootfs/, or one) */
    const char *execd_path;  /* host build of tusko-execd */
    int64_t workspace_bytes; /* size of /workspace */
    int64_t tmp_bytes;       /* size of /tmp */
    sbx_limits pool_limits;  /* the limits a request gets by default (a runtime's own pool) */
    /* SANDBOX_NETWORK=proxy: the proxy serving each sandbox's way out
     * (sandboxd/egress.h) and the caps each sandbox gets; NULL: no network */
    tk_egress *egress;
    tk_egress_caps egress_caps;
} sbx_runtime_config;

/* What every runtime's handle on a sandbox begins with: each runtime's own
 * instance struct has it as its first member, so the service reads the id and
 * execd's socket without asking, and destroy and forget are one rule for all
 * (sbx_runtime_destroy, sbx_runtime_forget). */
struct sbx_instance {
    char id[SBX_ID_MAX];
    char sock[108]; /* execd's unix socket on the host; valid as long as the instance */
    char tcp[64];   /* or execd's "ip:port" ("[ip6]:port") when it is reached over TCP */
    /* Set by a runtime whose execd already ran with a token of its own before
     * the request (a warm pod): the service uses it as the sandbox's token. */
    char token[SBX_TOKEN_MAX];
    int warm; /* start() took an already running sandbox (the runtime's own pool) */
};

typedef struct {
    const char *name; /* "native", "docker", "k8s" */
    tk_status (*start)(sbx_runtime *rt, const sbx_spec *spec, sbx_instance **out, char *err,
                       size_t errlen);
    tk_status (*claim)(sbx_runtime *rt, sbx_instance *in, const sbx_spec *spec, char *err,
                       size_t errlen);
    tk_status (*pause)(sbx_runtime *rt, sbx_instance *in, char *err, size_t errlen);
    tk_status (*resume)(sbx_runtime *rt, sbx_instance *in, char *err, size_t errlen);
    /* Frees everything the sandbox holds (see destroy() above) but not the
     * handle; quiet about what is already gone. */
    void (*teardown)(sbx_runtime *rt, sbx_instance *in);
    /* Frees the handle alone (its descriptors and memory); the sandbox is left
     * as it is. */
    void (*release)(sbx_instance *in);
    /* 1 while the sandbox's processes run (paused counts), 0 once it is gone. */
    int (*alive)(sbx_runtime *rt, sbx_instance *in);
    /* A new JSON object describing the instance for attach(). */
    json_t *(*save)(sbx_instance *in);
    tk_status (*attach)(sbx_runtime *rt, const char *id, const json_t *saved, int paused,
                        sbx_instance **out, char *err, size_t errlen);
    /* Removes leftovers of every sandbox whose id is not in keep[0..n). */
    void (*sweep)(sbx_runtime *rt, const char *const *keep, size_t n);
    /* One line describing the runtime for the start-up log (isolation in use). */
    const char *(*describe)(sbx_runtime *rt);
    void (*free)(sbx_runtime *rt);
    /* Removes an owner's named volume (sandboxd/volume.h); NULL when the runtime
     * has none. TK_ENOENT when absent, TK_EDENIED when a sandbox uses it. */
    tk_status (*delete_volume)(sbx_runtime *rt, const char *owner, const char *claim, char *err,
                               size_t errlen);
} sbx_runtime_ops;

struct sbx_runtime {
    const sbx_runtime_ops *ops;
    void *impl;
};

/* A runtime this build has: its name (SANDBOX_RUNTIME), its own settings
 * (variables and flags; the program loads them with its own, so --help lists
 * them, and the runtime reads them in its open()), and open(). */
typedef struct {
    const char *name;
    tk_setting *settings;
    size_t nsettings;
    sbx_runtime *(*open)(const sbx_runtime_config *cfg, char *err, size_t errlen);
} sbx_runtime_kind;

/* The native runtime (runtime_native.c): Linux namespaces, the default. */
extern const sbx_runtime_kind sbx_runtime_native;
/* The docker runtime (runtime_docker.c): containers through the Docker Engine API. */
extern const sbx_runtime_kind sbx_runtime_docker;
/* The kubernetes runtime (runtime_k8s.c): Pods through the API server, with its
 * own warm pool of ready pods (the service's pool is not used with it). */
extern const sbx_runtime_kind sbx_runtime_k8s;

/* Every runtime of this build, NULL-terminated, the default first. */
extern const sbx_runtime_kind *const sbx_runtime_kinds[];

/* Opens the runtime called name (NULL: the default). NULL with err. */
sbx_runtime *sbx_runtime_open(const char *name, const sbx_runtime_config *cfg, char *err,
                              size_t errlen);
/* Loads every runtime's settings from the environment alone (no flags): for
 * programs and tests that open a runtime without the program's settings. */
tk_status sbx_runtime_settings_from_env(char *err, size_t errlen);

/* destroy(): the runtime's teardown, then its release. Safe on NULL. */
void sbx_runtime_destroy(sbx_runtime *rt, sbx_instance *in);
/* forget(): frees the handle and leaves the sandbox running (the service is
 * stopping; attach() finds it again after the restart). Safe on NULL. */
void sbx_runtime_forget(sbx_runtime *rt, sbx_instance *in);
/* The host path of execd's unix socket; valid as long as the instance. */
const char *sbx_runtime_execd_socket(const sbx_instance *in);
/* Where execd is, for the proxy: "tcp:ip:port" when reached over TCP, else its
 * socket path. */
void sbx_runtime_execd_endpoint(const sbx_instance *in, char *out, size_t outlen);

#endif
