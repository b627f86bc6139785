/* The browser lane's tools on the chat's browser. See browser.h. */
#include "app/tools/browser.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/agent/tools.h"
#include "app/app.h"
#include "app/browser/browser.h"
#include "lib/buf.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/tktime.h"

#define MAX_STEPS     20
#define MAX_URL       8192
#define MAX_TYPE_TEXT 100000
#define MAX_SHOT      (32u << 20)

/* ---------- getting the chat's browser ---------- */

static void report_spawn(agent_call *call, const browser_handle *h, const char *trigger)
{
    const app_settings *cfg = app_get()->cfg;
    char ttl[32], idle[64], quota[64];
    tk_format_duration(cfg->browser_idle_ttl_ms, ttl, sizeof ttl);
    snprintf(idle, sizeof idle, "%s, then released", ttl);
    snprintf(quota, sizeof quota, "%d of %d live per user", h->spawn.live, h->spawn.max);
    json_t *attrs = tk_json_obj(
        "tier", json_string("browser"), "trigger",
        json_string(h->spawn.replaced ? "the previous browser ended; first browse since" : trigger),
        "call", json_string("getOrCreateBrowser"), "pool", json_string(h->spawn.pool), "quota",
        json_string(quota), "credentials", json_string("fail-closed, from env only"), "idle_ttl",
        json_string(idle), "browser_id", json_string(h->id), "remote_id", json_string(h->remote_id),
        "replaced", json_boolean(h->spawn.replaced), NULL);
    if (h->spawn.replaced)
        json_object_set_new(attrs, "gone_reason", json_string(h->spawn.gone_reason));
    agent_span_record(agent_call_trace(call), agent_call_span_id(call), "browser_spawn", "browser",
                      h->spawn.started_ms, h->spawn.duration_ms, "ok", json_deep_copy(attrs));
    json_object_set_new(attrs, "duration_ms", json_real(h->spawn.duration_ms));
    agent_call_emit(call, "browser_spawn", attrs);
}

/* The chat's browser: created when create (a navigation), else only an
 * existing one. 1 with *h ready, 0 with *out filled. */
static int acquire(agent_call *call, int create, browser_handle *h, agent_result *out)
{
    browser_session s = {.user_id = agent_call_user(call),
                         .session_id = agent_call_session(call),
                         .trigger = "first browse this session",
                         .cancel = agent_call_cancel_flag(call)};
    char err[512];
    if (!create) {
        if (browser_get_existing(&s, h, err, sizeof err) == TK_OK)
            return 1;
        agent_result_error(out, "%s", err);
        return 0;
    }
    browser_quota q;
    tk_status st = browser_get_or_create(&s, h, &q, err, sizeof err);
    if (st == TK_EDENIED && q.max > 0) {
        agent_call_emit(call, "error",
                        tk_json_obj("code", json_string("BROWSER_QUOTA"), "http_status",
                                    json_integer(429), "message", json_string(err), "live",
                                    json_integer(q.live), "max", json_integer(q.max), NULL));
        agent_call_set_attrs(call, tk_json_obj("quota_refused", json_true(), NULL));
        agent_result_error(out, "%s", err);
        return 0;
    }
    if (st != TK_OK) {
        agent_result_error(out, "%s", err);
        return 0;
    }
    if (h->spawn.created)
        report_spawn(call, h, s.trigger);
    return 1;
}

/* Runs steps on the chat's browser: *answer is browserd's {ok, results,
 * error?}. A browser found ended is replaced once when the steps navigate
 * first (a new page is what was asked), else the call says so. */
static int run_steps(agent_call *call, json_t *steps, int navigates, json_t **answer,
                     agent_result *out)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        browser_handle h;
        if (!acquire(call, navigates, &h, out))
            return 0;
        char err[512];
        int64_t t0 = tk_now_ms(), m0 = tk_mono_ns();
        tk_status st = browser_actions(&h, steps, answer, err, sizeof err);
        agent_span_record(agent_call_trace(call), agent_call_span_id(call), "browser_steps",
                          "browser", t0, (double)(tk_mono_ns() - m0) / 1e6,
                          st == TK_OK ? "ok" : "error",
                          tk_json_obj("steps", json_integer((json_int_t)json_array_size(steps)),
                                      "remote_id", json_string(h.remote_id), NULL));
        if (st == TK_OK)
            return 1;
        if (st == TK_ENOENT && navigates && attempt == 0)
            continue; /* ended meanwhile: the next acquire starts a new one */
        if (st == TK_ENOENT)
            agent_result_error(out, "%s; browser_navigate to a URL starts a new one", err);
        else if (st == TK_ECLOSED)
            agent_result_error(out, "stopped: the turn was cancelled");
        else
            agent_result_error(out, "the browser did not do it: %s", err);
        return 0;
    }
    return 0;
}

