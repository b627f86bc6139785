#include "app/models.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/json.h"

#define MODELS_MAX     256
#define MODEL_NAME_MAX 200

struct app_model_list {
    app_model *items;
    size_t n;
};

static app_model_list *global;

static const struct {
    const char *name;
    app_provider kind;
} providers[] = {
    {"openai", APP_PROVIDER_OPENAI},
    {"anthropic", APP_PROVIDER_ANTHROPIC},
};

void app_models_free(app_model_list *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++) {
        free((char *)l->items[i].id);
        free((char *)l->items[i].provider);
        free((char *)l->items[i].model);
    }
    free(l->items);
    free(l);
}

static int trim_len(const char **s, size_t len)
{
    while (len && (**s == ' ' || **s == '\t')) {
        (*s)++;
        len--;
    }
    while (len && ((*s)[len - 1] == ' ' || (*s)[len - 1] == '\t'))
        len--;
    return (int)len;
}

tk_status app_models_parse(const char *spec, app_model_list **out, char *err, size_t errlen)
{
    app_model_list *l = tk_calloc(1, sizeof *l);
    *out = NULL;
    const char *p = spec ? spec : "";
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        const char *e = p;
        int n = trim_len(&e, len);
        p = comma ? comma + 1 : p + len;
        if (n == 0) {
            if (!comma && l->n > 0)
                break; /* a trailing comma */
            snprintf(err, errlen, "an empty entry (use provider:model,provider:model)");
            goto fail;
        }
        const char *colon = memchr(e, ':', (size_t)n);
        if (!colon || colon == e || colon == e + n - 1) {
            snprintf(err, errlen, "\"%.*s\" is not provider:model (e.g. openai:gpt-4o-mini)", n, e);
            goto fail;
        }
        size_t plen = (size_t)(colon - e), mlen = (size_t)(e + n - colon - 1);
        app_provider kind = 0;
        for (size_t i = 0; i < TK_ARRAY_LEN(providers); i++)
            if (strlen(providers[i].name) == plen && memcmp(providers[i].name, e, plen) == 0)
                kind = providers[i].kind;
        if (!kind) {
            snprintf(err, errlen,
                     "unknown provider \"%.*s\" in \"%.*s\" (providers: openai, "
                     "anthropic)",
                     (int)plen, e, n, e);
            goto fail;
        }
        if (mlen > MODEL_NAME_MAX) {
            snprintf(err, errlen, "model name \"%.40s...\" is over %d characters", colon + 1,
                     MODEL_NAME_MAX);
            goto fail;
        }
        for (size_t i = 0; i < mlen; i++) {
            unsigned char c = (unsigned char)colon[1 + i];
            if (c <= 0x20 || c >= 0x7f || c == '"' || c == '\\') {
                snprintf(err, errlen, "model name \"%.*s\" has a space or an odd character",
                         (int)mlen, colon + 1);
                goto fail;
            }
        }
        char *id = tk_strndup(e, (size_t)n);
        for (size_t i = 0; i < l->n; i++) {
            if (strcmp(l->items[i].id, id) == 0) {
                snprintf(err, errlen, "\"%s\" is listed twice", id);
                free(id);
                goto fail;
            }
        }
        if (l->n >= MODELS_MAX) {
            snprintf(err, errlen, "more than %d models", MODELS_MAX);
            free(id);
            goto fail;
        }
        l->items = tk_realloc(l->items, (l->n + 1) * sizeof *l->items);
        l->items[l->n++] = (app_model){.id = id,
                                       .provider = tk_strndup(e, plen),
                                       .model = tk_strndup(colon + 1, mlen),
                                       .kind = kind};
    }
    *out = l;
    return TK_OK;
fail:
    app_models_free(l);
    return TK_EINVAL;
}

size_t app_models_list_count(const app_model_list *l)
{
    return l ? l->n : 0;
}

const app_model *app_models_list_at(const app_model_list *l, size_t i)
{
    return l && i < l->n ? &l->items[i] : NULL;
}

const app_model *app_models_list_find(const app_model_list *l, const char *name)
{
    if (!l || !name)
        return NULL;
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->items[i].id, name) == 0)
            return &l->items[i];
    const app_model *found = NULL;
    for (size_t i = 0; i < l->n; i++) {
        if (strcmp(l->items[i].model, name) == 0) {
            if (found)
                return NULL; /* ambiguous: the client must name the provider */
            found = &l->items[i];
        }
    }
    return found;
}

void app_models_set(app_model_list *l)
{
    app_models_free(global);
    global = l;
}

size_t app_models_count(void)
{
    return app_models_list_count(global);
}

const app_model *app_models_at(size_t i)
{
    return app_models_list_at(global, i);
}

const app_model *app_models_default(void)
{
    return app_models_list_at(global, 0);
}

const app_model *app_models_find(const char *name)
{
    if (!name || !*name)
        return app_models_default();
    return app_models_list_find(global, name);
}

void app_models_route_list(tk_req *r, void *ud)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < app_models_count(); i++) {
        const app_model *m = app_models_at(i);
        json_array_append_new(arr,
                              tk_json_obj("id", json_string(m->id), "provider",
                                          json_string(m->provider), "model", json_string(m->model),
                                          "default", json_boolean(i == 0), NULL));
    }
    const app_model *d = app_models_default();
    tk_respond_json(
        r, 200, tk_json_obj("models", arr, "default", d ? json_string(d->id) : json_null(), NULL));
}
