/*
 * api.c — Steel's session API and health over lib/httpd (see api.h).
 */
#include "browserd/api.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/json.h"
#include "lib/log.h"
#include "lib/prog.h"
#include "lib/tktime.h"
#include "browserd/page.h"

#define MAX_COOKIES    1000
#define MAX_UA         512
#define MIN_DIMENSION  100
#define MAX_DIMENSION  4096
#define MIN_TIMEOUT_MS 1000

int brd_api_auth(tk_req *r, void *ud)
{
    brd_api *a = ud;
    const char *k = tk_req_header(r, "steel-api-key");
    if (!a->api_key || !a->api_key[0] || !k || !tk_str_eq_ct(k, a->api_key)) {
        tk_respond_error(r, 401, "UNAUTHORIZED", "a valid steel-api-key header is required");
        return 1;
    }
    return 0;
}

/* The Host the client used, if it looks like one; else the loopback name. */
static const char *req_host(tk_req *r)
{
    const char *h = tk_req_header(r, "Host");
    if (!h || !h[0] || strlen(h) > 255)
        return "localhost";
    for (const char *p = h; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              strchr(".-:[]", *p)))
            return "localhost";
    return h;
}

static int is_truthy(const json_t *v)
{
    if (!v || json_is_null(v) || json_is_false(v))
        return 0;
    if (json_is_string(v))
        return json_string_length(v) > 0;
    if (json_is_array(v))
        return json_array_size(v) > 0;
    if (json_is_object(v))
        return json_object_size(v) > 0;
    return 1;
}

static int text_ok(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n == 0 || n > max)
        return 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return 0;
    return 1;
}

#define BAD(...)                                                                                   \
    do {                                                                                           \
        snprintf(msg, msglen, __VA_ARGS__);                                                        \
        return 400;                                                                                \
    } while (0)

/* One cookie: the CookieParam fields CDP knows, each of its type. */
static int copy_cookie(const json_t *c, size_t i, json_t *out, char *msg, size_t msglen)
{
    if (!json_is_object(c))
        BAD("sessionContext.cookies[%zu] must be an object", i);
    static const char *const strs[] = {"name", "value",    "url",      "domain",
                                       "path", "sameSite", "priority", "sourceScheme"};
    static const char *const bools[] = {"secure", "httpOnly", "sameParty"};
    const char *name = tk_json_str(c, "name"), *value = tk_json_str(c, "value");
    if (!name || !value)
        BAD("sessionContext.cookies[%zu] needs a string name and value", i);
    for (size_t k = 0; k < TK_ARRAY_LEN(strs); k++) {
        json_t *v = json_object_get(c, strs[k]);
        if (!v || json_is_null(v))
            continue;
        if (!json_is_string(v) || json_string_length(v) > 4096)
            BAD("sessionContext.cookies[%zu].%s must be a string (at most 4096 bytes)", i, strs[k]);
        json_object_set(out, strs[k], v);
    }
    for (size_t k = 0; k < TK_ARRAY_LEN(bools); k++) {
        json_t *v = json_object_get(c, bools[k]);
        if (!v || json_is_null(v))
            continue;
        if (!json_is_boolean(v))
            BAD("sessionContext.cookies[%zu].%s must be a boolean", i, bools[k]);
        json_object_set(out, bools[k], v);
    }
    json_t *v;
    if ((v = json_object_get(c, "expires")) && !json_is_null(v)) {
        if (!json_is_number(v))
            BAD("sessionContext.cookies[%zu].expires must be a number", i);
        /* Steel's "session" cookies carry expires -1: CDP wants it left out */
        if (json_number_value(v) > 0)
            json_object_set(out, "expires", v);
    }
    if ((v = json_object_get(c, "sourcePort")) && !json_is_null(v)) {
        if (!json_is_integer(v))
            BAD("sessionContext.cookies[%zu].sourcePort must be an integer", i);
        json_object_set(out, "sourcePort", v);
    }
    if ((v = json_object_get(c, "partitionKey")) && !json_is_null(v)) {
        const char *site = tk_json_str(v, "topLevelSite");
        if (!json_is_object(v) || !site)
            BAD("sessionContext.cookies[%zu].partitionKey needs topLevelSite", i);
        json_object_set_new(out, "partitionKey",
                            tk_json_obj("topLevelSite", json_string(site), "hasCrossSiteAncestor",
                                        json_boolean(tk_json_bool_or(v, "hasCrossSiteAncestor", 0)),
                                        NULL));
    }
    if (!json_object_get(out, "url") && !json_object_get(out, "domain"))
        BAD("sessionContext.cookies[%zu] needs a url or a domain", i);
    return 0;
}

