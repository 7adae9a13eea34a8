/* Tests of the deltas of cumulative profiles (issue 12): the reset rule
 * (storage.h pd_point_is_reset), the rule of which types are cumulative
 * (query/delta.c), the timeline of deltas (pd_query_range_ex) and the merge
 * of deltas pushed down into the store (pd_storage_aggregate_delta through
 * pd_query_merge), property style: series of cumulative profiles with
 * random counters and random process restarts are generated here, stored
 * (head only, all in blocks, mixed), and every answer is compared with what
 * this test computes from the generated profiles themselves — each profile
 * minus the one before (also when that one is before the range), the new
 * profile itself after a restart, nothing for a series' first profile —
 * over ranges that start at the first profile, mid-lifetime, at a
 * restart, and hold one profile. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "query/query.h"

#define T0 ((int64_t)1700000000000) /* ms: the first profile */
#define STEP 1000                   /* ms between profiles of a series */
#define DUR 10000                   /* block duration, ms */
#define NS 3                        /* series */
#define NP 40                       /* profiles per series */
#define NSTACK 12
#define NT 4 /* alloc_objects, alloc_space, inuse_objects, inuse_space */

static const char *TYPES[NT][2] = {{"alloc_objects", "count"},
                                   {"alloc_space", "bytes"},
                                   {"inuse_objects", "count"},
                                   {"inuse_space", "bytes"}};

/* the generated truth */
static int64_t VAL[NS][NP][NSTACK][NT];
static bool RESTART[NS][NP]; /* profile k is the first of a new process */
static char STACK_NAME[NSTACK][64];
static int64_t NOW;

static uint64_t rng = 88172645463325252ULL;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int64_t test_clock(void)
{
    return NOW;
}

/* Stack s: leaf function l<s>, callers f<..> (shared), 1..4 deep. */
static size_t stack_funcs(size_t s, char names[4][8])
{
    size_t d = 1 + s % 4;
    snprintf(names[0], sizeof names[0], "l%zu", s);
    for (size_t k = 1; k < d; k++)
        snprintf(names[k], sizeof names[k], "f%zu", (s + k * 3) % 8);
    return d;
}

static void generate(void)
{
    for (size_t s = 0; s < NSTACK; s++) {
        char f[4][8];
        size_t d = stack_funcs(s, f);
        STACK_NAME[s][0] = 0;
        for (size_t k = 0; k < d; k++) {
            strcat(STACK_NAME[s], f[k]);
            strcat(STACK_NAME[s], ";");
        }
    }
    for (size_t i = 0; i < NS; i++) {
        int64_t cum[NSTACK][2] = {{0}};
        for (size_t k = 0; k < NP; k++) {
            int64_t tot = 0;
            for (size_t s = 0; s < NSTACK; s++)
                tot += cum[s][0];
            /* a restart only where its totals go down (the rule's blind
               spot is Prometheus' too); profile 10 of series 0 always */
            bool restart = k >= 2 && tot > 200 && ((i == 0 && k == 10) || rnd() % 8 == 0);
            RESTART[i][k] = restart;
            for (size_t s = 0; s < NSTACK; s++) {
                if (restart)
                    cum[s][0] = cum[s][1] = 0;
                int64_t inc = (s + k) % 5 == 0 ? 0 : (int64_t)(rnd() % (restart ? 2 : 20));
                cum[s][0] += inc;
                cum[s][1] += inc * (int64_t)(16 + s * 8);
                VAL[i][k][s][0] = cum[s][0];
                VAL[i][k][s][1] = cum[s][1];
                int64_t inuse = (int64_t)(rnd() % 10); /* a gauge: up and down */
                VAL[i][k][s][2] = inuse;
                VAL[i][k][s][3] = inuse * 32;
            }
        }
    }
}