/* ---------- screenshots: stored as the user's downloads ---------- */

/* Stores a result's base64 JPEG; replaces its "data" with where it is. */
static int store_shot(agent_call *call, json_t *res, char *err, size_t errlen)
{
    const char *b64 = tk_json_str(res, "data");
    if (!b64) {
        snprintf(err, errlen, "the browser service answered no image");
        return 0;
    }
    size_t blen = strlen(b64), cap = blen / 4 * 3 + 3, n = 0;
    if (cap > MAX_SHOT) {
        snprintf(err, errlen, "the screenshot is larger than %u bytes", MAX_SHOT);
        return 0;
    }
    unsigned char *img = tk_malloc(cap + 1);
    if (sodium_base642bin(img, cap, b64, blen, NULL, &n, NULL, sodium_base64_VARIANT_ORIGINAL) !=
            0 ||
        n < 3 || img[0] != 0xff || img[1] != 0xd8) {
        free(img);
        snprintf(err, errlen, "the browser service answered an image that is not a JPEG");
        return 0;
    }
    unsigned char hash[32];
    crypto_hash_sha256(hash, img, n);
    char hex[65], id[TK_UUID_LEN], size[24], name[64];
    sodium_bin2hex(hex, sizeof hex, hash, sizeof hash);
    tk_uuid7(id);
    snprintf(size, sizeof size, "%zu", n);
    char stamp[40];
    tk_time_rfc3339(tk_now_ms(), stamp, sizeof stamp);
    snprintf(name, sizeof name, "screenshot-%.19s.jpg", stamp);
    for (char *p = name; *p; p++)
        if (*p == ':')
            *p = '-';
    const char *vals[] = {
        id,  agent_call_user(call), agent_call_session(call), "browser", name, "image/jpeg", size,
        hex, (const char *)img};
    int lens[9] = {0}, fmts[9] = {0};
    lens[8] = (int)n;
    fmts[8] = 1;
    PGconn *c = app_db_acquire();
    int ok = 0;
    if (c) {
        PGresult *r = PQexecParams(c,
                                   "INSERT INTO downloads (id, user_id, session_id, path, name, "
                                   "content_type, size, sha256, data) VALUES ($1, $2, $3, $4, $5, "
                                   "$6, $7, $8, $9)",
                                   9, NULL, vals, lens, fmts, 0);
        ok = PQresultStatus(r) == PGRES_COMMAND_OK;
        if (!ok)
            tk_warn("browser", "msg=\"screenshot not stored\" error=\"%s\"", PQerrorMessage(c));
        PQclear(r);
        app_db_release(c);
    }
    free(img);
    if (!ok) {
        snprintf(err, errlen, "the screenshot could not be stored (the database did not answer)");
        return 0;
    }
    char url[96];
    snprintf(url, sizeof url, "/api/downloads/%s", id);
    json_object_del(res, "data");
    json_object_set_new(res, "download_id", json_string(id));
    json_object_set_new(res, "image_url", json_string(url));
    json_object_set_new(res, "size", json_integer((json_int_t)n));
    return 1;
}

/* ---------- the answers the model reads ---------- */

static void page_line(tk_buf *b, const json_t *res)
{
    tk_buf_printf(b, "Page: \"%s\" at %s", tk_json_str_or(res, "title", ""),
                  tk_json_str_or(res, "url", ""));
    if (json_is_integer(json_object_get(res, "status")))
        tk_buf_printf(b, " (HTTP status %lld)", (long long)tk_json_int_or(res, "status", 0));
    tk_buf_append_str(b, "\n");
}

/* One step's result as text (screenshots already stored). */
static void describe(tk_buf *b, const char *action, const json_t *res)
{
    if (strcmp(action, "navigate") == 0) {
        page_line(b, res);
        if (tk_json_int_or(res, "status", 200) == 403)
            tk_buf_append_str(b, "(403 may be this server's outbound checks refusing the address; "
                                 "the page text says why)\n");
        tk_buf_printf(b, "Outline (use the @eN references with browser_click/browser_type):\n%s\n",
                      tk_json_str_or(res, "outline", ""));
    } else if (strcmp(action, "read") == 0) {
        page_line(b, res);
        const char *t = tk_json_str(res, "outline");
        if (t)
            tk_buf_printf(b, "Outline:\n%s\n", t);
        else
            tk_buf_printf(b, "Text:\n%s\n", tk_json_str_or(res, "text", ""));
    } else if (strcmp(action, "screenshot") == 0) {
        tk_buf_printf(b, "Screenshot taken (%lld bytes, JPEG) and shown to the user. ",
                      (long long)tk_json_int_or(res, "size", 0));
        page_line(b, res);
    } else {
        tk_buf_printf(b, "%s done. ", action);
        page_line(b, res);
        const char *t = tk_json_str(res, "outline");
        if (t)
            tk_buf_printf(b, "Outline now:\n%s\n", t);
    }
}

