/*
 * chunk.h — splitting a document's blocks into search chunks on its structure.
 *
 * A heading always starts a new chunk, and the chunk carries the path of the
 * headings above it ("Guide > Install > Debian"). Paragraphs are packed into a
 * chunk up to `size` bytes; a paragraph longer than that is cut at a sentence
 * end, else at a space, else at a UTF-8 character boundary. A chunk cut for
 * size (not at a heading) is followed by one that repeats about `overlap` bytes
 * of its end, starting at a word. Documents with page breaks (PDF) add the page
 * a chunk starts on to its heading path ("Report > Results · page 3").
 */
#ifndef UTOPIA_CHUNK_H
#define UTOPIA_CHUNK_H

#include <stddef.h>

#include "app/utopia/blocks.h"

typedef struct {
    char *heading; /* "" when the chunk is under no heading */
    char *text;
    size_t len;
    int page; /* 1-based page the chunk starts on; 0 when the document has no pages */
} utopia_chunk;

typedef struct {
    utopia_chunk *v;
    size_t n, cap;
} utopia_chunks;

/* Appends the chunks of b to out. size >= 64; overlap < size / 2 (clamped). */
void utopia_chunk_blocks(const utopia_blocks *b, size_t size, size_t overlap, utopia_chunks *out);
void utopia_chunks_free(utopia_chunks *c);

#endif
