/*
 * image.h — the sandbox image: one root filesystem built by images/sandbox/build.sh,
 * named "tusko-sandbox" in requests.
 *
 * SANDBOX_IMAGE_DIR may name the image folder (holding rootfs/ and image.json,
 * as build.sh makes it; a symlink to it is resolved once at start) or a root
 * filesystem itself. A usable root has /workspace and /opt/tusko/bin (mount
 * points) and /bin/sh.
 */
#ifndef SBX_IMAGE_H
#define SBX_IMAGE_H

#include <limits.h>
#include <stddef.h>

#include "lib/common.h"

#define SBX_IMAGE_NAME "tusko-sandbox"

typedef struct {
    char rootfs[PATH_MAX]; /* absolute, symlinks resolved */
    char hash[64];         /* the recipe hash from image.json, or "" */
} sbx_image;

/* Finds the image at dir. TK_ENOENT / TK_EINVAL with a message telling what to do. */
tk_status sbx_image_find(const char *dir, sbx_image *img, char *err, size_t errlen);
/* Non-zero when a request's image uri names this image: "tusko-sandbox",
 * "tusko-sandbox:latest" or "tusko-sandbox:<hash>". */
int sbx_image_uri_matches(const sbx_image *img, const char *uri);

#endif
