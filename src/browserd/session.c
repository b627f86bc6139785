/*
 * session.c — sessions, the warm pool and their ends (see session.h).
 *
 * Locking: the manager's mu guards every list, state, count and reference;
 * a session's emu guards its page-event ring (written on its CDP reader
 * thread). Nothing slow (a launch, a kill, a CDP call) runs under mu.
 */
#include "browserd/session.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "browserd/chrome.h"
#include "lib/cond.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/tktime.h"

#define LOAD_RING 8

typedef struct {
    char loader[64];
    int status; /* the document's HTTP status (0: not seen) */
    int loaded;
} load_slot;

struct brd_session {
    brd_session_mgr *m;
    /* set at launch */
    char tag[24];
    int slot; /* its uid is cfg.uid + slot (-1: none held) */
    char dir[PATH_MAX];
    brd_chrome ch;
    brd_cdp *cdp;
    void *proxy; /* on_proxy's handle */
    char *page_sid;
    char *user_agent; /* as asked, or Chromium's own */
    int custom_ua;
    int width, height;
    /* set when it becomes a caller's (under mu) */
    char id[TK_UUID_LEN];
    int warm;
    int64_t created_ms, ended_ms, timeout_ms;
    int64_t used_mono;
    brd_session_state state;
    int refs;
    int gone;   /* the browser went away (on_gone) */
    int killed; /* its browser was ended by us */
    brd_session *next;
    /* page actions, one at a time */
    pthread_mutex_t amu;
    int64_t *el_refs; /* the last outline's @eN */
    size_t nel_refs;
    /* page events */
    pthread_mutex_t emu;
    pthread_cond_t ecv;
    load_slot ring[LOAD_RING];
    unsigned ring_next;
};

struct brd_session_mgr {
    brd_session_config cfg;
    char profiles[PATH_MAX];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int stopping;
    brd_session *live;  /* newest first */
    brd_session *pool;  /* ready browsers */
    brd_session *ended; /* newest first, at most BRD_SESSION_HISTORY */
    int nlive, npool, nended, creating, launching;
    brd_session_stats stats;
    unsigned seq;
    /* uid slots: each browser runs as a uid of its own, so its process limit
     * (RLIMIT_NPROC, counted per uid) is its own */
    unsigned char *slots;
    int nslots;
};

/* ---------- page events (reader thread) ---------- */

static load_slot *slot_for_locked(brd_session *s, const char *loader, int make)
{
    for (int i = 0; i < LOAD_RING; i++)
        if (s->ring[i].loader[0] && strcmp(s->ring[i].loader, loader) == 0)
            return &s->ring[i];
    if (!make)
        return NULL;
    load_slot *sl = &s->ring[s->ring_next++ % LOAD_RING];
    memset(sl, 0, sizeof *sl);
    snprintf(sl->loader, sizeof sl->loader, "%s", loader);
    return sl;
}

static void on_event(const brd_cdp_msg *msg, const char *raw, size_t len, void *ud)
{
    brd_session *s = ud;
    if (!msg->session_id || !s->page_sid || strcmp(msg->session_id, s->page_sid) != 0)
        return;
    const char *loader = tk_json_str(msg->params, "loaderId");
    if (strcmp(msg->method, "Page.lifecycleEvent") == 0) {
        const char *name = tk_json_str(msg->params, "name");
        if (!loader || !name || strcmp(name, "load") != 0)
            return;
        pthread_mutex_lock(&s->emu);
        slot_for_locked(s, loader, 1)->loaded = 1;
        pthread_cond_broadcast(&s->ecv);
        pthread_mutex_unlock(&s->emu);
    } else if (strcmp(msg->method, "Network.responseReceived") == 0) {
        const char *type = tk_json_str(msg->params, "type");
        json_t *resp = json_object_get(msg->params, "response");
        if (!loader || !type || strcmp(type, "Document") != 0 || !json_is_object(resp))
            return;
        pthread_mutex_lock(&s->emu);
        slot_for_locked(s, loader, 1)->status = (int)tk_json_int_or(resp, "status", 0);
        pthread_mutex_unlock(&s->emu);
    } else if (strcmp(msg->method, "Page.javascriptDialogOpening") == 0) {
        /* nobody is there to answer a dialog: dismiss it so the page goes on */
        brd_cdp_send(s->cdp, s->page_sid, "Page.handleJavaScriptDialog",
                     tk_json_obj("accept", json_false(), NULL), NULL, NULL);
    }
}

