#include "sandboxd/sandbox.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/json.h"
#include "lib/tktime.h"

static const char *const names[] = {
    [SBX_PENDING] = "Pending",       [SBX_RUNNING] = "Running",   [SBX_PAUSING] = "Pausing",
    [SBX_PAUSED] = "Paused",         [SBX_RESUMING] = "Resuming", [SBX_STOPPING] = "Stopping",
    [SBX_TERMINATED] = "Terminated", [SBX_FAILED] = "Failed",     [SBX_POOLED] = "Pooled",
};

const char *sbx_sandbox_state_name(sbx_state s)
{
    if ((unsigned)s >= TK_ARRAY_LEN(names))
        return NULL;
    return names[s];
}

tk_status sbx_sandbox_state_parse(const char *name, sbx_state *out)
{
    for (unsigned i = 0; i < TK_ARRAY_LEN(names); i++) {
        if (i == SBX_POOLED)
            continue;
        if (strcasecmp(name, names[i]) == 0) {
            *out = (sbx_state)i;
            return TK_OK;
        }
    }
    return TK_EINVAL;
}

void sbx_sandbox_set_state(sbx_sandbox *s, sbx_state st, const char *reason, const char *message)
{
    s->state = st;
    snprintf(s->reason, sizeof s->reason, "%s", reason ? reason : "");
    snprintf(s->message, sizeof s->message, "%s", message ? message : "");
    s->transition_ms = tk_now_ms();
    if (st == SBX_TERMINATED || st == SBX_FAILED)
        s->gone_ms = s->transition_ms;
}

static json_t *time_json(int64_t ms)
{
    char buf[40];
    tk_time_rfc3339(ms, buf, sizeof buf);
    return json_string(buf);
}

static json_t *limits_json(const sbx_limits *l)
{
    char cpu[32], mem[32], pids[32];
    snprintf(cpu, sizeof cpu, "%lldm", (long long)l->cpu_millis);
    snprintf(mem, sizeof mem, "%lld", (long long)l->memory_bytes);
    snprintf(pids, sizeof pids, "%lld", (long long)l->pids);
    return tk_json_obj("cpu", json_string(cpu), "memory", json_string(mem), "pids",
                       json_string(pids), NULL);
}

json_t *sbx_sandbox_json(const sbx_sandbox *s, int full)
{
    json_t *status = tk_json_obj("state", json_string(sbx_sandbox_state_name(s->state)), NULL);
    if (s->reason[0])
        json_object_set_new(status, "reason", json_string(s->reason));
    if (s->message[0])
        json_object_set_new(status, "message", json_string(s->message));
    json_object_set_new(status, "lastTransitionAt", time_json(s->transition_ms));
    json_t *j = tk_json_obj("id", json_string(s->id), "status", status, NULL);
    if (full)
        json_object_set_new(j, "image", tk_json_obj("uri", json_string(s->image), NULL));
    json_object_set_new(j, "metadata", s->metadata ? json_deep_copy(s->metadata) : json_object());
    json_object_set_new(j, "entrypoint",
                        s->entrypoint ? json_deep_copy(s->entrypoint) : json_array());
    if (s->expires_ms)
        json_object_set_new(j, "expiresAt", time_json(s->expires_ms));
    json_object_set_new(j, "createdAt", time_json(s->created_ms));
    if (full)
        json_object_set_new(j, "resourceLimits", limits_json(&s->limits));
    return j;
}

