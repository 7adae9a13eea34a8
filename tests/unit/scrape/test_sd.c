/* Tests of src/scrape/sd.c's parser of file_sd files / http_sd bodies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "scrape/scrape_int.h"

static void free_groups(pd_static_config *g, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < g[i].n_targets; k++)
            free(g[i].targets[k]);
        free(g[i].targets);
        pd_labels_release(&g[i].labels);
    }
    free(g);
}

static void test_json_and_yaml(void **state)
{
    (void)state;
    static const char *const docs[] = {
        "[{\"targets\": [\"a:1\", \"b:2\"], \"labels\": {\"env\": \"prod\"}}, {\"targets\": "
        "[\"c:3\"]}]",
        "- targets: ['a:1', 'b:2']\n  labels:\n    env: prod\n- targets: [c:3]\n",
    };
    for (int d = 0; d < 2; d++) {
        pd_static_config *g;
        size_t n;
        pd_err e;
        pd_err_clear(&e);
        assert_int_equal(pd__sd_parse_groups(docs[d], strlen(docs[d]), "f", "__meta_filepath",
                                             "/x/f.json", &g, &n, &e),
                         0);
        assert_int_equal(n, 2);
        assert_int_equal(g[0].n_targets, 2);
        assert_string_equal(g[0].targets[1], "b:2");
        assert_string_equal(pd_labels_get(&g[0].labels, "env"), "prod");
        assert_string_equal(pd_labels_get(&g[0].labels, "__meta_filepath"), "/x/f.json");
        assert_string_equal(g[1].targets[0], "c:3");
        assert_string_equal(pd_labels_get(&g[1].labels, "__meta_filepath"), "/x/f.json");
        free_groups(g, n);
    }
    /* empty file and empty list: no groups */
    pd_static_config *g;
    size_t n;
    assert_int_equal(pd__sd_parse_groups("", 0, "f", "__meta_url", "u", &g, &n, NULL), 0);
    assert_int_equal(n, 0);
    free_groups(g, n);
    assert_int_equal(pd__sd_parse_groups("[]", 2, "f", "__meta_url", "u", &g, &n, NULL), 0);
    assert_int_equal(n, 0);
    free_groups(g, n);
}

static void test_errors(void **state)
{
    (void)state;
    static const struct {
        const char *doc, *err;
    } bad[] = {
        {"{\"targets\": []}", "f:1:1: target groups: expected a list"},
        /* Prometheus 3's UTF-8 names ("bad-name" is one): a control character is not */
        {"[{\"targets\": [\"a:1\"], \"labels\": {\"bad\\tname\": \"x\"}}]",
         "f:1:34: \"bad\tname\" is not a valid label name"},
        {"[{\"targets\": [[1]]}]", "f:1:15: target: expected a string"},
        {"[{\"target\": [\"a:1\"]}]", "f:1:3: unknown key \"target\" in target group"},
        {"[{\"targets\": [\"\"]}]", "invalid target"},
        {"[{\"targets\": [\"a:1\"]", "did not find expected"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        pd_static_config *g = NULL;
        size_t n = 0;
        pd_err e;
        pd_err_clear(&e);
        assert_int_not_equal(
            pd__sd_parse_groups(bad[i].doc, strlen(bad[i].doc), "f", "__meta_url", "u", &g, &n, &e),
            0);
        assert_null(g);
        if (!strstr(e.msg, bad[i].err)) {
            print_error("case %zu: \"%s\" lacks \"%s\"\n", i, e.msg, bad[i].err);
            fail();
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_and_yaml),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
