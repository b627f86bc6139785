/*
 * A real Chromium's one way out: brd_chrome_start's proxy listener (inside the
 * browser's network namespace) served by lib/egress. The policy admits the
 * test's page server by host:port only; a trap listener on loopback stands
 * where refused subresources, redirects and WebSockets point, and the
 * policy's connect hook records every connect() the proxy makes.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "browserd/cdp.h"
#include "browserd/chrome.h"
#include "lib/egress.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/tktime.h"
#include "tk_test.h"

static int listen_lo(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sl) != 0 || listen(fd, 64) != 0)
        return -1;
    getsockname(fd, (struct sockaddr *)&a, &sl);
    *port = ntohs(a.sin_port);
    return fd;
}

static int g_page_port, g_trap_port;
static atomic_int g_page_requests, g_connects, g_connects_elsewhere;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_paths[4096];

static void *page_server(void *arg)
{
    int lfd = (int)(intptr_t)arg;
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0)
            return NULL;
        char req[8192];
        ssize_t n = recv(fd, req, sizeof req - 1, 0);
        if (n <= 0) {
            close(fd);
            continue;
        }
        req[n] = '\0';
        char path[256] = "";
        sscanf(req, "%*s %255s", path);
        pthread_mutex_lock(&g_mu);
        if (strlen(g_paths) + strlen(path) + 2 < sizeof g_paths) {
            strcat(g_paths, path);
            strcat(g_paths, " ");
        }
        pthread_mutex_unlock(&g_mu);
        atomic_fetch_add(&g_page_requests, 1);
        char body[2048], head[512];
        int status = 200;
        const char *extra = "";
        char loc[128];
        if (strcmp(path, "/") == 0) {
            snprintf(body, sizeof body,
                     "<!doctype html><title>egress ok</title><p id=p>through the proxy</p>"
                     "<img id=a src=\"http://127.0.0.1:%d/trap.png\">"
                     "<img id=b src=\"http://169.254.169.254/latest/meta-data/\">"
                     "<img id=c src=\"http://10.0.0.5/x.png\">"
                     "<img id=d src=\"http://127.0.0.1:%d/ok.png\">",
                     g_trap_port, g_page_port);
        } else if (strcmp(path, "/redirect") == 0) {
            status = 302;
            snprintf(loc, sizeof loc, "Location: http://127.0.0.1:%d/after-redirect\r\n",
                     g_trap_port);
            extra = loc;
            snprintf(body, sizeof body, "moved");
        } else {
            snprintf(body, sizeof body, "<title>other</title>");
        }
        int hl = snprintf(head, sizeof head,
                          "HTTP/1.1 %d X\r\nContent-Type: text/html\r\n%sContent-Length: "
                          "%zu\r\nConnection: close\r\n\r\n",
                          status, extra, strlen(body));
        send(fd, head, (size_t)hl, MSG_NOSIGNAL);
        send(fd, body, strlen(body), MSG_NOSIGNAL);
        close(fd);
    }
}

static int on_connect(void *ud, const tk_ip *ip, int port)
{
    (void)ud;
    char a[48];
    tk_ip_format(ip, a, sizeof a);
    atomic_fetch_add(&g_connects, 1);
    if (strcmp(a, "127.0.0.1") != 0 || port != g_page_port)
        atomic_fetch_add(&g_connects_elsewhere, 1);
    return 0;
}

static const char *chromium(void)
{
    const char *c = getenv("BROWSERD_CHROMIUM");
    if (c)
        return c;
    return access("/usr/lib/chromium/chromium", X_OK) == 0 ? "/usr/lib/chromium/chromium"
                                                           : "/usr/bin/chromium";
}

static atomic_int g_loads;

static void on_event(const brd_cdp_msg *m, const char *raw, size_t len, void *ud)
{
    (void)raw;
    (void)len;
    (void)ud;
    if (strcmp(m->method, "Page.loadEventFired") == 0)
        atomic_fetch_add(&g_loads, 1);
}

/* A CDP call that must succeed; generous deadlines (the machine may be busy). */
static json_t *call(brd_cdp *c, const char *sid, const char *method, json_t *params)
{
    json_t *r = NULL;
    char err[256];
    if (brd_cdp_call(c, sid, method, params, 60000, &r, err, sizeof err) != TK_OK)
        TK_TEST_FAIL("%s: %s", method, err);
    return r;
}

