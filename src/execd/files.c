#include "execd/files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "execd/events.h"
#include "execd/execd.h"
#include "execd/fs.h"
#include "lib/id.h"
#include "lib/json.h"
#include "lib/log.h"

#define MAX_PATHS          128
#define SEARCH_MAX_RESULTS 10000
#define WALK_MAX_ENTRIES   200000
#define WALK_MAX_DEPTH     64
#define REPLACE_MAX_FILE   (64u << 20)
#define REPLACE_MAX_OUT    (256u << 20)
#define RMTREE_MAX_DEPTH   512

static const tk_pathsafe *ws(void)
{
    return execd_fs_root();
}

static void display(const char *rel, char *out, size_t outlen)
{
    tk_pathsafe_display(ws(), rel, out, outlen);
}

/* The directory holding rel's leaf. Responds and returns -1 on failure. */
static int parent(tk_req *r, const char *rel, unsigned flags, int *dfd, char *leaf)
{
    char why[512];
    tk_status st = tk_pathsafe_open_parent(ws(), rel, flags, dfd, leaf, TK_PATHSAFE_NAME_MAX + 1,
                                           why, sizeof why);
    if (st == TK_OK)
        return 0;
    execd_fs_fail(r, st, why);
    return -1;
}

static const char *json_path(const json_t *v, size_t *len)
{
    if (!json_is_string(v))
        return NULL;
    *len = json_string_length(v);
    return json_string_value(v);
}

/* ---------- info, delete, permissions, mv ---------- */

void execd_files_info(tk_req *r, void *ud)
{
    const char *paths[MAX_PATHS];
    size_t n = execd_fs_query_all(r, "path", paths, MAX_PATHS);
    json_t *out = json_object();
    for (size_t i = 0; i < n; i++) {
        char rel[TK_PATHSAFE_PATH_MAX], disp[TK_PATHSAFE_PATH_MAX + 8],
            leaf[TK_PATHSAFE_NAME_MAX + 1], why[512];
        if (execd_fs_rel(r, paths[i], strlen(paths[i]), rel) != 0)
            goto fail;
        display(rel, disp, sizeof disp);
        int dfd;
        json_t *info;
        if (!*rel) {
            tk_status st =
                tk_pathsafe_open(ws(), "", O_PATH | O_DIRECTORY, 0, 0, &dfd, why, sizeof why);
            if (st != TK_OK) {
                execd_fs_fail(r, st, why);
                goto fail;
            }
            info = execd_fs_info_at(dfd, "", disp);
        } else {
            if (parent(r, rel, TK_PATHSAFE_FOLLOW, &dfd, leaf) != 0)
                goto fail;
            info = execd_fs_info_at(dfd, leaf, disp);
        }
        int e = errno;
        close(dfd);
        if (!info) {
            if (e == ENOENT)
                tk_respond_error(r, 404, "FILE_NOT_FOUND", "file not found: %s", disp);
            else
                tk_respond_error(r, execd_fs_errno_status(e), execd_fs_errno_code(e), "stat %s: %s",
                                 disp, strerror(e));
            goto fail;
        }
        json_object_set_new(out, paths[i], info);
    }
    tk_respond_json(r, 200, out);
    return;
fail:
    json_decref(out);
}

