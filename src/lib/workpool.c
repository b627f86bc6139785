#include "lib/workpool.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

struct job {
    tk_work_fn fn, then;
    tk_evloop *loop;
    void *ud;
    struct job *next;
};

struct tk_workpool {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct job *head, *tail;
    size_t queued, running, max_queue;
    int stopping;
    unsigned nthreads;
    pthread_t *threads;
};

static void *worker_main(void *arg)
{
    tk_workpool *p = arg;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->head && !p->stopping)
            pthread_cond_wait(&p->cond, &p->lock);
        if (!p->head)
            break; /* stopping and drained */
        struct job *j = p->head;
        p->head = j->next;
        if (!p->head)
            p->tail = NULL;
        p->queued--;
        p->running++;
        pthread_mutex_unlock(&p->lock);
        j->fn(j->ud);
        if (j->then)
            tk_evloop_post(j->loop, j->then, j->ud);
        free(j);
        pthread_mutex_lock(&p->lock);
        p->running--;
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

tk_workpool *tk_workpool_new(const char *name, unsigned threads, size_t max_queue)
{
    tk_workpool *p = tk_calloc(1, sizeof *p);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    p->max_queue = max_queue ? max_queue : 1024;
    p->nthreads = threads ? threads : 4;
    p->threads = tk_calloc(p->nthreads, sizeof *p->threads);
    for (unsigned i = 0; i < p->nthreads; i++) {
        if (pthread_create(&p->threads[i], NULL, worker_main, p) != 0)
            tk_oom();
        char n[16];
        snprintf(n, sizeof n, "%.10s-%u", name ? name : "work", i);
        pthread_setname_np(p->threads[i], n);
    }
    return p;
}

void tk_workpool_free(tk_workpool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stopping = 1;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    for (unsigned i = 0; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    free(p->threads);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->cond);
    free(p);
}

static tk_status submit(tk_workpool *p, tk_evloop *loop, tk_work_fn fn, tk_work_fn then, void *ud)
{
    pthread_mutex_lock(&p->lock);
    if (p->stopping || p->queued >= p->max_queue) {
        pthread_mutex_unlock(&p->lock);
        return TK_AGAIN;
    }
    struct job *j = tk_malloc(sizeof *j);
    *j = (struct job){.fn = fn, .then = then, .loop = loop, .ud = ud};
    if (p->tail)
        p->tail->next = j;
    else
        p->head = j;
    p->tail = j;
    p->queued++;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
    return TK_OK;
}

tk_status tk_workpool_submit(tk_workpool *p, tk_work_fn fn, void *ud)
{
    return submit(p, NULL, fn, NULL, ud);
}

tk_status tk_workpool_submit_then(tk_workpool *p, tk_evloop *loop, tk_work_fn work, tk_work_fn then,
                                  void *ud)
{
    return submit(p, loop, work, then, ud);
}

size_t tk_workpool_queued(tk_workpool *p)
{
    pthread_mutex_lock(&p->lock);
    size_t n = p->queued;
    pthread_mutex_unlock(&p->lock);
    return n;
}

size_t tk_workpool_running(tk_workpool *p)
{
    pthread_mutex_lock(&p->lock);
    size_t n = p->running;
    pthread_mutex_unlock(&p->lock);
    return n;
}
