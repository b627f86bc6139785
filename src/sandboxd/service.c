#include "sandboxd/meta.h"
#include "sandboxd/service.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/id.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/tktime.h"
#include "sandboxd/store.h"

static void result(sbx_service_result *res, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void result(sbx_service_result *res, int status, const char *code, const char *fmt, ...)
{
    res->status = status;
    res->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->message, sizeof res->message, fmt, ap);
    va_end(ap);
}

/* ---------- the list ---------- */

sbx_sandbox *sbx_service_new_locked(sbx_service *svc, sbx_state st)
{
    sbx_sandbox *s = tk_calloc(1, sizeof *s);
    tk_uuid4(s->id);
    tk_token_hex(s->token, 32);
    s->created_ms = s->last_active_ms = tk_now_ms();
    sbx_sandbox_set_state(s, st, NULL, NULL);
    s->metadata = json_object();
    s->entrypoint = json_array();
    s->refs = 1; /* the list's */
    s->next = svc->list;
    svc->list = s;
    return s;
}

void sbx_service_touch_locked(sbx_service *svc)
{
    svc->last_activity = tk_mono_ms();
}

void sbx_service_unlink_locked(sbx_service *svc, sbx_sandbox *s)
{
    for (sbx_sandbox **pp = &svc->list; *pp; pp = &(*pp)->next) {
        if (*pp == s) {
            *pp = s->next;
            s->next = NULL;
            if (--s->refs == 0) {
                sbx_sandbox_clear(s);
                free(s);
            }
            return;
        }
    }
}

static sbx_sandbox *find_locked(sbx_service *svc, const char *id)
{
    for (sbx_sandbox *s = svc->list; s; s = s->next)
        if (s->state != SBX_POOLED && strcmp(s->id, id) == 0)
            return s;
    return NULL;
}

sbx_sandbox *sbx_service_get(sbx_service *svc, const char *id)
{
    pthread_mutex_lock(&svc->mu);
    sbx_sandbox *s = find_locked(svc, id);
    if (s)
        s->refs++;
    pthread_mutex_unlock(&svc->mu);
    return s;
}

void sbx_service_unref(sbx_service *svc, sbx_sandbox *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&svc->mu);
    int last = --s->refs == 0;
    pthread_mutex_unlock(&svc->mu);
    if (last) {
        sbx_sandbox_clear(s);
        free(s);
    }
}

void sbx_service_save_locked(sbx_service *svc, sbx_sandbox *s)
{
    if (s->state == SBX_TERMINATED || s->state == SBX_FAILED)
        return;
    json_t *rt = s->inst && svc->rt ? svc->rt->ops->save(s->inst) : NULL;
    json_t *rec = sbx_sandbox_record(s, rt);
    char err[512];
    if (sbx_store_save(svc->state_dir, s->id, rec, err, sizeof err) != TK_OK)
        tk_error("service", "msg=\"cannot save a sandbox record\" id=%s error=\"%s\"", s->id, err);
    json_decref(rec);
}

void sbx_service_finish(sbx_service *svc, sbx_sandbox *s, sbx_state final, const char *reason,
                        const char *message)
{
    pthread_mutex_lock(&svc->mu);
    sbx_instance *in = s->inst;
    s->inst = NULL;
    pthread_mutex_unlock(&svc->mu);
    if (in && svc->rt)
        sbx_runtime_destroy(svc->rt, in);
    sbx_store_remove(svc->state_dir, s->id);
    pthread_mutex_lock(&svc->mu);
    int pooled = s->state == SBX_POOLED;
    sbx_sandbox_set_state(s, final, reason, message);
    s->busy = 0;
    if (pooled)
        sbx_service_unlink_locked(svc, s);
    pthread_mutex_unlock(&svc->mu);
}

/* The oldest ready member (the list is newest first): the one whose start-up
 * work is most surely over. */
static sbx_sandbox *pool_take_locked(sbx_service *svc)
{
    sbx_sandbox *found = NULL;
    for (sbx_sandbox *s = svc->list; s; s = s->next)
        if (s->state == SBX_POOLED && s->inst && !s->busy)
            found = s;
    if (found) {
        found->busy = 1;
        svc->pool_ready--;
    }
    return found;
}

static int live_count_locked(sbx_service *svc)
{
    int n = 0;
    for (sbx_sandbox *s = svc->list; s; s = s->next)
        if (s->state != SBX_POOLED && s->state != SBX_TERMINATED && s->state != SBX_FAILED)
            n++;
    return n;
}

