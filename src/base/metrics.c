#include "base/metrics.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct series {
    char *family;
    char *labels;
    double v;
} series;

typedef struct family {
    char *name;
    char *help;
    pd_metric_kind kind;
} family;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static series *ss;
static size_t n_ss, cap_ss;
static family *fs;
static size_t n_fs, cap_fs;

void pd_metrics_describe(const char *name, pd_metric_kind kind, const char *help)
{
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < n_fs; i++)
        if (strcmp(fs[i].name, name) == 0)
            goto out;
    if (n_fs == cap_fs) {
        size_t nc = cap_fs ? cap_fs * 2 : 32;
        family *nf = realloc(fs, nc * sizeof *nf);
        if (!nf)
            goto out;
        fs = nf;
        cap_fs = nc;
    }
    fs[n_fs].name = strdup(name);
    fs[n_fs].help = strdup(help);
    fs[n_fs].kind = kind;
    if (fs[n_fs].name && fs[n_fs].help)
        n_fs++;
out:
    pthread_mutex_unlock(&mu);
}

static series *find(const char *fam, const char *labels, int create)
{
    if (!labels)
        labels = "";
    for (size_t i = 0; i < n_ss; i++)
        if (strcmp(ss[i].family, fam) == 0 && strcmp(ss[i].labels, labels) == 0)
            return &ss[i];
    if (!create)
        return NULL;
    if (n_ss == cap_ss) {
        size_t nc = cap_ss ? cap_ss * 2 : 64;
        series *n = realloc(ss, nc * sizeof *n);
        if (!n)
            return NULL;
        ss = n;
        cap_ss = nc;
    }
    ss[n_ss].family = strdup(fam);
    ss[n_ss].labels = strdup(labels);
    ss[n_ss].v = 0;
    if (!ss[n_ss].family || !ss[n_ss].labels) {
        free(ss[n_ss].family);
        free(ss[n_ss].labels);
        return NULL;
    }
    return &ss[n_ss++];
}

void pd_metrics_add(const char *fam, const char *labels, double v)
{
    pthread_mutex_lock(&mu);
    series *s = find(fam, labels, 1);
    if (s)
        s->v += v;
    pthread_mutex_unlock(&mu);
}

void pd_metrics_set(const char *fam, const char *labels, double v)
{
    pthread_mutex_lock(&mu);
    series *s = find(fam, labels, 1);
    if (s)
        s->v = v;
    pthread_mutex_unlock(&mu);
}

double pd_metrics_get(const char *fam, const char *labels)
{
    pthread_mutex_lock(&mu);
    series *s = find(fam, labels, 0);
    double v = s ? s->v : 0;
    pthread_mutex_unlock(&mu);
    return v;
}

static int cmp_series(const void *a, const void *b)
{
    const series *x = a, *y = b;
    int c = strcmp(x->family, y->family);
    return c ? c : strcmp(x->labels, y->labels);
}

int pd_metrics_write(pd_buf *out)
{
    int rc = 0;
    pthread_mutex_lock(&mu);
    qsort(ss, n_ss, sizeof *ss, cmp_series);
    const char *last = NULL;
    for (size_t i = 0; i < n_ss && !rc; i++) {
        if (!last || strcmp(last, ss[i].family) != 0) {
            last = ss[i].family;
            const family *f = NULL;
            for (size_t j = 0; j < n_fs; j++)
                if (strcmp(fs[j].name, last) == 0)
                    f = &fs[j];
            if (f)
                rc = pd_buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", f->name, f->help, f->name,
                                   f->kind == PD_METRIC_COUNTER ? "counter" : "gauge");
            else
                rc = pd_buf_printf(out, "# TYPE %s untyped\n", last);
        }
        if (!rc) {
            if (ss[i].labels[0])
                rc = pd_buf_printf(out, "%s{%s} %.17g\n", ss[i].family, ss[i].labels, ss[i].v);
            else
                rc = pd_buf_printf(out, "%s %.17g\n", ss[i].family, ss[i].v);
        }
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

void pd_metrics_reset(void)
{
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < n_ss; i++) {
        free(ss[i].family);
        free(ss[i].labels);
    }
    n_ss = 0;
    pthread_mutex_unlock(&mu);
}
