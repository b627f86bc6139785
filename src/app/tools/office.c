/*
 * Office documents and PDFs: the helper run in the sandbox, the preview's
 * text for the model, and the tools parse_pdf and compare_files. See office.h.
 */
#include "app/tools/office.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "app/agent/tools.h"
#include "app/app.h"
#include "app/sandbox/execd.h"
#include "app/workspace.h"
#include "lib/buf.h"
#include "lib/embed.h"
#include "lib/json.h"
#include "lib/log.h"

extern const struct tk_embed_file tk_embed_office[];

/* The answer's cap: 20 JPEG pages are about 4 MB of base64. */
#define OFFICE_OUTPUT_MAX (32u << 20)
/* The helper travels in one environment variable (Linux caps one at 128 KiB). */
#define OFFICE_HELPER_MAX (120u * 1024)

static const char *const previewable[] = {".pptx", ".ppt",  ".odp", ".docx", ".doc", ".odt", ".rtf",
                                          ".pdf",  ".xlsx", ".xls", ".ods",  ".csv", ".tsv"};

int tools_office_previewable(const char *path)
{
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    if (!dot || (slash && dot < slash))
        return 0;
    for (size_t i = 0; i < TK_ARRAY_LEN(previewable); i++)
        if (strcasecmp(dot, previewable[i]) == 0)
            return 1;
    return 0;
}

/* A picture's MIME type as the UI may use it in a data: URL. */
static int picture_mime_ok(const char *m)
{
    return m && (strcmp(m, "image/png") == 0 || strcmp(m, "image/jpeg") == 0);
}

json_t *tools_office_answer(const char *s, size_t n, char *msg, size_t msglen)
{
    static const char begin[] = "TUSKO-OFFICE-BEGIN\n", end[] = "TUSKO-OFFICE-END";
    const char *b = NULL;
    /* the last begin marker (anything printed before it is not the answer) */
    for (const char *p = s; p && (size_t)(p - s) < n;) {
        p = memmem(p, n - (size_t)(p - s), begin, sizeof begin - 1);
        if (p)
            b = p++;
    }
    if (!b) {
        snprintf(msg, msglen, "the office helper gave no answer");
        return NULL;
    }
    b += sizeof begin - 1;
    const char *e = memmem(b, n - (size_t)(b - s), end, sizeof end - 1);
    if (!e) {
        snprintf(msg, msglen, "the office helper's answer was cut off");
        return NULL;
    }
    tk_buf j;
    tk_buf_init(&j, (size_t)(e - b) + 1);
    for (const char *p = b; p < e; p++)
        if (*p != '\n' && *p != '\r')
            tk_buf_append_byte(&j, *p);
    char err[128];
    json_t *v = tk_json_parse(j.data ? j.data : "", j.len, j.len + 1, err, sizeof err);
    tk_buf_free(&j);
    if (!json_is_object(v)) {
        json_decref(v);
        snprintf(msg, msglen, "the office helper's answer is not JSON%s%s", *err ? ": " : "", err);
        return NULL;
    }
    /* the sandbox is the user's: keep only pictures the UI can show as such */
    size_t i;
    json_t *pg;
    json_array_foreach(json_object_get(v, "pages"), i, pg)
    {
        if (!json_is_object(pg))
            continue;
        if (!picture_mime_ok(tk_json_str(pg, "mime")) ||
            !json_is_string(json_object_get(pg, "base64"))) {
            json_object_del(pg, "base64");
            json_object_del(pg, "mime");
        }
    }
    return v;
}

