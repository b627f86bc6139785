#include "app/settings.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "app/backup_schedule.h"
#include "app/models.h"
#include "app/weburl.h"
#include "lib/buf.h"
#include "lib/utf8.h"

static app_settings S;

static const char default_system_prompt[] =
    "You are Tusko, a helpful agent. Plan before long work, say what you are doing, "
    "and use tools only when they are needed: talking and planning need no sandbox; "
    "writing files and running code do.";

static int check_public_url(const char *v, char *msg, size_t msglen)
{
    if (tk_config_check_url(v, msg, msglen) != 0)
        return 1;
    char origin[512];
    if (app_url_origin(v, origin, sizeof origin) != TK_OK) {
        snprintf(msg, msglen, "\"%s\" is not an http(s) URL with a host", v);
        return 1;
    }
    return 0;
}

static int check_models(const char *v, char *msg, size_t msglen)
{
    app_model_list *l = NULL;
    if (app_models_parse(v, &l, msg, msglen) != TK_OK)
        return 1;
    app_models_free(l);
    return 0;
}

static int check_token_auth(const char *v, char *msg, size_t msglen)
{
    if (strcmp(v, "client_secret_basic") == 0 || strcmp(v, "client_secret_post") == 0)
        return 0;
    snprintf(msg, msglen, "\"%s\" is not client_secret_basic or client_secret_post", v);
    return 1;
}

