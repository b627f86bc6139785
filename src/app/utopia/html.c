/*
 * html.c — Utopia's blocks out of an HTML document, through the one HTML
 * reducer the project has (src/app/tools/html_text.c: tolerant, capped,
 * fuzzed; the page's main text without scripts, styles, navigation or hidden
 * parts; character references and charsets decoded; always valid UTF-8).
 *
 * The reducer writes Markdown-like text: "# " headings, blocks apart by a
 * blank line, list items and table rows a line each, <pre> as a ``` fence.
 * Here that becomes blocks: the <title> and each heading a heading block, each
 * other block a paragraph, a fence's lines one paragraph (blank lines kept).
 * Links are plain text (no markers: a document has no page to resolve them
 * against). Text over the blocks' cap is TK_ETOOBIG, as for the other formats.
 */
#include <string.h>

#include "app/tools/html_text.h"
#include "app/utopia/extract.h"

/* The heading level of a block that starts with 1-6 '#' and a space, else 0. */
static int heading_level(const char *s, size_t n)
{
    size_t k = 0;
    while (k < n && k < 7 && s[k] == '#')
        k++;
    return k >= 1 && k <= 6 && k < n && s[k] == ' ' ? (int)k : 0;
}

static tk_status add_block(utopia_blocks *out, const char *s, size_t n)
{
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' '))
        n--;
    if (n == 0)
        return TK_OK;
    int level = heading_level(s, n);
    if (level)
        return utopia_blocks_add(out, UTOPIA_BLOCK_HEADING, level, s + level + 1,
                                 n - (size_t)level - 1);
    return utopia_blocks_add(out, UTOPIA_BLOCK_PARA, 0, s, n);
}

tk_status utopia_extract_html(const char *s, size_t len, utopia_blocks *out)
{
    html_text_opts o = {.max_text = out->max_bytes, .no_links = 1};
    html_text_doc d;
    html_text_reduce(s, len, NULL, &o, &d);
    /* more text than the document may hold: refused as too big, as the other
     * formats are, rather than cut */
    tk_status st = d.truncated ? TK_ETOOBIG : TK_OK;
    if (d.title[0])
        st = utopia_blocks_add(out, UTOPIA_BLOCK_HEADING, 1, d.title, strlen(d.title));
    const char *p = d.text, *end = d.text + d.text_len;
    const char *block = p; /* start of the block being collected */
    int fence = 0;
    while (st == TK_OK && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl : end;
        size_t ll = (size_t)(eol - p);
        if (ll == 3 && memcmp(p, "```", 3) == 0) {
            /* a fence opens or closes a block of its own, its lines verbatim */
            size_t n = (size_t)(p - block);
            if (!fence)
                st = add_block(out, block, n);
            else if (n > 1) /* without the newline before the closing fence */
                st = utopia_blocks_add(out, UTOPIA_BLOCK_PARA, 0, block, n - 1);
            fence = !fence;
            block = nl ? nl + 1 : end;
        } else if (ll == 0 && !fence) {
            st = add_block(out, block, (size_t)(p - block));
            block = nl ? nl + 1 : end;
        }
        p = nl ? nl + 1 : end;
    }
    if (st == TK_OK && block < end)
        st = add_block(out, block, (size_t)(end - block));
    html_text_doc_free(&d);
    return st;
}
