/* The agent's runtime: the event loop thread, its HTTP client, the two pools.
 * See runtime.h. */
#include "app/agent/runtime.h"

#include <pthread.h>
#include <stdio.h>

static tk_evloop *loop;
static tk_httpm *http;
static tk_workpool *db_pool, *tool_pool;
static int running;

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

int agent_runtime_running(void)
{
    return running;
}

tk_status agent_runtime_start(const agent_runtime_cfg *cfg, char *err, size_t errlen)
{
    loop = tk_evloop_new();
    http = tk_httpm_new(loop);
    db_pool = tk_workpool_new("agent-db", cfg->db_workers, 1u << 20);
    tool_pool = tk_workpool_new("tool", cfg->tool_workers, 100000);
    if (tk_evloop_start(loop, "agent-loop") != TK_OK) {
        snprintf(err, errlen, "cannot start the agent loop thread");
        return TK_ERROR;
    }
    running = 1;
    return TK_OK;
}

struct call {
    void (*fn)(void *ud);
    void *ud;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
};

static void call_on_loop(void *ud)
{
    struct call *c = ud;
    c->fn(c->ud);
    pthread_mutex_lock(&c->mu);
    c->done = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

void agent_runtime_call(void (*fn)(void *ud), void *ud)
{
    struct call c = {
        .fn = fn, .ud = ud, .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    tk_evloop_post(loop, call_on_loop, &c);
    pthread_mutex_lock(&c.mu);
    while (!c.done)
        pthread_cond_wait(&c.cv, &c.mu);
    pthread_mutex_unlock(&c.mu);
}

static void free_http(void *ud)
{
    tk_httpm_free(http);
    http = NULL;
    tk_evloop_stop(loop);
}

void agent_runtime_stop(void)
{
    if (!running)
        return;
    tk_workpool_free(tool_pool);
    tool_pool = NULL;
    tk_workpool_free(db_pool);
    db_pool = NULL;
    tk_evloop_post(loop, free_http, NULL);
    tk_evloop_join(loop);
    tk_evloop_free(loop);
    loop = NULL;
    running = 0;
}
