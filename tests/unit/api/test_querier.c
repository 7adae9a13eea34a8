/*
 * Unit tests of the Pyroscope querier's helpers (src/api/querier_select.c,
 * querier_stack.c): profile type IDs checked as Pyroscope's
 * ParseProfileTypeSelector, and StackTraceSelector (call site prefix with
 * inlined frames, Go PGO keep_locations/aggregate_callees) on a profile
 * built with the pprof builder.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "api/querier_int.h"

static void test_ptid_check(void **state)
{
    (void)state;
    pd_err err = {{0}};
    size_t n = 0;
    assert_int_equal(pd__ptid_check("process_cpu:cpu:nanoseconds:cpu:nanoseconds", &n, &err), 0);
    assert_int_equal(n, strlen("process_cpu:cpu:nanoseconds:cpu:nanoseconds"));
    assert_int_equal(pd__ptid_check("process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta", &n, &err), 0);
    assert_int_equal(n, strlen("process_cpu:cpu:nanoseconds:cpu:nanoseconds"));
    assert_int_equal(pd__ptid_check("a::c:d:e", &n, &err), 0); /* empty parts: upstream takes them too */
    assert_int_equal(pd__ptid_check("nonsense", &n, &err), PD_EINVAL);
    assert_non_null(strstr(err.msg, "profile-type selection must be of the form "
                                    "<name>:<sample-type>:<sample-unit>:<period-type>:<period-unit>(:delta), "
                                    "got(1): \"nonsense\""));
    assert_int_equal(pd__ptid_check("process_cpu:cpu", &n, &err), PD_EINVAL);
    assert_non_null(strstr(err.msg, "got(2)"));
    assert_int_equal(pd__ptid_check("a:b:c:d:e:f:g", &n, &err), PD_EINVAL);
    assert_non_null(strstr(err.msg, "got(7)"));
    assert_int_equal(pd__ptid_check("", &n, &err), PD_EINVAL);
}

/* main -> a -> b[c inlined] (10), main -> x (20), main -> a -> d:7 (1),
 * main -> a -> d:9 (2, label k=v) */
static void build_l(pd_profile *out, bool label)
{
    pd_profile_builder *b;
    pd_err err = {{0}};
    assert_int_equal(pd_profile_builder_new(NULL, &b), 0);
    assert_true(pd_profile_builder_sample_type(b, "cpu", "nanoseconds", &err) >= 0);
    assert_int_equal(pd_profile_builder_period(b, "cpu", "nanoseconds", 10, &err), 0);
    uint64_t f[6], l[6];
    const char *nm[] = {"main", "a", "b", "c", "x", "d"};
    for (int i = 0; i < 6; i++)
        assert_int_equal(pd_profile_builder_function(b, nm[i], nm[i], "f.go", 0, &f[i], &err), 0);
    pd_pprof_line lmain = {f[0], 1, 0}, la = {f[1], 2, 0}, lx = {f[4], 3, 0}, ld7 = {f[5], 7, 0}, ld9 = {f[5], 9, 0};
    pd_pprof_line lbc[2] = {{f[3], 5, 0}, {f[2], 4, 0}}; /* innermost (c) first */
    assert_int_equal(pd_profile_builder_location(b, 0, 0x10, &lmain, 1, &l[0], &err), 0);
    assert_int_equal(pd_profile_builder_location(b, 0, 0x20, &la, 1, &l[1], &err), 0);
    assert_int_equal(pd_profile_builder_location(b, 0, 0x30, lbc, 2, &l[2], &err), 0);
    assert_int_equal(pd_profile_builder_location(b, 0, 0x40, &lx, 1, &l[3], &err), 0);
    assert_int_equal(pd_profile_builder_location(b, 0, 0x50, &ld7, 1, &l[4], &err), 0);
    assert_int_equal(pd_profile_builder_location(b, 0, 0x50, &ld9, 1, &l[5], &err), 0); /* same address, another line */
    uint64_t s1[] = {l[2], l[1], l[0]}, s2[] = {l[3], l[0]}, s3[] = {l[4], l[1], l[0]}, s4[] = {l[5], l[1], l[0]};
    int64_t v10 = 10, v20 = 20, v1 = 1, v2 = 2;
    pd_pprof_label lab = {0};
    lab.key = pd_profile_builder_string(b, "k", &err);
    lab.str = pd_profile_builder_string(b, "v", &err);
    assert_int_equal(pd_profile_builder_sample(b, s1, 3, &v10, NULL, 0, &err), 0);
    assert_int_equal(pd_profile_builder_sample(b, s2, 2, &v20, NULL, 0, &err), 0);
    assert_int_equal(pd_profile_builder_sample(b, s3, 3, &v1, NULL, 0, &err), 0);
    assert_int_equal(pd_profile_builder_sample(b, s4, 3, &v2, &lab, label ? 1 : 0, &err), 0);
    assert_int_equal(pd_profile_builder_finish(b, out, &err), 0);
    pd_profile_builder_free(b);
}

