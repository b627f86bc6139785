#include "lib/json.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int depth_ok(const char *p, size_t len)
{
    /* jansson's own limit is 2048; enforce a tighter one before parsing. */
    int depth = 0, in_str = 0;
    for (size_t i = 0; i < len; i++) {
        char c = p[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = 0;
            continue;
        }
        if (c == '"')
            in_str = 1;
        else if (c == '{' || c == '[') {
            if (++depth > TK_JSON_MAX_DEPTH)
                return 0;
        } else if (c == '}' || c == ']')
            depth--;
    }
    return 1;
}

json_t *tk_json_parse(const char *data, size_t len, size_t max_len, char *err, size_t errlen)
{
    if (len > max_len) {
        snprintf(err, errlen, "JSON body larger than %zu bytes", max_len);
        return NULL;
    }
    if (!depth_ok(data, len)) {
        snprintf(err, errlen, "JSON nested deeper than %d levels", TK_JSON_MAX_DEPTH);
        return NULL;
    }
    json_error_t je;
    json_t *j = json_loadb(data, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!j)
        snprintf(err, errlen, "invalid JSON at line %d column %d: %s", je.line, je.column, je.text);
    return j;
}

const char *tk_json_str(const json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

const char *tk_json_str_or(const json_t *obj, const char *key, const char *def)
{
    const char *s = tk_json_str(obj, key);
    return s ? s : def;
}

tk_status tk_json_int(const json_t *obj, const char *key, int64_t *out)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return TK_ENOENT;
    if (json_is_integer(v)) {
        *out = json_integer_value(v);
        return TK_OK;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        /* range first: converting an out-of-range double is undefined */
        if (d > -9.2e18 && d < 9.2e18 && d == (double)(int64_t)d) {
            *out = (int64_t)d;
            return TK_OK;
        }
    }
    return TK_EINVAL;
}

int64_t tk_json_int_or(const json_t *obj, const char *key, int64_t def)
{
    int64_t v;
    return tk_json_int(obj, key, &v) == TK_OK ? v : def;
}

int tk_json_bool_or(const json_t *obj, const char *key, int def)
{
    json_t *v = json_object_get(obj, key);
    return json_is_boolean(v) ? json_is_true(v) : def;
}

static int dump_cb(const char *buffer, size_t size, void *data)
{
    return tk_buf_append(data, buffer, size) == TK_OK ? 0 : -1;
}

tk_status tk_json_dump_buf(const json_t *j, tk_buf *b)
{
    size_t before = b->len;
    if (json_dump_callback(j, dump_cb, b, JSON_COMPACT | JSON_ENCODE_ANY) != 0) {
        b->len = before;
        if (b->data)
            b->data[before] = '\0';
        return TK_ETOOBIG;
    }
    return TK_OK;
}

char *tk_json_dumps(const json_t *j)
{
    char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!s)
        tk_oom();
    return s;
}

json_t *tk_json_obj(const char *key, ...)
{
    json_t *o = json_object();
    va_list ap;
    va_start(ap, key);
    for (const char *k = key; k; k = va_arg(ap, const char *)) {
        json_t *v = va_arg(ap, json_t *);
        if (v)
            json_object_set_new(o, k, v);
    }
    va_end(ap);
    return o;
}

tk_status tk_json_quote(tk_buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    tk_status st = tk_buf_append_byte(b, '"');
    size_t run = 0;
    for (size_t i = 0; i < n && st == TK_OK; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            run++;
            continue;
        }
        st = tk_buf_append(b, s + i - run, run);
        run = 0;
        char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
        size_t elen = 2;
        switch (c) {
        case '"':
        case '\\':
            e[1] = (char)c;
            break;
        case '\n':
            e[1] = 'n';
            break;
        case '\r':
            e[1] = 'r';
            break;
        case '\t':
            e[1] = 't';
            break;
        default:
            elen = 6;
        }
        if (st == TK_OK)
            st = tk_buf_append(b, e, elen);
    }
    if (st == TK_OK)
        st = tk_buf_append(b, s + n - run, run);
    if (st == TK_OK)
        st = tk_buf_append_byte(b, '"');
    return st;
}
