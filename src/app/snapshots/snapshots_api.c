#include "app/snapshots/snapshots_api.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "app/app.h"
#include "app/auth/auth.h"
#include "app/sandbox/execd.h"
#include "app/sandbox/sandbox.h"
#include "app/sessions.h"
#include "app/snapshots/snapshots.h"
#include "app/workspace.h"
#include "lib/buf.h"
#include "lib/id.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/tar.h"
#include "lib/tktime.h"

#define SNAP_DIR       "/workspace/.tusko-snap-"
#define MANIFEST_MAX   (64u << 20)
#define SCRIPT_TIMEOUT (30 * 60 * 1000L)

/* Run in the sandbox (python3 of the image): walks /workspace (regular files
 * only; symlinks and special files are left out, the snapshot directories
 * too), the tree digest over sorted (path, size, mtime), then, unless it
 * equals the last one, the manifest (path, size, SHA-256 per file) and the
 * archive (GNU tar, ustar format, the list given verbatim). The two values put
 * in are ours: a UUID and a hex digest. */
static const char script_fmt[] =
    "python3 - <<'TUSKO_SNAPSHOT'\n"
    "import hashlib, json, os, stat, subprocess, sys\n"
    "root = '/workspace'; sid = '%s'; last = '%s'\n"
    "files = []\n"
    "for dp, dns, fns in os.walk(root):\n"
    "    if dp == root:\n"
    "        dns[:] = [d for d in dns if not d.startswith('.tusko-snap-')]\n"
    "    for fn in fns:\n"
    "        p = os.path.join(dp, fn)\n"
    "        st = os.lstat(p)\n"
    "        if stat.S_ISREG(st.st_mode):\n"
    "            files.append((os.path.relpath(p, root), st.st_size, int(st.st_mtime)))\n"
    "files.sort()\n"
    "d = hashlib.sha256()\n"
    "for r, s, m in files:\n"
    "    d.update(os.fsencode(r) + b'\\0' + str(s).encode() + b'\\0' + str(m).encode() + "
    "b'\\n')\n"
    "dig = d.hexdigest()\n"
    "print('DIGEST', dig)\n"
    "if dig == last:\n"
    "    print('UNCHANGED'); sys.exit(0)\n"
    "tmp = root + '/.tusko-snap-' + sid\n"
    "os.makedirs(tmp, mode=0o700, exist_ok=True)\n"
    "man = []\n"
    "for r, s, m in files:\n"
    "    h = hashlib.sha256()\n"
    "    with open(os.path.join(root, r), 'rb') as f:\n"
    "        for b in iter(lambda: f.read(1 << 20), b''):\n"
    "            h.update(b)\n"
    "    man.append({'path': r, 'size': s, 'sha256': h.hexdigest()})\n"
    "with open(tmp + '/manifest.json', 'w') as f:\n"
    "    json.dump({'version': 1, 'digest': dig, 'files': man}, f)\n"
    "with open(tmp + '/list', 'wb') as f:\n"
    "    for r, _, _ in files:\n"
    "        f.write(os.fsencode(r) + b'\\0')\n"
    "rc = subprocess.run(['tar', '--format=ustar', '--null', '--verbatim-files-from', "
    "'--no-recursion', '-C', root, '-T', tmp + '/list', '-czf', tmp + '/a.tar.gz']).returncode\n"
    "if rc:\n"
    "    print('TARFAILED', rc); sys.exit(1)\n"
    "print('READY', os.path.getsize(tmp + '/a.tar.gz'), len(files))\n"
    "TUSKO_SNAPSHOT";

typedef struct {
    int fd;
    int64_t n, max;
    EVP_MD_CTX *sha;
    int too_big;
} spool;

