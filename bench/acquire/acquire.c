/*
 * acquire.c — sandbox acquire latency: from the moment a client asks for a
 * sandbox until the first byte of a command's output arrives, over N runs.
 *
 *   acquire sandboxd <url> <api-key> <runs> <label> [expect-pool]
 *       POST /v1/sandboxes, GET the endpoint (the execd token), POST
 *       /proxy/44772/command "echo ready" until the first stdout event (the
 *       clock stops when its bytes arrive), over one kept-alive connection as
 *       an HTTP client would; then (untimed) DELETE. The notes give the p50 of
 *       each of the three requests (create, endpoint, command to first output).
 *       expect-pool "warm" waits for the pool to refill between runs and counts
 *       runs that were not warm: 40 ms (ACQUIRE_POOL_WAIT_MS), or, with
 *       ACQUIRE_POOL_DIR=<state dir>
 *       (the docker rows: a refill takes longer), until a ready pool member's
 *       record is there (at most 15 s).
 *   acquire exec <runs> <label> -- argv...
 *       fork/exec argv and wait for its first byte on stdout (bwrap, docker).
 *
 * Prints one table row: label runs p50 p99 mean min max (milliseconds).
 */
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/httpc.h"
#include "lib/json.h"
#include "lib/tktime.h"

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void row(const char *label, double *v, int n, const char *note)
{
    if (n == 0) {
        printf("%-34s %5s %9s %9s %9s %9s %9s  %s\n", label, "0", "-", "-", "-", "-", "-", note);
        return;
    }
    qsort(v, (size_t)n, sizeof *v, cmp);
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += v[i];
    int i99 = (int)(0.99 * (n - 1) + 0.5);
    printf("%-34s %5d %9.2f %9.2f %9.2f %9.2f %9.2f  %s\n", label, n, v[(n - 1) / 2], v[i99],
           sum / n, v[0], v[n - 1], note);
    fflush(stdout);
}

/* One connection for every request, kept alive, as an HTTP client would. */
typedef struct {
    CURL *c;
    tk_buf body;
    int stop_at_stdout;
    int got_stdout;
    int64_t stdout_ns; /* when the first stdout event arrived */
    char pool[16];
} client;

static size_t on_body(char *d, size_t sz, size_t n, void *ud)
{
    client *k = ud;
    size_t len = sz * n;
    if (k->stop_at_stdout && memmem(d, len, "\"stdout\"", 8)) {
        k->stdout_ns = tk_mono_ns();
        k->got_stdout = 1;
        return 0; /* the first output is here: stop the transfer */
    }
    tk_buf_append(&k->body, d, len);
    return len;
}

static size_t on_hdr(char *d, size_t sz, size_t n, void *ud)
{
    client *k = ud;
    size_t len = sz * n;
    if (len > 16 && strncasecmp(d, "X-Sandbox-Pool:", 15) == 0)
        snprintf(k->pool, sizeof k->pool, "%.*s", (int)strcspn(d + 16, "\r\n"), d + 16);
    return len;
}

