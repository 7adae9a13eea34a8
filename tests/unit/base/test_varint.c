/* Unit tests of src/base/varint.c (protobuf encoding examples). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "base/buf.h"
#include "base/varint.h"

static void test_known_encodings(void **state)
{
    (void)state;
    struct {
        uint64_t v;
        const char *bytes;
        size_t n;
    } cases[] = {
        {0, "\x00", 1},
        {1, "\x01", 1},
        {127, "\x7f", 1},
        {128, "\x80\x01", 2},
        {150, "\x96\x01", 2}, /* protobuf.dev encoding guide */
        {300, "\xac\x02", 2},
        {UINT64_MAX, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 10},
        /* int64 -1 as protobuf writes it: ten bytes */
        {(uint64_t)-1, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 10},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t out[10];
        size_t n = pd_varint_put(out, cases[i].v);
        assert_int_equal(n, cases[i].n);
        assert_memory_equal(out, cases[i].bytes, n);
        uint64_t v = 12345;
        assert_int_equal(pd_varint_get((const uint8_t *)cases[i].bytes, cases[i].n, &v),
                         cases[i].n);
        assert_true(v == cases[i].v);
        pd_buf b;
        pd_buf_init(&b, 0);
        assert_int_equal(pd_buf_put_varint(&b, cases[i].v), 0);
        assert_int_equal(b.len, n);
        assert_memory_equal(b.data, cases[i].bytes, n);
        pd_buf_release(&b);
    }
}

static void test_malformed(void **state)
{
    (void)state;
    uint64_t v = 7;
    assert_int_equal(pd_varint_get((const uint8_t *)"", 0, &v), 0);
    assert_int_equal(pd_varint_get((const uint8_t *)"\x80", 1, &v), 0);
    assert_int_equal(pd_varint_get((const uint8_t *)"\x96\x01", 1, &v), 0); /* truncated */
    /* eleven bytes */
    assert_int_equal(
        pd_varint_get((const uint8_t *)"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11, &v), 0);
    assert_int_equal(v, 7); /* untouched on failure */
    /* trailing bytes are not consumed */
    assert_int_equal(pd_varint_get((const uint8_t *)"\x05\x06", 2, &v), 1);
    assert_int_equal(v, 5);
}

/* Regression: a 10th byte above 1 overflowed 64 bits and was silently
 * truncated; protobuf rejects it. */
static void test_overflow_rejected(void **state)
{
    (void)state;
    uint64_t v = 0;
    const uint8_t max[10] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    const uint8_t over[10] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02};
    assert_int_equal(pd_varint_get(max, sizeof max, &v), 10);
    assert_true(v == UINT64_MAX);
    assert_int_equal(pd_varint_get(over, sizeof over, &v), 0);
}

static void test_roundtrip_all_lengths(void **state)
{
    (void)state;
    for (int bits = 0; bits <= 64; bits++) {
        uint64_t v = bits == 64 ? UINT64_MAX : ((uint64_t)1 << bits) - 1;
        uint8_t out[10];
        size_t n = pd_varint_put(out, v);
        assert_int_equal(n, bits == 0 ? 1 : (size_t)(bits + 6) / 7);
        uint64_t back;
        assert_int_equal(pd_varint_get(out, n, &back), n);
        assert_true(back == v);
    }
}

static void test_zigzag(void **state)
{
    (void)state;
    /* protobuf sint64 table */
    assert_true(pd_zigzag_enc(0) == 0);
    assert_true(pd_zigzag_enc(-1) == 1);
    assert_true(pd_zigzag_enc(1) == 2);
    assert_true(pd_zigzag_enc(-2) == 3);
    assert_true(pd_zigzag_enc(INT64_MAX) == UINT64_MAX - 1);
    assert_true(pd_zigzag_enc(INT64_MIN) == UINT64_MAX);
    int64_t vals[] = {0, 1, -1, 63, -64, 1000000, -1000000, INT64_MAX, INT64_MIN};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++)
        assert_true(pd_zigzag_dec(pd_zigzag_enc(vals[i])) == vals[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_encodings),       cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_roundtrip_all_lengths), cmocka_unit_test(test_zigzag),
        cmocka_unit_test(test_overflow_rejected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
