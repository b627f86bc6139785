/*
 * sse.h — Server-Sent Events: formatting (server side) and an incremental parser
 * (client side).
 *
 * The parser follows the WHATWG event-stream rules (fields data, event, id,
 * retry; comments; LF, CRLF or CR line ends; a blank line dispatches) and also
 * accepts the bare JSON-object events that OpenSandbox's execd sends: a line that
 * starts with '{' is taken as a data line. It is fed arbitrary chunks and never
 * holds more than its caps: a line longer than max_line or an event larger than
 * max_event makes tk_sse_feed fail with TK_ETOOBIG.
 */
#ifndef TK_SSE_H
#define TK_SSE_H

#include <stddef.h>

#include "lib/buf.h"
#include "lib/common.h"

/* --- formatting --- */

/* Appends one event: "id: ..\nevent: ..\ndata: ..\n\n"; data with newlines becomes
 * several data lines. id and event may be NULL. id and event must not contain
 * CR or LF (they are dropped if they do). */
tk_status tk_sse_format(tk_buf *out, const char *id, const char *event, const char *data,
                        size_t len);
/* Appends a comment line (": text\n\n"), used as a heartbeat. */
tk_status tk_sse_comment(tk_buf *out, const char *text);

/* --- parsing --- */

typedef struct {
    const char *event; /* "message" when the stream named none */
    const char *data;  /* joined data lines, NUL-terminated */
    size_t data_len;
    const char *id; /* the last event id seen (persists across events), or "" */
    long retry_ms;  /* -1 unless this event carried a retry field */
} tk_sse_event;

/* Returns 0 to go on, non-zero to stop feeding (tk_sse_feed returns TK_AGAIN). */
typedef int (*tk_sse_cb)(const tk_sse_event *ev, void *ud);

typedef struct {
    tk_buf line;
    tk_buf data;
    tk_buf event;
    char last_id[256];
    long retry_ms;
    int has_data;
    int saw_cr;
    int bom_checked;
    tk_sse_cb cb;
    void *ud;
} tk_sse_parser;

void tk_sse_parser_init(tk_sse_parser *p, size_t max_line, size_t max_event, tk_sse_cb cb,
                        void *ud);
void tk_sse_parser_free(tk_sse_parser *p);
/* Feeds n bytes. TK_OK, TK_ETOOBIG (a cap was hit; the parser is unusable after),
 * or TK_AGAIN when the callback asked to stop. */
tk_status tk_sse_feed(tk_sse_parser *p, const char *buf, size_t n);
/* Signals the end of the stream: an event not followed by a blank line is
 * discarded, as the standard says. */
void tk_sse_finish(tk_sse_parser *p);

#endif
