/*
 * session.h — browserd's sessions: one Chromium each, a warm pool, ends.
 *
 * A session is one Chromium (brd_chrome) of its own with a profile folder of
 * its own (STATE_DIR/profiles/<hex>, 0700, owned by the browser's uid), the
 * CDP pipe to it, and one page target attached as a flattened session. The
 * manager keeps up to max_sessions live at once and pool_size more launched
 * ahead of any request (the warm pool, refilled by its background thread); a
 * create with the pool's settings (default size, no user agent) takes a ready
 * one, any other launches one ("cold").
 *
 * Ends: a release, the session's timeout (from its creation), its idle time
 * (no use for idle_ttl_ms), or its Chromium gone (crashed or killed: the
 * session is "failed"). Each end kills the browser's namespace and removes its
 * profile folder; the session's record stays (for GET) among the last
 * BRD_SESSION_HISTORY ended ones. brd_session_mgr_stop ends every session and
 * every pooled browser.
 *
 * Threads: every function may be called from any thread. A brd_session
 * returned by create or get is a reference: brd_session_unref when done; the
 * CDP client it holds stays valid (calls on an ended one fail TK_ECLOSED)
 * until the last reference goes.
 */
#ifndef BRD_SESSION_H
#define BRD_SESSION_H

#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>

#include "browserd/cdp.h"
#include "lib/common.h"
#include "lib/id.h"

#define BRD_SESSION_HISTORY        256
#define BRD_SESSION_DEFAULT_WIDTH  1280
#define BRD_SESSION_DEFAULT_HEIGHT 800

typedef struct brd_session_mgr brd_session_mgr;
typedef struct brd_session brd_session;

/* Hands a new browser's proxy listener (a listening socket in its network
 * namespace; the callee owns it from then on, even when it fails) to whatever
 * serves it; tag names the browser. Returns a handle given back to
 * on_proxy_end when that browser ends. NULL in the config: the listener is
 * closed, so the browser reaches nothing outside its namespace (its
 * connections are refused at once). */
typedef void *(*brd_session_proxy_fn)(int listen_fd, const char *tag, void *ud);
typedef void (*brd_session_proxy_end_fn)(void *handle, void *ud);

typedef struct {
    const char *chromium;  /* the executable */
    const char *state_dir; /* profiles/ is made under it (and emptied at start) */
    uid_t uid;             /* when browserd runs as root: the first of the browsers' uids/gids */
    gid_t gid;             /* (each browser its own: uid + n, n < max_sessions + pool_size + 4) */
    long max_procs;        /* RLIMIT_NPROC of each browser (0: none) */
    int max_sessions;
    int pool_size;
    int64_t idle_ttl_ms;        /* 0: no idle end */
    int64_t default_timeout_ms; /* a create without timeout */
    int64_t max_timeout_ms;
    int64_t launch_timeout_ms; /* a browser's start until its page answers */
    brd_session_proxy_fn on_proxy;
    brd_session_proxy_end_fn on_proxy_end;
    void *proxy_ud;
} brd_session_config;

typedef enum {
    BRD_SESSION_WARM,     /* in the pool */
    BRD_SESSION_LIVE,     /* a caller's */
    BRD_SESSION_RELEASED, /* ended by a release, a timeout or idleness */
    BRD_SESSION_FAILED,   /* its browser went away, or it could not start */
} brd_session_state;

/* Starts the manager and its pool thread. NULL with err (e.g. a state folder
 * that cannot be made). */
brd_session_mgr *brd_session_mgr_start(const brd_session_config *cfg, char *err, size_t errlen);
/* Ends every session and pooled browser, joins the thread, frees. */
void brd_session_mgr_stop(brd_session_mgr *m);

typedef struct {
    const char *id;         /* NULL: a new UUID */
    const char *user_agent; /* NULL: Chromium's */
    int width, height;      /* 0: the defaults */
    int64_t timeout_ms;     /* 0: the default */
    json_t *cookies;        /* borrowed; NULL or an array of CDP CookieParam objects */
} brd_session_req;

/* Creates a session. TK_OK with *out (a reference). Errors set *http and err:
 * 409 an id in use, 429 max_sessions reached, 400 cookies refused by the
 * browser, 503 stopping, 500 a browser that would not start. */
tk_status brd_session_create(brd_session_mgr *m, const brd_session_req *req, brd_session **out,
                             int *http, char *err, size_t errlen);
/* A session by id, live or among the ended ones kept (a reference), or NULL. */
brd_session *brd_session_get(brd_session_mgr *m, const char *id);
void brd_session_unref(brd_session *s);
/* Ends s now (status released). TK_OK, or TK_ENOENT when it had ended. */
tk_status brd_session_release(brd_session *s);
/* Ends every live session; returns how many. */
int brd_session_release_all(brd_session_mgr *m);
/* Marks s used now (its idle time starts again). */
void brd_session_touch(brd_session *s);

/* Steel's SessionDetails for s; host names browserd in the URLs given. */
json_t *brd_session_details(brd_session *s, const char *host);
/* A page of sessions, newest first: after the one named cursor (NULL: from
 * the first), at most limit, only those with status (NULL: any). Returns
 * {"sessions":[...],"nextCursor":id|null,"totalCount":n}. */
json_t *brd_session_list(brd_session_mgr *m, const char *cursor, int limit, const char *status,
                         const char *host);

/* Counts (for tests, metrics and /v1/health). */
typedef struct {
    int live, pool, ended, launching;
    int64_t launches, warm_takes, cold_starts, failed;
} brd_session_stats;
void brd_session_mgr_stats(brd_session_mgr *m, brd_session_stats *st);

/* --- what page actions use --- */

brd_session_state brd_session_status(brd_session *s);
const char *brd_session_id(const brd_session *s);
brd_cdp *brd_session_cdp(brd_session *s);
/* The page target's flattened session id. */
const char *brd_session_page(const brd_session *s);
/* The browser's pid as browserd sees it (0 once ended). */
pid_t brd_session_pid(brd_session *s);

/* Page actions on one session run one at a time: hold this around them. */
void brd_session_lock(brd_session *s);
void brd_session_unlock(brd_session *s);
/* The backend DOM node ids the last outline named @e1..@eN (lock held):
 * brd_session_set_refs takes ids (malloc'd); brd_session_ref gives the id of
 * @e<n>, or 0 when there is none. */
void brd_session_set_refs(brd_session *s, int64_t *ids, size_t n);
int64_t brd_session_ref(brd_session *s, size_t n);

/* Navigates the page to url and waits (until deadline_ms, tk_mono_ms time)
 * for its load event. TK_OK with *http_status (the main document's status, 0
 * when none, e.g. data: URLs); TK_ERROR with err for a navigation Chromium
 * refused (err has its errorText); TK_ETIMEOUT; TK_ECLOSED. */
tk_status brd_session_navigate(brd_session *s, const char *url, int64_t deadline_ms,
                               int *http_status, char *err, size_t errlen);

#endif
