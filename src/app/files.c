#include "app/files.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "app/workspace.h"
#include "app/app.h"
#include "app/auth/auth.h"
#include "app/sandbox/execd.h"
#include "app/sandbox/sandbox.h"
#include "app/sessions.h"
#include "app/settings.h"
#include "app/tools/office.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/utf8.h"

static const struct {
    const char *ext, *mime;
} mimes[] = {
    {".txt", "text/plain"},
    {".md", "text/markdown"},
    {".csv", "text/csv"},
    {".tsv", "text/tab-separated-values"},
    {".json", "application/json"},
    {".py", "text/x-python"},
    {".js", "text/javascript"},
    {".ts", "text/plain"},
    {".sh", "text/x-shellscript"},
    {".c", "text/x-c"},
    {".h", "text/x-c"},
    {".html", "text/html"},
    {".css", "text/css"},
    {".xml", "application/xml"},
    {".yaml", "application/yaml"},
    {".yml", "application/yaml"},
    {".log", "text/plain"},
    {".png", "image/png"},
    {".jpg", "image/jpeg"},
    {".jpeg", "image/jpeg"},
    {".gif", "image/gif"},
    {".webp", "image/webp"},
    {".svg", "image/svg+xml"},
    {".pdf", "application/pdf"},
    {".zip", "application/zip"},
    {".docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"},
    {".xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"},
    {".pptx", "application/vnd.openxmlformats-officedocument.presentationml.presentation"},
};

const char *agent_mime_of(const char *path)
{
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    if (dot && (!slash || dot > slash))
        for (size_t i = 0; i < TK_ARRAY_LEN(mimes); i++)
            if (strcasecmp(dot, mimes[i].ext) == 0)
                return mimes[i].mime;
    return "application/octet-stream";
}

static int is_raster_image(const char *mime)
{
    return strcmp(mime, "image/png") == 0 || strcmp(mime, "image/jpeg") == 0 ||
           strcmp(mime, "image/gif") == 0 || strcmp(mime, "image/webp") == 0;
}

/* Valid UTF-8 without NUL bytes: shown as text. */
static int looks_text(const char *s, size_t n)
{
    if (memchr(s, 0, n))
        return 0;
    /* a cut at the end may split a character: the sequence it cut short is not judged */
    return tk_utf8_valid(s, tk_utf8_whole(s, n));
}

static tk_status existing(const char *user_id, const char *session_id, const volatile int *cancel,
                          sandbox_handle *h, char *msg, size_t msglen)
{
    sandbox_session s = {.user_id = user_id, .session_id = session_id, .cancel = cancel};
    return getExistingOpenSandbox(&s, h, msg, msglen);
}

tk_status agent_files_list(const char *user_id, const char *session_id, const char *path,
                           size_t path_len, int depth, const volatile int *cancel, json_t **out,
                           char *msg, size_t msglen)
{
    *out = NULL;
    char p[AGENT_WS_PATH_MAX + 32];
    if (!path || path_len == 0) {
        path = AGENT_WS_ROOT;
        path_len = strlen(path);
    }
    if (agent_ws_path(path, path_len, p, sizeof p, msg, msglen) != TK_OK)
        return TK_EINVAL;
    sandbox_handle h;
    tk_status st = existing(user_id, session_id, cancel, &h, msg, msglen);
    if (st != TK_OK)
        return st == TK_EDENIED ? TK_ENOENT : st;
    json_t *list = NULL;
    st = sandbox_execd_list_dir(&h, p, depth < 1 ? 1 : depth > 5 ? 5 : depth, &list, msg, msglen);
    if (st == TK_OK) {
        json_t *entries = json_array();
        size_t i;
        json_t *e;
        json_array_foreach(list, i, e)
        {
            const char *ep = tk_json_str_or(e, "path", "");
            const char *name = strrchr(ep, '/');
            json_array_append_new(
                entries,
                tk_json_obj("path", json_string(ep), "name", json_string(name ? name + 1 : ep),
                            "type", json_string(tk_json_str_or(e, "type", "file")), "size",
                            json_integer(tk_json_int_or(e, "size", 0)), "modified_at",
                            json_string(tk_json_str_or(e, "modified_at", "")), NULL));
        }
        *out = tk_json_obj("path", json_string(p), "entries", entries, NULL);
    } else if (h.gone) {
        snprintf(msg, msglen,
                 "nothing here yet: this chat's workspace is gone (the sandbox was "
                 "reaped); the next write or command starts a fresh one");
        st = TK_ENOENT;
    }
    json_decref(list);
    sandbox_handle_free(&h);
    return st;
}

