/* The hub (src/app/agent/hub.c): a chat's events fanned out to its live SSE
 * listeners and replayed from Postgres, against a real database and a real
 * HTTP server: the frames to the letter (each one the stored row), replay in
 * seq order, Last-Event-ID and after resuming exactly, the live stream
 * continuing the replay with nothing missed or repeated, chats kept apart;
 * other instances' events arriving through the bus; and transient events:
 * live to the chat's listeners, never stored, never replayed, no id. */
#include "tk_test.h"

#include "events_fixture.h"

static void emit_plan(const char *sid, const char *goal)
{
    agent_event_emit(sid, EV_TURN, "plan", tk_json_obj("goal", json_string(goal), NULL));
}

static const char *PATH_FOLLOW = "/api/sessions/" EV_CHAT "/events";
static const char *PATH_ONCE = "/api/sessions/" EV_CHAT "/events?follow=0";

TEST(hub_replay_is_every_stored_row_in_seq_order_to_the_letter)
{
    ev_setup("replay");
    for (int i = 0; i < 5; i++) {
        char g[4];
        snprintf(g, sizeof g, "%d", i);
        emit_plan(i == 2 ? EV_OTHER : EV_CHAT, g);
    }
    agent_event_text(EV_CHAT, EV_TURN, 1, "hi", 2);
    agent_events_flush();
    char *got = ev_get(PATH_ONCE, NULL);
    char *want = ev_stored_frames(EV_CHAT);
    CHECK_STR(got, want);
    /* and the frame is what a client parses: id, event, one data line */
    ev_mask_at(got);
    CHECK_STR(got,
              "id: 1\nevent: plan\ndata: {\"goal\":\"0\",\"type\":\"plan\",\"turn_id\":\"" EV_TURN
              "\",\"at\":\"AT\"}\n\n"
              "id: 2\nevent: plan\ndata: {\"goal\":\"1\",\"type\":\"plan\",\"turn_id\":\"" EV_TURN
              "\",\"at\":\"AT\"}\n\n"
              "id: 4\nevent: plan\ndata: {\"goal\":\"3\",\"type\":\"plan\",\"turn_id\":\"" EV_TURN
              "\",\"at\":\"AT\"}\n\n"
              "id: 5\nevent: plan\ndata: {\"goal\":\"4\",\"type\":\"plan\",\"turn_id\":\"" EV_TURN
              "\",\"at\":\"AT\"}\n\n"
              "id: 6\nevent: text\ndata: {\"type\": \"text\", \"turn_id\": \"" EV_TURN
              "\", \"at\":\"AT\", \"step\": 1, \"delta\": \"hi\"}\n\n");
    free(got);
    free(want);
    agent_events_stop();
}

TEST(hub_last_event_id_and_after_resume_exactly_there)
{
    ev_setup("resume");
    for (int i = 0; i < 6; i++)
        emit_plan(EV_CHAT, "x");
    agent_events_flush();
    char *all = ev_stored_frames(EV_CHAT);
    const char *from4 = strstr(all, "id: 4\n");
    CHECK(from4 != NULL);
    char *got = ev_get(PATH_ONCE, "3");
    CHECK_STR(got, from4);
    free(got);
    got = ev_get("/api/sessions/" EV_CHAT "/events?follow=0&after=3", NULL);
    CHECK_STR(got, from4);
    free(got);
    /* Last-Event-ID wins over after */
    got = ev_get("/api/sessions/" EV_CHAT "/events?follow=0&after=1", "3");
    CHECK_STR(got, from4);
    free(got);
    /* past the end: nothing */
    got = ev_get(PATH_ONCE, "6");
    CHECK_STR(got, "");
    free(got);
    free(all);
    agent_events_stop();
}

