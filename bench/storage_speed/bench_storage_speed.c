/*
 * bench/storage_speed/bench_storage_speed.c — speed and memory of the
 * embedded store (storage.h, src/storage/tsdb) on real profiles, through the
 * public API only:
 *
 *   append   profiles/s into the head with the WAL on (fsync=batch), vs a raw
 *            write(2) of the same bodies to one file (fdatasync at the same
 *            1 s batch window);
 *   cut      head cut time (pd_storage_maintain, or the append that cut when
 *            the engine cuts inline), block_duration_ms chosen so that a
 *            series of P steps gives several cuts;
 *   compact  compaction time (the maintain rounds whose n_compactions grew);
 *   query    query_range latency: pd_storage_select + pd_storage_read_points
 *            for every one of S series x P profiles (timestamps + totals),
 *            once over a range held by a block, once over the head;
 *   read     single-profile read latency (pd_storage_read_profile, raw=NULL),
 *            random (series, ts) from the block and from the head;
 *   replay   pd_storage_open of a store whose WAL is ~W MB (block_duration_ms
 *            = -1, filled with fsync=never), vs `cat` of the same files;
 *   memory   VmRSS delta per series (S_mem series with one profile each) and
 *            per head profile (S x P profiles).
 *
 *   bench_storage_speed --out DIR [--data DIR] [--testdata DIR] [--series S]
 *       [--points P] [--append-n N] [--wal-mb W] [--cut-instances K] [--mem-series M]
 *       [--reps R] [--query-seq NAME] [--only append,cut,query,replay,memory]
 *       [--query-store DIR]  (only: query_range over a store bench_mkblock wrote,
 *                             job="bench", S x P; see query_range_http.sh)
 *
 * Profiles: every *.pb.gz under --testdata (default PD_TESTDATA/pprof) and
 * under --data (bench/storage_size/collect.sh output, one directory per
 * type); a directory's files in name order form a *sequence*: series j
 * takes its profiles, step after step, from sequence j mod n (as a real
 * series of one target and type would). Timestamps are 10 s apart. Every
 * timed figure is the median of R repetitions (and of many operations per
 * repetition for latencies); the store lives under --out, deleted first.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/metrics.h"
#include "pprof/pprof.h"
#include "storage/storage.h"

#ifndef PD_TESTDATA
#define PD_TESTDATA "/work/shared/testdata"
#endif

#define STEP_MS 10000

/* Declared in storage.h; weak so that this file also links against an engine
 * that does not define it yet (then the cut/compaction part says so). */
#pragma weak pd_storage_maintain

/* ---- profiles ---- */

typedef struct prof {
    uint8_t *body;
    size_t len;
    pd_profile p;
} prof;

typedef struct seq {
    char name[256];
    prof *v;
    size_t n;
} seq;

static seq *g_seq;
static size_t g_nseq;
static prof **g_all; /* every profile, for round-robin use */
static size_t g_nall;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* CPU seconds (user + system) of the whole process so far: on a shared
 * machine wall time includes waiting for a core, CPU time does not. */
static double cpu_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec / 1e6 +
           (double)u.ru_stime.tv_sec + (double)u.ru_stime.tv_usec / 1e6;
}

/* VmRSS in kB; first hands freed heap pages back (malloc_trim) so that a
 * delta measures what is held, not what an earlier section left free. */
static long rss_kb(void)
{
    malloc_trim(0);
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            kb = strtol(line + 6, NULL, 10);
    fclose(f);
    return kb;
}

static int cmpstr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
    if (!n)
        return 0;
    qsort(v, n, sizeof *v, cmpd);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double pct(double *v, size_t n, double p) /* v sorted */
{
    if (!n)
        return 0;
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return v[i];
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return b;
}

static bool ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* Loads the *.pb.gz of dir (recursively). The files of one directory form
 * one sequence; in go-demo-series the prefix before '-' splits sequences. */
static void load_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            names = realloc(names, cap * sizeof *names);
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmpstr);
    seq cur = {0};
    char curkey[256] = "";
    bool started = false;
    for (size_t i = 0; i <= n; i++) {
        char path[4096], key[256] = "";
        struct stat st;
        if (i < n) {
            snprintf(path, sizeof path, "%s/%s", dir, names[i]);
            if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
                load_dir(path);
                continue;
            }
            if (!ends_with(names[i], ".pb.gz"))
                continue;
            const char *dash = strchr(names[i], '-');
            snprintf(key, sizeof key, "%.*s", dash ? (int)(dash - names[i]) : 0, names[i]);
        }
        if (i == n || !started || strcmp(key, curkey)) {
            started = true;
            if (cur.n) {
                g_seq = realloc(g_seq, (g_nseq + 1) * sizeof *g_seq);
                g_seq[g_nseq++] = cur;
            }
            memset(&cur, 0, sizeof cur);
            snprintf(cur.name, sizeof cur.name, "%s%s%s", dir, *key ? "/" : "", key);
            snprintf(curkey, sizeof curkey, "%s", key);
            if (i == n)
                break;
        }
        prof p = {0};
        pd_err err;
        if (!(p.body = slurp(path, &p.len)) || pd_profile_decode(&p.p, p.body, p.len, NULL, &err)) {
            fprintf(stderr, "skip %s\n", path);
            free(p.body);
            continue;
        }
        cur.v = realloc(cur.v, (cur.n + 1) * sizeof *cur.v);
        cur.v[cur.n++] = p;
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* Sequences used for series: those with >= 10 profiles (real series), the
 * longest first; all profiles go to g_all. */
