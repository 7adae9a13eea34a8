/*
 * tests/unit/base/test_parse.c — pd_parse_u64: digits only, no wrap, no
 * saturation (issue 19: "limit=%20-1" and a 23-digit limit were read as
 * "all rows"); pd_parse_flag: "--name=value" and "--name value".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/error.h"
#include "base/parse.h"

static void test_digits(void **state)
{
    uint64_t v = 7;
    assert_int_equal(pd_parse_u64("0", UINT64_MAX, &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(pd_parse_u64("100", UINT64_MAX, &v), 0);
    assert_int_equal(v, 100);
    assert_int_equal(pd_parse_u64("18446744073709551615", UINT64_MAX, &v), 0);
    assert_true(v == UINT64_MAX);
    assert_int_equal(pd_parse_u64("000042", UINT64_MAX, &v), 0);
    assert_int_equal(v, 42);
}

static void test_refused(void **state)
{
    uint64_t v = 7;
    const char *bad[] = {"", " -1", "-1", "+1", " 1", "1 ", "0x10", "1e3", "1.5", "12a", "\t3"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(pd_parse_u64(bad[i], UINT64_MAX, &v), PD_EPARSE);
    assert_int_equal(pd_parse_u64(NULL, UINT64_MAX, &v), PD_EPARSE);
    /* one past 2^64 - 1, and a 23-digit number: too big, not saturated */
    assert_int_equal(pd_parse_u64("18446744073709551616", UINT64_MAX, &v), PD_ETOOBIG);
    assert_int_equal(pd_parse_u64("12345678901234567890123", UINT64_MAX, &v), PD_ETOOBIG);
    assert_int_equal(pd_parse_u64("101", 100, &v), PD_ETOOBIG);
    assert_int_equal(v, 7); /* untouched on error */
}

static void test_flag(void **state)
{
    (void)state;
    char *argv[] = {"push", "--url=http://a", "--url", "http://b", "--urlx=1", "--url"};
    int argc = 6, i = 1;
    const char *v = NULL;
    assert_int_equal(pd_parse_flag(argc, argv, &i, "--url", &v), 1);
    assert_string_equal(v, "http://a");
    assert_int_equal(i, 1);
    i = 2;
    assert_int_equal(pd_parse_flag(argc, argv, &i, "--url", &v), 1);
    assert_string_equal(v, "http://b");
    assert_int_equal(i, 3); /* advanced past the value */
    i = 4;
    v = NULL;
    assert_int_equal(pd_parse_flag(argc, argv, &i, "--url", &v), 0); /* another flag */
    assert_null(v);
    assert_int_equal(pd_parse_flag(argc, argv, &i, "--type", &v), 0);
    i = 5;
    assert_int_equal(pd_parse_flag(argc, argv, &i, "--url", &v), -1); /* value missing */
    assert_int_equal(i, 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_digits),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_flag),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
