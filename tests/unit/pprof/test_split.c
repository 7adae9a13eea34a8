/* Unit tests of src/pprof/split.c (issue 26 item 2): a profile cut by its
 * samples' labels into series, with Pyroscope's rules (pprof/split.h):
 * which labels split, which stay on the samples (span_id, trace_id,
 * profile_id, pyroscope.profile.id, "__" names, numeric labels, names the
 * push already has, a key twice in a sample), samples without labels, the
 * cap on groups, and what each part holds (its samples, only the locations
 * and functions they use, the source's header), read back through an
 * encode + decode.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "../pd_test.h"

#include "pprof/split.h"

typedef struct lab {
    const char *k, *v;
    int64_t num; /* v NULL: numeric */
} lab;

#define S(k, v)                                                                                    \
    {                                                                                              \
        (k), (v), 0                                                                                \
    } /* a string label */
#define N(k, n)                                                                                    \
    {                                                                                              \
        (k), NULL, (n)                                                                             \
    } /* a numeric label */

typedef struct smp {
    int loc[3]; /* 1-based function/location numbers, 0 ends */
    int64_t value;
    lab labels[4]; /* k NULL ends */
} smp;

/* One location per function fN (N = 1..6), stacks of those. */
static void build(const smp *ss, size_t n, pd_profile *out)
{
    pd_profile_builder *b;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_profile_builder_new(NULL, &b), &err);
    assert_true(pd_profile_builder_sample_type(b, "samples", "count", &err) >= 0);
    PD_ASSERT_OK(pd_profile_builder_period(b, "cpu", "nanoseconds", 10000000, &err), &err);
    PD_ASSERT_OK(pd_profile_builder_comment(b, "a comment", &err), &err);
    pd_profile_builder_profile(b)->time_nanos = 1700000000000000000;
    pd_profile_builder_profile(b)->duration_nanos = 10000000000;
    uint64_t loc[7];
    for (int i = 1; i <= 6; i++) {
        char name[8];
        snprintf(name, sizeof name, "f%d", i);
        uint64_t fid;
        PD_ASSERT_OK(pd_profile_builder_function(b, name, name, "x.go", i, &fid, &err), &err);
        pd_pprof_line ln = {.function_id = fid, .line = 10 * i};
        PD_ASSERT_OK(pd_profile_builder_location(b, 0, 0x1000 * i, &ln, 1, &loc[i], &err), &err);
    }
    pd_profile_builder_keep_repeats(b);
    for (size_t i = 0; i < n; i++) {
        uint64_t st[3];
        size_t ns = 0;
        while (ns < 3 && ss[i].loc[ns])
            st[ns] = loc[ss[i].loc[ns]], ns++;
        pd_pprof_label ls[4];
        size_t nl = 0;
        for (; nl < 4 && ss[i].labels[nl].k; nl++) {
            memset(&ls[nl], 0, sizeof ls[nl]);
            ls[nl].key = pd_profile_builder_string(b, ss[i].labels[nl].k, &err);
            if (ss[i].labels[nl].v)
                ls[nl].str = pd_profile_builder_string(b, ss[i].labels[nl].v, &err);
            else
                ls[nl].num = ss[i].labels[nl].num;
        }
        PD_ASSERT_OK(pd_profile_builder_sample(b, st, ns, &ss[i].value, ls, nl, &err), &err);
    }
    PD_ASSERT_OK(pd_profile_builder_finish(b, out, &err), &err);
    pd_profile_builder_free(b);
}

static pd_labels base_labels(void)
{
    pd_labels ls;
    pd_labels_init(&ls);
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_labels_set(&ls, "__name__", "cpu", &err), &err);
    PD_ASSERT_OK(pd_labels_set(&ls, "service_name", "shop", &err), &err);
    return ls;
}

/* The sample of view v with value `value` (values are distinct powers of 2). */
static const pd_pprof_sample *by_value(const pd_profile *v, int64_t value)
{
    for (size_t i = 0; i < v->n_sample; i++)
        if (v->sample[i].value[0] == value)
            return &v->sample[i];
    return NULL;
}

static const char *label_of(const pd_profile *p, const pd_pprof_sample *s, const char *k)
{
    for (size_t i = 0; i < s->n_label; i++)
        if (strcmp(pd_profile_str(p, s->label[i].key), k) == 0)
            return s->label[i].str ? pd_profile_str(p, s->label[i].str) : "#num";
    return NULL;
}

