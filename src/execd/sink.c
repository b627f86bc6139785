#include "execd/sink.h"

#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "lib/tktime.h"

#define SINK_MAX   (8u << 20)
#define SINK_SLICE (64u << 10)

struct execd_sink {
    tk_stream *s;
    tk_buf pend;
    size_t off; /* bytes of pend already queued */
    int efd;
    pthread_mutex_t lock;
    int refs, gone;
};

static void unref(execd_sink *k)
{
    pthread_mutex_lock(&k->lock);
    int last = --k->refs == 0;
    pthread_mutex_unlock(&k->lock);
    if (last) {
        tk_buf_free(&k->pend);
        close(k->efd);
        pthread_mutex_destroy(&k->lock);
        free(k);
    }
}

static void wake(execd_sink *k)
{
    uint64_t one = 1;
    ssize_t w = write(k->efd, &one, sizeof one);
    (void)w;
}

static void on_writable(void *ud)
{
    wake(ud);
}

static void on_close(void *ud)
{
    execd_sink *k = ud;
    pthread_mutex_lock(&k->lock);
    k->gone = 1;
    pthread_mutex_unlock(&k->lock);
    wake(k);
    unref(k);
}

execd_sink *execd_sink_new(tk_stream *s)
{
    execd_sink *k = tk_calloc(1, sizeof *k);
    k->s = s;
    tk_buf_init(&k->pend, SINK_MAX);
    k->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (k->efd < 0)
        tk_panic(__FILE__, __LINE__, "eventfd");
    pthread_mutex_init(&k->lock, NULL);
    k->refs = 2;
    tk_stream_on_writable(s, on_writable, k);
    tk_stream_on_close(s, on_close, k);
    return k;
}

tk_buf *execd_sink_buf(execd_sink *k)
{
    return &k->pend;
}

int execd_sink_gone(execd_sink *k)
{
    pthread_mutex_lock(&k->lock);
    int g = k->gone;
    pthread_mutex_unlock(&k->lock);
    return g;
}

tk_status execd_sink_flush(execd_sink *k)
{
    if (execd_sink_gone(k)) {
        tk_buf_reset(&k->pend);
        k->off = 0;
        return TK_ECLOSED;
    }
    while (k->off < k->pend.len) {
        size_t n = k->pend.len - k->off;
        if (n > SINK_SLICE)
            n = SINK_SLICE;
        tk_status st = tk_stream_try_write(k->s, k->pend.data + k->off, n);
        if (st == TK_AGAIN)
            return TK_AGAIN;
        if (st != TK_OK) {
            tk_buf_reset(&k->pend);
            k->off = 0;
            return TK_ECLOSED;
        }
        k->off += n;
    }
    tk_buf_reset(&k->pend);
    k->off = 0;
    return TK_OK;
}

size_t execd_sink_pending(execd_sink *k)
{
    return k->pend.len - k->off;
}

int execd_sink_fd(execd_sink *k)
{
    return k->efd;
}

void execd_sink_ack(execd_sink *k)
{
    uint64_t v;
    ssize_t r = read(k->efd, &v, sizeof v);
    (void)r;
}

void execd_sink_end(execd_sink *k)
{
    tk_stream_close(k->s);
    unref(k);
}

tk_status execd_sink_drain(execd_sink *k, int timeout_ms)
{
    int64_t end = timeout_ms < 0 ? -1 : tk_mono_ms() + timeout_ms;
    for (;;) {
        tk_status st = execd_sink_flush(k);
        if (st != TK_AGAIN)
            return st;
        int wait = -1;
        if (end >= 0) {
            int64_t left = end - tk_mono_ms();
            if (left <= 0)
                return TK_ETIMEOUT;
            wait = (int)left;
        }
        struct pollfd p = {.fd = k->efd, .events = POLLIN};
        if (poll(&p, 1, wait) > 0)
            execd_sink_ack(k);
    }
}
