/* Unit tests of src/ingest/folded.c: collapsed stacks and Pyroscope's lines
 * format, their sample types, tolerance (CRLF, blanks, spaces), errors with
 * line numbers, and caps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include "../pd_test.h"

#include "ingest_test.h"

static void conv(const char *text, const pd_ingest_opts *o, pd_profile *p)
{
    pd_err err = {{0}};
    int rc = pd_ingest_folded(text, strlen(text), false, o, p, &err);
    if (rc)
        fail_msg("folded: %d %s", rc, err.msg);
}

static void expect_error(const char *text, size_t len, bool lines, const pd_ingest_opts *o,
                         int code, const char *msg_prefix)
{
    pd_profile p;
    pd_err err = {{0}};
    int rc = pd_ingest_folded(text, len, lines, o, &p, &err);
    if (rc != code)
        fail_msg("want %d, got %d (%s)", code, rc, err.msg);
    if (strncmp(err.msg, msg_prefix, strlen(msg_prefix)))
        fail_msg("want message starting '%s', got '%s'", msg_prefix, err.msg);
}

static void test_cpu_default_rate(void **state)
{
    (void)state;
    pd_profile p;
    conv("main;parse;lex 3\nmain;parse 2\nmain;eval 5\n", NULL, &p);
    assert_int_equal(p.n_sample_type, 2);
    assert_string_equal(pd_profile_str(&p, p.sample_type[0].type), "samples");
    assert_string_equal(pd_profile_str(&p, p.sample_type[0].unit), "count");
    assert_string_equal(pd_profile_str(&p, p.sample_type[1].type), "cpu");
    assert_string_equal(pd_profile_str(&p, p.sample_type[1].unit), "nanoseconds");
    assert_string_equal(pd_profile_str(&p, p.period_type.type), "cpu");
    /* Pyroscope's default 100 Hz: 10 ms per sample */
    assert_int_equal(p.period, 10000000);
    assert_int_equal(p.n_sample, 3);
    const pd_pprof_sample *s = find_sample(&p, "main;parse;lex");
    assert_non_null(s);
    assert_int_equal(s->value[0], 3);
    assert_int_equal(s->value[1], 30000000);
    /* leaf first in pprof */
    const pd_pprof_location *leaf = pd_profile_location(&p, s->location_id[0]);
    assert_string_equal(
        pd_profile_str(&p, pd_profile_function(&p, leaf->line[0].function_id)->name), "lex");
    assert_int_equal(leaf->mapping_id, 0);
    /* one function and one location per distinct frame name */
    assert_int_equal(p.n_function, 4);
    assert_int_equal(p.n_location, 4);
    int64_t tot[2];
    pd_profile_totals(&p, tot);
    assert_int_equal(tot[0], 10);
    assert_int_equal(tot[1], 100000000);
    pd_err why = {{0}};
    if (!roundtrip_equal(&p, &why))
        fail_msg("roundtrip: %s", why.msg);
    pd_profile_release(&p);
}

static void test_sample_rate_and_types(void **state)
{
    (void)state;
    pd_profile p;
    pd_ingest_opts o = {.sample_rate_hz = 999, .type = "wall"};
    conv("a;b 7\n", &o, &p);
    assert_string_equal(pd_profile_str(&p, p.sample_type[1].type), "wall");
    assert_int_equal(p.period, 1000000000 / 999);
    assert_int_equal(p.sample[0].value[1], 7 * (1000000000 / 999));
    pd_profile_release(&p);

    pd_ingest_opts heap = {.type = "inuse_space", .unit = "bytes", .time_nanos = 42};
    conv("main;alloc 4096\nmain;alloc 1024\n", &heap, &p);
    assert_int_equal(p.n_sample_type, 1);
    assert_string_equal(pd_profile_str(&p, p.sample_type[0].type), "inuse_space");
    assert_string_equal(pd_profile_str(&p, p.sample_type[0].unit), "bytes");
    assert_int_equal(p.n_sample, 1); /* equal stacks merge */
    assert_int_equal(p.sample[0].value[0], 5120);
    assert_int_equal(p.time_nanos, 42);
    pd_profile_release(&p);
}

static void test_tolerance(void **state)
{
    (void)state;
    pd_profile p;
    /* CRLF, trailing spaces and tabs, blank and space-only lines, leading
     * blanks, a frame with spaces and parentheses (C++), no final newline */
    conv("a;b 1 \r\n\r\n   \n\ta;c  2\t\r\nmain;std::vector<int>::push_back(int const&) const 4",
         NULL, &p);
    assert_int_equal(p.n_sample, 3);
    assert_int_equal(find_sample(&p, "a;b")->value[0], 1);
    assert_int_equal(find_sample(&p, "a;c")->value[0], 2);
    assert_int_equal(
        find_sample(&p, "main;std::vector<int>::push_back(int const&) const")->value[0], 4);
    pd_profile_release(&p);

    /* count 0 adds nothing; an empty input is an empty, valid profile */
    conv("a;b 0\n", NULL, &p);
    assert_int_equal(p.n_sample, 0);
    pd_profile_release(&p);
    conv("", NULL, &p);
    assert_int_equal(p.n_sample, 0);
    assert_int_equal(p.n_sample_type, 2);
    pd_profile_release(&p);
}

