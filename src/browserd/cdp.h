/*
 * cdp.h — a small Chrome DevTools Protocol client over --remote-debugging-pipe.
 *
 * Chromium reads JSON messages from fd 3 and writes them to fd 4, each ended by
 * a NUL byte. A request is {"id":N,"method":"X.y","params":{...},"sessionId":S};
 * its answer carries the same id and a result or an error; a message without an
 * id is an event. Target sessions are flattened: a page's commands go over the
 * same pipe with the sessionId Target.attachToTarget{flatten:true} returned.
 *
 * Threads: one reader thread per client reads the pipe, answers waiting calls
 * and hands events to the event callback (on the reader thread: it must not
 * make a blocking brd_cdp_call, which would wait for the reader itself; it may
 * use brd_cdp_send). Calls may be made from any thread at once.
 *
 * A browser that exits or crashes closes the pipe: every waiting call returns
 * TK_ECLOSED, later calls fail at once, and the gone callback runs once.
 */
#ifndef BRD_CDP_H
#define BRD_CDP_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/buf.h"
#include "lib/common.h"

/* The largest message read from the browser (a full-page screenshot, a PDF). */
#define BRD_CDP_MAX_MESSAGE (64u << 20)

/* --- the reader: NUL-delimited messages with a cap --- */

/* Called for each complete message (msg[len] is NUL); non-zero stops the feed. */
typedef int (*brd_cdp_msg_fn)(const char *msg, size_t len, void *ud);

typedef struct {
    tk_buf buf;   /* the message being read */
    int overflow; /* the current message passed the cap: skipped to its NUL */
    size_t skipped;
} brd_cdp_reader;

void brd_cdp_reader_init(brd_cdp_reader *r, size_t max_message);
void brd_cdp_reader_free(brd_cdp_reader *r);
/* Feeds bytes. A message longer than the cap is dropped whole (counted in
 * skipped) and the reader goes on with the next one. TK_ERROR when fn stopped. */
tk_status brd_cdp_reader_feed(brd_cdp_reader *r, const char *data, size_t len, brd_cdp_msg_fn fn,
                              void *ud);

/* One message as parsed: an answer (id > 0) or an event (id 0, method set). */
typedef struct {
    json_t *root;           /* owned: json_decref(root) frees the rest */
    int64_t id;             /* 0 for an event */
    const char *method;     /* events */
    const char *session_id; /* NULL for the browser's own session */
    json_t *params;         /* events (borrowed) */
    json_t *result;         /* answers (borrowed) */
    json_t *error;          /* answers that failed (borrowed) */
} brd_cdp_msg;

/* Parses and checks one message (an object; an id a positive integer or absent;
 * an event with a string method; sessionId a string). TK_EINVAL with err. */
tk_status brd_cdp_msg_parse(const char *s, size_t len, brd_cdp_msg *m, char *err, size_t errlen);

/* --- the client --- */

typedef struct brd_cdp brd_cdp;

/* Events, on the reader thread; m is valid during the call only. */
typedef void (*brd_cdp_event_fn)(const brd_cdp_msg *m, const char *raw, size_t len, void *ud);
/* Answers to brd_cdp_send, on the reader thread (m is NULL when the browser went
 * away first). */
typedef void (*brd_cdp_reply_fn)(const brd_cdp_msg *m, const char *raw, size_t len, void *ud);
typedef void (*brd_cdp_gone_fn)(void *ud);

typedef struct {
    int wfd, rfd; /* our ends: we write the browser's fd 3, read its fd 4 (owned) */
    size_t max_message;
    brd_cdp_event_fn on_event;
    brd_cdp_gone_fn on_gone;
    void *ud;
} brd_cdp_config;

/* Starts the reader thread. Takes the two fds. */
brd_cdp *brd_cdp_open(const brd_cdp_config *cfg);
/* Closes the pipe, joins the reader (waiting calls get TK_ECLOSED). Must not
 * be called from a callback. */
void brd_cdp_close(brd_cdp *c);
/* Non-zero while the pipe is open. */
int brd_cdp_alive(brd_cdp *c);

/* Sends method(params) to session (NULL: the browser) and waits at most
 * timeout_ms for the answer. Steals params (NULL: {}). TK_OK with *result (the
 * caller owns it); TK_ERROR with the protocol's error message in err;
 * TK_ETIMEOUT; TK_ECLOSED when the browser has gone. */
tk_status brd_cdp_call(brd_cdp *c, const char *session, const char *method, json_t *params,
                       int64_t timeout_ms, json_t **result, char *err, size_t errlen);
/* Sends without waiting; fn (may be NULL) gets the answer. Steals params. */
tk_status brd_cdp_send(brd_cdp *c, const char *session, const char *method, json_t *params,
                       brd_cdp_reply_fn fn, void *ud);
/* Cancels the answer callbacks registered with ud (fn not called afterwards). */
void brd_cdp_forget(brd_cdp *c, void *ud);

/* Messages read and dropped as over the cap or malformed (for tests). */
size_t brd_cdp_dropped(brd_cdp *c);

#endif
