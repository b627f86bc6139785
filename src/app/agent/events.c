/* Events: the writer (queue → batch → Postgres → NOTIFY → listeners), the
 * in-process hub of SSE listeners, the SSE route, and the LISTEN thread that
 * brings other instances' events and other notifications in. */
#include "app/agent/events.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "app/agent/event_types.h"
#include "app/app.h"
#include "app/sessions.h"
#include "lib/buf.h"
#include "lib/id.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/sse.h"
#include "lib/tktime.h"

#define BATCH_MAX_EVENTS 4000
/* Group commit: a small batch waits this long for company (fewer, larger
 * inserts; adjacent text deltas of a turn merge), unless BATCH_FULL arrive. */
#define BATCH_WAIT_MS   20
#define BATCH_FULL      4000
#define BATCH_MAX_BYTES (4u << 20)
#define QUEUE_WARN      200000
#define PEND_MAX        20000
#define REPLAY_PAGE     500 /* the LIMIT in replay() */
#define NOTIFY_CHUNK    7800

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
    pthread_t writer, listener;
    char instance[TK_UUID_LEN];
    int wakefd; /* wakes the LISTEN thread (catch-ups) */
} Q = {.lock = PTHREAD_MUTEX_INITIALIZER,
       .cond = PTHREAD_COND_INITIALIZER,
       .stored_cv = PTHREAD_COND_INITIALIZER,
       .wakefd = -1};

const char *agent_instance_id(void)
{
    return Q.instance;
}

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

/* ---------------------------------------------------------------- hub */

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
    struct pend *ph, *pt;
    size_t npend;
    struct sub *next;
};

#define HUB_BUCKETS 1024
static pthread_mutex_t hub_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sub *hub[HUB_BUCKETS];
static size_t hub_subs;

