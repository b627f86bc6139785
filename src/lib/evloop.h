/*
 * evloop.h — a single-threaded event loop: epoll for file descriptors, a timer
 * heap, and a thread-safe wakeup queue for work posted from other threads.
 *
 * One thread runs the loop (tk_evloop_run, or the thread tk_evloop_start makes);
 * every other function except tk_evloop_post and tk_evloop_stop must be called
 * on that thread. Callbacks run on the loop thread, one at a time, and must not
 * block: blocking work goes to a worker pool (workpool.h), whose completion is
 * posted back with tk_evloop_post.
 *
 *   tk_evloop *l = tk_evloop_new();
 *   tk_evloop_start(l, "agent");                 // own thread
 *   tk_evloop_post(l, start_turn, turn);          // from any thread
 *   ...
 *   tk_evloop_stop(l); tk_evloop_join(l); tk_evloop_free(l);
 *
 * Lifetimes: a watcher or timer removed inside a callback is freed only after the
 * current batch of events is dispatched, so an event already fetched for it is
 * dropped instead of touching freed memory (as redis defers freeClientAsync).
 */
#ifndef TK_EVLOOP_H
#define TK_EVLOOP_H

#include <stddef.h>
#include <stdint.h>

#include "lib/common.h"

typedef struct tk_evloop tk_evloop;
typedef struct tk_ev_io tk_ev_io;
typedef struct tk_ev_timer tk_ev_timer;

enum { TK_EV_READ = 1 << 0, TK_EV_WRITE = 1 << 1, TK_EV_ERROR = 1 << 2 };

/* revents: TK_EV_READ / TK_EV_WRITE / TK_EV_ERROR (hang-up or error). */
typedef void (*tk_ev_io_fn)(tk_ev_io *w, int fd, int revents, void *ud);
typedef void (*tk_ev_timer_fn)(tk_ev_timer *t, void *ud);
typedef void (*tk_ev_post_fn)(void *ud);

tk_evloop *tk_evloop_new(void);
/* Frees the loop; it must not be running. Pending posts are dropped (not run);
 * pending timers are freed. Delete fd watchers (and fired timers) first. */
void tk_evloop_free(tk_evloop *l);

/* Runs on the calling thread until tk_evloop_stop. */
void tk_evloop_run(tk_evloop *l);
/* Runs the loop on a new thread named `name`. */
tk_status tk_evloop_start(tk_evloop *l, const char *name);
/* Asks the loop to return (any thread). Posts queued before the stop still run. */
void tk_evloop_stop(tk_evloop *l);
/* Waits for the thread tk_evloop_start made. */
void tk_evloop_join(tk_evloop *l);
/* Non-zero when called on the loop's thread. */
int tk_evloop_on_loop(const tk_evloop *l);

/* Queues fn(ud) to run on the loop thread (any thread; never blocks for long).
 * Posts run in the order they were made. */
void tk_evloop_post(tk_evloop *l, tk_ev_post_fn fn, void *ud);

/* Watches fd for `events` (TK_EV_READ|TK_EV_WRITE). Level-triggered. */
tk_ev_io *tk_ev_io_add(tk_evloop *l, int fd, int events, tk_ev_io_fn fn, void *ud);
tk_status tk_ev_io_modify(tk_ev_io *w, int events);
/* Stops watching (does not close the fd). w is invalid afterwards. */
void tk_ev_io_del(tk_ev_io *w);

/* A one-shot timer firing after ms milliseconds (0: on the next iteration). */
tk_ev_timer *tk_ev_timer_add(tk_evloop *l, int64_t ms, tk_ev_timer_fn fn, void *ud);
/* Re-arms a timer (pending or fired-but-not-deleted) to fire after ms. */
void tk_ev_timer_rearm(tk_ev_timer *t, int64_t ms);
/* Cancels and frees the timer. A fired timer stays allocated until deleted:
 * every tk_ev_timer_add is matched by one tk_ev_timer_del. */
void tk_ev_timer_del(tk_ev_timer *t);

/* Monotonic milliseconds as the loop saw them at the start of this iteration. */
int64_t tk_evloop_now(const tk_evloop *l);
/* Counters for tests and metrics. */
size_t tk_evloop_nio(const tk_evloop *l);
size_t tk_evloop_ntimers(const tk_evloop *l);

#endif
