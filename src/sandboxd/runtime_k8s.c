/*
 * runtime_k8s.c — the kubernetes runtime: each sandbox is a plain Pod made
 * through the API server (k8s.h), running tusko-execd as its one container;
 * execd is reached at the pod's IP with the sandbox's token. No CRD, no
 * controller: this service is the only one that manages its pods, and the
 * cluster holds their state (labels).
 *
 * Labels on every pod (the watch selects the first two, which never change):
 *   app.kubernetes.io/managed-by=tusko-sandboxd
 *   sandbox.tusko.io/service=<K8S_SANDBOX_POOL>   the pool: sandboxd processes
 *                                                 with one name share its pods
 *   sandbox.tusko.io/template=<hash>              image, limits and placement
 *   sandbox.tusko.io/pool=warm|claimed
 *   sandbox.tusko.io/id=<sandbox id>              claimed pods
 *   sandbox.tusko.io/claimer=<K8S_SANDBOX_INSTANCE> the sandboxd that claimed it
 *
 * The warm pool: a keeper thread holds K8S_SANDBOX_WARM_POOL_SIZE pods of the
 * current template labelled pool=warm (each with a random execd token in its
 * env), within K8S_SANDBOX_POOL_MAX pods of this pool in all, driven by a watch
 * thread that keeps a cache of the pool's pods (a list, then a watch from its
 * resourceVersion; a 410 or a broken stream lists again). Warm pods of another
 * template and failed ones are deleted. A 403 (quota) backs off.
 *
 * start(): a request with the default limits and no env takes the oldest
 * ready warm pod by one JSON Patch: test that its pool label is "warm" (and
 * its uid), replace it with "claimed", add id and claimer, and lower
 * activeDeadlineSeconds to the pod's age + the sandbox's timeout +
 * K8S_SANDBOX_DEADLINE_GRACE. The API server applies the patch to the stored
 * pod atomically, so of two sandboxd racing for one pod one gets 200 and the
 * other 422 (409 or 404 when it changed or went), and tries the next. The
 * sandbox's token is then the warm execd's own (instance token). Otherwise, or
 * with no warm pod, a cold pod is created already claimed (the request's env
 * and token in its env) and start() waits for it to be Ready within
 * K8S_SANDBOX_START_TIMEOUT. The entrypoint then runs as a background command
 * of execd. A 403 "exceeded quota" is TK_EDENIED (503 CAPACITY); an API server
 * that does not answer TK_ECLOSED, a pod not Ready in time TK_ETIMEOUT (503
 * UNAVAILABLE).
 *
 * alive() reads the cache: a pod gone, Terminating, Failed or Succeeded is
 * dead (the reaper marks the sandbox Failed). teardown() deletes the pod with
 * a uid precondition and grace 1. attach() finds a claimed pod again by its id
 * and claimer labels; sweep() deletes this instance's claimed pods whose
 * sandbox the service does not know (warm pods are kept and reused).
 *
 * Network: SANDBOX_NETWORK=proxy is not applied to pods (sandboxd's egress
 * proxy listens on its own host); the namespace's NetworkPolicy denies them
 * every way out, where a CNI enforces it.
 *
 * Not done here: pause (501), pods/resize, a per-sandbox derived token (the
 * warm pod's token is in its env, readable by whoever may read pods in the
 * namespace), several replicas keeping one pool (each keeper tops it up).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/buf.h"
#include "lib/cond.h"
#include "lib/httpc.h"
#include "lib/id.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/tktime.h"
#include "sandboxd/k8s.h"
#include "sandboxd/runtime.h"

#define L_MANAGED  "app.kubernetes.io/managed-by"
#define L_SERVICE  "sandbox.tusko.io/service"
#define L_TEMPLATE "sandbox.tusko.io/template"
#define L_POOL     "sandbox.tusko.io/pool"
#define L_ID       "sandbox.tusko.io/id"
#define L_CLAIMER  "sandbox.tusko.io/claimer"
#define A_CREATED  "sandbox.tusko.io/created"
#define A_CLAIMED  "sandbox.tusko.io/claimed"
#define MANAGED_BY "tusko-sandboxd"

/* A warm pod's own backstop: claims lower it (31 days). */
#define POOL_DEADLINE_S (31LL * 86400)
#define WATCH_TIMEOUT_S 60
#define CALL_MS         15000
#define EXECD_CALL_MS   10000

typedef struct {
    sbx_k8s_client c;
    volatile int cancel;
    char image[512];
    char command[256];
    char runtime_class[254];
    char pool[64];
    char instance[64];
    char template_hash[20];
    char selector[256];
    json_t *node_selector; /* object or NULL */
    json_t *tolerations;   /* array or NULL */
    int64_t pool_size, pool_max, grace_s, start_timeout_ms;
    int port;
    int64_t ws_bytes, tmp_bytes;
    sbx_limits pool_limits;
    /* the cache, guarded by mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    json_t *pods;     /* name → pod */
    json_t *claiming; /* names of warm pods a start of ours is claiming now */
    char rv[128];
    int synced;
    int creating;
    int stopping;
    int64_t backoff_until;
    char keeper_error[512];
    pthread_t watch_thr, keeper_thr;
    int threads;
    char desc[1280];
} k8s_rt;

typedef struct {
    sbx_instance base; /* id, tcp, token, warm */
    char pod[254];
    char uid[64];
} k8s_inst;

static k8s_rt *RT(sbx_runtime *rt)
{
    return rt->impl;
}

static k8s_inst *KI(sbx_instance *in)
{
    return (k8s_inst *)in;
}

/* ---------- reading pods ---------- */

static const char *label(const json_t *pod, const char *key)
{
    return tk_json_str(json_object_get(json_object_get(pod, "metadata"), "labels"), key);
}

static const char *meta(const json_t *pod, const char *key)
{
    return tk_json_str(json_object_get(pod, "metadata"), key);
}

static const char *phase(const json_t *pod)
{
    return tk_json_str_or(json_object_get(pod, "status"), "phase", "");
}

static int terminating(const json_t *pod)
{
    return json_object_get(json_object_get(pod, "metadata"), "deletionTimestamp") != NULL;
}

static int dead(const json_t *pod)
{
    const char *ph = phase(pod);
    return terminating(pod) || strcmp(ph, "Failed") == 0 || strcmp(ph, "Succeeded") == 0;
}

static int ready(const json_t *pod)
{
    if (dead(pod) || strcmp(phase(pod), "Running") != 0)
        return 0;
    const json_t *st = json_object_get(pod, "status");
    if (!tk_json_str(st, "podIP"))
        return 0;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(st, "conditions"), i, c)
    {
        if (strcmp(tk_json_str_or(c, "type", ""), "Ready") == 0)
            return strcmp(tk_json_str_or(c, "status", ""), "True") == 0;
    }
    return 0;
}

static int is_ours(const k8s_rt *r, const json_t *pod)
{
    const char *m = label(pod, L_MANAGED), *s = label(pod, L_SERVICE);
    return m && s && strcmp(m, MANAGED_BY) == 0 && strcmp(s, r->pool) == 0;
}

static int is_warm(const k8s_rt *r, const json_t *pod)
{
    const char *p = label(pod, L_POOL), *t = label(pod, L_TEMPLATE);
    return is_ours(r, pod) && p && strcmp(p, "warm") == 0 && t && strcmp(t, r->template_hash) == 0;
}

