/* The Telegram Bot API: answers, text, calls (see telegram.h). */
#include "app/notify/telegram.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/httpc.h"
#include "lib/json.h"
#include "lib/utf8.h"

void notify_telegram_answer_free(notify_telegram_answer *a)
{
    if (a->result)
        json_decref(a->result);
    a->result = NULL;
}

tk_status notify_telegram_parse_answer(const char *body, size_t len, long status,
                                       notify_telegram_answer *out)
{
    memset(out, 0, sizeof *out);
    out->error_code = status;
    if (!body || len == 0 || len > NOTIFY_TELEGRAM_ANSWER_MAX) {
        snprintf(out->description, sizeof out->description, "%s",
                 len ? "the answer is too large" : "the answer is empty");
        return TK_EINVAL;
    }
    json_error_t je;
    json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!j || !json_is_object(j)) {
        snprintf(out->description, sizeof out->description, "the answer is not a JSON object");
        json_decref(j);
        return TK_EINVAL;
    }
    json_t *ok = json_object_get(j, "ok");
    if (!json_is_boolean(ok)) {
        snprintf(out->description, sizeof out->description, "the answer has no boolean \"ok\"");
        json_decref(j);
        return TK_EINVAL;
    }
    out->ok = json_is_true(ok);
    json_t *ec = json_object_get(j, "error_code");
    if (json_is_integer(ec) && json_integer_value(ec) > 0 && json_integer_value(ec) < 1000)
        out->error_code = (long)json_integer_value(ec);
    const char *d = tk_json_str(j, "description");
    if (d)
        snprintf(out->description, sizeof out->description, "%s", d);
    json_t *params = json_object_get(j, "parameters");
    json_t *ra = json_is_object(params) ? json_object_get(params, "retry_after") : NULL;
    if (json_is_integer(ra) && json_integer_value(ra) > 0)
        out->retry_after = json_integer_value(ra) > 86400 ? 86400 : json_integer_value(ra);
    if (out->ok) {
        json_t *res = json_object_get(j, "result");
        if (res)
            out->result = json_incref(res);
    }
    json_decref(j);
    return TK_OK;
}

tk_status notify_telegram_update_at(const json_t *result, size_t i, notify_telegram_update *out)
{
    memset(out, 0, sizeof *out);
    json_t *u = json_array_get(result, i);
    json_t *id = json_is_object(u) ? json_object_get(u, "update_id") : NULL;
    if (!json_is_integer(id) || json_integer_value(id) < 0)
        return TK_EINVAL;
    out->update_id = json_integer_value(id);
    json_t *m = json_object_get(u, "message");
    json_t *chat = json_is_object(m) ? json_object_get(m, "chat") : NULL;
    json_t *cid = json_is_object(chat) ? json_object_get(chat, "id") : NULL;
    if (!json_is_integer(cid) || json_integer_value(cid) == 0)
        return TK_OK;
    out->chat_id = json_integer_value(cid);
    const char *type = tk_json_str(chat, "type");
    out->private_chat = type && strcmp(type, "private") == 0;
    out->text = tk_json_str(m, "text");
    json_t *from = json_object_get(m, "from");
    out->username = json_is_object(from) ? tk_json_str(from, "username") : NULL;
    return TK_OK;
}

tk_status notify_telegram_escape(tk_buf *out, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        tk_status st;
        switch (s[i]) {
        case '&':
            st = tk_buf_append_str(out, "&amp;");
            break;
        case '<':
            st = tk_buf_append_str(out, "&lt;");
            break;
        case '>':
            st = tk_buf_append_str(out, "&gt;");
            break;
        default:
            st = tk_buf_append_byte(out, s[i]);
            break;
        }
        if (st != TK_OK)
            return st;
    }
    return TK_OK;
}

/* The code point at s (bytes in *n, at least 1) and its escaped size in UTF-16 units. */
static size_t units_at(const unsigned char *s, size_t left, size_t *n)
{
    unsigned char c = s[0];
    *n = 1;
    if (c == '&')
        return 5;
    if (c == '<' || c == '>')
        return 4;
    if (c < 0x80)
        return 1;
    /* a character past U+FFFF is two UTF-16 units; a byte that starts no
     * character (the text is JSON's, so valid: never here) counts as one */
    size_t k = tk_utf8_decode((const char *)s, left, NULL);
    if (!k)
        return 1;
    *n = k;
    return k == 4 ? 2 : 1;
}

