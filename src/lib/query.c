#include "lib/query.h"

#include <string.h>

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

tk_status tk_percent_decode(tk_arena *a, const char *s, size_t len, int plus_space, char **out,
                            size_t *outlen)
{
    char *d = tk_arena_alloc(a, len + 1);
    if (!d)
        return TK_ETOOBIG;
    size_t j = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == '\0')
            return TK_EINVAL;
        if (c == '%') {
            if (i + 2 >= len)
                return TK_EINVAL;
            int h = hexval(s[i + 1]), l = hexval(s[i + 2]);
            if (h < 0 || l < 0)
                return TK_EINVAL;
            c = (char)(h * 16 + l);
            if (c == '\0')
                return TK_EINVAL;
            i += 2;
        } else if (c == '+' && plus_space) {
            c = ' ';
        }
        d[j++] = c;
    }
    d[j] = '\0';
    *out = d;
    if (outlen)
        *outlen = j;
    return TK_OK;
}

tk_status tk_query_parse(tk_arena *a, const char *qs, size_t len, size_t max_items, tk_kv **items,
                         size_t *n)
{
    *items = NULL;
    *n = 0;
    size_t count = 0;
    for (size_t i = 0; i < len; i++)
        if (qs[i] == '&')
            count++;
    count++;
    if (len == 0)
        return TK_OK;
    if (count > max_items)
        return TK_ETOOBIG;
    tk_kv *kv = tk_arena_alloc(a, count * sizeof *kv);
    if (!kv)
        return TK_ETOOBIG;
    size_t k = 0, start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && qs[i] != '&')
            continue;
        const char *part = qs + start;
        size_t plen = i - start;
        start = i + 1;
        if (plen == 0)
            continue;
        const char *eq = memchr(part, '=', plen);
        size_t nlen = eq ? (size_t)(eq - part) : plen;
        char *name, *value;
        if (tk_percent_decode(a, part, nlen, 1, &name, NULL) != TK_OK)
            return TK_EINVAL;
        if (eq) {
            if (tk_percent_decode(a, eq + 1, plen - nlen - 1, 1, &value, NULL) != TK_OK)
                return TK_EINVAL;
        } else {
            value = tk_arena_strdup(a, "");
        }
        kv[k].name = name;
        kv[k].value = value;
        k++;
    }
    *items = kv;
    *n = k;
    return TK_OK;
}

const char *tk_query_get(const tk_kv *items, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(items[i].name, name) == 0)
            return items[i].value;
    return NULL;
}

tk_status tk_path_split(tk_arena *a, const char *path, size_t len, char ***segs, size_t *n)
{
    *segs = NULL;
    *n = 0;
    if (len == 0 || path[0] != '/')
        return TK_EINVAL;
    size_t count = 0;
    for (size_t i = 0; i < len; i++)
        if (path[i] == '/')
            count++;
    if (count > TK_PATH_MAX_SEGMENTS)
        return TK_ETOOBIG;
    char **out = tk_arena_alloc(a, (count + 1) * sizeof *out);
    if (!out)
        return TK_ETOOBIG;
    size_t k = 0, start = 1;
    for (size_t i = 1; i <= len; i++) {
        if (i < len && path[i] != '/')
            continue;
        size_t slen = i - start;
        if (slen > 0) {
            if (tk_percent_decode(a, path + start, slen, 0, &out[k], NULL) != TK_OK)
                return TK_EINVAL;
            k++;
        }
        start = i + 1;
    }
    out[k] = NULL;
    *segs = out;
    *n = k;
    return TK_OK;
}

static int kept(unsigned char c, const char *keep)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.' || c == '~' || (keep && c && strchr(keep, c));
}

/* Writes s encoded into d (room for 3 * strlen(s) + 1); returns the length. */
static size_t encode(char *d, const char *s, const char *keep)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t j = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (kept(*p, keep)) {
            d[j++] = (char)*p;
        } else {
            d[j++] = '%';
            d[j++] = hex[*p >> 4];
            d[j++] = hex[*p & 15];
        }
    }
    d[j] = '\0';
    return j;
}

tk_status tk_percent_append(tk_buf *b, const char *s, const char *keep)
{
    size_t need = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        need += kept(*p, keep) ? 1 : 3;
    tk_status st = tk_buf_reserve(b, need);
    if (st != TK_OK)
        return st;
    b->len += encode(b->data + b->len, s, keep);
    return TK_OK;
}

char *tk_percent_encode(tk_arena *a, const char *s)
{
    char *d = tk_arena_xalloc(a, strlen(s) * 3 + 1);
    encode(d, s, NULL);
    return d;
}
