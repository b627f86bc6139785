#include "app/account.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "app/app.h"
#include "app/auth/auth.h"
#include "app/browser/browser.h"
#include "app/sandbox/sandbox.h"
#include "lib/buf.h"
#include "lib/id.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/pg.h"
#include "lib/utf8.h"
#include "lib/zip.h"
#include "lib/tktime.h"

/* Rows fetched per round trip of an export's cursor (each row one JSON text;
 * a download one at a time: it may be large). */
#define EXPORT_FETCH_ROWS 500

/* Columns an export leaves out, by type or name: secrets (hashes of
 * passwords, tokens and cookies, CSRF tokens, execd's access header), search
 * indexes made from the text that is exported (tsvector, embeddings) and the
 * downloads' bytes (members of their own). Other bytes (a skill's files) are
 * in the JSON as Postgres writes bytea: "\\x" and hex. */
#define OMITTED_COLUMNS_SQL                                                                        \
    "coalesce((SELECT array_agg(a.attname::text ORDER BY a.attnum) FROM pg_attribute a WHERE "     \
    "a.attrelid = t.tbl::regclass AND a.attnum > 0 AND NOT a.attisdropped AND (a.atttypid = "      \
    "'tsvector'::regtype OR a.attname IN ('embedding', 'csrf_token', 'execd_headers', "            \
    "'password_hash') OR a.attname LIKE '%\\_hash' OR (t.tbl = 'downloads' AND a.attname = "       \
    "'data'))), '{}')::text"

struct exp {
    PGconn *c;
    const char *uid;
    tk_zip_writer w;
    json_t *members; /* [{path, size, sha256}] */
    json_t *tables;  /* {table: {rows, omitted}} */
    char *err;
    size_t errlen;
};