static void on_gone(void *ud)
{
    brd_session *s = ud;
    brd_session_mgr *m = s->m;
    pthread_mutex_lock(&s->emu);
    pthread_cond_broadcast(&s->ecv);
    pthread_mutex_unlock(&s->emu);
    pthread_mutex_lock(&m->mu);
    s->gone = 1;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
}

/* ---------- one browser ---------- */

static void free_session(brd_session *s)
{
    if (s->cdp)
        brd_cdp_close(s->cdp);
    free(s->page_sid);
    free(s->user_agent);
    free(s->el_refs);
    pthread_mutex_destroy(&s->amu);
    pthread_cond_destroy(&s->ecv);
    pthread_mutex_destroy(&s->emu);
    free(s);
}

/* Kills the browser and removes its profile (idempotent; not under mu). */
static void kill_browser(brd_session *s)
{
    brd_session_mgr *m = s->m;
    pthread_mutex_lock(&m->mu);
    int first = !s->killed;
    s->killed = 1;
    pthread_mutex_unlock(&m->mu);
    if (!first)
        return;
    brd_chrome_kill(&s->ch);
    if (s->ch.proxy_fd >= 0)
        close(s->ch.proxy_fd);
    s->ch.proxy_fd = -1;
    if (m->cfg.on_proxy_end && s->proxy)
        m->cfg.on_proxy_end(s->proxy, m->cfg.proxy_ud);
    s->proxy = NULL;
    if (s->slot >= 0) {
        pthread_mutex_lock(&m->mu);
        m->slots[s->slot] = 0;
        pthread_mutex_unlock(&m->mu);
        s->slot = -1;
    }
    if (!s->dir[0])
        return;
    /* the namespace's last processes may still be closing files: try again */
    for (int i = 0; i < 20 && brd_chrome_rm_tree(s->dir) != TK_OK; i++)
        tk_sleep_ms(25);
    if (access(s->dir, F_OK) == 0)
        tk_warn("session", "msg=\"could not remove a profile\" dir=%s err=\"%s\"", s->dir,
                strerror(errno));
}

static tk_status call(brd_session *s, const char *session, const char *method, json_t *params,
                      int64_t deadline, json_t **res, char *err, size_t errlen)
{
    int64_t left = deadline - tk_mono_ms();
    json_t *r = NULL;
    tk_status st =
        brd_cdp_call(s->cdp, session, method, params, left > 1 ? left : 1, &r, err, errlen);
    if (res)
        *res = r;
    else
        json_decref(r);
    return st;
}

/* Finds the browser's first page and attaches to it (flattened). */
static tk_status attach_page(brd_session *s, int64_t deadline, char *err, size_t errlen)
{
    char *target = NULL;
    while (!target) {
        json_t *r;
        tk_status st = call(s, NULL, "Target.getTargets", NULL, deadline, &r, err, errlen);
        if (st != TK_OK)
            return st;
        size_t i;
        json_t *t;
        json_array_foreach(json_object_get(r, "targetInfos"), i, t)
        {
            const char *type = tk_json_str(t, "type"), *id = tk_json_str(t, "targetId");
            if (type && id && strcmp(type, "page") == 0) {
                target = tk_strdup(id);
                break;
            }
        }
        json_decref(r);
        if (target)
            break;
        if (tk_mono_ms() + 50 > deadline) {
            /* no first tab came up: make one */
            st = call(s, NULL, "Target.createTarget",
                      tk_json_obj("url", json_string("about:blank"), NULL), deadline + 5000, &r,
                      err, errlen);
            if (st != TK_OK)
                return st;
            target = tk_strdup(tk_json_str_or(r, "targetId", ""));
            json_decref(r);
            break;
        }
        tk_sleep_ms(20);
    }
    json_t *r;
    tk_status st = call(s, NULL, "Target.attachToTarget",
                        tk_json_obj("targetId", json_string(target), "flatten", json_true(), NULL),
                        deadline, &r, err, errlen);
    free(target);
    if (st != TK_OK)
        return st;
    const char *sid = tk_json_str(r, "sessionId");
    if (!sid) {
        json_decref(r);
        snprintf(err, errlen, "Target.attachToTarget gave no sessionId");
        return TK_ERROR;
    }
    s->page_sid = tk_strdup(sid);
    json_decref(r);
    static const char *const enable[] = {"Page.enable", "Network.enable"};
    for (size_t i = 0; i < TK_ARRAY_LEN(enable); i++)
        if ((st = call(s, s->page_sid, enable[i], NULL, deadline, NULL, err, errlen)) != TK_OK)
            return st;
    /* the page's viewport is the session's dimensions (the window has its frame) */
    st = call(s, s->page_sid, "Emulation.setDeviceMetricsOverride",
              tk_json_obj("width", json_integer(s->width), "height", json_integer(s->height),
                          "deviceScaleFactor", json_integer(1), "mobile", json_false(), NULL),
              deadline, NULL, err, errlen);
    if (st != TK_OK)
        return st;
    return call(s, s->page_sid, "Page.setLifecycleEventsEnabled",
                tk_json_obj("enabled", json_true(), NULL), deadline, NULL, err, errlen);
}

