#include "app/backup.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "app/app.h"
#include "app/backup_schedule.h"
#include "app/pgtool.h"
#include "app/schema.h"
#include "lib/log.h"
#include "lib/pg.h"
#include "lib/tar.h"
#include "lib/tktime.h"

/* The kinds of data kept in files. A new one is a row here (and a folder under
 * TUSKO_DATA_DIR that its feature writes): backups carry it from then on. */
static const app_backup_kind kinds[] = {
    {"skills", "user-installed skills"},
};

const app_backup_kind *app_backup_kinds(size_t *n)
{
    *n = TK_ARRAY_LEN(kinds);
    return kinds;
}

/* ---------- the schedule's files ---------- */

int app_backup_is_scheduled_name(const char *name)
{
    /* tusko-YYYYMMDDTHHMMSSZ.tar */
    static const char pat[] = "tusko-########T######Z.tar";
    if (strlen(name) != sizeof pat - 1)
        return 0;
    for (size_t i = 0; pat[i]; i++)
        if (pat[i] == '#' ? !isdigit((unsigned char)name[i]) : name[i] != pat[i])
            return 0;
    return 1;
}

/* ---------- one backup ---------- */

struct file {
    char *abs; /* where it is */
    char *rel; /* its member name: data/<kind>/<path> */
    uint64_t size;
    char sha256[65];
};

struct backup {
    char tmpdir[4096];
    char dump[4200];
    json_t *manifest;
    json_t *members;
    struct file *files;
    size_t nfiles, cap;
    int skipped;
    char err[1024];
};

static int fail(struct backup *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct backup *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->err, sizeof b->err, fmt, ap);
    va_end(ap);
    return -1;
}

