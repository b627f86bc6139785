/* Request bodies: the neutral conversation in each provider's wire format. */
#include <stdlib.h>
#include <string.h>

#include "app/llm/llm.h"
#include "lib/json.h"

llm_kind llm_kind_from_name(const char *name)
{
    if (!name)
        return 0;
    if (strcmp(name, "openai") == 0)
        return LLM_OPENAI;
    if (strcmp(name, "anthropic") == 0)
        return LLM_ANTHROPIC;
    return 0;
}

static json_t *openai_messages(const llm_request *req)
{
    json_t *out = json_array();
    if (req->system && *req->system)
        json_array_append_new(out, tk_json_obj("role", json_string("system"), "content",
                                               json_string(req->system), NULL));
    size_t i;
    json_t *m;
    json_array_foreach(req->messages, i, m)
    {
        const char *role = tk_json_str_or(m, "role", "");
        const char *content = tk_json_str(m, "content");
        if (strcmp(role, "tool") == 0) {
            json_array_append_new(
                out, tk_json_obj("role", json_string("tool"), "tool_call_id",
                                 json_string(tk_json_str_or(m, "tool_call_id", "")), "content",
                                 json_string(content ? content : ""), NULL));
            continue;
        }
        if (strcmp(role, "assistant") == 0) {
            json_t *am = json_object();
            json_object_set_new(am, "role", json_string("assistant"));
            json_object_set_new(am, "content",
                                content && *content ? json_string(content) : json_null());
            json_t *calls = json_object_get(m, "tool_calls");
            if (json_is_array(calls) && json_array_size(calls) > 0) {
                json_t *tc = json_array();
                size_t k;
                json_t *c;
                json_array_foreach(calls, k, c)
                {
                    json_array_append_new(
                        tc, tk_json_obj(
                                "id", json_string(tk_json_str_or(c, "id", "")), "type",
                                json_string("function"), "function",
                                tk_json_obj(
                                    "name", json_string(tk_json_str_or(c, "name", "")), "arguments",
                                    json_string(tk_json_str_or(c, "arguments", "{}")), NULL),
                                NULL));
                }
                json_object_set_new(am, "tool_calls", tc);
            }
            json_array_append_new(out, am);
            continue;
        }
        json_array_append_new(out, tk_json_obj("role", json_string("user"), "content",
                                               json_string(content ? content : ""), NULL));
    }
    return out;
}

static json_t *openai_tools(const json_t *tools)
{
    json_t *out = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t)
    {
        json_t *params = json_object_get(t, "parameters");
        json_array_append_new(
            out, tk_json_obj(
                     "type", json_string("function"), "function",
                     tk_json_obj("name", json_string(tk_json_str_or(t, "name", "")), "description",
                                 json_string(tk_json_str_or(t, "description", "")), "parameters",
                                 params ? json_incref(params) : json_object(), NULL),
                     NULL));
    }
    return out;
}

/* Anthropic wants strictly alternating roles with tool results as user content
 * blocks; consecutive user-side messages merge into one. */
static void anth_append(json_t *out, const char *role, json_t *block)
{
    size_t n = json_array_size(out);
    json_t *last = n ? json_array_get(out, n - 1) : NULL;
    if (last && strcmp(tk_json_str_or(last, "role", ""), role) == 0) {
        json_array_append_new(json_object_get(last, "content"), block);
        return;
    }
    json_t *blocks = json_array();
    json_array_append_new(blocks, block);
    json_array_append_new(out, tk_json_obj("role", json_string(role), "content", blocks, NULL));
}

static json_t *text_block(const char *text)
{
    return tk_json_obj("type", json_string("text"), "text", json_string(text), NULL);
}