static void build(pd_profile *out)
{
    build_l(out, true);
}

static int64_t total(const pd_profile *p)
{
    int64_t t = 0;
    for (size_t i = 0; i < p->n_sample; i++)
        t += p->sample[i].value[0];
    return t;
}

static int64_t select_total(const char *const *site, size_t n)
{
    pd_profile p;
    pd_err err = {{0}};
    build(&p);
    pd__stack_selector s = {.call_site = site, .n_call_site = n};
    assert_int_equal(pd__stack_select(&p, &s, NULL, &err), 0);
    int64_t t = total(&p);
    pd_profile_release(&p);
    return t;
}

static void test_call_site(void **state)
{
    (void)state;
    const char *ma[] = {"main", "a"}, *mabc[] = {"main", "a", "b", "c"}, *mabcz[] = {"main", "a", "b", "c", "z"},
               *mab[] = {"main", "a", "b"}, *mx[] = {"main", "x"}, *a[] = {"a"};
    assert_int_equal(select_total(ma, 2), 13);
    assert_int_equal(select_total(mab, 3), 10);
    assert_int_equal(select_total(mabc, 4), 10); /* the inlined c is a frame of its own */
    assert_int_equal(select_total(mabcz, 5), 0);
    assert_int_equal(select_total(mx, 2), 20);
    assert_int_equal(select_total(a, 1), 0); /* a prefix from the root, not anywhere */
    assert_int_equal(select_total(NULL, 0), 33); /* inactive: unchanged */
    /* labels and stacks are kept whole */
    pd_profile p;
    pd_err err = {{0}};
    build(&p);
    pd__stack_selector s = {.call_site = ma, .n_call_site = 2};
    assert_int_equal(pd__stack_select(&p, &s, NULL, &err), 0);
    assert_int_equal(p.n_sample, 3);
    bool labelled = false;
    for (size_t i = 0; i < p.n_sample; i++) {
        assert_int_equal(p.sample[i].n_location, 3);
        if (p.sample[i].n_label == 1) {
            labelled = true;
            assert_string_equal(pd_profile_str(&p, p.sample[i].label[0].key), "k");
            assert_string_equal(pd_profile_str(&p, p.sample[i].label[0].str), "v");
        }
    }
    assert_true(labelled);
    assert_string_equal(pd_profile_str(&p, p.sample_type[0].type), "cpu");
    assert_int_equal(p.period, 10);
    pd_profile_release(&p);
}

static void test_go_pgo(void **state)
{
    (void)state;
    pd_profile p;
    pd_err err = {{0}};
    build(&p);
    const char *ignored[] = {"nothing"};
    /* keep 1 location, aggregate callees: d:7 and d:9 become d:0; the
       labelled one stays apart; call_site is ignored under go_pgo */
    pd__stack_selector s = {.call_site = ignored, .n_call_site = 1, .go_pgo = true, .keep_locations = 1,
                            .aggregate_callees = true};
    assert_int_equal(pd__stack_select(&p, &s, NULL, &err), 0);
    assert_int_equal(total(&p), 33);
    assert_int_equal(p.n_sample, 4);
    for (size_t i = 0; i < p.n_sample; i++) {
        assert_int_equal(p.sample[i].n_location, 1);
        const pd_pprof_location *l = pd_profile_location(&p, p.sample[i].location_id[0]);
        assert_int_equal(l->line[0].line, 0);
    }
    pd_profile_release(&p);
    /* without the label the two d samples are one: d:0 with 3 */
    build_l(&p, false);
    assert_int_equal(pd__stack_select(&p, &s, NULL, &err), 0);
    assert_int_equal(p.n_sample, 3);
    bool joined = false;
    for (size_t i = 0; i < p.n_sample; i++)
        joined |= p.sample[i].value[0] == 3;
    assert_true(joined);
    pd_profile_release(&p);
    /* keep 2 */
    build(&p);
    s.keep_locations = 2;
    assert_int_equal(pd__stack_select(&p, &s, NULL, &err), 0);
    assert_int_equal(total(&p), 33);
    size_t deep = 0;
    for (size_t i = 0; i < p.n_sample; i++)
        deep += p.sample[i].n_location == 2;
    assert_int_equal(deep, p.n_sample);
    pd_profile_release(&p);
    /* keep_locations 0: all locations, lines of the leaf cleared */
    build(&p);
    s.keep_locations = 0;
    s.aggregate_callees = false;
    assert_int_equal(pd__stack_select(&p, &s, NULL, &err), 0);
    assert_int_equal(p.n_sample, 4);
    assert_int_equal(total(&p), 33);
    pd_profile_release(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ptid_check),
        cmocka_unit_test(test_call_site),
        cmocka_unit_test(test_go_pgo),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
