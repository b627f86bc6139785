/* One streamed model call: the HTTP transfer, retries with back-off, timeouts,
 * and the mapping of every way a call can fail to a clear error. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/llm/llm.h"
#include "lib/log.h"
#include "lib/tktime.h"

#define ERRBODY_MAX (64 * 1024)

struct llm_stream {
    tk_httpm *m;
    tk_evloop *loop;
    llm_kind kind;
    char *provider;
    char *url;
    char *body;
    size_t body_len;
    char *hdrs[5];
    llm_callbacks cb;
    void *ud;
    llm_result res;
    llm_parser *parser;
    tk_httpm_xfer *x;
    tk_ev_timer *timer;
    tk_buf errbody;
    long idle_timeout_ms, timeout_ms;
    int max_retries;
    int64_t t0;
    int cancelled, done, in_cb, free_wanted;
    int report_pending; /* the timer reports a failure instead of retrying */
};

static void attempt(llm_stream *s);

static void really_free(llm_stream *s)
{
    if (s->x)
        tk_httpm_cancel(s->x);
    if (s->timer)
        tk_ev_timer_del(s->timer);
    llm_parser_free(s->parser);
    llm_result_free(&s->res);
    tk_buf_free(&s->errbody);
    for (size_t i = 0; i < TK_ARRAY_LEN(s->hdrs); i++)
        free(s->hdrs[i]);
    free(s->provider);
    free(s->url);
    free(s->body);
    free(s);
}

void llm_stream_free(llm_stream *s)
{
    if (!s)
        return;
    if (s->in_cb) {
        s->free_wanted = 1;
        return;
    }
    really_free(s);
}

static void finish(llm_stream *s)
{
    if (s->done || s->cancelled)
        return;
    s->done = 1;
    s->res.duration_ms = tk_mono_ms() - s->t0;
    if (s->res.st != TK_OK)
        tk_info("llm",
                "msg=\"model call failed\" provider=%s code=%s http=%ld attempts=%d error=\"%s\"",
                s->provider, s->res.code, s->res.http_status, s->res.attempts, s->res.error);
    s->in_cb = 1;
    if (s->cb.on_done)
        s->cb.on_done(s->ud, &s->res);
    s->in_cb = 0;
    if (s->free_wanted)
        really_free(s);
}

static void set_error(llm_stream *s, tk_status st, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void set_error(llm_stream *s, tk_status st, const char *code, const char *fmt, ...)
{
    s->res.st = st;
    snprintf(s->res.code, sizeof s->res.code, "%s", code);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->res.error, sizeof s->res.error, fmt, ap);
    va_end(ap);
}

static void timer_fn(tk_ev_timer *t, void *ud)
{
    llm_stream *s = ud;
    tk_ev_timer_del(t);
    s->timer = NULL;
    if (s->report_pending) {
        finish(s); /* a failure that could not even start */
        return;
    }
    attempt(s);
}

static int on_data(tk_httpm_xfer *x, long status, const char *data, size_t len, void *ud)
{
    llm_stream *s = ud;
    if (status < 200 || status > 299) {
        size_t room = ERRBODY_MAX - s->errbody.len;
        tk_buf_append(&s->errbody, data, len < room ? len : room);
        return 0;
    }
    s->in_cb = 1;
    tk_status st = llm_parser_feed(s->parser, data, len);
    s->in_cb = 0;
    if (s->cancelled || s->free_wanted)
        return 1;
    if (st != TK_OK)
        return 1; /* the parser's error is in res */
    return llm_parser_finished(s->parser);
}

static int retriable_status(long st)
{
    return st == 429 || st == 500 || st == 502 || st == 503 || st == 504 || st == 529;
}

static long retry_after_ms(const tk_buf *headers)
{
    const char *p = tk_buf_cstr(headers);
    const char *h = strcasestr(p, "\nretry-after:");
    if (!h)
        return -1;
    h += 13;
    while (*h == ' ' || *h == '\t')
        h++;
    char *end;
    long v = strtol(h, &end, 10);
    if (end == h || v < 0)
        return -1;
    return v * 1000;
}

