/* What the sandbox-lane tools share: getting the chat's sandbox for a write or
 * an execution, and saying that it was replaced. See sandbox_tool.h. */
#include "app/tools/sandbox_tool.h"

#include <stdio.h>

#include "app/app.h"
#include "lib/json.h"
#include "lib/tktime.h"

/* Gets the chat's sandbox for a write/execute. Reports a spawn (event + span),
 * a gone workspace, or a quota refusal (a 429 error event and the result).
 * Returns 1 with *h ready, 0 with *out filled. */
int agent_tool_acquire_sandbox(agent_call *call, const char *trigger, sandbox_handle *h,
                               agent_result *out)
{
    sandbox_session s = {.user_id = agent_call_user(call),
                         .session_id = agent_call_session(call),
                         .trigger = trigger,
                         .cancel = agent_call_cancel_flag(call)};
    sandbox_quota q;
    char err[512];
    tk_status st = getOrCreateOpenSandbox(&s, h, &q, err, sizeof err);
    if (st == TK_EDENIED && q.max > 0) {
        agent_call_emit(call, "error",
                        tk_json_obj("code", json_string("SANDBOX_QUOTA"), "http_status",
                                    json_integer(429), "message", json_string(err), "live",
                                    json_integer(q.live), "max", json_integer(q.max), NULL));
        agent_call_set_attrs(call, tk_json_obj("quota_refused", json_true(), NULL));
        agent_result_error(out, "%s", err);
        return 0;
    }
    if (st != TK_OK) {
        agent_result_error(out, "%s", err);
        return 0;
    }
    if (!h->spawn.created)
        return 1;
    const app_settings *cfg = app_get()->cfg;
    char ttl[32], quota[64], idle[64];
    tk_format_duration(cfg->sandbox_idle_ttl_ms, ttl, sizeof ttl);
    snprintf(idle, sizeof idle, "%s, then reaped", ttl);
    snprintf(quota, sizeof quota, "%d of %d live per user", h->spawn.live, h->spawn.max);
    if (h->spawn.replaced) {
        char m[300];
        snprintf(m, sizeof m,
                 "this chat's previous workspace is gone (%s); a fresh sandbox was started, so "
                 "earlier files and state are not there",
                 h->spawn.gone_reason);
        agent_call_emit(call, "sandbox_gone",
                        tk_json_obj("reason", json_string(h->spawn.gone_reason), "message",
                                    json_string(m), NULL));
    }
    json_t *attrs = tk_json_obj(
        "tier", json_string("sandbox"), "trigger",
        json_string(h->spawn.replaced ? "the previous sandbox is gone; first write since"
                                      : trigger),
        "call", json_string("getOrCreateOpenSandbox"), "pool", json_string(h->spawn.pool), "quota",
        json_string(quota), "credentials", json_string("fail-closed, from env only"), "idle_ttl",
        json_string(idle), "sandbox_id", json_string(h->id), "remote_id", json_string(h->remote_id),
        "replaced", json_boolean(h->spawn.replaced), NULL);
    agent_span_record(agent_call_trace(call), agent_call_span_id(call), "sandbox_spawn", "sandbox",
                      h->spawn.started_ms, h->spawn.duration_ms, "ok", json_deep_copy(attrs));
    json_object_set_new(attrs, "duration_ms", json_real(h->spawn.duration_ms));
    agent_call_emit(call, "sandbox_spawn", attrs);
    return 1;
}

const char *agent_tool_replaced_note(const sandbox_handle *h)
{
    return h->spawn.replaced ? "Note: this chat's previous workspace was gone (reaped), so a "
                               "fresh sandbox was started; earlier files and state are not "
                               "there.\n"
                             : "";
}
