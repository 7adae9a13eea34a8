/* Unit tests of src/pprof/builder.c (pd_profile_builder; kept beside its
 * first users in ingest): deduplication by content, sample merging, caps,
 * argument checks, and that finish yields a valid profile that survives an
 * encode/decode round trip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include "../pd_test.h"

#include "ingest_test.h"

static pd_profile_builder *new_builder(const pd_pprof_limits *lim)
{
    pd_profile_builder *b;
    assert_int_equal(pd_profile_builder_new(lim, &b), 0);
    return b;
}

static void test_dedup_and_merge(void **state)
{
    (void)state;
    pd_err err = {{0}};
    pd_profile_builder *b = new_builder(NULL);
    PD_ASSERT_OK(pd_profile_builder_sample_type(b, "alloc_space", "bytes", &err), &err);
    assert_int_equal(pd_profile_builder_sample_type(b, "alloc_objects", "count", &err), 1);
    PD_ASSERT_OK(pd_profile_builder_period(b, "space", "bytes", 524288, &err), &err);
    PD_ASSERT_OK(pd_profile_builder_comment(b, "made by a test", &err), &err);
    pd_profile_builder_profile(b)->time_nanos = 1700000000000000000;

    uint64_t f1, f1again, f2, f3;
    PD_ASSERT_OK(pd_profile_builder_function(b, "main", "main", "main.c", 3, &f1, &err), &err);
    PD_ASSERT_OK(pd_profile_builder_function(b, "main", "main", "main.c", 3, &f1again, &err), &err);
    assert_int_equal(f1, f1again);
    /* any field differing makes another function */
    PD_ASSERT_OK(pd_profile_builder_function(b, "main", "main", "main.c", 4, &f2, &err), &err);
    PD_ASSERT_OK(pd_profile_builder_function(b, "alloc", NULL, NULL, 0, &f3, &err), &err);
    assert_true(f1 != f2 && f2 != f3 && f1 != f3);

    pd_pprof_mapping m = {.memory_start = 0x400000, .memory_limit = 0x500000, .has_functions = 1};
    uint64_t m1, m1again, m2;
    PD_ASSERT_OK(pd_profile_builder_mapping(b, &m, "/bin/x", "abc", &m1, &err), &err);
    PD_ASSERT_OK(pd_profile_builder_mapping(b, &m, "/bin/x", "abc", &m1again, &err), &err);
    assert_int_equal(m1, m1again);
    m.has_functions = 0;
    PD_ASSERT_OK(pd_profile_builder_mapping(b, &m, "/bin/x", "abc", &m2, &err), &err);
    assert_true(m1 != m2);

    pd_pprof_line inl[2] = {{.function_id = f3, .line = 10}, {.function_id = f1, .line = 20}};
    uint64_t l1, l1again, l2, l3;
    PD_ASSERT_OK(pd_profile_builder_location(b, m1, 0x401000, inl, 2, &l1, &err), &err);
    PD_ASSERT_OK(pd_profile_builder_location(b, m1, 0x401000, inl, 2, &l1again, &err), &err);
    assert_int_equal(l1, l1again);
    PD_ASSERT_OK(pd_profile_builder_location(b, m1, 0x401000, inl, 1, &l2, &err), &err);
    PD_ASSERT_OK(pd_profile_builder_location(b, 0, 0x401000, NULL, 0, &l3, &err), &err);
    assert_true(l1 != l2 && l2 != l3);

    int64_t key = pd_profile_builder_string(b, "thread", &err);
    int64_t v1 = pd_profile_builder_string(b, "worker", &err);
    assert_true(key > 0 && v1 > 0);
    pd_pprof_label lab[2] = {{.key = key, .str = v1},
                             {.key = pd_profile_builder_string(b, "bytes", &err), .num = 64}};
    uint64_t stack[2] = {l1, l3};
    int64_t a[2] = {100, 1}, c[2] = {50, 2};
    PD_ASSERT_OK(pd_profile_builder_sample(b, stack, 2, a, lab, 2, &err), &err);
    assert_int_equal(pd_profile_builder_sample(b, stack, 2, c, lab, 2, &err), 0); /* merges */
    assert_int_equal(pd_profile_builder_sample(b, stack, 2, c, lab, 1, &err), 0); /* other labels */
    assert_int_equal(pd_profile_builder_sample(b, stack, 1, c, lab, 2, &err), 0); /* other stack */
    assert_int_equal(pd_profile_builder_sample(b, NULL, 0, c, NULL, 0, &err), 0); /* empty stack */

    pd_profile p;
    PD_ASSERT_OK(pd_profile_builder_finish(b, &p, &err), &err);
    pd_profile_builder_free(b);
    assert_int_equal(p.n_sample, 4);
    assert_int_equal(p.sample[0].value[0], 150);
    assert_int_equal(p.sample[0].value[1], 3);
    assert_int_equal(p.n_function, 3);
    assert_int_equal(p.n_mapping, 2);
    assert_int_equal(p.n_location, 3);
    assert_int_equal(p.period, 524288);
    assert_string_equal(pd_profile_str(&p, p.comment[0]), "made by a test");
    assert_string_equal(pd_profile_str(&p, p.mapping[0].build_id), "abc");
    const pd_pprof_location *loc = pd_profile_location(&p, l1);
    assert_int_equal(loc->n_line, 2);
    assert_int_equal(loc->line[1].line, 20);
    int64_t tot[2];
    pd_profile_totals(&p, tot);
    assert_int_equal(tot[0], 300);
    assert_int_equal(tot[1], 9);
    pd_err why = {{0}};
    if (!roundtrip_equal(&p, &why))
        fail_msg("roundtrip: %s", why.msg);
    pd_profile_release(&p);
}

