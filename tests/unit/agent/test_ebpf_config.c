/* Tests of src/agent/ebpf/config.c: profd-agent's --config.file
 * (relabel_configs over a process's labels) — what is accepted, what the
 * rules do to a process's label set, and the FILE:LINE:COL of refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../pd_test.h"
#include "agent/ebpf/ebpf_int.h"

static int parse(const char *text, pd_ebpf_config *c, pd_err *err)
{
    pd_err_clear(err);
    return pd_ebpf_config_parse(text, strlen(text), "agent.yml", c, err);
}

static void test_rename_and_drop(void **state)
{
    (void)state;
    pd_ebpf_config c;
    pd_err err;
    PD_ASSERT_OK(parse("relabel_configs:\n"
                       "  - source_labels: [__meta_process_exe]\n"
                       "    regex: /opt/([^/]+)/bin/(.+)\n"
                       "    target_label: service_name\n"
                       "    replacement: $1-$2\n"
                       "  - source_labels: [__meta_process_commandline]\n"
                       "    regex: .*--nightly.*\n"
                       "    action: DROP\n",
                       &c, &err),
                 &err);
    assert_int_equal(c.n_relabel, 2);
    assert_int_equal(c.relabel[1].action, PD_RELABEL_DROP);
    pd_labels ls;
    pd_labels_init(&ls);
    PD_ASSERT_OK(pd_labels_set(&ls, "service_name", "api", &err), &err);
    PD_ASSERT_OK(pd_labels_set(&ls, "__meta_process_exe", "/opt/shop/bin/api", &err), &err);
    PD_ASSERT_OK(pd_labels_set(&ls, "__meta_process_commandline", "/opt/shop/bin/api -v", &err),
                 &err);
    bool keep = false;
    PD_ASSERT_OK(pd_relabel_process(c.relabel, c.n_relabel, &ls, &keep, &err), &err);
    assert_true(keep);
    assert_string_equal(pd_labels_get(&ls, "service_name"), "shop-api");
    PD_ASSERT_OK(pd_labels_set(&ls, "__meta_process_commandline", "x --nightly", &err), &err);
    PD_ASSERT_OK(pd_relabel_process(c.relabel, c.n_relabel, &ls, &keep, &err), &err);
    assert_false(keep);
    pd_labels_release(&ls);
    pd_ebpf_config_release(&c);
    /* empty file, null list: no rules */
    PD_ASSERT_OK(parse("", &c, &err), &err);
    assert_int_equal(c.n_relabel, 0);
    PD_ASSERT_OK(parse("relabel_configs:\n", &c, &err), &err);
    assert_int_equal(c.n_relabel, 0);
    pd_ebpf_config_release(&c);
}

static void test_refusals_name_line(void **state)
{
    (void)state;
    static const struct {
        const char *text, *msg;
    } bad[] = {
        {"scrape_configs: []\n", "agent.yml:1:1: unknown key \"scrape_configs\""},
        {"- a\n", "agent.yml:1:1: expected a mapping"},
        {"relabel_configs: {}\n", "agent.yml:1:18: relabel_configs: expected a list"},
        {"relabel_configs:\n  - action: explode\n", "agent.yml:2:13: unknown relabel action"},
        {"relabel_configs:\n  - regex: \"(\"\n", "agent.yml:2:12: invalid regex"},
        {"relabel_configs:\n  - target: x\n", "agent.yml:2:5: unknown key \"target\""},
        {"relabel_configs:\n  - action: replace\n", "requires 'target_label' value"},
        {"relabel_configs:\n  - source_labels: [\"\"]\n    target_label: x\n",
         "agent.yml:2:21: \"\" is not a valid label name"},
        {"relabel_configs:\n  - {regex: a, regex: b}\n", "duplicate key \"regex\""},
        {"relabel_configs:\n  - modulus: -1\n", "agent.yml:2:14: modulus"},
        {"relabel_configs: [\n", "agent.yml:2:1: YAML:"},
        {"relabel_configs:\n  - ~\n", "expected a mapping, got nothing"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        pd_ebpf_config c;
        pd_err err;
        int rc = parse(bad[i].text, &c, &err);
        if (rc != PD_EINVAL || !strstr(err.msg, bad[i].msg))
            fail_msg("case %zu: rc %d, message \"%s\", want \"%s\"", i, rc, err.msg, bad[i].msg);
        assert_int_equal(c.n_relabel, 0);
        assert_null(c.relabel);
    }
    pd_ebpf_config c;
    pd_err err;
    pd_err_clear(&err);
    assert_true(pd_ebpf_config_load("/nonexistent/agent.yml", &c, &err) < 0);
    assert_non_null(strstr(err.msg, "/nonexistent/agent.yml: No such file"));
}

/* an alias bomb is cut by the node budget, not walked for ever */
static void test_alias_budget(void **state)
{
    (void)state;
    char text[4096];
    int n = snprintf(text, sizeof text, "a: &a [x, x, x, x, x, x, x, x, x, x]\n");
    char prev = 'a';
    for (char k = 'b'; k <= 'h'; k++) {
        n += snprintf(text + n, sizeof text - (size_t)n,
                      "%c: &%c [*%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c]\n", k, k, prev,
                      prev, prev, prev, prev, prev, prev, prev, prev, prev);
        prev = k;
    }
    snprintf(text + n, sizeof text - (size_t)n, "relabel_configs:\n  - source_labels: *h\n");
    pd_ebpf_config c;
    pd_err err;
    int rc = parse(text, &c, &err);
    assert_int_equal(rc, PD_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rename_and_drop),
        cmocka_unit_test(test_refusals_name_line),
        cmocka_unit_test(test_alias_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
