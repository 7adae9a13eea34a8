/* The aggregation's sample filter (storage.h, pd_storage_sample_filter;
 * tsdb/aggregate.c): span profiles by the span_id / profile_id pprof
 * sample label, as grafana/otel-profiling-go writes it.
 *
 * Two series get N_PROF profiles each, built with pd_profile_builder, one
 * sample per case of the rule (value a distinct power of two, so any sum
 * names the samples in it): span A in lower and in upper case, span B,
 * span C under the older name profile_id, no label, the invalid id 0, a
 * numeric span_id, a 17-digit one, and a span unique to each profile (a
 * new label set per profile, as a busy service makes). Each filter's sum
 * is checked against the sum of the samples the rule admits, in the three
 * places a profile lives in the TSDB: the head (decomposed), the head
 * right after a reopen (replayed, not decomposed yet: maintenance off) and
 * a block (cut by pd_storage_maintain) — walked by the calling thread and
 * by worker threads (aggregate_workers 4, a group per series) — and for a
 * cumulative series through pd_storage_aggregate_delta's weights.
 */
#include <ftw.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "../pd_test.h"

#include "storage/storage.h"

#define DUR 10000LL /* block duration, ms */
#define N_PROF 6
#define N_SERIES 2

static const uint64_t SA = 0x9a517183f26a089dULL, SB = 0x5a4fe264a9c987feULL,
                      SC = 0x00000000000000c1ULL;
static uint64_t unique_id(int j) { return 0x7000000000000000ULL + (uint64_t)j; }

/* the cases, by value bit */
enum {
    V_A = 1 << 0,       /* span_id = SA, lower case */
    V_A_UP = 1 << 1,    /* span_id = SA, upper case */
    V_B = 1 << 2,       /* span_id = SB, with span_name */
    V_C_OLD = 1 << 3,   /* profile_id = SC (Pyroscope's older label) */
    V_NONE = 1 << 4,    /* no label */
    V_ZERO = 1 << 5,    /* span_id = 0000000000000000 */
    V_NUM = 1 << 6,     /* span_id numeric = SA */
    V_LONG = 1 << 7,    /* span_id = 17 hex digits */
    V_UNIQUE = 1 << 8,  /* span_id = unique_id(j) of profile j */
    V_OTHERKEY = 1 << 9 /* trace_id = SA's digits */
};

static int64_t T0;
static int64_t now_ms;
static int64_t test_clock(void) { return now_ms; }

static void hex16(uint64_t v, bool upper, char out[17])
{
    snprintf(out, 17, upper ? "%016" PRIX64 : "%016" PRIx64, v);
}

