/*
 * acquire.c — sandbox acquire latency: from the moment a client asks for a
 * sandbox until the first byte of a command's output arrives, over N runs.
 *
 *   acquire sandboxd <url> <api-key> <runs> <label> [expect-pool]
 *       POST /v1/sandboxes, GET the endpoint (the execd token), POST
 *       /proxy/44772/command "echo ready" until the first stdout event; then
 *       (untimed) DELETE. expect-pool "warm" waits for the pool to refill
 *       between runs and counts runs that were not warm.
 *   acquire exec <runs> <label> -- argv...
 *       fork/exec argv and wait for its first byte on stdout (bwrap, docker).
 *
 * Prints one table row: label runs p50 p99 mean min max (milliseconds).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

typedef struct {
    int got;
} first_out;

static int on_data(const char *d, size_t len, void *ud)
{
    first_out *f = ud;
    if (memmem(d, len, "\"stdout\"", 8)) {
        f->got = 1;
        return 1; /* stop: the first output is here */
    }
    return 0;
}

static int run_sandboxd(const char *url, const char *key, int runs, const char *label,
                        const char *expect)
{
    double *v = calloc((size_t)runs, sizeof *v);
    char hk[256];
    snprintf(hk, sizeof hk, "OPEN-SANDBOX-API-KEY: %s", key);
    const char *hdrs[] = {hk, "Content-Type: application/json", NULL};
    int n = 0, misses = 0, errors = 0;
    char u[512], err[512];
    for (int i = 0; i < runs; i++) {
        if (expect && strcmp(expect, "warm") == 0)
            tk_sleep_ms(40); /* let the pool refill */
        int64_t t0 = tk_mono_ns();
        snprintf(u, sizeof u, "%s/v1/sandboxes", url);
        const char *body =
            "{\"image\":{\"uri\":\"tusko-sandbox\"},\"entrypoint\":[\"tail\",\"-f\",\"/dev/null\"],"
            "\"resourceLimits\":{\"cpu\":\"1\",\"memory\":\"512Mi\"},\"timeout\":600}";
        tk_httpc_req rq = {
            .method = "POST", .url = u, .headers = hdrs, .body = body, .body_len = strlen(body)};
        tk_httpc_resp rs;
        if (tk_httpc_do(&rq, &rs) != TK_OK || rs.status != 202) {
            fprintf(stderr, "create failed: %ld %s %s\n", rs.status, rs.error,
                    tk_buf_cstr(&rs.body));
            tk_httpc_resp_free(&rs);
            errors++;
            continue;
        }
        char pool[16] = "";
        tk_httpc_resp_header(&rs, "X-Sandbox-Pool", pool, sizeof pool);
        json_t *j = tk_json_parse(rs.body.data, rs.body.len, 1 << 20, err, sizeof err);
        char id[64];
        snprintf(id, sizeof id, "%s", tk_json_str_or(j, "id", ""));
        json_decref(j);
        tk_httpc_resp_free(&rs);
        snprintf(u, sizeof u, "%s/v1/sandboxes/%s/endpoints/44772?use_server_proxy=true", url, id);
        long st;
        json_t *ep = NULL;
        tk_httpc_json("GET", u, NULL, hdrs, NULL, 5000, &st, &ep, err, sizeof err);
        json_t *h = ep ? json_object_get(ep, "headers") : NULL;
        char tk[128];
        snprintf(tk, sizeof tk, "X-EXECD-ACCESS-TOKEN: %s",
                 tk_json_str_or(h, "X-EXECD-ACCESS-TOKEN", ""));
        json_decref(ep);
        const char *h2[] = {hk, tk, "Content-Type: application/json", NULL};
        snprintf(u, sizeof u, "%s/v1/sandboxes/%s/proxy/44772/command", url, id);
        const char *cmd = "{\"command\":\"echo ready\"}";
        first_out f = {0};
        tk_httpc_req cq = {.method = "POST",
                           .url = u,
                           .headers = h2,
                           .body = cmd,
                           .body_len = strlen(cmd),
                           .on_data = on_data,
                           .ud = &f};
        tk_httpc_resp cr;
        tk_httpc_do(&cq, &cr);
        int64_t t1 = tk_mono_ns();
        tk_httpc_resp_free(&cr);
        if (f.got) {
            v[n++] = (double)(t1 - t0) / 1e6;
            if (expect && strcmp(pool, expect) != 0)
                misses++;
        } else {
            errors++;
        }
        snprintf(u, sizeof u, "%s/v1/sandboxes/%s", url, id);
        tk_httpc_req dq = {.method = "DELETE", .url = u, .headers = hdrs};
        tk_httpc_resp dr;
        tk_httpc_do(&dq, &dr);
        tk_httpc_resp_free(&dr);
    }
    char note[128];
    snprintf(note, sizeof note, "%s%d errors%s", "", errors,
             expect && misses ? " (some runs were not from the pool)" : "");
    if (expect && misses)
        snprintf(note, sizeof note, "%d errors, %d of %d not %s", errors, misses, n, expect);
    row(label, v, n, note);
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
