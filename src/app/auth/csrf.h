/*
 * csrf.h — cross-site request forgery checks for cookie-authenticated writes.
 *
 * Two layers, both required (docs/AUTH.md):
 *  1. Fetch metadata and Origin: a request whose Sec-Fetch-Site is present and
 *     not "same-origin"/"none", or whose Origin is present and is not tusko's
 *     own origin (TUSKO_PUBLIC_URL's, or the request's Host when that is unset),
 *     is refused. Browsers send these on every cross-site POST/PATCH/DELETE.
 *  2. A synchronizer token: the X-CSRF-Token header must equal the session's
 *     csrf token (compared in constant time). The token is returned by sign-in
 *     and GET /api/me, and is also in the readable tusko_csrf cookie.
 * Requests with an API token (Authorization: Bearer) are exempt: a browser never
 * adds that header on its own.
 */
#ifndef APP_AUTH_CSRF_H
#define APP_AUTH_CSRF_H

#include <stddef.h>

#include "lib/httpd.h"

/* Layer 1 only (for sign-in itself, which has no session yet). 0 when it
 * passes; else non-zero with the reason in why. */
int app_csrf_check_origin(tk_req *r, char *why, size_t whylen);
/* Both layers. */
int app_csrf_check(tk_req *r, const char *session_csrf, char *why, size_t whylen);

#endif
