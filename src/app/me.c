#include "app/me.h"

#include <string.h>

#include "app/agent/event_types.h"
#include "app/agent/tools.h"
#include "app/app.h"
#include "app/auth/auth.h"
#include "app/models.h"
#include "lib/json.h"

json_t *app_me_execution_json(void)
{
    const app_ctx *a = app_get();
    if (a->execution_enabled)
        return tk_json_obj("enabled", json_true(), "missing", json_array(), NULL);
    json_t *missing = json_array();
    char buf[sizeof a->execution_missing];
    memcpy(buf, a->execution_missing, sizeof buf);
    for (char *p = buf; p && *p;) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        json_array_append_new(missing, json_string(p));
        p = comma ? comma + 1 : NULL;
    }
    return tk_json_obj(
        "enabled", json_false(), "missing", missing, "reason",
        json_string("execution is off: this server has no sandbox service configured "
                    "(OPENSANDBOX_URL and OPENSANDBOX_API_KEY must both be set in its "
                    "environment); the agent can talk, plan and look things up, but cannot "
                    "write files or run code"),
        NULL);
}

json_t *app_me_browser_json(void)
{
    const app_ctx *a = app_get();
    if (a->browser_enabled)
        return tk_json_obj("enabled", json_true(), "missing", json_array(), "max_per_user",
                           json_integer(a->cfg->max_browsers_per_user), NULL);
    json_t *missing = json_array();
    char buf[sizeof a->browser_missing];
    memcpy(buf, a->browser_missing, sizeof buf);
    for (char *p = buf; p && *p;) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        json_array_append_new(missing, json_string(p));
        p = comma ? comma + 1 : NULL;
    }
    return tk_json_obj("enabled", json_false(), "missing", missing, "reason",
                       json_string("browsing is off: this server has no browser service "
                                   "configured (STEEL_URL and STEEL_API_KEY must both be set in "
                                   "its environment); the agent cannot open web pages in a "
                                   "browser"),
                       NULL);
}

static void h_me(tk_req *r, void *ud)
{
    const app_user *u = app_req_user(r);
    json_t *j = tk_json_obj("id", json_string(u->id), "email",
                            u->email[0] ? json_string(u->email) : json_null(), "auth",
                            json_string(u->via == APP_AUTH_COOKIE ? "session" : "token"), "role",
                            json_string(u->admin ? "admin" : "user"), "execution",
                            app_me_execution_json(), "browser", app_me_browser_json(), NULL);
    if (u->via == APP_AUTH_COOKIE)
        json_object_set_new(j, "csrf_token", json_string(u->csrf));
    const app_model *d = app_models_default();
    json_object_set_new(j, "default_model", d ? json_string(d->id) : json_null());
    tk_respond_json(r, 200, j);
}

/* What a client needs to know of the agent: the types of the event stream
 * and the tools (docs/API.md, GET /api/agent). */
static void h_agent(tk_req *r, void *ud)
{
    tk_respond_json(
        r, 200,
        tk_json_obj("events", agent_event_types_json(), "tools", agent_tools_catalog(), NULL));
}

const tk_route app_me_routes[] = {
    {"GET", "/api/me", h_me, NULL, 0},
    {"GET", "/api/agent", h_agent, NULL, 0},
    {"GET", "/api/models", app_models_route_list, NULL, 0},
};
const size_t app_me_nroutes = TK_ARRAY_LEN(app_me_routes);
