/* Unit tests of src/base/time.c: durations, RFC 3339, query time params. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>
#include "../pd_test.h"

#include "base/time.h"

/* reference: libc's timegm */
static int64_t utc_ms(int y, int mo, int d, int h, int mi, int s, int ms)
{
    struct tm tm = {.tm_year = y - 1900,
                    .tm_mon = mo - 1,
                    .tm_mday = d,
                    .tm_hour = h,
                    .tm_min = mi,
                    .tm_sec = s};
    return (int64_t)timegm(&tm) * 1000 + ms;
}

static void test_durations(void **state)
{
    (void)state;
    struct {
        const char *s;
        int64_t ms;
    } ok[] = {
        {"0", 0},
        {"15s", 15000},
        {"100ms", 100},
        {"1m", 60000},
        {"1h30m", 5400000},
        {"2d", 172800000},
        {"1w", 604800000},
        {"1y", 31536000000LL},
        {"1h1m1s1ms", 3661001},
        {"90s", 90000},
        {"0s", 0},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        int64_t ms = -1;
        pd_err err = {{0}};
        if (pd_parse_duration(ok[i].s, &ms, &err))
            fail_msg("%s: %s", ok[i].s, err.msg);
        assert_int_equal(ms, ok[i].ms);
    }
    const char *bad[] = {
        "", "1", "s", "1s1m", "1m1m", "-1s", "1.5s", "1x", "1 s", "99999999999999999999y", " 1s"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t ms = 7;
        pd_err err = {{0}};
        if (pd_parse_duration(bad[i], &ms, &err) != PD_EPARSE)
            fail_msg("\"%s\" accepted as %lld ms", bad[i], (long long)ms);
        assert_true(err.msg[0] != '\0');
    }
    char out[32];
    pd_format_duration(90000, out, sizeof out);
    assert_string_equal(out, "1m30s");
    pd_format_duration(3661001, out, sizeof out);
    assert_string_equal(out, "1h1m1s1ms");
    pd_format_duration(0, out, sizeof out);
    assert_string_equal(out, "0s");
    pd_format_duration(15000, out, sizeof out);
    assert_string_equal(out, "15s");
}

static void test_rfc3339(void **state)
{
    (void)state;
    int64_t ms;
    assert_int_equal(pd_parse_rfc3339("2026-11-22T14:00:00Z", &ms), 0);
    assert_int_equal(ms, utc_ms(2026, 11, 22, 14, 0, 0, 0));
    assert_int_equal(pd_parse_rfc3339("2026-11-22T14:00:00.123+01:00", &ms), 0);
    assert_int_equal(ms, utc_ms(2026, 11, 22, 13, 0, 0, 123));
    assert_int_equal(pd_parse_rfc3339("2026-11-22T14:00:00.5-02:30", &ms), 0);
    assert_int_equal(ms, utc_ms(2026, 11, 22, 16, 30, 0, 500));
    assert_int_equal(pd_parse_rfc3339("2026-11-22T14:00:00.123456789Z", &ms), 0);
    assert_int_equal(ms, utc_ms(2026, 11, 22, 14, 0, 0, 123));
    assert_int_equal(pd_parse_rfc3339("2024-02-29T23:59:59Z", &ms), 0);
    assert_int_equal(ms, utc_ms(2024, 2, 29, 23, 59, 59, 0));
    assert_int_equal(pd_parse_rfc3339("1970-01-01T00:00:00Z", &ms), 0);
    assert_int_equal(ms, 0);
    assert_int_equal(pd_parse_rfc3339("1969-12-31T23:59:59Z", &ms), 0);
    assert_int_equal(ms, -1000);
    const char *bad[] = {"",
                         "2026-11-22",
                         "2026-11-22T14:00:00",
                         "2026-13-01T00:00:00Z",
                         "2026-11-22T24:00:00Z",
                         "2026-11-22T14:00:00.Z",
                         "2026-11-22T14:00:00Zjunk",
                         "2026-11-22T14:00:00+0100",
                         "26-11-22T14:00:00Z"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (pd_parse_rfc3339(bad[i], &ms) != PD_EPARSE)
            fail_msg("\"%s\" accepted", bad[i]);

    char out[32];
    pd_format_rfc3339(utc_ms(2026, 11, 22, 14, 0, 0, 123), out, sizeof out);
    assert_string_equal(out, "2026-11-22T14:00:00.123Z");
    pd_format_rfc3339(-1, out, sizeof out);
    assert_string_equal(out, "1969-12-31T23:59:59.999Z");
    /* format then parse is the identity */
    int64_t vals[] = {0, 1, 999, 1700000000123LL, -86400001LL, 4102444800000LL};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        pd_format_rfc3339(vals[i], out, sizeof out);
        assert_int_equal(pd_parse_rfc3339(out, &ms), 0);
        assert_int_equal(ms, vals[i]);
    }
}

