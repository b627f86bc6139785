/*
 * events.h — the ServerStreamEvent objects of the execd API, framed as upstream
 * execd frames them: one bare JSON object followed by a blank line.
 *
 *   {"type":"stdout","text":"hello","timestamp":1700000000000}\n\n
 *
 * Field order follows upstream (type, text, execution_count, execution_time,
 * timestamp, results, error); empty fields are omitted as upstream omits them.
 * Text that is not valid UTF-8 has each bad byte replaced by U+FFFD.
 * Every function appends to b and returns TK_ETOOBIG when b's cap would be
 * exceeded (b is then unchanged).
 */
#ifndef EXECD_EVENTS_H
#define EXECD_EVENTS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/buf.h"
#include "lib/common.h"

/* init (text = the id), stdout, stderr, status, ping (text = "pong"). */
tk_status execd_ev_text(tk_buf *b, const char *type, const char *text, size_t len);
tk_status execd_ev_complete(tk_buf *b, int64_t execution_time_ms);
tk_status execd_ev_count(tk_buf *b, int64_t execution_count);
/* results: an object of MIME type → value; the reference is stolen. */
tk_status execd_ev_result(tk_buf *b, json_t *results);
/* traceback: an array of strings, stolen (NULL: [evalue]). */
tk_status execd_ev_error(tk_buf *b, const char *ename, const char *evalue, json_t *traceback);

/* A JSON string of n bytes of arbitrary data, invalid UTF-8 replaced. */
json_t *execd_json_text(const char *s, size_t n);

#endif
