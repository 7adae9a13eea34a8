/* Tests of src/scrape/target.c: a target's labels and URL as Prometheus'
 * PopulateLabels with Parca's per-profile labels. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "scrape/scrape_int.h"

static const char *labels_str(const pd_labels *ls)
{
    static char out[2048];
    size_t o = 0;
    out[0] = 0;
    for (size_t i = 0; i < ls->n; i++)
        o += (size_t)snprintf(out + o, sizeof out - o, "%s%s=%s", i ? "," : "", ls->v[i].name,
                              ls->v[i].value);
    return out;
}

static void load(pd_config *c, const char *y)
{
    pd_err e;
    pd_err_clear(&e);
    if (pd_config_parse(y, strlen(y), "cfg.yaml", c, &e)) {
        print_error("%s\n", e.msg);
        fail();
    }
}

static const pd_pprof_endpoint *ep(const pd_scrape_job *j, const char *name)
{
    for (size_t i = 0; i < j->n_endpoints; i++)
        if (!strcmp(j->endpoints[i].name, name))
            return &j->endpoints[i];
    return NULL;
}

static void test_defaults(void **state)
{
    (void)state;
    pd_config c;
    load(&c,
         "global:\n  external_labels: {region: eu, job: ignored}\n"
         "scrape_configs:\n  - job_name: api\n    params: {a: ['1', '2'], b: [x]}\n"
         "    static_configs:\n      - targets: ['h1:6060', 'h2']\n        labels: {env: prod}\n");
    const pd_scrape_job *j = &c.jobs[0];
    pd__scrape_spec s;
    pd_err e;
    pd_err_clear(&e);
    assert_int_equal(pd__scrape_spec_build(&c, j, "h1:6060", &j->static_configs[0].labels,
                                           ep(j, "heap"), &s, &e),
                     0);
    assert_true(s.keep);
    assert_string_equal(labels_str(&s.labels),
                        "__name__=heap,env=prod,instance=h1:6060,job=api,region=eu");
    assert_true(s.cumulative); /* stored with __delta__="false", not a target label */
    assert_string_equal(s.url.data, "http://h1:6060/debug/pprof/heap?a=1&a=2&b=x");
    assert_string_equal(labels_str(&s.discovered),
                        "__address__=h1:6060,__metrics_path__=/metrics,__name__=heap,__param_a=1,"
                        "__param_b=x,__profile_path__=/debug/pprof/heap,__scheme__=http,"
                        "__scrape_interval__=10s,__scrape_timeout__=10s,env=prod,job=api");
    assert_int_equal(s.interval_ms, 10000);
    pd__scrape_spec_release(&s);
    /* no port: the scheme's is added (Prometheus 2.42) */
    assert_int_equal(
        pd__scrape_spec_build(&c, j, "h2", &j->static_configs[0].labels, ep(j, "cpu"), &s, &e), 0);
    assert_string_equal(s.url.data, "http://h2:80/debug/pprof/profile?seconds=9&a=1&a=2&b=x");
    assert_string_equal(pd_labels_get(&s.labels, "instance"), "h2:80");
    pd__scrape_spec_release(&s);
    pd_config_release(&c);
}