static void test_split_rules(void **state)
{
    (void)state;
    const smp ss[] = {
        {{1}, 1, {S("endpoint", "/a")}},
        {{2}, 2, {S("endpoint", "/b"), S("span_id", "00f067aa0ba902b7")}},
        {{3}, 4, {{0}}},
        {{1, 4}, 8, {S("endpoint", "/a"), N("bytes", 42), S("trace_id", "4bf92f35")}},
        {{2}, 16, {S("service_name", "other"), S("endpoint", "/b")}},
        {{3}, 32, {S("__hidden", "x"), S("profile_id", "p1"), S("pyroscope.profile.id", "q")}},
        {{5}, 64, {S("endpoint", "/a"), S("region", "eu")}},
        {{6}, 128, {S("region", "eu"), S("endpoint", "/a")}},
        {{6}, 256, {S("region", "us"), S("region", "eu")}}, /* a key twice: stays */
    };
    pd_profile p;
    build(ss, sizeof ss / sizeof *ss, &p);
    pd_labels base = base_labels();
    pd_pprof_split sp;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_pprof_split_by_labels(&p, &base, 0, &sp, &err), &err);
    assert_int_equal(sp.n, 4);
    /* groups in the order of their first sample */
    struct {
        const char *endpoint, *region;
        size_t n_split;
        int64_t values[3];
        size_t n_loc;
    } want[] = {
        {"/a", NULL, 1, {1, 8}, 2},
        {"/b", NULL, 1, {2, 16}, 1},
        {NULL, NULL, 0, {4, 32, 256}, 2},
        {"/a", "eu", 2, {64, 128}, 2},
    };
    int64_t all = 0;
    for (size_t g = 0; g < sp.n; g++) {
        const pd_pprof_split_group *sg = &sp.v[g];
        const pd_profile *v = &sg->view;
        assert_string_equal(pd_labels_get(&sg->labels, "service_name"), "shop");
        assert_string_equal(pd_labels_get(&sg->labels, "__name__"), "cpu");
        const char *ep = pd_labels_get(&sg->labels, "endpoint");
        const char *rg = pd_labels_get(&sg->labels, "region");
        if (want[g].endpoint)
            assert_string_equal(ep, want[g].endpoint);
        else
            assert_null(ep);
        if (want[g].region)
            assert_string_equal(rg, want[g].region);
        else
            assert_null(rg);
        assert_int_equal(sg->n_split, want[g].n_split);
        assert_int_equal(sg->labels.n, 2 + want[g].n_split);
        size_t nv = want[g].values[2] ? 3 : 2;
        assert_int_equal(v->n_sample, nv);
        for (size_t k = 0; k < nv; k++) {
            const pd_pprof_sample *s = by_value(v, want[g].values[k]);
            assert_non_null(s);
            all += s->value[0];
            /* the split labels left the samples */
            assert_null(label_of(v, s, "endpoint"));
            if (want[g].region)
                assert_null(label_of(v, s, "region"));
        }
        assert_int_equal(v->n_location, want[g].n_loc);
        assert_int_equal(v->n_function, want[g].n_loc);
        /* only the strings it uses: no function name of another group's */
        for (size_t k = 0; k < v->n_string; k++)
            if (v->string_table[k][0] == 'f' && v->string_table[k][1] >= '1' &&
                v->string_table[k][1] <= '6' && !v->string_table[k][2]) {
                bool used = false;
                for (size_t q = 0; q < v->n_function; q++)
                    used |= strcmp(pd_profile_str(v, v->function[q].name), v->string_table[k]) == 0;
                assert_true(used);
            }
        assert_true(v->n_string < p.n_string);
        /* the header is the source's */
        assert_int_equal(v->time_nanos, p.time_nanos);
        assert_int_equal(v->duration_nanos, p.duration_nanos);
        assert_int_equal(v->period, p.period);
        assert_int_equal(v->n_comment, 1);
        PD_ASSERT_OK(pd_profile_validate(v, &err), &err);
    }
    assert_int_equal(all, 511); /* every sample once */
    /* what stays on the samples */
    const pd_profile *v1 = &sp.v[1].view;
    assert_string_equal(label_of(v1, by_value(v1, 2), "span_id"), "00f067aa0ba902b7");
    assert_string_equal(label_of(v1, by_value(v1, 16), "service_name"), "other");
    const pd_profile *v0 = &sp.v[0].view;
    assert_string_equal(label_of(v0, by_value(v0, 8), "bytes"), "#num");
    assert_string_equal(label_of(v0, by_value(v0, 8), "trace_id"), "4bf92f35");
    const pd_profile *v2 = &sp.v[2].view;
    assert_string_equal(label_of(v2, by_value(v2, 32), "__hidden"), "x");
    assert_string_equal(label_of(v2, by_value(v2, 32), "profile_id"), "p1");
    assert_string_equal(label_of(v2, by_value(v2, 32), "pyroscope.profile.id"), "q");
    assert_int_equal(by_value(v2, 256)->n_label, 2);

    /* each part survives the wire: encode, decode, same samples */
    for (size_t g = 0; g < sp.n; g++) {
        pd_buf enc;
        pd_buf_init(&enc, 0);
        assert_int_equal(pd_profile_encode(&sp.v[g].view, true, &enc), 0);
        pd_profile back;
        PD_ASSERT_OK(pd_profile_decode(&back, (const uint8_t *)enc.data, enc.len, NULL, &err),
                     &err);
        pd_err why = {{0}};
        if (!pd_profile_equal(&back, &sp.v[g].view, &why))
            fail_msg("group %zu: %s", g, why.msg);
        pd_profile_release(&back);
        pd_buf_release(&enc);
    }
    pd_pprof_split_release(&sp);
    pd_pprof_split_release(&sp); /* twice is safe */

    /* the cap on groups */
    PD_ASSERT_RC(pd_pprof_split_by_labels(&p, &base, 3, &sp, &err), PD_ETOOBIG, &err);
    assert_non_null(strstr(err.msg, "3"));
    assert_int_equal(sp.n, 0);
    PD_ASSERT_OK(pd_pprof_split_by_labels(&p, &base, 4, &sp, &err), &err);
    assert_int_equal(sp.n, 4);
    pd_pprof_split_release(&sp);
    pd_profile_release(&p);
    pd_labels_release(&base);
}