/* ---------- create ---------- */

static const char **strings_of(const json_t *arr_or_obj, int env)
{
    if (!arr_or_obj)
        return NULL;
    size_t n = env ? json_object_size(arr_or_obj) : json_array_size(arr_or_obj);
    if (n == 0)
        return NULL;
    const char **v = tk_calloc(n + 1, sizeof *v);
    size_t i = 0;
    if (env) {
        const char *k;
        json_t *val;
        json_object_foreach((json_t *)arr_or_obj, k, val)
        {
            v[i++] = tk_asprintf("%s=%s", k, json_string_value(val));
        }
    } else {
        json_t *val;
        size_t idx;
        json_array_foreach(arr_or_obj, idx, val)
        {
            v[i++] = tk_strdup(json_string_value(val));
        }
    }
    return v;
}

static void strings_free(const char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free((char *)v[i]);
    free(v);
}

tk_status sbx_service_create(sbx_service *svc, const sbx_service_create_req *req, sbx_sandbox **out,
                             int *from_pool, sbx_service_result *res)
{
    *out = NULL;
    *from_pool = 0;
    if (!svc->rt) {
        result(res, 503, "UNAVAILABLE", "the sandbox runtime is not available: %s", svc->rt_error);
        return TK_ERROR;
    }
    const char **env = strings_of(req->env, 1);
    const char **argv = strings_of(req->entrypoint, 0);
    pthread_mutex_lock(&svc->mu);
    if (live_count_locked(svc) >= svc->cfg.max_sandboxes) {
        pthread_mutex_unlock(&svc->mu);
        strings_free(env);
        strings_free(argv);
        result(res, 503, "CAPACITY",
               "this service already runs %lld sandboxes (SANDBOXD_MAX_SANDBOXES)",
               (long long)svc->cfg.max_sandboxes);
        return TK_ERROR;
    }
    sbx_service_touch_locked(svc);
    /* a pool member was started without the request's volumes */
    sbx_sandbox *s = req->volumes ? NULL : pool_take_locked(svc);
    int pooled = s != NULL;
    if (!s) {
        s = sbx_service_new_locked(svc, SBX_PENDING);
        s->busy = 1;
    }
    int64_t now = tk_now_ms();
    s->created_ms = s->last_active_ms = now;
    sbx_sandbox_set_state(s, SBX_PENDING, "provisioning",
                          pooled ? "taken from the warm pool" : "starting");
    snprintf(s->image, sizeof s->image, "%s", req->image);
    s->limits = req->limits;
    json_decref(s->metadata);
    s->metadata = req->metadata ? json_deep_copy(req->metadata) : json_object();
    json_decref(s->entrypoint);
    s->entrypoint = req->entrypoint ? json_deep_copy(req->entrypoint) : json_array();
    json_decref(s->env);
    s->env = req->env && json_object_size(req->env) ? json_deep_copy(req->env) : NULL;
    s->expires_ms = req->timeout_s ? now + req->timeout_s * 1000 : 0;
    s->renew_extend_s = req->renew_extend_s;
    free(s->netpol);
    s->netpol = req->netpol; /* taken: the caller sees it NULL below */
    ((sbx_service_create_req *)req)->netpol = NULL;
    tk_token_hex(s->egress_token, 16);
    s->refs++; /* the caller's */
    /* No record yet: a crash before the one written below leaves a folder
     * without a record (or a pool member's), which recovery cleans. */
    pthread_cond_signal(&svc->pool_cv);
    pthread_mutex_unlock(&svc->mu);

    sbx_spec spec = {.id = s->id,
                     .execd_token = s->token,
                     .limits = req->limits,
                     .env = env,
                     .entrypoint = argv,
                     /* for the docker runtime's labels: */
                     .metadata = req->metadata,
                     .volumes = req->volumes,
                     .expires_ms = req->timeout_s ? now + req->timeout_s * 1000 : 0};
    char err[1024];
    tk_status st = TK_ERROR;
    sbx_instance *in = NULL;
    if (pooled) {
        pthread_mutex_lock(&svc->mu);
        in = s->inst;
        pthread_mutex_unlock(&svc->mu);
        st = svc->rt->ops->claim(svc->rt, in, &spec, err, sizeof err);
        if (st != TK_OK) {
            tk_warn("service",
                    "msg=\"claiming a pool member failed; starting cold\" id=%s error=\"%s\"",
                    s->id, err);
            pthread_mutex_lock(&svc->mu);
            s->inst = NULL;
            pthread_mutex_unlock(&svc->mu);
            sbx_runtime_destroy(svc->rt, in);
            in = NULL;
            pooled = 0;
        }
    }
    if (!pooled) {
        st = svc->rt->ops->start(svc->rt, &spec, &in, err, sizeof err);
    }
    strings_free(env);
    strings_free(argv);
    if (st != TK_OK) {
        tk_error("service", "msg=\"cannot start a sandbox\" id=%s error=\"%s\"", s->id, err);
        sbx_service_finish(svc, s, SBX_FAILED, "runtime_error", err);
        if (st == TK_EDENIED) /* the platform's capacity (a cluster's quota) */
            result(res, 503, "CAPACITY", "no capacity for a sandbox: %s", err);
        else if (st == TK_ECLOSED || st == TK_ETIMEOUT) /* the platform is away or slow */
            result(res, 503, "UNAVAILABLE", "the sandbox platform did not answer in time: %s", err);
        else
            result(res, 500, "RUNTIME_ERROR", "the sandbox could not be started: %s", err);
        sbx_service_unref(svc, s);
        return TK_ERROR;
    }
    if (in->warm)
        pooled = 1; /* the runtime's own pool */
    pthread_mutex_lock(&svc->mu);
    if (in->token[0]) /* execd's own token (a warm pod's) */
        snprintf(s->token, sizeof s->token, "%s", in->token);
    s->inst = in;
    s->busy = 0;
    sbx_sandbox_set_state(s, SBX_RUNNING, "ready",
                          pooled ? "started from the warm pool" : "started");
    sbx_service_touch_locked(svc);
    sbx_service_save_locked(svc, s);
    pthread_mutex_unlock(&svc->mu);
    *from_pool = pooled;
    *out = s;
    return TK_OK;
}

