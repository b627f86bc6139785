/* Model providers: wire bodies, the stream parsers of both protocols, and the
 * streamed call (retries, cut streams, timeouts) against a canned server. */
#include <pthread.h>
#include <unistd.h>

#include "app/llm/llm.h"
#include "lib/httpd.h"
#include "lib/json.h"
#include "lib/log.h"
#include "tk_test.h"

static char texts[4096];
static size_t ntext;
static void on_text(void *ud, const char *d, size_t n)
{
    memcpy(texts + ntext, d, n);
    ntext += n;
    texts[ntext] = 0;
}

static const llm_callbacks cbs = {.on_text = on_text};

/* feeds the whole input one byte at a time: chunk boundaries anywhere */
static tk_status feed_bytes(llm_parser *p, const char *s)
{
    tk_status st = TK_OK;
    for (size_t i = 0; s[i] && st == TK_OK; i++)
        st = llm_parser_feed(p, s + i, 1);
    return st;
}

TEST(openai_text_tool_calls_usage)
{
    const char *in =
        "data: "
        "{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"}}]}\n\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"}}]}\n\n"
        "data: "
        "{\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\","
        "\"type\":\"function\",\"function\":{\"name\":\"write_file\",\"arguments\":\"\"}}]}}]}\n\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":"
        "{\"arguments\":\"{\\\"pa\"}}]}}]}\n\n"
        "data: "
        "{\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_2\","
        "\"function\":{\"name\":\"read_file\",\"arguments\":\"{}\"}}]}}]}\n\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":"
        "{\"arguments\":\"th\\\":\\\"a\\\"}\"}}]}}]}\n\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n"
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":7}}\n\n"
        "data: [DONE]\n\n";
    llm_result r;
    llm_result_init(&r);
    ntext = 0;
    llm_parser *p = llm_parser_new(LLM_OPENAI, &cbs, NULL, &r);
    CHECK(feed_bytes(p, in) == TK_OK);
    CHECK(llm_parser_finished(p));
    CHECK_STR(tk_buf_cstr(&r.text), "Hello");
    CHECK_STR(texts, "Hello");
    CHECK_INT(r.ncalls, ==, 2);
    CHECK_STR(r.calls[0].id, "call_1");
    CHECK_STR(r.calls[0].name, "write_file");
    CHECK_STR(tk_buf_cstr(&r.calls[0].arguments), "{\"path\":\"a\"}");
    CHECK_STR(r.calls[1].name, "read_file");
    CHECK_STR(r.stop_reason, "tool_use");
    CHECK_INT(r.input_tokens, ==, 12);
    CHECK_INT(r.output_tokens, ==, 7);
    CHECK(r.ttft_ms >= 0);
    llm_parser_free(p);
    llm_result_free(&r);
}

TEST(openai_malformed_chunk_keeps_text)
{
    const char *in = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"kept\"}}]}\n\n"
                     "data: {not json\n\n"
                     "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lost\"}}]}\n\n";
    llm_result r;
    llm_result_init(&r);
    llm_parser *p = llm_parser_new(LLM_OPENAI, NULL, NULL, &r);
    CHECK(llm_parser_feed(p, in, strlen(in)) == TK_EINVAL);
    CHECK_STR(r.code, "malformed_chunk");
    CHECK_STR(tk_buf_cstr(&r.text), "kept");
    CHECK(!llm_parser_finished(p));
    llm_parser_free(p);
    llm_result_free(&r);
}

TEST(openai_in_stream_error)
{
    const char *in = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n"
                     "data: {\"error\":{\"message\":\"Overloaded\",\"type\":\"server_error\"}}\n\n";
    llm_result r;
    llm_result_init(&r);
    llm_parser *p = llm_parser_new(LLM_OPENAI, NULL, NULL, &r);
    CHECK(llm_parser_feed(p, in, strlen(in)) == TK_ERROR);
    CHECK_STR(r.code, "provider_error");
    CHECK(strstr(r.error, "Overloaded") != NULL);
    llm_parser_free(p);
    llm_result_free(&r);
}

