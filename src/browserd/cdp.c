/*
 * cdp.c — the CDP pipe client: the NUL-delimited reader, the waiting calls and
 * the reader thread (see cdp.h).
 */
#include "browserd/cdp.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "lib/cond.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/tktime.h"

void brd_cdp_reader_init(brd_cdp_reader *r, size_t max_message)
{
    memset(r, 0, sizeof *r);
    tk_buf_init(&r->buf, max_message);
}

void brd_cdp_reader_free(brd_cdp_reader *r)
{
    tk_buf_free(&r->buf);
}

tk_status brd_cdp_reader_feed(brd_cdp_reader *r, const char *data, size_t len, brd_cdp_msg_fn fn,
                              void *ud)
{
    while (len > 0) {
        const char *nul = memchr(data, '\0', len);
        size_t n = nul ? (size_t)(nul - data) : len;
        if (!r->overflow && tk_buf_append(&r->buf, data, n) != TK_OK) {
            r->overflow = 1;
            tk_buf_reset(&r->buf);
        }
        if (!nul)
            return TK_OK;
        data += n + 1;
        len -= n + 1;
        if (r->overflow) {
            r->overflow = 0;
            r->skipped++;
            continue;
        }
        int stop = fn(r->buf.data ? r->buf.data : "", r->buf.len, ud);
        tk_buf_reset(&r->buf);
        if (stop)
            return TK_ERROR;
    }
    return TK_OK;
}

tk_status brd_cdp_msg_parse(const char *s, size_t len, brd_cdp_msg *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    json_t *root = tk_json_parse(s, len, len + 1, err, errlen);
    if (!root)
        return TK_EINVAL;
    if (!json_is_object(root)) {
        snprintf(err, errlen, "not an object");
        goto bad;
    }
    json_t *id = json_object_get(root, "id");
    if (id) {
        if (!json_is_integer(id) || json_integer_value(id) <= 0) {
            snprintf(err, errlen, "id is not a positive integer");
            goto bad;
        }
        m->id = json_integer_value(id);
    }
    json_t *sid = json_object_get(root, "sessionId");
    if (sid) {
        if (!json_is_string(sid)) {
            snprintf(err, errlen, "sessionId is not a string");
            goto bad;
        }
        m->session_id = json_string_value(sid);
    }
    if (m->id) {
        m->result = json_object_get(root, "result");
        m->error = json_object_get(root, "error");
        if (!m->result && !m->error) {
            snprintf(err, errlen, "an answer without result or error");
            goto bad;
        }
    } else {
        m->method = tk_json_str(root, "method");
        if (!m->method) {
            snprintf(err, errlen, "an event without a method");
            goto bad;
        }
        m->params = json_object_get(root, "params");
    }
    m->root = root;
    return TK_OK;
bad:
    json_decref(root);
    return TK_EINVAL;
}

/* --- the client --- */

typedef struct waiter {
    struct waiter *next;
    int64_t id;
    /* a blocking call: the answer lands here */
    int done;
    json_t *answer;
    /* or an asynchronous one */
    brd_cdp_reply_fn fn;
    void *ud;
} waiter;

struct brd_cdp {
    brd_cdp_config cfg;
    pthread_t thread;
    int stop_fd;
    pthread_mutex_t mu; /* pending, next_id, closed */
    pthread_cond_t cv;
    pthread_mutex_t wmu; /* writes */
    waiter *pending;
    int64_t next_id;
    int closed;
    size_t dropped;
};

static waiter *take_waiter(brd_cdp *c, int64_t id)
{
    for (waiter **p = &c->pending; *p; p = &(*p)->next) {
        if ((*p)->id == id) {
            waiter *w = *p;
            *p = w->next;
            return w;
        }
    }
    return NULL;
}