static void test_argument_checks(void **state)
{
    (void)state;
    pd_err err = {{0}};
    pd_profile_builder *b = new_builder(NULL);
    uint64_t id;
    int64_t v[1] = {1};
    assert_int_equal(pd_profile_builder_sample(b, NULL, 0, v, NULL, 0, &err), PD_EINVAL);
    PD_ASSERT_OK(pd_profile_builder_sample_type(b, "x", "count", &err), &err);
    pd_pprof_line bad = {.function_id = 7};
    assert_int_equal(pd_profile_builder_location(b, 0, 1, &bad, 1, &id, &err), PD_EINVAL);
    assert_string_equal(err.msg, "profile builder: location: function id 7 not found");
    assert_int_equal(pd_profile_builder_location(b, 3, 1, NULL, 0, &id, &err), PD_EINVAL);
    uint64_t nope = 5;
    assert_int_equal(pd_profile_builder_sample(b, &nope, 1, v, NULL, 0, &err), PD_EINVAL);
    pd_pprof_label lab = {.key = 999};
    assert_int_equal(pd_profile_builder_sample(b, NULL, 0, v, &lab, 1, &err), PD_EINVAL);
    /* merging past int64 */
    int64_t big[1] = {INT64_MAX};
    PD_ASSERT_OK(pd_profile_builder_sample(b, NULL, 0, big, NULL, 0, &err), &err);
    assert_int_equal(pd_profile_builder_sample(b, NULL, 0, v, NULL, 0, &err), PD_EINVAL);
    /* no more sample types once samples exist */
    assert_int_equal(pd_profile_builder_sample_type(b, "y", "count", &err), PD_EINVAL);
    pd_profile_builder_free(b);
    pd_profile_builder_free(NULL);
}

