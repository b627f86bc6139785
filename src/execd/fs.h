/*
 * fs.h — what the file and directory endpoints share: turning request paths
 * into confined relative paths (answering 400 with the rule otherwise),
 * FileInfo objects, permissions, and errors.
 *
 * Every operation works on fds beneath the workspace root (lib/pathsafe): a
 * path string is checked once, lexically, and from then on only fds and single
 * path components are handed to the kernel. Writes never follow a symlink;
 * reads follow only symlinks that stay inside the workspace.
 */
#ifndef EXECD_FS_H
#define EXECD_FS_H

#include <jansson.h>
#include <stddef.h>
#include <sys/types.h>

#include "lib/httpd.h"
#include "lib/pathsafe.h"

/* Checks a request path (len bytes) into rel (TK_PATHSAFE_PATH_MAX). On a refusal
 * responds 400 INVALID_PATH naming the rule and returns -1. */
int execd_fs_rel(tk_req *r, const char *path, size_t len, char *rel);

/* Answers for a tk_pathsafe_* failure: 400 (a rule), 404 (missing) or 500. */
void execd_fs_fail(tk_req *r, tk_status st, const char *why);

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
/* Applies it to the inode fd refers to (an O_PATH fd is fine). */
int execd_fs_perm_apply(int fd, const execd_perm *p, char *err, size_t errlen);

#endif