static int on_message(const char *msg, size_t len, void *ud)
{
    brd_cdp *c = ud;
    brd_cdp_msg m;
    char err[160];
    if (brd_cdp_msg_parse(msg, len, &m, err, sizeof err) != TK_OK) {
        pthread_mutex_lock(&c->mu);
        c->dropped++;
        pthread_mutex_unlock(&c->mu);
        tk_warn("cdp", "msg=\"a malformed message from the browser\" error=\"%s\"", err);
        return 0;
    }
    if (m.id == 0) {
        if (c->cfg.on_event)
            c->cfg.on_event(&m, msg, len, c->cfg.ud);
        json_decref(m.root);
        return 0;
    }
    pthread_mutex_lock(&c->mu);
    waiter *w = take_waiter(c, m.id);
    if (w && !w->fn) {
        w->answer = m.root;
        w->done = 1;
        pthread_cond_broadcast(&c->cv);
        pthread_mutex_unlock(&c->mu);
        return 0;
    }
    pthread_mutex_unlock(&c->mu);
    if (w) {
        w->fn(&m, msg, len, w->ud);
        free(w);
    }
    json_decref(m.root);
    return 0;
}

static void *reader_main(void *arg)
{
    brd_cdp *c = arg;
    brd_cdp_reader r;
    brd_cdp_reader_init(&r, c->cfg.max_message ? c->cfg.max_message : BRD_CDP_MAX_MESSAGE);
    char *chunk = tk_malloc(64 << 10);
    for (;;) {
        struct pollfd p[2] = {{.fd = c->cfg.rfd, .events = POLLIN},
                              {.fd = c->stop_fd, .events = POLLIN}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[1].revents)
            break;
        ssize_t n = read(c->cfg.rfd, chunk, 64 << 10);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0)
            break;
        brd_cdp_reader_feed(&r, chunk, (size_t)n, on_message, c);
    }
    free(chunk);
    pthread_mutex_lock(&c->mu);
    c->dropped += r.skipped;
    c->closed = 1;
    waiter *list = c->pending;
    c->pending = NULL;
    /* blocking waiters stay linked to themselves: wake them */
    waiter *async = NULL;
    while (list) {
        waiter *w = list;
        list = w->next;
        if (w->fn) {
            w->next = async;
            async = w;
        } else {
            w->done = 1;
        }
    }
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    brd_cdp_reader_free(&r);
    while (async) {
        waiter *w = async;
        async = w->next;
        w->fn(NULL, NULL, 0, w->ud);
        free(w);
    }
    if (c->cfg.on_gone)
        c->cfg.on_gone(c->cfg.ud);
    return NULL;
}

brd_cdp *brd_cdp_open(const brd_cdp_config *cfg)
{
    brd_cdp *c = tk_calloc(1, sizeof *c);
    c->cfg = *cfg;
    c->next_id = 1;
    c->stop_fd = eventfd(0, EFD_CLOEXEC);
    if (c->stop_fd < 0)
        tk_oom();
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->wmu, NULL);
    pthread_cond_init(&c->cv, NULL);
    if (pthread_create(&c->thread, NULL, reader_main, c) != 0)
        tk_oom();
    return c;
}

void brd_cdp_close(brd_cdp *c)
{
    if (!c)
        return;
    uint64_t one = 1;
    if (write(c->stop_fd, &one, sizeof one) < 0)
        tk_warn("cdp", "msg=\"could not wake the reader\"");
    pthread_join(c->thread, NULL);
    close(c->stop_fd);
    close(c->cfg.wfd);
    close(c->cfg.rfd);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->wmu);
    free(c);
}

int brd_cdp_alive(brd_cdp *c)
{
    pthread_mutex_lock(&c->mu);
    int alive = !c->closed;
    pthread_mutex_unlock(&c->mu);
    return alive;
}

size_t brd_cdp_dropped(brd_cdp *c)
{
    pthread_mutex_lock(&c->mu);
    size_t n = c->dropped;
    pthread_mutex_unlock(&c->mu);
    return n;
}

static tk_status write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return TK_ECLOSED;
        p += w;
        n -= (size_t)w;
    }
    return TK_OK;
}