int brd_api_parse_create(const brd_api *api, const json_t *b, brd_session_req *req,
                         json_t **cookies, char *msg, size_t msglen)
{
    memset(req, 0, sizeof *req);
    *cookies = NULL;
    if (!b)
        return 0;
    if (!json_is_object(b))
        BAD("the body must be a JSON object");
    /* what this service cannot do is refused, not ignored */
    static const struct {
        const char *field, *why;
    } refused[] = {
        {"proxyUrl", "the browser's only way out is this service's checking proxy"},
        {"useProxy", "the browser's only way out is this service's checking proxy"},
        {"solveCaptcha", "captcha solving is not offered"},
        {"persistProfile", "profiles are wiped at release"},
        {"profileId", "profiles are wiped at release"},
        {"extensionIds", "extensions are not offered"},
        {"isSelenium", "only CDP sessions are offered"},
        {"blockAds", "ad blocking is not offered yet"},
        {"optimizeBandwidth", "bandwidth options are not offered yet"},
    };
    for (size_t i = 0; i < TK_ARRAY_LEN(refused); i++)
        if (is_truthy(json_object_get(b, refused[i].field)))
            BAD("%s is not supported: %s", refused[i].field, refused[i].why);
    json_t *v;
    if ((v = json_object_get(b, "headless")) && json_is_false(v))
        BAD("headless: false is not supported (browsers here have no display)");
    if ((v = json_object_get(b, "deviceConfig")) && !json_is_null(v)) {
        const char *dev = tk_json_str(v, "device");
        if (!json_is_object(v) || (dev && strcmp(dev, "desktop") != 0))
            BAD("deviceConfig.device: only \"desktop\" is supported");
    }
    if ((v = json_object_get(b, "sessionId")) && !json_is_null(v)) {
        if (!json_is_string(v) || !tk_uuid_valid(json_string_value(v)))
            BAD("sessionId must be a UUID");
        req->id = json_string_value(v);
    }
    if ((v = json_object_get(b, "userAgent")) && !json_is_null(v)) {
        if (!json_is_string(v) || !text_ok(json_string_value(v), MAX_UA))
            BAD("userAgent must be 1 to %d characters without control characters", MAX_UA);
        req->user_agent = json_string_value(v);
    }
    if ((v = json_object_get(b, "dimensions")) && !json_is_null(v)) {
        json_t *w = json_object_get(v, "width"), *h = json_object_get(v, "height");
        if (!json_is_object(v) || !json_is_integer(w) || !json_is_integer(h) ||
            json_integer_value(w) < MIN_DIMENSION || json_integer_value(w) > MAX_DIMENSION ||
            json_integer_value(h) < MIN_DIMENSION || json_integer_value(h) > MAX_DIMENSION)
            BAD("dimensions needs integer width and height from %d to %d", MIN_DIMENSION,
                MAX_DIMENSION);
        req->width = (int)json_integer_value(w);
        req->height = (int)json_integer_value(h);
    }
    if ((v = json_object_get(b, "timeout")) && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < MIN_TIMEOUT_MS ||
            json_integer_value(v) > api->max_timeout_ms)
            BAD("timeout is in milliseconds, from %d to %lld (BROWSERD_MAX_TIMEOUT)",
                MIN_TIMEOUT_MS, (long long)api->max_timeout_ms);
        req->timeout_ms = json_integer_value(v);
    }
    if ((v = json_object_get(b, "sessionContext")) && !json_is_null(v)) {
        if (!json_is_object(v))
            BAD("sessionContext must be an object");
        static const char *const storage[] = {"localStorage", "sessionStorage", "indexedDB"};
        for (size_t i = 0; i < TK_ARRAY_LEN(storage); i++)
            if (is_truthy(json_object_get(v, storage[i])))
                BAD("sessionContext.%s is not supported yet (cookies are)", storage[i]);
        json_t *cs = json_object_get(v, "cookies");
        if (cs && !json_is_null(cs)) {
            if (!json_is_array(cs) || json_array_size(cs) > MAX_COOKIES)
                BAD("sessionContext.cookies must be an array of at most %d", MAX_COOKIES);
            json_t *out = json_array();
            size_t i;
            json_t *c;
            json_array_foreach(cs, i, c)
            {
                json_t *one = json_object();
                int rc = copy_cookie(c, i, one, msg, msglen);
                if (rc) {
                    json_decref(one);
                    json_decref(out);
                    return rc;
                }
                json_array_append_new(out, one);
            }
            *cookies = out;
            req->cookies = out;
        }
    }
    return 0;
}

