/* Events: the queue and its writer (queue → batch → Postgres → NOTIFY → the
 * hub). The hub (hub.c) delivers; the bus (bus.c) brings other instances'
 * events and notifications in. */
#include "app/agent/events.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/agent/bus.h"
#include "app/agent/event_types.h"
#include "app/agent/hub.h"
#include "lib/buf.h"
#include "lib/cond.h"
#include "lib/hash.h"
#include "lib/id.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/pg.h"
#include "lib/tktime.h"

#define BATCH_MAX_EVENTS 4000
/* Group commit: a small batch waits this long for company (fewer, larger
 * inserts; adjacent text deltas of a turn merge), unless BATCH_FULL arrive. */
#define BATCH_WAIT_MS 20
#define BATCH_FULL    4000
#define QUEUE_WARN    200000
#define NOTIFY_CHUNK  7800

/* ---------------------------------------------------------------- queue */

struct ev_item {
    char sid[TK_UUID_LEN];
    char tid[TK_UUID_LEN]; /* "" for none */
    char type[32];
    int step;
    json_t *data; /* NULL for text items (a tagged text item: its tags) */
    tk_buf text;  /* text items: the delta(s) */
    int is_text;
    char sub[TK_UUID_LEN]; /* tagged text: the subagent id (deltas merge within one) */
    struct ev_item *next;
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;      /* queue not empty, or stopping */
    pthread_cond_t stored_cv; /* stored advanced */
    struct ev_item *head, *tail;
    size_t n;
    uint64_t queued, stored; /* counts, for flush */
    int stopping;
    int running;
    pthread_t writer;
} Q = {.lock = PTHREAD_MUTEX_INITIALIZER,
       .cond = PTHREAD_COND_INITIALIZER,
       .stored_cv = PTHREAD_COND_INITIALIZER};

static void enqueue(struct ev_item *it)
{
    pthread_mutex_lock(&Q.lock);
    if (Q.tail)
        Q.tail->next = it;
    else
        Q.head = it;
    Q.tail = it;
    Q.n++;
    Q.queued++;
    /* the writer waits for the first event, then (group commit) for a full
     * batch or its time-out: no wake-up needed for the others */
    if (Q.n == 1 || Q.n == BATCH_FULL)
        pthread_cond_signal(&Q.cond);
    if (Q.n == QUEUE_WARN)
        tk_warn("events", "msg=\"event queue is long: the database is not keeping up\" queued=%zu",
                Q.n);
    pthread_mutex_unlock(&Q.lock);
}

static struct ev_item *item_new(const char *sid, const char *tid, const char *type)
{
    TK_ASSERT(agent_event_type_known(type)); /* a new type is declared in event_types.c */
    struct ev_item *it = tk_calloc(1, sizeof *it);
    snprintf(it->sid, sizeof it->sid, "%s", sid ? sid : "");
    snprintf(it->tid, sizeof it->tid, "%s", tid ? tid : "");
    snprintf(it->type, sizeof it->type, "%s", type);
    return it;
}

static void item_free(struct ev_item *it)
{
    json_decref(it->data);
    tk_buf_free(&it->text);
    free(it);
}

void agent_event_emit(const char *session_id, const char *turn_id, const char *type, json_t *data)
{
    if (!session_id || !tk_uuid_valid(session_id)) {
        json_decref(data);
        return;
    }
    struct ev_item *it = item_new(session_id, turn_id, type);
    it->data = data && json_is_object(data) ? data : json_object();
    if (data && !json_is_object(data))
        json_decref(data);
    enqueue(it);
}

void agent_event_text(const char *session_id, const char *turn_id, int step, const char *s,
                      size_t n)
{
    if (!session_id || !tk_uuid_valid(session_id) || n == 0)
        return;
    struct ev_item *it = item_new(session_id, turn_id, "text");
    it->is_text = 1;
    it->step = step;
    tk_buf_init(&it->text, 8u << 20);
    tk_buf_append(&it->text, s, n);
    enqueue(it);
}

void agent_event_text_tagged(const char *session_id, const char *turn_id, int step, json_t *tags,
                             const char *s, size_t n)
{
    if (!session_id || !tk_uuid_valid(session_id) || n == 0) {
        json_decref(tags);
        return;
    }
    struct ev_item *it = item_new(session_id, turn_id, "text");
    it->is_text = 1;
    it->step = step;
    if (json_is_object(tags)) {
        it->data = tags;
        snprintf(it->sub, sizeof it->sub, "%s", tk_json_str_or(tags, "subagent_id", "-"));
    } else {
        json_decref(tags);
    }
    tk_buf_init(&it->text, 8u << 20);
    tk_buf_append(&it->text, s, n);
    enqueue(it);
}

