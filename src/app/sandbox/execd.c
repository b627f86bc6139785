/*
 * The execd API (specs/opensandbox/execd-api.yaml) of a chat's sandbox, reached
 * through the lifecycle server's proxy: the bash session, the Python context,
 * files and directories.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/app.h"
#include "app/sandbox/execd.h"
#include "lib/httpc.h"
#include "lib/id.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/query.h"
#include "lib/tktime.h"

void sandbox_execd_result_init(sandbox_execd_result *r, size_t cap)
{
    memset(r, 0, sizeof *r);
    r->exit_code = -1;
    tk_buf_init(&r->output, cap ? cap : 1u << 20);
}

void sandbox_execd_result_free(sandbox_execd_result *r)
{
    tk_buf_free(&r->output);
    json_decref(r->results);
    r->results = NULL;
}

/* A query's path part: prefix, then s percent-encoded (slashes kept) into a
 * new buffer; NULL when it does not fit (a path of execd's longest, 4,096
 * bytes, encodes to at most 12,288, which does), with err saying so. Never
 * cut short: a cut would name another file. */
#define QUERY_MAX (16u << 10)
static char *query_path(const char *prefix, const char *s, char *err, size_t errlen)
{
    tk_buf b;
    tk_buf_init(&b, QUERY_MAX);
    if (tk_buf_append_str(&b, prefix) != TK_OK || tk_percent_append(&b, s, "/") != TK_OK) {
        tk_buf_free(&b);
        snprintf(err, errlen, "the path is too long (%zu bytes)", strlen(s));
        return NULL;
    }
    return tk_buf_steal(&b, NULL);
}

static char *url_of(const sandbox_handle *h, const char *path)
{
    return tk_asprintf("%s%s", h->execd_url ? h->execd_url : "", path);
}

/* After a failed call: 0/502/503/504/410, or a 404 (the proxy's "no such
 * sandbox" and execd's "no such file" look alike), may mean the sandbox is
 * gone: the lifecycle API decides. */
static void maybe_gone(sandbox_handle *h, long status, const json_t *body)
{
    (void)body;
    if (status == 0 || status == 502 || status == 503 || status == 504 || status == 404 ||
        status == 410) {
        if (sandbox_check_gone(h))
            h->gone = 1;
    }
}

static tk_status execd_json(sandbox_handle *h, const char *method, const char *path, json_t *body,
                            long timeout_ms, long *status, json_t **out, char *err, size_t errlen)
{
    char *url = url_of(h, path);
    tk_status st = tk_httpc_json(method, url, NULL, (const char *const *)h->headers, body,
                                 timeout_ms, status, out, err, errlen);
    free(url);
    return st;
}

static void persist_ids(sandbox_handle *h)
{
    PGconn *c = app_db_acquire();
    if (!c)
        return;
    const char *p[] = {h->id, h->bash_session[0] ? h->bash_session : NULL,
                       h->code_context[0] ? h->code_context : NULL};
    tk_pg_exec(c, "UPDATE sandboxes SET bash_session = $2, code_context = $3 WHERE id = $1", 3, p);
    app_db_release(c);
}

/* What a chat keeps in its sandbox across calls, made on first use: the bash
 * session and the Python context. */
typedef struct {
    const char *path;      /* POST here ... */
    const char *arg, *val; /* ... with the body {arg: val} */
    long timeout_ms;
    const char *id_key; /* the answer's member with the new id */
    const char *what;   /* for the error: "execd refused to start <what>" */
} execd_keep;

static const execd_keep SHELL = {
    .path = "/session",
    .arg = "cwd",
    .val = "/workspace",
    .timeout_ms = 30000,
    .id_key = "session_id",
    .what = "a shell",
};
static const execd_keep KERNEL = {
    .path = "/code/context",
    .arg = "language",
    .val = "python",
    .timeout_ms = 60000,
    .id_key = "id",
    .what = "a Python kernel",
};

/* Makes k unless slot (the handle's bash_session or code_context) has its id
 * already; the new id goes into slot and the sandbox's row. */
