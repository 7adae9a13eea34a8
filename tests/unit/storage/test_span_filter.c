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
#include "span_fixture.h"

#define DUR 10000LL /* block duration, ms */
#define N_PROF 6
#define N_SERIES 2

static int64_t T0;
static int64_t now_ms;
static int64_t test_clock(void)
{
    return now_ms;
}

static void append(pd_storage *st, const char *name, const char *inst, int64_t ts, int j,
                   bool cumulative)
{
    pd_profile p;
    span_build(j, &p);
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
    span_check_cases(st, refs, NULL, N_SERIES, N_PROF, "head");
    span_check_cases(st, refs, one_group, N_SERIES, N_PROF, "head, one group");

    /* replayed from the WAL, not decomposed yet: handed over one by one */
    pd_storage_close(st);
    st = open_store(dir, 1);
    pd_storage_stats ss;
    pd_storage_stats_get(st, &ss);
    assert_int_equal(ss.n_head_profiles, N_PROF * N_SERIES);
    span_check_cases(st, refs, one_group, N_SERIES, N_PROF, "replayed head");

    /* a block: a profile of another series 1.5 x DUR on makes the range due */
    now_ms = T0 + 3 * DUR;
    append(st, "other", "x", T0 + 2 * DUR - 1, 0, false);
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_storage_maintain(st, &err), &err);
    pd_storage_stats_get(st, &ss);
    assert_true(ss.n_blocks >= 1);
    assert_int_equal(ss.n_head_profiles, 1);
    span_check_cases(st, refs, NULL, N_SERIES, N_PROF, "block");
    span_check_cases(st, refs, one_group, N_SERIES, N_PROF, "block, one group");
    pd_storage_close(st);

    /* the block walked by worker threads (a unit per series) */
    st = open_store(dir, 4);
    pd_storage_stats s0, s1;
    pd_storage_stats_get(st, &s0);
    span_check_cases(st, refs, NULL, N_SERIES, N_PROF, "block, 4 workers");
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
