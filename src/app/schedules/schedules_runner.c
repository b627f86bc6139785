/* The scheduler thread: claim, time out, start, sleep (see schedules_runner.h). */
#include "app/schedules/schedules_runner.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "app/agent/bus.h"
#include "app/agent/turn.h"
#include "app/app.h"
#include "app/schedules/schedules.h"
#include "lib/buf.h"
#include "lib/id.h"
#include "lib/log.h"
#include "lib/pg.h"
#include "lib/tktime.h"

/* Schedules claimed per round at most (the rest next round, at once). */
#define CLAIMS_PER_ROUND 64
/* The longest sleep: a lost notification costs at most this much. */
#define SLEEP_MAX_MS 60000
/* Slots walked in one claim at most (years of minutes of downtime). */
#define SLOTS_MAX 1000000

static struct {
    int wakefd;
    volatile int stopping;
    int running;
    pthread_t thread;
} R = {.wakefd = -1};

void schedules_runner_wake(void)
{
    if (R.wakefd >= 0) {
        uint64_t one = 1;
        ssize_t n = write(R.wakefd, &one, sizeof one);
        (void)n;
    }
}

static const schedules_config *cfg(void)
{
    return &app_get()->cfg->schedules;
}

/* ---------------------------------------------------------------- claiming */

typedef struct {
    int64_t at;
    const char *status;
    const char *trigger;
    char error[200];
} slot_row;

static void rollback(PGconn *c)
{
    tk_pg_exec(c, "ROLLBACK", 0, NULL);
}

