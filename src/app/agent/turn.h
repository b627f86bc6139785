/*
 * turn.h — chat turns (POST /api/sessions/{id}/messages, /cancel) and the
 * recovery of turns whose instance died. Started by app/agent_start.c.
 */
#ifndef APP_AGENT_TURN_H
#define APP_AGENT_TURN_H

#include <libpq-fe.h>
#include <stddef.h>

#include "app/agent/run.h"
#include "app/models.h"
#include "lib/common.h"
#include "lib/httpd.h"
#include "lib/id.h"

/* Where every turn's run runs (borrowed: it outlives the turns). Before the
 * first turn. */
void agent_turns_init(const agent_run_env *env);

typedef struct {
    char turn_id[TK_UUID_LEN];
    char message_id[TK_UUID_LEN];
    const app_model *model;
    char busy_turn[TK_UUID_LEN]; /* TK_AGAIN: the chat's active turn */
    int retry_after_s;           /* TK_EDENIED: rate limited */
    int active_max;              /* TK_EDENIED: at USER_MAX_ACTIVE_TURNS (this many) */
} agent_submit;

/*
 * Starts a turn as if user_id had sent content in the chat (the POST route uses
 * it; so can a scheduler or a skill runner): the chat rate limit, ownership,
 * the model (NULL: the chat's own when still allowed, else the default — the
 * caller checks a named model against the allowlist), the stored user message,
 * a queued turn, and the turn posted to the agent loop on this instance.
 * TK_OK (out->turn_id), TK_EDENIED (rate limited, out->retry_after_s; or
 * the user has USER_MAX_ACTIVE_TURNS turns active, out->active_max and
 * out->busy_turn one of them),
 * TK_ENOENT (not the user's chat), TK_AGAIN (a turn is active, out->busy_turn),
 * TK_EINVAL (no model allowed at all), TK_ERROR (database). Blocking.
 */
tk_status agent_turn_submit(const char *user_id, const char *session_id, const char *content,
                            const app_model *model, agent_submit *out);

/* Cancels the turn (by id, or the one of a chat session) if it runs here. */
void agent_turn_cancel_local(const char *turn_id, const char *session_id, const char *code,
                             const char *msg);
/* Cancels every turn of this instance (shutdown). */
void agent_turns_cancel_all(void);
/* Turns running on this instance (loop thread). */
size_t agent_turns_active(void);
/* NOTIFY tusko_cancel handler. */
void agent_turn_on_cancel_notify(const char *channel, const char *payload, void *ud);
/* The sweep of dead instances' turns (an agent_bus_on_tick callback). */
void agent_turns_recover(PGconn *c, void *ud);

extern const tk_route agent_turn_routes[];
extern const size_t agent_turn_nroutes;

#endif
