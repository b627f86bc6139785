/* The hub: a chat's SSE listeners on this instance, the replay from Postgres
 * and the route (see hub.h). */
#include "app/agent/hub.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/agent/bus.h"
#include "app/agent/event_types.h"
#include "app/app.h"
#include "app/auth/auth.h"
#include "app/sessions.h"
#include "lib/buf.h"
#include "lib/hash.h"
#include "lib/id.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/pg.h"
#include "lib/sse.h"
#include "lib/tktime.h"

#define PEND_MAX    20000 /* stored events queued for a listener still replaying */
#define REPLAY_PAGE 500   /* the LIMIT in replay() */

/* ---------------------------------------------------------------- listeners */

struct pend {
    int64_t seq;
    char *frame;
    size_t len;
    struct pend *next;
};

struct sub {
    char sid[TK_UUID_LEN];
    tk_stream *stream;
    int64_t last_seq;
    int live;      /* the replay is done: deliver directly */
    int dead;      /* the stream has gone (or was ended by us) */
    int ended;     /* we called tk_stream_close */
    int gap;       /* an event was missed: fetch from the database */
    int replaying; /* the SSE handler still owns the producer side of the stream */
    int refs;
    int evicted; /* closed for the user's limit of streams: say so, then end */
    struct pend *ph, *pt;
    size_t npend;
    struct sub *next;
    struct hub_user *user; /* its user's streams, oldest first; NULL once out */
    struct sub *uprev, *unext;
};

/* A user's streams on this instance, oldest first (USER_MAX_STREAMS). */
struct hub_user {
    char uid[TK_UUID_LEN];
    size_t n;
    struct sub *head, *tail;
    struct hub_user *next;
};

#define HUB_BUCKETS 1024
static pthread_mutex_t hub_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sub *hub[HUB_BUCKETS];
static size_t hub_subs;
static struct hub_user *hub_users[HUB_BUCKETS];

static unsigned bucket_of(const char *sid)
{
    return tk_hash_fnv1a(sid) % HUB_BUCKETS;
}

static void pend_clear(struct sub *s)
{
    while (s->ph) {
        struct pend *p = s->ph;
        s->ph = p->next;
        free(p->frame);
        free(p);
    }
    s->pt = NULL;
    s->npend = 0;
}

/* Under hub_lock. */
static void sub_unref_locked(struct sub *s)
{
    if (--s->refs == 0) {
        pend_clear(s);
        free(s);
    }
}

/* Ends the stream from our side (a lagging client: it reconnects and resumes
 * with Last-Event-ID). Under hub_lock. */
static void sub_end_locked(struct sub *s)
{
    if (!s->ended) {
        s->ended = 1;
        s->dead = 1;
        tk_stream_close(s->stream);
    }
}

/* Takes s out of its user's list. Under hub_lock. */
static void user_unlink_locked(struct sub *s)
{
    struct hub_user *u = s->user;
    if (!u)
        return;
    if (s->uprev)
        s->uprev->unext = s->unext;
    else
        u->head = s->unext;
    if (s->unext)
        s->unext->uprev = s->uprev;
    else
        u->tail = s->uprev;
    s->user = NULL;
    s->uprev = s->unext = NULL;
    if (--u->n == 0) {
        struct hub_user **pp = &hub_users[tk_hash_fnv1a(u->uid) % HUB_BUCKETS];
        while (*pp != u)
            pp = &(*pp)->next;
        *pp = u->next;
        free(u);
    }
}

/* The frame that ends a stream closed by the user's limit: no id (the
 * client's Last-Event-ID stays where it was), never stored. */
