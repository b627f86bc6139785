/*
 * sandbox.h — one sandbox as the lifecycle service sees it: its state machine,
 * what the request asked for, and its JSON forms (the API's Sandbox object and
 * the record kept on disk for restarts).
 *
 * A sandbox is reference counted (sbx_service_get/sbx_service_unref) and its
 * fields are guarded by the owning service's mutex; the JSON functions must be
 * called with it held.
 */
#ifndef SBX_SANDBOX_H
#define SBX_SANDBOX_H

#include <jansson.h>
#include <stdint.h>

#include "sandboxd/limits.h"
#include "sandboxd/netpol.h"
#include "sandboxd/runtime.h"

typedef enum {
    SBX_PENDING,
    SBX_RUNNING,
    SBX_PAUSING,
    SBX_PAUSED,
    SBX_RESUMING,
    SBX_STOPPING,
    SBX_TERMINATED,
    SBX_FAILED,
    SBX_POOLED, /* a warm-pool member: started, not yet handed out, never listed */
} sbx_state;

/* "Running", ... as the API spells them; NULL for an unknown value. */
const char *sbx_sandbox_state_name(sbx_state s);
/* TK_OK and *out for an API state name (case-insensitive). */
tk_status sbx_sandbox_state_parse(const char *name, sbx_state *out);

typedef struct sbx_sandbox {
    char id[SBX_ID_MAX];
    char token[SBX_TOKEN_MAX];
    sbx_state state;
    char reason[48];
    char message[256];
    int64_t transition_ms;
    int64_t created_ms;
    int64_t expires_ms;     /* 0: no automatic expiry */
    int64_t last_active_ms; /* the last proxied request began or ended */
    int64_t gone_ms;        /* when it became Terminated/Failed (tombstones are purged) */
    int64_t renew_extend_s; /* extensions["access.renew.extend.seconds"], 0 when off */
    char image[128];
    sbx_limits limits;
    json_t *metadata;   /* object of strings (owned) */
    json_t *entrypoint; /* array of strings (owned) */
    json_t *env;        /* object of strings (owned), or NULL */
    sbx_netpol *netpol; /* its own egress rules (owned), or NULL: the operator's alone */
    char egress_token[SBX_TOKEN_MAX]; /* OPENSANDBOX-EGRESS-AUTH of its /policy */
    sbx_instance *inst;               /* the runtime's handle; NULL while starting or once gone */
    int active;                       /* proxied requests in flight */
    int busy;                         /* an operation (start, delete, pause, resume) is under way */
    int refs;
    struct sbx_sandbox *next;
} sbx_sandbox;

/* Moves s to state with a reason and message (either may be NULL). */
void sbx_sandbox_set_state(sbx_sandbox *s, sbx_state st, const char *reason, const char *message);

/* The API's Sandbox object; full=0 gives the create response's subset. */
json_t *sbx_sandbox_json(const sbx_sandbox *s, int full);
/* The record kept on disk (runtime: the runtime's save() object, stolen). */
json_t *sbx_sandbox_record(const sbx_sandbox *s, json_t *runtime);
/* Fills s from a record (s zeroed by the caller); *runtime borrows the record's
 * "runtime" object. TK_EINVAL on a malformed record. */
tk_status sbx_sandbox_from_record(sbx_sandbox *s, const json_t *rec, const json_t **runtime,
                                  int *pooled);
/* Frees the JSON members (not s itself). */
void sbx_sandbox_clear(sbx_sandbox *s);

#endif