/* Claims one due schedule: 1 claimed, 0 none due, -1 error. */
static int claim_one(PGconn *c)
{
    if (tk_pg_exec(c, "BEGIN", 0, NULL) != TK_OK)
        return -1;
    PGresult *res = tk_pg_query(
        c,
        "SELECT s.id, s.cron, s.zone, s.missed_policy, "
        "floor(extract(epoch FROM s.next_run_at))::bigint, "
        "floor(extract(epoch FROM clock_timestamp()))::bigint, "
        "(SELECT r.id FROM schedule_runs r WHERE r.schedule_id = s.id AND r.status IN "
        "('queued', 'running') LIMIT 1) "
        "FROM schedules s WHERE s.deleted_at IS NULL AND NOT s.paused AND s.next_run_at <= "
        "clock_timestamp() ORDER BY s.next_run_at LIMIT 1 FOR UPDATE OF s SKIP LOCKED",
        0, NULL);
    if (!tk_pg_ok(res)) {
        PQclear(res);
        rollback(c);
        return -1;
    }
    if (PQntuples(res) == 0) {
        PQclear(res);
        rollback(c);
        return 0;
    }
    char id[TK_UUID_LEN], active[TK_UUID_LEN];
    snprintf(id, sizeof id, "%s", PQgetvalue(res, 0, 0));
    snprintf(active, sizeof active, "%s", PQgetvalue(res, 0, 6));
    int run_once = strcmp(PQgetvalue(res, 0, 3), "run_once") == 0;
    int64_t first = strtoll(PQgetvalue(res, 0, 4), NULL, 10);
    int64_t now = strtoll(PQgetvalue(res, 0, 5), NULL, 10);
    schedules_spec sp;
    char err[256];
    tk_status lst = schedules_spec_load(PQgetvalue(res, 0, 1), PQgetvalue(res, 0, 2), 0, now, &sp,
                                        err, sizeof err);
    PQclear(res);

    /* the slots from next_run_at up to now: the newest SCHEDULES_RUNNER_MISSED_KEEP */
    slot_row *rows = tk_calloc(SCHEDULES_RUNNER_MISSED_KEEP, sizeof *rows);
    int64_t total = 0, next = -1;
    if (lst == TK_OK) {
        int64_t t = first;
        for (;;) {
            rows[total % SCHEDULES_RUNNER_MISSED_KEEP].at = t;
            total++;
            int64_t n;
            if (total >= SLOTS_MAX) {
                next = schedules_spec_next(&sp, now, &n) ? n : -1;
                break;
            }
            if (!schedules_spec_next(&sp, t, &n)) {
                next = -1;
                break;
            }
            if (n > now) {
                next = n;
                break;
            }
            t = n;
        }
        schedules_spec_free(&sp);
    } else {
        /* the stored expression or zone no longer loads: record it, fire no more */
        rows[0].at = first;
        rows[0].status = "failed";
        rows[0].trigger = "schedule";
        snprintf(rows[0].error, sizeof rows[0].error, "%s", err);
        total = 1;
    }
    int64_t kept = total < SCHEDULES_RUNNER_MISSED_KEEP ? total : SCHEDULES_RUNNER_MISSED_KEEP;
    int64_t start = total - kept; /* index of the oldest kept slot */
    tk_buf ids, ats, sts, trs, ers;
    tk_buf_init(&ids, 1 << 20);
    tk_buf_init(&ats, 1 << 20);
    tk_buf_init(&sts, 1 << 20);
    tk_buf_init(&trs, 1 << 20);
    tk_buf_init(&ers, 1 << 20);
    tk_buf *all[] = {&ids, &ats, &sts, &trs, &ers};
    for (size_t i = 0; i < 5; i++)
        tk_buf_append_byte(all[i], '{');
    int queued = 0;
    for (int64_t k = start; k < total; k++) {
        slot_row *s = &rows[k % SCHEDULES_RUNNER_MISSED_KEEP];
        if (lst == TK_OK) {
            int newest = k == total - 1;
            int late = now - s->at > SCHEDULES_RUNNER_LATE_S;
            s->trigger = "schedule";
            int run = 0;
            if (newest && !late)
                run = 1;
            else if (newest && run_once && (now - s->at) * 1000 <= cfg()->catchup_ms) {
                run = 1;
                s->trigger = "catch_up";
            }
            if (run && active[0]) {
                s->status = "skipped";
                snprintf(s->error, sizeof s->error, "the previous run %s is still going", active);
            } else if (run) {
                s->status = "queued";
                queued++;
            } else {
                s->status = "missed";
                snprintf(s->error, sizeof s->error,
                         "no instance ran it within %d s of its time (missed policy %s)",
                         SCHEDULES_RUNNER_LATE_S, run_once ? "run_once" : "skip");
                if (k == start && start > 0) {
                    size_t l = strlen(s->error);
                    snprintf(s->error + l, sizeof s->error - l, "; %lld earlier slots too",
                             (long long)start);
                }
            }
        }
        char rid[TK_UUID_LEN], at[40];
        tk_uuid7(rid);
        schedules_format_utc(s->at, at, sizeof at);
        int f = k == start;
        tk_pg_array_elem(&ids, rid, f);
        tk_pg_array_elem(&ats, at, f);
        tk_pg_array_elem(&sts, s->status, f);
        tk_pg_array_elem(&trs, s->trigger, f);
        tk_pg_array_elem(&ers, s->error[0] ? s->error : NULL, f);
    }
    for (size_t i = 0; i < 5; i++)
        tk_buf_append_byte(all[i], '}');
    char nexts[40];
    if (next >= 0)
        schedules_format_utc(next, nexts, sizeof nexts);
    const char *p[] = {id,
                       tk_buf_cstr(&ids),
                       tk_buf_cstr(&ats),
                       tk_buf_cstr(&sts),
                       tk_buf_cstr(&trs),
                       tk_buf_cstr(&ers),
                       agent_bus_instance_id(),
                       next >= 0 ? nexts : NULL};
    tk_status st = tk_pg_exec(
        c,
        "WITH ins AS (INSERT INTO schedule_runs (id, schedule_id, scheduled_for, trigger, status, "
        "instance_id, error, finished_at) "
        "SELECT x.id, $1, x.at, x.tr, x.st, CASE WHEN x.st = 'queued' THEN $7::uuid END, x.er, "
        "CASE WHEN x.st <> 'queued' THEN now() END "
        "FROM unnest($2::uuid[], $3::timestamptz[], $4::text[], $5::text[], $6::text[]) "
        "AS x(id, at, st, tr, er) ON CONFLICT (schedule_id, scheduled_for) DO NOTHING) "
        "UPDATE schedules SET next_run_at = $8::timestamptz WHERE id = $1",
        8, p);
    for (size_t i = 0; i < 5; i++)
        tk_buf_free(all[i]);
    free(rows);
    if (st != TK_OK || tk_pg_exec(c, "COMMIT", 0, NULL) != TK_OK) {
        rollback(c);
        return -1;
    }
    tk_info("schedules", "msg=\"schedule claimed\" schedule=%s slots=%lld queued=%d next=%s", id,
            (long long)total, queued, next >= 0 ? nexts : "none");
    return 1;
}

/* ---------------------------------------------------------------- time-outs */