/* ---------- the steps the tools ask for ---------- */

static int is_action(const char *a)
{
    static const char *const known[] = {"navigate", "read",   "click",
                                        "type",     "scroll", "screenshot"};
    for (size_t i = 0; i < TK_ARRAY_LEN(known); i++)
        if (strcmp(a, known[i]) == 0)
            return 1;
    return 0;
}

/* A step of ours from the model's arguments (action given or from the tool);
 * NULL with err when it is not one. */
static json_t *make_step(const char *action, const json_t *a, char *err, size_t errlen)
{
    if (!action || !is_action(action)) {
        snprintf(err, errlen,
                 "each step needs an action: navigate, read, click, type, scroll or screenshot");
        return NULL;
    }
    json_t *st = tk_json_obj("action", json_string(action), NULL);
    if (strcmp(action, "navigate") == 0) {
        const char *url = tk_json_str(a, "url");
        if (!url || !*url || strlen(url) > MAX_URL) {
            json_decref(st);
            snprintf(err, errlen, "navigate needs a url (at most %d characters)", MAX_URL);
            return NULL;
        }
        json_object_set_new(st, "url", json_string(url));
    } else if (strcmp(action, "read") == 0) {
        const char *mode = tk_json_str_or(a, "mode", "text");
        if (strcmp(mode, "text") != 0 && strcmp(mode, "outline") != 0) {
            json_decref(st);
            snprintf(err, errlen, "mode is text or outline");
            return NULL;
        }
        json_object_set_new(st, "mode", json_string(mode));
    } else if (strcmp(action, "click") == 0 || strcmp(action, "type") == 0) {
        const char *ref = tk_json_str(a, "ref");
        if (!ref || !*ref || strlen(ref) > 32) {
            json_decref(st);
            snprintf(err, errlen, "%s needs a ref (@eN from the outline)", action);
            return NULL;
        }
        json_object_set_new(st, "ref", json_string(ref));
        if (action[0] == 't') {
            json_t *t = json_object_get(a, "text");
            if (!json_is_string(t) || json_string_length(t) > MAX_TYPE_TEXT ||
                memchr(json_string_value(t), 0, json_string_length(t))) {
                json_decref(st);
                snprintf(err, errlen, "type needs a text (at most %d bytes)", MAX_TYPE_TEXT);
                return NULL;
            }
            json_object_set(st, "text", t);
            json_object_set_new(st, "submit", json_boolean(tk_json_bool_or(a, "submit", 0)));
        }
    } else if (strcmp(action, "scroll") == 0) {
        const char *d = tk_json_str_or(a, "direction", "down");
        if (strcmp(d, "down") != 0 && strcmp(d, "up") != 0 && strcmp(d, "left") != 0 &&
            strcmp(d, "right") != 0) {
            json_decref(st);
            snprintf(err, errlen, "direction is down, up, left or right");
            return NULL;
        }
        json_object_set_new(st, "direction", json_string(d));
        int64_t amount = tk_json_int_or(a, "amount", 0);
        if (amount < 0 || amount > 100000) {
            json_decref(st);
            snprintf(err, errlen, "amount is 0 to 100000 pixels");
            return NULL;
        }
        if (amount)
            json_object_set_new(st, "amount", json_integer(amount));
    } else {
        json_object_set_new(
            st, "fullPage",
            json_boolean(tk_json_bool_or(a, "full_page", 0) || tk_json_bool_or(a, "fullPage", 0)));
    }
    return st;
}

/* Runs steps and answers: each result described, screenshots stored and
 * listed in the data the user sees. A step marked _after (the outline run_one
 * adds after a click or type, as the page may have changed) is told as part
 * of the step before it. */