int sbx_service_egress_admits(sbx_service *svc, const char *tag, const char *host,
                              const tk_ip *addrs, size_t naddrs, char *why, size_t whylen)
{
    if (strncmp(tag, "sandbox ", 8) != 0)
        return 1;
    const char *id = tag + 8;
    char h[TK_HOST_MAX + 1];
    size_t hl = strlen(host);
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') /* an IPv6 literal */
        snprintf(h, sizeof h, "%.*s", (int)(hl - 2), host + 1);
    else
        snprintf(h, sizeof h, "%s", host);
    int ok = 1;
    pthread_mutex_lock(&svc->mu);
    for (sbx_sandbox *s = svc->list; s; s = s->next)
        if (strcmp(s->id, id) == 0) {
            if (s->netpol)
                ok = sbx_netpol_admits(s->netpol, h, addrs, naddrs, why, whylen);
            break;
        }
    pthread_mutex_unlock(&svc->mu);
    return ok;
}

/* ---------- operations on one sandbox ---------- */

/* Finds id and marks it busy; refuses what the state does not allow. */
static sbx_sandbox *acquire(sbx_service *svc, const char *id, sbx_service_result *res)
{
    pthread_mutex_lock(&svc->mu);
    sbx_sandbox *s = find_locked(svc, id);
    if (!s || s->state == SBX_TERMINATED || s->state == SBX_FAILED) {
        pthread_mutex_unlock(&svc->mu);
        result(res, 404, "NOT_FOUND", "no sandbox %s", id);
        return NULL;
    }
    if (s->busy) {
        pthread_mutex_unlock(&svc->mu);
        result(res, 409, "CONFLICT", "sandbox %s is %s; try again", id,
               sbx_sandbox_state_name(s->state));
        return NULL;
    }
    s->busy = 1;
    s->refs++;
    pthread_mutex_unlock(&svc->mu);
    return s;
}

static void release(sbx_service *svc, sbx_sandbox *s)
{
    pthread_mutex_lock(&svc->mu);
    s->busy = 0;
    pthread_mutex_unlock(&svc->mu);
    sbx_service_unref(svc, s);
}

