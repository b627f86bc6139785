/* The event queue and its writer (src/app/agent/events.c) against a real
 * Postgres: what is stored, to the letter (the hand-formatted text event, the
 * data of other events, escapes), group commit (adjacent text deltas of one
 * turn, step and subagent merge into one event; nothing else does), the
 * NOTIFY that tells other instances, and what is refused. */
#include "tk_test.h"

#include "events_fixture.h"

static void emit_plan(const char *sid, const char *goal)
{
    agent_event_emit(sid, EV_TURN, "plan", tk_json_obj("goal", json_string(goal), NULL));
}

/* Every stored event of the chat, "type|turn_id|data" a line, "at" masked. */
static char *stored(const char *sid)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT coalesce(string_agg(type || '|' || coalesce(turn_id::text, '-') || '|' || "
             "data, E'\\n' ORDER BY seq), '') FROM events WHERE session_id = '%s'",
             sid);
    char *s = ev_sql_value(sql);
    ev_mask_at(s);
    return s;
}

TEST(events_text_deltas_of_one_turn_and_step_merge_into_one_event)
{
    ev_setup("merge");
    agent_event_text(EV_CHAT, EV_TURN, 1, "Hel", 3);
    agent_event_text(EV_CHAT, EV_TURN, 1, "lo, ", 4);
    agent_event_text(EV_CHAT, EV_TURN, 1, "world", 5);
    agent_events_flush();
    char *s = stored(EV_CHAT);
    CHECK_STR(s, "text|" EV_TURN "|{\"type\": \"text\", \"turn_id\": \"" EV_TURN
                 "\", \"at\":\"AT\", \"step\": 1, \"delta\": \"Hello, world\"}");
    free(s);
    agent_events_stop();
}

TEST(events_merging_stops_at_a_step_another_event_or_another_subagent)
{
    ev_setup("nomerge");
    agent_event_text(EV_CHAT, EV_TURN, 1, "a", 1);
    agent_event_text(EV_CHAT, EV_TURN, 2, "b", 1);  /* another step */
    agent_event_text(EV_OTHER, EV_TURN, 2, "x", 1); /* another chat: no effect here */
    agent_event_text(EV_CHAT, EV_TURN, 2, "c", 1);  /* merges with b */
    emit_plan(EV_CHAT, "g");                        /* an event between */
    agent_event_text(EV_CHAT, EV_TURN, 2, "d", 1);  /* does not merge across it */
    agent_event_text_tagged(
        EV_CHAT, EV_TURN, 2,
        tk_json_obj("agent", json_string("sub"), "subagent_id", json_string("s1"), NULL), "e", 1);
    agent_event_text_tagged(
        EV_CHAT, EV_TURN, 2,
        tk_json_obj("agent", json_string("sub"), "subagent_id", json_string("s1"), NULL), "f",
        1); /* the same subagent: merges */
    agent_event_text_tagged(
        EV_CHAT, EV_TURN, 2,
        tk_json_obj("agent", json_string("sub"), "subagent_id", json_string("s2"), NULL), "g",
        1); /* another subagent: does not */
    agent_events_flush();
    char *s = stored(EV_CHAT);
    CHECK_STR(s, "text|" EV_TURN "|{\"type\": \"text\", \"turn_id\": \"" EV_TURN
                 "\", \"at\":\"AT\", \"step\": 1, \"delta\": \"a\"}\n"
                 "text|" EV_TURN "|{\"type\": \"text\", \"turn_id\": \"" EV_TURN
                 "\", \"at\":\"AT\", \"step\": 2, \"delta\": \"bc\"}\n"
                 "plan|" EV_TURN "|{\"goal\":\"g\",\"type\":\"plan\",\"turn_id\":\"" EV_TURN
                 "\",\"at\":\"AT\"}\n"
                 "text|" EV_TURN "|{\"type\": \"text\", \"turn_id\": \"" EV_TURN
                 "\", \"at\":\"AT\", \"step\": 2, \"delta\": \"d\"}\n"
                 "text|" EV_TURN "|{\"agent\":\"sub\",\"subagent_id\":\"s1\",\"type\":\"text\","
                 "\"turn_id\":\"" EV_TURN "\",\"at\":\"AT\",\"step\":2,\"delta\":\"ef\"}\n"
                 "text|" EV_TURN "|{\"agent\":\"sub\",\"subagent_id\":\"s2\",\"type\":\"text\","
                 "\"turn_id\":\"" EV_TURN "\",\"at\":\"AT\",\"step\":2,\"delta\":\"g\"}");
    free(s);
    agent_events_stop();
}

