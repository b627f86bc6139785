/* browserd/cdp and chrome: the NUL-delimited reader, message checks, and the
 * client against a real Chromium (launched in its namespaces, over the pipe). */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "browserd/cdp.h"
#include "browserd/chrome.h"
#include "lib/json.h"
#include "lib/tktime.h"
#include "tk_test.h"

struct msgs {
    int n;
    char text[8][64];
    int stop_after;
};

static int collect(const char *m, size_t len, void *ud)
{
    struct msgs *v = ud;
    if (v->n < 8)
        snprintf(v->text[v->n], 64, "%.*s", (int)len, m);
    v->n++;
    return v->stop_after && v->n >= v->stop_after;
}

TEST(cdp_reader_splits_on_nul_across_chunks)
{
    brd_cdp_reader r;
    brd_cdp_reader_init(&r, 64);
    struct msgs v = {0};
    const char in[] = "{\"a\":1}\0{\"b\"\0:2}\0\0tail";
    /* byte by byte: boundaries anywhere */
    for (size_t i = 0; i < sizeof in - 1; i++)
        CHECK(brd_cdp_reader_feed(&r, in + i, 1, collect, &v) == TK_OK);
    CHECK_INT(v.n, ==, 4);
    CHECK_STR(v.text[0], "{\"a\":1}");
    CHECK_STR(v.text[1], "{\"b\"");
    CHECK_STR(v.text[2], ":2}");
    CHECK_STR(v.text[3], "");
    CHECK_INT(r.buf.len, ==, 4); /* "tail" waits for its NUL */
    brd_cdp_reader_free(&r);
}

TEST(cdp_reader_drops_a_message_over_the_cap_and_goes_on)
{
    brd_cdp_reader r;
    brd_cdp_reader_init(&r, 8);
    struct msgs v = {0};
    const char in[] = "12345678\0"
                      "123456789abc\0"
                      "ok\0";
    CHECK(brd_cdp_reader_feed(&r, in, 5, collect, &v) == TK_OK);
    CHECK(brd_cdp_reader_feed(&r, in + 5, sizeof in - 1 - 5, collect, &v) == TK_OK);
    CHECK_INT(v.n, ==, 2);
    CHECK_STR(v.text[0], "12345678");
    CHECK_STR(v.text[1], "ok");
    CHECK_INT(r.skipped, ==, 1);
    /* a callback that stops the feed */
    struct msgs s = {.stop_after = 1};
    CHECK(brd_cdp_reader_feed(&r, "a\0b\0", 4, collect, &s) == TK_ERROR);
    CHECK_INT(s.n, ==, 1);
    brd_cdp_reader_free(&r);
}

TEST(cdp_msg_parse_answers_events_and_refusals)
{
    brd_cdp_msg m;
    char err[160];
    const char *ok = "{\"id\":7,\"result\":{\"x\":1},\"sessionId\":\"S1\"}";
    CHECK(brd_cdp_msg_parse(ok, strlen(ok), &m, err, sizeof err) == TK_OK);
    CHECK_INT(m.id, ==, 7);
    CHECK_STR(m.session_id, "S1");
    CHECK(json_is_object(m.result));
    json_decref(m.root);
    const char *ev = "{\"method\":\"Page.loadEventFired\",\"params\":{\"timestamp\":1}}";
    CHECK(brd_cdp_msg_parse(ev, strlen(ev), &m, err, sizeof err) == TK_OK);
    CHECK_INT(m.id, ==, 0);
    CHECK_STR(m.method, "Page.loadEventFired");
    CHECK(m.session_id == NULL);
    json_decref(m.root);
    const char *bad[] = {"[1]",
                         "{\"id\":0,\"result\":{}}",
                         "{\"id\":-3,\"result\":{}}",
                         "{\"id\":\"1\",\"result\":{}}",
                         "{\"id\":1}",
                         "{\"params\":{}}",
                         "{\"method\":\"A.b\",\"sessionId\":5}",
                         "{\"id\":1,\"result\":{},\"id\":2}",
                         "{not json"};
    for (size_t i = 0; i < TK_ARRAY_LEN(bad); i++) {
        err[0] = 0;
        CHECK(brd_cdp_msg_parse(bad[i], strlen(bad[i]), &m, err, sizeof err) == TK_EINVAL);
        CHECK(err[0] != 0);
    }
}

/* --- against Chromium --- */

static const char *chromium(void)
{
    const char *c = getenv("BROWSERD_CHROMIUM");
    if (c)
        return c;
    return access("/usr/lib/chromium/chromium", X_OK) == 0 ? "/usr/lib/chromium/chromium"
                                                           : "/usr/bin/chromium";
}

struct ev_seen {
    int loads;
    int gone;
};

static void on_event(const brd_cdp_msg *m, const char *raw, size_t len, void *ud)
{
    struct ev_seen *s = ud;
    if (strcmp(m->method, "Page.loadEventFired") == 0)
        __atomic_add_fetch(&s->loads, 1, __ATOMIC_SEQ_CST);
}