static int claimed_by_us(const k8s_rt *r, const json_t *pod)
{
    const char *p = label(pod, L_POOL), *cl = label(pod, L_CLAIMER);
    return is_ours(r, pod) && p && strcmp(p, "claimed") == 0 && cl && strcmp(cl, r->instance) == 0;
}

/* The pod's execd endpoint "ip:port" (checked to be an IP literal). */
static int pod_endpoint(const k8s_rt *r, const json_t *pod, char *out, size_t outlen)
{
    const char *ip = tk_json_str(json_object_get(pod, "status"), "podIP");
    unsigned char buf[16];
    if (!ip)
        return -1;
    if (inet_pton(AF_INET, ip, buf) == 1)
        snprintf(out, outlen, "%s:%d", ip, r->port);
    else if (inet_pton(AF_INET6, ip, buf) == 1)
        snprintf(out, outlen, "[%s]:%d", ip, r->port);
    else
        return -1;
    return 0;
}

/* EXECD_ACCESS_TOKEN from the pod's container env (a hex token). */
static int pod_token(const json_t *pod, char *out, size_t outlen)
{
    json_t *c = json_array_get(json_object_get(json_object_get(pod, "spec"), "containers"), 0);
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(c, "env"), i, e)
    {
        if (strcmp(tk_json_str_or(e, "name", ""), "EXECD_ACCESS_TOKEN") != 0)
            continue;
        const char *v = tk_json_str(e, "value");
        size_t n = v ? strlen(v) : 0;
        if (n < 16 || n >= outlen || strspn(v, "0123456789abcdef") != n)
            return -1;
        memcpy(out, v, n + 1);
        return 0;
    }
    return -1;
}

/* ---------- the pod ---------- */

static json_t *quantity_cpu(int64_t millis)
{
    char b[32];
    snprintf(b, sizeof b, "%lldm", (long long)millis);
    return json_string(b);
}

static json_t *quantity_bytes(int64_t bytes)
{
    char b[32];
    snprintf(b, sizeof b, "%lld", (long long)bytes);
    return json_string(b);
}

static json_t *env_var(const char *name, const char *value)
{
    return tk_json_obj("name", json_string(name), "value", json_string(value), NULL);
}

/* A pod of the current template: warm (id NULL) or claimed for id. */

/* Whole seconds until expires_ms, rounded up (a pod's deadline never comes
 * before its sandbox's timeout: 1.9 s left is 2, not 1); at least 1. */
static int64_t secs_left(int64_t expires_ms)
{
    int64_t ms = expires_ms - tk_now_ms();
    int64_t s = ms > 0 ? (ms + 999) / 1000 : 0;
    return s > 0 ? s : 1;
}
static json_t *pod_spec(const k8s_rt *r, const sbx_spec *spec, const char *token)
{
    const sbx_limits *lim = spec ? &spec->limits : &r->pool_limits;
    char now[40], gen[96];
    tk_time_rfc3339(tk_now_ms(), now, sizeof now);
    snprintf(gen, sizeof gen, "tusko-%s-", r->pool);
    json_t *labels = tk_json_obj(L_MANAGED, json_string(MANAGED_BY), L_SERVICE,
                                 json_string(r->pool), L_TEMPLATE, json_string(r->template_hash),
                                 L_POOL, json_string(spec ? "claimed" : "warm"), NULL);
    json_t *ann = tk_json_obj(A_CREATED, json_string(now), NULL);
    if (spec) {
        json_object_set_new(labels, L_ID, json_string(spec->id));
        json_object_set_new(labels, L_CLAIMER, json_string(r->instance));
        json_object_set_new(ann, A_CLAIMED, json_string(now));
    }
    char listen[32];
    snprintf(listen, sizeof listen, "0.0.0.0:%d", r->port);
    json_t *env = json_array();
    json_array_append_new(env, env_var("EXECD_LISTEN", listen));
    json_array_append_new(env, env_var("EXECD_WORKSPACE", "/workspace"));
    json_array_append_new(env, env_var("EXECD_ACCESS_TOKEN", token));
    for (size_t i = 0; spec && spec->env && spec->env[i]; i++) {
        const char *eq = strchr(spec->env[i], '=');
        if (!eq || strncmp(spec->env[i], "EXECD_", 6) == 0)
            continue; /* execd's settings are not the request's */
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(eq - spec->env[i]), spec->env[i]);
        json_array_append_new(env, env_var(name, eq + 1));
    }
    json_t *res = tk_json_obj("cpu", quantity_cpu(lim->cpu_millis), "memory",
                              quantity_bytes(lim->memory_bytes), NULL);
    int64_t deadline = POOL_DEADLINE_S;
    if (spec && spec->expires_ms) {
        deadline = secs_left(spec->expires_ms) + r->grace_s;
    }
    json_t *ctr = tk_json_obj(
        "name", json_string("sandbox"), "image", json_string(r->image), "imagePullPolicy",
        json_string("IfNotPresent"), "command", json_pack("[s]", r->command), "env", env, "ports",
        json_pack("[{s:i,s:s,s:s}]", "containerPort", r->port, "name", "execd", "protocol", "TCP"),
        "readinessProbe",
        json_pack("{s:{s:s,s:i},s:i}", "httpGet", "path", "/healthz", "port", r->port,
                  "periodSeconds", 1),
        "securityContext",
        json_pack("{s:b,s:b,s:b,s:{s:[s]}}", "allowPrivilegeEscalation", 0,
                  "readOnlyRootFilesystem", 1, "runAsNonRoot", 1, "capabilities", "drop", "ALL"),
        "resources", tk_json_obj("requests", json_deep_copy(res), "limits", res, NULL),
        "volumeMounts",
        json_pack("[{s:s,s:s},{s:s,s:s}]", "name", "workspace", "mountPath", "/workspace", "name",
                  "tmp", "mountPath", "/tmp"),
        NULL);
    json_t *podspec = tk_json_obj(
        "automountServiceAccountToken", json_false(), "enableServiceLinks", json_false(),
        "restartPolicy", json_string("Never"), "terminationGracePeriodSeconds", json_integer(2),
        "activeDeadlineSeconds", json_integer(deadline), "securityContext",
        json_pack("{s:b,s:i,s:i,s:i,s:{s:s}}", "runAsNonRoot", 1, "runAsUser", 1000, "runAsGroup",
                  1000, "fsGroup", 1000, "seccompProfile", "type", "RuntimeDefault"),
        "containers", json_pack("[o]", ctr), "volumes",
        json_pack("[{s:s,s:{s:o}},{s:s,s:{s:o}}]", "name", "workspace", "emptyDir", "sizeLimit",
                  quantity_bytes(r->ws_bytes), "name", "tmp", "emptyDir", "sizeLimit",
                  quantity_bytes(r->tmp_bytes)),
        NULL);
    if (r->runtime_class[0])
        json_object_set_new(podspec, "runtimeClassName", json_string(r->runtime_class));
    if (r->node_selector)
        json_object_set_new(podspec, "nodeSelector", json_deep_copy(r->node_selector));
    if (r->tolerations)
        json_object_set_new(podspec, "tolerations", json_deep_copy(r->tolerations));
    return tk_json_obj(
        "apiVersion", json_string("v1"), "kind", json_string("Pod"), "metadata",
        tk_json_obj("generateName", json_string(gen), "labels", labels, "annotations", ann, NULL),
        "spec", podspec, NULL);
}

