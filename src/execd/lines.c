#include "execd/lines.h"

#include <string.h>

#include "execd/events.h"
#include "lib/tktime.h"
#include "lib/utf8.h"

void execd_lines_init(execd_lines *l, size_t cap)
{
    memset(l, 0, sizeof *l);
    l->cap = cap < 16 ? 16 : cap;
    tk_buf_init(&l->part, l->cap + 8);
}

void execd_lines_free(execd_lines *l)
{
    tk_buf_free(&l->part);
}

static void send_part(execd_lines *l, size_t n, execd_line_fn fn, void *ud)
{
    fn(ud, l->part.data, n);
    tk_buf_consume(&l->part, n);
}

void execd_lines_feed(execd_lines *l, const char *data, size_t n, execd_line_fn fn, void *ud)
{
    size_t i = 0;
    while (i < n) {
        char c = data[i];
        if (c == '\n' || c == '\r') {
            if (l->part.len > 0)
                send_part(l, l->part.len, fn, ud);
            else if (!(c == '\n' && l->last_cr))
                fn(ud, "\n", 1);
            l->last_cr = c == '\r';
            i++;
            continue;
        }
        l->last_cr = 0;
        /* Copy the run up to the next terminator, in pieces that fit. */
        size_t j = i;
        while (j < n && data[j] != '\n' && data[j] != '\r')
            j++;
        while (i < j) {
            size_t room = l->cap - l->part.len;
            size_t take = j - i < room ? j - i : room;
            tk_buf_append(&l->part, data + i, take);
            i += take;
            if (l->part.len >= l->cap) {
                size_t cut = tk_utf8_whole(l->part.data, l->part.len);
                if (cut == 0)
                    cut = l->part.len;
                send_part(l, cut, fn, ud);
            }
        }
        l->part_ms = tk_mono_ms();
    }
}

void execd_lines_flush(execd_lines *l, execd_line_fn fn, void *ud)
{
    if (l->part.len > 0)
        send_part(l, l->part.len, fn, ud);
}

int64_t execd_lines_due(const execd_lines *l, int64_t idle_ms)
{
    return l->part.len > 0 ? l->part_ms + idle_ms : -1;
}
