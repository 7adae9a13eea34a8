/* The open head group's running sum (issue 35 item 1; headmem.c,
 * blockagg.c: pd__bagg_fold_record; docs/format/aggregates.md "The head's
 * aggregates"). Every merge (pd_storage_aggregate, _delta) is compared with
 * the same merge done by decoding: each profile in the range read back alone
 * (pd_storage_read_profile) and folded with pprof's merge rules into a
 * canonical text (stacks by function/file/line and address, labels, values
 * summed, header). Cases, with the real heap and CPU profiles of
 * PD_TESTDATA/pprof/go-demo-series:
 *   - kinds: heap (gauges and Go's cumulative alloc_*), cpu (deltas), series
 *     of 10 (the open group only) and of 40 (a sealed group and an open one),
 *     plain merges and delta merges (cumulative masks), against a second
 *     store holding the same profiles appended out of time order (no sums);
 *     ranges holding everything or cutting the open group;
 *   - mixed sample types in one series (heap, cpu, heap: a new group each);
 *   - a late profile (the open group then has no sum) and the appends after;
 *   - a head cut whose boundary falls inside the open group (the rest of the
 *     group summed again, also after a clean restart);
 *   - one thread appending while another merges (slices of 1 ns): every
 *     answer equals the decode of exactly the first n profiles it counted;
 *   - after a clean close (the head snapshot: sums rebuilt at adoption) and
 *     after a "kill -9" (a child appends and _exits: the WAL replay rebuilds
 *     them).
 * Each case asserts pd_storage_stats.n_aggregate_head_open (or _groups) so
 * the summed path was taken.
 */
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include "../pd_test.h"

#include "base/metrics.h"
#include "storage/storage.h"

#ifndef PD_TESTDATA
#error "PD_TESTDATA must be defined"
#endif

#define NHEAP 30
#define NCPU 10
#define T0 1700000000000LL
#define STEP 1000LL

typedef struct tprof {
    uint8_t *body;
    size_t len;
    pd_profile p;
} tprof;

static tprof HEAP[NHEAP], CPU[NCPU];

static _Atomic int64_t NOW = T0 + 100000000LL;
static int64_t test_clock(void)
{
    return atomic_load(&NOW);
}