/* clang-format off */
static tk_setting table[] = {
    /* server and database */
    {"TUSKO_LISTEN", "listen", TK_SET_STR, "127.0.0.1:8080", "address to serve the UI and API on",
     .out = &S.listen, .check = tk_config_check_listen},
    {"DATABASE_URL", "database-url", TK_SET_STR, NULL, "Postgres connection URL",
     .flags = TK_SET_REQUIRED | TK_SET_SECRET, .out = &S.database_url},
    {"TUSKO_DB_POOL_SIZE", "db-pool-size", TK_SET_INT, "16", "Postgres connections per instance",
     .min = 2, .max = 512, .out = &S.db_pool},
    {"TUSKO_PUBLIC_URL", "public-url", TK_SET_STR, NULL,
     "the URL users reach tusko at (OIDC redirects; https makes cookies Secure)",
     .out = &S.public_url, .check = check_public_url},

    /* models */
    {"TUSKO_MODELS", "models", TK_SET_STR, NULL,
     "model allowlist, comma-separated provider:model (providers: openai, anthropic)",
     .out = &S.models, .check = check_models},
    {"OPENAI_BASE_URL", "openai-base-url", TK_SET_STR, "https://api.openai.com/v1",
     "OpenAI-compatible Chat Completions endpoint", .out = &S.openai_base_url,
     .check = tk_config_check_url},
    {"OPENAI_API_KEY", NULL, TK_SET_STR, NULL, "key for OPENAI_BASE_URL",
     .flags = TK_SET_SECRET, .out = &S.openai_api_key},
    {"ANTHROPIC_BASE_URL", "anthropic-base-url", TK_SET_STR, "https://api.anthropic.com",
     "Anthropic Messages API endpoint", .out = &S.anthropic_base_url,
     .check = tk_config_check_url},
    {"ANTHROPIC_API_KEY", NULL, TK_SET_STR, NULL, "key for ANTHROPIC_BASE_URL",
     .flags = TK_SET_SECRET, .out = &S.anthropic_api_key},
    {"TUSKO_SYSTEM_PROMPT", NULL, TK_SET_STR, NULL,
     "system prompt (at most 8000 characters; default: built in)", .out = &S.system_prompt},
    {"TUSKO_SYSTEM_PROMPT_FILE", "system-prompt-file", TK_SET_STR, NULL,
     "read the system prompt from this file instead", .out = &S.system_prompt_file},

    /* the agent loop */
    {"TUSKO_STEP_BUDGET", "step-budget", TK_SET_INT, "24", "model calls per turn at most",
     .min = 1, .max = 1000, .out = &S.step_budget},
    {"TUSKO_TURN_TIMEOUT", "turn-timeout", TK_SET_DURATION, "10m", "time limit of one turn",
     .min = 1000, .max = 24LL * 3600 * 1000, .out = &S.turn_timeout_ms},
    {"TUSKO_MAX_TOKENS", "max-tokens", TK_SET_INT, "4096",
     "output tokens per model call (Anthropic requires a value; 0 sends none to OpenAI)",
     .min = 0, .max = 1000000, .out = &S.max_tokens},
    {"TUSKO_LLM_IDLE_TIMEOUT", "llm-idle-timeout", TK_SET_DURATION, "120s",
     "a model call sending nothing for this long fails (timeout)", .min = 1000,
     .max = 3600LL * 1000, .out = &S.llm_idle_timeout_ms},
    {"TUSKO_LLM_RETRIES", "llm-retries", TK_SET_INT, "2",
     "retries of a model call refused with 429/5xx before anything streamed", .min = 0,
     .max = 10, .out = &S.llm_retries},
    {"TUSKO_TOOL_WORKERS", "tool-workers", TK_SET_INT, "16",
     "threads running blocking tool calls (sandbox HTTP calls)", .min = 1, .max = 1024,
     .out = &S.tool_workers},
    {"TUSKO_TOOL_RESULT_MAX", "tool-result-max", TK_SET_INT, "32000",
     "characters of a tool result the model sees (the rest is cut)", .min = 256,
     .max = 10000000, .out = &S.tool_result_max},
    {"TUSKO_COMMAND_TIMEOUT", "command-timeout", TK_SET_DURATION, "10m",
     "time limit of one execute_command / execute_code call", .min = 1000,
     .max = 24LL * 3600 * 1000, .out = &S.command_timeout_ms},
    {"TUSKO_DOWNLOAD_MAX", "download-max", TK_SET_INT, "52428800",
     "bytes of one stored download at most", .min = 1024, .max = 1LL << 30,
     .out = &S.download_max},
    /* skills */
    {"SKILLS_PROMPT_BUDGET", "skills-prompt-budget", TK_SET_INT, "2500",
     "characters of the system prompt the skills catalogue may take (the rest: list_skills)",
     .min = 0, .max = 8000, .out = &S.skills_prompt_budget},
    {"WEB_FETCH_MAX_CHARS", "web-fetch-max-chars", TK_SET_INT, "20000",
     "characters of a page web_fetch returns at most (the rest is cut, with a note)",
     .min = 100, .max = 10000000, .out = &S.web_fetch_max_chars},
    APP_SSRF_SETTINGS_TABLE(S.ssrf_env),

    /* sandbox service: fail-closed, environment only */
    {"OPENSANDBOX_URL", NULL, TK_SET_STR, NULL,
     "sandbox service (OpenSandbox API); unset: nothing executes",
     .flags = TK_SET_FAIL_CLOSED, .out = &S.opensandbox_url, .check = tk_config_check_url},
    {"OPENSANDBOX_API_KEY", NULL, TK_SET_STR, NULL, "key for OPENSANDBOX_URL; unset: nothing executes",
     .flags = TK_SET_FAIL_CLOSED | TK_SET_SECRET, .out = &S.opensandbox_api_key},
    {"MAX_SANDBOXES_PER_USER", "max-sandboxes-per-user", TK_SET_INT, "5",
     "live sandboxes per user at most", .min = 1, .max = 10000, .out = &S.max_sandboxes_per_user},
    {"SANDBOX_IMAGE", "sandbox-image", TK_SET_STR, "tusko-sandbox",
     "image a new sandbox is created from", .out = &S.sandbox_image},
    {"SANDBOX_IMAGE_INFO", "sandbox-image-info", TK_SET_STR,
     "var/images/tusko-sandbox/image.json",
     "the sandbox image's image.json: the document libraries it holds are named in the system "
     "prompt (empty or absent: none are named)", .out = &S.sandbox_image_info},
    {"SANDBOX_IDLE_TTL", "sandbox-idle-ttl", TK_SET_DURATION, "30m",
     "a sandbox unused this long is reaped (its expiry is renewed on use)", .min = 60 * 1000,
     .max = 7LL * 24 * 3600 * 1000, .out = &S.sandbox_idle_ttl_ms},
    {"SANDBOX_CPU", "sandbox-cpu", TK_SET_STR, "1", "CPU limit of a sandbox (e.g. 500m, 2)",
     .out = &S.sandbox_cpu},
    {"SANDBOX_MEMORY", "sandbox-memory", TK_SET_STR, "1Gi", "memory limit of a sandbox",
     .out = &S.sandbox_memory},
    {"SANDBOX_START_TIMEOUT", "sandbox-start-timeout", TK_SET_DURATION, "60s",
     "how long a new sandbox may take to be ready", .min = 1000, .max = 3600LL * 1000,
     .out = &S.sandbox_start_timeout_ms},

    /* browser service (Steel API): fail-closed, environment only */
    {"STEEL_URL", NULL, TK_SET_STR, NULL,
     "browser service (Steel API, e.g. tusko-browserd); unset: no browser tools",
     .flags = TK_SET_FAIL_CLOSED, .out = &S.steel_url, .check = tk_config_check_url},
    {"STEEL_API_KEY", NULL, TK_SET_STR, NULL, "key for STEEL_URL; unset: no browser tools",
     .flags = TK_SET_FAIL_CLOSED | TK_SET_SECRET, .out = &S.steel_api_key},
    {"MAX_BROWSERS_PER_USER", "max-browsers-per-user", TK_SET_INT, "2",
     "live browsers per user at most", .min = 1, .max = 10000, .out = &S.max_browsers_per_user},
    {"BROWSER_IDLE_TTL", "browser-idle-ttl", TK_SET_DURATION, "10m",
     "a chat's browser unused this long is released", .min = 1000,
     .max = 24LL * 3600 * 1000, .out = &S.browser_idle_ttl_ms},
    {"BROWSER_SESSION_TIMEOUT", "browser-session-timeout", TK_SET_DURATION, "1h",
     "the longest a chat's browser lives (the Steel session's timeout)", .min = 10000,
     .max = 24LL * 3600 * 1000, .out = &S.browser_session_timeout_ms},

    /* guardrails and accounts */
    {"CHAT_RATE_LIMIT_MAX", "chat-rate-limit-max", TK_SET_INT, "30",
     "chat requests per user per minute", .min = 1, .max = 1000000, .out = &S.chat_rate_limit_max},
    {"CHAT_RETENTION", "chat-retention", TK_SET_DURATION, NULL,
     "delete chats not touched for this long (unset: keep them)", .min = 1000,
     .max = 100LL * 366 * 24 * 3600 * 1000, .out = &S.chat_retention_ms},
    {"AUDIT_RETENTION", "audit-retention", TK_SET_DURATION, "180d",
     "audit log entries older than this are deleted (hourly)", .min = 3600 * 1000,
     .max = 100LL * 366 * 24 * 3600 * 1000, .out = &S.audit_retention_ms},
    {"USER_MAX_STREAMS", "user-max-streams", TK_SET_INT, "16",
     "event streams one user holds open on this instance (a new one closes the oldest)",
     .min = 1, .max = 100000, .out = &S.user_max_streams},
    {"USER_MAX_ACTIVE_TURNS", "user-max-active-turns", TK_SET_INT, "8",
     "turns queued or running at once across one user's chats (all instances)", .min = 1,
     .max = 100000, .out = &S.user_max_active_turns},
    {"USER_MAX_UPLOADS", "user-max-uploads", TK_SET_INT, "4",
     "uploads one user sends at once to this instance", .min = 1, .max = 10000,
     .out = &S.user_max_uploads},
    {"API_TOKEN_RATE_LIMIT", "api-token-rate-limit", TK_SET_INT, "600",
     "requests a minute one API token may make to this instance", .min = 1, .max = 100000000,
     .out = &S.api_token_rate_limit},
    {"TUSKO_SESSION_TTL", "session-ttl", TK_SET_DURATION, "7d", "lifetime of a sign-in session",
     .min = 60 * 1000, .max = 366LL * 24 * 3600 * 1000, .out = &S.session_ttl_ms},
    {"TUSKO_LOGIN_MAX_FAILURES", "login-max-failures", TK_SET_INT, "10",
     "failed sign-ins per account per 15 minutes (per client address: 3x)", .min = 1,
     .max = 100000, .out = &S.login_max_failures},

    /* OpenID Connect */
    {"OIDC_ISSUER", "oidc-issuer", TK_SET_STR, NULL,
     "OpenID Connect issuer URL; unset: OIDC sign-in is off", .flags = TK_SET_FAIL_CLOSED,
     .out = &S.oidc_issuer, .check = tk_config_check_url},
    {"OIDC_CLIENT_ID", "oidc-client-id", TK_SET_STR, NULL, "client id registered at the issuer",
     .flags = TK_SET_FAIL_CLOSED, .out = &S.oidc_client_id},
    {"OIDC_CLIENT_SECRET", NULL, TK_SET_STR, NULL,
     "client secret (unset: a public client, PKCE only)", .flags = TK_SET_SECRET,
     .out = &S.oidc_client_secret},
    {"OIDC_SCOPES", "oidc-scopes", TK_SET_STR, "openid email profile", "scopes requested",
     .out = &S.oidc_scopes},
    {"OIDC_LINK_BY_EMAIL", "oidc-link-by-email", TK_SET_BOOL, "false",
     "a first OIDC sign-in whose verified email matches an account joins that account",
     .out = &S.oidc_link_by_email},
    {"OIDC_TOKEN_AUTH_METHOD", "oidc-token-auth-method", TK_SET_STR, NULL,
     "client_secret_basic or client_secret_post (unset: what the provider supports, basic first)",
     .out = &S.oidc_token_auth, .check = check_token_auth},
    {"OIDC_ADMIN_CLAIM", "oidc-admin-claim", TK_SET_STR, NULL,
     "an OIDC sign-in whose ID token has this claim becomes an admin: claim=value (a string "
     "claim equal to value, or an array holding it, e.g. groups=tusko-admins) or claim (a "
     "boolean claim that is true); unset: none", .out = &S.oidc_admin_claim},

    /* data outside Postgres, backups (docs/OPERATIONS.md) */
    {"TUSKO_DATA_DIR", "data-dir", TK_SET_STR, "var/data",
     "files tusko keeps outside Postgres (skills/: user-installed skills); backed up with "
     "the database (relative to the working directory when not absolute)",
     .out = &S.data_dir},
    {"BACKUP_DIR", "backup-dir", TK_SET_STR, "var/backups",
     "where tusko backup writes when not given --out, and --schedule keeps its backups",
     .out = &S.backup_dir},
    {"BACKUP_SCHEDULE", "backup-schedule", TK_SET_STR, "03:00",
     "when tusko backup --schedule takes one: HH:MM every day (local time), an interval "
     "(6h, 30m), or off", .out = &S.backup_schedule, .check = app_backup_check_schedule},
    {"BACKUP_KEEP", "backup-keep", TK_SET_INT, "7",
     "backups tusko backup --schedule keeps in BACKUP_DIR (older ones are deleted)", .min = 1,
     .max = 10000, .out = &S.backup_keep},
    {"PG_BINDIR", "pg-bindir", TK_SET_STR, NULL,
     "folder of pg_dump and pg_restore (unset: /usr/lib/postgresql/<the server's major "
     "version>/bin, else the PATH)", .out = &S.pg_bindir},

    /* Utopia (docs/UTOPIA.md) */
    UTOPIA_SETTINGS(S.utopia),

    /* subagents (docs/AGENT.md) */
    SUBAGENT_SETTINGS(S.subagent),

    /* scheduled tasks (docs/SCHEDULES.md) */
    SCHEDULES_SETTINGS(S.schedules),

    /* Telegram notifications (docs/NOTIFY.md) */
    NOTIFY_SETTINGS(S.notify),
};
/* clang-format on */