void agent_events_flush(void)
{
    pthread_mutex_lock(&Q.lock);
    uint64_t target = Q.queued;
    while (Q.running && Q.stored < target)
        pthread_cond_wait(&Q.stored_cv, &Q.lock);
    pthread_mutex_unlock(&Q.lock);
}

/* ---------------------------------------------------------------- writer */

/* sid -> last batch index, for one batch (open addressing; at most
 * BATCH_MAX_EVENTS keys in 2x slots). */
#define SIDMAP_SLOTS (BATCH_MAX_EVENTS * 2)
static struct {
    const char *sid;
    size_t idx;
} sidmap[SIDMAP_SLOTS];

static void sidmap_clear(void)
{
    memset(sidmap, 0, sizeof sidmap);
}

/* The slot of sid (empty when absent). */
static size_t sidmap_slot(const char *sid)
{
    size_t i = tk_hash_fnv1a(sid) % SIDMAP_SLOTS;
    while (sidmap[i].sid && strcmp(sidmap[i].sid, sid) != 0)
        i = (i + 1) % SIDMAP_SLOTS;
    return i;
}

struct batch_ev {
    struct ev_item *it;
    char *json;  /* serialised data */
    int64_t seq; /* assigned after the insert */
};

static PGconn *writer_conn;

/* Serialises an item's data (text items become {"delta": ...}). */
static char *item_json(struct ev_item *it)
{
    if (it->is_text && !it->data) {
        /* the hottest event: formatted by hand (the text is valid UTF-8, it
         * came out of a JSON parser) */
        char at[40];
        tk_time_rfc3339(tk_now_ms(), at, sizeof at);
        tk_buf b;
        tk_buf_init(&b, it->text.len * 6 + 256);
        tk_buf_printf(&b,
                      "{\"type\": \"text\", \"turn_id\": \"%s\", \"at\": \"%s\", \"step\": %d, "
                      "\"delta\": ",
                      it->tid, at, it->step);
        tk_json_quote(&b, it->text.data ? it->text.data : "", it->text.len);
        tk_buf_append_byte(&b, '}');
        return tk_buf_steal(&b, NULL);
    }
    json_t *d = it->is_text ? json_deep_copy(it->data) : json_incref(it->data);
    json_object_set_new(d, "type", json_string(it->type));
    json_object_set_new(d, "turn_id", it->tid[0] ? json_string(it->tid) : json_null());
    char at[40];
    tk_time_rfc3339(tk_now_ms(), at, sizeof at);
    json_object_set_new(d, "at", json_string(at));
    if (it->is_text) {
        json_object_set_new(d, "step", json_integer(it->step));
        json_object_set_new(d, "delta",
                            json_stringn(it->text.data ? it->text.data : "", it->text.len));
    }
    char *s = json_dumps(d, JSON_COMPACT);
    json_decref(d);
    return s ? s : tk_strdup("{}");
}

/* Stores the batch. TK_OK with seqs assigned, or TK_ERROR (nothing stored). */
static tk_status store_batch(PGconn *c, struct batch_ev *ev, size_t n)
{
    tk_buf sids, tids, types, datas;
    tk_buf_init(&sids, 64u << 20);
    tk_buf_init(&tids, 64u << 20);
    tk_buf_init(&types, 64u << 20);
    tk_buf_init(&datas, 256u << 20);
    tk_buf_append_byte(&sids, '{');
    tk_buf_append_byte(&tids, '{');
    tk_buf_append_byte(&types, '{');
    tk_buf_append_byte(&datas, '{');
    for (size_t i = 0; i < n; i++) {
        tk_pg_array_elem(&sids, ev[i].it->sid, i == 0);
        tk_pg_array_elem(&tids, ev[i].it->tid[0] ? ev[i].it->tid : NULL, i == 0);
        tk_pg_array_elem(&types, ev[i].it->type, i == 0);
        tk_pg_array_elem(&datas, ev[i].json, i == 0);
    }
    tk_buf_append_byte(&sids, '}');
    tk_buf_append_byte(&tids, '}');
    tk_buf_append_byte(&types, '}');
    tk_buf_append_byte(&datas, '}');
    const char *p[] = {tk_buf_cstr(&sids), tk_buf_cstr(&tids), tk_buf_cstr(&types),
                       tk_buf_cstr(&datas)};
    PGresult *r = tk_pg_query(c,
                              "SELECT ord, seq FROM tusko_events_append($1::uuid[], $2::uuid[], "
                              "$3::text[], $4::text[])",
                              4, p);
    tk_buf_free(&sids);
    tk_buf_free(&tids);
    tk_buf_free(&types);
    tk_buf_free(&datas);
    if (!tk_pg_ok(r) || (size_t)PQntuples(r) != n) {
        PQclear(r);
        return TK_ERROR;
    }
    for (int i = 0; i < PQntuples(r); i++) {
        int64_t ord = 0, seq = 0;
        tk_parse_i64(PQgetvalue(r, i, 0), 1, (int64_t)n, &ord);
        tk_parse_i64(PQgetvalue(r, i, 1), 1, INT64_MAX, &seq);
        if (ord >= 1)
            ev[ord - 1].seq = seq;
    }
    PQclear(r);
    return TK_OK;
}