tk_status sbx_service_delete(sbx_service *svc, const char *id, sbx_service_result *res)
{
    sbx_sandbox *s = acquire(svc, id, res);
    if (!s)
        return TK_ENOENT;
    pthread_mutex_lock(&svc->mu);
    sbx_sandbox_set_state(s, SBX_STOPPING, "user_delete", "deleting");
    sbx_service_touch_locked(svc);
    pthread_mutex_unlock(&svc->mu);
    sbx_service_finish(svc, s, SBX_TERMINATED, "user_delete", "deleted");
    tk_info("service", "msg=\"sandbox deleted\" id=%s", id);
    sbx_service_unref(svc, s);
    return TK_OK;
}

static tk_status pause_resume(sbx_service *svc, const char *id, int pause, sbx_service_result *res)
{
    sbx_sandbox *s = acquire(svc, id, res);
    if (!s)
        return TK_ENOENT;
    pthread_mutex_lock(&svc->mu);
    sbx_state want = pause ? SBX_RUNNING : SBX_PAUSED;
    if (s->state != want || !s->inst) {
        result(res, 409, "CONFLICT", "sandbox %s is %s; %s needs it %s", id,
               sbx_sandbox_state_name(s->state), pause ? "pause" : "resume",
               sbx_sandbox_state_name(want));
        pthread_mutex_unlock(&svc->mu);
        release(svc, s);
        return TK_EINVAL;
    }
    sbx_sandbox_set_state(s, pause ? SBX_PAUSING : SBX_RESUMING, NULL, NULL);
    sbx_instance *in = s->inst;
    pthread_mutex_unlock(&svc->mu);
    char err[512];
    tk_status st = pause ? svc->rt->ops->pause(svc->rt, in, err, sizeof err)
                         : svc->rt->ops->resume(svc->rt, in, err, sizeof err);
    pthread_mutex_lock(&svc->mu);
    if (st == TK_OK)
        sbx_sandbox_set_state(s, pause ? SBX_PAUSED : SBX_RUNNING,
                              pause ? "user_pause" : "user_resume", NULL);
    else
        sbx_sandbox_set_state(s, want, "runtime_error", err);
    if (!pause)
        s->last_active_ms = tk_now_ms();
    sbx_service_save_locked(svc, s);
    pthread_mutex_unlock(&svc->mu);
    release(svc, s);
    if (st == TK_EDENIED) {
        result(res, 501, "NOT_IMPLEMENTED", "%s", err);
        return TK_ERROR;
    }
    if (st != TK_OK) {
        result(res, 500, "RUNTIME_ERROR", "%s failed: %s", pause ? "pause" : "resume", err);
        return TK_ERROR;
    }
    return TK_OK;
}

tk_status sbx_service_pause(sbx_service *svc, const char *id, sbx_service_result *res)
{
    return pause_resume(svc, id, 1, res);
}

tk_status sbx_service_resume(sbx_service *svc, const char *id, sbx_service_result *res)
{
    return pause_resume(svc, id, 0, res);
}

tk_status sbx_service_renew(sbx_service *svc, const char *id, int64_t expires_ms, int64_t *out_ms,
                            sbx_service_result *res)
{
    pthread_mutex_lock(&svc->mu);
    sbx_sandbox *s = find_locked(svc, id);
    tk_status st = TK_OK;
    int64_t now = tk_now_ms();
    if (!s || s->state == SBX_TERMINATED || s->state == SBX_FAILED || s->state == SBX_STOPPING) {
        result(res, 404, "NOT_FOUND", "no sandbox %s", id);
        st = TK_ENOENT;
    } else if (expires_ms <= now) {
        result(res, 400, "INVALID_REQUEST", "expiresAt must be in the future");
        st = TK_EINVAL;
    } else if (s->expires_ms && expires_ms <= s->expires_ms) {
        result(res, 400, "INVALID_REQUEST", "expiresAt must be after the current expiresAt");
        st = TK_EINVAL;
    } else if (expires_ms > now + svc->cfg.max_timeout_s * 1000) {
        result(res, 400, "INVALID_REQUEST",
               "expiresAt is more than %lld s away (SANDBOX_MAX_TIMEOUT)",
               (long long)svc->cfg.max_timeout_s);
        st = TK_EINVAL;
    } else {
        s->expires_ms = expires_ms;
        *out_ms = expires_ms;
        sbx_service_save_locked(svc, s);
    }
    pthread_mutex_unlock(&svc->mu);
    return st;
}

