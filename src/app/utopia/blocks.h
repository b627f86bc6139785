/*
 * blocks.h — a document as a list of blocks (headings, paragraphs, page breaks):
 * what every extractor produces and the chunker consumes.
 *
 * Text added to a list is normalised on the way in: invalid UTF-8 becomes U+FFFD,
 * NUL and other control characters are dropped (tabs and, in paragraphs, newlines
 * are kept), runs of blanks collapse to one space, lines are trimmed and empty
 * blocks are skipped. The total text is capped (TK_ETOOBIG past the cap).
 *
 * The "blocks protocol" is the same list as text, the format isolated extractors
 * write on stdout: one block per line, "h<1-6>\t<text>", "p\t<text>" or "f\t"
 * (a page break); inside <text> a newline is written as the two characters \n and
 * a backslash as \\.
 */
#ifndef UTOPIA_BLOCKS_H
#define UTOPIA_BLOCKS_H

#include <stddef.h>

#include "lib/buf.h"
#include "lib/common.h"

typedef enum {
    UTOPIA_BLOCK_HEADING,
    UTOPIA_BLOCK_PARA,
    UTOPIA_BLOCK_PAGE, /* a page break; text is "" */
} utopia_block_kind;

typedef struct {
    utopia_block_kind kind;
    int level;  /* headings: 1..6 */
    char *text; /* owned by the list, NUL-terminated, normalised */
    size_t len;
} utopia_block;

typedef struct {
    utopia_block *v;
    size_t n, cap;
    size_t bytes;     /* text held */
    size_t max_bytes; /* cap on bytes */
} utopia_blocks;

void utopia_blocks_init(utopia_blocks *b, size_t max_bytes);
void utopia_blocks_free(utopia_blocks *b);

/* Normalises and appends. Empty text (after normalising) is skipped, except for
 * page breaks. Levels outside 1..6 are clamped. TK_ETOOBIG past the cap. */
tk_status utopia_blocks_add(utopia_blocks *b, utopia_block_kind kind, int level, const char *text,
                            size_t len);

/* Normalises len bytes of text into out (appending): see above. `multiline`
 * keeps newlines (collapsing blank-line runs to one newline); otherwise they
 * become spaces. */
tk_status utopia_text_normalize(tk_buf *out, const char *text, size_t len, int multiline);

/* Writes the list in the blocks protocol (appending to out). */
tk_status utopia_blocks_write(const utopia_blocks *b, tk_buf *out);
/* Parses the blocks protocol (appending to b). Unknown or malformed lines are
 * refused with TK_EINVAL. */
tk_status utopia_blocks_parse(utopia_blocks *b, const char *data, size_t len);

/* The first heading's text, or NULL. */
const char *utopia_blocks_title(const utopia_blocks *b);

#endif
