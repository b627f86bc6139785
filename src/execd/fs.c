#include "execd/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "execd/events.h"
#include "execd/execd.h"
#include "lib/json.h"
#include "lib/query.h"
#include "lib/tktime.h"

const tk_pathsafe *execd_fs_root(void)
{
    return execd_cfg.confined ? &execd_cfg.ws : &execd_cfg.root;
}

tk_status execd_fs_path_rel(const char *path, size_t len, char *rel, size_t rellen, char *why,
                            size_t whylen)
{
    const tk_pathsafe *root = execd_fs_root();
    if (root == &execd_cfg.ws || !path || len == 0 || path[0] == '/' || path[0] == '~')
        return tk_pathsafe_rel(root, path, len, rel, rellen, why, whylen);
    /* Relative: to the workspace, which lies beneath the root. The joined
     * string goes through the same rules (a ".." may climb out of the workspace
     * but never above the root). */
    char abs[TK_PATHSAFE_PATH_MAX + 2];
    size_t wl = strlen(execd_cfg.ws.root);
    if (wl + 1 + len > TK_PATHSAFE_PATH_MAX) {
        snprintf(why, whylen, "the path is longer than %d bytes", TK_PATHSAFE_PATH_MAX);
        return TK_EDENIED;
    }
    memcpy(abs, execd_cfg.ws.root, wl);
    abs[wl] = '/';
    memcpy(abs + wl + 1, path, len);
    return tk_pathsafe_rel(root, abs, wl + 1 + len, rel, rellen, why, whylen);
}

int execd_fs_rel(tk_req *r, const char *path, size_t len, char *rel)
{
    char why[512];
    if (execd_fs_path_rel(path, len, rel, TK_PATHSAFE_PATH_MAX, why, sizeof why) == TK_OK)
        return 0;
    /* The path itself may be what broke the rule: show it escaped and short. */
    json_t *shown = execd_json_text(path, len > 200 ? 200 : len);
    char *s = tk_json_dumps(shown);
    json_decref(shown);
    tk_respond_error(r, 400, "INVALID_PATH", "path %s%s refused: %s", s, len > 200 ? "…" : "", why);
    free(s);
    return -1;
}

int execd_fs_errno_status(int e)
{
    return e == EROFS || e == EACCES || e == EPERM ? 403 : 500;
}

const char *execd_fs_errno_code(int e)
{
    return e == EROFS                  ? "READ_ONLY_FILESYSTEM"
           : e == EACCES || e == EPERM ? "PERMISSION_DENIED"
                                       : "RUNTIME_ERROR";
}

void execd_fs_fail(tk_req *r, tk_status st, const char *why)
{
    int e = errno;
    if (st == TK_ERROR && execd_fs_errno_status(e) == 403)
        tk_respond_error(r, 403, execd_fs_errno_code(e), "%s", why);
    else if (st == TK_EDENIED)
        tk_respond_error(r, 400, "INVALID_PATH", "%s", why);
    else if (st == TK_ENOENT)
        tk_respond_error(r, 404, "FILE_NOT_FOUND", "file not found: %s", why);
    else
        tk_respond_error(r, 500, "RUNTIME_ERROR", "%s", why);
}

size_t execd_fs_query_all(tk_req *r, const char *name, const char **out, size_t max)
{
    const char *qs = tk_req_query_string(r);
    tk_kv *kv;
    size_t n;
    if (tk_query_parse(tk_req_arena(r), qs, strlen(qs), TK_QUERY_MAX_ITEMS, &kv, &n) != TK_OK)
        return 0;
    size_t k = 0;
    for (size_t i = 0; i < n && k < max; i++)
        if (strcmp(kv[i].name, name) == 0)
            out[k++] = kv[i].value;
    return k;
}

static const char *type_of(mode_t m)
{
    if (S_ISLNK(m))
        return "symlink";
    if (S_ISDIR(m))
        return "directory";
    if (S_ISREG(m))
        return "file";
    return "other";
}

static json_t *user_name(uid_t uid)
{
    struct passwd pw, *res = NULL;
    char buf[2048];
    if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res)
        return json_string(pw.pw_name);
    char n[24];
    snprintf(n, sizeof n, "%u", (unsigned)uid);
    return json_string(n);
}

static json_t *group_name(gid_t gid)
{
    struct group gr, *res = NULL;
    char buf[4096];
    if (getgrgid_r(gid, &gr, buf, sizeof buf, &res) == 0 && res)
        return json_string(gr.gr_name);
    char n[24];
    snprintf(n, sizeof n, "%u", (unsigned)gid);
    return json_string(n);
}

