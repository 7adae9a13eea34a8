/* Unit tests of src/pprof/equal.c: semantic equality (DESIGN.md §1). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include "../pd_test.h"

#include "mini_test.h"

typedef struct pair {
    pd_profile a, b;
} pair;

/* two independent decodes of the same real file */
static int setup(void **state)
{
    pair *pr = calloc(1, sizeof *pr);
    pd_err err = {{0}};
    if (load_profile("go-demo-once/heap.pb.gz", &pr->a, &err) ||
        load_profile("go-demo-once/heap.pb.gz", &pr->b, &err))
        return -1;
    *state = pr;
    return 0;
}

static int teardown(void **state)
{
    pair *pr = *state;
    pd_profile_release(&pr->a);
    pd_profile_release(&pr->b);
    free(pr);
    return 0;
}

static void expect_differ(pair *pr, const char *needle)
{
    pd_err why = {{0}};
    assert_false(pd_profile_equal(&pr->a, &pr->b, &why));
    if (!strstr(why.msg, needle))
        fail_msg("why \"%s\" lacks \"%s\"", why.msg, needle);
    /* symmetric */
    assert_false(pd_profile_equal(&pr->b, &pr->a, NULL));
}

static void test_equal_to_itself(void **state)
{
    pair *pr = *state;
    pd_err why = {{0}};
    assert_true(pd_profile_equal(&pr->a, &pr->a, &why));
    assert_true(pd_profile_equal(&pr->a, &pr->b, &why));
    assert_string_equal(why.msg, "");
}

static void test_changed_value(void **state)
{
    pair *pr = *state;
    pr->b.sample[3].value[2] += 1;
    expect_differ(pr, "has no equal in the other");
}

static void test_dropped_sample(void **state)
{
    pair *pr = *state;
    pr->b.sample[4] = pr->b.sample[pr->b.n_sample - 1];
    pr->b.n_sample--;
    expect_differ(pr, "11 samples vs 10");
}

static void test_sample_replaced_by_duplicate(void **state)
{
    pair *pr = *state;
    /* same count, but one sample appears twice and another not at all */
    pr->b.sample[0] = pr->b.sample[1];
    expect_differ(pr, "has no equal");
}

static void test_changed_function_name(void **state)
{
    pair *pr = *state;
    /* rename main.leaker: a new string, so the old one is still in the table */
    for (size_t i = 0; i < pr->b.n_function; i++)
        if (!strcmp(pd_profile_str(&pr->b, pr->b.function[i].name), "main.leaker"))
            pr->b.function[i].name = pd_profile_intern(&pr->b, "main.leaker2", 12);
    expect_differ(pr, "has no equal");
}

static void test_changed_line_and_address(void **state)
{
    pair *pr = *state;
    pr->b.location[0].line[0].line++;
    expect_differ(pr, "has no equal");
    pr->b.location[0].line[0].line--;
    assert_true(pd_profile_equal(&pr->a, &pr->b, NULL));
    pr->b.location[0].address++;
    expect_differ(pr, "has no equal");
}

static void test_changed_label(void **state)
{
    pair *pr = *state;
    for (size_t i = 0; i < pr->b.n_sample; i++)
        if (pr->b.sample[i].n_label) {
            pr->b.sample[i].label[0].num++;
            break;
        }
    expect_differ(pr, "has no equal");
}

static void test_header_differences(void **state)
{
    pair *pr = *state;
    pr->b.period++;
    expect_differ(pr, "period:");
    pr->b.period--;
    pr->b.sample_type[1].type = pd_profile_intern(&pr->b, "other", 5);
    expect_differ(pr, "sample_type 1: alloc_space/bytes vs other/bytes");
    pr->b.sample_type[1] = pr->a.sample_type[1]; /* same strings at same indexes */
    pr->b.time_nanos++;
    expect_differ(pr, "time_nanos");
    pr->b.time_nanos--;
    pr->b.doc_url = pd_profile_intern(&pr->b, "http://x", 8);
    expect_differ(pr, "doc_url");
    pr->b.doc_url = 0;
    assert_true(pd_profile_equal(&pr->a, &pr->b, NULL));
}

