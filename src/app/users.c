#include "app/users.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/pg.h"

tk_status app_email_normalize(const char *in, char *out, size_t outlen)
{
    if (!in)
        return TK_EINVAL;
    while (*in == ' ' || *in == '\t')
        in++;
    size_t n = strlen(in);
    while (n && (in[n - 1] == ' ' || in[n - 1] == '\t'))
        n--;
    if (n == 0 || n > 254 || n >= outlen)
        return TK_EINVAL;
    const char *at = NULL;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)in[i];
        if (c <= 0x20 || c == 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == ',' ||
            c == ';')
            return TK_EINVAL;
        if (c == '@') {
            if (at)
                return TK_EINVAL;
            at = in + i;
        }
        out[i] = (char)tolower(c);
    }
    out[n] = '\0';
    if (!at || at == in || at == in + n - 1)
        return TK_EINVAL;
    return TK_OK;
}

tk_status app_user_create(PGconn *c, const char *email, const char *password_hash, const char *name,
                          int want_admin, int *is_admin, char id[TK_UUID_LEN])
{
    tk_uuid7(id);
    const char *p[] = {id, email, password_hash, name, want_admin ? "true" : "false"};
    PGresult *r = tk_pg_query(c, "SELECT tusko_user_insert($1, $2, $3, $4, $5)", 5, p);
    tk_status st = TK_OK;
    if (!tk_pg_ok(r))
        st = strcmp(tk_pg_sqlstate(r), "23505") == 0 ? TK_EDENIED : TK_ERROR;
    else if (is_admin)
        *is_admin = strcmp(PQgetvalue(r, 0, 0), "admin") == 0;
    PQclear(r);
    return st;
}

tk_status app_user_find_email(PGconn *c, const char *email, char id[TK_UUID_LEN],
                              char **password_hash)
{
    const char *p[] = {email};
    PGresult *r = tk_pg_query(c, "SELECT id, password_hash FROM users WHERE email = $1", 1, p);
    tk_status st = TK_ENOENT;
    if (password_hash)
        *password_hash = NULL;
    if (!tk_pg_ok(r)) {
        st = TK_ERROR;
    } else if (PQntuples(r) == 1) {
        snprintf(id, TK_UUID_LEN, "%s", PQgetvalue(r, 0, 0));
        if (password_hash && !PQgetisnull(r, 0, 1))
            *password_hash = tk_strdup(PQgetvalue(r, 0, 1));
        st = TK_OK;
    }
    PQclear(r);
    return st;
}

tk_status app_users_set_admin(PGconn *c, const char *user_id, int admin)
{
    const char *p[] = {user_id, admin ? "admin" : "user"};
    PGresult *r = tk_pg_query(c, "UPDATE users SET role = $2 WHERE id = $1", 2, p);
    tk_status st = !tk_pg_ok(r) ? TK_ERROR : atoi(PQcmdTuples(r)) == 1 ? TK_OK : TK_ENOENT;
    PQclear(r);
    return st;
}

tk_status app_users_disabled(PGconn *c, const char *user_id)
{
    const char *p[] = {user_id};
    PGresult *r = tk_pg_query(c, "SELECT disabled_at IS NOT NULL FROM users WHERE id = $1", 1, p);
    tk_status st = !tk_pg_ok(r)                            ? TK_ERROR
                   : PQntuples(r) != 1                     ? TK_ENOENT
                   : strcmp(PQgetvalue(r, 0, 0), "t") == 0 ? TK_EDENIED
                                                           : TK_OK;
    PQclear(r);
    return st;
}