tk_status tools_office_run(sandbox_handle *h, json_t *req, json_t **out, char *msg, size_t msglen)
{
    *out = NULL;
    const struct tk_embed_file *f = tk_embed_find(tk_embed_office, "tusko_office.py");
    if (!f || f->size > OFFICE_HELPER_MAX) {
        snprintf(msg, msglen, "the office helper is missing from this build");
        return TK_ERROR;
    }
    char *reqs = tk_json_dumps(req);
    char timeout[16];
    snprintf(timeout, sizeof timeout, "%d", TOOLS_OFFICE_TIMEOUT_S);
    json_t *envs = tk_json_obj("TUSKO_OFFICE_PY", json_stringn((const char *)f->data, f->size),
                               "TUSKO_OFFICE_REQ", json_string(reqs), "TUSKO_OFFICE_TIMEOUT",
                               json_string(timeout), NULL);
    free(reqs);
    sandbox_execd_result r;
    sandbox_execd_result_init(&r, OFFICE_OUTPUT_MAX);
    /* a constant line: the file's name and every argument are in the environment */
    tk_status st = sandbox_execd_run_oneshot(
        h, "exec python3 -I -c 'import os;exec(os.environ[\"TUSKO_OFFICE_PY\"])' 2>/dev/null", envs,
        (TOOLS_OFFICE_TIMEOUT_S + 10) * 1000L, &r);
    json_decref(envs);
    if (st == TK_ECLOSED) {
        snprintf(msg, msglen, "cancelled");
    } else if (st != TK_OK) {
        snprintf(msg, msglen, "%s", r.error[0] ? r.error : "the sandbox did not answer");
    } else if (r.timed_out) {
        snprintf(msg, msglen, "the renderer did not finish within %d s and was stopped",
                 TOOLS_OFFICE_TIMEOUT_S);
        st = TK_EINVAL;
    } else if (r.truncated) {
        snprintf(msg, msglen, "the answer is larger than %u MB; ask for fewer pages",
                 OFFICE_OUTPUT_MAX >> 20);
        st = TK_EINVAL;
    } else {
        json_t *v =
            tools_office_answer(r.output.data ? r.output.data : "", r.output.len, msg, msglen);
        if (!v) {
            if (r.exit_code > 0)
                snprintf(msg + strlen(msg), msglen - strlen(msg), " (exit code %d%s)", r.exit_code,
                         r.exit_code == 137 ? ": killed, perhaps out of memory" : "");
            st = TK_ERROR;
        } else if (tk_json_str(v, "error")) {
            snprintf(msg, msglen, "%s", tk_json_str(v, "error"));
            json_decref(v);
            st = TK_EINVAL;
        } else {
            *out = v;
        }
    }
    sandbox_execd_result_free(&r);
    return st;
}

/* ---------------------------------------------------------------- text for the model */

static void indent_append(tk_buf *b, const char *label, const char *text, size_t max)
{
    if (!text || !*text)
        return;
    size_t n = strlen(text);
    int cut = n > max;
    if (cut) {
        n = max;
        while (n > 0 && ((unsigned char)text[n] & 0xC0) == 0x80)
            n--;
    }
    tk_buf_printf(b, "  %s: %.*s%s\n", label, (int)n, text, cut ? "…" : "");
}

char *tools_office_preview_text(const json_t *res)
{
    tk_buf b;
    tk_buf_init(&b, 1u << 20);
    const char *path = tk_json_str_or(res, "path", "");
    const char *kind = tk_json_str_or(res, "kind", "");
    size_t i;
    json_t *e;
    if (strcmp(kind, "sheets") == 0) {
        json_t *sheets = json_object_get(res, "sheets");
        tk_buf_printf(&b, "%s: %zu sheet%s, shown to the user as tables\n", path,
                      json_array_size(sheets), json_array_size(sheets) == 1 ? "" : "s");
        json_array_foreach(sheets, i, e)
        {
            json_t *rows = json_object_get(e, "rows");
            tk_buf_printf(&b, "\nSheet \"%s\": %lld rows x %lld columns%s\n",
                          tk_json_str_or(e, "name", ""),
                          (long long)tk_json_int_or(e, "total_rows", 0),
                          (long long)tk_json_int_or(e, "total_cols", 0),
                          json_is_true(json_object_get(e, "truncated"))
                              ? " (the user sees the first 200 rows x 50 columns)"
                              : "");
            size_t r;
            json_t *row;
            json_array_foreach(rows, r, row)
            {
                if (r >= 15) {
                    tk_buf_printf(&b, "... (%zu more rows shown to the user)\n",
                                  json_array_size(rows) - r);
                    break;
                }
                size_t c;
                json_t *cell;
                json_array_foreach(row, c, cell)
                {
                    if (c >= 12) {
                        tk_buf_append_str(&b, "\t...");
                        break;
                    }
                    tk_buf_printf(&b, "%s%.60s", c ? "\t" : "", json_string_value(cell) ?: "");
                }
                tk_buf_append_byte(&b, '\n');
            }
        }
    } else {
        const char *fam = tk_json_str_or(res, "family", "");
        int slides = strcmp(fam, "slides") == 0;
        const char *unit = slides ? "slide" : "page";
        long long n = tk_json_int_or(res, "page_count", 0);
        long long a = tk_json_int_or(res, "first", 1), z = tk_json_int_or(res, "last", 1);
        int rendered = json_is_true(json_object_get(res, "rendered"));
        tk_buf_printf(&b, "%s: %lld %s%s; %ss %lld–%lld of %lld %s\n", path, n, unit,
                      n == 1 ? "" : "s", unit, a, z, n,
                      rendered ? "shown to the user as pictures"
                               : "shown to the user as text (no pictures)");
        if (z < n)
            tk_buf_printf(&b, "(more: preview with pages \"%lld-%lld\")\n", z + 1,
                          z + (slides ? 30 : 20) > n ? n : z + (slides ? 30 : 20));
        json_array_foreach(json_object_get(res, "notes"), i, e)
            tk_buf_printf(&b, "note: %s\n", json_string_value(e) ?: "");
        json_array_foreach(json_object_get(res, "pages"), i, e)
        {
            tk_buf_printf(&b, "\n%s %lld\n", slides ? "Slide" : "Page",
                          (long long)tk_json_int_or(e, "page", 0));
            indent_append(&b, "title", tk_json_str(e, "title"), 300);
            indent_append(&b, slides ? "body" : "text",
                          tk_json_str(e, "body") ? tk_json_str(e, "body") : tk_json_str(e, "text"),
                          slides ? 1500 : 2500);
            indent_append(&b, "notes", tk_json_str(e, "notes"), 1500);
        }
    }
    return tk_buf_steal(&b, NULL);
}