/* "exceeded quota" and the rest of the API's refusals, as an error. */
static tk_status api_refusal(const char *what, long status, const json_t *body, char *err,
                             size_t errlen)
{
    const char *m = sbx_k8s_status_message(body, "(no message)");
    if (status == 403 && strstr(m, "exceeded quota")) {
        snprintf(err, errlen, "%s: the cluster's quota is used up (403: %s)", what, m);
        return TK_EDENIED;
    }
    snprintf(err, errlen, "%s: the API server answered %ld: %s", what, status, m);
    return status == 404 ? TK_ENOENT : TK_ERROR;
}

/* ---------- the cache: list, then watch ---------- */

static void cache_put_locked(k8s_rt *r, json_t *pod)
{
    const char *name = meta(pod, "name");
    if (name && is_ours(r, pod))
        json_object_set(r->pods, name, pod);
}

static int on_event(const char *type, json_t *obj, void *ud)
{
    k8s_rt *r = ud;
    const char *rv = meta(obj, "resourceVersion");
    pthread_mutex_lock(&r->mu);
    if (strcmp(type, "ERROR") == 0) {
        /* 410: our version is too old; list again */
        tk_info("k8s", "msg=\"the watch ended with an error; listing again\" code=%lld reason=%s",
                (long long)tk_json_int_or(obj, "code", 0), tk_json_str_or(obj, "reason", "?"));
        r->synced = 0;
        pthread_mutex_unlock(&r->mu);
        return 1;
    }
    if (strcmp(type, "ADDED") == 0 || strcmp(type, "MODIFIED") == 0) {
        cache_put_locked(r, obj);
    } else if (strcmp(type, "DELETED") == 0) {
        const char *name = meta(obj, "name");
        if (name)
            json_object_del(r->pods, name);
    }
    if (rv && strlen(rv) < sizeof r->rv)
        snprintf(r->rv, sizeof r->rv, "%s", rv);
    pthread_cond_broadcast(&r->cv);
    int stop = r->stopping;
    pthread_mutex_unlock(&r->mu);
    return stop;
}

static tk_status relist(k8s_rt *r, char *err, size_t errlen)
{
    long status;
    json_t *list = NULL;
    tk_status st = sbx_k8s_pods_list(&r->c, r->selector, &status, &list, err, errlen);
    if (st == TK_OK && status != 200)
        st = api_refusal("list pods", status, list, err, errlen);
    if (st != TK_OK) {
        json_decref(list);
        return st;
    }
    json_t *pods = json_object();
    size_t i;
    json_t *p;
    pthread_mutex_lock(&r->mu);
    json_decref(r->pods);
    r->pods = pods;
    json_array_foreach(json_object_get(list, "items"), i, p)
    {
        cache_put_locked(r, p);
    }
    snprintf(r->rv, sizeof r->rv, "%s",
             tk_json_str_or(json_object_get(list, "metadata"), "resourceVersion", ""));
    r->synced = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    json_decref(list);
    return TK_OK;
}

static void *watch_main(void *arg)
{
    k8s_rt *r = arg;
    tk_log_set_request_id(NULL);
    int64_t pause_ms = 0;
    for (;;) {
        pthread_mutex_lock(&r->mu);
        if (pause_ms && !r->stopping)
            tk_cond_wait_ms(&r->cv, &r->mu, pause_ms);
        int stop = r->stopping, synced = r->synced;
        char rv[sizeof r->rv];
        snprintf(rv, sizeof rv, "%s", r->rv);
        pthread_mutex_unlock(&r->mu);
        if (stop)
            break;
        char err[1024];
        if (!synced) {
            if (relist(r, err, sizeof err) != TK_OK) {
                tk_warn("k8s", "msg=\"cannot list the pool's pods\" error=\"%s\"", err);
                pause_ms = pause_ms ? (pause_ms * 2 > 10000 ? 10000 : pause_ms * 2) : 500;
                continue;
            }
            pause_ms = 0; /* in step again: watch at once */
            continue;
        }
        long status = 0;
        tk_status st = sbx_k8s_pods_watch(&r->c, r->selector, rv, WATCH_TIMEOUT_S, on_event, r,
                                          &status, err, sizeof err);
        pthread_mutex_lock(&r->mu);
        stop = r->stopping;
        if (status == 410 || (st != TK_OK && st != TK_AGAIN))
            r->synced = 0;
        pthread_mutex_unlock(&r->mu);
        if (stop)
            break;
        if (st != TK_OK && st != TK_AGAIN) {
            tk_warn("k8s", "msg=\"the watch broke; listing again\" error=\"%s\"", err);
            pause_ms = pause_ms ? (pause_ms * 2 > 10000 ? 10000 : pause_ms * 2) : 500;
        } else if (st == TK_OK && status != 200 && status != 410) {
            tk_warn("k8s", "msg=\"the watch was refused\" status=%ld", status);
            pause_ms = 2000;
        } else {
            pause_ms = 0;
        }
    }
    return NULL;
}

/* Waits (mu held) until the cache is in step, at most ms. */
static int wait_synced_locked(k8s_rt *r, int64_t ms)
{
    int64_t end = tk_mono_ms() + ms;
    while (!r->synced && !r->stopping && tk_mono_ms() < end)
        tk_cond_wait_ms(&r->cv, &r->mu, end - tk_mono_ms());
    return r->synced;
}

/* ---------- the keeper ---------- */

static void delete_pod(k8s_rt *r, const char *name, const char *uid, const char *why)
{
    long status;
    char err[512];
    tk_status st = sbx_k8s_pod_delete(&r->c, name, uid, 1, &status, err, sizeof err);
    if (st != TK_OK)
        tk_warn("k8s", "msg=\"cannot delete a pod\" pod=%s why=\"%s\" error=\"%s\"", name, why,
                err);
    else if (status != 200 && status != 202 && status != 404 && status != 409)
        tk_warn("k8s", "msg=\"cannot delete a pod\" pod=%s why=\"%s\" status=%ld", name, why,
                status);
    else
        tk_info("k8s", "msg=\"pod deleted\" pod=%s why=\"%s\"", name, why);
}

