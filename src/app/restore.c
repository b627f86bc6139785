/* `tusko restore FILE [--force]` (backup.h has the order of its checks). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "app/app.h"
#include "app/backup.h"
#include "app/pgtool.h"
#include "app/schema.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/migrate.h"
#include "lib/pg.h"
#include "lib/tar.h"

struct restore {
    const char *file;
    int force;
    int fd;
    tk_tar_reader tar;
    json_t *manifest;
    json_t *by_path; /* member path -> its manifest object */
    char tmpdir[4096];
    char err[1400];
};

static int fail(struct restore *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct restore *x, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->err, sizeof x->err, fmt, ap);
    va_end(ap);
    return -1;
}

static const app_backup_kind *kind_named(const char *name)
{
    size_t n;
    const app_backup_kind *k = app_backup_kinds(&n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(k[i].name, name) == 0)
            return &k[i];
    return NULL;
}

/* "data/<kind>/<path>": every component non-empty, not . or .., printable */
static int data_path_ok(const char *p, const char *kind)
{
    size_t kl = strlen(kind);
    if (strncmp(p, "data/", 5) != 0 || strncmp(p + 5, kind, kl) != 0 || p[5 + kl] != '/')
        return 0;
    const char *s = p + 5 + kl + 1;
    if (!*s)
        return 0;
    while (*s) {
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
            return 0;
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f || s[i] == '\\')
                return 0;
        s += n + (e ? 1 : 0);
        if (e && !*s)
            return 0;
    }
    return 1;
}

