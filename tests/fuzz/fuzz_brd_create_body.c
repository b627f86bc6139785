/* browserd's CreateSession checks (brd_api_parse_create), fed arbitrary JSON:
 * what is accepted stays within the limits the checks promise, and every
 * cookie passed on to Chromium has a string name and value and a url or a
 * domain. */
#include <stdint.h>
#include <string.h>

#include "browserd/api.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t je;
    json_t *b = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &je);
    if (!b)
        return 0;
    brd_api api = {.max_timeout_ms = 3600000};
    brd_session_req req;
    json_t *cookies;
    char msg[512];
    int rc = brd_api_parse_create(&api, b, &req, &cookies, msg, sizeof msg);
    if (rc == 0) {
        if (req.timeout_ms && (req.timeout_ms < 1000 || req.timeout_ms > api.max_timeout_ms))
            __builtin_trap();
        if ((req.width || req.height) &&
            (req.width < 100 || req.width > 4096 || req.height < 100 || req.height > 4096))
            __builtin_trap();
        if (req.user_agent && (strlen(req.user_agent) > 512 || strchr(req.user_agent, '\n')))
            __builtin_trap();
        if (req.id && strlen(req.id) != 36)
            __builtin_trap();
        size_t i;
        json_t *c;
        json_array_foreach(cookies, i, c)
        {
            if (!json_is_string(json_object_get(c, "name")) ||
                !json_is_string(json_object_get(c, "value")) ||
                (!json_object_get(c, "url") && !json_object_get(c, "domain")))
                __builtin_trap();
        }
        if (req.cookies != cookies)
            __builtin_trap();
    } else if (rc != 400 || !msg[0] || cookies) {
        __builtin_trap();
    }
    json_decref(cookies);
    json_decref(b);
    return 0;
}