/* Pictures and text of an office file or PDF, or its sheets as tables: the
 * office helper (tools/office.h). A file the helper refuses (corrupt, not what
 * its extension says, too large) is answered as {"kind": "error", "error"}. */
static tk_status office_preview(sandbox_handle *h, const char *p, const char *pages, json_t **out,
                                char *msg, size_t msglen)
{
    json_t *req = tk_json_obj("op", json_string("preview"), "path", json_string(p), NULL);
    if (pages && *pages)
        json_object_set_new(req, "pages", json_string(pages));
    json_t *res = NULL;
    tk_status st = tools_office_run(h, req, &res, msg, msglen);
    json_decref(req);
    if (st == TK_EINVAL) {
        res = tk_json_obj("path", json_string(p), "kind", json_string("error"), "error",
                          json_string(msg), NULL);
        st = TK_OK;
    } else if (st != TK_OK && h->gone) {
        snprintf(msg, msglen,
                 "nothing here yet: this chat's workspace is gone (the sandbox was "
                 "reaped); the next write or command starts a fresh one");
        st = TK_ENOENT;
    }
    if (res)
        json_object_set_new(res, "mime", json_string(agent_mime_of(p)));
    *out = res;
    sandbox_handle_free(h);
    return st;
}

tk_status agent_files_preview(const char *user_id, const char *session_id, const char *path,
                              size_t path_len, long max_chars, const char *pages,
                              const volatile int *cancel, json_t **out, char *msg, size_t msglen)
{
    *out = NULL;
    char p[AGENT_WS_PATH_MAX + 32];
    if (agent_ws_path(path, path_len, p, sizeof p, msg, msglen) != TK_OK)
        return TK_EINVAL;
    sandbox_handle h;
    tk_status st = existing(user_id, session_id, cancel, &h, msg, msglen);
    if (st != TK_OK)
        return st == TK_EDENIED ? TK_ENOENT : st;
    if (tools_office_previewable(p))
        return office_preview(&h, p, pages, out, msg, msglen);
    const char *mime = agent_mime_of(p);
    size_t cap = is_raster_image(mime) ? 4u << 20 : AGENT_PREVIEW_MAX_BYTES;
    tk_buf data;
    tk_buf_init(&data, cap);
    int truncated = 0;
    json_t *info = NULL;
    st = sandbox_execd_read_head(&h, p, cap, &data, &truncated, msg, msglen);
    if (st == TK_OK && truncated) {
        char e2[128];
        sandbox_execd_stat(&h, p, &info, e2, sizeof e2); /* the real size */
    }
    if (st == TK_OK) {
        json_t *o = tk_json_obj("path", json_string(p), "mime", json_string(mime), NULL);
        int64_t size = info ? tk_json_int_or(info, "size", (int64_t)data.len) : (int64_t)data.len;
        json_object_set_new(o, "size", json_integer(size));
        if (is_raster_image(mime) && !truncated) {
            size_t b64len = sodium_base64_ENCODED_LEN(data.len, sodium_base64_VARIANT_ORIGINAL);
            char *b64 = tk_malloc(b64len);
            sodium_bin2base64(b64, b64len, (const unsigned char *)(data.data ? data.data : ""),
                              data.len, sodium_base64_VARIANT_ORIGINAL);
            json_object_set_new(o, "kind", json_string("image"));
            json_object_set_new(o, "base64", json_string(b64));
            free(b64);
        } else if (data.len > 0 && looks_text(data.data, data.len)) {
            /* at most max_chars characters */
            size_t cut = tk_utf8_cut_chars(data.data, data.len, (size_t)max_chars, NULL);
            if (cut < data.len)
                truncated = 1;
            json_object_set_new(o, "kind", json_string("text"));
            json_object_set_new(o, "text", json_stringn(data.data, cut));
        } else if (data.len == 0 && !truncated) {
            json_object_set_new(o, "kind", json_string("text"));
            json_object_set_new(o, "text", json_string(""));
        } else {
            json_object_set_new(o, "kind", json_string("binary"));
        }
        json_object_set_new(o, "truncated", json_boolean(truncated));
        *out = o;
    } else if (h.gone) {
        snprintf(msg, msglen,
                 "nothing here yet: this chat's workspace is gone (the sandbox was "
                 "reaped); the next write or command starts a fresh one");
        st = TK_ENOENT;
    }
    json_decref(info);
    tk_buf_free(&data);
    sandbox_handle_free(&h);
    return st;
}

/* ---------------------------------------------------------------- routes */