static int is_hex64(const char *s)
{
    if (!s || strlen(s) != 64)
        return 0;
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

/* The manifest, first in the archive, checked against what this build knows. */
static int read_manifest(struct restore *x)
{
    tk_tar_entry e;
    tk_status st = tk_tar_next(&x->tar, &e);
    if (st != TK_OK || strcmp(e.name, "manifest.json") != 0)
        return fail(x, "%s is not a tusko backup: %s", x->file,
                    st != TK_OK ? x->tar.err : "its first member is not manifest.json");
    if (e.size > APP_BACKUP_MANIFEST_MAX)
        return fail(x, "the manifest is over %d bytes", APP_BACKUP_MANIFEST_MAX);
    char *m = tk_malloc(e.size + 1);
    size_t got = 0;
    ssize_t k;
    while (got < e.size && (k = tk_tar_read(&x->tar, m + got, e.size - got)) > 0)
        got += (size_t)k;
    if (got != e.size) {
        free(m);
        return fail(x, "reading the manifest: %s", x->tar.err);
    }
    char jerr[200];
    x->manifest = tk_json_parse(m, got, APP_BACKUP_MANIFEST_MAX, jerr, sizeof jerr);
    free(m);
    if (!x->manifest || !json_is_object(x->manifest))
        return fail(x, "the manifest is not a JSON object: %s", jerr);
    const char *fmt = tk_json_str(x->manifest, "format");
    int64_t ver = tk_json_int_or(x->manifest, "format_version", -1);
    if (!fmt || strcmp(fmt, APP_BACKUP_FORMAT) != 0)
        return fail(x, "%s is not a tusko backup (format \"%s\")", x->file, fmt ? fmt : "");
    if (ver != APP_BACKUP_FORMAT_VERSION)
        return fail(x,
                    "the backup's format version is %lld; this tusko (%s) reads version %d "
                    "(restore it with the tusko that made it, %s, or a later one)",
                    (long long)ver, TUSKO_VERSION, APP_BACKUP_FORMAT_VERSION,
                    tk_json_str_or(x->manifest, "tusko_version", "unknown"));
    json_t *db = json_object_get(x->manifest, "database");
    json_t *schema = json_object_get(db, "schema");
    char serr[400];
    if (app_schema_check_known(schema, serr, sizeof serr) != TK_OK)
        return fail(x, "the backup's schema: %s", serr);
    if (!json_is_object(json_object_get(db, "rows")))
        return fail(x, "the manifest has no row counts");
    json_t *kinds = json_object_get(x->manifest, "kinds");
    if (!json_is_object(kinds))
        return fail(x, "the manifest lists no data kinds");
    const char *key;
    json_t *v;
    json_object_foreach(kinds, key, v)
    {
        if (!kind_named(key))
            return fail(x,
                        "the backup holds data of kind \"%s\", which this tusko (%s) does not "
                        "know: restore it with the tusko that made it (%s) or a later one",
                        key, TUSKO_VERSION, tk_json_str_or(x->manifest, "tusko_version", "?"));
    }
    json_t *members = json_object_get(x->manifest, "members");
    if (!json_is_array(members))
        return fail(x, "the manifest lists no members");
    x->by_path = json_object();
    int dumps = 0;
    size_t i;
    json_array_foreach(members, i, v)
    {
        const char *path = tk_json_str(v, "path"), *kind = tk_json_str(v, "kind");
        int64_t size = tk_json_int_or(v, "size", -1);
        if (!path || !kind || size < 0 || !is_hex64(tk_json_str(v, "sha256")))
            return fail(x, "member %zu of the manifest is malformed", i);
        if (strcmp(path, "database.dump") == 0 && strcmp(kind, "database") == 0)
            dumps++;
        else if (!kind_named(kind) || !json_object_get(kinds, kind) || !data_path_ok(path, kind))
            return fail(x, "the manifest's member \"%s\" (kind %s) is not a path a backup has",
                        path, kind);
        if (json_object_get(x->by_path, path))
            return fail(x, "the manifest lists \"%s\" twice", path);
        json_object_set(x->by_path, path, v);
    }
    if (dumps != 1)
        return fail(x, "the manifest lists no database dump");
    return 0;
}

static long long count_q(PGconn *c, const char *sql)
{
    PGresult *r = tk_pg_query(c, sql, 0, NULL);
    long long n = tk_pg_ok(r) ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : -1;
    PQclear(r);
    return n;
}

static int folder_has_files(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return 0;
    struct dirent *e;
    int any = 0;
    while (!any && (e = readdir(d)))
        any = strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return any;
}

static const char tables_sql[] =
    "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
    " WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')"
    "   AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp%'"
    "   AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')";

/* Nobody else on the database; the target empty unless --force. *db_tables
 * gets how many relations the database has. */
static int check_target(struct restore *x, PGconn *c, PGconn *auth, long long *db_tables)
{
    char sql[300];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
             " AND backend_type = 'client backend' AND pid NOT IN (%d, %d)",
             PQbackendPID(c), auth ? PQbackendPID(auth) : PQbackendPID(c));
    long long others = count_q(c, sql);
    if (others < 0)
        return fail(x, "cannot read pg_stat_activity");
    if (others > 0)
        return fail(x,
                    "%lld other connection(s) to the database: a tusko (or another program) "
                    "uses it; stop it before restoring",
                    others);
    *db_tables = count_q(c, tables_sql);
    if (*db_tables < 0)
        return fail(x, "cannot read the database's tables");
    const char *data_dir = app_get()->cfg->data_dir;
    char busy[1024] = "";
    size_t n;
    const app_backup_kind *k = app_backup_kinds(&n);
    for (size_t i = 0; i < n; i++) {
        char *f = tk_asprintf("%s/%s", data_dir, k[i].name);
        if (folder_has_files(f))
            snprintf(busy + strlen(busy), sizeof busy - strlen(busy), "%s%s", busy[0] ? ", " : "",
                     f);
        free(f);
    }
    if ((*db_tables > 0 || busy[0]) && !x->force)
        return fail(x,
                    "the target is not empty (%s%s%s): a restore goes into an empty database "
                    "and data folder; pass --force to replace what is there",
                    *db_tables > 0 ? "the database has tables" : "",
                    *db_tables > 0 && busy[0] ? "; " : "", busy[0] ? busy : "");
    return 0;
}

