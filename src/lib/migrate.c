#include "lib/migrate.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "lib/pg.h"

/* The advisory lock key for migrations: a constant of our own. */
#define MIGRATION_LOCK_KEY "7461736b6f01"

static int simple(PGconn *c, const char *sql, char *err, size_t errlen)
{
    PGresult *r = PQexec(c, sql);
    int ok = r && tk_pg_ok(r);
    if (!ok) {
        const char *m = r ? PQresultErrorMessage(r) : PQerrorMessage(c);
        snprintf(err, errlen, "%.*s", (int)strcspn(m, "\n"), m);
    }
    PQclear(r);
    return ok;
}

static void rollback(PGconn *c)
{
    if (PQtransactionStatus(c) != PQTRANS_IDLE)
        PQclear(PQexec(c, "ROLLBACK"));
}

int tk_migrate_locks(const struct tk_embed_file *f, char names[][TK_MIGRATE_NAME_MAX])
{
    static const char tag[] = "-- locks:";
    int n = 0;
    const char *p = (const char *)f->data, *end = p + f->size;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            eol = end;
        if ((size_t)(eol - p) >= sizeof tag - 1 && memcmp(p, tag, sizeof tag - 1) == 0) {
            const char *q = p + sizeof tag - 1;
            int any = 0;
            while (q < eol) {
                while (q < eol && (*q == ' ' || *q == ',' || *q == '\t' || *q == '\r'))
                    q++;
                if (q == eol)
                    break;
                size_t len = 0;
                while (q + len < eol && (islower((unsigned char)q[len]) || q[len] == '_' ||
                                         (len > 0 && isdigit((unsigned char)q[len]))))
                    len++;
                if (len == 0 || len >= TK_MIGRATE_NAME_MAX || n == TK_MIGRATE_MAX_LOCKS)
                    return -1;
                memcpy(names[n], q, len);
                names[n][len] = '\0';
                n++;
                any = 1;
                q += len;
                if (q < eol && *q != ' ' && *q != ',' && *q != '\t' && *q != '\r')
                    return -1;
            }
            if (!any)
                return -1;
        }
        p = eol + 1;
    }
    return n;
}

/* Past a comment, a quoted string or identifier, or a dollar-quoted body
 * starting at p (else p itself). */
static const char *skip_quoted(const char *start, const char *p, const char *end)
{
    if (p + 1 < end && p[0] == '-' && p[1] == '-') {
        while (p < end && *p != '\n')
            p++;
        return p;
    }
    if (p + 1 < end && p[0] == '/' && p[1] == '*') {
        int depth = 0;
        while (p < end) {
            if (p + 1 < end && p[0] == '/' && p[1] == '*') {
                depth++;
                p += 2;
            } else if (p + 1 < end && p[0] == '*' && p[1] == '/') {
                p += 2;
                if (--depth == 0)
                    return p;
            } else {
                p++;
            }
        }
        return p;
    }
    if (*p == '\'' || *p == '"') {
        char q = *p;
        int backslash = q == '\'' && p > start && (p[-1] == 'E' || p[-1] == 'e');
        for (p++; p < end; p++) {
            if (backslash && *p == '\\' && p + 1 < end) {
                p++;
            } else if (*p == q) {
                if (p + 1 < end && p[1] == q)
                    p++;
                else
                    return p + 1;
            }
        }
        return p;
    }
    if (*p == '$') {
        const char *t = p + 1;
        while (t < end && (isalnum((unsigned char)*t) || *t == '_'))
            t++;
        if (t < end && *t == '$' && !(t > p + 1 && isdigit((unsigned char)p[1]))) {
            size_t taglen = (size_t)(t - p + 1);
            for (const char *s = t + 1; s + taglen <= end; s++)
                if (memcmp(s, p, taglen) == 0)
                    return s + taglen;
            return end;
        }
    }
    return p;
}

/* The first statement of sql that controls the transaction (BEGIN, COMMIT,
 * ROLLBACK, END, ABORT, START, SAVEPOINT, RELEASE, PREPARE, VACUUM), its
 * keyword into word; 0 when there is none. Comments, strings and
 * dollar-quoted bodies (a plpgsql function's BEGIN ... END) are skipped. */