static void run_and_answer(agent_call *call, json_t *steps, agent_result *out)
{
    int navigates = 0;
    size_t i;
    json_t *st;
    json_array_foreach(steps, i, st) navigates |=
        strcmp(tk_json_str_or(st, "action", ""), "navigate") == 0;
    json_t *answer;
    if (!run_steps(call, steps, navigates, &answer, out))
        return;
    tk_buf b;
    tk_buf_init(&b, 64u << 20);
    json_t *shots = json_array();
    json_t *results = json_object_get(answer, "results");
    char err[256] = "";
    int failed = 0;
    json_t *res;
    json_array_foreach(results, i, res)
    {
        const char *action = tk_json_str_or(json_array_get(steps, i), "action", "?");
        if (json_is_true(json_object_get(json_array_get(steps, i), "_after"))) {
            /* the outline that follows a click or type: described with it */
            const char *t = tk_json_str(res, "outline");
            tk_buf_printf(&b, "Outline now:\n%s\n", t ? t : "");
            continue;
        }
        if (strcmp(action, "screenshot") == 0) {
            if (!store_shot(call, res, err, sizeof err)) {
                failed = 1;
                break;
            }
            json_array_append_new(
                shots, tk_json_obj("download_id", json_incref(json_object_get(res, "download_id")),
                                   "url", json_incref(json_object_get(res, "image_url")), "page",
                                   json_incref(json_object_get(res, "url")), "title",
                                   json_incref(json_object_get(res, "title")), "size",
                                   json_incref(json_object_get(res, "size")), "mime_type",
                                   json_string("image/jpeg"), NULL));
        }
        if (json_array_size(steps) > 1)
            tk_buf_printf(&b, "[step %zu: %s] ", i + 1, action);
        describe(&b, action, res);
    }
    json_t *e = json_object_get(answer, "error");
    if (!failed && json_is_object(e)) {
        failed = 1;
        json_int_t at = json_integer_value(json_object_get(e, "step"));
        const char *what = tk_json_str_or(json_array_get(steps, (size_t)at), "action", "?");
        const char *m = tk_json_str_or(e, "message", "?");
        if (json_array_size(steps) == 1 ||
            json_is_true(json_object_get(json_array_get(steps, (size_t)at), "_after")))
            snprintf(err, sizeof err, "%s failed: %s", what, m);
        else
            snprintf(err, sizeof err, "step %lld (%s) failed: %s", (long long)at + 1, what, m);
    }
    if (failed)
        tk_buf_printf(&b, "%s%s\n", b.len ? "\n" : "", err);
    agent_result_take(out, tk_buf_steal(&b, NULL), failed);
    const json_t *last = json_array_get(results, json_array_size(results) - 1);
    out->data = tk_json_obj("url", json_string(tk_json_str_or(last, "url", "")), "title",
                            json_string(tk_json_str_or(last, "title", "")), NULL);
    if (json_array_size(shots))
        json_object_set_new(out->data, "screenshots", shots);
    else
        json_decref(shots);
    json_decref(answer);
}

/* A tool of one action: the step from the arguments (plus the outline after a
 * click or type). */
static void run_one(agent_call *call, const char *action, const json_t *args, agent_result *out)
{
    char err[256];
    json_t *st = make_step(action, args, err, sizeof err);
    if (!st) {
        agent_result_error(out, "%s", err);
        return;
    }
    json_t *steps = json_array();
    json_array_append_new(steps, st);
    if (strcmp(action, "click") == 0 || strcmp(action, "type") == 0)
        json_array_append_new(steps,
                              tk_json_obj("action", json_string("read"), "mode",
                                          json_string("outline"), "_after", json_true(), NULL));
    run_and_answer(call, steps, out);
    json_decref(steps);
}

static void run_navigate(agent_call *call, const json_t *args, agent_result *out)
{
    run_one(call, "navigate", args, out);
}
static void run_read(agent_call *call, const json_t *args, agent_result *out)
{
    run_one(call, "read", args, out);
}
static void run_click(agent_call *call, const json_t *args, agent_result *out)
{
    run_one(call, "click", args, out);
}
static void run_type(agent_call *call, const json_t *args, agent_result *out)
{
    run_one(call, "type", args, out);
}
static void run_scroll(agent_call *call, const json_t *args, agent_result *out)
{
    run_one(call, "scroll", args, out);
}
static void run_screenshot(agent_call *call, const json_t *args, agent_result *out)
{
    run_one(call, "screenshot", args, out);
}

static void run_actions(agent_call *call, const json_t *args, agent_result *out)
{
    json_t *in = json_object_get(args, "steps");
    if (!json_is_array(in) || json_array_size(in) == 0 || json_array_size(in) > MAX_STEPS) {
        agent_result_error(out, "\"steps\" must be an array of 1 to %d steps", MAX_STEPS);
        return;
    }
    json_t *steps = json_array();
    size_t i;
    json_t *a;
    json_array_foreach(in, i, a)
    {
        char err[256];
        json_t *st =
            json_is_object(a) ? make_step(tk_json_str(a, "action"), a, err, sizeof err) : NULL;
        if (!st) {
            agent_result_error(out, "step %zu: %s", i + 1,
                               json_is_object(a) ? err : "a step is an object");
            json_decref(steps);
            return;
        }
        json_array_append_new(steps, st);
    }
    run_and_answer(call, steps, out);
    json_decref(steps);
}

