/*
 * turn.h — chat turns (POST /api/sessions/{id}/messages, /cancel) and the
 * recovery of turns whose instance died. Used by agent.c.
 */
#ifndef APP_AGENT_TURN_H
#define APP_AGENT_TURN_H

#include <libpq-fe.h>
#include <stddef.h>

#include "lib/httpd.h"

/* Cancels the turn (by id, or the one of a chat session) if it runs here. */
void agent_turn_cancel_local(const char *turn_id, const char *session_id, const char *code,
                             const char *msg);
/* Cancels every turn of this instance (shutdown). */
void agent_turns_cancel_all(void);
/* Turns running on this instance (loop thread). */
size_t agent_turns_active(void);
/* NOTIFY tusko_cancel handler. */
void agent_turn_on_cancel_notify(const char *channel, const char *payload, void *ud);
/* The sweep of dead instances' turns (an agent_events_on_tick callback). */
void agent_turns_recover(PGconn *c, void *ud);

extern const tk_route agent_turn_routes[];
extern const size_t agent_turn_nroutes;

#endif
