/*
 * db.c — shared Postgres helpers (see db.h).
 */
#include "app/utopia/db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/id.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/pg.h"

static void db_error(PGresult *r, const char *what, char *err, size_t errlen)
{
    const char *m = PQresultErrorMessage(r);
    tk_error("utopia", "msg=\"database error\" op=%s sqlstate=%s error=\"%.200s\"", what,
             tk_pg_sqlstate(r), m ? m : "");
    snprintf(err, errlen, "database error in %s", what);
}

json_t *utopia_db_json(PGconn *c, const char *sql, int n, const char *const *params, int *none,
                       char *err, size_t errlen)
{
    if (none)
        *none = 0;
    PGresult *r = tk_pg_query(c, sql, n, params);
    json_t *j = NULL;
    if (!tk_pg_ok(r)) {
        char what[40];
        snprintf(what, sizeof what, "%.39s", sql);
        db_error(r, what, err, errlen);
        goto out;
    }
    if (PQntuples(r) == 0 || PQgetisnull(r, 0, 0)) {
        if (none)
            *none = 1;
        snprintf(err, errlen, "not found");
        goto out;
    }
    char jerr[128];
    const char *v = PQgetvalue(r, 0, 0);
    j = tk_json_parse(v, strlen(v), (size_t)PQgetlength(r, 0, 0) + 1, jerr, sizeof jerr);
    if (!j)
        snprintf(err, errlen, "bad JSON from the database: %s", jerr);
out:
    PQclear(r);
    return j;
}

tk_status utopia_db_exec(PGconn *c, const char *sql, int n, const char *const *params, long *rows,
                         char *err, size_t errlen)
{
    PGresult *r = tk_pg_query(c, sql, n, params);
    tk_status st = TK_OK;
    if (!tk_pg_ok(r)) {
        char what[40];
        snprintf(what, sizeof what, "%.39s", sql);
        db_error(r, what, err, errlen);
        st = TK_ERROR;
    } else if (rows) {
        const char *t = PQcmdTuples(r);
        *rows = t && *t ? strtol(t, NULL, 10) : 0;
    }
    PQclear(r);
    return st;
}

tk_status utopia_db_delete_one(PGconn *c, const char *sql, const char *what, const char *user_id,
                               const char *id, json_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!user_id || !id || !utopia_uuid_ok(user_id) || !utopia_uuid_ok(id)) {
        snprintf(err, errlen, "bad user or %s id", what);
        return TK_EINVAL;
    }
    const char *p[] = {user_id, id};
    long n = 0;
    tk_status st = utopia_db_exec(c, sql, 2, p, &n, err, errlen);
    if (st != TK_OK)
        return st;
    if (n == 0) {
        snprintf(err, errlen, "no such %s", what);
        return TK_ENOENT;
    }
    *out = tk_json_obj("deleted", json_true(), NULL);
    return TK_OK;
}

utopia_db_page utopia_db_page_of(int limit, int offset, int def, int max)
{
    utopia_db_page pg;
    snprintf(pg.limit, sizeof pg.limit, "%d", limit <= 0 || limit > max ? def : limit);
    snprintf(pg.offset, sizeof pg.offset, "%d", offset < 0 ? 0 : offset);
    return pg;
}

int utopia_uuid_ok(const char *s)
{
    return !s || tk_uuid_valid(s);
}