static void index_profiles(void)
{
    size_t k = 0;
    for (size_t i = 0; i < g_nseq; i++) {
        g_all = realloc(g_all, (g_nall + g_seq[i].n) * sizeof *g_all);
        for (size_t j = 0; j < g_seq[i].n; j++)
            g_all[g_nall++] = &g_seq[i].v[j];
    }
    for (size_t i = 0; i < g_nseq; i++)
        if (g_seq[i].n >= 10)
            g_seq[k++] = g_seq[i];
    g_nseq = k;
}

static const prof *series_prof(size_t series, size_t step)
{
    const seq *q = &g_seq[series % g_nseq];
    /* instances of one sequence start at different offsets */
    return &q->v[(step + (series / g_nseq) * 37) % q->n];
}

static void series_labels(pd_labels *l, const char *job, size_t series)
{
    pd_err err;
    char inst[64], pod[64];
    const char *typ = strrchr(g_seq[series % g_nseq].name, '/');
    snprintf(inst, sizeof inst, "10.0.%zu.%zu:6060", series / 250, series % 250);
    snprintf(pod, sizeof pod, "demo-%zu-7f9c", series / g_nseq);
    pd_labels_init(l);
    pd_labels_set(l, "__name__", typ ? typ + 1 : "profile", &err);
    pd_labels_set(l, "job", job, &err);
    pd_labels_set(l, "instance", inst, &err);
    pd_labels_set(l, "pod", pod, &err);
    pd_labels_set(l, "namespace", "bench", &err);
}

/* ---- store helpers ---- */

static const char *g_out;
static size_t g_reps = 3;

static int rm_cb(const char *p, const struct stat *sb, int f, struct FTW *w)
{
    (void)sb, (void)f, (void)w;
    return remove(p);
}

