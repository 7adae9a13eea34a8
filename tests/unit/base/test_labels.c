/* Unit tests of src/base/labels.c: label sets and PromQL matchers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "../pd_test.h"

#include "base/labels.h"

static void test_name_valid(void **state)
{
    (void)state;
    assert_true(pd_label_name_valid("job"));
    assert_true(pd_label_name_valid("_x"));
    assert_true(pd_label_name_valid("__name__"));
    assert_true(pd_label_name_valid("a1_B2"));
    assert_false(pd_label_name_valid(""));
    assert_false(pd_label_name_valid(NULL));
    /* Prometheus 3: any UTF-8 name */
    assert_true(pd_label_name_valid("1abc"));
    assert_true(pd_label_name_valid("a-b"));
    assert_true(pd_label_name_valid("otel.scope.name"));
    assert_true(pd_label_name_valid("h\xc3\xa9"));
    assert_true(pd_label_name_valid("a b"));
    assert_true(pd_label_name_valid("\xf0\x9f\x98\x80"));
    assert_false(pd_label_name_valid("a\tb"));
    assert_false(pd_label_name_valid("a\x7f"));
    assert_false(pd_label_name_valid("\xff"));
    assert_false(pd_label_name_valid("\xc3"));         /* truncated */
    assert_false(pd_label_name_valid("\xc0\xaf"));     /* overlong */
    assert_false(pd_label_name_valid("\xed\xa0\x80")); /* surrogate */
    assert_true(pd_label_name_classic("a1_B2"));
    assert_false(pd_label_name_classic("1abc"));
    assert_false(pd_label_name_classic("a.b"));
    char longname[PD_LABEL_MAX_NAME + 2];
    memset(longname, 'a', sizeof longname);
    longname[PD_LABEL_MAX_NAME] = '\0';
    assert_true(pd_label_name_valid(longname));
    longname[PD_LABEL_MAX_NAME] = 'a';
    longname[PD_LABEL_MAX_NAME + 1] = '\0';
    assert_false(pd_label_name_valid(longname));
}

static void test_set_sorted_replace_remove(void **state)
{
    (void)state;
    pd_labels ls;
    pd_err err = {{0}};
    pd_labels_init(&ls);
    PD_ASSERT_OK(pd_labels_set(&ls, "job", "api", &err), &err);
    PD_ASSERT_OK(pd_labels_set(&ls, "__name__", "heap", &err), &err);
    PD_ASSERT_OK(pd_labels_set(&ls, "instance", "a:1", &err), &err);
    assert_int_equal(ls.n, 3);
    assert_string_equal(ls.v[0].name, "__name__");
    assert_string_equal(ls.v[1].name, "instance");
    assert_string_equal(ls.v[2].name, "job");
    PD_ASSERT_OK(pd_labels_set(&ls, "job", "web", &err), &err);
    assert_int_equal(ls.n, 3);
    assert_string_equal(pd_labels_get(&ls, "job"), "web");
    assert_null(pd_labels_get(&ls, "zone"));
    assert_int_equal(pd_labels_set(&ls, "instance", "", &err), 0); /* empty removes */
    assert_int_equal(ls.n, 2);
    assert_null(pd_labels_get(&ls, "instance"));
    assert_int_equal(pd_labels_set(&ls, "bad\tname", "x", &err), PD_EINVAL);
    assert_true(err.msg[0] != '\0');
    char *big = malloc(PD_LABEL_MAX_VALUE + 2);
    memset(big, 'v', PD_LABEL_MAX_VALUE + 1);
    big[PD_LABEL_MAX_VALUE + 1] = '\0';
    assert_int_equal(pd_labels_set(&ls, "big", big, &err), PD_EINVAL);
    big[PD_LABEL_MAX_VALUE] = '\0';
    PD_ASSERT_OK(pd_labels_set(&ls, "big", big, &err), &err);
    free(big);
    pd_labels_release(&ls);
}

