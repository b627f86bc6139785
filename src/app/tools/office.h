/*
 * office.h — office documents and PDFs in the chat's sandbox: page pictures
 * and text, sheets as tables (the preview of app/files.c), parse_pdf and
 * compare_files.
 *
 * The work runs inside the sandbox, never on the Tusko host (LibreOffice and
 * poppler parse untrusted files): src/app/tools/office/tusko_office.py,
 * embedded in the binary, run by execd as one command of its own (not the
 * chat's shell) with the request in its environment, so no user data is part
 * of a shell line. It answers one JSON object; pictures are cached in the
 * sandbox's temporary folder by the file's SHA-256, nothing is written into
 * /workspace. Bounded: 60 s a call (the renderer is killed past it), 30
 * slides or 20 pages of pictures a call.
 */
#ifndef APP_TOOLS_OFFICE_H
#define APP_TOOLS_OFFICE_H

#include <jansson.h>
#include <stddef.h>

#include "app/sandbox/sandbox.h"
#include "lib/common.h"

/* Seconds a call may take inside the sandbox. */
#define TOOLS_OFFICE_TIMEOUT_S 60

/* Whether preview renders path through the helper (.pptx .ppt .odp .docx
 * .doc .odt .rtf .pdf .xlsx .xls .ods .csv .tsv), by its extension. */
int tools_office_previewable(const char *path);

/* Runs the helper in h's sandbox with req (borrowed; "op" is preview,
 * parse_pdf or compare). TK_OK with *out (the answer; the caller frees it);
 * TK_EINVAL when the helper refused the input (msg says why, for the user);
 * TK_ERROR when it could not run (msg). h->gone is set when the sandbox went. */
tk_status tools_office_run(sandbox_handle *h, json_t *req, json_t **out, char *msg, size_t msglen);

/* The answer in a helper's output (n bytes: the JSON between its markers, its
 * newlines dropped), pictures of any other type than PNG or JPEG removed; NULL
 * with msg when there is none. The output comes from the user's sandbox: it is
 * untrusted (tests/fuzz/fuzz_office_answer.c). */
json_t *tools_office_answer(const char *s, size_t n, char *msg, size_t msglen);

/* The text the model reads for a preview answer (heap). */
char *tools_office_preview_text(const json_t *res);

/* Registers parse_pdf and compare_files. */
void tools_office_register(void);

#endif
