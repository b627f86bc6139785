#include "lib/cond.h"

#include <errno.h>
#include <time.h>

#include "lib/tktime.h"

static struct timespec mono_ts(int64_t deadline_ms)
{
    if (deadline_ms < 0)
        deadline_ms = 0;
    return (struct timespec){.tv_sec = (time_t)(deadline_ms / 1000),
                             .tv_nsec = (long)(deadline_ms % 1000) * 1000000L};
}

int tk_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ms)
{
    struct timespec ts = mono_ts(deadline_ms);
    int rc = pthread_cond_clockwait(cv, mu, CLOCK_MONOTONIC, &ts);
    return rc == ETIMEDOUT ? ETIMEDOUT : 0;
}

int tk_cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t ms)
{
    return tk_cond_wait_until(cv, mu, tk_mono_ms() + ms);
}

int tk_sem_wait_until(sem_t *s, int64_t deadline_ms)
{
    struct timespec ts = mono_ts(deadline_ms);
    while (sem_clockwait(s, CLOCK_MONOTONIC, &ts) != 0)
        if (errno != EINTR)
            return errno;
    return 0;
}
