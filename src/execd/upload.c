/*
 * upload.c — POST /files/upload: multipart/form-data with a metadata part (JSON
 * {path, owner, group, mode}) before each file part, streamed to disk.
 *
 * The body is never held whole: each chunk goes through the multipart parser
 * straight into a temporary file created (O_EXCL|O_NOFOLLOW) in the target's
 * directory — which was opened with the O_NOFOLLOW walk, creating missing
 * directories — and renamed over the target when its part ends. A symlink
 * swapped in while the upload runs changes nothing: every operation is relative
 * to the directory fd. A request that ends early leaves no temporary file.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "execd/execd.h"
#include "execd/files.h"
#include "execd/fs.h"
#include "execd/multipart.h"
#include "lib/id.h"
#include "lib/json.h"
#include "lib/log.h"

#define META_MAX (64u << 10)

enum { P_NONE, P_META, P_FILE, P_OTHER };

typedef struct {
    execd_mp mp;
    int started, failed;
    int part;
    tk_buf meta;
    int have_meta;
    char rel[TK_PATHSAFE_PATH_MAX];
    execd_perm perm;
    int dfd, fd;
    char tmp[64];
    char leaf[TK_PATHSAFE_NAME_MAX + 1];
    size_t files;
    uint64_t bytes;
    int http;
    char code[32];
} upload;

static void upload_cleanup(void *arg)
{
    upload *u = arg;
    if (u->fd >= 0)
        close(u->fd);
    if (u->dfd >= 0) {
        if (u->tmp[0])
            unlinkat(u->dfd, u->tmp, 0);
        close(u->dfd);
    }
    if (u->started)
        execd_mp_free(&u->mp);
    tk_buf_free(&u->meta);
    free(u);
}

static void close_file(upload *u)
{
    if (u->fd >= 0)
        close(u->fd);
    u->fd = -1;
    if (u->dfd >= 0) {
        if (u->tmp[0])
            unlinkat(u->dfd, u->tmp, 0);
        close(u->dfd);
    }
    u->dfd = -1;
    u->tmp[0] = '\0';
}

static int refuse(upload *u, int http, const char *code, char *err, size_t errlen, const char *fmt,
                  const char *a, const char *b)
{
    u->http = http;
    snprintf(u->code, sizeof u->code, "%s", code);
    snprintf(err, errlen, fmt, a, b ? b : "");
    return 1;
}

static int on_begin(void *ud, const execd_mp_part *p, char *err, size_t errlen)
{
    upload *u = ud;
    if (strcmp(p->name, "metadata") == 0) {
        if (u->have_meta)
            return refuse(u, 400, "INVALID_FILE", err, errlen,
                          "a metadata part (for %s) came without its file part", u->rel, NULL);
        u->part = P_META;
        tk_buf_reset(&u->meta);
        return 0;
    }
    if (strcmp(p->name, "file") != 0) {
        u->part = P_OTHER; /* other fields are ignored, as upstream does */
        return 0;
    }
    if (!u->have_meta)
        return refuse(u, 400, "INVALID_FILE_METADATA", err, errlen,
                      "a file part came before its metadata part (each file part must follow "
                      "a metadata part naming its path)%s%s",
                      "", NULL);
    char why[512];
    tk_status st = tk_pathsafe_open_parent(execd_fs_root(), u->rel, TK_PATHSAFE_MKDIRS, &u->dfd,
                                           u->leaf, sizeof u->leaf, why, sizeof why);
    if (st != TK_OK) {
        u->dfd = -1;
        return refuse(u,
                      st == TK_EDENIED  ? 400
                      : st == TK_ENOENT ? 404
                                        : 500,
                      st == TK_EDENIED ? "INVALID_PATH" : "RUNTIME_ERROR", err, errlen, "%s%s", why,
                      NULL);
    }
    char tok[17];
    tk_token_hex(tok, 8);
    snprintf(u->tmp, sizeof u->tmp, ".tusko-upload-%s", tok);
    u->fd = openat(u->dfd, u->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (u->fd < 0) {
        u->tmp[0] = '\0';
        int e = errno;
        return refuse(u, execd_fs_errno_status(e), execd_fs_errno_code(e), err, errlen,
                      "cannot create a file beside %s: %s", u->rel, strerror(e));
    }
    u->part = P_FILE;
    return 0;
}