/* Launches one browser with its page ready. NULL with err. */
static brd_session *launch(brd_session_mgr *m, const char *user_agent, int width, int height,
                           char *err, size_t errlen)
{
    brd_session *s = tk_calloc(1, sizeof *s);
    s->m = m;
    s->ch.proxy_fd = -1;
    s->width = width;
    s->height = height;
    pthread_mutex_init(&s->emu, NULL);
    pthread_mutex_init(&s->amu, NULL);
    pthread_cond_init(&s->ecv, NULL);
    char hex[17];
    tk_token_hex(hex, 8);
    pthread_mutex_lock(&m->mu);
    snprintf(s->tag, sizeof s->tag, "b%u-%.8s", ++m->seq, hex);
    m->stats.launches++;
    s->slot = -1;
    for (int i = 0; i < m->nslots && s->slot < 0; i++)
        if (!m->slots[i]) {
            m->slots[i] = 1;
            s->slot = i;
        }
    pthread_mutex_unlock(&m->mu);
    if (s->slot < 0) {
        snprintf(err, errlen, "no browser uid is free (%d in use)", m->nslots);
        s->killed = 1;
        free_session(s);
        return NULL;
    }
    uid_t uid = m->cfg.uid + (uid_t)s->slot;
    gid_t gid = m->cfg.gid + (gid_t)s->slot;
    snprintf(s->dir, sizeof s->dir, "%s/%s", m->profiles, s->tag);
    int root = geteuid() == 0;
    if (mkdir(s->dir, 0700) != 0 || (root && chown(s->dir, uid, gid) != 0)) {
        snprintf(err, errlen, "making the profile %s: %s", s->dir, strerror(errno));
        s->dir[0] = '\0';
        kill_browser(s);
        free_session(s);
        return NULL;
    }
    brd_chrome_config cc = {.chromium = m->cfg.chromium,
                            .profile_dir = s->dir,
                            .log_path = NULL,
                            .isolate = 1,
                            .uid = uid,
                            .gid = gid,
                            .start_timeout_ms = m->cfg.launch_timeout_ms,
                            .max_procs = m->cfg.max_procs,
                            .width = width,
                            .height = height,
                            .user_agent = user_agent,
                            .headless = 1};
    int64_t deadline = tk_mono_ms() + m->cfg.launch_timeout_ms;
    if (brd_chrome_start(&cc, &s->ch, err, errlen) != TK_OK) {
        kill_browser(s);
        free_session(s);
        return NULL;
    }
    if (m->cfg.on_proxy) {
        s->proxy = m->cfg.on_proxy(s->ch.proxy_fd, s->tag, m->cfg.proxy_ud);
        s->ch.proxy_fd = -1;
    } else if (s->ch.proxy_fd >= 0) {
        close(s->ch.proxy_fd);
        s->ch.proxy_fd = -1;
    }
    brd_cdp_config ccfg = {
        .wfd = s->ch.wfd, .rfd = s->ch.rfd, .on_event = on_event, .on_gone = on_gone, .ud = s};
    s->cdp = brd_cdp_open(&ccfg);
    json_t *r = NULL;
    tk_status st = call(s, NULL, "Browser.getVersion", NULL, deadline, &r, err, errlen);
    if (st == TK_OK) {
        s->user_agent = tk_strdup(user_agent ? user_agent : tk_json_str_or(r, "userAgent", ""));
        s->custom_ua = user_agent != NULL;
        json_decref(r);
        st = attach_page(s, deadline, err, errlen);
    }
    if (st != TK_OK) {
        kill_browser(s);
        free_session(s);
        return NULL;
    }
    return s;
}

