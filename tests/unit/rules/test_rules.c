/* Tests of src/rules: configuration (rules_config.c), evaluation
 * (rules_eval.c, through the test sink of rules_int.h) and the remote write
 * encoding (remote_write.c, decoded back with protobuf-c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/time.h"
#include "rules/rules.h"
#include "rules/rules_int.h"
#include "remote_write.pb-c.h"

/* ---- configuration ---- */

static int parse(const char *y, pd_rules_config *c, pd_err *e)
{
    pd_err_clear(e);
    return pd_rules_config_parse(y, strlen(y), "cfg.yaml", c, e);
}

static void test_config_ok(void **state)
{
    (void)state;
    pd_rules_config c;
    pd_err e;
    assert_int_equal(parse("scrape_configs: []\n"
                           "recording_rules:\n"
                           "  - record: hot_ns\n"
                           "    selector: 'cpu{job=\"a\"}'\n"
                           "    sample_type: cpu\n"
                           "    function: 'main\\.hot'\n"
                           "    function_match: self\n"
                           "    by: [endpoint, instance]\n"
                           "    labels: {team: x}\n"
                           "remote_write:\n"
                           "  - url: http://127.0.0.1:9/api/v1/write\n"
                           "    write_relabel_configs: []\n"
                           "    queue_config: {capacity: 10, min_backoff: 1s, max_backoff: 2s}\n",
                           &c, &e),
                     0);
    assert_int_equal(c.n_rules, 1);
    assert_string_equal(c.rules[0].record, "hot_ns");
    assert_int_equal(c.rules[0].fn_match, PD_RULE_FN_SELF);
    assert_int_equal(c.rules[0].n_by, 2);
    assert_string_equal(pd_labels_get(&c.rules[0].labels, "team"), "x");
    assert_int_equal(c.n_remotes, 1);
    assert_int_equal(c.remotes[0].capacity, 10);
    assert_int_equal(c.remotes[0].min_backoff_ms, 1000);
    assert_int_equal(c.remotes[0].max_samples_per_send, 2000);
    assert_int_equal(strlen(c.remotes[0].name), 6);
    assert_int_equal(c.n_warnings, 1);
    assert_non_null(
        strstr(c.warnings[0], "cfg.yaml:12:5: remote_write entry: write_relabel_configs ignored"));
    pd_rules_config_release(&c);
    /* a Prometheus file: remote_write without rules is not ours */
    assert_int_equal(parse("remote_write: [{url: 'ftp://x', bogus: 1}]\nrule_files: [x]\n", &c, &e),
                     0);
    assert_int_equal(c.n_remotes, 0);
    pd_rules_config_release(&c);
}

