/*
 * cond.h — waiting on a condition variable until a deadline.
 *
 * Deadlines are on the monotonic clock (tk_mono_ms), whichever clock the
 * condition variable was made with (pthread_cond_clockwait), so a step of the
 * wall clock (NTP, an operator's `date`) never stretches or cuts a wait, and no
 * caller builds a timespec by hand.
 *
 *   int64_t until = tk_mono_ms() + timeout_ms;
 *   pthread_mutex_lock(&mu);
 *   while (!done && tk_cond_wait_until(&cv, &mu, until) == 0)
 *       ;
 */
#ifndef TK_COND_H
#define TK_COND_H

#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>

/* Waits on cv, mu held, until signalled or until deadline_ms (tk_mono_ms()).
 * Returns 0 when woken (perhaps spuriously: check the condition again), or
 * ETIMEDOUT once the deadline has passed (at once for one already past). */
int tk_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ms);

/* The same with a deadline ms from now. */
int tk_cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t ms);

/* Takes one unit of the semaphore s, waiting until deadline_ms (tk_mono_ms())
 * at most (a signal does not end the wait). Returns 0 when taken, ETIMEDOUT
 * when the deadline passed first, or another errno. */
int tk_sem_wait_until(sem_t *s, int64_t deadline_ms);

#endif