static json_t *anthropic_messages(const llm_request *req)
{
    json_t *out = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(req->messages, i, m)
    {
        const char *role = tk_json_str_or(m, "role", "");
        const char *content = tk_json_str_or(m, "content", "");
        if (strcmp(role, "tool") == 0) {
            json_t *b = tk_json_obj("type", json_string("tool_result"), "tool_use_id",
                                    json_string(tk_json_str_or(m, "tool_call_id", "")), "content",
                                    json_string(*content ? content : "(no output)"), NULL);
            if (json_is_true(json_object_get(m, "is_error")))
                json_object_set_new(b, "is_error", json_true());
            anth_append(out, "user", b);
            continue;
        }
        if (strcmp(role, "assistant") == 0) {
            size_t before = json_array_size(out);
            json_t *calls = json_object_get(m, "tool_calls");
            int has_calls = json_is_array(calls) && json_array_size(calls) > 0;
            if (*content)
                anth_append(out, "assistant", text_block(content));
            size_t k;
            json_t *c;
            json_array_foreach(calls, k, c)
            {
                const char *args = tk_json_str_or(c, "arguments", "{}");
                json_t *input = json_loads(args, JSON_REJECT_DUPLICATES, NULL);
                if (!json_is_object(input)) {
                    json_decref(input);
                    input = json_object();
                }
                anth_append(out, "assistant",
                            tk_json_obj("type", json_string("tool_use"), "id",
                                        json_string(tk_json_str_or(c, "id", "")), "name",
                                        json_string(tk_json_str_or(c, "name", "")), "input", input,
                                        NULL));
            }
            if (json_array_size(out) == before && !has_calls && !*content)
                anth_append(out, "assistant", text_block("(no answer)"));
            continue;
        }
        anth_append(out, "user", text_block(*content ? content : "(empty message)"));
    }
    return out;
}

static json_t *anthropic_tools(const json_t *tools)
{
    json_t *out = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t)
    {
        json_t *params = json_object_get(t, "parameters");
        json_array_append_new(
            out, tk_json_obj("name", json_string(tk_json_str_or(t, "name", "")), "description",
                             json_string(tk_json_str_or(t, "description", "")), "input_schema",
                             params ? json_incref(params) : json_object(), NULL));
    }
    return out;
}

char *llm_build_body(llm_kind kind, const llm_request *req, size_t *len)
{
    json_t *body = json_object();
    json_object_set_new(body, "model", json_string(req->model ? req->model : ""));
    json_object_set_new(body, "stream", json_true());
    int has_tools = req->tools && json_array_size(req->tools) > 0;
    if (kind == LLM_ANTHROPIC) {
        json_object_set_new(body, "max_tokens",
                            json_integer(req->max_tokens > 0 ? req->max_tokens : 4096));
        if (req->system && *req->system)
            json_object_set_new(body, "system", json_string(req->system));
        json_object_set_new(body, "messages", anthropic_messages(req));
        if (has_tools)
            json_object_set_new(body, "tools", anthropic_tools(req->tools));
    } else {
        json_object_set_new(body, "messages", openai_messages(req));
        json_object_set_new(body, "stream_options",
                            tk_json_obj("include_usage", json_true(), NULL));
        if (req->max_tokens > 0)
            json_object_set_new(body, "max_tokens", json_integer(req->max_tokens));
        if (has_tools)
            json_object_set_new(body, "tools", openai_tools(req->tools));
    }
    char *s = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    if (!s)
        tk_oom();
    if (len)
        *len = strlen(s);
    return s;
}

char *llm_build_url(const llm_provider *p)
{
    const char *b = p->base_url ? p->base_url : "";
    size_t n = strlen(b);
    while (n && b[n - 1] == '/')
        n--;
    if (p->kind == LLM_ANTHROPIC) {
        /* the SDKs' convention: the base is the host; tolerate a base ending in /v1 */
        if (n >= 3 && strncmp(b + n - 3, "/v1", 3) == 0)
            return tk_asprintf("%.*s/messages", (int)n, b);
        return tk_asprintf("%.*s/v1/messages", (int)n, b);
    }
    return tk_asprintf("%.*s/chat/completions", (int)n, b);
}