static void load_one(const char *path, tprof *t)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    t->body = malloc((size_t)n + 1);
    assert_non_null(t->body);
    assert_int_equal(fread(t->body, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    t->len = (size_t)n;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_profile_decode(&t->p, t->body, t->len, NULL, &err), &err);
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

/* ---- the canonical text of a merge ---- */

typedef struct line {
    char *key;
    int64_t v[16];
} line;

typedef struct canon { /* one sample-type signature */
    char *sig;
    bool any;
    int64_t period, time_nanos, duration;
    char comments[4096];
    char dst[256], doc[256], drop[256], keep[256];
    line *l;
    size_t n, cap, nt;
    uint64_t n_profiles;
} canon;

typedef struct merged {
    canon c[8];
    size_t n;
} merged;

static const char *S(const pd_profile *p, int64_t i)
{
    return i >= 0 && (size_t)i < p->n_string ? p->string_table[i] : "?";
}

static int cmp_label(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Folds p (n_profiles of them) into m with pprof's merge rules. */
static void fold(merged *m, const pd_profile *p, uint64_t n_profiles)
{
    char sig[1024] = "";
    for (size_t t = 0; t < p->n_sample_type; t++)
        snprintf(sig + strlen(sig), sizeof sig - strlen(sig), "%s/%s,",
                 S(p, p->sample_type[t].type), S(p, p->sample_type[t].unit));
    snprintf(sig + strlen(sig), sizeof sig - strlen(sig), "|%s/%s", S(p, p->period_type.type),
             S(p, p->period_type.unit));
    canon *c = NULL;
    for (size_t i = 0; i < m->n && !c; i++)
        if (!strcmp(m->c[i].sig, sig))
            c = &m->c[i];
    if (!c) {
        assert_true(m->n < 8);
        c = &m->c[m->n++];
        memset(c, 0, sizeof *c);
        c->sig = strdup(sig);
        c->nt = p->n_sample_type;
        assert_true(c->nt <= 16);
    }
    c->n_profiles += n_profiles;
    if (!c->any) {
        c->any = true;
        c->period = p->period;
        c->time_nanos = p->time_nanos;
        c->duration = p->duration_nanos;
        snprintf(c->drop, sizeof c->drop, "%s", S(p, p->drop_frames));
        snprintf(c->keep, sizeof c->keep, "%s", S(p, p->keep_frames));
        snprintf(c->dst, sizeof c->dst, "%s",
                 p->default_sample_type ? S(p, p->default_sample_type) : "");
        snprintf(c->doc, sizeof c->doc, "%s", p->doc_url ? S(p, p->doc_url) : "");
    } else {
        if (c->time_nanos == 0 || p->time_nanos < c->time_nanos)
            c->time_nanos = p->time_nanos;
        if (c->period == 0 || c->period < p->period)
            c->period = p->period;
        c->duration = (int64_t)((uint64_t)c->duration + (uint64_t)p->duration_nanos);
        if (!c->dst[0] && p->default_sample_type)
            snprintf(c->dst, sizeof c->dst, "%s", S(p, p->default_sample_type));
        if (!c->doc[0] && p->doc_url)
            snprintf(c->doc, sizeof c->doc, "%s", S(p, p->doc_url));
    }
    for (size_t i = 0; i < p->n_comment; i++) {
        char one[300];
        snprintf(one, sizeof one, "[%s]", S(p, p->comment[i]));
        if (!strstr(c->comments, one))
            snprintf(c->comments + strlen(c->comments), sizeof c->comments - strlen(c->comments),
                     "%s", one);
    }
    for (size_t s = 0; s < p->n_sample; s++) {
        const pd_pprof_sample *sa = &p->sample[s];
        pd_buf k;
        pd_buf_init(&k, 0);
        for (size_t j = 0; j < sa->n_location; j++) {
            const pd_pprof_location *lo = pd_profile_location(p, sa->location_id[j]);
            assert_non_null(lo);
            char t[64];
            snprintf(t, sizeof t, "@%llx", (unsigned long long)lo->address);
            pd_buf_append(&k, t, strlen(t));
            for (size_t q = 0; q < lo->n_line; q++) {
                const pd_pprof_function *fn = pd_profile_function(p, lo->line[q].function_id);
                char u[1024];
                snprintf(u, sizeof u, " %s:%s:%lld", fn ? S(p, fn->name) : "-",
                         fn ? S(p, fn->filename) : "-", (long long)lo->line[q].line);
                pd_buf_append(&k, u, strlen(u));
            }
            pd_buf_append(&k, ";", 1);
        }
        char *lab[64];
        size_t nl = 0;
        for (size_t j = 0; j < sa->n_label && nl < 64; j++) {
            char u[600];
            snprintf(u, sizeof u, "%s=%s#%lld", S(p, sa->label[j].key), S(p, sa->label[j].str),
                     (long long)sa->label[j].num);
            lab[nl++] = strdup(u);
        }
        qsort(lab, nl, sizeof *lab, cmp_label);
        for (size_t j = 0; j < nl; j++) {
            pd_buf_append(&k, "|", 1);
            pd_buf_append(&k, lab[j], strlen(lab[j]));
            free(lab[j]);
        }
        pd_buf_append(&k, "", 1);
        if (c->n == c->cap) {
            c->cap = c->cap ? 2 * c->cap : 1024;
            c->l = realloc(c->l, c->cap * sizeof *c->l);
            assert_non_null(c->l);
        }
        line *l = &c->l[c->n++];
        l->key = k.data;
        memset(l->v, 0, sizeof l->v);
        for (size_t v = 0; v < c->nt && v < sa->n_value; v++)
            l->v[v] = sa->value[v];
    }
}

static int cmp_line(const void *a, const void *b)
{
    return strcmp(((const line *)a)->key, ((const line *)b)->key);
}

static int cmp_canon(const void *a, const void *b)
{
    return strcmp(((const canon *)a)->sig, ((const canon *)b)->sig);
}

/* m as text (released). */
static char *text(merged *m)
{
    pd_buf o;
    pd_buf_init(&o, 0);
    qsort(m->c, m->n, sizeof *m->c, cmp_canon);
    for (size_t i = 0; i < m->n; i++) {
        canon *c = &m->c[i];
        char h[6000];
        snprintf(h, sizeof h,
                 "== %s profiles=%llu period=%lld time=%lld dur=%lld comments=%s dst=%s doc=%s "
                 "drop=%s keep=%s\n",
                 c->sig, (unsigned long long)c->n_profiles, (long long)c->period,
                 (long long)c->time_nanos, (long long)c->duration, c->comments, c->dst, c->doc,
                 c->drop, c->keep);
        pd_buf_append(&o, h, strlen(h));
        qsort(c->l, c->n, sizeof *c->l, cmp_line);
        for (size_t j = 0; j < c->n;) {
            int64_t v[16] = {0};
            size_t e = j;
            for (; e < c->n && !strcmp(c->l[e].key, c->l[j].key); e++)
                for (size_t t = 0; t < c->nt; t++)
                    v[t] = (int64_t)((uint64_t)v[t] + (uint64_t)c->l[e].v[t]);
            bool zero = true;
            for (size_t t = 0; t < c->nt; t++)
                zero = zero && v[t] == 0;
            if (!zero) {
                pd_buf_append(&o, c->l[j].key, strlen(c->l[j].key));
                for (size_t t = 0; t < c->nt; t++) {
                    char u[32];
                    snprintf(u, sizeof u, " %lld", (long long)v[t]);
                    pd_buf_append(&o, u, strlen(u));
                }
                pd_buf_append(&o, "\n", 1);
            }
            j = e;
        }
        for (size_t j = 0; j < c->n; j++)
            free(c->l[j].key);
        free(c->l);
        free(c->sig);
    }
    m->n = 0;
    pd_buf_append(&o, "", 1);
    return o.data;
}

static int fold_part(void *ctx, const pd_storage_agg_part *part, const pd_profile *p, pd_err *err)
{
    (void)err;
    fold(ctx, p, part->n_profiles);
    return 0;
}

/* The merge of series ref over [from, to] (mask: cumulative types, 0 none)
 * as text. */
static char *merge_text(pd_storage *st, uint64_t ref, int64_t from, int64_t to, uint64_t mask)
{
    merged m = {0};
    pd_err err = {{0}};
    if (mask)
        PD_ASSERT_OK(pd_storage_aggregate_delta(st, &ref, NULL, &mask, 1, from, to, fold_part, NULL,
                                                &m, NULL, NULL, &err),
                     &err);
    else
        PD_ASSERT_OK(
            pd_storage_aggregate(st, &ref, NULL, 1, from, to, fold_part, NULL, &m, NULL, &err),
            &err);
    return text(&m);
}

/* The same by decoding: each profile of [from, to] read alone (the first
 * `limit` of them, 0: all). */
static char *decode_text(pd_storage *st, uint64_t ref, int64_t from, int64_t to, size_t limit)
{
    merged m = {0};
    pd_err err = {{0}};
    pd_points pts;
    PD_ASSERT_OK(pd_storage_read_points(st, ref, from, to, &pts, &err), &err);
    for (size_t i = 0; i < pts.n && (!limit || i < limit); i++) {
        pd_profile p;
        PD_ASSERT_OK(pd_storage_read_profile(st, ref, pts.v[i].ts_ms, &p, NULL, &err), &err);
        fold(&m, &p, 1);
        pd_profile_release(&p);
    }
    pd_points_release(&pts);
    return text(&m);
}

static void same(const char *what, char *a, char *b)
{
    if (strcmp(a, b)) {
        size_t i = 0;
        while (a[i] && a[i] == b[i])
            i++;
        size_t s = i > 200 ? i - 200 : 0;
        fail_msg("%s: the summed merge differs from the decoded one at byte %zu:\n"
                 "summed:  ...%.300s\ndecoded: ...%.300s",
                 what, i, a + s, b + s);
    }
    free(a);
    free(b);
}

/* ---- stores ---- */

static pd_storage *open_store(const char *dir, int64_t block_ms, int64_t slice_ns)
{
    pd_storage_options o = pd_storage_options_default();
    o.path = dir;
    o.fsync = PD_FSYNC_NEVER;
    o.clock_ms = test_clock;
    o.retention_ms = -1;
    o.future_grace_ms = -1;
    o.maintenance_ms = -1;
    o.block_duration_ms = block_ms;
    o.aggregate_slice_ns = slice_ns;
    o.aggregate_workers = 1;
    pd_storage *st;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_storage_open(&o, &st, &err), &err);
    return st;
}

static void labels_of(pd_labels *ls, const char *name, const char *inst)
{
    pd_labels_init(ls);
    assert_int_equal(pd_labels_set(ls, "__name__", name, NULL), 0);
    assert_int_equal(pd_labels_set(ls, "instance", inst, NULL), 0);
}

static void append(pd_storage *st, const char *name, const char *inst, int64_t ts, const tprof *t)
{
    pd_labels ls;
    labels_of(&ls, name, inst);
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_storage_append(st, &ls, ts, t->body, t->len, &t->p, &err), &err);
    pd_labels_release(&ls);
}

