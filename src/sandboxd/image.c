#include "sandboxd/image.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/json.h"

static int is_dir(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

tk_status sbx_image_find(const char *dir, sbx_image *img, char *err, size_t errlen)
{
    memset(img, 0, sizeof *img);
    if (!dir || !*dir) {
        snprintf(err, errlen, "SANDBOX_IMAGE_DIR is not set");
        return TK_ENOENT;
    }
    char real[PATH_MAX], p[PATH_MAX + 32];
    if (!realpath(dir, real)) {
        snprintf(err, errlen, "no sandbox image at %s (%s): build it with images/sandbox/build.sh",
                 dir, strerror(errno));
        return TK_ENOENT;
    }
    snprintf(p, sizeof p, "%s/rootfs", real);
    const char *root = real;
    char rootbuf[PATH_MAX];
    if (is_dir(p)) {
        if (!realpath(p, rootbuf)) {
            snprintf(err, errlen, "%s: %s", p, strerror(errno));
            return TK_ENOENT;
        }
        root = rootbuf;
        char jp[PATH_MAX + 32];
        snprintf(jp, sizeof jp, "%s/image.json", real);
        FILE *f = fopen(jp, "re");
        if (f) {
            char buf[8192];
            size_t n = fread(buf, 1, sizeof buf, f);
            fclose(f);
            char e[128];
            json_t *j = tk_json_parse(buf, n, sizeof buf, e, sizeof e);
            const char *h = j ? tk_json_str(j, "hash") : NULL;
            if (h)
                snprintf(img->hash, sizeof img->hash, "%s", h);
            json_decref(j);
        }
    }
    if (!img->hash[0]) {
        /* a root given directly: build.sh keeps image.json beside it */
        char jp[PATH_MAX + 32];
        snprintf(jp, sizeof jp, "%s/../image.json", root);
        FILE *f = fopen(jp, "re");
        if (f) {
            char buf[8192];
            size_t n = fread(buf, 1, sizeof buf, f);
            fclose(f);
            char e[128];
            json_t *j = tk_json_parse(buf, n, sizeof buf, e, sizeof e);
            const char *h = j ? tk_json_str(j, "hash") : NULL;
            if (h)
                snprintf(img->hash, sizeof img->hash, "%s", h);
            json_decref(j);
        }
    }
    static const char *const need[] = {"/workspace", "/opt/tusko/bin", "/proc",
                                       "/dev",       "/tmp",           "/run"};
    for (size_t i = 0; i < TK_ARRAY_LEN(need); i++) {
        snprintf(p, sizeof p, "%s%s", root, need[i]);
        if (!is_dir(p)) {
            snprintf(
                err, errlen,
                "the sandbox image at %s has no %s directory (not a tusko-sandbox root; build it "
                "with images/sandbox/build.sh)",
                root, need[i]);
            return TK_EINVAL;
        }
    }
    snprintf(p, sizeof p, "%s/bin/sh", root);
    if (access(p, F_OK) != 0) {
        snprintf(err, errlen, "the sandbox image at %s has no /bin/sh", root);
        return TK_EINVAL;
    }
    snprintf(img->rootfs, sizeof img->rootfs, "%s", root);
    return TK_OK;
}

int sbx_image_uri_matches(const sbx_image *img, const char *uri)
{
    size_t n = strlen(SBX_IMAGE_NAME);
    if (!uri || strncmp(uri, SBX_IMAGE_NAME, n) != 0)
        return 0;
    if (uri[n] == '\0')
        return 1;
    if (uri[n] != ':')
        return 0;
    const char *tag = uri + n + 1;
    return strcmp(tag, "latest") == 0 || (img->hash[0] && strcmp(tag, img->hash) == 0);
}
