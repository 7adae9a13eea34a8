/* Tests of src/scrape/adaptive.c and config_adaptive.c (issue 18): the
 * adaptive_capture block (defaults, every key, errors with FILE:LINE:COL),
 * and the burst rules driven with explicit clocks: growth and limit starts,
 * max_targets, max_duration, calm, alerts (match, hold, resolve, cap), the
 * byte budget, the target_down event and the events JSON. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/metrics.h"
#include "scrape/config.h"
#include "scrape/scrape_int.h"

#define MIB (1024 * 1024)

static int parse(const char *yaml, pd_config *c, pd_err *e)
{
    pd_err_clear(e);
    return pd_config_parse(yaml, strlen(yaml), "cfg.yaml", c, e);
}

static const char *HEAD = "scrape_configs:\n"
                          "  - job_name: app\n"
                          "    scrape_interval: 15s\n"
                          "    static_configs: [{targets: ['a:1', 'b:1', 'c:1']}]\n";

static int parse_block(const char *block, pd_config *c, pd_err *e)
{
    char y[4096];
    snprintf(y, sizeof y, "%s    adaptive_capture:\n%s", HEAD, block);
    return parse(y, c, e);
}

static void test_config_defaults(void **state)
{
    (void)state;
    pd_config c;
    pd_err e;
    assert_int_equal(parse(HEAD, &c, &e), 0);
    assert_false(c.jobs[0].adaptive.enabled); /* off by default */
    pd_config_release(&c);

    assert_int_equal(parse_block("      heap_growth_bytes_per_minute: 64MiB\n", &c, &e), 0);
    const pd_adaptive_config *a = &c.jobs[0].adaptive;
    assert_true(a->enabled);
    assert_int_equal(a->interval_ms, 1000);
    assert_int_equal(a->growth_bytes_per_min, 64 * MIB);
    assert_true(a->growth_percent_per_min == 0);
    assert_int_equal(a->growth_window_ms, 60000);
    assert_int_equal(a->max_duration_ms, 300000);
    assert_int_equal(a->max_targets, 5);
    assert_int_equal(a->byte_budget_per_min, 64 * MIB);
    assert_true(a->limit_fraction == 0.8);
    assert_int_equal(a->n_profiles, 3);
    assert_string_equal(a->profiles[0], "heap");
    assert_string_equal(a->profiles[2], "goroutine");
    assert_string_equal(pd_labels_get(&a->alert_labels, "job"), "job");
    assert_string_equal(pd_labels_get(&a->alert_labels, "instance"), "instance");
    pd_config_release(&c);
}

static void test_config_all_keys(void **state)
{
    (void)state;
    pd_config c;
    pd_err e;
    assert_int_equal(parse_block("      enabled: true\n"
                                 "      scrape_interval: 2s\n"
                                 "      profiles: [heap]\n"
                                 "      heap_growth_percent_per_minute: 25.5\n"
                                 "      growth_window: 30s\n"
                                 "      heap_limit: 1GiB\n"
                                 "      limit_fraction: 0.9\n"
                                 "      max_duration: 90s\n"
                                 "      max_targets: 3\n"
                                 "      byte_budget_per_minute: 0\n"
                                 "      alert_labels: {service: job, pod: instance}\n",
                                 &c, &e),
                     0);
    const pd_adaptive_config *a = &c.jobs[0].adaptive;
    assert_int_equal(a->interval_ms, 2000);
    assert_int_equal(a->n_profiles, 1);
    assert_true(a->growth_percent_per_min == 25.5);
    assert_int_equal(a->growth_window_ms, 30000);
    assert_int_equal(a->heap_limit_bytes, 1024 * MIB);
    assert_true(a->limit_fraction == 0.9);
    assert_int_equal(a->max_duration_ms, 90000);
    assert_int_equal(a->max_targets, 3);
    assert_int_equal(a->byte_budget_per_min, 0);
    assert_string_equal(pd_labels_get(&a->alert_labels, "service"), "job");
    assert_null(pd_labels_get(&a->alert_labels, "job"));
    pd_adaptive_config cp;
    assert_int_equal(pd_adaptive_config_copy(&cp, a), 0);
    assert_string_equal(cp.profiles[0], "heap");
    assert_string_equal(pd_labels_get(&cp.alert_labels, "pod"), "instance");
    pd_adaptive_config_release(&cp);
    pd_config_release(&c);

    assert_int_equal(parse_block("      enabled: false\n", &c, &e), 0);
    assert_false(c.jobs[0].adaptive.enabled);
    pd_config_release(&c);
}

