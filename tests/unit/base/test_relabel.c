/* Tests of src/base/relabel.c: a table per action with Prometheus'
 * semantics (model/relabel's cases, written anew), Go's Expand, MD5 test
 * vectors (RFC 1321 A.5) and hashmod values Prometheus computes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/relabel.h"

/* "a=1,b=2" -> labels */
static void mk(pd_labels *ls, const char *spec)
{
    pd_labels_init(ls);
    char buf[512];
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *save = NULL, *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(p, '=');
        assert_non_null(eq);
        *eq = 0;
        assert_int_equal(pd_labels_set(ls, p, eq + 1, NULL), 0);
    }
}

static char *fmt(const pd_labels *ls)
{
    static char out[1024];
    size_t o = 0;
    out[0] = 0;
    for (size_t i = 0; i < ls->n; i++)
        o += (size_t)snprintf(out + o, sizeof out - o, "%s%s=%s", i ? "," : "", ls->v[i].name,
                              ls->v[i].value);
    return out;
}

typedef struct rule_spec {
    const char *action, *sources, *separator, *target, *regex, *replacement;
    uint64_t modulus;
} rule_spec;

typedef struct rcase {
    const char *in;
    rule_spec r;
    const char *want; /* NULL: dropped */
} rcase;

static void build(pd_relabel_rule *r, const rule_spec *s)
{
    assert_int_equal(pd_relabel_rule_init(r), 0);
    if (s->action)
        assert_int_equal(pd_relabel_action_parse(s->action, &r->action), 0);
    if (s->sources && *s->sources) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", s->sources);
        for (char *save = NULL, *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
            r->source_labels = realloc(r->source_labels, (r->n_source + 1) * sizeof(char *));
            r->source_labels[r->n_source++] = strdup(p);
        }
    }
#define SETS(f)                                                                                    \
    if (s->f) {                                                                                    \
        free(r->f);                                                                                \
        r->f = strdup(s->f);                                                                       \
    }
    SETS(separator)
    SETS(regex)
    SETS(replacement)
    if (s->target) {
        free(r->target_label);
        r->target_label = strdup(s->target);
    }
    r->modulus = s->modulus;
    pd_err e;
    pd_err_clear(&e);
    assert_int_equal(pd_relabel_rule_compile(r, &e), 0);
    if (pd_relabel_rule_validate(r, &e)) {
        print_error("rule invalid: %s\n", e.msg);
        fail();
    }
}

static void run_cases(const rcase *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        pd_labels ls;
        mk(&ls, cases[i].in);
        pd_relabel_rule r;
        build(&r, &cases[i].r);
        bool keep;
        pd_err e;
        pd_err_clear(&e);
        assert_int_equal(pd_relabel_process(&r, 1, &ls, &keep, &e), 0);
        if (!cases[i].want) {
            if (keep) {
                print_error("case %zu (%s): kept as %s, want dropped\n", i, cases[i].r.action,
                            fmt(&ls));
                fail();
            }
        } else if (!keep || strcmp(fmt(&ls), cases[i].want) != 0) {
            print_error("case %zu (%s): got %s%s, want %s\n", i, cases[i].r.action,
                        keep ? "" : "dropped ", fmt(&ls), cases[i].want);
            fail();
        }
        pd_labels_release(&ls);
        pd_relabel_rule_release(&r);
    }
}

