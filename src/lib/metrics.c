#include "lib/metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/common.h"

enum kind { COUNTER, GAUGE, HISTOGRAM, GAUGE_FN };

struct series {
    char *values[TK_METRICS_MAX_LABELS];
    double value; /* counter, gauge */
    double sum;   /* histogram */
    unsigned long long count;
    unsigned long long *buckets; /* histogram: per bucket, not cumulative; +Inf last */
};

struct tk_metric {
    struct tk_metric *next;
    char *name, *help;
    enum kind kind;
    int nlabels;
    char *labels[TK_METRICS_MAX_LABELS];
    double bounds[TK_METRICS_MAX_BUCKETS];
    size_t nbounds;
    struct series *series;
    size_t nseries, cap;
    double (*fn)(void *);
    void *ud;
};

static const double default_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                        1,     2.5,  5,     10,   30,  60};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static tk_metric *head, **tail = &head;

static tk_metric *find(const char *name)
{
    for (tk_metric *m = head; m; m = m->next)
        if (strcmp(m->name, name) == 0)
            return m;
    return NULL;
}

static tk_metric *reg(enum kind k, const char *name, const char *help, const char *labels,
                      const double *bounds, size_t nbounds)
{
    pthread_mutex_lock(&lock);
    tk_metric *m = find(name);
    if (m) {
        pthread_mutex_unlock(&lock);
        return m;
    }
    m = tk_calloc(1, sizeof *m);
    m->name = tk_strdup(name);
    m->help = tk_strdup(help ? help : "");
    m->kind = k;
    for (const char *p = labels; p && *p && m->nlabels < TK_METRICS_MAX_LABELS;) {
        size_t n = strcspn(p, ",");
        m->labels[m->nlabels] = tk_calloc(1, n + 1);
        memcpy(m->labels[m->nlabels++], p, n);
        p += n + (p[n] == ',');
    }
    if (k == HISTOGRAM) {
        if (!bounds) {
            bounds = default_bounds;
            nbounds = TK_ARRAY_LEN(default_bounds);
        }
        if (nbounds > TK_METRICS_MAX_BUCKETS)
            nbounds = TK_METRICS_MAX_BUCKETS;
        memcpy(m->bounds, bounds, nbounds * sizeof *bounds);
        m->nbounds = nbounds;
    }
    *tail = m;
    tail = &m->next;
    pthread_mutex_unlock(&lock);
    return m;
}

tk_metric *tk_metrics_counter(const char *name, const char *help, const char *labels)
{
    return reg(COUNTER, name, help, labels, NULL, 0);
}

tk_metric *tk_metrics_gauge(const char *name, const char *help, const char *labels)
{
    return reg(GAUGE, name, help, labels, NULL, 0);
}

tk_metric *tk_metrics_histogram(const char *name, const char *help, const char *labels,
                                const double *buckets, size_t nbuckets)
{
    return reg(HISTOGRAM, name, help, labels, buckets, nbuckets);
}

void tk_metrics_gauge_fn(const char *name, const char *help, double (*fn)(void *ud), void *ud)
{
    tk_metric *m = reg(GAUGE_FN, name, help, NULL, NULL, 0);
    pthread_mutex_lock(&lock);
    m->fn = fn;
    m->ud = ud;
    pthread_mutex_unlock(&lock);
}

/* The series of the label values in ap (under the lock); NULL only when
 * create is 0 and it does not exist. */
static struct series *series_of(tk_metric *m, va_list ap, int create)
{
    const char *v[TK_METRICS_MAX_LABELS];
    for (int i = 0; i < m->nlabels; i++) {
        v[i] = va_arg(ap, const char *);
        if (!v[i])
            v[i] = "";
    }
    for (int pass = 0; pass < 2; pass++) {
        for (size_t s = 0; s < m->nseries; s++) {
            int eq = 1;
            for (int i = 0; i < m->nlabels && eq; i++)
                eq = strcmp(m->series[s].values[i], v[i]) == 0;
            if (eq)
                return &m->series[s];
        }
        if (!create)
            return NULL;
        if (m->nseries + 1 < TK_METRICS_MAX_SERIES)
            break;
        /* full: everything further counts under "_other" (the last slot) */
        for (int i = 0; i < m->nlabels; i++)
            v[i] = "_other";
    }
    if (m->nseries == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 4;
        struct series *ns = tk_calloc(m->cap, sizeof *ns);
        if (m->nseries)
            memcpy(ns, m->series, m->nseries * sizeof *ns);
        free(m->series);
        m->series = ns;
    }
    struct series *s = &m->series[m->nseries++];
    memset(s, 0, sizeof *s);
    for (int i = 0; i < m->nlabels; i++)
        s->values[i] = tk_strdup(v[i]);
    if (m->kind == HISTOGRAM)
        s->buckets = tk_calloc(m->nbounds + 1, sizeof *s->buckets);
    return s;
}

void tk_metrics_add(tk_metric *m, double v, ...)
{
    if (!m || (m->kind == COUNTER && !(v >= 0)) || isnan(v))
        return;
    va_list ap;
    va_start(ap, v);
    pthread_mutex_lock(&lock);
    struct series *s = series_of(m, ap, 1);
    s->value += v;
    pthread_mutex_unlock(&lock);
    va_end(ap);
}

