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

typedef struct {
    const char *user_id;
    const char *session_id;
    const char *trigger;        /* why a spawn would happen, for the trace
                                   ("first write to /workspace this session") */
    const volatile int *cancel; /* optional: aborts waits and calls */
} sandbox_session;

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
} sandbox_spawn;

typedef struct {
    char id[TK_UUID_LEN]; /* our row */
    char remote_id[128];  /* the service's id */
    char user_id[TK_UUID_LEN];
    char session_id[TK_UUID_LEN];
    char *execd_url;        /* base URL of execd through the proxy (no trailing /) */
    char **headers;         /* "Name: value" for execd requests, NULL-terminated */
    char bash_session[128]; /* the chat's bash session ("" until made) */
    char code_context[128]; /* the chat's Python context ("" until made) */
    sandbox_spawn spawn;
    const volatile int *cancel;
    int gone; /* an operation found the sandbox gone (reaped); re-acquire */
} sandbox_handle;

/* Quota refusals carry these for the event and the tool result. */
typedef struct {
    int live, max;
} sandbox_quota;

/* The two entry points (the names the product uses). On TK_EDENIED from
 * getOrCreateOpenSandbox, quota (if not NULL) says live/max when it was the
 * quota; err says what happened either way. */
tk_status getOrCreateOpenSandbox(const sandbox_session *s, sandbox_handle *out,
                                 sandbox_quota *quota, char *err, size_t errlen);
tk_status getExistingOpenSandbox(const sandbox_session *s, sandbox_handle *out, char *err,
                                 size_t errlen);
void sandbox_handle_free(sandbox_handle *h);

/* Non-zero when the sandbox service is configured (both variables set). */
int sandbox_configured(void);

/* When an execd call failed in a way that may mean the sandbox is gone: asks
 * the service, and if the sandbox no longer runs marks it gone. Returns 1 when
 * it is gone (a write may then retry with getOrCreateOpenSandbox). */
int sandbox_check_gone(sandbox_handle *h);

/* Releases the chat's sandbox (the chat was deleted): deletes it remotely. */
void sandbox_release_session(const char *session_id);

/* Deletes every sandbox of the user at the service and marks it gone (their
 * account is being deleted). TK_OK once none is left; TK_ERROR (err says which
 * and why) at the first the service did not delete, or when the service is not
 * configured while the user has one. released counts the ones deleted. */
tk_status sandbox_release_user(PGconn *c, const char *user_id, int *released, char *err,
                               size_t errlen);

/* Reconciliation with the service (sandboxes it no longer has become gone;
 * sandboxes of deleted chats are deleted). Blocking; run it on a worker now and
 * then (app/agent_start.c does, every minute). */
void sandbox_sweep_now(void);

/* GET /api/sandboxes */
extern const tk_route sandbox_routes[];
extern const size_t sandbox_nroutes;

#endif