/* ---------------------------------------------------------------- tools */

/* The chat's sandbox for a read: 1 with *h, or 0 with out filled. */
static int existing(agent_call *call, sandbox_handle *h, agent_result *out)
{
    sandbox_session s = {.user_id = agent_call_user(call),
                         .session_id = agent_call_session(call),
                         .cancel = agent_call_cancel_flag(call)};
    char msg[512];
    tk_status st = getExistingOpenSandbox(&s, h, msg, sizeof msg);
    if (st == TK_OK)
        return 1;
    if (st == TK_ENOENT || st == TK_EDENIED)
        agent_result_error(out,
                           "nothing here yet: this chat has no files (no sandbox was started)");
    else
        agent_result_error(out, "%s", msg);
    return 0;
}

/* Checks a path argument (confined to /workspace) into buf. */
static int path_arg(const json_t *args, const char *key, char *buf, size_t len, agent_result *out)
{
    json_t *jp = json_object_get(args, key);
    if (!json_is_string(jp)) {
        agent_result_error(out, "\"%s\" (a path) is required", key);
        return 0;
    }
    char msg[512];
    if (agent_ws_path(json_string_value(jp), json_string_length(jp), buf, len, msg, sizeof msg) !=
        TK_OK) {
        agent_result_error(out, "%s", msg);
        return 0;
    }
    return 1;
}

static void run_helper(agent_call *call, json_t *req, agent_result *out, json_t **res)
{
    *res = NULL;
    sandbox_handle h;
    if (!existing(call, &h, out)) {
        json_decref(req);
        return;
    }
    char msg[1024];
    tk_status st = tools_office_run(&h, req, res, msg, sizeof msg);
    json_decref(req);
    if (st != TK_OK)
        agent_result_error(out, "%s",
                           h.gone ? "this chat's workspace is gone (the sandbox was "
                                    "reaped)"
                                  : msg);
    sandbox_handle_free(&h);
}

static void run_parse_pdf(agent_call *call, const json_t *args, agent_result *out)
{
    char p[AGENT_WS_PATH_MAX + 32];
    if (!path_arg(args, "path", p, sizeof p, out))
        return;
    json_t *req = tk_json_obj("op", json_string("parse_pdf"), "path", json_string(p), NULL);
    json_t *pages = json_object_get(args, "pages");
    if (json_is_string(pages) || json_is_integer(pages))
        json_object_set(req, "pages", pages);
    if (json_is_false(json_object_get(args, "tables")))
        json_object_set_new(req, "tables", json_false());
    json_t *res;
    run_helper(call, req, out, &res);
    if (!res)
        return;
    tk_buf b;
    tk_buf_init(&b, 8u << 20);
    tk_buf_printf(&b, "%s: %lld pages (pages %lld–%lld here)\n", p,
                  (long long)tk_json_int_or(res, "page_count", 0),
                  (long long)tk_json_int_or(res, "first", 1),
                  (long long)tk_json_int_or(res, "last", 1));
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(res, "metadata"), k, v)
        tk_buf_printf(&b, "%s: %s\n", k, json_string_value(v) ?: "");
    size_t i;
    json_t *pg;
    json_array_foreach(json_object_get(res, "pages"), i, pg)
    {
        tk_buf_printf(&b, "\n--- page %lld", (long long)tk_json_int_or(pg, "page", 0));
        if (tk_json_str(pg, "note"))
            tk_buf_printf(&b, ": %s", tk_json_str(pg, "note"));
        tk_buf_printf(&b, " ---\n%s\n", tk_json_str_or(pg, "text", ""));
        json_t *tables = json_object_get(pg, "tables");
        size_t t;
        json_t *tb;
        json_array_foreach(tables, t, tb)
        {
            tk_buf_printf(&b, "[table %zu: %zu rows]\n", t + 1, json_array_size(tb));
            size_t r;
            json_t *row;
            json_array_foreach(tb, r, row)
            {
                size_t c;
                json_t *cell;
                json_array_foreach(row, c, cell)
                    tk_buf_printf(&b, "%s%s", c ? " | " : "| ", json_string_value(cell) ?: "");
                tk_buf_append_str(&b, " |\n");
            }
        }
    }
    agent_result_take(out, tk_buf_steal(&b, NULL), 0);
    out->data = res;
}