static void build_profile(size_t i, size_t k, pd_profile *out, pd_buf *body)
{
    pd_profile_builder *b;
    pd_err err = {{0}};
    assert_int_equal(pd_profile_builder_new(NULL, &b), 0);
    for (size_t t = 0; t < NT; t++)
        assert_true(pd_profile_builder_sample_type(b, TYPES[t][0], TYPES[t][1], &err) >= 0);
    assert_int_equal(pd_profile_builder_period(b, "space", "bytes", 524288, &err), 0);
    pd_profile *bp = pd_profile_builder_profile(b);
    bp->default_sample_type = pd_profile_builder_string(b, "alloc_space", &err);
    bp->time_nanos = (T0 + (int64_t)k * STEP) * 1000000;
    for (size_t s = 0; s < NSTACK; s++) {
        bool zero = true;
        for (size_t t = 0; t < NT; t++)
            zero = zero && VAL[i][k][s][t] == 0;
        if (zero)
            continue;
        char f[4][8];
        size_t d = stack_funcs(s, f);
        uint64_t loc[4];
        for (size_t q = 0; q < d; q++) {
            uint64_t fid;
            assert_int_equal(pd_profile_builder_function(b, f[q], f[q], "x.go", 1, &fid, &err), 0);
            pd_pprof_line ln = {.function_id = fid, .line = 10};
            assert_int_equal(pd_profile_builder_location(b, 0, 0x1000 + 16 * (uint64_t)(s * 4 + q),
                                                         &ln, 1, &loc[q], &err),
                             0);
        }
        assert_int_equal(pd_profile_builder_sample(b, loc, d, VAL[i][k][s], NULL, 0, &err), 0);
    }
    assert_int_equal(pd_profile_builder_finish(b, out, &err), 0);
    pd_profile_builder_free(b);
    pd_buf_init(body, 0);
    assert_int_equal(pd_profile_encode(out, true, body), 0);
}

typedef enum { ST_HEAD, ST_BLOCKS, ST_MIXED } store_kind;
static const char *KIND[] = {"head", "blocks", "mixed"};

typedef struct fixture {
    char dir[256];
    pd_storage *st;
} fixture;

static void append(pd_storage *st, const char *name, const char *inst, bool mark, int64_t ts,
                   size_t i, size_t k)
{
    pd_profile p;
    pd_buf body;
    build_profile(i, k, &p, &body);
    pd_labels ls;
    pd_labels_init(&ls);
    assert_int_equal(pd_labels_set(&ls, "__name__", name, NULL), 0);
    assert_int_equal(pd_labels_set(&ls, "instance", inst, NULL), 0);
    if (mark)
        assert_int_equal(pd_labels_set(&ls, PD_LABEL_DELTA, "false", NULL), 0);
    pd_err err = {{0}};
    if (pd_storage_append(st, &ls, ts, (const uint8_t *)body.data, body.len, &p, &err))
        fail_msg("append: %s", err.msg);
    pd_labels_release(&ls);
    pd_profile_release(&p);
    pd_buf_release(&body);
}

static void open_store(fixture *fx, store_kind kind)
{
    snprintf(fx->dir, sizeof fx->dir, "/tmp/pd_query_delta_XXXXXX");
    assert_non_null(mkdtemp(fx->dir));
    pd_storage_options o = pd_storage_options_default();
    o.path = fx->dir;
    o.fsync = PD_FSYNC_NEVER;
    o.clock_ms = test_clock;
    o.retention_ms = 7LL * 24 * 3600 * 1000;
    o.future_grace_ms = -1;
    o.maintenance_ms = -1;
    o.block_duration_ms = kind == ST_HEAD ? -1 : DUR;
    int64_t t_end = T0 + (NP - 1) * STEP;
    NOW = t_end + 1000;
    pd_err err = {{0}};
    if (pd_storage_open(&o, &fx->st, &err))
        fail_msg("open: %s", err.msg);
    for (size_t k = 0; k < NP; k++)
        for (size_t i = 0; i < NS; i++) {
            char inst[8];
            snprintf(inst, sizeof inst, "i%zu", i);
            append(fx->st, "allocs", inst, true, T0 + (int64_t)k * STEP, i, k);
            /* the same counters pushed (no mark): never differenced */
            append(fx->st, "pushed", inst, false, T0 + (int64_t)k * STEP, i, k);
        }
    if (kind == ST_BLOCKS) {
        NOW = t_end + 100 * DUR;
        append(fx->st, "pusher", "x", false, t_end + 50 * DUR, 0, 0);
    }
    for (int k = 0; k < 8 && kind != ST_HEAD; k++)
        if (pd_storage_maintain(fx->st, &err))
            fail_msg("maintain: %s", err.msg);
    pd_storage_stats s;
    pd_storage_stats_get(fx->st, &s);
    if (kind == ST_HEAD)
        assert_int_equal(s.n_blocks, 0);
    else
        assert_true(s.n_blocks > 0);
    if (kind == ST_BLOCKS)
        assert_int_equal(s.n_head_profiles, 1);
    if (kind == ST_MIXED)
        assert_true(s.n_head_profiles > 0 && s.n_head_profiles < 2 * NS * NP);
}