static uint64_t ref_of(pd_storage *st, const char *name, const char *inst)
{
    pd_matcher m[2];
    assert_int_equal(pd_matcher_init(&m[0], PD_MATCH_EQ, "__name__", name, NULL), 0);
    assert_int_equal(pd_matcher_init(&m[1], PD_MATCH_EQ, "instance", inst, NULL), 0);
    pd_series_set set;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_storage_select(st, m, 2, INT64_MIN, INT64_MAX, &set, &err), &err);
    pd_matcher_release(&m[0]);
    pd_matcher_release(&m[1]);
    assert_int_equal(set.n, 1);
    uint64_t ref = set.v[0].ref;
    pd_series_set_release(&set);
    return ref;
}

static pd_storage_stats stats(pd_storage *st)
{
    pd_storage_stats s;
    pd_storage_stats_get(st, &s);
    return s;
}

/* Compares every merge of series ref over a few ranges of [lo, hi] with the
 * decode; masks: plain, and every type cumulative (the delta path). */
static void compare_ranges(pd_storage *st, uint64_t ref, int64_t lo, int64_t hi, const char *what)
{
    int64_t r[][2] = {{INT64_MIN, INT64_MAX},
                      {lo, hi},
                      {lo + (hi - lo) / 3, hi},
                      {lo, lo + (hi - lo) / 2},
                      {lo + STEP / 2, hi - STEP / 2}};
    for (size_t i = 0; i < sizeof r / sizeof *r; i++) {
        char w[256];
        snprintf(w, sizeof w, "%s, range %zu", what, i);
        same(w, merge_text(st, ref, r[i][0], r[i][1], 0),
             decode_text(st, ref, r[i][0], r[i][1], 0));
    }
}

