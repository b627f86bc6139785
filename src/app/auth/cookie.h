/*
 * cookie.h — parsing the Cookie request header and formatting Set-Cookie.
 *
 * The parser follows RFC 6265 section 5.4 loosely, as browsers send it:
 * "a=1; b=2". Pairs without '=' are skipped, names compare exactly, values may
 * be double-quoted (the quotes are removed). It never allocates more than the
 * header's length and refuses headers over APP_COOKIE_HEADER_MAX.
 */
#ifndef APP_AUTH_COOKIE_H
#define APP_AUTH_COOKIE_H

#include <stddef.h>

#include "lib/arena.h"
#include "lib/common.h"

#define APP_COOKIE_HEADER_MAX 16384

/* The value of the first cookie called name in a Cookie header, copied into the
 * arena; NULL when absent or the header is malformed/over the cap. */
const char *app_cookie_get(tk_arena *a, const char *header, const char *name);

typedef struct {
    const char *name, *value;
    const char *path;    /* NULL: "/" */
    long long max_age_s; /* -1: a session cookie (no Max-Age); 0: delete now */
    int http_only;
    int secure;
    const char *same_site; /* "Lax", "Strict" or "None"; NULL: "Lax" */
} app_cookie;

/* A Set-Cookie header value in the arena. Names and values must be cookie-safe
 * tokens (our own: hex, letters, '-', '_'); anything else is a broken invariant. */
char *app_cookie_format(tk_arena *a, const app_cookie *c);

#endif
