/* The event loop (timers, fd watchers, cross-thread posts) and the worker pool. */
#include <pthread.h>
#include <unistd.h>

#include "lib/evloop.h"
#include "lib/workpool.h"
#include "tk_test.h"

static int order[16], norder;

static void rec_timer(tk_ev_timer *t, void *ud)
{
    order[norder++] = (int)(intptr_t)ud;
    tk_ev_timer_del(t);
}

static void stop_timer(tk_ev_timer *t, void *ud)
{
    tk_ev_timer_del(t);
    tk_evloop_stop(ud);
}

TEST(timers_fire_in_due_order)
{
    tk_evloop *l = tk_evloop_new();
    tk_ev_timer_add(l, 30, rec_timer, (void *)3);
    tk_ev_timer_add(l, 10, rec_timer, (void *)1);
    tk_ev_timer_add(l, 20, rec_timer, (void *)2);
    tk_ev_timer_add(l, 0, rec_timer, (void *)0);
    tk_ev_timer_add(l, 50, stop_timer, l);
    tk_evloop_run(l);
    CHECK_INT(norder, ==, 4);
    for (int i = 0; i < 4; i++)
        CHECK_INT(order[i], ==, i);
    CHECK_INT(tk_evloop_ntimers(l), ==, 0);
    tk_evloop_free(l);
}

static tk_ev_timer *victim;

static void cancel_other(tk_ev_timer *t, void *ud)
{
    tk_ev_timer_del(victim); /* cancelled before it fires */
    tk_ev_timer_del(t);
}

TEST(timer_cancelled_by_another_never_fires)
{
    tk_evloop *l = tk_evloop_new();
    norder = 0;
    tk_ev_timer_add(l, 5, cancel_other, NULL);
    victim = tk_ev_timer_add(l, 10, rec_timer, (void *)9);
    tk_ev_timer_add(l, 40, stop_timer, l);
    tk_evloop_run(l);
    CHECK_INT(norder, ==, 0);
    tk_evloop_free(l);
}

static int rearms;

static void rearm_cb(tk_ev_timer *t, void *ud)
{
    if (++rearms < 5) {
        tk_ev_timer_rearm(t, 1);
        return;
    }
    tk_ev_timer_del(t);
    tk_evloop_stop(ud);
}

TEST(timer_rearm_from_its_callback)
{
    tk_evloop *l = tk_evloop_new();
    tk_ev_timer_add(l, 1, rearm_cb, l);
    tk_evloop_run(l);
    CHECK_INT(rearms, ==, 5);
    tk_evloop_free(l);
}

TEST(many_timers_heap_stays_ordered)
{
    tk_evloop *l = tk_evloop_new();
    tk_ev_timer *ts[500];
    for (int i = 0; i < 500; i++)
        ts[i] = tk_ev_timer_add(l, 1000 + (i * 7919) % 500, rec_timer, NULL);
    for (int i = 0; i < 500; i += 2)
        tk_ev_timer_del(ts[i]);
    CHECK_INT(tk_evloop_ntimers(l), ==, 250);
    tk_evloop_free(l); /* frees the pending ones */
}

/* --- posts --- */

static int posted_sum;
static void add_post(void *ud)
{
    posted_sum += (int)(intptr_t)ud;
}

static void *poster(void *arg)
{
    tk_evloop *l = arg;
    for (int i = 1; i <= 1000; i++)
        tk_evloop_post(l, add_post, (void *)(intptr_t)1);
    return NULL;
}

static void stop_post(void *ud)
{
    tk_evloop_stop(ud);
}

TEST(posts_from_threads_all_run_on_loop)
{
    tk_evloop *l = tk_evloop_new();
    CHECK(tk_evloop_start(l, "t") == TK_OK);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, poster, l);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    tk_evloop_post(l, stop_post, l);
    tk_evloop_join(l);
    CHECK_INT(posted_sum, ==, 4000);
    tk_evloop_free(l);
}

static int on_loop_seen;
static void check_on_loop(void *ud)
{
    on_loop_seen = tk_evloop_on_loop(ud);
    tk_evloop_stop(ud);
}

TEST(on_loop_is_true_only_on_loop_thread)
{
    tk_evloop *l = tk_evloop_new();
    CHECK(!tk_evloop_on_loop(l));
    tk_evloop_start(l, "t");
    tk_evloop_post(l, check_on_loop, l);
    tk_evloop_join(l);
    CHECK_INT(on_loop_seen, ==, 1);
    tk_evloop_free(l);
}

/* --- fd watchers --- */

struct pipe_ctx {
    tk_evloop *l;
    int fds[2];
    int reads;
    tk_ev_io *a, *b;
    int b_called;
};

static void pipe_read(tk_ev_io *w, int fd, int re, void *ud)
{
    struct pipe_ctx *c = ud;
    char buf[64];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0)
        c->reads += (int)n;
    if (c->reads >= 3) {
        tk_ev_io_del(w);
        tk_evloop_stop(c->l);
    }
}