/* Profile j: one sample per case, stack [f_<case>]. */
static void build(int j, pd_profile *out)
{
    pd_profile_builder *b;
    pd_err err = {{0}};
    assert_int_equal(pd_profile_builder_new(NULL, &b), 0);
    PD_ASSERT_OK(pd_profile_builder_sample_type(b, "cpu", "nanoseconds", &err) < 0, &err);
    PD_ASSERT_OK(pd_profile_builder_period(b, "cpu", "nanoseconds", 10000000, &err), &err);
    char a[17], aup[17], bb[17], c[17], u[17];
    hex16(SA, false, a);
    hex16(SA, true, aup);
    hex16(SB, false, bb);
    hex16(SC, false, c);
    hex16(unique_id(j), false, u);
    struct {
        int v;
        const char *k1, *s1;
        int64_t num;
        const char *k2, *s2;
    } cs[] = {
        {V_A, "span_id", a, 0, NULL, NULL},
        {V_A_UP, "span_id", aup, 0, NULL, NULL},
        {V_B, "span_name", "spanB", 0, "span_id", bb},
        {V_C_OLD, "profile_id", c, 0, NULL, NULL},
        {V_NONE, NULL, NULL, 0, NULL, NULL},
        {V_ZERO, "span_id", "0000000000000000", 0, NULL, NULL},
        {V_NUM, "span_id", NULL, (int64_t)SA, NULL, NULL},
        {V_LONG, "span_id", "9a517183f26a089d0", 0, NULL, NULL},
        {V_UNIQUE, "span_id", u, 0, NULL, NULL},
        {V_OTHERKEY, "trace_id", a, 0, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) {
        char fname[32];
        snprintf(fname, sizeof fname, "f%d", cs[i].v);
        uint64_t fid, lid;
        PD_ASSERT_OK(pd_profile_builder_function(b, fname, NULL, "f.go", 1, &fid, &err), &err);
        pd_pprof_line ln = {.function_id = fid, .line = 1};
        PD_ASSERT_OK(pd_profile_builder_location(b, 0, 0x1000 + i, &ln, 1, &lid, &err), &err);
        pd_pprof_label lb[2];
        size_t n = 0;
        if (cs[i].k1) {
            lb[n] = (pd_pprof_label){.key = pd_profile_builder_string(b, cs[i].k1, &err)};
            if (cs[i].s1)
                lb[n].str = pd_profile_builder_string(b, cs[i].s1, &err);
            else
                lb[n].num = cs[i].num;
            n++;
        }
        if (cs[i].k2) {
            lb[n] = (pd_pprof_label){.key = pd_profile_builder_string(b, cs[i].k2, &err),
                                     .str = pd_profile_builder_string(b, cs[i].s2, &err)};
            n++;
        }
        int64_t v = cs[i].v;
        PD_ASSERT_OK(pd_profile_builder_sample(b, &lid, 1, &v, lb, n, &err), &err);
    }
    PD_ASSERT_OK(pd_profile_builder_finish(b, out, &err), &err);
    pd_profile_builder_free(b);
}

static void append(pd_storage *st, const char *name, const char *inst, int64_t ts, int j,
                   bool cumulative)
{
    pd_profile p;
    build(j, &p);
    if (cumulative) /* a counter since start: profile j holds (j+1) x the values */
        for (size_t i = 0; i < p.n_sample; i++)
            p.sample[i].value[0] *= j + 1;
    pd_buf body;
    pd_buf_init(&body, 0);
    assert_int_equal(pd_profile_encode(&p, true, &body), 0);
    pd_labels ls;
    pd_labels_init(&ls);
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_labels_set(&ls, "__name__", name, &err), &err);
    PD_ASSERT_OK(pd_labels_set(&ls, "instance", inst, &err), &err);
    PD_ASSERT_OK(pd_storage_append(st, &ls, ts, (const uint8_t *)body.data, body.len, &p, &err),
                 &err);
    pd_labels_release(&ls);
    pd_buf_release(&body);
    pd_profile_release(&p);
}

typedef struct sum {
    int64_t value;   /* sum of value[0] over every sample handed over */
    int64_t names;   /* OR of the case bits named by the functions of non-zero samples */
    size_t profiles; /* part.n_profiles summed */
} sum;

static int sum_fn(void *ctx, const pd_storage_agg_part *part, const pd_profile *p, pd_err *err)
{
    (void)err;
    sum *s = ctx;
    s->profiles += part->n_profiles;
    for (size_t i = 0; i < p->n_sample; i++) {
        const pd_pprof_sample *sm = &p->sample[i];
        s->value += sm->value[0];
        if (!sm->value[0])
            continue;
        const pd_pprof_location *loc = pd_profile_location(p, sm->location_id[0]);
        assert_non_null(loc);
        const pd_pprof_function *fn = pd_profile_function(p, loc->line[0].function_id);
        assert_non_null(fn);
        s->names |= atoi(pd_profile_str(p, fn->name) + 1);
    }
    return 0;
}

typedef struct fcase {
    const char *what;
    uint64_t ids[4];
    size_t n;
    bool all;         /* no filter */
    int64_t per_prof; /* the value bits of one profile that pass */
    int unique_of;    /* >= 0: also V_UNIQUE of profile unique_of only */
} fcase;

static const int64_t ALL_BITS = (1 << 10) - 1;