int tk_migrate_transaction_control(const char *sql, size_t n, char *word, size_t wlen)
{
    static const char *const bad[] = {"BEGIN", "COMMIT",    "ROLLBACK", "END",     "ABORT",
                                      "START", "SAVEPOINT", "RELEASE",  "PREPARE", "VACUUM"};
    const char *p = sql, *end = sql + n;
    int at_start = 1;
    while (p < end) {
        const char *q = skip_quoted(sql, p, end);
        if (q != p) {
            p = q;
            continue;
        }
        if (*p == ';') {
            at_start = 1;
            p++;
            continue;
        }
        if (isspace((unsigned char)*p)) {
            p++;
            continue;
        }
        if (at_start && isalpha((unsigned char)*p)) {
            char w[16];
            size_t len = 0;
            while (p + len < end && isalpha((unsigned char)p[len]) && len < sizeof w - 1) {
                w[len] = (char)toupper((unsigned char)p[len]);
                len++;
            }
            w[len] = '\0';
            for (size_t i = 0; i < TK_ARRAY_LEN(bad); i++)
                if (strcmp(w, bad[i]) == 0) {
                    snprintf(word, wlen, "%s", w);
                    return 1;
                }
            p += len;
        } else {
            p++;
        }
        at_start = 0;
    }
    return 0;
}

/* Rows of table `name` up to TK_MIGRATE_SMALL_ROWS + 1; -1 when there is no
 * such table; -2 on a database error. */
static long long rows_upto(PGconn *c, const char *name)
{
    const char *p[] = {name};
    PGresult *r = tk_pg_query(c, "SELECT to_regclass($1) IS NOT NULL", 1, p);
    if (!tk_pg_ok(r)) {
        PQclear(r);
        return -2;
    }
    int exists = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    PQclear(r);
    if (!exists)
        return -1;
    char *id = PQescapeIdentifier(c, name, strlen(name));
    if (!id)
        return -2;
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM (SELECT 1 FROM %s LIMIT %d) s", id,
             TK_MIGRATE_SMALL_ROWS + 1);
    PQfreemem(id);
    r = tk_pg_query(c, sql, 0, NULL);
    long long n = tk_pg_ok(r) ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : -2;
    PQclear(r);
    return n;
}

/* 1 when `name` is recorded, 0 when not, -1 on an error */
static int is_applied(PGconn *c, const char *name)
{
    const char *p[] = {name};
    PGresult *r = tk_pg_query(c, "SELECT 1 FROM schema_migrations WHERE version = $1", 1, p);
    int v = tk_pg_ok(r) ? PQntuples(r) > 0 : -1;
    PQclear(r);
    return v;
}

static int lock_and_prepare(PGconn *c, char *e, size_t elen)
{
    if (!simple(c, "SET client_min_messages = warning", e, elen))
        return 0;
    /* a killed `tusko migrate` has its migration rolled back within seconds,
     * not after its statement finishes (Postgres 14 and later) */
    PQclear(PQexec(c, "SET client_connection_check_interval = '2s'"));
    if (!simple(c, "SELECT pg_advisory_lock(x'" MIGRATION_LOCK_KEY "'::bigint)", e, elen))
        return 0;
    if (!simple(c,
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version text PRIMARY KEY,"
                " applied_at timestamptz NOT NULL DEFAULT now())",
                e, elen))
        return 0;
    return 1;
}

static void unlock(PGconn *c)
{
    rollback(c);
    PQclear(PQexec(c, "SELECT pg_advisory_unlock(x'" MIGRATION_LOCK_KEY "'::bigint)"));
    PQclear(PQexec(c, "RESET client_min_messages"));
    PQclear(PQexec(c, "RESET client_connection_check_interval"));
}

/* At start-up: TK_EDENIED (with err) when a pending migration declares a lock
 * on a table over TK_MIGRATE_SMALL_ROWS rows. */
static tk_status refuse_large_locks(PGconn *c, const struct tk_embed_file *files, char *e,
                                    size_t elen)
{
    for (const struct tk_embed_file *f = files; f && f->name; f++) {
        int done = is_applied(c, f->name);
        if (done < 0) {
            snprintf(e, elen, "reading schema_migrations failed");
            return TK_ERROR;
        }
        if (done)
            continue;
        char names[TK_MIGRATE_MAX_LOCKS][TK_MIGRATE_NAME_MAX];
        int n = tk_migrate_locks(f, names);
        if (n < 0) {
            snprintf(e, elen, "migration %s has a malformed \"-- locks:\" line", f->name);
            return TK_ERROR;
        }
        for (int i = 0; i < n; i++) {
            long long rows = rows_upto(c, names[i]);
            if (rows == -2) {
                snprintf(e, elen, "counting the rows of %s failed", names[i]);
                return TK_ERROR;
            }
            if (rows > TK_MIGRATE_SMALL_ROWS) {
                snprintf(e, elen,
                         "migration %s locks table %s (over %d rows) while it works through "
                         "it, which would stop chat for as long: it is not run at start-up. "
                         "Run `tusko migrate` first (during a quiet time; docs/OPERATIONS.md, "
                         "\"Upgrades\"), then start tusko",
                         f->name, names[i], TK_MIGRATE_SMALL_ROWS);
                return TK_EDENIED;
            }
        }
    }
    return TK_OK;
}