static void change_line(tk_buf *b, const json_t *c)
{
    const char *kind = tk_json_str_or(c, "kind", "");
    tk_buf_printf(b, "- %s %s", kind, tk_json_str_or(c, "where", ""));
    const char *o = tk_json_str(c, "old"), *n = tk_json_str(c, "new");
    if (o && n)
        tk_buf_printf(b, ": \"%.300s\" → \"%.300s\"", o, n);
    else if (o)
        tk_buf_printf(b, ": \"%.300s\"", o);
    else if (n)
        tk_buf_printf(b, ": \"%.300s\"", n);
    if (json_is_number(json_object_get(c, "percent")))
        tk_buf_printf(b, " (%.3f%% of the pixels)",
                      json_number_value(json_object_get(c, "percent")));
    tk_buf_append_byte(b, '\n');
}

static void run_compare(agent_call *call, const json_t *args, agent_result *out)
{
    char a[AGENT_WS_PATH_MAX + 32], bp[AGENT_WS_PATH_MAX + 32];
    if (!path_arg(args, "a", a, sizeof a, out) || !path_arg(args, "b", bp, sizeof bp, out))
        return;
    const char *mode = tk_json_str_or(args, "mode", "auto");
    if (strcmp(mode, "auto") != 0 && strcmp(mode, "text") != 0) {
        agent_result_error(out, "\"mode\" is \"auto\" or \"text\"");
        return;
    }
    int64_t maxc = tk_json_int_or(args, "max_changes", 200);
    if (maxc < 1 || maxc > 1000) {
        agent_result_error(out, "\"max_changes\" is 1 to 1000");
        return;
    }
    json_t *req =
        tk_json_obj("op", json_string("compare"), "a", json_string(a), "b", json_string(bp), "mode",
                    json_string(mode), "max_changes", json_integer(maxc), NULL);
    if (json_is_string(json_object_get(args, "output")))
        json_object_set(req, "output", json_object_get(args, "output"));
    json_t *res;
    run_helper(call, req, out, &res);
    if (!res)
        return;
    tk_buf b;
    tk_buf_init(&b, 4u << 20);
    tk_buf_printf(&b, "%s → %s: %s\n", a, bp, tk_json_str_or(res, "summary", ""));
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(res, "changes"), i, c) change_line(&b, c);
    int64_t more = tk_json_int_or(res, "more", 0);
    if (more > 0)
        tk_buf_printf(&b, "... and %lld more changes (raise max_changes to see them)\n",
                      (long long)more);
    json_array_foreach(json_object_get(res, "notes"), i, c)
        tk_buf_printf(&b, "note: %s\n", json_string_value(c) ?: "");
    agent_result_take(out, tk_buf_steal(&b, NULL), 0);
    out->data = res;
}

static const agent_tool tools[] = {
    {.name = "parse_pdf",
     .lane = AGENT_LANE_SANDBOX,
     .description =
         "Read a PDF of the workspace: text per page with its layout kept, tables split into "
         "cells where columns line up, the page count and metadata. Scanned pages (no text "
         "layer) are reported as such. At most 100 pages a call: pages \"101-200\" for more.",
     .parameters = "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
                   "\"pages\":{\"type\":\"string\",\"description\":\"a page or range: \\\"3\\\", "
                   "\\\"21-40\\\"\"},\"tables\":{\"type\":\"boolean\",\"description\":\"split "
                   "tables into cells (default true)\"}},\"required\":[\"path\"]}",
     .run = run_parse_pdf},
    {.name = "compare_files",
     .lane = AGENT_LANE_SANDBOX,
     .description =
         "Compare two files of the workspace and show the user the differences side by side "
         "(never changes them). Text and code by line with word-level changes; CSV/XLSX by "
         "cell with rows and columns aligned first (formulas and values); DOCX by paragraph "
         "and table row; PPTX by slide (title, body, notes); PDF as a word stream mapped to "
         "pages; images by changed box and percentage. Both files must be of one family "
         "(mode \"text\" compares any two as text).",
     .parameters = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\","
                   "\"description\":\"the old file\"},\"b\":{\"type\":\"string\","
                   "\"description\":\"the new file\"},\"mode\":{\"type\":\"string\",\"enum\":["
                   "\"auto\",\"text\"]},\"context\":{\"type\":\"integer\"},\"max_changes\":{"
                   "\"type\":\"integer\",\"minimum\":1,\"maximum\":1000}},\"required\":[\"a\","
                   "\"b\"]}",
     .run = run_compare},
};

void tools_office_register(void)
{
    agent_tools_register_table(tools, TK_ARRAY_LEN(tools));
}