static void *keeper_main(void *arg)
{
    k8s_rt *r = arg;
    tk_log_set_request_id(NULL);
    pthread_mutex_lock(&r->mu);
    while (!r->stopping) {
        tk_cond_wait_ms(&r->cv, &r->mu, 1000);
        if (r->stopping)
            break;
        if (!r->synced || tk_mono_ms() < r->backoff_until)
            continue;
        /* warm pods to drop: another template, or dead */
        json_t *drop = json_array();
        int warm = 0, total = 0;
        const char *name;
        json_t *p;
        json_object_foreach(r->pods, name, p)
        {
            if (terminating(p))
                continue;
            total++;
            const char *pl = label(p, L_POOL);
            if (!pl || strcmp(pl, "warm") != 0)
                continue;
            if (!is_warm(r, p) || dead(p))
                json_array_append(drop, p);
            else
                warm++;
        }
        int64_t want = r->pool_size - warm - r->creating;
        int64_t room = r->pool_max - total - r->creating;
        if (want > room)
            want = room;
        if (want < 0)
            want = 0;
        r->creating += (int)want;
        pthread_mutex_unlock(&r->mu);
        size_t i;
        json_array_foreach(drop, i, p)
        {
            delete_pod(r, meta(p, "name"), meta(p, "uid"),
                       dead(p) ? "a dead warm pod" : "a warm pod of another template");
        }
        json_decref(drop);
        tk_status failed = TK_OK;
        char err[1024] = "";
        for (int64_t k = 0; k < want; k++) {
            char token[SBX_TOKEN_MAX];
            tk_token_hex(token, 32);
            long status;
            json_t *out = NULL;
            tk_status st =
                sbx_k8s_pod_create(&r->c, pod_spec(r, NULL, token), &status, &out, err, sizeof err);
            explicit_bzero(token, sizeof token);
            if (st == TK_OK && status != 201)
                st = api_refusal("create a warm pod", status, out, err, sizeof err);
            pthread_mutex_lock(&r->mu);
            r->creating--;
            if (st == TK_OK)
                cache_put_locked(r, out); /* counted at once, before its ADDED event */
            pthread_mutex_unlock(&r->mu);
            json_decref(out);
            if (st != TK_OK) {
                failed = st;
                pthread_mutex_lock(&r->mu);
                r->creating -= (int)(want - k - 1);
                pthread_mutex_unlock(&r->mu);
                break;
            }
        }
        pthread_mutex_lock(&r->mu);
        if (failed != TK_OK) {
            r->backoff_until = tk_mono_ms() + (failed == TK_EDENIED ? 5000 : 2000);
            if (strcmp(r->keeper_error, err) != 0)
                tk_warn("k8s", "msg=\"cannot fill the warm pool; backing off\" error=\"%s\"", err);
            snprintf(r->keeper_error, sizeof r->keeper_error, "%s", err);
        } else if (want) {
            r->keeper_error[0] = '\0';
        }
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* ---------- start ---------- */

static k8s_inst *instance_new(const char *id)
{
    k8s_inst *in = tk_calloc(1, sizeof *in);
    snprintf(in->base.id, sizeof in->base.id, "%s", id);
    return in;
}

static int by_created(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    int c = strcmp(tk_json_str_or(json_object_get(x, "metadata"), "creationTimestamp", ""),
                   tk_json_str_or(json_object_get(y, "metadata"), "creationTimestamp", ""));
    return c ? c : strcmp(meta(x, "name"), meta(y, "name"));
}

/* Seconds since the pod started (its status.startTime; 0 when unknown). */
static int64_t pod_age_s(const json_t *pod)
{
    const char *t = tk_json_str(json_object_get(pod, "status"), "startTime");
    if (!t)
        t = tk_json_str(json_object_get(pod, "metadata"), "creationTimestamp");
    int64_t ms;
    if (!t || tk_time_parse_rfc3339(t, &ms) != TK_OK)
        return 0;
    int64_t age = (tk_now_ms() - ms) / 1000 + 1;
    return age > 0 ? age : 0;
}

/* The claim: one JSON Patch, a compare-and-swap on the pool label. */
static json_t *claim_patch(const k8s_rt *r, const json_t *pod, const sbx_spec *spec)
{
    char now[40];
    tk_time_rfc3339(tk_now_ms(), now, sizeof now);
    json_t *ops = json_pack(
        "[{s:s,s:s,s:s},{s:s,s:s,s:s},{s:s,s:s,s:s},{s:s,s:s,s:s},{s:s,s:s,s:s},{s:s,s:s,s:s}]",
        "op", "test", "path", "/metadata/labels/sandbox.tusko.io~1pool", "value", "warm", "op",
        "test", "path", "/metadata/uid", "value", meta(pod, "uid"), "op", "replace", "path",
        "/metadata/labels/sandbox.tusko.io~1pool", "value", "claimed", "op", "add", "path",
        "/metadata/labels/sandbox.tusko.io~1id", "value", spec->id, "op", "add", "path",
        "/metadata/labels/sandbox.tusko.io~1claimer", "value", r->instance, "op", "add", "path",
        "/metadata/annotations/sandbox.tusko.io~1claimed", "value", now);
    if (spec->expires_ms) {
        int64_t dl = pod_age_s(pod) + secs_left(spec->expires_ms) + r->grace_s;
        json_t *cur = json_object_get(json_object_get(pod, "spec"), "activeDeadlineSeconds");
        if (!json_is_integer(cur) || dl < json_integer_value(cur))
            json_array_append_new(ops, json_pack("{s:s,s:s,s:I}", "op", "add", "path",
                                                 "/spec/activeDeadlineSeconds", "value",
                                                 (json_int_t)dl));
    }
    return ops;
}

/* Takes a warm pod: *out the claimed pod, or NULL when none could be had. */
/* *api_ns adds the time spent waiting for the API server's answers. */
static tk_status claim_warm(k8s_rt *r, const sbx_spec *spec, json_t **out, int64_t *api_ns,
                            char *err, size_t errlen)
{
    *out = NULL;
    pthread_mutex_lock(&r->mu);
    size_t n = 0, cap = json_object_size(r->pods);
    json_t **cand = tk_calloc(cap ? cap : 1, sizeof *cand);
    const char *name;
    json_t *p;
    json_object_foreach(r->pods, name, p)
    {
        if (is_warm(r, p) && ready(p))
            cand[n++] = json_incref(p);
    }
    pthread_cond_broadcast(&r->cv); /* the keeper tops the pool up */
    pthread_mutex_unlock(&r->mu);
    qsort(cand, n, sizeof *cand, by_created);
    tk_status st = TK_OK;
    for (size_t i = 0; i < n && !*out; i++) {
        const char *pname = meta(cand[i], "name");
        /* a pod another start of ours is claiming now is left to it */
        pthread_mutex_lock(&r->mu);
        int busy = json_object_get(r->claiming, pname) != NULL;
        if (!busy)
            json_object_set_new(r->claiming, pname, json_true());
        pthread_mutex_unlock(&r->mu);
        if (busy)
            continue;
        long status;
        json_t *res = NULL;
        char e[768];
        json_t *patch = claim_patch(r, cand[i], spec);
        int64_t t0 = tk_mono_ns();
        tk_status cs = sbx_k8s_pod_patch(&r->c, pname, "json", patch, &status, &res, e, sizeof e);
        *api_ns += tk_mono_ns() - t0;
        pthread_mutex_lock(&r->mu);
        if (cs == TK_OK && status == 200 && json_is_object(res))
            cache_put_locked(r, res);
        json_object_del(r->claiming, pname);
        pthread_mutex_unlock(&r->mu);
        if (cs != TK_OK) { /* no answer: the API server is away */
            snprintf(err, errlen, "claim a warm pod: %s", e);
            st = TK_ECLOSED;
            json_decref(res);
            break;
        }
        if (status == 200 && json_is_object(res)) {
            *out = res;
            break;
        }
        /* 422: the test failed (someone else claimed it); 409/404: it changed or went */
        tk_info("k8s",
                "msg=\"lost a warm pod to another claim; trying the next\" pod=%s status=%ld",
                meta(cand[i], "name"), status);
        json_decref(res);
    }
    for (size_t i = 0; i < n; i++)
        json_decref(cand[i]);
    free(cand);
    return st;
}

/* Waits for the pod name (uid) to be Ready: *out it then. */
static tk_status wait_ready(k8s_rt *r, const char *name, const char *uid, json_t **out, char *err,
                            size_t errlen)
{
    *out = NULL;
    int64_t end = tk_mono_ms() + r->start_timeout_ms;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        json_t *p = r->synced ? json_object_get(r->pods, name) : NULL;
        if (!r->synced) {
            /* the watch is down: ask */
            pthread_mutex_unlock(&r->mu);
            long status;
            char e[512];
            if (sbx_k8s_pod_get(&r->c, name, &status, &p, e, sizeof e) != TK_OK || status != 200) {
                json_decref(p);
                p = NULL;
            }
            pthread_mutex_lock(&r->mu);
            if (p && (!meta(p, "uid") || strcmp(meta(p, "uid"), uid) != 0)) {
                json_decref(p);
                p = NULL;
            }
            if (p && (ready(p) || dead(p))) {
                pthread_mutex_unlock(&r->mu);
                if (ready(p)) {
                    *out = p;
                    return TK_OK;
                }
                snprintf(err, errlen, "the pod %s ended before it was ready (phase %s)", name,
                         phase(p));
                json_decref(p);
                return TK_ERROR;
            }
            json_decref(p);
            p = NULL;
        } else if (p && strcmp(tk_json_str_or(json_object_get(p, "metadata"), "uid", ""), uid)) {
            p = NULL;
        }
        if (p && ready(p)) {
            *out = json_incref(p);
            pthread_mutex_unlock(&r->mu);
            return TK_OK;
        }
        if (p && dead(p)) {
            snprintf(err, errlen, "the pod %s ended before it was ready (phase %s%s%s)", name,
                     phase(p), tk_json_str(json_object_get(p, "status"), "reason") ? ", " : "",
                     tk_json_str_or(json_object_get(p, "status"), "reason", ""));
            pthread_mutex_unlock(&r->mu);
            return TK_ERROR;
        }
        int64_t left = end - tk_mono_ms();
        if (left <= 0 || r->stopping) {
            snprintf(err, errlen,
                     "the pod %s was not ready within K8S_SANDBOX_START_TIMEOUT (%lld ms)%s", name,
                     (long long)r->start_timeout_ms, r->stopping ? " (stopping)" : "");
            pthread_mutex_unlock(&r->mu);
            return TK_ETIMEOUT;
        }
        tk_cond_wait_ms(&r->cv, &r->mu, left < 250 ? left : 250);
    }
}

/* The count of this pool's live pods (the cap of K8S_SANDBOX_POOL_MAX). */
static int live_pods_locked(k8s_rt *r)
{
    int n = 0;
    const char *name;
    json_t *p;
    json_object_foreach(r->pods, name, p)
    {
        if (!terminating(p))
            n++;
    }
    return n + r->creating;
}

static tk_status create_cold(k8s_rt *r, const sbx_spec *spec, json_t **out, char *err,
                             size_t errlen)
{
    *out = NULL;
    pthread_mutex_lock(&r->mu);
    int full = r->synced && live_pods_locked(r) >= r->pool_max;
    pthread_mutex_unlock(&r->mu);
    if (full) {
        snprintf(err, errlen, "the pool already has K8S_SANDBOX_POOL_MAX (%lld) pods",
                 (long long)r->pool_max);
        return TK_EDENIED;
    }
    long status;
    json_t *made = NULL;
    tk_status st = sbx_k8s_pod_create(&r->c, pod_spec(r, spec, spec->execd_token), &status, &made,
                                      err, errlen);
    if (st != TK_OK && st != TK_EINVAL)
        st = TK_ECLOSED; /* no answer: the API server is away */
    else if (st == TK_OK && status != 201)
        st = api_refusal("create a pod", status, made, err, errlen);
    if (st != TK_OK) {
        json_decref(made);
        return st;
    }
    char name[254], uid[64];
    snprintf(name, sizeof name, "%s",
             tk_json_str_or(json_object_get(made, "metadata"), "name", ""));
    snprintf(uid, sizeof uid, "%s", tk_json_str_or(json_object_get(made, "metadata"), "uid", ""));
    pthread_mutex_lock(&r->mu);
    cache_put_locked(r, made);
    pthread_mutex_unlock(&r->mu);
    json_decref(made);
    st = wait_ready(r, name, uid, out, err, errlen);
    if (st != TK_OK)
        delete_pod(r, name, uid, "a cold pod that did not become ready");
    return st;
}

/* The entrypoint as one bash word list, each argument single-quoted: it runs
 * in the sandbox, as the sandbox, which may run anything anyway. */
static char *quote_argv(const char *const *argv)
{
    tk_buf b;
    tk_buf_init(&b, 1 << 20);
    for (size_t i = 0; argv[i]; i++) {
        if (i)
            tk_buf_append_str(&b, " ");
        tk_buf_append_str(&b, "'");
        for (const char *s = argv[i]; *s; s++) {
            if (*s == '\'')
                tk_buf_append_str(&b, "'\\''");
            else
                tk_buf_append(&b, s, 1);
        }
        tk_buf_append_str(&b, "'");
    }
    char *out = tk_strdup(tk_buf_cstr(&b));
    tk_buf_free(&b);
    return out;
}

static tk_status run_entrypoint(k8s_inst *in, const char *token, const char *const *argv,
                                int64_t *execd_ns, char *err, size_t errlen)
{
    char url[128], hdr[SBX_TOKEN_MAX + 32];
    snprintf(url, sizeof url, "http://%s/command", in->base.tcp);
    snprintf(hdr, sizeof hdr, "X-EXECD-ACCESS-TOKEN: %s", token);
    const char *headers[] = {hdr, "Content-Type: application/json", NULL};
    char *cmd = quote_argv(argv);
    json_t *bj = tk_json_obj("command", json_string(cmd), "background", json_true(), NULL);
    char *body = tk_json_dumps(bj);
    json_decref(bj);
    free(cmd);
    tk_httpc_req req = {.method = "POST",
                        .url = url,
                        .headers = headers,
                        .body = body,
                        .body_len = strlen(body),
                        .timeout_ms = EXECD_CALL_MS,
                        .connect_timeout_ms = 5000,
                        .max_response = 64 << 10};
    tk_httpc_resp resp;
    int64_t t0 = tk_mono_ns();
    tk_status st = tk_httpc_do(&req, &resp);
    *execd_ns += tk_mono_ns() - t0;
    free(body);
    explicit_bzero(hdr, sizeof hdr);
    if (st != TK_OK || resp.status != 200) {
        snprintf(err, errlen, "start the entrypoint in %s: %s", in->pod,
                 st != TK_OK ? resp.error : "execd refused it");
        if (st == TK_OK)
            st = TK_ERROR;
    }
    tk_httpc_resp_free(&resp);
    return st;
}

static int limits_default(const k8s_rt *r, const sbx_limits *l)
{
    return l->cpu_millis == r->pool_limits.cpu_millis &&
           l->memory_bytes == r->pool_limits.memory_bytes;
}

static tk_status k8s_start(sbx_runtime *rt, const sbx_spec *spec, sbx_instance **out, char *err,
                           size_t errlen)
{
    k8s_rt *r = RT(rt);
    *out = NULL;
    if (spec->volumes && spec->volumes->n) { /* never started without what was asked */
        snprintf(err, errlen, "volumes are not supported by the kubernetes runtime yet");
        return TK_EINVAL;
    }
    json_t *pod = NULL;
    int warm = 0;
    tk_status st = TK_OK;
    int64_t api_ns = 0, execd_ns = 0;
    if (!spec->env && limits_default(r, &spec->limits)) {
        st = claim_warm(r, spec, &pod, &api_ns, err, errlen);
        if (st != TK_OK)
            return st;
        warm = pod != NULL;
    }
    if (!pod) {
        int64_t t0 = tk_mono_ns();
        st = create_cold(r, spec, &pod, err, errlen);
        api_ns += tk_mono_ns() - t0; /* the create and the wait for Ready: the cluster's */
        if (st != TK_OK)
            return st;
    }
    k8s_inst *in = instance_new(spec->id);
    in->base.warm = warm;
    snprintf(in->pod, sizeof in->pod, "%s",
             tk_json_str_or(json_object_get(pod, "metadata"), "name", ""));
    snprintf(in->uid, sizeof in->uid, "%s",
             tk_json_str_or(json_object_get(pod, "metadata"), "uid", ""));
    if (pod_endpoint(r, pod, in->base.tcp, sizeof in->base.tcp) != 0) {
        snprintf(err, errlen, "the pod %s has no usable IP", in->pod);
        st = TK_ERROR;
    } else if (warm && pod_token(pod, in->base.token, sizeof in->base.token) != 0) {
        snprintf(err, errlen, "the warm pod %s has no execd token in its env", in->pod);
        st = TK_ERROR;
    }
    json_decref(pod);
    if (st == TK_OK && spec->entrypoint && spec->entrypoint[0])
        st = run_entrypoint(in, warm ? in->base.token : spec->execd_token, spec->entrypoint,
                            &execd_ns, err, errlen);
    if (st != TK_OK) {
        delete_pod(r, in->pod, in->uid, "a sandbox that could not start");
        explicit_bzero(in->base.token, sizeof in->base.token);
        free(in);
        return st;
    }
    /* the time spent waiting on the cluster (the API server's answers; cold, the
     * pod's start too) and on execd, so the rest is ours (bench/acquire) */
    tk_info("k8s",
            "msg=\"sandbox pod ready\" cluster_ms=%.2f execd_ms=%.2f id=%s pod=%s how=%s at=%s",
            (double)api_ns / 1e6, (double)execd_ns / 1e6, spec->id, in->pod, warm ? "warm" : "cold",
            in->base.tcp);
    *out = &in->base;
    return TK_OK;
}

static tk_status k8s_claim(sbx_runtime *rt, sbx_instance *in, const sbx_spec *spec, char *err,
                           size_t errlen)
{
    snprintf(err, errlen, "the kubernetes runtime keeps its own warm pool (no service pool)");
    return TK_ERROR;
}

static tk_status k8s_pause(sbx_runtime *rt, sbx_instance *in, char *err, size_t errlen)
{
    snprintf(err, errlen,
             "the kubernetes runtime cannot pause a sandbox (a Pod cannot be frozen "
             "through the API)");
    return TK_EDENIED;
}

static void k8s_teardown(sbx_runtime *rt, sbx_instance *inst)
{
    k8s_inst *in = KI(inst);
    if (in->pod[0])
        delete_pod(RT(rt), in->pod, in->uid[0] ? in->uid : NULL, "sandbox released");
}

static void k8s_release(sbx_instance *in)
{
    explicit_bzero(in->token, sizeof in->token);
    free(KI(in));
}

static int k8s_alive(sbx_runtime *rt, sbx_instance *inst)
{
    k8s_rt *r = RT(rt);
    k8s_inst *in = KI(inst);
    pthread_mutex_lock(&r->mu);
    int live = 1; /* while the cache is not in step: no verdict */
    if (r->synced) {
        json_t *p = json_object_get(r->pods, in->pod);
        const char *uid = p ? meta(p, "uid") : NULL;
        live = p && uid && strcmp(uid, in->uid) == 0 && !dead(p);
    }
    pthread_mutex_unlock(&r->mu);
    return live;
}

static json_t *k8s_save(sbx_instance *inst)
{
    k8s_inst *in = KI(inst);
    return tk_json_obj("pod", json_string(in->pod), "uid", json_string(in->uid), "execd",
                       json_string(in->base.tcp), NULL);
}

static tk_status k8s_attach(sbx_runtime *rt, const char *id, const json_t *saved, int paused,
                            sbx_instance **out, char *err, size_t errlen)
{
    k8s_rt *r = RT(rt);
    *out = NULL;
    pthread_mutex_lock(&r->mu);
    if (!wait_synced_locked(r, 5000)) {
        pthread_mutex_unlock(&r->mu);
        snprintf(err, errlen, "attach: the API server does not answer (the pods are unknown)");
        return TK_ERROR;
    }
    json_t *found = NULL;
    const char *name;
    json_t *p;
    json_object_foreach(r->pods, name, p)
    {
        const char *pid = label(p, L_ID);
        if (claimed_by_us(r, p) && pid && strcmp(pid, id) == 0 && !terminating(p)) {
            found = json_incref(p);
            break;
        }
    }
    pthread_mutex_unlock(&r->mu);
    if (!found) {
        snprintf(err, errlen, "attach: no pod is labelled " L_ID "=%s", id);
        return TK_ENOENT;
    }
    tk_status st = TK_OK;
    k8s_inst *in = instance_new(id);
    snprintf(in->pod, sizeof in->pod, "%s", meta(found, "name"));
    snprintf(in->uid, sizeof in->uid, "%s",
             tk_json_str_or(json_object_get(found, "metadata"), "uid", ""));
    if (!ready(found)) {
        snprintf(err, errlen, "attach: the pod %s is not ready (phase %s)", in->pod, phase(found));
        st = TK_ENOENT;
    } else if (pod_endpoint(r, found, in->base.tcp, sizeof in->base.tcp) != 0) {
        snprintf(err, errlen, "attach: the pod %s has no usable IP", in->pod);
        st = TK_ENOENT;
    }
    const char *saved_pod = tk_json_str(saved, "pod");
    if (st == TK_OK && saved_pod && strcmp(saved_pod, in->pod) != 0)
        tk_warn("k8s",
                "msg=\"the pod labelled with a sandbox is not the one recorded; using the "
                "labelled one\" id=%s recorded=%s labelled=%s",
                id, saved_pod, in->pod);
    json_decref(found);
    if (st != TK_OK) {
        /* the service drops the record; the pod goes with the sweep */
        free(in);
        return st;
    }
    *out = &in->base;
    return TK_OK;
}

static int kept(const char *id, const char *const *keep, size_t n)
{
    for (size_t i = 0; id && i < n; i++)
        if (strcmp(id, keep[i]) == 0)
            return 1;
    return 0;
}

static void k8s_sweep(sbx_runtime *rt, const char *const *keep, size_t n)
{
    k8s_rt *r = RT(rt);
    pthread_mutex_lock(&r->mu);
    if (!wait_synced_locked(r, 5000)) {
        pthread_mutex_unlock(&r->mu);
        tk_error("k8s", "msg=\"cannot sweep leftover pods: the API server does not answer\"");
        return;
    }
    json_t *drop = json_array();
    const char *name;
    json_t *p;
    json_object_foreach(r->pods, name, p)
    {
        if (claimed_by_us(r, p) && !terminating(p) && !kept(label(p, L_ID), keep, n))
            json_array_append(drop, p);
    }
    pthread_mutex_unlock(&r->mu);
    size_t i;
    json_array_foreach(drop, i, p)
    {
        tk_info("k8s", "msg=\"deleting a claimed pod no sandbox knows\" pod=%s id=%s",
                meta(p, "name"), label(p, L_ID) ? label(p, L_ID) : "?");
        delete_pod(r, meta(p, "name"), meta(p, "uid"), "orphan");
    }
    json_decref(drop);
}

static const char *k8s_describe(sbx_runtime *rt)
{
    return RT(rt)->desc;
}

/* Stops the threads that were started and frees r (its client set up). */
static void rt_destroy(k8s_rt *r)
{
    pthread_mutex_lock(&r->mu);
    r->stopping = 1;
    r->cancel = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    if (r->threads & 2)
        pthread_join(r->keeper_thr, NULL);
    if (r->threads & 1)
        pthread_join(r->watch_thr, NULL);
    json_decref(r->pods);
    json_decref(r->claiming);
    json_decref(r->node_selector);
    json_decref(r->tolerations);
    sbx_k8s_client_free(&r->c);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}

static void k8s_free(sbx_runtime *rt)
{
    if (!rt)
        return;
    rt_destroy(RT(rt));
    free(rt);
}

static const sbx_runtime_ops k8s_ops = {
    .name = "kubernetes",
    .start = k8s_start,
    .claim = k8s_claim,
    .pause = k8s_pause,
    .resume = k8s_pause,
    .teardown = k8s_teardown,
    .release = k8s_release,
    .alive = k8s_alive,
    .save = k8s_save,
    .attach = k8s_attach,
    .sweep = k8s_sweep,
    .describe = k8s_describe,
    .free = k8s_free,
};

/* ---------- settings ---------- */

static char *opt_server, *opt_ca, *opt_token_file, *opt_ns, *opt_image, *opt_command,
    *opt_runtime_class, *opt_node_selector, *opt_tolerations, *opt_pool, *opt_instance;
static int64_t opt_pool_size, opt_pool_max, opt_grace, opt_start_timeout, opt_port;

/* A label value: at most 63 of [A-Za-z0-9._-], alphanumeric at both ends. */
static int label_value_ok(const char *s, size_t len)
{
    if (len == 0 || len > 63)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        int alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && ((i == 0 || i == len - 1) || (c != '.' && c != '_' && c != '-')))
            return 0;
    }
    return 1;
}