static json_t *ts(struct statx_timestamp t)
{
    char s[40];
    tk_time_rfc3339((int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000, s, sizeof s);
    return json_string(s);
}

json_t *execd_fs_info_at(int dirfd, const char *name, const char *display)
{
    struct statx sx;
    int flags = AT_SYMLINK_NOFOLLOW | AT_STATX_SYNC_AS_STAT | (*name ? 0 : AT_EMPTY_PATH);
    if (statx(dirfd, name, flags, STATX_BASIC_STATS | STATX_BTIME, &sx) != 0)
        return NULL;
    /* The mode as upstream shows it: the octal digits read as a decimal number. */
    unsigned perm = sx.stx_mode & 07777, dec = 0, mul = 1;
    while (perm) {
        dec += (perm & 7) * mul;
        mul *= 10;
        perm >>= 3;
    }
    json_t *o = json_object();
    json_object_set_new(o, "path", execd_json_text(display, strlen(display)));
    json_object_set_new(o, "type", json_string(type_of(sx.stx_mode)));
    json_object_set_new(o, "size", json_integer((json_int_t)sx.stx_size));
    json_object_set_new(o, "modified_at", ts(sx.stx_mtime));
    json_object_set_new(o, "created_at",
                        ts((sx.stx_mask & STATX_BTIME) ? sx.stx_btime : sx.stx_ctime));
    json_object_set_new(o, "owner", user_name(sx.stx_uid));
    json_object_set_new(o, "group", group_name(sx.stx_gid));
    json_object_set_new(o, "mode", json_integer(dec));
    return o;
}

static int lookup_user(const char *s, uid_t *out)
{
    int64_t v;
    if (tk_parse_i64(s, 0, 4294967294LL, &v) == TK_OK) {
        *out = (uid_t)v;
        return 0;
    }
    struct passwd pw, *res = NULL;
    char buf[2048];
    if (getpwnam_r(s, &pw, buf, sizeof buf, &res) == 0 && res) {
        *out = pw.pw_uid;
        return 0;
    }
    return -1;
}

static int lookup_group(const char *s, gid_t *out)
{
    int64_t v;
    if (tk_parse_i64(s, 0, 4294967294LL, &v) == TK_OK) {
        *out = (gid_t)v;
        return 0;
    }
    struct group gr, *res = NULL;
    char buf[4096];
    if (getgrnam_r(s, &gr, buf, sizeof buf, &res) == 0 && res) {
        *out = gr.gr_gid;
        return 0;
    }
    return -1;
}

int execd_fs_perm_parse(const json_t *p, execd_perm *out, char *err, size_t errlen)
{
    out->has_mode = 0;
    out->mode = 0;
    out->uid = (uid_t)-1;
    out->gid = (gid_t)-1;
    if (!p || json_is_null(p))
        return 0;
    if (!json_is_object(p)) {
        snprintf(err, errlen, "permissions must be an object {mode, owner, group}");
        return -1;
    }
    json_t *m = json_object_get(p, "mode");
    if (m && !json_is_null(m)) {
        if (!json_is_integer(m) || json_integer_value(m) < 0 || json_integer_value(m) > 7777) {
            snprintf(err, errlen, "mode must be octal digits such as 644 or 755");
            return -1;
        }
        json_int_t d = json_integer_value(m);
        mode_t mode = 0;
        int shift = 0;
        while (d) {
            int digit = (int)(d % 10);
            if (digit > 7) {
                snprintf(err, errlen, "mode %lld is not octal (digits 0-7 only)",
                         (long long)json_integer_value(m));
                return -1;
            }
            mode |= (mode_t)digit << shift;
            shift += 3;
            d /= 10;
        }
        if (mode) {
            out->has_mode = 1;
            out->mode = mode;
        }
    }
    const char *owner = tk_json_str(p, "owner");
    if (owner && *owner && lookup_user(owner, &out->uid) != 0) {
        snprintf(err, errlen, "no such user: %s", owner);
        return -1;
    }
    const char *group = tk_json_str(p, "group");
    if (group && *group && lookup_group(group, &out->gid) != 0) {
        snprintf(err, errlen, "no such group: %s", group);
        return -1;
    }
    return 0;
}

int execd_fs_perm_apply(int fd, const execd_perm *p, char *err, size_t errlen)
{
    if (p->uid != (uid_t)-1 || p->gid != (gid_t)-1) {
        if (fchownat(fd, "", p->uid, p->gid, AT_EMPTY_PATH) != 0) {
            int e = errno;
            snprintf(err, errlen, "chown: %s", strerror(e));
            errno = e;
            return -1;
        }
    }
    if (p->has_mode) {
        /* chmod through the fd's own magic link: the very inode that was
         * resolved, whatever happens to the path meanwhile. */
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
        if (fchmod(fd, p->mode) != 0 && chmod(proc, p->mode) != 0) {
            int e = errno;
            snprintf(err, errlen, "chmod: %s", strerror(e));
            errno = e;
            return -1;
        }
    }
    return 0;
}
