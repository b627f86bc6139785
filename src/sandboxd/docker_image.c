/*
 * docker_image.c — the sandbox image in the engine (docker_image.h).
 */
#include "sandboxd/docker_image.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/buf.h"
#include "lib/json.h"
#include "lib/query.h"
#include "lib/log.h"
#include "lib/tktime.h"

struct tar_src {
    int fd;
};

static size_t tar_read(char *buf, size_t len, void *ud)
{
    struct tar_src *t = ud;
    for (;;) {
        ssize_t n = read(t->fd, buf, len);
        if (n >= 0)
            return (size_t)n;
        if (errno != EINTR)
            return SBX_DOCKER_READ_ABORT;
    }
}

tk_status sbx_docker_image_import(sbx_docker *d, const sbx_image *img, char *err, size_t errlen)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "image import: pipe: %s", strerror(errno));
        return TK_ERROR;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    char *argv[] = {"tar",
                    "-C",
                    (char *)img->rootfs,
                    "--numeric-owner",
                    "--one-file-system",
                    "--exclude=./dev/*",
                    "--exclude=./proc/*",
                    "--exclude=./sys/*",
                    "-cf",
                    "-",
                    ".",
                    NULL};
    pid_t pid;
    /* tar gets a clean environment, not the service's (its API key) */
    char *envp[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", NULL};
    int rc = posix_spawnp(&pid, "tar", &fa, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    if (rc != 0) {
        close(p[0]);
        snprintf(err, errlen, "image import: cannot run tar: %s", strerror(rc));
        return TK_ERROR;
    }
    char msg[128];
    snprintf(msg, sizeof msg,
             "tusko-sandbox %s (images/sandbox/build.sh, imported by tusko-sandboxd)", img->hash);
    static const char *const changes[] = {
        "ENV LANG=C.UTF-8",
        "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "WORKDIR /workspace",
        "CMD [\"/bin/bash\"]",
    };
    tk_buf q;
    tk_buf_init(&q, TK_CAP_TARGET);
    /* fixed parts and a hash: far below the cap */
    tk_buf_append_str(&q, "/images/create?fromSrc=-&repo=");
    tk_percent_append(&q, SBX_IMAGE_NAME, NULL);
    tk_buf_append_str(&q, "&tag=");
    tk_percent_append(&q, img->hash, NULL);
    tk_buf_append_str(&q, "&message=");
    tk_percent_append(&q, msg, NULL);
    for (size_t i = 0; i < TK_ARRAY_LEN(changes); i++) {
        tk_buf_append_str(&q, "&changes=");
        tk_percent_append(&q, changes[i], NULL);
    }
    tk_info("docker",
            "msg=\"importing the sandbox image into Docker (once per recipe; about a "
            "minute)\" rootfs=%s image=%s:%s",
            img->rootfs, SBX_IMAGE_NAME, img->hash);
    int64_t t0 = tk_mono_ms();
    struct tar_src src = {p[0]};
    tk_status st = sbx_docker_upload(d, tk_buf_cstr(&q), "application/x-tar", tar_read, &src,
                                     30L * 60 * 1000, err, errlen);
    tk_buf_free(&q);
    close(p[0]);
    if (st != TK_OK)
        kill(pid, SIGKILL);
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
        ;
    if (st == TK_OK && !(WIFEXITED(ws) && WEXITSTATUS(ws) == 0)) {
        snprintf(err, errlen, "image import: tar of %s failed (status %d)", img->rootfs, ws);
        st = TK_ERROR;
    }
    if (st == TK_OK)
        tk_info("docker", "msg=\"sandbox image imported\" image=%s:%s ms=%lld", SBX_IMAGE_NAME,
                img->hash, (long long)(tk_mono_ms() - t0));
    return st;
}

tk_status sbx_docker_image_id(sbx_docker *d, const char *ref, char *id, size_t idlen, char *err,
                              size_t errlen)
{
    tk_buf pb;
    tk_buf_init(&pb, strlen(ref) * 3 + 16); /* room for all of it */
    tk_buf_append_str(&pb, "/images/");
    tk_percent_append(&pb, ref, NULL);
    tk_buf_append_str(&pb, "/json");
    char *path = tk_buf_steal(&pb, NULL);
    long status = 0;
    json_t *j = NULL;
    char m[768];
    tk_status st = sbx_docker_call(d, "GET", path, NULL, 60000, &status, &j, m, sizeof m);
    free(path);
    if (st != TK_OK) {
        snprintf(err, errlen, "image: %s", m);
    } else if (status == 200) {
        snprintf(id, idlen, "%s", tk_json_str_or(j, "Id", "?"));
    } else {
        snprintf(err, errlen, "image: the engine answered %ld: %s", status,
                 sbx_docker_message(j, "(no message)"));
        st = status == 404 ? TK_ENOENT : TK_ERROR;
    }
    json_decref(j);
    return st;
}

tk_status sbx_docker_image_ensure(sbx_docker *d, const char *use, const char *image_dir, char *ref,
                                  size_t reflen, char *id, size_t idlen, char *err, size_t errlen)
{
    char e[768];
    if (use && *use) {
        snprintf(ref, reflen, "%s", use);
        tk_status st = sbx_docker_image_id(d, ref, id, idlen, e, sizeof e);
        if (st == TK_ENOENT)
            snprintf(err, errlen,
                     "SANDBOX_DOCKER_IMAGE=%s: the engine has no such image (load or import it, "
                     "or leave the setting empty to import SANDBOX_IMAGE_DIR)",
                     ref);
        else if (st != TK_OK)
            snprintf(err, errlen, "%s", e);
        return st;
    }
    sbx_image img;
    if (sbx_image_find(image_dir, &img, e, sizeof e) != TK_OK) {
        snprintf(err, errlen, "the docker runtime imports the sandbox image, but: %s", e);
        return TK_ERROR;
    }
    if (!img.hash[0]) {
        snprintf(err, errlen,
                 "the sandbox image at %s has no recipe hash (image.json) to tag the Docker image "
                 "with: build it with images/sandbox/build.sh, or set SANDBOX_DOCKER_IMAGE",
                 img.rootfs);
        return TK_ERROR;
    }
    snprintf(ref, reflen, "%s:%s", SBX_IMAGE_NAME, img.hash);
    tk_status st = sbx_docker_image_id(d, ref, id, idlen, e, sizeof e);
    if (st == TK_ENOENT) {
        if (sbx_docker_image_import(d, &img, e, sizeof e) != TK_OK) {
            snprintf(err, errlen, "the sandbox image could not be imported into Docker as %s: %s",
                     ref, e);
            return TK_ERROR;
        }
        st = sbx_docker_image_id(d, ref, id, idlen, e, sizeof e);
    }
    if (st != TK_OK)
        snprintf(err, errlen, "%s", e);
    return st;
}
