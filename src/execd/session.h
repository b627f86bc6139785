/*
 * session.h — bash sessions: POST /session, POST /session/{id}/run,
 * DELETE /session/{id}.
 *
 * One long-lived `bash --noprofile --norc` per session, so cd, variables,
 * exported variables and shell functions persist between runs (upstream starts
 * a new bash per run and carries only the environment and cwd across).
 *
 * Framing, without a user value ever spliced into a shell line: bash reads its
 * commands from a pipe (stdin) on which execd only ever writes fixed text. The
 * command of a run travels on a second pipe (fd 3), NUL-terminated (commands
 * cannot contain NUL), and is read by a helper into a variable that the fixed
 * line evals at top level (so declarations stay global). After it, a helper
 * prints a per-run random sentinel — also passed on fd 3 — on stdout and on
 * stderr, which delimits the run's output on both pipes, and reports the exit
 * status with a snapshot of the state (cwd, `export -p`, `declare -f`) on a
 * third pipe (fd 4).
 *
 * Interrupt and timeout kill the session's whole process group and start a new
 * shell restored from the last snapshot (cwd, exported variables, functions);
 * so does a run that exits the shell. Output written between runs (by
 * background jobs) is drained and discarded.
 */
#ifndef EXECD_SESSION_H
#define EXECD_SESSION_H

#include "lib/httpd.h"

void execd_session_create(tk_req *r, void *ud); /* POST /session */
void execd_session_run(tk_req *r, void *ud);    /* POST /session/{sessionId}/run */
void execd_session_delete(tk_req *r, void *ud); /* DELETE /session/{sessionId} */

/* Interrupts the running command of session id. 1: done; 0: no such session;
 * -1: nothing is running in it. */
int execd_session_interrupt(const char *id);

size_t execd_session_count(void);

/* Kills every session's shell and frees them (waits up to timeout_ms). */
void execd_session_shutdown(int timeout_ms);

#endif
