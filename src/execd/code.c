#include "execd/code.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "execd/cmd.h"
#include "execd/env.h"
#include "execd/events.h"
#include "execd/execd.h"
#include "execd/kernel.h"
#include "execd/sink.h"
#include "lib/id.h"
#include "lib/json.h"
#include "lib/log.h"

typedef struct ctx {
    char id[40];
    char lang[16];
    int refs;
    pthread_mutex_t use; /* held while the kernel is checked, restarted or handed work */
    execd_kernel *k;
    struct ctx *next;
} ctx;

static pthread_mutex_t c_lock = PTHREAD_MUTEX_INITIALIZER;
static ctx *c_head;
static size_t c_count;     /* contexts, including ones being created */
static char c_default[40]; /* the default python context */
static int c_shutting;

static void ctx_unref_locked(ctx *c)
{
    if (--c->refs > 0)
        return;
    /* The last user is gone: the kernel can be stopped (that waits for its
     * thread), so do it without the registry lock. */
    pthread_mutex_unlock(&c_lock);
    execd_kernel_stop(c->k);
    pthread_mutex_destroy(&c->use);
    free(c);
    pthread_mutex_lock(&c_lock);
}

static void ctx_unref(ctx *c)
{
    pthread_mutex_lock(&c_lock);
    ctx_unref_locked(c);
    pthread_mutex_unlock(&c_lock);
}

static ctx *find_ref(const char *id)
{
    pthread_mutex_lock(&c_lock);
    ctx *c = c_head;
    while (c && strcmp(c->id, id) != 0)
        c = c->next;
    if (c)
        c->refs++;
    pthread_mutex_unlock(&c_lock);
    return c;
}

/* Removes c from the registry (dropping the registry's reference). */
static int unlink_ctx(ctx *c)
{
    pthread_mutex_lock(&c_lock);
    ctx **pp = &c_head;
    while (*pp && *pp != c)
        pp = &(*pp)->next;
    int found = *pp == c;
    if (found) {
        *pp = c->next;
        c_count--;
        if (strcmp(c_default, c->id) == 0)
            c_default[0] = '\0';
        ctx_unref_locked(c);
    }
    pthread_mutex_unlock(&c_lock);
    return found;
}

static int lang_ok(const char *lang)
{
    return strcmp(lang, "python") == 0 || strcmp(lang, "python3") == 0;
}

/* Creates a context (a started kernel); responds on failure. Returns it with a
 * reference for the caller. */
static ctx *create(tk_req *r, int make_default)
{
    pthread_mutex_lock(&c_lock);
    if (c_shutting || (int64_t)c_count >= execd_cfg.max_contexts) {
        size_t n = c_count;
        pthread_mutex_unlock(&c_lock);
        tk_respond_error(r, 429, "TOO_MANY_CONTEXTS",
                         "%zu code contexts are open, the limit (EXECD_MAX_CONTEXTS) is %lld; "
                         "delete one first",
                         n, (long long)execd_cfg.max_contexts);
        return NULL;
    }
    c_count++;
    pthread_mutex_unlock(&c_lock);
    ctx *c = tk_calloc(1, sizeof *c);
    tk_token_hex(c->id, 16);
    snprintf(c->lang, sizeof c->lang, "python");
    pthread_mutex_init(&c->use, NULL);
    char err[1024];
    c->k = execd_kernel_start(c->id, err, sizeof err);
    if (!c->k) {
        pthread_mutex_lock(&c_lock);
        c_count--;
        pthread_mutex_unlock(&c_lock);
        pthread_mutex_destroy(&c->use);
        free(c);
        tk_warn("code", "msg=\"kernel did not start\" err=\"%s\"", err);
        tk_respond_error(r, 500, "RUNTIME_ERROR", "error creating code context: %s", err);
        return NULL;
    }
    pthread_mutex_lock(&c_lock);
    c->refs = 2; /* the registry's and the caller's */
    c->next = c_head;
    c_head = c;
    if (make_default && !c_default[0])
        snprintf(c_default, sizeof c_default, "%s", c->id);
    pthread_mutex_unlock(&c_lock);
    tk_info("code", "msg=\"context created\" context=%s", c->id);
    return c;
}

