/* Unit tests of src/query/selector.c: the PromQL series-selector parser.
 * Expected matchers and error positions are worked out by hand from the
 * PromQL grammar (character positions are 1-based and count code points). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "../pd_test.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/query.h"

typedef struct exp_m {
    const char *name;
    pd_match_type type;
    const char *value;
} exp_m;

typedef struct valid_case {
    const char *sel;
    size_t n;
    exp_m m[5];
} valid_case;

static const valid_case VALID[] = {
    /* Prometheus 3 (parse_test.go): several metric names inside the braces
     * are matchers like any other (they match nothing together) */
    {"{\"a\", \"b\"}", 2, {{"__name__", PD_MATCH_EQ, "a"}, {"__name__", PD_MATCH_EQ, "b"}}},
    {"{\"a\", __name__=\"b\"}",
     2,
     {{"__name__", PD_MATCH_EQ, "a"}, {"__name__", PD_MATCH_EQ, "b"}}},
    {"{__name__=\"a\", __name__=\"b\"}",
     2,
     {{"__name__", PD_MATCH_EQ, "a"}, {"__name__", PD_MATCH_EQ, "b"}}},
    {"heap", 1, {{"__name__", PD_MATCH_EQ, "heap"}}},
    {"heap{job=\"api\"}", 2, {{"__name__", PD_MATCH_EQ, "heap"}, {"job", PD_MATCH_EQ, "api"}}},
    {"{__name__=\"heap\", instance=~\"10\\\\..*\"}",
     2,
     {{"__name__", PD_MATCH_EQ, "heap"}, {"instance", PD_MATCH_RE, "10\\..*"}}},
    {"  heap  {  job = \"api\" ,  }  ",
     2,
     {{"__name__", PD_MATCH_EQ, "heap"}, {"job", PD_MATCH_EQ, "api"}}},
    {"\theap{\n job\n=\r\n'api'\n}\n",
     2,
     {{"__name__", PD_MATCH_EQ, "heap"}, {"job", PD_MATCH_EQ, "api"}}},
    {"cpu{job!=\"a\",x=~'b.*',y!~`c\\d\\n`}",
     4,
     {{"__name__", PD_MATCH_EQ, "cpu"},
      {"job", PD_MATCH_NEQ, "a"},
      {"x", PD_MATCH_RE, "b.*"},
      {"y", PD_MATCH_NRE, "c\\d\\n"}}},
    /* Go escapes: \n \t \\ \" \x41 \u00e9 \101 (octal A) \U0001F600 \a \v */
    {"a{x=\"\\n\\t\\\\\\\"\\x41\\u00e9\\101\\U0001F600\\a\\v\"}",
     2,
     {{"__name__", PD_MATCH_EQ, "a"},
      {"x", PD_MATCH_EQ,
       "\n\t\\\"A\xc3\xa9"
       "A\xf0\x9f\x98\x80\a\v"}}},
    {"a{x='it\\'s'}", 2, {{"__name__", PD_MATCH_EQ, "a"}, {"x", PD_MATCH_EQ, "it's"}}},
    /* a raw string keeps backslashes and may span lines */
    {"a{x=`1\\n\n2`}", 2, {{"__name__", PD_MATCH_EQ, "a"}, {"x", PD_MATCH_EQ, "1\\n\n2"}}},
    {"a:b_c:d1{}", 1, {{"__name__", PD_MATCH_EQ, "a:b_c:d1"}}},
    {":x", 1, {{"__name__", PD_MATCH_EQ, ":x"}}},
    {"{job=\"api\"}", 1, {{"job", PD_MATCH_EQ, "api"}}},
    {"{job=\"x\",job!=\"y\"}", 2, {{"job", PD_MATCH_EQ, "x"}, {"job", PD_MATCH_NEQ, "y"}}},
    {"{_a1=~\"ap.+\", }", 1, {{"_a1", PD_MATCH_RE, "ap.+"}}},
    {"a{x=\"\xc3\xbc\"}", 2, {{"__name__", PD_MATCH_EQ, "a"}, {"x", PD_MATCH_EQ, "\xc3\xbc"}}},
    /* one non-empty matcher is enough */
    {"{job=~\".*\", x=\"y\"}", 2, {{"job", PD_MATCH_RE, ".*"}, {"x", PD_MATCH_EQ, "y"}}},
    {"{x!=\"\"}", 1, {{"x", PD_MATCH_NEQ, ""}}},
    /* keywords of PromQL are fine as label names */
    {"heap{on=\"1\",by=\"2\"}",
     3,
     {{"__name__", PD_MATCH_EQ, "heap"}, {"on", PD_MATCH_EQ, "1"}, {"by", PD_MATCH_EQ, "2"}}},
    /* Prometheus 3: quoted UTF-8 label names and the quoted metric name */
    {"{\"otel.scope.name\"=\"x\"}", 1, {{"otel.scope.name", PD_MATCH_EQ, "x"}}},
    {"{\"k8s.pod\"=\"web-1\"}", 1, {{"k8s.pod", PD_MATCH_EQ, "web-1"}}},
    {"{\"cpu\", job=\"a\"}", 2, {{"__name__", PD_MATCH_EQ, "cpu"}, {"job", PD_MATCH_EQ, "a"}}},
    {"{job=\"a\", \"process_cpu\"}",
     2,
     {{"job", PD_MATCH_EQ, "a"}, {"__name__", PD_MATCH_EQ, "process_cpu"}}},
    {"{ \"a-b.c\" , }", 1, {{"__name__", PD_MATCH_EQ, "a-b.c"}}},
    {"cpu{'1abc'!~\"x\", `h\xc3\xa9`=~\"y.*\"}",
     3,
     {{"__name__", PD_MATCH_EQ, "cpu"},
      {"1abc", PD_MATCH_NRE, "x"},
      {"h\xc3\xa9", PD_MATCH_RE, "y.*"}}},
    {"{\"a\\u002eb\"=\"1\"}", 1, {{"a.b", PD_MATCH_EQ, "1"}}},
};

