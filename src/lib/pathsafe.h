/*
 * pathsafe.h — user-supplied paths confined to a workspace root.
 *
 * Two steps, never a check-then-open on a string:
 *
 *  1. tk_pathsafe_rel() checks a path lexically and turns it into a path relative to
 *     the root ("a/b/c": no "", "." or ".." components, no leading '/'). It
 *     refuses, naming the rule: an empty path, NUL bytes, control characters,
 *     invalid UTF-8, backslashes, '~' and '$' (no expansion is ever done), a
 *     percent-escape left after decoding (double encoding), an absolute path
 *     outside the root, ".." that climbs above the root, a component longer than
 *     255 bytes, a path longer than 4096 bytes.
 *
 *     tk_pathsafe_check() applies the same rules to a root given as a string,
 *     opening nothing, for a client such as tusko's sandbox tools; its strict
 *     mode refuses ".." outright.
 *
 *  2. tk_pathsafe_open() / tk_pathsafe_open_parent() resolve that relative path with the
 *     kernel, beneath an fd of the root: openat2(RESOLVE_BENEATH |
 *     RESOLVE_NO_MAGICLINKS, plus RESOLVE_NO_SYMLINKS unless TK_PATHSAFE_FOLLOW), or —
 *     where openat2 is unavailable, and always for the parent walk — one
 *     component at a time with openat(O_NOFOLLOW) on the previous directory's
 *     fd. A symlink swapped in while an operation runs therefore cannot lead
 *     outside: resolution never goes through a string again once it has an fd.
 *
 * Statuses: TK_EDENIED when a rule was broken (answer 400; `why` names the
 * rule), TK_ENOENT when something does not exist (404), TK_ERROR for anything
 * else (errno is left set; `why` carries strerror).
 */
#ifndef TK_PATHSAFE_H
#define TK_PATHSAFE_H

#include <stddef.h>
#include <sys/types.h>

#include "lib/common.h"

#define TK_PATHSAFE_PATH_MAX 4096
#define TK_PATHSAFE_NAME_MAX 255

typedef struct {
    int fd; /* O_PATH|O_DIRECTORY|O_CLOEXEC fd of the root; -1 when closed */
    char root[TK_PATHSAFE_PATH_MAX]; /* the root as configured, normalised ("/workspace") */
    char real[TK_PATHSAFE_PATH_MAX]; /* its realpath() when that differs, else "" */
} tk_pathsafe;

enum {
    TK_PATHSAFE_FOLLOW = 1 << 0, /* follow symlinks that stay beneath the root (for reads) */
    TK_PATHSAFE_MKDIRS = 1 << 1, /* tk_pathsafe_open_parent: create missing directories (0755) */
    TK_PATHSAFE_STRICT = 1 << 2, /* tk_pathsafe_check: also refuse every "..", even one that
                                    stays inside, and an absolute path that does not begin with
                                    the root as written ("//workspace/a", "/./workspace/a") */
};

/* Opens the root (an absolute path to an existing directory). */
tk_status tk_pathsafe_init(tk_pathsafe *ws, const char *root, char *err, size_t errlen);
void tk_pathsafe_close(tk_pathsafe *ws);

/*
 * Checks path[0..len) (len bytes; it need not be NUL-terminated) and writes its
 * form relative to the root into rel ("" for the root itself). Relative input is
 * taken relative to the root.
 */
tk_status tk_pathsafe_rel(const tk_pathsafe *ws, const char *path, size_t len, char *rel,
                          size_t rellen, char *why, size_t whylen);

/*
 * The lexical step alone, against a root given as a normalised absolute path
 * ("/workspace"), with nothing opened: for a client that checks a path before
 * sending it to a service that confines it again. The rules of tk_pathsafe_rel,
 * plus TK_PATHSAFE_STRICT's. out gets the absolute normalised path (root itself
 * for the root). TK_EDENIED with the rule in why otherwise, and out "".
 */
tk_status tk_pathsafe_check(const char *root, const char *path, size_t len, unsigned flags,
                            char *out, size_t outlen, char *why, size_t whylen);

/*
 * Opens rel (from tk_pathsafe_rel) beneath the root with open(2) flags oflags (O_CLOEXEC
 * is added) and mode. On TK_OK *fd is the caller's to close.
 */
tk_status tk_pathsafe_open(const tk_pathsafe *ws, const char *rel, int oflags, mode_t mode,
                           unsigned flags, int *fd, char *why, size_t whylen);

/*
 * Opens the directory that holds rel's last component (an O_PATH fd, usable as
 * the dirfd of *at() calls) and copies that component into leaf (at least
 * TK_PATHSAFE_NAME_MAX + 1 bytes). rel must not be "" (the root has no parent inside
 * the workspace): that is TK_EDENIED. Without TK_PATHSAFE_FOLLOW no symlink is
 * followed on the way; callers then act on leaf with AT_SYMLINK_NOFOLLOW /
 * O_NOFOLLOW themselves.
 */
tk_status tk_pathsafe_open_parent(const tk_pathsafe *ws, const char *rel, unsigned flags,
                                  int *dirfd, char *leaf, size_t leaflen, char *why, size_t whylen);

/* The absolute form shown to users: root + "/" + rel (the root for ""). */
void tk_pathsafe_display(const tk_pathsafe *ws, const char *rel, char *out, size_t outlen);

/* For tests: 1 forces the component walk even where openat2 exists. */
void tk_pathsafe_force_walk(int on);

#endif
