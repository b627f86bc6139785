#include "lib/pathsafe.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/utf8.h"

static int force_walk;
static int no_openat2; /* set once openat2 answered ENOSYS */

void tk_pathsafe_force_walk(int on)
{
    force_walk = on;
}

#define DENY(...)                                                                                  \
    do {                                                                                           \
        snprintf(why, whylen, __VA_ARGS__);                                                        \
        return TK_EDENIED;                                                                         \
    } while (0)

/* ---------- the lexical step ---------- */

static int is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Splits s (NUL-free, len bytes) on '/' into at most max components, skipping
 * empty ones and ".". Returns the count, or -1 when there are more than max. */
static int split(const char *s, size_t len, const char **comp, size_t *clen, int max)
{
    int n = 0;
    size_t i = 0;
    while (i < len) {
        while (i < len && s[i] == '/')
            i++;
        size_t st = i;
        while (i < len && s[i] != '/')
            i++;
        size_t l = i - st;
        if (l == 0 || (l == 1 && s[st] == '.'))
            continue;
        if (n >= max)
            return -1;
        comp[n] = s + st;
        clen[n] = l;
        n++;
    }
    return n;
}

#define MAX_COMPS (TK_PATHSAFE_PATH_MAX / 2 + 1)

/* Matches the leading components of the path against an absolute root; returns
 * how many components the root has, or -1 when the path is not under it. */
static int match_root(const char *root, const char **comp, const size_t *clen, int n)
{
    int k = 0;
    size_t i = 0, rl = strlen(root);
    while (i < rl) {
        while (i < rl && root[i] == '/')
            i++;
        size_t st = i;
        while (i < rl && root[i] != '/')
            i++;
        size_t l = i - st;
        if (l == 0)
            continue;
        if (k >= n || clen[k] != l || memcmp(comp[k], root + st, l) != 0)
            return -1;
        k++;
    }
    return k;
}

/* The lexical rules against root (normalised) or its realpath real (or ""). */
static tk_status lexical(const char *root, const char *real, const char *path, size_t len,
                         unsigned flags, char *rel, size_t rellen, char *why, size_t whylen)
{
    if (rellen)
        rel[0] = '\0';
    if (!path || len == 0)
        DENY("the path is empty");
    if (len > TK_PATHSAFE_PATH_MAX)
        DENY("the path is longer than %d bytes", TK_PATHSAFE_PATH_MAX);
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)path[i];
        if (c == 0)
            DENY("the path contains a NUL byte");
        if (c < 0x20 || c == 0x7f)
            DENY("the path contains a control character (0x%02x)", c);
        if (c == '\\')
            DENY("the path contains a backslash (only '/' separates components; refused as "
                 "ambiguous)");
        if (c == '$')
            DENY("the path contains '$' (variables are never expanded in paths)");
        if (c == '%' && i + 2 < len && is_hex(path[i + 1]) && is_hex(path[i + 2]))
            DENY("the path still contains a percent-escape after decoding (double encoding is "
                 "refused)");
        size_t n = tk_utf8_decode(path + i, len - i, NULL);
        if (n == 0)
            DENY("the path is not valid UTF-8");
        i += n;
    }
    if (path[0] == '~')
        DENY("the path starts with '~' (home directories are never expanded in paths)");

    static __thread const char *comp[MAX_COMPS];
    static __thread size_t clen[MAX_COMPS];
    int n = split(path, len, comp, clen, MAX_COMPS);
    if (n < 0)
        DENY("the path has too many components");
    int start = 0;
    if (path[0] == '/') {
        size_t rl = strlen(root);
        if (flags & TK_PATHSAFE_STRICT) /* the root as it is written, nothing else */
            start = len >= rl && memcmp(path, root, rl) == 0 &&
                            (len == rl || path[rl] == '/' || strcmp(root, "/") == 0)
                        ? match_root(root, comp, clen, n)
                        : -1;
        else
            start = match_root(root, comp, clen, n);
        if (start < 0 && real[0] && !(flags & TK_PATHSAFE_STRICT))
            start = match_root(real, comp, clen, n);
        if (start < 0)
            DENY("the absolute path is outside the workspace %s", root);
    }
    /* Resolve ".." lexically; it may never climb above the root. */
    int top = 0; /* components kept, compacted in place from index start */
    for (int i = start; i < n; i++) {
        if (clen[i] > TK_PATHSAFE_NAME_MAX)
            DENY("a path component is longer than %d bytes", TK_PATHSAFE_NAME_MAX);
        if (clen[i] == 2 && comp[i][0] == '.' && comp[i][1] == '.') {
            if (flags & TK_PATHSAFE_STRICT)
                DENY("\"..\" is not allowed in a path");
            if (top == 0)
                DENY("'..' climbs out of the workspace");
            top--;
            continue;
        }
        comp[start + top] = comp[i];
        clen[start + top] = clen[i];
        top++;
    }
    size_t o = 0;
    for (int i = 0; i < top; i++) {
        size_t l = clen[start + i];
        if (o + l + 2 > rellen)
            DENY("the path is too long");
        if (i)
            rel[o++] = '/';
        memcpy(rel + o, comp[start + i], l);
        o += l;
    }
    if (o + 1 > rellen)
        DENY("the path is too long");
    rel[o] = '\0';
    if (rel[0] == '~') /* "a/../~x" is as ambiguous as "~x" */
        DENY("the path starts with '~' (home directories are never expanded in paths)");
    return TK_OK;
}

