#include "app/agent/history.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/json.h"
#include "lib/pg.h"

static const char *role_of(const json_t *m)
{
    return tk_json_str_or(m, "role", "");
}

static int has_calls(const json_t *m)
{
    json_t *c = json_object_get(m, "tool_calls");
    return json_is_array(c) && json_array_size(c) > 0;
}

json_t *agent_history_window(const json_t *msgs, size_t max)
{
    size_t n = json_array_size(msgs);
    size_t start = n > max ? n - max : 0;
    /* begin at a user message; failing that, at least not at a tool result */
    size_t s = start;
    while (s < n && strcmp(role_of(json_array_get(msgs, s)), "user") != 0)
        s++;
    if (s == n) {
        s = start;
        while (s < n && strcmp(role_of(json_array_get(msgs, s)), "tool") == 0)
            s++;
    }
    json_t *out = json_array();
    size_t i = s;
    while (i < n) {
        json_t *m = json_array_get(msgs, i);
        const char *role = role_of(m);
        if (strcmp(role, "tool") == 0) {
            i++; /* an orphan: its call is not right before it */
            continue;
        }
        if (strcmp(role, "assistant") != 0 || !has_calls(m)) {
            json_array_append(out, m);
            i++;
            continue;
        }
        /* an assistant message with calls and the tool results right after it */
        size_t j = i + 1;
        while (j < n && strcmp(role_of(json_array_get(msgs, j)), "tool") == 0)
            j++;
        json_t *calls = json_object_get(m, "tool_calls");
        json_t *kept = json_array();
        json_t *results = json_array();
        size_t k;
        json_t *c;
        json_array_foreach(calls, k, c)
        {
            const char *id = tk_json_str_or(c, "id", "");
            if (!*id)
                continue;
            int dup = 0;
            size_t q;
            json_t *kc;
            json_array_foreach(kept, q, kc) dup |= strcmp(tk_json_str_or(kc, "id", ""), id) == 0;
            if (dup)
                continue;
            for (size_t t = i + 1; t < j; t++) {
                json_t *tm = json_array_get(msgs, t);
                if (strcmp(tk_json_str_or(tm, "tool_call_id", ""), id) == 0) {
                    json_array_append(kept, c);
                    json_array_append(results, tm);
                    break;
                }
            }
        }
        const char *content = tk_json_str_or(m, "content", "");
        if (json_array_size(kept) == 0) {
            if (*content) {
                json_t *copy = json_deep_copy(m);
                json_object_del(copy, "tool_calls");
                json_array_append_new(out, copy);
            }
        } else {
            json_t *copy = json_deep_copy(m);
            json_object_set(copy, "tool_calls", kept);
            json_array_append_new(out, copy);
            json_array_extend(out, results);
        }
        json_decref(kept);
        json_decref(results);
        i = j;
    }
    return out;
}

json_t *agent_history_load(PGconn *c, const char *session_id, size_t max)
{
    char lim[24];
    snprintf(lim, sizeof lim, "%zu", max);
    const char *p[] = {"", session_id, lim};
    PGresult *r = tk_pg_query(c, "SELECT $1::text, " AGENT_HISTORY_SQL, 3, p);
    if (!tk_pg_ok(r)) {
        PQclear(r);
        return NULL;
    }
    json_t *j = json_loads(PQgetvalue(r, 0, 1), 0, NULL);
    PQclear(r);
    return j;
}
