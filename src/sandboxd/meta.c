#include "sandboxd/meta.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "lib/query.h"

static int label_char(char c)
{
    return isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.';
}

/* [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, up to max characters; empty when allow_empty. */
static int label_valid(const char *s, size_t len, size_t max, int allow_empty)
{
    if (len == 0)
        return allow_empty;
    if (len > max)
        return 0;
    if (!isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[len - 1]))
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!label_char(s[i]))
            return 0;
    return 1;
}

/* A DNS subdomain: lower-case labels [a-z0-9]([-a-z0-9]*[a-z0-9])? joined by '.', ≤ 253. */
static int dns_subdomain_valid(const char *s, size_t len)
{
    if (len == 0 || len > 253)
        return 0;
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i == len || s[i] == '.') {
            size_t l = i - start;
            if (l == 0 || l > 63)
                return 0;
            if (!isalnum((unsigned char)s[start]) || !isalnum((unsigned char)s[i - 1]))
                return 0;
            for (size_t j = start; j < i; j++) {
                char c = s[j];
                if (!((c >= 'a' && c <= 'z') || isdigit((unsigned char)c) || c == '-'))
                    return 0;
            }
            start = i + 1;
        }
    }
    return 1;
}

int sbx_meta_key_valid(const char *k, char *msg, size_t msglen)
{
    size_t n = strlen(k);
    const char *slash = memchr(k, '/', n);
    if (strncmp(k, "opensandbox.io/", 15) == 0) {
        snprintf(msg, msglen, "metadata key \"%.80s\": the prefix opensandbox.io/ is reserved", k);
        return 0;
    }
    const char *name = k;
    size_t nlen = n;
    if (slash) {
        size_t plen = (size_t)(slash - k);
        if (!dns_subdomain_valid(k, plen)) {
            snprintf(msg, msglen, "metadata key \"%.80s\": the prefix must be a DNS subdomain", k);
            return 0;
        }
        name = slash + 1;
        nlen = n - plen - 1;
    }
    if (!label_valid(name, nlen, 63, 0)) {
        snprintf(msg, msglen,
                 "metadata key \"%.80s\" must be at most 63 characters of [A-Za-z0-9-_.], starting "
                 "and ending alphanumeric",
                 k);
        return 0;
    }
    return 1;
}

int sbx_meta_value_valid(const char *v, char *msg, size_t msglen)
{
    if (!label_valid(v, strlen(v), 63, 1)) {
        snprintf(msg, msglen,
                 "metadata value \"%.80s\" must be at most 63 characters of [A-Za-z0-9-_.], "
                 "starting and ending alphanumeric",
                 v);
        return 0;
    }
    return 1;
}

tk_status sbx_meta_check(const json_t *obj, char *msg, size_t msglen)
{
    if (!obj || json_is_null(obj))
        return TK_OK;
    if (!json_is_object(obj)) {
        snprintf(msg, msglen, "metadata must be an object of strings");
        return TK_EINVAL;
    }
    if (json_object_size(obj) > 64) {
        snprintf(msg, msglen, "metadata has more than 64 keys");
        return TK_EINVAL;
    }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)obj, k, v)
    {
        if (!json_is_string(v)) {
            snprintf(msg, msglen, "metadata.%.80s must be a string", k);
            return TK_EINVAL;
        }
        if (!sbx_meta_key_valid(k, msg, msglen) ||
            !sbx_meta_value_valid(json_string_value(v), msg, msglen))
            return TK_EINVAL;
    }
    return TK_OK;
}

tk_status sbx_meta_filter_parse(tk_arena *a, const char *s, const char ***keys,
                                const char ***values, size_t *n)
{
    tk_kv *items;
    size_t count;
    *n = 0;
    tk_status st = tk_query_parse(a, s, strlen(s), 64, &items, &count);
    if (st != TK_OK)
        return st;
    const char **ks = tk_arena_xalloc(a, (count ? count : 1) * sizeof *ks);
    const char **vs = tk_arena_xalloc(a, (count ? count : 1) * sizeof *vs);
    size_t j = 0;
    for (size_t i = 0; i < count; i++) {
        if (!items[i].name[0])
            continue;
        ks[j] = items[i].name;
        /* tk_query_parse cannot tell "k" from "k="; a bare key has an empty value
         * and the raw text has no '=' after it. */
        vs[j] = items[i].value;
        j++;
    }
    /* bare keys: find "name" not followed by '=' in the raw text */
    for (size_t i = 0; i < j; i++) {
        size_t kl = strlen(ks[i]);
        if (vs[i][0])
            continue;
        const char *p = s;
        int bare = 0;
        while ((p = strstr(p, ks[i])) != NULL) {
            int at_start = p == s || p[-1] == '&';
            if (at_start && (p[kl] == '\0' || p[kl] == '&')) {
                bare = 1;
                break;
            }
            p += kl;
        }
        if (bare)
            vs[i] = NULL;
    }
    *keys = ks;
    *values = vs;
    *n = j;
    return TK_OK;
}

int sbx_meta_matches(const json_t *metadata, const char *const *keys, const char *const *values,
                     size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const json_t *v = metadata ? json_object_get(metadata, keys[i]) : NULL;
        if (!v || !json_is_string(v))
            return 0;
        if (values[i] && strcmp(json_string_value(v), values[i]) != 0)
            return 0;
    }
    return 1;
}