__attribute__((format(printf, 2, 3))) static int efail(struct exp *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->err, e->errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static int write_all(int fd, const void *p, size_t n)
{
    const char *b = p;
    while (n > 0) {
        ssize_t k = write(fd, b, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

/* A scratch file in TMPDIR (else /tmp), already unlinked: it goes with its fd. */
static int scratch(void)
{
    const char *d = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/tusko-export-XXXXXX", d && *d ? d : "/tmp");
    int fd = mkostemp(path, O_CLOEXEC);
    if (fd >= 0)
        unlink(path);
    return fd;
}

/* Copies the scratch file fd (all of it) into the archive as `name`. */
static int add_file(struct exp *e, const char *name, int fd)
{
    off_t size = lseek(fd, 0, SEEK_END);
    if (size < 0 || lseek(fd, 0, SEEK_SET) != 0)
        return efail(e, "cannot read back a scratch file: %s", strerror(errno));
    if (tk_zip_begin(&e->w, name, (uint64_t)size, (int64_t)time(NULL)) != TK_OK)
        return efail(e, "cannot write %s into the archive: %s", name,
                     e->w.err ? strerror(e->w.err) : "bad name");
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    unsigned char buf[65536];
    uint64_t n = 0;
    while (n < (uint64_t)size) {
        ssize_t k = read(fd, buf, sizeof buf);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return efail(e, "cannot read back a scratch file: %s",
                         k < 0 ? strerror(errno) : "it shrank");
        if (tk_zip_write(&e->w, buf, (size_t)k) != TK_OK)
            return efail(e, "cannot write the archive: %s", strerror(e->w.err));
        crypto_hash_sha256_update(&st, buf, (size_t)k);
        n += (uint64_t)k;
    }
    if (tk_zip_end(&e->w) != TK_OK)
        return efail(e, "cannot write the archive: %s", strerror(e->w.err));
    unsigned char h[32];
    char hex[65];
    crypto_hash_sha256_final(&st, h);
    sodium_bin2hex(hex, sizeof hex, h, sizeof h);
    json_array_append_new(e->members, tk_json_obj("path", json_string(name), "size",
                                                  json_integer((json_int_t)size), "sha256",
                                                  json_string(hex), NULL));
    return 0;
}

/* Runs `declare` (a DECLARE x CURSOR ...) and calls row() for each row it
 * yields, fetched `per` at a time in text or binary. */
static int each_row(struct exp *e, const char *declare, int nparams, const char *const *params,
                    int per, int binary, int (*row)(struct exp *, PGresult *, int, void *),
                    void *ud)
{
    PGresult *r = tk_pg_query(e->c, declare, nparams, params);
    int ok = tk_pg_ok(r);
    PQclear(r);
    if (!ok)
        return efail(e, "the database refused the export's query: %s", PQerrorMessage(e->c));
    char fetch[64];
    snprintf(fetch, sizeof fetch, "FETCH %d FROM x", per);
    int rc = 0;
    for (;;) {
        r = PQexecParams(e->c, fetch, 0, NULL, NULL, NULL, NULL, binary);
        if (PQresultStatus(r) != PGRES_TUPLES_OK) {
            rc = efail(e, "reading the export failed: %s", PQerrorMessage(e->c));
            PQclear(r);
            break;
        }
        int n = PQntuples(r);
        for (int i = 0; i < n && rc == 0; i++)
            rc = row(e, r, i, ud);
        PQclear(r);
        if (rc != 0 || n < per)
            break;
    }
    PQclear(tk_pg_query(e->c, "CLOSE x", 0, NULL));
    return rc;
}

struct table_out {
    int fd;
    long long rows;
};

static int table_row(struct exp *e, PGresult *r, int i, void *ud)
{
    struct table_out *t = ud;
    const char *sep = t->rows ? ",\n" : "\n";
    if (write_all(t->fd, sep, strlen(sep)) != 0 ||
        write_all(t->fd, PQgetvalue(r, i, 0), (size_t)PQgetlength(r, i, 0)) != 0)
        return efail(e, "cannot write a scratch file: %s", strerror(errno));
    t->rows++;
    return 0;
}

/* tables/<tbl>.json: every row of the user's in tbl, a JSON array */
static int export_table(struct exp *e, const char *tbl, const char *cond, const char *omitted)
{
    int fd = scratch();
    if (fd < 0)
        return efail(e, "cannot make a scratch file: %s", strerror(errno));
    /* tbl comes from the catalog (regclass::text, quoted as needed) and cond
     * from tusko_owned_cond (identifiers quoted by format %I) */
    char *sql =
        tk_asprintf("DECLARE x NO SCROLL CURSOR FOR SELECT (to_jsonb(t) - $2::text[])::text "
                    "FROM %s t WHERE %s",
                    tbl, cond);
    const char *p[] = {e->uid, omitted};
    struct table_out t = {fd, 0};
    int rc = write_all(fd, "[", 1) == 0 ? 0 : efail(e, "cannot write a scratch file");
    if (rc == 0)
        rc = each_row(e, sql, 2, p, EXPORT_FETCH_ROWS, 0, table_row, &t);
    free(sql);
    if (rc == 0 && write_all(fd, "\n]\n", 3) != 0)
        rc = efail(e, "cannot write a scratch file: %s", strerror(errno));
    char name[300];
    snprintf(name, sizeof name, "tables/%s.json", tbl);
    if (rc == 0)
        rc = add_file(e, name, fd);
    close(fd);
    if (rc == 0) {
        json_t *om = json_array();
        /* omitted is a Postgres array literal of plain column names */
        char buf[1024];
        snprintf(buf, sizeof buf, "%s", omitted);
        size_t len = strlen(buf);
        if (len >= 2 && buf[0] == '{' && buf[len - 1] == '}') {
            buf[len - 1] = '\0';
            for (char *s = buf + 1, *comma; s && *s; s = comma ? comma + 1 : NULL) {
                comma = strchr(s, ',');
                if (comma)
                    *comma = '\0';
                json_array_append_new(om, json_string(s));
            }
        }
        json_object_set_new(e->tables, tbl,
                            tk_json_obj("rows", json_integer(t.rows), "omitted", om, NULL));
    }
    return rc;
}

/* A download's name as a member name: one path element, printable UTF-8
 * (an invalid byte becomes '_'; at most 120 bytes, cut at a character). */
static void member_name(const char *in, size_t len, char *out, size_t outlen)
{
    size_t o = 0;
    for (size_t i = 0; i < len && o + 4 < outlen && o < 120;) {
        uint32_t cp;
        size_t k = tk_utf8_decode(in + i, len - i, &cp);
        if (k == 0) { /* not UTF-8 here */
            out[o++] = '_';
            i++;
            continue;
        }
        if (o + k > 120)
            break;
        if (k == 1) {
            unsigned char ch = (unsigned char)in[i];
            out[o++] = (ch < 0x20 || ch == 0x7f || ch == '/' || ch == '\\') ? '_' : (char)ch;
        } else {
            memcpy(out + o, in + i, k);
            o += k;
        }
        i += k;
    }
    out[o] = '\0';
    if (o == 0 || strcmp(out, ".") == 0 || strcmp(out, "..") == 0)
        snprintf(out, outlen, "file");
}

static int download_row(struct exp *e, PGresult *r, int i, void *ud)
{
    (void)ud;
    /* binary results: the id is 16 bytes */
    if (PQgetlength(r, i, 0) != 16)
        return efail(e, "a download's id is not a uuid");
    const unsigned char *u = (const unsigned char *)PQgetvalue(r, i, 0);
    char id[37];
    snprintf(id, sizeof id, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
             u[14], u[15]);
    char fname[128], name[200];
    member_name(PQgetvalue(r, i, 1), (size_t)PQgetlength(r, i, 1), fname, sizeof fname);
    snprintf(name, sizeof name, "downloads/%s/%s", id, fname);
    int fd = scratch();
    if (fd < 0)
        return efail(e, "cannot make a scratch file: %s", strerror(errno));
    int rc = write_all(fd, PQgetvalue(r, i, 2), (size_t)PQgetlength(r, i, 2)) == 0
                 ? add_file(e, name, fd)
                 : efail(e, "cannot write a scratch file: %s", strerror(errno));
    close(fd);
    return rc;
}

static int export_all(struct exp *e)
{
    PGresult *r = tk_pg_query(e->c, "SELECT email FROM users WHERE id = $1", 1, &e->uid);
    if (!tk_pg_ok(r) || PQntuples(r) != 1) {
        int missing = tk_pg_ok(r);
        PQclear(r);
        if (missing) {
            efail(e, "no such user");
            return 1;
        }
        return efail(e, "the database did not answer");
    }
    char *email = PQgetisnull(r, 0, 0) ? NULL : strdup(PQgetvalue(r, 0, 0));
    PQclear(r);
    r = tk_pg_query(
        e->c, "SELECT t.tbl, t.cond, " OMITTED_COLUMNS_SQL " FROM tusko_user_tables() t", 0, NULL);
    if (!tk_pg_ok(r)) {
        PQclear(r);
        free(email);
        return efail(e, "the database did not list the user's tables: %s", PQerrorMessage(e->c));
    }
    int rc = 0;
    for (int i = 0; i < PQntuples(r) && rc == 0; i++)
        rc = export_table(e, PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), PQgetvalue(r, i, 2));
    PQclear(r);
    if (rc == 0)
        rc = each_row(e,
                      "DECLARE x NO SCROLL BINARY CURSOR FOR SELECT id, name, data FROM "
                      "downloads WHERE user_id = $1 ORDER BY created_at, id",
                      1, &e->uid, 1, 1, download_row, NULL);
    if (rc == 0) {
        char created[40];
        tk_time_rfc3339(tk_now_ms(), created, sizeof created);
        json_t *m =
            tk_json_obj("format", json_string(APP_EXPORT_FORMAT), "format_version",
                        json_integer(APP_EXPORT_FORMAT_VERSION), "tusko_version",
                        json_string(TUSKO_VERSION), "created_at", json_string(created), "account",
                        tk_json_obj("id", json_string(e->uid), "email",
                                    email ? json_string(email) : json_null(), NULL),
                        "tables", json_incref(e->tables), "members", json_incref(e->members), NULL);
        char *text = json_dumps(m, JSON_INDENT(2) | JSON_SORT_KEYS);
        json_decref(m);
        size_t len = text ? strlen(text) : 0;
        if (!text || tk_zip_begin(&e->w, "manifest.json", len, (int64_t)time(NULL)) != TK_OK ||
            tk_zip_write(&e->w, text, len) != TK_OK || tk_zip_end(&e->w) != TK_OK ||
            tk_zip_finish(&e->w) != TK_OK)
            rc = efail(e, "cannot write the archive: %s",
                       e->w.err ? strerror(e->w.err) : "out of memory");
        free(text);
    }
    free(email);
    return rc;
}

tk_status app_account_export(PGconn *c, const char *user_id, int fd, char *err, size_t errlen)
{
    struct exp e = {.c = c,
                    .uid = user_id,
                    .members = json_array(),
                    .tables = json_object(),
                    .err = err,
                    .errlen = errlen};
    tk_zip_writer_init(&e.w, fd);
    /* one snapshot for every table: the archive is of one instant */
    PGresult *r = tk_pg_query(c, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", 0, NULL);
    int ok = tk_pg_ok(r);
    PQclear(r);
    int rc = ok ? export_all(&e) : efail(&e, "the database did not answer");
    PQclear(tk_pg_query(c, ok ? "COMMIT" : "ROLLBACK", 0, NULL));
    tk_zip_writer_free(&e.w);
    json_decref(e.members);
    json_decref(e.tables);
    return rc == 0 ? TK_OK : rc > 0 ? TK_ENOENT : TK_ERROR;
}

/* ---------- deletion ---------- */

/* One call of tusko_user_delete: its outcome ("ok", "missing", "busy",
 * "sandboxes"), the counts (heap JSON text) and the busy turn. */
static tk_status delete_rows(PGconn *c, const char *user_id, const char *actor, char *outcome,
                             size_t olen, char **counts, char *busy, size_t blen)
{
    const char *p[] = {user_id, actor};
    PGresult *r = tk_pg_query(c,
                              "SELECT outcome, counts::text, coalesce(busy_turn::text, '') FROM "
                              "tusko_user_delete($1, $2)",
                              2, p);
    if (!tk_pg_ok(r) || PQntuples(r) != 1) {
        PQclear(r);
        return TK_ERROR;
    }
    snprintf(outcome, olen, "%s", PQgetvalue(r, 0, 0));
    *counts = PQgetisnull(r, 0, 1) ? NULL : strdup(PQgetvalue(r, 0, 1));
    snprintf(busy, blen, "%s", PQgetvalue(r, 0, 2));
    PQclear(r);
    return TK_OK;
}

tk_status app_account_delete(PGconn *c, const char *user_id, const char *actor, json_t **answer,
                             char *err, size_t errlen)
{
    *answer = NULL;
    int released = 0, browsers = 0;
    /* sandboxes first: once the rows are gone nothing would know of them; a
     * sandbox made meanwhile (a turn just ending) is found by the database
     * ("sandboxes") and released in the next round */
    for (int round = 0; round < 3; round++) {
        const char *p[] = {user_id};
        PGresult *r = tk_pg_query(c,
                                  "SELECT (SELECT id::text FROM turns WHERE user_id = $1 AND state "
                                  "IN ('queued', 'running') LIMIT 1) FROM users WHERE id = $1",
                                  1, p);
        if (!tk_pg_ok(r)) {
            PQclear(r);
            snprintf(err, errlen, "the database did not answer");
            return TK_ERROR;
        }
        if (PQntuples(r) == 0) {
            PQclear(r);
            snprintf(err, errlen, "no such user");
            return TK_ENOENT;
        }
        if (!PQgetisnull(r, 0, 0)) {
            snprintf(err, errlen, "turn %s is still running: cancel it (or wait for it) first",
                     PQgetvalue(r, 0, 0));
            PQclear(r);
            return TK_EDENIED;
        }
        PQclear(r);
        int n = 0;
        tk_status st = sandbox_release_user(c, user_id, &n, err, errlen);
        released += n;
        if (st != TK_OK)
            return TK_ERROR;
        /* browsers: best effort (the service also ends each at its timeout) */
        browsers += browser_release_user(c, user_id);
        char outcome[16], busy[TK_UUID_LEN + 1];
        char *counts = NULL;
        if (delete_rows(c, user_id, actor, outcome, sizeof outcome, &counts, busy, sizeof busy) !=
            TK_OK) {
            snprintf(err, errlen, "the database refused the deletion: %s", PQerrorMessage(c));
            return TK_ERROR;
        }
        if (strcmp(outcome, "ok") == 0) {
            json_error_t je;
            json_t *deleted = counts ? json_loads(counts, 0, &je) : NULL;
            free(counts);
            *answer = tk_json_obj("deleted", deleted ? deleted : json_object(),
                                  "sandboxes_released", json_integer(released), "browsers_released",
                                  json_integer(browsers), NULL);
            app_auth_cache_drop_user(user_id);
            tk_info("account", "msg=\"account deleted\" user=%s actor=%s sandboxes=%d browsers=%d",
                    user_id, actor, released, browsers);
            return TK_OK;
        }
        free(counts);
        if (strcmp(outcome, "missing") == 0) {
            snprintf(err, errlen, "no such user");
            return TK_ENOENT;
        }
        if (strcmp(outcome, "busy") == 0) {
            snprintf(err, errlen, "turn %s is still running: cancel it (or wait for it) first",
                     busy);
            return TK_EDENIED;
        }
    }
    snprintf(err, errlen,
             "sandboxes kept appearing while the account was being deleted; try again");
    return TK_ERROR;
}

/* ---------- one chat ---------- */

/* Everything of one chat as JSON, in one statement (so one snapshot): the
 * chat, its messages, every event, its turns, its plan, the documents saved
 * in it and the files downloaded from its sandbox (metadata: the bytes are at
 * /api/downloads/{id}). */
#define CHAT_EXPORT_SQL                                                                            \
    "SELECT json_build_object('format', 'tusko-chat-export', 'format_version', 1, "                \
    "'tusko_version', $3::text, 'exported_at', now(), "                                            \
    "'chat', (to_jsonb(s) - 'user_id'), "                                                          \
    "'messages', coalesce((SELECT jsonb_agg(to_jsonb(m) - 'session_id' ORDER BY m.seq) FROM "      \
    "messages m WHERE m.session_id = s.id), '[]'), "                                               \
    "'events', coalesce((SELECT jsonb_agg(jsonb_build_object('id', e.seq, 'type', e.type, "        \
    "'turn_id', e.turn_id, 'data', e.data::jsonb, 'created_at', e.created_at) ORDER BY e.seq) "    \
    "FROM events e WHERE e.session_id = s.id), '[]'), "                                            \
    "'turns', coalesce((SELECT jsonb_agg(to_jsonb(t) - 'user_id' - 'session_id' - 'instance_id' "  \
    "ORDER BY t.created_at) FROM turns t WHERE t.session_id = s.id), '[]'), "                      \
    "'plan', (SELECT p.plan FROM plans p WHERE p.session_id = s.id), "                             \
    "'documents', coalesce((SELECT jsonb_agg(jsonb_build_object('id', d.id, 'title', d.title, "    \
    "'source', d.source, 'mime', d.mime, 'bytes', d.bytes, 'created_at', d.created_at) ORDER BY "  \
    "d.created_at) FROM utopia_documents d WHERE d.user_id = s.user_id AND d.chat_id = s.id), "    \
    "'[]'), "                                                                                      \
    "'files', coalesce((SELECT jsonb_agg(jsonb_build_object('id', f.id, 'name', f.name, 'path', "  \
    "f.path, 'content_type', f.content_type, 'size', f.size, 'sha256', f.sha256, 'created_at', "   \
    "f.created_at, 'url', '/api/downloads/' || f.id) ORDER BY f.created_at) FROM downloads f "     \
    "WHERE f.user_id = s.user_id AND f.session_id = s.id), '[]'))::text "                          \
    "FROM chat_sessions s WHERE s.id = $1 AND s.user_id = $2"

/* a string member or "" */
static const char *str_or_empty(json_t *o, const char *k)
{
    const char *v = tk_json_str(o, k);
    return v ? v : "";
}

/* The chat as Markdown: its title, each message (a tool call as its name and
 * arguments, a tool's result in a code block), then the files. */
static void chat_markdown(tk_buf *b, json_t *x)
{
    json_t *chat = json_object_get(x, "chat");
    const char *title = tk_json_str(chat, "title");
    tk_buf_printf(b, "# %s\n\n", title && *title ? title : "Chat");
    tk_buf_printf(b, "Exported from Tusko on %s; chat %s, started %s.\n",
                  str_or_empty(x, "exported_at"), str_or_empty(chat, "id"),
                  str_or_empty(chat, "created_at"));
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(x, "messages"), i, m)
    {
        const char *role = tk_json_str(m, "role");
        const char *content = tk_json_str(m, "content");
        if (!role)
            continue;
        if (strcmp(role, "tool") == 0) {
            const char *name = tk_json_str(m, "tool_name");
            tk_buf_printf(b, "\n**Result of `%s`**%s\n\n```\n%s\n```\n", name ? name : "tool",
                          json_is_true(json_object_get(m, "is_error")) ? " (an error)" : "",
                          content ? content : "");
            continue;
        }
        tk_buf_printf(b, "\n## %s%s\n\n",
                      strcmp(role, "user") == 0        ? "You"
                      : strcmp(role, "assistant") == 0 ? "Assistant"
                                                       : role,
                      json_is_true(json_object_get(m, "partial")) ? " (cut short)" : "");
        if (content && *content)
            tk_buf_printf(b, "%s\n", content);
        size_t k;
        json_t *call;
        json_array_foreach(json_object_get(m, "tool_calls"), k, call)
        {
            json_t *fn = json_object_get(call, "function");
            const char *name = tk_json_str(fn ? fn : call, "name");
            json_t *args = json_object_get(fn ? fn : call, "arguments");
            char *a = args ? (json_is_string(args) ? strdup(json_string_value(args))
                                                   : json_dumps(args, JSON_COMPACT))
                           : NULL;
            tk_buf_printf(b, "\n- calls `%s` with `%s`\n", name ? name : "?", a ? a : "{}");
            free(a);
        }
    }
    json_t *files = json_object_get(x, "files");
    if (json_array_size(files) > 0) {
        tk_buf_append_str(b, "\n## Files\n\n");
        json_t *f;
        json_array_foreach(files, i, f)
        {
            tk_buf_printf(b, "- %s (`%s`, %lld bytes, SHA-256 %s): %s\n", str_or_empty(f, "name"),
                          str_or_empty(f, "path"),
                          (long long)json_integer_value(json_object_get(f, "size")),
                          str_or_empty(f, "sha256"), str_or_empty(f, "url"));
        }
    }
    json_t *docs = json_object_get(x, "documents");
    if (json_array_size(docs) > 0) {
        tk_buf_append_str(b, "\n## Documents\n\n");
        json_t *d;
        json_array_foreach(docs, i, d)
        {
            tk_buf_printf(b, "- %s (%s)\n", str_or_empty(d, "title"), str_or_empty(d, "id"));
        }
    }
}

/* GET /api/sessions/{id}/export[?format=json|md] */
static void h_chat_export(tk_req *r, void *ud)
{
    (void)ud;
    const char *id = tk_req_param(r, "id");
    const char *format = tk_req_query(r, "format");
    int md = format && strcmp(format, "md") == 0;
    if (format && !md && strcmp(format, "json") != 0) {
        tk_respond_error(r, 400, "INVALID_REQUEST", "format is json (the default) or md");
        return;
    }
    if (!tk_uuid_valid(id)) {
        tk_respond_error(r, 404, "NOT_FOUND", "no such chat session");
        return;
    }
    PGconn *c = app_db_acquire();
    if (!c) {
        app_respond_db_unavailable(r);
        return;
    }
    const char *p[] = {id, app_req_user(r)->id, TUSKO_VERSION};
    PGresult *res = tk_pg_query(c, CHAT_EXPORT_SQL, 3, p);
    app_db_release(c);
    if (!tk_pg_ok(res)) {
        PQclear(res);
        app_respond_db_unavailable(r);
        return;
    }
    if (PQntuples(res) != 1) {
        PQclear(res);
        tk_respond_error(r, 404, "NOT_FOUND", "no such chat session");
        return;
    }
    char cd[120];
    snprintf(cd, sizeof cd, "attachment; filename=\"chat-%s.%s\"", id, md ? "md" : "json");
    tk_respond_header(r, "Content-Disposition", cd);
    tk_respond_header(r, "Cache-Control", "no-store");
    if (!md) {
        tk_respond(r, 200, "application/json", PQgetvalue(res, 0, 0),
                   (size_t)PQgetlength(res, 0, 0));
        PQclear(res);
        return;
    }
    json_error_t je;
    json_t *x = json_loadb(PQgetvalue(res, 0, 0), (size_t)PQgetlength(res, 0, 0), 0, &je);
    PQclear(res);
    if (!x) {
        tk_respond_error(r, 500, "INTERNAL", "the chat could not be read back");
        return;
    }
    tk_buf b;
    tk_buf_init(&b, TK_CAP_INPUT_BOUND); /* bounded by the chat, read whole above */
    chat_markdown(&b, x);
    json_decref(x);
    tk_respond(r, 200, "text/markdown; charset=utf-8", b.data, b.len);
    tk_buf_free(&b);
}

/* ---------- routes ---------- */

static void h_export(tk_req *r, void *ud)
{
    (void)ud;
    const app_user *u = app_req_user(r);
    int fd = scratch();
    if (fd < 0) {
        tk_respond_error(r, 500, "INTERNAL", "cannot make a scratch file");
        return;
    }
    PGconn *c = app_db_acquire();
    if (!c) {
        close(fd);
        app_respond_db_unavailable(r);
        return;
    }
    char err[512];
    tk_status st = app_account_export(c, u->id, fd, err, sizeof err);
    app_db_release(c);
    off_t size = st == TK_OK ? lseek(fd, 0, SEEK_END) : -1;
    if (size < 0) {
        close(fd);
        tk_error("account", "msg=\"export failed\" user=%s error=\"%s\"", u->id, err);
        if (st == TK_ENOENT)
            tk_respond_error(r, 404, "NOT_FOUND", "no such user");
        else
            tk_respond_error(r, 503, "EXPORT_FAILED", "the export could not be made: %s", err);
        return;
    }
    char day[40], cd[120];
    tk_time_rfc3339(tk_now_ms(), day, sizeof day);
    day[10] = '\0';
    snprintf(cd, sizeof cd, "attachment; filename=\"tusko-export-%s.zip\"", day);
    tk_respond_header(r, "Content-Disposition", cd);
    tk_respond_header(r, "Cache-Control", "no-store");
    tk_info("account", "msg=\"export\" user=%s bytes=%lld", u->id, (long long)size);
    tk_respond_fd(r, 200, "application/zip", fd, 0, (uint64_t)size);
}

/* DELETE /api/me {"confirm": "<the account's email, or its id without one>"} */
static void h_delete(tk_req *r, void *ud)
{
    (void)ud;
    const app_user *u = app_req_user(r);
    json_t *body = tk_req_json(r, 1);
    if (!body && tk_req_responded(r))
        return;
    const char *confirm = body ? tk_json_str(body, "confirm") : NULL;
    const char *want = u->email[0] ? u->email : u->id;
    if (!confirm || strcmp(confirm, want) != 0) {
        tk_respond_error(r, 400, "CONFIRMATION_REQUIRED",
                         "deleting an account removes everything of it for good: send "
                         "{\"confirm\": \"%s\"} (the account's %s) to go on",
                         want, u->email[0] ? "email" : "id");
        return;
    }
    PGconn *c = app_db_acquire();
    if (!c) {
        app_respond_db_unavailable(r);
        return;
    }
    char id[TK_UUID_LEN];
    snprintf(id, sizeof id, "%s", u->id);
    json_t *answer = NULL;
    char err[600];
    tk_status st = app_account_delete(c, id, "self", &answer, err, sizeof err);
    app_db_release(c);
    if (st == TK_OK)
        tk_respond_json(r, 200, answer);
    else if (st == TK_ENOENT)
        tk_respond_error(r, 404, "NOT_FOUND", "no such user");
    else if (st == TK_EDENIED)
        tk_respond_error(r, 409, "TURN_IN_PROGRESS", "%s", err);
    else
        tk_respond_error(r, 503, "DELETE_FAILED",
                         "the account was not deleted (its rows are all there): %s", err);
}

const tk_route app_account_routes[] = {
    {"GET", "/api/me/export", h_export, NULL, TK_ROUTE_BLOCKING},
    {"DELETE", "/api/me", h_delete, NULL, TK_ROUTE_BLOCKING},
    {"GET", "/api/sessions/{id}/export", h_chat_export, NULL, TK_ROUTE_BLOCKING},
};
const size_t app_account_nroutes = TK_ARRAY_LEN(app_account_routes);
