/*
 * cmd.h — shell commands: POST /command (foreground, streamed; or background,
 * with capped logs), interrupt, status and logs.
 *
 * A command is `/bin/bash -c <command>` (the command is one argv element; no
 * other user value reaches a shell), in its own process group, with stdin from
 * /dev/null, the request's envs over execd's environment (minus EXECD_*), in a
 * working directory confined to the workspace, optionally as uid/gid.
 *
 * Each running command has one pump thread that reads its output, enforces its
 * timeout, carries out interrupts and reports the exit. Foreground output is
 * streamed as stdout/stderr events and never buffered whole: while the client
 * lags, the pipe is not read and the command blocks on its writes. Background
 * output (stdout and stderr together) is kept in a ring of EXECD_MAX_LOG_BYTES;
 * the oldest bytes are dropped first. Log cursors are byte offsets into the
 * command's whole output, as upstream's are.
 */
#ifndef EXECD_CMD_H
#define EXECD_CMD_H

#include "lib/httpd.h"

void execd_cmd_run(tk_req *r, void *ud);    /* POST /command */
void execd_cmd_status(tk_req *r, void *ud); /* GET /command/status/{id} */
void execd_cmd_logs(tk_req *r, void *ud);   /* GET /command/{id}/logs */
/* POST /code without a language: the code runs as a foreground command with
 * the defaults (upstream's "stateless" execution). */
void execd_cmd_run_code(tk_req *r, const char *command, size_t len);

/* Interrupts the command with that id: SIGTERM to its process group, SIGKILL to
 * whatever is left after EXECD_KILL_GRACE or once the leader exits.
 * 1: signalled; 0: no such command; -1: it is not running. */
int execd_cmd_interrupt(const char *id);

/* Running commands (for metrics and tests). */
size_t execd_cmd_running(void);

/* Kills every running command's process group and waits (up to timeout_ms) for
 * their pumps to finish. For shutdown. */
void execd_cmd_shutdown(int timeout_ms);

#endif
