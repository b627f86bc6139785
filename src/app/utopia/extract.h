/*
 * extract.h — text out of an uploaded file, as blocks (blocks.h).
 *
 * Text, Markdown, HTML, CSV and JSON are parsed here, in the chat server, by
 * small parsers with caps (input size, output size, nesting, rows, columns).
 * PDF and DOCX are untrusted binary formats: they are never parsed in this
 * process. utopia_extract hands them to a utopia_extractor — by default the
 * isolated local helper (isolate.h), or any other implementation, such as one
 * that runs the same conversion in the user's sandbox.
 */
#ifndef UTOPIA_EXTRACT_H
#define UTOPIA_EXTRACT_H

#include <stddef.h>

#include "app/utopia/blocks.h"
#include "lib/common.h"

typedef enum {
    UTOPIA_FMT_UNKNOWN = 0,
    UTOPIA_FMT_TEXT,
    UTOPIA_FMT_MARKDOWN,
    UTOPIA_FMT_HTML,
    UTOPIA_FMT_CSV,
    UTOPIA_FMT_JSON,
    UTOPIA_FMT_PDF,
    UTOPIA_FMT_DOCX,
} utopia_format;

/* The format from a MIME type (parameters ignored) and, when that says nothing
 * useful (absent, application/octet-stream), from the file name's extension and
 * the first bytes (%PDF-, PK\3\4, <html). */
utopia_format utopia_format_detect(const char *mime, const char *filename, const void *data,
                                   size_t len);
const char *utopia_format_name(utopia_format f);
/* The canonical MIME type of a format. */
const char *utopia_format_mime(utopia_format f);
/* 1 for the formats that must go through an isolated extractor. */
int utopia_format_untrusted(utopia_format f);

/*
 * An extractor for the untrusted formats: converts `len` bytes of `fmt` into the
 * blocks protocol, written into out (a capped buffer; TK_ETOOBIG past its cap).
 * Returns TK_OK, or an error with a message for the user in err (TK_EINVAL: the
 * file is malformed or refused, e.g. a zip bomb; TK_ETIMEOUT; TK_ETOOBIG;
 * TK_ERROR: the extractor itself failed).
 */
typedef struct utopia_extractor {
    tk_status (*run)(const struct utopia_extractor *x, utopia_format fmt, const void *data,
                     size_t len, tk_buf *out, char *err, size_t errlen);
    void *ud;
} utopia_extractor;

/* Extracts text into blocks (initialised by the caller with its cap). The
 * untrusted formats go to x (NULL: they are refused with TK_EDENIED). */
tk_status utopia_extract(utopia_format fmt, const void *data, size_t len, const utopia_extractor *x,
                         utopia_blocks *out, char *err, size_t errlen);

/* The in-process extractors (each appends to out). */
tk_status utopia_extract_text(const char *s, size_t len, utopia_blocks *out);
tk_status utopia_extract_markdown(const char *s, size_t len, utopia_blocks *out);
tk_status utopia_extract_html(const char *s, size_t len, utopia_blocks *out);
tk_status utopia_extract_csv(const char *s, size_t len, utopia_blocks *out, char *err,
                             size_t errlen);
tk_status utopia_extract_json(const char *s, size_t len, utopia_blocks *out, char *err,
                              size_t errlen);

#endif