static tk_status ensure(sandbox_handle *h, const execd_keep *k, char *slot, size_t slotlen,
                        char *err, size_t errlen)
{
    if (slot[0])
        return TK_OK;
    long status = 0;
    json_t *out = NULL;
    tk_status st = execd_json(h, "POST", k->path, tk_json_obj(k->arg, json_string(k->val), NULL),
                              k->timeout_ms, &status, &out, err, errlen);
    const char *id = tk_json_str(out, k->id_key);
    if (st != TK_OK || status != 200 || !id || !*id || strlen(id) >= slotlen) {
        if (st == TK_OK)
            snprintf(err, errlen, "execd refused to start %s (HTTP %ld%s%s)", k->what, status,
                     tk_json_str(out, "message") ? ": " : "", tk_json_str_or(out, "message", ""));
        maybe_gone(h, status, out);
        json_decref(out);
        return TK_ERROR;
    }
    snprintf(slot, slotlen, "%s", id);
    json_decref(out);
    persist_ids(h);
    return TK_OK;
}

/* ---------- streamed runs ---------- */

struct run_ctx {
    sandbox_execd_result *res;
    sandbox_execd_output_fn on_out;
    void *ud;
    char cmd_id[128];
    int lines; /* a command's output: one event per line, without its newline */
    int complete;
    tk_buf errbody;
};

static void out_append(struct run_ctx *x, const char *stream, const char *text)
{
    size_t n = strlen(text);
    if (n == 0)
        return;
    if (tk_buf_append(&x->res->output, text, n) != TK_OK) {
        size_t room = x->res->output.max - x->res->output.len;
        tk_buf_append(&x->res->output, text, room);
        x->res->truncated = 1;
    }
    if (x->on_out)
        x->on_out(x->ud, stream, text, n);
}

static int on_event(const tk_sse_event *ev, void *ud)
{
    struct run_ctx *x = ud;
    char jerr[64];
    json_t *j = tk_json_parse(ev->data, ev->data_len, 8u << 20, jerr, sizeof jerr);
    if (!json_is_object(j)) {
        json_decref(j);
        return 0; /* not an event of ours: skip */
    }
    const char *type = tk_json_str_or(j, "type", ev->event);
    const char *text = tk_json_str(j, "text");
    if (strcmp(type, "init") == 0) {
        if (text)
            snprintf(x->cmd_id, sizeof x->cmd_id, "%s", text);
    } else if (strcmp(type, "stdout") == 0 || strcmp(type, "stderr") == 0) {
        /* a command's line comes without its newline (an empty line is "\n"):
         * put it back, so the model and the user see the lines apart */
        if (text && x->lines && strcmp(text, "\n") != 0) {
            char *line = tk_asprintf("%s\n", text);
            out_append(x, type, line);
            free(line);
        } else if (text) {
            out_append(x, type, text);
        }
    } else if (strcmp(type, "result") == 0) {
        json_t *results = json_object_get(j, "results");
        if (json_is_object(results)) {
            if (!x->res->results)
                x->res->results = json_array();
            json_array_append(x->res->results, results);
            const char *plain = tk_json_str(results, "text/plain");
            if (plain) {
                out_append(x, "result", plain);
                out_append(x, "result", "\n");
            }
        }
    } else if (strcmp(type, "error") == 0) {
        json_t *e = json_object_get(j, "error");
        const char *ename = tk_json_str_or(e, "ename", "Error");
        const char *evalue = tk_json_str_or(e, "evalue", "");
        if (strcmp(ename, "CommandExecError") == 0) {
            int64_t code = -1;
            if (tk_parse_i64(evalue, -1000000, 1000000, &code) == TK_OK)
                x->res->exit_code = (int)code;
            snprintf(x->res->error, sizeof x->res->error, "exit code %s", evalue);
        } else {
            snprintf(x->res->error, sizeof x->res->error, "%s: %s", ename, evalue);
            json_t *tb = json_object_get(e, "traceback");
            size_t i;
            json_t *line;
            int any = 0;
            json_array_foreach(tb, i, line)
            {
                if (json_is_string(line)) {
                    if (!any)
                        out_append(x, "stderr", "\n");
                    any = 1;
                    out_append(x, "stderr", json_string_value(line));
                    out_append(x, "stderr", "\n");
                }
            }
            if (!any) {
                out_append(x, "stderr", x->res->error);
                out_append(x, "stderr", "\n");
            }
        }
    } else if (strcmp(type, "execution_complete") == 0) {
        x->complete = 1;
        int64_t t;
        if (tk_json_int(j, "execution_time", &t) == TK_OK)
            x->res->duration_ms = t;
    }
    json_decref(j);
    return 0;
}

