#include "app/snapshots/snapshots.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/snapshots/snapshots_store.h"
#include "lib/log.h"
#include "lib/tktime.h"

static struct {
    tk_s3 *s3;
    atomic_int enabled;
    char why[512];
    pthread_t checker;
    atomic_int checking; /* the start-up check runs (detached) */
} S;

int snapshots_enabled(void)
{
    return atomic_load(&S.enabled);
}

const char *snapshots_off_reason(void)
{
    return snapshots_enabled() ? "" : S.why;
}

tk_s3 *snapshots_store(void)
{
    return snapshots_enabled() ? S.s3 : NULL;
}

/* The settings, loaded with the program's (see snapshots_settings). */
static snapshots_config C;
static tk_setting rows[] = {SNAPSHOTS_SETTINGS(C)};

tk_setting *snapshots_settings(size_t *n)
{
    *n = TK_ARRAY_LEN(rows);
    return rows;
}

void snapshots_settings_free(void)
{
    tk_config_free(rows, TK_ARRAY_LEN(rows));
}

const snapshots_config *snapshots_cfg(void)
{
    return &C;
}

int snapshots_abort_stale(tk_s3 *s3, const char *prefix, int64_t older_ms)
{
    int aborted = 0;
    char *km = NULL, *um = NULL;
    int64_t now = tk_now_ms();
    for (int page = 0; page < 100; page++) {
        tk_s3_uploads u;
        tk_s3_result r;
        if (tk_s3_list_uploads(s3, prefix, km, um, &u, &r) != TK_OK) {
            tk_warn("snapshots",
                    "msg=\"cannot list stale multipart uploads\" code=%s status=%ld "
                    "detail=\"%s\"",
                    r.code, r.status, r.message);
            aborted = aborted ? aborted : -1;
            break;
        }
        for (size_t i = 0; i < u.n; i++) {
            int64_t t;
            if (tk_time_parse_rfc3339(u.items[i].initiated, &t) != TK_OK || now - t < older_ms)
                continue;
            tk_s3_result ar;
            if (tk_s3_multipart_abort(s3, u.items[i].key, u.items[i].upload_id, &ar) == TK_OK) {
                aborted++;
                tk_info("snapshots", "msg=\"aborted a stale multipart upload\" key=\"%s\"",
                        u.items[i].key);
            }
        }
        free(km);
        free(um);
        km = u.truncated && u.next_key_marker ? tk_strdup(u.next_key_marker) : NULL;
        um = u.truncated && u.next_upload_id_marker ? tk_strdup(u.next_upload_id_marker) : NULL;
        tk_s3_uploads_free(&u);
        if (!km)
            break;
    }
    free(km);
    free(um);
    return aborted;
}

static void *checker_main(void *ud)
{
    void *r = NULL;
    const snapshots_config *c = snapshots_cfg();
    char err[512];
    if (snapshots_store_check(S.s3, c, err, sizeof err) != TK_OK) {
        snprintf(S.why, sizeof S.why, "the store did not answer the start-up check: %s", err);
        tk_error("snapshots",
                 "msg=\"snapshots are off: the S3 store failed its check\" detail=\"%s\"", err);
        atomic_store(&S.checking, 0);
        return r;
    }
    atomic_store(&S.enabled, 1);
    tk_info("snapshots", "msg=\"snapshots on\" bucket=%s prefix=\"%s\"", c->bucket,
            c->prefix ? c->prefix : "");
    char p[TK_S3_KEY_MAX + 2];
    snprintf(p, sizeof p, "%s%s", c->prefix ? c->prefix : "", c->prefix && *c->prefix ? "/" : "");
    snapshots_abort_stale(S.s3, p, 24 * 3600 * 1000LL);
    atomic_store(&S.checking, 0);
    return r;
}

tk_status snapshots_start(char *err, size_t errlen)
{
    const snapshots_config *c = snapshots_cfg();
    tk_status why;
    char e[512];
    S.s3 = snapshots_store_open(c, &why, e, sizeof e);
    if (!S.s3) {
        snprintf(S.why, sizeof S.why, "%s", e);
        if (why == TK_ENOENT)
            tk_info("snapshots", "msg=\"snapshots are off\" hint=\"set S3_ENDPOINT\"");
        else
            tk_error("snapshots", "msg=\"snapshots are off: bad S3 settings\" detail=\"%s\"", e);
        return TK_OK;
    }
    snprintf(S.why, sizeof S.why, "the store's start-up check has not finished");
    atomic_store(&S.checking, 1);
    if (pthread_create(&S.checker, NULL, checker_main, NULL) == 0) {
        pthread_setname_np(S.checker, "s3-check");
        pthread_detach(S.checker);
    } else {
        atomic_store(&S.checking, 0);
        snprintf(err, errlen, "cannot start the S3 check");
        return TK_ERROR;
    }
    return TK_OK;
}

void snapshots_stop(void)
{
    /* a check still waiting for the store keeps its client (the process is ending) */
    for (int i = 0; i < 100 && atomic_load(&S.checking); i++)
        tk_sleep_ms(20);
    atomic_store(&S.enabled, 0);
    if (atomic_load(&S.checking))
        return;
    tk_s3_free(S.s3);
    S.s3 = NULL;
}