static void expect_error(const char *block, const char *want)
{
    pd_config c;
    pd_err e;
    int rc = parse_block(block, &c, &e);
    if (rc == 0)
        pd_config_release(&c);
    assert_true(rc < 0);
    if (!strstr(e.msg, want))
        fail_msg("error \"%s\" lacks \"%s\"", e.msg, want);
}

static void test_config_errors(void **state)
{
    (void)state;
    expect_error("      max_burst: 5\n", "cfg.yaml:6:7: ");
    expect_error("      max_burst: 5\n", "max_burst");
    expect_error("      scrape_interval: 15s\n", "must be shorter than the job's scrape_interval");
    expect_error("      profiles: [cpu]\n", "profile window");
    expect_error("      profiles: [nosuch]\n", "\"nosuch\" is not a profile type of job \"app\"");
    expect_error("      profiles: []\n", "adaptive_capture.profiles is empty");
    expect_error("      limit_fraction: 1.5\n", "cfg.yaml:6:23: adaptive_capture.limit_fraction");
    expect_error("      heap_growth_percent_per_minute: -3\n", "want a number over 0");
    expect_error("      heap_limit: lots\n", "adaptive_capture.heap_limit \"lots\"");
    expect_error("      max_targets: 0\n", "max_targets");
    expect_error("      alert_labels: {}\n", "alert_labels is empty");
    expect_error("      alert_labels: {'a-b': job}\n", "is not an alert label name");
    expect_error("      enabled: maybe\n", "enabled");
}

/* ---- the burst rules ---- */

typedef struct fixture {
    pd_config cfg;
    pd__adaptive *a;
    pd__burst *b[3];
} fixture;

static void setup_fixture(fixture *f, const char *block)
{
    pd_err e;
    pd_metrics_reset();
    assert_int_equal(parse_block(block, &f->cfg, &e), 0);
    assert_int_equal(pd__adaptive_new(&f->a), 0);
    pd__adaptive_begin_apply(f->a);
    const char *inst[3] = {"a:1", "b:1", "c:1"};
    for (int i = 0; i < 3; i++) {
        pd_labels ls;
        pd_labels_init(&ls);
        assert_int_equal(pd_labels_set(&ls, "__name__", "heap", NULL), 0);
        assert_int_equal(pd_labels_set(&ls, "job", "app", NULL), 0);
        assert_int_equal(pd_labels_set(&ls, "instance", inst[i], NULL), 0);
        f->b[i] = pd__adaptive_ref(f->a, &f->cfg.jobs[0], &ls);
        assert_non_null(f->b[i]);
        /* the goroutine target of the same instance shares the burst */
        assert_int_equal(pd_labels_set(&ls, "__name__", "goroutine", NULL), 0);
        assert_ptr_equal(pd__adaptive_ref(f->a, &f->cfg.jobs[0], &ls), f->b[i]);
        pd_labels_release(&ls);
    }
    pd__adaptive_end_apply(f->a);
    assert_true(pd__burst_profile(f->b[0], "heap"));
    assert_true(pd__burst_profile(f->b[0], "goroutine"));
    assert_false(pd__burst_profile(f->b[0], "cpu"));
}

static void teardown_fixture(fixture *f)
{
    pd__adaptive_free(f->a);
    pd_config_release(&f->cfg);
}

static double metric(const char *family, const char *labels)
{
    pd_buf b;
    pd_buf_init(&b, 0);
    assert_int_equal(pd_metrics_write(&b), 0);
    char want[512];
    snprintf(want, sizeof want, "\n%s{%s} ", family, labels);
    const char *p = strstr(b.data, want);
    double v = p ? strtod(p + strlen(want), NULL) : -1;
    pd_buf_release(&b);
    return v;
}

