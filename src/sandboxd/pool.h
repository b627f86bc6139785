/*
 * pool.h — the warm pool's thread (pool.c): it keeps SANDBOX_WARM_POOL_SIZE
 * sandboxes started ahead of any request. It works on the service through
 * service.h's _locked functions; a create takes a member (service.c).
 */
#ifndef SBX_POOL_H
#define SBX_POOL_H

#include <stdint.h>

#include "sandboxd/service.h"

/* Starts the thread (once, after sbx_service_open; only with a runtime).
 * sbx_service_close stops and joins it. */
void sbx_pool_start(sbx_service *svc);
/* When a refill of a short pool may start, in tk_mono_ms() time (mu held). */
int64_t sbx_pool_refill_at_locked(const sbx_service *svc);

#endif
