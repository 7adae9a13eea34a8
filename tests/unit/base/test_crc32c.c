/* Unit tests of src/base/crc32c.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "base/crc32c.h"

/* bit-at-a-time reference (reflected polynomial 0x82F63B78) */
static uint32_t crc_ref(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    }
    return ~c;
}

static void test_check_value(void **state)
{
    (void)state;
    /* the CRC catalogue's check value for CRC-32C */
    assert_int_equal(pd_crc32c(0, "123456789", 9), 0xE3069283u);
    assert_int_equal(pd_crc32c(0, "", 0), 0);
}

static void test_rfc3720_vectors(void **state)
{
    (void)state;
    /* RFC 3720 (iSCSI) appendix B.4 */
    uint8_t buf[32];
    memset(buf, 0, 32);
    assert_int_equal(pd_crc32c(0, buf, 32), 0x8A9136AAu);
    memset(buf, 0xff, 32);
    assert_int_equal(pd_crc32c(0, buf, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)i;
    assert_int_equal(pd_crc32c(0, buf, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)(31 - i);
    assert_int_equal(pd_crc32c(0, buf, 32), 0x113FDB5Cu);
}

static void test_against_reference_and_incremental(void **state)
{
    (void)state;
    uint8_t data[1000];
    uint32_t x = 1;
    for (size_t i = 0; i < sizeof data; i++) {
        x = x * 1664525u + 1013904223u;
        data[i] = (uint8_t)(x >> 24);
    }
    /* every length and misalignment of the 8-byte fast path */
    for (size_t off = 0; off < 9; off++)
        for (size_t len = 0; len + off <= 200; len++)
            assert_int_equal(pd_crc32c(0, data + off, len), crc_ref(data + off, len));
    /* the portable path too (pd_crc32c may take the hardware one) */
    for (size_t off = 0; off < 9; off++)
        for (size_t len = 0; len + off <= 200; len++)
            assert_int_equal(pd__crc32c_portable(0, data + off, len), crc_ref(data + off, len));
    assert_int_equal(pd__crc32c_portable(0, "123456789", 9), 0xE3069283u);
    assert_int_equal(pd__crc32c_portable(pd_crc32c(0, data, 100), data + 100, 900),
                     crc_ref(data, sizeof data));
    uint32_t whole = pd_crc32c(0, data, sizeof data);
    assert_int_equal(whole, crc_ref(data, sizeof data));
    for (size_t cut = 0; cut <= sizeof data; cut += 37) {
        uint32_t c = pd_crc32c(0, data, cut);
        assert_int_equal(pd_crc32c(c, data + cut, sizeof data - cut), whole);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_value),
        cmocka_unit_test(test_rfc3720_vectors),
        cmocka_unit_test(test_against_reference_and_incremental),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
