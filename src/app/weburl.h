/*
 * weburl.h — the few facts tusko needs about http(s) URLs: their origin (for
 * CSRF checks and cookies), whether they are https, whether they point at
 * loopback. Not a general URL parser: it refuses userinfo, and anything it does
 * not understand is TK_EINVAL.
 */
#ifndef APP_WEBURL_H
#define APP_WEBURL_H

#include <stddef.h>

#include "lib/common.h"

typedef struct {
    char scheme[8];   /* "http" or "https" */
    char host[256];   /* lower-cased; IPv6 with its brackets */
    int port;         /* explicit or the scheme's default */
    const char *path; /* points into the URL: from the first '/', '?' or '#', or "" */
} app_url;

tk_status app_url_parse(const char *url, app_url *out);
/* "https://host" or "http://host:8080" (default ports left out), lower-cased. */
tk_status app_url_origin(const char *url, char *out, size_t outlen);
/* Same, from a parsed URL. */
void app_url_format_origin(const app_url *u, char *out, size_t outlen);
int app_url_is_https(const char *url);
/* http to 127.0.0.0/8, [::1] or localhost. */
int app_url_is_loopback_http(const char *url);

#endif
