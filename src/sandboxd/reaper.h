/*
 * reaper.h — the reaper's thread (reaper.c): expiry, idle reaping, liveness and
 * tombstones, every 250 ms.
 */
#ifndef SBX_REAPER_H
#define SBX_REAPER_H

#include "sandboxd/service.h"

/* Starts the thread (once, after sbx_service_open). sbx_service_close stops
 * and joins it. */
void sbx_reaper_start(sbx_service *svc);

#endif
