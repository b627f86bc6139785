#include "sandboxd/limits.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "lib/query.h"

tk_status sbx_limits_parse_cpu(const char *s, int64_t *millis)
{
    if (!s || !*s || strlen(s) > 32)
        return TK_EINVAL;
    size_t n = strlen(s);
    if (s[n - 1] == 'm') {
        int64_t v;
        char tmp[33];
        memcpy(tmp, s, n - 1);
        tmp[n - 1] = '\0';
        if (tk_parse_i64(tmp, 0, INT64_MAX / 1000, &v) != TK_OK)
            return TK_EINVAL;
        *millis = v;
        return TK_OK;
    }
    int64_t whole = 0, frac = 0;
    int fdigits = 0, wdigits = 0;
    const char *p = s;
    for (; *p && *p != '.'; p++) {
        if (!isdigit((unsigned char)*p) || whole > INT64_MAX / 10000)
            return TK_EINVAL;
        whole = whole * 10 + (*p - '0');
        wdigits++;
    }
    if (*p == '.') {
        p++;
        for (; *p; p++) {
            if (!isdigit((unsigned char)*p) || fdigits >= 3)
                return TK_EINVAL;
            frac = frac * 10 + (*p - '0');
            fdigits++;
        }
        if (!fdigits)
            return TK_EINVAL;
    }
    if (!wdigits && !fdigits)
        return TK_EINVAL;
    while (fdigits < 3) {
        frac *= 10;
        fdigits++;
    }
    *millis = whole * 1000 + frac;
    return TK_OK;
}

tk_status sbx_limits_parse_bytes(const char *s, int64_t *bytes)
{
    if (!s || !*s || strlen(s) > 32)
        return TK_EINVAL;
    const char *p = s;
    int64_t v = 0;
    if (!isdigit((unsigned char)*p))
        return TK_EINVAL;
    for (; isdigit((unsigned char)*p); p++) {
        if (v > (INT64_MAX - 9) / 10)
            return TK_ETOOBIG;
        v = v * 10 + (*p - '0');
    }
    static const struct {
        const char *suf;
        int64_t mul;
    } sufs[] = {
        {"", 1},
        {"Ki", 1LL << 10},
        {"Mi", 1LL << 20},
        {"Gi", 1LL << 30},
        {"Ti", 1LL << 40},
        {"Pi", 1LL << 50},
        {"Ei", 1LL << 60},
        {"k", 1000LL},
        {"K", 1000LL},
        {"M", 1000000LL},
        {"G", 1000000000LL},
        {"T", 1000000000000LL},
        {"P", 1000000000000000LL},
        {"E", 1000000000000000000LL},
        /* settings spell sizes as tmpfs does */
        {"m", 1LL << 20},
        {"g", 1LL << 30},
    };
    for (size_t i = 0; i < TK_ARRAY_LEN(sufs); i++) {
        if (strcmp(p, sufs[i].suf) == 0) {
            if (v && sufs[i].mul > INT64_MAX / v)
                return TK_ETOOBIG;
            *bytes = v * sufs[i].mul;
            return TK_OK;
        }
    }
    return TK_EINVAL;
}

tk_status sbx_limits_from_json(const json_t *obj, const sbx_limits_policy *pol, sbx_limits *out,
                               char *msg, size_t msglen)
{
    *out = pol->def;
    if (!obj || json_is_null(obj))
        return TK_OK;
    if (!json_is_object(obj)) {
        snprintf(msg, msglen, "resourceLimits must be an object of strings");
        return TK_EINVAL;
    }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)obj, k, v)
    {
        const char *s = json_is_string(v) ? json_string_value(v) : NULL;
        char num[32];
        if (!s && json_is_integer(v)) {
            snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v));
            s = num;
        }
        if (!s) {
            snprintf(msg, msglen, "resourceLimits.%s must be a string", k);
            return TK_EINVAL;
        }
        if (strcmp(k, "cpu") == 0) {
            if (sbx_limits_parse_cpu(s, &out->cpu_millis) != TK_OK) {
                snprintf(
                    msg, msglen,
                    "resourceLimits.cpu \"%.40s\" is not a CPU quantity (e.g. \"500m\", \"1\")", s);
                return TK_EINVAL;
            }
            if (out->cpu_millis < pol->min.cpu_millis || out->cpu_millis > pol->max.cpu_millis) {
                snprintf(msg, msglen, "resourceLimits.cpu must be between %lldm and %lldm",
                         (long long)pol->min.cpu_millis, (long long)pol->max.cpu_millis);
                return TK_EINVAL;
            }
        } else if (strcmp(k, "memory") == 0) {
            if (sbx_limits_parse_bytes(s, &out->memory_bytes) != TK_OK) {
                snprintf(
                    msg, msglen,
                    "resourceLimits.memory \"%.40s\" is not a memory quantity (e.g. \"512Mi\")", s);
                return TK_EINVAL;
            }
            if (out->memory_bytes < pol->min.memory_bytes ||
                out->memory_bytes > pol->max.memory_bytes) {
                snprintf(msg, msglen, "resourceLimits.memory must be between %lld and %lld bytes",
                         (long long)pol->min.memory_bytes, (long long)pol->max.memory_bytes);
                return TK_EINVAL;
            }
        } else if (strcmp(k, "pids") == 0) {
            if (tk_parse_i64(s, pol->min.pids, pol->max.pids, &out->pids) != TK_OK) {
                snprintf(msg, msglen,
                         "resourceLimits.pids must be an integer between %lld and %lld",
                         (long long)pol->min.pids, (long long)pol->max.pids);
                return TK_EINVAL;
            }
        } else if (strcmp(k, "gpu") == 0 || strcmp(k, "nvidia.com/gpu") == 0) {
            if (strcmp(s, "0") != 0) {
                snprintf(msg, msglen, "resourceLimits.%s: this service has no GPUs to give", k);
                return TK_EINVAL;
            }
        } else {
            snprintf(msg, msglen,
                     "resourceLimits.%.60s is not a known limit (use cpu, memory, pids)", k);
            return TK_EINVAL;
        }
    }
    return TK_OK;
}
