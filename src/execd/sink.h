/*
 * sink.h — an SSE response written by a producer thread that must never block
 * on a slow client: events are appended to a buffer and pushed with
 * tk_stream_try_write; while the client lags, the producer stops reading its
 * source (back-pressure reaches the process) and polls execd_sink_fd(), which
 * becomes readable when the stream drains or the client goes away.
 *
 * Lifetime: the sink holds itself until both the producer has called
 * execd_sink_end() and the stream has closed.
 */
#ifndef EXECD_SINK_H
#define EXECD_SINK_H

#include "lib/buf.h"
#include "lib/common.h"
#include "lib/httpd.h"

typedef struct execd_sink execd_sink;

/* Takes over s (a stream from tk_respond_sse). */
execd_sink *execd_sink_new(tk_stream *s);
/* Where the producer appends events (cap: 8 MiB). */
tk_buf *execd_sink_buf(execd_sink *k);
/* Pushes what is buffered: TK_OK when all is queued, TK_AGAIN when the client
 * lags (the rest stays buffered), TK_ECLOSED once the client has gone. */
tk_status execd_sink_flush(execd_sink *k);
/* Bytes still buffered. */
size_t execd_sink_pending(execd_sink *k);
int execd_sink_gone(execd_sink *k);
/* An fd to poll for POLLIN (writable again, or gone); execd_sink_ack() it. */
int execd_sink_fd(execd_sink *k);
void execd_sink_ack(execd_sink *k);
/* Pushes everything, waiting for the client as long as it takes but at most
 * timeout_ms (-1: no limit). TK_OK, TK_ECLOSED, or TK_ETIMEOUT. */
tk_status execd_sink_drain(execd_sink *k, int timeout_ms);
/* Ends the response after what was queued and drops the producer's hold. */
void execd_sink_end(execd_sink *k);

#endif