TEST(anthropic_text_and_tool_use_with_input_json_delta)
{
    const char *in =
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\","
        "\"usage\":{\"input_tokens\":30,\"output_tokens\":1}}}\n\n"
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
        "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
        "event: ping\ndata: {\"type\":\"ping\"}\n\n"
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
        "\"delta\":{\"type\":\"text_delta\",\"text\":\"Let me \"}}\n\n"
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
        "\"delta\":{\"type\":\"text_delta\",\"text\":\"check.\"}}\n\n"
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,"
        "\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"execute_command\","
        "\"input\":{}}}\n\n"
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,"
        "\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"command\\\": \"}}\n\n"
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,"
        "\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\\\"ls\\\"}\"}}\n\n"
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n"
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
        "\"tool_use\"},\"usage\":{\"output_tokens\":22}}\n\n"
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    llm_result r;
    llm_result_init(&r);
    ntext = 0;
    llm_parser *p = llm_parser_new(LLM_ANTHROPIC, &cbs, NULL, &r);
    CHECK(feed_bytes(p, in) == TK_OK);
    CHECK(llm_parser_finished(p));
    CHECK_STR(texts, "Let me check.");
    CHECK_INT(r.ncalls, ==, 1);
    CHECK_STR(r.calls[0].id, "toolu_1");
    CHECK_STR(r.calls[0].name, "execute_command");
    CHECK_STR(tk_buf_cstr(&r.calls[0].arguments), "{\"command\": \"ls\"}");
    CHECK_STR(r.stop_reason, "tool_use");
    CHECK_INT(r.input_tokens, ==, 30);
    CHECK_INT(r.output_tokens, ==, 22);
    llm_parser_free(p);
    llm_result_free(&r);
}

TEST(anthropic_error_event_and_bad_index)
{
    const char *in =
        "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
        "\"message\":\"Overloaded\"}}\n\n";
    llm_result r;
    llm_result_init(&r);
    llm_parser *p = llm_parser_new(LLM_ANTHROPIC, NULL, NULL, &r);
    CHECK(llm_parser_feed(p, in, strlen(in)) == TK_ERROR);
    CHECK(strstr(r.error, "overloaded_error: Overloaded") != NULL);
    llm_parser_free(p);
    llm_result_free(&r);

    const char *bad = "data: {\"type\":\"content_block_delta\",\"index\":99999,\"delta\":{}}\n\n";
    llm_result_init(&r);
    p = llm_parser_new(LLM_ANTHROPIC, NULL, NULL, &r);
    CHECK(llm_parser_feed(p, bad, strlen(bad)) == TK_EINVAL);
    CHECK_STR(r.code, "malformed_chunk");
    llm_parser_free(p);
    llm_result_free(&r);
}

static json_t *conv(void)
{
    char err[128];
    const char *s =
        "[{\"role\":\"user\",\"content\":\"write it\"},"
        "{\"role\":\"assistant\",\"content\":\"ok\",\"tool_calls\":["
        "{\"id\":\"c1\",\"name\":\"write_file\",\"arguments\":\"{\\\"path\\\":\\\"a\\\"}\"},"
        "{\"id\":\"c2\",\"name\":\"read_file\",\"arguments\":\"not json\"}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"wrote\"},"
        "{\"role\":\"tool\",\"tool_call_id\":\"c2\",\"content\":\"\"},"
        "{\"role\":\"user\",\"content\":\"thanks\"}]";
    return tk_json_parse(s, strlen(s), 1 << 20, err, sizeof err);
}

