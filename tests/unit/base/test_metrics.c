/* Unit tests of src/base/metrics.c: series updates, the text format, and the
 * removal of series (one, or by leading label pairs) that the scrape manager
 * uses when a reload drops targets. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "base/buf.h"
#include "base/metrics.h"

/* The /metrics text as a NUL-terminated string (caller frees via release). */
static void text(pd_buf *b)
{
    pd_buf_init(b, 0);
    assert_int_equal(pd_metrics_write(b), 0);
    assert_int_equal(pd_buf_putc(b, '\0'), 0);
}

static size_t count_lines(const char *s, const char *prefix)
{
    size_t n = 0, pl = strlen(prefix);
    for (const char *p = s; p && *p;) {
        if (strncmp(p, prefix, pl) == 0)
            n++;
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    return n;
}

static int setup(void **state)
{
    (void)state;
    pd_metrics_reset();
    return 0;
}

static void test_add_set_get_write(void **state)
{
    (void)state;
    pd_metrics_describe("t_requests_total", PD_METRIC_COUNTER, "Requests.");
    pd_metrics_describe("t_temp", PD_METRIC_GAUGE, "Temperature.");
    pd_metrics_add("t_requests_total", "code=\"200\"", 2);
    pd_metrics_add("t_requests_total", "code=\"200\"", 3);
    pd_metrics_add("t_requests_total", "code=\"500\"", 1);
    pd_metrics_set("t_temp", NULL, 21.5);
    pd_metrics_set("t_temp", "", -4);
    pd_metrics_add("t_untyped", NULL, 1);
    assert_true(pd_metrics_get("t_requests_total", "code=\"200\"") == 5);
    assert_true(pd_metrics_get("t_temp", NULL) == -4);
    assert_true(pd_metrics_get("t_nothing", NULL) == 0);
    assert_int_equal(pd_metrics_has("t_temp", ""), 1);
    assert_int_equal(pd_metrics_has("t_nothing", NULL), 0);
    pd_metrics_set("t_zero", NULL, 0);
    assert_int_equal(pd_metrics_has("t_zero", NULL), 1); /* present at 0 */

    pd_buf b;
    text(&b);
    assert_string_equal(b.data, "# HELP t_requests_total Requests.\n"
                                "# TYPE t_requests_total counter\n"
                                "t_requests_total{code=\"200\"} 5\n"
                                "t_requests_total{code=\"500\"} 1\n"
                                "# HELP t_temp Temperature.\n"
                                "# TYPE t_temp gauge\n"
                                "t_temp -4\n"
                                "# TYPE t_untyped untyped\n"
                                "t_untyped 1\n"
                                "# TYPE t_zero untyped\n"
                                "t_zero 0\n");
    pd_buf_release(&b);
}

static void test_remove_one(void **state)
{
    (void)state;
    pd_metrics_describe("t_up", PD_METRIC_GAUGE, "Up.");
    pd_metrics_set("t_up", "job=\"a\",instance=\"x:1\"", 1);
    pd_metrics_set("t_up", "job=\"a\",instance=\"x:2\"", 0);
    pd_metrics_set("t_other", "job=\"a\",instance=\"x:1\"", 7);

    assert_int_equal(pd_metrics_remove("t_up", "job=\"a\",instance=\"x:1\""), 1);
    assert_int_equal(pd_metrics_remove("t_up", "job=\"a\",instance=\"x:1\""), 0); /* gone */
    assert_int_equal(pd_metrics_remove("t_up", "job=\"a\""), 0); /* exact strings only */
    assert_int_equal(pd_metrics_has("t_up", "job=\"a\",instance=\"x:1\""), 0);
    assert_int_equal(pd_metrics_has("t_up", "job=\"a\",instance=\"x:2\""), 1);
    /* same labels, other family: untouched */
    assert_true(pd_metrics_get("t_other", "job=\"a\",instance=\"x:1\"") == 7);

    pd_buf b;
    text(&b);
    assert_null(strstr(b.data, "x:1\"} 1"));
    assert_non_null(strstr(b.data, "t_up{job=\"a\",instance=\"x:2\"} 0\n"));
    pd_buf_release(&b);

    /* the last series of a family: its samples leave the text, its HELP and
     * TYPE stay (issue 28: a described family is named in every scrape) */
    assert_int_equal(pd_metrics_remove("t_up", "job=\"a\",instance=\"x:2\""), 1);
    text(&b);
    assert_null(strstr(b.data, "t_up{"));
    assert_non_null(strstr(b.data, "# TYPE t_up "));
    pd_buf_release(&b);

    /* created again: starts from 0, described again */
    pd_metrics_add("t_up", "job=\"a\",instance=\"x:1\"", 1);
    assert_true(pd_metrics_get("t_up", "job=\"a\",instance=\"x:1\"") == 1);
    text(&b);
    assert_non_null(strstr(b.data, "# TYPE t_up gauge\nt_up{job=\"a\",instance=\"x:1\"} 1\n"));
    pd_buf_release(&b);

    /* series without labels */
    pd_metrics_set("t_plain", NULL, 3);
    assert_int_equal(pd_metrics_remove("t_plain", ""), 1);
    assert_int_equal(pd_metrics_has("t_plain", NULL), 0);
}

static void test_remove_prefix(void **state)
{
    (void)state;
    pd_metrics_add("t_scrapes_total", "job=\"a\",profile_type=\"cpu\",outcome=\"success\"", 1);
    pd_metrics_add("t_scrapes_total", "job=\"a\",profile_type=\"cpu\",outcome=\"error\"", 1);
    pd_metrics_add("t_scrapes_total", "job=\"a\",profile_type=\"cpu2\",outcome=\"error\"", 1);
    pd_metrics_add("t_scrapes_total", "job=\"ab\",profile_type=\"cpu\",outcome=\"error\"", 1);
    pd_metrics_add("t_scrapes_total", "job=\"a\"", 1);
    pd_metrics_add("t_dur_total", "job=\"a\",profile_type=\"cpu\"", 1);

    /* whole label pairs: cpu2 and job "ab" stay */
    assert_int_equal(pd_metrics_remove_prefix("t_scrapes_total", "job=\"a\",profile_type=\"cpu\""),
                     2);
    assert_int_equal(
        pd_metrics_has("t_scrapes_total", "job=\"a\",profile_type=\"cpu2\",outcome=\"error\""), 1);
    assert_int_equal(
        pd_metrics_has("t_scrapes_total", "job=\"ab\",profile_type=\"cpu\",outcome=\"error\""), 1);
    assert_int_equal(pd_metrics_has("t_dur_total", "job=\"a\",profile_type=\"cpu\""), 1);

    /* job="a" matches the series that is exactly job="a" and the longer ones */
    assert_int_equal(pd_metrics_remove_prefix("t_scrapes_total", "job=\"a\""), 2);
    assert_int_equal(pd_metrics_has("t_scrapes_total", "job=\"a\""), 0);
    assert_int_equal(
        pd_metrics_has("t_scrapes_total", "job=\"ab\",profile_type=\"cpu\",outcome=\"error\""), 1);
    assert_int_equal(pd_metrics_remove_prefix("t_scrapes_total", "job=\"zzz\""), 0);

    /* "" and NULL: the whole family, only it */
    pd_metrics_add("t_scrapes_total", NULL, 1);
    assert_int_equal(pd_metrics_remove_prefix("t_scrapes_total", ""), 2);
    assert_int_equal(pd_metrics_remove_prefix("t_scrapes_total", NULL), 0);
    assert_int_equal(pd_metrics_has("t_dur_total", "job=\"a\",profile_type=\"cpu\""), 1);
    pd_buf b;
    text(&b);
    assert_null(strstr(b.data, "t_scrapes_total"));
    pd_buf_release(&b);
}

/* Thousands of series, removed in a scrambled order with writes (which sort
 * and re-number the series) in between: every remaining series keeps its own
 * value and the text has exactly the remaining ones. Regression guard for the
 * index bookkeeping of the swap-removal. */
static void test_many_series_removed_in_any_order(void **state)
{
    (void)state;
    enum { N = 5000 };
    static char present[N];
    char l[64];
    for (int i = 0; i < N; i++) {
        snprintf(l, sizeof l, "instance=\"h%d\"", i);
        pd_metrics_set("t_many", l, i);
        present[i] = 1;
    }
    uint32_t x = 12345;
    size_t left = N;
    for (int round = 0; round < 5; round++) {
        for (int k = 0; k < N / 8; k++) {
            x = x * 1103515245u + 12345u;
            int i = (int)((x >> 8) % N);
            snprintf(l, sizeof l, "instance=\"h%d\"", i);
            assert_int_equal(pd_metrics_remove("t_many", l), present[i]);
            left -= present[i];
            present[i] = 0;
        }
        pd_buf b;
        text(&b);
        assert_int_equal(count_lines(b.data, "t_many{"), left);
        pd_buf_release(&b);
        for (int i = 0; i < N; i++) {
            snprintf(l, sizeof l, "instance=\"h%d\"", i);
            assert_int_equal(pd_metrics_has("t_many", l), present[i]);
            if (present[i])
                assert_true(pd_metrics_get("t_many", l) == i);
        }
    }
    assert_int_equal(pd_metrics_remove_prefix("t_many", ""), left);
    pd_buf b;
    text(&b);
    assert_int_equal(count_lines(b.data, "t_many"), 0);
    pd_buf_release(&b);
}

/* Adds from several threads while another removes and writes: no lost
 * increments on the series that are never removed. */
#define THREADS 4
#define ADDS 20000

static void *adder(void *arg)
{
    (void)arg;
    for (int i = 0; i < ADDS; i++) {
        pd_metrics_add("t_conc_total", "k=\"kept\"", 1);
        pd_metrics_set("t_conc_gone", "k=\"x\"", i);
    }
    return NULL;
}

static volatile int write_failed;

static void *remover(void *arg)
{
    (void)arg;
    for (int i = 0; i < 2000; i++) {
        pd_metrics_remove("t_conc_gone", "k=\"x\"");
        if (i % 100 == 0) {
            pd_buf b;
            pd_buf_init(&b, 0);
            if (pd_metrics_write(&b))
                write_failed = 1; /* no cmocka assert off the main thread */
            pd_buf_release(&b);
        }
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    pthread_t th[THREADS + 1];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, adder, NULL), 0);
    assert_int_equal(pthread_create(&th[THREADS], NULL, remover, NULL), 0);
    for (int i = 0; i <= THREADS; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(write_failed, 0);
    assert_true(pd_metrics_get("t_conc_total", "k=\"kept\"") == THREADS * ADDS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_add_set_get_write, setup),
        cmocka_unit_test_setup(test_remove_one, setup),
        cmocka_unit_test_setup(test_remove_prefix, setup),
        cmocka_unit_test_setup(test_many_series_removed_in_any_order, setup),
        cmocka_unit_test_setup(test_threads, setup),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    pd_metrics_reset();
    return rc;
}