tk_setting *app_settings_table(size_t *n)
{
    *n = TK_ARRAY_LEN(table);
    return table;
}

app_settings *app_settings_values(void)
{
    return &S;
}

void app_settings_free(void)
{
    tk_config_free(table, TK_ARRAY_LEN(table));
}

const char *app_settings_source(const char *env_name)
{
    for (size_t i = 0; i < TK_ARRAY_LEN(table); i++)
        if (strcmp(table[i].env, env_name) == 0)
            return table[i].source;
    return NULL;
}

/* Reads a whole small file; TK_ETOOBIG past max bytes. */
static tk_status read_file(const char *path, size_t max, tk_buf *out, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "TUSKO_SYSTEM_PROMPT_FILE: cannot open %s: %s", path,
                 strerror(errno));
        return TK_ERROR;
    }
    tk_status st = TK_OK;
    char chunk[8192];
    for (;;) {
        ssize_t r = read(fd, chunk, sizeof chunk);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            snprintf(err, errlen, "TUSKO_SYSTEM_PROMPT_FILE: cannot read %s: %s", path,
                     strerror(errno));
            st = TK_ERROR;
            break;
        }
        if (r == 0)
            break;
        if (out->len + (size_t)r > max) {
            st = TK_ETOOBIG;
            break;
        }
        if (tk_buf_append(out, chunk, (size_t)r) != TK_OK) {
            st = TK_ETOOBIG;
            break;
        }
    }
    close(fd);
    return st;
}