TEST(hub_live_listener_gets_the_replay_then_each_event_once_in_order)
{
    ev_setup("live");
    emit_plan(EV_CHAT, "before");
    agent_events_flush();
    struct ev_reader r;
    ev_reader_start(&r, PATH_FOLLOW, NULL);
    CHECK(ev_reader_wait(&r, "id: 1\n", 5000));
    for (int i = 0; i < 20; i++) {
        emit_plan(i % 3 ? EV_CHAT : EV_OTHER, "live");
        if (i % 5 == 0)
            tk_sleep_ms(30); /* several batches */
    }
    agent_event_emit(EV_CHAT, EV_TURN, "turn_end", NULL);
    agent_events_flush();
    CHECK(ev_reader_wait(&r, "event: turn_end", 5000));
    ev_reader_join(&r);
    char *got = ev_reader_text(&r);
    char *want = ev_stored_frames(EV_CHAT);
    CHECK_STR(got, want); /* nothing of the other chat, nothing twice */
    free(got);
    free(want);
    ev_reader_free(&r);
    agent_events_stop();
}

TEST(hub_a_resumed_live_stream_neither_skips_nor_repeats)
{
    ev_setup("resumelive");
    for (int i = 0; i < 4; i++)
        emit_plan(EV_CHAT, "a");
    agent_events_flush();
    struct ev_reader r;
    ev_reader_start(&r, PATH_FOLLOW, "2");
    CHECK(ev_reader_wait(&r, "id: 4\n", 5000));
    emit_plan(EV_CHAT, "b");
    agent_events_flush();
    CHECK(ev_reader_wait(&r, "id: 5\n", 5000));
    ev_reader_join(&r);
    char *got = ev_reader_text(&r);
    char *all = ev_stored_frames(EV_CHAT);
    CHECK_STR(got, strstr(all, "id: 3\n"));
    free(got);
    free(all);
    ev_reader_free(&r);
    agent_events_stop();
}

/* Another instance stored an event and said so on tusko_events: the live
 * listener here reads it from Postgres. A notification carrying this
 * instance's own id is ignored (its events were delivered by the writer). */
TEST(hub_events_another_instance_stored_arrive_through_the_bus)
{
    ev_setup("bus");
    struct ev_reader r;
    ev_reader_start(&r, PATH_FOLLOW, NULL);
    tk_sleep_ms(300); /* the listener is registered (nothing to replay) */
    char sql[400];
    ev_sql(
        "INSERT INTO events (seq, session_id, type, data) VALUES (nextval('events_seq'), '" EV_CHAT
        "', 'plan', '{\"goal\":\"near\"}')");
    snprintf(sql, sizeof sql, "SELECT pg_notify('tusko_events', '%s|" EV_CHAT ":1')",
             agent_bus_instance_id());
    ev_sql(sql);
    CHECK(!ev_reader_wait(&r, "near", 1500));
    ev_sql(
        "INSERT INTO events (seq, session_id, type, data) VALUES (nextval('events_seq'), '" EV_CHAT
        "', 'plan', '{\"goal\":\"far\"}')");
    ev_sql("SELECT pg_notify('tusko_events', '01a23000-0000-4000-8000-00000000abcd|" EV_CHAT
           ":2')");
    CHECK(ev_reader_wait(&r, "far", 5000));
    ev_reader_join(&r);
    char *got = ev_reader_text(&r);
    CHECK_STR(got, "id: 1\nevent: plan\ndata: {\"goal\":\"near\"}\n\n"
                   "id: 2\nevent: plan\ndata: {\"goal\":\"far\"}\n\n");
    free(got);
    ev_reader_free(&r);
    agent_events_stop();
}

