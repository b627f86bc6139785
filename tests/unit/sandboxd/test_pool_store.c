/* The warm pool's refill policy (when a refill may start) and the record store
 * (a save replaces the record atomically and leaves no temporary file). */
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>

#include "lib/json.h"
#include "sandboxd/pool.h"
#include "sandboxd/service.h"
#include "sandboxd/store.h"
#include "tk_test.h"

static sbx_service svc_with(int ready, int64_t last_activity, int64_t short_since)
{
    sbx_service s;
    memset(&s, 0, sizeof s);
    s.cfg.pool_size = 2;
    s.cfg.pool_refill_quiet_ms = 10;
    s.cfg.pool_refill_max_ms = 1000;
    s.pool_ready = ready;
    s.last_activity = last_activity;
    s.pool_short_since = short_since;
    return s;
}

TEST(refill_waits_for_a_quiet_moment)
{
    /* one member still ready: 10 ms after the last activity */
    sbx_service s = svc_with(1, 5000, 4990);
    CHECK_INT(sbx_pool_refill_at_locked(&s), ==, 5010);
    /* activity goes on: the refill moves with it ... */
    s.last_activity = 5500;
    CHECK_INT(sbx_pool_refill_at_locked(&s), ==, 5510);
    /* ... but never later than max_wait after the pool fell short */
    s.last_activity = 6000;
    CHECK_INT(sbx_pool_refill_at_locked(&s), ==, 5990);
}

TEST(an_empty_pool_refills_at_once)
{
    sbx_service s = svc_with(0, 5000, 4990);
    CHECK_INT(sbx_pool_refill_at_locked(&s), ==, 0);
}

TEST(quiet_zero_refills_at_once)
{
    sbx_service s = svc_with(1, 5000, 4990);
    s.cfg.pool_refill_quiet_ms = 0;
    CHECK_INT(sbx_pool_refill_at_locked(&s), ==, 5000); /* = the last activity: due now */
    s.cfg.pool_refill_max_ms = 0;
    CHECK_INT(sbx_pool_refill_at_locked(&s), ==, 4990);
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static size_t count_files(const char *dir)
{
    DIR *d = opendir(dir);
    size_t n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL)
        if (de->d_name[0] != '.')
            n++;
    if (d)
        closedir(d);
    return n;
}

TEST(store_save_replaces_the_record_and_leaves_no_temporary_file)
{
    char dir[128], sub[256], err[256];
    snprintf(dir, sizeof dir, "/tmp/sbx-store-test-%d", getpid());
    CHECK(sbx_store_init(dir, err, sizeof err) == TK_OK);
    const char *id = "0190f3a2-7c1e-4abc-9def-0123456789ab";
    for (int i = 1; i <= 3; i++) {
        json_t *rec = tk_json_obj("id", json_string(id), "n", json_integer(i), NULL);
        CHECK(sbx_store_save(dir, id, rec, err, sizeof err) == TK_OK);
        json_decref(rec);
        json_t *back = sbx_store_load(dir, id, err, sizeof err);
        CHECK(back != NULL);
        CHECK_INT(tk_json_int_or(back, "n", 0), ==, i);
        json_decref(back);
        snprintf(sub, sizeof sub, "%s/sandboxes/%s", dir, id);
        CHECK_INT(count_files(sub), ==, 1); /* sandbox.json only */
    }
    char **ids;
    CHECK_INT(sbx_store_list(dir, &ids), ==, 1);
    CHECK_STR(ids[0], id);
    free(ids[0]);
    free(ids);
    sbx_store_remove(dir, id);
    snprintf(sub, sizeof sub, "%s/sandboxes", dir);
    CHECK_INT(count_files(sub), ==, 0);
    nftw(dir, rm_cb, 8, FTW_DEPTH | FTW_PHYS);
}

TEST_MAIN()