static void test_caps(void **state)
{
    (void)state;
    pd_err err = {{0}};
    pd_pprof_limits lim = {.max_functions = 2,
                           .max_locations = 2,
                           .max_samples = 1,
                           .max_stack_depth = 2,
                           .max_sample_types = 1,
                           .max_labels_per_sample = 1,
                           .max_mappings = 1,
                           .max_strings = 8};
    pd_profile_builder *b = new_builder(&lim);
    uint64_t f, l[3], m;
    PD_ASSERT_OK(pd_profile_builder_sample_type(b, "s", "c", &err), &err);
    assert_int_equal(pd_profile_builder_sample_type(b, "t", "c", &err), PD_ETOOBIG);
    PD_ASSERT_OK(pd_profile_builder_function(b, "a", NULL, NULL, 0, &f, &err), &err);
    PD_ASSERT_OK(pd_profile_builder_function(b, "b", NULL, NULL, 0, &f, &err), &err);
    assert_int_equal(pd_profile_builder_function(b, "b", NULL, NULL, 0, &f, &err), 0); /* dup ok */
    assert_int_equal(pd_profile_builder_function(b, "c", NULL, NULL, 0, &f, &err), PD_ETOOBIG);
    assert_string_equal(err.msg, "profile builder: more than max_functions=2 functions");
    pd_pprof_mapping mm = {0};
    PD_ASSERT_OK(pd_profile_builder_mapping(b, &mm, "/x", NULL, &m, &err), &err);
    assert_int_equal(pd_profile_builder_mapping(b, &mm, "/y", NULL, &m, &err), PD_ETOOBIG);
    PD_ASSERT_OK(pd_profile_builder_location(b, 0, 1, NULL, 0, &l[0], &err), &err);
    PD_ASSERT_OK(pd_profile_builder_location(b, 0, 2, NULL, 0, &l[1], &err), &err);
    assert_int_equal(pd_profile_builder_location(b, 0, 3, NULL, 0, &l[2], &err), PD_ETOOBIG);
    int64_t v[1] = {1};
    uint64_t deep[3] = {l[0], l[1], l[0]};
    assert_int_equal(pd_profile_builder_sample(b, deep, 3, v, NULL, 0, &err), PD_ETOOBIG);
    pd_pprof_label labs[2] = {{0}, {0}};
    assert_int_equal(pd_profile_builder_sample(b, deep, 2, v, labs, 2, &err), PD_ETOOBIG);
    PD_ASSERT_OK(pd_profile_builder_sample(b, deep, 2, v, NULL, 0, &err), &err);
    assert_int_equal(pd_profile_builder_sample(b, deep, 2, v, NULL, 0, &err), 0); /* merge ok */
    assert_int_equal(pd_profile_builder_sample(b, deep, 1, v, NULL, 0, &err), PD_ETOOBIG);
    pd_profile_builder_free(b);

    /* strings: "" is always there; two more fit, a third does not */
    pd_pprof_limits slim = {.max_strings = 3};
    b = new_builder(&slim);
    assert_true(pd_profile_builder_string(b, "a", &err) > 0);
    assert_true(pd_profile_builder_string(b, "b", &err) > 0);
    assert_int_equal(pd_profile_builder_string(b, "c", &err), PD_ETOOBIG);
    assert_string_equal(err.msg, "profile builder: more than max_strings=3 strings");
    pd_profile_builder_free(b);
}

static void test_many_items(void **state)
{
    (void)state;
    /* enough items to grow every table several times; ids stay dense and
     * dedup still finds everything */
    pd_err err = {{0}};
    pd_profile_builder *b = new_builder(NULL);
    PD_ASSERT_OK(pd_profile_builder_sample_type(b, "samples", "count", &err), &err);
    enum { N = 5000 };
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < N; i++) {
            char name[32];
            snprintf(name, sizeof name, "fn%d", i);
            uint64_t f, l;
            PD_ASSERT_OK(pd_profile_builder_function(b, name, NULL, NULL, 0, &f, &err), &err);
            assert_int_equal(f, (uint64_t)i + 1);
            pd_pprof_line ln = {.function_id = f};
            PD_ASSERT_OK(pd_profile_builder_location(b, 0, (uint64_t)i, &ln, 1, &l, &err), &err);
            assert_int_equal(l, (uint64_t)i + 1);
            int64_t v[1] = {i};
            PD_ASSERT_OK(pd_profile_builder_sample(b, &l, 1, v, NULL, 0, &err), &err);
        }
    pd_profile p;
    PD_ASSERT_OK(pd_profile_builder_finish(b, &p, &err), &err);
    pd_profile_builder_free(b);
    assert_int_equal(p.n_sample, N);
    assert_int_equal(p.n_function, N);
    assert_int_equal(p.sample[N - 1].value[0], 2 * (N - 1));
    pd_profile_release(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dedup_and_merge),
        cmocka_unit_test(test_argument_checks),
        cmocka_unit_test(test_caps),
        cmocka_unit_test(test_many_items),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