static void rm_rf(const char *p)
{
    nftw(p, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static uint64_t dir_bytes_total;
static int du_cb(const char *p, const struct stat *sb, int f, struct FTW *w)
{
    (void)p, (void)w;
    if (f == FTW_F)
        dir_bytes_total += (uint64_t)sb->st_size;
    return 0;
}

static uint64_t du(const char *p)
{
    dir_bytes_total = 0;
    nftw(p, du_cb, 16, FTW_PHYS);
    return dir_bytes_total;
}

static double g_open_cpu; /* CPU seconds of the last open_store */

static pd_storage *open_store(const char *path, pd_fsync_policy fs, int64_t block_ms,
                              double *secs /* OUT, may be NULL */)
{
    pd_storage_options o = pd_storage_options_default();
    o.path = path;
    o.fsync = fs;
    o.block_duration_ms = block_ms;
    o.maintenance_ms = -1;
    o.retention_ms = -1; /* fixed times from 2023: no lower time bound, no retention */
    pd_storage *s;
    pd_err err;
    double t0 = now_s(), c0 = cpu_s();
    if (pd_storage_open(&o, &s, &err)) {
        fprintf(stderr, "open %s: %s\n", path, err.msg);
        exit(1);
    }
    if (secs)
        *secs = now_s() - t0;
    g_open_cpu = cpu_s() - c0;
    return s;
}

static void append_or_die(pd_storage *s, const pd_labels *l, int64_t ts, const prof *p)
{
    pd_err err;
    if (pd_storage_append(s, l, ts, p->body, p->len, &p->p, &err)) {
        fprintf(stderr, "append ts=%lld: %s\n", (long long)ts, err.msg);
        exit(1);
    }
}

static void stats(pd_storage *s, pd_storage_stats *st)
{
    memset(st, 0, sizeof *st);
    pd_storage_stats_get(s, st);
}

/* ---- append ---- */

static void bench_append(size_t n_append)
{
    char dir[4096], raw[4096];
    snprintf(dir, sizeof dir, "%s/append", g_out);
    snprintf(raw, sizeof raw, "%s/append-raw", g_out);
    const size_t S = 100;
    pd_labels *ls = calloc(S, sizeof *ls);
    for (size_t j = 0; j < S; j++)
        series_labels(&ls[j], "append", j);
    double *rate = calloc(g_reps, sizeof *rate), *rrate = calloc(g_reps, sizeof *rrate);
    double *mbs = calloc(g_reps, sizeof *mbs), *rmbs = calloc(g_reps, sizeof *rmbs);
    double *cpu = calloc(g_reps, sizeof *cpu), *rcpu = calloc(g_reps, sizeof *rcpu);
    uint64_t bytes = 0;
    for (size_t r = 0; r < g_reps; r++) {
        rm_rf(dir);
        pd_storage *s = open_store(dir, PD_FSYNC_BATCH, -1, NULL);
        bytes = 0;
        double t0 = now_s(), c0 = cpu_s();
        for (size_t i = 0; i < n_append; i++) {
            const prof *p = g_all[i % g_nall];
            append_or_die(s, &ls[i % S], 1700000000000 + (int64_t)(i / S) * STEP_MS, p);
            bytes += p->len;
        }
        pd_storage_close(s);
        double dt = now_s() - t0;
        cpu[r] = (cpu_s() - c0) / (double)n_append;
        rate[r] = (double)n_append / dt;
        mbs[r] = (double)bytes / dt / 1e6;

        /* baseline: the same bodies written to one file, fdatasync per 1 s */
        rm_rf(raw);
        mkdir(raw, 0755);
        char f[4200];
        snprintf(f, sizeof f, "%s/raw", raw);
        t0 = now_s(), c0 = cpu_s();
        int fd = open(f, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        double last = t0;
        for (size_t i = 0; i < n_append; i++) {
            const prof *p = g_all[i % g_nall];
            if (write(fd, p->body, p->len) != (ssize_t)p->len) {
                perror("write");
                exit(1);
            }
            double t = now_s();
            if (t - last >= 1.0) {
                fdatasync(fd);
                last = t;
            }
        }
        fsync(fd);
        close(fd);
        dt = now_s() - t0;
        rcpu[r] = (cpu_s() - c0) / (double)n_append;
        rrate[r] = (double)n_append / dt;
        rmbs[r] = (double)bytes / dt / 1e6;
    }
    uint64_t wal = du(dir);
    double a = median(rate, g_reps), b = median(rrate, g_reps);
    printf("append: %zu profiles (%.1f MB of bodies, avg %.0f B) into 100 series, fsync=batch, "
           "WAL %.1f MB\n",
           n_append, (double)bytes / 1e6, (double)bytes / (double)n_append, (double)wal / 1e6);
    printf("  profd append      %10.0f profiles/s  %8.1f MB/s of bodies  (runs:", a,
           median(mbs, g_reps));
    for (size_t r = 0; r < g_reps; r++)
        printf(" %.0f", rate[r]);
    printf(")  CPU %.1f us/profile\n", median(cpu, g_reps) * 1e6);
    printf("  raw write(2)      %10.0f profiles/s  %8.1f MB/s  CPU %.1f us/profile\n", b,
           median(rmbs, g_reps), median(rcpu, g_reps) * 1e6);
    printf("  ratio profd/raw   %10.2f (wall)   CPU per profile %.2f x raw\n", a / b,
           median(cpu, g_reps) / median(rcpu, g_reps));
    for (size_t j = 0; j < S; j++)
        pd_labels_release(&ls[j]);
    free(ls), free(rate), free(rrate), free(mbs), free(rmbs), free(cpu), free(rcpu);
    rm_rf(dir);
    rm_rf(raw);
}

/* ---- cut and compaction ---- */

typedef struct round_rec {
    double secs, cpu;
    uint64_t cuts, comps, profiles_cut;
} round_rec;

static void read_lat(pd_storage *s, const pd_series_set *set, int64_t lo, size_t P,
                     const char *what);

static void bench_cut(size_t instances, size_t P)
{
    if (!pd_storage_maintain) {
        printf("cut/compact: pd_storage_maintain is not in this engine yet; skipped\n");
        return;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/cut", g_out);
    size_t S = instances * g_nseq;
    /* 5 block ranges over the P steps: cuts at 1.5d, 2.5d, 3.5d, 4.5d */
    int64_t d = (int64_t)P * STEP_MS / 5;
    d -= d % STEP_MS;
    int64_t t0ms = (1700000000000 / d + 1) * d;
    pd_labels *ls = calloc(S, sizeof *ls);
    for (size_t j = 0; j < S; j++)
        series_labels(&ls[j], "cut", j);
    round_rec *cuts = NULL, *comps = NULL;
    size_t ncut = 0, ncomp = 0;
    double *cut_med = calloc(g_reps, sizeof *cut_med), *cut_pp = calloc(g_reps, sizeof *cut_pp),
           *comp_med = calloc(g_reps, sizeof *comp_med), *idle = calloc(g_reps, sizeof *idle),
           *cut_cpu = calloc(g_reps, sizeof *cut_cpu), *comp_cpu = calloc(g_reps, sizeof *comp_cpu);
    size_t last_ncut = 0, last_ncomp = 0;
    uint64_t blocks_end = 0, cut_profiles = 0;
    for (size_t r = 0; r < g_reps; r++) {
        rm_rf(dir);
        pd_storage *s = open_store(dir, PD_FSYNC_BATCH, d, NULL);
        ncut = ncomp = 0;
        double *idles = calloc(P, sizeof *idles);
        size_t nidle = 0;
        pd_storage_stats st0, st1;
        for (size_t i = 0; i < P; i++) {
            int64_t ts = t0ms + (int64_t)i * STEP_MS;
            stats(s, &st0);
            for (size_t j = 0; j < S; j++) {
                /* stats() scans every series under the index lock: look
                 * only after a slow append, which is where an inline cut
                 * shows */
                double a = now_s(), ca = cpu_s();
                append_or_die(s, &ls[j], ts, series_prof(j, i));
                double b = now_s(), cb = cpu_s();
                if (b - a > 0.02)
                    stats(s, &st1);
                else
                    st1 = st0;
                if (st1.n_cuts > st0.n_cuts) { /* an engine that cuts inline */
                    cuts = realloc(cuts, (ncut + 1) * sizeof *cuts);
                    cuts[ncut++] = (round_rec){b - a, cb - ca, st1.n_cuts - st0.n_cuts, 0,
                                               st0.n_head_profiles + 1 - st1.n_head_profiles};
                    st0 = st1;
                }
            }
            stats(s, &st0);
            double a = now_s(), ca = cpu_s();
            pd_err err;
            if (pd_storage_maintain(s, &err)) {
                fprintf(stderr, "maintain: %s\n", err.msg);
                exit(1);
            }
            double b = now_s(), cb = cpu_s();
            stats(s, &st1);
            round_rec rr = {b - a, cb - ca, st1.n_cuts - st0.n_cuts, st1.n_compactions - st0.n_compactions,
                            st0.n_head_profiles - st1.n_head_profiles};
            if (rr.comps) {
                comps = realloc(comps, (ncomp + 1) * sizeof *comps);
                comps[ncomp++] = rr;
            } else if (rr.cuts) {
                cuts = realloc(cuts, (ncut + 1) * sizeof *cuts);
                cuts[ncut++] = rr;
            } else {
                idles[nidle++] = rr.secs;
            }
        }
        stats(s, &st1);
        blocks_end = st1.n_blocks;
        if (r + 1 == g_reps) {
            /* single-profile reads of these real series (heap: ~720 samples x 4
             * types), from the blocks [t0, t0 + 4d) and from the head after */
            pd_matcher m;
            pd_err err;
            pd_series_set set = {0};
            pd_matcher_init(&m, PD_MATCH_EQ, "job", "cut", &err);
            int rc = pd_storage_select(s, &m, 1, t0ms, t0ms + (int64_t)P * STEP_MS, &set, &err);
            if (rc)
                fprintf(stderr, "select: %s\n", err.msg);
            if (rc == 0 && set.n) {
                size_t nb = (size_t)(4 * d / STEP_MS);
                printf("cut/compact store, reads (%zu series of all types; last run):\n", set.n);
                read_lat(s, &set, t0ms, nb, "block");
                read_lat(s, &set, t0ms + 4 * d, P - nb, "head");
            }
            pd_series_set_release(&set);
            pd_matcher_release(&m);
        }
        pd_storage_close(s);
        double *v = calloc(ncut + ncomp + 1, sizeof *v);
        double *pp = calloc(ncut + 1, sizeof *pp);
        cut_profiles = 0;
        for (size_t i = 0; i < ncut; i++) {
            v[i] = cuts[i].secs;
            pp[i] = cuts[i].profiles_cut ? cuts[i].secs / (double)cuts[i].profiles_cut : 0;
            cut_profiles += cuts[i].profiles_cut;
        }
        cut_med[r] = median(v, ncut);
        cut_pp[r] = median(pp, ncut);
        for (size_t i = 0; i < ncut; i++)
            v[i] = cuts[i].cpu;
        cut_cpu[r] = median(v, ncut);
        for (size_t i = 0; i < ncomp; i++)
            v[i] = comps[i].cpu - (comps[i].cuts ? cut_cpu[r] * (double)comps[i].cuts : 0);
        comp_cpu[r] = median(v, ncomp);
        /* a round that also cut: subtract the median cut */
        for (size_t i = 0; i < ncomp; i++)
            v[i] = comps[i].secs - (comps[i].cuts ? cut_med[r] * (double)comps[i].cuts : 0);
        comp_med[r] = median(v, ncomp);
        idle[r] = median(idles, nidle);
        free(v), free(pp), free(idles);
        if (r + 1 < g_reps)
            free(cuts), free(comps), cuts = comps = NULL;
        last_ncut = ncut, last_ncomp = ncomp;
    }
    printf("cut/compact: %zu series (%zu sequences x %zu instances) x %zu steps of 10 s, "
           "block_duration %lld s\n",
           S, g_nseq, instances, P, (long long)(d / 1000));
    printf("  head cuts per run        %zu (%llu profiles in all, ~%.0f per cut)\n", last_ncut,
           (unsigned long long)cut_profiles, last_ncut ? (double)cut_profiles / last_ncut : 0);
    printf("  cut time                 %8.1f ms median wall (%.1f us per profile cut), "
           "%.1f ms CPU\n",
           median(cut_med, g_reps) * 1e3, median(cut_pp, g_reps) * 1e6,
           median(cut_cpu, g_reps) * 1e3);
    printf("  compactions per run      %zu", last_ncomp);
    for (size_t i = 0; i < last_ncomp; i++)
        printf(" [%.1f ms wall %.1f ms CPU, +%llu cuts in the round]", comps[i].secs * 1e3,
               comps[i].cpu * 1e3, (unsigned long long)comps[i].cuts);
    printf("\n  compaction time          %8.1f ms median wall, %.1f ms CPU (minus the round's "
           "cut)\n",
           median(comp_med, g_reps) * 1e3, median(comp_cpu, g_reps) * 1e3);
    printf("  maintain with nothing due %7.3f ms median\n", median(idle, g_reps) * 1e3);
    printf("  blocks at the end        %llu, on disk %.1f MB\n", (unsigned long long)blocks_end,
           (double)du(dir) / 1e6);
    free(cuts), free(comps), free(cut_med), free(cut_pp), free(comp_med), free(idle);
    free(cut_cpu), free(comp_cpu);
    for (size_t j = 0; j < S; j++)
        pd_labels_release(&ls[j]);
    free(ls);
    rm_rf(dir);
}

/* ---- query store: S x P in a block, S x P in the head ---- */

static void read_lat(pd_storage *s, const pd_series_set *set, int64_t lo, size_t P, const char *what)
{
    const size_t N = 500;
    double *med = calloc(g_reps, sizeof *med), *p99 = calloc(g_reps, sizeof *p99);
    double *v = calloc(N, sizeof *v), *cpu = calloc(g_reps, sizeof *cpu);
    unsigned seed = 42;
    for (size_t r = 0; r < g_reps; r++) {
        double c0 = cpu_s();
        for (size_t i = 0; i < N; i++) {
            const pd_series_info *si = &set->v[rand_r(&seed) % set->n];
            int64_t ts = lo + (int64_t)(rand_r(&seed) % P) * STEP_MS;
            pd_profile p;
            pd_err err;
            double a = now_s();
            int rc = pd_storage_read_profile(s, si->ref, ts, &p, NULL, &err);
            v[i] = now_s() - a;
            if (rc) {
                fprintf(stderr, "read_profile: %s\n", err.msg);
                exit(1);
            }
            pd_profile_release(&p);
        }
        cpu[r] = (cpu_s() - c0) / (double)N;
        qsort(v, N, sizeof *v, cmpd);
        med[r] = pct(v, N, 0.5);
        p99[r] = pct(v, N, 0.99);
    }
    printf("  read_profile %-6s  median %8.3f ms   p99 %8.3f ms   CPU %.3f ms/read  (%zu random "
           "reads x %zu runs)\n",
           what, median(med, g_reps) * 1e3, median(p99, g_reps) * 1e3, median(cpu, g_reps) * 1e3,
           N, g_reps);
    free(med), free(p99), free(v), free(cpu);
}

static const char *g_qjob = "query"; /* the job label of the series queried */

static void query_range(pd_storage *s, int64_t lo, int64_t hi, size_t S, size_t P,
                        const char *what, pd_series_set *keep /* OUT */)
{
    pd_matcher m;
    pd_err err;
    pd_matcher_init(&m, PD_MATCH_EQ, "job", g_qjob, &err);
    double *v = calloc(g_reps + 2, sizeof *v), *sel = calloc(g_reps + 2, sizeof *sel),
           *cpu = calloc(g_reps + 2, sizeof *cpu);
    size_t runs = g_reps + 2;
    for (size_t r = 0; r < runs; r++) {
        pd_series_set set = {0};
        double a = now_s(), c0 = cpu_s();
        if (pd_storage_select(s, &m, 1, lo, hi, &set, &err)) {
            fprintf(stderr, "select: %s\n", err.msg);
            exit(1);
        }
        double b = now_s();
        size_t npts = 0;
        for (size_t i = 0; i < set.n; i++) {
            pd_points pts = {0};
            if (pd_storage_read_points(s, set.v[i].ref, lo, hi, &pts, &err)) {
                fprintf(stderr, "read_points: %s\n", err.msg);
                exit(1);
            }
            npts += pts.n;
            pd_points_release(&pts);
        }
        v[r] = now_s() - a;
        cpu[r] = cpu_s() - c0;
        sel[r] = b - a;
        if (set.n != S || npts != S * P) {
            fprintf(stderr, "query %s: %zu series, %zu points (want %zu x %zu)\n", what, set.n,
                    npts, S, P);
            exit(1);
        }
        if (r == 0 && keep)
            *keep = set;
        else
            pd_series_set_release(&set);
    }
    printf("  query_range %-6s   %8.1f ms median wall, %.1f ms CPU (select %.1f ms)  %zu series "
           "x %zu points, %.0f ns/point  (runs:",
           what, median(v, runs) * 1e3, median(cpu, runs) * 1e3, median(sel, runs) * 1e3, S, P,
           median(v, runs) / (double)(S * P) * 1e9);
    for (size_t r = 0; r < runs; r++)
        printf(" %.1f", v[r] * 1e3);
    printf(")\n");
    pd_matcher_release(&m);
    free(v), free(sel), free(cpu);
}

/* --query-store DIR: query_range over the store at DIR as written by
 * bench_mkblock (bench/storage_speed/query_range_http.sh: S series x P
 * profiles of job="bench" in a block), without filling one here. */
static void bench_query_store(const char *dir, size_t S, size_t P)
{
    pd_storage *s = open_store(dir, PD_FSYNC_NEVER, 0, NULL);
    pd_storage_stats st;
    pd_storage_stats_get(s, &st);
    printf("query: the store at %s: %llu blocks, %llu profiles, [%lld, %lld]\n", dir,
           (unsigned long long)st.n_blocks, (unsigned long long)st.n_profiles,
           (long long)st.min_ts, (long long)st.max_ts);
    g_qjob = "bench";
    query_range(s, st.min_ts, st.max_ts, S, P, "block", NULL);
    pd_storage_close(s);
}

static void bench_query(size_t S, size_t P, const char *qseq)
{
    /* the query store takes its series from the sequences named qseq (the
     * smaller the profiles, the cheaper the fill and the cut of S x P; the
     * points read do not depend on the profiles' size) */
    seq *all_seq = g_seq, *sub = calloc(g_nseq, sizeof *sub);
    size_t all_n = g_nseq, nsub = 0;
    for (size_t i = 0; i < g_nseq; i++) {
        const char *b = strrchr(g_seq[i].name, '/');
        if (!qseq || !strcmp(b ? b + 1 : g_seq[i].name, qseq))
            sub[nsub++] = g_seq[i];
    }
    if (nsub) {
        g_seq = sub;
        g_nseq = nsub;
    }
    printf("query/read: series from %zu sequence(s) named %s\n", g_nseq, nsub && qseq ? qseq : "(any)");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/query", g_out);
    rm_rf(dir);
    int64_t d = (int64_t)P * STEP_MS; /* one block per P steps */
    int64_t t0ms = (1700000000000 / d + 1) * d;
    pd_storage *s = open_store(dir, PD_FSYNC_BATCH, d, NULL);
    pd_labels *ls = calloc(S, sizeof *ls);
    for (size_t j = 0; j < S; j++)
        series_labels(&ls[j], "query", j);
    double a = now_s();
    for (size_t j = 0; j < S; j++)
        append_or_die(s, &ls[j], t0ms, series_prof(j, 0));
    long rss1 = rss_kb();
    for (size_t i = 1; i < P; i++)
        for (size_t j = 0; j < S; j++)
            append_or_die(s, &ls[j], t0ms + (int64_t)i * STEP_MS, series_prof(j, i));
    double fill1 = now_s() - a;
    long rss2 = rss_kb();
    pd_storage_stats st;
    stats(s, &st);
    printf("query/read: store of %zu series x %zu profiles in a block [t0, t0+%llds) + %zu x %zu "
           "in the head\n",
           S, P, (long long)(d / 1000), S, P);
    printf("  fill of the first %zu profiles: %.1f s (%.0f profiles/s); head profiles %llu\n",
           S * P, fill1, (double)(S * P) / fill1, (unsigned long long)st.n_head_profiles);
    printf("  memory: %.1f B per head profile (VmRSS %ld kB after the first profile of each "
           "series -> %ld kB; per series: see memory:)\n",
           (double)(rss2 - rss1) * 1024 / (double)(S * (P - 1)), rss1, rss2);
    /* second range: into the head; the cut of the first is due at 1.5 d */
    a = now_s();
    uint64_t cuts0 = st.n_cuts;
    double cut_s = 0, cut_cpu = 0;
    for (size_t i = P; i < 2 * P; i++)
        for (size_t j = 0; j < S; j++) {
            double x = now_s(), cx = cpu_s();
            append_or_die(s, &ls[j], t0ms + (int64_t)i * STEP_MS, series_prof(j, i));
            double y = now_s();
            if (y - x > 0.05)
                cut_s += y - x, cut_cpu += cpu_s() - cx; /* an inline cut */
        }
    /* one more series, past 1.5 d, makes the cut of [t0, t0+d) due */
    pd_labels trig;
    series_labels(&trig, "trigger", 0);
    append_or_die(s, &trig, t0ms + d + d / 2, series_prof(0, 0));
    pd_labels_release(&trig);
    double fill2 = now_s() - a - cut_s; /* without an inline cut */
    if (pd_storage_maintain) {
        pd_err err;
        double x = now_s(), cx = cpu_s();
        if (pd_storage_maintain(s, &err)) {
            fprintf(stderr, "maintain: %s\n", err.msg);
            exit(1);
        }
        cut_s += now_s() - x;
        cut_cpu += cpu_s() - cx;
    }
    stats(s, &st);
    printf("  fill of the next %zu: %.1f s; cut of the first block (%zu profiles): %.1f s wall, "
           "%.1f s CPU = %.1f us CPU per profile (%llu cuts; blocks %llu, head profiles %llu)\n",
           S * P, fill2, S * P, cut_s, cut_cpu, cut_cpu / (double)(S * P) * 1e6,
           (unsigned long long)(st.n_cuts - cuts0), (unsigned long long)st.n_blocks,
           (unsigned long long)st.n_head_profiles);
    bool have_block = st.n_blocks > 0;
    pd_series_set bset = {0}, hset = {0};
    if (have_block)
        query_range(s, t0ms, t0ms + d - 1, S, P, "block", &bset);
    else
        printf("  (no block was cut: block figures skipped)\n");
    query_range(s, t0ms + d, t0ms + 2 * d - 1, S, P, "head", &hset);
    if (have_block)
        read_lat(s, &bset, t0ms, P, "block");
    read_lat(s, &hset, t0ms + d, P, "head");
    pd_series_set_release(&bset);
    pd_series_set_release(&hset);
    pd_storage_close(s);
    /* reopen: the blocks load, the head replays */
    double os;
    s = open_store(dir, PD_FSYNC_BATCH, d, &os);
    stats(s, &st);
    printf("  reopen: %.2f s wall, %.2f s CPU (blocks %llu, head profiles %llu, %.1f MB on disk)\n", os, g_open_cpu,
           (unsigned long long)st.n_blocks, (unsigned long long)st.n_head_profiles,
           (double)du(dir) / 1e6);
    pd_storage_close(s);
    for (size_t j = 0; j < S; j++)
        pd_labels_release(&ls[j]);
    free(ls);
    rm_rf(dir);
    g_seq = all_seq;
    g_nseq = all_n;
    free(sub);
}

/* ---- replay ---- */

static double cat_dir(const char *dir)
{
    char cmd[8300];
    snprintf(cmd, sizeof cmd, "cat '%s'/* > /dev/null", dir);
    double a = now_s();
    if (system(cmd) != 0)
        fprintf(stderr, "cat failed\n");
    return now_s() - a;
}

static void bench_replay(size_t wal_mb)
{
    char dir[4096], wdir[4200];
    snprintf(dir, sizeof dir, "%s/replay", g_out);
    snprintf(wdir, sizeof wdir, "%s/wal", dir);
    rm_rf(dir);
    const size_t S = 1000;
    pd_labels *ls = calloc(S, sizeof *ls);
    for (size_t j = 0; j < S; j++)
        series_labels(&ls[j], "replay", j);
    pd_storage *s = open_store(dir, PD_FSYNC_NEVER, -1, NULL);
    uint64_t bytes = 0, target = (uint64_t)wal_mb << 20;
    size_t n = 0;
    double a = now_s();
    while (bytes < target) {
        for (size_t j = 0; j < S; j++) {
            const prof *p = series_prof(j, n / S);
            append_or_die(s, &ls[j], 1700000000000 + (int64_t)(n / S) * STEP_MS, p);
            bytes += p->len;
        }
        n += S;
    }
    pd_storage_close(s);
    double fill = now_s() - a;
    uint64_t wal = du(wdir);
    double *op = calloc(g_reps, sizeof *op), *cat = calloc(g_reps, sizeof *cat),
           *opc = calloc(g_reps, sizeof *opc), *catc = calloc(g_reps, sizeof *catc);
    long *rss = calloc(g_reps, sizeof *rss), *rss_d = calloc(g_reps, sizeof *rss_d);
    double chunk_b = 0, *dec = calloc(g_reps, sizeof *dec), *decc = calloc(g_reps, sizeof *decc);
    cat_dir(wdir); /* both from the page cache */
    for (size_t r = 0; r < g_reps; r++) {
        long r0 = rss_kb();
        s = open_store(dir, PD_FSYNC_NEVER, -1, &op[r]);
        opc[r] = g_open_cpu;
        rss[r] = rss_kb() - r0;
        /* then the maintenance rounds that decompose the replayed profiles
           into the head (the thread's work after an open) */
        double d0 = now_s(), dc0 = cpu_s();
        pd_err merr;
        for (int k = 0; k < 100000 && pd_metrics_get("profd_storage_head_wal_only_profiles", NULL) > 0; k++)
            pd_storage_maintain(s, &merr);
        dec[r] = now_s() - d0;
        decc[r] = cpu_s() - dc0;
        rss_d[r] = rss_kb() - r0;
        chunk_b = pd_metrics_get("profd_storage_head_chunk_bytes", NULL);
        pd_storage_stats st;
        stats(s, &st);
        if (st.n_head_profiles && st.n_head_profiles != n)
            fprintf(stderr, "replay: %llu head profiles, want %zu\n",
                    (unsigned long long)st.n_head_profiles, n);
        pd_storage_close(s);
        struct rusage u0, u1;
        getrusage(RUSAGE_CHILDREN, &u0);
        cat[r] = cat_dir(wdir);
        getrusage(RUSAGE_CHILDREN, &u1);
        catc[r] = (double)(u1.ru_utime.tv_sec - u0.ru_utime.tv_sec + u1.ru_stime.tv_sec -
                           u0.ru_stime.tv_sec) +
                  (double)(u1.ru_utime.tv_usec - u0.ru_utime.tv_usec + u1.ru_stime.tv_usec -
                           u0.ru_stime.tv_usec) / 1e6;
    }
    double o = median(op, g_reps), c = median(cat, g_reps);
    printf("replay: WAL of %.1f MB (%zu profiles in %zu series; filled at %.0f profiles/s, "
           "fsync=never)\n",
           (double)wal / 1e6, n, S, (double)n / fill);
    double oc = median(opc, g_reps), cc = median(catc, g_reps);
    printf("  pd_storage_open   %8.2f s   %8.0f MB/s   CPU %.2f s = %.0f MB per CPU-s  (runs:", o,
           (double)wal / 1e6 / o, oc, (double)wal / 1e6 / oc);
    for (size_t r = 0; r < g_reps; r++)
        printf(" %.2f", op[r]);
    printf(")\n  cat > /dev/null   %8.2f s   %8.0f MB/s   CPU %.2f s (sh + cat; page cache warm "
           "for both)\n",
           c, (double)wal / 1e6 / c, cc);
    printf("  ratio open/cat    %8.1f x slower (wall), %.1f x (CPU)\n", o / c, oc / cc);
    double rr[64];
    for (size_t r = 0; r < g_reps && r < 64; r++)
        rr[r] = (double)rss[r];
    printf("  VmRSS after replay: +%.1f MB = %.1f B per head profile\n",
           median(rr, g_reps < 64 ? g_reps : 64) / 1024,
           median(rr, g_reps < 64 ? g_reps : 64) * 1024 / (double)n);
    for (size_t r = 0; r < g_reps && r < 64; r++)
        rr[r] = (double)rss_d[r];
    printf("  decomposing the replayed profiles into the head (maintenance, in the background "
           "after an open): %.2f s, CPU %.2f s = %.0f us per profile; VmRSS then +%.1f MB = "
           "%.1f B per head profile (value groups %.1f B)\n",
           median(dec, g_reps), median(decc, g_reps), median(decc, g_reps) * 1e6 / (double)n,
           median(rr, g_reps < 64 ? g_reps : 64) / 1024,
           median(rr, g_reps < 64 ? g_reps : 64) * 1024 / (double)n, chunk_b / (double)n);
    free(dec), free(decc), free(rss_d);
    free(op), free(cat), free(rss), free(opc), free(catc);
    for (size_t j = 0; j < S; j++)
        pd_labels_release(&ls[j]);
    free(ls);
    rm_rf(dir);
}

/* ---- memory per series ---- */

static void bench_memory(size_t M)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/memory", g_out);
    double *per = calloc(g_reps, sizeof *per), *perp = calloc(g_reps, sizeof *perp);
    const size_t P2 = 10;
    double chunk_b = 0;
    for (size_t r = 0; r < g_reps; r++) {
        rm_rf(dir);
        pd_storage *s = open_store(dir, PD_FSYNC_NEVER, -1, NULL);
        pd_labels *ls = calloc(M, sizeof *ls);
        for (size_t j = 0; j < M; j++)
            series_labels(&ls[j], "memory", j);
        long r0 = rss_kb();
        for (size_t j = 0; j < M; j++)
            append_or_die(s, &ls[j], 1700000000000, series_prof(j, 0));
        long r1 = rss_kb();
        for (size_t i = 1; i <= P2; i++)
            for (size_t j = 0; j < M; j++)
                append_or_die(s, &ls[j], 1700000000000 + (int64_t)i * STEP_MS, series_prof(j, i));
        long r2 = rss_kb();
        chunk_b = pd_metrics_get("profd_storage_head_chunk_bytes", NULL);
        per[r] = (double)(r1 - r0) * 1024 / (double)M;
        perp[r] = (double)(r2 - r1) * 1024 / (double)(M * P2);
        pd_storage_close(s);
        for (size_t j = 0; j < M; j++)
            pd_labels_release(&ls[j]);
        free(ls);
    }
    printf("memory: %zu series (5 labels each), then %zu more profiles each; VmRSS deltas\n", M, P2);
    printf("  per series (with its first profile) %8.0f B\n", median(per, g_reps));
    printf("  per further head profile            %8.1f B\n", median(perp, g_reps));
    printf("  value groups held (all %zu profiles) %8.1f B per profile\n", M * (P2 + 1),
           chunk_b / (double)(M * (P2 + 1)));
    free(per), free(perp);
    rm_rf(dir);
}

static bool want(const char *only, const char *what)
{
    if (!only)
        return true;
    const char *p = strstr(only, what);
    size_t n = strlen(what);
    return p && (p == only || p[-1] == ',') && (p[n] == 0 || p[n] == ',');
}

int main(int argc, char **argv)
{
    const char *data = NULL, *testdata = PD_TESTDATA "/pprof", *only = NULL, *qseq = NULL, *qstore = NULL;
    size_t S = 1000, P = 720, n_append = 50000, wal_mb = 1024, inst = 4, mem_series = 10000;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "%s: missing value\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--out"))
            g_out = v;
        else if (!strcmp(a, "--data"))
            data = v;
        else if (!strcmp(a, "--testdata"))
            testdata = v;
        else if (!strcmp(a, "--series"))
            S = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--points"))
            P = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--append-n"))
            n_append = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--wal-mb"))
            wal_mb = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--cut-instances"))
            inst = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--mem-series"))
            mem_series = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--reps"))
            g_reps = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--only"))
            only = v;
        else if (!strcmp(a, "--query-seq"))
            qseq = v;
        else if (!strcmp(a, "--query-store"))
            qstore = v;
        else {
            fprintf(stderr, "unknown argument %s\n", a);
            return 2;
        }
    }
    if (!g_out || !S || !P || !g_reps) {
        fprintf(stderr, "usage: %s --out DIR [--data DIR] [--testdata DIR] [--series S] "
                        "[--points P] [--append-n N] [--wal-mb W] [--cut-instances K] "
                        "[--mem-series M] [--reps R] [--query-seq NAME] [--query-store DIR] "
                        "[--only append,cut,query,replay,memory]\n",
                argv[0]);
        return 2;
    }
    pd_log_set_level("warn");
    if (qstore) {
        bench_query_store(qstore, S, P);
        return 0;
    }
    mkdir(g_out, 0755);
    load_dir(testdata);
    if (data)
        load_dir(data);
    index_profiles();
    if (!g_nseq) {
        fprintf(stderr, "no profile sequences (>= 10 profiles) under %s %s\n", testdata,
                data ? data : "");
        return 1;
    }
    uint64_t tot = 0;
    for (size_t i = 0; i < g_nall; i++)
        tot += g_all[i]->len;
    printf("profiles: %zu (avg %.0f B as served), %zu sequences for series:", g_nall,
           (double)tot / (double)g_nall, g_nseq);
    for (size_t i = 0; i < g_nseq; i++) {
        const char *b = strrchr(g_seq[i].name, '/');
        printf(" %s(%zu)", b ? b + 1 : g_seq[i].name, g_seq[i].n);
    }
    printf("\nreps %zu (figures are medians)\n\n", g_reps);
    fflush(stdout);
    if (want(only, "append"))
        bench_append(n_append), fflush(stdout);
    if (want(only, "memory"))
        bench_memory(mem_series), fflush(stdout);
    if (want(only, "cut"))
        bench_cut(inst, P < 700 ? P : 700), fflush(stdout);
    if (want(only, "query"))
        bench_query(S, P, qseq), fflush(stdout);
    if (want(only, "replay"))
        bench_replay(wal_mb), fflush(stdout);
    return 0;
}