static void respond_files_error(tk_req *r, tk_status st, const char *msg)
{
    if (st == TK_EINVAL)
        tk_respond_error(r, 400, "INVALID_PATH", "%s", msg);
    else if (st == TK_ENOENT)
        tk_respond_error(r, 404, "NOTHING_HERE_YET", "%s", msg);
    else
        tk_respond_error(r, 502, "SANDBOX_UNAVAILABLE", "%s", msg);
}

static const char *with_session(tk_req *r, PGconn **cp)
{
    PGconn *c = app_db_acquire();
    if (!c) {
        app_respond_db_unavailable(r);
        return NULL;
    }
    const char *sid = app_req_session(r, c);
    app_db_release(c);
    *cp = NULL;
    return sid;
}

static void h_list(tk_req *r, void *ud)
{
    PGconn *c;
    const char *sid = with_session(r, &c);
    if (!sid)
        return;
    const char *path = tk_req_query(r, "path");
    const char *d = tk_req_query(r, "depth");
    int64_t depth = 1;
    if (d && tk_parse_i64(d, 1, 5, &depth) != TK_OK) {
        tk_respond_error(r, 400, "INVALID_REQUEST", "\"depth\" must be 1 to 5");
        return;
    }
    json_t *out = NULL;
    char msg[512];
    tk_status st = agent_files_list(app_req_user(r)->id, sid, path, path ? strlen(path) : 0,
                                    (int)depth, NULL, &out, msg, sizeof msg);
    if (st == TK_OK)
        tk_respond_json(r, 200, out);
    else if (st == TK_ENOENT)
        tk_respond_json(r, 200,
                        tk_json_obj("path", json_string(AGENT_WS_ROOT), "entries", json_array(),
                                    "sandbox", json_false(), "message", json_string(msg), NULL));
    else
        respond_files_error(r, st, msg);
}

static void h_preview(tk_req *r, void *ud)
{
    PGconn *c;
    const char *sid = with_session(r, &c);
    if (!sid)
        return;
    const char *path = tk_req_query(r, "path");
    if (!path) {
        tk_respond_error(r, 400, "INVALID_REQUEST", "\"path\" is required");
        return;
    }
    json_t *out = NULL;
    char msg[512];
    tk_status st = agent_files_preview(app_req_user(r)->id, sid, path, strlen(path), 20000,
                                       tk_req_query(r, "pages"), NULL, &out, msg, sizeof msg);
    if (st == TK_OK && strcmp(tk_json_str_or(out, "kind", ""), "error") == 0) {
        tk_respond_error(r, 422, "UNREADABLE_FILE", "%s", tk_json_str_or(out, "error", ""));
        json_decref(out);
    } else if (st == TK_OK)
        tk_respond_json(r, 200, out);
    else
        respond_files_error(r, st, msg);
}

static void h_download(tk_req *r, void *ud)
{
    json_t *body = tk_req_json(r, 0);
    if (!body)
        return;
    json_t *jp = json_object_get(body, "path");
    if (!json_is_string(jp)) {
        tk_respond_error(r, 400, "INVALID_REQUEST", "\"path\" (a string) is required");
        return;
    }
    PGconn *c;
    const char *sid = with_session(r, &c);
    if (!sid)
        return;
    char p[AGENT_WS_PATH_MAX + 32], msg[512];
    if (agent_ws_path(json_string_value(jp), json_string_length(jp), p, sizeof p, msg,
                      sizeof msg) != TK_OK) {
        tk_respond_error(r, 400, "INVALID_PATH", "%s", msg);
        return;
    }
    const app_user *u = app_req_user(r);
    sandbox_session s = {.user_id = u->id, .session_id = sid};
    sandbox_handle h;
    tk_status st = getExistingOpenSandbox(&s, &h, msg, sizeof msg);
    if (st != TK_OK) {
        respond_files_error(r, st == TK_EDENIED ? TK_ENOENT : st, msg);
        return;
    }
    size_t max = (size_t)app_get()->cfg->download_max;
    tk_buf data;
    tk_buf_init(&data, max);
    st = sandbox_execd_read_file(&h, p, max, &data, msg, sizeof msg);
    sandbox_handle_free(&h);
    if (st == TK_ETOOBIG) {
        tk_buf_free(&data);
        tk_respond_error(r, 413, "TOO_LARGE",
                         "the file is larger than %zu bytes (TUSKO_DOWNLOAD_MAX)", max);
        return;
    }
    if (st != TK_OK) {
        tk_buf_free(&data);
        respond_files_error(r, st, msg);
        return;
    }
    unsigned char hash[32];
    crypto_hash_sha256(hash, (const unsigned char *)(data.data ? data.data : ""), data.len);
    char hex[65];
    sodium_bin2hex(hex, sizeof hex, hash, sizeof hash);
    char id[TK_UUID_LEN], size[24];
    tk_uuid7(id);
    snprintf(size, sizeof size, "%zu", data.len);
    const char *name = strrchr(p, '/');
    name = name ? name + 1 : p;
    const char *mime = agent_mime_of(p);
    const char *vals[] = {id, u->id, sid, p, name, mime, size, hex, data.data ? data.data : ""};
    int lens[9] = {0};
    int fmts[9] = {0};
    lens[8] = (int)data.len;
    fmts[8] = 1; /* binary bytea */
    c = app_db_acquire();
    if (!c) {
        tk_buf_free(&data);
        app_respond_db_unavailable(r);
        return;
    }
    PGresult *res = PQexecParams(c,
                                 "INSERT INTO downloads (id, user_id, session_id, path, name, "
                                 "content_type, size, sha256, data) VALUES ($1, $2, $3, $4, $5, "
                                 "$6, $7, $8, $9)",
                                 9, NULL, vals, lens, fmts, 0);
    int ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    if (!ok)
        tk_warn("files", "msg=\"download not stored\" error=\"%s\"", PQerrorMessage(c));
    PQclear(res);
    app_db_release(c);
    size_t stored = data.len;
    tk_buf_free(&data);
    if (!ok) {
        app_respond_db_unavailable(r);
        return;
    }
    char url[96];
    snprintf(url, sizeof url, "/api/downloads/%s", id);
    tk_respond_header(r, "Location", url);
    tk_respond_json(r, 201,
                    tk_json_obj("id", json_string(id), "name", json_string(name), "path",
                                json_string(p), "size", json_integer((json_int_t)stored),
                                "content_type", json_string(mime), "sha256", json_string(hex),
                                "url", json_string(url), NULL));
}