/* Regression: impossible calendar dates were accepted and silently rolled over. */
static void test_rfc3339_impossible_dates(void **state)
{
    (void)state;
    int64_t ms;
    assert_int_equal(pd_parse_rfc3339("2026-02-31T00:00:00Z", &ms), PD_EPARSE);
    assert_int_equal(pd_parse_rfc3339("2026-04-31T00:00:00Z", &ms), PD_EPARSE);
    assert_int_equal(pd_parse_rfc3339("2025-02-29T00:00:00Z", &ms), PD_EPARSE);
    assert_int_equal(pd_parse_rfc3339("1900-02-29T00:00:00Z", &ms), PD_EPARSE);
    assert_int_equal(pd_parse_rfc3339("2024-02-29T00:00:00Z", &ms), 0);
    assert_int_equal(pd_parse_rfc3339("2000-02-29T00:00:00Z", &ms), 0);
    assert_true(ms == 951782400000LL);
}

/* Regression (fuzz_time): each term of a duration was checked for overflow but
 * not their sum, so "292471208y36w" overflowed int64 (undefined behaviour)
 * instead of being refused. 292471208y is the largest whole number of years
 * that fits (292471208 * 365 d = 9223372015488000000 ms); 36w more does not. */
static void test_duration_sum_overflow(void **state)
{
    (void)state;
    int64_t ms = 7;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_parse_duration("292471208y", &ms, &err), &err);
    assert_true(ms == 292471208LL * 365 * 24 * 3600 * 1000);
    assert_int_equal(pd_parse_duration("292471208y36w", &ms, &err), PD_EPARSE);
    PD_ASSERT_OK(pd_parse_duration("292471208y1w1d1h1m1s1ms", &ms, &err), &err);
    assert_true(ms == 292471208LL * 365 * 24 * 3600 * 1000 + 8LL * 24 * 3600 * 1000 + 3661001);
    /* the exact edge: INT64_MAX ms is 106751991167d7h12m55s807ms */
    PD_ASSERT_OK(pd_parse_duration("106751991167d7h12m55s807ms", &ms, &err), &err);
    assert_true(ms == INT64_MAX);
    assert_int_equal(pd_parse_duration("106751991167d7h12m55s808ms", &ms, &err), PD_EPARSE);
}

/* Regression (fuzz_time): a UTC offset with hours over 23 or minutes over 59
 * ("+99:99", RFC 3339 allows 00-23 and 00-59) was accepted and shifted the time. */
static void test_rfc3339_offset_range(void **state)
{
    (void)state;
    int64_t ms;
    assert_int_equal(pd_parse_rfc3339("2026-11-22T14:00:00+99:99", &ms), PD_EPARSE);
    assert_int_equal(pd_parse_rfc3339("2026-11-22T14:00:00-24:00", &ms), PD_EPARSE);
    assert_int_equal(pd_parse_rfc3339("2026-11-22T14:00:00+05:60", &ms), PD_EPARSE);
    assert_int_equal(pd_parse_rfc3339("2026-11-22T14:00:00+23:59", &ms), 0);
    assert_int_equal(ms, utc_ms(2026, 11, 21, 14, 1, 0, 0));
    assert_int_equal(pd_parse_rfc3339("2026-11-22T14:00:00-23:59", &ms), 0);
    assert_int_equal(ms, utc_ms(2026, 11, 23, 13, 59, 0, 0));
}

static void test_time_param(void **state)
{
    (void)state;
    int64_t ms;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_parse_time_param("1700000000", &ms, &err), &err);
    assert_int_equal(ms, 1700000000000LL);
    PD_ASSERT_OK(pd_parse_time_param("1700000000.5", &ms, &err), &err);
    assert_int_equal(ms, 1700000000500LL);
    PD_ASSERT_OK(pd_parse_time_param("1700000000.123", &ms, &err), &err);
    assert_int_equal(ms, 1700000000123LL);
    PD_ASSERT_OK(pd_parse_time_param("0", &ms, &err), &err);
    assert_int_equal(ms, 0);
    PD_ASSERT_OK(pd_parse_time_param("2026-11-22T14:00:00Z", &ms, &err), &err);
    assert_int_equal(ms, utc_ms(2026, 11, 22, 14, 0, 0, 0));
    const char *bad[] = {"", "abc", "12abc", "nan", "inf", "1e300", " 1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (pd_parse_time_param(bad[i], &ms, &err) != PD_EPARSE)
            fail_msg("\"%s\" accepted as %lld", bad[i], (long long)ms);
        assert_true(err.msg[0] != '\0');
    }
}

static void test_clocks(void **state)
{
    (void)state;
    /* bracketed by time(2) read before and after (no bound on how long the
     * reads take: issue 34); time() may lag the fine clock by a tick */
    int64_t t1 = (int64_t)time(NULL);
    int64_t now = pd_now_ms();
    int64_t t2 = (int64_t)time(NULL);
    assert_true(now > utc_ms(2020, 1, 1, 0, 0, 0, 0));
    assert_true(now >= t1 * 1000 && now < (t2 + 2) * 1000);
    int64_t a = pd_mono_ns(), b = pd_mono_ns();
    assert_true(b >= a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_durations),
        cmocka_unit_test(test_rfc3339),
        cmocka_unit_test(test_time_param),
        cmocka_unit_test(test_rfc3339_impossible_dates),
        cmocka_unit_test(test_duration_sum_overflow),
        cmocka_unit_test(test_rfc3339_offset_range),
        cmocka_unit_test(test_clocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