static void write_evicted_frame(struct sub *s)
{
    char data[320];
    int n = snprintf(data, sizeof data,
                     "{\"type\":\"stream_closed\",\"reason\":\"TOO_MANY_STREAMS\","
                     "\"max\":%lld,\"message\":\"this account has more than %lld chat streams "
                     "open; the oldest was closed\"}",
                     (long long)app_get()->cfg->user_max_streams,
                     (long long)app_get()->cfg->user_max_streams);
    tk_buf b;
    tk_buf_init(&b, 1024);
    if (n > 0 && (size_t)n < sizeof data &&
        tk_sse_format(&b, NULL, "stream_closed", data, (size_t)n) == TK_OK)
        tk_stream_try_write(s->stream, b.data, b.len);
    tk_buf_free(&b);
}

static struct hub_user *user_find_locked(const char *uid)
{
    struct hub_user *u = hub_users[tk_hash_fnv1a(uid) % HUB_BUCKETS];
    while (u && strcmp(u->uid, uid) != 0)
        u = u->next;
    return u;
}

/* Adds s to its user's streams; over the limit, the oldest are closed (a
 * live one at once, one still replaying when its replay ends). Under
 * hub_lock. */
static void user_add_locked(struct sub *s, const char *uid)
{
    int64_t max = app_get()->cfg->user_max_streams;
    struct hub_user *u;
    size_t closed = 0;
    while ((u = user_find_locked(uid)) && max > 0 && (int64_t)u->n >= max) {
        struct sub *old = u->head;
        old->evicted = 1;
        user_unlink_locked(old); /* frees u when it held the last */
        closed++;
        if (old->live && !old->dead) {
            write_evicted_frame(old);
            sub_end_locked(old);
        } else {
            old->dead = 1;
        }
    }
    if (closed)
        tk_info("events",
                "msg=\"closed the oldest event stream: user over USER_MAX_STREAMS\" user=%s "
                "max=%lld",
                uid, (long long)max);
    if (!u) {
        unsigned b = tk_hash_fnv1a(uid) % HUB_BUCKETS;
        u = tk_calloc(1, sizeof *u);
        snprintf(u->uid, sizeof u->uid, "%s", uid);
        u->next = hub_users[b];
        hub_users[b] = u;
    }
    s->user = u;
    s->uprev = u->tail;
    s->unext = NULL;
    if (u->tail)
        u->tail->unext = s;
    else
        u->head = s;
    u->tail = s;
    u->n++;
}

static int format_frame(tk_buf *b, int64_t seq, const char *type, const char *data, size_t len)
{
    char id[24];
    snprintf(id, sizeof id, "%lld", (long long)seq);
    return tk_sse_format(b, id, type, data, len) == TK_OK;
}

/* Delivers one stored event to a live subscriber; events of a session come in
 * increasing seq (one writer per session), so anything not newer than what the
 * listener has is a repeat and skipped. Under hub_lock. */
static void sub_deliver_locked(struct sub *s, int64_t seq, const char *frame, size_t len)
{
    if (s->dead || seq <= s->last_seq)
        return;
    tk_status st = tk_stream_try_write(s->stream, frame, len);
    if (st == TK_OK) {
        s->last_seq = seq;
    } else if (st == TK_AGAIN) {
        tk_info("events", "msg=\"ending a lagging event stream\" session=%s seq=%lld", s->sid,
                (long long)seq);
        sub_end_locked(s);
    } else {
        s->dead = 1;
    }
}

void agent_hub_publish(const char *sid, int64_t seq, const char *type, const char *data, size_t len)
{
    pthread_mutex_lock(&hub_lock);
    struct sub *s = hub[bucket_of(sid)];
    tk_buf frame;
    tk_buf_init(&frame, len * 2 + 512);
    int have = 0;
    for (; s; s = s->next) {
        if (s->dead || strcmp(s->sid, sid) != 0)
            continue;
        if (!have) {
            if (!format_frame(&frame, seq, type, data, len))
                break;
            have = 1;
        }
        if (!s->live) {
            if (s->npend >= PEND_MAX) {
                s->gap = 1;
                continue;
            }
            struct pend *p = tk_malloc(sizeof *p);
            p->seq = seq;
            p->len = frame.len;
            p->frame = tk_malloc(frame.len);
            memcpy(p->frame, frame.data, frame.len);
            p->next = NULL;
            if (s->pt)
                s->pt->next = p;
            else
                s->ph = p;
            s->pt = p;
            s->npend++;
            continue;
        }
        sub_deliver_locked(s, seq, frame.data, frame.len);
    }
    pthread_mutex_unlock(&hub_lock);
    tk_buf_free(&frame);
}

