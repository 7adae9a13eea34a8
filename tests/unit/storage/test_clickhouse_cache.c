/* Unit tests of the ClickHouse backend's read cache
 * (src/storage/clickhouse/ch_cache.c), no server needed:
 *  - a put is got back byte for byte, per store, with its offset in the
 *    buffer it was appended to; a miss leaves the buffer alone;
 *  - the bytes held stay below the bound however many puts, the newest
 *    entries stay and the oldest go; an entry in use survives turns;
 *  - drop forgets; an entry over a quarter of its store is not kept;
 *  - NULL (no cache, --clickhouse.cache-size=0) misses and keeps nothing.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/metrics.h"
#include "storage/clickhouse/ch_cache.h"

/* entry k: 40 bytes derived from k */
static void entry(uint64_t k, uint8_t out[40])
{
    for (int i = 0; i < 40; i++)
        out[i] = (uint8_t)(k * 31 + (uint64_t)i);
}

static void test_get_put(void **state)
{
    (void)state;
    ch_cache *c = pd__ch_cache_new(1 << 20);
    assert_non_null(c);
    uint8_t e[40];
    entry(7, e);
    pd_buf b;
    pd_buf_init(&b, 0);
    assert_int_equal(pd_buf_puts(&b, "xy"), 0);
    size_t at = 99;
    assert_false(pd__ch_cache_get(c, CH_CACHE_ROWS, 7, &b, &at));
    assert_int_equal(b.len, 2);
    assert_int_equal(at, 99);
    pd__ch_cache_put(c, CH_CACHE_ROWS, 7, e, sizeof e);
    /* per store: the merge store does not have it */
    assert_false(pd__ch_cache_get(c, CH_CACHE_MERGE, 7, &b, NULL));
    assert_true(pd__ch_cache_get(c, CH_CACHE_ROWS, 7, &b, &at));
    assert_int_equal(at, 2);
    assert_int_equal(b.len, 2 + sizeof e);
    assert_memory_equal(b.data + 2, e, sizeof e);
    /* a key held keeps its bytes */
    uint8_t other[40];
    entry(8, other);
    pd__ch_cache_put(c, CH_CACHE_ROWS, 7, other, sizeof other);
    pd_buf_reset(&b);
    assert_true(pd__ch_cache_get(c, CH_CACHE_ROWS, 7, &b, NULL));
    assert_memory_equal(b.data, e, sizeof e);
    /* drop */
    pd__ch_cache_drop(c, CH_CACHE_ROWS, 7);
    pd_buf_reset(&b);
    assert_false(pd__ch_cache_get(c, CH_CACHE_ROWS, 7, &b, NULL));
    assert_int_equal(b.len, 0);
    /* UINT64_MAX is no key */
    pd__ch_cache_put(c, CH_CACHE_ROWS, UINT64_MAX, e, sizeof e);
    assert_false(pd__ch_cache_get(c, CH_CACHE_ROWS, UINT64_MAX, &b, NULL));
    /* over a quarter of the store (half the bound): not kept */
    size_t big = (1 << 20) / 8 + 1;
    uint8_t *p = calloc(1, big);
    assert_non_null(p);
    pd__ch_cache_put(c, CH_CACHE_MERGE, 1, p, big);
    assert_false(pd__ch_cache_get(c, CH_CACHE_MERGE, 1, &b, NULL));
    pd__ch_cache_put(c, CH_CACHE_MERGE, 1, p, big - 1);
    assert_true(pd__ch_cache_get(c, CH_CACHE_MERGE, 1, &b, NULL));
    free(p);
    pd_buf_release(&b);
    pd__ch_cache_free(c);
}

static void test_bounded(void **state)
{
    (void)state;
    const size_t cap = 64 << 10;
    ch_cache *c = pd__ch_cache_new(cap);
    assert_non_null(c);
    pd_buf b;
    pd_buf_init(&b, 0);
    uint8_t e[40];
    const uint64_t N = 20000; /* ~900 KB of entries through a 32 KB store */
    entry(5, e);
    pd__ch_cache_put(c, CH_CACHE_ROWS, 5, e, sizeof e);
    for (uint64_t k = 0; k < N; k++) {
        entry(k, e);
        pd__ch_cache_put(c, CH_CACHE_ROWS, k, e, sizeof e);
        /* entry 5 in use all along */
        pd_buf_reset(&b);
        assert_true(pd__ch_cache_get(c, CH_CACHE_ROWS, 5, &b, NULL));
        entry(5, e);
        assert_memory_equal(b.data, e, sizeof e);
        assert_true(pd__ch_cache_bytes(c, CH_CACHE_ROWS) <= cap / 2);
    }
    assert_true(pd__ch_cache_bytes(c, CH_CACHE_ROWS) > 0);
    assert_int_equal(pd__ch_cache_bytes(c, CH_CACHE_MERGE), 0);
    /* the newest kept, the oldest gone */
    pd_buf_reset(&b);
    assert_true(pd__ch_cache_get(c, CH_CACHE_ROWS, N - 1, &b, NULL));
    entry(N - 1, e);
    assert_memory_equal(b.data, e, sizeof e);
    assert_false(pd__ch_cache_get(c, CH_CACHE_ROWS, 0, &b, NULL));
    assert_true(pd_metrics_get("profd_clickhouse_cache_bytes", "cache=\"rows\"") <= cap / 2);
    pd_buf_release(&b);
    pd__ch_cache_free(c);
}

static void test_none(void **state)
{
    (void)state;
    assert_null(pd__ch_cache_new(0));
    uint8_t e[40] = {1};
    pd__ch_cache_put(NULL, CH_CACHE_ROWS, 1, e, sizeof e);
    pd_buf b;
    pd_buf_init(&b, 0);
    assert_false(pd__ch_cache_get(NULL, CH_CACHE_ROWS, 1, &b, NULL));
    pd__ch_cache_drop(NULL, CH_CACHE_ROWS, 1);
    assert_int_equal(pd__ch_cache_bytes(NULL, CH_CACHE_ROWS), 0);
    assert_int_equal(b.len, 0);
    pd__ch_cache_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_put),
        cmocka_unit_test(test_bounded),
        cmocka_unit_test(test_none),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