static void on_xfer_done(tk_httpm_xfer *x, const tk_httpm_result *r, void *ud)
{
    llm_stream *s = ud;
    s->x = NULL;
    s->res.http_status = r->status;
    int streamed = llm_parser_streamed(s->parser);
    int64_t elapsed = tk_mono_ms() - s->t0;
    long delay = -1;
    if (s->free_wanted) {
        really_free(s);
        return;
    }
    if (r->status >= 200 && r->status <= 299) {
        if (s->res.st != TK_OK) {
            /* the parser's own error (malformed chunk, in-stream error, cap) */
        } else if (llm_parser_finished(s->parser)) {
            s->res.st = TK_OK;
        } else if (r->st == TK_ETIMEOUT) {
            set_error(s, TK_ETIMEOUT, "timeout",
                      "the provider sent nothing for %ld s and the call was ended",
                      (s->idle_timeout_ms + 999) / 1000);
        } else {
            set_error(s, TK_ECLOSED, "cut_stream",
                      "the provider's stream was cut before the answer finished (%s)",
                      r->st == TK_OK ? "connection closed" : r->error);
        }
    } else if (r->status > 0) {
        char msg[400];
        llm_error_message(s->errbody.data ? s->errbody.data : "", s->errbody.len, msg, sizeof msg);
        if (retriable_status(r->status) && !streamed && s->res.attempts <= s->max_retries) {
            delay = retry_after_ms(r->headers);
            if (delay < 0)
                delay = 500L << (s->res.attempts - 1);
        }
        set_error(s, TK_ERROR, r->status == 429 ? "rate_limited" : "provider_error",
                  "the provider answered HTTP %ld: %s", r->status, msg);
    } else if (r->st == TK_ETIMEOUT) {
        set_error(s, TK_ETIMEOUT, "timeout", "no answer from the provider within %ld s",
                  (s->idle_timeout_ms + 999) / 1000);
    } else {
        if (!streamed && s->res.attempts <= s->max_retries)
            delay = 500L << (s->res.attempts - 1);
        set_error(s, TK_ERROR, "connection_failed", "could not reach the provider: %s", r->error);
    }
    if (delay >= 0) {
        if (delay > 20000)
            delay = 20000;
        if (s->timeout_ms > 0 && elapsed + delay >= s->timeout_ms)
            delay = -1; /* no time left for another attempt */
    }
    if (delay >= 0) {
        tk_info("llm", "msg=\"retrying model call\" provider=%s http=%ld attempt=%d delay_ms=%ld",
                s->provider, r->status, s->res.attempts, delay);
        s->timer = tk_ev_timer_add(s->loop, delay, timer_fn, s);
        return;
    }
    finish(s);
}

static void attempt(llm_stream *s)
{
    /* a fresh parser and result for each attempt (retries happen only when
     * nothing was streamed) */
    llm_parser_free(s->parser);
    llm_result_free(&s->res);
    int attempts = s->res.attempts;
    llm_result_init(&s->res);
    s->res.attempts = attempts + 1;
    tk_buf_reset(&s->errbody);
    s->parser = llm_parser_new(s->kind, &s->cb, s->ud, &s->res);
    long remaining = 0;
    if (s->timeout_ms > 0) {
        remaining = s->timeout_ms - (long)(tk_mono_ms() - s->t0);
        if (remaining < 1)
            remaining = 1;
    }
    const char *hdrs[TK_ARRAY_LEN(s->hdrs) + 1] = {0};
    for (size_t i = 0; i < TK_ARRAY_LEN(s->hdrs); i++)
        hdrs[i] = s->hdrs[i];
    tk_httpm_req r = {.method = "POST",
                      .url = s->url,
                      .headers = hdrs,
                      .body = s->body,
                      .body_len = s->body_len,
                      .body_borrowed = 1, /* s->body outlives the transfer (really_free) */
                      .timeout_ms = remaining,
                      .idle_timeout_ms = s->idle_timeout_ms,
                      .on_data = on_data,
                      .on_done = on_xfer_done,
                      .ud = s};
    s->x = tk_httpm_start(s->m, &r);
    if (!s->x) {
        set_error(s, TK_ERROR, "connection_failed", "the provider URL %s was refused", s->url);
        s->report_pending = 1;
        s->timer = tk_ev_timer_add(s->loop, 0, timer_fn, s);
    }
}

llm_stream *llm_stream_start(tk_httpm *m, tk_evloop *loop, const llm_provider *p,
                             const llm_request *req, const llm_callbacks *cb, void *ud)
{
    llm_stream *s = tk_calloc(1, sizeof *s);
    s->m = m;
    s->loop = loop;
    s->kind = p->kind;
    s->provider = tk_strdup(p->name ? p->name : "?");
    s->cb = *cb;
    s->ud = ud;
    s->idle_timeout_ms = req->idle_timeout_ms > 0 ? req->idle_timeout_ms : 120000;
    s->timeout_ms = req->timeout_ms;
    s->max_retries = req->max_retries;
    s->t0 = tk_mono_ms();
    tk_buf_init(&s->errbody, ERRBODY_MAX);
    llm_result_init(&s->res);
    s->url = llm_build_url(p);
    s->body = llm_build_body(p->kind, req, &s->body_len);
    s->hdrs[0] = tk_strdup("Content-Type: application/json");
    s->hdrs[1] = tk_strdup("Accept: text/event-stream");
    if (p->kind == LLM_ANTHROPIC) {
        s->hdrs[2] = tk_asprintf("x-api-key: %s", p->api_key ? p->api_key : "");
        s->hdrs[3] = tk_strdup("anthropic-version: 2023-06-01");
    } else {
        s->hdrs[2] = tk_asprintf("Authorization: Bearer %s", p->api_key ? p->api_key : "");
    }
    attempt(s);
    return s;
}

void llm_stream_cancel(llm_stream *s)
{
    if (!s || s->cancelled)
        return;
    s->cancelled = 1;
    if (s->x) {
        tk_httpm_cancel(s->x);
        s->x = NULL;
    }
    if (s->timer) {
        tk_ev_timer_del(s->timer);
        s->timer = NULL;
    }
    if (s->res.st == TK_OK && !s->done) {
        s->res.st = TK_ECLOSED;
        snprintf(s->res.code, sizeof s->res.code, "cancelled");
        snprintf(s->res.error, sizeof s->res.error, "the model call was cancelled");
    }
    s->res.duration_ms = tk_mono_ms() - s->t0;
}

llm_result *llm_stream_result(llm_stream *s)
{
    return &s->res;
}