/* ---- the cases ---- */

static void test_kinds(void **state)
{
    (void)state;
    char da[] = "/tmp/pd_open_sum_XXXXXX", db[] = "/tmp/pd_open_sum_XXXXXX";
    assert_non_null(mkdtemp(da));
    assert_non_null(mkdtemp(db));
    pd_storage *a = open_store(da, -1, 0), *b = open_store(db, -1, 0);
    /* heap10: the open group only; heap40: a sealed group and an open one
       of 8; cpu10. b: the same, each series appended out of time order */
    static const int n_of[3] = {10, 40, 10};
    static const char *name[3] = {"heap", "heap", "cpu"}, *inst[3] = {"a", "b", "a"};
    for (int s = 0; s < 3; s++)
        for (int k = 0; k < n_of[s]; k++) {
            int kb = (k * 7 + 3) % n_of[s]; /* a permutation (7 prime to 10 and 40) */
            const tprof *ta = s == 2 ? &CPU[k % NCPU] : &HEAP[(k + s) % NHEAP];
            const tprof *tb = s == 2 ? &CPU[kb % NCPU] : &HEAP[(kb + s) % NHEAP];
            append(a, name[s], inst[s], T0 + k * STEP, ta);
            append(b, name[s], inst[s], T0 + kb * STEP, tb);
        }
    for (int s = 0; s < 3; s++) {
        uint64_t ra = ref_of(a, name[s], inst[s]), rb = ref_of(b, name[s], inst[s]);
        int64_t hi = T0 + (n_of[s] - 1) * STEP;
        char w[128];
        snprintf(w, sizeof w, "%s{instance=%s} in order", name[s], inst[s]);
        compare_ranges(a, ra, T0, hi, w);
        int64_t r[][2] = {{T0, hi}, {T0 + 20 * STEP, hi}, {T0 + 3 * STEP, T0 + 7 * STEP}};
        for (size_t i = 0; i < 3; i++)
            for (uint64_t mask = 0; mask < 2; mask++) { /* the delta path too */
                uint64_t m = mask ? ~(uint64_t)0 : 0;
                snprintf(w, sizeof w, "%s{instance=%s} vs unsummed, range %zu mask %llu", name[s],
                         inst[s], i, (unsigned long long)mask);
                same(w, merge_text(a, ra, r[i][0], r[i][1], m),
                     merge_text(b, rb, r[i][0], r[i][1], m));
            }
    }
    pd_storage_stats sa = stats(a), sb = stats(b);
    assert_true(sa.n_aggregate_head_open > 0);     /* the running sums were used */
    assert_true(sa.n_aggregate_head_groups > 0);   /* and the sealed group's */
    assert_int_equal(sb.n_aggregate_head_open, 0); /* none out of time order */
    assert_int_equal(sb.n_aggregate_head_groups, 0);
    /* a range holding the open group whole adds its sum: one more use */
    uint64_t before = sa.n_aggregate_head_open;
    free(merge_text(a, ref_of(a, "heap", "a"), T0, T0 + 9 * STEP, 0));
    assert_int_equal(stats(a).n_aggregate_head_open, before + 1);
    /* one that cuts it decodes */
    free(merge_text(a, ref_of(a, "heap", "a"), T0 + STEP, T0 + 9 * STEP, 0));
    assert_int_equal(stats(a).n_aggregate_head_open, before + 1);
    pd_storage_close(a);
    pd_storage_close(b);
    nftw(da, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    nftw(db, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static void test_mixed_types(void **state)
{
    (void)state;
    char d[] = "/tmp/pd_open_sum_XXXXXX";
    assert_non_null(mkdtemp(d));
    pd_storage *st = open_store(d, -1, 0);
    /* one series: 5 heap, 5 cpu, 5 heap (each run its own group) */
    for (int k = 0; k < 15; k++)
        append(st, "mixed", "a", T0 + k * STEP, k / 5 == 1 ? &CPU[k % NCPU] : &HEAP[k]);
    uint64_t ref = ref_of(st, "mixed", "a");
    compare_ranges(st, ref, T0, T0 + 14 * STEP, "mixed sample types");
    assert_true(stats(st).n_aggregate_head_open > 0);
    pd_storage_close(st);
    nftw(d, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static void test_late(void **state)
{
    (void)state;
    char d[] = "/tmp/pd_open_sum_XXXXXX";
    assert_non_null(mkdtemp(d));
    pd_storage *st = open_store(d, -1, 0);
    for (int k = 0; k < 10; k++)
        append(st, "heap", "late", T0 + 2 * k * STEP, &HEAP[k]);
    uint64_t ref = ref_of(st, "heap", "late");
    compare_ranges(st, ref, T0, T0 + 18 * STEP, "before the late profile");
    uint64_t used = stats(st).n_aggregate_head_open;
    assert_true(used > 0);
    append(st, "heap", "late", T0 + 5 * STEP, &HEAP[20]); /* between two others */
    compare_ranges(st, ref, T0, T0 + 18 * STEP, "with a late profile");
    for (int k = 10; k < 14; k++) /* the same group takes more, still unsummed */
        append(st, "heap", "late", T0 + 2 * k * STEP, &HEAP[k]);
    compare_ranges(st, ref, T0, T0 + 26 * STEP, "after a late profile");
    assert_int_equal(stats(st).n_aggregate_head_open, used);
    pd_storage_close(st);
    nftw(d, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static void test_cut(void **state)
{
    (void)state;
    char d[] = "/tmp/pd_open_sum_XXXXXX";
    assert_non_null(mkdtemp(d));
    /* blocks of 10 s: profiles every 1 s; the cut of [T0-aligned range)
       leaves the open group partly in a block */
    pd_storage *st = open_store(d, 10 * STEP, 0);
    int64_t base = T0 - T0 % (10 * STEP);
    for (int k = 0; k < 25; k++)
        append(st, "heap", "cut", base + 5 * STEP + k * STEP, &HEAP[k]);
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_storage_maintain(st, &err), &err);
    assert_true(stats(st).n_blocks > 0);
    uint64_t ref = ref_of(st, "heap", "cut");
    /* the cuts took a group's first profiles (a new symbol generation
       sealed it): its others are summed again (compact.c resum_split) and
       merges holding them add that sum — without, only the open group's */
    pd_storage_stats s0 = stats(st);
    compare_ranges(st, ref, base + 5 * STEP, base + 29 * STEP, "after a head cut");
    pd_storage_stats s1 = stats(st);
    assert_true(s1.n_aggregate_head_groups > s0.n_aggregate_head_groups);
    uint64_t sums = s1.n_aggregate_head_groups - s0.n_aggregate_head_groups +
                    s1.n_aggregate_head_open - s0.n_aggregate_head_open;
    /* and as many after a clean restart: the snapshot's split group is
       summed over its live profiles at adoption (every group sealed then) */
    pd_storage_close(st);
    st = open_store(d, 10 * STEP, 0);
    s0 = stats(st);
    compare_ranges(st, ref, base + 5 * STEP, base + 29 * STEP, "a split group after a restart");
    s1 = stats(st);
    assert_int_equal(s1.n_aggregate_head_groups - s0.n_aggregate_head_groups +
                         s1.n_aggregate_head_open - s0.n_aggregate_head_open,
                     sums);
    /* appends continue into a new group, which sums again */
    for (int k = 25; k < 30; k++)
        append(st, "heap", "cut", base + 5 * STEP + k * STEP, &HEAP[k]);
    uint64_t used = stats(st).n_aggregate_head_open;
    compare_ranges(st, ref, base + 5 * STEP, base + 34 * STEP, "appends after a head cut");
    assert_true(stats(st).n_aggregate_head_open > used);
    pd_storage_close(st);
    nftw(d, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- appends racing merges ---- */

#define RACE_N 70 /* two sealed groups and an open one of 6 at the end */
#define RACE_MAX 400

typedef struct race {
    pd_storage *st;
    atomic_int done, appended;
    char *ans[RACE_MAX];
    uint64_t n_of[RACE_MAX];
    size_t n;
} race;

static void *appender(void *arg)
{
    race *r = arg;
    for (int k = 0; k < RACE_N; k++) {
        append(r->st, "heap", "race", T0 + k * STEP, &HEAP[k % NHEAP]);
        atomic_store(&r->appended, k + 1);
        usleep(1000); /* room for merges between appends too, not only during them */
    }
    atomic_store(&r->done, 1);
    return NULL;
}

static int count_part(void *ctx, const pd_storage_agg_part *part, const pd_profile *p, pd_err *err)
{
    (void)p;
    (void)err;
    *(uint64_t *)ctx += part->n_profiles;
    return 0;
}

static void test_race(void **state)
{
    (void)state;
    char d[] = "/tmp/pd_open_sum_XXXXXX";
    assert_non_null(mkdtemp(d));
    race *r = calloc(1, sizeof *r);
    r->st = open_store(d, -1, 1);                        /* slices as short as they get */
    append(r->st, "heap", "race", T0 - STEP, &HEAP[29]); /* the series exists */
    uint64_t ref = ref_of(r->st, "heap", "race");
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, appender, r), 0);
    int last = -1, same_n = 0;
    while (!atomic_load(&r->done) && r->n < RACE_MAX - 1) {
        int k = atomic_load(&r->appended);
        if (k == last && ++same_n > 3) { /* keep answers of many prefixes */
            usleep(200);
            continue;
        }
        if (k != last)
            same_n = 0;
        last = k;
        merged m = {0};
        pd_err err = {{0}};
        uint64_t n = 0;
        PD_ASSERT_OK(pd_storage_aggregate(r->st, &ref, NULL, 1, INT64_MIN, INT64_MAX, fold_part,
                                          NULL, &m, NULL, &err),
                     &err);
        for (size_t i = 0; i < m.n; i++)
            n += m.c[i].n_profiles;
        (void)count_part;
        r->n_of[r->n] = n;
        r->ans[r->n++] = text(&m);
    }
    pthread_join(th, NULL);
    r->n_of[r->n] = RACE_N + 1; /* and once after the last append */
    r->ans[r->n++] = merge_text(r->st, ref, INT64_MIN, INT64_MAX, 0);
    size_t distinct = 0;
    for (size_t i = 0; i < r->n; i++) {
        assert_true(r->n_of[i] >= 1 && r->n_of[i] <= RACE_N + 1);
        if (getenv("PD_TEST_VERBOSE"))
            print_message("merge %zu: %llu profiles\n", i, (unsigned long long)r->n_of[i]);
        distinct += !i || r->n_of[i] != r->n_of[i - 1];
        char w[128];
        snprintf(w, sizeof w, "merge %zu during appends (%llu profiles)", i,
                 (unsigned long long)r->n_of[i]);
        same(w, r->ans[i], decode_text(r->st, ref, INT64_MIN, INT64_MAX, r->n_of[i]));
    }
    print_message("%zu merges during %d appends, %zu distinct prefixes; open sums used %llu\n",
                  r->n, RACE_N, distinct, (unsigned long long)stats(r->st).n_aggregate_head_open);
    assert_true(stats(r->st).n_aggregate_head_open > 0);
    pd_storage_close(r->st);
    free(r);
    nftw(d, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- restarts ---- */

static void fill_restart(pd_storage *st)
{
    for (int k = 0; k < 45; k++) { /* a sealed group and an open one of 13 */
        append(st, "heap", "r", T0 + k * STEP, &HEAP[k % NHEAP]);
        if (k < 10)
            append(st, "cpu", "r", T0 + k * STEP, &CPU[k]);
    }
}

static void check_restart(pd_storage *st, const char *what)
{
    compare_ranges(st, ref_of(st, "heap", "r"), T0, T0 + 44 * STEP, what);
    compare_ranges(st, ref_of(st, "cpu", "r"), T0, T0 + 9 * STEP, what);
}

static void test_restart_clean(void **state)
{
    (void)state;
    char d[] = "/tmp/pd_open_sum_XXXXXX";
    assert_non_null(mkdtemp(d));
    pd_storage *st = open_store(d, -1, 0);
    fill_restart(st);
    check_restart(st, "before the close");
    pd_storage_close(st);
    st = open_store(d, -1, 0); /* adopts the head snapshot: sums rebuilt */
    assert_true(pd_storage_ready(st));
    check_restart(st, "after a clean close");
    pd_storage_stats s = stats(st);
    assert_true(s.n_aggregate_head_groups >= 2); /* adopted groups are sealed */
    /* appends after the start open new groups, which sum as they grow */
    for (int k = 45; k < 50; k++)
        append(st, "heap", "r", T0 + k * STEP, &HEAP[k % NHEAP]);
    compare_ranges(st, ref_of(st, "heap", "r"), T0, T0 + 49 * STEP, "appends after the start");
    assert_true(stats(st).n_aggregate_head_open > s.n_aggregate_head_open);
    pd_storage_close(st);
    nftw(d, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static void test_restart_kill(void **state)
{
    (void)state;
    char d[] = "/tmp/pd_open_sum_XXXXXX";
    assert_non_null(mkdtemp(d));
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) { /* the child appends and dies without closing */
        pd_storage *st = open_store(d, -1, 0);
        fill_restart(st);
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    pd_storage *st = open_store(d, -1, 0); /* the WAL replayed */
    pd_err err = {{0}};
    check_restart(st, "after kill -9, profiles read from the WAL");
    /* the maintenance round decomposes the replayed profiles into groups
       (appended as by a push: their sums run) */
    PD_ASSERT_OK(pd_storage_maintain(st, &err), &err);
    PD_ASSERT_OK(pd_storage_maintain(st, &err), &err);
    check_restart(st, "after kill -9 (WAL replay)");
    pd_storage_stats s = stats(st);
    print_message("after the replay: open sums used %llu, sealed %llu\n",
                  (unsigned long long)s.n_aggregate_head_open,
                  (unsigned long long)s.n_aggregate_head_groups);
    assert_true(s.n_aggregate_head_open > 0);
    assert_true(s.n_aggregate_head_groups > 0);
    pd_storage_close(st);
    nftw(d, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void)
{
    for (int i = 0; i < NHEAP; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/pprof/go-demo-series/heap-%04d.pb.gz", PD_TESTDATA, i + 1);
        load_one(path, &HEAP[i]);
    }
    for (int i = 0; i < NCPU; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/pprof/go-demo-series/cpu-%04d.pb.gz", PD_TESTDATA, i + 1);
        load_one(path, &CPU[i]);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kinds),        cmocka_unit_test(test_mixed_types),
        cmocka_unit_test(test_late),         cmocka_unit_test(test_cut),
        cmocka_unit_test(test_race),         cmocka_unit_test(test_restart_clean),
        cmocka_unit_test(test_restart_kill),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    for (int i = 0; i < NHEAP; i++) {
        pd_profile_release(&HEAP[i].p);
        free(HEAP[i].body);
    }
    for (int i = 0; i < NCPU; i++) {
        pd_profile_release(&CPU[i].p);
        free(CPU[i].body);
    }
    return rc;
}