tk_status sbx_service_patch_metadata(sbx_service *svc, const char *id, const json_t *patch,
                                     json_t **out, sbx_service_result *res)
{
    pthread_mutex_lock(&svc->mu);
    sbx_sandbox *s = find_locked(svc, id);
    if (!s || s->state == SBX_TERMINATED || s->state == SBX_FAILED) {
        pthread_mutex_unlock(&svc->mu);
        result(res, 404, "NOT_FOUND", "no sandbox %s", id);
        return TK_ENOENT;
    }
    const char *k;
    json_t *v;
    json_t *m = json_deep_copy(s->metadata);
    json_object_foreach((json_t *)patch, k, v)
    {
        if (json_is_null(v))
            json_object_del(m, k);
        else
            json_object_set(m, k, v);
    }
    if (json_object_size(m) > 64) {
        pthread_mutex_unlock(&svc->mu);
        json_decref(m);
        result(res, 400, "INVALID_REQUEST", "metadata would have more than 64 keys");
        return TK_EINVAL;
    }
    json_decref(s->metadata);
    s->metadata = m;
    sbx_service_save_locked(svc, s);
    *out = sbx_sandbox_json(s, 1);
    pthread_mutex_unlock(&svc->mu);
    return TK_OK;
}

json_t *sbx_service_get_json(sbx_service *svc, const char *id, sbx_service_result *res)
{
    pthread_mutex_lock(&svc->mu);
    sbx_sandbox *s = find_locked(svc, id);
    json_t *j = s ? sbx_sandbox_json(s, 1) : NULL;
    pthread_mutex_unlock(&svc->mu);
    if (!j)
        result(res, 404, "NOT_FOUND", "no sandbox %s", id);
    return j;
}

static int cmp_created(const void *a, const void *b)
{
    const sbx_sandbox *x = *(const sbx_sandbox *const *)a, *y = *(const sbx_sandbox *const *)b;
    if (x->created_ms != y->created_ms)
        return x->created_ms < y->created_ms ? -1 : 1;
    return strcmp(x->id, y->id);
}

json_t *sbx_service_list(sbx_service *svc, const sbx_service_list_query *q)
{
    pthread_mutex_lock(&svc->mu);
    size_t n = 0;
    for (sbx_sandbox *s = svc->list; s; s = s->next)
        n++;
    sbx_sandbox **v = tk_calloc(n ? n : 1, sizeof *v);
    size_t m = 0;
    for (sbx_sandbox *s = svc->list; s; s = s->next) {
        if (s->state == SBX_POOLED)
            continue;
        int ok;
        if (q->nstates) {
            ok = 0;
            for (size_t i = 0; i < q->nstates; i++)
                if (q->states[i] == s->state)
                    ok = 1;
        } else {
            ok = s->state != SBX_TERMINATED;
        }
        if (ok && q->nmeta)
            ok = sbx_meta_matches(s->metadata, q->meta_keys, q->meta_values, q->nmeta);
        if (ok)
            v[m++] = s;
    }
    qsort(v, m, sizeof *v, cmp_created);
    int64_t ps = q->page_size, page = q->page;
    int64_t total_pages = ((int64_t)m + ps - 1) / ps;
    json_t *items = json_array();
    for (int64_t i = (page - 1) * ps; i < (int64_t)m && i < page * ps; i++)
        json_array_append_new(items, sbx_sandbox_json(v[i], 1));
    pthread_mutex_unlock(&svc->mu);
    free(v);
    json_t *pg = tk_json_obj("page", json_integer(page), "pageSize", json_integer(ps), "totalItems",
                             json_integer((json_int_t)m), "totalPages", json_integer(total_pages),
                             "hasNextPage", json_boolean(page < total_pages), NULL);
    return tk_json_obj("items", items, "pagination", pg, NULL);
}