/* what may differ without changing the meaning */
static void test_ids_order_and_strings_do_not_matter(void **state)
{
    pair *pr = *state;
    pd_profile *b = &pr->b;
    pd_err err = {{0}};
    /* renumber every id (x1000 + 7) and fix the references */
    for (size_t i = 0; i < b->n_sample; i++)
        for (size_t j = 0; j < b->sample[i].n_location; j++)
            b->sample[i].location_id[j] = b->sample[i].location_id[j] * 1000 + 7;
    for (size_t i = 0; i < b->n_location; i++) {
        b->location[i].id = b->location[i].id * 1000 + 7;
        if (b->location[i].mapping_id)
            b->location[i].mapping_id = b->location[i].mapping_id * 1000 + 7;
        for (size_t k = 0; k < b->location[i].n_line; k++)
            b->location[i].line[k].function_id = b->location[i].line[k].function_id * 1000 + 7;
    }
    for (size_t i = 0; i < b->n_function; i++)
        b->function[i].id = b->function[i].id * 1000 + 7;
    for (size_t i = 0; i < b->n_mapping; i++)
        b->mapping[i].id = b->mapping[i].id * 1000 + 7;
    PD_ASSERT_OK(pd_profile_index(b, &err), &err);
    PD_ASSERT_OK(pd_profile_validate(b, &err), &err);
    /* reverse the sample order, the label order and the location order */
    for (size_t i = 0, j = b->n_sample - 1; i < j; i++, j--) {
        pd_pprof_sample t = b->sample[i];
        b->sample[i] = b->sample[j];
        b->sample[j] = t;
    }
    for (size_t i = 0, j = b->n_location - 1; i < j; i++, j--) {
        pd_pprof_location t = b->location[i];
        b->location[i] = b->location[j];
        b->location[j] = t;
    }
    PD_ASSERT_OK(pd_profile_index(b, &err), &err);
    /* move a function name to a new string index (duplicate string) */
    const char *nm = pd_profile_str(b, b->function[0].name);
    pd_buf dup;
    pd_buf_init(&dup, 0);
    pd_buf_puts(&dup, nm);
    size_t before = b->n_string;
    int64_t idx = pd_profile_intern(b, dup.data, dup.len);
    assert_true(idx < (int64_t)before); /* interning finds the existing one */
    pd_buf_release(&dup);
    if (!pd_profile_equal(&pr->a, b, &err))
        fail_msg("%s", err.msg);
}

static void test_label_order_does_not_matter(void **state)
{
    (void)state;
    pd_buf buf;
    pd_profile a, b;
    pd_err err = {{0}};
    pd_buf_init(&buf, 0);
    mini_opts o = {0};
    mini_build(&buf, &o);
    PD_ASSERT_OK(pd_profile_decode(&a, (const uint8_t *)buf.data, buf.len, NULL, &err), &err);
    PD_ASSERT_OK(pd_profile_decode(&b, (const uint8_t *)buf.data, buf.len, NULL, &err), &err);
    pd_pprof_label t = b.sample[0].label[0];
    b.sample[0].label[0] = b.sample[0].label[1];
    b.sample[0].label[1] = t;
    assert_true(pd_profile_equal(&a, &b, &err));
    /* but moving a label to the other sample matters */
    b.sample[1].label = b.sample[0].label;
    b.sample[1].n_label = 1;
    b.sample[0].label++;
    b.sample[0].n_label = 1;
    assert_false(pd_profile_equal(&a, &b, &err));
    /* and the stack order matters */
    pd_profile_release(&b);
    PD_ASSERT_OK(pd_profile_decode(&b, (const uint8_t *)buf.data, buf.len, NULL, &err), &err);
    uint64_t x = b.sample[0].location_id[0];
    b.sample[0].location_id[0] = b.sample[0].location_id[1];
    b.sample[0].location_id[1] = x;
    assert_false(pd_profile_equal(&a, &b, &err));
    pd_profile_release(&a);
    pd_profile_release(&b);
    pd_buf_release(&buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_equal_to_itself, setup, teardown),
        cmocka_unit_test_setup_teardown(test_changed_value, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dropped_sample, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sample_replaced_by_duplicate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_changed_function_name, setup, teardown),
        cmocka_unit_test_setup_teardown(test_changed_line_and_address, setup, teardown),
        cmocka_unit_test_setup_teardown(test_changed_label, setup, teardown),
        cmocka_unit_test_setup_teardown(test_header_differences, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ids_order_and_strings_do_not_matter, setup, teardown),
        cmocka_unit_test(test_label_order_does_not_matter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