/* ---------- handlers ---------- */

static void create_session(tk_req *r, void *ud)
{
    brd_api *a = ud;
    size_t len;
    tk_req_body(r, &len);
    json_t *b = NULL;
    if (len > 0 && !(b = tk_req_json(r, 1)))
        return;
    brd_session_req req;
    json_t *cookies;
    char msg[512];
    int rc = brd_api_parse_create(a, b, &req, &cookies, msg, sizeof msg);
    if (rc) {
        tk_respond_error(r, rc, "INVALID_REQUEST", "%s", msg);
        return;
    }
    brd_session *s;
    int http = 500;
    tk_status st = brd_session_create(a->mgr, &req, &s, &http, msg, sizeof msg);
    json_decref(cookies);
    if (st != TK_OK) {
        const char *code = http == 409   ? "CONFLICT"
                           : http == 429 ? "TOO_MANY_SESSIONS"
                           : http == 400 ? "INVALID_REQUEST"
                           : http == 503 ? "UNAVAILABLE"
                                         : "BROWSER_FAILED";
        tk_respond_error(r, http, code, "%s", msg);
        return;
    }
    tk_respond_json(r, 200, brd_session_details(s, req_host(r)));
    brd_session_unref(s);
}

static void list_sessions(tk_req *r, void *ud)
{
    brd_api *a = ud;
    int64_t limit = 50;
    const char *l = tk_req_query(r, "limit");
    if (l && tk_parse_i64(l, 1, 100, &limit) != TK_OK) {
        tk_respond_error(r, 400, "INVALID_REQUEST", "limit must be from 1 to 100");
        return;
    }
    const char *status = tk_req_query(r, "status");
    if (status && strcmp(status, "live") != 0 && strcmp(status, "released") != 0 &&
        strcmp(status, "failed") != 0) {
        tk_respond_error(r, 400, "INVALID_REQUEST", "status must be live, released or failed");
        return;
    }
    tk_respond_json(
        r, 200,
        brd_session_list(a->mgr, tk_req_query(r, "cursorId"), (int)limit, status, req_host(r)));
}

static brd_session *session_or_404(tk_req *r, brd_api *a)
{
    const char *id = tk_req_param(r, "id");
    brd_session *s = id ? brd_session_get(a->mgr, id) : NULL;
    if (!s)
        tk_respond_error(r, 404, "NOT_FOUND", "no session %s", id ? id : "");
    return s;
}

static void get_session(tk_req *r, void *ud)
{
    brd_session *s = session_or_404(r, ud);
    if (!s)
        return;
    tk_respond_json(r, 200, brd_session_details(s, req_host(r)));
    brd_session_unref(s);
}

static void release_session(tk_req *r, void *ud)
{
    brd_session *s = session_or_404(r, ud);
    if (!s)
        return;
    tk_status st = brd_session_release(s);
    json_t *j = brd_session_details(s, req_host(r));
    json_object_set_new(j, "success", json_true());
    json_object_set_new(j, "message",
                        json_string(st == TK_OK ? "Session released" : "The session had ended"));
    tk_respond_json(r, 200, j);
    brd_session_unref(s);
}

static void release_all(tk_req *r, void *ud)
{
    brd_api *a = ud;
    int n = brd_session_release_all(a->mgr);
    char m[64];
    snprintf(m, sizeof m, "Released %d session%s", n, n == 1 ? "" : "s");
    tk_respond_json(r, 200, tk_json_obj("success", json_true(), "message", json_string(m), NULL));
}

static void health(tk_req *r, void *ud)
{
    brd_api *a = ud;
    brd_session_stats st;
    brd_session_mgr_stats(a->mgr, &st);
    tk_respond_json(r, 200,
                    tk_json_obj("status", json_string("ok"), "sessions", json_integer(st.live),
                                "warm", json_integer(st.pool), NULL));
}

/* ---------- page actions ---------- */

static void respond_page_error(tk_req *r, tk_status st, const char *msg)
{
    int http = st == TK_EINVAL || st == TK_EDENIED || st == TK_ENOENT ? 400
               : st == TK_ETIMEOUT                                    ? 504
               : st == TK_ECLOSED                                     ? 410
                                                                      : 502;
    const char *code = st == TK_EDENIED    ? "URL_REFUSED"
                       : st == TK_ETIMEOUT ? "TIMEOUT"
                       : st == TK_ECLOSED  ? "BROWSER_GONE"
                       : http == 400       ? "INVALID_REQUEST"
                                           : "PAGE_FAILED";
    tk_respond_error(r, http, code, "%s", msg);
}

