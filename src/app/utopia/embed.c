/*
 * embed.c — the embeddings client (see embed.h).
 */
#include "app/utopia/embed.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/httpc.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/utf8.h"

static json_t *cut(const char *s)
{
    return json_stringn(s, tk_utf8_cut(s, strlen(s), 8000));
}

static tk_status embed_batch(const utopia *u, const char *const *texts, size_t n, float *out,
                             int *dim, char *err, size_t errlen)
{
    char url[1024], auth[600];
    size_t bl = strlen(u->cfg.embeddings_url);
    snprintf(url, sizeof url, "%.*s/embeddings",
             (int)(bl && u->cfg.embeddings_url[bl - 1] == '/' ? bl - 1 : bl),
             u->cfg.embeddings_url);
    const char *headers[2] = {NULL, NULL};
    if (u->cfg.embeddings_api_key) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", u->cfg.embeddings_api_key);
        headers[0] = auth;
    }
    json_t *input = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(input, cut(texts[i]));
    json_t *body = tk_json_obj("model", json_string(u->cfg.embeddings_model), "input", input, NULL);
    long status = 0;
    json_t *resp = NULL;
    char herr[256] = "";
    tk_status st =
        tk_httpc_json("POST", url, NULL, headers, body, 60000, &status, &resp, herr, sizeof herr);
    if (st != TK_OK || status != 200 || !resp) {
        snprintf(err, errlen, "embeddings endpoint: %s", st != TK_OK ? herr : "bad answer");
        if (st == TK_OK)
            snprintf(err, errlen, "embeddings endpoint answered HTTP %ld", status);
        json_decref(resp);
        return TK_ERROR;
    }
    json_t *data = json_object_get(resp, "data");
    st = TK_ERROR;
    if (!json_is_array(data) || json_array_size(data) != n) {
        snprintf(err, errlen, "embeddings endpoint: expected %zu vectors", n);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *item = json_array_get(data, i);
        /* "index" orders the vectors when present */
        json_int_t idx = json_integer_value(json_object_get(item, "index"));
        if (!json_is_integer(json_object_get(item, "index")))
            idx = (json_int_t)i;
        json_t *e = json_object_get(item, "embedding");
        size_t d = json_array_size(e);
        if (idx < 0 || (size_t)idx >= n || !json_is_array(e) || d == 0 ||
            d > UTOPIA_EMBED_MAX_DIM || (*dim && (int)d != *dim)) {
            snprintf(err, errlen, "embeddings endpoint: vector %zu is malformed", i);
            goto out;
        }
        *dim = (int)d;
        float *v = out + (size_t)idx * d;
        double norm = 0;
        for (size_t k = 0; k < d; k++) {
            json_t *x = json_array_get(e, k);
            if (!json_is_number(x)) {
                snprintf(err, errlen, "embeddings endpoint: vector %zu is malformed", i);
                goto out;
            }
            v[k] = (float)json_number_value(x);
            norm += (double)v[k] * v[k];
        }
        if (norm > 0) {
            float inv = (float)(1.0 / sqrt(norm));
            for (size_t k = 0; k < d; k++)
                v[k] *= inv;
        }
    }
    st = TK_OK;
out:
    json_decref(resp);
    return st;
}

tk_status utopia_embed(const utopia *u, const char *const *texts, size_t n, float **vecs, int *dim,
                       char *err, size_t errlen)
{
    *vecs = NULL;
    *dim = 0;
    if (!u->embeddings) {
        snprintf(err, errlen, "no embeddings model is configured");
        return TK_EDENIED;
    }
    float *all = NULL;
    for (size_t i = 0; i < n; i += UTOPIA_EMBED_BATCH) {
        size_t m = TK_MIN((size_t)UTOPIA_EMBED_BATCH, n - i);
        int d = *dim;
        /* the first batch tells the dimension: a scratch buffer of the cap */
        float *tmp = tk_malloc(m * UTOPIA_EMBED_MAX_DIM * sizeof(float));
        tk_status st = embed_batch(u, texts + i, m, tmp, &d, err, errlen);
        if (st != TK_OK) {
            free(tmp);
            free(all);
            return st;
        }
        if (!all)
            all = tk_malloc(n * (size_t)d * sizeof(float));
        memcpy(all + i * (size_t)d, tmp, m * (size_t)d * sizeof(float));
        free(tmp);
        *dim = d;
    }
    *vecs = all;
    return TK_OK;
}

tk_status utopia_embed_literal(const float *v, int dim, tk_buf *out)
{
    tk_status st = tk_buf_append_byte(out, '{');
    for (int i = 0; i < dim && st == TK_OK; i++)
        st = tk_buf_printf(out, "%s%.6g", i ? "," : "", (double)v[i]);
    if (st == TK_OK)
        st = tk_buf_append_byte(out, '}');
    return st;
}
