/*
 * browser.h — the browser client: the ONLY place in tusko that talks to the
 * browser service. It speaks the Steel API to STEEL_URL (header
 * steel-api-key: STEEL_API_KEY), so it works against tusko-browserd; the page
 * steps use browserd's POST /v1/sessions/{id}/actions.
 *
 * Exactly two ways to get a chat's browser, and every browser tool goes
 * through one of them:
 *
 *   browser_get_or_create(&s, &h, &quota, err, sizeof err)   (getOrCreateBrowser)
 *       only for a browse (a navigation). Reuses the chat's live browser or
 *       creates one, after reserving a slot under MAX_BROWSERS_PER_USER
 *       atomically in Postgres (tusko_browser_reserve): over the limit it
 *       answers TK_EDENIED (a 429 quota error) and creates nothing.
 *   browser_get_existing(&s, &h, err, sizeof err)
 *       for everything else (read, click, type, scroll, screenshot): never
 *       creates one; with no live browser it answers TK_ENOENT.
 *
 * Fail-closed: without both STEEL_URL and STEEL_API_KEY in the environment
 * both answer TK_EDENIED and nothing is contacted.
 *
 * A chat's browser ends when it was not used for BROWSER_IDLE_TTL (the sweep),
 * when the chat is deleted, or when the service ended it (its own timeout,
 * a crash): a step that finds it ended marks its row gone, and the next
 * browse starts a new one (h.spawn.replaced).
 *
 * All calls block (HTTP and Postgres): worker threads only.
 */
#ifndef APP_BROWSER_BROWSER_H
#define APP_BROWSER_BROWSER_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/common.h"
#include "lib/id.h"

typedef struct {
    const char *user_id;
    const char *session_id;
    const char *trigger;        /* why a spawn would happen, for the trace */
    const volatile int *cancel; /* optional */
} browser_session;

/* What a browser_get_or_create call did when it created a browser. */
typedef struct {
    int created;           /* this call created the browser */
    int replaced;          /* ... because the chat's previous one had ended */
    char gone_reason[128]; /* why the previous one ended */
    char pool[16];         /* "warm" or "cold" (the service's "pool") */
    int live, max;         /* quota after the spawn */
    int64_t started_ms;    /* wall clock */
    double duration_ms;    /* reserve + create */
} browser_spawn;

typedef struct {
    char id[TK_UUID_LEN]; /* our row */
    char remote_id[128];  /* the service's session id */
    browser_spawn spawn;
    const volatile int *cancel;
    int gone; /* a step found the session ended */
} browser_handle;

typedef struct {
    int live, max;
} browser_quota;

/* Non-zero when STEEL_URL and STEEL_API_KEY both came from the environment. */
int browser_configured(void);

tk_status browser_get_or_create(const browser_session *s, browser_handle *out, browser_quota *quota,
                                char *err, size_t errlen);
tk_status browser_get_existing(const browser_session *s, browser_handle *out, char *err,
                               size_t errlen);

/* Runs steps (a JSON array, borrowed) on the browser's page: TK_OK with
 * *answer = browserd's {ok, results, error?}; when the service says the
 * session has ended (404/409) the row is marked gone, h->gone set, and
 * TK_ENOENT returned; TK_ERROR with err otherwise. */
tk_status browser_actions(browser_handle *h, json_t *steps, json_t **answer, char *err,
                          size_t errlen);

/* Releases the chat's browser (the chat was deleted). */
void browser_release_session(const char *session_id);

/* Releases browsers unused for BROWSER_IDLE_TTL and those of deleted chats.
 * Blocking; app/agent_start.c runs it on a tool worker every few seconds. */
void browser_sweep_now(void);

/* Releases every browser of user_id at the browser service and marks its rows
 * gone (account deletion; no turn of the user may be running). Answers how many
 * remote sessions it released. */
int browser_release_user(PGconn *c, const char *user_id);

/* Live browsers of a user (for the quota's answers and tests). */
int browser_live_count(PGconn *c, const char *user_id);

#endif
