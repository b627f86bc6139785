/*
 * settings.h — every tusko setting, loaded once at start-up from the environment
 * (and matching --flags), then read-only for the life of the process.
 *
 * Adding a setting (two edits, both in this pair):
 *   1. a field in app_settings below (char * for strings, int64_t for integers and
 *      durations in ms, int for booleans);
 *   2. a row in the table in settings.c pointing .out at that field.
 * Secrets get TK_SET_SECRET and no flag (flags show up in `ps`). A feature that
 * must stay off without its setting uses TK_SET_FAIL_CLOSED and no default.
 * Cross-setting checks (X requires Y) go in app_settings_validate().
 * Document the setting in .env.example (with its default) and in the doc of its
 * area; `tusko --help` lists it automatically.
 */
#ifndef APP_SETTINGS_H
#define APP_SETTINGS_H

#include <stddef.h>
#include <stdint.h>

#include "app/notify/notify_settings.h"
#include "app/schedules/schedules_settings.h"
#include "app/tools/subagent_settings.h"
#include "app/utopia/utopia.h"
#include "lib/common.h"
#include "lib/config.h"

/* SSRF_ALLOW, SSRF_DENY, SSRF_ALLOWED_PORTS, FETCH_MAX_BYTES, FETCH_TIMEOUT,
 * FETCH_MAX_REDIRECTS (APP_SSRF_SETTINGS_TABLE). */
#define APP_SSRF_SETTINGS 6

/*
 * The outbound fetch settings as table rows, environment only (the policy reads
 * them with getenv, so a flag could not reach it). Their defaults are those of
 * lib/ssrf.c. Used in tusko's table and in `tusko check-url`'s.
 */
/* clang-format off */
#define APP_SSRF_SETTINGS_TABLE(v)                                                             \
    {"SSRF_ALLOW", NULL, TK_SET_STR, NULL,                                                     \
     "hosts, *.suffixes, addresses and CIDRs fetched although internal (e.g. "                 \
     "intranet.example.com,10.1.0.0/16); empty: none", .out = &(v)[0]},                        \
    {"SSRF_DENY", NULL, TK_SET_STR, NULL,                                                      \
     "hosts, *.suffixes, addresses and CIDRs never fetched (wins over SSRF_ALLOW)",            \
     .out = &(v)[1]},                                                                          \
    {"SSRF_ALLOWED_PORTS", NULL, TK_SET_STR, NULL,                                             \
     "ports fetched beyond 80 and 443 (e.g. 8080,8443)", .out = &(v)[2]},                      \
    {"FETCH_MAX_BYTES", NULL, TK_SET_STR, "2M",                                                \
     "body of one outbound fetch at most (bytes; K, M, G)", .out = &(v)[3]},                   \
    {"FETCH_TIMEOUT", NULL, TK_SET_STR, "15s",                                                 \
     "time limit of one outbound fetch, redirects included", .out = &(v)[4]},                  \
    {"FETCH_MAX_REDIRECTS", NULL, TK_SET_STR, "5",                                             \
     "redirects one outbound fetch follows (0-20)", .out = &(v)[5]}
/* clang-format on */

/* The longest system prompt accepted, in characters (Unicode code points). */
#define APP_SYSTEM_PROMPT_MAX 8000

