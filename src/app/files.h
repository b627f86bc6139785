/*
 * files.h — the chat's workspace as the user and the fast-lane tools see it:
 * listing and previewing (reads: getExistingOpenSandbox, never a new sandbox),
 * and downloads stored by the server (outside the sandbox and the chat: they
 * survive deleting the chat and reaping the sandbox).
 *
 * Routes: GET /api/sessions/{id}/files?path=&depth=, GET .../files/preview?path=,
 * POST .../files/download {path}, GET /api/downloads/{id}.
 */
#ifndef APP_FILES_H
#define APP_FILES_H

#include <jansson.h>

#include "lib/common.h"
#include "lib/httpd.h"

#define AGENT_PREVIEW_MAX_BYTES (256 * 1024)

/* Lists path (depth 1..5). TK_OK with *out = {"path", "entries":[{path, name,
 * type, size, modified_at}]}; TK_ENOENT "nothing here yet" (msg) when the chat
 * has no live sandbox; TK_EINVAL for a refused path; TK_ERROR otherwise.
 * Blocking. */
tk_status agent_files_list(const char *user_id, const char *session_id, const char *path,
                           size_t path_len, int depth, const volatile int *cancel, json_t **out,
                           char *msg, size_t msglen);

/* A preview of one file: {"path","size","mime","kind":"text"|"image"|"binary",
 * "text"? (at most max_chars characters), "truncated", "base64"? (images)}.
 * Returns like agent_files_list (TK_ENOENT also for a missing file). */
tk_status agent_files_preview(const char *user_id, const char *session_id, const char *path,
                              size_t path_len, long max_chars, const char *pages,
                              const volatile int *cancel, json_t **out, char *msg, size_t msglen);

/* A MIME type guessed from a file name. */
const char *agent_mime_of(const char *path);

extern const tk_route agent_files_routes[];
extern const size_t agent_files_nroutes;

#endif
