/* The Kubernetes Pod API client. The watch-stream parser and the settings run
 * everywhere; the calls run when tests/integration/k8s/client.test.mjs points
 * K8S_TEST_SERVER, K8S_TEST_CA and K8S_TEST_DIR at a stand-in API server that
 * accepts the bearer token "tok-good" (they are skipped, and say so, otherwise). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandboxd/k8s.h"
#include "tk_test.h"

typedef struct {
    char types[64][16];
    char names[64][64];
    int n;
    int stop_at;
} events;

static int on_event(const char *type, json_t *obj, void *ud)
{
    events *e = ud;
    if (e->n < 64) {
        snprintf(e->types[e->n], sizeof e->types[0], "%s", type);
        const char *nm =
            json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
        snprintf(e->names[e->n], sizeof e->names[0], "%s", nm ? nm : "");
    }
    e->n++;
    return e->stop_at && e->n >= e->stop_at;
}

TEST(watch_parser_splits_lines_across_chunks_and_caps_them)
{
    events e = {0};
    sbx_k8s_watch_parser p;
    sbx_k8s_watch_parser_init(&p, 64, on_event, &e);
    const char *s = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n"
                    "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"bb\"}}}\n";
    /* byte by byte: the same two events */
    for (size_t i = 0; i < strlen(s); i++)
        CHECK(sbx_k8s_watch_parser_feed(&p, s + i, 1) == 0);
    CHECK_INT(e.n, ==, 2);
    CHECK_STR(e.types[0], "ADDED");
    CHECK_STR(e.names[1], "bb");
    /* a line past the cap is dropped whole, the next one still parses */
    char big[200];
    memset(big, 'x', sizeof big);
    CHECK(sbx_k8s_watch_parser_feed(&p, big, sizeof big) == 0);
    CHECK(sbx_k8s_watch_parser_feed(&p, "\n{\"type\":\"MODIFIED\",\"object\":{}}\n", 33) == 0);
    CHECK_INT(e.n, ==, 3);
    CHECK_STR(e.types[2], "MODIFIED");
    /* not JSON, no type, an object that is not one: ignored */
    const char *junk = "nope\n{\"object\":{}}\n{\"type\":\"ADDED\",\"object\":3}\n\n";
    CHECK(sbx_k8s_watch_parser_feed(&p, junk, strlen(junk)) == 0);
    CHECK_INT(e.n, ==, 3);
    /* the callback stops the stream */
    e.stop_at = 4;
    CHECK(sbx_k8s_watch_parser_feed(&p, s, strlen(s)) == 1);
    sbx_k8s_watch_parser_free(&p);
}

TEST(settings_are_checked)
{
    sbx_k8s_client c;
    char err[256];
    CHECK(sbx_k8s_client_init(&c, "http://127.0.0.1:1", "", "", "ns", err, sizeof err) ==
          TK_EINVAL);
    CHECK(sbx_k8s_client_init(&c, "https://127.0.0.1:1", "", "", "Bad/ns", err, sizeof err) ==
          TK_EINVAL);
    CHECK(sbx_k8s_client_in_cluster(&c, "", "443", "/nonexistent", err, sizeof err) == TK_EINVAL);
    CHECK(sbx_k8s_client_init(&c, "https://127.0.0.1:1/", "", "", "tusko-sandboxes", err,
                              sizeof err) == TK_OK);
    CHECK_STR(c.server, "https://127.0.0.1:1");
    long st;
    json_t *out;
    /* a pod name is a DNS name: nothing else reaches the URL */
    CHECK(sbx_k8s_pod_get(&c, "../secrets", &st, &out, err, sizeof err) == TK_EINVAL);
    /* nothing listens: an error, no crash */
    CHECK(sbx_k8s_pod_get(&c, "p", &st, &out, err, sizeof err) == TK_ERROR);
    CHECK_INT(st, ==, 0);
    sbx_k8s_client_free(&c);
}

