#include "execd/events.h"

#include <string.h>

#include "lib/json.h"
#include "lib/tktime.h"
#include "lib/utf8.h"

json_t *execd_json_text(const char *s, size_t n)
{
    json_t *j = json_stringn(s, n);
    if (j)
        return j;
    /* Not valid UTF-8 (or an embedded NUL jansson refuses): clean it. */
    tk_buf b;
    tk_buf_init(&b, n * 3 + 16);
    for (size_t i = 0; i < n;) {
        size_t l = tk_utf8_decode(s + i, n - i, NULL);
        if (l > 0 && !(l == 1 && s[i] == 0)) {
            tk_buf_append(&b, s + i, l);
            i += l;
        } else {
            tk_buf_append(&b, "\xef\xbf\xbd", 3);
            i++;
        }
    }
    j = json_stringn(tk_buf_cstr(&b), b.len);
    tk_buf_free(&b);
    if (!j)
        j = json_string("");
    if (!j)
        tk_oom();
    return j;
}

static tk_status emit(tk_buf *b, json_t *ev)
{
    size_t before = b->len;
    tk_status st = tk_json_dump_buf(ev, b);
    if (st == TK_OK && (st = tk_buf_append(b, "\n\n", 2)) != TK_OK) {
        b->len = before;
        b->data[before] = '\0';
    }
    json_decref(ev);
    return st;
}

tk_status execd_ev_text(tk_buf *b, const char *type, const char *text, size_t len)
{
    json_t *ev = json_object();
    json_object_set_new(ev, "type", json_string(type));
    if (len)
        json_object_set_new(ev, "text", execd_json_text(text, len));
    json_object_set_new(ev, "timestamp", json_integer(tk_now_ms()));
    return emit(b, ev);
}

tk_status execd_ev_complete(tk_buf *b, int64_t execution_time_ms)
{
    json_t *ev = json_object();
    json_object_set_new(ev, "type", json_string("execution_complete"));
    /* Upstream omits a zero; the SDKs read a missing one as 0. We always send it. */
    json_object_set_new(ev, "execution_time", json_integer(execution_time_ms));
    json_object_set_new(ev, "timestamp", json_integer(tk_now_ms()));
    return emit(b, ev);
}

tk_status execd_ev_count(tk_buf *b, int64_t execution_count)
{
    json_t *ev = json_object();
    json_object_set_new(ev, "type", json_string("execution_count"));
    json_object_set_new(ev, "execution_count", json_integer(execution_count));
    json_object_set_new(ev, "timestamp", json_integer(tk_now_ms()));
    return emit(b, ev);
}

tk_status execd_ev_result(tk_buf *b, json_t *results)
{
    json_t *ev = json_object();
    json_object_set_new(ev, "type", json_string("result"));
    json_object_set_new(ev, "timestamp", json_integer(tk_now_ms()));
    json_object_set_new(ev, "results", results);
    return emit(b, ev);
}

tk_status execd_ev_error(tk_buf *b, const char *ename, const char *evalue, json_t *traceback)
{
    json_t *ev = json_object();
    json_object_set_new(ev, "type", json_string("error"));
    json_object_set_new(ev, "timestamp", json_integer(tk_now_ms()));
    if (!traceback) {
        traceback = json_array();
        json_array_append_new(traceback, execd_json_text(evalue, strlen(evalue)));
    }
    json_t *e = json_object();
    json_object_set_new(e, "ename", execd_json_text(ename, strlen(ename)));
    json_object_set_new(e, "evalue", execd_json_text(evalue, strlen(evalue)));
    json_object_set_new(e, "traceback", traceback);
    json_object_set_new(ev, "error", e);
    return emit(b, ev);
}
