/*
 * observe.h — tusko's metrics (lib/metrics.h; every one in
 * docs/OBSERVABILITY.md) and its readiness for GET /readyz: the database
 * answers and every migration tusko knows is applied.
 */
#ifndef APP_OBSERVE_H
#define APP_OBSERVE_H

#include "lib/metrics.h"

/* Registers the metrics and the readiness check (once, before serving). */
void app_observe_init(void);

/* The metrics others count into (NULL before app_observe_init: counting
 * into NULL does nothing). */
extern tk_metric *app_observe_turns_started;  /* tusko_turns_started_total */
extern tk_metric *app_observe_turns_finished; /* tusko_turns_finished_total{outcome} */
extern tk_metric *app_observe_turn_seconds;   /* tusko_turn_duration_seconds{outcome} */
extern tk_metric *app_observe_first_token;    /* tusko_llm_first_token_seconds{model} */
extern tk_metric *app_observe_llm_calls;      /* tusko_llm_calls_total{model,outcome} */
extern tk_metric *app_observe_tokens;         /* tusko_llm_tokens_total{model,direction} */
extern tk_metric *app_observe_refusals;       /* tusko_turn_refusals_total{reason} */

#endif