static void close_store(fixture *fx)
{
    pd_storage_close(fx->st);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fx->dir);
    assert_int_equal(system(cmd), 0);
}

/* ---- expectations, from the generated profiles ---- */

/* The delta of profile k of series i (k > 0): P_k - P_{k-1}, P_k after a
 * restart. */
static int64_t delta_of(size_t i, size_t k, size_t s, size_t t)
{
    return RESTART[i][k] ? VAL[i][k][s][t] : VAL[i][k][s][t] - VAL[i][k - 1][s][t];
}

/* The merge's values per stack from a result profile (stack named by its
 * function names, leaf first, as STACK_NAME). */
static void per_stack(const pd_profile *p, int64_t out[NSTACK][NT])
{
    memset(out, 0, sizeof(int64_t) * NSTACK * NT);
    assert_int_equal(p->n_sample_type, NT);
    for (size_t j = 0; j < p->n_sample; j++) {
        const pd_pprof_sample *sm = &p->sample[j];
        char name[64] = "";
        for (size_t q = 0; q < sm->n_location; q++) {
            const pd_pprof_location *l = pd_profile_location(p, sm->location_id[q]);
            const pd_pprof_function *f = pd_profile_function(p, l->line[0].function_id);
            strcat(name, pd_profile_str(p, f->name));
            strcat(name, ";");
        }
        size_t s = 0;
        while (s < NSTACK && strcmp(STACK_NAME[s], name))
            s++;
        if (s == NSTACK)
            fail_msg("unknown stack %s", name);
        for (size_t t = 0; t < NT; t++)
            out[s][t] += sm->value[t];
    }
}

static int64_t round_div(int64_t v, size_t n)
{
    return (int64_t)llround((double)v / (double)n);
}

/* Profiles a..b (indexes) of every series: the merge with delta and the
 * raw merge, against the arithmetic here; and the timeline. */