static int check_label_value(const char *v, char *msg, size_t msglen)
{
    if (!label_value_ok(v, strlen(v))) {
        snprintf(msg, msglen,
                 "is not a label value (1-63 of A-Z a-z 0-9 . _ -, alphanumeric at "
                 "both ends)");
        return 1;
    }
    return 0;
}

/* "key=value,key2=value2" → an object; keys may carry a prefix ("a.b/c"). */
static json_t *parse_node_selector(const char *v, char *msg, size_t msglen)
{
    json_t *o = json_object();
    const char *s = v;
    while (*s) {
        const char *end = strchr(s, ',');
        size_t n = end ? (size_t)(end - s) : strlen(s);
        const char *eq = memchr(s, '=', n);
        size_t kl = eq ? (size_t)(eq - s) : 0;
        char key[320];
        int ok = eq && kl > 0 && kl < sizeof key && label_value_ok(eq + 1, n - kl - 1);
        for (size_t i = 0; ok && i < kl; i++) {
            char c = s[i];
            ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '-' || c == '/';
        }
        if (!ok) {
            snprintf(msg, msglen, "is not a list of key=value (labels), comma-separated");
            json_decref(o);
            return NULL;
        }
        memcpy(key, s, kl);
        key[kl] = '\0';
        char val[64];
        snprintf(val, sizeof val, "%.*s", (int)(n - kl - 1), eq + 1);
        json_object_set_new(o, key, json_string(val));
        s += n + (end ? 1 : 0);
    }
    return o;
}

