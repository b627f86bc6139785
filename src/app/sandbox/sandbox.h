/*
 * sandbox.h — the sandbox client: the ONLY place in tusko that talks to the
 * sandbox service. It speaks the OpenSandbox lifecycle API to OPENSANDBOX_URL
 * (with OPENSANDBOX_API_KEY) and reaches each sandbox's execd through the
 * lifecycle server's proxy (endpoints/44772?use_server_proxy=true), so it works
 * against tusko-sandboxd and upstream OpenSandbox alike.
 *
 * Exactly two ways to get a sandbox, and every tool goes through one of them:
 *
 *   getOrCreateOpenSandbox(&s, &h, err, sizeof err)
 *       only for tools that write or execute. Reuses the chat's live sandbox or
 *       creates one (tagged with metadata app/user/session), after reserving a
 *       slot under MAX_SANDBOXES_PER_USER atomically in Postgres: over the
 *       limit it answers TK_EDENIED (a 429 quota error) and creates nothing.
 *   getExistingOpenSandbox(&s, &h, err, sizeof err)
 *       for every read (list_files, preview, downloads). It can never start a
 *       container: with no live sandbox it answers TK_ENOENT, "nothing here yet".
 *
 * Fail-closed: without both OPENSANDBOX_URL and OPENSANDBOX_API_KEY both answer
 * TK_EDENIED and nothing is contacted.
 *
 * A sandbox that the service reaped or lost is noticed (an execd call through
 * the proxy fails, or the periodic sweep no longer finds it): its row becomes
 * 'gone', reads then answer "nothing here yet", and the next write creates a
 * new one with h.spawn.replaced set, so the tool tells the user the old
 * workspace is gone.
 *
 * All calls block (HTTP and Postgres): worker threads only.
 */
#ifndef APP_SANDBOX_SANDBOX_H
#define APP_SANDBOX_SANDBOX_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/buf.h"
#include "lib/common.h"
#include "lib/httpd.h"
#include "lib/id.h"

#define SBX_EXECD_PORT 44772

typedef struct {
    const char *user_id;
    const char *session_id;
    const char *trigger;        /* why a spawn would happen, for the trace
                                   ("first write to /workspace this session") */
    const volatile int *cancel; /* optional: aborts waits and calls */
} sbx_session;

/* What a getOrCreateOpenSandbox call did when it created a sandbox. */
typedef struct {
    int created;           /* this call created the sandbox */
    int replaced;          /* ... because the chat's previous one was gone */
    char gone_reason[128]; /* why the previous one is gone */
    char pool[64];         /* "warm · native" or "cold" */
    int live, max;         /* quota after the spawn: live of max per user */
    int64_t started_ms;    /* wall clock */
    double duration_ms;    /* reserve + create + ready + endpoint */
    char remote_id[128];
} sbx_spawn;

typedef struct {
    char id[TK_UUID_LEN]; /* our row */
    char remote_id[128];  /* the service's id */
    char user_id[TK_UUID_LEN];
    char session_id[TK_UUID_LEN];
    char *execd_url;        /* base URL of execd through the proxy (no trailing /) */
    char **headers;         /* "Name: value" for execd requests, NULL-terminated */
    char bash_session[128]; /* the chat's bash session ("" until made) */
    char code_context[128]; /* the chat's Python context ("" until made) */
    sbx_spawn spawn;
    const volatile int *cancel;
    int gone; /* an operation found the sandbox gone (reaped); re-acquire */
} sbx_handle;

/* Quota refusals carry these for the event and the tool result. */
typedef struct {
    int live, max;
} sbx_quota;

/* The two entry points (the names the product uses). On TK_EDENIED from
 * getOrCreateOpenSandbox, quota (if not NULL) says live/max when it was the
 * quota; err says what happened either way. */
tk_status getOrCreateOpenSandbox(const sbx_session *s, sbx_handle *out, sbx_quota *quota, char *err,
                                 size_t errlen);
tk_status getExistingOpenSandbox(const sbx_session *s, sbx_handle *out, char *err, size_t errlen);
void sbx_handle_free(sbx_handle *h);

/* Non-zero when the sandbox service is configured (both variables set). */
int sbx_configured(void);

/* ---------- operations on a handle (execd through the proxy) ---------- */

typedef void (*sbx_output_fn)(void *ud, const char *stream, const char *text, size_t len);

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
} sbx_exec_result;

void sbx_exec_result_init(sbx_exec_result *r, size_t cap);
void sbx_exec_result_free(sbx_exec_result *r);

/* Runs a command in the chat's persistent bash session (cd, exports and files
 * persist across turns). Output streams to on_out as it arrives. TK_OK when the
 * command ran (whatever its exit code), TK_ERROR on a failure (res->error),
 * TK_ECLOSED when cancelled (the command is interrupted). Any operation that
 * finds the sandbox gone sets h->gone and returns TK_ERROR. */
tk_status sbx_run_command(sbx_handle *h, const char *command, long timeout_ms, sbx_output_fn on_out,
                          void *ud, sbx_exec_result *res);
/* Runs Python in the chat's persistent kernel (variables and DataFrames persist). */
tk_status sbx_run_code(sbx_handle *h, const char *code, long timeout_ms, sbx_output_fn on_out,
                       void *ud, sbx_exec_result *res);
/* Files: paths are absolute under /workspace (the tools check them first). */
tk_status sbx_write_file(sbx_handle *h, const char *path, const void *data, size_t len, char *err,
                         size_t errlen);
/* TK_ENOENT when the file does not exist; TK_ETOOBIG past max. */
tk_status sbx_read_file(sbx_handle *h, const char *path, size_t max, tk_buf *out, char *err,
                        size_t errlen);
/* The FileInfo array of a directory (depth as execd's /directories/list). */
tk_status sbx_list_dir(sbx_handle *h, const char *path, int depth, json_t **out, char *err,
                       size_t errlen);
/* The first max bytes of a file (a Range request); *truncated when there was
 * more. TK_ENOENT when the file does not exist. */
tk_status sbx_read_head(sbx_handle *h, const char *path, size_t max, tk_buf *out, int *truncated,
                        char *err, size_t errlen);
/* FileInfo of one path (TK_ENOENT when absent). */
tk_status sbx_stat(sbx_handle *h, const char *path, json_t **out, char *err, size_t errlen);

/* When an execd call failed in a way that may mean the sandbox is gone: asks
 * the service, and if the sandbox no longer runs marks it gone. Returns 1 when
 * it is gone (a write may then retry with getOrCreateOpenSandbox). */
int sbx_check_gone(sbx_handle *h);

/* Releases the chat's sandbox (the chat was deleted): deletes it remotely. */
void sbx_release_session(const char *session_id);

/* Reconciliation with the service (sandboxes it no longer has become gone;
 * sandboxes of deleted chats are deleted). Blocking; run it on a worker now and
 * then (agent.c does, every minute). */
void sbx_sweep_now(void);

/* GET /api/sandboxes */
extern const tk_route sbx_routes[];
extern const size_t sbx_nroutes;

#endif
