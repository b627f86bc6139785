/*
 * web.h — the web UI: the files under web/ compiled into the binary
 * (tk_embed_web, scripts/embed.sh) served by tusko itself, with no CDN and no
 * disk access at run time.
 *
 *   GET /                 index.html
 *   GET /c/{id}           index.html (a link straight to a chat)
 *   GET /assets/<name>    the file web/<name> (css/, js/, vendor/, icons)
 *
 * Public routes (the page must load before anyone signs in; it holds nothing
 * but code). Names are looked up in the embedded table only, so there is no
 * path to traverse; a name with anything but [A-Za-z0-9._/-], a "..", or a
 * leading or double slash is 404 all the same. Each file has a strong ETag
 * (FNV-1a 64 of its bytes) and Cache-Control: no-cache, so a browser
 * revalidates with If-None-Match and gets 304. The page's Content-Security-
 * Policy is the server's (no inline script or style, frame-ancestors 'none')
 * plus Trusted Types: the only HTML the UI inserts goes through its one
 * policy, "tusko-html" (web/js/html.js).
 */
#ifndef APP_WEB_H
#define APP_WEB_H

#include <stddef.h>

#include "lib/httpd.h"

/* The Content-Type for a file name, by its extension. */
const char *app_web_content_type(const char *name);
/* Non-zero when name is acceptable as an asset name (see above). */
int app_web_name_ok(const char *name);
/* Non-zero when an If-None-Match header value matches etag ("\"...\""). */
int app_web_etag_match(const char *if_none_match, const char *etag);

extern const tk_route app_web_routes[];
extern const size_t app_web_nroutes;

#endif