/* Nothing to split: no labels, or only labels that stay on the samples. */
static void test_split_nothing(void **state)
{
    (void)state;
    const smp none[] = {{{1}, 1, {{0}}}, {{2}, 2, {{0}}}};
    const smp kept[] = {
        {{1}, 1, {S("span_id", "a")}},
        {{2}, 2, {S("service_name", "x"), N("n", 3)}},
        {{3}, 4, {S("__x", "y"), S("trace_id", "t")}},
        {{3}, 8, {S("bad\x01name", "v"), S("k", "bad\x02value")}},
    };
    pd_labels base = base_labels();
    pd_err err = {{0}};
    for (int c = 0; c < 2; c++) {
        pd_profile p;
        build(c ? kept : none, c ? 4 : 2, &p);
        pd_pprof_split sp;
        PD_ASSERT_OK(pd_pprof_split_by_labels(&p, &base, 1, &sp, &err), &err);
        assert_int_equal(sp.n, 0);
        assert_null(sp.v);
        pd_profile_release(&p);
    }
    /* a push with 63 labels: a sample's 2 labels would make 65, they stay */
    pd_labels wide = base_labels();
    for (int i = 0; wide.n < PD_LABEL_MAX_COUNT - 1; i++) {
        char k[16];
        snprintf(k, sizeof k, "l%d", i);
        PD_ASSERT_OK(pd_labels_set(&wide, k, "v", &err), &err);
    }
    const smp two[] = {{{1}, 1, {S("endpoint", "/a"), S("region", "eu")}},
                       {{2}, 2, {S("zone", "z")}}};
    pd_profile pw;
    build(two, 2, &pw);
    pd_pprof_split sw;
    PD_ASSERT_OK(pd_pprof_split_by_labels(&pw, &wide, 0, &sw, &err), &err);
    assert_int_equal(sw.n, 2); /* zone=z fits: {zone} and {} (the sample keeping its 2) */
    assert_int_equal(sw.v[0].n_split, 0);
    assert_int_equal(sw.v[0].view.sample[0].n_label, 2);
    assert_string_equal(pd_labels_get(&sw.v[1].labels, "zone"), "z");
    pd_pprof_split_release(&sw);
    pd_profile_release(&pw);
    pd_labels_release(&wide);

    assert_true(pd_pprof_split_excluded("span_id"));
    assert_true(pd_pprof_split_excluded("pyroscope.profile.id"));
    assert_false(pd_pprof_split_excluded("span_name"));
    assert_false(pd_pprof_split_excluded("endpoint"));
    pd_labels_release(&base);
}

/* Every sample labelled the same: one group, the label a series label. */
static void test_split_one_set(void **state)
{
    (void)state;
    const smp ss[] = {{{1}, 1, {S("endpoint", "/checkout")}},
                      {{2}, 2, {S("endpoint", "/checkout")}}};
    pd_profile p;
    build(ss, 2, &p);
    pd_labels base = base_labels();
    pd_pprof_split sp;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_pprof_split_by_labels(&p, &base, 0, &sp, &err), &err);
    assert_int_equal(sp.n, 1);
    assert_string_equal(pd_labels_get(&sp.v[0].labels, "endpoint"), "/checkout");
    assert_int_equal(sp.v[0].view.n_sample, 2);
    assert_int_equal(sp.v[0].view.sample[0].n_label, 0);
    pd_pprof_split_release(&sp);
    pd_profile_release(&p);
    pd_labels_release(&base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_rules),
        cmocka_unit_test(test_split_nothing),
        cmocka_unit_test(test_split_one_set),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