static void test_config_errors(void **state)
{
    (void)state;
    static const struct {
        const char *yaml, *want;
    } cases[] = {
        {"recording_rules:\n  - {selector: cpu, sample_type: cpu}\n",
         "cfg.yaml:2:5: recording rule: record (the metric name) is missing"},
        {"recording_rules:\n  - {record: 'a-b', selector: cpu, sample_type: cpu}\n",
         "cfg.yaml:2:14: record: \"a-b\" is not a metric name"},
        {"recording_rules:\n  - {record: a, selector: cpu, sample_type: cpu, fn: x}\n",
         "cfg.yaml:2:50: recording rule: unknown key fn"},
        {"recording_rules:\n  - {record: a, selector: '{job=\"x\"}', sample_type: cpu}\n",
         "names no profile type"},
        {"recording_rules:\n  - {record: a, selector: cpu, sample_type: cpu, function_match: "
         "self}\n",
         "function_match without function"},
        {"recording_rules:\n  - {record: a, selector: cpu, sample_type: cpu, function: '('}\n",
         "rule a: function:"},
        {"recording_rules:\n  - {record: a, selector: cpu, sample_type: cpu, by: [__x]}\n",
         "by: \"__x\" is not a label name"},
        {"recording_rules:\n  - {record: a, selector: cpu, sample_type: cpu}\n"
         "  - {record: a, selector: heap, sample_type: inuse_space}\n",
         "record given twice (also at cfg.yaml:2)"},
        {"recording_rules: []\nremote_write: [{url: 'ftp://x'}]\n", "is not an http(s) URL"},
        {"recording_rules: []\nremote_write: [{url: 'http://x', queue_config: {min_backoff: 2s, "
         "max_backoff: 1s}}]\n",
         "max_backoff is below min_backoff"},
        {"recording_rules: []\nremote_write: [{url: 'http://x', remote_timeout: soon}]\n",
         "remote_timeout: \"soon\" is not a duration"},
        {"recording_rule_files: [/nonexistent/profd-rules.yml]\n", "no such file"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        pd_rules_config c;
        pd_err e;
        int rc = parse(cases[i].yaml, &c, &e);
        if (rc == 0 || !strstr(e.msg, cases[i].want))
            fail_msg("case %zu: rc %d, message \"%s\", want \"%s\"", i, rc, e.msg, cases[i].want);
    }
}

/* ---- evaluation ---- */

typedef struct got {
    char labels[64][200];
    int64_t ts[64];
    double v[64];
    size_t n;
} got;

static void sink(void *ctx, const pd_labels *l, int64_t ts, double v)
{
    got *g = ctx;
    if (g->n >= 64)
        return;
    pd_buf b;
    pd_buf_init(&b, 0);
    pd_labels_format(l, &b);
    snprintf(g->labels[g->n], sizeof g->labels[0], "%.*s", (int)b.len, (const char *)b.data);
    pd_buf_release(&b);
    g->ts[g->n] = ts;
    g->v[g->n++] = v;
}

static double find(const got *g, const char *labels, int64_t ts)
{
    for (size_t i = 0; i < g->n; i++)
        if (!strcmp(g->labels[i], labels) && g->ts[i] == ts)
            return g->v[i];
    for (size_t i = 0; i < g->n; i++)
        print_message("have %s at %lld = %g\n", g->labels[i], (long long)g->ts[i], g->v[i]);
    fail_msg("no sample %s at %lld", labels, (long long)ts);
    return 0;
}

/* A profile of one sample type `type`: samples {stack of function names
 * (leaf first, NULL-terminated), endpoint label or NULL, value}. */
typedef struct smp {
    const char *stack[4];
    const char *endpoint;
    int64_t v;
} smp;

static void build(pd_profile *p, const char *type, const smp *s, size_t n)
{
    pd_profile_builder *b;
    pd_err e = {{0}};
    assert_int_equal(pd_profile_builder_new(NULL, &b), 0);
    assert_true(pd_profile_builder_sample_type(b, type, "x", &e) >= 0);
    for (size_t i = 0; i < n; i++) {
        uint64_t loc[4];
        size_t nl = 0;
        for (; nl < 4 && s[i].stack[nl]; nl++) {
            uint64_t fid;
            assert_int_equal(
                pd_profile_builder_function(b, s[i].stack[nl], NULL, NULL, 0, &fid, &e), 0);
            pd_pprof_line line = {.function_id = fid, .line = 1};
            assert_int_equal(
                pd_profile_builder_location(b, 0, 0x1000 + fid, &line, 1, &loc[nl], &e), 0);
        }
        pd_pprof_label lab = {0};
        if (s[i].endpoint) {
            lab.key = pd_profile_builder_string(b, "endpoint", &e);
            lab.str = pd_profile_builder_string(b, s[i].endpoint, &e);
        }
        assert_int_equal(
            pd_profile_builder_sample(b, loc, nl, &s[i].v, &lab, s[i].endpoint ? 1 : 0, &e), 0);
    }
    assert_int_equal(pd_profile_builder_finish(b, p, &e), 0);
    pd_profile_builder_free(b);
}

static pd_rules *engine(const char *yaml, got *g)
{
    pd_rules_config c;
    pd_err e;
    if (parse(yaml, &c, &e))
        fail_msg("%s", e.msg);
    pd_rules *r;
    assert_int_equal(pd_rules_new(NULL, &r, &e), 0);
    assert_int_equal(pd_rules_apply(r, &c, &e), 0);
    pd__rules_set_sink(r, sink, g);
    return r;
}

static void labels(pd_labels *l, const char *name, const char *instance, bool cumulative)
{
    pd_err e;
    pd_labels_init(l);
    pd_labels_set(l, "__name__", name, &e);
    pd_labels_set(l, "job", "app", &e);
    pd_labels_set(l, "instance", instance, &e);
    if (cumulative)
        pd_labels_set(l, "__delta__", "false", &e);
}

static void test_eval_cpu(void **state)
{
    (void)state;
    got *g = calloc(1, sizeof *g);
    pd_rules *r = engine("recording_rules:\n"
                         "  - {record: hot, selector: 'cpu{job=\"app\"}', sample_type: cpu,"
                         " function: 'main\\.hot', by: [endpoint]}\n"
                         "  - {record: hot_self, selector: cpu, sample_type: cpu,"
                         " function: 'main\\.hot', function_match: self}\n"
                         "  - {record: heap_only, selector: heap, sample_type: inuse_space}\n",
                         g);
    pd_labels a, b;
    labels(&a, "cpu", "a:1", false);
    labels(&b, "cpu", "b:1", false);
    pd_profile p1, p2;
    const smp s1[] = {{{"main.hot", "main.main", NULL}, "/x", 10},
                      {{"runtime.memmove", "main.hot", "main.main", NULL}, "/x", 5},
                      {{"main.hot", NULL}, "/y", 7},
                      {{"main.cold", "main.main", NULL}, "/x", 100},
                      {{"main.hot", NULL}, NULL, 1}};
    build(&p1, "cpu", s1, 5);
    pd_rules_observe(r, &a, 1000, &p1);
    assert_int_equal(g->n, 4); /* hot: /x, /y, no endpoint; hot_self: one */
    assert_true(find(g, "hot{endpoint=\"/x\"}", 1000) == 15);
    assert_true(find(g, "hot{endpoint=\"/y\"}", 1000) == 7);
    assert_true(find(g, "hot{}", 1000) == 1);
    assert_true(find(g, "hot_self{}", 1000) == 18); /* the memmove leaf is not self */
    /* a second series at the same ms: one ms later for the shared output series */
    pd_rules_observe(r, &b, 1000, &p1);
    assert_true(find(g, "hot{endpoint=\"/x\"}", 1001) == 15);
    assert_true(find(g, "hot_self{}", 1001) == 18);
    /* the next profile of a without /y: /y gets 0 */
    g->n = 0;
    const smp s2[] = {{{"main.hot", NULL}, "/x", 3}};
    build(&p2, "cpu", s2, 1);
    pd_rules_observe(r, &a, 2000, &p2);
    assert_true(find(g, "hot{endpoint=\"/x\"}", 2000) == 3);
    assert_true(find(g, "hot{endpoint=\"/y\"}", 2000) == 0);
    assert_true(find(g, "hot{}", 2000) == 0);
    /* /api/v1/rules */
    pd_buf j;
    pd_buf_init(&j, 0);
    assert_int_equal(pd_rules_write_json(r, &j), 0);
    pd_buf_putc(&j, 0);
    assert_non_null(strstr((char *)j.data, "\"name\":\"hot\",\"query\":\"cpu{job=\\\"app\\\"}\""));
    assert_non_null(strstr((char *)j.data, "\"health\":\"ok\""));
    assert_non_null(strstr((char *)j.data, "\"name\":\"heap_only\"")); /* never evaluated */
    assert_non_null(strstr((char *)j.data, "\"health\":\"unknown\""));
    /* a profile without the sample type: the rule's error */
    pd_labels h;
    labels(&h, "heap", "a:1", false);
    pd_rules_observe(r, &h, 3000, &p2);
    pd_buf_reset(&j);
    pd_rules_write_json(r, &j);
    pd_buf_putc(&j, 0);
    assert_non_null(strstr((char *)j.data, "has no sample type inuse_space (it has: cpu)"));
    pd_buf_release(&j);
    pd_profile_release(&p1);
    pd_profile_release(&p2);
    pd_labels_release(&a);
    pd_labels_release(&b);
    pd_labels_release(&h);
    pd_rules_free(r);
    free(g);
}

static void test_eval_cumulative(void **state)
{
    (void)state;
    got *g = calloc(1, sizeof *g);
    pd_rules *r = engine("recording_rules:\n"
                         "  - {record: alloc, selector: allocs, sample_type: alloc_space,"
                         " function: 'main\\.f', by: [instance]}\n",
                         g);
    pd_labels cum, del;
    labels(&cum, "allocs", "a:1", true);
    labels(&del, "allocs", "d:1", false);
    int64_t vals[] = {100, 160, 40}; /* the third: a restart (total went down) */
    for (int k = 0; k < 3; k++) {
        const smp s[] = {{{"main.f", NULL}, NULL, vals[k]}, {{"main.g", NULL}, NULL, 1000}};
        pd_profile p;
        build(&p, "alloc_space", s, 2);
        pd_rules_observe(r, &cum, 1000 * (k + 1), &p);
        pd_rules_observe(r, &del, 1000 * (k + 1), &p);
        pd_profile_release(&p);
    }
    assert_true(find(g, "alloc{instance=\"a:1\"}", 1000) == 0); /* first: nothing known before */
    assert_true(find(g, "alloc{instance=\"a:1\"}", 2000) == 60);
    assert_true(find(g, "alloc{instance=\"a:1\"}", 3000) == 40); /* reset: from 0 */
    /* the same values in a series not served cumulative: as they are */
    assert_true(find(g, "alloc{instance=\"d:1\"}", 1000) == 100);
    assert_true(find(g, "alloc{instance=\"d:1\"}", 2000) == 160);
    pd_labels_release(&cum);
    pd_labels_release(&del);
    pd_rules_free(r);
    free(g);
}

/* After a restart of profd (a new engine: no state in memory) the delta of a
 * cumulative series goes on from the profile stored before, not from 0. */
static void test_eval_cumulative_restart(void **state)
{
    (void)state;
    char dir[] = "/tmp/pd-rules-restart-XXXXXX";
    assert_non_null(mkdtemp(dir));
    pd_storage_options o = pd_storage_options_default();
    o.path = dir;
    o.maintenance_ms = 0;
    pd_storage *st;
    pd_err e = {{0}};
    assert_int_equal(pd_storage_open(&o, &st, &e), 0);
    const char *yaml = "recording_rules:\n"
                       "  - {record: alloc, selector: allocs, sample_type: alloc_space,"
                       " function: 'main\\.f', by: [instance]}\n";
    pd_labels cum, other;
    labels(&cum, "allocs", "a:1", true);
    labels(&other, "allocs", "b:1", true); /* never stored: its first profile gives 0 */
    int64_t t0 = pd_now_ms() - 60000;
    int64_t vals[] = {100, 160, 190, 50}; /* the last: the program restarted */
    got *g = calloc(1, sizeof *g);
    for (int k = 0; k < 4; k++) {
        /* profd "restarts" before every profile: a new engine (no state in
           memory), and from the third on the store closed and opened again */
        pd_rules_config c;
        pd_rules *r;
        if (k >= 2) {
            pd_storage_close(st);
            assert_int_equal(pd_storage_open(&o, &st, &e), 0);
        }
        assert_int_equal(parse(yaml, &c, &e), 0);
        assert_int_equal(pd_rules_new(st, &r, &e), 0);
        assert_int_equal(pd_rules_apply(r, &c, &e), 0);
        pd__rules_set_sink(r, sink, g);
        const smp s[] = {{{"main.f", NULL}, NULL, vals[k]}, {{"main.g", NULL}, NULL, 1000}};
        pd_profile p;
        build(&p, "alloc_space", s, 2);
        pd_buf enc;
        pd_buf_init(&enc, 0);
        assert_int_equal(pd_profile_encode(&p, true, &enc), 0);
        assert_int_equal(
            pd_storage_append(st, &cum, t0 + 1000 * k, (const uint8_t *)enc.data, enc.len, &p, &e),
            0);
        pd_rules_observe(r, &cum, t0 + 1000 * k, &p);
        if (k == 2)
            pd_rules_observe(r, &other, t0 + 1000 * k, &p);
        pd_buf_release(&enc);
        pd_profile_release(&p);
        pd_rules_free(r);
        pd_rules_config_release(&c);
    }
    assert_true(find(g, "alloc{instance=\"a:1\"}", t0) == 0);         /* nothing before it */
    assert_true(find(g, "alloc{instance=\"a:1\"}", t0 + 1000) == 60); /* the store's 100 */
    assert_true(find(g, "alloc{instance=\"a:1\"}", t0 + 2000) == 30); /* the store's 160 */
    assert_true(find(g, "alloc{instance=\"a:1\"}", t0 + 3000) == 50); /* a reset: from 0 */
    assert_true(find(g, "alloc{instance=\"b:1\"}", t0 + 2000) == 0);  /* nothing stored */
    pd_storage_close(st);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    pd_labels_release(&cum);
    pd_labels_release(&other);
    free(g);
}

/* ---- remote write encoding ---- */

static void test_encode(void **state)
{
    (void)state;
    pd_labels a, b;
    pd_err e;
    pd_labels_init(&a);
    pd_labels_init(&b);
    pd_labels_set(&a, "__name__", "m", &e);
    pd_labels_set(&a, "endpoint", "/x", &e);
    pd_labels_set(&b, "__name__", "m", &e);
    const pd_labels *ls[] = {&a, &b, &a};
    int64_t ts[] = {1, 2, 3};
    double v[] = {1.5, 2, 3};
    pd_buf out;
    pd_buf_init(&out, 0);
    assert_int_equal(pd_remote_encode(ls, ts, v, 3, &out), 0);
    Prometheus__WriteRequest *wr =
        prometheus__write_request__unpack(NULL, out.len, (const uint8_t *)out.data);
    assert_non_null(wr);
    assert_int_equal(wr->n_timeseries, 2);
    Prometheus__TimeSeries *s0 = wr->timeseries[0];
    assert_int_equal(s0->n_labels, 2);
    assert_string_equal(s0->labels[0]->name, "__name__");
    assert_string_equal(s0->labels[1]->value, "/x");
    assert_int_equal(s0->n_samples, 2); /* a's samples together, in order */
    assert_int_equal(s0->samples[0]->timestamp, 1);
    assert_true(s0->samples[0]->value == 1.5);
    assert_int_equal(s0->samples[1]->timestamp, 3);
    assert_int_equal(wr->timeseries[1]->n_samples, 1);
    prometheus__write_request__free_unpacked(wr, NULL);
    pd_buf_release(&out);
    pd_labels_release(&a);
    pd_labels_release(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_ok),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_eval_cpu),
        cmocka_unit_test(test_eval_cumulative),
        cmocka_unit_test(test_eval_cumulative_restart),
        cmocka_unit_test(test_encode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
