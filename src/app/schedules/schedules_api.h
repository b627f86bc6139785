/*
 * schedules_api.h — /api/schedules: create, list, get (with the next five fire
 * times in UTC and in the zone), patch, delete (the history kept), the runs
 * (paged, newest first) and run now (docs/API.md, docs/SCHEDULES.md).
 */
#ifndef APP_SCHEDULES_API_H
#define APP_SCHEDULES_API_H

#include <stddef.h>

#include "lib/httpd.h"

extern const tk_route schedules_api_routes[];
extern const size_t schedules_api_nroutes;

#endif