static int spool_data(const char *d, size_t n, void *ud)
{
    spool *s = ud;
    if (s->n + (int64_t)n > s->max) {
        s->too_big = 1;
        return 1;
    }
    EVP_DigestUpdate(s->sha, d, n);
    while (n) {
        ssize_t w = write(s->fd, d, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return 1;
        d += w;
        n -= (size_t)w;
        s->n += w;
    }
    return 0;
}

static int buf_data(const char *d, size_t n, void *ud)
{
    return tk_buf_append(ud, d, n) != TK_OK;
}

/* The last ready snapshot's digest and id of the chat ("" when none). */
static void last_of(PGconn *c, const char *session_id, char *digest, char *id)
{
    digest[0] = id[0] = 0;
    const char *p[] = {session_id};
    PGresult *res = PQexecParams(c,
                                 "SELECT digest, id FROM snapshots WHERE session_id = $1 AND "
                                 "status = 'ready' ORDER BY created_at DESC LIMIT 1",
                                 1, NULL, p, NULL, NULL, 0);
    if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1) {
        snprintf(digest, 65, "%s", PQgetvalue(res, 0, 0));
        snprintf(id, TK_UUID_LEN, "%s", PQgetvalue(res, 0, 1));
    }
    PQclear(res);
}

static json_t *row_json(PGresult *res, int i)
{
    json_t *o = tk_json_obj(
        "id", json_string(PQgetvalue(res, i, 0)), "key", json_string(PQgetvalue(res, i, 1)),
        "bytes", json_integer(strtoll(PQgetvalue(res, i, 2), NULL, 10)), "sha256",
        json_string(PQgetvalue(res, i, 3)), "files",
        json_integer(strtoll(PQgetvalue(res, i, 4), NULL, 10)), "status",
        json_string(PQgetvalue(res, i, 5)), "error",
        PQgetisnull(res, i, 6) ? json_null() : json_string(PQgetvalue(res, i, 6)), "created_at",
        json_string(PQgetvalue(res, i, 7)), "trigger", json_string(PQgetvalue(res, i, 8)), NULL);
    return o;
}

#define ROW_COLS                                                                                   \
    "id, key, bytes, sha256, files, status, error, "                                               \
    "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), trigger"

static json_t *insert_row(const char *id, const char *user_id, const char *session_id,
                          const char *key, const char *mkey, int64_t bytes, const char *sha,
                          int64_t files, const char *digest, const char *status, const char *error,
                          const char *trigger)
{
    PGconn *c = app_db_acquire();
    if (!c)
        return NULL;
    char b[24], f[24];
    snprintf(b, sizeof b, "%lld", (long long)bytes);
    snprintf(f, sizeof f, "%lld", (long long)files);
    const char *p[] = {id,  user_id, session_id, key,    mkey,  b,
                       sha, f,       digest,     status, error, trigger};
    PGresult *res = PQexecParams(
        c,
        "INSERT INTO snapshots (id, user_id, session_id, key, manifest_key, bytes, sha256, "
        "files, digest, status, error, trigger) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, "
        "$10, $11, $12) RETURNING " ROW_COLS,
        12, NULL, p, NULL, NULL, 0);
    json_t *o = NULL;
    if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
        o = row_json(res, 0);
    else
        tk_warn("snapshots", "msg=\"snapshot row not stored\" error=\"%s\"", PQerrorMessage(c));
    PQclear(res);
    app_db_release(c);
    return o;
}

static void cleanup_sandbox(sandbox_handle *h, const char *id)
{
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf " SNAP_DIR "%s", id);
    sandbox_execd_result res;
    sandbox_execd_result_init(&res, 4096);
    sandbox_execd_run_command(h, cmd, 60000, NULL, NULL, &res);
    sandbox_execd_result_free(&res);
}