void tk_metrics_set(tk_metric *m, double v, ...)
{
    if (!m || m->kind != GAUGE)
        return;
    va_list ap;
    va_start(ap, v);
    pthread_mutex_lock(&lock);
    series_of(m, ap, 1)->value = v;
    pthread_mutex_unlock(&lock);
    va_end(ap);
}

void tk_metrics_observe(tk_metric *m, double v, ...)
{
    if (!m || m->kind != HISTOGRAM || isnan(v))
        return;
    va_list ap;
    va_start(ap, v);
    pthread_mutex_lock(&lock);
    struct series *s = series_of(m, ap, 1);
    size_t b = 0;
    while (b < m->nbounds && v > m->bounds[b])
        b++;
    s->buckets[b]++;
    s->count++;
    s->sum += v;
    pthread_mutex_unlock(&lock);
    va_end(ap);
}

double tk_metrics_value(tk_metric *m, ...)
{
    if (!m)
        return 0;
    va_list ap;
    va_start(ap, m);
    pthread_mutex_lock(&lock);
    double v = 0;
    if (m->kind == GAUGE_FN) {
        v = m->fn ? m->fn(m->ud) : 0;
    } else {
        struct series *s = series_of(m, ap, 0);
        if (s)
            v = m->kind == HISTOGRAM ? (double)s->count : s->value;
    }
    pthread_mutex_unlock(&lock);
    va_end(ap);
    return v;
}

/* ---------- the text format ---------- */

static void num(tk_buf *b, double v)
{
    if (isinf(v))
        tk_buf_append_str(b, v > 0 ? "+Inf" : "-Inf");
    else if (isnan(v))
        tk_buf_append_str(b, "NaN");
    else if (v == floor(v) && fabs(v) < 1e15)
        tk_buf_printf(b, "%lld", (long long)v);
    else
        tk_buf_printf(b, "%.17g", v);
}

static void escaped(tk_buf *b, const char *s, int quote)
{
    for (; *s; s++) {
        if (*s == '\\')
            tk_buf_append_str(b, "\\\\");
        else if (*s == '\n')
            tk_buf_append_str(b, "\\n");
        else if (quote && *s == '"')
            tk_buf_append_str(b, "\\\"");
        else
            tk_buf_append_byte(b, *s);
    }
}

/* name{l="v",...,extra} */
static void sample_name(tk_buf *b, const tk_metric *m, const char *suffix, const struct series *s,
                        const char *le)
{
    tk_buf_append_str(b, m->name);
    tk_buf_append_str(b, suffix);
    if (m->nlabels == 0 && !le)
        return;
    tk_buf_append_byte(b, '{');
    for (int i = 0; i < m->nlabels; i++) {
        tk_buf_printf(b, "%s%s=\"", i ? "," : "", m->labels[i]);
        escaped(b, s->values[i], 1);
        tk_buf_append_byte(b, '"');
    }
    if (le)
        tk_buf_printf(b, "%sle=\"%s\"", m->nlabels ? "," : "", le);
    tk_buf_append_byte(b, '}');
}

void tk_metrics_render(tk_buf *b)
{
    static const char *types[] = {"counter", "gauge", "histogram", "gauge"};
    pthread_mutex_lock(&lock);
    for (tk_metric *m = head; m; m = m->next) {
        tk_buf_printf(b, "# HELP %s ", m->name);
        escaped(b, m->help, 0);
        tk_buf_printf(b, "\n# TYPE %s %s\n", m->name, types[m->kind]);
        if (m->kind == GAUGE_FN) {
            tk_buf_printf(b, "%s ", m->name);
            num(b, m->fn ? m->fn(m->ud) : 0);
            tk_buf_append_byte(b, '\n');
            continue;
        }
        if (m->nlabels == 0 && m->nseries == 0) {
            /* a metric without labels exists from the start, at 0 */
            static const struct series zero;
            if (m->kind == HISTOGRAM) {
                sample_name(b, m, "_bucket", &zero, "+Inf");
                tk_buf_printf(b, " 0\n%s_sum 0\n%s_count 0\n", m->name, m->name);
            } else {
                tk_buf_printf(b, "%s 0\n", m->name);
            }
            continue;
        }
        for (size_t i = 0; i < m->nseries; i++) {
            const struct series *s = &m->series[i];
            if (m->kind != HISTOGRAM) {
                sample_name(b, m, "", s, NULL);
                tk_buf_append_byte(b, ' ');
                num(b, s->value);
                tk_buf_append_byte(b, '\n');
                continue;
            }
            unsigned long long cum = 0;
            for (size_t k = 0; k <= m->nbounds; k++) {
                cum += s->buckets[k];
                char le[40];
                if (k == m->nbounds)
                    snprintf(le, sizeof le, "+Inf");
                else
                    snprintf(le, sizeof le, "%g", m->bounds[k]);
                sample_name(b, m, "_bucket", s, le);
                tk_buf_printf(b, " %llu\n", cum);
            }
            sample_name(b, m, "_sum", s, NULL);
            tk_buf_append_byte(b, ' ');
            num(b, s->sum);
            tk_buf_append_byte(b, '\n');
            sample_name(b, m, "_count", s, NULL);
            tk_buf_printf(b, " %llu\n", s->count);
        }
    }
    pthread_mutex_unlock(&lock);
}