static json_t *ctx_json(const ctx *c)
{
    return tk_json_obj("id", json_string(c->id), "language", json_string(c->lang), NULL);
}

void execd_code_create(tk_req *r, void *ud)
{
    json_t *j = tk_req_json(r, 1);
    if (!j && tk_req_responded(r))
        return;
    if (j && !json_is_object(j)) {
        tk_respond_error(r, 400, "INVALID_REQUEST_BODY", "the body must be a JSON object");
        return;
    }
    const char *lang = j ? tk_json_str_or(j, "language", "python") : "python";
    if (!*lang)
        lang = "python";
    if (!lang_ok(lang)) {
        tk_respond_error(r, 400, "NOT_SUPPORTED",
                         "language \"%s\" is not supported here; code contexts run Python "
                         "(language \"python\")",
                         lang);
        return;
    }
    ctx *c = create(r, 0);
    if (!c)
        return;
    tk_respond_json(r, 200, ctx_json(c));
    ctx_unref(c);
}

void execd_code_list(tk_req *r, void *ud)
{
    const char *lang = tk_req_query(r, "language");
    json_t *a = json_array();
    pthread_mutex_lock(&c_lock);
    for (ctx *c = c_head; c; c = c->next)
        if (!lang || !*lang || strcmp(lang, c->lang) == 0 || (lang_ok(lang) && lang_ok(c->lang)))
            json_array_append_new(a, ctx_json(c));
    pthread_mutex_unlock(&c_lock);
    tk_respond_json(r, 200, a);
}

void execd_code_delete_lang(tk_req *r, void *ud)
{
    const char *lang = tk_req_query(r, "language");
    if (!lang || !*lang) {
        tk_respond_error(r, 400, "MISSING_QUERY", "missing query parameter 'language'");
        return;
    }
    for (;;) {
        pthread_mutex_lock(&c_lock);
        ctx *c = c_head;
        while (c && !(strcmp(c->lang, lang) == 0 || (lang_ok(lang) && lang_ok(c->lang))))
            c = c->next;
        if (c)
            c->refs++;
        pthread_mutex_unlock(&c_lock);
        if (!c)
            break;
        unlink_ctx(c);
        ctx_unref(c);
    }
    tk_respond_empty(r, 200);
}

void execd_code_get(tk_req *r, void *ud)
{
    const char *id = tk_req_param(r, "context_id");
    ctx *c = id ? find_ref(id) : NULL;
    if (!c) {
        tk_respond_error(r, 404, "CONTEXT_NOT_FOUND", "context %s not found", id ? id : "");
        return;
    }
    tk_respond_json(r, 200, ctx_json(c));
    ctx_unref(c);
}

void execd_code_delete(tk_req *r, void *ud)
{
    const char *id = tk_req_param(r, "context_id");
    ctx *c = id ? find_ref(id) : NULL;
    if (!c) {
        tk_respond_error(r, 404, "CONTEXT_NOT_FOUND", "context %s not found", id ? id : "");
        return;
    }
    unlink_ctx(c);
    ctx_unref(c); /* the kernel stops once no request uses it */
    tk_info("code", "msg=\"context deleted\" context=%s", id);
    tk_respond_empty(r, 200);
}