/* Steel's one-shot actions: {url, delay?} on a browser of their own (a
 * session taken and released around the request). */
typedef struct {
    const char *url;
    int64_t delay;
} oneshot;

static int parse_oneshot(tk_req *r, json_t *b, oneshot *o)
{
    if (!json_is_object(b)) {
        tk_respond_error(r, 400, "INVALID_REQUEST", "the body must be a JSON object with a url");
        return 1;
    }
    o->url = tk_json_str(b, "url");
    char err[200];
    if (!o->url) {
        tk_respond_error(r, 400, "INVALID_REQUEST", "url is required");
        return 1;
    }
    tk_status st = brd_page_check_url(o->url, err, sizeof err);
    if (st != TK_OK) {
        respond_page_error(r, st, err);
        return 1;
    }
    json_t *d = json_object_get(b, "delay");
    o->delay = 0;
    if (d && !json_is_null(d)) {
        if (!json_is_integer(d) || json_integer_value(d) < 0 || json_integer_value(d) > 10000) {
            tk_respond_error(r, 400, "INVALID_REQUEST", "delay is 0 to 10000 ms");
            return 1;
        }
        o->delay = json_integer_value(d);
    }
    return 0;
}

/* A session for one request, its page at o->url. NULL after responding. */
static brd_session *oneshot_open(tk_req *r, brd_api *a, const oneshot *o, json_t **info)
{
    brd_session_req req = {.timeout_ms = 120000};
    brd_session *s;
    int http = 500;
    char err[512];
    if (brd_session_create(a->mgr, &req, &s, &http, err, sizeof err) != TK_OK) {
        tk_respond_error(r, http, http == 429 ? "TOO_MANY_SESSIONS" : "BROWSER_FAILED", "%s", err);
        return NULL;
    }
    brd_session_lock(s);
    tk_status st = brd_page_goto(s, o->url, BRD_PAGE_NAV_TIMEOUT, info, err, sizeof err);
    if (st == TK_OK && o->delay > 0)
        tk_sleep_ms(o->delay);
    if (st != TK_OK) {
        brd_session_unlock(s);
        brd_session_release(s);
        brd_session_unref(s);
        respond_page_error(r, st, err);
        return NULL;
    }
    return s;
}

static void oneshot_close(brd_session *s)
{
    brd_session_unlock(s);
    brd_session_release(s);
    brd_session_unref(s);
}

static void scrape(tk_req *r, void *ud)
{
    json_t *b = tk_req_json(r, 0);
    oneshot o;
    if (!b || parse_oneshot(r, b, &o))
        return;
    unsigned formats = 0;
    json_t *f = json_object_get(b, "format");
    if (!f || json_is_null(f)) {
        formats = BRD_PAGE_HTML;
    } else if (json_is_array(f)) {
        size_t i;
        json_t *x;
        json_array_foreach(f, i, x)
        {
            const char *n = json_string_value(x);
            if (n && strcmp(n, "html") == 0)
                formats |= BRD_PAGE_HTML;
            else if (n && strcmp(n, "markdown") == 0)
                formats |= BRD_PAGE_MARKDOWN;
            else {
                tk_respond_error(r, 400, "INVALID_REQUEST",
                                 "format: html and markdown are offered (not %s)", n ? n : "?");
                return;
            }
        }
    } else {
        tk_respond_error(r, 400, "INVALID_REQUEST", "format must be an array");
        return;
    }
    int want_shot = tk_json_bool_or(b, "screenshot", 0), want_pdf = tk_json_bool_or(b, "pdf", 0);
    json_t *info;
    brd_session *s = oneshot_open(r, ud, &o, &info);
    if (!s)
        return;
    json_t *out;
    char err[512];
    tk_status st = brd_page_scrape(s, formats, &out, err, sizeof err);
    if (st == TK_OK) {
        json_t *meta = json_object_get(out, "metadata");
        json_object_set(meta, "statusCode", json_object_get(info, "status"));
        tk_buf img;
        tk_buf_init(&img, BRD_PAGE_MAX_IMAGE);
        for (int k = 0; k < 2 && st == TK_OK; k++) {
            if (!(k == 0 ? want_shot : want_pdf))
                continue;
            tk_buf_reset(&img);
            st = k == 0 ? brd_page_screenshot(s, "jpeg", 0, &img, err, sizeof err)
                        : brd_page_pdf(s, &img, err, sizeof err);
            if (st != TK_OK)
                break;
            size_t n = sodium_base64_encoded_len(img.len, sodium_base64_VARIANT_ORIGINAL);
            char *enc = tk_malloc(n);
            sodium_bin2base64(enc, n, (const unsigned char *)img.data, img.len,
                              sodium_base64_VARIANT_ORIGINAL);
            json_object_set_new(out, k == 0 ? "screenshot" : "pdf", json_string(enc));
            free(enc);
        }
        tk_buf_free(&img);
    }
    oneshot_close(s);
    json_decref(info);
    if (st != TK_OK) {
        json_decref(out);
        respond_page_error(r, st, err);
        return;
    }
    tk_respond_json(r, 200, out);
}

