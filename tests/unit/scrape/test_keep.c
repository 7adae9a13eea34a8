/*
 * Unit tests of scrape/keep.c (keep_sample_type) on a real Go heap profile
 * from testdata (alloc_objects, alloc_space, inuse_objects, inuse_space).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "scrape/scrape_int.h"

static void load(pd_profile *p, pd_buf *raw)
{
    char path[512];
    snprintf(path, sizeof path, "%s/pprof/go-demo-once/heap.pb.gz", PD_TESTDATA);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char chunk[65536];
    size_t n;
    pd_buf_init(raw, 0);
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        assert_int_equal(pd_buf_append(raw, chunk, n), 0);
    fclose(f);
    pd_pprof_limits lim = pd_pprof_limits_default();
    pd_err e;
    pd_err_clear(&e);
    assert_int_equal(pd_profile_decode(p, (const uint8_t *)raw->data, raw->len, &lim, &e), 0);
}

static const char *type_name(const pd_profile *p, size_t i)
{
    return p->string_table[p->sample_type[i].type];
}

static void test_keep_two_of_four(void **state)
{
    (void)state;
    pd_profile p, q;
    pd_buf raw, out;
    load(&p, &raw);
    assert_int_equal(p.n_sample_type, 4);
    int64_t before[8];
    pd_profile_totals(&p, before);
    size_t inuse_space = 4, alloc_objects = 4;
    for (size_t i = 0; i < 4; i++) {
        if (!strcmp(type_name(&p, i), "inuse_space"))
            inuse_space = i;
        if (!strcmp(type_name(&p, i), "alloc_objects"))
            alloc_objects = i;
    }
    assert_true(inuse_space < 4 && alloc_objects < 4);
    pd_buf_init(&out, 0);
    pd_err e;
    pd_err_clear(&e);
    /* a unit that does not match drops that entry; an empty unit matches any */
    assert_int_equal(
        pd__scrape_keep_types(&p, "inuse_space\tbytes\nalloc_objects\t\nheap\tcount\n", &out, &e),
        0);
    pd_pprof_limits lim = pd_pprof_limits_default();
    assert_int_equal(pd_profile_decode(&q, (const uint8_t *)out.data, out.len, &lim, &e), 0);
    assert_int_equal(q.n_sample_type, 2);
    int64_t after[8];
    pd_profile_totals(&q, after);
    /* the file's order is kept: alloc_objects comes before inuse_space */
    assert_string_equal(type_name(&q, 0), "alloc_objects");
    assert_string_equal(type_name(&q, 1), "inuse_space");
    assert_int_equal(after[0], before[alloc_objects]);
    assert_int_equal(after[1], before[inuse_space]);
    assert_int_equal(q.n_sample, p.n_sample);
    pd_profile_release(&q);
    pd_profile_release(&p);
    pd_buf_release(&out);
    pd_buf_release(&raw);
}

static void test_keep_none_listed(void **state)
{
    (void)state;
    pd_profile p;
    pd_buf raw, out;
    load(&p, &raw);
    pd_buf_init(&out, 0);
    pd_err e;
    pd_err_clear(&e);
    assert_int_equal(pd__scrape_keep_types(&p, "cpu\tnanoseconds\ninuse_space\tcount\n", &out, &e),
                     PD_EINVAL);
    assert_non_null(strstr(e.msg, "none of the profile's sample types (alloc_objects/count"));
    assert_int_equal(p.n_sample_type, 4); /* unchanged */
    assert_int_equal(out.len, 0);
    pd_profile_release(&p);
    pd_buf_release(&out);
    pd_buf_release(&raw);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keep_two_of_four),
        cmocka_unit_test(test_keep_none_listed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
