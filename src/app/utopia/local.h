/*
 * local.h — the default extractor for PDF and DOCX: isolated child processes
 * on this machine (isolate.h).
 *
 *   PDF   Debian's pdftotext (poppler-utils), reading stdin, writing UTF-8 text
 *         with form feeds between pages; converted here to blocks with pages.
 *   DOCX  this very binary, re-executed as the helper "tusko-utopia-extract"
 *         (argv[0]): a constructor in local.c notices that name before main()
 *         runs, reads the file from stdin, narrows itself further with an
 *         allow-list seccomp filter (read, write, memory, exit), runs docx.c and
 *         writes the blocks protocol to stdout. No code of main() runs in it.
 *
 * Another implementation of utopia_extractor (extract.h) can do the same in
 * the user's sandbox; the chat server only ever sees the blocks protocol.
 */
#ifndef UTOPIA_LOCAL_H
#define UTOPIA_LOCAL_H

#include "app/utopia/extract.h"
#include "app/utopia/isolate.h"

#define UTOPIA_HELPER_ARGV0 "tusko-utopia-extract"

typedef struct {
    utopia_isolate_limits limits;
    const char *pdftotext; /* default /usr/bin/pdftotext */
    const char *helper;    /* the binary to re-execute; default this one */
    size_t max_input;      /* bytes the helper reads; default 64 MiB */
    size_t max_xml;        /* cap on word/document.xml; default 64 MiB */
} utopia_local_config;

/* Fills x to use cfg (which must outlive x). */
void utopia_local_extractor(utopia_extractor *x, const utopia_local_config *cfg);

/* The helper's body (what the constructor runs); exposed for the fuzzer. Reads
 * fd `in`, writes fd `out`, messages to fd `errfd`. Returns the exit status:
 * 0 done, 2 refused (malformed, zip bomb, over a cap), 1 internal failure. */
int utopia_local_helper_main(int argc, char **argv, int in, int out, int errfd, int sandbox);

#endif