typedef struct {
    /* server and database */
    char *listen;       /* TUSKO_LISTEN */
    char *database_url; /* DATABASE_URL */
    int64_t db_pool;    /* TUSKO_DB_POOL_SIZE */
    char *public_url;   /* TUSKO_PUBLIC_URL, NULL when unset (no trailing slash) */

    /* models */
    char *models;             /* TUSKO_MODELS, "provider:model,..." (see models.h) */
    char *openai_base_url;    /* OPENAI_BASE_URL */
    char *openai_api_key;     /* OPENAI_API_KEY, NULL when unset */
    char *anthropic_base_url; /* ANTHROPIC_BASE_URL */
    char *anthropic_api_key;  /* ANTHROPIC_API_KEY, NULL when unset */
    char *system_prompt;      /* TUSKO_SYSTEM_PROMPT (raw); use app_get()->system_prompt */
    char *system_prompt_file; /* TUSKO_SYSTEM_PROMPT_FILE */

    /* the agent loop */
    int64_t step_budget;         /* TUSKO_STEP_BUDGET: model calls per turn */
    int64_t turn_timeout_ms;     /* TUSKO_TURN_TIMEOUT */
    int64_t max_tokens;          /* TUSKO_MAX_TOKENS */
    int64_t llm_idle_timeout_ms; /* TUSKO_LLM_IDLE_TIMEOUT */
    int64_t llm_retries;         /* TUSKO_LLM_RETRIES */
    int64_t tool_workers;        /* TUSKO_TOOL_WORKERS */
    int64_t tool_result_max;     /* TUSKO_TOOL_RESULT_MAX (characters) */
    int64_t command_timeout_ms;  /* TUSKO_COMMAND_TIMEOUT */
    int64_t download_max;        /* TUSKO_DOWNLOAD_MAX (bytes) */
    int64_t web_fetch_max_chars; /* WEB_FETCH_MAX_CHARS */

    /* skills (docs/SKILLS.md) */
    int64_t skills_prompt_budget; /* SKILLS_PROMPT_BUDGET: characters of the catalogue */

    /* outbound fetch checks (lib/ssrf.h): listed here for --help; the policy is
     * built from the environment by tk_ssrf_policy_from_env (app_init) */
    char *ssrf_env[APP_SSRF_SETTINGS];

    /* sandbox service (fail-closed: both from the environment or nothing executes) */
    char *opensandbox_url;            /* OPENSANDBOX_URL, NULL when unset */
    char *opensandbox_api_key;        /* OPENSANDBOX_API_KEY, NULL when unset */
    int64_t max_sandboxes_per_user;   /* MAX_SANDBOXES_PER_USER */
    char *sandbox_image;              /* SANDBOX_IMAGE */
    char *sandbox_image_info;         /* SANDBOX_IMAGE_INFO */
    int64_t sandbox_idle_ttl_ms;      /* SANDBOX_IDLE_TTL */
    int64_t chat_retention_ms;        /* CHAT_RETENTION; 0 (unset): chats are kept */
    int64_t audit_retention_ms;       /* AUDIT_RETENTION: audit log entries are kept this long */
    char *sandbox_cpu;                /* SANDBOX_CPU */
    char *sandbox_memory;             /* SANDBOX_MEMORY */
    int64_t sandbox_start_timeout_ms; /* SANDBOX_START_TIMEOUT */
    /* browser service (fail-closed: both from the environment or no browser) */
    char *steel_url;                    /* STEEL_URL, NULL when unset */
    char *steel_api_key;                /* STEEL_API_KEY, NULL when unset */
    int64_t max_browsers_per_user;      /* MAX_BROWSERS_PER_USER */
    int64_t browser_idle_ttl_ms;        /* BROWSER_IDLE_TTL */
    int64_t browser_session_timeout_ms; /* BROWSER_SESSION_TIMEOUT */

    /* guardrails and accounts */
    int64_t chat_rate_limit_max;   /* CHAT_RATE_LIMIT_MAX per user per minute */
    int64_t user_max_streams;      /* USER_MAX_STREAMS: event streams a user holds open here */
    int64_t user_max_active_turns; /* USER_MAX_ACTIVE_TURNS across a user's chats */
    int64_t user_max_uploads;      /* USER_MAX_UPLOADS: uploads in flight here */
    int64_t api_token_rate_limit;  /* API_TOKEN_RATE_LIMIT: requests a minute per API token */
    int64_t session_ttl_ms;        /* TUSKO_SESSION_TTL: sign-in session lifetime */
    int64_t login_max_failures;    /* TUSKO_LOGIN_MAX_FAILURES per account per 15 min */

    /* OpenID Connect (off unless OIDC_ISSUER and OIDC_CLIENT_ID are set) */
    char *oidc_issuer;        /* OIDC_ISSUER, NULL when unset */
    char *oidc_client_id;     /* OIDC_CLIENT_ID */
    char *oidc_client_secret; /* OIDC_CLIENT_SECRET (NULL: a public client, PKCE only) */
    char *oidc_scopes;        /* OIDC_SCOPES */
    int oidc_link_by_email;   /* OIDC_LINK_BY_EMAIL: a verified email may join an account */
    char *oidc_token_auth;    /* OIDC_TOKEN_AUTH_METHOD: client_secret_basic/_post, NULL: auto */
    char *oidc_admin_claim;   /* OIDC_ADMIN_CLAIM: "claim=value" or "claim"; NULL: none */

    /* the data outside Postgres, backups (docs/OPERATIONS.md) */
    char *data_dir;        /* TUSKO_DATA_DIR */
    char *backup_dir;      /* BACKUP_DIR */
    char *backup_schedule; /* BACKUP_SCHEDULE: "HH:MM", an interval, or "off" */
    int64_t backup_keep;   /* BACKUP_KEEP */
    char *pg_bindir;       /* PG_BINDIR, NULL: found from the server's version */

    /* Utopia: documents, search, memory, the knowledge graph (UTOPIA_*, docs/UTOPIA.md) */
    utopia_config utopia;

    /* subagents: delegate_subagent's roles (SUBAGENT_*, docs/AGENT.md) */
    agent_subagent_config subagent;

    /* scheduled tasks (SCHEDULE*_, docs/SCHEDULES.md) */
    schedules_config schedules;

    /* Telegram notifications (TELEGRAM_*, docs/NOTIFY.md) */
    notify_config notify;
} app_settings;

/* The settings table (for tk_prog); loading it fills app_settings_values(). */
tk_setting *app_settings_table(size_t *n);
/* The loaded values (one instance per process). Read-only after start-up. */
app_settings *app_settings_values(void);
/* Frees the loaded strings (at exit). */
void app_settings_free(void);

/* Where a setting's value came from after loading: "env", "flag", "default", or
 * NULL for an unknown name. */
const char *app_settings_source(const char *env_name);

/*
 * Checks what one setting's own check cannot: a system prompt from the variable
 * or the file (not both), at most APP_SYSTEM_PROMPT_MAX characters; OIDC needs
 * TUSKO_PUBLIC_URL and an https (or loopback http) issuer; TUSKO_MODELS parses.
 * On success *system_prompt is the prompt to use (heap; the built-in default when
 * neither is set). TK_EINVAL with a message naming the variable otherwise.
 */
tk_status app_settings_validate(const app_settings *s, char **system_prompt, char *err,
                                size_t errlen);

#endif