static int check_node_selector(const char *v, char *msg, size_t msglen)
{
    json_t *o = parse_node_selector(v, msg, msglen);
    json_decref(o);
    return o ? 0 : 1;
}

/* A JSON array of tolerations, each with only the fields Kubernetes knows. */
static json_t *parse_tolerations(const char *v, char *msg, size_t msglen)
{
    char jerr[128];
    json_t *a = tk_json_parse(v, strlen(v), 64 << 10, jerr, sizeof jerr);
    size_t i;
    json_t *t;
    int ok = json_is_array(a);
    json_array_foreach(a, i, t)
    {
        const char *k;
        json_t *f;
        ok = ok && json_is_object(t);
        json_object_foreach(t, k, f)
        {
            if (strcmp(k, "tolerationSeconds") == 0)
                ok = ok && json_is_integer(f);
            else
                ok = ok &&
                     (strcmp(k, "key") == 0 || strcmp(k, "operator") == 0 ||
                      strcmp(k, "value") == 0 || strcmp(k, "effect") == 0) &&
                     json_is_string(f);
        }
    }
    if (!ok) {
        snprintf(msg, msglen,
                 "is not a JSON array of tolerations ({key, operator, value, effect, "
                 "tolerationSeconds})");
        json_decref(a);
        return NULL;
    }
    return a;
}