TEST(body_openai_shape)
{
    json_t *m = conv();
    json_t *tools = json_loads("[{\"name\":\"write_file\",\"description\":\"w\",\"parameters\":"
                               "{\"type\":\"object\"}}]",
                               0, NULL);
    llm_request req = {.model = "gpt-4o-mini", .system = "be brief", .messages = m, .tools = tools};
    size_t n;
    char *b = llm_build_body(LLM_OPENAI, &req, &n);
    json_t *j = json_loads(b, 0, NULL);
    CHECK(j);
    CHECK_STR(tk_json_str(j, "model"), "gpt-4o-mini");
    CHECK(json_is_true(json_object_get(j, "stream")));
    json_t *msgs = json_object_get(j, "messages");
    CHECK_INT(json_array_size(msgs), ==, 6);
    CHECK_STR(tk_json_str(json_array_get(msgs, 0), "role"), "system");
    CHECK_STR(tk_json_str(json_array_get(msgs, 0), "content"), "be brief");
    json_t *a = json_array_get(msgs, 2);
    CHECK_STR(tk_json_str(a, "role"), "assistant");
    json_t *tc = json_array_get(json_object_get(a, "tool_calls"), 0);
    CHECK_STR(tk_json_str(tc, "type"), "function");
    CHECK_STR(tk_json_str(json_object_get(tc, "function"), "arguments"), "{\"path\":\"a\"}");
    CHECK_STR(tk_json_str(json_array_get(msgs, 3), "tool_call_id"), "c1");
    json_t *t0 = json_array_get(json_object_get(j, "tools"), 0);
    CHECK_STR(tk_json_str(json_object_get(t0, "function"), "name"), "write_file");
    json_decref(j);
    free(b);
    json_decref(m);
    json_decref(tools);
}

TEST(body_anthropic_merges_tool_results_and_alternates)
{
    json_t *m = conv();
    llm_request req = {.model = "claude-sonnet-4", .system = "sys", .messages = m};
    char *b = llm_build_body(LLM_ANTHROPIC, &req, NULL);
    json_t *j = json_loads(b, 0, NULL);
    CHECK(j);
    CHECK_STR(tk_json_str(j, "system"), "sys");
    CHECK(tk_json_int_or(j, "max_tokens", 0) > 0);
    json_t *msgs = json_object_get(j, "messages");
    /* user, assistant(text + 2 tool_use), user(2 tool_result + text) */
    CHECK_INT(json_array_size(msgs), ==, 3);
    json_t *a = json_array_get(msgs, 1);
    CHECK_STR(tk_json_str(a, "role"), "assistant");
    json_t *blocks = json_object_get(a, "content");
    CHECK_INT(json_array_size(blocks), ==, 3);
    CHECK_STR(tk_json_str(json_array_get(blocks, 1), "type"), "tool_use");
    CHECK(json_is_object(json_object_get(json_array_get(blocks, 2), "input"))); /* bad JSON -> {} */
    json_t *u = json_array_get(msgs, 2);
    json_t *ub = json_object_get(u, "content");
    CHECK_INT(json_array_size(ub), ==, 3);
    CHECK_STR(tk_json_str(json_array_get(ub, 0), "type"), "tool_result");
    CHECK_STR(tk_json_str(json_array_get(ub, 0), "tool_use_id"), "c1");
    CHECK_STR(tk_json_str(json_array_get(ub, 1), "content"), "(no output)");
    CHECK_STR(tk_json_str(json_array_get(ub, 2), "text"), "thanks");
    json_decref(j);
    free(b);
    json_decref(m);
}

TEST(urls_follow_the_sdk_conventions)
{
    llm_provider o = {.kind = LLM_OPENAI, .base_url = "http://h:1/v1/"};
    char *u = llm_build_url(&o);
    CHECK_STR(u, "http://h:1/v1/chat/completions");
    free(u);
    llm_provider a = {.kind = LLM_ANTHROPIC, .base_url = "http://h:1"};
    u = llm_build_url(&a);
    CHECK_STR(u, "http://h:1/v1/messages");
    free(u);
    a.base_url = "http://h:1/v1";
    u = llm_build_url(&a);
    CHECK_STR(u, "http://h:1/v1/messages");
    free(u);
}

/* --- the streamed call against a canned server --- */

static int hits_429;

static void h_cut(tk_req *r, void *ud)
{
    tk_stream *s = tk_respond_stream(r, 200, "text/event-stream");
    const char *f = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"partial \"}}]}\n\n";
    tk_stream_write(s, f, strlen(f));
    tk_stream_close(s); /* no [DONE] */
}

static void h_429(tk_req *r, void *ud)
{
    if (__sync_fetch_and_add(&hits_429, 1) == 0) {
        tk_respond_header(r, "Retry-After", "0");
        tk_respond(r, 429, "application/json",
                   "{\"error\":{\"message\":\"slow down\",\"type\":\"requests\"}}", 51);
        return;
    }
    const char *ok = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"second\"}}]}\n\n"
                     "data: [DONE]\n\n";
    tk_respond(r, 200, "text/event-stream", ok, strlen(ok));
}