/* ---------- the manager ---------- */

static void unlink_from(brd_session **list, brd_session *s)
{
    for (brd_session **p = list; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            s->next = NULL;
            return;
        }
}

/* Moves a live session to the ended list (mu held); returns 1 if it was live.
 * The caller kills its browser afterwards (outside mu). */
static int end_locked(brd_session_mgr *m, brd_session *s, brd_session_state how)
{
    if (s->state != BRD_SESSION_LIVE)
        return 0;
    unlink_from(&m->live, s);
    m->nlive--;
    s->state = how;
    s->ended_ms = tk_now_ms();
    if (how == BRD_SESSION_FAILED)
        m->stats.failed++;
    s->next = m->ended;
    m->ended = s;
    m->nended++;
    /* the record of the oldest ended one goes once over the history's size */
    if (m->nended > BRD_SESSION_HISTORY) {
        brd_session **p = &m->ended;
        while ((*p)->next)
            p = &(*p)->next;
        brd_session *old = *p;
        *p = NULL;
        m->nended--;
        if (--old->refs == 0) {
            pthread_mutex_unlock(&m->mu);
            free_session(old);
            pthread_mutex_lock(&m->mu);
        }
    }
    return 1;
}

static void end_session(brd_session *s, brd_session_state how, const char *why)
{
    brd_session_mgr *m = s->m;
    pthread_mutex_lock(&m->mu);
    int was = end_locked(m, s, how);
    if (was)
        s->refs++; /* held while its browser is killed */
    pthread_mutex_unlock(&m->mu);
    if (!was)
        return;
    tk_info("session", "msg=\"ended\" id=%s why=%s browser=%s", s->id, why, s->tag);
    kill_browser(s);
    brd_session_unref(s);
}