static void expire(PGconn *c)
{
    char iv[48], msg[160], tmo[32];
    tk_format_duration(cfg()->run_timeout_ms, tmo, sizeof tmo);
    snprintf(iv, sizeof iv, "%lld milliseconds", (long long)cfg()->run_timeout_ms);
    snprintf(msg, sizeof msg, "the run took longer than SCHEDULE_RUN_TIMEOUT (%s)", tmo);
    const char *p[] = {iv, msg};
    PGresult *res = tk_pg_query(
        c,
        "WITH x AS (UPDATE schedule_runs r SET status = 'timed_out', finished_at = now(), "
        "error = $2 WHERE r.status IN ('queued', 'running') AND coalesce(r.started_at, "
        "r.created_at) < clock_timestamp() - $1::interval RETURNING r.id, r.session_id) "
        "SELECT x.id, (SELECT pg_notify('tusko_cancel', t.id::text) FROM turns t WHERE "
        "t.session_id = x.session_id AND t.state IN ('queued', 'running') LIMIT 1) FROM x",
        2, p);
    if (tk_pg_ok(res))
        for (int i = 0; i < PQntuples(res); i++)
            tk_warn("schedules", "msg=\"scheduled run timed out\" run=%s", PQgetvalue(res, i, 0));
    PQclear(res);
}

/* ---------------------------------------------------------------- starting */

static void run_failed(PGconn *c, const char *run, const char *from, const char *error)
{
    const char *p[] = {run, from, error};
    tk_pg_exec(c,
               "UPDATE schedule_runs SET status = 'failed', finished_at = now(), error = $3 "
               "WHERE id = $1 AND status = $2",
               3, p);
}

static void start_one(PGconn *c, const char *run, const char *user, const char *prompt)
{
    char sid[TK_UUID_LEN];
    tk_uuid7(sid);
    const char *p[] = {run, sid};
    /* the chat and the run marked running in one statement, only while the run
     * is still queued and its owner still exists */
    PGresult *res = tk_pg_query(
        c,
        "WITH ch AS (INSERT INTO chat_sessions (id, user_id, title, origin, schedule_id) "
        "SELECT $2, s.user_id, left(coalesce(nullif(s.name, ''), s.prompt), 60) || ' · ' || "
        "to_char(r.scheduled_for AT TIME ZONE s.zone, 'YYYY-MM-DD HH24:MI'), 'scheduled', s.id "
        "FROM schedule_runs r JOIN schedules s ON s.id = r.schedule_id JOIN users u ON u.id = "
        "s.user_id WHERE r.id = $1 AND r.status = 'queued' RETURNING id) "
        "UPDATE schedule_runs SET status = 'running', started_at = now(), session_id = "
        "(SELECT id FROM ch) WHERE id = $1 AND status = 'queued' AND EXISTS (SELECT 1 FROM ch) "
        "RETURNING id",
        2, p);
    int ok = tk_pg_ok(res) && PQntuples(res) == 1;
    PQclear(res);
    if (!ok) {
        run_failed(c, run, "queued", "the schedule's owner no longer exists");
        return;
    }
    agent_submit sub;
    tk_status st = agent_turn_submit(user, sid, prompt, NULL, &sub);
    const char *why = NULL;
    char buf[160];
    switch (st) {
    case TK_OK:
        tk_info("schedules", "msg=\"scheduled run started\" run=%s session=%s turn=%s", run, sid,
                sub.turn_id);
        return;
    case TK_EDENIED:
        snprintf(buf, sizeof buf, "rate limited (CHAT_RATE_LIMIT_MAX); retry after %d s",
                 sub.retry_after_s);
        why = buf;
        break;
    case TK_EINVAL:
        why = "no model is allowed on this server (TUSKO_MODELS is empty)";
        break;
    case TK_ENOENT:
        why = "the chat or its owner is gone";
        break;
    default:
        why = "the turn could not be stored (database)";
        break;
    }
    run_failed(c, run, "running", why);
    tk_warn("schedules", "msg=\"scheduled run not started\" run=%s error=\"%s\"", run, why);
}

static void start_queued(PGconn *c)
{
    const char *me = agent_bus_instance_id();
    char lim[24];
    snprintf(lim, sizeof lim, "%lld", (long long)cfg()->parallel);
    const char *p[] = {me, lim};
    PGresult *res = tk_pg_query(
        c,
        "SELECT r.id, s.user_id, s.prompt FROM schedule_runs r JOIN schedules s ON s.id = "
        "r.schedule_id WHERE r.status = 'queued' AND r.instance_id = $1 ORDER BY r.created_at, "
        "r.id LIMIT greatest(0, $2::int - (SELECT count(*) FROM schedule_runs WHERE status = "
        "'running' AND instance_id = $1))",
        2, p);
    if (tk_pg_ok(res))
        for (int i = 0; i < PQntuples(res) && !R.stopping; i++)
            start_one(c, PQgetvalue(res, i, 0), PQgetvalue(res, i, 1), PQgetvalue(res, i, 2));
    PQclear(res);
}

