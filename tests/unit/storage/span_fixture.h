/* Profiles for the span filter's tests (test_span_filter.c,
 * test_clickhouse.c): one sample per case of storage.h's span rule
 * (pd_storage_sample_filter), each with a distinct power-of-two value so a
 * sum names the samples in it, built with pd_profile_builder. Include after
 * <cmocka.h> and "../pd_test.h". */
#ifndef PD_TEST_SPAN_FIXTURE_H
#define PD_TEST_SPAN_FIXTURE_H
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pprof/pprof.h"

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

static void hex16(uint64_t v, bool upper, char out[17])
{
    snprintf(out, 17, upper ? "%016" PRIX64 : "%016" PRIx64, v);
}

/* Profile j: one sample per case, stack [f_<case>]. */
static void span_build(int j, pd_profile *out)
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

#include "storage/storage.h"

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

/* Checks every case of CASES on refs (n_series series of n_prof profiles
 * each, span_build(0..n_prof)) with pd_storage_aggregate_filtered. */
static void span_check_cases(pd_storage *st, const uint64_t *refs, const uint32_t *group,
                             size_t n_series, int n_prof, const char *where)
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
        size_t got_series = 0;
        PD_ASSERT_OK(pd_storage_aggregate_filtered(st, fc->all ? NULL : &f, refs, group, NULL,
                                                   n_series, INT64_MIN, INT64_MAX, sum_fn, NULL,
                                                   &s, &got_series, NULL, &err),
                     &err);
        int64_t want = fc->per_prof * n_prof * (int64_t)n_series, want_names = fc->per_prof;
        if (fc->unique_of >= 0) {
            want += V_UNIQUE * n_series;
            want_names |= V_UNIQUE;
        }
        if (s.value != want || s.names != want_names)
            fail_msg("%s, filter %s: sum %" PRId64 " (cases 0x%" PRIx64 "), want %" PRId64
                     " (cases 0x%" PRIx64 ")",
                     where, fc->what, s.value, s.names, want, want_names);
        /* a profile none of whose samples pass still counts in its part */
        assert_int_equal(s.profiles, n_prof * n_series);
        assert_int_equal(got_series, n_series);
    }
}

#endif
