/*
 * routes.h — Utopia's HTTP routes (/api/utopia/...) and the process-wide store
 * the routes and tools share.
 */
#ifndef UTOPIA_ROUTES_H
#define UTOPIA_ROUTES_H

#include "app/utopia/utopia.h"
#include "lib/httpd.h"

/* Uploads larger than this are refused before they are read (413); the
 * UTOPIA_MAX_DOCUMENT_BYTES setting, checked after, is the real limit. */
#define UTOPIA_ROUTE_MAX_BODY ((size_t)1 << 30)

/* The store, set up from app_get()->cfg->utopia on first use; NULL when its
 * settings were refused (logged). */
const utopia *utopia_app(void);

/* At server start: checks the settings (a refusal stops the start) and
 * registers the chat-deletion hook (a chat's documents go with it). */
tk_status utopia_start(char *err, size_t errlen);

/* Answers a Utopia error: 400 INVALID_REQUEST, 404 NOT_FOUND, 413 TOO_LARGE,
 * 415 UNSUPPORTED_DOCUMENT, 422 EXTRACTION_TIMEOUT, 500 UTOPIA_ERROR. */
void utopia_respond_status(tk_req *r, tk_status st, const char *err);

extern const tk_route utopia_routes[];
extern const size_t utopia_nroutes;

#endif