tk_status snapshots_api_take(const char *user_id, const char *session_id, const char *trigger,
                             json_t **out, char *msg, size_t msglen)
{
    *out = NULL;
    tk_s3 *s3 = snapshots_store();
    if (!s3) {
        snprintf(msg, msglen, "snapshots are off: %s", snapshots_off_reason());
        return TK_EDENIED;
    }
    const snapshots_config *cfg = snapshots_cfg();
    sandbox_session ss = {.user_id = user_id, .session_id = session_id};
    sandbox_handle h;
    tk_status st = getExistingOpenSandbox(&ss, &h, msg, msglen);
    if (st != TK_OK) {
        if (st == TK_ENOENT || st == TK_EDENIED) {
            snprintf(msg, msglen, "nothing to snapshot: this chat has no workspace yet");
            return TK_ENOENT;
        }
        return TK_ERROR;
    }
    char last_digest[65], last_id[TK_UUID_LEN];
    PGconn *c = app_db_acquire();
    if (!c) {
        sandbox_handle_free(&h);
        snprintf(msg, msglen, "the database is unavailable");
        return TK_ERROR;
    }
    last_of(c, session_id, last_digest, last_id);
    app_db_release(c);

    char id[TK_UUID_LEN];
    tk_uuid7(id);
    char *cmd = tk_asprintf(script_fmt, id, last_digest);
    sandbox_execd_result res;
    sandbox_execd_result_init(&res, 64 * 1024);
    st = sandbox_execd_run_command(&h, cmd, SCRIPT_TIMEOUT, NULL, NULL, &res);
    free(cmd);
    const char *o = tk_buf_cstr(&res.output);
    const char *dl = strstr(o, "DIGEST ");
    char digest[65] = "";
    if (dl)
        snprintf(digest, sizeof digest, "%.64s", dl + 7);
    long long arch_size = -1, nfiles = 0;
    const char *rl = strstr(o, "READY ");
    if (rl && sscanf(rl + 6, "%lld %lld", &arch_size, &nfiles) != 2)
        arch_size = -1;
    if (st == TK_OK && strstr(o, "UNCHANGED") && last_id[0]) {
        sandbox_execd_result_free(&res);
        sandbox_handle_free(&h);
        *out = tk_json_obj("status", json_string("unchanged"), "id", json_string(last_id), "digest",
                           json_string(digest), NULL);
        return TK_OK;
    }
    char err[512] = "";
    if (st != TK_OK || res.exit_code != 0 || arch_size < 0 || strlen(digest) != 64)
        snprintf(err, sizeof err, "the archive was not made in the sandbox (exit %d): %.300s",
                 res.exit_code, res.error[0] ? res.error : o);
    sandbox_execd_result_free(&res);
    if (!err[0] && arch_size > cfg->max_mib << 20)
        snprintf(err, sizeof err, "the archive is %lld bytes, over SNAPSHOT_MAX_SIZE (%lld MiB)",
                 arch_size, (long long)cfg->max_mib);

    /* the key: <prefix>/<user>/<chat>/<UTC time>-<id>.tar.gz */
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    const char *pre = cfg->prefix ? cfg->prefix : "";
    char *key =
        tk_asprintf("%s%s%s/%s/%s-%s.tar.gz", pre, *pre ? "/" : "", user_id, session_id, stamp, id);
    char *mkey = tk_asprintf("%s%s%s/%s/%s-%s.manifest.json", pre, *pre ? "/" : "", user_id,
                             session_id, stamp, id);
    char sha[65] = "";
    int64_t bytes = 0;
    if (!err[0]) {
        /* the archive streams out of the sandbox into a spool file (never whole
         * in memory), hashed on the way; then up from the file */
        char tpl[] = "/tmp/tusko-snapshot-XXXXXX";
        int fd = mkstemp(tpl);
        if (fd < 0) {
            snprintf(err, sizeof err, "cannot make a spool file: %s", strerror(errno));
        } else {
            unlink(tpl);
            spool sp = {.fd = fd, .max = cfg->max_mib << 20, .sha = EVP_MD_CTX_new()};
            EVP_DigestInit_ex(sp.sha, EVP_sha256(), NULL);
            char path[128], derr[256];
            snprintf(path, sizeof path, SNAP_DIR "%s/a.tar.gz", id);
            tk_status ds = sandbox_execd_download(&h, path, SCRIPT_TIMEOUT, spool_data, &sp, derr,
                                                  sizeof derr);
            unsigned char dg[32];
            unsigned int dgl = 0;
            EVP_DigestFinal_ex(sp.sha, dg, &dgl);
            EVP_MD_CTX_free(sp.sha);
            for (int i = 0; i < 32; i++)
                snprintf(sha + 2 * i, 3, "%02x", dg[i]);
            bytes = sp.n;
            if (ds != TK_OK)
                snprintf(err, sizeof err, "the archive did not come out of the sandbox: %s",
                         sp.too_big ? "over SNAPSHOT_MAX_SIZE" : derr);
            else if (bytes != arch_size)
                snprintf(err, sizeof err, "the archive came out %lld bytes, not %lld",
                         (long long)bytes, arch_size);
            tk_buf man;
            tk_buf_init(&man, MANIFEST_MAX);
            if (!err[0]) {
                snprintf(path, sizeof path, SNAP_DIR "%s/manifest.json", id);
                if (sandbox_execd_download(&h, path, SCRIPT_TIMEOUT, buf_data, &man, derr,
                                           sizeof derr) != TK_OK)
                    snprintf(err, sizeof err, "the manifest did not come out: %s", derr);
            }
            tk_s3_result r;
            if (!err[0]) {
                char m1[100], m2[40], m3[60];
                snprintf(m1, sizeof m1, "sha256: %s", sha);
                snprintf(m2, sizeof m2, "files: %lld", nfiles);
                snprintf(m3, sizeof m3, "tusko-version: %s", TUSKO_VERSION);
                const char *meta[] = {m1, m2, m3, NULL};
                if (tk_s3_put_fd(s3, key, fd, bytes, sha, "application/gzip", meta, &r) != TK_OK)
                    snprintf(err, sizeof err, "%s: %s (HTTP %ld)", r.code, r.message, r.status);
            }
            if (!err[0]) {
                char m1[100];
                snprintf(m1, sizeof m1, "sha256: %s", sha);
                const char *meta[] = {m1, NULL};
                if (tk_s3_put(s3, mkey, man.data ? man.data : "", man.len, "application/json", meta,
                              &r) != TK_OK) {
                    snprintf(err, sizeof err, "%s: %s (HTTP %ld)", r.code, r.message, r.status);
                    tk_s3_result dr;
                    tk_s3_delete(s3, key, &dr); /* no archive without its manifest */
                }
            }
            tk_buf_free(&man);
            close(fd);
        }
    }
    cleanup_sandbox(&h, id);
    sandbox_handle_free(&h);
    if (err[0])
        tk_warn("snapshots", "msg=\"snapshot failed\" session=%s detail=\"%s\"", session_id, err);
    else
        tk_info("snapshots", "msg=\"snapshot stored\" session=%s key=\"%s\" bytes=%lld", session_id,
                key, (long long)bytes);
    *out = insert_row(id, user_id, session_id, key, mkey, err[0] ? 0 : bytes, err[0] ? "" : sha,
                      err[0] ? 0 : nfiles, digest, err[0] ? "failed" : "ready", err[0] ? err : NULL,
                      trigger ? trigger : "api");
    free(key);
    free(mkey);
    if (!*out) {
        snprintf(msg, msglen, "the snapshot's row could not be stored");
        return TK_ERROR;
    }
    if (err[0]) {
        snprintf(msg, msglen, "%s", err);
        return TK_ERROR;
    }
    snapshots_api_retain(session_id);
    return TK_OK;
}

