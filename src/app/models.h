/*
 * models.h — the server-side model allowlist (TUSKO_MODELS).
 *
 * TUSKO_MODELS is a comma-separated list of provider:model, e.g.
 * "openai:gpt-4o-mini,anthropic:claude-sonnet-4". Providers: "openai" (any
 * OpenAI-compatible Chat Completions endpoint at OPENAI_BASE_URL) and
 * "anthropic" (the Messages API at ANTHROPIC_BASE_URL). The model part is sent to
 * the provider as is (it may itself contain ':' or '/', e.g. "openai:llama3:8b").
 * The first entry is the default model. A request naming a model that is not
 * here must be refused (400) before anything reaches a provider.
 *
 * The process-wide list is loaded once by app_init() and never changes, so its
 * entries may be used from any thread without locking.
 */
#ifndef APP_MODELS_H
#define APP_MODELS_H

#include <stddef.h>

#include "lib/common.h"
#include "lib/httpd.h"

typedef enum { APP_PROVIDER_OPENAI = 1, APP_PROVIDER_ANTHROPIC = 2 } app_provider;

typedef struct {
    const char *id;       /* "openai:gpt-4o-mini": what clients send and see */
    const char *provider; /* "openai" */
    const char *model;    /* "gpt-4o-mini": what the provider is sent */
    app_provider kind;
} app_model;

typedef struct app_model_list app_model_list;

/* Parses a TUSKO_MODELS value (NULL or "" gives an empty list). Duplicates,
 * empty entries, unknown providers and over-long names are refused with a message. */
tk_status app_models_parse(const char *spec, app_model_list **out, char *err, size_t errlen);
void app_models_free(app_model_list *l);
size_t app_models_list_count(const app_model_list *l);
const app_model *app_models_list_at(const app_model_list *l, size_t i);
/* Finds "provider:model" exactly, or a bare "model" when exactly one provider
 * offers it. NULL when not allowed. */
const app_model *app_models_list_find(const app_model_list *l, const char *name);

/* --- the process-wide allowlist (set by app_init) --- */
void app_models_set(app_model_list *l); /* takes ownership */
size_t app_models_count(void);
const app_model *app_models_at(size_t i);
/* The allowed model named `name` (see app_models_list_find); name NULL or ""
 * gives the default (the first), or NULL when the list is empty. */
const app_model *app_models_find(const char *name);
const app_model *app_models_default(void);

/* GET /api/models */
void app_models_route_list(tk_req *r, void *ud);

#endif
