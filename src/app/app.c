#include "app/app.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/models.h"
#include "app/weburl.h"
#include "lib/log.h"
#include "lib/tktime.h"

static app_ctx ctx;
static int ready;
static char *prompt;
static tk_ssrf_policy ssrf;

const app_ctx *app_get(void)
{
    TK_ASSERT(ready);
    return &ctx;
}

static void lanes(void)
{
    /* Fail-closed: both values must come from the environment. There is no
     * default and no flag for either, so "set" means "from the environment". */
    const char *u = app_settings_source("OPENSANDBOX_URL");
    const char *k = app_settings_source("OPENSANDBOX_API_KEY");
    int have_u = ctx.cfg->opensandbox_url && u && strcmp(u, "env") == 0;
    int have_k = ctx.cfg->opensandbox_api_key && k && strcmp(k, "env") == 0;
    ctx.execution_enabled = have_u && have_k;
    snprintf(ctx.execution_missing, sizeof ctx.execution_missing, "%s%s%s",
             have_u ? "" : "OPENSANDBOX_URL", !have_u && !have_k ? "," : "",
             have_k ? "" : "OPENSANDBOX_API_KEY");
    const char *bu = app_settings_source("STEEL_URL");
    const char *bk = app_settings_source("STEEL_API_KEY");
    int have_bu = ctx.cfg->steel_url && bu && strcmp(bu, "env") == 0;
    int have_bk = ctx.cfg->steel_api_key && bk && strcmp(bk, "env") == 0;
    ctx.browser_enabled = have_bu && have_bk;
    snprintf(ctx.browser_missing, sizeof ctx.browser_missing, "%s%s%s", have_bu ? "" : "STEEL_URL",
             !have_bu && !have_bk ? "," : "", have_bk ? "" : "STEEL_API_KEY");
}

tk_status app_init(int connect, char *err, size_t errlen)
{
    TK_ASSERT(!ready);
    app_settings *s = app_settings_values();
    memset(&ctx, 0, sizeof ctx);
    ctx.cfg = s;
    ctx.start_ms = tk_now_ms();
    ctx.start_mono_ms = tk_mono_ms();
    if (app_settings_validate(s, &prompt, err, errlen) != TK_OK)
        return TK_EINVAL;
    ctx.system_prompt = prompt;
    app_model_list *models;
    char merr[256];
    if (app_models_parse(s->models, &models, merr, sizeof merr) != TK_OK) {
        snprintf(err, errlen, "TUSKO_MODELS: %s", merr);
        return TK_EINVAL;
    }
    app_models_set(models);
    char serr[512];
    if (tk_ssrf_policy_from_env(&ssrf, serr, sizeof serr) != TK_OK) {
        snprintf(err, errlen, "%s", serr);
        app_models_set(NULL);
        return TK_EINVAL;
    }
    ctx.ssrf = &ssrf;
    lanes();
    ctx.oidc_enabled = s->oidc_issuer && s->oidc_client_id;
    if (s->public_url) {
        /* keep TUSKO_PUBLIC_URL without a trailing slash, so paths append cleanly */
        size_t n = strlen(s->public_url);
        while (n > 0 && s->public_url[n - 1] == '/')
            s->public_url[--n] = '\0';
        app_url_origin(s->public_url, ctx.public_origin, sizeof ctx.public_origin);
        ctx.secure_cookies = app_url_is_https(s->public_url);
    }
    if (connect) {
        /* timestamps come back in UTC (RFC 3339 with +00:00) */
        setenv("PGTZ", "UTC", 1);
        ctx.pg = tk_pg_pool_new(s->database_url, (int)s->db_pool, err, errlen);
        if (!ctx.pg) {
            char m[400];
            snprintf(m, sizeof m, "%s", err);
            snprintf(err, errlen, "DATABASE_URL: %s", m);
            return TK_ERROR;
        }
        /* one connection per HTTP event thread (server.c runs APP_HTTP_THREADS) */
        ctx.auth_pg = tk_pg_pool_new(s->database_url, APP_HTTP_THREADS, err, errlen);
        if (!ctx.auth_pg) {
            tk_pg_pool_free(ctx.pg);
            ctx.pg = NULL;
            return TK_ERROR;
        }
    }
    ready = 1;
    return TK_OK;
}

void app_log_summary(void)
{
    if (ctx.execution_enabled)
        tk_info("app", "msg=\"sandbox lane on\" max_sandboxes_per_user=%lld",
                (long long)ctx.cfg->max_sandboxes_per_user);
    else
        tk_warn("app",
                "msg=\"sandbox lane off: nothing will execute\" missing=%s "
                "hint=\"set OPENSANDBOX_URL and OPENSANDBOX_API_KEY in the environment\"",
                ctx.execution_missing);
    if (ctx.browser_enabled)
        tk_info("app", "msg=\"browser lane on\" max_browsers_per_user=%lld",
                (long long)ctx.cfg->max_browsers_per_user);
    else
        tk_info("app",
                "msg=\"browser lane off: no browser tools\" missing=%s "
                "hint=\"set STEEL_URL and STEEL_API_KEY in the environment\"",
                ctx.browser_missing);
    if (app_models_count() == 0)
        tk_warn("app", "msg=\"no models allowed: chat is off\" hint=\"set TUSKO_MODELS, e.g. "
                       "openai:gpt-4o-mini\"");
    else
        tk_info("app", "msg=\"models\" count=%zu default=%s", app_models_count(),
                app_models_default()->id);
    tk_info("app",
            "msg=\"outbound fetch checks\" allow_entries=%zu deny_entries=%zu extra_ports=%zu "
            "max_bytes=%zu timeout_ms=%ld max_redirects=%d",
            ssrf.nallow, ssrf.ndeny, ssrf.nports, ssrf.max_bytes, ssrf.timeout_ms,
            ssrf.max_redirects);
    tk_info("app", "msg=\"sign-in\" password=on oidc=%s public_url=%s",
            ctx.oidc_enabled ? "on" : "off", ctx.cfg->public_url ? ctx.cfg->public_url : "unset");
}

void app_shutdown(void)
{
    if (ctx.pg)
        tk_pg_pool_free(ctx.pg);
    if (ctx.auth_pg)
        tk_pg_pool_free(ctx.auth_pg);
    ctx.pg = ctx.auth_pg = NULL;
    app_models_set(NULL);
    tk_ssrf_policy_free(&ssrf);
    ctx.ssrf = NULL;
    free(prompt);
    prompt = NULL;
    ready = 0;
}

PGconn *app_db_acquire(void)
{
    PGconn *c = tk_pg_acquire(ctx.pg, APP_DB_ACQUIRE_MS);
    if (!c)
        tk_error("db", "msg=\"no database connection\" waited_ms=%d", APP_DB_ACQUIRE_MS);
    return c;
}

void app_db_release(PGconn *c)
{
    if (c)
        tk_pg_release(ctx.pg, c);
}

void app_respond_db_unavailable(tk_req *r)
{
    tk_respond_error(r, 503, "DB_UNAVAILABLE", "the database is unavailable; try again shortly");
}

void app_set_for_test(const app_settings *cfg, tk_pg_pool *pg)
{
    memset(&ctx, 0, sizeof ctx);
    ctx.cfg = cfg;
    ctx.pg = pg;
    ctx.start_ms = tk_now_ms();
    ctx.start_mono_ms = tk_mono_ms();
    ready = 1;
}