static json_t *events(fixture *f, const char *kind)
{
    pd_buf b;
    pd_buf_init(&b, 0);
    assert_int_equal(pd__adaptive_events_json(f->a, 0, INT64_MAX, kind, &b), 0);
    json_error_t je;
    json_t *j = json_loadb(b.data, b.len, 0, &je);
    if (!j)
        fail_msg("events JSON does not parse: %s: %.*s", je.text, (int)b.len, b.data);
    pd_buf_release(&b);
    return j;
}

static void test_growth_max_targets_calm(void **state)
{
    (void)state;
    fixture f;
    setup_fixture(&f, "      heap_growth_bytes_per_minute: 60MiB\n"
                      "      max_targets: 2\n"
                      "      growth_window: 30s\n"
                      "      max_duration: 2m\n");
    int64_t t = 1000000; /* wall ms of profiles; monotonic ms = t too */
    /* one sample: no rate yet; 15 s later +10 MiB = 40 MiB/min: under 60 */
    for (int i = 0; i < 3; i++)
        pd__burst_observe(f.b[i], t, 100 * MIB, t);
    t += 15000;
    for (int i = 0; i < 3; i++)
        pd__burst_observe(f.b[i], t, 110 * MIB, t);
    assert_int_equal(pd__burst_interval(f.b[0]), 0);
    /* +20 MiB in 15 s over the window's oldest (30 s: 30 MiB in 30 s = 60 MiB/min) */
    t += 15000;
    for (int i = 0; i < 3; i++)
        pd__burst_observe(f.b[i], t, 130 * MIB, t);
    assert_int_equal(pd__burst_interval(f.b[0]), 1000);
    assert_int_equal(pd__burst_interval(f.b[1]), 1000);
    assert_int_equal(pd__burst_interval(f.b[2]), 0); /* max_targets: 2 */
    assert_true(metric("profd_adaptive_targets_in_burst", "job=\"app\"") == 2);
    assert_true(metric("profd_adaptive_bursts_started_total", "job=\"app\",reason=\"growth\"") ==
                2);
    assert_true(
        metric("profd_adaptive_bursts_refused_total", "job=\"app\",reason=\"max_targets\"") == 1);

    /* b0 stops growing: not calm before growth_window of burst, calm after */
    for (int k = 1; k <= 40; k++)
        pd__burst_observe(f.b[0], t + k * 1000, 130 * MIB, t + k * 1000);
    assert_int_equal(pd__burst_interval(f.b[0]), 0);
    assert_true(metric("profd_adaptive_bursts_ended_total", "job=\"app\",reason=\"calm\"") == 1);
    /* b1 keeps growing: ends at max_duration */
    pd__adaptive_tick(f.a, t + 119999);
    assert_int_equal(pd__burst_interval(f.b[1]), 1000);
    pd__adaptive_tick(f.a, t + 120000);
    assert_int_equal(pd__burst_interval(f.b[1]), 0);
    assert_true(
        metric("profd_adaptive_bursts_ended_total", "job=\"app\",reason=\"max_duration\"") == 1);
    assert_true(metric("profd_adaptive_targets_in_burst", "job=\"app\"") == 0);

    json_t *ev = events(&f, NULL);
    assert_int_equal(json_array_size(ev), 4);
    json_t *e0 = json_array_get(ev, 0);
    assert_string_equal(json_string_value(json_object_get(e0, "kind")), "burst_started");
    assert_string_equal(json_string_value(json_object_get(e0, "reason")), "growth");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(e0, "labels"), "instance")), "a:1");
    assert_null(json_object_get(json_object_get(e0, "labels"), "__name__"));
    json_decref(ev);
    teardown_fixture(&f);
}

static void test_limit(void **state)
{
    (void)state;
    fixture f;
    setup_fixture(&f, "      heap_limit: 100MiB\n"
                      "      limit_fraction: 0.5\n");
    pd__burst_observe(f.b[0], 1000, 49 * MIB, 1000);
    assert_int_equal(pd__burst_interval(f.b[0]), 0);
    pd__burst_observe(f.b[0], 2000, 50 * MIB, 2000);
    assert_int_equal(pd__burst_interval(f.b[0]), 1000);
    assert_true(metric("profd_adaptive_bursts_started_total", "job=\"app\",reason=\"limit\"") == 1);
    teardown_fixture(&f);
}

