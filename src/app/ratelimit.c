#include "app/ratelimit.h"

#include <stdio.h>
#include <string.h>

#include "app/app.h"
#include "lib/log.h"
#include "lib/pg.h"

tk_status app_ratelimit_take_key(PGconn *c, const char *key, int64_t max, int64_t window_ms,
                                 int64_t *retry_after_ms)
{
    char smax[24], swin[24];
    snprintf(smax, sizeof smax, "%lld", (long long)max);
    snprintf(swin, sizeof swin, "%lld", (long long)window_ms);
    const char *p[] = {key, smax, swin};
    PGresult *r = tk_pg_query(c,
                              "SELECT allowed, retry_after_ms FROM tusko_rate_take($1, $2::int, "
                              "make_interval(secs => $3::bigint / 1000.0))",
                              3, p);
    tk_status st = TK_ERROR;
    *retry_after_ms = 0;
    if (tk_pg_ok(r) && PQntuples(r) == 1) {
        if (strcmp(PQgetvalue(r, 0, 0), "t") == 0) {
            st = TK_OK;
        } else {
            int64_t ms = 1000;
            tk_parse_i64(PQgetvalue(r, 0, 1), 1, INT64_MAX, &ms);
            *retry_after_ms = ms;
            st = TK_EDENIED;
        }
    }
    PQclear(r);
    return st;
}

tk_status app_ratelimit_untake_key(PGconn *c, const char *key)
{
    const char *p[] = {key};
    return tk_pg_exec(c,
                      "DELETE FROM rate_events WHERE ctid = (SELECT ctid FROM rate_events "
                      "WHERE key = $1 ORDER BY at DESC LIMIT 1)",
                      1, p);
}

tk_status app_ratelimit_reset_key(PGconn *c, const char *key)
{
    const char *p[] = {key};
    return tk_pg_exec(c, "SELECT tusko_rate_reset($1)", 1, p);
}

tk_status app_ratelimit_take(const char *user_id, int *retry_after_s)
{
    *retry_after_s = 0;
    PGconn *c = app_db_acquire();
    if (!c)
        return TK_ERROR;
    char key[80];
    snprintf(key, sizeof key, APP_CHAT_RATE_KEY "%s", user_id);
    int64_t ms = 0;
    tk_status st = app_ratelimit_take_key(c, key, app_get()->cfg->chat_rate_limit_max,
                                          APP_CHAT_WINDOW_MS, &ms);
    app_db_release(c);
    if (st == TK_EDENIED) {
        *retry_after_s = (int)((ms + 999) / 1000);
        if (*retry_after_s < 1)
            *retry_after_s = 1;
        tk_info("ratelimit", "msg=\"chat rate limit reached\" user=%s retry_after_s=%d", user_id,
                *retry_after_s);
    }
    return st;
}

void app_ratelimit_respond(tk_req *r, int retry_after_s)
{
    char v[16];
    snprintf(v, sizeof v, "%d", retry_after_s);
    tk_respond_header(r, "Retry-After", v);
    tk_respond_error(r, 429, "RATE_LIMITED",
                     "too many chat requests: at most %lld a minute; try again in %d s",
                     (long long)app_get()->cfg->chat_rate_limit_max, retry_after_s);
}
