/* bench/merge_pushdown/aggregate.c — pd_storage_aggregate in-process, by
 * number of block walk threads (storage.h aggregate_workers), without HTTP
 * or the merger (not a test):
 *
 *   bench_aggregate REPS DIR_1 WORKERS_1 [DIR_2 WORKERS_2 ...]
 *
 * Each DIR is a copy of the same store (e.g. bench_mkblock's blocks; a store
 * is opened by one process at a time, so one copy per setting), opened with
 * its WORKERS. Every series is summed together over all time (one group:
 * one (block, group) unit per block), REPS times per setting, the settings
 * alternated rep by rep so that they share the machine's load alike. Prints
 * per setting the median and best wall time and the median CPU time of the
 * process (getrusage: every thread) per aggregation, and the parts handed
 * over, which must be equal across settings (exit 1 otherwise). */
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

typedef struct count {
    size_t parts, samples;
} count;

static int count_part(void *ctx, const pd_storage_agg_part *part, const pd_profile *p, pd_err *err)
{
    (void)part, (void)err;
    count *c = ctx;
    c->parts++;
    c->samples += p->n_sample;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 4 || (argc - 2) % 2) {
        fprintf(stderr, "usage: %s REPS DIR WORKERS [DIR WORKERS ...]\n", argv[0]);
        return 2;
    }
    size_t reps = strtoul(argv[1], NULL, 10), ns = (size_t)(argc - 2) / 2;
    pd_storage **st = calloc(ns, sizeof *st);
    pd_series_set *set = calloc(ns, sizeof *set);
    double *wall = calloc(ns * reps, sizeof *wall), *cpu = calloc(ns * reps, sizeof *cpu);
    count *cnt = calloc(ns, sizeof *cnt);
    pd_err err;
    for (size_t k = 0; k < ns; k++) {
        pd_storage_options o = pd_storage_options_default();
        o.path = argv[2 + 2 * k];
        o.retention_ms = -1;
        o.maintenance_ms = -1;
        o.aggregate_workers = atoi(argv[3 + 2 * k]);
        if (pd_storage_open(&o, &st[k], &err) ||
            pd_storage_select(st[k], NULL, 0, INT64_MIN, INT64_MAX, &set[k], &err)) {
            fprintf(stderr, "%s: %s\n", o.path, err.msg);
            return 1;
        }
    }
    for (size_t r = 0; r < reps; r++)
        for (size_t k = 0; k < ns; k++) {
            uint64_t *refs = malloc((set[k].n + 1) * sizeof *refs);
            uint32_t *group = calloc(set[k].n + 1, sizeof *group);
            for (size_t i = 0; i < set[k].n; i++)
                refs[i] = set[k].v[i].ref;
            count c = {0};
            double a = now_s(), ca = cpu_s();
            if (pd_storage_aggregate(st[k], refs, group, set[k].n, INT64_MIN, INT64_MAX,
                                     count_part, NULL, &c, NULL, &err)) {
                fprintf(stderr, "aggregate: %s\n", err.msg);
                return 1;
            }
            wall[k * reps + r] = now_s() - a;
            cpu[k * reps + r] = cpu_s() - ca;
            cnt[k] = c;
            free(refs);
            free(group);
        }
    int rc = 0;
    for (size_t k = 0; k < ns; k++) {
        qsort(wall + k * reps, reps, sizeof *wall, cmpd);
        qsort(cpu + k * reps, reps, sizeof *cpu, cmpd);
        printf("  workers=%-3s %zu series: %8.1f ms median wall (best %.1f), %8.1f ms CPU; "
               "%zu parts, %zu samples\n",
               argv[3 + 2 * k], set[k].n, wall[k * reps + reps / 2] * 1e3, wall[k * reps] * 1e3,
               cpu[k * reps + reps / 2] * 1e3, cnt[k].parts, cnt[k].samples);
        if (cnt[k].parts != cnt[0].parts || cnt[k].samples != cnt[0].samples)
            rc = 1;
        pd_series_set_release(&set[k]);
        pd_storage_close(st[k]);
    }
    free(st), free(set), free(wall), free(cpu), free(cnt);
    return rc;
}
