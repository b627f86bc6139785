/* The tool registry, lanes, and tool results. */
#include "app/agent/tools.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/json.h"
#include "lib/log.h"

#define MAX_TOOLS 128

static const agent_tool *registry[MAX_TOOLS];
/* each tool as it is offered ({name, description, parameters}), made once at
 * registration and shared by every run (read-only; jansson's reference counts
 * are atomic): a turn's offer is an array of references, not a parse of every
 * schema */
static json_t *offers[MAX_TOOLS];
static size_t ntools;
static int lane_on[AGENT_LANES] = {1, 0, 0};

const char *agent_lane_name(agent_lane lane)
{
    switch (lane) {
    case AGENT_LANE_FAST:
        return "fast";
    case AGENT_LANE_SANDBOX:
        return "sandbox";
    case AGENT_LANE_BROWSER:
        return "browser";
    }
    return "?";
}

int agent_lane_available(agent_lane lane)
{
    return (unsigned)lane < AGENT_LANES && lane_on[lane];
}

void agent_lane_set_available(agent_lane lane, int on)
{
    if ((unsigned)lane < AGENT_LANES)
        lane_on[lane] = on != 0;
}

static int valid_name(const char *n)
{
    size_t len = strlen(n);
    if (len == 0 || len > 64)
        return 0;
    for (const char *p = n; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
            return 0;
    return 1;
}

void agent_tools_register(const agent_tool *t)
{
    TK_ASSERT(t && t->name && valid_name(t->name));
    TK_ASSERT((t->run != NULL) != (t->start != NULL));
    TK_ASSERT(ntools < MAX_TOOLS);
    TK_ASSERT(agent_tools_find(t->name) == NULL);
    json_t *schema = json_loads(t->parameters ? t->parameters : "{}", 0, NULL);
    TK_ASSERT(json_is_object(schema)); /* a tool's schema is program text */
    offers[ntools] =
        tk_json_obj("name", json_string(t->name), "description",
                    json_string(t->description ? t->description : ""), "parameters", schema, NULL);
    registry[ntools++] = t;
}

void agent_tools_register_table(const agent_tool *tools, size_t n)
{
    for (size_t i = 0; i < n; i++)
        agent_tools_register(&tools[i]);
}

const agent_tool *agent_tools_find(const char *name)
{
    for (size_t i = 0; i < ntools; i++)
        if (strcmp(registry[i]->name, name) == 0)
            return registry[i];
    return NULL;
}

size_t agent_tools_count(void)
{
    return ntools;
}

const agent_tool *agent_tools_at(size_t i)
{
    return i < ntools ? registry[i] : NULL;
}

static int allowed(const char *const *allow, const char *name)
{
    if (!allow)
        return 1;
    for (; *allow; allow++)
        if (strcmp(*allow, name) == 0)
            return 1;
    return 0;
}

json_t *agent_tools_offered(const char *const *allow)
{
    return agent_tools_offered_at(allow, 0);
}

json_t *agent_tools_offered_at(const char *const *allow, int depth)
{
    json_t *out = json_array();
    for (size_t i = 0; i < ntools; i++) {
        const agent_tool *t = registry[i];
        if (!agent_lane_available(t->lane) || (t->available && !t->available()) ||
            !allowed(allow, t->name) || (t->offered_at && !t->offered_at(depth)))
            continue;
        json_array_append(out, offers[i]);
    }
    return out;
}

json_t *agent_tools_catalog(void)
{
    json_t *out = json_array();
    for (size_t i = 0; i < ntools; i++) {
        const agent_tool *t = registry[i];
        int offered = agent_lane_available(t->lane) && (!t->available || t->available()) &&
                      (!t->offered_at || t->offered_at(0));
        json_array_append_new(out, tk_json_obj("name", json_string(t->name), "lane",
                                               json_string(agent_lane_name(t->lane)),
                                               "changes_files", json_boolean(t->changes_files),
                                               "offered", json_boolean(offered), NULL));
    }
    return out;
}

/* ---------- results ---------- */

static void set(agent_result *r, int is_error, const char *fmt, va_list ap)
{
    free(r->content);
    tk_buf b;
    tk_buf_init(&b, 64u << 20);
    tk_buf_vprintf(&b, fmt, ap);
    r->content = tk_buf_steal(&b, NULL);
    r->is_error = is_error;
}

void agent_result_text(agent_result *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set(r, 0, fmt, ap);
    va_end(ap);
}

void agent_result_error(agent_result *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set(r, 1, fmt, ap);
    va_end(ap);
}

void agent_result_take(agent_result *r, char *content, int is_error)
{
    free(r->content);
    r->content = content;
    r->is_error = is_error;
}

void agent_result_free(agent_result *r)
{
    free(r->content);
    json_decref(r->data);
    r->content = NULL;
    r->data = NULL;
}
