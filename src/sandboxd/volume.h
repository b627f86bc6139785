/*
 * volume.h — the volumes of a create request (OpenSandbox's `volumes`): host
 * paths the operator allows (SANDBOX_HOST_VOLUME_ALLOW) and named volumes
 * (`pvc.claimName`) that persist for their owner, checked here once and mounted
 * by the runtime.
 *
 * Host paths: realpath()'d (so no symlink leads elsewhere), then they must lie
 * under an allowed prefix (also realpath()'d; component boundaries) and must
 * neither lie in nor contain the service's state directory. The runtime opens
 * the resolved path again with openat2(RESOLVE_NO_SYMLINKS): a component
 * swapped for a symlink meanwhile makes the start fail rather than lead out.
 * An empty allow list refuses every host volume with 403.
 *
 * Named volumes: per owner (the `user` metadata key when it is a plain name,
 * else "_default"); on native a folder <state>/volumes/<owner>/<claim>, on
 * docker a Docker volume tusko-vol-<owner>-<claim>. subPath is relative, with
 * no "..", and resolved beneath the volume without following symlinks.
 *
 * mountPath: absolute, normalised, under /mnt, /workspace or /tmp (the
 * sandbox's image is read-only and shared: nothing else can get a mount point),
 * not nested in another volume's.
 */
#ifndef SBX_VOLUME_H
#define SBX_VOLUME_H

#include <jansson.h>
#include <stddef.h>

#include "lib/common.h"

#define SBX_VOLUMES_MAX     16
#define SBX_VOLUME_PATH_MAX 4096
#define SBX_VOLUME_NAME_MAX 64

typedef struct {
    char name[SBX_VOLUME_NAME_MAX];
    int named;                        /* pvc: a named volume */
    char claim[SBX_VOLUME_NAME_MAX];  /* its claimName */
    char host[SBX_VOLUME_PATH_MAX];   /* host: the resolved host path (subPath included) */
    char sub[SBX_VOLUME_PATH_MAX];    /* named: subPath, normalised relative, or "" */
    char target[SBX_VOLUME_PATH_MAX]; /* mountPath, normalised absolute */
    int ro;
} sbx_volume;

typedef struct {
    size_t n;
    char owner[SBX_VOLUME_NAME_MAX];
    sbx_volume v[SBX_VOLUMES_MAX];
} sbx_volumes;

/* What the operator allows. */
typedef struct {
    const char *host_allow; /* SANDBOX_HOST_VOLUME_ALLOW: ','-separated absolute prefixes, or "" */
    const char *state_dir;  /* never mounted, nor anything holding it */
} sbx_volume_policy;

/*
 * Checks the request's volumes (NULL or an empty array: none; *out stays
 * NULL) and metadata (for the owner). On success *out is a new sbx_volumes
 * (free()) or NULL. Otherwise returns the HTTP status (400, 403, 404) with a
 * message naming the field and the rule.
 */
int sbx_volume_parse_all(const json_t *volumes, const json_t *metadata,
                         const sbx_volume_policy *pol, sbx_volumes **out, char *msg, size_t msglen);

/* Whether s is a volume name: a DNS label of at most 63 characters. */
int sbx_volume_name_ok(const char *s);

/* The folder of a native named volume: <state>/volumes/<owner>/<claim>. */
void sbx_volume_native_dir(const char *state_dir, const char *owner, const char *claim, char *out,
                           size_t outlen);

/* The Docker volume's name: tusko-vol-<owner>-<claim>. */
void sbx_volume_docker_name(const char *owner, const char *claim, char *out, size_t outlen);

/*
 * Opens a resolved absolute directory path (no symlink anywhere on it:
 * openat2 RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS) as an O_PATH fd; with
 * sub, then the relative sub beneath it, the same way. -1 with err otherwise.
 */
int sbx_volume_open(const char *path, const char *sub, char *err, size_t errlen);

/* mkdir -p of rel beneath dirfd, never through a symlink; each folder made is
 * given to uid (as its group too). An O_PATH fd of the last one, or -1 with err. */
int sbx_volume_mkdirs(int dirfd, const char *rel, unsigned uid, char *err, size_t errlen);

/* Folder of owner named volumes; native "DELETE /v1/volumes/{claim}": removes
 * it. TK_ENOENT when absent. */
tk_status sbx_volume_native_delete(const char *state_dir, const char *owner, const char *claim,
                                   char *err, size_t errlen);

#endif
