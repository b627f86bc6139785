/* Streamed answers: OpenAI chat.completion.chunk events and Anthropic Messages
 * events, assembled into text, tool calls, usage and a stop reason. The input is
 * untrusted (a provider, or anything at its URL): every field is checked, every
 * buffer capped, and a chunk that is not what the protocol says ends the stream
 * as malformed rather than being guessed at. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/llm/llm.h"
#include "lib/json.h"
#include "lib/tktime.h"

#define LLM_MAX_TEXT  (4u << 20)
#define LLM_MAX_ARGS  (1u << 20)
#define LLM_MAX_EVENT (2u << 20)

struct llm_parser {
    llm_kind kind;
    llm_callbacks cb;
    void *ud;
    llm_result *res;
    tk_sse_parser sse;
    int finished;
    int streamed;
    int failed;
    tk_status fail_st;
    int64_t t0;
    /* Anthropic: content block index -> tool call slot (-1: text or unknown) */
    int block_call[LLM_MAX_TOOL_CALLS * 2];
    /* OpenAI: tool_calls[].index -> slot */
    int index_call[LLM_MAX_TOOL_CALLS];
};

void llm_result_init(llm_result *r)
{
    memset(r, 0, sizeof *r);
    r->st = TK_OK;
    tk_buf_init(&r->text, LLM_MAX_TEXT);
    r->input_tokens = r->output_tokens = -1;
    r->ttft_ms = -1;
}

void llm_result_free(llm_result *r)
{
    tk_buf_free(&r->text);
    for (size_t i = 0; i < r->ncalls; i++) {
        free(r->calls[i].id);
        free(r->calls[i].name);
        tk_buf_free(&r->calls[i].arguments);
    }
    r->ncalls = 0;
}

static tk_status fail(llm_parser *p, tk_status st, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static tk_status fail(llm_parser *p, tk_status st, const char *code, const char *fmt, ...)
{
    if (p->failed)
        return p->fail_st;
    p->failed = 1;
    p->fail_st = st;
    p->res->st = st;
    snprintf(p->res->code, sizeof p->res->code, "%s", code);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->res->error, sizeof p->res->error, fmt, ap);
    va_end(ap);
    return st;
}

static void mark_streamed(llm_parser *p)
{
    if (!p->streamed) {
        p->streamed = 1;
        p->res->ttft_ms = tk_mono_ms() - p->t0;
    }
}

static tk_status add_text(llm_parser *p, const char *s, size_t n)
{
    if (n == 0)
        return TK_OK;
    mark_streamed(p);
    if (tk_buf_append(&p->res->text, s, n) != TK_OK)
        return fail(p, TK_ETOOBIG, "too_large", "the answer is longer than %u bytes", LLM_MAX_TEXT);
    if (p->cb.on_text)
        p->cb.on_text(p->ud, s, n);
    return TK_OK;
}

static int new_call(llm_parser *p, const char *id, const char *name)
{
    llm_result *r = p->res;
    if (r->ncalls >= LLM_MAX_TOOL_CALLS)
        return -1;
    llm_tool_call *c = &r->calls[r->ncalls];
    c->id = tk_strdup(id ? id : "");
    c->name = tk_strdup(name ? name : "");
    tk_buf_init(&c->arguments, LLM_MAX_ARGS);
    mark_streamed(p);
    return (int)r->ncalls++;
}

static tk_status add_args(llm_parser *p, int slot, const char *s, size_t n)
{
    if (slot < 0 || (size_t)slot >= p->res->ncalls || n == 0)
        return TK_OK;
    mark_streamed(p);
    if (tk_buf_append(&p->res->calls[slot].arguments, s, n) != TK_OK)
        return fail(p, TK_ETOOBIG, "too_large", "tool call arguments longer than %u bytes",
                    LLM_MAX_ARGS);
    return TK_OK;
}

