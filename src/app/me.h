/*
 * me.h — GET /api/me: who the caller is and what this server lets them do.
 */
#ifndef APP_ME_H
#define APP_ME_H

#include <jansson.h>

#include "lib/httpd.h"

/* The "execution" object of /api/me: whether the sandbox lane is on, and if off
 * which settings are missing (new reference). */
json_t *app_me_execution_json(void);
/* {"enabled", "missing":[...], "reason"?, "max_per_user"?}: the browser lane. */
json_t *app_me_browser_json(void);

extern const tk_route app_me_routes[];
extern const size_t app_me_nroutes;

#endif
