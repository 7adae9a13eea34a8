/* bench/merge_pushdown/head_open.c — the head's merge and append cost
 * in-process (issue 35 item 1: the open head group's running sum), without
 * HTTP or the merger (not a test):
 *
 *   bench_head_open DIR SERIES PER REPS FILE...
 *
 * Appends SERIES x PER profiles (FILEs cycled; series-interleaved in time,
 * one every 60 s per series, as bench/startup/restart.sh pushes them) into
 * a new store at DIR (no maintenance thread, no head cut), timing the
 * appends (wall and CPU per profile, getrusage); then sums every series in
 * one group over all time (pd_storage_aggregate, a plain merge) REPS times
 * and prints the median wall and CPU time per merge, the profiles summed
 * and the process' max RSS after the appends (the head's memory).
 * With SERIES x PER <= 31 per series everything is in open groups. Build:
 * the bench_head_open target (tests/unit/storage/CMakeLists.txt). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "storage/storage.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int count(void *ctx, const pd_storage_agg_part *part, const pd_profile *p, pd_err *err)
{
    (void)p;
    (void)err;
    *(size_t *)ctx += part->n_profiles;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: %s DIR SERIES PER REPS FILE...\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    size_t S = strtoull(argv[2], NULL, 10), P = strtoull(argv[3], NULL, 10);
    int reps = atoi(argv[4]);
    size_t nf = (size_t)argc - 5;
    uint8_t **body = calloc(nf, sizeof *body);
    size_t *len = calloc(nf, sizeof *len);
    pd_profile *prof = calloc(nf, sizeof *prof);
    for (size_t i = 0; i < nf; i++) {
        FILE *f = fopen(argv[5 + i], "rb");
        if (!f) {
            perror(argv[5 + i]);
            return 1;
        }
        fseek(f, 0, SEEK_END);
        len[i] = (size_t)ftell(f);
        fseek(f, 0, SEEK_SET);
        body[i] = malloc(len[i] + 1);
        if (fread(body[i], 1, len[i], f) != len[i])
            return 1;
        fclose(f);
        pd_err err = {{0}};
        if (pd_profile_decode(&prof[i], body[i], len[i], NULL, &err) < 0) {
            fprintf(stderr, "%s: %s\n", argv[5 + i], err.msg);
            return 1;
        }
    }
    pd_storage_options o = pd_storage_options_default();
    o.path = dir;
    o.fsync = PD_FSYNC_NEVER;
    o.retention_ms = -1;
    o.future_grace_ms = -1;
    o.maintenance_ms = -1;
    o.block_duration_ms = -1;
    o.aggregate_workers = 1;
    pd_storage *st;
    pd_err err = {{0}};
    if (pd_storage_open(&o, &st, &err)) {
        fprintf(stderr, "open %s: %s\n", dir, err.msg);
        return 1;
    }
    int64_t t0 = 1700000000000LL;
    uint64_t *refs = calloc(S, sizeof *refs);
    double w0 = now_s(), c0 = cpu_s();
    for (size_t j = 0; j < P; j++)
        for (size_t s = 0; s < S; s++) {
            char inst[32];
            snprintf(inst, sizeof inst, "i%zu", s);
            pd_labels ls;
            pd_labels_init(&ls);
            pd_labels_set(&ls, "__name__", "heap", NULL);
            pd_labels_set(&ls, "instance", inst, NULL);
            size_t k = (s * P + j) % nf;
            if (pd_storage_append(st, &ls, t0 + (int64_t)j * 60000, body[k], len[k], &prof[k],
                                  &err)) {
                fprintf(stderr, "append: %s\n", err.msg);
                return 1;
            }
            pd_labels_release(&ls);
        }
    double aw = now_s() - w0, ac = cpu_s() - c0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru); /* the head's memory: max RSS after the appends */
    long rss_kb = ru.ru_maxrss;
    pd_matcher m;
    pd_matcher_init(&m, PD_MATCH_EQ, "__name__", "heap", NULL);
    pd_series_set set;
    if (pd_storage_select(st, &m, 1, INT64_MIN, INT64_MAX, &set, &err)) {
        fprintf(stderr, "select: %s\n", err.msg);
        return 1;
    }
    pd_matcher_release(&m);
    size_t n = set.n;
    refs = realloc(refs, (n + 1) * sizeof *refs);
    uint32_t *group = calloc(n + 1, sizeof *group);
    for (size_t i = 0; i < n; i++)
        refs[i] = set.v[i].ref;
    pd_series_set_release(&set);
    double *wall = calloc((size_t)reps, sizeof *wall), *cpu = calloc((size_t)reps, sizeof *cpu);
    size_t got = 0;
    for (int r = 0; r < reps; r++) {
        got = 0;
        double w = now_s(), c = cpu_s();
        if (pd_storage_aggregate(st, refs, group, n, INT64_MIN, INT64_MAX, count, NULL, &got,
                                 NULL, &err)) {
            fprintf(stderr, "aggregate: %s\n", err.msg);
            return 1;
        }
        wall[r] = now_s() - w;
        cpu[r] = cpu_s() - c;
    }
    qsort(wall, (size_t)reps, sizeof *wall, cmpd);
    qsort(cpu, (size_t)reps, sizeof *cpu, cmpd);
    pd_storage_stats ss;
    pd_storage_stats_get(st, &ss);
    printf("%zu series x %zu: append %.1f us wall, %.1f us CPU per profile | merge of %zu "
           "profiles: median %.1f ms wall, %.1f ms CPU (best %.1f ms) | sealed groups summed %llu | "
           "max RSS after the appends %ld MB\n",
           S, P, aw / (double)(S * P) * 1e6, ac / (double)(S * P) * 1e6, got,
           wall[reps / 2] * 1e3, cpu[reps / 2] * 1e3, wall[0] * 1e3,
           (unsigned long long)ss.n_aggregate_head_groups, rss_kb / 1024);
    pd_storage_close(st);
    return 0;
}