static void *pool_main(void *arg)
{
    brd_session_mgr *m = arg;
    pthread_mutex_lock(&m->mu);
    while (!m->stopping) {
        int64_t now = tk_now_ms(), mono = tk_mono_ms();
        /* one end at a time, so the list is walked again afresh */
        brd_session *end = NULL;
        const char *why = NULL;
        brd_session_state how = BRD_SESSION_RELEASED;
        for (brd_session *s = m->live; s && !end; s = s->next) {
            if (s->gone) {
                end = s, why = "browser-gone", how = BRD_SESSION_FAILED;
            } else if (now >= s->created_ms + s->timeout_ms) {
                end = s, why = "timeout";
            } else if (m->cfg.idle_ttl_ms > 0 && mono >= s->used_mono + m->cfg.idle_ttl_ms) {
                end = s, why = "idle";
            }
        }
        if (end) {
            pthread_mutex_unlock(&m->mu);
            end_session(end, how, why);
            pthread_mutex_lock(&m->mu);
            continue;
        }
        /* a pooled browser that went away is dropped */
        brd_session *dead = NULL;
        for (brd_session *s = m->pool; s && !dead; s = s->next)
            if (s->gone)
                dead = s;
        if (dead) {
            unlink_from(&m->pool, dead);
            m->npool--;
            pthread_mutex_unlock(&m->mu);
            tk_warn("session", "msg=\"a pooled browser went away\" browser=%s", dead->tag);
            kill_browser(dead);
            free_session(dead);
            pthread_mutex_lock(&m->mu);
            continue;
        }
        if (m->npool + m->launching < m->cfg.pool_size) {
            m->launching++;
            pthread_mutex_unlock(&m->mu);
            char err[256];
            brd_session *s = launch(m, NULL, BRD_SESSION_DEFAULT_WIDTH, BRD_SESSION_DEFAULT_HEIGHT,
                                    err, sizeof err);
            pthread_mutex_lock(&m->mu);
            m->launching--;
            if (!s) {
                tk_warn("session", "msg=\"a pool browser did not start\" err=\"%s\"", err);
                /* do not spin on a browser that cannot start */
                tk_cond_wait_until(&m->cv, &m->mu, tk_mono_ms() + 2000);
                continue;
            }
            if (m->stopping) {
                pthread_mutex_unlock(&m->mu);
                kill_browser(s);
                free_session(s);
                pthread_mutex_lock(&m->mu);
                break;
            }
            s->state = BRD_SESSION_WARM;
            s->next = m->pool;
            m->pool = s;
            m->npool++;
            pthread_cond_broadcast(&m->cv);
            continue;
        }
        /* next due: the soonest timeout or idle end, at most a second away */
        int64_t wake = mono + 1000;
        for (brd_session *s = m->live; s; s = s->next) {
            int64_t t = mono + (s->created_ms + s->timeout_ms - now);
            if (t < wake)
                wake = t;
            if (m->cfg.idle_ttl_ms > 0 && s->used_mono + m->cfg.idle_ttl_ms < wake)
                wake = s->used_mono + m->cfg.idle_ttl_ms;
        }
        tk_cond_wait_until(&m->cv, &m->mu, wake < mono + 5 ? mono + 5 : wake);
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

brd_session_mgr *brd_session_mgr_start(const brd_session_config *cfg, char *err, size_t errlen)
{
    brd_session_mgr *m = tk_calloc(1, sizeof *m);
    m->cfg = *cfg;
    if (m->cfg.launch_timeout_ms <= 0)
        m->cfg.launch_timeout_ms = 20000;
    if (m->cfg.default_timeout_ms <= 0)
        m->cfg.default_timeout_ms = 300000;
    if (m->cfg.max_timeout_ms < m->cfg.default_timeout_ms)
        m->cfg.max_timeout_ms = m->cfg.default_timeout_ms;
    snprintf(m->profiles, sizeof m->profiles, "%s/profiles", cfg->state_dir);
    if (mkdir(cfg->state_dir, 0711) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "making %s: %s", cfg->state_dir, strerror(errno));
        free(m);
        return NULL;
    }
    /* profiles left by a browserd that did not stop cleanly go first */
    if (brd_chrome_rm_tree(m->profiles) != TK_OK ||
        (mkdir(m->profiles, 0711) != 0 && errno != EEXIST)) {
        snprintf(err, errlen, "making %s: %s", m->profiles, strerror(errno));
        free(m);
        return NULL;
    }
    chmod(cfg->state_dir, 0711);
    chmod(m->profiles, 0711);
    m->nslots = m->cfg.max_sessions + m->cfg.pool_size + 4;
    m->slots = tk_calloc((size_t)m->nslots, 1);
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->cv, NULL);
    if (pthread_create(&m->thread, NULL, pool_main, m) != 0)
        tk_oom();
    return m;
}

void brd_session_mgr_stop(brd_session_mgr *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    m->stopping = 1;
    pthread_cond_broadcast(&m->cv);
    /* creates under way finish (their browsers are ended below) */
    while (m->creating > 0)
        pthread_cond_wait(&m->cv, &m->mu);
    pthread_mutex_unlock(&m->mu);
    pthread_join(m->thread, NULL);
    brd_session_release_all(m);
    pthread_mutex_lock(&m->mu);
    while (m->pool) {
        brd_session *s = m->pool;
        m->pool = s->next;
        m->npool--;
        pthread_mutex_unlock(&m->mu);
        kill_browser(s);
        free_session(s);
        pthread_mutex_lock(&m->mu);
    }
    while (m->ended) {
        brd_session *s = m->ended;
        m->ended = s->next;
        m->nended--;
        if (--s->refs == 0) {
            pthread_mutex_unlock(&m->mu);
            free_session(s);
            pthread_mutex_lock(&m->mu);
        }
    }
    pthread_mutex_unlock(&m->mu);
    brd_chrome_rm_tree(m->profiles);
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    free(m->slots);
    free(m);
}