static json_t *eval(brd_cdp *c, const char *sid, const char *expr)
{
    json_t *r = NULL;
    char err[256];
    tk_status st = brd_cdp_call(c, sid, "Runtime.evaluate",
                                tk_json_obj("expression", json_string(expr), "returnByValue",
                                            json_true(), "awaitPromise", json_true(), NULL),
                                60000, &r, err, sizeof err);
    if (st != TK_OK)
        TK_TEST_FAIL("evaluate %s: %s", expr, err);
    json_t *v = json_incref(json_object_get(json_object_get(r, "result"), "value"));
    json_decref(r);
    return v;
}

static void navigate(brd_cdp *c, const char *sid, const char *url)
{
    int before = atomic_load(&g_loads);
    json_decref(call(c, sid, "Page.navigate", tk_json_obj("url", json_string(url), NULL)));
    int64_t until = tk_mono_ms() + 60000;
    while (atomic_load(&g_loads) == before && tk_mono_ms() < until)
        usleep(10000);
    CHECK_INT(atomic_load(&g_loads), >, before);
}

TEST(egress_serves_chromium_and_refuses_what_it_must)
{
    tk_log_set_level(TK_LOG_ERROR);
    int page = listen_lo(&g_page_port), trap = listen_lo(&g_trap_port);
    CHECK(page >= 0 && trap >= 0);
    pthread_t th;
    pthread_create(&th, NULL, page_server, (void *)(intptr_t)page);
    pthread_detach(th);

    tk_ssrf_policy pol;
    tk_ssrf_policy_init(&pol);
    char list[64], err[256];
    snprintf(list, sizeof list, "127.0.0.1:%d", g_page_port);
    CHECK_INT(tk_ssrf_policy_allow(&pol, list, err, sizeof err), ==, TK_OK);
    snprintf(list, sizeof list, "%d", g_trap_port); /* refused by the address rule alone */
    CHECK_INT(tk_ssrf_policy_allow_ports(&pol, list, err, sizeof err), ==, TK_OK);
    pol.on_connect = on_connect;
    pol.timeout_ms = 3000;
    tk_egress_config ecfg = {.policy = &pol};
    tk_egress *e = tk_egress_start(&ecfg, err, sizeof err);
    CHECK(e);

    char dir[64] = "/tmp/brd-egress-XXXXXX", prof[96];
    CHECK(mkdtemp(dir) != NULL);
    chmod(dir, 0755);
    snprintf(prof, sizeof prof, "%s/profile", dir);
    CHECK(mkdir(prof, 0700) == 0);
    /* a uid of its own: RLIMIT_NPROC counts per uid, and other tests run
     * Chromiums as 61999 */
    uid_t uid = geteuid() == 0 ? 61977 : 0;
    if (uid)
        CHECK(chown(prof, uid, uid) == 0);
    char logp[96];
    snprintf(logp, sizeof logp, "%s.log", dir); /* beside the folder, removed at the end */
    brd_chrome_config cc = {.chromium = chromium(),
                            .profile_dir = prof,
                            .log_path = logp,
                            .isolate = 1,
                            .uid = uid,
                            .gid = uid,
                            .max_procs = 256,
                            .headless = 1,
                            .width = 800,
                            .height = 600};
    brd_chrome ch;
    if (brd_chrome_start(&cc, &ch, err, sizeof err) != TK_OK)
        TK_TEST_FAIL("start: %s", err);
    CHECK(ch.proxy_fd >= 0);
    /* the wiring browserd makes: the listener handed over, removed at the end */
    tk_egress_caps caps = {.max_conns = 64};
    tk_egress_listener *l = tk_egress_add_listener(e, ch.proxy_fd, "browser test", &caps);
    CHECK(l);
    ch.proxy_fd = -1;

    brd_cdp_config bc = {.wfd = ch.wfd, .rfd = ch.rfd, .on_event = on_event};
    brd_cdp *c = brd_cdp_open(&bc);
    json_t *r =
        call(c, NULL, "Target.createTarget", tk_json_obj("url", json_string("about:blank"), NULL));
    char *target = tk_strdup(tk_json_str(r, "targetId"));
    json_decref(r);
    r = call(c, NULL, "Target.attachToTarget",
             tk_json_obj("targetId", json_string(target), "flatten", json_true(), NULL));
    char *sid = tk_strdup(tk_json_str(r, "sessionId"));
    json_decref(r);
    json_decref(call(c, sid, "Page.enable", NULL));

    /* the allowed page loads through the proxy; its refused images do not */
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", g_page_port);
    navigate(c, sid, url);
    json_t *v = eval(c, sid,
                     "document.title + '|' + document.getElementById('p').textContent + '|' + "
                     "['a','b','c','d'].map(i => document.getElementById(i).naturalWidth > 0 ? "
                     "'img' : document.getElementById(i).complete ? 'none' : 'wait').join(',')");
    CHECK(json_is_string(v));
    /* d is text/html, not an image: it loads (complete) but has no width either */
    CHECK(strncmp(json_string_value(v), "egress ok|through the proxy|none,none,none,none", 48) ==
          0);
    json_decref(v);
    pthread_mutex_lock(&g_mu);
    CHECK(strstr(g_paths, "/ "));
    CHECK(strstr(g_paths, "/ok.png "));
    pthread_mutex_unlock(&g_mu);

    /* a redirect to a refused address: the second hop is refused, no page */
    snprintf(url, sizeof url, "http://127.0.0.1:%d/redirect", g_page_port);
    navigate(c, sid, url);
    v = eval(c, sid, "document.body ? document.body.innerText : ''");
    CHECK(json_is_string(v));
    CHECK(strstr(json_string_value(v), "loopback")); /* the proxy's 403 reason */
    json_decref(v);

    /* a WebSocket to a refused address: CONNECT refused, the socket fails */
    char ws[256];
    snprintf(ws, sizeof ws,
             "new Promise(res => { const w = new WebSocket('ws://127.0.0.1:%d/'); "
             "w.onopen = () => res('open'); w.onerror = () => res('error'); "
             "setTimeout(() => res('hang'), 10000); })",
             g_trap_port);
    v = eval(c, sid, ws);
    CHECK(json_is_string(v));
    CHECK_STR(json_string_value(v), "error");
    json_decref(v);

    /* nothing reached the trap; every connect() went to the page server */
    struct pollfd pf = {trap, POLLIN, 0};
    CHECK_INT(poll(&pf, 1, 200), ==, 0);
    CHECK_INT(atomic_load(&g_connects_elsewhere), ==, 0);
    CHECK_INT(atomic_load(&g_connects), >=, 3);
    tk_egress_stats st;
    tk_egress_listener_stats(e, l, &st);
    CHECK(st.relayed >= 3);
    CHECK(st.refused >= 4); /* three images, the redirect's target, the WebSocket */
    pthread_mutex_lock(&g_mu);
    CHECK(!strstr(g_paths, "after-redirect"));
    pthread_mutex_unlock(&g_mu);

    tk_egress_remove_listener(e, l);
    brd_chrome_kill(&ch);
    brd_cdp_close(c);
    free(target);
    free(sid);
    tk_egress_stop(e);
    tk_ssrf_policy_free(&pol);
    unlink(logp);
    /* Chromium's last processes may still be ending (the namespace dies with
     * its init, its members a moment later) */
    tk_status rm = TK_ERROR;
    for (int i = 0; i < 50 && (rm = brd_chrome_rm_tree(dir)) != TK_OK; i++)
        usleep(100 * 1000);
    CHECK(rm == TK_OK);
}

/* One Chromium, three navigations: more than the runner's default 20 s on a
 * busy machine. */
int main(int argc, char **argv)
{
    setenv("TK_TEST_TIMEOUT", "180", 0);
    return tk_test_main(argc, argv);
}