/* Types served as themselves; anything else (HTML, SVG, scripts) as bytes. */
static const char *safe_type(const char *t)
{
    static const char *ok[] = {
        "text/plain", "text/csv",  "text/markdown", "application/json", "image/png",
        "image/jpeg", "image/gif", "image/webp",    "application/pdf",  "application/zip"};
    for (size_t i = 0; i < TK_ARRAY_LEN(ok); i++)
        if (strcmp(t, ok[i]) == 0)
            return t;
    if (strncmp(t, "application/vnd.openxmlformats-officedocument.", 46) == 0)
        return t;
    return "application/octet-stream";
}

static void h_get_download(tk_req *r, void *ud)
{
    const char *id = tk_req_param(r, "id");
    if (!tk_uuid_valid(id)) {
        tk_respond_error(r, 404, "NOT_FOUND", "no such download");
        return;
    }
    PGconn *c = app_db_acquire();
    if (!c) {
        app_respond_db_unavailable(r);
        return;
    }
    const char *p[] = {id, app_req_user(r)->id};
    PGresult *res = PQexecParams(c,
                                 "SELECT name, content_type, data FROM downloads WHERE id = $1 "
                                 "AND user_id = $2",
                                 2, NULL, p, NULL, NULL, 1 /* binary results */);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        app_respond_db_unavailable(r);
    } else if (PQntuples(res) != 1) {
        tk_respond_error(r, 404, "NOT_FOUND", "no such download");
    } else {
        char name[300];
        snprintf(name, sizeof name, "%.*s", PQgetlength(res, 0, 0), PQgetvalue(res, 0, 0));
        for (char *q = name; *q; q++)
            if (*q == '"' || *q == '\\' || (unsigned char)*q < 0x20)
                *q = '_';
        char type[200];
        snprintf(type, sizeof type, "%.*s", PQgetlength(res, 0, 1), PQgetvalue(res, 0, 1));
        char cd[400];
        snprintf(cd, sizeof cd, "attachment; filename=\"%s\"", name);
        tk_respond_header(r, "Content-Disposition", cd);
        tk_respond(r, 200, safe_type(type), PQgetvalue(res, 0, 2), (size_t)PQgetlength(res, 0, 2));
    }
    PQclear(res);
    app_db_release(c);
}

const tk_route agent_files_routes[] = {
    {"GET", "/api/sessions/{id}/files/preview", h_preview, NULL, TK_ROUTE_BLOCKING},
    {"POST", "/api/sessions/{id}/files/download", h_download, NULL, TK_ROUTE_BLOCKING},
    {"GET", "/api/sessions/{id}/files", h_list, NULL, TK_ROUTE_BLOCKING},
    {"GET", "/api/downloads/{id}", h_get_download, NULL, TK_ROUTE_BLOCKING},
};
const size_t agent_files_nroutes = TK_ARRAY_LEN(agent_files_routes);
