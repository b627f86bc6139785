/*
 * chunk.c — structure-aware chunking with overlap (see chunk.h).
 */
#include "app/utopia/chunk.h"

#include <stdlib.h>
#include <string.h>

#include "lib/utf8.h"

typedef struct {
    const utopia_blocks *b;
    size_t size, overlap;
    char *path[6];
    int has_pages, page, chunk_page;
    size_t carried; /* bytes of overlap at the start of cur */
    tk_buf cur;
    utopia_chunks *out;
} chunker;

static char *heading_of(chunker *c)
{
    tk_buf h;
    tk_buf_init(&h, TK_CAP_INPUT_BOUND);
    for (int i = 0; i < 6; i++) {
        if (!c->path[i])
            continue;
        if (h.len)
            tk_buf_append_str(&h, " > ");
        tk_buf_append_str(&h, c->path[i]);
    }
    if (c->has_pages)
        tk_buf_printf(&h, "%spage %d", h.len ? " · " : "", c->chunk_page);
    return tk_buf_steal(&h, NULL);
}

/* Emits the current text as a chunk. With `carry`, the next chunk starts with
 * the overlap: the last ~overlap bytes, from a word start. */
static void emit(chunker *c, int carry)
{
    if (c->cur.len == 0)
        return;
    if (c->out->n == c->out->cap) {
        c->out->cap = c->out->cap ? c->out->cap * 2 : 16;
        c->out->v = tk_realloc(c->out->v, c->out->cap * sizeof *c->out->v);
    }
    utopia_chunk *k = &c->out->v[c->out->n++];
    k->heading = heading_of(c);
    k->page = c->has_pages ? c->chunk_page : 0;
    char *tail = NULL;
    size_t taillen = 0;
    if (carry && c->overlap && c->cur.len > c->overlap) {
        size_t from = c->cur.len - c->overlap;
        while (from < c->cur.len && c->cur.data[from - 1] != ' ' && c->cur.data[from - 1] != '\n')
            from++;
        if (from < c->cur.len) {
            taillen = c->cur.len - from;
            tail = tk_strndup(c->cur.data + from, taillen);
        }
    }
    k->text = tk_buf_steal(&c->cur, &k->len);
    c->chunk_page = c->page;
    c->carried = taillen;
    if (tail) {
        tk_buf_append(&c->cur, tail, taillen);
        free(tail);
    }
}

/* Where to cut s (n bytes) so that at most room bytes are taken. */
static size_t find_cut(const char *s, size_t n, size_t room)
{
    if (n <= room)
        return n;
    size_t lo = room / 2;
    for (size_t i = room; i > lo; i--) {
        char p = s[i - 1];
        if ((p == '.' || p == '!' || p == '?' || p == '\n') && (s[i] == ' ' || s[i] == '\n'))
            return i;
    }
    for (size_t i = room; i > lo; i--)
        if (s[i] == ' ' || s[i] == '\n')
            return i;
    /* at a character boundary; never 0 bytes while there is room (the chunker
     * must move on), even when the room holds no character start */
    size_t i = tk_utf8_cut(s, n, room);
    return i ? i : TK_MIN(room, 1);
}

static void add_para(chunker *c, const char *t, size_t n)
{
    size_t sep = c->cur.len ? 2 : 0;
    if (c->cur.len + sep + n <= c->size) {
        if (sep)
            tk_buf_append(&c->cur, "\n\n", 2);
        tk_buf_append(&c->cur, t, n);
        return;
    }
    /* it does not fit: close the chunk, unless it holds only carried overlap */
    if (c->cur.len > c->carried)
        emit(c, 1);
    while (n > 0) {
        sep = c->cur.len ? 2 : 0;
        size_t room = c->size - c->cur.len - sep; /* cur.len <= overlap < size / 2 */
        if (n <= room) {
            if (sep)
                tk_buf_append(&c->cur, "\n\n", 2);
            tk_buf_append(&c->cur, t, n);
            return;
        }
        size_t cut = find_cut(t, n, room);
        if (sep)
            tk_buf_append(&c->cur, "\n\n", 2);
        tk_buf_append(&c->cur, t, cut);
        t += cut, n -= cut;
        while (n && (*t == ' ' || *t == '\n'))
            t++, n--;
        emit(c, 1);
    }
}

void utopia_chunk_blocks(const utopia_blocks *b, size_t size, size_t overlap, utopia_chunks *out)
{
    chunker c = {.b = b, .size = size < 64 ? 64 : size, .out = out, .page = 1, .chunk_page = 1};
    c.overlap = overlap < c.size / 2 ? overlap : c.size / 2;
    tk_buf_init(&c.cur, TK_CAP_INPUT_BOUND);
    for (size_t i = 0; i < b->n; i++)
        if (b->v[i].kind == UTOPIA_BLOCK_PAGE)
            c.has_pages = 1;
    for (size_t i = 0; i < b->n; i++) {
        const utopia_block *blk = &b->v[i];
        switch (blk->kind) {
        case UTOPIA_BLOCK_HEADING:
            emit(&c, 0);
            free(c.path[blk->level - 1]);
            c.path[blk->level - 1] = tk_strdup(blk->text);
            for (int l = blk->level; l < 6; l++) {
                free(c.path[l]);
                c.path[l] = NULL;
            }
            c.chunk_page = c.page;
            break;
        case UTOPIA_BLOCK_PAGE:
            c.page++;
            if (c.cur.len == 0)
                c.chunk_page = c.page;
            break;
        case UTOPIA_BLOCK_PARA:
            if (c.cur.len == 0)
                c.chunk_page = c.page;
            add_para(&c, blk->text, blk->len);
            break;
        }
    }
    emit(&c, 0);
    for (int l = 0; l < 6; l++)
        free(c.path[l]);
    tk_buf_free(&c.cur);
}

void utopia_chunks_free(utopia_chunks *c)
{
    for (size_t i = 0; i < c->n; i++) {
        free(c->v[i].heading);
        free(c->v[i].text);
    }
    free(c->v);
    memset(c, 0, sizeof *c);
}