static void test_replace(void **state)
{
    (void)state;
    static const rcase cases[] = {
        /* default regex (.*), replacement $1 */
        {"a=foo,b=bar", {"replace", "a", NULL, "d", NULL, NULL, 0}, "a=foo,b=bar,d=foo"},
        {"a=foo", {"replace", "a", NULL, "d", "f(.*)", "ch${1}-ch${1}", 0}, "a=foo,d=choo-choo"},
        /* anchored: a partial match is no match */
        {"a=foo", {"replace", "a", NULL, "d", "o+", "x", 0}, "a=foo"},
        /* sources joined by the separator; a missing source is "" */
        {"a=foo,b=bar",
         {"replace", "a,b,c", NULL, "d", "(.*);(.*);", "$2$1", 0},
         "a=foo,b=bar,d=barfoo"},
        {"a=foo,b=bar",
         {"replace", "a,b", "-", "d", "(.*)-(.*)", "$2:$1", 0},
         "a=foo,b=bar,d=bar:foo"},
        /* an empty result deletes the target label */
        {"a=foo,d=x", {"replace", "b", NULL, "d", NULL, NULL, 0}, "a=foo"},
        /* target expanded from groups; an invalid name does nothing */
        {"a=some-name-value",
         {"replace", "a", NULL, "${1}", "some-([^-]+)-([^,]+)", "${2}", 0},
         "a=some-name-value,name=value"},
        {"a=some-1bad-value",
         {"replace", "a", NULL, "${1}", "some-([^-]+)-([^,]+)", "${2}", 0},
         "1bad=value,a=some-1bad-value"}, /* Prometheus 3: "1bad" is a UTF-8 name */
        /* Go's Expand: $1x names group "1x" (empty); $$ is a $; a lone $ stays */
        {"a=foo", {"replace", "a", NULL, "d", "(f)(o+)", "$1x|${1}x|$$|$", 0}, "a=foo,d=|fx|$|$"},
        /* named groups */
        {"a=foo",
         {"replace", "a", NULL, "d", "(?P<first>f)(?P<rest>.*)", "$rest-${first}", 0},
         "a=foo,d=oo-f"},
        /* case-insensitive flag, as RE2's (?i) */
        {"a=FOO", {"replace", "a", NULL, "d", "(?i)(foo)", "ok", 0}, "a=FOO,d=ok"},
        /* fully anchored on both ends */
        {"a=xfoo", {"replace", "a", NULL, "d", "foo", "hit", 0}, "a=xfoo"},
    };
    run_cases(cases, sizeof cases / sizeof *cases);
}

static void test_keep_drop(void **state)
{
    (void)state;
    static const rcase cases[] = {
        {"a=foo", {"keep", "a", NULL, NULL, "f.*", NULL, 0}, "a=foo"},
        {"a=foo", {"keep", "a", NULL, NULL, "f", NULL, 0}, NULL},
        {"a=foo", {"keep", "b", NULL, NULL, "", NULL, 0}, "a=foo"}, /* "" matches the absent b */
        {"a=foo", {"drop", "a", NULL, NULL, "f.*", NULL, 0}, NULL},
        {"a=foo", {"drop", "a", NULL, NULL, "o.*", NULL, 0}, "a=foo"},
        {"a=foo,b=bar", {"drop", "a,b", NULL, NULL, "foo;bar", NULL, 0}, NULL},
        {"a=foo", {"Drop", "a", NULL, NULL, "foo", NULL, 0}, NULL}, /* action case-insensitive */
    };
    run_cases(cases, sizeof cases / sizeof *cases);
}

static void test_equal(void **state)
{
    (void)state;
    static const rcase cases[] = {
        {"a=foo,b=foo", {"keepequal", "a", NULL, "b", NULL, NULL, 0}, "a=foo,b=foo"},
        {"a=foo,b=bar", {"keepequal", "a", NULL, "b", NULL, NULL, 0}, NULL},
        {"a=foo", {"keepequal", "c", NULL, "b", NULL, NULL, 0}, "a=foo"}, /* "" == "" */
        {"a=foo,b=foo", {"dropequal", "a", NULL, "b", NULL, NULL, 0}, NULL},
        {"a=foo,b=bar", {"dropequal", "a", NULL, "b", NULL, NULL, 0}, "a=foo,b=bar"},
    };
    run_cases(cases, sizeof cases / sizeof *cases);
}