static void set_stop(llm_parser *p, const char *reason)
{
    const char *n = reason;
    if (strcmp(reason, "end_turn") == 0 || strcmp(reason, "stop_sequence") == 0)
        n = "stop";
    else if (strcmp(reason, "tool_calls") == 0 || strcmp(reason, "function_call") == 0)
        n = "tool_use";
    else if (strcmp(reason, "max_tokens") == 0)
        n = "length";
    else if (strcmp(reason, "content_filter") == 0 || strcmp(reason, "refusal") == 0)
        n = "filter";
    snprintf(p->res->stop_reason, sizeof p->res->stop_reason, "%s", n);
}

static void error_text(const json_t *err, char *out, size_t outlen)
{
    const char *msg = NULL, *type = NULL;
    if (json_is_object(err)) {
        msg = tk_json_str(err, "message");
        type = tk_json_str(err, "type");
    } else if (json_is_string(err)) {
        msg = json_string_value(err);
    }
    if (type && msg)
        snprintf(out, outlen, "%s: %s", type, msg);
    else
        snprintf(out, outlen, "%s", msg ? msg : type ? type : "unspecified error");
}

/* ---------- OpenAI ---------- */

static tk_status openai_event(llm_parser *p, const tk_sse_event *ev)
{
    if (ev->data_len == 6 && memcmp(ev->data, "[DONE]", 6) == 0) {
        p->finished = 1;
        return TK_OK;
    }
    char jerr[160];
    json_t *j = tk_json_parse(ev->data, ev->data_len, LLM_MAX_EVENT, jerr, sizeof jerr);
    if (!json_is_object(j)) {
        json_decref(j);
        return fail(p, TK_EINVAL, "malformed_chunk",
                    "the provider sent a malformed chunk (not a JSON object: %s)", jerr);
    }
    tk_status st = TK_OK;
    json_t *err = json_object_get(j, "error");
    if (err && !json_is_null(err)) {
        char m[400];
        error_text(err, m, sizeof m);
        st =
            fail(p, TK_ERROR, "provider_error", "the provider reported an error mid-stream: %s", m);
        goto out;
    }
    json_t *usage = json_object_get(j, "usage");
    if (json_is_object(usage)) {
        int64_t v;
        if (tk_json_int(usage, "prompt_tokens", &v) == TK_OK)
            p->res->input_tokens = v;
        if (tk_json_int(usage, "completion_tokens", &v) == TK_OK)
            p->res->output_tokens = v;
    }
    json_t *choices = json_object_get(j, "choices");
    if (choices && !json_is_array(choices)) {
        st = fail(p, TK_EINVAL, "malformed_chunk",
                  "the provider sent a chunk whose choices is "
                  "not an array");
        goto out;
    }
    size_t i;
    json_t *ch;
    json_array_foreach(choices, i, ch)
    {
        if (!json_is_object(ch))
            continue;
        if (tk_json_int_or(ch, "index", 0) != 0)
            continue; /* we ask for one choice */
        json_t *delta = json_object_get(ch, "delta");
        if (json_is_object(delta)) {
            const char *text = tk_json_str(delta, "content");
            if (text && (st = add_text(p, text, strlen(text))) != TK_OK)
                goto out;
            json_t *tcs = json_object_get(delta, "tool_calls");
            size_t k;
            json_t *tc;
            json_array_foreach(tcs, k, tc)
            {
                int64_t idx = tk_json_int_or(tc, "index", (int64_t)k);
                if (idx < 0 || idx >= LLM_MAX_TOOL_CALLS) {
                    st = fail(p, TK_EINVAL, "malformed_chunk",
                              "the provider sent a tool call index out of range (%lld)",
                              (long long)idx);
                    goto out;
                }
                json_t *fn = json_object_get(tc, "function");
                int slot = p->index_call[idx];
                if (slot < 0) {
                    slot = new_call(p, tk_json_str(tc, "id"), tk_json_str(fn, "name"));
                    if (slot < 0) {
                        st = fail(p, TK_ETOOBIG, "too_large", "more than %d tool calls",
                                  LLM_MAX_TOOL_CALLS);
                        goto out;
                    }
                    p->index_call[idx] = slot;
                } else {
                    /* later deltas may still carry the id or the name */
                    llm_tool_call *c = &p->res->calls[slot];
                    const char *id = tk_json_str(tc, "id");
                    if (id && !*c->id) {
                        free(c->id);
                        c->id = tk_strdup(id);
                    }
                    const char *nm = tk_json_str(fn, "name");
                    if (nm && !*c->name) {
                        free(c->name);
                        c->name = tk_strdup(nm);
                    }
                }
                const char *args = tk_json_str(fn, "arguments");
                if (args && (st = add_args(p, slot, args, strlen(args))) != TK_OK)
                    goto out;
            }
        }
        const char *fr = tk_json_str(ch, "finish_reason");
        if (fr)
            set_stop(p, fr);
    }
out:
    json_decref(j);
    return st;
}

