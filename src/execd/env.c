#include "execd/env.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "execd/execd.h"
#include "execd/fs.h"

extern char **environ;

const char *execd_json_cstr(const json_t *v, size_t *len)
{
    if (!json_is_string(v))
        return NULL;
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    if (memchr(s, '\0', n))
        return NULL;
    if (len)
        *len = n;
    return s;
}

static int name_ok(const char *k)
{
    return *k && !strchr(k, '=');
}

tk_status execd_env_build(const json_t *envs, char ***out, char *err, size_t errlen)
{
    *out = NULL;
    size_t nbase = 0;
    for (char **e = environ; *e; e++)
        nbase++;
    size_t nadd = 0;
    if (envs && !json_is_null(envs)) {
        if (!json_is_object(envs)) {
            snprintf(err, errlen, "envs must be an object of name → string");
            return TK_EINVAL;
        }
        nadd = json_object_size(envs);
        if (nadd > EXECD_ENV_MAX) {
            snprintf(err, errlen, "envs has %zu variables; at most %d are accepted", nadd,
                     EXECD_ENV_MAX);
            return TK_EINVAL;
        }
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)envs, k, v)
        {
            if (!name_ok(k)) {
                snprintf(err, errlen, "envs: \"%s\" is not a valid variable name", k);
                return TK_EINVAL;
            }
            if (!execd_json_cstr(v, NULL)) {
                snprintf(err, errlen, "envs: the value of %s must be a string without NUL", k);
                return TK_EINVAL;
            }
        }
    }
    char **env = tk_calloc(nbase + nadd + 1, sizeof *env);
    size_t n = 0;
    for (char **e = environ; *e; e++) {
        if (strncmp(*e, "EXECD_", 6) == 0)
            continue;
        /* a request's variable replaces execd's */
        const char *eq = strchr(*e, '=');
        if (eq && nadd) {
            char name[256];
            size_t l = (size_t)(eq - *e);
            if (l < sizeof name) {
                memcpy(name, *e, l);
                name[l] = '\0';
                if (json_object_get(envs, name))
                    continue;
            }
        }
        env[n++] = tk_strdup(*e);
    }
    if (nadd) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)envs, k, v)
        {
            env[n++] = tk_asprintf("%s=%s", k, json_string_value(v));
        }
    }
    env[n] = NULL;
    *out = env;
    return TK_OK;
}

void execd_env_free(char **env)
{
    if (!env)
        return;
    for (char **e = env; *e; e++)
        free(*e);
    free(env);
}

int execd_workdir_open(const json_t *cwd, int *fd, int create, char *err, size_t errlen)
{
    *fd = -1;
    const char *p = NULL;
    size_t len = 0;
    if (cwd && !json_is_null(cwd)) {
        if (!json_is_string(cwd)) {
            snprintf(err, errlen, "cwd must be a string");
            return 400;
        }
        p = json_string_value(cwd);
        len = json_string_length(cwd);
    }
    char rel[TK_PATHSAFE_PATH_MAX], why[512];
    if (!p || !len) { /* the workspace */
        p = execd_cfg.ws.root;
        len = strlen(p);
    }
    if (execd_fs_path_rel(p, len, rel, sizeof rel, why, sizeof why) != TK_OK) {
        snprintf(err, errlen, "cwd refused: %s", why);
        return 400;
    }
    tk_status st = tk_pathsafe_open(execd_fs_root(), rel, O_PATH | O_DIRECTORY, 0,
                                    TK_PATHSAFE_FOLLOW, fd, why, sizeof why);
    if (st == TK_OK)
        return 0;
    if (st == TK_ENOENT)
        snprintf(err, errlen, "cwd does not exist or is not a directory: %s", rel);
    else
        snprintf(err, errlen, "cwd refused: %s", why);
    return 400;
}