static void test_count_cap(void **state)
{
    (void)state;
    pd_labels ls;
    pd_err err = {{0}};
    char name[16];
    pd_labels_init(&ls);
    for (int i = 0; i < PD_LABEL_MAX_COUNT; i++) {
        snprintf(name, sizeof name, "l%03d", i);
        PD_ASSERT_OK(pd_labels_set(&ls, name, "v", &err), &err);
    }
    assert_int_equal(pd_labels_set(&ls, "one_more", "v", &err), PD_EINVAL);
    assert_int_equal(ls.n, PD_LABEL_MAX_COUNT);
    assert_int_equal(pd_labels_set(&ls, "l000", "replaced", &err), 0); /* replacing is fine */
    pd_labels_release(&ls);
}

static void test_copy_cmp_hash_format(void **state)
{
    (void)state;
    pd_labels a, b, c;
    pd_err err = {{0}};
    pd_labels_init(&a);
    pd_labels_init(&b);
    pd_labels_set(&a, "__name__", "heap", &err);
    pd_labels_set(&a, "job", "api", &err);
    pd_labels_set(&a, "instance", "a:1", &err);
    /* same set, other insertion order */
    pd_labels_set(&b, "instance", "a:1", &err);
    pd_labels_set(&b, "job", "api", &err);
    pd_labels_set(&b, "__name__", "heap", &err);
    assert_int_equal(pd_labels_cmp(&a, &b), 0);
    assert_true(pd_labels_hash(&a) == pd_labels_hash(&b));
    assert_int_equal(pd_labels_copy(&c, &a), 0);
    assert_int_equal(pd_labels_cmp(&a, &c), 0);
    assert_ptr_not_equal(c.v[0].name, a.v[0].name);
    pd_labels_set(&c, "job", "apx", &err);
    assert_true(pd_labels_cmp(&a, &c) < 0);
    assert_true(pd_labels_cmp(&c, &a) > 0);
    assert_true(pd_labels_hash(&a) != pd_labels_hash(&c));
    /* name/value boundaries matter to the hash: {ab="c"} vs {a="bc"} */
    pd_labels x, y;
    pd_labels_init(&x);
    pd_labels_init(&y);
    pd_labels_set(&x, "ab", "c", &err);
    pd_labels_set(&y, "a", "bc", &err);
    assert_true(pd_labels_hash(&x) != pd_labels_hash(&y));
    assert_true(pd_labels_cmp(&x, &y) != 0);

    pd_buf out;
    pd_buf_init(&out, 0);
    pd_labels_set(&a, "path", "C:\\dir \"q\"", &err);
    assert_int_equal(pd_labels_format(&a, &out), 0);
    assert_string_equal(out.data,
                        "heap{instance=\"a:1\", job=\"api\", path=\"C:\\\\dir \\\"q\\\"\"}");
    pd_buf_release(&out);
    pd_labels_release(&a);
    pd_labels_release(&b);
    pd_labels_release(&c);
    pd_labels_release(&x);
    pd_labels_release(&y);
}

/* Regression (fuzz_selector): a __name__ that is not a PromQL metric name
 * ([a-zA-Z_:][a-zA-Z0-9_:]*) was written before the braces as is, giving a
 * selector that does not parse ("h\xe8ap{...}", "a-b{...}", "1x{...}"); it
 * must become the matcher __name__="..." inside the braces. */
