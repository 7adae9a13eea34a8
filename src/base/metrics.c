/*
 * base/metrics.c — the process-wide metric registry (contract in metrics.h).
 *
 * Layout. Every series is one heap node {family, labels, value}. Two views
 * of the same nodes, both guarded by `mu`:
 *
 *   ss[0..n_ss)   pointer array, the order pd_metrics_write sorts and prints;
 *                 node->pos is the node's index in it (kept true by the
 *                 swap-removal and re-numbered after each sort)
 *   bk[0..n_bk)   chained hash table on xxh3(family, labels) -> node->next,
 *                 n_bk a power of two >= n_ss (grown by doubling)
 *
 * So add/set/get and the removal of one series are O(1) on average whatever
 * the number of series (the scrape manager keeps a few per target), and a
 * prefix removal is one pass. Families (HELP and TYPE) are few: a plain
 * array searched linearly.
 */
#include "base/metrics.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

typedef struct series series;
struct series {
    char *family;
    char *labels;
    double v;
    uint64_t hash;
    size_t pos;   /* index in ss */
    series *next; /* hash chain */
};

typedef struct family {
    char *name;
    char *help;
    pd_metric_kind kind;
} family;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static series **ss;
static size_t n_ss, cap_ss;
static series **bk;
static size_t n_bk;
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

static uint64_t series_hash(const char *fam, const char *labels)
{
    uint64_t seed = XXH3_64bits(fam, strlen(fam));
    return XXH3_64bits_withSeed(labels, strlen(labels), seed);
}

/* Under mu: doubles the bucket array (at least 64) and rehashes. Keeps the
 * old table when out of memory (chains just get longer). */
static void grow_buckets(void)
{
    size_t nb = n_bk ? n_bk * 2 : 64;
    series **b = calloc(nb, sizeof *b);
    if (!b)
        return;
    for (size_t i = 0; i < n_ss; i++) {
        series *s = ss[i];
        s->next = b[s->hash & (nb - 1)];
        b[s->hash & (nb - 1)] = s;
    }
    free(bk);
    bk = b;
    n_bk = nb;
}

static series *find(const char *fam, const char *labels, int create)
{
    if (!labels)
        labels = "";
    uint64_t h = series_hash(fam, labels);
    if (n_bk)
        for (series *s = bk[h & (n_bk - 1)]; s; s = s->next)
            if (s->hash == h && strcmp(s->family, fam) == 0 && strcmp(s->labels, labels) == 0)
                return s;
    if (!create)
        return NULL;
    if (n_ss == cap_ss) {
        size_t nc = cap_ss ? cap_ss * 2 : 64;
        series **n = realloc(ss, nc * sizeof *n);
        if (!n)
            return NULL;
        ss = n;
        cap_ss = nc;
    }
    if (n_ss >= n_bk) {
        grow_buckets();
        if (!n_bk)
            return NULL;
    }
    series *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->family = strdup(fam);
    s->labels = strdup(labels);
    if (!s->family || !s->labels) {
        free(s->family);
        free(s->labels);
        free(s);
        return NULL;
    }
    s->hash = h;
    s->pos = n_ss;
    s->next = bk[h & (n_bk - 1)];
    bk[h & (n_bk - 1)] = s;
    ss[n_ss++] = s;
    return s;
}

/* Under mu: unlinks s from its chain and from ss (the last node takes its
 * place), then frees it. */
static void drop(series *s)
{
    series **pp = &bk[s->hash & (n_bk - 1)];
    while (*pp != s)
        pp = &(*pp)->next;
    *pp = s->next;
    series *last = ss[--n_ss];
    ss[s->pos] = last;
    last->pos = s->pos;
    free(s->family);
    free(s->labels);
    free(s);
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

int pd_metrics_has(const char *fam, const char *labels)
{
    pthread_mutex_lock(&mu);
    int has = find(fam, labels, 0) != NULL;
    pthread_mutex_unlock(&mu);
    return has;
}

int pd_metrics_remove(const char *fam, const char *labels)
{
    pthread_mutex_lock(&mu);
    series *s = find(fam, labels, 0);
    if (s)
        drop(s);
    pthread_mutex_unlock(&mu);
    return s != NULL;
}

size_t pd_metrics_remove_prefix(const char *fam, const char *labels)
{
    if (!labels)
        labels = "";
    size_t pl = strlen(labels), n = 0;
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < n_ss;) {
        const series *s = ss[i];
        if (strcmp(s->family, fam) == 0 && strncmp(s->labels, labels, pl) == 0 &&
            (pl == 0 || s->labels[pl] == '\0' || s->labels[pl] == ',')) {
            drop(ss[i]); /* ss[i] is now another node (or i == n_ss): look again */
            n++;
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&mu);
    return n;
}

static int cmp_series(const void *a, const void *b)
{
    const series *x = *(series *const *)a, *y = *(series *const *)b;
    int c = strcmp(x->family, y->family);
    return c ? c : strcmp(x->labels, y->labels);
}

static int cmp_family(const void *a, const void *b)
{
    return strcmp(((const family *)a)->name, ((const family *)b)->name);
}

static int put_meta(pd_buf *out, const family *f)
{
    return pd_buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", f->name, f->help, f->name,
                         f->kind == PD_METRIC_COUNTER ? "counter" : "gauge");
}

int pd_metrics_write(pd_buf *out)
{
    int rc = 0;
    pthread_mutex_lock(&mu);
    qsort(ss, n_ss, sizeof *ss, cmp_series);
    for (size_t i = 0; i < n_ss; i++)
        ss[i]->pos = i;
    qsort(fs, n_fs, sizeof *fs, cmp_family);
    /* merge the two sorted lists: a described family with no series gets
     * its HELP and TYPE alone (its name is in every scrape) */
    size_t j = 0;
    const char *last = NULL;
    for (size_t i = 0; i < n_ss && !rc; i++) {
        const series *s = ss[i];
        if (!last || strcmp(last, s->family) != 0) {
            last = s->family;
            while (j < n_fs && strcmp(fs[j].name, last) < 0 && !rc)
                rc = put_meta(out, &fs[j++]);
            if (rc)
                break;
            if (j < n_fs && strcmp(fs[j].name, last) == 0)
                rc = put_meta(out, &fs[j++]);
            else
                rc = pd_buf_printf(out, "# TYPE %s untyped\n", last);
        }
        if (!rc) {
            if (s->labels[0])
                rc = pd_buf_printf(out, "%s{%s} %.17g\n", s->family, s->labels, s->v);
            else
                rc = pd_buf_printf(out, "%s %.17g\n", s->family, s->v);
        }
    }
    while (j < n_fs && !rc)
        rc = put_meta(out, &fs[j++]);
    pthread_mutex_unlock(&mu);
    return rc;
}

void pd_metrics_reset(void)
{
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < n_ss; i++) {
        free(ss[i]->family);
        free(ss[i]->labels);
        free(ss[i]);
    }
    n_ss = 0;
    if (n_bk)
        memset(bk, 0, n_bk * sizeof *bk);
    pthread_mutex_unlock(&mu);
}