void execd_code_run(tk_req *r, void *ud)
{
    json_t *j = tk_req_json(r, 0);
    if (!j)
        return;
    if (!json_is_object(j)) {
        tk_respond_error(r, 400, "INVALID_REQUEST_BODY", "the body must be a JSON object");
        return;
    }
    size_t len;
    const char *code = execd_json_cstr(json_object_get(j, "code"), &len);
    if (!code || len == 0) {
        tk_respond_error(r, 400, "INVALID_REQUEST_BODY",
                         "code is required: a non-empty string without NUL bytes");
        return;
    }
    json_t *cj = json_object_get(j, "context");
    if (cj && !json_is_null(cj) && !json_is_object(cj)) {
        tk_respond_error(r, 400, "INVALID_REQUEST_BODY", "context must be an object");
        return;
    }
    const char *id = cj ? tk_json_str_or(cj, "id", "") : "";
    const char *lang = cj ? tk_json_str_or(cj, "language", "") : "";
    ctx *c = NULL;
    if (*id) {
        c = find_ref(id);
        if (!c) {
            tk_respond_error(r, 404, "CONTEXT_NOT_FOUND", "context %s not found", id);
            return;
        }
    } else if (!*lang) {
        /* upstream: no language means a plain shell command */
        execd_cmd_run_code(r, code, len);
        return;
    } else if (!lang_ok(lang)) {
        tk_respond_error(r, 400, "NOT_SUPPORTED",
                         "language \"%s\" is not supported here; code contexts run Python", lang);
        return;
    } else {
        pthread_mutex_lock(&c_lock);
        char def[40];
        snprintf(def, sizeof def, "%s", c_default);
        pthread_mutex_unlock(&c_lock);
        if (def[0])
            c = find_ref(def);
        if (!c && !(c = create(r, 1)))
            return;
    }
    pthread_mutex_lock(&c->use);
    char note[700] = "";
    char reason[600];
    if (!execd_kernel_alive(c->k, reason, sizeof reason)) {
        char err[1024];
        execd_kernel *nk = execd_kernel_start(c->id, err, sizeof err);
        if (!nk) {
            pthread_mutex_unlock(&c->use);
            tk_respond_error(r, 500, "RUNTIME_ERROR",
                             "the kernel of context %s had died (%s) and could not be restarted: "
                             "%s",
                             c->id, reason, err);
            ctx_unref(c);
            return;
        }
        execd_kernel_stop(c->k);
        c->k = nk;
        snprintf(note, sizeof note,
                 "[execd: the kernel of this context had died (%s); a new kernel was started and "
                 "earlier state is gone]\n",
                 reason);
    }
    if (execd_kernel_busy(c->k)) {
        pthread_mutex_unlock(&c->use);
        tk_respond_error(r, 409, "CONTEXT_BUSY",
                         "context %s is running code; wait for it or interrupt it "
                         "(DELETE /code?id=%s)",
                         c->id, c->id);
        ctx_unref(c);
        return;
    }
    execd_sink *sink = execd_sink_new(tk_respond_sse(r));
    if (note[0])
        execd_ev_text(execd_sink_buf(sink), "stderr", note, strlen(note));
    int rc = execd_kernel_execute(c->k, code, len, sink, c->id);
    pthread_mutex_unlock(&c->use);
    if (rc != 0) {
        /* raced with a death or another run: say so on the stream */
        execd_ev_text(execd_sink_buf(sink), "init", c->id, strlen(c->id));
        execd_ev_error(execd_sink_buf(sink), rc == -1 ? "ContextBusy" : "DeadKernelError",
                       rc == -1 ? "the context is running other code" : "the kernel has died",
                       NULL);
        execd_sink_drain(sink, 5000);
        execd_sink_end(sink);
    }
    ctx_unref(c);
}

int execd_code_interrupt(const char *id)
{
    ctx *c = find_ref(id);
    if (!c)
        return 0;
    pthread_mutex_lock(&c->use);
    int k = execd_kernel_interrupt(c->k) ? 1 : -1;
    pthread_mutex_unlock(&c->use);
    ctx_unref(c);
    return k;
}

size_t execd_code_count(void)
{
    pthread_mutex_lock(&c_lock);
    size_t n = c_count;
    pthread_mutex_unlock(&c_lock);
    return n;
}

void execd_code_shutdown(void)
{
    pthread_mutex_lock(&c_lock);
    c_shutting = 1;
    pthread_mutex_unlock(&c_lock);
    for (;;) {
        pthread_mutex_lock(&c_lock);
        ctx *c = c_head;
        if (c)
            c->refs++;
        pthread_mutex_unlock(&c_lock);
        if (!c)
            break;
        unlink_ctx(c);
        ctx_unref(c);
    }
    execd_kernel_cleanup();
}
