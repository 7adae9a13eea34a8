/*
 * Tests of src/query/json.c's integer formatter (pd__query_fmt_i64), which
 * writes the numbers of query_range answers: it must write exactly the
 * bytes printf's "%lld" writes (the answers stay byte-identical to those of
 * the printf version), for the edges of every digit count, both signs,
 * INT64_MIN/MAX, and a million random values of random widths.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "query/query_int.h"

static void check(int64_t v)
{
    char want[32], got[PD_QUERY_I64_MAX + 8];
    int n = snprintf(want, sizeof want, "%lld", (long long)v);
    memset(got, 'x', sizeof got);
    size_t m = pd__query_fmt_i64(got, v);
    if (m != (size_t)n || memcmp(got, want, m) || got[m] != 'x')
        fail_msg("%s: formatted as %.*s (%zu bytes)", want, (int)m, got, m);
}

static void test_edges(void **state)
{
    (void)state;
    check(0);
    check(INT64_MAX);
    check(INT64_MIN);
    check(INT64_MIN + 1);
    uint64_t p = 1;
    for (int k = 0; k <= 19; k++, p *= 10) /* 10^k and its neighbours */
        for (int64_t d = -1; d <= 1; d++) {
            uint64_t u = p + (uint64_t)d;
            if (u > (uint64_t)INT64_MAX)
                continue;
            check((int64_t)u);
            check(-(int64_t)u);
        }
}

static void test_random(void **state)
{
    (void)state;
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < 1000000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64 */
        int bits = (int)(x % 64) + 1;
        check((int64_t)(bits == 64 ? x : x >> (64 - bits)) * ((x >> 7 & 1) ? -1 : 1));
    }
}

static void test_buf(void **state)
{
    (void)state;
    pd_buf b;
    pd_buf_init(&b, 0);
    assert_int_equal(pd__query_json_i64(&b, -42), 0);
    assert_int_equal(pd__query_json_i64(&b, 1795694400000), 0);
    assert_string_equal(b.data, "-421795694400000");
    pd_buf_release(&b);
    /* the cap: 20 bytes of room are asked for any number */
    pd_buf_init(&b, 10);
    assert_int_equal(pd__query_json_i64(&b, 1), PD_ETOOBIG);
    assert_int_equal(b.len, 0);
    pd_buf_release(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_random),
        cmocka_unit_test(test_buf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