static void on_gone(void *ud)
{
    struct ev_seen *s = ud;
    __atomic_store_n(&s->gone, 1, __ATOMIC_SEQ_CST);
}

typedef struct {
    char dir[64];
    brd_chrome ch;
    brd_cdp *c;
    struct ev_seen seen;
} fixture;

static void start(fixture *f, int isolate)
{
    memset(f, 0, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/brd-test-XXXXXX");
    CHECK(mkdtemp(f->dir) != NULL);
    chmod(f->dir, 0755);
    char prof[96];
    snprintf(prof, sizeof prof, "%s/profile", f->dir);
    CHECK(mkdir(prof, 0700) == 0);
    uid_t uid = geteuid() == 0 ? 61999 : 0;
    if (uid)
        CHECK(chown(prof, uid, uid) == 0);
    brd_chrome_config cc = {.chromium = chromium(),
                            .profile_dir = prof,
                            .isolate = isolate,
                            .uid = uid,
                            .gid = uid,
                            .max_procs = 256,
                            .headless = 1,
                            .width = 800,
                            .height = 600};
    char err[256];
    tk_status st = brd_chrome_start(&cc, &f->ch, err, sizeof err);
    if (st != TK_OK)
        TK_TEST_FAIL("start: %s", err);
    brd_cdp_config cfg = {.wfd = f->ch.wfd,
                          .rfd = f->ch.rfd,
                          .on_event = on_event,
                          .on_gone = on_gone,
                          .ud = &f->seen};
    f->c = brd_cdp_open(&cfg);
}

static void stop(fixture *f)
{
    brd_chrome_kill(&f->ch);
    brd_cdp_close(f->c);
    if (f->ch.proxy_fd >= 0)
        close(f->ch.proxy_fd);
    CHECK(brd_chrome_rm_tree(f->dir) == TK_OK);
    CHECK(access(f->dir, F_OK) != 0);
}

struct par {
    brd_cdp *c;
    const char *sid;
    int k, good;
};

static void *par_main(void *arg)
{
    struct par *p = arg;
    for (int i = 0; i < 25; i++) {
        char expr[32], err[128];
        snprintf(expr, sizeof expr, "%d * 1000 + %d", p->k, i);
        json_t *r = NULL;
        if (brd_cdp_call(
                p->c, p->sid, "Runtime.evaluate",
                tk_json_obj("expression", json_string(expr), "returnByValue", json_true(), NULL),
                10000, &r, err, sizeof err) == TK_OK &&
            json_integer_value(json_object_get(json_object_get(r, "result"), "value")) ==
                p->k * 1000 + i)
            p->good++;
        json_decref(r);
    }
    return NULL;
}

TEST(cdp_drives_chromium_over_the_pipe)
{
    fixture f;
    start(&f, 1);
    char err[256];
    json_t *r = NULL;
    tk_status st = brd_cdp_call(f.c, NULL, "Browser.getVersion", NULL, 15000, &r, err, sizeof err);
    if (st != TK_OK)
        TK_TEST_FAIL("getVersion: %s", err);
    CHECK(strstr(tk_json_str_or(r, "product", ""), "Chrome/") != NULL);
    json_decref(r);
    /* a page in a flattened session */
    st = brd_cdp_call(f.c, NULL, "Target.createTarget",
                      tk_json_obj("url", json_string("about:blank"), NULL), 10000, &r, err,
                      sizeof err);
    CHECK(st == TK_OK);
    char *target = tk_strdup(tk_json_str(r, "targetId"));
    json_decref(r);
    st = brd_cdp_call(f.c, NULL, "Target.attachToTarget",
                      tk_json_obj("targetId", json_string(target), "flatten", json_true(), NULL),
                      10000, &r, err, sizeof err);
    CHECK(st == TK_OK);
    char *sid = tk_strdup(tk_json_str(r, "sessionId"));
    json_decref(r);
    CHECK(brd_cdp_call(f.c, sid, "Page.enable", NULL, 10000, &r, err, sizeof err) == TK_OK);
    json_decref(r);
    const char *html = "data:text/html,<title>pipe test</title><p id=x>forty-two</p>";
    CHECK(brd_cdp_call(f.c, sid, "Page.navigate", tk_json_obj("url", json_string(html), NULL),
                       10000, &r, err, sizeof err) == TK_OK);
    json_decref(r);
    int64_t until = tk_mono_ms() + 10000;
    while (__atomic_load_n(&f.seen.loads, __ATOMIC_SEQ_CST) == 0 && tk_mono_ms() < until)
        usleep(10000);
    CHECK_INT(f.seen.loads, >=, 1);
    CHECK(brd_cdp_call(f.c, sid, "Runtime.evaluate",
                       tk_json_obj("expression",
                                   json_string("document.title + ':' + "
                                               "document.getElementById('x').textContent"),
                                   "returnByValue", json_true(), NULL),
                       10000, &r, err, sizeof err) == TK_OK);
    CHECK_STR(tk_json_str(json_object_get(r, "result"), "value"), "pipe test:forty-two");
    json_decref(r);
    /* a protocol error comes back as TK_ERROR with its message */
    st = brd_cdp_call(f.c, sid, "No.suchMethod", NULL, 10000, &r, err, sizeof err);
    CHECK(st == TK_ERROR);
    CHECK(strstr(err, "No.suchMethod") != NULL);
    CHECK(r == NULL);
    /* an unknown session too */
    st =
        brd_cdp_call(f.c, "NOSUCHSESSION", "Runtime.evaluate",
                     tk_json_obj("expression", json_string("1"), NULL), 10000, &r, err, sizeof err);
    CHECK(st == TK_ERROR);
    /* calls from several threads at once each get their own answer */
    struct par p[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        p[i] = (struct par){.c = f.c, .sid = sid, .k = i};
        CHECK(pthread_create(&th[i], NULL, par_main, &p[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK_INT(p[i].good, ==, 25);
    }
    free(target);
    free(sid);
    CHECK_INT(brd_cdp_dropped(f.c), ==, 0);
    stop(&f);
}

TEST(cdp_isolated_chromium_has_only_loopback_and_its_own_pids)
{
    fixture f;
    start(&f, 1);
    CHECK(f.ch.keeper > 0);
    CHECK(f.ch.proxy_fd >= 0);
    char path[64], a[64] = "", b[64] = "";
    snprintf(path, sizeof path, "/proc/%d/ns/net", (int)f.ch.pid);
    CHECK(readlink(path, a, sizeof a - 1) > 0);
    CHECK(readlink("/proc/self/ns/net", b, sizeof b - 1) > 0);
    CHECK(strcmp(a, b) != 0);
    memset(a, 0, sizeof a);
    memset(b, 0, sizeof b);
    snprintf(path, sizeof path, "/proc/%d/ns/pid", (int)f.ch.pid);
    CHECK(readlink(path, a, sizeof a - 1) > 0);
    CHECK(readlink("/proc/self/ns/pid", b, sizeof b - 1) > 0);
    CHECK(strcmp(a, b) != 0);
    if (geteuid() == 0) {
        struct stat st;
        snprintf(path, sizeof path, "/proc/%d", (int)f.ch.pid);
        CHECK(stat(path, &st) == 0);
        CHECK_INT(st.st_uid, ==, 61999);
    }
    stop(&f);
}

TEST(cdp_a_killed_browser_fails_waiting_calls)
{
    fixture f;
    start(&f, 1);
    char err[256];
    json_t *r = NULL;
    CHECK(brd_cdp_call(f.c, NULL, "Browser.getVersion", NULL, 15000, &r, err, sizeof err) == TK_OK);
    json_decref(r);
    CHECK(brd_chrome_running(&f.ch));
    kill(f.ch.pid, SIGKILL);
    int64_t until = tk_mono_ms() + 10000;
    while (!__atomic_load_n(&f.seen.gone, __ATOMIC_SEQ_CST) && tk_mono_ms() < until)
        usleep(10000);
    CHECK(f.seen.gone);
    CHECK(!brd_cdp_alive(f.c));
    tk_status st = brd_cdp_call(f.c, NULL, "Browser.getVersion", NULL, 1000, &r, err, sizeof err);
    CHECK(st == TK_ECLOSED);
    until = tk_mono_ms() + 5000;
    while (brd_chrome_running(&f.ch) && tk_mono_ms() < until)
        usleep(10000);
    CHECK(!brd_chrome_running(&f.ch));
    stop(&f);
}

TEST(cdp_call_times_out)
{
    /* a "browser" that reads and never answers: a pipe nobody writes */
    int to[2], from[2];
    CHECK(pipe(to) == 0 && pipe(from) == 0);
    brd_cdp_config cfg = {.wfd = to[1], .rfd = from[0]};
    brd_cdp *c = brd_cdp_open(&cfg);
    char err[256];
    json_t *r;
    int64_t t0 = tk_mono_ms();
    CHECK(brd_cdp_call(c, NULL, "Browser.getVersion", NULL, 200, &r, err, sizeof err) ==
          TK_ETIMEOUT);
    CHECK_INT(tk_mono_ms() - t0, >=, 190);
    CHECK(strstr(err, "no answer") != NULL);
    /* what was written: one NUL-terminated request with id 1 */
    char buf[256];
    ssize_t n = read(to[0], buf, sizeof buf);
    CHECK(n > 0 && buf[n - 1] == '\0');
    CHECK(strstr(buf, "\"id\":1") != NULL);
    CHECK(strstr(buf, "\"method\":\"Browser.getVersion\"") != NULL);
    /* the writer end closing is the browser gone */
    close(from[1]);
    int64_t until = tk_mono_ms() + 2000;
    while (brd_cdp_alive(c) && tk_mono_ms() < until)
        usleep(5000);
    CHECK(!brd_cdp_alive(c));
    brd_cdp_close(c);
    close(to[0]);
}

TEST_MAIN()
