/*
 * local.h — sign-in with a local account, sign-out, and the cookies they set.
 *
 *   POST /api/auth/login {email, password}  → 200 {user, csrf_token, expires_at}
 *        + the session cookie (HttpOnly, SameSite=Lax, Secure when TUSKO_PUBLIC_URL
 *        is https) and the readable CSRF cookie; 401 on a wrong email or password;
 *        429 with Retry-After past TUSKO_LOGIN_MAX_FAILURES failures per account
 *        (or 3x that per client address) in 15 minutes.
 *   POST /api/auth/logout                    → 204, the session ended, cookies cleared
 *   GET  /api/auth/config                    → {password: true, oidc: bool} (public)
 * The OIDC routes (/api/auth/oidc/...) are in oidc.h.
 */
#ifndef APP_AUTH_LOCAL_H
#define APP_AUTH_LOCAL_H

#include <libpq-fe.h>

#include "lib/httpd.h"

#define APP_LOGIN_WINDOW_MS (15 * 60 * 1000)

/* Creates a sign-in session for user_id and sets its cookies on the response
 * (the caller then responds). Returns TK_OK; the CSRF token and expiry (ms since
 * the epoch) in csrf/expires_ms. */
tk_status app_signin_start_session(tk_req *r, PGconn *pgconn, const char *user_id,
                                   const char *method, char *csrf, size_t csrflen,
                                   long long *expires_ms);

extern const tk_route app_local_routes[];
extern const size_t app_local_nroutes;

#endif
