/* tusko-sandboxd's parsers of what a client sends: the create request (JSON), the
 * quantities in it, the list filter's metadata query, metadata keys and values. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/arena.h"
#include "lib/json.h"
#include "sandboxd/api.h"
#include "sandboxd/env.h"
#include "sandboxd/limits.h"
#include "sandboxd/meta.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static sbx_service svc;
    static sbx_api api;
    if (!api.svc) {
        svc.cfg.min_timeout_s = 60;
        svc.cfg.max_timeout_s = 86400;
        svc.cfg.pool_name = "default";
        svc.cfg.policy = (sbx_limits_policy){
            .def = {.memory_bytes = 2LL << 30, .cpu_millis = 1000, .pids = 512},
            .min = {.memory_bytes = 32LL << 20, .cpu_millis = 10, .pids = 16},
            .max = {.memory_bytes = 64LL << 30, .cpu_millis = 64000, .pids = 4096},
        };
        snprintf(svc.img.hash, sizeof svc.img.hash, "abc123");
        api.svc = &svc;
    }
    char err[256], msg[512];
    json_t *j = tk_json_parse((const char *)data, size, 1 << 20, err, sizeof err);
    if (j) {
        sbx_service_create_req req;
        const char *code = NULL;
        int st = sbx_api_parse_create(&api, j, &req, &code, msg, sizeof msg);
        if (st == 0)
            free(req.netpol);
        if (st == 0 && req.volumes) {
            /* what was accepted: mount points where they may be, nothing nested */
            for (size_t i = 0; i < req.volumes->n; i++) {
                const char *t = req.volumes->v[i].target;
                if (strncmp(t, "/mnt/", 5) && strncmp(t, "/workspace/", 11) &&
                    strncmp(t, "/tmp/", 5))
                    __builtin_trap();
                const char *sub = req.volumes->v[i].sub;
                size_t sl = strlen(sub);
                if (strstr(t, "/../") || strcmp(sub, "..") == 0 || strncmp(sub, "../", 3) == 0 ||
                    strstr(sub, "/../") || (sl >= 3 && strcmp(sub + sl - 3, "/..") == 0) ||
                    sub[0] == '/')
                    __builtin_trap();
                if (!req.volumes->v[i].named) /* no allow list here: no host volume */
                    __builtin_trap();
            }
            free(req.volumes);
        }
        if (st == 0) {
            /* what was accepted is within the policy */
            if (req.limits.memory_bytes < svc.cfg.policy.min.memory_bytes ||
                req.limits.memory_bytes > svc.cfg.policy.max.memory_bytes || req.limits.pids < 16 ||
                req.limits.pids > 4096 || !req.image ||
                (req.timeout_s && (req.timeout_s < 60 || req.timeout_s > 86400)))
                __builtin_trap();
        } else if ((st != 400 && st != 403) || !code) {
            __builtin_trap();
        }
        json_decref(j);
    }
    /* the raw bytes as a string for the smaller parsers */
    char s[512];
    size_t n = size < sizeof s - 1 ? size : sizeof s - 1;
    memcpy(s, data, n);
    s[n] = '\0';
    int64_t v;
    sbx_limits_parse_cpu(s, &v);
    if (sbx_limits_parse_bytes(s, &v) == TK_OK && v < 0)
        __builtin_trap();
    sbx_meta_key_valid(s, msg, sizeof msg);
    sbx_meta_value_valid(s, msg, sizeof msg);
    sbx_env_name_valid(s);
    tk_arena *a = tk_arena_new(1 << 20);
    const char **k, **vals;
    size_t nk;
    if (sbx_meta_filter_parse(a, s, &k, &vals, &nk) == TK_OK) {
        for (size_t i = 0; i < nk; i++)
            if (!k[i] || !k[i][0])
                __builtin_trap();
    }
    tk_arena_free(a);
    return 0;
}
