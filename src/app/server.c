#include "app/server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/app.h"
#include "app/account.h"
#include "app/admin.h"
#include "app/agent/hub.h"
#include "app/files.h"
#include "app/skills_api.h"
#include "app/agent/trace.h"
#include "app/agent/turn.h"
#include "app/auth/auth.h"
#include "app/auth/local.h"
#include "app/auth/oidc.h"
#include "app/headers.h"
#include "app/markdown.h"
#include "app/me.h"
#include "app/sandbox/sandbox.h"
#include "app/notify/notify.h"
#include "app/observe.h"
#include "app/schedules/schedules_api.h"
#include "app/snapshots/snapshots_api.h"
#include "app/sessions.h"
#include "app/utopia/routes.h"
#include "app/upload.h"
#include "app/web.h"
#include "lib/log.h"

struct route_set {
    const tk_route *routes;
    const size_t *n;
};

/* Every module's routes, in match order. Add yours here (one line). */
static const struct route_set sets[] = {
    {app_local_routes, &app_local_nroutes},         /* /api/auth/... (sign-in, public) */
    {app_oidc_routes, &app_oidc_nroutes},           /* /api/auth/oidc/... (public) */
    {app_me_routes, &app_me_nroutes},               /* /api/me, /api/models */
    {app_account_routes, &app_account_nroutes},     /* GET /api/me/export, DELETE /api/me */
    {admin_routes, &admin_nroutes},                 /* /api/admin/... (admins only) */
    {agent_turn_routes, &agent_turn_nroutes},       /* POST /api/sessions/{id}/messages|cancel */
    {agent_hub_routes, &agent_hub_nroutes},         /* GET /api/sessions/{id}/events */
    {app_upload_routes, &app_upload_nroutes},       /* .../files/upload (upload.c) */
    {agent_files_routes, &agent_files_nroutes},     /* .../files..., /api/downloads/{id} */
    {agent_trace_routes, &agent_trace_nroutes},     /* GET /api/turns/{id}/trace */
    {sandbox_routes, &sandbox_nroutes},             /* GET /api/sandboxes */
    {snapshots_api_routes, &snapshots_api_nroutes}, /* /api/sessions/{id}/snapshots... */
    {app_sessions_routes, &app_sessions_nroutes},   /* /api/sessions... */
    /* /api/schedules... */
    {schedules_api_routes, &schedules_api_nroutes},
    /* /api/notify/telegram... */
    {notify_routes, &notify_nroutes},
    {utopia_routes, &utopia_nroutes},             /* /api/utopia/... */
    {app_markdown_routes, &app_markdown_nroutes}, /* /api/markdown */
    {skills_api_routes, &skills_api_nroutes},     /* /api/skills... */
    {app_web_routes, &app_web_nroutes},           /* the web UI: /, /c/{id}, /assets/... */
};

static tk_route *table;

tk_httpd *app_server_start(const tk_prog *prog, char *err, size_t errlen)
{
    const app_ctx *a = app_get();
    /* before the copy: it sets the upload route's body cap from the settings */
    if (utopia_start(err, errlen) != TK_OK)
        return NULL;
    app_observe_init();
    size_t n = 3;
    for (size_t i = 0; i < TK_ARRAY_LEN(sets); i++)
        n += *sets[i].n;
    free(table);
    table = tk_calloc(n, sizeof *table);
    /* /healthz, /readyz, /metrics (lib/prog.h) */
    size_t k = tk_prog_routes(prog, table, 3);
    for (size_t i = 0; i < TK_ARRAY_LEN(sets); i++)
        for (size_t j = 0; j < *sets[i].n; j++)
            table[k++] = sets[i].routes[j];
    tk_httpd_config hc = {
        .listen = a->cfg->listen,
        .name = "http",
        .threads = APP_HTTP_THREADS,
        .auth = app_auth_hook,
        .headers = a->secure_cookies ? app_security_headers_https : app_security_headers,
    };
    tk_prog_http_config(&hc);
    tk_httpd *h = tk_httpd_start(&hc, table, n, err, errlen);
    if (h)
        tk_info("http", "msg=\"routes\" count=%zu", n);
    return h;
}
