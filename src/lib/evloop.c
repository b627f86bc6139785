#include "lib/evloop.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/tktime.h"

struct tk_ev_io {
    tk_evloop *l;
    int fd;
    int events;
    tk_ev_io_fn fn;
    void *ud;
    int dead;
    tk_ev_io *next_dead;
};

struct tk_ev_timer {
    tk_evloop *l;
    int64_t due;  /* monotonic ms */
    uint64_t seq; /* ties broken by insertion order */
    size_t idx;   /* position in the heap, or SIZE_MAX when not pending */
    tk_ev_timer_fn fn;
    void *ud;
    int dead;
    tk_ev_timer *next_dead;
};

struct post {
    tk_ev_post_fn fn;
    void *ud;
    struct post *next;
};

struct tk_evloop {
    int epfd;
    int wakefd;
    pthread_t thread;
    int has_thread;
    pthread_t loop_tid;
    volatile int running;
    int64_t now;
    size_t nio;

    tk_ev_timer **heap;
    size_t nheap, capheap;
    size_t ntimers;
    uint64_t timer_seq;

    tk_ev_io *dead_io;
    tk_ev_timer *dead_timers;

    pthread_mutex_t lock; /* guards posts and stop */
    struct post *posts, *posts_tail;
    int stop_requested;
    int woken;
};

/* ---------- timer heap ---------- */

static int timer_less(const tk_ev_timer *a, const tk_ev_timer *b)
{
    return a->due < b->due || (a->due == b->due && a->seq < b->seq);
}

static void heap_swap(tk_evloop *l, size_t i, size_t j)
{
    tk_ev_timer *t = l->heap[i];
    l->heap[i] = l->heap[j];
    l->heap[j] = t;
    l->heap[i]->idx = i;
    l->heap[j]->idx = j;
}

static void heap_up(tk_evloop *l, size_t i)
{
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!timer_less(l->heap[i], l->heap[p]))
            break;
        heap_swap(l, i, p);
        i = p;
    }
}

static void heap_down(tk_evloop *l, size_t i)
{
    for (;;) {
        size_t a = 2 * i + 1, b = a + 1, m = i;
        if (a < l->nheap && timer_less(l->heap[a], l->heap[m]))
            m = a;
        if (b < l->nheap && timer_less(l->heap[b], l->heap[m]))
            m = b;
        if (m == i)
            break;
        heap_swap(l, i, m);
        i = m;
    }
}

static void heap_push(tk_evloop *l, tk_ev_timer *t)
{
    if (l->nheap == l->capheap) {
        l->capheap = l->capheap ? l->capheap * 2 : 64;
        l->heap = tk_realloc(l->heap, l->capheap * sizeof *l->heap);
    }
    t->idx = l->nheap;
    l->heap[l->nheap++] = t;
    heap_up(l, t->idx);
}

static void heap_remove(tk_evloop *l, tk_ev_timer *t)
{
    size_t i = t->idx;
    if (i == SIZE_MAX)
        return;
    TK_ASSERT(i < l->nheap && l->heap[i] == t);
    l->nheap--;
    if (i != l->nheap) {
        l->heap[i] = l->heap[l->nheap];
        l->heap[i]->idx = i;
        heap_down(l, i);
        heap_up(l, i);
    }
    t->idx = SIZE_MAX;
}

/* ---------- loop ---------- */

tk_evloop *tk_evloop_new(void)
{
    tk_evloop *l = tk_calloc(1, sizeof *l);
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    l->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (l->epfd < 0 || l->wakefd < 0) {
        tk_error("evloop", "msg=\"cannot create epoll/eventfd\" errno=%d", errno);
        abort();
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->wakefd, &ev) != 0)
        abort();
    pthread_mutex_init(&l->lock, NULL);
    l->now = tk_mono_ms();
    return l;
}

static void free_dead(tk_evloop *l)
{
    while (l->dead_io) {
        tk_ev_io *w = l->dead_io;
        l->dead_io = w->next_dead;
        free(w);
    }
    while (l->dead_timers) {
        tk_ev_timer *t = l->dead_timers;
        l->dead_timers = t->next_dead;
        free(t);
    }
}