TEST(hub_a_transient_event_reaches_the_live_listener_and_is_never_stored)
{
    ev_setup("transient");
    emit_plan(EV_CHAT, "one");
    agent_events_flush();
    struct ev_reader r;
    ev_reader_start(&r, PATH_FOLLOW, NULL);
    CHECK(ev_reader_wait(&r, "id: 1\n", 5000));
    size_t sent = 0;
    /* the listener turns live right after its replay */
    for (int i = 0; i < 200 && sent == 0; i++) {
        sent = agent_hub_publish_transient(EV_CHAT, EV_TURN, "tool_output",
                                           tk_json_obj("frame", json_string("F1"), NULL));
        if (!sent)
            tk_sleep_ms(10);
    }
    CHECK_INT(sent, ==, 1);
    CHECK(ev_reader_wait(&r, "F1", 5000));
    emit_plan(EV_CHAT, "two");
    agent_events_flush();
    CHECK(ev_reader_wait(&r, "id: 2\n", 5000));
    ev_reader_join(&r);
    char *got = ev_reader_text(&r);
    ev_mask_at(got);
    CHECK_STR(got,
              "id: 1\nevent: plan\ndata: {\"goal\":\"one\",\"type\":\"plan\",\"turn_id\":\"" EV_TURN
              "\",\"at\":\"AT\"}\n\n"
              "event: tool_output\ndata: "
              "{\"frame\":\"F1\",\"type\":\"tool_output\",\"turn_id\":\"" EV_TURN
              "\",\"at\":\"AT\"}\n\n"
              "id: 2\nevent: plan\ndata: {\"goal\":\"two\",\"type\":\"plan\",\"turn_id\":\"" EV_TURN
              "\",\"at\":\"AT\"}\n\n");
    free(got);
    ev_reader_free(&r);
    /* never written: two rows, neither with the frame, and the next stored
     * event is 3 */
    emit_plan(EV_CHAT, "three");
    agent_events_flush();
    char *n = ev_sql_value("SELECT count(*) || ' ' || count(*) FILTER (WHERE data LIKE '%F1%') || "
                           "' ' || string_agg(seq::text, ',' ORDER BY seq) FROM events");
    CHECK_STR(n, "3 0 1,2,3");
    free(n);
    /* not replayed, from the start or after Last-Event-ID */
    char *all = ev_get(PATH_ONCE, NULL);
    char *rows = ev_stored_frames(EV_CHAT);
    CHECK_STR(all, rows);
    CHECK(strstr(all, "F1") == NULL);
    char *after1 = ev_get(PATH_ONCE, "1");
    CHECK_STR(after1, strstr(rows, "id: 2\n"));
    CHECK(strstr(after1, "event: tool_output") == NULL);
    free(all);
    free(rows);
    free(after1);
    agent_events_stop();
}

TEST(hub_a_transient_event_goes_only_to_its_chat_and_is_refused_without_a_chat)
{
    ev_setup("transient2");
    /* nobody listens: sent to none, and nothing is stored */
    CHECK_INT(agent_hub_publish_transient(EV_CHAT, NULL, "tool_output", NULL), ==, 0);
    struct ev_reader other;
    ev_reader_start(&other, "/api/sessions/" EV_OTHER "/events", NULL);
    size_t sent = 0;
    for (int i = 0; i < 200 && sent == 0; i++) {
        sent = agent_hub_publish_transient(EV_OTHER, NULL, "tool_output",
                                           tk_json_obj("n", json_integer(i), NULL));
        if (!sent)
            tk_sleep_ms(10);
    }
    CHECK_INT(sent, ==, 1);
    CHECK_INT(agent_hub_publish_transient(EV_CHAT, NULL, "tool_output", json_array()), ==, 0);
    CHECK_INT(agent_hub_publish_transient("not-a-chat", NULL, "tool_output", json_object()), ==, 0);
    /* a payload that is not an object becomes {} with the usual fields */
    CHECK_INT(agent_hub_publish_transient(EV_OTHER, NULL, "tool_output", json_string("x")), ==, 1);
    CHECK(ev_reader_wait(&other, "\"turn_id\":null,\"at\"", 5000));
    ev_reader_join(&other);
    char *got = ev_reader_text(&other);
    ev_mask_at(got);
    CHECK(strstr(got, "event: tool_output\ndata: {\"type\":\"tool_output\",\"turn_id\":null,"
                      "\"at\":\"AT\"}\n\n") != NULL);
    CHECK(strstr(got, "id:") == NULL);
    free(got);
    ev_reader_free(&other);
    agent_events_flush();
    char *n = ev_sql_value("SELECT count(*) FROM events");
    CHECK_STR(n, "0");
    free(n);
    agent_events_stop();
}

TEST_MAIN()
