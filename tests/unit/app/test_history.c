/* agent/history: the window of the conversation sent to the model (200
 * messages, tool results kept paired with their calls). */
#include <string.h>

#include "app/agent/history.h"
#include "lib/json.h"
#include "tk_test.h"

static json_t *msgs(const char *s)
{
    char err[128];
    json_t *j = tk_json_parse(s, strlen(s), 1 << 20, err, sizeof err);
    if (!j) {
        fprintf(stderr, "bad fixture: %s\n", err);
        abort();
    }
    return j;
}

static const char *roles(const json_t *a, char *buf, size_t n)
{
    buf[0] = 0;
    size_t i;
    json_t *m;
    json_array_foreach(a, i, m)
    {
        const char *r = tk_json_str_or(m, "role", "?");
        strncat(buf,
                r[0] == 'u'   ? "u"
                : r[0] == 'a' ? "a"
                : r[0] == 't' ? "t"
                              : "?",
                n - strlen(buf) - 1);
    }
    return buf;
}

TEST(window_keeps_everything_small)
{
    json_t *m =
        msgs("[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\",\"content\":\"b\"}]");
    json_t *w = agent_history_window(m, 200);
    char b[64];
    CHECK_STR(roles(w, b, sizeof b), "ua");
    json_decref(w);
    json_decref(m);
}

TEST(window_caps_and_starts_at_a_user_message)
{
    json_t *m = json_array();
    for (int i = 0; i < 301; i++)
        json_array_append_new(m, tk_json_obj("role", json_string(i % 2 ? "assistant" : "user"),
                                             "content", json_string("x"), NULL));
    /* 301 messages: the last 200 start with an assistant one, which is dropped */
    json_t *w = agent_history_window(m, 200);
    CHECK_INT(json_array_size(w), ==, 199);
    CHECK_STR(tk_json_str(json_array_get(w, 0), "role"), "user");
    CHECK(json_array_get(w, 198) != NULL);
    json_decref(w);
    w = agent_history_window(m, 10);
    CHECK(json_array_size(w) <= 10);
    json_decref(w);
    json_decref(m);
}

TEST(window_drops_orphan_results_and_unanswered_calls)
{
    json_t *m = msgs(
        "[{\"role\":\"tool\",\"tool_call_id\":\"x\",\"content\":\"orphan\"},"
        "{\"role\":\"user\",\"content\":\"go\"},"
        "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"c1\",\"name\":\"a\","
        "\"arguments\":\"{}\"},{\"id\":\"c2\",\"name\":\"b\",\"arguments\":\"{}\"}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"c2\",\"content\":\"r2\"},"
        "{\"role\":\"tool\",\"tool_call_id\":\"zz\",\"content\":\"stray\"},"
        "{\"role\":\"assistant\",\"content\":\"mid\",\"tool_calls\":[{\"id\":\"c3\",\"name\":\"a\","
        "\"arguments\":\"{}\"}]},"
        "{\"role\":\"user\",\"content\":\"next\"},"
        "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"c4\",\"name\":\"a\","
        "\"arguments\":\"{}\"}]}]");
    json_t *w = agent_history_window(m, 200);
    char b[64];
    /* user, assistant(c2 only), tool c2, assistant "mid" without calls, user; the
     * last assistant (no content, unanswered) goes */
    CHECK_STR(roles(w, b, sizeof b), "uatau");
    json_t *a = json_array_get(w, 1);
    CHECK_INT(json_array_size(json_object_get(a, "tool_calls")), ==, 1);
    CHECK_STR(tk_json_str(json_array_get(json_object_get(a, "tool_calls"), 0), "id"), "c2");
    CHECK(json_object_get(json_array_get(w, 3), "tool_calls") == NULL);
    CHECK_STR(tk_json_str(json_array_get(w, 3), "content"), "mid");
    json_decref(w);
    json_decref(m);
}

TEST(window_cut_inside_a_tool_exchange_stays_paired)
{
    /* u a(call) t u a : a window of 4 starts at the tool result: orphan dropped */
    json_t *m = msgs("[{\"role\":\"user\",\"content\":\"1\"},"
                     "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"c\","
                     "\"name\":\"n\",\"arguments\":\"{}\"}]},"
                     "{\"role\":\"tool\",\"tool_call_id\":\"c\",\"content\":\"r\"},"
                     "{\"role\":\"user\",\"content\":\"2\"},"
                     "{\"role\":\"assistant\",\"content\":\"ok\"}]");
    json_t *w = agent_history_window(m, 4);
    char b[64];
    CHECK_STR(roles(w, b, sizeof b), "ua");
    json_decref(w);
    w = agent_history_window(m, 5);
    CHECK_STR(roles(w, b, sizeof b), "uatua");
    json_decref(w);
    json_decref(m);
}

TEST_MAIN()
