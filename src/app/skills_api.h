/*
 * skills_api.h — the /api/skills routes (docs/API.md, docs/SKILLS.md):
 *   GET    /api/skills                  the caller's skills, built-in and own
 *   GET    /api/skills/{name}           one, with its body, files and versions
 *   POST   /api/skills                  upload a SKILL.md, .zip or .skill
 *   PATCH  /api/skills/{name}           {enabled} and/or {version} (roll back)
 *   DELETE /api/skills/{name}           an own skill (a built-in: 409)
 *   GET    /api/skills/{name}/export    the skill as a .skill zip
 */
#ifndef APP_SKILLS_API_H
#define APP_SKILLS_API_H

#include <stddef.h>

#include "lib/httpd.h"

extern const tk_route skills_api_routes[];
extern const size_t skills_api_nroutes;

#endif