static int mkdirs_for(const char *root, const char *rel)
{
    char *p = tk_asprintf("%s/%s", root, rel);
    int rc = 0;
    for (char *s = p + strlen(root) + 1; *s && rc == 0; s++)
        if (*s == '/') {
            *s = '\0';
            if (mkdir(p, 0700) != 0 && errno != EEXIST)
                rc = -1;
            *s = '/';
        }
    free(p);
    return rc;
}

/* Every member into tmpdir, each checked against the manifest. */
static int extract(struct restore *x)
{
    json_t *seen = json_object();
    int rc = -1;
    tk_tar_entry e;
    tk_status st;
    unsigned char *buf = tk_malloc(1 << 16);
    while ((st = tk_tar_next(&x->tar, &e)) == TK_OK) {
        json_t *m = json_object_get(x->by_path, e.name);
        if (!m) {
            fail(x, "the archive holds \"%s\", which its manifest does not list", e.name);
            goto out;
        }
        if (json_object_get(seen, e.name)) {
            fail(x, "the archive holds \"%s\" twice", e.name);
            goto out;
        }
        json_object_set_new(seen, e.name, json_true());
        if ((int64_t)e.size != tk_json_int_or(m, "size", -1)) {
            fail(x, "\"%s\" has %llu bytes, its manifest says %lld: the backup is damaged", e.name,
                 (unsigned long long)e.size, (long long)tk_json_int_or(m, "size", -1));
            goto out;
        }
        if (mkdirs_for(x->tmpdir, e.name) != 0) {
            fail(x, "cannot make folders in %s: %s", x->tmpdir, strerror(errno));
            goto out;
        }
        char *path = tk_asprintf("%s/%s", x->tmpdir, e.name);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) {
            fail(x, "cannot create %s: %s", path, strerror(errno));
            free(path);
            goto out;
        }
        crypto_hash_sha256_state h;
        crypto_hash_sha256_init(&h);
        ssize_t k;
        int werr = 0;
        while ((k = tk_tar_read(&x->tar, buf, 1 << 16)) > 0) {
            crypto_hash_sha256_update(&h, buf, (size_t)k);
            for (ssize_t off = 0; off < k && !werr;) {
                ssize_t w = write(fd, buf + off, (size_t)(k - off));
                if (w < 0 && errno != EINTR)
                    werr = errno;
                else if (w > 0)
                    off += w;
            }
        }
        if (k == 0 && !werr && fsync(fd) != 0)
            werr = errno;
        close(fd);
        free(path);
        if (k < 0) {
            fail(x, "reading \"%s\": %s", e.name, x->tar.err);
            goto out;
        }
        if (werr) {
            fail(x, "writing \"%s\" into %s: %s", e.name, x->tmpdir, strerror(werr));
            goto out;
        }
        unsigned char d[32];
        char hex[65];
        crypto_hash_sha256_final(&h, d);
        sodium_bin2hex(hex, sizeof hex, d, sizeof d);
        if (strcmp(hex, tk_json_str(m, "sha256")) != 0) {
            fail(x, "\"%s\" does not match its SHA-256 in the manifest: the backup is damaged",
                 e.name);
            goto out;
        }
    }
    if (st != TK_ENOENT) {
        fail(x, "%s", x->tar.err);
        goto out;
    }
    const char *key;
    json_t *v;
    json_object_foreach(x->by_path, key, v)
    {
        if (!json_object_get(seen, key)) {
            fail(x,
                 "the archive lacks \"%s\", which its manifest lists: the backup is cut "
                 "short or damaged",
                 key);
            goto out;
        }
    }
    rc = 0;
out:
    free(buf);
    json_decref(seen);
    return rc;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    return remove(p);
}