static void test_hashmod(void **state)
{
    (void)state;
    /* values computed from MD5 (checked against Python's hashlib, low 8
     * bytes big-endian mod N), as Prometheus' hashmod */
    char want[64];
    uint8_t d[16];
    pd_relabel_md5("foo", 3, d);
    uint64_t v = 0;
    for (int i = 8; i < 16; i++)
        v = v << 8 | d[i];
    snprintf(want, sizeof want, "a=foo,h=%llu", (unsigned long long)(v % 1000));
    rcase cases[] = {
        {"a=foo", {"hashmod", "a", NULL, "h", NULL, NULL, 1000}, want},
        {"a=foo", {"hashmod", "a", NULL, "h", NULL, NULL, 1}, "a=foo,h=0"},
    };
    run_cases(cases, 2);
    /* md5("foo") = acbd18db4cc2f85cedef654fccc4a4d8: low 8 bytes 0xedef654fccc4a4d8 */
    assert_int_equal(v, 0xedef654fccc4a4d8ull);
    assert_int_equal(pd_relabel_hashmod("foo", 1000), 0xedef654fccc4a4d8ull % 1000);
}

static void test_labelmap_drop_keep(void **state)
{
    (void)state;
    static const rcase cases[] = {
        {"__meta_a=1,__meta_bb=2,c=3",
         {"labelmap", NULL, NULL, NULL, "__meta_(.+)", NULL, 0},
         "__meta_a=1,__meta_bb=2,a=1,bb=2,c=3"},
        {"foo=1,bar=2",
         {"labelmap", NULL, NULL, NULL, "(f)(o+)", "x_${2}_$1", 0},
         "bar=2,foo=1,x_oo_f=1"},
        {"a=1,b=2,ab=3", {"labeldrop", NULL, NULL, NULL, "a.*", NULL, 0}, "b=2"},
        {"a=1,b=2,ab=3", {"labelkeep", NULL, NULL, NULL, "a.*", NULL, 0}, "a=1,ab=3"},
        /* anchored: "b" does not match "ab" */
        {"a=1,b=2,ab=3", {"labeldrop", NULL, NULL, NULL, "b", NULL, 0}, "a=1,ab=3"},
    };
    run_cases(cases, sizeof cases / sizeof *cases);
}

static void test_case(void **state)
{
    (void)state;
    static const rcase cases[] = {
        {"a=FoO,b=BaR", {"lowercase", "a,b", NULL, "l", NULL, NULL, 0}, "a=FoO,b=BaR,l=foo;bar"},
        {"a=FoO", {"uppercase", "a", NULL, "u", NULL, NULL, 0}, "a=FoO,u=FOO"},
        {"a=FoO", {"uppercase", "a", NULL, "a", NULL, NULL, 0}, "a=FOO"},
    };
    run_cases(cases, sizeof cases / sizeof *cases);
}

static void test_chain(void **state)
{
    (void)state;
    pd_relabel_rule r[3];
    rule_spec s[3] = {
        {"replace", "__address__", NULL, "host", "([^:]+):.*", NULL, 0},
        {"drop", "host", NULL, NULL, "skip", NULL, 0},
        {"labeldrop", NULL, NULL, NULL, "__address__", NULL, 0},
    };
    for (int i = 0; i < 3; i++)
        build(&r[i], &s[i]);
    pd_labels ls;
    bool keep;
    mk(&ls, "__address__=h1:80");
    assert_int_equal(pd_relabel_process(r, 3, &ls, &keep, NULL), 0);
    assert_true(keep);
    assert_string_equal(fmt(&ls), "host=h1");
    pd_labels_release(&ls);
    mk(&ls, "__address__=skip:80");
    assert_int_equal(pd_relabel_process(r, 3, &ls, &keep, NULL), 0);
    assert_false(keep);
    pd_labels_release(&ls);
    for (int i = 0; i < 3; i++)
        pd_relabel_rule_release(&r[i]);
}