TEST(events_text_is_escaped_as_json_and_data_is_kept_as_given)
{
    ev_setup("escape");
    const char t[] = "q\"b\\n\nr\rt\t\x01\x1f \xc3\xa9";
    agent_event_text(EV_CHAT, NULL, 0, t, sizeof t - 1);
    agent_events_flush();
    /* a non-object payload becomes {}; no turn is null */
    agent_event_emit(EV_CHAT, NULL, "error", json_string("not an object"));
    agent_event_emit(EV_CHAT, NULL, "turn_end", NULL);
    agent_events_flush();
    char *s = stored(EV_CHAT);
    CHECK_STR(s, "text|-|{\"type\": \"text\", \"turn_id\": \"\", \"at\":\"AT\", \"step\": 0, "
                 "\"delta\": \"q\\\"b\\\\n\\nr\\rt\\t\\u0001\\u001f \xc3\xa9\"}\n"
                 "error|-|{\"type\":\"error\",\"turn_id\":null,\"at\":\"AT\"}\n"
                 "turn_end|-|{\"type\":\"turn_end\",\"turn_id\":null,\"at\":\"AT\"}");
    free(s);
    /* the stored text parses back to the same bytes */
    char *d = ev_sql_value("SELECT data::jsonb->>'delta' FROM events WHERE type = 'text'");
    CHECK_STR(d, t);
    free(d);
    agent_events_stop();
}

TEST(events_refuses_a_session_that_is_not_a_uuid_and_empty_text)
{
    ev_setup("refuse");
    agent_event_emit("not-a-uuid", NULL, "plan", json_object());
    agent_event_emit(NULL, NULL, "plan", json_object());
    agent_event_text("nope", EV_TURN, 1, "x", 1);
    agent_event_text(EV_CHAT, EV_TURN, 1, "", 0);
    agent_event_text_tagged("nope", EV_TURN, 1, json_object(), "x", 1);
    agent_events_flush();
    char *n = ev_sql_value("SELECT count(*) FROM events");
    CHECK_STR(n, "0");
    free(n);
    agent_events_stop();
}

TEST(events_seqs_grow_in_emit_order_across_chats)
{
    ev_setup("order");
    for (int i = 0; i < 50; i++) {
        char g[8];
        snprintf(g, sizeof g, "%d", i);
        emit_plan(i % 2 ? EV_OTHER : EV_CHAT, g);
    }
    agent_events_flush();
    char *s = ev_sql_value("SELECT string_agg(data::jsonb->>'goal', ',' ORDER BY seq) FROM events");
    CHECK_STR(s, "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,"
                 "29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49");
    free(s);
    char *m = ev_sql_value("SELECT min(seq) || '-' || max(seq) FROM events");
    CHECK_STR(m, "1-50");
    free(m);
    agent_events_stop();
}

/* The NOTIFY of a batch: "<instance>|<chat>:<seq>,...", each chat of the batch
 * once with its highest seq, in the order of each chat's last event. */
TEST(events_notify_names_each_chat_with_its_last_seq)
{
    ev_setup("notify");
    PGconn *l = PQconnectdb(ev_dburl);
    CHECK(PQstatus(l) == CONNECTION_OK);
    PQclear(PQexec(l, "LISTEN tusko_events"));
    emit_plan(EV_CHAT, "1");
    emit_plan(EV_OTHER, "2");
    emit_plan(EV_CHAT, "3");
    agent_events_flush();
    char want[200];
    snprintf(want, sizeof want, "%s|" EV_OTHER ":2," EV_CHAT ":3", agent_bus_instance_id());
    char got[200] = "";
    for (int i = 0; i < 300 && !got[0]; i++) {
        PQconsumeInput(l);
        PGnotify *n = PQnotifies(l);
        if (n) {
            snprintf(got, sizeof got, "%s", n->extra);
            PQfreemem(n);
        } else {
            tk_sleep_ms(10);
        }
    }
    CHECK_STR(got, want);
    /* one batch, one notification */
    tk_sleep_ms(100);
    PQconsumeInput(l);
    PGnotify *more = PQnotifies(l);
    CHECK(more == NULL);
    PQfinish(l);
    agent_events_stop();
}

TEST_MAIN()