static int check_tolerations(const char *v, char *msg, size_t msglen)
{
    json_t *a = parse_tolerations(v, msg, msglen);
    json_decref(a);
    return a ? 0 : 1;
}

static tk_setting k8s_settings[] = {
    {"K8S_API_SERVER", "k8s-api-server", TK_SET_STR, NULL,
     "kubernetes runtime: the API server (https://); default: the in-cluster one "
     "(KUBERNETES_SERVICE_HOST/PORT and the service-account token and CA)",
     .out = &opt_server},
    {"K8S_CA_FILE", "k8s-ca-file", TK_SET_STR, NULL,
     "kubernetes runtime: the CA bundle the API server is verified against (with "
     "K8S_API_SERVER; default the system's)",
     .out = &opt_ca},
    {"K8S_TOKEN_FILE", "k8s-token-file", TK_SET_STR, NULL,
     "kubernetes runtime: a file holding the bearer token (with K8S_API_SERVER; read again when "
     "it changes)",
     .out = &opt_token_file},
    {"K8S_SANDBOX_NAMESPACE", "k8s-sandbox-namespace", TK_SET_STR, "tusko-sandboxes",
     "kubernetes runtime: the namespace of the sandbox pods", .out = &opt_ns},
    {"K8S_SANDBOX_IMAGE", "k8s-sandbox-image", TK_SET_STR, "tusko-stack:local",
     "kubernetes runtime: the image of a sandbox pod (a registry reference holding the sandbox "
     "root filesystem and tusko-execd)",
     .out = &opt_image},
    {"K8S_SANDBOX_EXECD_COMMAND", "k8s-sandbox-execd-command", TK_SET_STR,
     "/usr/local/bin/tusko-execd", "kubernetes runtime: execd's path in that image",
     .out = &opt_command},
    {"K8S_SANDBOX_WARM_POOL_SIZE", "k8s-sandbox-warm-pool-size", TK_SET_INT, "2",
     "kubernetes runtime: ready pods kept waiting (in place of SANDBOX_WARM_POOL_SIZE)", .min = 0,
     .max = 256, .out = &opt_pool_size},
    {"K8S_SANDBOX_POOL_MAX", "k8s-sandbox-pool-max", TK_SET_INT, "64",
     "kubernetes runtime: the most pods of the pool at once, warm and claimed", .min = 1,
     .max = 100000, .out = &opt_pool_max},
    {"K8S_SANDBOX_POOL", "k8s-sandbox-pool", TK_SET_STR, "default",
     "kubernetes runtime: the pool's name (label sandbox.tusko.io/service); sandboxd processes "
     "with one name share its warm pods",
     .out = &opt_pool, .check = check_label_value},
    {"K8S_SANDBOX_INSTANCE", "k8s-sandbox-instance", TK_SET_STR, "sandboxd",
     "kubernetes runtime: this sandboxd's name among those sharing a pool (label "
     "sandbox.tusko.io/claimer; a restart takes back the pods of its name); distinct per replica",
     .out = &opt_instance, .check = check_label_value},
    {"K8S_SANDBOX_RUNTIME_CLASS", "k8s-sandbox-runtime-class", TK_SET_STR, NULL,
     "kubernetes runtime: runtimeClassName of the pods (gvisor, kata...; unset: the cluster's "
     "default)",
     .out = &opt_runtime_class},
    {"K8S_SANDBOX_NODE_SELECTOR", "k8s-sandbox-node-selector", TK_SET_STR, NULL,
     "kubernetes runtime: nodeSelector of the pods, key=value,key2=value2",
     .out = &opt_node_selector, .check = check_node_selector},
    {"K8S_SANDBOX_TOLERATIONS", "k8s-sandbox-tolerations", TK_SET_STR, NULL,
     "kubernetes runtime: tolerations of the pods, a JSON array "
     "([{\"key\":\"sandbox\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}])",
     .out = &opt_tolerations, .check = check_tolerations},
    {"K8S_SANDBOX_DEADLINE_GRACE", "k8s-sandbox-deadline-grace", TK_SET_DURATION, "24h",
     "kubernetes runtime: a claimed pod's activeDeadlineSeconds is its age + the sandbox's "
     "timeout + this (renewals cannot raise it: the kubelet's backstop)",
     .min = 0, .max = 30LL * 86400 * 1000, .out = &opt_grace},
    {"K8S_SANDBOX_START_TIMEOUT", "k8s-sandbox-start-timeout", TK_SET_DURATION, "120s",
     "kubernetes runtime: how long a cold pod may take to be Ready", .min = 1000,
     .max = 3600 * 1000, .out = &opt_start_timeout},
    {"K8S_SANDBOX_EXECD_PORT", "k8s-sandbox-execd-port", TK_SET_INT, "44772",
     "kubernetes runtime: execd's port in the pod", .min = 1, .max = 65535, .out = &opt_port},
};