static int cmp_names(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

/* Every regular file under dir (rel: its path below the kind's folder), in
 * name order. Symlinks and special files are skipped (and counted). */
static int walk(struct backup *b, const char *kind, const char *dir, const char *rel)
{
    struct dirent **ents;
    int n = scandir(dir, &ents, NULL, cmp_names);
    if (n < 0)
        return fail(b, "cannot read %s: %s", dir, strerror(errno));
    int rc = 0;
    for (int i = 0; i < n; i++) {
        const char *nm = ents[i]->d_name;
        if (rc == 0 && strcmp(nm, ".") != 0 && strcmp(nm, "..") != 0) {
            char *abs = tk_asprintf("%s/%s", dir, nm);
            char *r = rel[0] ? tk_asprintf("%s/%s", rel, nm) : tk_strdup(nm);
            struct stat st;
            if (lstat(abs, &st) != 0) {
                rc = fail(b, "cannot read %s: %s", abs, strerror(errno));
            } else if (S_ISDIR(st.st_mode)) {
                rc = walk(b, kind, abs, r);
            } else if (S_ISREG(st.st_mode)) {
                if (b->nfiles == b->cap) {
                    b->cap = b->cap ? b->cap * 2 : 16;
                    b->files = tk_realloc(b->files, b->cap * sizeof *b->files);
                }
                struct file *f = &b->files[b->nfiles];
                memset(f, 0, sizeof *f);
                f->abs = abs;
                f->rel = tk_asprintf("data/%s/%s", kind, r);
                abs = NULL;
                if (strlen(f->rel) > TK_TAR_NAME_MAX)
                    rc = fail(b, "%s: the path is over %d bytes", f->abs, TK_TAR_NAME_MAX - 6);
                else if (app_sha256_file(f->abs, f->sha256, &f->size) != TK_OK)
                    rc = fail(b, "cannot read %s: %s", f->abs, strerror(errno));
                b->nfiles++;
            } else {
                tk_warn("backup", "msg=\"skipped: not a regular file or folder\" path=\"%s\"", abs);
                b->skipped++;
            }
            free(abs);
            free(r);
        }
        free(ents[i]);
    }
    free(ents);
    return rc;
}

static json_t *member(const char *path, const char *kind, uint64_t size, const char *sha)
{
    return json_pack("{s:s, s:s, s:I, s:s}", "path", path, "kind", kind, "size", (json_int_t)size,
                     "sha256", sha);
}

/* The rows of every table of the public schema, in the snapshot of c. */
static json_t *row_counts(PGconn *c)
{
    PGresult *r = tk_pg_query(c,
                              "SELECT c.relname FROM pg_class c WHERE c.relkind IN ('r', 'p')"
                              " AND c.relnamespace = 'public'::regnamespace"
                              " AND NOT c.relispartition ORDER BY 1",
                              0, NULL);
    if (!tk_pg_ok(r)) {
        PQclear(r);
        return NULL;
    }
    json_t *o = json_object();
    for (int i = 0; i < PQntuples(r) && o; i++) {
        const char *t = PQgetvalue(r, i, 0);
        char *id = PQescapeIdentifier(c, t, strlen(t));
        char *sql = tk_asprintf("SELECT count(*) FROM public.%s", id ? id : "\"\"");
        PQfreemem(id);
        PGresult *k = tk_pg_query(c, sql, 0, NULL);
        free(sql);
        if (tk_pg_ok(k)) {
            json_object_set_new(o, t, json_integer(strtoll(PQgetvalue(k, 0, 0), NULL, 10)));
        } else {
            json_decref(o);
            o = NULL;
        }
        PQclear(k);
    }
    PQclear(r);
    return o;
}

/* pg_dump of the database in one snapshot, and the manifest's database part
 * read in the same snapshot. */
static int dump_database(struct backup *b)
{
    PGconn *c = app_db_acquire();
    if (!c)
        return fail(b, "no database connection");
    int rc = -1;
    PGresult *r = NULL;
    json_t *applied = NULL, *rows = NULL;
    if (tk_pg_exec(c, "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY", 0, NULL) != TK_OK) {
        fail(b, "cannot begin a snapshot");
        goto out;
    }
    r = tk_pg_query(c,
                    "SELECT pg_export_snapshot(), current_setting('server_version'),"
                    " current_database()",
                    0, NULL);
    if (!tk_pg_ok(r)) {
        fail(b, "cannot export a snapshot");
        goto out;
    }
    applied = app_schema_applied(c);
    rows = row_counts(c);
    int major = app_pgtool_server_major(c);
    if (!applied || !rows || major < 0) {
        fail(b, "cannot read the schema and the tables");
        goto out;
    }
    char tool[512], version[256], err[512];
    if (app_pgtool_find("pg_dump", major, tool, sizeof tool, version, sizeof version, err,
                        sizeof err) != TK_OK) {
        fail(b, "%s", err);
        goto out;
    }
    char snap[128];
    snprintf(snap, sizeof snap, "--snapshot=%s", PQgetvalue(r, 0, 0));
    char file[4300];
    snprintf(file, sizeof file, "--file=%s", b->dump);
    char *argv[] = {tool, "--format=custom", snap, file, NULL};
    tk_buf e;
    tk_buf_init(&e, 8192);
    int st = app_pgtool_run(argv, -1, &e);
    if (st != 0) {
        fail(b, "pg_dump failed (status %d): %.700s", st, tk_buf_cstr(&e));
        tk_buf_free(&e);
        goto out;
    }
    tk_buf_free(&e);
    json_t *db = json_pack("{s:s, s:s, s:s, s:s, s:O, s:O}", "name", PQgetvalue(r, 0, 2),
                           "server_version", PQgetvalue(r, 0, 1), "pg_dump", version, "dump_format",
                           "custom", "schema", applied, "rows", rows);
    json_object_set_new(b->manifest, "database", db);
    rc = 0;
out:
    PQclear(r);
    json_decref(applied);
    json_decref(rows);
    PQclear(PQexec(c, "COMMIT"));
    app_db_release(c);
    return rc;
}

/* Writes `path` into the archive, checking it is still what was hashed. */
static int copy_in(struct backup *b, tk_tar_writer *w, const char *path, const char *name,
                   uint64_t size, const char *sha)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return fail(b, "cannot read %s: %s", path, strerror(errno));
    if (tk_tar_begin(w, name, size, 0600, (int64_t)time(NULL)) != TK_OK) {
        close(fd);
        return fail(b, "cannot write %s into the archive: %s", name,
                    w->err ? strerror(w->err) : "bad name");
    }
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    unsigned char buf[65536];
    uint64_t n = 0;
    ssize_t k;
    while ((k = read(fd, buf, sizeof buf)) != 0) {
        if (k < 0) {
            if (errno == EINTR)
                continue;
            close(fd);
            return fail(b, "cannot read %s: %s", path, strerror(errno));
        }
        if (n + (uint64_t)k > size || tk_tar_write(w, buf, (size_t)k) != TK_OK) {
            close(fd);
            return n + (uint64_t)k > size
                       ? fail(b, "%s changed during the backup (it grew); run it again", path)
                       : fail(b, "cannot write the archive: %s", strerror(w->err));
        }
        crypto_hash_sha256_update(&st, buf, (size_t)k);
        n += (uint64_t)k;
    }
    close(fd);
    unsigned char h[32];
    char hex[65];
    crypto_hash_sha256_final(&st, h);
    sodium_bin2hex(hex, sizeof hex, h, sizeof h);
    if (n != size || strcmp(hex, sha) != 0)
        return fail(b, "%s changed during the backup; run it again", path);
    if (tk_tar_end(w) != TK_OK)
        return fail(b, "cannot write the archive: %s", strerror(w->err));
    return 0;
}

