/* Per-user and per-token limits of this process (see limits.h). */
#include "app/limits.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/app.h"
#include "lib/arena.h"
#include "lib/hash.h"
#include "lib/log.h"
#include "lib/tktime.h"

#define BUCKETS   256
#define KEY_MAX   72    /* a user id (36) or a token hash (64 hex) */
#define WINDOW_MS 60000 /* API_TOKEN_RATE_LIMIT's window */
#define LOG_EVERY 10000 /* a refusal is logged at most this often per kind */

/* One user's uploads in flight, or one token's requests in its window. An
 * entry lives while it counts something (uploads) or while its window is the
 * current one (tokens: the table holds at most the tokens of two minutes). */
struct entry {
    char key[KEY_MAX + 1];
    int64_t n;
    int64_t window; /* tokens: the window's start */
    struct entry *next;
};

struct table {
    pthread_mutex_t lock;
    struct entry *b[BUCKETS];
    int64_t logged_at, refused;
};

static struct table uploads = {.lock = PTHREAD_MUTEX_INITIALIZER};
static struct table tokens = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Under t->lock. */
static struct entry **find(struct table *t, const char *key)
{
    struct entry **pp = &t->b[tk_hash_fnv1a(key) % BUCKETS];
    while (*pp && strcmp((*pp)->key, key) != 0)
        pp = &(*pp)->next;
    return pp;
}

/* Under t->lock: whether this refusal is the one to log (at most one line per
 * LOG_EVERY with the count since the last). */
static int64_t refusal_to_log(struct table *t, int64_t now)
{
    t->refused++;
    if (now - t->logged_at < LOG_EVERY)
        return 0;
    int64_t n = t->refused;
    t->refused = 0;
    t->logged_at = now;
    return n;
}

struct upload {
    char key[KEY_MAX + 1];
};

static void upload_end(void *data)
{
    struct upload *u = data;
    pthread_mutex_lock(&uploads.lock);
    struct entry **pp = find(&uploads, u->key);
    if (*pp && --(*pp)->n <= 0) {
        struct entry *e = *pp;
        *pp = e->next;
        free(e);
    }
    pthread_mutex_unlock(&uploads.lock);
}

int app_limits_upload_begin(tk_req *r, const char *user_id)
{
    int64_t max = app_get()->cfg->user_max_uploads;
    if (strlen(user_id) > KEY_MAX)
        return 1; /* not a user id of ours; counted nowhere, refused nowhere */
    pthread_mutex_lock(&uploads.lock);
    struct entry **pp = find(&uploads, user_id);
    int64_t log_n = 0;
    int ok = !*pp || (*pp)->n < max;
    if (ok) {
        if (!*pp) {
            *pp = tk_calloc(1, sizeof **pp);
            snprintf((*pp)->key, sizeof(*pp)->key, "%s", user_id);
        }
        (*pp)->n++;
    } else {
        log_n = refusal_to_log(&uploads, tk_now_ms());
    }
    pthread_mutex_unlock(&uploads.lock);
    if (!ok) {
        if (log_n)
            tk_info("limits",
                    "msg=\"uploads refused: user over USER_MAX_UPLOADS\" user=%s "
                    "max=%lld refused=%lld",
                    user_id, (long long)max, (long long)log_n);
        tk_respond_header(r, "Retry-After", "1");
        tk_respond_error(r, 429, "TOO_MANY_UPLOADS",
                         "you are sending %lld uploads at once already (USER_MAX_UPLOADS); "
                         "wait for one to finish",
                         (long long)max);
        return 0;
    }
    struct upload *u = tk_arena_xalloc(tk_req_arena(r), sizeof *u);
    snprintf(u->key, sizeof u->key, "%s", user_id);
    tk_arena_cleanup_add(tk_req_arena(r), upload_end, u);
    return 1;
}

int64_t app_limits_uploads(const char *user_id)
{
    pthread_mutex_lock(&uploads.lock);
    struct entry **pp = find(&uploads, user_id);
    int64_t n = *pp ? (*pp)->n : 0;
    pthread_mutex_unlock(&uploads.lock);
    return n;
}

int app_limits_token_take(tk_req *r, const char *token_hash, int64_t now_ms)
{
    int64_t max = app_get()->cfg->api_token_rate_limit;
    int64_t window = now_ms - now_ms % WINDOW_MS;
    if (strlen(token_hash) > KEY_MAX)
        return 1;
    pthread_mutex_lock(&tokens.lock);
    /* entries of windows before the last are dropped as their bucket is met */
    struct entry **pp = &tokens.b[tk_hash_fnv1a(token_hash) % BUCKETS];
    while (*pp) {
        if ((*pp)->window < window) {
            struct entry *e = *pp;
            *pp = e->next;
            free(e);
        } else {
            pp = &(*pp)->next;
        }
    }
    pp = find(&tokens, token_hash);
    if (!*pp) {
        *pp = tk_calloc(1, sizeof **pp);
        snprintf((*pp)->key, sizeof(*pp)->key, "%s", token_hash);
        (*pp)->window = window;
    }
    int ok = (*pp)->n < max;
    int64_t log_n = 0;
    if (ok)
        (*pp)->n++;
    else
        log_n = refusal_to_log(&tokens, now_ms);
    pthread_mutex_unlock(&tokens.lock);
    if (ok)
        return 1;
    if (log_n)
        tk_info("limits", "msg=\"API token over API_TOKEN_RATE_LIMIT\" max=%lld refused=%lld",
                (long long)max, (long long)log_n);
    int retry = (int)((window + WINDOW_MS - now_ms + 999) / 1000);
    char v[16];
    snprintf(v, sizeof v, "%d", retry < 1 ? 1 : retry);
    tk_respond_header(r, "Retry-After", v);
    tk_respond_error(r, 429, "RATE_LIMITED",
                     "this API token made %lld requests this minute (API_TOKEN_RATE_LIMIT); "
                     "try again in %s s",
                     (long long)max, v);
    return 0;
}
