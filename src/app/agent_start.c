/* The agent assembled: the runtime, the tool families, the turns, the events,
 * the background ticks. See agent_start.h. */
#include "app/agent_start.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "app/agent/bus.h"
#include "app/agent/events.h"
#include "app/tools/exec.h"
#include "app/tools/files.h"
#include "app/tools/memory.h"
#include "app/tools/plan.h"
#include "app/agent/run.h"
#include "app/agent/runtime.h"
#include "app/tools/subagent.h"
#include "app/agent/tools.h"
#include "app/agent/turn.h"
#include "app/app.h"
#include "app/audit.h"
#include "app/browser/browser.h"
#include "app/notify/notify.h"
#include "app/notify/notify_tools.h"
#include "app/sandbox/sandbox.h"
#include "app/schedules/schedules_runner.h"
#include "app/snapshots/snapshots.h"
#include "app/snapshots/snapshots_tools.h"
#include "app/schedules/schedules_tools.h"
#include "app/sessions.h"
#include "app/skills.h"
#include "app/tools/browser.h"
#include "app/tools/office.h"
#include "app/tools/skills.h"
#include "app/tools/web_fetch.h"
#include "lib/log.h"
#include "lib/tktime.h"

/* The tool families, registered in this order: GET /api/agent lists the tools
 * so, and a model is offered them so. */
static void (*const tool_families[])(void) = {
    agent_plan_tools_register,     /* plan_task */
    agent_files_tools_register,    /* list_files, preview, write_file, read_file */
    agent_exec_tools_register,     /* execute_command, execute_code */
    tools_office_register,         /* parse_pdf, compare_files */
    web_fetch_register,            /* web_fetch */
    tools_browser_register,        /* browser_navigate, _read, _click, _type, _scroll, _screenshot,
                                      _actions */
    agent_memory_tools_register,   /* search_chunks, remember, recall_facts, save_document */
    agent_subagent_tools_register, /* delegate_subagent */
    tools_skills_register,    /* list_skills, activate_skill, read_skill_file, run_skill_script */
    schedules_tools_register, /* schedule_task, list_schedules, cancel_schedule */
    notify_tools_register,    /* notify_user */
    snapshots_tools_register, /* snapshot_workspace */
};

static int started;

/* ---------- the run environment: the runtime, the settings, the event sink */

static void emit_text(const char *session_id, const char *turn_id, int step, json_t *tags,
                      const char *s, size_t n)
{
    if (tags)
        agent_event_text_tagged(session_id, turn_id, step, tags, s, n);
    else
        agent_event_text(session_id, turn_id, step, s, n);
}

static agent_run_env run_env;

static void run_env_fill(const app_ctx *a)
{
    const app_settings *s = a->cfg;
    run_env = (agent_run_env){.loop = agent_loop(),
                              .http = agent_http(),
                              .db_pool = agent_db_pool(),
                              .tool_pool = agent_tool_pool(),
                              .db_acquire = app_db_acquire,
                              .db_release = app_db_release,
                              .openai_base_url = s->openai_base_url,
                              .openai_api_key = s->openai_api_key,
                              .anthropic_base_url = s->anthropic_base_url,
                              .anthropic_api_key = s->anthropic_api_key,
                              .max_tokens = s->max_tokens,
                              .llm_idle_timeout_ms = s->llm_idle_timeout_ms,
                              .llm_retries = s->llm_retries,
                              .tool_result_max = s->tool_result_max,
                              .turn_timeout_ms = s->turn_timeout_ms,
                              .execution_missing = a->execution_missing,
                              .emit = agent_event_emit,
                              .emit_text = emit_text};
}

/* ---------- background: the ticks of the LISTEN thread */

static volatile int sweep_running;
static int64_t next_sweep_ms;

static void sweep_work(void *ud)
{
    sandbox_sweep_now();
    __sync_synchronize();
    sweep_running = 0;
}

static int64_t next_events_sweep_ms;

/* the browsers' idle releases, at each tick (about 10 s), on a tool worker */
static volatile int browser_sweep_running;
static int64_t next_browser_sweep_ms;

static void browser_sweep_work(void *ud)
{
    (void)ud;
    browser_sweep_now();
    __sync_synchronize();
    browser_sweep_running = 0;
}

/* CHAT_RETENTION, on a tool worker (the delete hooks call the sandbox service) */
static volatile int retention_running;

static void retention_work(void *ud)
{
    (void)ud;
    PGconn *c = app_db_acquire();
    if (c) {
        int n;
        /* batches, so a first sweep over a large backlog does not hold one
         * statement for long */
        while ((n = app_sessions_retention_sweep(c, app_get()->cfg->chat_retention_ms, 100)) == 100)
            ;
        app_db_release(c);
    }
    __sync_synchronize();
    retention_running = 0;
}