static void capture(tk_req *r, void *ud, int pdf)
{
    json_t *b = tk_req_json(r, 0);
    oneshot o;
    if (!b || parse_oneshot(r, b, &o))
        return;
    json_t *info;
    brd_session *s = oneshot_open(r, ud, &o, &info);
    if (!s)
        return;
    json_decref(info);
    tk_buf img;
    tk_buf_init(&img, BRD_PAGE_MAX_IMAGE);
    char err[512];
    tk_status st = pdf ? brd_page_pdf(s, &img, err, sizeof err)
                       : brd_page_screenshot(s, "jpeg", tk_json_bool_or(b, "fullPage", 0), &img,
                                             err, sizeof err);
    oneshot_close(s);
    if (st != TK_OK)
        respond_page_error(r, st, err);
    else
        tk_respond(r, 200, pdf ? "application/pdf" : "image/jpeg", img.data, img.len);
    tk_buf_free(&img);
}

static void screenshot(tk_req *r, void *ud)
{
    capture(r, ud, 0);
}

static void pdf(tk_req *r, void *ud)
{
    capture(r, ud, 1);
}

#define MAX_STEPS      20
#define MAX_READ_CHARS 200000

/* One step of POST /v1/sessions/{id}/actions; *res gets what it answers. */
static tk_status step(brd_session *s, const json_t *st_, json_t **res, char *err, size_t errlen)
{
    *res = NULL;
    const char *act = tk_json_str(st_, "action");
    if (!act) {
        snprintf(err, errlen, "each step needs an action");
        return TK_EINVAL;
    }
    tk_status st;
    if (strcmp(act, "navigate") == 0) {
        const char *url = tk_json_str(st_, "url");
        if (!url) {
            snprintf(err, errlen, "navigate needs a url");
            return TK_EINVAL;
        }
        json_t *info;
        if ((st = brd_page_goto(s, url, BRD_PAGE_NAV_TIMEOUT, &info, err, errlen)) != TK_OK)
            return st;
        char *outline;
        if ((st = brd_page_outline(s, &outline, err, errlen)) != TK_OK) {
            json_decref(info);
            return st;
        }
        json_object_set_new(info, "outline", json_string(outline));
        free(outline);
        *res = info;
        return TK_OK;
    }
    if (strcmp(act, "read") == 0) {
        const char *mode = tk_json_str_or(st_, "mode", "text");
        char *text;
        if (strcmp(mode, "outline") == 0)
            st = brd_page_outline(s, &text, err, errlen);
        else if (strcmp(mode, "text") == 0)
            st = brd_page_text(s, MAX_READ_CHARS, &text, err, errlen);
        else {
            snprintf(err, errlen, "mode is text or outline");
            return TK_EINVAL;
        }
        if (st != TK_OK)
            return st;
        json_t *info;
        if ((st = brd_page_info(s, &info, err, errlen)) != TK_OK) {
            free(text);
            return st;
        }
        json_object_set_new(info, mode, json_string(text));
        free(text);
        *res = info;
        return TK_OK;
    }
    if (strcmp(act, "click") == 0 || strcmp(act, "type") == 0) {
        const char *ref = tk_json_str(st_, "ref");
        if (!ref) {
            snprintf(err, errlen, "%s needs a ref (@eN from the outline)", act);
            return TK_EINVAL;
        }
        if (act[0] == 'c') {
            st = brd_page_click(s, ref, err, errlen);
        } else {
            const char *text = tk_json_str(st_, "text");
            if (!text || strlen(text) > 100000) {
                snprintf(err, errlen, "type needs a text (at most 100000 bytes)");
                return TK_EINVAL;
            }
            st = brd_page_type(s, ref, text, tk_json_bool_or(st_, "submit", 0), err, errlen);
        }
    } else if (strcmp(act, "scroll") == 0) {
        int64_t amount = tk_json_int_or(st_, "amount", 0);
        if (amount < 0 || amount > 100000) {
            snprintf(err, errlen, "amount is 0 to 100000 pixels");
            return TK_EINVAL;
        }
        st = brd_page_scroll(s, tk_json_str_or(st_, "direction", "down"), (int)amount, err, errlen);
    } else if (strcmp(act, "screenshot") == 0) {
        tk_buf img;
        tk_buf_init(&img, BRD_PAGE_MAX_IMAGE);
        st = brd_page_screenshot(s, "jpeg", tk_json_bool_or(st_, "fullPage", 0), &img, err, errlen);
        if (st == TK_OK && (st = brd_page_info(s, res, err, errlen)) == TK_OK) {
            size_t n = sodium_base64_encoded_len(img.len, sodium_base64_VARIANT_ORIGINAL);
            char *enc = tk_malloc(n);
            sodium_bin2base64(enc, n, (const unsigned char *)img.data, img.len,
                              sodium_base64_VARIANT_ORIGINAL);
            json_object_set_new(*res, "mimeType", json_string("image/jpeg"));
            json_object_set_new(*res, "data", json_string(enc));
            free(enc);
        }
        tk_buf_free(&img);
        return st;
    } else {
        snprintf(err, errlen, "unknown action %.40s", act);
        return TK_EINVAL;
    }
    if (st != TK_OK)
        return st;
    return brd_page_info(s, res, err, errlen);
}

