#include "lib/httpc_multi.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/httpc.h"
#include "lib/log.h"
#include "lib/tktime.h"

struct tk_httpm_xfer {
    tk_httpm *m;
    CURL *easy;
    struct curl_slist *hl;
    tk_buf body;
    tk_buf headers;
    int (*on_data)(tk_httpm_xfer *, long, const char *, size_t, void *);
    void (*on_done)(tk_httpm_xfer *, const tk_httpm_result *, void *);
    void *ud;
    long status;
    int too_big, stopped, cancelled, attached, in_done;
    long idle_ms;
    int64_t last_act;
    tk_ev_timer *idle_timer;
    char error[CURL_ERROR_SIZE];
    tk_httpm_xfer *prev, *next; /* all live transfers */
    tk_httpm_xfer *next_cancelled;
    tk_httpm_xfer *next_pending; /* started inside a curl callback, added after */
};

struct tk_httpm {
    tk_evloop *loop;
    CURLM *multi;
    tk_ev_timer *timer;
    int depth; /* > 0 while inside curl_multi_socket_action */
    size_t active;
    tk_httpm_xfer *xfers;
    tk_httpm_xfer *cancelled;
    tk_httpm_xfer *pending, **pending_tail;
};

static void xfer_unlink(tk_httpm_xfer *x)
{
    tk_httpm *m = x->m;
    if (x->prev)
        x->prev->next = x->next;
    else if (m->xfers == x)
        m->xfers = x->next;
    if (x->next)
        x->next->prev = x->prev;
    x->prev = x->next = NULL;
}

static void xfer_free(tk_httpm_xfer *x)
{
    if (x->idle_timer) {
        tk_ev_timer_del(x->idle_timer);
        x->idle_timer = NULL;
    }
    if (x->attached) {
        curl_multi_remove_handle(x->m->multi, x->easy);
        x->attached = 0;
        x->m->active--;
    }
    xfer_unlink(x);
    curl_easy_cleanup(x->easy);
    curl_slist_free_all(x->hl);
    tk_buf_free(&x->body);
    tk_buf_free(&x->headers);
    free(x);
}

static void add_pending(tk_httpm *m)
{
    while (m->pending) {
        tk_httpm_xfer *x = m->pending;
        m->pending = x->next_pending;
        if (!m->pending)
            m->pending_tail = &m->pending;
        if (x->cancelled)
            continue; /* on the cancelled list already */
        if (curl_multi_add_handle(m->multi, x->easy) != CURLM_OK) {
            tk_httpm_result r = {.st = TK_ERROR,
                                 .body = &x->body,
                                 .headers = &x->headers,
                                 .error = "curl refused the transfer"};
            x->in_done = 1;
            if (x->on_done)
                x->on_done(x, &r, x->ud);
            xfer_free(x);
            continue;
        }
        x->attached = 1;
        m->active++;
    }
}

static void reap_cancelled(tk_httpm *m)
{
    while (m->cancelled) {
        tk_httpm_xfer *x = m->cancelled;
        m->cancelled = x->next_cancelled;
        xfer_free(x);
    }
}

/* Idle: nothing received for idle_ms. curl's low-speed check averages over a
 * window of seconds (an upload burst hides a silent server), so this is ours. */
static void idle_fire(tk_ev_timer *t, void *ud)
{
    tk_httpm_xfer *x = ud;
    int64_t now = tk_mono_ms(), quiet = now - x->last_act;
    if (quiet < x->idle_ms) {
        tk_ev_timer_rearm(t, x->idle_ms - quiet);
        return;
    }
    if (x->cancelled || x->in_done)
        return;
    if (x->attached) {
        curl_multi_remove_handle(x->m->multi, x->easy);
        x->attached = 0;
        x->m->active--;
    }
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->status);
    snprintf(x->error, sizeof x->error, "nothing received for %ld ms", x->idle_ms);
    tk_httpm_result r = {.st = TK_ETIMEOUT,
                         .status = x->status,
                         .body = &x->body,
                         .headers = &x->headers,
                         .error = x->error};
    x->in_done = 1;
    if (x->on_done)
        x->on_done(x, &r, x->ud);
    xfer_free(x);
}

