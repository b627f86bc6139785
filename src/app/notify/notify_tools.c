/* notify_user (see notify_tools.h). */
#include "app/notify/notify_tools.h"

#include <stdlib.h>
#include <string.h>

#include "app/agent/tools.h"
#include "app/app.h"
#include "app/notify/notify.h"
#include "lib/json.h"
#include "lib/pg.h"
#include "lib/utf8.h"

/* Only the turn's own run, and only when Telegram is configured. */
static int offered(int depth)
{
    return depth == 0 && notify_enabled();
}

static void run_notify_user(agent_call *call, const json_t *args, agent_result *out)
{
    const char *text = tk_json_str(args, "text");
    if (!text) {
        agent_result_error(out, "\"text\" is required: the message to send");
        return;
    }
    long n = tk_utf8_count(text, strlen(text));
    if (n < 0 || n > NOTIFY_USER_TEXT_MAX) {
        agent_result_error(out, "\"text\": 1 to %d characters of UTF-8 text", NOTIFY_USER_TEXT_MAX);
        return;
    }
    size_t i = strspn(text, " \t\r\n");
    if (!text[i]) {
        agent_result_error(out, "\"text\" is empty");
        return;
    }
    if (!notify_enabled()) {
        agent_result_error(out, "Telegram notifications are not configured on this server");
        return;
    }
    PGconn *c = app_db_acquire();
    if (!c) {
        agent_result_error(out, "the database is unavailable; try again later");
        return;
    }
    /* queued only for an active link, at most once a turn (the unique index) */
    const char *p[] = {agent_call_user(call), text, agent_call_turn(call)};
    PGresult *r = tk_pg_query(
        c,
        "WITH l AS (SELECT active FROM telegram_links WHERE user_id = $1), "
        "ins AS (INSERT INTO telegram_outbox (user_id, text, turn_id) SELECT $1, $2, $3 "
        "WHERE EXISTS (SELECT 1 FROM l WHERE active) ON CONFLICT (turn_id) WHERE turn_id IS NOT "
        "NULL DO NOTHING RETURNING id) "
        "SELECT (SELECT active FROM l), (SELECT count(*) FROM ins)",
        3, p);
    if (!tk_pg_ok(r) || PQntuples(r) != 1) {
        agent_result_error(out, "the database is unavailable; try again later");
    } else if (PQgetisnull(r, 0, 0)) {
        agent_result_error(out, "the user has not linked a Telegram chat (Settings → Telegram)");
    } else if (strcmp(PQgetvalue(r, 0, 0), "t") != 0) {
        agent_result_error(out, "the user's Telegram chat is inactive (the bot was blocked?); "
                                "they can link it again in Settings → Telegram");
    } else if (strcmp(PQgetvalue(r, 0, 1), "1") != 0) {
        agent_result_error(out, "a message was sent already in this turn (one a turn)");
    } else {
        agent_result_text(out, "queued for the user's Telegram chat (%ld characters)", n);
    }
    PQclear(r);
    app_db_release(c);
}

static const agent_tool tools[] = {
    {.name = "notify_user",
     .description = "Send one short message to the user's linked Telegram chat (at most one a "
                    "turn). Use it when the user asked to be told on Telegram, e.g. at the end "
                    "of a scheduled task.",
     .parameters = "{\"type\":\"object\",\"properties\":{\"text\":{\"type\":\"string\","
                   "\"description\":\"the message, plain text\"}},\"required\":[\"text\"]}",
     .lane = AGENT_LANE_FAST,
     .run = run_notify_user,
     .offered_at = offered},
};

void notify_tools_register(void)
{
    agent_tools_register_table(tools, TK_ARRAY_LEN(tools));
}
