/*
 * metrics.h — Prometheus metrics: counters, gauges and histograms with labels,
 * one registry per process, written in the text exposition format (0.0.4) for
 * GET /metrics (docs/OBSERVABILITY.md lists every metric of every program).
 *
 * Register at start-up (tk_metrics_counter & co. return the same metric when
 * called again with its name), then count from any thread:
 *
 *   static tk_metric *turns;
 *   turns = tk_metrics_counter("tusko_turns_finished_total", "Turns ended", "outcome");
 *   tk_metrics_add(turns, 1, "ok");
 *
 * Label values follow the value, one per label name given at registration
 * (NULL stands for ""). A metric keeps at most TK_METRICS_MAX_SERIES label
 * combinations; past that the values are counted under every label being
 * "_other", so a flood of distinct values cannot grow memory without bound.
 * Names follow the Prometheus conventions: base units (_seconds, _bytes), and
 * _total for counters.
 */
#ifndef TK_METRICS_H
#define TK_METRICS_H

#include <stddef.h>

#include "lib/buf.h"

#define TK_METRICS_MAX_SERIES  512
#define TK_METRICS_MAX_LABELS  4
#define TK_METRICS_MAX_BUCKETS 16

typedef struct tk_metric tk_metric;

/* labels: comma-separated label names ("outcome", "tool,lane"), NULL for none. */
tk_metric *tk_metrics_counter(const char *name, const char *help, const char *labels);
tk_metric *tk_metrics_gauge(const char *name, const char *help, const char *labels);
/* buckets: ascending upper bounds (+Inf is added); NULL for the default
 * latency buckets (5 ms to 60 s). */
tk_metric *tk_metrics_histogram(const char *name, const char *help, const char *labels,
                                const double *buckets, size_t nbuckets);
/* A gauge without labels whose value fn gives at each scrape. */
void tk_metrics_gauge_fn(const char *name, const char *help, double (*fn)(void *ud), void *ud);

/* Counter: adds v (>= 0). Gauge: adds v (may be negative). */
void tk_metrics_add(tk_metric *m, double v, ...);
/* Gauge: sets the value. */
void tk_metrics_set(tk_metric *m, double v, ...);
/* Histogram: one observation. */
void tk_metrics_observe(tk_metric *m, double v, ...);

/* The value of a series (tests, and gauges computed from counters); a
 * histogram's is its count. 0 when the series does not exist. */
double tk_metrics_value(tk_metric *m, ...);

/* Writes every metric in the text exposition format. */
void tk_metrics_render(tk_buf *b);

#endif