/* POSTs body to path and consumes the SSE stream. *status is the HTTP status. */
static tk_status stream_call(sandbox_handle *h, const char *path, json_t *body, long timeout_ms,
                             struct run_ctx *x, long *status)
{
    char *url = url_of(h, path);
    char *payload = tk_json_dumps(body);
    json_decref(body);
    const char *hdrs[40];
    size_t k = 0;
    for (char **p = h->headers; p && *p && k < 36; p++)
        hdrs[k++] = *p;
    hdrs[k++] = "Content-Type: application/json";
    hdrs[k++] = "Accept: text/event-stream";
    hdrs[k] = NULL;
    tk_buf_init(&x->errbody, 64 * 1024);
    tk_httpc_req req = {.method = "POST",
                        .url = url,
                        .headers = hdrs,
                        .body = payload,
                        .body_len = strlen(payload),
                        .timeout_ms = timeout_ms,
                        .on_sse = on_event,
                        .max_event = 8u << 20,
                        .ud = x,
                        .cancel = h->cancel};
    tk_httpc_resp resp;
    int64_t t0 = tk_mono_ms();
    tk_status st = tk_httpc_do(&req, &resp);
    *status = resp.status;
    if (!x->res->duration_ms)
        x->res->duration_ms = tk_mono_ms() - t0;
    if (st == TK_ETIMEOUT) {
        x->res->timed_out = 1;
        snprintf(x->res->error, sizeof x->res->error, "timed out after %ld ms", timeout_ms);
    } else if (st == TK_ECLOSED) {
        x->res->cancelled = 1;
        snprintf(x->res->error, sizeof x->res->error, "cancelled");
    } else if (st != TK_OK) {
        snprintf(x->res->error, sizeof x->res->error, "execd did not answer: %s", resp.error);
    }
    tk_httpc_resp_free(&resp);
    free(payload);
    free(url);
    return st;
}

/* A non-2xx answer of a streamed call: its message (the SSE parser saw the
 * JSON error body as an event, or nothing). */
static void status_error(struct run_ctx *x, long status, const char *what)
{
    if (!x->res->error[0])
        snprintf(x->res->error, sizeof x->res->error, "execd refused the %s (HTTP %ld)", what,
                 status);
}

static void interrupt(sandbox_handle *h, const char *path_fmt, const char *id)
{
    char err[200];
    char *p = query_path(path_fmt, id, err, sizeof err);
    if (!p)
        return;
    long status = 0;
    json_t *out = NULL;
    execd_json(h, "DELETE", p, NULL, 10000, &status, &out, err, sizeof err);
    json_decref(out);
    free(p);
}

tk_status sandbox_execd_run_command(sandbox_handle *h, const char *command, long timeout_ms,
                                    sandbox_execd_output_fn on_out, void *ud,
                                    sandbox_execd_result *res)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        if (ensure(h, &SHELL, h->bash_session, sizeof h->bash_session, res->error,
                   sizeof res->error) != TK_OK)
            return TK_ERROR;
        struct run_ctx x = {.res = res, .on_out = on_out, .ud = ud, .lines = 1};
        char path[256];
        snprintf(path, sizeof path, "/session/%s/run", h->bash_session);
        long status = 0;
        tk_status st = stream_call(
            h, path,
            tk_json_obj("command", json_string(command), "timeout", json_integer(timeout_ms), NULL),
            timeout_ms + 30000, &x, &status);
        tk_buf_free(&x.errbody);
        if (st == TK_ECLOSED || st == TK_ETIMEOUT) {
            /* stop what runs: the command if execd told us its id, else the shell */
            int stopped = 0;
            if (x.cmd_id[0]) {
                interrupt(h, "/command?id=", x.cmd_id);
                stopped = 1;
            }
            if (!stopped || st == TK_ETIMEOUT) {
                char p2[256];
                snprintf(p2, sizeof p2, "/session/%s", h->bash_session);
                long s2 = 0;
                json_t *o2 = NULL;
                char e2[200];
                execd_json(h, "DELETE", p2, NULL, 10000, &s2, &o2, e2, sizeof e2);
                json_decref(o2);
                h->bash_session[0] = 0;
                persist_ids(h);
                res->restarted = 1;
            }
            return st == TK_ECLOSED ? TK_ECLOSED : TK_OK;
        }
        if (st != TK_OK) {
            maybe_gone(h, 0, NULL);
            return TK_ERROR;
        }
        if (status == 404 && attempt == 0 && !h->gone) {
            /* the shell is gone (execd restarted): a new one, once */
            maybe_gone(h, status, NULL);
            if (h->gone)
                return TK_ERROR;
            h->bash_session[0] = 0;
            res->restarted = 1;
            res->error[0] = 0;
            continue;
        }
        if (status < 200 || status > 299) {
            status_error(&x, status, "command");
            maybe_gone(h, status, NULL);
            return TK_ERROR;
        }
        if (res->exit_code < 0 && !res->error[0])
            res->exit_code = 0;
        return TK_OK;
    }
    return TK_ERROR;
}

