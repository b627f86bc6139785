/* The security headers of every response. See headers.h. */
#include "app/headers.h"

#include <stddef.h>

#define SECURITY_HEADERS                                                                           \
    "X-Content-Type-Options", "nosniff", "X-Frame-Options", "DENY", "Referrer-Policy",             \
        "same-origin", "Cross-Origin-Opener-Policy", "same-origin",                                \
        "Cross-Origin-Resource-Policy", "same-origin", "Permissions-Policy",                       \
        "camera=(), microphone=(), geolocation=(), payment=()", "Content-Security-Policy",         \
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "    \
        "connect-src 'self'; frame-src 'self'; object-src 'none'; base-uri 'none'; "               \
        "form-action 'self'; frame-ancestors 'none'"

const char *const app_security_headers[] = {SECURITY_HEADERS, NULL};
const char *const app_security_headers_https[] = {SECURITY_HEADERS, "Strict-Transport-Security",
                                                  "max-age=31536000; includeSubDomains", NULL};
