/*
 * bus.h — the chat server's line to the other instances, through Postgres's
 * LISTEN/NOTIFY. One thread (ev-listen) with a connection of its own:
 *
 *   - it LISTENs on the channels registered with agent_bus_listen and calls
 *     their handlers on that thread (tusko_events: the hub; tusko_cancel: turns);
 *   - it holds this instance's liveness: a session advisory lock on the
 *     instance id (AGENT_BUS_INSTANCE_LOCK_SQL), held while the process lives,
 *     so another instance can tell when this one's turns are orphaned;
 *   - it runs the ticks (agent_bus_on_tick) on its connection every ~10 s and
 *     at once after every (re)connect;
 *   - after every wake-up (a notification, agent_bus_wake, or a second going
 *     by) it runs the round hooks (agent_bus_on_round) on its connection.
 *
 * Register everything before agent_bus_start. A lost connection is made again
 * (the lock is taken again; the ticks run at once).
 */
#ifndef APP_AGENT_BUS_H
#define APP_AGENT_BUS_H

#include <libpq-fe.h>
#include <stddef.h>

#include "lib/common.h"

/* A notification's handler: on the bus thread; payload is NOTIFY's. */
typedef void (*agent_bus_notify_fn)(const char *channel, const char *payload, void *ud);
/* A tick or round hook: on the bus thread, with its connection. */
typedef void (*agent_bus_conn_fn)(PGconn *conn, void *ud);

/* LISTENs on channel and calls fn for each notification (at most 8 channels). */
void agent_bus_listen(const char *channel, agent_bus_notify_fn fn, void *ud);
/* Calls fn every ~10 s and once after each (re)connect (sweeps that need a
 * session-level advisory lock context). At most 8. */
void agent_bus_on_tick(agent_bus_conn_fn fn, void *ud);
/* Calls fn after every wake-up of the bus thread, at least once a second. At most 8. */
void agent_bus_on_round(agent_bus_conn_fn fn, void *ud);
/* Wakes the bus thread now (any thread; never blocks). */
void agent_bus_wake(void);

/* Makes the instance id and starts the thread. */
tk_status agent_bus_start(char *err, size_t errlen);
/* Stops the thread (the liveness lock goes with its connection). */
void agent_bus_stop(void);

/* This process's instance id (a random UUID made at start). */
const char *agent_bus_instance_id(void);
/* SQL for the advisory lock key of instance id $1 (liveness checks). */
#define AGENT_BUS_INSTANCE_LOCK_SQL "hashtextextended('tusko_instance:' || $1, 0)"

/* A new connection to DATABASE_URL for a thread of the event path (NULL,
 * logged with what, when the database cannot be reached). */
PGconn *agent_bus_connect(const char *what);

#endif
