#include "sandboxd/volume.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/json.h"
#include "lib/pathsafe.h"

#define FAIL(code, ...)                                                                            \
    do {                                                                                           \
        snprintf(msg, msglen, __VA_ARGS__);                                                        \
        free(vs);                                                                                  \
        return code;                                                                               \
    } while (0)

int sbx_volume_name_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > 63)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && !(c == '-' && i > 0 && i + 1 < n))
            return 0;
    }
    return 1;
}

/* An owner name usable in a folder and a Docker volume name. */
static int owner_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n >= SBX_VOLUME_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || (c == '-' && i > 0)))
            return 0;
    }
    return 1;
}

/* 1 when path equals prefix or lies beneath it (both normalised absolute). */
static int beneath(const char *path, const char *prefix)
{
    size_t n = strlen(prefix);
    if (n == 1 && prefix[0] == '/')
        return 1;
    return strncmp(path, prefix, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* The host path's checks; resolved into out. */
static int check_host(const char *path, const char *sub, const sbx_volume_policy *pol, char *out,
                      char *msg, size_t msglen, size_t idx)
{
    if (!pol->host_allow || !*pol->host_allow) {
        snprintf(msg, msglen,
                 "volumes[%zu].host: host paths are refused here (SANDBOX_HOST_VOLUME_ALLOW is "
                 "empty; the operator lists the host folders sandboxes may mount there)",
                 idx);
        return 403;
    }
    char joined[SBX_VOLUME_PATH_MAX * 2 + 2];
    snprintf(joined, sizeof joined, "%s%s%s", path, *sub ? "/" : "", sub);
    char *rp = realpath(joined, NULL);
    if (!rp) {
        snprintf(msg, msglen, "volumes[%zu].host.path %.200s: %s", idx, joined, strerror(errno));
        return errno == ENOENT ? 404 : 400;
    }
    struct stat st;
    if (stat(rp, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(msg, msglen, "volumes[%zu].host.path %.200s is not a directory", idx, rp);
        free(rp);
        return 400;
    }
    if (strlen(rp) >= SBX_VOLUME_PATH_MAX) {
        free(rp);
        snprintf(msg, msglen, "volumes[%zu].host.path is too long", idx);
        return 400;
    }
    /* the service's own state: neither inside it nor holding it */
    char *sd = pol->state_dir ? realpath(pol->state_dir, NULL) : NULL;
    int bad_state = sd && (beneath(rp, sd) || beneath(sd, rp));
    free(sd);
    if (bad_state) {
        snprintf(msg, msglen,
                 "volumes[%zu].host.path %.200s is, holds or lies in the service's state directory",
                 idx, rp);
        free(rp);
        return 403;
    }
    /* under an allowed prefix (each realpath()'d too) */
    int ok = 0;
    const char *p = pol->host_allow;
    while (*p && !ok) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char pre[SBX_VOLUME_PATH_MAX];
        if (n && n < sizeof pre) {
            memcpy(pre, p, n);
            pre[n] = '\0';
            char *rpre = realpath(pre, NULL);
            if (rpre) {
                ok = beneath(rp, rpre);
                free(rpre);
            }
        }
        p = e ? e + 1 : p + n;
    }
    if (!ok) {
        snprintf(msg, msglen,
                 "volumes[%zu].host.path %.200s is not under a prefix SANDBOX_HOST_VOLUME_ALLOW "
                 "allows (%.200s)",
                 idx, rp, pol->host_allow);
        free(rp);
        return 403;
    }
    snprintf(out, SBX_VOLUME_PATH_MAX, "%s", rp);
    free(rp);
    return 0;
}

int sbx_volume_parse_all(const json_t *volumes, const json_t *metadata,
                         const sbx_volume_policy *pol, sbx_volumes **out, char *msg, size_t msglen)
{
    *out = NULL;
    sbx_volumes *vs = NULL;
    if (!volumes || json_is_null(volumes))
        return 0;
    if (!json_is_array(volumes))
        FAIL(400, "volumes must be an array");
    if (json_array_size(volumes) == 0)
        return 0;
    if (json_array_size(volumes) > SBX_VOLUMES_MAX)
        FAIL(400, "volumes: at most %d", SBX_VOLUMES_MAX);
    vs = calloc(1, sizeof *vs);
    if (!vs)
        FAIL(500, "out of memory");
    const char *user = metadata ? tk_json_str(metadata, "user") : NULL;
    snprintf(vs->owner, sizeof vs->owner, "%s", owner_ok(user) ? user : "_default");
    size_t i;
    json_t *v;
    json_array_foreach(volumes, i, v)
    {
        sbx_volume *x = &vs->v[i];
        if (!json_is_object(v))
            FAIL(400, "volumes[%zu] must be an object", i);
        const char *k;
        json_t *val;
        json_object_foreach((json_t *)v, k, val)
        {
            if (strcmp(k, "name") && strcmp(k, "host") && strcmp(k, "pvc") && strcmp(k, "ossfs") &&
                strcmp(k, "mountPath") && strcmp(k, "readOnly") && strcmp(k, "subPath"))
                FAIL(400, "volumes[%zu].%.40s is not a volume field", i, k);
        }
        const char *name = tk_json_str(v, "name");
        if (!sbx_volume_name_ok(name))
            FAIL(400, "volumes[%zu].name must be a DNS label (a-z, 0-9, '-'; at most 63)", i);
        for (size_t j = 0; j < i; j++)
            if (strcmp(vs->v[j].name, name) == 0)
                FAIL(400, "volumes[%zu].name %s is used twice", i, name);
        snprintf(x->name, sizeof x->name, "%s", name);
        json_t *ro = json_object_get(v, "readOnly");
        if (ro && !json_is_null(ro) && !json_is_boolean(ro))
            FAIL(400, "volumes[%zu].readOnly must be a boolean", i);
        x->ro = ro && json_is_true(ro);
        /* mountPath */
        json_t *mp = json_object_get(v, "mountPath");
        if (!json_is_string(mp) || json_string_value(mp)[0] != '/')
            FAIL(400, "volumes[%zu].mountPath must be an absolute path", i);
        char why[300];
        if (tk_pathsafe_check("/", json_string_value(mp), json_string_length(mp),
                              TK_PATHSAFE_STRICT, x->target, sizeof x->target, why,
                              sizeof why) != TK_OK)
            FAIL(400, "volumes[%zu].mountPath refused: %s", i, why);
        if (!(strncmp(x->target, "/mnt/", 5) == 0 || strncmp(x->target, "/workspace/", 11) == 0 ||
              strncmp(x->target, "/tmp/", 5) == 0))
            FAIL(400,
                 "volumes[%zu].mountPath %.200s: mount points are made under /mnt, /workspace or "
                 "/tmp here (the image is read-only)",
                 i, x->target);
        for (size_t j = 0; j < i; j++)
            if (beneath(x->target, vs->v[j].target) || beneath(vs->v[j].target, x->target))
                FAIL(400, "volumes[%zu].mountPath %.200s overlaps volumes[%zu]'s", i, x->target, j);
        /* subPath */
        char sub[SBX_VOLUME_PATH_MAX] = "";
        json_t *sp = json_object_get(v, "subPath");
        if (sp && !json_is_null(sp)) {
            char abs[SBX_VOLUME_PATH_MAX];
            if (!json_is_string(sp) || json_string_length(sp) == 0 ||
                json_string_value(sp)[0] == '/')
                FAIL(400, "volumes[%zu].subPath must be a relative path", i);
            if (tk_pathsafe_check("/v", json_string_value(sp), json_string_length(sp),
                                  TK_PATHSAFE_STRICT, abs, sizeof abs, why, sizeof why) != TK_OK)
                FAIL(400, "volumes[%zu].subPath refused: %s", i, why);
            snprintf(sub, sizeof sub, "%s", abs[2] ? abs + 3 : "");
        }
        /* the backend: exactly one */
        json_t *host = json_object_get(v, "host"), *pvc = json_object_get(v, "pvc");
        if (json_object_get(v, "ossfs"))
            FAIL(400, "volumes[%zu].ossfs: OSS volumes are not supported by this service", i);
        if (!!host == !!pvc)
            FAIL(400, "volumes[%zu] needs exactly one backend: host or pvc", i);
        if (host) {
            const char *hp = json_is_object(host) ? tk_json_str(host, "path") : NULL;
            if (!hp || hp[0] != '/')
                FAIL(400, "volumes[%zu].host.path must be an absolute path", i);
            int code = check_host(hp, sub, pol, x->host, msg, msglen, i);
            if (code) {
                free(vs);
                return code;
            }
        } else {
            const char *cn = json_is_object(pvc) ? tk_json_str(pvc, "claimName") : NULL;
            if (!sbx_volume_name_ok(cn))
                FAIL(400, "volumes[%zu].pvc.claimName must be a DNS label of at most 63", i);
            x->named = 1;
            snprintf(x->claim, sizeof x->claim, "%s", cn);
            snprintf(x->sub, sizeof x->sub, "%s", sub);
        }
        vs->n++;
    }
    *out = vs;
    return 0;
}

void sbx_volume_native_dir(const char *state_dir, const char *owner, const char *claim, char *out,
                           size_t outlen)
{
    snprintf(out, outlen, "%s/volumes/%s/%s", state_dir, owner, claim);
}

void sbx_volume_docker_name(const char *owner, const char *claim, char *out, size_t outlen)
{
    snprintf(out, outlen, "tusko-vol-%s-%s", owner, claim);
}

static int open2(int dirfd, const char *p, unsigned long long resolve)
{
    struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC, .resolve = resolve};
    return (int)syscall(SYS_openat2, dirfd, p, &how, sizeof how);
}

int sbx_volume_open(const char *path, const char *sub, char *err, size_t errlen)
{
    int fd = open2(AT_FDCWD, path, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
    if (fd < 0) {
        snprintf(err, errlen, "open %.300s: %s", path, strerror(errno));
        return -1;
    }
    if (sub && *sub) {
        int s = open2(fd, sub, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
        int e = errno;
        close(fd);
        if (s < 0) {
            snprintf(err, errlen, "open %.300s beneath %.300s: %s", sub, path, strerror(e));
            return -1;
        }
        fd = s;
    }
    return fd;
}

int sbx_volume_mkdirs(int dirfd, const char *rel, unsigned uid, char *err, size_t errlen)
{
    int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
    char part[SBX_VOLUME_PATH_MAX];
    const char *p = rel;
    while (fd >= 0 && *p) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n >= sizeof part) {
            close(fd);
            return -1;
        }
        memcpy(part, p, n);
        part[n] = '\0';
        p = e ? e + 1 : p + n;
        if (mkdirat(fd, part, 0755) == 0 &&
            fchownat(fd, part, (uid_t)uid, (gid_t)uid, AT_SYMLINK_NOFOLLOW) != 0) {
            snprintf(err, errlen, "volume: chown %s: %s", part, strerror(errno));
            close(fd);
            return -1;
        }
        int next = openat(fd, part, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0)
            snprintf(err, errlen, "volume: %s: %s (a symlink is never followed here)", part,
                     strerror(errno));
        close(fd);
        fd = next;
    }
    return fd;
}

/* Removes everything beneath dirfd (never following a symlink), then nothing. */
static int rm_beneath(int dirfd, int depth)
{
    if (depth > 256)
        return -1;
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (unlinkat(dirfd, e->d_name, 0) == 0)
            continue;
        int sub = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0 || rm_beneath(sub, depth + 1) != 0 ||
            unlinkat(dirfd, e->d_name, AT_REMOVEDIR) != 0)
            rc = -1;
        if (sub >= 0)
            close(sub);
    }
    closedir(d);
    return rc;
}

tk_status sbx_volume_native_delete(const char *state_dir, const char *owner, const char *claim,
                                   char *err, size_t errlen)
{
    char dir[SBX_VOLUME_PATH_MAX], parent[SBX_VOLUME_PATH_MAX];
    snprintf(parent, sizeof parent, "%s/volumes/%s", state_dir, owner);
    sbx_volume_native_dir(state_dir, owner, claim, dir, sizeof dir);
    int pfd = open(parent, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (pfd < 0) {
        snprintf(err, errlen, "no volume %s", claim);
        return TK_ENOENT;
    }
    int fd = openat(pfd, claim, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        close(pfd);
        snprintf(err, errlen, "no volume %s", claim);
        return TK_ENOENT;
    }
    int rc = rm_beneath(fd, 0);
    close(fd);
    if (rc == 0 && unlinkat(pfd, claim, AT_REMOVEDIR) != 0)
        rc = -1;
    close(pfd);
    if (rc != 0) {
        snprintf(err, errlen, "cannot remove %s: %s", dir, strerror(errno));
        return TK_ERROR;
    }
    return TK_OK;
}