static void test_alerts(void **state)
{
    (void)state;
    fixture f;
    setup_fixture(&f, "      max_duration: 1m\n");
    pd_labels al;
    pd_labels_init(&al);
    assert_int_equal(pd_labels_set(&al, "alertname", "HeapHigh", NULL), 0);
    assert_int_equal(pd_labels_set(&al, "job", "app", NULL), 0);
    pd_scrape_alert a = {true, &al, "fp1", 5000};
    /* job only: every target of the job */
    assert_int_equal(pd__adaptive_alert(f.a, &a, 1000), 3);
    assert_int_equal(pd__burst_interval(f.b[2]), 1000);
    pd__burst_scraped(f.b[0], true, 2000, 2000, 100, true, "job=\"app\",profile_type=\"heap\"",
                      "heap", false, NULL, NULL, 2000);
    assert_true(
        metric("profd_adaptive_burst_profiles_total", "job=\"app\",profile_type=\"heap\"") == 1);
    /* resolved */
    a.firing = false;
    assert_int_equal(pd__adaptive_alert(f.a, &a, 3000), 3);
    assert_int_equal(pd__burst_interval(f.b[0]), 0);
    assert_true(metric("profd_adaptive_bursts_ended_total", "job=\"app\",reason=\"resolved\"") ==
                3);

    /* job + instance; a wrong instance matches nothing; no mapped label: nothing */
    assert_int_equal(pd_labels_set(&al, "instance", "b:1", NULL), 0);
    a.firing = true;
    a.key = "fp2";
    assert_int_equal(pd__adaptive_alert(f.a, &a, 4000), 1);
    assert_int_equal(pd__burst_interval(f.b[1]), 1000);
    assert_int_equal(pd__burst_interval(f.b[0]), 0);
    /* Alertmanager repeats the firing alert: nothing changes; the cap ends it */
    assert_int_equal(pd__adaptive_alert(f.a, &a, 30000), 1);
    pd__adaptive_tick(f.a, 64000);
    assert_int_equal(pd__burst_interval(f.b[1]), 0);
    assert_int_equal(pd__adaptive_alert(f.a, &a, 65000), 1); /* the same alert again: capped */
    assert_int_equal(pd__burst_interval(f.b[1]), 0);
    a.starts_at_ms = 70000; /* it fired anew */
    assert_int_equal(pd__adaptive_alert(f.a, &a, 71000), 1);
    assert_int_equal(pd__burst_interval(f.b[1]), 1000);

    pd_labels other;
    pd_labels_init(&other);
    assert_int_equal(pd_labels_set(&other, "alertname", "X", NULL), 0);
    assert_int_equal(pd_labels_set(&other, "instance", "zz:1", NULL), 0);
    pd_scrape_alert o = {true, &other, "fp3", 1};
    assert_int_equal(pd__adaptive_alert(f.a, &o, 72000), 0);
    assert_int_equal(pd_labels_set(&other, "instance", "", NULL), 0);
    assert_int_equal(pd__adaptive_alert(f.a, &o, 72000), 0); /* no mapped label at all */
    pd_labels_release(&other);
    pd_labels_release(&al);
    teardown_fixture(&f);
}