static brd_session *find_locked(brd_session *list, const char *id)
{
    for (brd_session *s = list; s; s = s->next)
        if (strcmp(s->id, id) == 0)
            return s;
    return NULL;
}

static tk_status set_cookies(brd_session *s, json_t *cookies, int64_t deadline, char *err,
                             size_t errlen)
{
    if (!cookies || json_array_size(cookies) == 0)
        return TK_OK;
    return call(s, NULL, "Storage.setCookies", tk_json_obj("cookies", json_incref(cookies), NULL),
                deadline, NULL, err, errlen);
}

tk_status brd_session_create(brd_session_mgr *m, const brd_session_req *req, brd_session **out,
                             int *http, char *err, size_t errlen)
{
    *out = NULL;
    char id[TK_UUID_LEN];
    if (req->id)
        snprintf(id, sizeof id, "%s", req->id);
    else
        tk_uuid4(id);
    int width = req->width > 0 ? req->width : BRD_SESSION_DEFAULT_WIDTH;
    int height = req->height > 0 ? req->height : BRD_SESSION_DEFAULT_HEIGHT;
    int64_t timeout = req->timeout_ms > 0 ? req->timeout_ms : m->cfg.default_timeout_ms;
    pthread_mutex_lock(&m->mu);
    if (m->stopping) {
        pthread_mutex_unlock(&m->mu);
        *http = 503;
        snprintf(err, errlen, "the service is stopping");
        return TK_ECLOSED;
    }
    if (find_locked(m->live, id) || find_locked(m->ended, id)) {
        pthread_mutex_unlock(&m->mu);
        *http = 409;
        snprintf(err, errlen, "a session with id %s exists", id);
        return TK_EDENIED;
    }
    if (m->nlive + m->creating >= m->cfg.max_sessions) {
        pthread_mutex_unlock(&m->mu);
        *http = 429;
        snprintf(err, errlen, "%d sessions are live, the most this service holds (%s)",
                 m->cfg.max_sessions, "BROWSERD_MAX_SESSIONS");
        return TK_AGAIN;
    }
    m->creating++;
    brd_session *s = NULL;
    int pooled = !req->user_agent && width == BRD_SESSION_DEFAULT_WIDTH &&
                 height == BRD_SESSION_DEFAULT_HEIGHT;
    if (pooled) {
        for (brd_session **p = &m->pool; *p; p = &(*p)->next)
            if (!(*p)->gone) {
                s = *p;
                *p = s->next;
                s->next = NULL;
                m->npool--;
                s->warm = 1;
                m->stats.warm_takes++;
                break;
            }
        pthread_cond_broadcast(&m->cv); /* the pool thread refills */
    }
    if (!s)
        m->stats.cold_starts++;
    pthread_mutex_unlock(&m->mu);
    tk_status st = TK_OK;
    if (!s) {
        s = launch(m, req->user_agent, width, height, err, errlen);
        if (!s) {
            *http = 500;
            st = TK_ERROR;
        }
    }
    if (s) {
        st = set_cookies(s, req->cookies, tk_mono_ms() + 10000, err, errlen);
        if (st != TK_OK) {
            *http = st == TK_ERROR ? 400 : 500;
            kill_browser(s);
            free_session(s);
            s = NULL;
        }
    }
    pthread_mutex_lock(&m->mu);
    m->creating--;
    if (s) {
        snprintf(s->id, sizeof s->id, "%s", id);
        s->created_ms = tk_now_ms();
        s->used_mono = tk_mono_ms();
        s->timeout_ms = timeout;
        s->state = BRD_SESSION_LIVE;
        s->refs = 2; /* the live list's and the caller's */
        s->next = m->live;
        m->live = s;
        m->nlive++;
    }
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
    if (!s)
        return st;
    tk_info("session", "msg=\"created\" id=%s browser=%s pool=%s", s->id, s->tag,
            s->warm ? "warm" : "cold");
    *out = s;
    return TK_OK;
}

brd_session *brd_session_get(brd_session_mgr *m, const char *id)
{
    pthread_mutex_lock(&m->mu);
    brd_session *s = find_locked(m->live, id);
    if (!s)
        s = find_locked(m->ended, id);
    if (s)
        s->refs++;
    pthread_mutex_unlock(&m->mu);
    return s;
}

