/*
 * fs.h — what the file and directory endpoints share: turning request paths
 * into confined relative paths (answering 400 with the rule otherwise),
 * FileInfo objects, permissions, and errors.
 *
 * Every operation works on fds beneath execd's root (execd_cfg.root: the
 * sandbox's own "/", or the workspace when confined; lib/pathsafe): a path
 * string is checked once, lexically, and from then on only fds and single path
 * components are handed to the kernel. Writes never follow a symlink; reads
 * follow only symlinks that stay beneath the root. Relative paths are relative
 * to the workspace.
 */
#ifndef EXECD_FS_H
#define EXECD_FS_H

#include <jansson.h>
#include <stddef.h>
#include <sys/types.h>

#include "lib/httpd.h"
#include "lib/pathsafe.h"

/* What request paths are resolved beneath now: the workspace once confined
 * (execd_cfg.confined), else EXECD_ROOT. */
const tk_pathsafe *execd_fs_root(void);

/* The lexical step for execd: path (len bytes) into rel (rellen bytes), relative to
 * execd_cfg.root; a relative path is taken relative to the workspace. TK_EDENIED
 * with the rule in why otherwise. */
tk_status execd_fs_path_rel(const char *path, size_t len, char *rel, size_t rellen, char *why,
                            size_t whylen);

/* Checks a request path (len bytes) into rel (TK_PATHSAFE_PATH_MAX). On a refusal
 * responds 400 INVALID_PATH naming the rule and returns -1. */
int execd_fs_rel(tk_req *r, const char *path, size_t len, char *rel);

/* Answers for a tk_pathsafe_* failure: 400 (a rule), 404 (missing), 403 (a
 * read-only file system or no permission: errno EROFS, EACCES, EPERM) or 500. */
void execd_fs_fail(tk_req *r, tk_status st, const char *why);

/* The answer to a failed system call: 403 READ_ONLY_FILESYSTEM (EROFS: the
 * sandbox's image is read-only, as for any process), 403 PERMISSION_DENIED
 * (EACCES, EPERM), else 500 RUNTIME_ERROR. */
int execd_fs_errno_status(int e);
const char *execd_fs_errno_code(int e);

/* Every value of a repeated query parameter (?path=a&path=b), decoded, into
 * out (at most max); returns how many. The strings live in the request. */
size_t execd_fs_query_all(tk_req *r, const char *name, const char **out, size_t max);

/* The FileInfo of name in dirfd (not following a final symlink); display is
 * the absolute path shown. NULL with errno set when it cannot be stat'ed. */
json_t *execd_fs_info_at(int dirfd, const char *name, const char *display);

/* A Permission object {mode, owner, group}, parsed. mode is given as octal
 * digits written in decimal (755 means 0755); 0 means "leave it". */
typedef struct {
    int has_mode;
    mode_t mode;
    uid_t uid; /* (uid_t)-1: leave it */
    gid_t gid; /* (gid_t)-1: leave it */
} execd_perm;

/* Parses a Permission object; returns -1 with a message on a bad value or an
 * unknown user or group. */
int execd_fs_perm_parse(const json_t *p, execd_perm *out, char *err, size_t errlen);
/* Applies it to the inode fd refers to (an O_PATH fd is fine); -1 with errno
 * kept on failure (EPERM: execd's user may not give a file away). */
int execd_fs_perm_apply(int fd, const execd_perm *p, char *err, size_t errlen);

#endif
