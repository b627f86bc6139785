/* The bus: LISTEN/NOTIFY, this instance's liveness lock, the ticks (see bus.h). */
#include "app/agent/bus.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "app/app.h"
#include "lib/id.h"
#include "lib/log.h"
#include "lib/pg.h"
#include "lib/tktime.h"

#define MAX_HOOKS 8
#define TICK_MS   10000

struct hook {
    agent_bus_conn_fn fn;
    void *ud;
};

static struct {
    struct {
        char name[64];
        agent_bus_notify_fn fn;
        void *ud;
    } channels[MAX_HOOKS];
    size_t nchannels;
    struct hook ticks[MAX_HOOKS], rounds[MAX_HOOKS];
    size_t nticks, nrounds;
    char instance[TK_UUID_LEN];
    int wakefd;
    volatile int stopping;
    int running;
    pthread_t thread;
} B = {.wakefd = -1};

const char *agent_bus_instance_id(void)
{
    return B.instance;
}

void agent_bus_listen(const char *channel, agent_bus_notify_fn fn, void *ud)
{
    TK_ASSERT(B.nchannels < MAX_HOOKS);
    snprintf(B.channels[B.nchannels].name, sizeof B.channels[B.nchannels].name, "%s", channel);
    B.channels[B.nchannels].fn = fn;
    B.channels[B.nchannels].ud = ud;
    B.nchannels++;
}

void agent_bus_on_tick(agent_bus_conn_fn fn, void *ud)
{
    TK_ASSERT(B.nticks < MAX_HOOKS);
    B.ticks[B.nticks++] = (struct hook){fn, ud};
}

void agent_bus_on_round(agent_bus_conn_fn fn, void *ud)
{
    TK_ASSERT(B.nrounds < MAX_HOOKS);
    B.rounds[B.nrounds++] = (struct hook){fn, ud};
}

void agent_bus_wake(void)
{
    if (B.wakefd >= 0) {
        uint64_t one = 1;
        ssize_t n = write(B.wakefd, &one, sizeof one);
        (void)n;
    }
}

PGconn *agent_bus_connect(const char *what)
{
    PGconn *c = PQconnectdb(app_get()->cfg->database_url);
    if (PQstatus(c) != CONNECTION_OK) {
        tk_warn("events", "msg=\"cannot connect to the database\" for=%s error=\"%s\"", what,
                PQerrorMessage(c));
        PQfinish(c);
        return NULL;
    }
    return c;
}

static PGconn *listen_connect(void)
{
    PGconn *c = agent_bus_connect("LISTEN");
    if (!c)
        return NULL;
    const char *p[] = {B.instance};
    if (tk_pg_exec(c, "SELECT pg_advisory_lock(" AGENT_BUS_INSTANCE_LOCK_SQL ")", 1, p) != TK_OK) {
        PQfinish(c);
        return NULL;
    }
    for (size_t i = 0; i < B.nchannels; i++) {
        char sql[96];
        snprintf(sql, sizeof sql, "LISTEN %s", B.channels[i].name);
        if (tk_pg_exec(c, sql, 0, NULL) != TK_OK) {
            PQfinish(c);
            return NULL;
        }
    }
    return c;
}

static void *bus_main(void *arg)
{
    PGconn *c = NULL;
    int64_t next_tick = 0;
    while (!B.stopping) {
        if (!c || PQstatus(c) != CONNECTION_OK) {
            if (c)
                PQfinish(c);
            c = listen_connect();
            if (!c) {
                tk_sleep_ms(1000);
                continue;
            }
            next_tick = 0; /* run the sweeps at once after (re)connecting */
        }
        if (tk_mono_ms() >= next_tick) {
            for (size_t i = 0; i < B.nticks; i++)
                B.ticks[i].fn(c, B.ticks[i].ud);
            next_tick = tk_mono_ms() + TICK_MS;
        }
        struct pollfd pf[2] = {{.fd = PQsocket(c), .events = POLLIN},
                               {.fd = B.wakefd, .events = POLLIN}};
        int rc = poll(pf, 2, 1000);
        if (rc < 0 && errno != EINTR)
            break;
        if (pf[1].revents & POLLIN) {
            uint64_t v;
            ssize_t n = read(B.wakefd, &v, sizeof v);
            (void)n;
        }
        if (pf[0].revents & POLLIN) {
            if (!PQconsumeInput(c)) {
                tk_warn("events", "msg=\"LISTEN connection lost\" error=\"%s\"", PQerrorMessage(c));
                PQfinish(c);
                c = NULL;
                continue;
            }
            PGnotify *nt;
            while ((nt = PQnotifies(c))) {
                for (size_t i = 0; i < B.nchannels; i++)
                    if (strcmp(nt->relname, B.channels[i].name) == 0)
                        B.channels[i].fn(nt->relname, nt->extra, B.channels[i].ud);
                PQfreemem(nt);
            }
        }
        for (size_t i = 0; i < B.nrounds; i++)
            B.rounds[i].fn(c, B.rounds[i].ud);
    }
    if (c)
        PQfinish(c);
    return NULL;
}

tk_status agent_bus_start(char *err, size_t errlen)
{
    tk_uuid4(B.instance);
    B.wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (B.wakefd < 0) {
        snprintf(err, errlen, "eventfd: %s", strerror(errno));
        return TK_ERROR;
    }
    B.stopping = 0;
    if (pthread_create(&B.thread, NULL, bus_main, NULL) != 0) {
        snprintf(err, errlen, "cannot start the LISTEN thread");
        close(B.wakefd);
        B.wakefd = -1;
        return TK_ERROR;
    }
    B.running = 1;
    pthread_setname_np(B.thread, "ev-listen");
    return TK_OK;
}

void agent_bus_stop(void)
{
    if (!B.running)
        return;
    B.stopping = 1;
    agent_bus_wake();
    pthread_join(B.thread, NULL);
    B.running = 0;
    close(B.wakefd);
    B.wakefd = -1;
}
