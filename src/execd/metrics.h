/*
 * metrics.h — GET /metrics and GET /metrics/watch (a snapshot each second).
 *
 * cpu_count and memory come from the sandbox's cgroup (cpu.max, memory.max and
 * memory.current) when it limits them, else from the machine; cpu_used_pct is
 * the CPU time used since the previous sample over the wall time and CPUs
 * (sampled over 200 ms when there is no recent sample). uptime_s (not in the
 * spec) is the time since execd started, which is the sandbox's age.
 */
#ifndef EXECD_METRICS_H
#define EXECD_METRICS_H

#include <jansson.h>

#include "lib/httpd.h"

void execd_metrics_init(void);
json_t *execd_metrics_read(void);
void execd_metrics_get(tk_req *r, void *ud);   /* GET /metrics */
void execd_metrics_watch(tk_req *r, void *ud); /* GET /metrics/watch */
/* Open watch streams (shutdown waits for them to notice). */
int execd_metrics_watchers(void);
/* Ends every watch stream (waits up to 3 s). */
void execd_metrics_shutdown(void);

#endif
