/* Unit tests of src/base/u64map.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/error.h"
#include "base/u64map.h"

static void test_basic(void **state)
{
    (void)state;
    pd_u64map m;
    uint64_t v = 99;
    pd_u64map_init(&m);
    assert_int_equal(pd_u64map_get(&m, 1, &v), 0);
    assert_int_equal(v, 99);
    assert_int_equal(pd_u64map_put(&m, 1, 10), 0);
    assert_int_equal(pd_u64map_put(&m, 0, 20), 0); /* key 0 is an ordinary key */
    assert_int_equal(pd_u64map_get(&m, 1, &v), 1);
    assert_int_equal(v, 10);
    assert_int_equal(pd_u64map_get(&m, 0, &v), 1);
    assert_int_equal(v, 20);
    assert_int_equal(pd_u64map_put(&m, 1, 11), 0); /* replace */
    assert_int_equal(pd_u64map_get(&m, 1, &v), 1);
    assert_int_equal(v, 11);
    assert_int_equal(m.len, 2);
    assert_int_equal(pd_u64map_get(&m, 1, NULL), 1);
    assert_int_equal(pd_u64map_put(&m, UINT64_MAX, 1), PD_EINVAL);
    assert_int_equal(pd_u64map_get(&m, UINT64_MAX, &v), 0);
    pd_u64map_release(&m);
    pd_u64map_release(&m);
}

static void test_many_and_collisions(void **state)
{
    (void)state;
    pd_u64map m;
    pd_u64map_init(&m);
    /* keys that share low bits stress the probing */
    const size_t n = 100000;
    for (size_t i = 0; i < n; i++)
        assert_int_equal(pd_u64map_put(&m, (uint64_t)i << 32, i * 3), 0);
    assert_int_equal(m.len, n);
    assert_true(m.len * 10 <= m.cap * 7); /* load <= 0.7 */
    for (size_t i = 0; i < n; i++) {
        uint64_t v;
        assert_int_equal(pd_u64map_get(&m, (uint64_t)i << 32, &v), 1);
        assert_int_equal(v, i * 3);
        assert_int_equal(pd_u64map_get(&m, ((uint64_t)i << 32) + 1, NULL), 0);
    }
    pd_u64map_release(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),
        cmocka_unit_test(test_many_and_collisions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