tk_status sbx_service_proxy_begin(sbx_service *svc, const char *id, char *sock, size_t socklen,
                                  sbx_service_result *res)
{
    pthread_mutex_lock(&svc->mu);
    sbx_sandbox *s = find_locked(svc, id);
    tk_status st = TK_OK;
    if (!s || s->state == SBX_TERMINATED || s->state == SBX_FAILED) {
        result(res, 404, "NOT_FOUND", "no sandbox %s", id);
        st = TK_ENOENT;
    } else if (s->state == SBX_PAUSED || s->state == SBX_PAUSING) {
        result(res, 409, "SANDBOX_PAUSED", "sandbox %s is paused; resume it first", id);
        st = TK_EINVAL;
    } else if (s->state != SBX_RUNNING || !s->inst) {
        result(res, 409, "CONFLICT", "sandbox %s is %s", id, sbx_sandbox_state_name(s->state));
        st = TK_EINVAL;
    } else if (svc->cfg.proxy_per_sandbox > 0 && s->active >= svc->cfg.proxy_per_sandbox) {
        result(res, 429, "TOO_MANY_REQUESTS",
               "sandbox %s has %lld proxied requests in flight already "
               "(SANDBOXD_PROXY_MAX_PER_SANDBOX); try again when one ends",
               id, (long long)svc->cfg.proxy_per_sandbox);
        st = TK_EDENIED;
    } else {
        sbx_runtime_execd_endpoint(s->inst, sock, socklen);
        s->active++;
        sbx_service_touch_locked(svc);
        int64_t now = tk_now_ms();
        s->last_active_ms = now;
        if (s->renew_extend_s && s->expires_ms && now + s->renew_extend_s * 1000 > s->expires_ms) {
            s->expires_ms = now + s->renew_extend_s * 1000;
            sbx_service_save_locked(svc, s);
        }
    }
    pthread_mutex_unlock(&svc->mu);
    return st;
}

void sbx_service_proxy_end(sbx_service *svc, const char *id)
{
    pthread_mutex_lock(&svc->mu);
    sbx_sandbox *s = find_locked(svc, id);
    if (s) {
        if (s->active > 0)
            s->active--;
        s->last_active_ms = tk_now_ms();
    }
    sbx_service_touch_locked(svc);
    pthread_mutex_unlock(&svc->mu);
}

/* ---------- start-up: recovery ---------- */

static void recover(sbx_service *svc)
{
    char **ids;
    size_t n = sbx_store_list(svc->state_dir, &ids);
    const char **keep = tk_calloc(n ? n : 1, sizeof *keep);
    size_t nkeep = 0;
    for (size_t i = 0; i < n; i++) {
        char err[512];
        json_t *rec = sbx_store_load(svc->state_dir, ids[i], err, sizeof err);
        sbx_sandbox tmp;
        memset(&tmp, 0, sizeof tmp);
        const json_t *rtj = NULL;
        int pooled = 0;
        if (!rec || sbx_sandbox_from_record(&tmp, rec, &rtj, &pooled) != TK_OK ||
            strcmp(tmp.id, ids[i]) != 0) {
            tk_warn("service",
                    "msg=\"removing a half-made sandbox (no usable record)\" id=%s error=\"%s\"",
                    ids[i], rec ? "bad record" : err);
            sbx_sandbox_clear(&tmp);
            json_decref(rec);
            sbx_store_remove(svc->state_dir, ids[i]);
            continue;
        }
        sbx_instance *in = NULL;
        tk_status st = TK_ENOENT;
        int paused = tmp.state == SBX_PAUSED || tmp.state == SBX_PAUSING;
        if (svc->rt && json_is_object(rtj))
            st = svc->rt->ops->attach(svc->rt, tmp.id, rtj, paused, &in, err, sizeof err);
        /* No runtime, or one that cannot tell (the docker runtime while the
         * engine does not answer): the record stays for the next start, and the
         * sweep spares the sandbox. Only TK_ENOENT means it is gone. */
        if (!pooled && json_is_object(rtj) && (!svc->rt || (st != TK_OK && st != TK_ENOENT))) {
            tk_warn("service",
                    "msg=\"keeping a sandbox's record: the runtime cannot tell whether it still "
                    "runs (restart once it is available)\" id=%s error=\"%s\"",
                    tmp.id, svc->rt ? err : svc->rt_error);
            keep[nkeep++] = ids[i];
            sbx_sandbox_clear(&tmp);
            json_decref(rec);
            continue;
        }
        int usable =
            st == TK_OK && !pooled && tmp.state != SBX_PENDING && tmp.state != SBX_STOPPING;
        if (!usable) {
            tk_info("service",
                    "msg=\"cleaning a sandbox found on disk\" id=%s state=%s pooled=%d why=\"%s\"",
                    tmp.id, sbx_sandbox_state_name(tmp.state), pooled,
                    st == TK_OK ? "pool member or half-made" : err);
            if (in)
                sbx_runtime_destroy(svc->rt, in);
            sbx_store_remove(svc->state_dir, tmp.id);
            sbx_sandbox_clear(&tmp);
            json_decref(rec);
            continue;
        }
        pthread_mutex_lock(&svc->mu);
        sbx_sandbox *s = tk_calloc(1, sizeof *s);
        *s = tmp;
        s->inst = in;
        s->refs = 1;
        s->busy = 0;
        s->active = 0;
        s->last_active_ms = tk_now_ms(); /* idle time restarts with the service */
        if (paused)
            sbx_sandbox_set_state(s, SBX_PAUSED, s->reason, s->message);
        else if (s->state != SBX_RUNNING)
            sbx_sandbox_set_state(s, SBX_RUNNING, "recovered", "found again after a restart");
        s->next = svc->list;
        svc->list = s;
        sbx_service_save_locked(svc, s);
        pthread_mutex_unlock(&svc->mu);
        keep[nkeep++] = s->id;
        tk_info("service", "msg=\"sandbox recovered\" id=%s state=%s", s->id,
                sbx_sandbox_state_name(s->state));
        json_decref(rec);
    }
    if (svc->rt)
        svc->rt->ops->sweep(svc->rt, keep, nkeep);
    free(keep);
    for (size_t i = 0; i < n; i++)
        free(ids[i]);
    free(ids);
}