void brd_session_unref(brd_session *s)
{
    if (!s)
        return;
    brd_session_mgr *m = s->m;
    pthread_mutex_lock(&m->mu);
    int last = --s->refs == 0;
    pthread_mutex_unlock(&m->mu);
    if (last)
        free_session(s);
}

tk_status brd_session_release(brd_session *s)
{
    brd_session_mgr *m = s->m;
    pthread_mutex_lock(&m->mu);
    int live = s->state == BRD_SESSION_LIVE;
    pthread_mutex_unlock(&m->mu);
    if (!live)
        return TK_ENOENT;
    end_session(s, BRD_SESSION_RELEASED, "release");
    return TK_OK;
}

int brd_session_release_all(brd_session_mgr *m)
{
    int n = 0;
    for (;;) {
        pthread_mutex_lock(&m->mu);
        brd_session *s = m->live;
        if (s)
            s->refs++;
        pthread_mutex_unlock(&m->mu);
        if (!s)
            return n;
        end_session(s, BRD_SESSION_RELEASED, "release");
        brd_session_unref(s);
        n++;
    }
}

void brd_session_touch(brd_session *s)
{
    pthread_mutex_lock(&s->m->mu);
    s->used_mono = tk_mono_ms();
    pthread_mutex_unlock(&s->m->mu);
}

static const char *state_name(brd_session_state st)
{
    switch (st) {
    case BRD_SESSION_LIVE:
        return "live";
    case BRD_SESSION_RELEASED:
        return "released";
    case BRD_SESSION_FAILED:
        return "failed";
    case BRD_SESSION_WARM:
        break;
    }
    return "idle";
}

static json_t *details_locked(brd_session *s, const char *host)
{
    char created[40];
    tk_time_rfc3339(s->created_ms, created, sizeof created);
    int64_t end = s->state == BRD_SESSION_LIVE ? tk_now_ms() : s->ended_ms;
    char *ws = tk_asprintf("ws://%s/v1/sessions/%s/cdp", host, s->id);
    char *debug = tk_asprintf("http://%s/v1/sessions/%s/cast", host, s->id);
    char *viewer = tk_asprintf("http://%s/v1/sessions/%s", host, s->id);
    json_t *j = tk_json_obj(
        "id", json_string(s->id), "createdAt", json_string(created), "status",
        json_string(state_name(s->state)), "duration", json_integer(end - s->created_ms),
        "eventCount", json_integer(0), "dimensions",
        tk_json_obj("width", json_integer(s->width), "height", json_integer(s->height), NULL),
        "timeout", json_integer(s->timeout_ms), "creditsUsed", json_integer(0), "websocketUrl",
        json_string(ws), "debugUrl", json_string(debug), "sessionViewerUrl", json_string(viewer),
        "userAgent", json_string(s->user_agent ? s->user_agent : ""), "proxyBytesUsed",
        json_integer(0), "proxySource", json_null(), "optimizeBandwidth", json_object(), "headless",
        json_true(), "isSelenium", json_false(), "solveCaptcha", json_false(), "deviceConfig",
        tk_json_obj("device", json_string("desktop"), NULL), "pool",
        json_string(s->warm ? "warm" : "cold"), NULL);
    free(ws);
    free(debug);
    free(viewer);
    return j;
}

json_t *brd_session_details(brd_session *s, const char *host)
{
    pthread_mutex_lock(&s->m->mu);
    json_t *j = details_locked(s, host);
    pthread_mutex_unlock(&s->m->mu);
    return j;
}

static int created_after(const brd_session *a, const brd_session *b)
{
    return a->created_ms > b->created_ms ||
           (a->created_ms == b->created_ms && strcmp(a->id, b->id) > 0);
}

