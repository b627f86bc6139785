/*
 * pool.c — the warm pool: SANDBOX_WARM_POOL_SIZE sandboxes started ahead of any
 * request (namespaces, mounts, cgroups, execd already running), so a create is
 * a claim: limits written to the cgroup, env and entrypoint handed to the init.
 * Pool members are never listed; after a restart they are destroyed and made
 * anew (their init's channel is gone).
 *
 * When a refill starts: at once when the pool is empty (the next create would
 * be cold); otherwise once the service has been quiet for
 * SANDBOX_POOL_REFILL_QUIET (no create, delete, proxied request begun or ended),
 * and at the latest SANDBOX_POOL_REFILL_MAX_WAIT after the pool fell short.
 * Starting a sandbox is a clone of this (large, multi-threaded) process — it
 * holds our mmap lock while it copies the page tables, so our other threads'
 * page faults wait — then namespaces, mounts and a cgroup migration, most of it
 * kernel work that is not preempted. On a small machine that competes with the
 * claim it refills for and with the first command run in the claimed sandbox
 * (measured: a warm acquire 7.5 → ~4 ms p50 on 2 cores when it waits).
 */
#include <stdio.h>
#include <string.h>

#include "lib/cond.h"
#include "lib/log.h"
#include "lib/tktime.h"
#include "sandboxd/pool.h"
#include "sandboxd/service.h"
#include "sandboxd/store.h"

/* Waits on pool_cv (mu held) for at most ms. */
static void wait_ms(sbx_service *svc, int64_t ms)
{
    tk_cond_wait_ms(&svc->pool_cv, &svc->mu, TK_MAX(1, TK_MIN(ms, 1000)));
}

/* When the next refill may start (tk_mono_ms(); mu held, the pool short). */
int64_t sbx_pool_refill_at_locked(const sbx_service *svc)
{
    if (svc->pool_ready <= 0)
        return 0; /* empty: the next create would be cold */
    int64_t quiet = svc->last_activity + svc->cfg.pool_refill_quiet_ms;
    int64_t latest = svc->pool_short_since + svc->cfg.pool_refill_max_ms;
    return TK_MIN(quiet, latest);
}

static void *pool_main(void *arg)
{
    sbx_service *svc = arg;
    tk_log_set_request_id(NULL);
    pthread_mutex_lock(&svc->mu);
    while (!svc->stopping) {
        int64_t now = tk_now_ms();
        if (svc->pool_ready + svc->pool_starting >= svc->cfg.pool_size) {
            svc->pool_short_since = 0;
            wait_ms(svc, 1000);
            continue;
        }
        if (now < svc->pool_backoff_until) {
            wait_ms(svc, svc->pool_backoff_until - now);
            continue;
        }
        int64_t mono = tk_mono_ms();
        if (!svc->pool_short_since)
            svc->pool_short_since = mono;
        int64_t at = sbx_pool_refill_at_locked(svc);
        if (mono < at) {
            wait_ms(svc, at - mono);
            continue;
        }
        svc->pool_short_since = 0;
        sbx_sandbox *s = sbx_service_new_locked(svc, SBX_POOLED);
        s->busy = 1;
        s->limits = svc->cfg.policy.def;
        snprintf(s->image, sizeof s->image, "%s", SBX_IMAGE_NAME);
        svc->pool_starting++;
        sbx_service_save_locked(svc, s);
        pthread_mutex_unlock(&svc->mu);
        /* pooled: a claim follows (the docker runtime starts execd then) */
        sbx_spec spec = {.id = s->id, .execd_token = s->token, .limits = s->limits, .pooled = 1};
        sbx_instance *in = NULL;
        char err[1024];
        int64_t t0 = tk_mono_ns();
        tk_status st = svc->rt->ops->start(svc->rt, &spec, &in, err, sizeof err);
        double ms = (double)(tk_mono_ns() - t0) / 1e6;
        pthread_mutex_lock(&svc->mu);
        svc->pool_starting--;
        if (st == TK_OK) {
            s->inst = in;
            s->busy = 0;
            svc->pool_ready++;
            sbx_service_save_locked(svc, s);
            tk_debug("pool", "msg=\"pool member ready\" id=%s ms=%.2f", s->id, ms);
        } else {
            tk_error("pool", "msg=\"cannot start a pool member; retrying in 5 s\" error=\"%s\"",
                     err);
            svc->pool_backoff_until = tk_now_ms() + 5000;
            pthread_mutex_unlock(&svc->mu);
            sbx_store_remove(svc->state_dir, s->id);
            pthread_mutex_lock(&svc->mu);
            sbx_service_unlink_locked(svc, s);
        }
    }
    pthread_mutex_unlock(&svc->mu);
    return NULL;
}

void sbx_pool_start(sbx_service *svc)
{
    if (pthread_create(&svc->pool_thr, NULL, pool_main, svc) == 0)
        svc->pool_started = 1;
}
