/*
 * lines.h — splits a process's output into the text of stdout/stderr events the
 * way upstream execd does: one event per line, without its terminator; "\r\n",
 * "\n" and "\r" all end a line; an empty line is sent as "\n" (the second half
 * of a "\r\n" is not a line of its own).
 *
 * Two additions: a line longer than the cap is sent in pieces of at most the cap
 * (cut on a UTF-8 boundary), and a partial line (a prompt without a newline) is
 * sent once no more output has come for idle_ms — upstream holds it until exit.
 */
#ifndef EXECD_LINES_H
#define EXECD_LINES_H

#include <stddef.h>
#include <stdint.h>

#include "lib/buf.h"

typedef void (*execd_line_fn)(void *ud, const char *text, size_t len);

typedef struct {
    tk_buf part;     /* the line so far */
    size_t cap;      /* longest piece sent at once */
    int last_cr;     /* the previous terminator was '\r' */
    int64_t part_ms; /* monotonic ms when part last grew */
} execd_lines;

void execd_lines_init(execd_lines *l, size_t cap);
void execd_lines_free(execd_lines *l);
void execd_lines_feed(execd_lines *l, const char *data, size_t n, execd_line_fn fn, void *ud);
/* Sends the partial line, if any. */
void execd_lines_flush(execd_lines *l, execd_line_fn fn, void *ud);
/* Monotonic ms at which a partial line becomes due (idle_ms after it last
 * grew), or -1 when there is none. */
int64_t execd_lines_due(const execd_lines *l, int64_t idle_ms);

#endif
