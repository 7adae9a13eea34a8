/* Unit tests of src/pprof/pprof.c: index, validate, lookups, totals,
 * sample_index, intern, init/release. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include "../pd_test.h"

#include "mini_test.h"

static void mini(pd_profile *p, const mini_opts *o)
{
    pd_buf b;
    pd_err err = {{0}};
    pd_buf_init(&b, 0);
    mini_build(&b, o);
    if (pd_profile_decode(p, (const uint8_t *)b.data, b.len, NULL, &err))
        fail_msg("mini: %s", err.msg);
    pd_buf_release(&b);
}

/* pd_profile_guess_type on Go's own profiles (go-demo-once, runtime/pprof):
 * the rule `profd push` and `profd tsdb import` share. Go's block and mutex
 * profiles have the same sample and period types: the file name decides. */
static void test_guess_type(void **state)
{
    (void)state;
    static const struct {
        const char *file, *as, *want;
    } cases[] = {
        {"profile.pb.gz", "x/profile.pb.gz", "cpu"},
        {"heap.pb.gz", "heap.pb.gz", "heap"},
        {"allocs.pb.gz", "allocs.pb.gz", "heap"}, /* Go's heap and allocs: the same types */
        {"goroutine.pb.gz", "g.pb.gz", "goroutine"},
        {"threadcreate.pb.gz", "t.pb.gz", "threadcreate"},
        {"block.pb.gz", "/tmp/d/block.pb.gz", "block"},
        {"mutex.pb.gz", "/tmp/d/mutex.pb.gz", "mutex"},
        {"block.pb.gz", "/tmp/mutex/block.pb.gz", "block"}, /* the base name only */
        {"mutex.pb.gz", "contention.pb.gz", "other"},
        {"mutex.pb.gz", "block-and-mutex.pb.gz", "other"},
        {"block.pb.gz", NULL, "other"},
        {"heap.pb.gz", NULL, "heap"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char path[4096];
        pd_buf b;
        pd_profile p;
        pd_err err = {{0}};
        pd_buf_init(&b, 0);
        snprintf(path, sizeof path, "%s/pprof/go-demo-once/%s", PD_TESTDATA, cases[i].file);
        assert_int_equal(read_whole(path, &b), 0);
        PD_ASSERT_OK(pd_profile_decode(&p, (const uint8_t *)b.data, b.len, NULL, &err), &err);
        const char *got = pd_profile_guess_type(&p, cases[i].as);
        if (strcmp(got, cases[i].want))
            fail_msg("%s as %s: %s, want %s", cases[i].file,
                     cases[i].as ? cases[i].as : "(no name)", got, cases[i].want);
        pd_profile_release(&p);
        pd_buf_release(&b);
    }
}

static void expect_invalid(const pd_profile *p, const char *msg)
{
    pd_err err = {{0}};
    assert_int_equal(pd_profile_validate(p, &err), PD_EINVAL);
    assert_string_equal(err.msg, msg);
}

static void test_validate_broken_references(void **state)
{
    (void)state;
    pd_profile p;
    pd_err err = {{0}};
    assert_int_equal(load_profile("go-demo-once/heap.pb.gz", &p, &err), 0);
    assert_true(p.n_sample > 10);
    PD_ASSERT_OK(pd_profile_validate(&p, &err), &err);

    uint64_t save = p.sample[10].location_id[0];
    p.sample[10].location_id[0] = 99999;
    expect_invalid(&p, "sample 10: location id 99999 not found");
    p.sample[10].location_id[0] = save;

    p.sample[2].n_value = 3;
    expect_invalid(&p, "sample 2: 3 values for 4 sample types");
    p.sample[2].n_value = 4;

    char want[200];
    save = p.location[4].mapping_id;
    p.location[4].mapping_id = 77;
    snprintf(want, sizeof want, "location 4 (id %llu): mapping id 77 not found",
             (unsigned long long)p.location[4].id);
    expect_invalid(&p, want);
    p.location[4].mapping_id = save;

    save = p.location[3].line[0].function_id;
    p.location[3].line[0].function_id = 555;
    snprintf(want, sizeof want, "location 3 (id %llu) line 0: function id 555 not found",
             (unsigned long long)p.location[3].id);
    expect_invalid(&p, want);
    p.location[3].line[0].function_id = save;

    int64_t s = p.function[1].name;
    p.function[1].name = (int64_t)p.n_string;
    snprintf(want, sizeof want,
             "function 1 (id %llu): name string index %zu out of range (%zu strings)",
             (unsigned long long)p.function[1].id, p.n_string, p.n_string);
    expect_invalid(&p, want);
    p.function[1].name = -1;
    snprintf(want, sizeof want,
             "function 1 (id %llu): name string index -1 out of range (%zu strings)",
             (unsigned long long)p.function[1].id, p.n_string);
    expect_invalid(&p, want);
    p.function[1].name = s;

    s = p.sample_type[0].unit;
    p.sample_type[0].unit = 1 << 30;
    snprintf(want, sizeof want, "sample_type 0: unit string index %d out of range (%zu strings)",
             1 << 30, p.n_string);
    expect_invalid(&p, want);
    p.sample_type[0].unit = s;

    p.default_sample_type = -3;
    snprintf(want, sizeof want,
             "profile: default_sample_type string index -3 out of range (%zu strings)", p.n_string);
    expect_invalid(&p, want);
    p.default_sample_type = 0;

    for (size_t i = 0; i < p.n_sample; i++)
        if (p.sample[i].n_label) {
            p.sample[i].label[0].key = 1000000;
            snprintf(want, sizeof want,
                     "sample %zu label 0: key string index 1000000 out of range (%zu strings)", i,
                     p.n_string);
            expect_invalid(&p, want);
            p.sample[i].label[0].key = 1;
            break;
        }

    p.mapping[0].filename = 1000001;
    snprintf(want, sizeof want,
             "mapping 0 (id %llu): filename string index 1000001 out of range (%zu strings)",
             (unsigned long long)p.mapping[0].id, p.n_string);
    expect_invalid(&p, want);
    p.mapping[0].filename = 0;

    const char *s0 = p.string_table[0];
    p.string_table[0] = "x";
    p.string_len[0] = 1;
    expect_invalid(&p, "string_table[0] must be \"\" (it is not empty)");
    p.string_table[0] = s0;
    p.string_len[0] = 0;

    PD_ASSERT_OK(pd_profile_validate(&p, &err), &err);
    pd_profile_release(&p);
}

static void test_index_rejects_bad_ids(void **state)
{
    (void)state;
    pd_profile p;
    pd_err err = {{0}};
    mini_opts o = {0};
    mini(&p, &o);
    p.location[1].id = p.location[0].id;
    assert_int_equal(pd_profile_index(&p, &err), PD_EINVAL);
    assert_string_equal(err.msg, "pprof: location 1: duplicate id 1 (also location 0)");
    p.location[1].id = 0;
    assert_int_equal(pd_profile_index(&p, &err), PD_EINVAL);
    assert_string_equal(err.msg, "pprof: location 1 has id 0 (ids must be non-zero)");
    p.location[1].id = 2;
    p.function[0].id = 0;
    assert_int_equal(pd_profile_index(&p, &err), PD_EINVAL);
    assert_non_null(strstr(err.msg, "function 0 has id 0"));
    p.function[0].id = 1;
    p.mapping[0].id = UINT64_MAX;
    assert_int_equal(pd_profile_index(&p, &err), PD_EINVAL);
    assert_non_null(strstr(err.msg, "reserved"));
    p.mapping[0].id = 1;
    PD_ASSERT_OK(pd_profile_index(&p, &err), &err);
    PD_ASSERT_OK(pd_profile_validate(&p, &err), &err);
    pd_profile_release(&p);
}

static void test_lookups_and_str(void **state)
{
    (void)state;
    pd_profile p;
    mini_opts o = {0};
    mini(&p, &o);
    assert_ptr_equal(pd_profile_location(&p, 2), &p.location[1]);
    assert_ptr_equal(pd_profile_function(&p, 2), &p.function[1]);
    assert_ptr_equal(pd_profile_mapping(&p, 1), &p.mapping[0]);
    assert_null(pd_profile_location(&p, 0));
    assert_null(pd_profile_function(&p, 3));
    assert_null(pd_profile_mapping(&p, 2));
    assert_string_equal(pd_profile_str(&p, 7), "foo");
    assert_string_equal(pd_profile_str(&p, 13), "");
    assert_string_equal(pd_profile_str(&p, -1), "");
    assert_string_equal(pd_profile_str(&p, INT64_MAX), "");
    pd_profile_release(&p);
    pd_profile_release(&p); /* twice is safe */
}

static void test_totals(void **state)
{
    (void)state;
    pd_profile p;
    mini_opts o = {0};
    mini(&p, &o);
    int64_t t[2] = {-1, -1};
    pd_profile_totals(&p, t);
    /* samples [1 100] and [2 200] */
    assert_int_equal(t[0], 3);
    assert_int_equal(t[1], 300);
    pd_profile_release(&p);

    /* heap.pb.gz: inuse_space per pprof -raw: 526017 + 2103301 + 525633 + 0 + 0 + 2662613
     * + 524328 + 0 + 0 + 525633 + 524496 */
    pd_err err = {{0}};
    assert_int_equal(load_profile("go-demo-once/heap.pb.gz", &p, &err), 0);
    int64_t h[4];
    pd_profile_totals(&p, h);
    assert_int_equal(h[3], 526017 + 2103301 + 525633 + 2662613 + 524328 + 525633 + 524496);
    assert_int_equal(h[0], 152 + 684 + 195 + 513 + 410 + 162 + 6554 + 8 + 819 + 195 + 1260);
    pd_profile_release(&p);
}

static void test_sample_index(void **state)
{
    (void)state;
    pd_profile p;
    pd_err err = {{0}};
    size_t idx = 99;
    assert_int_equal(load_profile("go-demo-once/heap.pb.gz", &p, &err), 0);
    /* Go heap profiles name no default_sample_type: the last type (inuse_space) */
    PD_ASSERT_OK(pd_profile_sample_index(&p, NULL, &idx, &err), &err);
    assert_int_equal(idx, 3);
    PD_ASSERT_OK(pd_profile_sample_index(&p, "", &idx, &err), &err);
    assert_int_equal(idx, 3);
    PD_ASSERT_OK(pd_profile_sample_index(&p, "alloc_space", &idx, &err), &err);
    assert_int_equal(idx, 1);
    PD_ASSERT_OK(pd_profile_sample_index(&p, "alloc_space/bytes", &idx, &err), &err);
    assert_int_equal(idx, 1);
    PD_ASSERT_OK(pd_profile_sample_index(&p, "0", &idx, &err), &err);
    assert_int_equal(idx, 0);
    PD_ASSERT_OK(pd_profile_sample_index(&p, "3", &idx, &err), &err);
    assert_int_equal(idx, 3);
    assert_int_equal(pd_profile_sample_index(&p, "4", &idx, &err), PD_EINVAL);
    assert_string_equal(err.msg, "sample_index 4 is outside the range [0..3]");
    assert_int_equal(pd_profile_sample_index(&p, "-1", &idx, &err), PD_EINVAL);
    assert_int_equal(pd_profile_sample_index(&p, "99999999999999999999999", &idx, &err), PD_EINVAL);
    assert_int_equal(pd_profile_sample_index(&p, "alloc_space/count", &idx, &err), PD_EINVAL);
    assert_int_equal(pd_profile_sample_index(&p, "bogus", &idx, &err), PD_EINVAL);
    assert_string_equal(err.msg,
                        "sample_index \"bogus\" must be one of: alloc_objects, alloc_space, "
                        "inuse_objects, inuse_space");
    /* the default_sample_type wins over "last" */
    p.default_sample_type = p.sample_type[1].type;
    PD_ASSERT_OK(pd_profile_sample_index(&p, NULL, &idx, &err), &err);
    assert_int_equal(idx, 1);
    /* legacy "inuse_space" selects a type named "space" */
    p.sample_type[2].type = pd_profile_intern(&p, "space", 5);
    PD_ASSERT_OK(pd_profile_sample_index(&p, "inuse_space", &idx, &err), &err);
    assert_int_equal(idx, 2);
    pd_profile_release(&p);

    pd_profile e;
    assert_int_equal(pd_profile_init(&e), 0);
    assert_int_equal(pd_profile_sample_index(&e, NULL, &idx, &err), PD_EINVAL);
    pd_profile_release(&e);
}

static void test_intern(void **state)
{
    (void)state;
    pd_profile p;
    assert_int_equal(pd_profile_init(&p), 0);
    assert_int_equal(p.n_string, 1);
    assert_string_equal(p.string_table[0], "");
    assert_int_equal(pd_profile_intern(&p, "", 0), 0);
    int64_t a = pd_profile_intern(&p, "alpha", 5);
    int64_t b = pd_profile_intern(&p, "beta", 4);
    assert_int_equal(a, 1);
    assert_int_equal(b, 2);
    assert_int_equal(pd_profile_intern(&p, "alpha", 5), a);
    assert_int_equal(pd_profile_intern(&p, "alphabet", 5), a); /* only len bytes count */
    int64_t z = pd_profile_intern(&p, "a\0b", 3);              /* strings may hold NUL */
    assert_int_equal(p.string_len[z], 3);
    assert_int_not_equal(z, pd_profile_intern(&p, "a", 1));
    /* many strings: the table grows, earlier indexes stay */
    char s[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(s, sizeof s, "s%d", i);
        int64_t k = pd_profile_intern(&p, s, strlen(s));
        assert_true(k > 0);
        assert_string_equal(p.string_table[k], s);
    }
    for (int i = 0; i < 5000; i += 97) {
        snprintf(s, sizeof s, "s%d", i);
        int64_t k = pd_profile_intern(&p, s, strlen(s));
        assert_string_equal(p.string_table[k], s);
    }
    assert_string_equal(p.string_table[a], "alpha");
    assert_int_equal(p.n_string, 5000 + 5);
    pd_profile_release(&p);

    /* after decode, existing strings are found */
    pd_err err = {{0}};
    assert_int_equal(load_profile("go-demo-once/heap.pb.gz", &p, &err), 0);
    size_t n = p.n_string;
    int64_t k = pd_profile_intern(&p, "inuse_space", 11);
    assert_int_equal(p.sample_type[3].type, k);
    assert_int_equal(p.n_string, n);
    assert_int_equal(pd_profile_intern(&p, "brand new", 9), (int64_t)n);
    pd_profile_release(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_validate_broken_references),
        cmocka_unit_test(test_guess_type),
        cmocka_unit_test(test_index_rejects_bad_ids),
        cmocka_unit_test(test_lookups_and_str),
        cmocka_unit_test(test_totals),
        cmocka_unit_test(test_sample_index),
        cmocka_unit_test(test_intern),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