static void test_md5(void **state)
{
    (void)state;
    static const struct {
        const char *in, *hex;
    } v[] = {
        {"", "d41d8cd98f00b204e9800998ecf8427e"},
        {"a", "0cc175b9c0f1b6a831c399e269772661"},
        {"abc", "900150983cd24fb0d6963f7d28e17f72"},
        {"message digest", "f96b697d7cb7938d525a2f31aaf161d0"},
        {"abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"},
        {"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
         "d174ab98d277d9f5a5611c2c9f419d9f"},
        {"12345678901234567890123456789012345678901234567890123456789012345678901234567890",
         "57edf4a22be3c955ac49da2e2107b67a"},
    };
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        uint8_t d[16];
        char hex[33];
        pd_relabel_md5(v[i].in, strlen(v[i].in), d);
        for (int k = 0; k < 16; k++)
            snprintf(hex + 2 * k, 3, "%02x", d[k]);
        assert_string_equal(hex, v[i].hex);
    }
}

static void test_validate(void **state)
{
    (void)state;
    static const struct {
        rule_spec r;
        const char *err;
    } bad[] = {
        {{"hashmod", "a", NULL, "h", NULL, NULL, 0}, "non-zero modulus"},
        {{"replace", "a", NULL, "", NULL, NULL, 0}, "requires 'target_label'"},
        {{"replace", "a", NULL, "a\tb", NULL, NULL, 0}, "invalid 'target_label'"},
        {{"lowercase", "a", NULL, "b", NULL, "x", 0}, "'replacement' can not be set"},
        {{"lowercase", "a", NULL, "\xff", NULL, NULL, 0}, "invalid 'target_label'"},
        {{"labeldrop", "a", NULL, NULL, "x", NULL, 0}, "requires only 'regex'"},
        {{"keepequal", "a", NULL, "b", "x", NULL, 0}, "requires only 'source_labels'"},
        {{"labelmap", NULL, NULL, NULL, "x", "a\xff", 0}, "invalid 'replacement'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        pd_relabel_rule r;
        assert_int_equal(pd_relabel_rule_init(&r), 0);
        pd_relabel_action_parse(bad[i].r.action, &r.action);
        if (bad[i].r.sources) {
            r.source_labels = calloc(1, sizeof(char *));
            r.source_labels[r.n_source++] = strdup(bad[i].r.sources);
        }
        if (bad[i].r.target) {
            free(r.target_label);
            r.target_label = strdup(bad[i].r.target);
        }
        if (bad[i].r.regex) {
            free(r.regex);
            r.regex = strdup(bad[i].r.regex);
        }
        if (bad[i].r.replacement) {
            free(r.replacement);
            r.replacement = strdup(bad[i].r.replacement);
        }
        r.modulus = bad[i].r.modulus;
        pd_err e;
        pd_err_clear(&e);
        assert_int_equal(pd_relabel_rule_validate(&r, &e), PD_EINVAL);
        if (!strstr(e.msg, bad[i].err)) {
            print_error("case %zu: \"%s\" lacks \"%s\"\n", i, e.msg, bad[i].err);
            fail();
        }
        pd_relabel_rule_release(&r);
    }
    pd_relabel_rule r;
    pd_relabel_rule_init(&r);
    free(r.regex);
    r.regex = strdup("a(");
    pd_err e;
    pd_err_clear(&e);
    assert_int_equal(pd_relabel_rule_compile(&r, &e), PD_EINVAL);
    assert_non_null(strstr(e.msg, "invalid regex \"a(\""));
    /* the offset is in the regex as written (not the anchored wrapper):
     * the second '*' of "a**" is byte 2 */
    free(r.regex);
    r.regex = strdup("a**");
    pd_err_clear(&e);
    assert_int_equal(pd_relabel_rule_compile(&r, &e), PD_EINVAL);
    if (!strstr(e.msg, "at offset 2")) {
        print_error("\"%s\" lacks \"at offset 2\"\n", e.msg);
        fail();
    }
    pd_relabel_action a;
    assert_int_equal(pd_relabel_action_parse("nope", &a), PD_EINVAL);
    pd_relabel_rule_release(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replace),
        cmocka_unit_test(test_keep_drop),
        cmocka_unit_test(test_equal),
        cmocka_unit_test(test_hashmod),
        cmocka_unit_test(test_labelmap_drop_keep),
        cmocka_unit_test(test_case),
        cmocka_unit_test(test_chain),
        cmocka_unit_test(test_md5),
        cmocka_unit_test(test_validate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
