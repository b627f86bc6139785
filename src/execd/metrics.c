#include "execd/metrics.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "execd/sink.h"
#include "lib/cond.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/tktime.h"

#define MAX_WATCHERS 16

static pthread_mutex_t m_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t m_start_ms;
static int64_t last_mono = -1;
static double last_usage_us;
static double last_pct;
static int watchers, m_stopping;
static pthread_cond_t m_cond = PTHREAD_COND_INITIALIZER;

/* Reads a whole small file into buf. */
static int slurp(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = '\0';
    return 0;
}

static double cgroup_cpus(void)
{
    char b[128];
    if (slurp("/sys/fs/cgroup/cpu.max", b, sizeof b) == 0) {
        char quota[32];
        long long period = 0;
        if (sscanf(b, "%31s %lld", quota, &period) == 2 && strcmp(quota, "max") != 0 &&
            period > 0) {
            char *e;
            double q = strtod(quota, &e);
            if (q > 0)
                return q / (double)period;
        }
    }
    return 0;
}

static double cpu_count(void)
{
    double cg = cgroup_cpus();
    cpu_set_t set;
    double online = (double)sysconf(_SC_NPROCESSORS_ONLN);
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        online = (double)CPU_COUNT(&set);
    if (cg > 0 && cg < online)
        return cg;
    return online > 0 ? online : 1;
}

/* CPU time used (µs): the cgroup's when there is one, else the whole machine's. */
static double cpu_usage_us(void)
{
    char b[4096];
    if (slurp("/sys/fs/cgroup/cpu.stat", b, sizeof b) == 0) {
        const char *p = strstr(b, "usage_usec ");
        if (p)
            return strtod(p + 11, NULL);
    }
    if (slurp("/proc/stat", b, sizeof b) == 0 && strncmp(b, "cpu ", 4) == 0) {
        unsigned long long v[8] = {0};
        if (sscanf(b + 4, "%llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                   &v[4], &v[5], &v[6], &v[7]) >= 4) {
            /* busy = all but idle and iowait, in clock ticks */
            double busy = (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]);
            return busy * 1e6 / (double)sysconf(_SC_CLK_TCK);
        }
    }
    return 0;
}

static void memory(double *total, double *used)
{
    char b[4096];
    *total = *used = 0;
    if (slurp("/proc/meminfo", b, sizeof b) == 0) {
        const char *t = strstr(b, "MemTotal:"), *a = strstr(b, "MemAvailable:");
        double kt = t ? strtod(t + 9, NULL) : 0, ka = a ? strtod(a + 13, NULL) : 0;
        *total = kt * 1024;
        *used = (kt - ka) * 1024;
    }
    char m[64];
    if (slurp("/sys/fs/cgroup/memory.max", m, sizeof m) == 0 && strncmp(m, "max", 3) != 0) {
        double lim = strtod(m, NULL);
        if (lim > 0 && (*total == 0 || lim < *total)) {
            *total = lim;
            if (slurp("/sys/fs/cgroup/memory.current", m, sizeof m) == 0)
                *used = strtod(m, NULL);
        }
    }
}

void execd_metrics_init(void)
{
    m_start_ms = tk_now_ms();
}

json_t *execd_metrics_read(void)
{
    double n = cpu_count();
    int64_t now = tk_mono_ms();
    double u = cpu_usage_us();
    pthread_mutex_lock(&m_lock);
    int64_t lm = last_mono;
    double lu = last_usage_us;
    pthread_mutex_unlock(&m_lock);
    if (lm < 0 || now - lm > 60000 || now - lm < 50) {
        /* no recent sample to compare with: take one over a short window */
        if (lm < 0 || now - lm > 60000) {
            tk_sleep_ms(200);
            lm = now;
            lu = u;
            now = tk_mono_ms();
            u = cpu_usage_us();
        }
    }
    double pct;
    pthread_mutex_lock(&m_lock);
    if (now - lm >= 50) {
        pct = (u - lu) / ((double)(now - lm) * 1000.0 * n) * 100.0;
        if (pct < 0)
            pct = 0;
        if (pct > 100)
            pct = 100;
        last_pct = pct;
        last_mono = now;
        last_usage_us = u;
    } else {
        pct = last_pct;
    }
    pthread_mutex_unlock(&m_lock);
    double total, used;
    memory(&total, &used);
    json_t *o = json_object();
    json_object_set_new(o, "cpu_count", json_real(n));
    json_object_set_new(o, "cpu_used_pct", json_real((double)((int64_t)(pct * 100)) / 100));
    json_object_set_new(o, "mem_total_mib", json_real(total / 1048576.0));
    json_object_set_new(o, "mem_used_mib", json_real(used / 1048576.0));
    json_object_set_new(o, "timestamp", json_integer(tk_now_ms()));
    json_object_set_new(o, "uptime_s", json_integer((tk_now_ms() - m_start_ms) / 1000));
    return o;
}

void execd_metrics_get(tk_req *r, void *ud)
{
    tk_respond_json(r, 200, execd_metrics_read());
}

static void *watch_main(void *arg)
{
    execd_sink *k = arg;
    for (;;) {
        json_t *m = execd_metrics_read();
        tk_buf *b = execd_sink_buf(k);
        tk_json_dump_buf(m, b);
        tk_buf_append(b, "\n\n", 2);
        json_decref(m);
        if (execd_sink_flush(k) == TK_ECLOSED)
            break;
        /* a second, or until the client goes */
        int64_t end = tk_mono_ms() + 1000;
        int gone = 0;
        for (;;) {
            int64_t left = end - tk_mono_ms();
            if (left <= 0)
                break;
            struct pollfd p = {.fd = execd_sink_fd(k), .events = POLLIN};
            if (poll(&p, 1, (int)left) > 0) {
                execd_sink_ack(k);
                if (execd_sink_gone(k)) {
                    gone = 1;
                    break;
                }
                execd_sink_flush(k);
            }
        }
        pthread_mutex_lock(&m_lock);
        int stopping = m_stopping;
        pthread_mutex_unlock(&m_lock);
        if (gone || stopping)
            break;
    }
    execd_sink_end(k);
    pthread_mutex_lock(&m_lock);
    watchers--;
    pthread_cond_broadcast(&m_cond);
    pthread_mutex_unlock(&m_lock);
    return NULL;
}

void execd_metrics_watch(tk_req *r, void *ud)
{
    pthread_mutex_lock(&m_lock);
    if (m_stopping || watchers >= MAX_WATCHERS) {
        pthread_mutex_unlock(&m_lock);
        tk_respond_error(r, 429, "TOO_MANY_WATCHERS", "at most %d metric watchers at once",
                         MAX_WATCHERS);
        return;
    }
    watchers++;
    pthread_mutex_unlock(&m_lock);
    execd_sink *k = execd_sink_new(tk_respond_sse(r));
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &a, watch_main, k) != 0)
        tk_panic(__FILE__, __LINE__, "pthread_create(metrics)");
    pthread_attr_destroy(&a);
}

int execd_metrics_watchers(void)
{
    pthread_mutex_lock(&m_lock);
    int n = watchers;
    pthread_mutex_unlock(&m_lock);
    return n;
}

void execd_metrics_shutdown(void)
{
    pthread_mutex_lock(&m_lock);
    m_stopping = 1;
    int64_t until = tk_mono_ms() + 3000;
    while (watchers > 0 && tk_cond_wait_until(&m_cond, &m_lock, until) == 0)
        ;
    pthread_mutex_unlock(&m_lock);
}
