/*
 * cgroup.h — per-sandbox control groups: memory, pids and cpu limits, the
 * freezer (pause/resume), and killing and removing everything in a group.
 *
 * Both layouts are supported, detected once at start from mountinfo:
 * - v1 (this project's reference machine): one hierarchy per controller under
 *   /sys/fs/cgroup/<ctrl>; a sandbox gets <mount>/<group>/<name> in each of
 *   memory, pids, cpu and freezer.
 * - v2 (unified): <mount>/<group>/<name>, with memory, pids and cpu enabled in
 *   the subtree_control of the mount's root and of <group>.
 * <group> is the service's own parent group ("tusko-sandboxd.<hash>"), so two
 * services with different state directories never touch each other's groups.
 */
#ifndef SBX_CGROUP_H
#define SBX_CGROUP_H

#include <stddef.h>
#include <sys/types.h>

#include "lib/common.h"
#include "sandboxd/limits.h"

typedef struct sbx_cgroups sbx_cgroups;

/* Finds the hierarchies in mountinfo (NULL: /proc/self/mountinfo) and makes the
 * parent group. NULL with a message naming what is missing. */
sbx_cgroups *sbx_cgroup_open(const char *group, const char *mountinfo, char *err, size_t errlen);
/* Frees cg, removing the parent group when it is empty. */
void sbx_cgroup_close(sbx_cgroups *cg);
/* 1 or 2. */
int sbx_cgroup_version(const sbx_cgroups *cg);
/* "v1 (memory,pids,cpu,freezer)" or "v2 (/sys/fs/cgroup)". */
const char *sbx_cgroup_describe(const sbx_cgroups *cg);

/* Makes the group name with limits l. */
tk_status sbx_cgroup_create(sbx_cgroups *cg, const char *name, const sbx_limits *l, char *err,
                            size_t errlen);
tk_status sbx_cgroup_set_limits(sbx_cgroups *cg, const char *name, const sbx_limits *l, char *err,
                                size_t errlen);
/* v2: an O_PATH descriptor of the group's folder, for clone3(CLONE_INTO_CGROUP),
 * which starts a child in it with no migration. -1 on v1 or on failure. */
int sbx_cgroup_open_dir(const sbx_cgroups *cg, const char *name);
/* Moves pid into the group (every hierarchy). */
tk_status sbx_cgroup_attach(sbx_cgroups *cg, const char *name, pid_t pid, char *err, size_t errlen);
/* Freezes (1) or thaws (0) and waits until the kernel says it is done (at most
 * timeout_ms; TK_ETIMEOUT after). */
tk_status sbx_cgroup_freeze(sbx_cgroups *cg, const char *name, int frozen, long timeout_ms,
                            char *err, size_t errlen);
/* 1 when frozen, 0 when not, -1 when the group does not exist. */
int sbx_cgroup_frozen(sbx_cgroups *cg, const char *name);
/* Number of processes in the group (-1 when it does not exist). */
long sbx_cgroup_count(sbx_cgroups *cg, const char *name);
/* Sends SIGKILL to every process in the group (thawing it so they can die). */
void sbx_cgroup_kill_all(sbx_cgroups *cg, const char *name);
/* Kills what is left, waits until the group is empty (at most timeout_ms) and
 * removes it from every hierarchy. TK_OK also when it did not exist. */
tk_status sbx_cgroup_remove(sbx_cgroups *cg, const char *name, long timeout_ms, char *err,
                            size_t errlen);
/* Names of the groups under the parent group (heap array of heap strings). */
size_t sbx_cgroup_list(sbx_cgroups *cg, char ***names);
void sbx_cgroup_list_free(char **names, size_t n);
/* A file of the group in the hierarchy of ctrl ("memory", "pids", ...) into out,
 * for tests and diagnostics. */
tk_status sbx_cgroup_path(const sbx_cgroups *cg, const char *ctrl, const char *name,
                          const char *file, char *out, size_t outlen);

#endif