static long request(client *k, const char *method, const char *url, struct curl_slist *h,
                    const char *body, int stop_at_stdout)
{
    tk_buf_reset(&k->body);
    k->stop_at_stdout = stop_at_stdout;
    k->got_stdout = 0;
    curl_easy_setopt(k->c, CURLOPT_URL, url);
    curl_easy_setopt(k->c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(k->c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(k->c, CURLOPT_POSTFIELDS, body);
    if (!body)
        curl_easy_setopt(k->c, CURLOPT_HTTPGET, 1L);
    CURLcode rc = curl_easy_perform(k->c);
    long status = 0;
    curl_easy_getinfo(k->c, CURLINFO_RESPONSE_CODE, &status);
    if (rc != CURLE_OK && !(stop_at_stdout && k->got_stdout))
        return -1;
    return status;
}

/* Non-zero when <dir>/sandboxes/ holds a started pool member (its record has
 * "pool": true and the runtime's part). */
static int pool_member_ready(const char *dir)
{
    char p[4096], err[128];
    snprintf(p, sizeof p, "%s/sandboxes", dir);
    DIR *d = opendir(p);
    if (!d)
        return 0;
    int ready = 0;
    struct dirent *de;
    while (!ready && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/sandboxes/%s/sandbox.json", dir, de->d_name);
        FILE *f = fopen(p, "re");
        if (!f)
            continue;
        char buf[16384];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        json_t *j = tk_json_parse(buf, n, sizeof buf, err, sizeof err);
        ready = j && tk_json_bool_or(j, "pool", 0) && json_is_object(json_object_get(j, "runtime"));
        json_decref(j);
    }
    closedir(d);
    return ready;
}

static void wait_for_pool(void)
{
    const char *dir = getenv("ACQUIRE_POOL_DIR");
    if (!dir || !*dir) {
        /* let the pool refill: 40 ms, or ACQUIRE_POOL_WAIT_MS (a pod's refill is slower) */
        const char *w = getenv("ACQUIRE_POOL_WAIT_MS");
        tk_sleep_ms(w && *w ? atoi(w) : 40);
        return;
    }
    for (int i = 0; i < 1500 && !pool_member_ready(dir); i++)
        tk_sleep_ms(10);
}

static int run_sandboxd(const char *url, const char *key, int runs, const char *label,
                        const char *expect)
{
    double *v = calloc((size_t)runs, sizeof *v);
    double *ph[3] = {calloc((size_t)runs, sizeof(double)), calloc((size_t)runs, sizeof(double)),
                     calloc((size_t)runs, sizeof(double))};
    client k = {.c = curl_easy_init()};
    tk_buf_init(&k.body, 1 << 20);
    curl_easy_setopt(k.c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(k.c, CURLOPT_WRITEDATA, &k);
    curl_easy_setopt(k.c, CURLOPT_HEADERFUNCTION, on_hdr);
    curl_easy_setopt(k.c, CURLOPT_HEADERDATA, &k);
    curl_easy_setopt(k.c, CURLOPT_TCP_NODELAY, 1L);
    char hk[256], tk[160], u[512], err[256];
    snprintf(hk, sizeof hk, "OPEN-SANDBOX-API-KEY: %s", key);
    struct curl_slist *h = curl_slist_append(NULL, hk);
    h = curl_slist_append(h, "Content-Type: application/json");
    h = curl_slist_append(h, "Expect:");
    int n = 0, misses = 0, errors = 0;
    for (int i = 0; i < runs; i++) {
        if (expect && strcmp(expect, "warm") == 0)
            wait_for_pool();
        int64_t t0 = tk_mono_ns();
        snprintf(u, sizeof u, "%s/v1/sandboxes", url);
        k.pool[0] = '\0';
        long st = request(
            &k, "POST", u, h,
            "{\"image\":{\"uri\":\"tusko-sandbox\"},\"entrypoint\":[\"tail\",\"-f\",\"/dev/null\"],"
            "\"resourceLimits\":{\"cpu\":\"1\",\"memory\":\"512Mi\"},\"timeout\":600}",
            0);
        if (st != 202) {
            fprintf(stderr, "create failed: %ld %s\n", st, tk_buf_cstr(&k.body));
            errors++;
            continue;
        }
        int64_t t_created = tk_mono_ns();
        json_t *j = tk_json_parse(k.body.data, k.body.len, 1 << 20, err, sizeof err);
        char id[64];
        snprintf(id, sizeof id, "%s", tk_json_str_or(j, "id", ""));
        json_decref(j);
        snprintf(u, sizeof u, "%s/v1/sandboxes/%s/endpoints/44772?use_server_proxy=true", url, id);
        request(&k, "GET", u, h, NULL, 0);
        json_t *ep = tk_json_parse(k.body.data, k.body.len, 1 << 20, err, sizeof err);
        snprintf(tk, sizeof tk, "X-EXECD-ACCESS-TOKEN: %s",
                 tk_json_str_or(json_object_get(ep, "headers"), "X-EXECD-ACCESS-TOKEN", ""));
        json_decref(ep);
        struct curl_slist *h2 = curl_slist_append(NULL, hk);
        h2 = curl_slist_append(h2, tk);
        h2 = curl_slist_append(h2, "Content-Type: application/json");
        h2 = curl_slist_append(h2, "Expect:");
        snprintf(u, sizeof u, "%s/v1/sandboxes/%s/proxy/44772/command", url, id);
        int64_t t_cmd = tk_mono_ns();
        request(&k, "POST", u, h2, "{\"command\":\"echo ready\"}", 1);
        int64_t t1 = k.stdout_ns;
        curl_slist_free_all(h2);
        if (k.got_stdout) {
            ph[0][n] = (double)(t_created - t0) / 1e6;
            ph[1][n] = (double)(t_cmd - t_created) / 1e6;
            ph[2][n] = (double)(t1 - t_cmd) / 1e6;
            v[n++] = (double)(t1 - t0) / 1e6;
            if (expect && strcmp(k.pool, expect) != 0)
                misses++;
        } else {
            errors++;
        }
        snprintf(u, sizeof u, "%s/v1/sandboxes/%s", url, id);
        request(&k, "DELETE", u, h, NULL, 0);
    }
    char note[256];
    int off = snprintf(note, sizeof note, "%d errors", errors);
    if (expect && misses)
        off = snprintf(note, sizeof note, "%d errors, %d of %d not %s", errors, misses, n, expect);
    if (n > 0) {
        for (int i = 0; i < 3; i++)
            qsort(ph[i], (size_t)n, sizeof(double), cmp);
        snprintf(note + off, sizeof note - (size_t)off,
                 "; p50 create %.2f + endpoint %.2f + command %.2f", ph[0][(n - 1) / 2],
                 ph[1][(n - 1) / 2], ph[2][(n - 1) / 2]);
    }
    row(label, v, n, note);
    for (int i = 0; i < 3; i++)
        free(ph[i]);
    curl_slist_free_all(h);
    curl_easy_cleanup(k.c);
    tk_buf_free(&k.body);
    free(v);
    return errors ? 1 : 0;
}

static int run_exec(int runs, const char *label, char **argv)
{
    double *v = calloc((size_t)runs, sizeof *v);
    int n = 0, errors = 0;
    for (int i = 0; i < runs; i++) {
        int p[2];
        if (pipe(p) < 0)
            return 1;
        int64_t t0 = tk_mono_ns();
        pid_t pid = fork();
        if (pid == 0) {
            dup2(p[1], 1);
            close(p[0]);
            close(p[1]);
            execvp(argv[0], argv);
            _exit(127);
        }
        close(p[1]);
        char c;
        ssize_t r = read(p[0], &c, 1);
        int64_t t1 = tk_mono_ns();
        char buf[256];
        while (read(p[0], buf, sizeof buf) > 0)
            ;
        close(p[0]);
        int st;
        waitpid(pid, &st, 0);
        if (r == 1 && WIFEXITED(st) && WEXITSTATUS(st) == 0)
            v[n++] = (double)(t1 - t0) / 1e6;
        else
            errors++;
    }
    char note[64];
    snprintf(note, sizeof note, "%d errors", errors);
    row(label, v, n, note);
    free(v);
    return errors == runs;
}

static int runs_arg(const char *s)
{
    int64_t n;
    if (tk_parse_i64(s, 1, 100000, &n) != TK_OK) {
        fprintf(stderr, "acquire: bad run count \"%s\"\n", s);
        exit(2);
    }
    return (int)n;
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    tk_httpc_global_init();
    if (argc >= 6 && strcmp(argv[1], "sandboxd") == 0)
        return run_sandboxd(argv[2], argv[3], runs_arg(argv[4]), argv[5],
                            argc > 6 ? argv[6] : NULL);
    if (argc >= 6 && strcmp(argv[1], "exec") == 0 && strcmp(argv[4], "--") == 0)
        return run_exec(runs_arg(argv[2]), argv[3], argv + 5);
    if (argc >= 2 && strcmp(argv[1], "header") == 0) {
        printf("%-34s %5s %9s %9s %9s %9s %9s  %s\n", "acquire → first output (ms)", "runs", "p50",
               "p99", "mean", "min", "max", "notes");
        return 0;
    }
    fprintf(
        stderr,
        "usage: acquire sandboxd URL KEY RUNS LABEL [warm|cold] | exec RUNS LABEL -- argv...\n");
    return 2;
}