json_t *sbx_sandbox_record(const sbx_sandbox *s, json_t *runtime)
{
    json_t *j = tk_json_obj(
        "version", json_integer(1), "id", json_string(s->id), "token", json_string(s->token),
        "state", json_string(sbx_sandbox_state_name(s->state)), "reason", json_string(s->reason),
        "message", json_string(s->message), "transitionMs", json_integer(s->transition_ms),
        "createdMs", json_integer(s->created_ms), "expiresMs", json_integer(s->expires_ms),
        "renewExtendS", json_integer(s->renew_extend_s), "image", json_string(s->image), "memory",
        json_integer(s->limits.memory_bytes), "cpuMillis", json_integer(s->limits.cpu_millis),
        "pids", json_integer(s->limits.pids), "metadata",
        s->metadata ? json_deep_copy(s->metadata) : json_object(), "entrypoint",
        s->entrypoint ? json_deep_copy(s->entrypoint) : json_array(), "env",
        s->env ? json_deep_copy(s->env) : json_null(), "pool", json_boolean(s->state == SBX_POOLED),
        NULL);
    json_object_set_new(j, "runtime", runtime ? runtime : json_null());
    json_object_set_new(j, "egressToken", json_string(s->egress_token));
    json_object_set_new(j, "networkPolicy", s->netpol ? sbx_netpol_json(s->netpol) : json_null());
    return j;
}

tk_status sbx_sandbox_from_record(sbx_sandbox *s, const json_t *rec, const json_t **runtime,
                                  int *pooled)
{
    const char *id = tk_json_str(rec, "id"), *tok = tk_json_str(rec, "token"),
               *st = tk_json_str(rec, "state");
    if (!id || !tok || !st || strlen(id) >= sizeof s->id || strlen(tok) >= sizeof s->token)
        return TK_EINVAL;
    snprintf(s->id, sizeof s->id, "%s", id);
    snprintf(s->token, sizeof s->token, "%s", tok);
    *pooled = tk_json_bool_or(rec, "pool", 0);
    if (*pooled)
        s->state = SBX_POOLED;
    else if (sbx_sandbox_state_parse(st, &s->state) != TK_OK)
        return TK_EINVAL;
    snprintf(s->reason, sizeof s->reason, "%s", tk_json_str_or(rec, "reason", ""));
    snprintf(s->message, sizeof s->message, "%s", tk_json_str_or(rec, "message", ""));
    s->transition_ms = tk_json_int_or(rec, "transitionMs", 0);
    s->created_ms = tk_json_int_or(rec, "createdMs", 0);
    s->expires_ms = tk_json_int_or(rec, "expiresMs", 0);
    s->renew_extend_s = tk_json_int_or(rec, "renewExtendS", 0);
    snprintf(s->image, sizeof s->image, "%s", tk_json_str_or(rec, "image", ""));
    s->limits.memory_bytes = tk_json_int_or(rec, "memory", 0);
    s->limits.cpu_millis = tk_json_int_or(rec, "cpuMillis", 0);
    s->limits.pids = tk_json_int_or(rec, "pids", 0);
    json_t *m = json_object_get(rec, "metadata");
    s->metadata = json_is_object(m) ? json_deep_copy(m) : json_object();
    json_t *e = json_object_get(rec, "entrypoint");
    s->entrypoint = json_is_array(e) ? json_deep_copy(e) : json_array();
    json_t *env = json_object_get(rec, "env");
    s->env = json_is_object(env) ? json_deep_copy(env) : NULL;
    snprintf(s->egress_token, sizeof s->egress_token, "%s", tk_json_str_or(rec, "egressToken", ""));
    free(s->netpol);
    s->netpol = NULL;
    char npmsg[256];
    json_t *np = json_object_get(rec, "networkPolicy");
    if (np && !json_is_null(np) && sbx_netpol_parse(np, &s->netpol, npmsg, sizeof npmsg) != TK_OK)
        return TK_EINVAL;
    if (np && !json_is_null(np) && !s->netpol) /* {} written for a policy that emptied */
        s->netpol = calloc(1, sizeof *s->netpol);
    *runtime = json_object_get(rec, "runtime");
    return TK_OK;
}

void sbx_sandbox_clear(sbx_sandbox *s)
{
    json_decref(s->metadata);
    json_decref(s->entrypoint);
    json_decref(s->env);
    s->metadata = s->entrypoint = s->env = NULL;
    free(s->netpol);
    s->netpol = NULL;
}