tk_status sandbox_execd_run_oneshot(sandbox_handle *h, const char *command, json_t *envs,
                                    long timeout_ms, sandbox_execd_result *res)
{
    struct run_ctx x = {.res = res, .lines = 1};
    long status = 0;
    json_t *body = tk_json_obj("command", json_string(command), "cwd", json_string("/workspace"),
                               "timeout", json_integer(timeout_ms), NULL);
    if (envs)
        json_object_set(body, "envs", envs);
    tk_status st = stream_call(h, "/command", body, timeout_ms + 15000, &x, &status);
    tk_buf_free(&x.errbody);
    if (st == TK_ECLOSED || st == TK_ETIMEOUT) {
        if (x.cmd_id[0])
            interrupt(h, "/command?id=", x.cmd_id);
        return st == TK_ECLOSED ? TK_ECLOSED : TK_OK;
    }
    if (st != TK_OK) {
        maybe_gone(h, 0, NULL);
        return TK_ERROR;
    }
    if (status < 200 || status > 299) {
        status_error(&x, status, "command");
        maybe_gone(h, status, NULL);
        return TK_ERROR;
    }
    if (res->exit_code < 0 && !res->error[0])
        res->exit_code = 0;
    return TK_OK;
}

tk_status sandbox_execd_run_code(sandbox_handle *h, const char *code, long timeout_ms,
                                 sandbox_execd_output_fn on_out, void *ud,
                                 sandbox_execd_result *res)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        if (ensure(h, &KERNEL, h->code_context, sizeof h->code_context, res->error,
                   sizeof res->error) != TK_OK)
            return TK_ERROR;
        struct run_ctx x = {.res = res, .on_out = on_out, .ud = ud};
        long status = 0;
        json_t *body = tk_json_obj("context",
                                   tk_json_obj("id", json_string(h->code_context), "language",
                                               json_string("python"), NULL),
                                   "code", json_string(code), NULL);
        tk_status st = stream_call(h, "/code", body, timeout_ms, &x, &status);
        tk_buf_free(&x.errbody);
        if (st == TK_ECLOSED || st == TK_ETIMEOUT) {
            interrupt(h, "/code?id=", h->code_context); /* the kernel keeps its state */
            return st == TK_ECLOSED ? TK_ECLOSED : TK_OK;
        }
        if (st != TK_OK) {
            maybe_gone(h, 0, NULL);
            return TK_ERROR;
        }
        if (status == 404 && attempt == 0) {
            maybe_gone(h, status, NULL);
            if (h->gone)
                return TK_ERROR;
            h->code_context[0] = 0;
            res->restarted = 1;
            res->error[0] = 0;
            continue;
        }
        if (status < 200 || status > 299) {
            status_error(&x, status, "code");
            maybe_gone(h, status, NULL);
            return TK_ERROR;
        }
        res->exit_code = res->error[0] ? 1 : 0;
        return TK_OK;
    }
    return TK_ERROR;
}

/* ---------- files ---------- */

static tk_status mkdirs(sandbox_handle *h, const char *path, char *err, size_t errlen)
{
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path)
        return TK_OK;
    char *dir = tk_strndup(path, (size_t)(slash - path));
    if (strcmp(dir, "/workspace") == 0) {
        free(dir);
        return TK_OK;
    }
    json_t *body = json_object();
    json_object_set_new(body, dir, tk_json_obj("mode", json_integer(755), NULL));
    long status = 0;
    json_t *out = NULL;
    tk_status st = execd_json(h, "POST", "/directories", body, 30000, &status, &out, err, errlen);
    free(dir);
    if (st == TK_OK && (status < 200 || status > 299)) {
        snprintf(err, errlen, "execd refused to create the folder (HTTP %ld%s%s)", status,
                 tk_json_str(out, "message") ? ": " : "", tk_json_str_or(out, "message", ""));
        maybe_gone(h, status, out);
        st = TK_ERROR;
    } else if (st != TK_OK) {
        maybe_gone(h, 0, NULL);
    }
    json_decref(out);
    return st;
}