static void actions(tk_req *r, void *ud)
{
    json_t *b = tk_req_json(r, 0);
    if (!b)
        return;
    json_t *steps = json_object_get(b, "steps");
    if (!json_is_array(steps) || json_array_size(steps) == 0 ||
        json_array_size(steps) > MAX_STEPS) {
        tk_respond_error(r, 400, "INVALID_REQUEST", "steps must be an array of 1 to %d", MAX_STEPS);
        return;
    }
    brd_session *s = session_or_404(r, ud);
    if (!s)
        return;
    if (brd_session_status(s) != BRD_SESSION_LIVE) {
        tk_respond_error(r, 409, "SESSION_ENDED", "the session has ended");
        brd_session_unref(s);
        return;
    }
    brd_session_touch(s);
    brd_session_lock(s);
    json_t *results = json_array();
    json_t *failure = NULL;
    size_t i;
    json_t *x;
    json_array_foreach(steps, i, x)
    {
        json_t *res;
        char err[512];
        tk_status st = step(s, x, &res, err, sizeof err);
        if (st != TK_OK) {
            failure =
                tk_json_obj("step", json_integer((json_int_t)i), "code",
                            json_string(tk_status_str(st)), "message", json_string(err), NULL);
            break;
        }
        json_array_append_new(results, res);
    }
    brd_session_unlock(s);
    brd_session_touch(s);
    brd_session_unref(s);
    tk_respond_json(
        r, 200,
        tk_json_obj("results", results, "ok", json_boolean(!failure), "error", failure, NULL));
}

static tk_route routes[] = {
    {"GET", "/v1/health", health, NULL, TK_ROUTE_PUBLIC | TK_ROUTE_QUIET},
    {"POST", "/v1/sessions", create_session, NULL, TK_ROUTE_BLOCKING},
    {"GET", "/v1/sessions", list_sessions, NULL, 0},
    {"POST", "/v1/sessions/release", release_all, NULL, TK_ROUTE_BLOCKING},
    {"GET", "/v1/sessions/{id}", get_session, NULL, 0},
    {"POST", "/v1/sessions/{id}/release", release_session, NULL, TK_ROUTE_BLOCKING},
    {"POST", "/v1/sessions/{id}/actions", actions, NULL, TK_ROUTE_BLOCKING},
    {"POST", "/v1/scrape", scrape, NULL, TK_ROUTE_BLOCKING},
    {"POST", "/v1/screenshot", screenshot, NULL, TK_ROUTE_BLOCKING},
    {"POST", "/v1/pdf", pdf, NULL, TK_ROUTE_BLOCKING},
};

const tk_route *brd_api_routes(brd_api *api, size_t *n)
{
    for (size_t i = 0; i < TK_ARRAY_LEN(routes); i++)
        routes[i].ud = api;
    *n = TK_ARRAY_LEN(routes);
    return routes;
}