static void check_range(pd_storage *st, const char *kind, size_t a, size_t b)
{
    pd_query_side q = {.selector = "allocs",
                       .mode = PD_QUERY_MODE_MERGE,
                       .from = T0 + (int64_t)a * STEP,
                       .to = T0 + (int64_t)b * STEP};
    int64_t want[NSTACK][NT] = {{0}}, raw[NSTACK][NT] = {{0}}, got[NSTACK][NT];
    size_t k0 = a ? a : 1; /* profile 0 is each series' first: no delta */
    for (size_t i = 0; i < NS; i++)
        for (size_t s = 0; s < NSTACK; s++)
            for (size_t t = 0; t < NT; t++) {
                for (size_t k = k0; k <= b; k++)
                    want[s][t] += delta_of(i, k, s, t);
                for (size_t k = a; k <= b; k++)
                    raw[s][t] += VAL[i][k][s][t];
            }
    size_t n_deltas = NS * (b + 1 - k0);
    pd_merge_options o = {0};
    pd_merge_stats stats;
    pd_profile p;
    pd_err err = {{0}};
    /* delta (auto: the default sample type alloc_space is cumulative) */
    int rc = pd_query_merge(st, &q, &o, &p, &stats, &err);
    if (n_deltas == 0) {
        assert_int_equal(rc, PD_ENOTFOUND);
        assert_non_null(strstr(err.msg, "no delta"));
    } else {
        if (rc)
            fail_msg("%s [%zu,%zu]: %s", kind, a, b, err.msg);
        assert_true(stats.delta);
        assert_int_equal(stats.profiles, n_deltas);
        per_stack(&p, got);
        for (size_t s = 0; s < NSTACK; s++)
            for (size_t t = 0; t < NT; t++)
                if (got[s][t] != want[s][t])
                    fail_msg("%s [%zu,%zu] stack %s %s: got %" PRId64 ", want %" PRId64, kind, a, b,
                             STACK_NAME[s], TYPES[t][0], got[s][t], want[s][t]);
        pd_profile_release(&p);
        /* the same through pd_query_merge_refs (the Connect querier's path) */
        pd_matcher *ms;
        size_t nm;
        pd_series_set set;
        assert_int_equal(pd_selector_parse("allocs", &ms, &nm, &err), 0);
        assert_int_equal(pd_storage_select(st, ms, nm, q.from, q.to, &set, &err), 0);
        assert_int_equal(set.n, NS);
        pd_query_refs qr = {set.v, set.n, q.from, q.to};
        if (pd_query_merge_refs(st, NULL, &qr, &o, &p, &stats, &err))
            fail_msg("%s refs: %s", kind, err.msg);
        assert_true(stats.delta);
        assert_int_equal(stats.profiles, n_deltas);
        per_stack(&p, got);
        assert_memory_equal(got, want, sizeof want);
        pd_profile_release(&p);
        o.delta = PD_DELTA_RAW;
        assert_int_equal(pd_query_merge_refs(st, NULL, &qr, &o, &p, &stats, &err), 0);
        assert_false(stats.delta);
        per_stack(&p, got);
        assert_memory_equal(got, raw, sizeof raw);
        pd_profile_release(&p);
        o.delta = PD_DELTA_AUTO;
        pd_series_set_release(&set);
        pd_matchers_free(ms, nm);
        /* agg=avg divides by the number of deltas */
        o.agg = PD_MERGE_AVG;
        assert_int_equal(pd_query_merge(st, &q, &o, &p, &stats, &err), 0);
        per_stack(&p, got);
        for (size_t s = 0; s < NSTACK; s++)
            for (size_t t = 0; t < NT; t++)
                assert_true(llabs(got[s][t] - round_div(want[s][t], n_deltas)) <= 0);
        pd_profile_release(&p);
        o.agg = PD_MERGE_SUM;
    }
    /* raw: explicitly, and auto for a gauge type shown */
    for (int m = 0; m < 2; m++) {
        o.delta = m == 0 ? PD_DELTA_RAW : PD_DELTA_AUTO;
        o.sample_type = m == 0 ? NULL : "inuse_space";
        if (pd_query_merge(st, &q, &o, &p, &stats, &err))
            fail_msg("%s raw: %s", kind, err.msg);
        assert_false(stats.delta);
        assert_int_equal(stats.profiles, NS * (b - a + 1));
        per_stack(&p, got);
        assert_memory_equal(got, raw, sizeof raw);
        pd_profile_release(&p);
    }
    /* the same counters pushed carry no mark: summed as they are, even
       when deltas are asked for */
    o.delta = PD_DELTA_ON;
    o.sample_type = NULL;
    q.selector = "pushed";
    assert_int_equal(pd_query_merge(st, &q, &o, &p, &stats, &err), 0);
    assert_false(stats.delta);
    per_stack(&p, got);
    assert_memory_equal(got, raw, sizeof raw);
    pd_profile_release(&p);

    /* the timeline: per profile the delta of the cumulative types' totals
       (0 for a series' first), the gauges' level */
    pd_buf out;
    pd_buf_init(&out, 0);
    assert_int_equal(pd_query_range_ex(st, "allocs", q.from, q.to, true, &out, &err), 0);
    json_error_t je;
    json_t *arr = json_loadb(out.data, out.len, 0, &je);
    assert_non_null(arr);
    assert_int_equal(json_array_size(arr), NS);
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *e = json_array_get(arr, i);
        assert_true(json_is_true(json_object_get(e, "delta")));
        json_t *sts = json_object_get(e, "sample_types");
        assert_string_equal(json_string_value(json_object_get(json_array_get(sts, 1), "kind")),
                            "cumulative");
        assert_string_equal(json_string_value(json_object_get(json_array_get(sts, 3), "kind")),
                            "gauge");
        json_t *ts = json_object_get(e, "timestamps"), *tot = json_object_get(e, "totals");
        assert_int_equal(json_array_size(ts), b - a + 1);
        for (size_t j = 0; j <= b - a; j++) {
            size_t k = a + j;
            assert_int_equal(json_integer_value(json_array_get(ts, j)), T0 + (int64_t)k * STEP);
            for (size_t t = 0; t < NT; t++) {
                int64_t w = 0;
                for (size_t s = 0; s < NSTACK; s++)
                    w += t >= 2 ? VAL[i][k][s][t] : k ? delta_of(i, k, s, t) : 0;
                int64_t g = json_integer_value(json_array_get(json_array_get(tot, j), t));
                if (g != w)
                    fail_msg("%s timeline series %zu point %zu %s: got %" PRId64 ", want %" PRId64,
                             kind, i, k, TYPES[t][0], g, w);
            }
        }
    }
    json_decref(arr);
    /* raw timeline: every stored point, the stored totals */
    pd_buf_reset(&out);
    assert_int_equal(pd_query_range_ex(st, "allocs", q.from, q.to, false, &out, &err), 0);
    arr = json_loadb(out.data, out.len, 0, &je);
    assert_int_equal(json_array_size(arr), NS);
    for (size_t i = 0; i < NS; i++) {
        json_t *e = json_array_get(arr, i);
        assert_null(json_object_get(e, "delta"));
        json_t *tot = json_object_get(e, "totals");
        assert_int_equal(json_array_size(tot), b - a + 1);
        int64_t w = 0;
        for (size_t s = 0; s < NSTACK; s++)
            w += VAL[i][a][s][1];
        assert_int_equal(json_integer_value(json_array_get(json_array_get(tot, 0), 1)), w);
    }
    json_decref(arr);
    pd_buf_release(&out);
}