static void notify_batch(PGconn *c, struct batch_ev *ev, size_t n)
{
    /* one payload per ~7.8 KB: "instance|sid:seq,sid:seq" with each session's
     * highest seq of the batch */
    tk_buf arr, cur;
    tk_buf_init(&arr, 64u << 20);
    tk_buf_init(&cur, NOTIFY_CHUNK + 256);
    tk_buf_append_byte(&arr, '{');
    int first = 1;
    tk_buf_printf(&cur, "%s|", agent_bus_instance_id());
    size_t base = cur.len;
    /* only the last event of each session in the batch (build_batch's map
     * holds each session's last entry) */
    for (size_t i = 0; i < n; i++) {
        if (ev[i].seq <= 0)
            continue;
        size_t slot = sidmap_slot(ev[i].it->sid);
        if (!sidmap[slot].sid || sidmap[slot].idx != i)
            continue;
        char pair[64];
        snprintf(pair, sizeof pair, "%s%s:%lld", cur.len > base ? "," : "", ev[i].it->sid,
                 (long long)ev[i].seq);
        if (cur.len + strlen(pair) > NOTIFY_CHUNK) {
            tk_pg_array_elem(&arr, tk_buf_cstr(&cur), first);
            first = 0;
            tk_buf_reset(&cur);
            tk_buf_printf(&cur, "%s|", agent_bus_instance_id());
            snprintf(pair, sizeof pair, "%s:%lld", ev[i].it->sid, (long long)ev[i].seq);
        }
        tk_buf_append_str(&cur, pair);
    }
    if (cur.len > base)
        tk_pg_array_elem(&arr, tk_buf_cstr(&cur), first);
    tk_buf_append_byte(&arr, '}');
    if (arr.len > 2) {
        const char *p[] = {tk_buf_cstr(&arr)};
        tk_pg_exec(c, "SELECT pg_notify('tusko_events', x) FROM unnest($1::text[]) x", 1, p);
    }
    tk_buf_free(&arr);
    tk_buf_free(&cur);
}

/* Merges adjacent text deltas of the same turn and step within a session.
 * Returns the number of batch entries. */
static size_t build_batch(struct ev_item *list, struct batch_ev *out, size_t max)
{
    size_t n = 0;
    sidmap_clear();
    for (struct ev_item *it = list; it;) {
        struct ev_item *next = it->next;
        it->next = NULL;
        size_t slot = sidmap_slot(it->sid);
        if (it->is_text && sidmap[slot].sid) {
            /* the session's previous entry in this batch */
            struct batch_ev *prev = &out[sidmap[slot].idx];
            if (prev->it->is_text && strcmp(prev->it->tid, it->tid) == 0 &&
                prev->it->step == it->step && strcmp(prev->it->sub, it->sub) == 0 &&
                tk_buf_append(&prev->it->text, it->text.data, it->text.len) == TK_OK) {
                item_free(it);
                it = next;
                continue;
            }
        }
        TK_ASSERT(n < max);
        out[n] = (struct batch_ev){.it = it};
        sidmap[slot].sid = it->sid;
        sidmap[slot].idx = n;
        n++;
        it = next;
    }
    for (size_t i = 0; i < n; i++)
        out[i].json = item_json(out[i].it);
    return n;
}