static void test_format_name_not_metric_name(void **state)
{
    (void)state;
    pd_labels a;
    pd_buf out;
    pd_labels_init(&a);
    pd_buf_init(&out, 0);
    assert_int_equal(pd_labels_set(&a, "__name__", "a-b", NULL), 0);
    assert_int_equal(pd_labels_set(&a, "job", "api", NULL), 0);
    assert_int_equal(pd_labels_format(&a, &out), 0);
    assert_string_equal(out.data, "{\"a-b\", job=\"api\"}");
    pd_buf_reset(&out);
    assert_int_equal(pd_labels_set(&a, "__name__", "1x", NULL), 0);
    assert_int_equal(pd_labels_format(&a, &out), 0);
    assert_string_equal(out.data, "{\"1x\", job=\"api\"}");
    pd_buf_reset(&out);
    /* (control bytes such as \n are refused by pd_labels_set: issue 19) */
    assert_int_equal(pd_labels_set(&a, "__name__", "q\"\\", NULL), 0);
    assert_int_equal(pd_labels_format(&a, &out), 0);
    assert_string_equal(out.data, "{\"q\\\"\\\\\", job=\"api\"}");
    pd_buf_reset(&out);
    /* valid metric names (colons and digits after the first) stay outside */
    assert_int_equal(pd_labels_set(&a, "__name__", ":a1:b_", NULL), 0);
    assert_int_equal(pd_labels_format(&a, &out), 0);
    assert_string_equal(out.data, ":a1:b_{job=\"api\"}");
    pd_buf_reset(&out);
    /* __name__ alone */
    assert_int_equal(pd_labels_set(&a, "job", "", NULL), 0);
    assert_int_equal(pd_labels_set(&a, "__name__", "x.y", NULL), 0);
    assert_int_equal(pd_labels_format(&a, &out), 0);
    assert_string_equal(out.data, "{\"x.y\"}");
    pd_buf_reset(&out);
    /* UTF-8 label names are quoted */
    assert_int_equal(pd_labels_set(&a, "otel.scope.name", "s", NULL), 0);
    assert_int_equal(pd_labels_set(&a, "1abc", "x\"", NULL), 0);
    assert_int_equal(pd_labels_format(&a, &out), 0);
    assert_string_equal(out.data, "{\"x.y\", \"1abc\"=\"x\\\"\", \"otel.scope.name\"=\"s\"}");
    pd_buf_release(&out);
    pd_labels_release(&a);
}

static bool m1(pd_match_type t, const char *re, const char *value)
{
    pd_matcher m;
    pd_err err = {{0}};
    if (pd_matcher_init(&m, t, "l", re, &err))
        fail_msg("matcher %s: %s", re, err.msg);
    bool r = pd_matcher_matches(&m, value);
    pd_matcher_release(&m);
    return r;
}

static void test_matchers_anchored(void **state)
{
    (void)state;
    assert_true(m1(PD_MATCH_EQ, "api", "api"));
    assert_false(m1(PD_MATCH_EQ, "api", "api2"));
    assert_true(m1(PD_MATCH_NEQ, "api", "web"));
    assert_false(m1(PD_MATCH_NEQ, "api", "api"));
    /* regexes are fully anchored, as Prometheus */
    assert_true(m1(PD_MATCH_RE, "api", "api"));
    assert_false(m1(PD_MATCH_RE, "ap", "api"));
    assert_false(m1(PD_MATCH_RE, "pi", "api"));
    assert_true(m1(PD_MATCH_RE, "a.*", "api"));
    assert_true(m1(PD_MATCH_RE, "10\\..*", "10.0.0.1:80"));
    assert_false(m1(PD_MATCH_RE, "10\\..*", "110.0.0.1"));
    /* alternation is anchored as a whole: ^(?:a|b)$, not ^a|b$ */
    assert_false(m1(PD_MATCH_RE, "a|b", "ab"));
    assert_false(m1(PD_MATCH_RE, "a|b", "xb"));
    assert_false(m1(PD_MATCH_RE, "a|b", "ax"));
    assert_true(m1(PD_MATCH_RE, "a|b", "b"));
    assert_true(m1(PD_MATCH_NRE, "a|b", "ab"));
    assert_false(m1(PD_MATCH_NRE, "a.*", "api"));
    /* absent labels are "" */
    assert_true(m1(PD_MATCH_EQ, "", NULL));
    assert_true(m1(PD_MATCH_EQ, "", ""));
    assert_false(m1(PD_MATCH_EQ, "x", NULL));
    assert_true(m1(PD_MATCH_RE, ".*", NULL));
    assert_false(m1(PD_MATCH_RE, ".+", NULL));
    assert_true(m1(PD_MATCH_NEQ, "x", NULL));
    /* a multi-line value does not match via $ before a newline */
    assert_false(m1(PD_MATCH_RE, "a", "a\n"));

    pd_matcher m;
    pd_err err = {{0}};
    assert_int_equal(pd_matcher_init(&m, PD_MATCH_RE, "l", "a(b", &err), PD_EINVAL);
    assert_non_null(strstr(err.msg, "a(b"));
    assert_string_equal(pd_match_type_str(PD_MATCH_EQ), "=");
    assert_string_equal(pd_match_type_str(PD_MATCH_NEQ), "!=");
    assert_string_equal(pd_match_type_str(PD_MATCH_RE), "=~");
    assert_string_equal(pd_match_type_str(PD_MATCH_NRE), "!~");
}