/* ---------- Anthropic ---------- */

static tk_status anthropic_event(llm_parser *p, const tk_sse_event *ev)
{
    char jerr[160];
    json_t *j = tk_json_parse(ev->data, ev->data_len, LLM_MAX_EVENT, jerr, sizeof jerr);
    if (!json_is_object(j)) {
        json_decref(j);
        return fail(p, TK_EINVAL, "malformed_chunk",
                    "the provider sent a malformed event (not a JSON object: %s)", jerr);
    }
    tk_status st = TK_OK;
    const char *type = tk_json_str(j, "type");
    if (!type)
        type = ev->event;
    if (strcmp(type, "message_start") == 0) {
        json_t *u = json_object_get(json_object_get(j, "message"), "usage");
        int64_t v;
        if (tk_json_int(u, "input_tokens", &v) == TK_OK)
            p->res->input_tokens = v;
        if (tk_json_int(u, "output_tokens", &v) == TK_OK)
            p->res->output_tokens = v;
    } else if (strcmp(type, "content_block_start") == 0) {
        int64_t idx = tk_json_int_or(j, "index", -1);
        json_t *b = json_object_get(j, "content_block");
        if (idx < 0 || idx >= (int64_t)TK_ARRAY_LEN(p->block_call) || !json_is_object(b)) {
            st = fail(p, TK_EINVAL, "malformed_chunk",
                      "the provider sent a content block without a valid index");
            goto out;
        }
        const char *bt = tk_json_str_or(b, "type", "");
        if (strcmp(bt, "tool_use") == 0) {
            int slot = new_call(p, tk_json_str(b, "id"), tk_json_str(b, "name"));
            if (slot < 0) {
                st =
                    fail(p, TK_ETOOBIG, "too_large", "more than %d tool calls", LLM_MAX_TOOL_CALLS);
                goto out;
            }
            p->block_call[idx] = slot;
            /* a non-empty input given up front (no deltas will follow) */
            json_t *input = json_object_get(b, "input");
            if (json_is_object(input) && json_object_size(input) > 0) {
                char *s = json_dumps(input, JSON_COMPACT);
                if (s) {
                    st = add_args(p, slot, s, strlen(s));
                    free(s);
                }
            }
        } else {
            p->block_call[idx] = -1;
            const char *t = tk_json_str(b, "text");
            if (t && *t)
                st = add_text(p, t, strlen(t));
        }
    } else if (strcmp(type, "content_block_delta") == 0) {
        int64_t idx = tk_json_int_or(j, "index", -1);
        json_t *d = json_object_get(j, "delta");
        if (idx < 0 || idx >= (int64_t)TK_ARRAY_LEN(p->block_call) || !json_is_object(d)) {
            st = fail(p, TK_EINVAL, "malformed_chunk",
                      "the provider sent a content delta without a valid index");
            goto out;
        }
        const char *dt = tk_json_str_or(d, "type", "");
        if (strcmp(dt, "text_delta") == 0) {
            const char *t = tk_json_str(d, "text");
            if (t)
                st = add_text(p, t, strlen(t));
        } else if (strcmp(dt, "input_json_delta") == 0) {
            const char *pj = tk_json_str(d, "partial_json");
            int slot = p->block_call[idx];
            if (slot < 0) {
                st = fail(p, TK_EINVAL, "malformed_chunk",
                          "the provider sent tool input for a block that is not a tool call");
                goto out;
            }
            if (pj)
                st = add_args(p, slot, pj, strlen(pj));
        }
        /* thinking_delta, signature_delta, citations: not shown */
    } else if (strcmp(type, "message_delta") == 0) {
        const char *sr = tk_json_str(json_object_get(j, "delta"), "stop_reason");
        if (sr)
            set_stop(p, sr);
        int64_t v;
        if (tk_json_int(json_object_get(j, "usage"), "output_tokens", &v) == TK_OK)
            p->res->output_tokens = v;
    } else if (strcmp(type, "message_stop") == 0) {
        p->finished = 1;
    } else if (strcmp(type, "error") == 0) {
        char m[400];
        error_text(json_object_get(j, "error"), m, sizeof m);
        st =
            fail(p, TK_ERROR, "provider_error", "the provider reported an error mid-stream: %s", m);
    }
    /* ping, content_block_stop and unknown event types are ignored */
out:
    json_decref(j);
    return st;
}

