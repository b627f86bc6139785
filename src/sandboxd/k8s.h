/*
 * k8s.h — a small client for the Kubernetes core/v1 Pod API (over tk_httpc,
 * parsed with jansson), for the kubernetes sandbox runtime.
 *
 * TLS is always verified: against ca_file when one is given, the system's
 * roots otherwise. The bearer token is read from token_file and read again
 * when the file changes (projected service-account tokens rotate) and after a
 * 401. Every response is capped (K8S_MAX_RESPONSE, a watch event at
 * K8S_MAX_EVENT). Safe to use from several threads at once.
 */
#ifndef SBX_K8S_H
#define SBX_K8S_H

#include <jansson.h>
#include <pthread.h>
#include <stddef.h>
#include <time.h>

#include "lib/common.h"

#define K8S_MAX_RESPONSE (16u << 20)
#define K8S_MAX_EVENT    (1u << 20)
#define K8S_SA_DIR       "/var/run/secrets/kubernetes.io/serviceaccount"

typedef struct {
    char server[512]; /* https://host:port, no trailing slash */
    char ca_file[512];
    char token_file[512];
    char ns[254];
    /* the token cache */
    pthread_mutex_t mu;
    char token[8192];
    struct timespec token_mtime;
    long token_size;
    /* When set, polled during every request: non-zero aborts it (TK_ECLOSED),
     * so a service that stops does not wait out a watch. */
    const volatile int *cancel;
    /* connections and TLS sessions kept between requests (tk_httpc_share) */
    struct tk_httpc_share *share;
} sbx_k8s_client;

/* Explicit settings; token_file may be empty (no Authorization header). */
tk_status sbx_k8s_client_init(sbx_k8s_client *c, const char *server, const char *ca_file,
                              const char *token_file, const char *ns, char *err, size_t errlen);
/* The in-cluster configuration: the service host and port Kubernetes puts in
 * every pod's environment and the service-account files under sa_dir. */
tk_status sbx_k8s_client_in_cluster(sbx_k8s_client *c, const char *host, const char *port,
                                    const char *sa_dir, char *err, size_t errlen);
void sbx_k8s_client_free(sbx_k8s_client *c);

/* One request to path (starting with '/'); body may be NULL (the reference is
 * stolen); content_type defaults to application/json. *status is the HTTP status
 * (0 when none arrived); *out the parsed JSON body or NULL. TK_OK when a
 * response arrived, whatever its status. */
tk_status sbx_k8s_request(sbx_k8s_client *c, const char *method, const char *path,
                          const char *content_type, json_t *body, long timeout_ms, long *status,
                          json_t **out, char *err, size_t errlen);

/* Pods in the client's namespace. selector is a label selector (may be NULL). */
tk_status sbx_k8s_pods_list(sbx_k8s_client *c, const char *selector, long *status, json_t **out,
                            char *err, size_t errlen);
tk_status sbx_k8s_pod_create(sbx_k8s_client *c, json_t *pod, long *status, json_t **out, char *err,
                             size_t errlen);
tk_status sbx_k8s_pod_get(sbx_k8s_client *c, const char *name, long *status, json_t **out,
                          char *err, size_t errlen);
/* patch_type: "json" (application/json-patch+json) or "merge". */
tk_status sbx_k8s_pod_patch(sbx_k8s_client *c, const char *name, const char *patch_type,
                            json_t *patch, long *status, json_t **out, char *err, size_t errlen);
/* uid, when given, is a precondition (409 when the pod is another one). */
tk_status sbx_k8s_pod_delete(sbx_k8s_client *c, const char *name, const char *uid,
                             int grace_seconds, long *status, char *err, size_t errlen);

/* A watch event: type is ADDED, MODIFIED, DELETED, BOOKMARK or ERROR; obj is
 * borrowed. Return non-zero to stop the watch. */
typedef int (*sbx_k8s_watch_cb)(const char *type, json_t *obj, void *ud);

/* Splits a watch stream into JSON lines and hands each event to cb. */
typedef struct {
    char *line;
    size_t len, cap, max;
    int overflow; /* a line past the cap is dropped as a whole */
    sbx_k8s_watch_cb cb;
    void *ud;
} sbx_k8s_watch_parser;
void sbx_k8s_watch_parser_init(sbx_k8s_watch_parser *p, size_t max_line, sbx_k8s_watch_cb cb,
                               void *ud);
/* Feeds bytes; returns non-zero when cb asked to stop. */
int sbx_k8s_watch_parser_feed(sbx_k8s_watch_parser *p, const char *data, size_t len);
void sbx_k8s_watch_parser_free(sbx_k8s_watch_parser *p);

/* Watches pods matching selector from resource_version (NULL or "" for all, as
 * ADDED) for at most timeout_s. Returns when the server ends the stream (TK_OK,
 * *status 200), the callback stops it (TK_AGAIN) or on error. An expired
 * version is either an ERROR event carrying a Status with code 410 or an HTTP
 * 410 (*status); the caller lists again. */
tk_status sbx_k8s_pods_watch(sbx_k8s_client *c, const char *selector, const char *resource_version,
                             int timeout_s, sbx_k8s_watch_cb cb, void *ud, long *status, char *err,
                             size_t errlen);

/* The Status message of an error body, or def. */
const char *sbx_k8s_status_message(const json_t *body, const char *def);

#endif