tk_status tk_migrate(PGconn *c, const struct tk_embed_file *files, const tk_migrate_opts *opts,
                     int *applied, char *err, size_t errlen)
{
    *applied = 0;
    char e[512];
    tk_status st = TK_ERROR;
    if (!lock_and_prepare(c, e, sizeof e))
        goto out;
    if (opts && opts->at_start) {
        st = refuse_large_locks(c, files, e, sizeof e);
        if (st != TK_OK)
            goto out;
        st = TK_ERROR;
    }
    for (const struct tk_embed_file *f = files; f && f->name; f++) {
        int done = is_applied(c, f->name);
        if (done < 0) {
            snprintf(e, sizeof e, "reading schema_migrations failed");
            goto out;
        }
        if (done)
            continue;
        char word[16];
        if (tk_migrate_transaction_control((const char *)f->data, f->size, word, sizeof word)) {
            snprintf(e, sizeof e,
                     "migration %s has a %s statement: a migration runs in one transaction, "
                     "which tusko begins and commits (it must not control it itself)",
                     f->name, word);
            goto out;
        }
        if (!simple(c, "BEGIN", e, sizeof e))
            goto out;
        if (opts && opts->lock_timeout_ms > 0) {
            char sql[64];
            snprintf(sql, sizeof sql, "SET LOCAL lock_timeout = %d", opts->lock_timeout_ms);
            if (!simple(c, sql, e, sizeof e))
                goto out;
        }
        tk_info("pg", "msg=\"applying migration\" version=%s", f->name);
        char m[400];
        if (!simple(c, (const char *)f->data, m, sizeof m)) {
            snprintf(e, sizeof e, "migration %s failed: %s", f->name, m);
            goto out;
        }
        if (PQtransactionStatus(c) != PQTRANS_INTRANS) {
            snprintf(e, sizeof e,
                     "migration %s ended its transaction itself (a migration must not COMMIT "
                     "or ROLLBACK: each runs in one transaction)",
                     f->name);
            goto out;
        }
        const char *p[1] = {f->name};
        if (tk_pg_exec(c, "INSERT INTO schema_migrations (version) VALUES ($1)", 1, p) != TK_OK) {
            snprintf(e, sizeof e, "recording migration %s failed", f->name);
            goto out;
        }
        if (!simple(c, "COMMIT", m, sizeof m)) {
            snprintf(e, sizeof e, "migration %s failed at commit: %s", f->name, m);
            goto out;
        }
        tk_info("pg", "msg=\"migration applied\" version=%s", f->name);
        (*applied)++;
    }
    st = TK_OK;
out:
    if (st != TK_OK)
        snprintf(err, errlen, "%s", e);
    unlock(c);
    return st;
}

int tk_migrate_status(PGconn *c, const struct tk_embed_file *files, tk_migration_state *states,
                      char *err, size_t errlen)
{
    PGresult *r = tk_pg_query(c, "SELECT to_regclass('schema_migrations') IS NOT NULL", 0, NULL);
    if (!tk_pg_ok(r)) {
        PQclear(r);
        snprintf(err, errlen, "the database cannot be read");
        return -1;
    }
    int have = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    PQclear(r);
    int n = 0;
    for (const struct tk_embed_file *f = files; f && f->name; f++, n++) {
        tk_migration_state *s = &states[n];
        memset(s, 0, sizeof *s);
        s->name = f->name;
        s->applied = have ? is_applied(c, f->name) : 0;
        if (s->applied < 0) {
            snprintf(err, errlen, "reading schema_migrations failed");
            return -1;
        }
        s->nlocks = tk_migrate_locks(f, s->locks);
        if (s->nlocks < 0) {
            snprintf(err, errlen, "migration %s has a malformed \"-- locks:\" line", f->name);
            return -1;
        }
        for (int i = 0; i < s->nlocks; i++) {
            s->rows[i] = s->applied ? 0 : rows_upto(c, s->locks[i]);
            if (s->rows[i] == -2) {
                snprintf(err, errlen, "counting the rows of %s failed", s->locks[i]);
                return -1;
            }
        }
    }
    return n;
}

tk_status tk_pg_migrate(PGconn *c, const struct tk_embed_file *files, int *applied, char *err,
                        size_t errlen)
{
    return tk_migrate(c, files, NULL, applied, err, errlen);
}