static void check_done(tk_httpm *m)
{
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(m->multi, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        tk_httpm_xfer *x = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
        CURLcode rc = msg->data.result;
        curl_multi_remove_handle(m->multi, x->easy);
        x->attached = 0;
        m->active--;
        if (x->cancelled)
            continue; /* freed by reap_cancelled */
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->status);
        tk_httpm_result r = {.st = TK_OK,
                             .status = x->status,
                             .body = &x->body,
                             .headers = &x->headers,
                             .error = ""};
        if (rc != CURLE_OK) {
            if (x->too_big) {
                r.st = TK_ETOOBIG;
                snprintf(x->error, sizeof x->error, "response larger than the cap");
            } else if (x->stopped) {
                r.st = TK_AGAIN;
                snprintf(x->error, sizeof x->error, "stopped by the receiver");
            } else if (rc == CURLE_OPERATION_TIMEDOUT) {
                r.st = TK_ETIMEOUT;
            } else {
                r.st = TK_ERROR;
            }
            if (!x->error[0])
                snprintf(x->error, sizeof x->error, "%s", curl_easy_strerror(rc));
            r.error = x->error;
        }
        x->in_done = 1;
        if (x->on_done)
            x->on_done(x, &r, x->ud);
        xfer_free(x);
    }
}

/* Runs one curl_multi_socket_action and everything that follows from it. */
static void socket_action(tk_httpm *m, curl_socket_t s, int mask)
{
    int running = 0;
    m->depth++;
    curl_multi_socket_action(m->multi, s, mask, &running);
    m->depth--;
    if (m->depth == 0) {
        check_done(m);
        add_pending(m);
        reap_cancelled(m);
    }
}

static void io_cb(tk_ev_io *w, int fd, int revents, void *ud)
{
    tk_httpm *m = ud;
    int mask = 0;
    if (revents & TK_EV_READ)
        mask |= CURL_CSELECT_IN;
    if (revents & TK_EV_WRITE)
        mask |= CURL_CSELECT_OUT;
    if (revents & TK_EV_ERROR)
        mask |= CURL_CSELECT_ERR;
    socket_action(m, fd, mask);
}

static int sock_cb(CURL *e, curl_socket_t s, int what, void *userp, void *socketp)
{
    tk_httpm *m = userp;
    tk_ev_io *w = socketp;
    if (what == CURL_POLL_REMOVE) {
        if (w) {
            tk_ev_io_del(w);
            curl_multi_assign(m->multi, s, NULL);
        }
        return 0;
    }
    int ev = 0;
    if (what == CURL_POLL_IN || what == CURL_POLL_INOUT)
        ev |= TK_EV_READ;
    if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT)
        ev |= TK_EV_WRITE;
    if (!w) {
        w = tk_ev_io_add(m->loop, s, ev, io_cb, m);
        if (!w)
            return -1;
        curl_multi_assign(m->multi, s, w);
    } else if (tk_ev_io_modify(w, ev) != TK_OK) {
        return -1;
    }
    return 0;
}

static void timer_fire(tk_ev_timer *t, void *ud)
{
    tk_httpm *m = ud;
    socket_action(m, CURL_SOCKET_TIMEOUT, 0);
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
    tk_httpm *m = userp;
    if (timeout_ms < 0) {
        if (m->timer) {
            tk_ev_timer_del(m->timer);
            m->timer = NULL;
        }
        return 0;
    }
    if (m->timer)
        tk_ev_timer_rearm(m->timer, timeout_ms);
    else
        m->timer = tk_ev_timer_add(m->loop, timeout_ms, timer_fire, m);
    return 0;
}

tk_httpm *tk_httpm_new(tk_evloop *loop)
{
    tk_httpc_global_init();
    tk_httpm *m = tk_calloc(1, sizeof *m);
    m->loop = loop;
    m->pending_tail = &m->pending;
    m->multi = curl_multi_init();
    if (!m->multi)
        tk_oom();
    curl_multi_setopt(m->multi, CURLMOPT_SOCKETFUNCTION, sock_cb);
    curl_multi_setopt(m->multi, CURLMOPT_SOCKETDATA, m);
    curl_multi_setopt(m->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
    curl_multi_setopt(m->multi, CURLMOPT_TIMERDATA, m);
    return m;
}

void tk_httpm_free(tk_httpm *m)
{
    if (!m)
        return;
    while (m->xfers) {
        tk_httpm_xfer *x = m->xfers;
        if (x->cancelled) {
            /* already on the cancelled list; unlink it from there */
            tk_httpm_xfer **pp = &m->cancelled;
            while (*pp && *pp != x)
                pp = &(*pp)->next_cancelled;
            if (*pp)
                *pp = x->next_cancelled;
        }
        xfer_free(x);
    }
    if (m->timer)
        tk_ev_timer_del(m->timer);
    curl_multi_cleanup(m->multi);
    free(m);
}

static size_t write_cb(char *p, size_t size, size_t nmemb, void *ud)
{
    tk_httpm_xfer *x = ud;
    size_t n = size * nmemb;
    if (x->cancelled)
        return 0;
    x->last_act = tk_evloop_now(x->m->loop);
    if (x->on_data) {
        if (!x->status)
            curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->status);
        if (x->on_data(x, x->status, p, n, x->ud) != 0) {
            if (!x->cancelled)
                x->stopped = 1;
            return 0;
        }
        return x->cancelled ? 0 : n;
    }
    if (tk_buf_append(&x->body, p, n) != TK_OK) {
        x->too_big = 1;
        return 0;
    }
    return n;
}

