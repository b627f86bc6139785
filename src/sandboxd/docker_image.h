/*
 * docker_image.h — the sandbox image in the Docker engine: a reference used as
 * it is (SANDBOX_DOCKER_IMAGE), or SANDBOX_IMAGE_DIR's root filesystem
 * imported as tusko-sandbox:<recipe hash> when the engine lacks it — tar (run
 * with an argv, no shell, a clean environment) streamed into POST
 * /images/create?fromSrc=-, as images/sandbox/export-docker.sh does.
 */
#ifndef SBX_DOCKER_IMAGE_H
#define SBX_DOCKER_IMAGE_H

#include <stddef.h>

#include "lib/common.h"
#include "sandboxd/docker.h"
#include "sandboxd/image.h"

/* The image id ("sha256:...") of ref; TK_ENOENT when the engine has no such
 * image, TK_ERROR with err when it does not answer. */
tk_status sbx_docker_image_id(sbx_docker *d, const char *ref, char *id, size_t idlen, char *err,
                              size_t errlen);
/* Imports img's root filesystem as tusko-sandbox:<img->hash> (about a minute). */
tk_status sbx_docker_image_import(sbx_docker *d, const sbx_image *img, char *err, size_t errlen);
/* The image sandboxes run: use when given (it must exist), else image_dir's,
 * imported when missing. ref and id get its reference and id. Errors say what
 * to do. */
tk_status sbx_docker_image_ensure(sbx_docker *d, const char *use, const char *image_dir, char *ref,
                                  size_t reflen, char *id, size_t idlen, char *err, size_t errlen);

#endif