size_t notify_telegram_split(const char *text, size_t max, char ***parts)
{
    const unsigned char *t = (const unsigned char *)text;
    size_t len = strlen(text), np = 0, cap = 4;
    char **out = tk_calloc(cap, sizeof *out);
    size_t start = 0;
    if (max < 8)
        max = 8;
    while (start < len) {
        while (start < len && (t[start] == '\n' || t[start] == '\r'))
            start++;
        if (start >= len)
            break;
        size_t pos = start, units = 0, para = 0, line = 0, space = 0;
        while (pos < len) {
            size_t n, u = units_at(t + pos, len - pos, &n);
            if (units + u > max)
                break;
            if (t[pos] == '\n' && pos + 1 < len && t[pos + 1] == '\n' && pos > start)
                para = pos;
            else if (t[pos] == '\n' && pos > start)
                line = pos;
            else if (t[pos] == ' ' && pos > start)
                space = pos;
            units += u;
            pos += n;
        }
        size_t end = pos, next = pos;
        if (pos < len) {
            size_t cut = para ? para : line ? line : space;
            if (cut > start) {
                end = cut;
                next = cut + 1;
            }
        }
        while (end > start && (t[end - 1] == '\n' || t[end - 1] == '\r' || t[end - 1] == ' '))
            end--;
        if (end > start) {
            if (np == cap) {
                cap *= 2;
                out = tk_realloc(out, cap * sizeof *out);
            }
            char *p = tk_malloc(end - start + 1);
            memcpy(p, text + start, end - start);
            p[end - start] = 0;
            out[np++] = p;
        }
        start = next > start ? next : start + 1;
    }
    *parts = out;
    return np;
}

void notify_telegram_parts_free(char **parts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(parts[i]);
    free(parts);
}

void notify_telegram_redact(char *s, size_t cap, const char *token)
{
    if (!s || !token || !*token)
        return;
    size_t tl = strlen(token);
    static const char rep[] = "<token>";
    char *p, *from = s;
    while ((p = strstr(from, token))) {
        size_t rest = strlen(p + tl);
        if ((size_t)(p - s) + sizeof rep - 1 + rest + 1 > cap)
            rest = cap - (size_t)(p - s) - sizeof rep;
        memmove(p + sizeof rep - 1, p + tl, rest);
        memcpy(p, rep, sizeof rep - 1);
        p[sizeof rep - 1 + rest] = 0;
        from = p + sizeof rep - 1;
    }
}

tk_status notify_telegram_call(const char *base, const char *token, const char *method,
                               json_t *body, long timeout_ms, const volatile int *cancel,
                               notify_telegram_answer *a, char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    tk_buf url;
    tk_buf_init(&url, 4096);
    size_t bl = strlen(base);
    while (bl && base[bl - 1] == '/')
        bl--;
    tk_buf_append(&url, base, bl);
    tk_buf_printf(&url, "/bot%s/%s", token, method);
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    if (body)
        json_decref(body);
    static const char *const hdrs[] = {"Content-Type: application/json", NULL};
    tk_httpc_req req = {.method = "POST",
                        .url = tk_buf_cstr(&url),
                        .headers = hdrs,
                        .body = text ? text : "{}",
                        .body_len = text ? strlen(text) : 2,
                        .timeout_ms = timeout_ms,
                        .max_response = NOTIFY_TELEGRAM_ANSWER_MAX,
                        .cancel = cancel};
    tk_httpc_resp resp;
    tk_status st = tk_httpc_do(&req, &resp);
    free(text);
    tk_buf_free(&url);
    if (st != TK_OK) {
        snprintf(err, errlen, "%s: %s", method,
                 resp.error[0]       ? resp.error
                 : st == TK_ETIMEOUT ? "timed out"
                                     : "no answer");
        notify_telegram_redact(err, errlen, token);
        tk_httpc_resp_free(&resp);
        return st;
    }
    st = notify_telegram_parse_answer(tk_buf_cstr(&resp.body), resp.body.len, resp.status, a);
    if (st != TK_OK) {
        snprintf(err, errlen, "%s: HTTP %ld, %s", method, resp.status, a->description);
        notify_telegram_redact(err, errlen, token);
    }
    notify_telegram_redact(a->description, sizeof a->description, token);
    tk_httpc_resp_free(&resp);
    return st;
}
