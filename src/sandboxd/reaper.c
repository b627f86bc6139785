/*
 * reaper.c — expiry, idle reaping and liveness, every 250 ms:
 * - a sandbox past its expiresAt is destroyed (Terminated, reason ttl_expiry);
 * - one with no proxied request in flight and none begun or ended for
 *   SANDBOX_IDLE_TTL is destroyed (Terminated, reason idle_timeout);
 * - one whose processes are gone is cleaned (Failed, reason runtime_error);
 * - tombstones (Terminated/Failed) are dropped after their time.
 * Destroying frees everything the runtime holds (processes, cgroups, mounts,
 * the workspace) and the sandbox's state folder.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/cond.h"
#include "lib/log.h"
#include "lib/tktime.h"
#include "sandboxd/reaper.h"
#include "sandboxd/service.h"

#define REAP_MAX 64

static void *reaper_main(void *arg)
{
    sbx_service *svc = arg;
    tk_log_set_request_id(NULL);
    pthread_mutex_lock(&svc->mu);
    while (!svc->stopping) {
        tk_cond_wait_ms(&svc->reaper_cv, &svc->mu, 250);
        if (svc->stopping)
            break;
        int64_t now = tk_now_ms();
        sbx_sandbox *todo[REAP_MAX];
        sbx_state final[REAP_MAX];
        const char *why[REAP_MAX];
        int n = 0;
        for (sbx_sandbox **pp = &svc->list; *pp;) {
            sbx_sandbox *s = *pp;
            if ((s->state == SBX_TERMINATED || s->state == SBX_FAILED) && !s->busy &&
                now - s->gone_ms > svc->cfg.tombstone_ms) {
                *pp = s->next;
                s->next = NULL;
                if (--s->refs == 0) {
                    sbx_sandbox_clear(s);
                    free(s);
                }
                continue;
            }
            pp = &s->next;
            if (s->busy || !s->inst || n >= REAP_MAX)
                continue;
            int live = s->state == SBX_RUNNING || s->state == SBX_PAUSED || s->state == SBX_POOLED;
            if (!live)
                continue;
            const char *reason = NULL;
            sbx_state fin = SBX_TERMINATED;
            if (!svc->rt->ops->alive(svc->rt, s->inst)) {
                reason = "runtime_error";
                fin = SBX_FAILED;
            } else if (s->state != SBX_POOLED && s->expires_ms && now >= s->expires_ms) {
                reason = "ttl_expiry";
            } else if (s->state != SBX_POOLED && svc->cfg.idle_ttl_ms && s->active == 0 &&
                       now - s->last_active_ms >= svc->cfg.idle_ttl_ms) {
                reason = "idle_timeout";
            }
            if (!reason)
                continue;
            if (s->state == SBX_POOLED)
                svc->pool_ready--;
            s->busy = 1;
            s->refs++;
            if (s->state != SBX_POOLED)
                sbx_sandbox_set_state(s, SBX_STOPPING, reason, NULL);
            todo[n] = s;
            final[n] = fin;
            why[n] = reason;
            n++;
        }
        pthread_mutex_unlock(&svc->mu);
        for (int i = 0; i < n; i++) {
            const char *msg = strcmp(why[i], "ttl_expiry") == 0 ? "the sandbox's timeout passed"
                              : strcmp(why[i], "idle_timeout") == 0
                                  ? "no activity for SANDBOX_IDLE_TTL"
                                  : "the sandbox's processes exited";
            tk_info("reaper", "msg=\"reaping a sandbox\" id=%s reason=%s", todo[i]->id, why[i]);
            sbx_service_finish(svc, todo[i], final[i], why[i], msg);
            sbx_service_unref(svc, todo[i]);
        }
        pthread_cond_signal(&svc->pool_cv);
        pthread_mutex_lock(&svc->mu);
    }
    pthread_mutex_unlock(&svc->mu);
    return NULL;
}

void sbx_reaper_start(sbx_service *svc)
{
    if (pthread_create(&svc->reaper_thr, NULL, reaper_main, svc) == 0)
        svc->reaper_started = 1;
}