json_t *brd_session_list(brd_session_mgr *m, const char *cursor, int limit, const char *status,
                         const char *host)
{
    json_t *arr = json_array();
    pthread_mutex_lock(&m->mu);
    /* both lists are newest first: merged by creation time */
    brd_session *a = m->live, *b = m->ended;
    int total = 0, started = !cursor || !cursor[0], more = 0;
    while (a || b) {
        brd_session *s;
        if (a && (!b || created_after(a, b)))
            s = a, a = a->next;
        else
            s = b, b = b->next;
        if (status && strcmp(state_name(s->state), status) != 0)
            continue;
        total++;
        if (!started) {
            started = strcmp(s->id, cursor) == 0;
            continue;
        }
        if ((int)json_array_size(arr) < limit)
            json_array_append_new(arr, details_locked(s, host));
        else
            more = 1;
    }
    json_t *last =
        more ? json_object_get(json_array_get(arr, json_array_size(arr) - 1), "id") : NULL;
    json_t *j = tk_json_obj("sessions", arr, "nextCursor", last ? json_incref(last) : json_null(),
                            "totalCount", json_integer(total), NULL);
    pthread_mutex_unlock(&m->mu);
    return j;
}

void brd_session_mgr_stats(brd_session_mgr *m, brd_session_stats *st)
{
    pthread_mutex_lock(&m->mu);
    *st = m->stats;
    st->live = m->nlive;
    st->pool = m->npool;
    st->ended = m->nended;
    st->launching = m->launching;
    pthread_mutex_unlock(&m->mu);
}

brd_session_state brd_session_status(brd_session *s)
{
    pthread_mutex_lock(&s->m->mu);
    brd_session_state st = s->state;
    pthread_mutex_unlock(&s->m->mu);
    return st;
}

const char *brd_session_id(const brd_session *s)
{
    return s->id;
}

brd_cdp *brd_session_cdp(brd_session *s)
{
    return s->cdp;
}

const char *brd_session_page(const brd_session *s)
{
    return s->page_sid;
}

pid_t brd_session_pid(brd_session *s)
{
    pthread_mutex_lock(&s->m->mu);
    pid_t p = s->killed ? 0 : s->ch.pid;
    pthread_mutex_unlock(&s->m->mu);
    return p;
}

void brd_session_lock(brd_session *s)
{
    pthread_mutex_lock(&s->amu);
}

void brd_session_unlock(brd_session *s)
{
    pthread_mutex_unlock(&s->amu);
}

void brd_session_set_refs(brd_session *s, int64_t *ids, size_t n)
{
    free(s->el_refs);
    s->el_refs = ids;
    s->nel_refs = n;
}

int64_t brd_session_ref(brd_session *s, size_t n)
{
    return n >= 1 && n <= s->nel_refs ? s->el_refs[n - 1] : 0;
}

tk_status brd_session_navigate(brd_session *s, const char *url, int64_t deadline_ms,
                               int *http_status, char *err, size_t errlen)
{
    *http_status = 0;
    json_t *r;
    tk_status st = call(s, s->page_sid, "Page.navigate", tk_json_obj("url", json_string(url), NULL),
                        deadline_ms, &r, err, errlen);
    if (st != TK_OK)
        return st;
    const char *etext = tk_json_str(r, "errorText");
    if (etext && etext[0]) {
        snprintf(err, errlen, "navigating to the page failed: %s", etext);
        json_decref(r);
        return TK_ERROR;
    }
    const char *loader = tk_json_str(r, "loaderId");
    if (!loader) {
        /* a same-document navigation (a fragment): nothing to load */
        json_decref(r);
        return TK_OK;
    }
    char mine[64];
    snprintf(mine, sizeof mine, "%s", loader);
    json_decref(r);
    pthread_mutex_lock(&s->emu);
    for (;;) {
        load_slot *sl = slot_for_locked(s, mine, 0);
        if (sl && sl->loaded) {
            *http_status = sl->status;
            break;
        }
        if (!brd_cdp_alive(s->cdp)) {
            st = TK_ECLOSED;
            snprintf(err, errlen, "the browser has gone");
            break;
        }
        if (tk_cond_wait_until(&s->ecv, &s->emu, deadline_ms) == ETIMEDOUT) {
            sl = slot_for_locked(s, mine, 0);
            if (sl && sl->loaded) {
                *http_status = sl->status;
                break;
            }
            st = TK_ETIMEOUT;
            snprintf(err, errlen, "the page did not finish loading in time");
            break;
        }
    }
    pthread_mutex_unlock(&s->emu);
    return st;
}