void tk_evloop_free(tk_evloop *l)
{
    if (!l)
        return;
    free_dead(l);
    for (size_t i = 0; i < l->nheap; i++)
        free(l->heap[i]);
    free(l->heap);
    struct post *p = l->posts;
    while (p) {
        struct post *n = p->next;
        free(p);
        p = n;
    }
    close(l->epfd);
    close(l->wakefd);
    pthread_mutex_destroy(&l->lock);
    free(l);
}

int tk_evloop_on_loop(const tk_evloop *l)
{
    return l->running && pthread_equal(l->loop_tid, pthread_self());
}

void tk_evloop_post(tk_evloop *l, tk_ev_post_fn fn, void *ud)
{
    struct post *p = tk_malloc(sizeof *p);
    p->fn = fn;
    p->ud = ud;
    p->next = NULL;
    pthread_mutex_lock(&l->lock);
    if (l->posts_tail)
        l->posts_tail->next = p;
    else
        l->posts = p;
    l->posts_tail = p;
    int wake = !l->woken;
    l->woken = 1;
    pthread_mutex_unlock(&l->lock);
    if (wake) {
        uint64_t one = 1;
        ssize_t n = write(l->wakefd, &one, sizeof one);
        (void)n; /* EAGAIN means the counter is already non-zero: awake anyway */
    }
}

void tk_evloop_stop(tk_evloop *l)
{
    pthread_mutex_lock(&l->lock);
    l->stop_requested = 1;
    int wake = !l->woken;
    l->woken = 1;
    pthread_mutex_unlock(&l->lock);
    if (wake) {
        uint64_t one = 1;
        ssize_t n = write(l->wakefd, &one, sizeof one);
        (void)n;
    }
}

/* Runs the posts queued so far; returns non-zero when a stop was requested. */
static int run_posts(tk_evloop *l)
{
    uint64_t v;
    ssize_t n = read(l->wakefd, &v, sizeof v);
    (void)n;
    pthread_mutex_lock(&l->lock);
    struct post *p = l->posts;
    l->posts = l->posts_tail = NULL;
    l->woken = 0;
    int stop = l->stop_requested;
    pthread_mutex_unlock(&l->lock);
    while (p) {
        struct post *next = p->next;
        p->fn(p->ud);
        free(p);
        p = next;
    }
    return stop;
}

static void run_timers(tk_evloop *l)
{
    /* Only timers due at the start of this pass fire; ones re-armed with 0 by
     * a callback wait for the next iteration, so a loop cannot starve I/O. */
    int64_t now = l->now;
    uint64_t seq_limit = l->timer_seq;
    while (l->nheap > 0) {
        tk_ev_timer *t = l->heap[0];
        if (t->due > now || t->seq >= seq_limit)
            break;
        heap_remove(l, t);
        t->fn(t, t->ud);
    }
}

static int next_timeout(tk_evloop *l)
{
    pthread_mutex_lock(&l->lock);
    int pending = l->posts != NULL || l->stop_requested;
    pthread_mutex_unlock(&l->lock);
    if (pending)
        return 0;
    if (l->nheap == 0)
        return -1;
    int64_t d = l->heap[0]->due - tk_mono_ms();
    if (d <= 0)
        return 0;
    return d > 60000 ? 60000 : (int)d;
}

void tk_evloop_run(tk_evloop *l)
{
    l->loop_tid = pthread_self();
    l->running = 1;
    struct epoll_event evs[256];
    for (;;) {
        int timeout = next_timeout(l);
        int n = epoll_wait(l->epfd, evs, (int)TK_ARRAY_LEN(evs), timeout);
        if (n < 0 && errno != EINTR) {
            tk_error("evloop", "msg=\"epoll_wait failed\" errno=%d", errno);
            abort();
        }
        l->now = tk_mono_ms();
        int stop = 0;
        for (int i = 0; i < n; i++) {
            tk_ev_io *w = evs[i].data.ptr;
            if (!w) {
                stop |= run_posts(l);
                continue;
            }
            if (w->dead)
                continue;
            int re = 0;
            if (evs[i].events & EPOLLIN)
                re |= TK_EV_READ;
            if (evs[i].events & EPOLLOUT)
                re |= TK_EV_WRITE;
            if (evs[i].events & (EPOLLERR | EPOLLHUP | EPOLLRDHUP))
                re |= TK_EV_ERROR;
            w->fn(w, w->fd, re, w->ud);
        }
        if (n <= 0) {
            /* posts may be queued without the eventfd having been read yet */
            pthread_mutex_lock(&l->lock);
            int pending = l->posts != NULL || l->stop_requested;
            pthread_mutex_unlock(&l->lock);
            if (pending)
                stop |= run_posts(l);
        }
        run_timers(l);
        free_dead(l);
        if (stop)
            break;
    }
    /* Posts made before the stop request have run; drain any made since so no
     * completion is lost while the loop is being stopped. */
    run_posts(l);
    free_dead(l);
    pthread_mutex_lock(&l->lock);
    l->stop_requested = 0;
    pthread_mutex_unlock(&l->lock);
    l->running = 0;
}