static void sub_on_close(void *ud)
{
    struct sub *s = ud;
    pthread_mutex_lock(&hub_lock);
    s->dead = 1;
    user_unlink_locked(s);
    struct sub **pp = &hub[bucket_of(s->sid)];
    while (*pp && *pp != s)
        pp = &(*pp)->next;
    if (*pp) {
        *pp = s->next;
        hub_subs--;
    }
    if (!s->replaying)
        sub_end_locked(s); /* the producer's end of the stream */
    sub_unref_locked(s);
    pthread_mutex_unlock(&hub_lock);
}

/* ---------------------------------------------------------------- replay */

/* The "history" frame of a ?turns= replay: {"type":"history","earlier":
 * whether the chat has events before the range, "before": the seq of the
 * range's first event (first; 0 for an empty range, sent as null)}. Written
 * just before that event, or alone for an empty range; it has no id, so a
 * client's Last-Event-ID is not touched by it. */
struct replay_head {
    int pending; /* still to be written */
    int earlier;
};

static tk_status head_write(tk_stream *stream, struct replay_head *h, int64_t first)
{
    h->pending = 0;
    char data[128], num[24];
    snprintf(num, sizeof num, "%lld", (long long)first);
    int n = snprintf(data, sizeof data, "{\"type\":\"history\",\"earlier\":%s,\"before\":%s}",
                     h->earlier ? "true" : "false", first > 0 ? num : "null");
    tk_buf frame;
    tk_buf_init(&frame, 512);
    tk_status st = tk_sse_format(&frame, NULL, "history", data, (size_t)n);
    if (st == TK_OK)
        st = tk_stream_write(stream, frame.data, frame.len);
    tk_buf_free(&frame);
    return st;
}

/* Writes the session's events after `after` (and, when before > 0, before
 * `before`) to a blocking stream write (replay; with head, the history frame
 * first) or, with s, through the hub's ordered delivery (catch-up). Returns
 * the last seq written, or -1 on a database error. */
static int64_t replay(PGconn *c, const char *sid, int64_t after, int64_t before, tk_stream *stream,
                      struct sub *s, struct replay_head *head)
{
    for (;;) {
        char a[24], b[24];
        snprintf(a, sizeof a, "%lld", (long long)after);
        snprintf(b, sizeof b, "%lld", (long long)(before > 0 ? before : INT64_MAX));
        const char *p[] = {sid, a, b};
        PGresult *r = tk_pg_query(c,
                                  "SELECT seq, type, data FROM events WHERE session_id = $1 "
                                  "AND seq > $2 AND seq < $3 ORDER BY seq LIMIT 500",
                                  3, p);
        if (!tk_pg_ok(r)) {
            PQclear(r);
            /* still say what is known: with earlier turns the range starts
             * at after + 1 (the N-th last turn_start) */
            if (head && head->pending)
                head_write(stream, head, head->earlier ? after + 1 : 0);
            return -1;
        }
        int n = PQntuples(r);
        tk_buf frame;
        tk_buf_init(&frame, 16u << 20);
        for (int i = 0; i < n; i++) {
            int64_t seq = 0;
            tk_parse_i64(PQgetvalue(r, i, 0), 0, INT64_MAX, &seq);
            tk_buf_reset(&frame);
            if (!format_frame(&frame, seq, PQgetvalue(r, i, 1), PQgetvalue(r, i, 2),
                              (size_t)PQgetlength(r, i, 2)))
                continue;
            if (stream) {
                if ((head && head->pending && head_write(stream, head, seq) != TK_OK) ||
                    tk_stream_write(stream, frame.data, frame.len) != TK_OK) {
                    tk_buf_free(&frame);
                    PQclear(r);
                    return after;
                }
            } else if (s) {
                pthread_mutex_lock(&hub_lock);
                sub_deliver_locked(s, seq, frame.data, frame.len);
                pthread_mutex_unlock(&hub_lock);
            }
            after = seq;
        }
        tk_buf_free(&frame);
        PQclear(r);
        if (n < REPLAY_PAGE) {
            if (head && head->pending)
                head_write(stream, head, 0); /* an empty range */
            return after;
        }
    }
}