/* The folder of path: "." without a '/', "/" for a file in the root. */
static void parent_dir(const char *path, char *out, size_t outlen)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(out, outlen, ".");
    else if (slash == path)
        snprintf(out, outlen, "/");
    else
        snprintf(out, outlen, "%.*s", (int)(slash - path), path);
}

static int write_archive(struct backup *b, const char *out)
{
    char *partial = tk_asprintf("%s.partial", out);
    int fd = open(partial, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        fail(b, "cannot create %s: %s", partial, strerror(errno));
        free(partial);
        return -1;
    }
    tk_tar_writer w;
    tk_tar_writer_init(&w, fd);
    char *m = json_dumps(b->manifest, JSON_INDENT(1) | JSON_SORT_KEYS);
    int rc = -1;
    size_t mlen = strlen(m);
    if (tk_tar_begin(&w, "manifest.json", mlen, 0600, (int64_t)time(NULL)) != TK_OK ||
        tk_tar_write(&w, m, mlen) != TK_OK || tk_tar_end(&w) != TK_OK) {
        fail(b, "cannot write %s: %s", partial, strerror(w.err ? w.err : EIO));
        goto out;
    }
    json_t *d = json_array_get(b->members, 0);
    if (copy_in(b, &w, b->dump, "database.dump",
                (uint64_t)json_integer_value(json_object_get(d, "size")),
                json_string_value(json_object_get(d, "sha256"))) < 0)
        goto out;
    for (size_t i = 0; i < b->nfiles; i++)
        if (copy_in(b, &w, b->files[i].abs, b->files[i].rel, b->files[i].size, b->files[i].sha256) <
            0)
            goto out;
    if (tk_tar_finish(&w) != TK_OK || fsync(fd) != 0) {
        fail(b, "cannot write %s: %s", partial, strerror(w.err ? w.err : errno));
        goto out;
    }
    if (close(fd) != 0) {
        fd = -1;
        fail(b, "cannot write %s: %s", partial, strerror(errno));
        goto out;
    }
    fd = -1;
    if (rename(partial, out) != 0) {
        fail(b, "cannot rename %s to %s: %s", partial, out, strerror(errno));
        goto out;
    }
    /* the rename itself on disk */
    char dir[4096];
    parent_dir(out, dir, sizeof dir);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    rc = 0;
out:
    if (fd >= 0)
        close(fd);
    if (rc != 0)
        unlink(partial);
    free(partial);
    free(m);
    return rc;
}

static void backup_free(struct backup *b)
{
    if (b->dump[0])
        unlink(b->dump);
    if (b->tmpdir[0])
        rmdir(b->tmpdir);
    for (size_t i = 0; i < b->nfiles; i++) {
        free(b->files[i].abs);
        free(b->files[i].rel);
    }
    free(b->files);
    json_decref(b->manifest);
}

int app_backup_mkdir_p(const char *path, unsigned mode)
{
    char *p = tk_strdup(path);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            if (mkdir(p, mode) != 0 && errno != EEXIST) {
                free(p);
                return -1;
            }
            *s = '/';
        }
    int rc = mkdir(p, mode) != 0 && errno != EEXIST ? -1 : 0;
    free(p);
    return rc;
}