static const fcase CASES[] = {
    {"no filter", {0}, 0, true, ALL_BITS, -1},
    {"span A (either case)", {SA}, 1, false, V_A | V_A_UP, -1},
    {"span B", {SB}, 1, false, V_B, -1},
    {"span C under profile_id", {SC}, 1, false, V_C_OLD, -1},
    {"A, B and C", {SC, SB, SA}, 3, false, V_A | V_A_UP | V_B | V_C_OLD, -1}, /* sorted below */
    {"no id", {0}, 0, false, 0, -1},
    {"id 0", {0}, 1, false, 0, -1},
    {"an unknown id", {0x1234567890abcdefULL}, 1, false, 0, -1},
    {"profile 2's own span", {0x7000000000000002ULL}, 1, false, 0, 2},
};

/* Checks every case on refs (N_SERIES series of N_PROF profiles). */
static void check_cases(pd_storage *st, const uint64_t *refs, const uint32_t *group,
                        const char *where)
{
    for (size_t c = 0; c < sizeof CASES / sizeof *CASES; c++) {
        const fcase *fc = &CASES[c];
        uint64_t ids[4];
        memcpy(ids, fc->ids, sizeof ids);
        for (size_t i = 1; i < fc->n; i++) /* ascending, as the filter wants */
            for (size_t k = i; k > 0 && ids[k - 1] > ids[k]; k--) {
                uint64_t t = ids[k];
                ids[k] = ids[k - 1];
                ids[k - 1] = t;
            }
        pd_storage_sample_filter f = {.span_ids = ids, .n_span_ids = fc->n};
        sum s = {0};
        pd_err err = {{0}};
        size_t n_series = 0;
        PD_ASSERT_OK(pd_storage_aggregate_filtered(st, fc->all ? NULL : &f, refs, group, NULL,
                                                   N_SERIES, INT64_MIN, INT64_MAX, sum_fn, NULL,
                                                   &s, &n_series, NULL, &err),
                     &err);
        int64_t want = fc->per_prof * N_PROF * N_SERIES, want_names = fc->per_prof;
        if (fc->all)
            want = (ALL_BITS - V_UNIQUE) * N_PROF * N_SERIES + V_UNIQUE * N_PROF * N_SERIES;
        if (fc->unique_of >= 0) {
            want += V_UNIQUE * N_SERIES;
            want_names |= V_UNIQUE;
        }
        if (s.value != want || s.names != want_names)
            fail_msg("%s, filter %s: sum %" PRId64 " (cases 0x%" PRIx64 "), want %" PRId64
                     " (cases 0x%" PRIx64 ")",
                     where, fc->what, s.value, s.names, want, want_names);
        /* a profile none of whose samples pass still counts in its part */
        assert_int_equal(s.profiles, N_PROF * N_SERIES);
        assert_int_equal(n_series, N_SERIES);
    }
}

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static pd_storage *open_store(const char *dir, int workers)
{
    pd_storage_options o = pd_storage_options_default();
    o.path = dir;
    o.fsync = PD_FSYNC_NEVER;
    o.clock_ms = test_clock;
    o.retention_ms = -1;
    o.future_grace_ms = -1;
    o.block_duration_ms = DUR;
    o.maintenance_ms = -1; /* replayed profiles stay undecomposed until maintain */
    o.aggregate_workers = workers;
    pd_storage *st;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_storage_open(&o, &st, &err), &err);
    return st;
}

static void select_refs(pd_storage *st, const char *name, uint64_t *refs)
{
    pd_matcher m;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_matcher_init(&m, PD_MATCH_EQ, "__name__", name, &err), &err);
    pd_series_set set;
    PD_ASSERT_OK(pd_storage_select(st, &m, 1, INT64_MIN, INT64_MAX, &set, &err), &err);
    pd_matcher_release(&m);
    assert_int_equal(set.n, N_SERIES);
    for (size_t i = 0; i < set.n; i++)
        refs[i] = set.v[i].ref;
    pd_series_set_release(&set);
}