static void *pipe_writer(void *arg)
{
    struct pipe_ctx *c = arg;
    for (int i = 0; i < 3; i++) {
        usleep(2000);
        ssize_t n = write(c->fds[1], "x", 1);
        (void)n;
    }
    return NULL;
}

TEST(io_watcher_reads_a_pipe)
{
    struct pipe_ctx c = {0};
    c.l = tk_evloop_new();
    CHECK(pipe(c.fds) == 0);
    CHECK(tk_ev_io_add(c.l, c.fds[0], TK_EV_READ, pipe_read, &c) != NULL);
    CHECK_INT(tk_evloop_nio(c.l), ==, 1);
    pthread_t th;
    pthread_create(&th, NULL, pipe_writer, &c);
    tk_evloop_run(c.l);
    pthread_join(th, NULL);
    CHECK_INT(c.reads, ==, 3);
    CHECK_INT(tk_evloop_nio(c.l), ==, 0);
    close(c.fds[0]);
    close(c.fds[1]);
    tk_evloop_free(c.l);
}

/* Two watchers ready in the same batch; the first deletes the second: the second
 * must not be called (and its memory stays valid until the batch ends). */
static void del_other(tk_ev_io *w, int fd, int re, void *ud)
{
    struct pipe_ctx *c = ud;
    if (w == c->a) {
        tk_ev_io_del(c->b);
        tk_ev_io_del(c->a);
    } else {
        c->b_called = 1;
        tk_ev_io_del(w);
    }
}

static void stop_soon(tk_ev_timer *t, void *ud)
{
    tk_ev_timer_del(t);
    tk_evloop_stop(ud);
}

TEST(io_watcher_deleted_in_batch_is_not_called)
{
    struct pipe_ctx c = {0};
    c.l = tk_evloop_new();
    int p2[2];
    CHECK(pipe(c.fds) == 0 && pipe(p2) == 0);
    CHECK(write(c.fds[1], "a", 1) == 1 && write(p2[1], "b", 1) == 1);
    /* both are readable before the loop runs: one epoll_wait returns both */
    tk_ev_io *w1 = tk_ev_io_add(c.l, c.fds[0], TK_EV_READ, del_other, &c);
    tk_ev_io *w2 = tk_ev_io_add(c.l, p2[0], TK_EV_READ, del_other, &c);
    /* whichever comes first deletes the other */
    c.a = w1;
    c.b = w2;
    tk_ev_timer_add(c.l, 20, stop_soon, c.l);
    tk_evloop_run(c.l);
    /* either w1 ran first (w2 never called) or w2 ran first (b_called, then w1
     * ran and deleted both): never a crash, never a call after deletion */
    CHECK_INT(tk_evloop_nio(c.l), ==, 0);
    close(c.fds[0]);
    close(c.fds[1]);
    close(p2[0]);
    close(p2[1]);
    tk_evloop_free(c.l);
}

/* --- worker pool --- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int work_done, then_done, then_on_loop;
static tk_evloop *the_loop;

static void work(void *ud)
{
    usleep(1000);
    pthread_mutex_lock(&mu);
    work_done++;
    pthread_mutex_unlock(&mu);
}

static void then(void *ud)
{
    then_done++;
    then_on_loop += tk_evloop_on_loop(the_loop);
    if (then_done == 50)
        tk_evloop_stop(the_loop);
}

TEST(workpool_runs_work_then_posts_back)
{
    the_loop = tk_evloop_new();
    tk_workpool *p = tk_workpool_new("w", 4, 100);
    for (int i = 0; i < 50; i++)
        CHECK(tk_workpool_submit_then(p, the_loop, work, then, NULL) == TK_OK);
    tk_evloop_run(the_loop);
    tk_workpool_free(p);
    CHECK_INT(work_done, ==, 50);
    CHECK_INT(then_done, ==, 50);
    CHECK_INT(then_on_loop, ==, 50);
    tk_evloop_free(the_loop);
}

static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gate_open;

static void blocked(void *ud)
{
    pthread_mutex_lock(&gate_mu);
    while (!gate_open)
        pthread_cond_wait(&gate_cv, &gate_mu);
    pthread_mutex_unlock(&gate_mu);
}

TEST(workpool_refuses_past_its_queue)
{
    tk_workpool *p = tk_workpool_new("w", 2, 3);
    /* two running (blocked) + three queued fit; the sixth is refused */
    CHECK(tk_workpool_submit(p, blocked, NULL) == TK_OK);
    CHECK(tk_workpool_submit(p, blocked, NULL) == TK_OK);
    while (tk_workpool_running(p) < 2)
        usleep(500); /* wait for both workers to pick theirs up */
    for (int i = 0; i < 3; i++)
        CHECK(tk_workpool_submit(p, blocked, NULL) == TK_OK);
    CHECK(tk_workpool_submit(p, blocked, NULL) == TK_AGAIN);
    CHECK_INT(tk_workpool_running(p), ==, 2);
    CHECK_INT(tk_workpool_queued(p), ==, 3);
    pthread_mutex_lock(&gate_mu);
    gate_open = 1;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
    tk_workpool_free(p);
}

TEST_MAIN()