tk_status app_settings_validate(const app_settings *s, char **system_prompt, char *err,
                                size_t errlen)
{
    *system_prompt = NULL;
    /* the system prompt: variable or file, at most APP_SYSTEM_PROMPT_MAX characters */
    if (s->system_prompt && s->system_prompt_file) {
        snprintf(err, errlen,
                 "TUSKO_SYSTEM_PROMPT and TUSKO_SYSTEM_PROMPT_FILE are both set; set one");
        return TK_EINVAL;
    }
    const char *var = s->system_prompt ? "TUSKO_SYSTEM_PROMPT" : "TUSKO_SYSTEM_PROMPT_FILE";
    tk_buf b;
    /* 4 bytes per character at most; a little more to say how long it really is */
    tk_buf_init(&b, (size_t)APP_SYSTEM_PROMPT_MAX * 4 * 4);
    if (s->system_prompt) {
        if (tk_buf_append_str(&b, s->system_prompt) != TK_OK) {
            snprintf(err, errlen,
                     "TUSKO_SYSTEM_PROMPT is over %d characters; shorten it (the limit is a "
                     "guardrail: a request to the model carries at most %d)",
                     APP_SYSTEM_PROMPT_MAX, APP_SYSTEM_PROMPT_MAX);
            tk_buf_free(&b);
            return TK_EINVAL;
        }
    } else if (s->system_prompt_file) {
        tk_status st = read_file(s->system_prompt_file, b.max, &b, err, errlen);
        if (st == TK_ETOOBIG) {
            snprintf(err, errlen,
                     "TUSKO_SYSTEM_PROMPT_FILE: %s is over %d characters; shorten it (the limit "
                     "is a guardrail: a request to the model carries at most %d)",
                     s->system_prompt_file, APP_SYSTEM_PROMPT_MAX, APP_SYSTEM_PROMPT_MAX);
        }
        if (st != TK_OK) {
            tk_buf_free(&b);
            return TK_EINVAL;
        }
    } else {
        tk_buf_append_str(&b, default_system_prompt);
    }
    long chars = tk_utf8_count(tk_buf_cstr(&b), b.len);
    if (chars < 0 || memchr(tk_buf_cstr(&b), 0, b.len)) {
        snprintf(err, errlen, "%s: the system prompt is not valid UTF-8 text", var);
        tk_buf_free(&b);
        return TK_EINVAL;
    }
    if (chars > APP_SYSTEM_PROMPT_MAX) {
        snprintf(err, errlen,
                 "%s: the system prompt has %ld characters, over the limit of %d; shorten it "
                 "(a request to the model carries at most %d)",
                 var, chars, APP_SYSTEM_PROMPT_MAX, APP_SYSTEM_PROMPT_MAX);
        tk_buf_free(&b);
        return TK_EINVAL;
    }
    /* OpenID Connect: needs a public URL for its redirect URI; https issuers only,
     * except on loopback (tests, a provider on the same machine) */
    if (s->oidc_issuer || s->oidc_client_id) {
        if (!s->oidc_issuer || !s->oidc_client_id) {
            snprintf(err, errlen, "%s is set but %s is not; OIDC sign-in needs both",
                     s->oidc_issuer ? "OIDC_ISSUER" : "OIDC_CLIENT_ID",
                     s->oidc_issuer ? "OIDC_CLIENT_ID" : "OIDC_ISSUER");
            tk_buf_free(&b);
            return TK_EINVAL;
        }
        if (!s->public_url) {
            snprintf(err, errlen,
                     "OIDC_ISSUER is set but TUSKO_PUBLIC_URL is not; OIDC sign-in needs the "
                     "public URL to build its redirect URI (<TUSKO_PUBLIC_URL>/api/auth/oidc/"
                     "callback)");
            tk_buf_free(&b);
            return TK_EINVAL;
        }
        if (!app_url_is_https(s->oidc_issuer) && !app_url_is_loopback_http(s->oidc_issuer)) {
            snprintf(err, errlen,
                     "OIDC_ISSUER: \"%s\" must be an https URL (plain http is accepted only "
                     "for loopback addresses)",
                     s->oidc_issuer);
            tk_buf_free(&b);
            return TK_EINVAL;
        }
    }
    *system_prompt = tk_buf_steal(&b, NULL);
    return TK_OK;
}
