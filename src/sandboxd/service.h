/*
 * service.h — the lifecycle service: every sandbox this process knows, the
 * operations the API offers on them, over one runtime (runtime.h). The warm
 * pool (pool.h) and the reaper (reaper.h) are threads that work on the service
 * through the _locked functions below; main.c starts them, and
 * sbx_service_close stops them. Nothing here calls into them.
 *
 * Locking: one mutex (mu) guards the list and every sandbox's fields. Runtime
 * calls (start, claim, pause, destroy) run without it, on a sandbox marked busy,
 * so a slow runtime never blocks lookups. Sandboxes returned by the service are
 * references: give them back with sbx_service_unref.
 */
#ifndef SBX_SERVICE_H
#define SBX_SERVICE_H

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>

#include "sandboxd/image.h"
#include "sandboxd/limits.h"
#include "sandboxd/runtime.h"
#include "sandboxd/sandbox.h"
#include "sandboxd/volume.h"

typedef struct {
    const char *state_dir; /* absolute */
    const char *runtime;   /* "native" */
    sbx_runtime_config rtc;
    int64_t pool_size;
    int64_t idle_ttl_ms;   /* 0: never reaped for idleness */
    int64_t min_timeout_s; /* bounds of a request's timeout */
    int64_t max_timeout_s;
    int64_t max_sandboxes;     /* live sandboxes at once (pool members not counted) */
    int64_t proxy_per_sandbox; /* proxied requests in flight to one sandbox; 0: no limit */
    int64_t tombstone_ms;      /* how long Terminated sandboxes stay visible */
    sbx_limits_policy policy;
    const char *pool_name; /* extensions.poolRef that names our pool */
    /* A refill waits until the service has been quiet this long (no create,
     * delete, proxied request begun or ended), at most pool_refill_max_ms after
     * the pool fell short, and not at all when the pool is empty (pool.c). */
    int64_t pool_refill_quiet_ms;
    int64_t pool_refill_max_ms;
    const char *host_volume_allow; /* SANDBOX_HOST_VOLUME_ALLOW ("" refuses host volumes) */
} sbx_service_config;

typedef struct sbx_service {
    pthread_mutex_t mu;
    pthread_cond_t pool_cv;   /* the pool thread waits here */
    pthread_cond_t reaper_cv; /* the reaper waits here */
    sbx_sandbox *list;
    sbx_service_config cfg;
    char state_dir[4096];
    sbx_runtime *rt; /* NULL when the runtime could not start (rt_error says why) */
    char rt_error[1024];
    sbx_image img;
    int img_ok;
    int stopping;
    int pool_ready; /* pool members ready to hand out */
    int pool_starting;
    int64_t pool_backoff_until;
    int64_t pool_short_since;       /* tk_mono_ms() when the pool fell short; 0: it is not */
    int64_t last_activity;          /* tk_mono_ms() of the last create, delete or proxied request */
    pthread_t pool_thr, reaper_thr; /* started by sbx_pool_start, sbx_reaper_start */
    int pool_started, reaper_started;
} sbx_service;

/* An operation's outcome for the API: HTTP status, error code and message. */
typedef struct {
    int status;
    const char *code;
    char message[512];
} sbx_service_result;

/* What a create request asks for, validated by the API. Borrowed JSON. */
typedef struct {
    const char *image;
    const json_t *entrypoint; /* array of strings, or NULL */
    const json_t *env;        /* object of strings, or NULL */
    const json_t *metadata;   /* object of strings, or NULL */
    sbx_limits limits;
    int64_t timeout_s; /* 0: no expiry */
    int64_t renew_extend_s;
    sbx_volumes *volumes; /* checked volumes (the caller frees them), or NULL */
    sbx_netpol *netpol;   /* networkPolicy (taken by a create that succeeds), or NULL */
} sbx_service_create_req;

/* Opens the runtime, recovers the sandboxes on disk and removes half-made
 * ones (the pool and the reaper are started by the caller). A runtime that cannot start is not
 * fatal: the service serves, creates answer 503 with the reason (rt_error). NULL only when the
 * state directory cannot be used. */
sbx_service *sbx_service_open(const sbx_service_config *cfg, char *err, size_t errlen);
/* Stops the pool and reaper threads (when started), destroys the pool members; running sandboxes
 * are left running (a restart finds them again). */
void sbx_service_close(sbx_service *svc);

sbx_sandbox *sbx_service_get(sbx_service *svc, const char *id);
void sbx_service_unref(sbx_service *svc, sbx_sandbox *s);

/* Creates (from the pool when it can). On success *out is a reference and
 * *from_pool says whether a warm sandbox was used. */
tk_status sbx_service_create(sbx_service *svc, const sbx_service_create_req *req, sbx_sandbox **out,
                             int *from_pool, sbx_service_result *res);
tk_status sbx_service_delete(sbx_service *svc, const char *id, sbx_service_result *res);

/* The egress proxy's question (tk_egress_config.admit) for listener tag
 * "sandbox <id>": whether that sandbox's own policy admits host; a sandbox
 * without one (or an unknown tag) is admitted (the checks already were). */
int sbx_service_egress_admits(sbx_service *svc, const char *tag, const char *host,
                              const tk_ip *addrs, size_t naddrs, char *why, size_t whylen);
tk_status sbx_service_pause(sbx_service *svc, const char *id, sbx_service_result *res);
tk_status sbx_service_resume(sbx_service *svc, const char *id, sbx_service_result *res);
/* New expiry (ms since the epoch); *out_ms the one in force after. */
tk_status sbx_service_renew(sbx_service *svc, const char *id, int64_t expires_ms, int64_t *out_ms,
                            sbx_service_result *res);
/* JSON merge patch of the metadata (validated by the API); *out the sandbox. */
tk_status sbx_service_patch_metadata(sbx_service *svc, const char *id, const json_t *patch,
                                     json_t **out, sbx_service_result *res);

/* The Sandbox JSON of id (NULL with res when unknown). */
json_t *sbx_service_get_json(sbx_service *svc, const char *id, sbx_service_result *res);

typedef struct {
    const sbx_state *states; /* OR; NULL/0: every state but Terminated */
    size_t nstates;
    const char *const *meta_keys;
    const char *const *meta_values;
    size_t nmeta;
    int64_t page, page_size;
} sbx_service_list_query;
json_t *sbx_service_list(sbx_service *svc, const sbx_service_list_query *q);

/* Proxy bookkeeping: begin checks the sandbox can be reached and copies its
 * socket path (counting a request in flight and activity); end ends it. */
tk_status sbx_service_proxy_begin(sbx_service *svc, const char *id, char *sock, size_t socklen,
                                  sbx_service_result *res);
void sbx_service_proxy_end(sbx_service *svc, const char *id);

/* For the pool and the reaper (pool.c, reaper.c). */
/* Notes activity (mu held): a pool refill waits for a quiet moment. */
void sbx_service_touch_locked(sbx_service *svc);
void sbx_service_save_locked(sbx_service *svc, sbx_sandbox *s);
sbx_sandbox *sbx_service_new_locked(sbx_service *svc, sbx_state st);
void sbx_service_unlink_locked(sbx_service *svc, sbx_sandbox *s);
/* Destroys s's instance (s busy, mu not held) and records the final state. */
void sbx_service_finish(sbx_service *svc, sbx_sandbox *s, sbx_state final, const char *reason,
                        const char *message);

#endif