tk_status sandbox_execd_write_file(sandbox_handle *h, const char *path, const void *data,
                                   size_t len, char *err, size_t errlen)
{
    if (mkdirs(h, path, err, errlen) != TK_OK)
        return TK_ERROR;
    char boundary[40];
    char hex[25];
    tk_token_hex(hex, 12);
    snprintf(boundary, sizeof boundary, "tusko%s", hex);
    json_t *meta = tk_json_obj("path", json_string(path), "mode", json_integer(644), NULL);
    char *ms = tk_json_dumps(meta);
    json_decref(meta);
    const char *name = strrchr(path, '/');
    name = name ? name + 1 : path;
    tk_buf b;
    tk_buf_init(&b, len + 64 * 1024);
    tk_buf_printf(&b,
                  "--%s\r\nContent-Disposition: form-data; name=\"metadata\"\r\nContent-Type: "
                  "application/json\r\n\r\n%s\r\n--%s\r\nContent-Disposition: form-data; "
                  "name=\"file\"; filename=\"%s\"\r\nContent-Type: "
                  "application/octet-stream\r\n\r\n",
                  boundary, ms, boundary, strpbrk(name, "\"\r\n\\") ? "file" : name);
    free(ms);
    if (tk_buf_append(&b, data, len) != TK_OK) {
        tk_buf_free(&b);
        snprintf(err, errlen, "the file is too large");
        return TK_ETOOBIG;
    }
    tk_buf_printf(&b, "\r\n--%s--\r\n", boundary);
    char ct[96];
    snprintf(ct, sizeof ct, "Content-Type: multipart/form-data; boundary=%s", boundary);
    const char *hdrs[40];
    size_t k = 0;
    for (char **p = h->headers; p && *p && k < 36; p++)
        hdrs[k++] = *p;
    hdrs[k++] = ct;
    hdrs[k] = NULL;
    char *url = url_of(h, "/files/upload");
    tk_httpc_req req = {.method = "POST",
                        .url = url,
                        .headers = hdrs,
                        .body = b.data,
                        .body_len = b.len,
                        .timeout_ms = 120000,
                        .max_response = 1 << 20,
                        .cancel = h->cancel};
    tk_httpc_resp resp;
    tk_status st = tk_httpc_do(&req, &resp);
    free(url);
    tk_buf_free(&b);
    if (st != TK_OK) {
        snprintf(err, errlen, "execd did not answer: %s", resp.error);
        maybe_gone(h, 0, NULL);
    } else if (resp.status < 200 || resp.status > 299) {
        char jerr[64];
        json_t *j = tk_json_parse(resp.body.data ? resp.body.data : "", resp.body.len, 1 << 20,
                                  jerr, sizeof jerr);
        snprintf(err, errlen, "execd refused the write (HTTP %ld%s%s)", resp.status,
                 tk_json_str(j, "message") ? ": " : "", tk_json_str_or(j, "message", ""));
        maybe_gone(h, resp.status, j);
        json_decref(j);
        st = TK_ERROR;
    }
    tk_httpc_resp_free(&resp);
    return st;
}