static void *loop_main(void *arg)
{
    tk_evloop_run(arg);
    return NULL;
}

tk_status tk_evloop_start(tk_evloop *l, const char *name)
{
    if (pthread_create(&l->thread, NULL, loop_main, l) != 0)
        return TK_ERROR;
    l->has_thread = 1;
    if (name) {
        char n[16];
        snprintf(n, sizeof n, "%s", name);
        pthread_setname_np(l->thread, n);
    }
    return TK_OK;
}

void tk_evloop_join(tk_evloop *l)
{
    if (l->has_thread) {
        pthread_join(l->thread, NULL);
        l->has_thread = 0;
    }
}

int64_t tk_evloop_now(const tk_evloop *l)
{
    return l->now;
}

size_t tk_evloop_nio(const tk_evloop *l)
{
    return l->nio;
}

size_t tk_evloop_ntimers(const tk_evloop *l)
{
    return l->ntimers;
}

/* ---------- fd watchers ---------- */

static uint32_t to_epoll(int events)
{
    uint32_t e = 0;
    if (events & TK_EV_READ)
        e |= EPOLLIN | EPOLLRDHUP;
    if (events & TK_EV_WRITE)
        e |= EPOLLOUT;
    return e;
}

tk_ev_io *tk_ev_io_add(tk_evloop *l, int fd, int events, tk_ev_io_fn fn, void *ud)
{
    tk_ev_io *w = tk_calloc(1, sizeof *w);
    w->l = l;
    w->fd = fd;
    w->events = events;
    w->fn = fn;
    w->ud = ud;
    struct epoll_event ev = {.events = to_epoll(events), .data.ptr = w};
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        tk_warn("evloop", "msg=\"epoll_ctl add failed\" fd=%d errno=%d", fd, errno);
        free(w);
        return NULL;
    }
    l->nio++;
    return w;
}

tk_status tk_ev_io_modify(tk_ev_io *w, int events)
{
    if (w->events == events)
        return TK_OK;
    struct epoll_event ev = {.events = to_epoll(events), .data.ptr = w};
    if (epoll_ctl(w->l->epfd, EPOLL_CTL_MOD, w->fd, &ev) != 0)
        return TK_ERROR;
    w->events = events;
    return TK_OK;
}

void tk_ev_io_del(tk_ev_io *w)
{
    if (!w || w->dead)
        return;
    epoll_ctl(w->l->epfd, EPOLL_CTL_DEL, w->fd, NULL);
    w->dead = 1;
    w->next_dead = w->l->dead_io;
    w->l->dead_io = w;
    w->l->nio--;
}

/* ---------- timers ---------- */

tk_ev_timer *tk_ev_timer_add(tk_evloop *l, int64_t ms, tk_ev_timer_fn fn, void *ud)
{
    tk_ev_timer *t = tk_calloc(1, sizeof *t);
    t->l = l;
    t->fn = fn;
    t->ud = ud;
    t->idx = SIZE_MAX;
    t->due = tk_mono_ms() + (ms < 0 ? 0 : ms);
    t->seq = l->timer_seq++;
    heap_push(l, t);
    l->ntimers++;
    return t;
}

void tk_ev_timer_rearm(tk_ev_timer *t, int64_t ms)
{
    if (t->dead)
        return;
    heap_remove(t->l, t);
    t->due = tk_mono_ms() + (ms < 0 ? 0 : ms);
    t->seq = t->l->timer_seq++;
    heap_push(t->l, t);
}

void tk_ev_timer_del(tk_ev_timer *t)
{
    if (!t || t->dead)
        return;
    heap_remove(t->l, t);
    t->dead = 1;
    t->next_dead = t->l->dead_timers;
    t->l->dead_timers = t;
    t->l->ntimers--;
}