static void rm_tree(const char *path)
{
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* The restored database holds the rows the manifest counted. */
static int check_rows(struct restore *x, PGconn *c)
{
    json_t *rows = json_object_get(json_object_get(x->manifest, "database"), "rows");
    const char *t;
    json_t *v;
    json_object_foreach(rows, t, v)
    {
        char *id = PQescapeIdentifier(c, t, strlen(t));
        char *sql = tk_asprintf("SELECT count(*) FROM public.%s", id ? id : "\"\"");
        PQfreemem(id);
        long long n = count_q(c, sql);
        free(sql);
        if (n != json_integer_value(v))
            return fail(x, "after the restore table %s has %lld rows; the backup counted %lld", t,
                        n, (long long)json_integer_value(v));
    }
    return 0;
}

static int restore_database(struct restore *x, PGconn *c, long long db_tables)
{
    if (db_tables > 0) {
        /* --force: the archive is verified, the old schema goes */
        tk_warn("restore", "msg=\"--force: dropping what the database holds\" tables=%lld",
                db_tables);
        if (tk_pg_exec(c, "DROP SCHEMA public CASCADE", 0, NULL) != TK_OK ||
            tk_pg_exec(c, "CREATE SCHEMA public", 0, NULL) != TK_OK)
            return fail(x, "could not empty the database (DROP SCHEMA public CASCADE); it must "
                           "be owned by the role in DATABASE_URL");
    }
    int major = app_pgtool_server_major(c);
    char tool[512], version[256], err[512];
    if (app_pgtool_find("pg_restore", major, tool, sizeof tool, version, sizeof version, err,
                        sizeof err) != TK_OK)
        return fail(x, "%s", err);
    PGresult *r = tk_pg_query(c, "SELECT current_database()", 0, NULL);
    if (!tk_pg_ok(r)) {
        PQclear(r);
        return fail(x, "cannot read the database's name");
    }
    char *dbarg = tk_asprintf("--dbname=%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    char *dump = tk_asprintf("%s/database.dump", x->tmpdir);
    /* --no-comments: COMMENT ON EXTENSION needs a superuser */
    char *argv[] = {tool,
                    "--no-owner",
                    "--no-privileges",
                    "--no-comments",
                    "--exit-on-error",
                    "--single-transaction",
                    dbarg,
                    dump,
                    NULL};
    tk_buf e;
    tk_buf_init(&e, 8192);
    int st = app_pgtool_run(argv, -1, &e);
    free(dbarg);
    free(dump);
    if (st != 0) {
        fail(x, "pg_restore failed (status %d), nothing of the backup was restored: %.900s", st,
             tk_buf_cstr(&e));
        tk_buf_free(&e);
        return -1;
    }
    tk_buf_free(&e);
    return check_rows(x, c);
}

/* The data folders into place (after the database: a failed pg_restore
 * leaves them as they were). */
static int place_data(struct restore *x, int *placed)
{
    const char *data_dir = app_get()->cfg->data_dir;
    json_t *kinds = json_object_get(x->manifest, "kinds");
    size_t n;
    const app_backup_kind *k = app_backup_kinds(&n);
    for (size_t i = 0; i < n; i++) {
        json_t *kv = json_object_get(kinds, k[i].name);
        char *src = tk_asprintf("%s/data/%s", x->tmpdir, k[i].name);
        char *dst = tk_asprintf("%s/%s", data_dir, k[i].name);
        char *old = tk_asprintf("%s/old-%s", x->tmpdir, k[i].name);
        struct stat sb;
        int have_src = lstat(src, &sb) == 0;
        if (!have_src && json_is_true(json_object_get(kv, "present")))
            have_src = mkdir(src, 0700) == 0; /* present and empty */
        int rc = 0;
        if (lstat(dst, &sb) == 0 && (have_src || x->force))
            rc = rename(dst, old); /* --force: the folder there goes */
        if (rc == 0 && have_src)
            rc = rename(src, dst);
        if (rc != 0)
            fail(x, "cannot move %s into place: %s", dst, strerror(errno));
        else if (have_src)
            (*placed)++;
        free(src);
        free(dst);
        free(old);
        if (rc != 0)
            return -1;
    }
    return 0;
}

int app_cli_restore(int argc, char **argv)
{
    struct restore x;
    memset(&x, 0, sizeof x);
    x.fd = -1;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--force") == 0)
            x.force = 1;
        else if (argv[i][0] != '-' && !x.file)
            x.file = argv[i];
        else {
            x.file = NULL;
            break;
        }
    }
    if (!x.file) {
        fprintf(stderr, "usage: tusko restore FILE [--force]   (FILE: from tusko backup; "
                        "--force replaces a database and data folder that are not empty)\n");
        return 2;
    }
    int rc = 1;
    PGconn *c = NULL, *auth = NULL;
    x.fd = open(x.file, O_RDONLY | O_CLOEXEC);
    if (x.fd < 0) {
        fail(&x, "cannot open %s: %s", x.file, strerror(errno));
        goto out;
    }
    tk_tar_reader_init(&x.tar, tk_tar_read_fd, &x.fd);
    if (read_manifest(&x) < 0)
        goto out;
    c = app_db_acquire();
    if (!c) {
        fail(&x, "no database connection");
        goto out;
    }
    if (app_get()->auth_pg)
        auth = tk_pg_acquire(app_get()->auth_pg, 1000);
    long long db_tables = 0;
    if (check_target(&x, c, auth, &db_tables) < 0)
        goto out;
    const char *data_dir = app_get()->cfg->data_dir;
    if (app_backup_mkdir_p(data_dir, 0700) != 0) {
        fail(&x, "cannot make TUSKO_DATA_DIR %s: %s", data_dir, strerror(errno));
        goto out;
    }
    snprintf(x.tmpdir, sizeof x.tmpdir, "%s/.restore-XXXXXX", data_dir);
    if (!mkdtemp(x.tmpdir)) {
        fail(&x, "cannot make a folder in %s: %s", data_dir, strerror(errno));
        x.tmpdir[0] = '\0';
        goto out;
    }
    fprintf(stderr, "tusko restore: checking every member of %s against its manifest…\n", x.file);
    if (extract(&x) < 0)
        goto out;
    fprintf(stderr, "tusko restore: restoring the database (made %s by tusko %s)…\n",
            tk_json_str_or(x.manifest, "created_at", "?"),
            tk_json_str_or(x.manifest, "tusko_version", "?"));
    if (restore_database(&x, c, db_tables) < 0)
        goto out;
    int placed = 0;
    if (place_data(&x, &placed) < 0)
        goto out;
    int applied = 0;
    char err[768];
    if (tk_migrate(c, app_schema_files(), NULL, &applied, err, sizeof err) != TK_OK) {
        fail(&x, "restored, but migrating it to this tusko's schema failed: %s", err);
        goto out;
    }
    json_t *rows = json_object_get(json_object_get(x.manifest, "database"), "rows");
    long long nrows = 0;
    const char *key;
    json_t *v;
    json_object_foreach(rows, key, v) nrows += json_integer_value(v);
    printf("restored %s: %zu tables, %lld rows (as counted at the backup), %d data folder(s); "
           "%d migration(s) applied since\n",
           x.file, json_object_size(rows), nrows, placed, applied);
    rc = 0;
out:
    if (rc != 0)
        fprintf(stderr, "tusko restore: %s\n", x.err);
    if (x.tmpdir[0])
        rm_tree(x.tmpdir);
    if (auth)
        tk_pg_release(app_get()->auth_pg, auth);
    app_db_release(c);
    if (x.fd >= 0)
        close(x.fd);
    json_decref(x.manifest);
    json_decref(x.by_path);
    return rc;
}