int snapshots_api_retain(const char *session_id)
{
    tk_s3 *s3 = snapshots_store();
    const snapshots_config *cfg = snapshots_cfg();
    PGconn *c = app_db_acquire();
    if (!c || !s3) {
        if (c)
            app_db_release(c);
        return 0;
    }
    char keep[24], age[32];
    snprintf(keep, sizeof keep, "%lld", (long long)cfg->keep_last);
    snprintf(age, sizeof age, "%lld milliseconds", (long long)cfg->max_age_ms);
    const char *p[] = {session_id, keep, age};
    /* the newest ready one is always kept; then the last N, none too old;
     * failed rows (no object) go by the same rules */
    PGresult *res = PQexecParams(
        c,
        "SELECT id, key, manifest_key, status FROM (SELECT id, key, manifest_key, status, "
        "created_at, row_number() OVER (ORDER BY created_at DESC) AS n, "
        "max(created_at) FILTER (WHERE status = 'ready') OVER () AS newest FROM snapshots "
        "WHERE session_id = $1) s WHERE created_at IS DISTINCT FROM newest AND (n > $2::int "
        "OR created_at < now() - $3::interval)",
        3, NULL, p, NULL, NULL, 0);
    int deleted = 0;
    if (PQresultStatus(res) == PGRES_TUPLES_OK) {
        for (int i = 0; i < PQntuples(res); i++) {
            tk_s3_result r, r2;
            int ok = 1;
            if (strcmp(PQgetvalue(res, i, 3), "ready") == 0)
                ok = tk_s3_delete(s3, PQgetvalue(res, i, 1), &r) == TK_OK &&
                     tk_s3_delete(s3, PQgetvalue(res, i, 2), &r2) == TK_OK;
            const char *q[] = {PQgetvalue(res, i, 0), ok ? NULL : r.code};
            PGresult *d = PQexecParams(c,
                                       ok ? "DELETE FROM snapshots WHERE id = $1"
                                          : "UPDATE snapshots SET delete_error = $2 WHERE id = $1",
                                       ok ? 1 : 2, NULL, q, NULL, NULL, 0);
            PQclear(d);
            deleted += ok;
            if (!ok)
                tk_warn("snapshots",
                        "msg=\"snapshot object not deleted; retried next pass\" "
                        "code=%s",
                        r.code);
        }
    }
    PQclear(res);
    app_db_release(c);
    return deleted;
}