static unsigned bucket_of(const char *sid)
{
    unsigned h = 2166136261u;
    for (const char *p = sid; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return h % HUB_BUCKETS;
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

static int format_frame(tk_buf *b, int64_t seq, const char *type, const char *data, size_t len)
{
    char id[24];
    snprintf(id, sizeof id, "%lld", (long long)seq);
    return tk_sse_format(b, id, type, data, len) == TK_OK;
}

static void wake_listener(void)
{
    if (Q.wakefd >= 0) {
        uint64_t one = 1;
        ssize_t n = write(Q.wakefd, &one, sizeof one);
        (void)n;
    }
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

/* Hands an event to every listener of its session on this instance. */
static void hub_publish(const char *sid, int64_t seq, const char *type, const char *data,
                        size_t len)
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

/* ------------------------------------------------------- database reads */

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

/* ---------------------------------------------------------------- writer */

static void pg_array_elem(tk_buf *b, const char *s, int first)
{
    if (!first)
        tk_buf_append_byte(b, ',');
    if (!s) {
        tk_buf_append_str(b, "NULL");
        return;
    }
    tk_buf_append_byte(b, '"');
    const char *p = s;
    for (;;) {
        size_t n = strcspn(p, "\"\\");
        tk_buf_append(b, p, n);
        p += n;
        if (!*p)
            break;
        tk_buf_append_byte(b, '\\');
        tk_buf_append_byte(b, *p++);
    }
    tk_buf_append_byte(b, '"');
}

/* sid -> last batch index, for one batch (open addressing; at most
 * BATCH_MAX_EVENTS keys in 2x slots). */
#define SIDMAP_SLOTS (BATCH_MAX_EVENTS * 2)
static struct {
    const char *sid;
    size_t idx;
} sidmap[SIDMAP_SLOTS];

static unsigned sid_hash(const char *sid)
{
    unsigned h = 2166136261u;
    for (const char *p = sid; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return h;
}

static void sidmap_clear(void)
{
    memset(sidmap, 0, sizeof sidmap);
}

/* The slot of sid (empty when absent). */
static size_t sidmap_slot(const char *sid)
{
    size_t i = sid_hash(sid) % SIDMAP_SLOTS;
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

static PGconn *connect_db(const char *what)
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

/* Appends s as a JSON string (quoted, escaped). */
static void json_quote(tk_buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    tk_buf_append_byte(b, '"');
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            run++;
            continue;
        }
        tk_buf_append(b, s + i - run, run);
        run = 0;
        switch (c) {
        case '"':
            tk_buf_append(b, "\\\"", 2);
            break;
        case '\\':
            tk_buf_append(b, "\\\\", 2);
            break;
        case '\n':
            tk_buf_append(b, "\\n", 2);
            break;
        case '\r':
            tk_buf_append(b, "\\r", 2);
            break;
        case '\t':
            tk_buf_append(b, "\\t", 2);
            break;
        default: {
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            tk_buf_append(b, e, 6);
        }
        }
    }
    tk_buf_append(b, s + n - run, run);
    tk_buf_append_byte(b, '"');
}

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
        json_quote(&b, it->text.data ? it->text.data : "", it->text.len);
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
        pg_array_elem(&sids, ev[i].it->sid, i == 0);
        pg_array_elem(&tids, ev[i].it->tid[0] ? ev[i].it->tid : NULL, i == 0);
        pg_array_elem(&types, ev[i].it->type, i == 0);
        pg_array_elem(&datas, ev[i].json, i == 0);
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
    tk_buf_printf(&cur, "%s|", Q.instance);
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
            pg_array_elem(&arr, tk_buf_cstr(&cur), first);
            first = 0;
            tk_buf_reset(&cur);
            tk_buf_printf(&cur, "%s|", Q.instance);
            snprintf(pair, sizeof pair, "%s:%lld", ev[i].it->sid, (long long)ev[i].seq);
        }
        tk_buf_append_str(&cur, pair);
    }
    if (cur.len > base)
        pg_array_elem(&arr, tk_buf_cstr(&cur), first);
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
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += BATCH_WAIT_MS * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            while (Q.n < BATCH_FULL && !Q.stopping)
                if (pthread_cond_timedwait(&Q.cond, &Q.lock, &ts) != 0)
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
                writer_conn = connect_db("event writer");
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
                hub_publish(ev[i].it->sid, ev[i].seq, ev[i].it->type, ev[i].json,
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

/* ---------------------------------------------------------------- LISTEN */

#define MAX_CHANNELS 8
static struct {
    char name[64];
    agent_notify_fn fn;
    void *ud;
} channels[MAX_CHANNELS];
static size_t nchannels;

#define MAX_TICKS 8
static struct {
    void (*fn)(PGconn *, void *);
    void *ud;
} ticks[MAX_TICKS];
static size_t nticks;

void agent_events_listen(const char *channel, agent_notify_fn fn, void *ud)
{
    TK_ASSERT(nchannels < MAX_CHANNELS);
    snprintf(channels[nchannels].name, sizeof channels[nchannels].name, "%s", channel);
    channels[nchannels].fn = fn;
    channels[nchannels].ud = ud;
    nchannels++;
}

void agent_events_on_tick(void (*fn)(PGconn *, void *), void *ud)
{
    TK_ASSERT(nticks < MAX_TICKS);
    ticks[nticks].fn = fn;
    ticks[nticks].ud = ud;
    nticks++;
}

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

static int session_has_listeners(const char *sid)
{
    int found = 0;
    pthread_mutex_lock(&hub_lock);
    for (struct sub *s = hub[bucket_of(sid)]; s && !found; s = s->next)
        found = !s->dead && strcmp(s->sid, sid) == 0;
    pthread_mutex_unlock(&hub_lock);
    return found;
}

static void on_events_notify(PGconn *c, const char *payload)
{
    const char *bar = strchr(payload, '|');
    if (!bar || (size_t)(bar - payload) != TK_UUID_LEN - 1)
        return;
    if (strncmp(payload, Q.instance, TK_UUID_LEN - 1) == 0)
        return; /* ours: already delivered */
    const char *p = bar + 1;
    while (*p) {
        const char *colon = strchr(p, ':');
        if (!colon || colon - p != TK_UUID_LEN - 1)
            return;
        char sid[TK_UUID_LEN];
        memcpy(sid, p, TK_UUID_LEN - 1);
        sid[TK_UUID_LEN - 1] = 0;
        if (session_has_listeners(sid))
            catch_up_session(c, sid);
        const char *comma = strchr(colon, ',');
        if (!comma)
            break;
        p = comma + 1;
    }
}

static void catch_up_gaps(PGconn *c)
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

static PGconn *listen_connect(void)
{
    PGconn *c = connect_db("LISTEN");
    if (!c)
        return NULL;
    const char *p[] = {Q.instance};
    if (tk_pg_exec(c, "LISTEN tusko_events", 0, NULL) != TK_OK ||
        tk_pg_exec(c, "SELECT pg_advisory_lock(" AGENT_INSTANCE_LOCK_SQL ")", 1, p) != TK_OK) {
        PQfinish(c);
        return NULL;
    }
    for (size_t i = 0; i < nchannels; i++) {
        char sql[96];
        snprintf(sql, sizeof sql, "LISTEN %s", channels[i].name);
        tk_pg_exec(c, sql, 0, NULL);
    }
    return c;
}

static void *listener_main(void *arg)
{
    PGconn *c = NULL;
    int64_t next_tick = 0;
    while (!Q.stopping) {
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
        int64_t now = tk_mono_ms();
        if (now >= next_tick) {
            for (size_t i = 0; i < nticks; i++)
                ticks[i].fn(c, ticks[i].ud);
            next_tick = tk_mono_ms() + 10000;
        }
        struct pollfd pf[2] = {{.fd = PQsocket(c), .events = POLLIN},
                               {.fd = Q.wakefd, .events = POLLIN}};
        int rc = poll(pf, 2, 1000);
        if (rc < 0 && errno != EINTR)
            break;
        if (pf[1].revents & POLLIN) {
            uint64_t v;
            ssize_t n = read(Q.wakefd, &v, sizeof v);
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
                if (strcmp(nt->relname, "tusko_events") == 0) {
                    on_events_notify(c, nt->extra);
                } else {
                    for (size_t i = 0; i < nchannels; i++)
                        if (strcmp(nt->relname, channels[i].name) == 0)
                            channels[i].fn(nt->relname, nt->extra, channels[i].ud);
                }
                PQfreemem(nt);
            }
        }
        catch_up_gaps(c);
    }
    if (c)
        PQfinish(c);
    return NULL;
}

tk_status agent_events_start(char *err, size_t errlen)
{
    tk_uuid4(Q.instance);
    Q.wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (Q.wakefd < 0) {
        snprintf(err, errlen, "eventfd: %s", strerror(errno));
        return TK_ERROR;
    }
    Q.stopping = 0;
    Q.running = 1;
    if (pthread_create(&Q.writer, NULL, writer_main, NULL) != 0 ||
        pthread_create(&Q.listener, NULL, listener_main, NULL) != 0) {
        snprintf(err, errlen, "cannot start the event threads");
        return TK_ERROR;
    }
    pthread_setname_np(Q.writer, "ev-writer");
    pthread_setname_np(Q.listener, "ev-listen");
    tk_info("events", "msg=\"events started\" instance=%s", Q.instance);
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
    wake_listener();
    pthread_join(Q.writer, NULL);
    pthread_join(Q.listener, NULL);
    pthread_mutex_lock(&Q.lock);
    Q.running = 0;
    pthread_cond_broadcast(&Q.stored_cv);
    pthread_mutex_unlock(&Q.lock);
    close(Q.wakefd);
    Q.wakefd = -1;
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
    if (s->dead)
        sub_end_locked(s); /* the client left during the replay */
    int gap = s->gap;
    sub_unref_locked(s);
    pthread_mutex_unlock(&hub_lock);
    if (gap)
        wake_listener();
}

const tk_route agent_events_routes[] = {
    {"GET", "/api/sessions/{id}/events", h_events, NULL, TK_ROUTE_BLOCKING},
};
const size_t agent_events_nroutes = TK_ARRAY_LEN(agent_events_routes);