tk_status tk_pathsafe_rel(const tk_pathsafe *ws, const char *path, size_t len, char *rel,
                          size_t rellen, char *why, size_t whylen)
{
    return lexical(ws->root, ws->real, path, len, 0, rel, rellen, why, whylen);
}

tk_status tk_pathsafe_check(const char *root, const char *path, size_t len, unsigned flags,
                            char *out, size_t outlen, char *why, size_t whylen)
{
    if (outlen)
        out[0] = '\0';
    char rel[TK_PATHSAFE_PATH_MAX];
    tk_status st = lexical(root, "", path, len, flags, rel, sizeof rel, why, whylen);
    if (st != TK_OK)
        return st;
    int n = !*rel                    ? snprintf(out, outlen, "%s", root)
            : strcmp(root, "/") == 0 ? snprintf(out, outlen, "/%s", rel)
                                     : snprintf(out, outlen, "%s/%s", root, rel);
    if (n < 0 || (size_t)n >= outlen) {
        if (outlen)
            out[0] = '\0';
        DENY("the path is too long");
    }
    return TK_OK;
}

/* ---------- kernel resolution ---------- */

static tk_status errno_status(int e, const char *rel, char *why, size_t whylen)
{
    switch (e) {
    case EXDEV:
        snprintf(why, whylen,
                 "path refused: it resolves outside the workspace (through a symlink)");
        return TK_EDENIED;
    case ELOOP:
        snprintf(why, whylen,
                 "path refused: a symlink is on the path and symlinks are not followed here");
        return TK_EDENIED;
    case ENOENT:
        snprintf(why, whylen, "no such file or directory: %s", *rel ? rel : ".");
        errno = e;
        return TK_ENOENT;
    case ENOTDIR:
        snprintf(why, whylen, "a component of the path is not a directory: %s", rel);
        errno = e;
        return TK_ENOENT;
    default:
        snprintf(why, whylen, "%s: %s", *rel ? rel : ".", strerror(e));
        errno = e;
        return TK_ERROR;
    }
}

/* Is name in dirfd a symlink? (for wording errors) */
static int is_symlink_at(int dirfd, const char *name)
{
    struct stat st;
    return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
}

/* Walks the first ncomp components of rel with O_NOFOLLOW, one directory at a
 * time, optionally creating them. */
