/*
 * pool.c — the warm pool: SANDBOX_WARM_POOL_SIZE sandboxes started ahead of any
 * request (namespaces, mounts, cgroups, execd already running), so a create is
 * a claim: limits written to the cgroup, env and entrypoint handed to the init.
 * A refill starts as soon as one is taken. Pool members are never listed; after
 * a restart they are destroyed and made anew (their init's channel is gone).
 */
#include <stdio.h>
#include <string.h>

#include "lib/log.h"
#include "lib/tktime.h"
#include "sandboxd/service.h"
#include "sandboxd/store.h"

sbx_sandbox *sbx_pool_take_locked(sbx_service *svc)
{
    for (sbx_sandbox *s = svc->list; s; s = s->next) {
        if (s->state == SBX_POOLED && s->inst && !s->busy) {
            s->busy = 1;
            svc->pool_ready--;
            return s;
        }
    }
    return NULL;
}

static void *pool_main(void *arg)
{
    sbx_service *svc = arg;
    tk_log_set_request_id(NULL);
    pthread_mutex_lock(&svc->mu);
    while (!svc->stopping) {
        int64_t now = tk_now_ms();
        if (svc->pool_ready + svc->pool_starting >= svc->cfg.pool_size ||
            now < svc->pool_backoff_until) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            pthread_cond_timedwait(&svc->pool_cv, &svc->mu, &ts);
            continue;
        }
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
    pthread_create(&svc->pool_thr, NULL, pool_main, svc);
}

void sbx_pool_destroy_all(sbx_service *svc)
{
    for (;;) {
        pthread_mutex_lock(&svc->mu);
        sbx_sandbox *s = sbx_pool_take_locked(svc);
        pthread_mutex_unlock(&svc->mu);
        if (!s)
            return;
        sbx_service_finish(svc, s, SBX_TERMINATED, "shutdown", NULL);
    }
}