static void on_tick(PGconn *c, void *ud)
{
    agent_turns_recover(c, ud);
    if (tk_mono_ms() >= next_events_sweep_ms) {
        next_events_sweep_ms = tk_mono_ms() + 3600 * 1000;
        tk_pg_exec(c, "SELECT tusko_events_sweep()", 0, NULL);
        while (app_audit_sweep(c, 1000) == 1000) /* AUDIT_RETENTION */
            ;
    }
    /* the sandbox sweep, once a minute, on a tool worker */
    int64_t now = tk_mono_ms();
    tk_workpool *tools = agent_tool_pool();
    /* CHAT_RETENTION: at every tick, as chats come of age one by one */
    if (app_get()->cfg->chat_retention_ms > 0 && !retention_running && tools) {
        retention_running = 1;
        if (tk_workpool_submit(tools, retention_work, NULL) != TK_OK)
            retention_running = 0;
    }
    if (sandbox_configured() && !sweep_running && now >= next_sweep_ms && tools) {
        next_sweep_ms = now + 60000;
        sweep_running = 1;
        if (tk_workpool_submit(tools, sweep_work, NULL) != TK_OK)
            sweep_running = 0;
    }
    if (browser_configured() && !browser_sweep_running && now >= next_browser_sweep_ms && tools) {
        next_browser_sweep_ms = now + 5000;
        browser_sweep_running = 1;
        if (tk_workpool_submit(tools, browser_sweep_work, NULL) != TK_OK)
            browser_sweep_running = 0;
    }
}

/* ---------- a chat was deleted: stop its turn, release its sandbox */

static void on_session_deleted(const char *session_id, const char *user_id, void *ud)
{
    agent_turn_cancel_local(NULL, session_id, "CANCELLED", "the chat was deleted");
    PGconn *c = app_db_acquire();
    if (c) {
        const char *p[] = {session_id};
        tk_pg_exec(c, "SELECT tusko_session_events_delete($1)", 1, p);
        app_db_release(c);
    }
    sandbox_release_session(session_id);
    browser_release_session(session_id);
}

/* Every waiting turn holds a socket (and its SSE listener another): allow as
 * many descriptors as the hard limit does. */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

tk_status app_agent_start(char *err, size_t errlen)
{
    const app_ctx *a = app_get();
    raise_nofile();
    agent_lane_set_available(AGENT_LANE_FAST, 1);
    agent_lane_set_available(AGENT_LANE_SANDBOX, a->execution_enabled);
    agent_lane_set_available(AGENT_LANE_BROWSER, a->browser_enabled);
    if (agent_subagent_check_models(err, errlen) != TK_OK)
        return TK_EINVAL;
    /* settings checked before any thread starts (a thread left running by a
     * failed start would outlive the app) */
    if (notify_check(err, errlen) != TK_OK)
        return TK_EINVAL;
    /* the built-in skills: a broken one stops the start, naming the file and the rule */
    if (skills_init(err, errlen) != TK_OK)
        return TK_EINVAL;
    if (agent_tools_count() == 0)
        for (size_t i = 0; i < TK_ARRAY_LEN(tool_families); i++)
            tool_families[i]();
    /* database jobs: at most half the pool, so HTTP handlers keep connections */
    unsigned dbt = (unsigned)(a->cfg->db_pool / 2);
    if (dbt < 2)
        dbt = 2;
    if (dbt > 16)
        dbt = 16;
    agent_runtime_cfg rc = {.db_workers = dbt, .tool_workers = (unsigned)a->cfg->tool_workers};
    if (agent_runtime_start(&rc, err, errlen) != TK_OK)
        return TK_ERROR;
    run_env_fill(a);
    agent_turns_init(&run_env);
    agent_bus_listen("tusko_cancel", agent_turn_on_cancel_notify, NULL);
    agent_bus_on_tick(on_tick, NULL);
    if (agent_events_start(err, errlen) != TK_OK)
        return TK_ERROR;
    app_sessions_on_delete(on_session_deleted, NULL);
    /* what a failed start began is stopped again: no thread outlives the app */
    if (schedules_runner_start(err, errlen) != TK_OK) {
        agent_events_stop();
        return TK_ERROR;
    }
    if (notify_start(err, errlen) != TK_OK) {
        schedules_runner_stop();
        agent_events_stop();
        return TK_ERROR;
    }
    if (snapshots_start(err, errlen) != TK_OK) {
        notify_stop();
        schedules_runner_stop();
        agent_events_stop();
        return TK_ERROR;
    }
    started = 1;
    size_t offered = 0;
    for (size_t i = 0; i < agent_tools_count(); i++)
        offered += agent_lane_available(agent_tools_at(i)->lane);
    tk_info("agent",
            "msg=\"agent started\" tools=%zu offered=%zu sandbox_lane=%s browser_lane=%s "
            "db_workers=%u tool_workers=%lld",
            agent_tools_count(), offered, a->execution_enabled ? "on" : "off",
            a->browser_enabled ? "on" : "off", dbt, (long long)a->cfg->tool_workers);
    return TK_OK;
}

/* ---------- shutdown */

static void probe_idle(void *ud)
{
    *(int *)ud = agent_turns_active() == 0;
}

static int loop_idle(void)
{
    int idle = 0;
    agent_runtime_call(probe_idle, &idle);
    return idle;
}

void app_agent_stop(void)
{
    if (!started)
        return;
    schedules_runner_stop(); /* no new scheduled turns */
    notify_stop();
    agent_turns_cancel_all();
    int64_t deadline = tk_mono_ms() + 8000;
    while (!loop_idle() && tk_mono_ms() < deadline)
        tk_sleep_ms(20);
    if (!loop_idle()) {
        /* a tool that does not stop: leave everything to the process exit; the
         * next start marks these turns failed */
        tk_warn("agent", "msg=\"turns still running at shutdown; the next start marks them "
                         "failed\"");
        agent_events_flush();
        return;
    }
    /* the pools finish what they hold; their completions still reach the loop */
    agent_runtime_stop();
    agent_events_stop();
    snapshots_stop();
    started = 0;
}