/* ---------------------------------------------------------------- routes */

static int off(tk_req *r)
{
    if (snapshots_enabled())
        return 0;
    tk_respond_error(r, 503, "SNAPSHOTS_OFF", "workspace snapshots are off on this server: %s",
                     snapshots_off_reason());
    return 1;
}

static const char *session_of(tk_req *r)
{
    PGconn *c = app_db_acquire();
    if (!c) {
        app_respond_db_unavailable(r);
        return NULL;
    }
    const char *sid = app_req_session(r, c);
    app_db_release(c);
    return sid;
}

static void h_take(tk_req *r, void *ud)
{
    if (off(r))
        return;
    const char *sid = session_of(r);
    if (!sid)
        return;
    json_t *out = NULL;
    char msg[512];
    tk_status st = snapshots_api_take(app_req_user(r)->id, sid, "api", &out, msg, sizeof msg);
    if (st == TK_OK && strcmp(tk_json_str_or(out, "status", ""), "unchanged") == 0)
        tk_respond_json(r, 200, out);
    else if (st == TK_OK)
        tk_respond_json(r, 201, out);
    else if (out) /* a failed snapshot, recorded */
        tk_respond_json(r, 502, out);
    else if (st == TK_ENOENT)
        tk_respond_error(r, 409, "NOTHING_TO_SNAPSHOT", "%s", msg);
    else if (st == TK_EDENIED)
        tk_respond_error(r, 503, "SNAPSHOTS_OFF", "%s", msg);
    else
        tk_respond_error(r, 502, "SNAPSHOT_FAILED", "%s", msg);
}

static void h_list(tk_req *r, void *ud)
{
    if (off(r))
        return;
    const char *sid = session_of(r);
    if (!sid)
        return;
    PGconn *c = app_db_acquire();
    if (!c) {
        app_respond_db_unavailable(r);
        return;
    }
    const char *p[] = {sid, app_req_user(r)->id};
    PGresult *res = PQexecParams(c,
                                 "SELECT " ROW_COLS " FROM snapshots WHERE session_id = $1 AND "
                                 "user_id = $2 ORDER BY created_at DESC, id DESC",
                                 2, NULL, p, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        app_respond_db_unavailable(r);
    } else {
        json_t *a = json_array();
        for (int i = 0; i < PQntuples(res); i++)
            json_array_append_new(a, row_json(res, i));
        tk_respond_json(r, 200, tk_json_obj("snapshots", a, NULL));
    }
    PQclear(res);
    app_db_release(c);
}

static void h_delete(tk_req *r, void *ud)
{
    if (off(r))
        return;
    const char *sid = session_of(r);
    if (!sid)
        return;
    const char *snap = tk_req_param(r, "sid");
    if (!tk_uuid_valid(snap)) {
        tk_respond_error(r, 404, "NOT_FOUND", "no such snapshot");
        return;
    }
    PGconn *c = app_db_acquire();
    if (!c) {
        app_respond_db_unavailable(r);
        return;
    }
    const char *p[] = {snap, sid, app_req_user(r)->id};
    PGresult *res = PQexecParams(c,
                                 "SELECT key, manifest_key, status FROM snapshots WHERE id = $1 "
                                 "AND session_id = $2 AND user_id = $3",
                                 3, NULL, p, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        app_respond_db_unavailable(r);
    } else if (PQntuples(res) != 1) {
        tk_respond_error(r, 404, "NOT_FOUND", "no such snapshot");
    } else {
        tk_s3_result s1, s2;
        int ok = 1;
        if (strcmp(PQgetvalue(res, 0, 2), "ready") == 0)
            ok = tk_s3_delete(snapshots_store(), PQgetvalue(res, 0, 0), &s1) == TK_OK &&
                 tk_s3_delete(snapshots_store(), PQgetvalue(res, 0, 1), &s2) == TK_OK;
        if (!ok) {
            tk_respond_error(r, 502, "STORE_ERROR", "the store did not delete the object: %s",
                             s1.code);
        } else {
            PGresult *d =
                PQexecParams(c, "DELETE FROM snapshots WHERE id = $1", 1, NULL, p, NULL, NULL, 0);
            PQclear(d);
            tk_respond(r, 204, NULL, NULL, 0);
        }
    }
    PQclear(res);
    app_db_release(c);
}

