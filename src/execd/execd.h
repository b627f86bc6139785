/*
 * execd.h — what the parts of tusko-execd share: the daemon's settings, the
 * root every request path is resolved beneath and the workspace, set once at
 * start-up and read-only afterwards.
 */
#ifndef EXECD_EXECD_H
#define EXECD_EXECD_H

#include <stdint.h>

#include "lib/pathsafe.h"

typedef struct {
    tk_pathsafe ws;          /* the workspace (opened once): where commands start and what
                                relative paths are relative to */
    tk_pathsafe root;        /* EXECD_ROOT (the sandbox's own "/"): what every request path is
                                resolved beneath unless confined (see execd_fs_root()) */
    _Atomic int confined;    /* EXECD_CONFINE=workspace or POST /confine: paths are resolved
                                beneath the workspace; never cleared once set */
    const char *python;      /* interpreter for code contexts */
    int64_t max_commands;    /* concurrently running commands (foreground + background) */
    int64_t max_sessions;    /* live bash sessions */
    int64_t max_contexts;    /* live code contexts (kernels) */
    int64_t max_upload;      /* bytes in one upload request */
    int64_t max_log;         /* bytes of output kept per background command */
    int64_t kill_grace_ms;   /* SIGTERM → SIGKILL escalation on interrupt */
    int64_t kernel_start_ms; /* how long a kernel may take to answer its first request */
} execd_config;

/* The daemon's configuration; valid for the whole life of the process. */
extern execd_config execd_cfg;

#endif