static int on_sse(const tk_sse_event *ev, void *ud)
{
    llm_parser *p = ud;
    if (p->failed || p->finished)
        return 1;
    if (ev->data_len == 0)
        return 0;
    tk_status st = p->kind == LLM_ANTHROPIC ? anthropic_event(p, ev) : openai_event(p, ev);
    return st != TK_OK || p->finished;
}

llm_parser *llm_parser_new(llm_kind kind, const llm_callbacks *cb, void *ud, llm_result *res)
{
    llm_parser *p = tk_calloc(1, sizeof *p);
    p->kind = kind;
    if (cb)
        p->cb = *cb;
    p->ud = ud;
    p->res = res;
    p->t0 = tk_mono_ms();
    for (size_t i = 0; i < TK_ARRAY_LEN(p->block_call); i++)
        p->block_call[i] = -1;
    for (size_t i = 0; i < TK_ARRAY_LEN(p->index_call); i++)
        p->index_call[i] = -1;
    tk_sse_parser_init(&p->sse, LLM_MAX_EVENT, LLM_MAX_EVENT, on_sse, p);
    return p;
}

void llm_parser_free(llm_parser *p)
{
    if (!p)
        return;
    tk_sse_parser_free(&p->sse);
    free(p);
}

tk_status llm_parser_feed(llm_parser *p, const char *data, size_t len)
{
    if (p->failed)
        return p->fail_st;
    if (p->finished)
        return TK_OK; /* anything after the end marker is ignored */
    tk_status st = tk_sse_feed(&p->sse, data, len);
    if (st == TK_ETOOBIG)
        return fail(p, TK_ETOOBIG, "too_large", "the provider sent an event larger than %u bytes",
                    LLM_MAX_EVENT);
    if (p->failed)
        return p->fail_st;
    return TK_OK;
}

int llm_parser_finished(const llm_parser *p)
{
    return p->finished;
}

int llm_parser_streamed(const llm_parser *p)
{
    return p->streamed;
}

void llm_error_message(const char *body, size_t len, char *out, size_t outlen)
{
    char jerr[64];
    json_t *j = tk_json_parse(body, len, 1 << 20, jerr, sizeof jerr);
    if (json_is_object(j) && json_object_get(j, "error")) {
        error_text(json_object_get(j, "error"), out, outlen);
    } else if (json_is_object(j) && tk_json_str(j, "message")) {
        snprintf(out, outlen, "%s", tk_json_str(j, "message"));
    } else {
        /* not JSON: the first line of the body, printable bytes only */
        size_t k = 0;
        for (size_t i = 0; i < len && k + 1 < outlen && body[i] != '\n'; i++)
            out[k++] = (body[i] >= 0x20 && body[i] < 0x7f) ? body[i] : '?';
        out[k] = 0;
        if (k == 0)
            snprintf(out, outlen, "(no message)");
    }
    json_decref(j);
}
