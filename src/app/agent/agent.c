/* The agent's runtime: the event loop thread, the non-blocking HTTP client, the
 * two worker pools, the tools, and the background sweeps. */
#include "app/agent/agent.h"

#include <pthread.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/agent/events.h"
#include "app/agent/memory.h"
#include "app/agent/subagent.h"
#include "app/agent/turn.h"
#include "app/app.h"
#include "app/sandbox/sandbox.h"
#include "app/sessions.h"
#include "app/tools/web_fetch.h"
#include "lib/log.h"
#include "lib/tktime.h"

static tk_evloop *loop;
static tk_httpm *http;
static tk_workpool *db_pool, *tool_pool;
static int started;

tk_evloop *agent_loop(void)
{
    return loop;
}

tk_httpm *agent_http(void)
{
    return http;
}

tk_workpool *agent_db_pool(void)
{
    return db_pool;
}

tk_workpool *agent_tool_pool(void)
{
    return tool_pool;
}

/* ---------- background: the sandbox sweep, once a minute, on a tool worker */

static volatile int sweep_running;
static int64_t next_sweep_ms;

static void sweep_work(void *ud)
{
    sbx_sweep_now();
    __sync_synchronize();
    sweep_running = 0;
}

static int64_t next_events_sweep_ms;

static void on_tick(PGconn *c, void *ud)
{
    agent_turns_recover(c, ud);
    if (tk_mono_ms() >= next_events_sweep_ms) {
        next_events_sweep_ms = tk_mono_ms() + 3600 * 1000;
        tk_pg_exec(c, "SELECT tusko_events_sweep()", 0, NULL);
    }
    int64_t now = tk_mono_ms();
    if (sbx_configured() && !sweep_running && now >= next_sweep_ms && tool_pool) {
        next_sweep_ms = now + 60000;
        sweep_running = 1;
        if (tk_workpool_submit(tool_pool, sweep_work, NULL) != TK_OK)
            sweep_running = 0;
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
    sbx_release_session(session_id);
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

tk_status agent_init(char *err, size_t errlen)
{
    const app_ctx *a = app_get();
    raise_nofile();
    agent_lane_set_available(AGENT_LANE_FAST, 1);
    agent_lane_set_available(AGENT_LANE_SANDBOX, a->execution_enabled);
    agent_lane_set_available(AGENT_LANE_BROWSER, 0); /* a later issue */
    if (agent_tools_count() == 0) {
        agent_builtin_tools_register();
        web_fetch_register();
        agent_memory_tools_register();
    }
    if (agent_subagent_init(err, errlen) != TK_OK)
        return TK_EINVAL;
    loop = tk_evloop_new();
    http = tk_httpm_new(loop);
    /* database jobs: at most half the pool, so HTTP handlers keep connections */
    unsigned dbt = (unsigned)(a->cfg->db_pool / 2);
    if (dbt < 2)
        dbt = 2;
    if (dbt > 16)
        dbt = 16;
    db_pool = tk_workpool_new("agent-db", dbt, 1u << 20);
    tool_pool = tk_workpool_new("tool", (unsigned)a->cfg->tool_workers, 100000);
    agent_events_listen("tusko_cancel", agent_turn_on_cancel_notify, NULL);
    agent_events_on_tick(on_tick, NULL);
    if (agent_events_start(err, errlen) != TK_OK)
        return TK_ERROR;
    if (tk_evloop_start(loop, "agent-loop") != TK_OK) {
        snprintf(err, errlen, "cannot start the agent loop thread");
        return TK_ERROR;
    }
    app_sessions_on_delete(on_session_deleted, NULL);
    started = 1;
    size_t offered = 0;
    for (size_t i = 0; i < agent_tools_count(); i++)
        offered += agent_lane_available(agent_tools_at(i)->lane);
    tk_info("agent",
            "msg=\"agent started\" tools=%zu offered=%zu sandbox_lane=%s db_workers=%u "
            "tool_workers=%lld",
            agent_tools_count(), offered, a->execution_enabled ? "on" : "off", dbt,
            (long long)a->cfg->tool_workers);
    return TK_OK;
}

/* ---------- shutdown */

static pthread_mutex_t idle_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_cv = PTHREAD_COND_INITIALIZER;
static int idle_answer = -1;

static void probe_idle(void *ud)
{
    pthread_mutex_lock(&idle_mu);
    idle_answer = agent_turns_active() == 0;
    pthread_cond_broadcast(&idle_cv);
    pthread_mutex_unlock(&idle_mu);
}

static int loop_idle(void)
{
    pthread_mutex_lock(&idle_mu);
    idle_answer = -1;
    pthread_mutex_unlock(&idle_mu);
    tk_evloop_post(loop, probe_idle, NULL);
    pthread_mutex_lock(&idle_mu);
    while (idle_answer < 0)
        pthread_cond_wait(&idle_cv, &idle_mu);
    int v = idle_answer;
    pthread_mutex_unlock(&idle_mu);
    return v;
}

static void free_http(void *ud)
{
    tk_httpm_free(http);
    http = NULL;
    tk_evloop_stop(loop);
}

void agent_shutdown(void)
{
    if (!started)
        return;
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
    tk_workpool_free(tool_pool);
    tool_pool = NULL;
    tk_workpool_free(db_pool);
    db_pool = NULL;
    tk_evloop_post(loop, free_http, NULL);
    tk_evloop_join(loop);
    tk_evloop_free(loop);
    loop = NULL;
    agent_events_stop();
    started = 0;
}
