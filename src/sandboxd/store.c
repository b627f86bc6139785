#include "sandboxd/store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/json.h"

#define RECORD_MAX (4 << 20)

tk_status sbx_store_init(const char *state_dir, char *err, size_t errlen)
{
    char p[PATH_MAX];
    if (mkdir(state_dir, 0700) < 0 && errno != EEXIST) {
        snprintf(err, errlen, "SANDBOXD_STATE_DIR: mkdir %s: %s", state_dir, strerror(errno));
        return TK_ERROR;
    }
    chmod(state_dir, 0700);
    snprintf(p, sizeof p, "%s/sandboxes", state_dir);
    if (mkdir(p, 0700) < 0 && errno != EEXIST) {
        snprintf(err, errlen, "SANDBOXD_STATE_DIR: mkdir %s: %s", p, strerror(errno));
        return TK_ERROR;
    }
    return TK_OK;
}

tk_status sbx_store_save(const char *state_dir, const char *id, const json_t *rec, char *err,
                         size_t errlen)
{
    char dir[PATH_MAX], tmp[PATH_MAX + 32], fin[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/sandboxes/%s", state_dir, id);
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        snprintf(err, errlen, "mkdir %s: %s", dir, strerror(errno));
        return TK_ERROR;
    }
    snprintf(tmp, sizeof tmp, "%s/sandbox.json.tmp", dir);
    snprintf(fin, sizeof fin, "%s/sandbox.json", dir);
    char *text = json_dumps(rec, JSON_COMPACT);
    if (!text)
        tk_oom();
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    tk_status st = TK_OK;
    if (fd < 0) {
        snprintf(err, errlen, "open %s: %s", tmp, strerror(errno));
        st = TK_ERROR;
    } else {
        size_t n = strlen(text);
        if (write(fd, text, n) != (ssize_t)n) {
            snprintf(err, errlen, "write %s: %s", tmp, strerror(errno));
            st = TK_ERROR;
        }
        close(fd);
        if (st == TK_OK && rename(tmp, fin) != 0) {
            snprintf(err, errlen, "rename %s: %s", tmp, strerror(errno));
            st = TK_ERROR;
        }
    }
    free(text);
    return st;
}

json_t *sbx_store_load(const char *state_dir, const char *id, char *err, size_t errlen)
{
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/sandboxes/%s/sandbox.json", state_dir, id);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "open %s: %s", p, strerror(errno));
        return NULL;
    }
    char *buf = tk_malloc(RECORD_MAX);
    size_t got = 0;
    ssize_t r;
    while (got < RECORD_MAX && (r = read(fd, buf + got, RECORD_MAX - got)) > 0)
        got += (size_t)r;
    close(fd);
    json_t *j = tk_json_parse(buf, got, RECORD_MAX, err, errlen);
    free(buf);
    return j;
}

void sbx_store_remove(const char *state_dir, const char *id)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/sandboxes/%s", state_dir, id);
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                continue;
            unlinkat(dirfd(d), de->d_name, 0);
        }
        closedir(d);
    }
    rmdir(dir);
}

size_t sbx_store_list(const char *state_dir, char ***ids)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/sandboxes", state_dir);
    *ids = NULL;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            *ids = tk_realloc(*ids, cap * sizeof **ids);
        }
        (*ids)[n++] = tk_strdup(de->d_name);
    }
    closedir(d);
    return n;
}