tk_status sandbox_execd_read_file(sandbox_handle *h, const char *path, size_t max, tk_buf *out,
                                  char *err, size_t errlen)
{
    char *p = query_path("/files/download?path=", path, err, errlen);
    if (!p)
        return TK_EINVAL;
    char *url = url_of(h, p);
    free(p);
    tk_httpc_req req = {.method = "GET",
                        .url = url,
                        .headers = (const char *const *)h->headers,
                        .timeout_ms = 120000,
                        .max_response = max,
                        .cancel = h->cancel};
    tk_httpc_resp resp;
    tk_status st = tk_httpc_do(&req, &resp);
    free(url);
    if (st == TK_ETOOBIG) {
        snprintf(err, errlen, "the file is larger than %zu bytes", max);
    } else if (st != TK_OK) {
        snprintf(err, errlen, "execd did not answer: %s", resp.error);
        maybe_gone(h, 0, NULL);
    } else if (resp.status == 404) {
        char jerr[64];
        json_t *j = tk_json_parse(resp.body.data ? resp.body.data : "", resp.body.len, 1 << 20,
                                  jerr, sizeof jerr);
        maybe_gone(h, 404, j);
        json_decref(j);
        snprintf(err, errlen, h->gone ? "the sandbox is gone" : "no such file: %s", path);
        st = h->gone ? TK_ERROR : TK_ENOENT;
    } else if (resp.status < 200 || resp.status > 299) {
        char jerr[64];
        json_t *j = tk_json_parse(resp.body.data ? resp.body.data : "", resp.body.len, 1 << 20,
                                  jerr, sizeof jerr);
        snprintf(err, errlen, "execd refused the read (HTTP %ld%s%s)", resp.status,
                 tk_json_str(j, "message") ? ": " : "", tk_json_str_or(j, "message", ""));
        maybe_gone(h, resp.status, j);
        json_decref(j);
        st = TK_ERROR;
    } else {
        tk_buf_reset(out);
        if (tk_buf_append(out, resp.body.data ? resp.body.data : "", resp.body.len) != TK_OK) {
            snprintf(err, errlen, "the file is larger than %zu bytes", out->max);
            st = TK_ETOOBIG;
        }
    }
    tk_httpc_resp_free(&resp);
    return st;
}

struct stream_ctx {
    int (*on_data)(const char *d, size_t n, void *ud);
    void *ud;
    int failed;
};

static int stream_data(const char *d, size_t n, void *ud)
{
    struct stream_ctx *x = ud;
    if (x->on_data(d, n, x->ud) != 0) {
        x->failed = 1;
        return 1;
    }
    return 0;
}

tk_status sandbox_execd_download(sandbox_handle *h, const char *path, long timeout_ms,
                                 int (*on_data)(const char *d, size_t n, void *ud), void *ud,
                                 char *err, size_t errlen)
{
    char *p = query_path("/files/download?path=", path, err, errlen);
    if (!p)
        return TK_EINVAL;
    char *url = url_of(h, p);
    free(p);
    struct stream_ctx x = {on_data, ud, 0};
    tk_httpc_req req = {.method = "GET",
                        .url = url,
                        .headers = (const char *const *)h->headers,
                        .timeout_ms = timeout_ms,
                        .on_data = stream_data,
                        .ud = &x,
                        .cancel = h->cancel};
    tk_httpc_resp resp;
    tk_status st = tk_httpc_do(&req, &resp);
    free(url);
    if (x.failed) {
        snprintf(err, errlen, "the download was stopped by its reader");
        st = TK_AGAIN;
    } else if (st != TK_OK) {
        snprintf(err, errlen, "execd did not answer: %s", resp.error);
        maybe_gone(h, 0, NULL);
    } else if (resp.status < 200 || resp.status > 299) {
        snprintf(err, errlen, "execd refused the download (HTTP %ld)", resp.status);
        maybe_gone(h, resp.status, NULL);
        st = resp.status == 404 && !h->gone ? TK_ENOENT : TK_ERROR;
    }
    tk_httpc_resp_free(&resp);
    return st;
}

struct head_ctx {
    tk_buf *out;
    size_t max;
    int truncated;
    long status;
    tk_buf err;
};

static int head_data(const char *d, size_t n, void *ud)
{
    struct head_ctx *x = ud;
    if (x->status == 0)
        x->status = 1;
    size_t room = x->max - x->out->len;
    if (n > room) {
        tk_buf_append(x->out, d, room);
        x->truncated = 1;
        return 1; /* enough */
    }
    tk_buf_append(x->out, d, n);
    return 0;
}