/* One backup into `out`: TK_OK and a line saying what it holds in summary. */
static tk_status backup_once(const char *out, char *summary, size_t slen, char *err, size_t errlen)
{
    struct backup b;
    memset(&b, 0, sizeof b);
    tk_status st = TK_ERROR;
    /* the dump is made beside the archive (the same file system, no /tmp limit) */
    char dir[4000];
    parent_dir(out, dir, sizeof dir);
    snprintf(b.tmpdir, sizeof b.tmpdir, "%s/.tusko-backup-XXXXXX", dir);
    if (!mkdtemp(b.tmpdir)) {
        snprintf(err, errlen, "cannot make a folder beside %s: %s", out, strerror(errno));
        b.tmpdir[0] = '\0';
        goto out;
    }
    snprintf(b.dump, sizeof b.dump, "%s/database.dump", b.tmpdir);
    char created[40];
    tk_time_rfc3339(tk_now_ms(), created, sizeof created);
    b.manifest =
        json_pack("{s:s, s:i, s:s, s:s}", "format", APP_BACKUP_FORMAT, "format_version",
                  APP_BACKUP_FORMAT_VERSION, "tusko_version", TUSKO_VERSION, "created_at", created);
    b.members = json_array();
    json_object_set_new(b.manifest, "members", b.members);
    if (dump_database(&b) < 0)
        goto fail;
    char hex[65];
    uint64_t size;
    if (app_sha256_file(b.dump, hex, &size) != TK_OK) {
        fail(&b, "cannot read the dump: %s", strerror(errno));
        goto fail;
    }
    json_array_append_new(b.members, member("database.dump", "database", size, hex));
    json_t *jk = json_object();
    json_object_set_new(b.manifest, "kinds", jk);
    const char *data_dir = app_get()->cfg->data_dir;
    for (size_t i = 0; i < TK_ARRAY_LEN(kinds); i++) {
        char *folder = tk_asprintf("%s/%s", data_dir, kinds[i].name);
        struct stat sb;
        size_t before = b.nfiles;
        int present = lstat(folder, &sb) == 0;
        if (present && !S_ISDIR(sb.st_mode)) {
            fail(&b, "%s is not a folder", folder);
            free(folder);
            goto fail;
        }
        if (present && walk(&b, kinds[i].name, folder, "") < 0) {
            free(folder);
            goto fail;
        }
        free(folder);
        json_object_set_new(
            jk, kinds[i].name,
            json_pack("{s:b, s:I}", "present", present, "files", (json_int_t)(b.nfiles - before)));
        for (size_t k = before; k < b.nfiles; k++)
            json_array_append_new(b.members, member(b.files[k].rel, kinds[i].name, b.files[k].size,
                                                    b.files[k].sha256));
    }
    json_object_set_new(b.manifest, "skipped", json_integer(b.skipped));
    if (write_archive(&b, out) < 0)
        goto fail;
    json_t *db = json_object_get(b.manifest, "database");
    json_t *schema = json_object_get(db, "schema");
    json_t *rows = json_object_get(db, "rows");
    long long nrows = 0;
    const char *key;
    json_t *v;
    json_object_foreach(rows, key, v) nrows += json_integer_value(v);
    struct stat osb;
    stat(out, &osb);
    snprintf(summary, slen,
             "%s: %lld bytes; the database (schema %s, %zu tables, %lld rows), %zu data "
             "file(s)%s",
             out, (long long)osb.st_size,
             json_array_size(schema)
                 ? json_string_value(json_array_get(schema, json_array_size(schema) - 1))
                 : "empty",
             json_object_size(rows), nrows, b.nfiles,
             b.skipped ? " (some skipped, see the log)" : "");
    st = TK_OK;
    goto out;
fail:
    snprintf(err, errlen, "%s", b.err);
out:
    backup_free(&b);
    return st;
}

/* BACKUP_DIR/tusko-<now>.tar, creating BACKUP_DIR (0700) */
static int default_out(char *out, size_t outlen, char *err, size_t errlen)
{
    const char *dir = app_get()->cfg->backup_dir;
    if (app_backup_mkdir_p(dir, 0700) != 0) {
        snprintf(err, errlen, "cannot make BACKUP_DIR %s: %s", dir, strerror(errno));
        return -1;
    }
    time_t now = time(NULL);
    struct tm t;
    gmtime_r(&now, &t);
    char name[40];
    strftime(name, sizeof name, "tusko-%Y%m%dT%H%M%SZ.tar", &t);
    snprintf(out, outlen, "%s/%s", dir, name);
    return 0;
}

/* Keeps the newest `keep` scheduled backups in dir; returns how many went. */
static int prune(const char *dir, int64_t keep)
{
    struct dirent **ents;
    int n = scandir(dir, &ents, NULL, cmp_names);
    if (n < 0)
        return 0;
    int64_t total = 0;
    for (int i = 0; i < n; i++)
        total += app_backup_is_scheduled_name(ents[i]->d_name);
    int gone = 0;
    for (int i = 0; i < n; i++) {
        if (app_backup_is_scheduled_name(ents[i]->d_name) && total > keep) {
            char *p = tk_asprintf("%s/%s", dir, ents[i]->d_name);
            if (unlink(p) == 0) {
                tk_info("backup", "msg=\"old backup deleted\" file=%s keep=%lld", p,
                        (long long)keep);
                gone++;
            }
            free(p);
            total--;
        }
        free(ents[i]);
    }
    free(ents);
    return gone;
}

/* What a scheduled backup killed half-way left in dir: its .partial archive
 * and the folder its dump was made in. */
