/*
 * llm.h — model providers: OpenAI-compatible Chat Completions and the Anthropic
 * Messages API, both streamed, both with tool calls.
 *
 * The agent loop speaks one neutral conversation format and this module turns it
 * into each provider's wire format, streams the answer over the non-blocking
 * HTTP client (httpc_multi.h) and assembles text, tool calls and usage:
 *
 *   neutral message        {"role":"user","content":"..."}
 *                          {"role":"assistant","content":"...",
 *                           "tool_calls":[{"id":"..","name":"..","arguments":"{json}"}]}
 *                          {"role":"tool","tool_call_id":"..","content":"..."}
 *   neutral tool           {"name":"..","description":"..","parameters":{json schema}}
 *
 * Errors never lose what was streamed: a provider error, a timeout, a cut
 * stream or a malformed chunk ends the stream with res->st != TK_OK and a clear
 * res->error, while res->text and the tool calls keep what arrived before.
 * Retriable failures (HTTP 429/5xx/529, connection errors) are retried with
 * back-off (Retry-After honoured) as long as nothing was streamed yet.
 *
 * Threads: everything runs on the loop that owns the tk_httpm.
 */
#ifndef APP_LLM_H
#define APP_LLM_H

#include <jansson.h>
#include <stdint.h>

#include "lib/buf.h"
#include "lib/common.h"
#include "lib/httpc_multi.h"
#include "lib/sse.h"

typedef enum { LLM_OPENAI = 1, LLM_ANTHROPIC = 2 } llm_kind;

/* A configured provider. Strings are borrowed (the settings own them). */
typedef struct {
    llm_kind kind;
    const char *name; /* "openai", "anthropic" */
    const char
        *base_url; /* OpenAI: ".../v1" (+ /chat/completions); Anthropic: host (+ /v1/messages) */
    const char *api_key;
} llm_provider;

/* Returns the provider kind for "openai"/"anthropic", 0 otherwise. */
llm_kind llm_kind_from_name(const char *name);

typedef struct {
    char *id;
    char *name;
    tk_buf arguments; /* JSON text as assembled from the deltas */
} llm_tool_call;

#define LLM_MAX_TOOL_CALLS 32

typedef struct {
    tk_status st;     /* TK_OK: the model finished its answer */
    char code[32];    /* on failure: provider_error, rate_limited, timeout, cut_stream,
                         malformed_chunk, connection_failed, too_large, cancelled */
    char error[512];  /* an operator- and user-readable description */
    long http_status; /* of the last attempt; 0 when none arrived */
    tk_buf text;      /* the whole text of the answer */
    llm_tool_call calls[LLM_MAX_TOOL_CALLS];
    size_t ncalls;
    int64_t input_tokens, output_tokens; /* -1 when the provider did not say */
    char stop_reason[32]; /* neutral: stop, tool_use, length, filter, or the provider's word */
    int64_t ttft_ms;      /* request start to first text or tool delta; -1 when none */
    int64_t duration_ms;
    int attempts;
} llm_result;

typedef struct {
    /* A piece of the answer's text, as it arrives. */
    void (*on_text)(void *ud, const char *delta, size_t len);
    /* The stream ended (always called once unless cancelled). res stays valid
     * until llm_stream_free. */
    void (*on_done)(void *ud, llm_result *res);
} llm_callbacks;

typedef struct {
    const char *model;      /* the provider's model name, e.g. "gpt-4o-mini" */
    const char *system;     /* may be NULL */
    const json_t *messages; /* neutral messages (borrowed for the call only) */
    const json_t *tools;    /* neutral tools; NULL or empty for none */
    int64_t max_tokens;     /* Anthropic requires it; OpenAI gets it when > 0 */
    long idle_timeout_ms;   /* no byte for this long ends the stream (timeout) */
    long timeout_ms;        /* whole call, retries included; 0: none */
    int max_retries;
} llm_request;

typedef struct llm_stream llm_stream;

/* Builds the request body and starts streaming. Never NULL: a request that
 * cannot even start reports through on_done (called on a later loop turn). */
llm_stream *llm_stream_start(tk_httpm *m, tk_evloop *loop, const llm_provider *p,
                             const llm_request *req, const llm_callbacks *cb, void *ud);
/* Stops the stream: no callback afterwards. The result so far stays readable. */
void llm_stream_cancel(llm_stream *s);
/* The result (for a cancelled stream: what arrived before). */
llm_result *llm_stream_result(llm_stream *s);
/* Frees the stream (after on_done, or after cancel). Not inside its callbacks. */
void llm_stream_free(llm_stream *s);

/* --- the pieces, exposed for tests and fuzzing --- */

/* The wire body for a provider (a new heap string) and the request URL. */
char *llm_build_body(llm_kind kind, const llm_request *req, size_t *len);
char *llm_build_url(const llm_provider *p);

/* An incremental parser of a provider's streamed body. */
typedef struct llm_parser llm_parser;
llm_parser *llm_parser_new(llm_kind kind, const llm_callbacks *cb, void *ud, llm_result *res);
void llm_parser_free(llm_parser *p);
/* TK_OK to go on; TK_EINVAL on a malformed chunk, TK_ERROR on an in-stream
 * error event, TK_ETOOBIG past a cap (res->code/error say which). */
tk_status llm_parser_feed(llm_parser *p, const char *data, size_t len);
/* Non-zero once the provider's end marker ([DONE] / message_stop) was seen. */
int llm_parser_finished(const llm_parser *p);
/* Non-zero once any text or tool delta arrived. */
int llm_parser_streamed(const llm_parser *p);

void llm_result_init(llm_result *r);
void llm_result_free(llm_result *r);
/* Extracts a readable message from a provider's error body (either shape). */
void llm_error_message(const char *body, size_t len, char *out, size_t outlen);

#endif
