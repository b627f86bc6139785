#include "app/observe.h"

#include <stdio.h>
#include <string.h>

#include "app/app.h"
#include "app/schema.h"
#include "lib/pg.h"
#include "lib/prog.h"

tk_metric *app_observe_turns_started, *app_observe_turns_finished, *app_observe_turn_seconds,
    *app_observe_first_token, *app_observe_llm_calls, *app_observe_tokens, *app_observe_refusals;

/* /readyz: the database answers within a second and has every migration */
static int ready(char *why, size_t whylen, void *ud)
{
    (void)ud;
    PGconn *c = tk_pg_acquire(app_get()->pg, 1000);
    if (!c) {
        snprintf(why, whylen, "no database connection within 1 s");
        return 0;
    }
    PGresult *r = tk_pg_query(c, "SELECT version FROM schema_migrations", 0, NULL);
    int ok = tk_pg_ok(r);
    if (!ok) {
        snprintf(why, whylen, "the database does not answer (or has no schema_migrations)");
    } else {
        for (const struct tk_embed_file *f = app_schema_files(); f && f->name && ok; f++) {
            int found = 0;
            for (int i = 0; i < PQntuples(r) && !found; i++)
                found = strcmp(PQgetvalue(r, i, 0), f->name) == 0;
            if (!found) {
                snprintf(why, whylen, "migration %s is not applied (tusko migrate)", f->name);
                ok = 0;
            }
        }
    }
    PQclear(r);
    tk_pg_release(app_get()->pg, c);
    return ok;
}

void app_observe_init(void)
{
    static const double turn_b[] = {0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800};
    app_observe_turns_started =
        tk_metrics_counter("tusko_turns_started_total", "Turns that began running", NULL);
    app_observe_turns_finished =
        tk_metrics_counter("tusko_turns_finished_total",
                           "Turns that ended, by outcome (done, failed, cancelled)", "outcome");
    app_observe_turn_seconds = tk_metrics_histogram("tusko_turn_duration_seconds",
                                                    "Wall time of a turn from its start to its end",
                                                    "outcome", turn_b, TK_ARRAY_LEN(turn_b));
    app_observe_first_token = tk_metrics_histogram(
        "tusko_llm_first_token_seconds",
        "Time from a model call's request to its first streamed token", "model", NULL, 0);
    app_observe_llm_calls = tk_metrics_counter(
        "tusko_llm_calls_total", "Model calls (subagents' included), by outcome (ok, error)",
        "model,outcome");
    app_observe_tokens = tk_metrics_counter(
        "tusko_llm_tokens_total",
        "Tokens of model calls as the provider counted them, by direction (input, output)",
        "model,direction");
    app_observe_refusals = tk_metrics_counter(
        "tusko_turn_refusals_total",
        "Messages refused before a turn started, by reason (rate_limit, too_many_turns)", "reason");
    tk_prog_set_ready(ready, NULL);
}