/* ---------------------------------------------------------------- sleeping */

/* Milliseconds until the next due time or run deadline, within [0, SLEEP_MAX_MS]. */
static int next_wake_ms(PGconn *c)
{
    char iv[48];
    snprintf(iv, sizeof iv, "%lld milliseconds", (long long)cfg()->run_timeout_ms);
    const char *p[] = {iv};
    PGresult *res = tk_pg_query(
        c,
        "SELECT ceil(extract(epoch FROM least("
        "(SELECT min(next_run_at) FROM schedules WHERE deleted_at IS NULL AND NOT paused AND "
        "next_run_at IS NOT NULL), "
        "(SELECT min(coalesce(started_at, created_at)) + $1::interval FROM schedule_runs WHERE "
        "status IN ('queued', 'running'))) - clock_timestamp()) * 1000)::bigint",
        1, p);
    int ms = SLEEP_MAX_MS;
    if (tk_pg_ok(res) && PQntuples(res) == 1 && !PQgetisnull(res, 0, 0)) {
        long long v = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
        ms = v < 0 ? 0 : v > SLEEP_MAX_MS ? SLEEP_MAX_MS : (int)v + 5;
    }
    PQclear(res);
    return ms;
}

static PGconn *runner_connect(void)
{
    PGconn *c = agent_bus_connect("schedules");
    if (c && tk_pg_exec(c, "LISTEN tusko_schedules", 0, NULL) != TK_OK) {
        PQfinish(c);
        c = NULL;
    }
    return c;
}

/* Drops the notifications received; how many there were. */
static int drain(PGconn *c)
{
    int n = 0;
    PGnotify *nt;
    while ((nt = PQnotifies(c))) {
        PQfreemem(nt);
        n++;
    }
    return n;
}

static void *runner_main(void *arg)
{
    (void)arg;
    PGconn *c = NULL;
    while (!R.stopping) {
        if (!c || PQstatus(c) != CONNECTION_OK) {
            if (c)
                PQfinish(c);
            c = runner_connect();
            if (!c) {
                tk_sleep_ms(1000);
                continue;
            }
        }
        int n = 0, r;
        while (!R.stopping && n < CLAIMS_PER_ROUND && (r = claim_one(c)) == 1)
            n++;
        expire(c);
        start_queued(c);
        int wait = n >= CLAIMS_PER_ROUND ? 0 : next_wake_ms(c);
        /* notifications that came in while a query ran are in libpq's queue
         * already, not on the socket: they mean another round at once */
        if (PQconsumeInput(c) && drain(c))
            wait = 0;
        struct pollfd pf[2] = {{.fd = PQsocket(c), .events = POLLIN},
                               {.fd = R.wakefd, .events = POLLIN}};
        int rc = poll(pf, 2, wait);
        if (rc < 0 && errno != EINTR)
            break;
        if (pf[1].revents & POLLIN) {
            uint64_t v;
            ssize_t k = read(R.wakefd, &v, sizeof v);
            (void)k;
        }
        if (pf[0].revents & POLLIN) {
            if (!PQconsumeInput(c)) {
                tk_warn("schedules", "msg=\"LISTEN connection lost\" error=\"%s\"",
                        PQerrorMessage(c));
                PQfinish(c);
                c = NULL;
                continue;
            }
            drain(c);
        }
    }
    if (c) {
        /* what this instance claimed but did not start will not start */
        const char *p[] = {agent_bus_instance_id()};
        tk_pg_exec(c,
                   "UPDATE schedule_runs SET status = 'failed', finished_at = now(), error = "
                   "'the instance stopped before starting it' WHERE status = 'queued' AND "
                   "instance_id = $1",
                   1, p);
        PQfinish(c);
    }
    return NULL;
}

tk_status schedules_runner_start(char *err, size_t errlen)
{
    R.wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (R.wakefd < 0) {
        snprintf(err, errlen, "eventfd: %s", strerror(errno));
        return TK_ERROR;
    }
    R.stopping = 0;
    if (pthread_create(&R.thread, NULL, runner_main, NULL) != 0) {
        snprintf(err, errlen, "cannot start the scheduler thread");
        close(R.wakefd);
        R.wakefd = -1;
        return TK_ERROR;
    }
    pthread_setname_np(R.thread, "schedules");
    R.running = 1;
    return TK_OK;
}

void schedules_runner_stop(void)
{
    if (!R.running)
        return;
    R.stopping = 1;
    schedules_runner_wake();
    pthread_join(R.thread, NULL);
    R.running = 0;
    close(R.wakefd);
    R.wakefd = -1;
}