static size_t header_cb(char *p, size_t size, size_t nmemb, void *ud)
{
    tk_httpm_xfer *x = ud;
    size_t n = size * nmemb;
    x->last_act = tk_evloop_now(x->m->loop);
    if (n >= 5 && strncmp(p, "HTTP/", 5) == 0) {
        tk_buf_reset(&x->headers);
        x->status = 0; /* a new response (after 100 Continue) */
    }
    if (tk_buf_append(&x->headers, p, n) != TK_OK)
        return 0;
    return n;
}

tk_httpm_xfer *tk_httpm_start(tk_httpm *m, const tk_httpm_req *req)
{
    tk_httpm_xfer *x = tk_calloc(1, sizeof *x);
    x->m = m;
    x->on_data = req->on_data;
    x->on_done = req->on_done;
    x->ud = req->ud;
    tk_buf_init(&x->body, req->max_response ? req->max_response : 8u << 20);
    tk_buf_init(&x->headers, TK_CAP_HEADERS);
    x->easy = curl_easy_init();
    if (!x->easy)
        tk_oom();
    CURL *c = x->easy;
    for (const char *const *h = req->headers; h && *h; h++)
        x->hl = curl_slist_append(x->hl, *h);
    x->hl = curl_slist_append(x->hl, "Expect:");
    curl_easy_setopt(c, CURLOPT_PRIVATE, x);
    curl_easy_setopt(c, CURLOPT_URL, req->url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, x->hl);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_cb);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, x->error);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "tusko/" TUSKO_VERSION);
    /* Streams are small events: a small receive buffer keeps an idle transfer
     * cheap. */
    curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 8192L);
    if (req->timeout_ms > 0)
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, req->timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                     req->connect_timeout_ms ? req->connect_timeout_ms : 10000L);
    if (req->idle_timeout_ms > 0) {
        x->idle_ms = req->idle_timeout_ms;
        x->last_act = tk_mono_ms();
        x->idle_timer = tk_ev_timer_add(m->loop, x->idle_ms, idle_fire, x);
    }
    if (req->unix_socket)
        curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, req->unix_socket);
    const char *method = req->method ? req->method : (req->body ? "POST" : "GET");
    if (req->body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
        curl_easy_setopt(c, req->body_borrowed ? CURLOPT_POSTFIELDS : CURLOPT_COPYPOSTFIELDS,
                         req->body);
    }
    if (strcmp(method, "GET") == 0 && !req->body)
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    else if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    else if (strcmp(method, "POST") != 0 || !req->body)
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    x->next = m->xfers;
    if (m->xfers)
        m->xfers->prev = x;
    m->xfers = x;
    if (m->depth > 0) {
        /* curl refuses re-entrant calls: add once the current action returns */
        *m->pending_tail = x;
        m->pending_tail = &x->next_pending;
        return x;
    }
    if (curl_multi_add_handle(m->multi, c) != CURLM_OK) {
        xfer_unlink(x);
        curl_easy_cleanup(c);
        curl_slist_free_all(x->hl);
        tk_buf_free(&x->body);
        tk_buf_free(&x->headers);
        free(x);
        return NULL;
    }
    x->attached = 1;
    m->active++;
    return x;
}

void tk_httpm_cancel(tk_httpm_xfer *x)
{
    if (!x || x->cancelled || x->in_done)
        return;
    tk_httpm *m = x->m;
    x->cancelled = 1;
    if (m->depth > 0) {
        /* inside curl: the handle is removed once curl has returned */
        x->next_cancelled = m->cancelled;
        m->cancelled = x;
        return;
    }
    xfer_free(x);
}

size_t tk_httpm_active(const tk_httpm *m)
{
    return m->active;
}
