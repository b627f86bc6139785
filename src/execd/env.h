/*
 * env.h — the environment and working directory a child starts with.
 */
#ifndef EXECD_ENV_H
#define EXECD_ENV_H

#include <jansson.h>
#include <stddef.h>

#include "lib/common.h"

#define EXECD_ENV_MAX 1024 /* variables a request may add */

/*
 * Builds a NULL-terminated environment: execd's own minus every EXECD_*
 * variable (the access token never reaches a command), then envs (a JSON object
 * of name → string; may be NULL) on top. Names must be non-empty and free of '='
 * and NUL, values free of NUL. TK_EINVAL with a message otherwise.
 * Free the result with execd_env_free().
 */
tk_status execd_env_build(const json_t *envs, char ***out, char *err, size_t errlen);
void execd_env_free(char **env);

/*
 * Opens the working directory given as a JSON string (NULL or absent: the
 * workspace root) beneath the workspace, following only symlinks that stay
 * inside; with create, a missing directory is made (as mkdir -p, never through
 * a symlink). On failure returns the HTTP status to answer (400) with a message
 * naming the rule; 0 with *fd set on success.
 */
int execd_workdir_open(const json_t *cwd, int *fd, int create, char *err, size_t errlen);

/* Reads a JSON string that must not contain NUL: its bytes or NULL. */
const char *execd_json_cstr(const json_t *v, size_t *len);

#endif