static int on_data(void *ud, const char *d, size_t n, char *err, size_t errlen)
{
    upload *u = ud;
    if (u->part == P_META) {
        if (tk_buf_append(&u->meta, d, n) != TK_OK)
            return refuse(u, 400, "INVALID_FILE_METADATA", err, errlen,
                          "a metadata part is larger than 64 KiB%s%s", "", NULL);
        return 0;
    }
    if (u->part != P_FILE)
        return 0;
    while (n) {
        ssize_t w = write(u->fd, d, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return refuse(u, 500, "RUNTIME_ERROR", err, errlen, "writing %s failed: %s", u->rel,
                          strerror(errno));
        d += w;
        n -= (size_t)w;
        u->bytes += (uint64_t)w;
    }
    return 0;
}

static int end_meta(upload *u, char *err, size_t errlen)
{
    char perr[256];
    json_t *j =
        tk_json_parse(u->meta.data ? u->meta.data : "", u->meta.len, META_MAX, perr, sizeof perr);
    if (!j || !json_is_object(j)) {
        if (j)
            json_decref(j);
        return refuse(u, 400, "INVALID_FILE_METADATA", err, errlen, "invalid metadata format: %s%s",
                      j ? "not an object" : perr, NULL);
    }
    json_t *pv = json_object_get(j, "path");
    if (!json_is_string(pv) || json_string_length(pv) == 0) {
        json_decref(j);
        return refuse(u, 400, "INVALID_FILE_METADATA", err, errlen, "metadata path is empty%s%s",
                      "", NULL);
    }
    char why[512];
    if (execd_fs_path_rel(json_string_value(pv), json_string_length(pv), u->rel, sizeof u->rel, why,
                          sizeof why) != TK_OK) {
        json_t *shown = json_stringn(json_string_value(pv), TK_MIN(json_string_length(pv), 200));
        char *s = shown ? tk_json_dumps(shown) : tk_strdup("\"?\"");
        if (shown)
            json_decref(shown);
        refuse(u, 400, "INVALID_PATH", err, errlen, "path %s refused: %s", s, why);
        free(s);
        json_decref(j);
        return 1;
    }
    if (!u->rel[0]) {
        json_decref(j);
        return refuse(u, 400, "INVALID_PATH", err, errlen,
                      "the root directory cannot be written as a file%s%s", "", NULL);
    }
    char perm_err[300];
    if (execd_fs_perm_parse(j, &u->perm, perm_err, sizeof perm_err) != 0) {
        json_decref(j);
        return refuse(u, 400, "INVALID_FILE_METADATA", err, errlen, "%s%s", perm_err, NULL);
    }
    json_decref(j);
    u->have_meta = 1;
    return 0;
}

static int end_file(upload *u, char *err, size_t errlen)
{
    mode_t mode = u->perm.has_mode ? u->perm.mode : 0644;
    int rc = 0;
    char perr[300];
    if (fchmod(u->fd, mode) != 0)
        rc = refuse(u, 500, "RUNTIME_ERROR", err, errlen, "chmod %s: %s", u->rel, strerror(errno));
    execd_perm owner = u->perm;
    owner.has_mode = 0;
    if (!rc && execd_fs_perm_apply(u->fd, &owner, perr, sizeof perr) != 0) {
        int e = errno;
        rc = refuse(u, execd_fs_errno_status(e), execd_fs_errno_code(e), err, errlen, "%s: %s",
                    u->rel, perr);
    }
    if (!rc) {
        close(u->fd);
        u->fd = -1;
        /* rename replaces a symlink at the target itself; it never follows it */
        if (renameat(u->dfd, u->tmp, u->dfd, u->leaf) != 0) {
            int e = errno;
            rc = refuse(u, e == EISDIR || e == ENOTEMPTY || e == EEXIST ? 400 : 500,
                        e == EISDIR || e == ENOTEMPTY || e == EEXIST ? "INVALID_PATH"
                                                                     : "RUNTIME_ERROR",
                        err, errlen, "cannot write %s: %s", u->rel, strerror(e));
        } else {
            u->tmp[0] = '\0';
            u->files++;
        }
    }
    close_file(u);
    u->have_meta = 0;
    return rc;
}

static int on_end(void *ud, char *err, size_t errlen)
{
    upload *u = ud;
    int part = u->part;
    u->part = P_NONE;
    if (part == P_META)
        return end_meta(u, err, errlen);
    if (part == P_FILE)
        return end_file(u, err, errlen);
    return 0;
}

static upload *state(tk_req *r)
{
    upload *u = tk_req_user(r);
    if (!u) {
        u = tk_calloc(1, sizeof *u);
        u->dfd = u->fd = -1;
        tk_buf_init(&u->meta, META_MAX);
        tk_req_set_user(r, u);
        tk_arena_cleanup_add(tk_req_arena(r), upload_cleanup, u);
    }
    return u;
}

int execd_upload_body(tk_req *r, const char *data, size_t len, void *ud)
{
    upload *u = state(r);
    if (u->failed)
        return 1;
    char err[700] = "";
    if (!u->started) {
        char boundary[EXECD_MP_BOUNDARY_MAX + 1];
        if (execd_mp_boundary(tk_req_header(r, "Content-Type"), boundary, sizeof boundary) !=
            TK_OK) {
            u->failed = 1;
            tk_respond_error(r, 400, "INVALID_FILE",
                             "the body must be multipart/form-data with a boundary");
            return 1;
        }
        execd_mp_cb cb = {on_begin, on_data, on_end};
        execd_mp_init(&u->mp, boundary, &cb, u);
        u->started = 1;
    }
    tk_status st = execd_mp_feed(&u->mp, data, len, err, sizeof err);
    if (st == TK_OK)
        return 0;
    u->failed = 1;
    close_file(u);
    if (st == TK_EDENIED && u->http)
        tk_respond_error(r, u->http, u->code, "%s", err);
    else
        tk_respond_error(r, 400, "INVALID_FILE", "malformed multipart body: %s", err);
    tk_info("upload", "msg=\"upload refused\" err=\"%s\"", err);
    return 1;
}

void execd_upload_done(tk_req *r, void *ud)
{
    upload *u = tk_req_user(r);
    if (!u || !u->started) {
        tk_respond_error(r, 400, "INVALID_FILE", "multipart form is empty");
        return;
    }
    char err[512] = "";
    if (execd_mp_finish(&u->mp, err, sizeof err) != TK_OK) {
        tk_respond_error(r, 400, "INVALID_FILE", "malformed multipart body: %s", err);
        return;
    }
    if (u->have_meta) {
        tk_respond_error(r, 400, "INVALID_FILE_CONTENT", "file is missing for %s", u->rel);
        return;
    }
    if (u->files == 0) {
        tk_respond_error(r, 400, "INVALID_FILE_METADATA", "metadata file is missing");
        return;
    }
    tk_info("upload", "msg=\"uploaded\" files=%zu bytes=%llu", u->files,
            (unsigned long long)u->bytes);
    tk_respond_empty(r, 200);
}