static void test_budget(void **state)
{
    (void)state;
    fixture f;
    setup_fixture(&f, "      byte_budget_per_minute: 1000\n");
    int64_t wall = 60000 * 100 + 5000;
    assert_true(pd__burst_budget_ok(f.b[0], wall));
    pd__burst_scraped(f.b[0], true, wall, wall, 600, true, "job=\"app\",profile_type=\"heap\"",
                      "heap", false, NULL, NULL, 1);
    assert_true(pd__burst_budget_ok(f.b[1], wall + 1000)); /* the budget is the job's */
    pd__burst_scraped(f.b[1], true, wall + 1000, wall + 1000, 600, true,
                      "job=\"app\",profile_type=\"heap\"", "heap", false, NULL, NULL, 1);
    assert_false(pd__burst_budget_ok(f.b[0], wall + 2000));
    /* normal (not burst) scrapes do not count */
    pd__burst_scraped(f.b[2], true, wall + 2000, wall + 2000, 5000, false,
                      "job=\"app\",profile_type=\"heap\"", "heap", false, NULL, NULL, 1);
    assert_false(pd__burst_budget_ok(f.b[0], wall + 54999)); /* still minute 100 */
    assert_true(pd__burst_budget_ok(f.b[0], wall + 55000));  /* the next minute */
    assert_true(metric("profd_adaptive_burst_bytes_total", "job=\"app\"") == 1200);
    teardown_fixture(&f);
}

static void test_target_down(void **state)
{
    (void)state;
    fixture f;
    setup_fixture(&f, "      heap_limit: 10MiB\n");
    /* down outside any burst: no event */
    pd__burst_scraped(f.b[1], false, 500, 500, 0, false, "", "heap", true, "connection refused",
                      "x", 500);
    pd__burst_observe(f.b[0], 1000, 20 * MIB, 1000); /* limit: burst */
    pd__burst_scraped(f.b[0], true, 5000, 5000, 10, true, "job=\"app\",profile_type=\"heap\"",
                      "heap", false, NULL, NULL, 5000);
    pd__burst_scraped(f.b[0], true, 5200, 5200, 10, true, "job=\"app\",profile_type=\"goroutine\"",
                      "goroutine", false, NULL, NULL, 5200);
    /* an HTTP 500 is an answer: not the end */
    pd__burst_scraped(f.b[0], false, 5900, 5900, 0, true, "", "heap", false, "error", "HTTP 500",
                      5900);
    pd__burst_scraped(f.b[0], false, 6000, 6000, 0, true, "", "heap", true, "connection refused",
                      "Failed to connect", 6000);
    /* once per down transition */
    pd__burst_scraped(f.b[0], false, 6100, 6100, 0, false, "", "goroutine", true,
                      "connection refused", "Failed to connect", 6100);
    assert_int_equal(pd__burst_interval(f.b[0]), 0);
    assert_true(metric("profd_adaptive_bursts_ended_total", "job=\"app\",reason=\"target_down\"") ==
                1);
    json_t *ev = events(&f, "target_down");
    assert_int_equal(json_array_size(ev), 1);
    json_t *e = json_array_get(ev, 0);
    assert_int_equal(json_integer_value(json_object_get(e, "time")), 6000);
    assert_int_equal(json_integer_value(json_object_get(e, "lastProfile")), 5200);
    assert_string_equal(json_string_value(json_object_get(e, "lastProfileType")), "goroutine");
    assert_string_equal(json_string_value(json_object_get(e, "reason")), "connection refused");
    assert_string_equal(json_string_value(json_object_get(e, "message")),
                        "last profile 0.8 s before a:1 went down (connection refused)");
    assert_string_equal(json_string_value(json_object_get(e, "error")), "Failed to connect");
    json_decref(ev);
    /* back up, then down just after a burst (within 2 x 15 s): recorded again */
    pd__burst_scraped(f.b[0], true, 7000, 7000, 10, false, "", "heap", false, NULL, NULL, 7000);
    pd__burst_scraped(f.b[0], false, 20000, 20000, 0, false, "", "heap", true, "timeout", "t",
                      20000);
    ev = events(&f, "target_down");
    assert_int_equal(json_array_size(ev), 2);
    json_decref(ev);
    /* issue 28: a CPU scrape (9 s) in flight when the target dies started
     * before the last stored profile; the event is dated when that attempt
     * ended, so "last profile N s before" is never negative */
    pd__burst_observe(f.b[0], 21000, 20 * MIB, 21000); /* a new burst */
    pd__burst_scraped(f.b[0], true, 30000, 30000, 10, true, "", "heap", false, NULL, NULL, 30000);
    pd__burst_scraped(f.b[0], false, 25000, 34000, 0, true, "", "cpu", true, "connection reset",
                      "Recv failure", 34000);
    ev = events(&f, "target_down");
    assert_int_equal(json_array_size(ev), 3);
    e = json_array_get(ev, 2);
    assert_int_equal(json_integer_value(json_object_get(e, "time")), 34000);
    assert_int_equal(json_integer_value(json_object_get(e, "lastProfile")), 30000);
    assert_string_equal(json_string_value(json_object_get(e, "message")),
                        "last profile 4.0 s before a:1 went down (connection reset)");
    json_decref(ev);
    /* a wall clock stepped back between the profile and the failure: the
     * event is not dated before the profile */
    pd__burst_scraped(f.b[0], true, 40000, 40000, 10, false, "", "heap", false, NULL, NULL, 40000);
    pd__burst_observe(f.b[0], 40000, 20 * MIB, 40000);
    pd__burst_scraped(f.b[0], false, 39000, 39500, 0, true, "", "heap", true, "connection refused",
                      "x", 40100);
    ev = events(&f, "target_down");
    assert_int_equal(json_array_size(ev), 4);
    e = json_array_get(ev, 3);
    assert_int_equal(json_integer_value(json_object_get(e, "time")), 40000);
    assert_string_equal(json_string_value(json_object_get(e, "message")),
                        "last profile 0.0 s before a:1 went down (connection refused)");
    json_decref(ev);
    /* a window of time */
    pd_buf b;
    pd_buf_init(&b, 0);
    assert_int_equal(pd__adaptive_events_json(f.a, 10000, 30000, "target_down", &b), 0);
    assert_non_null(strstr(b.data, "\"time\":20000"));
    assert_null(strstr(b.data, "\"time\":6000"));
    pd_buf_release(&b);
    teardown_fixture(&f);
}