static void test_reset_rule(void **state)
{
    (void)state;
    pd_sample_type_desc t2[2] = {{"alloc_space", "bytes"}, {"inuse_space", "bytes"}};
    pd_sample_type_desc t2b[2] = {{"alloc_space", "bytes"}, {"inuse_objects", "count"}};
    int64_t a[2] = {100, 50}, up[2] = {120, 10}, down[2] = {90, 70};
    pd_point p0 = {1, 2, t2, a}, p1 = {2, 2, t2, up}, p2 = {3, 2, t2, down}, p3 = {4, 2, t2b, up},
             p4 = {5, 1, t2, up};
    uint64_t m = 1; /* alloc_space cumulative, inuse_space a gauge */
    assert_false(pd_point_is_reset(NULL, &p0, m));
    assert_false(pd_point_is_reset(&p0, &p1, m)); /* a gauge going down is no restart */
    assert_true(pd_point_is_reset(&p0, &p2, m));  /* a cumulative total went down */
    assert_false(pd_point_is_reset(&p0, &p2, 2)); /* ... unless that type is not cumulative */
    assert_true(pd_point_is_reset(&p0, &p3, m));  /* other sample types */
    assert_true(pd_point_is_reset(&p0, &p4, m));
    assert_false(pd_point_is_reset(&p0, &p0, m)); /* equal totals: no restart */

    /* which types are cumulative: only with the mark */
    pd_labels ls;
    pd_labels_init(&ls);
    assert_int_equal(pd_labels_set(&ls, "__name__", "allocs", NULL), 0);
    assert_int_equal(pd_query_cumulative_mask(&ls, &p0), 0);
    assert_string_equal(pd_query_sample_kind(&ls, "alloc_space"), "delta");
    assert_string_equal(pd_query_sample_kind(&ls, "inuse_space"), "gauge");
    assert_int_equal(pd_labels_set(&ls, PD_LABEL_DELTA, "false", NULL), 0);
    assert_int_equal(pd_query_cumulative_mask(&ls, &p0), 1);
    assert_string_equal(pd_query_sample_kind(&ls, "alloc_space"), "cumulative");
    assert_string_equal(pd_query_sample_kind(&ls, "delay"), "cumulative");
    assert_string_equal(pd_query_sample_kind(&ls, "goroutine"), "gauge");
    assert_string_equal(pd_query_sample_kind(&ls, "cpu"), "delta");
    pd_labels_release(&ls);
}

static void run_kind(store_kind kind)
{
    fixture fx;
    open_store(&fx, kind);
    /* whole range; mid-lifetime start; start at series 0's restart (10);
       ends before it; one profile; two */
    static const size_t r[][2] = {{0, NP - 1}, {3, 27}, {10, 30}, {1, 9},      {9, 10},
                                  {17, 17},    {0, 0},  {0, 1},   {25, NP - 1}};
    for (size_t k = 0; k < sizeof r / sizeof *r; k++)
        check_range(fx.st, KIND[kind], r[k][0], r[k][1]);
    close_store(&fx);
}

static void test_head(void **state)
{
    (void)state;
    run_kind(ST_HEAD);
}
static void test_blocks(void **state)
{
    (void)state;
    run_kind(ST_BLOCKS);
}
static void test_mixed(void **state)
{
    (void)state;
    run_kind(ST_MIXED);
}

int main(void)
{
    generate();
    size_t restarts = 0;
    for (size_t i = 0; i < NS; i++)
        for (size_t k = 0; k < NP; k++)
            restarts += RESTART[i][k];
    if (restarts < 3)
        fail_msg("the generator made %zu restarts; want >= 3", restarts);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reset_rule),
        cmocka_unit_test(test_head),
        cmocka_unit_test(test_blocks),
        cmocka_unit_test(test_mixed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