static const char *live(void)
{
    const char *s = getenv("K8S_TEST_SERVER");
    if (!s)
        printf(
            "  (skipped: K8S_TEST_SERVER unset; run by tests/integration/k8s/client.test.mjs)\n");
    return s;
}

static void write_token(const char *file, const char *tok, const struct timespec *same_mtime)
{
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.new", file);
    FILE *f = fopen(tmp, "w");
    fprintf(f, "%s\n", tok);
    fclose(f);
    if (same_mtime) {
        struct timespec ts[2] = {*same_mtime, *same_mtime};
        utimensat(AT_FDCWD, tmp, ts, 0);
    }
    rename(tmp, file);
}

static void client(sbx_k8s_client *c, const char *tokfile)
{
    char err[256];
    if (sbx_k8s_client_init(c, getenv("K8S_TEST_SERVER"), getenv("K8S_TEST_CA"), tokfile,
                            "tusko-sandboxes", err, sizeof err) != TK_OK)
        TK_TEST_FAIL("init: %s", err);
}

TEST(live_tls_is_verified_and_the_token_is_reread)
{
    if (!live())
        return;
    char tokfile[512], err[256];
    snprintf(tokfile, sizeof tokfile, "%s/token-rot", getenv("K8S_TEST_DIR"));
    sbx_k8s_client c;
    long st;
    json_t *out;
    /* the system's roots do not know the test CA */
    CHECK(sbx_k8s_client_init(&c, getenv("K8S_TEST_SERVER"), "", "", "tusko-sandboxes", err,
                              sizeof err) == TK_OK);
    CHECK(sbx_k8s_pods_list(&c, NULL, &st, &out, err, sizeof err) == TK_ERROR);
    sbx_k8s_client_free(&c);
    /* a wrong token: 401 */
    write_token(tokfile, "tok-bad1", NULL);
    client(&c, tokfile);
    CHECK(sbx_k8s_pods_list(&c, NULL, &st, &out, err, sizeof err) == TK_OK);
    CHECK_INT(st, ==, 401);
    json_decref(out);
    /* rotated to the right one (a new file): read again */
    struct stat sb;
    stat(tokfile, &sb);
    write_token(tokfile, "tok-good", &sb.st_mtim);
    /* the same size and mtime: only the 401 makes the client read it again */
    CHECK(sbx_k8s_pods_list(&c, NULL, &st, &out, err, sizeof err) == TK_OK);
    CHECK_INT(st, ==, 200);
    CHECK(json_is_array(json_object_get(out, "items")));
    json_decref(out);
    sbx_k8s_client_free(&c);
}