/* ---------------------------------------------------------------- restore */

#define RESTORE_FILE_MAX  TK_CAP_BATCH /* one file is written through execd whole */
#define RESTORE_FILES_MAX 100000

typedef struct {
    int fd;
    z_stream z;
    unsigned char in[1 << 16];
    int end, bad;
} gz_in;

static ssize_t gz_read(void *ud, void *buf, size_t n)
{
    gz_in *g = ud;
    if (g->end)
        return 0;
    g->z.next_out = buf;
    g->z.avail_out = (uInt)n;
    while (g->z.avail_out == n) {
        if (g->z.avail_in == 0) {
            ssize_t r = read(g->fd, g->in, sizeof g->in);
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0) {
                g->bad = 1;
                return -1;
            }
            if (r == 0) {
                g->bad = 1; /* cut short */
                return -1;
            }
            g->z.next_in = g->in;
            g->z.avail_in = (uInt)r;
        }
        int zr = inflate(&g->z, Z_NO_FLUSH);
        if (zr == Z_STREAM_END) {
            g->end = 1;
            break;
        }
        if (zr != Z_OK && zr != Z_BUF_ERROR) {
            g->bad = 1;
            return -1;
        }
    }
    return (ssize_t)(n - g->z.avail_out);
}

static int gz_open(gz_in *g, int fd)
{
    memset(g, 0, sizeof *g);
    g->fd = fd;
    if (lseek(fd, 0, SEEK_SET) != 0)
        return -1;
    return inflateInit2(&g->z, 16 + MAX_WBITS) == Z_OK ? 0 : -1;
}

/* An archive member's name as a workspace path, or a refusal: absolute, any
 * ".." or empty component, a NUL, or outside /workspace after normalising. */
static tk_status member_path(const char *name, char *out, size_t outlen, char *why, size_t wl)
{
    const char *n = name;
    while (n[0] == '.' && n[1] == '/')
        n += 2;
    if (name[0] == '/' || !*n) {
        snprintf(why, wl, "\"%.200s\": an absolute or empty path", name);
        return TK_EINVAL;
    }
    for (const char *p = n; *p;) {
        size_t l = strcspn(p, "/");
        if (l == 0 || (l == 2 && p[0] == '.' && p[1] == '.') || (l == 1 && p[0] == '.')) {
            snprintf(why, wl, "\"%.200s\": a \"..\", \".\" or empty component", name);
            return TK_EINVAL;
        }
        p += l;
        if (*p == '/')
            p++;
    }
    char err[256];
    if (agent_ws_path(n, strlen(n), out, outlen, err, sizeof err) != TK_OK) {
        snprintf(why, wl, "\"%.200s\": %s", name, err);
        return TK_EINVAL;
    }
    return TK_OK;
}

/* Checks the whole archive before anything is written: regular files only
 * (lib/tar refuses links, devices, directories), names confined, no more
 * than max bytes and RESTORE_FILES_MAX files in all. */
static tk_status check_archive(int fd, int64_t max, int64_t *files, int64_t *bytes, char *why,
                               size_t wl)
{
    gz_in g;
    if (gz_open(&g, fd) != 0) {
        snprintf(why, wl, "cannot read the archive");
        return TK_ERROR;
    }
    tk_tar_reader tr;
    tk_tar_reader_init(&tr, gz_read, &g);
    tk_tar_entry e;
    tk_status st;
    *files = *bytes = 0;
    char path[AGENT_WS_PATH_MAX + 32];
    while ((st = tk_tar_next(&tr, &e)) == TK_OK) {
        if (member_path(e.name, path, sizeof path, why, wl) != TK_OK) {
            st = TK_EINVAL;
            break;
        }
        if ((int64_t)e.size > RESTORE_FILE_MAX || *bytes + (int64_t)e.size > max ||
            ++*files > RESTORE_FILES_MAX) {
            snprintf(why, wl, "the archive holds more than a restore may write (%s)",
                     (int64_t)e.size > RESTORE_FILE_MAX ? "a file over 64 MiB"
                     : *files > RESTORE_FILES_MAX       ? "over 100,000 files"
                                                        : "over SNAPSHOT_MAX_SIZE");
            st = TK_ETOOBIG;
            break;
        }
        *bytes += (int64_t)e.size;
    }
    if (st == TK_ENOENT)
        st = g.bad ? TK_EINVAL : TK_OK;
    else if (st == TK_EINVAL && !why[0])
        snprintf(why, wl, "%s", g.bad ? "the gzip stream is damaged or cut short" : tr.err);
    inflateEnd(&g.z);
    return st;
}

