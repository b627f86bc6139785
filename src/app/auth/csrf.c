#include "app/auth/csrf.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "app/app.h"
#include "app/weburl.h"

int app_csrf_check_origin(tk_req *r, char *why, size_t whylen)
{
    const char *sfs = tk_req_header(r, "Sec-Fetch-Site");
    if (sfs && strcasecmp(sfs, "same-origin") != 0 && strcasecmp(sfs, "none") != 0) {
        snprintf(why, whylen, "cross-site request refused (Sec-Fetch-Site: %.40s)", sfs);
        return 1;
    }
    const char *origin = tk_req_header(r, "Origin");
    if (!origin)
        return 0;
    char got[300];
    if (app_url_origin(origin, got, sizeof got) != TK_OK) {
        snprintf(why, whylen, "cross-site request refused (Origin: %.60s)", origin);
        return 1;
    }
    char want[300];
    const char *pub = app_get()->public_origin;
    if (pub[0]) {
        snprintf(want, sizeof want, "%s", pub);
    } else {
        /* No TUSKO_PUBLIC_URL: the origin must name the host the request was sent to. */
        const char *host = tk_req_header(r, "Host");
        app_url g;
        char tmp[400];
        app_url_parse(origin, &g);
        snprintf(tmp, sizeof tmp, "%s://%s", g.scheme, host ? host : "");
        if (!host || app_url_origin(tmp, want, sizeof want) != TK_OK) {
            snprintf(why, whylen, "cross-site request refused (no usable Host header)");
            return 1;
        }
    }
    if (strcmp(got, want) != 0) {
        snprintf(why, whylen, "cross-site request refused (Origin %.60s is not %.60s)", got, want);
        return 1;
    }
    return 0;
}

int app_csrf_check(tk_req *r, const char *session_csrf, char *why, size_t whylen)
{
    if (app_csrf_check_origin(r, why, whylen) != 0)
        return 1;
    const char *tok = tk_req_header(r, "X-CSRF-Token");
    if (!tok) {
        snprintf(why, whylen,
                 "missing X-CSRF-Token header (cookie-authenticated writes need the token "
                 "from sign-in or GET /api/me)");
        return 1;
    }
    if (!session_csrf || !session_csrf[0] || !tk_str_eq_ct(tok, session_csrf)) {
        snprintf(why, whylen, "the X-CSRF-Token header does not match this session");
        return 1;
    }
    return 0;
}