void execd_files_delete(tk_req *r, void *ud)
{
    const char *paths[MAX_PATHS];
    size_t n = execd_fs_query_all(r, "path", paths, MAX_PATHS);
    for (size_t i = 0; i < n; i++) {
        char rel[TK_PATHSAFE_PATH_MAX], leaf[TK_PATHSAFE_NAME_MAX + 1], why[512];
        if (execd_fs_rel(r, paths[i], strlen(paths[i]), rel) != 0)
            return;
        if (!*rel) {
            tk_respond_error(r, 400, "INVALID_PATH", "the root directory is not a file");
            return;
        }
        int dfd;
        tk_status st =
            tk_pathsafe_open_parent(ws(), rel, 0, &dfd, leaf, sizeof leaf, why, sizeof why);
        if (st == TK_ENOENT)
            continue; /* as upstream: deleting what is not there succeeds */
        if (st != TK_OK) {
            execd_fs_fail(r, st, why);
            return;
        }
        struct stat sb;
        if (fstatat(dfd, leaf, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
            int e = errno;
            close(dfd);
            if (e == ENOENT)
                continue;
            tk_respond_error(r, execd_fs_errno_status(e), execd_fs_errno_code(e), "stat %s: %s",
                             rel, strerror(e));
            return;
        }
        if (S_ISDIR(sb.st_mode)) {
            close(dfd);
            tk_respond_error(r, 400, "INVALID_PATH",
                             "%s is a directory; use DELETE /directories to remove it", rel);
            return;
        }
        /* unlinkat never follows: a symlink is removed, not its target */
        if (unlinkat(dfd, leaf, 0) != 0 && errno != ENOENT) {
            int e = errno;
            close(dfd);
            tk_respond_error(r, execd_fs_errno_status(e), execd_fs_errno_code(e),
                             "error removing file %s: %s", rel, strerror(e));
            return;
        }
        close(dfd);
    }
    tk_respond_empty(r, 200);
}

void execd_files_permissions(tk_req *r, void *ud)
{
    json_t *j = tk_req_json(r, 0);
    if (!j)
        return;
    if (!json_is_object(j)) {
        tk_respond_error(r, 400, "INVALID_REQUEST_BODY",
                         "the body must be an object of path → {mode, owner, group}");
        return;
    }
    const char *path;
    json_t *v;
    json_object_foreach(j, path, v)
    {
        char rel[TK_PATHSAFE_PATH_MAX], why[512], err[300];
        if (execd_fs_rel(r, path, strlen(path), rel) != 0)
            return;
        execd_perm p;
        if (execd_fs_perm_parse(v, &p, err, sizeof err) != 0) {
            tk_respond_error(r, 400, "INVALID_REQUEST_BODY", "%s: %s", path, err);
            return;
        }
        int fd;
        tk_status st = tk_pathsafe_open(ws(), rel, O_PATH, 0, 0, &fd, why, sizeof why);
        if (st != TK_OK) {
            execd_fs_fail(r, st, why);
            return;
        }
        int rc = execd_fs_perm_apply(fd, &p, err, sizeof err);
        int e = errno;
        close(fd);
        if (rc != 0) {
            tk_respond_error(r, execd_fs_errno_status(e), execd_fs_errno_code(e),
                             "error changing permissions for %s: %s", path, err);
            return;
        }
    }
    tk_respond_empty(r, 200);
}

void execd_files_mv(tk_req *r, void *ud)
{
    json_t *j = tk_req_json(r, 0);
    if (!j)
        return;
    if (!json_is_array(j)) {
        tk_respond_error(r, 400, "INVALID_REQUEST_BODY",
                         "the body must be an array of {src, dest}");
        return;
    }
    for (size_t i = 0; i < json_array_size(j); i++) {
        json_t *it = json_array_get(j, i);
        size_t sl = 0, dl = 0;
        const char *src = json_path(json_object_get(it, "src"), &sl);
        const char *dst = json_path(json_object_get(it, "dest"), &dl);
        if (!json_is_object(it) || !src || !dst) {
            tk_respond_error(r, 400, "INVALID_REQUEST_BODY",
                             "item %zu: src and dest are required strings", i);
            return;
        }
        char srel[TK_PATHSAFE_PATH_MAX], drel[TK_PATHSAFE_PATH_MAX];
        char sleaf[TK_PATHSAFE_NAME_MAX + 1], dleaf[TK_PATHSAFE_NAME_MAX + 1];
        if (execd_fs_rel(r, src, sl, srel) != 0 || execd_fs_rel(r, dst, dl, drel) != 0)
            return;
        if (!*srel || !*drel) {
            tk_respond_error(r, 400, "INVALID_PATH", "the root directory cannot be moved");
            return;
        }
        int sfd, dfd;
        if (parent(r, srel, 0, &sfd, sleaf) != 0)
            return;
        struct stat sb;
        if (fstatat(sfd, sleaf, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
            close(sfd);
            tk_respond_error(r, 404, "FILE_NOT_FOUND", "source path not found: %s", src);
            return;
        }
        if (parent(r, drel, TK_PATHSAFE_MKDIRS, &dfd, dleaf) != 0) {
            close(sfd);
            return;
        }
        int rc = renameat2(sfd, sleaf, dfd, dleaf, RENAME_NOREPLACE);
        int e = errno;
        close(sfd);
        close(dfd);
        if (rc != 0) {
            if (e == EEXIST || e == ENOTEMPTY)
                tk_respond_error(r, 400, "INVALID_PATH", "destination path already exists: %s",
                                 dst);
            else if (e == EINVAL)
                tk_respond_error(r, 400, "INVALID_PATH", "cannot move %s into itself", src);
            else
                tk_respond_error(r, execd_fs_errno_status(e), execd_fs_errno_code(e),
                                 "failed to move %s: %s", src, strerror(e));
            return;
        }
    }
    tk_respond_empty(r, 200);
}

/* ---------- search and listing: walks that never follow symlinks ---------- */

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in a directory fd (not "." or ".."), sorted; free with free_names. */
static char **read_names(int fd, size_t *n, size_t max)
{
    *n = 0;
    int dup_fd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dup_fd < 0)
        return NULL;
    DIR *d = fdopendir(dup_fd);
    if (!d) {
        close(dup_fd);
        return NULL;
    }
    size_t cap = 16;
    char **names = tk_malloc(cap * sizeof *names);
    struct dirent *e;
    while ((e = readdir(d)) && *n < max) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (*n == cap) {
            cap *= 2;
            names = tk_realloc(names, cap * sizeof *names);
        }
        names[(*n)++] = tk_strdup(e->d_name);
    }
    closedir(d);
    qsort(names, *n, sizeof *names, cmp_names);
    return names;
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

typedef struct {
    json_t *out;
    const char *pattern;
    int all, on_path;
    size_t visited, limit;
    int truncated;
} walk_ctx;

static void search_walk(walk_ctx *w, int dfd, const char *rel, int depth)
{
    if (depth > WALK_MAX_DEPTH) {
        w->truncated = 1;
        return;
    }
    size_t n;
    char **names = read_names(dfd, &n, WALK_MAX_ENTRIES);
    if (!names)
        return;
    for (size_t i = 0; i < n; i++) {
        if (++w->visited > WALK_MAX_ENTRIES || json_array_size(w->out) >= w->limit) {
            w->truncated = 1;
            break;
        }
        char crel[TK_PATHSAFE_PATH_MAX];
        if ((size_t)snprintf(crel, sizeof crel, "%s%s%s", rel, *rel ? "/" : "", names[i]) >=
            sizeof crel)
            continue;
        struct stat sb;
        if (fstatat(dfd, names[i], &sb, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (S_ISDIR(sb.st_mode)) {
            int cfd = openat(dfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (cfd >= 0) {
                search_walk(w, cfd, crel, depth + 1);
                close(cfd);
            }
            continue;
        }
        const char *subject = w->on_path ? crel : names[i];
        if (w->all || fnmatch(w->pattern, subject, 0) == 0) {
            char disp[TK_PATHSAFE_PATH_MAX + 8];
            display(crel, disp, sizeof disp);
            json_t *info = execd_fs_info_at(dfd, names[i], disp);
            if (info)
                json_array_append_new(w->out, info);
        }
    }
    free_names(names, n);
}

/* "**" matches anything (also across '/'); fnmatch's '*' without FNM_PATHNAME
 * does too, so collapse it. */
static void collapse_stars(const char *in, char *out, size_t outlen)
{
    size_t o = 0;
    for (size_t i = 0; in[i] && o + 1 < outlen; i++) {
        if (in[i] == '*' && in[i + 1] == '*')
            continue;
        out[o++] = in[i];
    }
    out[o] = '\0';
}

void execd_files_search(tk_req *r, void *ud)
{
    const char *path = tk_req_query(r, "path");
    if (!path || !*path) {
        tk_respond_error(r, 400, "MISSING_QUERY", "missing query parameter 'path'");
        return;
    }
    const char *pattern = tk_req_query(r, "pattern");
    if (!pattern || !*pattern)
        pattern = "**";
    if (strlen(pattern) > 1024) {
        tk_respond_error(r, 400, "INVALID_REQUEST_BODY", "pattern is longer than 1024 bytes");
        return;
    }
    char rel[TK_PATHSAFE_PATH_MAX], why[512], pat[1100];
    if (execd_fs_rel(r, path, strlen(path), rel) != 0)
        return;
    int fd;
    tk_status st = tk_pathsafe_open(ws(), rel, O_RDONLY | O_DIRECTORY, 0, TK_PATHSAFE_FOLLOW, &fd,
                                    why, sizeof why);
    if (st != TK_OK) {
        if (errno == ENOTDIR)
            tk_respond_error(r, 400, "INVALID_PATH", "not a directory: %s", path);
        else
            execd_fs_fail(r, st, why);
        return;
    }
    collapse_stars(pattern, pat, sizeof pat);
    walk_ctx w = {.out = json_array(),
                  .pattern = pat,
                  .all = strcmp(pat, "*") == 0,
                  .on_path = strchr(pat, '/') != NULL,
                  .limit = SEARCH_MAX_RESULTS};
    search_walk(&w, fd, rel, 0);
    close(fd);
    if (w.truncated)
        tk_respond_header(r, "EXECD-TRUNCATED", "true");
    tk_respond_json(r, 200, w.out);
}

static void list_walk(walk_ctx *w, int dfd, const char *rel, int depth, int max_depth)
{
    size_t n;
    char **names = read_names(dfd, &n, WALK_MAX_ENTRIES);
    if (!names)
        return;
    for (size_t i = 0; i < n; i++) {
        if (++w->visited > WALK_MAX_ENTRIES) {
            w->truncated = 1;
            break;
        }
        char crel[TK_PATHSAFE_PATH_MAX], disp[TK_PATHSAFE_PATH_MAX + 8];
        if ((size_t)snprintf(crel, sizeof crel, "%s%s%s", rel, *rel ? "/" : "", names[i]) >=
            sizeof crel)
            continue;
        display(crel, disp, sizeof disp);
        json_t *info = execd_fs_info_at(dfd, names[i], disp);
        if (!info)
            continue;
        int is_dir = strcmp(tk_json_str_or(info, "type", ""), "directory") == 0;
        json_array_append_new(w->out, info);
        if (is_dir && depth + 1 < max_depth && depth < WALK_MAX_DEPTH) {
            int cfd = openat(dfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (cfd >= 0) {
                list_walk(w, cfd, crel, depth + 1, max_depth);
                close(cfd);
            }
        }
    }
    free_names(names, n);
}

void execd_dirs_list(tk_req *r, void *ud)
{
    const char *path = tk_req_query(r, "path");
    if (!path || !*path) {
        tk_respond_error(r, 400, "MISSING_QUERY", "missing query parameter 'path'");
        return;
    }
    int64_t depth = 1;
    const char *ds = tk_req_query(r, "depth");
    if (ds && *ds && tk_parse_i64(ds, 0, 1000000, &depth) != TK_OK) {
        tk_respond_error(r, 400, "INVALID_REQUEST_BODY",
                         "invalid query parameter 'depth': a non-negative integer");
        return;
    }
    char rel[TK_PATHSAFE_PATH_MAX], why[512], leaf[TK_PATHSAFE_NAME_MAX + 1];
    if (execd_fs_rel(r, path, strlen(path), rel) != 0)
        return;
    int fd = -1;
    if (!*rel) {
        tk_status st =
            tk_pathsafe_open(ws(), "", O_RDONLY | O_DIRECTORY, 0, 0, &fd, why, sizeof why);
        if (st != TK_OK) {
            execd_fs_fail(r, st, why);
            return;
        }
    } else {
        int dfd;
        if (parent(r, rel, TK_PATHSAFE_FOLLOW, &dfd, leaf) != 0)
            return;
        struct stat sb;
        if (fstatat(dfd, leaf, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
            close(dfd);
            tk_respond_error(r, 404, "FILE_NOT_FOUND", "directory not found: %s", path);
            return;
        }
        if (S_ISLNK(sb.st_mode)) {
            close(dfd);
            tk_respond_error(r, 400, "INVALID_PATH",
                             "path is a symbolic link, refusing to traverse: %s", path);
            return;
        }
        if (!S_ISDIR(sb.st_mode)) {
            close(dfd);
            tk_respond_error(r, 400, "INVALID_PATH", "path is not a directory: %s", path);
            return;
        }
        fd = openat(dfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        close(dfd);
        if (fd < 0) {
            tk_respond_error(r, execd_fs_errno_status(errno), execd_fs_errno_code(errno),
                             "error listing directory %s: %s", path, strerror(errno));
            return;
        }
    }
    walk_ctx w = {.out = json_array()};
    if (depth > 0)
        list_walk(&w, fd, rel, 0, (int)TK_MIN(depth, WALK_MAX_DEPTH + 1));
    close(fd);
    if (w.truncated)
        tk_respond_header(r, "EXECD-TRUNCATED", "true");
    tk_respond_json(r, 200, w.out);
}

/* ---------- directories ---------- */

void execd_dirs_make(tk_req *r, void *ud)
{
    json_t *j = tk_req_json(r, 0);
    if (!j)
        return;
    if (!json_is_object(j)) {
        tk_respond_error(r, 400, "INVALID_REQUEST_BODY",
                         "the body must be an object of path → {mode, owner, group}");
        return;
    }
    const char *path;
    json_t *v;
    json_object_foreach(j, path, v)
    {
        char rel[TK_PATHSAFE_PATH_MAX], why[512], err[300], leaf[TK_PATHSAFE_NAME_MAX + 1];
        if (execd_fs_rel(r, path, strlen(path), rel) != 0)
            return;
        execd_perm p;
        if (execd_fs_perm_parse(v, &p, err, sizeof err) != 0) {
            tk_respond_error(r, 400, "INVALID_REQUEST_BODY", "%s: %s", path, err);
            return;
        }
        if (*rel) {
            int dfd;
            if (parent(r, rel, TK_PATHSAFE_MKDIRS, &dfd, leaf) != 0)
                return;
            int rc = mkdirat(dfd, leaf, 0755);
            int e = errno;
            close(dfd);
            if (rc != 0 && e != EEXIST) {
                tk_respond_error(r, execd_fs_errno_status(e), execd_fs_errno_code(e),
                                 "mkdir %s: %s", path, strerror(e));
                return;
            }
        }
        int fd;
        tk_status st =
            tk_pathsafe_open(ws(), rel, O_PATH | O_DIRECTORY, 0, 0, &fd, why, sizeof why);
        if (st != TK_OK) {
            if (errno == ENOTDIR)
                tk_respond_error(r, 400, "INVALID_PATH", "%s exists and is not a directory", path);
            else
                execd_fs_fail(r, st, why);
            return;
        }
        int rc = execd_fs_perm_apply(fd, &p, err, sizeof err);
        int e = errno;
        close(fd);
        if (rc != 0) {
            tk_respond_error(r, execd_fs_errno_status(e), execd_fs_errno_code(e), "%s: %s", path,
                             err);
            return;
        }
    }
    tk_respond_empty(r, 200);
}

/* rm -rf of name in dfd, never following a symlink (a symlink is unlinked). */
static int rmtree(int dfd, const char *name, int depth)
{
    if (depth > RMTREE_MAX_DEPTH) {
        errno = ELOOP;
        return -1;
    }
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOTDIR || errno == ELOOP)
            return unlinkat(dfd, name, 0) == 0 || errno == ENOENT ? 0 : -1;
        return errno == ENOENT ? 0 : -1;
    }
    int rc = 0;
    for (int pass = 0; pass < 8; pass++) {
        size_t n;
        char **names = read_names(fd, &n, WALK_MAX_ENTRIES);
        if (!names) {
            rc = -1;
            break;
        }
        for (size_t i = 0; i < n; i++) {
            struct stat sb;
            if (fstatat(fd, names[i], &sb, AT_SYMLINK_NOFOLLOW) != 0)
                continue;
            if (S_ISDIR(sb.st_mode)) {
                if (rmtree(fd, names[i], depth + 1) != 0)
                    rc = -1;
            } else if (unlinkat(fd, names[i], 0) != 0 && errno != ENOENT) {
                rc = -1;
            }
        }
        free_names(names, n);
        if (n == 0 || rc != 0)
            break;
    }
    int e = errno;
    close(fd);
    if (rc != 0) {
        errno = e;
        return -1;
    }
    return unlinkat(dfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT ? 0 : -1;
}

void execd_dirs_remove(tk_req *r, void *ud)
{
    const char *paths[MAX_PATHS];
    size_t n = execd_fs_query_all(r, "path", paths, MAX_PATHS);
    for (size_t i = 0; i < n; i++) {
        char rel[TK_PATHSAFE_PATH_MAX], leaf[TK_PATHSAFE_NAME_MAX + 1], why[512];
        if (execd_fs_rel(r, paths[i], strlen(paths[i]), rel) != 0)
            return;
        if (!*rel) {
            tk_respond_error(r, 400, "INVALID_PATH",
                             "refusing to delete the root directory itself");
            return;
        }
        int dfd;
        tk_status st =
            tk_pathsafe_open_parent(ws(), rel, 0, &dfd, leaf, sizeof leaf, why, sizeof why);
        if (st == TK_ENOENT)
            continue;
        if (st != TK_OK) {
            execd_fs_fail(r, st, why);
            return;
        }
        int rc = rmtree(dfd, leaf, 0);
        int e = errno;
        close(dfd);
        if (rc != 0) {
            tk_respond_error(r, execd_fs_errno_status(e), execd_fs_errno_code(e),
                             "error removing directory %s: %s", paths[i], strerror(e));
            return;
        }
    }
    tk_respond_empty(r, 200);
}

/* ---------- replace ---------- */

static int read_all(int fd, size_t size, char **out)
{
    char *b = tk_malloc(size + 1);
    size_t got = 0;
    while (got < size) {
        ssize_t n = read(fd, b + got, size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    if (got != size) {
        free(b);
        return -1;
    }
    *out = b;
    return 0;
}

static int write_all(int fd, const char *d, size_t n)
{
    while (n) {
        ssize_t w = write(fd, d, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        d += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Writes data to a temporary file beside leaf and renames it over leaf (which
 * is replaced itself, never followed). mode/uid/gid as given. */
static int replace_file(int dfd, const char *leaf, const char *data, size_t len, mode_t mode,
                        uid_t uid, gid_t gid)
{
    char tmp[64], tok[17];
    tk_token_hex(tok, 8);
    snprintf(tmp, sizeof tmp, ".tusko-replace-%s", tok);
    int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    int rc = write_all(fd, data, len);
    if (rc == 0) {
        if (fchown(fd, uid, gid) != 0) {
            /* not root: keep our own ownership */
        }
        rc = fchmod(fd, mode & 07777);
    }
    int e = errno;
    close(fd);
    if (rc == 0)
        rc = renameat(dfd, tmp, dfd, leaf);
    if (rc != 0) {
        e = errno;
        unlinkat(dfd, tmp, 0);
        errno = e;
    }
    return rc;
}

void execd_files_replace(tk_req *r, void *ud)
{
    const char *vq = tk_req_query(r, "verbose");
    int verbose = vq && strcmp(vq, "true") == 0;
    json_t *j = tk_req_json(r, 0);
    if (!j)
        return;
    if (!json_is_object(j)) {
        tk_respond_error(r, 400, "INVALID_REQUEST_BODY",
                         "the body must be an object of path → {old, new}");
        return;
    }
    json_t *results = json_object();
    const char *path;
    json_t *v;
    json_object_foreach(j, path, v)
    {
        json_t *jo = json_object_get(v, "old"), *jn = json_object_get(v, "new");
        if (!json_is_string(jo) || json_string_length(jo) == 0 || !json_is_string(jn)) {
            tk_respond_error(r, 400, "INVALID_REQUEST_BODY",
                             "%s: old (non-empty) and new must be strings", path);
            goto out;
        }
        const char *old = json_string_value(jo), *nw = json_string_value(jn);
        size_t ol = json_string_length(jo), nl = json_string_length(jn);
        char rel[TK_PATHSAFE_PATH_MAX], leaf[TK_PATHSAFE_NAME_MAX + 1];
        if (execd_fs_rel(r, path, strlen(path), rel) != 0)
            goto out;
        if (!*rel) {
            tk_respond_error(r, 400, "INVALID_PATH", "the root directory is not a file");
            goto out;
        }
        int dfd;
        if (parent(r, rel, 0, &dfd, leaf) != 0)
            goto out;
        int fd = openat(dfd, leaf, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        struct stat sb;
        if (fd < 0 || fstat(fd, &sb) != 0) {
            int e = errno;
            if (fd >= 0)
                close(fd);
            close(dfd);
            if (e == ENOENT)
                tk_respond_error(r, 404, "FILE_NOT_FOUND", "file not found: %s", path);
            else if (e == ELOOP)
                tk_respond_error(r, 400, "INVALID_PATH",
                                 "path refused: %s is a symlink and symlinks are not followed "
                                 "for writes",
                                 path);
            else
                tk_respond_error(r, execd_fs_errno_status(e), execd_fs_errno_code(e), "open %s: %s",
                                 path, strerror(e));
            goto out;
        }
        if (!S_ISREG(sb.st_mode) || sb.st_size > (off_t)REPLACE_MAX_FILE) {
            close(fd);
            close(dfd);
            tk_respond_error(r, 400, "INVALID_PATH", "%s is %s", path,
                             S_ISREG(sb.st_mode) ? "larger than 64 MiB" : "not a regular file");
            goto out;
        }
        char *data;
        if (read_all(fd, (size_t)sb.st_size, &data) != 0) {
            close(fd);
            close(dfd);
            tk_respond_error(r, 500, "RUNTIME_ERROR", "read %s failed", path);
            goto out;
        }
        close(fd);
        size_t count = 0, len = (size_t)sb.st_size;
        tk_buf nb;
        tk_buf_init(&nb, REPLACE_MAX_OUT);
        int over = 0;
        for (size_t i = 0; i < len;) {
            const char *hit = memmem(data + i, len - i, old, ol);
            size_t upto = hit ? (size_t)(hit - data) : len;
            if (tk_buf_append(&nb, data + i, upto - i) != TK_OK) {
                over = 1;
                break;
            }
            if (!hit)
                break;
            if (tk_buf_append(&nb, nw, nl) != TK_OK) {
                over = 1;
                break;
            }
            count++;
            i = upto + ol;
        }
        free(data);
        int rc = 0;
        if (!over && count > 0)
            rc = replace_file(dfd, leaf, nb.data ? nb.data : "", nb.len, sb.st_mode, sb.st_uid,
                              sb.st_gid);
        int e = errno;
        tk_buf_free(&nb);
        close(dfd);
        if (over) {
            tk_respond_error(r, 400, "INVALID_REQUEST_BODY",
                             "%s: the result would be larger than 256 MiB", path);
            goto out;
        }
        if (rc != 0) {
            tk_respond_error(r, execd_fs_errno_status(e), execd_fs_errno_code(e),
                             "writing %s failed: %s", path, strerror(e));
            goto out;
        }
        json_object_set_new(results, path,
                            tk_json_obj("replacedCount", json_integer((json_int_t)count), NULL));
    }
    if (verbose) {
        tk_respond_json(r, 200, results);
        return;
    }
    tk_respond_empty(r, 200);
out:
    json_decref(results);
}

/* ---------- download ---------- */

/* Parses the first range of "bytes=..." against size. 1: a range; 0: no usable
 * Range header; -1: unsatisfiable or malformed (416). */
static int parse_range(const char *h, uint64_t size, uint64_t *off, uint64_t *len)
{
    if (!h)
        return 0;
    while (*h == ' ')
        h++;
    if (strncmp(h, "bytes=", 6) != 0)
        return -1;
    h += 6;
    while (*h == ' ')
        h++;
    char first[64];
    size_t fl = strcspn(h, ",");
    if (fl == 0 || fl >= sizeof first)
        return -1;
    memcpy(first, h, fl);
    first[fl] = '\0';
    char *dash = strchr(first, '-');
    if (!dash)
        return -1;
    *dash = '\0';
    const char *a = first, *b = dash + 1;
    while (*a == ' ')
        a++;
    while (*b == ' ')
        b++;
    char *e;
    for (char *t = first + strlen(first); t > first && t[-1] == ' ';)
        *--t = '\0';
    if (!*a) {
        /* suffix: the last N bytes */
        int64_t nsuf;
        if (tk_parse_i64(b, 1, INT64_MAX, &nsuf) != TK_OK || size == 0)
            return -1;
        uint64_t sfx = (uint64_t)nsuf > size ? size : (uint64_t)nsuf;
        *off = size - sfx;
        *len = sfx;
        return 1;
    }
    int64_t start, end;
    if (tk_parse_i64(a, 0, INT64_MAX, &start) != TK_OK)
        return -1;
    if ((uint64_t)start >= size)
        return -1;
    if (!*b) {
        end = (int64_t)size - 1;
    } else {
        errno = 0;
        long long v = strtoll(b, &e, 10);
        while (*e == ' ')
            e++;
        if (errno || *e || v < start)
            return -1;
        end = v;
        if ((uint64_t)end >= size)
            end = (int64_t)size - 1;
    }
    *off = (uint64_t)start;
    *len = (uint64_t)(end - start + 1);
    return 1;
}

static void content_disposition(tk_req *r, const char *name)
{
    int ascii = 1;
    for (const char *c = name; *c; c++)
        if ((unsigned char)*c >= 0x80 || *c == '"' || *c == '\\' || (unsigned char)*c < 0x20)
            ascii = 0;
    char v[1200];
    if (ascii) {
        snprintf(v, sizeof v, "attachment; filename=\"%s\"", name);
    } else {
        /* RFC 5987: percent-encode everything but unreserved characters */
        char enc[900];
        size_t o = 0;
        for (const unsigned char *c = (const unsigned char *)name; *c && o + 4 < sizeof enc; c++) {
            if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                *c == '-' || *c == '.' || *c == '_' || *c == '~')
                enc[o++] = (char)*c;
            else
                o += (size_t)snprintf(enc + o, sizeof enc - o, "%%%02X", *c);
        }
        enc[o] = '\0';
        snprintf(v, sizeof v, "attachment; filename=\"%s\"; filename*=UTF-8''%s", enc, enc);
    }
    tk_respond_header(r, "Content-Disposition", v);
}

void execd_files_download(tk_req *r, void *ud)
{
    const char *path = tk_req_query(r, "path");
    if (!path || !*path) {
        tk_respond_error(r, 400, "MISSING_QUERY", "missing query parameter 'path'");
        return;
    }
    char rel[TK_PATHSAFE_PATH_MAX], why[512];
    if (execd_fs_rel(r, path, strlen(path), rel) != 0)
        return;
    int fd;
    tk_status st = tk_pathsafe_open(ws(), rel, O_RDONLY | O_NONBLOCK, 0, TK_PATHSAFE_FOLLOW, &fd,
                                    why, sizeof why);
    if (st != TK_OK) {
        execd_fs_fail(r, st, why);
        return;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        tk_respond_error(r, 400, "INVALID_PATH", "%s is not a regular file", path);
        return;
    }
    uint64_t size = (uint64_t)sb.st_size, off = 0, len = size;
    const char *slash = strrchr(rel, '/');
    content_disposition(r, slash ? slash + 1 : rel);
    tk_respond_header(r, "Accept-Ranges", "bytes");
    int k = parse_range(tk_req_header(r, "Range"), size, &off, &len);
    if (k < 0) {
        close(fd);
        char cr[64];
        snprintf(cr, sizeof cr, "bytes */%llu", (unsigned long long)size);
        tk_respond_header(r, "Content-Range", cr);
        tk_respond_error(r, 416, "RANGE_NOT_SATISFIABLE",
                         "the requested range is not satisfiable for a file of %llu bytes",
                         (unsigned long long)size);
        return;
    }
    if (k > 0) {
        char cr[96];
        snprintf(cr, sizeof cr, "bytes %llu-%llu/%llu", (unsigned long long)off,
                 (unsigned long long)(off + len - 1), (unsigned long long)size);
        tk_respond_header(r, "Content-Range", cr);
        tk_respond_fd(r, 206, "application/octet-stream", fd, (off_t)off, len);
        return;
    }
    tk_respond_fd(r, 200, "application/octet-stream", fd, 0, size);
}