static void clean_leftovers(const char *dir)
{
    struct dirent **ents;
    int n = scandir(dir, &ents, NULL, cmp_names);
    for (int i = 0; i < n; i++) {
        const char *nm = ents[i]->d_name;
        size_t len = strlen(nm);
        char *p = tk_asprintf("%s/%s", dir, nm);
        if (len > 8 && strcmp(nm + len - 8, ".partial") == 0) {
            char base[300];
            snprintf(base, sizeof base, "%.*s", (int)(len - 8), nm);
            if (app_backup_is_scheduled_name(base) && unlink(p) == 0)
                tk_warn("backup", "msg=\"removed an unfinished backup\" file=%s", p);
        } else if (strncmp(nm, ".tusko-backup-", 14) == 0) {
            char *dump = tk_asprintf("%s/database.dump", p);
            unlink(dump);
            free(dump);
            if (rmdir(p) == 0)
                tk_warn("backup", "msg=\"removed an unfinished backup's folder\" dir=%s", p);
        }
        free(p);
        free(ents[i]);
    }
    if (n >= 0)
        free(ents);
}

static int schedule_loop(void)
{
    const app_settings *s = app_get()->cfg;
    if (strcmp(s->backup_schedule, "off") == 0) {
        fprintf(stderr, "tusko backup: BACKUP_SCHEDULE is off: no scheduled backups\n");
        return 0;
    }
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    tk_info("backup", "msg=\"scheduled backups\" schedule=%s dir=%s keep=%lld", s->backup_schedule,
            s->backup_dir, (long long)s->backup_keep);
    char e0[512], probe[4096];
    if (default_out(probe, sizeof probe, e0, sizeof e0) != 0) {
        fprintf(stderr, "tusko backup: %s\n", e0);
        return 1;
    }
    clean_leftovers(s->backup_dir);
    int failures = 0;
    for (;;) {
        time_t now = time(NULL), next = app_backup_next(s->backup_schedule, now);
        char at[40];
        tk_time_rfc3339((int64_t)next * 1000, at, sizeof at);
        tk_info("backup", "msg=\"next backup\" at=%s", at);
        while ((now = time(NULL)) < next) {
            struct timespec ts = {next - now, 0};
            int sig = sigtimedwait(&sigs, NULL, &ts);
            if (sig == SIGINT || sig == SIGTERM) {
                tk_info("backup", "msg=\"stopping\" signal=%d", sig);
                return 0;
            }
        }
        char out[4096], err[1024], summary[1200];
        if (default_out(out, sizeof out, err, sizeof err) == 0 &&
            backup_once(out, summary, sizeof summary, err, sizeof err) == TK_OK) {
            tk_info("backup", "msg=\"backup written\" summary=\"%s\"", summary);
            prune(s->backup_dir, s->backup_keep);
            failures = 0;
        } else {
            /* the older backups are kept: nothing is pruned after a failure */
            tk_error("backup", "msg=\"backup failed\" error=\"%s\" failures_in_a_row=%d", err,
                     ++failures);
        }
    }
}

int app_cli_backup(int argc, char **argv)
{
    const char *out = NULL;
    int schedule = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
            out = argv[++i];
        else if (strncmp(argv[i], "--out=", 6) == 0)
            out = argv[i] + 6;
        else if (strcmp(argv[i], "--schedule") == 0)
            schedule = 1;
        else {
            fprintf(stderr, "usage: tusko backup [--out FILE]   one backup (default: "
                            "BACKUP_DIR/tusko-<time>.tar)\n"
                            "       tusko backup --schedule     backups at BACKUP_SCHEDULE, "
                            "keeping BACKUP_KEEP\n");
            return 2;
        }
    }
    if (schedule && out) {
        fprintf(stderr, "tusko backup: --schedule writes into BACKUP_DIR; --out is for one "
                        "backup\n");
        return 2;
    }
    if (schedule)
        return schedule_loop();
    char path[4096], err[1024], summary[1200];
    if (!out) {
        if (default_out(path, sizeof path, err, sizeof err) != 0) {
            fprintf(stderr, "tusko backup: %s\n", err);
            return 1;
        }
        out = path;
    }
    struct stat sb;
    if (lstat(out, &sb) == 0) {
        fprintf(stderr, "tusko backup: %s exists; name a new file\n", out);
        return 1;
    }
    if (backup_once(out, summary, sizeof summary, err, sizeof err) != TK_OK) {
        fprintf(stderr, "tusko backup: %s\n", err);
        return 1;
    }
    printf("%s\n", out);
    fprintf(stderr, "tusko backup: written %s\n", summary);
    return 0;
}
