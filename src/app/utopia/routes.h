/*
 * routes.h — Utopia's HTTP routes (/api/utopia/...) and the process-wide store
 * the routes and tools share.
 */
#ifndef UTOPIA_ROUTES_H
#define UTOPIA_ROUTES_H

#include "app/utopia/utopia.h"
#include "lib/httpd.h"

/* The body cap of POST /api/utopia/documents: the body is the document itself
 * (no framing), so the cap is UTOPIA_MAX_DOCUMENT_BYTES and a larger upload is
 * refused with 413 before it is buffered (with Content-Length: before any of
 * it is read). */
size_t utopia_upload_max_body(const utopia_config *cfg);

/* The store, set up from app_get()->cfg->utopia on first use; NULL when its
 * settings were refused (logged). */
const utopia *utopia_app(void);

/* At server start, before utopia_routes is copied into the server's table:
 * checks the settings (a refusal stops the start), sets the upload route's
 * body cap from them (utopia_upload_max_body) and registers the chat-deletion
 * hook (a chat's documents go with it). */
tk_status utopia_start(char *err, size_t errlen);

/* Answers a Utopia error: 400 INVALID_REQUEST, 404 NOT_FOUND, 413 TOO_LARGE,
 * 415 UNSUPPORTED_DOCUMENT, 422 EXTRACTION_TIMEOUT, 500 UTOPIA_ERROR. */
void utopia_respond_status(tk_req *r, tk_status st, const char *err);

/* Not const: utopia_start sets the upload route's max_body from the settings. */
extern tk_route utopia_routes[];
extern const size_t utopia_nroutes;

#endif
