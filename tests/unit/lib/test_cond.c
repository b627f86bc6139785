#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <time.h>

#include "lib/cond.h"
#include "lib/tktime.h"
#include "tk_test.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER; /* made on CLOCK_REALTIME */
static int flag;

TEST(cond_wait_times_out_no_earlier_than_the_deadline)
{
    pthread_mutex_lock(&mu);
    int64_t until = tk_mono_ms() + 50;
    int rc;
    while ((rc = tk_cond_wait_until(&cv, &mu, until)) == 0)
        ;
    CHECK_INT(rc, ==, ETIMEDOUT);
    CHECK_INT(tk_mono_ms(), >=, until);
    int64_t t0 = tk_mono_ms();
    while ((rc = tk_cond_wait_ms(&cv, &mu, 30)) == 0)
        ;
    CHECK_INT(rc, ==, ETIMEDOUT);
    CHECK_INT(tk_mono_ms() - t0, >=, 30);
    pthread_mutex_unlock(&mu);
}

TEST(cond_wait_with_a_deadline_already_past_returns_at_once)
{
    pthread_mutex_lock(&mu);
    CHECK_INT(tk_cond_wait_until(&cv, &mu, tk_mono_ms() - 1000), ==, ETIMEDOUT);
    CHECK_INT(tk_cond_wait_until(&cv, &mu, 0), ==, ETIMEDOUT);
    CHECK_INT(tk_cond_wait_until(&cv, &mu, -5), ==, ETIMEDOUT);
    CHECK_INT(tk_cond_wait_ms(&cv, &mu, 0), ==, ETIMEDOUT);
    CHECK_INT(tk_cond_wait_ms(&cv, &mu, -1), ==, ETIMEDOUT);
    pthread_mutex_unlock(&mu);
}

static void *signaller(void *arg)
{
    pthread_cond_t *c = arg;
    struct timespec d = {0, 20 * 1000000L};
    nanosleep(&d, NULL);
    pthread_mutex_lock(&mu);
    flag = 1;
    pthread_cond_signal(c);
    pthread_mutex_unlock(&mu);
    return NULL;
}

static void woken_before_the_deadline(pthread_cond_t *c)
{
    flag = 0;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, signaller, c) == 0);
    pthread_mutex_lock(&mu);
    int64_t until = tk_mono_ms() + 60000;
    int rc = 0;
    while (!flag && (rc = tk_cond_wait_until(c, &mu, until)) == 0)
        ;
    CHECK_INT(rc, ==, 0);
    CHECK(flag);
    CHECK_INT(tk_mono_ms(), <, until); /* woken, not timed out */
    pthread_mutex_unlock(&mu);
    pthread_join(th, NULL);
}

TEST(cond_wait_is_woken_by_a_signal_whatever_the_cond_clock)
{
    woken_before_the_deadline(&cv);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_t mono;
    pthread_cond_init(&mono, &ca);
    pthread_condattr_destroy(&ca);
    woken_before_the_deadline(&mono);
    /* and a monotonic cond times out on the same deadline */
    pthread_mutex_lock(&mu);
    int64_t until = tk_mono_ms() + 20;
    while (tk_cond_wait_until(&mono, &mu, until) == 0)
        ;
    CHECK_INT(tk_mono_ms(), >=, until);
    pthread_mutex_unlock(&mu);
    pthread_cond_destroy(&mono);
}

static void *poster(void *arg)
{
    struct timespec d = {0, 20 * 1000000L};
    nanosleep(&d, NULL);
    sem_post(arg);
    return NULL;
}

TEST(sem_wait_takes_a_unit_or_times_out_at_the_deadline)
{
    sem_t s;
    sem_init(&s, 0, 1);
    CHECK_INT(tk_sem_wait_until(&s, tk_mono_ms() + 1000), ==, 0); /* the one unit */
    int64_t until = tk_mono_ms() + 40;
    CHECK_INT(tk_sem_wait_until(&s, until), ==, ETIMEDOUT);
    CHECK_INT(tk_mono_ms(), >=, until);
    CHECK_INT(tk_sem_wait_until(&s, 0), ==, ETIMEDOUT);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, poster, &s) == 0);
    until = tk_mono_ms() + 60000;
    CHECK_INT(tk_sem_wait_until(&s, until), ==, 0); /* posted meanwhile */
    CHECK_INT(tk_mono_ms(), <, until);
    pthread_join(th, NULL);
    sem_destroy(&s);
}

TEST_MAIN()