#define STEP_PROPS                                                                                 \
    "\"url\":{\"type\":\"string\"},\"mode\":{\"type\":\"string\",\"enum\":[\"text\","              \
    "\"outline\"]},\"ref\":{\"type\":\"string\"},\"text\":{\"type\":\"string\"},\"submit\":{"      \
    "\"type\":\"boolean\"},\"direction\":{\"type\":\"string\",\"enum\":[\"down\",\"up\","          \
    "\"left\",\"right\"]},\"amount\":{\"type\":\"integer\",\"minimum\":0},\"full_page\":{"         \
    "\"type\":\"boolean\"}"

static const agent_tool tools[] = {
    {.name = "browser_navigate",
     .lane = AGENT_LANE_BROWSER,
     .description = "Open a URL in the chat's own browser (a real Chromium; the first browse "
                    "of a chat starts it). Answers the page's title, URL, HTTP status and an "
                    "outline of the page (its accessibility tree) where links, buttons and "
                    "fields carry @eN references for browser_click and browser_type.",
     .parameters = "{\"type\":\"object\",\"properties\":{\"url\":{\"type\":\"string\"}},"
                   "\"required\":[\"url\"]}",
     .run = run_navigate},
    {.name = "browser_read",
     .lane = AGENT_LANE_BROWSER,
     .description = "Read the page open in the chat's browser: its readable text (mode text, "
                    "the default) or its outline with fresh @eN references (mode outline).",
     .parameters = "{\"type\":\"object\",\"properties\":{\"mode\":{\"type\":\"string\","
                   "\"enum\":[\"text\",\"outline\"]}}}",
     .run = run_read},
    {.name = "browser_click",
     .lane = AGENT_LANE_BROWSER,
     .description = "Click an element of the open page by its @eN reference from the latest "
                    "outline; answers the page after the click and its new outline.",
     .parameters = "{\"type\":\"object\",\"properties\":{\"ref\":{\"type\":\"string\"}},"
                   "\"required\":[\"ref\"]}",
     .run = run_click},
    {.name = "browser_type",
     .lane = AGENT_LANE_BROWSER,
     .description = "Type text into a field of the open page (by its @eN reference), "
                    "replacing its value; submit presses Enter afterwards.",
     .parameters = "{\"type\":\"object\",\"properties\":{\"ref\":{\"type\":\"string\"},"
                   "\"text\":{\"type\":\"string\"},\"submit\":{\"type\":\"boolean\"}},"
                   "\"required\":[\"ref\",\"text\"]}",
     .run = run_type},
    {.name = "browser_scroll",
     .lane = AGENT_LANE_BROWSER,
     .description = "Scroll the open page (down, up, left or right; amount in pixels, default "
                    "most of a screen).",
     .parameters = "{\"type\":\"object\",\"properties\":{\"direction\":{\"type\":\"string\","
                   "\"enum\":[\"down\",\"up\",\"left\",\"right\"]},\"amount\":{\"type\":"
                   "\"integer\",\"minimum\":0}}}",
     .run = run_scroll},
    {.name = "browser_screenshot",
     .lane = AGENT_LANE_BROWSER,
     .description = "Take a screenshot of the open page (full_page: the whole page, not just "
                    "the window); it is shown to the user.",
     .parameters = "{\"type\":\"object\",\"properties\":{\"full_page\":{\"type\":\"boolean\"}}}",
     .run = run_screenshot},
    {.name = "browser_actions",
     .lane = AGENT_LANE_BROWSER,
     .description = "Several browser steps in one call, in order, stopping at the first that "
                    "fails: each step is {action: navigate|read|click|type|scroll|screenshot} "
                    "with that action's arguments.",
     .parameters = "{\"type\":\"object\",\"properties\":{\"steps\":{\"type\":\"array\","
                   "\"minItems\":1,\"maxItems\":20,\"items\":{\"type\":\"object\","
                   "\"properties\":{\"action\":{\"type\":\"string\",\"enum\":[\"navigate\","
                   "\"read\",\"click\",\"type\",\"scroll\",\"screenshot\"]}," STEP_PROPS
                   "},\"required\":[\"action\"]}}},\"required\":[\"steps\"]}",
     .run = run_actions},
};

void tools_browser_register(void)
{
    agent_tools_register_table(tools, TK_ARRAY_LEN(tools));
}