static void test_reload_ends(void **state)
{
    (void)state;
    fixture f;
    setup_fixture(&f, "      heap_limit: 10MiB\n");
    pd__burst_observe(f.b[2], 1000, 20 * MIB, 1000);
    assert_int_equal(pd__burst_interval(f.b[2]), 1000);
    pd__adaptive_begin_apply(f.a); /* c:1 left the configuration */
    pd_labels ls;
    pd_labels_init(&ls);
    assert_int_equal(pd_labels_set(&ls, "job", "app", NULL), 0);
    assert_int_equal(pd_labels_set(&ls, "instance", "a:1", NULL), 0);
    assert_ptr_equal(pd__adaptive_ref(f.a, &f.cfg.jobs[0], &ls), f.b[0]);
    pd_labels_release(&ls);
    pd__adaptive_end_apply(f.a);
    assert_true(metric("profd_adaptive_bursts_ended_total", "job=\"app\",reason=\"reload\"") == 1);
    assert_true(metric("profd_adaptive_targets_in_burst", "job=\"app\"") == 0);
    teardown_fixture(&f);
}

static void test_heap_inuse(void **state)
{
    (void)state;
    pd_profile p;
    memset(&p, 0, sizeof p);
    const char *strings[] = {"", "alloc_space", "bytes", "inuse_space"};
    p.string_table = strings;
    p.n_string = 4;
    pd_pprof_value_type st[2] = {{1, 2}, {3, 2}};
    p.sample_type = st;
    p.n_sample_type = 2;
    int64_t v1[2] = {100, 7}, v2[2] = {5, 30};
    pd_pprof_sample s[2] = {{NULL, 0, v1, 2, NULL, 0}, {NULL, 0, v2, 2, NULL, 0}};
    p.sample = s;
    p.n_sample = 2;
    assert_int_equal(pd__adaptive_heap_inuse(&p), 37);
    p.n_sample_type = 1; /* no inuse_space */
    assert_int_equal(pd__adaptive_heap_inuse(&p), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_defaults), cmocka_unit_test(test_config_all_keys),
        cmocka_unit_test(test_config_errors),   cmocka_unit_test(test_growth_max_targets_calm),
        cmocka_unit_test(test_limit),           cmocka_unit_test(test_alerts),
        cmocka_unit_test(test_budget),          cmocka_unit_test(test_target_down),
        cmocka_unit_test(test_reload_ends),     cmocka_unit_test(test_heap_inuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
