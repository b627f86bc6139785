/* plan_task: a named goal and 3 to 5 milestones, shown to the user at once, and
 * their statuses updated as the work goes. See plan.h. */
#include "app/tools/plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/app.h"
#include "app/agent/tools.h"
#include "lib/json.h"
#include "lib/log.h"

#define PLAN_MIN 3
#define PLAN_MAX 5

static const char *const STATUSES[] = {"pending", "in_progress", "done", "skipped", "blocked"};

static int valid_status(const char *s)
{
    for (size_t i = 0; i < TK_ARRAY_LEN(STATUSES); i++)
        if (strcmp(s, STATUSES[i]) == 0)
            return 1;
    return 0;
}

static json_t *plan_load(PGconn *c, const char *sid)
{
    const char *p[] = {sid};
    PGresult *r = tk_pg_query(c, "SELECT plan::text FROM plans WHERE session_id = $1", 1, p);
    json_t *j = NULL;
    if (tk_pg_ok(r) && PQntuples(r) == 1)
        j = json_loads(PQgetvalue(r, 0, 0), 0, NULL);
    PQclear(r);
    return j;
}

static tk_status plan_save(PGconn *c, const char *sid, const json_t *plan)
{
    char *s = tk_json_dumps(plan);
    const char *p[] = {sid, s};
    tk_status st = tk_pg_exec(c,
                              "INSERT INTO plans (session_id, plan) VALUES ($1, $2::jsonb) ON "
                              "CONFLICT (session_id) DO UPDATE SET plan = excluded.plan, "
                              "updated_at = now()",
                              2, p);
    free(s);
    return st;
}

static void plan_text(const json_t *plan, tk_buf *b)
{
    tk_buf_printf(b, "Plan: %s\n", tk_json_str_or(plan, "goal", ""));
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(plan, "milestones"), i, m)
    {
        tk_buf_printf(b, "%zu. [%s] %s\n", i + 1, tk_json_str_or(m, "status", "pending"),
                      tk_json_str_or(m, "title", ""));
    }
}

static void run_plan_task(agent_call *call, const json_t *args, agent_result *out)
{
    const char *goal = tk_json_str(args, "goal");
    json_t *ms = json_object_get(args, "milestones");
    json_t *upd = json_object_get(args, "update");
    if (!goal && !upd) {
        agent_result_error(out, "give \"goal\" and 3-5 \"milestones\" to make a plan, or "
                                "\"update\" to change milestone statuses");
        return;
    }
    PGconn *c = app_db_acquire();
    if (!c) {
        agent_result_error(out, "the plan could not be stored (no database)");
        return;
    }
    json_t *plan = NULL;
    const char *event = "plan";
    if (goal) {
        size_t n = json_array_size(ms);
        if (!json_is_array(ms) || n < PLAN_MIN || n > PLAN_MAX) {
            agent_result_error(out, "a plan needs %d to %d milestones (got %zu)", PLAN_MIN,
                               PLAN_MAX, n);
            goto out;
        }
        json_t *list = json_array();
        size_t i;
        json_t *m;
        json_array_foreach(ms, i, m)
        {
            const char *title = json_is_string(m) ? json_string_value(m) : tk_json_str(m, "title");
            if (!title || !*title) {
                json_decref(list);
                agent_result_error(out, "milestone %zu has no title", i + 1);
                goto out;
            }
            /* work starts on the first milestone as soon as the plan is made */
            json_array_append_new(list, tk_json_obj("index", json_integer((json_int_t)i + 1),
                                                    "title", json_string(title), "status",
                                                    json_string(i == 0 ? "in_progress" : "pending"),
                                                    NULL));
        }
        plan = tk_json_obj("goal", json_string(goal), "milestones", list, "turn_id",
                           json_string(agent_call_turn(call)), NULL);
    } else {
        event = "plan_update";
        plan = plan_load(c, agent_call_session(call));
        if (!plan) {
            agent_result_error(out, "there is no plan to update yet: make one with \"goal\" and "
                                    "\"milestones\"");
            goto out;
        }
        json_t *list = json_object_get(plan, "milestones");
        json_t *items = json_is_array(upd) ? json_incref(upd) : json_pack("[O]", upd);
        size_t i;
        json_t *u;
        json_array_foreach(items, i, u)
        {
            int64_t idx = tk_json_int_or(u, "milestone", 0);
            const char *status = tk_json_str_or(u, "status", "");
            if (idx < 1 || (size_t)idx > json_array_size(list) || !valid_status(status)) {
                json_decref(items);
                agent_result_error(out,
                                   "each update needs \"milestone\" (1-%zu) and \"status\" "
                                   "(pending, in_progress, done, skipped, blocked)",
                                   json_array_size(list));
                goto out;
            }
            json_t *m = json_array_get(list, (size_t)idx - 1);
            json_object_set_new(m, "status", json_string(status));
            const char *note = tk_json_str(u, "note");
            if (note)
                json_object_set_new(m, "note", json_string(note));
        }
        json_decref(items);
        /* the next pending milestone starts when the current one is done */
        int in_progress = 0;
        json_t *m;
        json_array_foreach(list, i, m) in_progress |=
            strcmp(tk_json_str_or(m, "status", ""), "in_progress") == 0;
        if (!in_progress)
            json_array_foreach(list, i, m)
            {
                if (strcmp(tk_json_str_or(m, "status", ""), "pending") == 0) {
                    json_object_set_new(m, "status", json_string("in_progress"));
                    break;
                }
            }
    }
    if (plan_save(c, agent_call_session(call), plan) != TK_OK) {
        agent_result_error(out, "the plan could not be stored");
        goto out;
    }
    agent_call_emit(call, event,
                    tk_json_obj("goal", json_incref(json_object_get(plan, "goal")), "milestones",
                                json_deep_copy(json_object_get(plan, "milestones")), NULL));
    tk_buf b;
    tk_buf_init(&b, 1 << 20);
    plan_text(plan, &b);
    tk_buf_append_str(&b, goal ? "Work on milestone 1 now; mark milestones done with plan_task "
                                 "{\"update\": [{\"milestone\": N, \"status\": \"done\"}]}."
                               : "Plan updated.");
    agent_result_take(out, tk_buf_steal(&b, NULL), 0);
    out->data = json_deep_copy(plan);
out:
    json_decref(plan);
    app_db_release(c);
}

static const agent_tool tools[] = {
    {.name = "plan_task",
     .lane = AGENT_LANE_FAST,
     .order = -10,
     .description =
         "Make a plan before starting multi-step work: a named goal and 3 to 5 milestones, shown "
         "to the user at once. Later, update milestone statuses with {\"update\": [{\"milestone\": "
         "N, \"status\": \"done\"}]} (statuses: pending, in_progress, done, skipped, blocked).",
     .parameters =
         "{\"type\":\"object\",\"properties\":{\"goal\":{\"type\":\"string\"},\"milestones\":"
         "{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":3,\"maxItems\":5},"
         "\"update\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"
         "\"milestone\":{\"type\":\"integer\"},\"status\":{\"type\":\"string\",\"enum\":["
         "\"pending\",\"in_progress\",\"done\",\"skipped\",\"blocked\"]},\"note\":{\"type\":"
         "\"string\"}},\"required\":[\"milestone\",\"status\"]}}}}",
     .run = run_plan_task},
};

void agent_plan_tools_register(void)
{
    agent_tools_register_table(tools, TK_ARRAY_LEN(tools));
}
