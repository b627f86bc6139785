/*
 * docx.h — text out of a DOCX (a zip holding word/document.xml).
 *
 * Runs only inside the isolated helper process (helper.c), never in the chat
 * server: it parses untrusted binary input. Still written defensively, with
 * every size checked before use:
 *   - the zip's central directory is read from its end record; zip64, more
 *     than 10,000 entries, a total declared uncompressed size past 16 × the cap,
 *     and entries pointing outside the file are refused;
 *   - word/document.xml must be stored or deflated, declare at most max_xml
 *     bytes, and (when over 1 MiB) declare at most 100 × its compressed size;
 *   - inflating stops with an error the moment output passes the declared size
 *     (a lying header), so memory never exceeds max_xml.
 * Paragraphs become blocks; Heading1..6 / Title styles (or outline levels)
 * become headings; table rows become one paragraph with " | " between cells.
 */
#ifndef UTOPIA_DOCX_H
#define UTOPIA_DOCX_H

#include <stddef.h>

#include "app/utopia/blocks.h"

tk_status utopia_docx_extract(const void *zip, size_t len, size_t max_xml, utopia_blocks *out,
                              char *err, size_t errlen);

/* Inflates one zip entry into a new buffer of at most `declared` bytes. Exposed
 * for tests and the fuzzer. */
tk_status utopia_zip_find(const void *zip, size_t len, const char *name, size_t max_xml,
                          char **data, size_t *datalen, char *err, size_t errlen);

/* WordprocessingML to blocks. */
tk_status utopia_docx_xml_to_blocks(const char *xml, size_t len, utopia_blocks *out);

#endif