static void test_valid(void **state)
{
    (void)state;
    for (size_t c = 0; c < sizeof VALID / sizeof VALID[0]; c++) {
        const valid_case *vc = &VALID[c];
        pd_matcher *ms = NULL;
        size_t n = 0;
        pd_err err = {{0}};
        int rc = pd_selector_parse(vc->sel, &ms, &n, &err);
        if (rc != 0)
            fail_msg("selector %s: rc %d: %s", vc->sel, rc, err.msg);
        if (n != vc->n)
            fail_msg("selector %s: %zu matchers, want %zu", vc->sel, n, vc->n);
        for (size_t i = 0; i < n; i++) {
            if (strcmp(ms[i].name, vc->m[i].name) || ms[i].type != vc->m[i].type ||
                strcmp(ms[i].value, vc->m[i].value))
                fail_msg("selector %s: matcher %zu is %s%s\"%s\", want %s%s\"%s\"", vc->sel, i,
                         ms[i].name, pd_match_type_str(ms[i].type), ms[i].value, vc->m[i].name,
                         pd_match_type_str(vc->m[i].type), vc->m[i].value);
        }
        pd_matchers_free(ms, n);
    }
}

typedef struct invalid_case {
    const char *sel;
    int rc;
    size_t at;        /* expected character, 0 = no position */
    const char *frag; /* expected fragment of the message */
} invalid_case;

