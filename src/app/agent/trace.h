/*
 * trace.h — the trace of a turn: spans for the model calls, each tool call with
 * its lane, sandbox and browser spawns, subagents. Durations are measured with
 * the monotonic clock; start times are wall-clock for display.
 *
 *   agent_span *s = agent_span_begin(trace, parent_id, "tool", "write_file");
 *   agent_span_attr(s, "lane", json_string("sandbox"));
 *   ...
 *   agent_span_end(s, "ok");     // the span is now queued for storing
 *
 * A trace belongs to one turn and is safe to use from any thread (a tool on a
 * worker thread records a sandbox spawn while the loop records a model call).
 * Ended spans are stored by agent_trace_store (the turn calls it at each step
 * and at the end); a span never ended is stored as "cancelled" when the trace
 * is freed by a failing turn.
 */
#ifndef APP_AGENT_TRACE_H
#define APP_AGENT_TRACE_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stdint.h>

#include "lib/common.h"
#include "lib/httpd.h"
#include "lib/id.h"

typedef struct agent_trace agent_trace;
typedef struct agent_span agent_span;

agent_trace *agent_trace_new(const char *turn_id);
void agent_trace_free(agent_trace *t);

/* parent_id: a span id, or NULL for a top-level span of the turn. */
agent_span *agent_span_begin(agent_trace *t, const char *parent_id, const char *kind,
                             const char *name);
const char *agent_span_id(const agent_span *s);
/* Sets an attribute (steals v). */
void agent_span_attr(agent_span *s, const char *key, json_t *v);
/* Merges an object of attributes (steals attrs). */
void agent_span_attrs(agent_span *s, json_t *attrs);
/* Ends the span: status "ok", "error" or "cancelled". Returns the duration in
 * ms. The span must not be used afterwards. */
double agent_span_end(agent_span *s, const char *status);
/* Records a span that was measured elsewhere (start wall-clock ms, duration). */
void agent_span_record(agent_trace *t, const char *parent_id, const char *kind, const char *name,
                       int64_t start_ms, double duration_ms, const char *status, json_t *attrs);

/* Inserts the ended spans not stored yet (blocking; a worker thread). */
tk_status agent_trace_store(agent_trace *t, PGconn *c);
/* The ended spans not stored yet as a JSON array text (for jsonb_to_recordset,
 * the shape tusko_spans_add takes), marked stored; NULL when there are none.
 * Callers fold the insert into a statement of their own (one round trip). */
char *agent_trace_take_pending(agent_trace *t);
/* GET /api/turns/{id}/trace */
extern const tk_route agent_trace_routes[];
extern const size_t agent_trace_nroutes;

#endif
