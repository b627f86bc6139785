/*
 * admin.h — /api/admin/...: the routes only an admin reaches (docs/ADMIN.md).
 */
#ifndef APP_ADMIN_H
#define APP_ADMIN_H

#include <stddef.h>

#include "lib/httpd.h"

extern const tk_route admin_routes[];
extern const size_t admin_nroutes;

#endif