static void test_matchers_match_set(void **state)
{
    (void)state;
    pd_labels ls;
    pd_err err = {{0}};
    pd_labels_init(&ls);
    pd_labels_set(&ls, "__name__", "heap", &err);
    pd_labels_set(&ls, "job", "api", &err);
    pd_matcher ms[3];
    PD_ASSERT_OK(pd_matcher_init(&ms[0], PD_MATCH_EQ, "__name__", "heap", &err), &err);
    PD_ASSERT_OK(pd_matcher_init(&ms[1], PD_MATCH_RE, "job", "api|web", &err), &err);
    PD_ASSERT_OK(pd_matcher_init(&ms[2], PD_MATCH_EQ, "zone", "", &err), &err);
    assert_true(pd_matchers_match(ms, 3, &ls));
    pd_labels_set(&ls, "zone", "eu", &err);
    assert_false(pd_matchers_match(ms, 3, &ls));
    assert_true(pd_matchers_match(ms, 2, &ls));
    pd_labels_set(&ls, "job", "db", &err);
    assert_false(pd_matchers_match(ms, 2, &ls));
    for (int i = 0; i < 3; i++)
        pd_matcher_release(&ms[i]);
    pd_labels_release(&ls);
}

/* Issue 32: a value holds newlines, tabs and carriage returns as Prometheus
 * (relabel_test.go's "foo\nbar"); invalid UTF-8 and the other control
 * bytes (issue 19) are refused. */
static void test_value_control_bytes_refused(void **state)
{
    (void)state;
    pd_labels ls;
    pd_labels_init(&ls);
    pd_err err = {{0}};
    const char *bad[] = {"\xff", "a\xc3", "\xed\xa0\x80", "\xc0\xaf"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(pd_labels_set(&ls, "service", bad[i], &err), PD_EINVAL);
        assert_non_null(strstr(err.msg, "not valid UTF-8"));
    }
    assert_int_equal(ls.n, 0);
    /* the other control bytes stay refused (issue 19: logs, terminals) */
    const char *ctl[] = {"a\x01b", "del\x7f", "\x1b[31m"};
    for (size_t i = 0; i < sizeof ctl / sizeof *ctl; i++) {
        assert_int_equal(pd_labels_set(&ls, "service", ctl[i], &err), PD_EINVAL);
        assert_non_null(strstr(err.msg, "control byte"));
    }
    const char *ok[] = {"tab\there", "line1\nline2", "cr\r\n", "caf\xc3\xa9 \"1.0\""};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        PD_ASSERT_OK(pd_labels_set(&ls, "service", ok[i], &err), &err);
        assert_string_equal(pd_labels_get(&ls, "service"), ok[i]);
    }
    /* a newline round-trips through the selector text */
    pd_buf out;
    pd_buf_init(&out, 0);
    PD_ASSERT_OK(pd_labels_set(&ls, "service", "line1\nline2", &err), &err);
    assert_int_equal(pd_labels_format(&ls, &out), 0);
    assert_string_equal(out.data, "{service=\"line1\\nline2\"}");
    pd_buf_release(&out);
    pd_labels_release(&ls);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_name_valid),
        cmocka_unit_test(test_set_sorted_replace_remove),
        cmocka_unit_test(test_count_cap),
        cmocka_unit_test(test_copy_cmp_hash_format),
        cmocka_unit_test(test_format_name_not_metric_name),
        cmocka_unit_test(test_matchers_anchored),
        cmocka_unit_test(test_matchers_match_set),
        cmocka_unit_test(test_value_control_bytes_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
