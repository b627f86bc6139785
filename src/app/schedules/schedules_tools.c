/* schedule_task, list_schedules, cancel_schedule (see schedules_tools.h). */
#include "app/schedules/schedules_tools.h"

#include <stdlib.h>
#include <string.h>

#include "app/agent/tools.h"
#include "app/app.h"
#include "app/schedules/schedules.h"
#include "lib/json.h"

/* A connection, or NULL with the error answered. */
static PGconn *db(agent_result *out)
{
    PGconn *c = app_db_acquire();
    if (!c)
        agent_result_error(out, "the database is unavailable; try again later");
    return c;
}

static int only_own_run(int depth)
{
    return depth == 0;
}

static void run_schedule_task(agent_call *call, const json_t *args, agent_result *out)
{
    schedules_new n = {.prompt = tk_json_str(args, "prompt"),
                       .cron = tk_json_str(args, "cron"),
                       .zone = tk_json_str(args, "timezone"),
                       .notify = tk_json_str(args, "notify"),
                       .name = tk_json_str(args, "name"),
                       .alert_after = -1};
    if (!n.prompt || !n.cron) {
        agent_result_error(out, "\"prompt\" and \"cron\" are required strings");
        return;
    }
    PGconn *c = db(out);
    if (!c)
        return;
    json_t *j = NULL;
    char err[512] = "";
    tk_status st = schedules_create(c, agent_call_user(call), &n, &j, err, sizeof err);
    app_db_release(c);
    if (st != TK_OK) {
        agent_result_error(out, "not scheduled: %s",
                           st == TK_ERROR ? "the database is unavailable" : err);
        return;
    }
    char *text = json_dumps(j, JSON_COMPACT);
    agent_result_text(out, "scheduled: %s", text ? text : "");
    free(text);
    out->data = j;
}

static void run_list_schedules(agent_call *call, const json_t *args, agent_result *out)
{
    (void)args;
    PGconn *c = db(out);
    if (!c)
        return;
    json_t *arr = schedules_list(c, agent_call_user(call));
    app_db_release(c);
    if (!arr) {
        agent_result_error(out, "the database is unavailable; try again later");
        return;
    }
    json_t *j = tk_json_obj("schedules", arr, NULL);
    char *text = json_dumps(j, JSON_COMPACT);
    agent_result_take(out, text ? text : strdup("{}"), 0);
    out->data = j;
}

static void run_cancel_schedule(agent_call *call, const json_t *args, agent_result *out)
{
    const char *id = tk_json_str(args, "id");
    if (!id) {
        agent_result_error(out, "\"id\" is required (see list_schedules)");
        return;
    }
    PGconn *c = db(out);
    if (!c)
        return;
    tk_status st = schedules_delete(c, agent_call_user(call), id);
    app_db_release(c);
    if (st == TK_ENOENT)
        agent_result_error(out, "no schedule %s of this user (see list_schedules)", id);
    else if (st != TK_OK)
        agent_result_error(out, "the database is unavailable; try again later");
    else
        agent_result_text(out, "cancelled schedule %s (its run history is kept)", id);
}

static const agent_tool tools[] = {
    {.name = "schedule_task",
     .description =
         "Schedule a prompt to run later as an agent turn, in a new chat of the user's, on a cron "
         "schedule: 5 fields 'minute hour day-of-month month day-of-week' (e.g. '0 9 * * "
         "mon-fri'), "
         "@hourly/@daily/@weekly/@monthly/@yearly, or one RFC 3339 time with an offset for a "
         "single run. Times are wall-clock times of the IANA timezone (default UTC). Use it only "
         "when the user asks for something to happen later or repeatedly.",
     .parameters = "{\"type\":\"object\",\"properties\":{"
                   "\"prompt\":{\"type\":\"string\",\"description\":\"what to do at each run\"},"
                   "\"cron\":{\"type\":\"string\"},"
                   "\"timezone\":{\"type\":\"string\",\"description\":\"IANA zone, e.g. "
                   "Europe/Berlin\"},"
                   "\"notify\":{\"type\":\"string\",\"enum\":[\"always\",\"failure\",\"never\"]},"
                   "\"name\":{\"type\":\"string\"}},"
                   "\"required\":[\"prompt\",\"cron\"]}",
     .lane = AGENT_LANE_FAST,
     .run = run_schedule_task,
     .offered_at = only_own_run},
    {.name = "list_schedules",
     .description = "List the user's scheduled tasks with their next fire times.",
     .parameters = "{\"type\":\"object\",\"properties\":{}}",
     .lane = AGENT_LANE_FAST,
     .run = run_list_schedules,
     .offered_at = only_own_run},
    {.name = "cancel_schedule",
     .description = "Cancel (delete) one of the user's scheduled tasks by its id.",
     .parameters = "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\"}},"
                   "\"required\":[\"id\"]}",
     .lane = AGENT_LANE_FAST,
     .run = run_cancel_schedule,
     .offered_at = only_own_run},
};

void schedules_tools_register(void)
{
    agent_tools_register_table(tools, TK_ARRAY_LEN(tools));
}