static tk_status walk(const tk_pathsafe *ws, const char *rel, size_t upto, int mkdirs, int *out,
                      char *why, size_t whylen)
{
    int cur = openat(ws->fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (cur < 0)
        return errno_status(errno, "", why, whylen);
    size_t i = 0;
    char name[TK_PATHSAFE_NAME_MAX + 1];
    while (i < upto) {
        size_t st = i;
        while (i < upto && rel[i] != '/')
            i++;
        size_t l = i - st;
        if (i < upto)
            i++;
        if (l == 0 || l > TK_PATHSAFE_NAME_MAX) {
            close(cur);
            snprintf(why, whylen, "path refused: malformed relative path");
            return TK_EDENIED;
        }
        memcpy(name, rel + st, l);
        name[l] = '\0';
        if (strcmp(name, "..") == 0 || strcmp(name, ".") == 0) {
            close(cur);
            snprintf(why, whylen, "path refused: malformed relative path");
            return TK_EDENIED;
        }
        int nfd = openat(cur, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (nfd < 0 && errno == ENOENT && mkdirs) {
            if (mkdirat(cur, name, 0755) < 0 && errno != EEXIST) {
                int e = errno;
                close(cur);
                return errno_status(e, rel, why, whylen);
            }
            nfd = openat(cur, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        if (nfd < 0) {
            int e = errno;
            if ((e == ENOTDIR || e == ELOOP) && is_symlink_at(cur, name))
                e = ELOOP;
            close(cur);
            return errno_status(e, rel, why, whylen);
        }
        close(cur);
        cur = nfd;
    }
    *out = cur;
    return TK_OK;
}

static long sys_openat2(int dirfd, const char *path, struct open_how *how)
{
    return syscall(SYS_openat2, dirfd, path, how, sizeof *how);
}

tk_status tk_pathsafe_open(const tk_pathsafe *ws, const char *rel, int oflags, mode_t mode,
                           unsigned flags, int *fd, char *why, size_t whylen)
{
    *fd = -1;
    if (!*rel) {
        int f = openat(ws->fd, ".", (oflags & ~(O_CREAT | O_TRUNC | O_EXCL)) | O_CLOEXEC);
        if (f < 0)
            return errno_status(errno, rel, why, whylen);
        *fd = f;
        return TK_OK;
    }
    int perm_walk = 0;
    if (!force_walk && !__atomic_load_n(&no_openat2, __ATOMIC_RELAXED)) {
        struct open_how how = {
            .flags = (unsigned long long)(oflags | O_CLOEXEC),
            .mode = (oflags & (O_CREAT | O_TMPFILE)) ? mode : 0,
            .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS |
                       ((flags & TK_PATHSAFE_FOLLOW) ? 0 : RESOLVE_NO_SYMLINKS),
        };
        for (int attempt = 0; attempt < 8; attempt++) {
            long f = sys_openat2(ws->fd, rel, &how);
            if (f >= 0) {
                *fd = (int)f;
                return TK_OK;
            }
            if (errno == EAGAIN)
                continue; /* a concurrent rename; the kernel asks us to retry */
            if (errno == ENOSYS) {
                /* No openat2 (an old kernel): walk instead, from now on. */
                __atomic_store_n(&no_openat2, 1, __ATOMIC_RELAXED);
                break;
            }
            if (errno == EPERM) {
                /* A seccomp filter that refuses openat2: walk for this call (a real
                 * permission problem shows up again in the walk). */
                perm_walk = 1;
                break;
            }
            return errno_status(errno, rel, why, whylen);
        }
        if (!perm_walk && !__atomic_load_n(&no_openat2, __ATOMIC_RELAXED)) {
            snprintf(why, whylen, "path refused: it kept changing while being resolved");
            return TK_EDENIED;
        }
    }
    /* The walk: every directory opened with O_NOFOLLOW, then the leaf. Symlinks
     * are refused even with TK_PATHSAFE_FOLLOW (the safe side). */
    int dirfd;
    char leaf[TK_PATHSAFE_NAME_MAX + 1];
    tk_status st = tk_pathsafe_open_parent(ws, rel, 0, &dirfd, leaf, sizeof leaf, why, whylen);
    if (st != TK_OK)
        return st;
    int f = openat(dirfd, leaf, oflags | O_NOFOLLOW | O_CLOEXEC, mode);
    int e = errno;
    if (f < 0 && (e == ELOOP || e == ENOTDIR || e == EMLINK) && is_symlink_at(dirfd, leaf))
        e = ELOOP;
    close(dirfd);
    if (f < 0)
        return errno_status(e, rel, why, whylen);
    *fd = f;
    return TK_OK;
}

tk_status tk_pathsafe_open_parent(const tk_pathsafe *ws, const char *rel, unsigned flags,
                                  int *dirfd, char *leaf, size_t leaflen, char *why, size_t whylen)
{
    *dirfd = -1;
    if (leaflen)
        leaf[0] = '\0';
    if (!*rel) {
        snprintf(why, whylen, "path refused: the workspace root itself cannot be the target");
        return TK_EDENIED;
    }
    const char *slash = strrchr(rel, '/');
    const char *name = slash ? slash + 1 : rel;
    size_t nl = strlen(name);
    if (nl == 0 || nl >= leaflen || nl > TK_PATHSAFE_NAME_MAX || strcmp(name, "..") == 0 ||
        strcmp(name, ".") == 0) {
        snprintf(why, whylen, "path refused: malformed relative path");
        return TK_EDENIED;
    }
    size_t upto = slash ? (size_t)(slash - rel) : 0;
    tk_status st;
    if ((flags & TK_PATHSAFE_FOLLOW) && !(flags & TK_PATHSAFE_MKDIRS) && upto > 0) {
        char dir[TK_PATHSAFE_PATH_MAX];
        if (upto >= sizeof dir) {
            snprintf(why, whylen, "path refused: the path is too long");
            return TK_EDENIED;
        }
        memcpy(dir, rel, upto);
        dir[upto] = '\0';
        st = tk_pathsafe_open(ws, dir, O_PATH | O_DIRECTORY, 0, TK_PATHSAFE_FOLLOW, dirfd, why,
                              whylen);
    } else {
        st = walk(ws, rel, upto, (flags & TK_PATHSAFE_MKDIRS) != 0, dirfd, why, whylen);
    }
    if (st != TK_OK)
        return st;
    memcpy(leaf, name, nl + 1);
    return TK_OK;
}

/* ---------- the root ---------- */

tk_status tk_pathsafe_init(tk_pathsafe *ws, const char *root, char *err, size_t errlen)
{
    memset(ws, 0, sizeof *ws);
    ws->fd = -1;
    if (!root || root[0] != '/') {
        snprintf(err, errlen, "the workspace must be an absolute path (got \"%s\")",
                 root ? root : "");
        return TK_EINVAL;
    }
    /* Normalise: collapse repeated slashes, drop "." and a trailing slash; ".."
     * is refused (give the real path). */
    size_t o = 0, rl = strlen(root);
    if (rl >= sizeof ws->root) {
        snprintf(err, errlen, "the workspace path is too long");
        return TK_EINVAL;
    }
    for (size_t i = 0; i < rl;) {
        while (i < rl && root[i] == '/')
            i++;
        size_t st = i;
        while (i < rl && root[i] != '/')
            i++;
        size_t l = i - st;
        if (l == 0 || (l == 1 && root[st] == '.'))
            continue;
        if (l == 2 && root[st] == '.' && root[st + 1] == '.') {
            snprintf(err, errlen, "the workspace path must not contain '..' (got \"%s\")", root);
            return TK_EINVAL;
        }
        ws->root[o++] = '/';
        memcpy(ws->root + o, root + st, l);
        o += l;
    }
    if (o == 0)
        ws->root[o++] = '/';
    ws->root[o] = '\0';
    ws->fd = open(ws->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (ws->fd < 0) {
        snprintf(err, errlen,
                 "cannot open the workspace %s: %s (create it, or set EXECD_WORKSPACE)", ws->root,
                 strerror(errno));
        return TK_ERROR;
    }
    char *rp = realpath(ws->root, NULL);
    if (rp) {
        if (strcmp(rp, ws->root) != 0 && strlen(rp) < sizeof ws->real)
            snprintf(ws->real, sizeof ws->real, "%s", rp);
        free(rp);
    }
    return TK_OK;
}

void tk_pathsafe_close(tk_pathsafe *ws)
{
    if (ws->fd >= 0)
        close(ws->fd);
    ws->fd = -1;
}

void tk_pathsafe_display(const tk_pathsafe *ws, const char *rel, char *out, size_t outlen)
{
    if (!*rel)
        snprintf(out, outlen, "%s", ws->root);
    else if (strcmp(ws->root, "/") == 0)
        snprintf(out, outlen, "/%s", rel);
    else
        snprintf(out, outlen, "%s/%s", ws->root, rel);
}
