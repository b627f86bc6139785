/*
 * audit.h — the audit log (audit_log, sql/0161_audit.sql; docs/ADMIN.md):
 * who did what, when and from where. Writing an entry never fails the action
 * it records when the log itself cannot be written (the failure is logged).
 *
 * Actions are dotted names: "auth.login", "auth.login_failed", "user.update",
 * "token.create", "sandbox.spawn", "sandbox.reap", "skill.install",
 * "schedule.create", "connection.create", ...
 */
#ifndef APP_AUDIT_H
#define APP_AUDIT_H

#include <jansson.h>
#include <libpq-fe.h>

#include "lib/common.h"
#include "lib/httpd.h"

#define APP_AUDIT_PAGE_MAX 500

/* Writes an entry on c. actor_id, ip, account_id, target may be NULL; detail
 * (may be NULL) is stolen. TK_OK, or TK_ERROR (logged). */
tk_status app_audit(PGconn *c, const char *actor_id, const char *ip, const char *action,
                    const char *account_id, const char *target, json_t *detail);

/* The same, on a connection of its own (for callers without one). */
void app_audit_now(const char *actor_id, const char *ip, const char *action, const char *account_id,
                   const char *target, json_t *detail);

/* The same for a request: the caller (if any) is the actor, its address the ip. */
void app_audit_req(tk_req *r, const char *action, const char *account_id, const char *target,
                   json_t *detail);

/* Deletes entries older than AUDIT_RETENTION (at most `batch`); the number
 * deleted, or -1. */
int app_audit_sweep(PGconn *c, int batch);

/* GET /api/admin/audit: newest first, ?action= (exact, or a prefix ending in
 * "."), ?actor= (an account id), ?account=, ?before= (an entry id: the next
 * page), ?limit= (1..APP_AUDIT_PAGE_MAX, default 100), ?format=jsonl (every
 * matching entry, one JSON object a line, streamed as an attachment). */
void app_audit_route_list(tk_req *r, void *ud);

#endif
