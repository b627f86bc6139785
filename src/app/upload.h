/*
 * upload.h — files the user drops into a chat, written into its /workspace.
 *
 *   PUT /api/sessions/{id}/files/upload?path=/workspace/<name>
 *       body: the file's bytes (any type), at most APP_UPLOAD_MAX and
 *       TUSKO_DOWNLOAD_MAX → 201 {"path","size","sandbox_started"}
 *
 * An upload writes, so it gets the chat's sandbox through
 * getOrCreateOpenSandbox (the per-user quota applies: 429 SANDBOX_QUOTA), and
 * a sandbox it starts is announced to the chat with a sandbox_spawn event, as
 * a tool's would be. The path goes through agent_ws_path (confined to
 * /workspace: 400 INVALID_PATH otherwise). Execution off: 409 EXECUTION_OFF,
 * naming the missing settings.
 */
#ifndef APP_UPLOAD_H
#define APP_UPLOAD_H

#include <stddef.h>

#include "lib/httpd.h"

#define APP_UPLOAD_MAX (32u << 20)

extern const tk_route app_upload_routes[];
extern const size_t app_upload_nroutes;

#endif
