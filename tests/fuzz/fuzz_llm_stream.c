/* The model stream parsers (OpenAI chunks, Anthropic events), fed arbitrary
 * bytes in arbitrary chunks: never a crash, caps always hold, and whatever text
 * was reported through on_text is exactly what the result keeps. */
#include <stdint.h>
#include <string.h>

#include "app/llm/llm.h"

static size_t reported;

static void on_text(void *ud, const char *d, size_t n)
{
    reported += n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    llm_kind kind = (data[0] & 1) ? LLM_ANTHROPIC : LLM_OPENAI;
    size_t chunk = (size_t)(data[0] >> 1) % 23 + 1;
    llm_result r;
    llm_result_init(&r);
    reported = 0;
    llm_callbacks cb = {.on_text = on_text};
    llm_parser *p = llm_parser_new(kind, &cb, NULL, &r);
    for (size_t i = 1; i < size; i += chunk) {
        size_t len = size - i < chunk ? size - i : chunk;
        if (llm_parser_feed(p, (const char *)data + i, len) != TK_OK)
            break;
    }
    if (reported != r.text.len)
        __builtin_trap();
    if (r.ncalls > LLM_MAX_TOOL_CALLS)
        __builtin_trap();
    for (size_t i = 0; i < r.ncalls; i++)
        if (!r.calls[i].id || !r.calls[i].name)
            __builtin_trap();
    llm_parser_free(p);
    llm_result_free(&r);
    /* error bodies of either shape, or anything */
    char msg[128];
    llm_error_message((const char *)data, size, msg, sizeof msg);
    if (strlen(msg) >= sizeof msg)
        __builtin_trap();
    return 0;
}