static const invalid_case INVALID[] = {
    {"", PD_EPARSE, 1, "expected metric name"},
    {"   ", PD_EPARSE, 4, "expected metric name"},
    {"heap{", PD_EPARSE, 6, "expected label name, found end of input"},
    {"heap{job}", PD_EPARSE, 9, "expected label matching operator"},
    {"heap{job=}", PD_EPARSE, 10, "expected string literal"},
    {"heap{job==\"a\"}", PD_EPARSE, 10, "expected string literal"},
    {"heap{job=\"api}", PD_EPARSE, 10, "unterminated quoted string"},
    {"heap{job=\"a\nb\"}", PD_EPARSE, 10, "unterminated quoted string"},
    {"heap{job=`abc}", PD_EPARSE, 10, "unterminated raw string"},
    {"heap{job=\"a\" x=\"b\"}", PD_EPARSE, 14, "expected \",\" or \"}\""},
    {"heap{job=\"a\",,}", PD_EPARSE, 14, "expected label name"},
    {"heap{1job=\"a\"}", PD_EPARSE, 6, "expected label name"},
    {"heap{a:b=\"a\"}", PD_EPARSE, 7, "expected label matching operator"},
    {"heap x", PD_EPARSE, 6, "expected \"{\" or end of input"},
    {"heap{job=\"a\"} x", PD_EPARSE, 15, "expected end of input"},
    {"heap[5m]", PD_EPARSE, 5, "found \"[\""},
    {"1heap", PD_EPARSE, 1, "expected metric name"},
    {"heap{job=\"\\q\"}", PD_EPARSE, 11, "unknown escape sequence"},
    {"heap{job=\"\\'\"}", PD_EPARSE, 11, "unknown escape sequence"},
    {"heap{job='\\\"'}", PD_EPARSE, 11, "unknown escape sequence"},
    {"heap{job=\"\\x4\"}", PD_EPARSE, 11, "illegal character"},
    {"heap{job=\"\\uD800\"}", PD_EPARSE, 11, "invalid Unicode code point"},
    {"heap{job=\"\\U00110000\"}", PD_EPARSE, 11, "invalid Unicode code point"},
    {"heap{job=\"\\400\"}", PD_EPARSE, 11, "invalid Unicode code point"},
    {"heap{job=\"\\000\"}", PD_EPARSE, 11, "NUL"},
    {"heap{job=\"\\", PD_EPARSE, 11, "escape sequence not terminated"},
    {"heap{__name__=\"cpu\"}", PD_EPARSE, 6, "metric name must not be set twice"},
    {"heap{job=\"a\", __name__=~\"c.*\"}", PD_EPARSE, 15, "metric name must not be set twice"},
    /* positions count characters, not bytes: é is two bytes */
    {"{x=\"\xc3\xa9\" y}", PD_EPARSE, 8, "expected \",\" or \"}\""},
    {"\xc3\xa9{x=\"y\"}", PD_EPARSE, 1, "expected metric name"},
    /* Prometheus' rule: at least one matcher that does not match "" */
    {"{job=~\".*\"}", PD_EINVAL, 0, "at least one non-empty matcher"},
    {"{}", PD_EINVAL, 0, "at least one non-empty matcher"},
    {"{job=\"\"}", PD_EINVAL, 0, "at least one non-empty matcher"},
    {"{job!~\"x\", a=~\"b?\"}", PD_EINVAL, 0, "at least one non-empty matcher"},
    /* quoted forms (Prometheus 3) */
    {"cpu{\"heap\"}", PD_EPARSE, 5, "metric name must not be set twice"},
    /* Prometheus 3 (parse_test.go): invalid UTF-8 anywhere is refused */
    {"heap{a=\"\xff\"}", PD_EPARSE, 9, "invalid UTF-8 rune"},
    {"{\"\"=\"x\"}", PD_EPARSE, 2, "invalid label name"},
    {"{\"a\\tb\"=\"x\"}", PD_EPARSE, 2, "invalid label name"},
    {"{\"a\\xff\"=\"x\"}", PD_EPARSE, 2, "invalid label name"},
    {"{\"a\" \"b\"}", PD_EPARSE, 6, "expected label matching operator"},
    /* regex errors come from pd_matcher_init, positioned at the matcher */
    {"heap{job=~\"(\"}", PD_EINVAL, 6, "invalid regex"},
};

static void test_invalid(void **state)
{
    (void)state;
    for (size_t c = 0; c < sizeof INVALID / sizeof INVALID[0]; c++) {
        const invalid_case *ic = &INVALID[c];
        pd_matcher *ms = (pd_matcher *)1;
        size_t n = 99;
        pd_err err = {{0}};
        int rc = pd_selector_parse(ic->sel, &ms, &n, &err);
        if (rc != ic->rc)
            fail_msg("selector %s: rc %d, want %d (%s)", ic->sel, rc, ic->rc, err.msg);
        if (ms != NULL || n != 0)
            fail_msg("selector %s: out params not cleared on failure", ic->sel);
        if (ic->at) {
            char want[64];
            snprintf(want, sizeof want, "at character %zu:", ic->at);
            if (strncmp(err.msg, want, strlen(want)) != 0)
                fail_msg("selector %s: message \"%s\" does not start with \"%s\"", ic->sel, err.msg,
                         want);
        }
        if (!strstr(err.msg, ic->frag))
            fail_msg("selector %s: message \"%s\" lacks \"%s\"", ic->sel, err.msg, ic->frag);
    }
}

static void test_too_long(void **state)
{
    (void)state;
    size_t len = PD_SELECTOR_MAX_BYTES + 10;
    char *s = malloc(len + 1);
    assert_non_null(s);
    memset(s, 'a', len);
    s[len] = '\0';
    pd_matcher *ms;
    size_t n;
    pd_err err = {{0}};
    assert_int_equal(pd_selector_parse(s, &ms, &n, &err), PD_EPARSE);
    assert_non_null(strstr(err.msg, "limit"));
    free(s);
}

