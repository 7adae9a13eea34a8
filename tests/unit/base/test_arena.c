/* Unit tests of src/base/arena.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "base/arena.h"

static void test_default_chunk(void **state)
{
    (void)state;
    pd_arena a = {0}; /* zeroed is an empty arena too */
    char *s = pd_arena_strdup(&a, "abc");
    assert_string_equal(s, "abc");
    assert_int_equal(a.total, 65536);
    pd_arena_release(&a);
    assert_int_equal(a.total, 0);
}

/* issue 35: a series' points arena starts small and doubles up to 64 KiB */
static void test_small_grows(void **state)
{
    (void)state;
    pd_arena a;
    pd_arena_init_small(&a, 1024);
    void *p = pd_arena_alloc(&a, 100);
    assert_non_null(p);
    assert_int_equal(a.total, 1024);
    for (int i = 0; i < 10; i++) /* 1,000 bytes more: a second chunk, of 2 KiB */
        assert_non_null(pd_arena_alloc(&a, 100));
    assert_int_equal(a.total, 1024 + 2048);
    size_t big = 100000; /* past a quarter chunk: its own chunk */
    char *b = pd_arena_alloc(&a, big);
    assert_non_null(b);
    memset(b, 1, big);
    assert_int_equal(a.total, 1024 + 2048 + big);
    for (int i = 0; i < 2000; i++) /* chunks double, at most 64 KiB each */
        assert_non_null(pd_arena_alloc(&a, 1000));
    assert_true(a.chunk <= 65536);
    pd_arena_release(&a);
    assert_int_equal(a.total, 0);
    assert_non_null(pd_arena_alloc(&a, 16)); /* usable again */
    pd_arena_release(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_chunk),
        cmocka_unit_test(test_small_grows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
