#include "app/auth/tokens.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/audit.h"
#include "app/auth/auth.h"
#include "lib/json.h"
#include "lib/id.h"
#include "lib/pg.h"

tk_status app_token_create(PGconn *c, const char *user_id, const char *name,
                           char out[APP_TOKEN_LEN + 1])
{
    char secret[APP_SECRET_HEX + 1], hash[APP_HASH_HEX + 1], id[TK_UUID_LEN];
    app_secret_new(secret);
    snprintf(out, APP_TOKEN_LEN + 1, "%s%s", APP_TOKEN_PREFIX, secret);
    app_sha256_hex(out, strlen(out), hash);
    tk_uuid7(id);
    const char *p[] = {id, user_id, hash, name ? name : ""};
    tk_status st = tk_pg_exec(c,
                              "INSERT INTO api_tokens (id, user_id, token_hash, name) "
                              "VALUES ($1, $2, decode($3, 'hex'), $4)",
                              4, p);
    if (st != TK_OK) {
        out[0] = '\0';
        return st;
    }
    char target[TK_UUID_LEN + 8];
    snprintf(target, sizeof target, "token:%s", id);
    app_audit(c, NULL, NULL, "token.create", user_id, target,
              tk_json_obj("name", json_string(name ? name : ""), NULL));
    return st;
}

tk_status app_websession_create(PGconn *c, const char *user_id, const char *method, int64_t ttl_ms,
                                const char *client_ip, const char *user_agent,
                                char secret[APP_SECRET_HEX + 1], char csrf[APP_SECRET_HEX + 1])
{
    char hash[APP_HASH_HEX + 1], ttl[32], ua[256];
    app_secret_new(secret);
    app_secret_new(csrf);
    app_sha256_hex(secret, APP_SECRET_HEX, hash);
    snprintf(ttl, sizeof ttl, "%lld", (long long)ttl_ms);
    snprintf(ua, sizeof ua, "%s", user_agent ? user_agent : "");
    const char *p[] = {hash, user_id, csrf, method, ttl, client_ip, ua};
    tk_status st =
        tk_pg_exec(c,
                   "INSERT INTO web_sessions (token_hash, user_id, csrf_token, method, expires_at, "
                   "client_ip, user_agent) VALUES (decode($1, 'hex'), $2, $3, $4, "
                   "now() + make_interval(secs => $5::bigint / 1000.0), $6, $7)",
                   7, p);
    if (st != TK_OK)
        secret[0] = csrf[0] = '\0';
    return st;
}

tk_status app_websession_delete(PGconn *c, const char *cred_hash)
{
    const char *p[] = {cred_hash};
    app_auth_cache_drop(cred_hash);
    return tk_pg_exec(c, "DELETE FROM web_sessions WHERE token_hash = decode($1, 'hex')", 1, p);
}

long app_websession_sweep(PGconn *c)
{
    long n = 0;
    PGresult *r = tk_pg_query(c, "DELETE FROM web_sessions WHERE expires_at < now()", 0, NULL);
    if (tk_pg_ok(r))
        n += strtol(PQcmdTuples(r), NULL, 10);
    PQclear(r);
    r = tk_pg_query(c, "DELETE FROM oidc_flows WHERE expires_at < now()", 0, NULL);
    if (tk_pg_ok(r))
        n += strtol(PQcmdTuples(r), NULL, 10);
    PQclear(r);
    return n;
}