static void *writer_main(void *arg)
{
    struct batch_ev *ev = tk_calloc(BATCH_MAX_EVENTS, sizeof *ev);
    int backoff = 100;
    for (;;) {
        pthread_mutex_lock(&Q.lock);
        while (!Q.head && !Q.stopping)
            pthread_cond_wait(&Q.cond, &Q.lock);
        if (!Q.head && Q.stopping) {
            pthread_mutex_unlock(&Q.lock);
            break;
        }
        if (Q.n < BATCH_FULL && !Q.stopping) {
            int64_t until = tk_mono_ms() + BATCH_WAIT_MS;
            while (Q.n < BATCH_FULL && !Q.stopping)
                if (tk_cond_wait_until(&Q.cond, &Q.lock, until) != 0)
                    break;
        }
        /* take up to BATCH_MAX_EVENTS items */
        struct ev_item *list = Q.head, *last = Q.head;
        size_t taken = 1;
        while (last->next && taken < BATCH_MAX_EVENTS) {
            last = last->next;
            taken++;
        }
        Q.head = last->next;
        if (!Q.head)
            Q.tail = NULL;
        last->next = NULL;
        Q.n -= taken;
        pthread_mutex_unlock(&Q.lock);

        size_t n = build_batch(list, ev, BATCH_MAX_EVENTS);
        tk_status st = TK_ERROR;
        for (int attempt = 0; attempt < 20; attempt++) {
            if (!writer_conn || PQstatus(writer_conn) != CONNECTION_OK) {
                if (writer_conn)
                    PQfinish(writer_conn);
                writer_conn = agent_bus_connect("event writer");
            }
            if (writer_conn && (st = store_batch(writer_conn, ev, n)) == TK_OK)
                break;
            for (size_t i = 0; i < n; i++)
                ev[i].seq = 0;
            if (writer_conn && PQstatus(writer_conn) == CONNECTION_OK && n > 1) {
                /* a bad row (a chat deleted meanwhile) must not lose the others:
                 * store each event on its own */
                size_t ok = 0;
                for (size_t i = 0; i < n; i++)
                    if (store_batch(writer_conn, &ev[i], 1) == TK_OK)
                        ok++;
                if (ok > 0) {
                    st = TK_OK;
                    break;
                }
            }
            tk_sleep_ms(backoff);
            backoff = backoff < 2000 ? backoff * 2 : 2000;
        }
        backoff = 100;
        if (st != TK_OK)
            tk_error("events", "msg=\"events dropped: the database refused them\" count=%zu", n);
        else
            notify_batch(writer_conn, ev, n);
        for (size_t i = 0; i < n; i++) {
            if (ev[i].seq > 0)
                agent_hub_publish(ev[i].it->sid, ev[i].seq, ev[i].it->type, ev[i].json,
                                  strlen(ev[i].json));
            free(ev[i].json);
            item_free(ev[i].it);
        }
        pthread_mutex_lock(&Q.lock);
        Q.stored += taken;
        pthread_cond_broadcast(&Q.stored_cv);
        pthread_mutex_unlock(&Q.lock);
    }
    free(ev);
    if (writer_conn)
        PQfinish(writer_conn);
    writer_conn = NULL;
    return NULL;
}

/* ---------------------------------------------------------------- start, stop */

tk_status agent_events_start(char *err, size_t errlen)
{
    agent_hub_start();
    if (agent_bus_start(err, errlen) != TK_OK)
        return TK_ERROR;
    Q.stopping = 0;
    Q.running = 1;
    if (pthread_create(&Q.writer, NULL, writer_main, NULL) != 0) {
        Q.running = 0;
        agent_bus_stop();
        snprintf(err, errlen, "cannot start the event writer");
        return TK_ERROR;
    }
    pthread_setname_np(Q.writer, "ev-writer");
    tk_info("events", "msg=\"events started\" instance=%s", agent_bus_instance_id());
    return TK_OK;
}

void agent_events_stop(void)
{
    if (!Q.running)
        return;
    pthread_mutex_lock(&Q.lock);
    Q.stopping = 1;
    pthread_cond_broadcast(&Q.cond);
    pthread_mutex_unlock(&Q.lock);
    pthread_join(Q.writer, NULL);
    agent_bus_stop();
    pthread_mutex_lock(&Q.lock);
    Q.running = 0;
    pthread_cond_broadcast(&Q.stored_cv);
    pthread_mutex_unlock(&Q.lock);
}
