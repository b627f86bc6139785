/*
 * headers.h — the security headers every response of tusko carries: the server
 * sets them on every response (server.c); the web UI's pages extend their
 * Content-Security-Policy with Trusted Types (web.c).
 */
#ifndef APP_HEADERS_H
#define APP_HEADERS_H

/* The security headers every response carries ("Name", "value", ..., NULL). */
extern const char *const app_security_headers[];
/* Same plus Strict-Transport-Security, for an https TUSKO_PUBLIC_URL. */
extern const char *const app_security_headers_https[];

#endif