TEST(live_create_list_claim_watch_delete)
{
    if (!live())
        return;
    char tokfile[512], err[256];
    snprintf(tokfile, sizeof tokfile, "%s/token-ok", getenv("K8S_TEST_DIR"));
    write_token(tokfile, "tok-good", NULL);
    sbx_k8s_client c;
    client(&c, tokfile);
    long st;
    json_t *out = NULL;
    char names[3][64], uids[3][64];
    for (int i = 0; i < 3; i++) {
        json_t *pod =
            json_pack("{s:s,s:s,s:{s:s,s:{s:s,s:s}},s:{s:[{s:s,s:s}]}}", "apiVersion", "v1", "kind",
                      "Pod", "metadata", "generateName", "tusko-t-", "labels",
                      "sandbox.tusko.io/service", "ct", "sandbox.tusko.io/role", "pool", "spec",
                      "containers", "name", "sandbox", "image", "tusko-sandbox:test");
        CHECK(sbx_k8s_pod_create(&c, pod, &st, &out, err, sizeof err) == TK_OK);
        CHECK_INT(st, ==, 201);
        json_t *md = json_object_get(out, "metadata");
        snprintf(names[i], sizeof names[i], "%s", json_string_value(json_object_get(md, "name")));
        snprintf(uids[i], sizeof uids[i], "%s", json_string_value(json_object_get(md, "uid")));
        json_decref(out);
    }
    /* list by label */
    CHECK(sbx_k8s_pods_list(&c, "sandbox.tusko.io/service=ct,sandbox.tusko.io/role=pool", &st, &out,
                            err, sizeof err) == TK_OK);
    CHECK_INT(st, ==, 200);
    CHECK_INT(json_array_size(json_object_get(out, "items")), ==, 3);
    char rv[64];
    snprintf(
        rv, sizeof rv, "%s",
        json_string_value(json_object_get(json_object_get(out, "metadata"), "resourceVersion")));
    json_decref(out);
    /* the claim: the first one wins, the same claim again is 422 */
    for (int round = 0; round < 2; round++) {
        json_t *patch =
            json_pack("[{s:s,s:s,s:s},{s:s,s:s,s:s}]", "op", "test", "path",
                      "/metadata/labels/sandbox.tusko.io~1role", "value", "pool", "op", "replace",
                      "path", "/metadata/labels/sandbox.tusko.io~1role", "value", "sandbox");
        CHECK(sbx_k8s_pod_patch(&c, names[0], "json", patch, &st, &out, err, sizeof err) == TK_OK);
        CHECK_INT(st, ==, round == 0 ? 200 : 422);
        if (round == 1)
            CHECK(strlen(sbx_k8s_status_message(out, "")) > 0);
        json_decref(out);
    }
    /* a merge patch */
    json_t *mp =
        json_pack("{s:{s:{s:s}}}", "metadata", "annotations", "sandbox.tusko.io/state", "ready");
    CHECK(sbx_k8s_pod_patch(&c, names[0], "merge", mp, &st, &out, err, sizeof err) == TK_OK);
    CHECK_INT(st, ==, 200);
    CHECK_STR(json_string_value(
                  json_object_get(json_object_get(json_object_get(out, "metadata"), "annotations"),
                                  "sandbox.tusko.io/state")),
              "ready");
    json_decref(out);
    /* delete with a wrong uid: 409; with the right one: 200; a missing pod: 404 */
    CHECK(sbx_k8s_pod_delete(&c, names[1], uids[2], 0, &st, err, sizeof err) == TK_OK);
    CHECK_INT(st, ==, 409);
    CHECK(sbx_k8s_pod_delete(&c, names[1], uids[1], 0, &st, err, sizeof err) == TK_OK);
    CHECK_INT(st, ==, 200);
    CHECK(sbx_k8s_pod_get(&c, "tusko-nope", &st, &out, err, sizeof err) == TK_OK);
    CHECK_INT(st, ==, 404);
    json_decref(out);
    /* watch from the list's version: the claim (the pool selector's exit is a
     * DELETED), then the delete; the callback ends it */
    events e = {.stop_at = 2};
    CHECK(sbx_k8s_pods_watch(&c, "sandbox.tusko.io/service=ct,sandbox.tusko.io/role=pool", rv, 20,
                             on_event, &e, &st, err, sizeof err) == TK_AGAIN);
    CHECK_INT(st, ==, 200);
    CHECK_INT(e.n, ==, 2);
    CHECK_STR(e.types[0], "DELETED");
    CHECK_STR(e.names[0], names[0]);
    CHECK_STR(e.names[1], names[1]);
    /* a version the server no longer keeps: an ERROR event with a 410 Status */
    const char *old = getenv("K8S_TEST_OLD_RV");
    if (old) {
        events e2 = {.stop_at = 1};
        CHECK(sbx_k8s_pods_watch(&c, NULL, old, 5, on_event, &e2, &st, err, sizeof err) ==
              TK_AGAIN);
        CHECK_STR(e2.types[0], "ERROR");
    }
    sbx_k8s_client_free(&c);
}

TEST_MAIN()