static void test_head_replay_block(void **state)
{
    (void)state;
    char dir[] = "/tmp/pd_span_filter_XXXXXX";
    assert_non_null(mkdtemp(dir));
    T0 = 1700000000000LL / DUR * DUR;
    now_ms = T0;
    pd_storage *st = open_store(dir, 1);
    for (int j = 0; j < N_PROF; j++)
        for (int i = 0; i < N_SERIES; i++)
            append(st, "cpu", i ? "i1" : "i0", T0 + 100 * j, j, false);
    uint64_t refs[N_SERIES];
    static const uint32_t one_group[N_SERIES] = {0, 0};
    select_refs(st, "cpu", refs);
    check_cases(st, refs, NULL, "head");
    check_cases(st, refs, one_group, "head, one group");

    /* replayed from the WAL, not decomposed yet: handed over one by one */
    pd_storage_close(st);
    st = open_store(dir, 1);
    pd_storage_stats ss;
    pd_storage_stats_get(st, &ss);
    assert_int_equal(ss.n_head_profiles, N_PROF * N_SERIES);
    check_cases(st, refs, one_group, "replayed head");

    /* a block: a profile of another series 1.5 x DUR on makes the range due */
    now_ms = T0 + 3 * DUR;
    append(st, "other", "x", T0 + 2 * DUR - 1, 0, false);
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_storage_maintain(st, &err), &err);
    pd_storage_stats_get(st, &ss);
    assert_true(ss.n_blocks >= 1);
    assert_int_equal(ss.n_head_profiles, 1);
    check_cases(st, refs, NULL, "block");
    check_cases(st, refs, one_group, "block, one group");
    pd_storage_close(st);

    /* the block walked by worker threads (a unit per series) */
    st = open_store(dir, 4);
    pd_storage_stats s0, s1;
    pd_storage_stats_get(st, &s0);
    check_cases(st, refs, NULL, "block, 4 workers");
    pd_storage_stats_get(st, &s1);
    assert_true(s1.n_aggregate_parallel > s0.n_aggregate_parallel);
    pd_storage_close(st);
    nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* Cumulative series (Go's allocs as served): profile j holds (j+1) x the
 * values, so the deltas over the range sum to last - first = N_PROF - 1
 * times one profile's — of the samples that pass. */
static void test_delta(void **state)
{
    (void)state;
    char dir[] = "/tmp/pd_span_filter_XXXXXX";
    assert_non_null(mkdtemp(dir));
    T0 = 1700000000000LL / DUR * DUR;
    now_ms = T0;
    pd_storage *st = open_store(dir, 1);
    for (int j = 0; j < N_PROF; j++)
        for (int i = 0; i < N_SERIES; i++)
            append(st, "allocs", i ? "i1" : "i0", T0 + 100 * j, j, true);
    uint64_t refs[N_SERIES], mask[N_SERIES] = {1, 1};
    select_refs(st, "allocs", refs);
    uint64_t ids[] = {SB};
    pd_storage_sample_filter f = {.span_ids = ids, .n_span_ids = 1};
    sum s = {0};
    size_t n_deltas = 0;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_storage_aggregate_filtered(st, &f, refs, NULL, mask, N_SERIES, INT64_MIN,
                                               INT64_MAX, sum_fn, NULL, &s, NULL, &n_deltas, &err),
                 &err);
    assert_int_equal(n_deltas, (N_PROF - 1) * N_SERIES);
    assert_int_equal(s.value, (int64_t)V_B * (N_PROF - 1) * N_SERIES);
    assert_int_equal(s.names, V_B);
    pd_storage_close(st);
    nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static void test_span_id_parse(void **state)
{
    (void)state;
    uint64_t v = 42;
    assert_true(pd_storage_span_id_parse("9a517183f26a089d", 16, &v));
    assert_true(v == SA);
    assert_true(pd_storage_span_id_parse("9A517183F26A089D", 16, &v));
    assert_true(v == SA);
    assert_true(pd_storage_span_id_parse("0000000000000000", 16, &v));
    assert_true(v == 0);
    v = 42;
    assert_false(pd_storage_span_id_parse("9a517183f26a089", 15, &v));
    assert_false(pd_storage_span_id_parse("9a517183f26a089d0", 17, &v));
    assert_false(pd_storage_span_id_parse("9a517183f26a089g", 16, &v));
    assert_false(pd_storage_span_id_parse("0x517183f26a089d", 16, &v));
    assert_false(pd_storage_span_id_parse(" 9a517183f26a089", 16, &v));
    assert_false(pd_storage_span_id_parse("", 0, &v));
    assert_true(v == 42);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_span_id_parse),
        cmocka_unit_test(test_head_replay_block),
        cmocka_unit_test(test_delta),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