/* ---------------------------------------------------------------- catch-up */

/* Fetches and delivers, for every local listener of sid that is behind. */
static void catch_up_session(PGconn *c, const char *sid)
{
    /* collect the listeners of sid (with a ref) */
    struct sub *subs[64];
    size_t ns = 0;
    pthread_mutex_lock(&hub_lock);
    for (struct sub *s = hub[bucket_of(sid)]; s && ns < TK_ARRAY_LEN(subs); s = s->next) {
        if (!s->dead && s->live && strcmp(s->sid, sid) == 0) {
            s->refs++;
            subs[ns++] = s;
        }
    }
    pthread_mutex_unlock(&hub_lock);
    for (size_t i = 0; i < ns; i++) {
        pthread_mutex_lock(&hub_lock);
        int64_t from = subs[i]->last_seq;
        subs[i]->gap = 0;
        pthread_mutex_unlock(&hub_lock);
        replay(c, sid, from, 0, NULL, subs[i], NULL);
        pthread_mutex_lock(&hub_lock);
        sub_unref_locked(subs[i]);
        pthread_mutex_unlock(&hub_lock);
    }
}

/* tusko_events: "<instance>|<chat>:<seq>,...", another instance stored events
 * of these chats. Their live listeners here are marked behind; the round
 * that follows on the same thread reads what they miss. */
static void on_events_notify(const char *channel, const char *payload, void *ud)
{
    const char *bar = strchr(payload, '|');
    if (!bar || (size_t)(bar - payload) != TK_UUID_LEN - 1)
        return;
    if (strncmp(payload, agent_bus_instance_id(), TK_UUID_LEN - 1) == 0)
        return; /* ours: already delivered */
    const char *p = bar + 1;
    while (*p) {
        const char *colon = strchr(p, ':');
        if (!colon || colon - p != TK_UUID_LEN - 1)
            return;
        char sid[TK_UUID_LEN];
        memcpy(sid, p, TK_UUID_LEN - 1);
        sid[TK_UUID_LEN - 1] = 0;
        pthread_mutex_lock(&hub_lock);
        for (struct sub *s = hub[bucket_of(sid)]; s; s = s->next)
            if (!s->dead && s->live && strcmp(s->sid, sid) == 0)
                s->gap = 1;
        pthread_mutex_unlock(&hub_lock);
        const char *comma = strchr(colon, ',');
        if (!comma)
            break;
        p = comma + 1;
    }
}

/* A round of the bus: every chat with a live listener that missed something. */
static void catch_up_gaps(PGconn *c, void *ud)
{
    /* sessions with a listener that missed something */
    char(*sids)[TK_UUID_LEN] = NULL;
    size_t n = 0, cap = 0;
    pthread_mutex_lock(&hub_lock);
    for (size_t b = 0; b < HUB_BUCKETS; b++)
        for (struct sub *s = hub[b]; s; s = s->next)
            if (s->gap && s->live && !s->dead) {
                if (n == cap) {
                    cap = cap ? cap * 2 : 16;
                    sids = tk_realloc(sids, cap * sizeof *sids);
                }
                memcpy(sids[n++], s->sid, TK_UUID_LEN);
            }
    pthread_mutex_unlock(&hub_lock);
    for (size_t i = 0; i < n; i++)
        catch_up_session(c, sids[i]);
    free(sids);
}