static void h_restore(tk_req *r, void *ud)
{
    if (off(r))
        return;
    json_t *body = tk_req_json(r, 0);
    if (!body)
        return;
    if (!json_is_true(json_object_get(body, "confirm"))) {
        tk_respond_error(r, 400, "CONFIRM_REQUIRED",
                         "a restore overwrites files of the workspace: send {\"confirm\": true}");
        return;
    }
    const char *sid = session_of(r);
    if (!sid)
        return;
    const char *snap = tk_req_param(r, "sid");
    const app_user *u = app_req_user(r);
    if (!tk_uuid_valid(snap)) {
        tk_respond_error(r, 404, "NOT_FOUND", "no such snapshot");
        return;
    }
    PGconn *c = app_db_acquire();
    if (!c) {
        app_respond_db_unavailable(r);
        return;
    }
    /* a snapshot of any of the user's chats restores into this one */
    const char *p[] = {snap, u->id};
    PGresult *res = PQexecParams(c,
                                 "SELECT key, manifest_key, sha256, bytes FROM snapshots WHERE "
                                 "id = $1 AND user_id = $2 AND status = 'ready'",
                                 2, NULL, p, NULL, NULL, 0);
    app_db_release(c);
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
        PQclear(res);
        tk_respond_error(r, 404, "NOT_FOUND", "no such snapshot");
        return;
    }
    char *key = tk_strdup(PQgetvalue(res, 0, 0));
    char *mkey = tk_strdup(PQgetvalue(res, 0, 1));
    char want[65];
    snprintf(want, sizeof want, "%s", PQgetvalue(res, 0, 2));
    PQclear(res);
    const snapshots_config *cfg = snapshots_cfg();
    int64_t max = cfg->max_mib << 20;
    char tpl[] = "/tmp/tusko-restore-XXXXXX";
    int fd = mkstemp(tpl);
    if (fd < 0) {
        tk_respond_error(r, 500, "INTERNAL", "cannot make a spool file");
        free(key);
        free(mkey);
        return;
    }
    unlink(tpl);
    spool sp = {.fd = fd, .max = max, .sha = EVP_MD_CTX_new()};
    EVP_DigestInit_ex(sp.sha, EVP_sha256(), NULL);
    tk_s3_result sr;
    tk_status st = tk_s3_get(snapshots_store(), key, max, spool_data, &sp, NULL, &sr);
    unsigned char dg[32];
    unsigned int dgl = 0;
    EVP_DigestFinal_ex(sp.sha, dg, &dgl);
    EVP_MD_CTX_free(sp.sha);
    char got[65];
    for (int i = 0; i < 32; i++)
        snprintf(got + 2 * i, 3, "%02x", dg[i]);
    tk_buf man;
    tk_buf_init(&man, MANIFEST_MAX);
    char why[512] = "";
    int64_t files = 0, bytes = 0;
    if (st != TK_OK) {
        tk_respond_error(r, 502, "STORE_ERROR", "the store did not give the archive: %s (HTTP %ld)",
                         sr.code, sr.status);
    } else if (strcmp(got, want) != 0) {
        tk_respond_error(r, 422, "VERIFY_FAILED",
                         "the archive's SHA-256 is %s, the snapshot's %s: nothing was restored",
                         got, want);
    } else if ((st = check_archive(fd, max, &files, &bytes, why, sizeof why)) != TK_OK) {
        tk_respond_error(r, 422, "UNSAFE_ARCHIVE",
                         "the archive is refused, nothing was restored: %s", why);
    } else if (tk_s3_get(snapshots_store(), mkey, MANIFEST_MAX, buf_data, &man, NULL, &sr) !=
               TK_OK) {
        tk_respond_error(r, 502, "STORE_ERROR", "the store did not give the manifest: %s", sr.code);
    } else {
        char jerr[128];
        json_t *mj =
            tk_json_parse(man.data ? man.data : "", man.len, MANIFEST_MAX, jerr, sizeof jerr);
        json_t *mf = json_object_get(mj, "files");
        sandbox_session ss = {
            .user_id = u->id, .session_id = sid, .trigger = "restoring a workspace snapshot"};
        sandbox_handle h;
        sandbox_quota q;
        char msg[512];
        if (getOrCreateOpenSandbox(&ss, &h, &q, msg, sizeof msg) != TK_OK) {
            tk_respond_error(r, 502, "SANDBOX_UNAVAILABLE", "%s", msg);
        } else {
            gz_in g;
            gz_open(&g, fd);
            tk_tar_reader tr;
            tk_tar_reader_init(&tr, gz_read, &g);
            tk_tar_entry e;
            json_t *differs = json_array();
            int64_t written = 0;
            tk_buf data;
            tk_buf_init(&data, RESTORE_FILE_MAX);
            char path[AGENT_WS_PATH_MAX + 32], err[512] = "";
            json_t *seen = json_object();
            while (!err[0] && tk_tar_next(&tr, &e) == TK_OK) {
                if (member_path(e.name, path, sizeof path, why, sizeof why) != TK_OK)
                    break;
                tk_buf_reset(&data);
                tk_buf_reserve(&data, (size_t)e.size);
                char chunk[1 << 16];
                ssize_t n;
                while ((n = tk_tar_read(&tr, chunk, sizeof chunk)) > 0)
                    tk_buf_append(&data, chunk, (size_t)n);
                if (sandbox_execd_write_file(&h, path, data.data ? data.data : "", data.len, err,
                                             sizeof err) != TK_OK)
                    break;
                written++;
                char fsha[65];
                tk_s3_sha256_hex(data.data ? data.data : "", data.len, fsha);
                const char *rel = path + strlen(AGENT_WS_ROOT "/");
                json_object_set_new(seen, rel, json_string(fsha));
            }
            tk_buf_free(&data);
            inflateEnd(&g.z);
            /* what differs from the manifest: missing, or another hash */
            size_t i;
            json_t *f;
            json_array_foreach(mf, i, f)
            {
                const char *mp = tk_json_str(f, "path");
                const char *ms = tk_json_str(f, "sha256");
                if (!mp)
                    continue;
                const char *gs = json_string_value(json_object_get(seen, mp));
                if (!gs || !ms || strcmp(gs, ms) != 0)
                    json_array_append_new(
                        differs,
                        tk_json_obj("path", json_string(mp), "why",
                                    json_string(gs ? "another SHA-256" : "missing"), NULL));
            }
            json_decref(seen);
            sandbox_handle_free(&h);
            if (err[0])
                tk_respond_error(r, 502, "RESTORE_FAILED", "after %lld files: %s",
                                 (long long)written, err);
            else
                tk_respond_json(r, 200,
                                tk_json_obj("restored", json_integer(written), "bytes",
                                            json_integer(bytes), "sha256", json_string(got),
                                            "manifest_files",
                                            json_integer((json_int_t)json_array_size(mf)),
                                            "differs", differs, NULL));
            if (err[0])
                json_decref(differs);
        }
        json_decref(mj);
    }
    tk_buf_free(&man);
    close(fd);
    free(key);
    free(mkey);
}

const tk_route snapshots_api_routes[] = {
    {"POST", "/api/sessions/{id}/snapshots/{sid}/restore", h_restore, NULL, TK_ROUTE_BLOCKING},
    {"POST", "/api/sessions/{id}/snapshots", h_take, NULL, TK_ROUTE_BLOCKING},
    {"GET", "/api/sessions/{id}/snapshots", h_list, NULL, TK_ROUTE_BLOCKING},
    {"DELETE", "/api/sessions/{id}/snapshots/{sid}", h_delete, NULL, TK_ROUTE_BLOCKING},
};
const size_t snapshots_api_nroutes = TK_ARRAY_LEN(snapshots_api_routes);