sbx_service *sbx_service_open(const sbx_service_config *cfg, char *err, size_t errlen)
{
    if (sbx_store_init(cfg->state_dir, err, errlen) != TK_OK)
        return NULL;
    sbx_service *svc = tk_calloc(1, sizeof *svc);
    svc->cfg = *cfg;
    snprintf(svc->state_dir, sizeof svc->state_dir, "%s", cfg->state_dir);
    svc->cfg.state_dir = svc->state_dir;
    pthread_mutex_init(&svc->mu, NULL);
    pthread_cond_init(&svc->pool_cv, NULL);
    pthread_cond_init(&svc->reaper_cv, NULL);
    char ierr[512];
    svc->img_ok = sbx_image_find(cfg->rtc.image_dir, &svc->img, ierr, sizeof ierr) == TK_OK;
    sbx_runtime_config rtc = cfg->rtc;
    rtc.state_dir = svc->state_dir;
    rtc.pool_limits = cfg->policy.def;
    svc->rt = sbx_runtime_open(cfg->runtime, &rtc, svc->rt_error, sizeof svc->rt_error);
    if (!svc->rt)
        tk_error("service",
                 "msg=\"the sandbox runtime is not available: creating sandboxes will fail until "
                 "this is fixed\" "
                 "runtime=%s error=\"%s\"",
                 cfg->runtime, svc->rt_error);
    else
        tk_info("service", "msg=\"runtime ready\" %s", svc->rt->ops->describe(svc->rt));
    recover(svc);
    return svc;
}

/* Destroys every pool member (the service is stopping). */
static void pool_destroy_all(sbx_service *svc)
{
    for (;;) {
        pthread_mutex_lock(&svc->mu);
        sbx_sandbox *s = pool_take_locked(svc);
        pthread_mutex_unlock(&svc->mu);
        if (!s)
            return;
        sbx_service_finish(svc, s, SBX_TERMINATED, "shutdown", NULL);
    }
}

void sbx_service_close(sbx_service *svc)
{
    if (!svc)
        return;
    pthread_mutex_lock(&svc->mu);
    svc->stopping = 1;
    pthread_cond_broadcast(&svc->pool_cv);
    pthread_cond_broadcast(&svc->reaper_cv);
    pthread_mutex_unlock(&svc->mu);
    if (svc->reaper_started)
        pthread_join(svc->reaper_thr, NULL);
    if (svc->pool_started)
        pthread_join(svc->pool_thr, NULL);
    pool_destroy_all(svc);
    /* running sandboxes stay: their instances are only forgotten */
    pthread_mutex_lock(&svc->mu);
    sbx_sandbox *s = svc->list;
    svc->list = NULL;
    pthread_mutex_unlock(&svc->mu);
    while (s) {
        sbx_sandbox *next = s->next;
        if (s->inst && svc->rt)
            sbx_runtime_forget(svc->rt, s->inst);
        sbx_sandbox_clear(s);
        free(s);
        s = next;
    }
    if (svc->rt)
        svc->rt->ops->free(svc->rt);
    pthread_mutex_destroy(&svc->mu);
    pthread_cond_destroy(&svc->pool_cv);
    pthread_cond_destroy(&svc->reaper_cv);
    free(svc);
}