/* ---------------------------------------------------------------- transient */

size_t agent_hub_publish_transient(const char *session_id, const char *turn_id, const char *type,
                                   json_t *data)
{
    TK_ASSERT(agent_event_type_known(type)); /* a new type is declared in event_types.c */
    if (!session_id || !tk_uuid_valid(session_id)) {
        json_decref(data);
        return 0;
    }
    json_t *d = data && json_is_object(data) ? data : json_object();
    if (data && !json_is_object(data))
        json_decref(data);
    json_object_set_new(d, "type", json_string(type));
    json_object_set_new(d, "turn_id", turn_id ? json_string(turn_id) : json_null());
    char at[40];
    tk_time_rfc3339(tk_now_ms(), at, sizeof at);
    json_object_set_new(d, "at", json_string(at));
    char *json = json_dumps(d, JSON_COMPACT);
    json_decref(d);
    if (!json)
        return 0;
    size_t len = strlen(json), sent = 0;
    tk_buf frame;
    tk_buf_init(&frame, len * 2 + 512);
    if (tk_sse_format(&frame, NULL, type, json, len) == TK_OK) {
        pthread_mutex_lock(&hub_lock);
        for (struct sub *s = hub[bucket_of(session_id)]; s; s = s->next) {
            if (s->dead || !s->live || strcmp(s->sid, session_id) != 0)
                continue;
            tk_status st = tk_stream_try_write(s->stream, frame.data, frame.len);
            if (st == TK_OK)
                sent++;
            else if (st != TK_AGAIN)
                s->dead = 1; /* gone; a full stream only misses this frame */
        }
        pthread_mutex_unlock(&hub_lock);
    }
    tk_buf_free(&frame);
    free(json);
    return sent;
}

void agent_hub_start(void)
{
    static int started;
    if (started)
        return;
    started = 1;
    agent_bus_listen("tusko_events", on_events_notify, NULL);
    agent_bus_on_round(catch_up_gaps, NULL);
}

/* ---------------------------------------------------------------- route */

#define TURNS_MAX 200 /* ?turns= */

/* Where a replay of the last `turns` turns before `before` (0: up to now)
 * starts: *after, the seq to replay after; *earlier, whether the chat has
 * events before the range. One lookup through the partial index
 * events_turn_start: turns + 1 entries, whatever the turns hold. */
static tk_status turns_start(PGconn *c, const char *sid, int64_t turns, int64_t before,
                             int64_t *after, int *earlier)
{
    char b[24], lim[24];
    snprintf(b, sizeof b, "%lld", (long long)(before > 0 ? before : INT64_MAX));
    snprintf(lim, sizeof lim, "%lld", (long long)turns + 1);
    const char *p[] = {sid, b, lim};
    /* type is a literal: the planner matches the partial index's predicate */
    PGresult *r = tk_pg_query(c,
                              "SELECT seq FROM events WHERE session_id = $1 AND type = "
                              "'turn_start' AND seq < $2 ORDER BY seq DESC LIMIT $3",
                              3, p);
    if (!tk_pg_ok(r)) {
        PQclear(r);
        return TK_ERROR;
    }
    *after = 0; /* N turns or fewer: from the beginning, with what came before the first */
    *earlier = 0;
    if (PQntuples(r) > turns) {
        /* a turn before the N-th: the range starts at the N-th's turn_start */
        int64_t seq = 1;
        tk_parse_i64(PQgetvalue(r, (int)turns - 1, 0), 1, INT64_MAX, &seq);
        *after = seq - 1;
        *earlier = 1;
    }
    PQclear(r);
    return TK_OK;
}

/* GET /api/sessions/{id}/events[?after=N][&turns=N][&before=SEQ][&follow=0]
 * with Last-Event-ID (which, like after, takes precedence over turns) */