/* Registers w (its id assigned here) and writes the request. */
static tk_status send_request(brd_cdp *c, waiter *w, const char *session, const char *method,
                              json_t *params)
{
    pthread_mutex_lock(&c->mu);
    if (c->closed) {
        pthread_mutex_unlock(&c->mu);
        json_decref(params);
        return TK_ECLOSED;
    }
    w->id = c->next_id++;
    w->next = c->pending;
    c->pending = w;
    pthread_mutex_unlock(&c->mu);
    json_t *req = tk_json_obj("id", json_integer(w->id), "method", json_string(method), "params",
                              params ? params : json_object(), "sessionId",
                              session ? json_string(session) : NULL, NULL);
    tk_buf b;
    tk_buf_init(&b, BRD_CDP_MAX_MESSAGE);
    tk_status st = tk_json_dump_buf(req, &b);
    json_decref(req);
    if (st == TK_OK)
        st = tk_buf_append_byte(&b, '\0');
    if (st == TK_OK) {
        pthread_mutex_lock(&c->wmu);
        st = write_all(c->cfg.wfd, b.data, b.len);
        pthread_mutex_unlock(&c->wmu);
    }
    tk_buf_free(&b);
    return st;
}

tk_status brd_cdp_call(brd_cdp *c, const char *session, const char *method, json_t *params,
                       int64_t timeout_ms, json_t **result, char *err, size_t errlen)
{
    *result = NULL;
    waiter w = {0};
    tk_status st = send_request(c, &w, session, method, params);
    int64_t deadline = tk_mono_ms() + timeout_ms;
    pthread_mutex_lock(&c->mu);
    if (st == TK_OK) {
        while (!w.done) {
            if (tk_cond_wait_until(&c->cv, &c->mu, deadline) == ETIMEDOUT && !w.done)
                break;
        }
    }
    if (!w.done) {
        /* not answered (or not written): unlink it before it goes out of scope */
        take_waiter(c, w.id);
        pthread_mutex_unlock(&c->mu);
        if (st == TK_ECLOSED) {
            snprintf(err, errlen, "the browser has gone");
            return TK_ECLOSED;
        }
        if (st != TK_OK) {
            snprintf(err, errlen, "%s: the request could not be sent", method);
            return st;
        }
        snprintf(err, errlen, "%s: no answer within %lld ms", method, (long long)timeout_ms);
        return TK_ETIMEOUT;
    }
    pthread_mutex_unlock(&c->mu);
    if (!w.answer) {
        snprintf(err, errlen, "the browser has gone");
        return TK_ECLOSED;
    }
    json_t *e = json_object_get(w.answer, "error");
    if (e) {
        snprintf(err, errlen, "%s: %s", method, tk_json_str_or(e, "message", "error"));
        json_decref(w.answer);
        return TK_ERROR;
    }
    *result = json_incref(json_object_get(w.answer, "result"));
    json_decref(w.answer);
    return TK_OK;
}

static void ignore_reply(const brd_cdp_msg *m, const char *raw, size_t len, void *ud)
{
}

tk_status brd_cdp_send(brd_cdp *c, const char *session, const char *method, json_t *params,
                       brd_cdp_reply_fn fn, void *ud)
{
    waiter *w = tk_calloc(1, sizeof *w);
    w->fn = fn ? fn : ignore_reply;
    w->ud = ud;
    tk_status st = send_request(c, w, session, method, params);
    if (st != TK_OK) {
        pthread_mutex_lock(&c->mu);
        waiter *mine = take_waiter(c, w->id);
        pthread_mutex_unlock(&c->mu);
        free(mine);
        return st;
    }
    return TK_OK;
}

void brd_cdp_forget(brd_cdp *c, void *ud)
{
    pthread_mutex_lock(&c->mu);
    for (waiter **p = &c->pending; *p;) {
        waiter *w = *p;
        if (w->fn && w->ud == ud) {
            *p = w->next;
            free(w);
        } else {
            p = &w->next;
        }
    }
    pthread_mutex_unlock(&c->mu);
}