/* Regexes are fully anchored: job=~"ap" matches "ap" only, not "api". */
static void test_regex_anchoring(void **state)
{
    (void)state;
    pd_matcher *ms;
    size_t n;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_selector_parse("{job=~\"ap\"}", &ms, &n, &err), &err);
    assert_int_equal(n, 1);
    assert_true(pd_matcher_matches(&ms[0], "ap"));
    assert_false(pd_matcher_matches(&ms[0], "api"));
    assert_false(pd_matcher_matches(&ms[0], "xap"));
    pd_matchers_free(ms, n);

    PD_ASSERT_OK(pd_selector_parse("{x=\"y\", job!~\"ap\"}", &ms, &n, &err), &err);
    assert_int_equal(ms[1].type, PD_MATCH_NRE);
    assert_true(pd_matcher_matches(&ms[1], "api"));
    assert_false(pd_matcher_matches(&ms[1], "ap"));
    pd_matchers_free(ms, n);

    /* alternation is anchored as a whole: ^(?:a|b)$ */
    PD_ASSERT_OK(pd_selector_parse("{job=~\"a|bc\"}", &ms, &n, &err), &err);
    assert_true(pd_matcher_matches(&ms[0], "a"));
    assert_true(pd_matcher_matches(&ms[0], "bc"));
    assert_false(pd_matcher_matches(&ms[0], "ab"));
    assert_false(pd_matcher_matches(&ms[0], "abc"));
    pd_matchers_free(ms, n);

    /* the escaped dot of a PromQL string reaches PCRE2 as \. */
    PD_ASSERT_OK(pd_selector_parse("{instance=~\"10\\\\..*\"}", &ms, &n, &err), &err);
    assert_true(pd_matcher_matches(&ms[0], "10.0.0.1:80"));
    assert_false(pd_matcher_matches(&ms[0], "10x0"));
    pd_matchers_free(ms, n);
}

/* The metric name matcher behaves like the label __name__. */
static void test_metric_name_matches(void **state)
{
    (void)state;
    pd_matcher *ms;
    size_t n;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_selector_parse("heap{job=\"api\"}", &ms, &n, &err), &err);
    pd_labels ls;
    pd_labels_init(&ls);
    assert_int_equal(pd_labels_set(&ls, "__name__", "heap", NULL), 0);
    assert_int_equal(pd_labels_set(&ls, "job", "api", NULL), 0);
    assert_true(pd_matchers_match(ms, n, &ls));
    assert_int_equal(pd_labels_set(&ls, "__name__", "heap2", NULL), 0);
    assert_false(pd_matchers_match(ms, n, &ls));
    pd_labels_release(&ls);
    pd_matchers_free(ms, n);
    pd_matchers_free(NULL, 0);
}

/* Every truncation and many one-byte edits of the valid selectors: the parser
 * never crashes (ASan/UBSan run this too), returns 0 or a documented code,
 * and a parse error names a character inside the input (or just past it). */
static void test_mutations(void **state)
{
    (void)state;
    static const char subst[] = "{}=!~,\"'`\\ \nax:_0\x80\xc3";
    size_t runs = 0;
    for (size_t c = 0; c < sizeof VALID / sizeof VALID[0]; c++) {
        const char *sel = VALID[c].sel;
        size_t len = strlen(sel);
        char buf[256];
        assert_true(len < sizeof buf);
        for (size_t cut = 0; cut <= len; cut++) {
            for (size_t k = 0; k <= sizeof subst - 1; k++) {
                memcpy(buf, sel, len + 1);
                if (k < sizeof subst - 1) {
                    if (cut == len)
                        continue;
                    buf[cut] = subst[k]; /* substitute one byte */
                } else {
                    buf[cut] = '\0'; /* truncate */
                }
                pd_matcher *ms = NULL;
                size_t n = 0;
                pd_err err = {{0}};
                int rc = pd_selector_parse(buf, &ms, &n, &err);
                runs++;
                if (rc == 0) {
                    assert_true(n >= 1);
                    pd_matchers_free(ms, n);
                    continue;
                }
                if (rc != PD_EPARSE && rc != PD_EINVAL)
                    fail_msg("selector %s: unexpected rc %d", buf, rc);
                assert_null(ms);
                assert_true(err.msg[0] != '\0');
                size_t at = 0;
                if (sscanf(err.msg, "at character %zu:", &at) == 1)
                    assert_true(at >= 1 && at <= strlen(buf) + 1);
                else if (rc == PD_EPARSE)
                    fail_msg("selector %s: parse error without position: %s", buf, err.msg);
            }
        }
    }
    assert_true(runs > 1000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_too_long),
        cmocka_unit_test(test_regex_anchoring),
        cmocka_unit_test(test_metric_name_matches),
        cmocka_unit_test(test_mutations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