tk_status sandbox_execd_read_head(sandbox_handle *h, const char *path, size_t max, tk_buf *out,
                                  int *truncated, char *err, size_t errlen)
{
    char *p = query_path("/files/download?path=", path, err, errlen);
    if (!p)
        return TK_EINVAL;
    char *url = url_of(h, p);
    free(p);
    char range[64];
    snprintf(range, sizeof range, "Range: bytes=0-%zu", max ? max - 1 : 0);
    const char *hdrs[40];
    size_t k = 0;
    for (char **q = h->headers; q && *q && k < 36; q++)
        hdrs[k++] = *q;
    hdrs[k++] = range;
    hdrs[k] = NULL;
    tk_buf_reset(out);
    struct head_ctx x = {.out = out, .max = max};
    tk_httpc_req req = {.method = "GET",
                        .url = url,
                        .headers = hdrs,
                        .timeout_ms = 60000,
                        .on_data = head_data,
                        .ud = &x,
                        .cancel = h->cancel};
    tk_httpc_resp resp;
    tk_status st = tk_httpc_do(&req, &resp);
    free(url);
    *truncated = x.truncated;
    if (st == TK_AGAIN)
        st = TK_OK; /* we stopped it: enough bytes */
    if (st != TK_OK) {
        snprintf(err, errlen, "execd did not answer: %s", resp.error);
        maybe_gone(h, 0, NULL);
    } else if (resp.status == 416) {
        tk_buf_reset(out); /* an empty file */
    } else if (resp.status == 404 || resp.status < 200 || resp.status > 299) {
        char jerr[64];
        json_t *j = tk_json_parse(out->data ? out->data : "", out->len, 1 << 20, jerr, sizeof jerr);
        maybe_gone(h, resp.status, j);
        json_decref(j);
        if (resp.status == 404 && !h->gone) {
            snprintf(err, errlen, "no such file: %s", path);
            st = TK_ENOENT;
        } else {
            snprintf(err, errlen,
                     h->gone ? "the sandbox is gone" : "execd refused the read (HTTP %ld)",
                     resp.status);
            st = TK_ERROR;
        }
        tk_buf_reset(out);
    }
    tk_httpc_resp_free(&resp);
    return st;
}

static tk_status get_json(sandbox_handle *h, const char *prefix, const char *path,
                          const char *extra, json_t **out, char *err, size_t errlen)
{
    *out = NULL;
    char *q = query_path(prefix, path, err, errlen);
    if (!q)
        return TK_EINVAL;
    char *p = tk_asprintf("%s%s", q, extra ? extra : "");
    free(q);
    long status = 0;
    tk_status st = execd_json(h, "GET", p, NULL, 30000, &status, out, err, errlen);
    free(p);
    if (st != TK_OK) {
        maybe_gone(h, 0, NULL);
        return TK_ERROR;
    }
    if (status == 404) {
        maybe_gone(h, 404, *out);
        json_decref(*out);
        *out = NULL;
        snprintf(err, errlen, h->gone ? "the sandbox is gone" : "no such file or folder: %s", path);
        return h->gone ? TK_ERROR : TK_ENOENT;
    }
    if (status < 200 || status > 299) {
        snprintf(err, errlen, "execd refused (HTTP %ld%s%s)", status,
                 tk_json_str(*out, "message") ? ": " : "", tk_json_str_or(*out, "message", ""));
        maybe_gone(h, status, *out);
        json_decref(*out);
        *out = NULL;
        return TK_ERROR;
    }
    return TK_OK;
}

tk_status sandbox_execd_list_dir(sandbox_handle *h, const char *path, int depth, json_t **out,
                                 char *err, size_t errlen)
{
    char extra[32];
    snprintf(extra, sizeof extra, "&depth=%d", depth < 1 ? 1 : depth);
    tk_status st = get_json(h, "/directories/list?path=", path, extra, out, err, errlen);
    if (st == TK_OK && !json_is_array(*out)) {
        json_decref(*out);
        *out = NULL;
        snprintf(err, errlen, "execd answered a listing that is not an array");
        return TK_ERROR;
    }
    return st;
}

tk_status sandbox_execd_stat(sandbox_handle *h, const char *path, json_t **out, char *err,
                             size_t errlen)
{
    json_t *m = NULL;
    tk_status st = get_json(h, "/files/info?path=", path, NULL, &m, err, errlen);
    *out = NULL;
    if (st != TK_OK)
        return st;
    json_t *fi = json_object_get(m, path);
    if (!json_is_object(fi)) {
        /* a single answer may be keyed differently; take the only value */
        const char *k;
        json_t *v;
        json_object_foreach(m, k, v)
        {
            fi = v;
            break;
        }
    }
    if (!json_is_object(fi)) {
        json_decref(m);
        snprintf(err, errlen, "no such file or folder: %s", path);
        return TK_ENOENT;
    }
    *out = json_incref(fi);
    json_decref(m);
    return TK_OK;
}