static void test_relabel_targets(void **state)
{
    (void)state;
    pd_config c;
    load(&c, "scrape_configs:\n  - job_name: api\n    params: {a: ['1', '2']}\n"
             "    static_configs:\n      - targets: ['h1:6060']\n"
             "        labels: {__scheme__: https, __meta_x: y}\n"
             "    relabel_configs:\n"
             "      - {source_labels: [__address__], regex: '(.*):6060', target_label: __address__,"
             " replacement: '$1:7070'}\n"
             "      - {target_label: __param_a, replacement: '9'}\n"
             "      - {source_labels: [__name__], regex: heap, target_label: __profile_path__,"
             " replacement: /custom/heap}\n"
             "      - {source_labels: [__name__], regex: mutex, action: drop}\n"
             "      - {source_labels: [__meta_x], target_label: meta}\n"
             "      - {source_labels: [__name__], regex: block, target_label: __scrape_interval__,"
             " replacement: bad}\n");
    const pd_scrape_job *j = &c.jobs[0];
    const pd_labels *g = &j->static_configs[0].labels;
    pd__scrape_spec s;
    pd_err e;
    pd_err_clear(&e);
    assert_int_equal(pd__scrape_spec_build(&c, j, "h1:6060", g, ep(j, "heap"), &s, &e), 0);
    assert_string_equal(s.url.data,
                        "https://h1:7070/custom/heap?a=9&a=2"); /* the first value replaced */
    assert_string_equal(labels_str(&s.labels), "__name__=heap,instance=h1:7070,job=api,meta=y");
    pd__scrape_spec_release(&s);
    assert_int_equal(pd__scrape_spec_build(&c, j, "h1:6060", g, ep(j, "mutex"), &s, &e), 0);
    assert_false(s.keep);
    pd__scrape_spec_release(&s);
    assert_int_equal(pd__scrape_spec_build(&c, j, "h1:6060", g, ep(j, "block"), &s, &e), PD_EINVAL);
    assert_non_null(strstr(e.msg, "scrape interval \"bad\""));
    pd_config_release(&c);

    load(&c, "scrape_configs:\n  - job_name: api\n    static_configs: [{targets: ['h:1']}]\n"
             "    relabel_configs:\n      - {target_label: __address__, replacement: ''}\n");
    j = &c.jobs[0];
    assert_int_equal(
        pd__scrape_spec_build(&c, j, "h:1", &j->static_configs[0].labels, ep(j, "heap"), &s, &e),
        PD_EINVAL);
    assert_string_equal(e.msg, "no address");
    pd_config_release(&c);
}

/* Issue 12: series scraped as served from Go's allocs/heap/block/mutex are
 * marked cumulative (stored with __delta__="false"; the target's labels do
 * not show it); a ?seconds= window (seconds:, delta: true, or a seconds
 * param) or another endpoint is not. */
static void test_cumulative_mark(void **state)
{
    (void)state;
    pd_config c;
    pd_err e;
    pd__scrape_spec s;
    load(&c, "scrape_configs:\n  - job_name: api\n    static_configs: [{targets: ['h:1']}]\n"
             "    profiling_config:\n      pprof_config:\n"
             "        block: {delta: true}\n"
             "        mem2: {path: /debug/pprof/allocs}\n");
    const pd_scrape_job *j = &c.jobs[0];
    const pd_labels *g = &j->static_configs[0].labels;
    static const struct {
        const char *name;
        bool marked;
    } want[] = {{"allocs", true}, {"heap", true},       {"mutex", true}, {"mem2", true},
                {"block", false}, {"goroutine", false}, {"cpu", false},  {"threadcreate", false}};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        const pd_pprof_endpoint *p = ep(j, want[i].name);
        if (!p)
            fail_msg("no endpoint %s", want[i].name);
        assert_int_equal(pd__scrape_spec_build(&c, j, "h:1", g, p, &s, &e), 0);
        assert_null(pd_labels_get(&s.labels, "__delta__"));
        if (s.cumulative != want[i].marked)
            fail_msg("%s: cumulative %d, want %d (url %s)", want[i].name, s.cumulative,
                     want[i].marked, s.url.data);
        pd__scrape_spec_release(&s);
    }
    pd_config_release(&c);

    /* a seconds parameter of the job asks a window too */
    load(&c, "scrape_configs:\n  - job_name: api\n    static_configs: [{targets: ['h:1']}]\n"
             "    params: {seconds: ['10']}\n");
    j = &c.jobs[0];
    assert_int_equal(
        pd__scrape_spec_build(&c, j, "h:1", &j->static_configs[0].labels, ep(j, "allocs"), &s, &e),
        0);
    assert_false(s.cumulative);
    pd__scrape_spec_release(&s);
    pd_config_release(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_relabel_targets),
        cmocka_unit_test(test_cumulative_mark),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
