/*
 * buf.h — a growable byte buffer with a hard cap set by its creator.
 *
 * Like curl's dynbuf: the buffer refuses to grow past `max` (TK_ETOOBIG) and
 * never allocates more than max + 1 bytes. The data is always NUL-terminated
 * (when allocated), so text can be used as a C string. Every buffer fed by the
 * network is a tk_buf with a cap.
 *
 *   tk_buf b;
 *   tk_buf_init(&b, TK_CAP_MESSAGE);
 *   if (tk_buf_append(&b, p, n) != TK_OK) ...   // over the cap: b unchanged
 *   tk_buf_free(&b);
 */
#ifndef TK_BUF_H
#define TK_BUF_H

#include <stdarg.h>
#include <stddef.h>

#include "lib/common.h"

/*
 * Caps that no setting governs, named by what the buffer holds, so that the
 * literal sizes are chosen from (and reviewed in) one table. A cap that follows
 * a setting or another limit (FETCH_MAX_BYTES, TK_URL_MAX, the system prompt's
 * 8,000 characters...) is written from it instead.
 */
#define TK_CAP_SMALL       (64u << 10) /* a few small JSON events, a short query's parts */
#define TK_CAP_HEADERS     (64u << 10) /* the response headers of one HTTP exchange */
#define TK_CAP_ERROR_BODY  (64u << 10) /* an error answer kept to be quoted */
#define TK_CAP_TARGET      (8u << 10)  /* a request target or one line built from parts */
#define TK_CAP_LOG_LINE    (32u << 10) /* one log line: a 4 KiB message with every byte escaped */
#define TK_CAP_MESSAGE     (1u << 20)  /* one JSON message, event or answer being built */
#define TK_CAP_STREAM      (8u << 20)  /* text relayed as it streams (output, a pipe's input) */
#define TK_CAP_BATCH       (64u << 20) /* data gathered for one call (a batch, a listing) */
#define TK_CAP_INPUT_BOUND ((size_t)1 << 30) /* bounded by its input, capped where it came from */

typedef struct {
    char *data;  /* NULL until the first append */
    size_t len;  /* bytes in use, not counting the NUL */
    size_t size; /* bytes allocated */
    size_t max;  /* hard cap on len */
} tk_buf;

void tk_buf_init(tk_buf *b, size_t max);
void tk_buf_free(tk_buf *b);
/* Empties the buffer, keeping its allocation. */
void tk_buf_reset(tk_buf *b);

/* Appends n bytes. TK_ETOOBIG leaves the buffer as it was. */
tk_status tk_buf_append(tk_buf *b, const void *p, size_t n);
tk_status tk_buf_append_str(tk_buf *b, const char *s);
tk_status tk_buf_append_byte(tk_buf *b, char c);
tk_status tk_buf_printf(tk_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
tk_status tk_buf_vprintf(tk_buf *b, const char *fmt, va_list ap);

/* Makes room for n more bytes without changing len (TK_ETOOBIG past the cap). */
tk_status tk_buf_reserve(tk_buf *b, size_t n);

/* Removes the first n bytes (n <= len). */
void tk_buf_consume(tk_buf *b, size_t n);

/* Hands the data to the caller (free() it) and leaves the buffer empty.
 * Returns an empty heap string when nothing was appended. */
char *tk_buf_steal(tk_buf *b, size_t *len);

/* Returns the content as a C string ("" when empty). Valid until the next change. */
const char *tk_buf_cstr(const tk_buf *b);

#endif
