/*
 * workpool.h — a bounded pool of worker threads for blocking work (database
 * calls, sandbox HTTP calls) that an event loop must not do itself.
 *
 * At most `threads` jobs run at once; at most `max_queue` wait. A job that does
 * not fit is refused (TK_AGAIN) rather than queued without bound. The usual
 * pattern runs the blocking part on the pool and the rest back on a loop:
 *
 *   tk_workpool_submit_then(pool, loop, fetch_history, history_ready, turn);
 *   // fetch_history(turn) on a worker, then history_ready(turn) on the loop
 *
 * Shutdown: tk_workpool_free waits for running and queued jobs to finish (their
 * `then` parts are posted as usual, so free the pool before stopping the loop).
 */
#ifndef TK_WORKPOOL_H
#define TK_WORKPOOL_H

#include <stddef.h>

#include "lib/common.h"
#include "lib/evloop.h"

typedef struct tk_workpool tk_workpool;
typedef void (*tk_work_fn)(void *ud);

/* name is used for thread names ("name-3"). */
tk_workpool *tk_workpool_new(const char *name, unsigned threads, size_t max_queue);
/* Runs what is queued, then joins the threads and frees the pool. */
void tk_workpool_free(tk_workpool *p);

/* Queues fn(ud). TK_AGAIN when the queue is full (nothing queued). */
tk_status tk_workpool_submit(tk_workpool *p, tk_work_fn fn, void *ud);
/* Queues work(ud) and, once it returned, posts then(ud) to loop. */
tk_status tk_workpool_submit_then(tk_workpool *p, tk_evloop *loop, tk_work_fn work, tk_work_fn then,
                                  void *ud);

/* Jobs queued and not started / running now (for metrics and tests). */
size_t tk_workpool_queued(tk_workpool *p);
size_t tk_workpool_running(tk_workpool *p);

#endif