static void h_events(tk_req *r, void *ud)
{
    int64_t after = 0;
    const char *lei = tk_req_header(r, "Last-Event-ID");
    const char *q = tk_req_query(r, "after");
    const char *v = lei && *lei ? lei : q;
    if (v && tk_parse_i64(v, 0, INT64_MAX, &after) != TK_OK) {
        tk_respond_error(r, 400, "INVALID_REQUEST",
                         "Last-Event-ID / \"after\" must be an event number (an integer >= 0)");
        return;
    }
    int64_t turns = 0, before = 0;
    const char *tq = tk_req_query(r, "turns");
    if (tq && tk_parse_i64(tq, 1, TURNS_MAX, &turns) != TK_OK) {
        tk_respond_error(r, 400, "INVALID_REQUEST", "\"turns\" must be an integer from 1 to %d",
                         TURNS_MAX);
        return;
    }
    const char *bq = tk_req_query(r, "before");
    if (bq && tk_parse_i64(bq, 1, INT64_MAX, &before) != TK_OK) {
        tk_respond_error(r, 400, "INVALID_REQUEST",
                         "\"before\" must be an event number (an integer >= 1)");
        return;
    }
    const char *f = tk_req_query(r, "follow");
    int follow = !(f && (strcmp(f, "0") == 0 || strcmp(f, "false") == 0));
    if (bq && follow) {
        tk_respond_error(r, 400, "INVALID_REQUEST",
                         "\"before\" needs follow=0: a range that ends before an event is "
                         "not followed live");
        return;
    }
    int by_turns = tq && !v; /* Last-Event-ID / after: resume exactly there */
    PGconn *c = app_db_acquire();
    if (!c) {
        app_respond_db_unavailable(r);
        return;
    }
    const char *sid = app_req_session(r, c);
    if (!sid) {
        app_db_release(c);
        return;
    }
    struct replay_head head = {.pending = by_turns};
    if (by_turns && turns_start(c, sid, turns, before, &after, &head.earlier) != TK_OK) {
        app_db_release(c);
        app_respond_db_unavailable(r);
        return;
    }
    tk_stream *stream = tk_respond_sse(r);
    struct sub *s = NULL;
    if (follow) {
        s = tk_calloc(1, sizeof *s);
        snprintf(s->sid, sizeof s->sid, "%s", sid);
        s->stream = stream;
        s->last_seq = after;
        s->refs = 2; /* the hub (until on_close) and this handler */
        s->replaying = 1;
        pthread_mutex_lock(&hub_lock);
        unsigned b = bucket_of(s->sid);
        s->next = hub[b];
        hub[b] = s;
        hub_subs++;
        user_add_locked(s, app_req_user(r)->id);
        pthread_mutex_unlock(&hub_lock);
        tk_stream_on_close(stream, sub_on_close, s);
    }
    int64_t last = replay(c, sid, after, before, stream, NULL, by_turns ? &head : NULL);
    app_db_release(c);
    if (!follow) {
        tk_stream_close(stream);
        return;
    }
    pthread_mutex_lock(&hub_lock);
    if (last >= 0 && last > s->last_seq)
        s->last_seq = last;
    if (last < 0)
        s->gap = 1;
    /* what arrived during the replay, in order */
    for (struct pend *p = s->ph; p; p = p->next)
        sub_deliver_locked(s, p->seq, p->frame, p->len);
    pend_clear(s);
    s->live = 1;
    s->replaying = 0;
    if (s->evicted)
        write_evicted_frame(s); /* closed for the limit while replaying */
    if (s->dead)
        sub_end_locked(s); /* the client left, or the limit closed it, during the replay */
    int gap = s->gap;
    sub_unref_locked(s);
    pthread_mutex_unlock(&hub_lock);
    if (gap)
        agent_bus_wake();
}

const tk_route agent_hub_routes[] = {
    {"GET", "/api/sessions/{id}/events", h_events, NULL, TK_ROUTE_BLOCKING},
};
const size_t agent_hub_nroutes = TK_ARRAY_LEN(agent_hub_routes);
