/* What the model sends the agent loop: workspace paths (write_file, read_file,
 * preview) and conversations (the history window), from arbitrary bytes. Paths
 * either are refused or come out absolute under /workspace with no "..", NUL or
 * control character; the window never grows, starts paired and keeps order. */
#include <stdint.h>
#include <string.h>

#include "app/agent/history.h"
#include "app/workspace.h"
#include "lib/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char out[AGENT_WS_PATH_MAX + 64], err[256];
    if (agent_ws_path((const char *)data, size, out, sizeof out, err, sizeof err) == TK_OK) {
        if (strncmp(out, "/workspace", 10) != 0 || (out[10] != 0 && out[10] != '/'))
            __builtin_trap();
        if (strstr(out, "/../") || strstr(out, "//") ||
            (strlen(out) >= 3 && !strcmp(out + strlen(out) - 3, "/..")))
            __builtin_trap();
        for (const char *p = out; *p; p++)
            if ((unsigned char)*p < 0x20)
                __builtin_trap();
    } else if (!err[0]) {
        __builtin_trap();
    }
    char jerr[128];
    json_t *j = tk_json_parse((const char *)data, size, 1 << 20, jerr, sizeof jerr);
    if (json_is_array(j)) {
        size_t max = size % 7;
        json_t *w = agent_history_window(j, max);
        if (json_array_size(w) > max)
            __builtin_trap();
        json_t *first = json_array_get(w, 0);
        if (first && strcmp(tk_json_str_or(first, "role", ""), "tool") == 0)
            __builtin_trap();
        json_decref(w);
    }
    json_decref(j);
    return 0;
}
