/*
 * blocks.c — block lists, text normalisation and the blocks protocol.
 */
#include "app/utopia/blocks.h"

#include <stdlib.h>
#include <string.h>

#include "lib/utf8.h"

void utopia_blocks_init(utopia_blocks *b, size_t max_bytes)
{
    memset(b, 0, sizeof *b);
    b->max_bytes = max_bytes;
}

void utopia_blocks_free(utopia_blocks *b)
{
    for (size_t i = 0; i < b->n; i++)
        free(b->v[i].text);
    free(b->v);
    memset(b, 0, sizeof *b);
}

tk_status utopia_text_normalize(tk_buf *out, const char *text, size_t len, int multiline)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t start = out->len;
    /* pending whitespace: 0 none, 1 a space, 2 a newline */
    int pending = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t n = tk_utf8_decode(text + i, len - i, &cp);
        const char *emit = NULL;
        size_t emitlen = 0;
        if (n == 0) {
            emit = "\xEF\xBF\xBD"; /* U+FFFD */
            emitlen = 3;
            n = 1;
        } else if (cp == '\n' || cp == '\r' || cp == 0x2028 || cp == 0x2029 || cp == '\f' ||
                   cp == '\v') {
            if (multiline)
                pending = 2;
            else if (!pending)
                pending = 1;
        } else if (cp == ' ' || cp == '\t' || cp == 0xA0 || (cp >= 0x2000 && cp <= 0x200A) ||
                   cp == 0x202F || cp == 0x205F || cp == 0x3000) {
            if (!pending)
                pending = 1;
        } else if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F) || cp == 0xFEFF ||
                   cp == 0x200B) {
            /* control characters, BOM, zero-width space: dropped */
        } else {
            emit = (const char *)s + i;
            emitlen = n;
        }
        i += n;
        if (emit) {
            if (pending && out->len > start) {
                tk_status st = tk_buf_append_byte(out, pending == 2 ? '\n' : ' ');
                if (st != TK_OK)
                    return st;
            }
            pending = 0;
            tk_status st = tk_buf_append(out, emit, emitlen);
            if (st != TK_OK)
                return st;
        }
    }
    return TK_OK;
}

tk_status utopia_blocks_add(utopia_blocks *b, utopia_block_kind kind, int level, const char *text,
                            size_t len)
{
    tk_buf t;
    tk_buf_init(&t, b->max_bytes ? b->max_bytes : (size_t)1 << 30);
    tk_status st = TK_OK;
    if (kind != UTOPIA_BLOCK_PAGE) {
        st = utopia_text_normalize(&t, text, len, kind == UTOPIA_BLOCK_PARA);
        if (st != TK_OK)
            goto out;
        if (t.len == 0)
            goto out;
    }
    if (b->max_bytes && (t.len + 1 > b->max_bytes || b->bytes + t.len + 1 > b->max_bytes)) {
        st = TK_ETOOBIG;
        goto out;
    }
    if (b->n == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 16;
        b->v = tk_realloc(b->v, b->cap * sizeof *b->v);
    }
    if (level < 1)
        level = 1;
    if (level > 6)
        level = 6;
    utopia_block *blk = &b->v[b->n++];
    blk->kind = kind;
    blk->level = kind == UTOPIA_BLOCK_HEADING ? level : 0;
    blk->len = t.len;
    blk->text = tk_buf_steal(&t, NULL);
    b->bytes += blk->len + 1; /* a page break costs a byte too: bounds the count */
out:
    tk_buf_free(&t);
    return st;
}

tk_status utopia_blocks_write(const utopia_blocks *b, tk_buf *out)
{
    tk_status st = TK_OK;
    for (size_t i = 0; i < b->n && st == TK_OK; i++) {
        const utopia_block *blk = &b->v[i];
        if (blk->kind == UTOPIA_BLOCK_PAGE) {
            st = tk_buf_append_str(out, "f\t\n");
            continue;
        }
        if (blk->kind == UTOPIA_BLOCK_HEADING)
            st = tk_buf_printf(out, "h%d\t", blk->level);
        else
            st = tk_buf_append_str(out, "p\t");
        for (size_t j = 0; j < blk->len && st == TK_OK; j++) {
            char c = blk->text[j];
            if (c == '\n')
                st = tk_buf_append(out, "\\n", 2);
            else if (c == '\\')
                st = tk_buf_append(out, "\\\\", 2);
            else
                st = tk_buf_append_byte(out, c);
        }
        if (st == TK_OK)
            st = tk_buf_append_byte(out, '\n');
    }
    return st;
}

tk_status utopia_blocks_parse(utopia_blocks *b, const char *data, size_t len)
{
    tk_buf t;
    tk_buf_init(&t, b->max_bytes ? b->max_bytes : (size_t)1 << 30);
    tk_status st = TK_OK;
    size_t i = 0;
    while (i < len && st == TK_OK) {
        const char *nl = memchr(data + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - data) : len;
        const char *line = data + i;
        size_t ll = end - i;
        i = end + 1;
        if (ll == 0)
            continue;
        const char *tab = memchr(line, '\t', ll);
        if (!tab) {
            st = TK_EINVAL;
            break;
        }
        size_t kl = (size_t)(tab - line);
        utopia_block_kind kind;
        int level = 0;
        if (kl == 1 && line[0] == 'p') {
            kind = UTOPIA_BLOCK_PARA;
        } else if (kl == 1 && line[0] == 'f') {
            kind = UTOPIA_BLOCK_PAGE;
        } else if (kl == 2 && line[0] == 'h' && line[1] >= '1' && line[1] <= '6') {
            kind = UTOPIA_BLOCK_HEADING;
            level = line[1] - '0';
        } else {
            st = TK_EINVAL;
            break;
        }
        tk_buf_reset(&t);
        for (const char *p = tab + 1; p < line + ll && st == TK_OK; p++) {
            if (*p == '\\' && p + 1 < line + ll) {
                p++;
                st = tk_buf_append_byte(&t, *p == 'n' ? '\n' : *p);
            } else {
                st = tk_buf_append_byte(&t, *p);
            }
        }
        if (st == TK_OK)
            st = utopia_blocks_add(b, kind, level, t.data ? t.data : "", t.len);
    }
    tk_buf_free(&t);
    return st;
}

const char *utopia_blocks_title(const utopia_blocks *b)
{
    for (size_t i = 0; i < b->n; i++)
        if (b->v[i].kind == UTOPIA_BLOCK_HEADING)
            return b->v[i].text;
    return NULL;
}
