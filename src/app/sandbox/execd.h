/*
 * execd.h — the sandbox client's operations on a handle: commands, code and
 * files in the chat's sandbox, through the lifecycle server's proxy to that
 * sandbox's execd (the OpenSandbox execd API). Handles come from sandbox.h.
 *
 * All calls block (HTTP): worker threads only.
 */
#ifndef APP_SANDBOX_EXECD_H
#define APP_SANDBOX_EXECD_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "app/sandbox/sandbox.h"
#include "lib/buf.h"
#include "lib/common.h"

typedef void (*sandbox_execd_output_fn)(void *ud, const char *stream, const char *text, size_t len);

typedef struct {
    int exit_code; /* -1 when unknown */
    int timed_out;
    int cancelled;
    int64_t duration_ms;
    tk_buf output; /* stdout and stderr interleaved, capped */
    int truncated;
    char error[512]; /* error name/value (code) or transport problem */
    json_t *results; /* execute_code: rich results ("text/plain", "image/png"...) */
    int restarted;   /* the shell / kernel had to be restarted: earlier state is gone */
} sandbox_execd_result;

void sandbox_execd_result_init(sandbox_execd_result *r, size_t cap);
void sandbox_execd_result_free(sandbox_execd_result *r);

/* Runs a command in the chat's persistent bash session (cd, exports and files
 * persist across turns). Output streams to on_out as it arrives. TK_OK when the
 * command ran (whatever its exit code), TK_ERROR on a failure (res->error),
 * TK_ECLOSED when cancelled (the command is interrupted). Any operation that
 * finds the sandbox gone sets h->gone and returns TK_ERROR. */
tk_status sandbox_execd_run_command(sandbox_handle *h, const char *command, long timeout_ms,
                                    sandbox_execd_output_fn on_out, void *ud,
                                    sandbox_execd_result *res);
/* Runs one command outside the chat's shell (its own process, cwd /workspace,
 * with the extra environment envs: an object of strings, borrowed), nothing
 * streamed; the shell's state is untouched. Same returns as run_command; a
 * timeout stops the command (res->timed_out). */
tk_status sandbox_execd_run_oneshot(sandbox_handle *h, const char *command, json_t *envs,
                                    long timeout_ms, sandbox_execd_result *res);
/* Runs Python in the chat's persistent kernel (variables and DataFrames persist). */
tk_status sandbox_execd_run_code(sandbox_handle *h, const char *code, long timeout_ms,
                                 sandbox_execd_output_fn on_out, void *ud,
                                 sandbox_execd_result *res);
/* Files: paths are absolute under /workspace (the tools check them first). */
tk_status sandbox_execd_write_file(sandbox_handle *h, const char *path, const void *data,
                                   size_t len, char *err, size_t errlen);
/* TK_ENOENT when the file does not exist; TK_ETOOBIG past max. */
tk_status sandbox_execd_read_file(sandbox_handle *h, const char *path, size_t max, tk_buf *out,
                                  char *err, size_t errlen);
/* The FileInfo array of a directory (depth as execd's /directories/list). */
tk_status sandbox_execd_list_dir(sandbox_handle *h, const char *path, int depth, json_t **out,
                                 char *err, size_t errlen);
/* The first max bytes of a file (a Range request); *truncated when there was
 * more. TK_ENOENT when the file does not exist. */
tk_status sandbox_execd_read_head(sandbox_handle *h, const char *path, size_t max, tk_buf *out,
                                  int *truncated, char *err, size_t errlen);
/* A file streamed to on_data as it arrives (never held whole); non-zero from
 * on_data stops it (TK_AGAIN). Note: on an error status on_data may have been
 * handed the error body. TK_ENOENT when the file does not exist. */
tk_status sandbox_execd_download(sandbox_handle *h, const char *path, long timeout_ms,
                                 int (*on_data)(const char *d, size_t n, void *ud), void *ud,
                                 char *err, size_t errlen);
/* FileInfo of one path (TK_ENOENT when absent). */
tk_status sandbox_execd_stat(sandbox_handle *h, const char *path, json_t **out, char *err,
                             size_t errlen);

#endif