static void test_lines_format(void **state)
{
    (void)state;
    pd_profile p;
    pd_err err = {{0}};
    const char *t = "main;work\r\nmain;work\n\nmain;idle \nmain;work\n";
    PD_ASSERT_OK(pd_ingest_folded(t, strlen(t), true, NULL, &p, &err), &err);
    assert_int_equal(p.n_sample, 2);
    assert_int_equal(find_sample(&p, "main;work")->value[0], 3);
    assert_int_equal(find_sample(&p, "main;idle")->value[0], 1);
    pd_profile_release(&p);
    /* the dispatcher reaches the same code */
    PD_ASSERT_OK(pd_ingest_convert(PD_INGEST_LINES, t, strlen(t), NULL, &p, &err), &err);
    assert_int_equal(p.n_sample, 2);
    pd_profile_release(&p);
}

static void test_malformed(void **state)
{
    (void)state;
    const char *t;
    t = "a;b 1\nc;d\n";
    expect_error(t, strlen(t), false, NULL, PD_EPARSE, "line 2: no count");
    t = "a 1\n\nb -3\n";
    expect_error(t, strlen(t), false, NULL, PD_EPARSE, "line 3: count '-3' is negative");
    t = "a 1\na 99999999999999999999\n";
    expect_error(t, strlen(t), false, NULL, PD_EPARSE,
                 "line 2: count '99999999999999999999' overflows int64");
    t = "x;y 12a\n";
    expect_error(t, strlen(t), false, NULL, PD_EPARSE, "line 1: count '12a' is not a whole number");
    t = "x;y 1.5\n";
    expect_error(t, strlen(t), false, NULL, PD_EPARSE, "line 1: count '1.5' is not");
    t = "ok 1\na;;b 1\n";
    expect_error(t, strlen(t), false, NULL, PD_EPARSE, "line 2: frame 2 is empty");
    t = "ok 1\nok 1\n;a 1\n";
    expect_error(t, strlen(t), false, NULL, PD_EPARSE, "line 3: frame 1 is empty");
    t = "a;b; 1\n";
    expect_error(t, strlen(t), false, NULL, PD_EPARSE, "line 1: frame 3 is empty");
    expect_error("a 1\nb\0c 2\n", 10, false, NULL, PD_EPARSE, "line 2: NUL byte");
    /* count times the period overflows int64 at 1 Hz */
    pd_ingest_opts slow = {.sample_rate_hz = 1};
    t = "a 9223372036854775807\n";
    expect_error(t, strlen(t), false, &slow, PD_EPARSE, "line 1: count 9223372036854775807 times");
    /* merging two lines whose counts sum past int64 */
    pd_ingest_opts plain = {.type = "x"};
    t = "a 9223372036854775807\na 1\n";
    expect_error(t, strlen(t), false, &plain, PD_EINVAL, "line 2: ");
    pd_ingest_opts bad_rate = {.sample_rate_hz = -5};
    expect_error("a 1\n", 4, false, &bad_rate, PD_EINVAL, "sample rate -5 Hz");
}

static void test_caps(void **state)
{
    (void)state;
    const char *t;
    pd_ingest_opts o = {.lim = {.max_line_bytes = 10}};
    t = "a;b 1\na;b;c;d;e 1\n"; /* line 2 is 11 bytes */
    expect_error(t, strlen(t), false, &o, PD_ETOOBIG, "line 2: 11 bytes exceed max_line_bytes=10");
    o = (pd_ingest_opts){.lim = {.max_lines = 2}};
    t = "a 1\nb 1\nc 1\n";
    expect_error(t, strlen(t), false, &o, PD_ETOOBIG, "line 3: more than max_lines=2");
    o = (pd_ingest_opts){.lim = {.max_stack_depth = 3}};
    t = "a;b;c 1\na;b;c;d 1\n";
    expect_error(t, strlen(t), false, &o, PD_ETOOBIG,
                 "line 2: stack deeper than max_stack_depth=3");
    o = (pd_ingest_opts){.lim = {.max_frames = 3}};
    t = "a;b 1\nb;c 1\nc;d 1\n";
    expect_error(t, strlen(t), false, &o, PD_ETOOBIG, "line 3: more than max_frames=3 distinct");
    o = (pd_ingest_opts){.lim = {.max_samples = 2}};
    t = "a 1\nb 1\na 5\nc 1\n";
    expect_error(t, strlen(t), false, &o, PD_ETOOBIG, "line 4: more than max_samples=2");
    o = (pd_ingest_opts){.lim = {.max_input_bytes = 5}};
    t = "abc 1\n";
    expect_error(t, strlen(t), false, &o, PD_ETOOBIG, "input of 6 bytes exceeds max_input_bytes=5");

    /* at the caps exactly, it works */
    pd_profile p;
    pd_err err = {{0}};
    o = (pd_ingest_opts){.lim = {.max_line_bytes = 9,
                                 .max_lines = 3,
                                 .max_stack_depth = 4,
                                 .max_frames = 4,
                                 .max_samples = 2}};
    t = "a;b;c;d 1\nd;c 1\na;b;c;d 1";
    PD_ASSERT_OK(pd_ingest_folded(t, strlen(t), false, &o, &p, &err), &err);
    assert_int_equal(find_sample(&p, "a;b;c;d")->value[0], 2);
    pd_profile_release(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_default_rate), cmocka_unit_test(test_sample_rate_and_types),
        cmocka_unit_test(test_tolerance),        cmocka_unit_test(test_lines_format),
        cmocka_unit_test(test_malformed),        cmocka_unit_test(test_caps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
