/*
 * app.h — the tusko process context: settings, the Postgres pool, start time.
 *
 * One app_ctx per process, set up by app_init() before the server starts and
 * read-only afterwards (so any thread may read it without locking). Handlers
 * reach it with app_get():
 *
 *   const app_ctx *a = app_get();
 *   PGconn *c = app_db_acquire();            // NULL: answer 503 (see below)
 *   ... a->cfg->chat_rate_limit_max ...
 *   app_db_release(c);
 *
 * See src/app/README.md for how the pieces fit (routes, auth, settings).
 */
#ifndef APP_APP_H
#define APP_APP_H

#include <libpq-fe.h>
#include <stdint.h>

#include "app/settings.h"
#include "lib/httpd.h"
#include "lib/pg.h"
#include "lib/ssrf.h"

/* HTTP event-loop threads (libmicrohttpd); the auth hook runs on them. */
#define APP_HTTP_THREADS 2

/* How long a handler waits for a database connection before answering 503. */
#define APP_DB_ACQUIRE_MS 5000

typedef struct {
    const app_settings *cfg;   /* every setting, loaded (settings.h) */
    tk_pg_pool *pg;            /* the pool; see app_db_acquire */
    tk_pg_pool *auth_pg;       /* a small pool only the auth hook uses (on the event threads),
                                  so a busy main pool never stalls them; NULL: use pg */
    int64_t start_ms;          /* wall clock at start-up (ms since the epoch) */
    int64_t start_mono_ms;     /* monotonic clock at start-up */
    const char *system_prompt; /* the prompt to send (<= APP_SYSTEM_PROMPT_MAX chars) */
    /* The sandbox lane: on only when OPENSANDBOX_URL and OPENSANDBOX_API_KEY both
     * came from the environment. When off, execution_missing names what is
     * missing ("OPENSANDBOX_URL", "OPENSANDBOX_API_KEY" or both, comma-separated). */
    int execution_enabled;
    char execution_missing[64];
    /* The browser lane: on only when STEEL_URL and STEEL_API_KEY both came
     * from the environment; browser_missing names what is missing. */
    int browser_enabled;
    char browser_missing[64];
    int oidc_enabled;        /* OIDC_ISSUER and OIDC_CLIENT_ID set */
    int secure_cookies;      /* TUSKO_PUBLIC_URL is https */
    char public_origin[300]; /* origin of TUSKO_PUBLIC_URL, or "" when unset */
    /* The outbound fetch policy (guardrail 4) every fetch for the agent goes
     * through: built once from SSRF_* and FETCH_* (tk_ssrf_policy_from_env). */
    const tk_ssrf_policy *ssrf;
} app_ctx;

/* The context. Aborts if app_init has not run (a broken invariant). */
const app_ctx *app_get(void);

/*
 * Validates the loaded settings (app_settings_validate), loads the model
 * allowlist, builds the outbound fetch policy (a bad SSRF_* or FETCH_* value is
 * TK_EINVAL naming the variable), works out the fail-closed lanes, and — when
 * connect is non-zero —
 * opens the Postgres pool. Returns TK_OK or TK_EINVAL/TK_ERROR with a message for
 * the operator in err. Call once, after tk_prog_init.
 */
tk_status app_init(int connect, char *err, size_t errlen);
/* Logs what is on and off (the sandbox lane, models, sign-in), once at serve. */
void app_log_summary(void);
/* Closes the pool and frees everything app_init made. */
void app_shutdown(void);

/* A pooled connection, or NULL after APP_DB_ACQUIRE_MS (logged). Blocks: call
 * from TK_ROUTE_BLOCKING handlers and other worker threads only. */
PGconn *app_db_acquire(void);
void app_db_release(PGconn *c);

/* Responds 503 DB_UNAVAILABLE (the message says to retry). */
void app_respond_db_unavailable(tk_req *r);

/* For tests: installs a context without app_init (cfg and pg borrowed). */
void app_set_for_test(const app_settings *cfg, tk_pg_pool *pg);

#endif
