#include "app/auth/password.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <string.h>
#include <time.h>

#include "lib/cond.h"
#include "lib/id.h"
#include "lib/log.h"
#include "lib/tktime.h"

#define OPS crypto_pwhash_OPSLIMIT_INTERACTIVE
#define MEM crypto_pwhash_MEMLIMIT_INTERACTIVE

static sem_t slots;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static char dummy[crypto_pwhash_STRBYTES];

static void init_once(void)
{
    if (sodium_init() < 0) {
        tk_error("auth", "msg=\"libsodium cannot initialise\"");
        tk_panic(__FILE__, __LINE__, "sodium_init");
    }
    sem_init(&slots, 0, APP_PASSWORD_PARALLEL);
    char pw[33];
    tk_token_hex(pw, 16);
    if (crypto_pwhash_str(dummy, pw, strlen(pw), OPS, MEM) != 0)
        tk_oom();
}

void app_password_init(void)
{
    pthread_once(&once, init_once);
}

static int take(void)
{
    if (tk_sem_wait_until(&slots, tk_mono_ms() + APP_PASSWORD_WAIT_MS) != 0) {
        tk_warn("auth", "msg=\"password hashing busy\" waited_ms=%d", APP_PASSWORD_WAIT_MS);
        return 0;
    }
    return 1;
}

tk_status app_password_hash(const char *password, char out[crypto_pwhash_STRBYTES])
{
    app_password_init();
    size_t n = strlen(password);
    if (n < APP_PASSWORD_MIN || n > APP_PASSWORD_MAX)
        return TK_EINVAL;
    if (!take())
        return TK_AGAIN;
    int rc = crypto_pwhash_str(out, password, n, OPS, MEM);
    sem_post(&slots);
    if (rc != 0)
        tk_oom(); /* the only failure: memory */
    return TK_OK;
}

tk_status app_password_verify(const char *hash, const char *password, int *rehash)
{
    app_password_init();
    *rehash = 0;
    size_t n = strnlen(password, APP_PASSWORD_MAX + 1);
    int real = hash != NULL && n <= APP_PASSWORD_MAX;
    if (!take())
        return TK_AGAIN;
    int rc = crypto_pwhash_str_verify(real ? hash : dummy, password,
                                      n > APP_PASSWORD_MAX ? APP_PASSWORD_MAX : n);
    sem_post(&slots);
    if (!real || rc != 0)
        return TK_EDENIED;
    *rehash = crypto_pwhash_str_needs_rehash(hash, OPS, MEM) != 0;
    return TK_OK;
}