static unsigned long long fnv1a(unsigned long long h, const char *s)
{
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h ^ 0xff;
}

static sbx_runtime *k8s_open(const sbx_runtime_config *cfg, char *err, size_t errlen)
{
    k8s_rt *r = tk_calloc(1, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->pods = json_object();
    r->claiming = json_object();
    char e[768];
    tk_status st;
    if (opt_server && *opt_server)
        st = sbx_k8s_client_init(&r->c, opt_server, opt_ca, opt_token_file, opt_ns, e, sizeof e);
    else
        st = sbx_k8s_client_in_cluster(&r->c, getenv("KUBERNETES_SERVICE_HOST"),
                                       getenv("KUBERNETES_SERVICE_PORT"), K8S_SA_DIR, e, sizeof e);
    if (st == TK_OK && !(opt_server && *opt_server)) {
        /* the in-cluster namespace is sandboxd's own; the pods go to K8S_SANDBOX_NAMESPACE */
        char server[512], ca[512], tok[512];
        snprintf(server, sizeof server, "%s", r->c.server);
        snprintf(ca, sizeof ca, "%s", r->c.ca_file);
        snprintf(tok, sizeof tok, "%s", r->c.token_file);
        sbx_k8s_client_free(&r->c);
        st = sbx_k8s_client_init(&r->c, server, ca, tok, opt_ns, e, sizeof e);
    }
    if (st != TK_OK) {
        snprintf(err, errlen, "kubernetes runtime: %s", e);
        json_decref(r->pods);
        json_decref(r->claiming);
        pthread_mutex_destroy(&r->mu);
        pthread_cond_destroy(&r->cv);
        free(r);
        return NULL;
    }
    r->c.cancel = &r->cancel;
    snprintf(r->image, sizeof r->image, "%s", opt_image);
    snprintf(r->command, sizeof r->command, "%s", opt_command);
    snprintf(r->runtime_class, sizeof r->runtime_class, "%s",
             opt_runtime_class ? opt_runtime_class : "");
    snprintf(r->pool, sizeof r->pool, "%s", opt_pool);
    snprintf(r->instance, sizeof r->instance, "%s", opt_instance);
    if (opt_node_selector && *opt_node_selector)
        r->node_selector = parse_node_selector(opt_node_selector, e, sizeof e);
    if (opt_tolerations && *opt_tolerations)
        r->tolerations = parse_tolerations(opt_tolerations, e, sizeof e);
    r->pool_size = opt_pool_size;
    r->pool_max = opt_pool_max;
    r->grace_s = opt_grace / 1000;
    r->start_timeout_ms = opt_start_timeout;
    r->port = (int)opt_port;
    r->ws_bytes = cfg->workspace_bytes;
    r->tmp_bytes = cfg->tmp_bytes;
    r->pool_limits = cfg->pool_limits;
    snprintf(r->selector, sizeof r->selector, L_MANAGED "=" MANAGED_BY "," L_SERVICE "=%s",
             r->pool);
    /* the template: what a warm pod must match to be handed out as it is */
    char *ns = r->node_selector ? tk_json_dumps(r->node_selector) : tk_strdup("");
    char *tol = r->tolerations ? tk_json_dumps(r->tolerations) : tk_strdup("");
    char t[256];
    snprintf(t, sizeof t, "%lld/%lld/%lld/%lld/%d", (long long)r->pool_limits.cpu_millis,
             (long long)r->pool_limits.memory_bytes, (long long)r->ws_bytes,
             (long long)r->tmp_bytes, r->port);
    unsigned long long h = 1469598103934665603ULL;
    h = fnv1a(h, r->image);
    h = fnv1a(h, r->command);
    h = fnv1a(h, r->runtime_class);
    h = fnv1a(h, ns);
    h = fnv1a(h, tol);
    h = fnv1a(h, t);
    free(ns);
    free(tol);
    snprintf(r->template_hash, sizeof r->template_hash, "%016llx", h);
    /* the first list now, so attach() and sweep() see the pods; an API server
     * that does not answer is not fatal (the watch thread keeps trying) */
    if (relist(r, e, sizeof e) != TK_OK)
        tk_warn("k8s", "msg=\"the API server does not answer yet\" error=\"%s\"", e);
    snprintf(r->desc, sizeof r->desc,
             "kubernetes server=%s namespace=%s image=%s pool=%s instance=%s warm_pool=%lld "
             "pool_max=%lld template=%s runtime_class=%s execd_port=%d network=%s",
             r->c.server, r->c.ns, r->image, r->pool, r->instance, (long long)r->pool_size,
             (long long)r->pool_max, r->template_hash,
             r->runtime_class[0] ? r->runtime_class : "(default)", r->port,
             cfg->egress ? "NetworkPolicy (SANDBOX_NETWORK=proxy is not applied to pods)"
                         : "NetworkPolicy");
    if (pthread_create(&r->watch_thr, NULL, watch_main, r) == 0)
        r->threads |= 1;
    if (pthread_create(&r->keeper_thr, NULL, keeper_main, r) == 0)
        r->threads |= 2;
    if (r->threads != 3) {
        snprintf(err, errlen, "kubernetes runtime: cannot start its threads");
        rt_destroy(r);
        return NULL;
    }
    sbx_runtime *rt = tk_calloc(1, sizeof *rt);
    rt->ops = &k8s_ops;
    rt->impl = r;
    return rt;
}

const sbx_runtime_kind sbx_runtime_k8s = {
    .name = "kubernetes",
    .settings = k8s_settings,
    .nsettings = TK_ARRAY_LEN(k8s_settings),
    .open = k8s_open,
};