static void h_401(tk_req *r, void *ud)
{
    const char *b = "{\"type\":\"error\",\"error\":{\"type\":\"authentication_error\","
                    "\"message\":\"invalid x-api-key\"}}";
    tk_respond(r, 401, "application/json", b, strlen(b));
}

static void h_silent(tk_req *r, void *ud)
{
    tk_stream *s = tk_respond_stream(r, 200, "text/event-stream");
    for (int i = 0; i < 300 && !tk_stream_closed(s); i++)
        usleep(10000);
    tk_stream_close(s);
}

static tk_httpd *srv;
static tk_evloop *loop;
static tk_httpm *hm;
static llm_result got;
static int done_calls;

static void on_done(void *ud, llm_result *res)
{
    done_calls++;
    got.st = res->st;
    snprintf(got.code, sizeof got.code, "%s", res->code);
    snprintf(got.error, sizeof got.error, "%s", res->error);
    got.attempts = res->attempts;
    got.http_status = res->http_status;
    tk_buf_reset(&got.text);
    tk_buf_append_str(&got.text, tk_buf_cstr(&res->text));
    tk_evloop_stop(loop);
}

static void run_call(llm_kind kind, const char *path, long idle_ms)
{
    static tk_route routes[] = {
        {"POST", "/cut/chat/completions", h_cut},
        {"POST", "/r429/chat/completions", h_429},
        {"POST", "/v1/messages", h_401},
        {"POST", "/silent/chat/completions", h_silent, NULL, TK_ROUTE_BLOCKING},
    };
    tk_httpd_config cfg = {.listen = "127.0.0.1:0", .name = "t"};
    char err[256];
    srv = tk_httpd_start(&cfg, routes, TK_ARRAY_LEN(routes), err, sizeof err);
    TK_ASSERT(srv);
    loop = tk_evloop_new();
    hm = tk_httpm_new(loop);
    char base[256];
    snprintf(base, sizeof base, "%s%s", tk_httpd_url(srv), path);
    llm_provider p = {.kind = kind, .name = "t", .base_url = base, .api_key = "k"};
    json_t *msgs = json_loads("[{\"role\":\"user\",\"content\":\"hi\"}]", 0, NULL);
    llm_request req = {
        .model = "m", .messages = msgs, .idle_timeout_ms = idle_ms, .max_retries = 2};
    llm_result_init(&got);
    llm_callbacks cb = {.on_done = on_done};
    llm_stream *s = llm_stream_start(hm, loop, &p, &req, &cb, NULL);
    json_decref(msgs);
    tk_evloop_run(loop);
    llm_stream_free(s);
    tk_httpm_free(hm);
    tk_evloop_free(loop);
    tk_httpd_stop(srv);
}

TEST(stream_cut_keeps_what_was_streamed)
{
    run_call(LLM_OPENAI, "/cut", 5000);
    CHECK_INT(done_calls, ==, 1);
    CHECK(got.st == TK_ECLOSED);
    CHECK_STR(got.code, "cut_stream");
    CHECK_STR(tk_buf_cstr(&got.text), "partial ");
}

TEST(stream_retries_429_then_answers)
{
    run_call(LLM_OPENAI, "/r429", 5000);
    CHECK(got.st == TK_OK);
    CHECK_INT(got.attempts, ==, 2);
    CHECK_STR(tk_buf_cstr(&got.text), "second");
}

TEST(stream_provider_error_is_clear_and_not_retried)
{
    run_call(LLM_ANTHROPIC, "", 5000);
    CHECK(got.st == TK_ERROR);
    CHECK_INT(got.http_status, ==, 401);
    CHECK_INT(got.attempts, ==, 1);
    CHECK(strstr(got.error, "HTTP 401") != NULL);
    CHECK(strstr(got.error, "invalid x-api-key") != NULL);
}

TEST(stream_idle_timeout)
{
    run_call(LLM_OPENAI, "/silent", 1000);
    CHECK(got.st == TK_ETIMEOUT);
    CHECK_STR(got.code, "timeout");
}

TEST_MAIN()
