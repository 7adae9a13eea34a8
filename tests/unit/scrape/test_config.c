/* Tests of src/scrape/config.c: every key of a full file, the defaults, the
 * CPU seconds rule, and one error of each kind with its line number. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "scrape/config.h"

static const pd_scrape_job *job(const pd_config *c, const char *name)
{
    for (size_t i = 0; i < c->n_jobs; i++)
        if (!strcmp(c->jobs[i].job_name, name))
            return &c->jobs[i];
    return NULL;
}

static const pd_pprof_endpoint *ep(const pd_scrape_job *j, const char *name)
{
    for (size_t i = 0; i < j->n_endpoints; i++)
        if (!strcmp(j->endpoints[i].name, name))
            return &j->endpoints[i];
    return NULL;
}

static int parse(const char *yaml, pd_config *c, pd_err *e)
{
    pd_err_clear(e);
    return pd_config_parse(yaml, strlen(yaml), "cfg.yaml", c, e);
}

static void test_full(void **state)
{
    (void)state;
    const char *y = "global:\n"
                    "  scrape_interval: 30s\n"
                    "  scrape_timeout: 20s\n"
                    "scrape_configs:\n"
                    "  - job_name: api\n"
                    "    scrape_interval: 15s\n"
                    "    scrape_timeout: 12s\n"
                    "    scheme: https\n"
                    "    params:\n"
                    "      debug: ['1']\n"
                    "      tag: [a, 'b c']\n"
                    "    static_configs:\n"
                    "      - targets: ['10.0.0.1:6060', 'host.example:6061']\n"
                    "        labels: {env: prod, zone: eu-1}\n"
                    "      - targets: ['[::1]:7070']\n"
                    "    profiling_config:\n"
                    "      pprof_config:\n"
                    "        heap: {path: /custom/heap}\n"
                    "        mutex: {enabled: false}\n"
                    "        cpu: {seconds: 5, delta: true}\n"
                    "        fgprof: {path: /debug/fgprof, seconds: 3}\n"
                    "  - job_name: plain\n"
                    "    static_configs:\n"
                    "      - targets: [localhost:8080]\n";
    pd_config c;
    pd_err e;
    int rc = parse(y, &c, &e);
    assert_int_equal(rc, 0);
    assert_int_equal(c.scrape_interval_ms, 30000);
    assert_int_equal(c.scrape_timeout_ms, 20000);
    assert_int_equal(c.n_jobs, 2);

    const pd_scrape_job *j = job(&c, "api");
    assert_non_null(j);
    assert_int_equal(j->interval_ms, 15000);
    assert_int_equal(j->timeout_ms, 12000);
    assert_string_equal(j->scheme, "https");
    assert_int_equal(j->n_query, 3);
    assert_string_equal(j->query[0].name, "debug");
    assert_string_equal(j->query[0].value, "1");
    assert_string_equal(j->query[1].name, "tag");
    assert_string_equal(j->query[1].value, "a");
    assert_string_equal(j->query[2].name, "tag");
    assert_string_equal(j->query[2].value, "b c");
    assert_string_equal(pd_labels_get(&j->params, "tag"), "a"); /* first value */
    assert_int_equal(j->n_static_configs, 2);
    assert_int_equal(j->static_configs[0].n_targets, 2);
    assert_string_equal(j->static_configs[0].targets[1], "host.example:6061");
    assert_string_equal(pd_labels_get(&j->static_configs[0].labels, "env"), "prod");
    assert_string_equal(pd_labels_get(&j->static_configs[0].labels, "zone"), "eu-1");
    assert_string_equal(j->static_configs[1].targets[0], "[::1]:7070");
    assert_int_equal(j->static_configs[1].labels.n, 0);

    /* the seven defaults plus the custom one */
    assert_int_equal(j->n_endpoints, 8);
    assert_string_equal(ep(j, "heap")->path, "/custom/heap");
    assert_true(ep(j, "heap")->enabled);
    assert_false(ep(j, "mutex")->enabled);
    assert_string_equal(ep(j, "mutex")->path, "/debug/pprof/mutex");
    assert_int_equal(ep(j, "cpu")->seconds, 5);
    assert_true(ep(j, "cpu")->delta);
    assert_string_equal(ep(j, "cpu")->path, "/debug/pprof/profile");
    /* 5 s profile + max(1s, 0.5s) margin = 6 s < 12 s timeout: timeout stays */
    assert_int_equal(ep(j, "cpu")->timeout_ms, 12000);
    assert_string_equal(ep(j, "fgprof")->path, "/debug/fgprof");
    assert_int_equal(ep(j, "fgprof")->seconds, 3);
    assert_true(ep(j, "fgprof")->enabled);
    assert_int_equal(ep(j, "goroutine")->seconds, 0);

    const pd_scrape_job *p = job(&c, "plain");
    assert_non_null(p);
    assert_int_equal(p->interval_ms, 30000); /* global */
    assert_int_equal(p->timeout_ms, 20000);
    assert_string_equal(p->scheme, "http");
    assert_int_equal(p->n_query, 0);
    pd_config_release(&c);
    assert_int_equal(c.n_jobs, 0);
}

static void test_defaults(void **state)
{
    (void)state;
    const char *y = "scrape_configs:\n"
                    "  - job_name: x\n"
                    "    static_configs:\n"
                    "      - targets: ['127.0.0.1:1']\n";
    pd_config c;
    pd_err e;
    assert_int_equal(parse(y, &c, &e), 0);
    assert_int_equal(c.scrape_interval_ms, 10000);
    assert_int_equal(c.scrape_timeout_ms, 10000);
    const pd_scrape_job *j = &c.jobs[0];
    static const char *const names[] = {"allocs", "block", "goroutine",
                                        "heap",   "mutex", "threadcreate"};
    assert_int_equal(j->n_endpoints, 7);
    for (size_t i = 0; i < 6; i++) {
        char want[64];
        const pd_pprof_endpoint *x = ep(j, names[i]);
        assert_non_null(x);
        snprintf(want, sizeof want, "/debug/pprof/%s", names[i]);
        assert_string_equal(x->path, want);
        assert_true(x->enabled);
        assert_int_equal(x->seconds, 0);
        assert_int_equal(x->timeout_ms, 10000);
    }
    const pd_pprof_endpoint *cpu = ep(j, "cpu");
    assert_string_equal(cpu->path, "/debug/pprof/profile");
    assert_true(cpu->enabled);
    /* rule of config.h: T=10s, margin max(1s, T/10)=1s, S=9 */
    assert_int_equal(cpu->seconds, 9);
    assert_int_equal(cpu->timeout_ms, 10000);
    pd_config_release(&c);

    /* an empty file is a valid configuration without jobs */
    assert_int_equal(parse("", &c, &e), 0);
    assert_int_equal(c.n_jobs, 0);
    pd_config_release(&c);

    /* a global interval under 10s caps the default timeout */
    assert_int_equal(parse("global: {scrape_interval: 4s}\n", &c, &e), 0);
    assert_int_equal(c.scrape_timeout_ms, 4000);
    pd_config_release(&c);

    /* job timeout unset: min(global timeout, job interval) */
    assert_int_equal(parse("scrape_configs:\n"
                           "  - job_name: fast\n"
                           "    scrape_interval: 2s\n"
                           "    static_configs: [{targets: ['a:1']}]\n",
                           &c, &e),
                     0);
    assert_int_equal(c.jobs[0].timeout_ms, 2000);
    assert_int_equal(ep(&c.jobs[0], "cpu")->seconds, 1);
    pd_config_release(&c);
}

static void test_cpu_rule(void **state)
{
    (void)state;
    /* the examples written in config.h */
    assert_int_equal(pd_config_default_cpu_seconds(10000), 9);
    assert_int_equal(pd_config_default_cpu_seconds(5000), 4);
    assert_int_equal(pd_config_default_cpu_seconds(2000), 1);
    assert_int_equal(pd_config_default_cpu_seconds(60000), 54);
    assert_int_equal(pd_config_default_cpu_seconds(1000), 1);
    assert_int_equal(pd_config_default_cpu_seconds(300), 1);
    /* the profile window plus its margin always fits in the timeout when T >= 2s */
    for (int64_t t = 2000; t <= 600000; t += 500) {
        int64_t s = pd_config_default_cpu_seconds(t);
        assert_true(s >= 1);
        assert_int_equal(pd_config_endpoint_timeout_ms(t, s), t);
    }
    /* too short a timeout is raised to the window plus 1s */
    assert_int_equal(pd_config_endpoint_timeout_ms(300, 1), 2000);
    assert_int_equal(pd_config_endpoint_timeout_ms(300, 0), 300);
    assert_int_equal(pd_config_endpoint_timeout_ms(5000, 20), 22000);
}

/* Regression (fuzz_config): the CPU seconds rule computed ceil(T/10) as
 * (T + 9) / 10, a signed overflow for a timeout within 9 ms of INT64_MAX —
 * reachable from a file with scrape_interval and scrape_timeout
 * 106751991167d7h12m55s807ms (= INT64_MAX ms). The endpoint timeout rule
 * must saturate instead of overflowing for huge seconds too. */
static void test_cpu_rule_huge_timeout(void **state)
{
    (void)state;
    const int64_t T = INT64_MAX; /* 9223372036854775807 ms */
    /* M = ceil(T/10) = 922337203685477581, S = floor((T - M) / 1000) */
    assert_true(pd_config_default_cpu_seconds(T) == 8301034833169298LL);
    assert_true(pd_config_default_cpu_seconds(T - 5) == (T - 5 - 922337203685477581LL) / 1000);
    assert_true(pd_config_endpoint_timeout_ms(T, 8301034833169298LL) == T);
    assert_true(pd_config_endpoint_timeout_ms(1000, INT64_MAX) == INT64_MAX);
    assert_true(pd_config_endpoint_timeout_ms(1000, INT64_MAX / 1000) == INT64_MAX);

    const char *y = "scrape_configs:\n"
                    "  - job_name: a\n"
                    "    scrape_interval: 106751991167d7h12m55s807ms\n"
                    "    scrape_timeout: 106751991167d7h12m55s807ms\n"
                    "    static_configs: [{targets: ['h:1']}]\n";
    pd_config c;
    pd_err e;
    assert_int_equal(parse(y, &c, &e), 0);
    assert_true(c.jobs[0].timeout_ms == T);
    const pd_pprof_endpoint *cpu = ep(&c.jobs[0], "cpu");
    assert_non_null(cpu);
    assert_true(cpu->seconds == 8301034833169298LL);
    assert_true(cpu->timeout_ms == T);
    pd_config_release(&c);
}

typedef struct bad_case {
    const char *yaml;
    int line; /* 1-based */
    const char *substr;
} bad_case;

static void test_errors(void **state)
{
    (void)state;
    static const bad_case cases[] = {
        {"global:\n  scrape_interval: 10s\nfoo: 1\n", 3, "unknown key \"foo\""},
        {"global:\n  scrape_interval: 10s\n  evaluation_intervals: 1m\n", 3, "unknown key"},
        {"scrape_configs:\n  - job_name: a\n    metric_path: /x\n", 3,
         "unknown key \"metric_path\""},
        {"global:\n  scrape_interval: [1]\n", 2, "expected a string"},
        {"global:\n  scrape_interval: 10 s\n", 2, "invalid duration"},
        {"global:\n  scrape_interval: 0\n", 2, "greater than 0"},
        {"global:\n  scrape_interval: 5s\n  scrape_timeout: 6s\n", 3, "greater than"},
        {"scrape_configs:\n  - job_name: a\n    scrape_interval: 5s\n    scrape_timeout: 6s\n", 4,
         "greater than scrape_interval"},
        {"scrape_configs:\n  - job_name: a\n  - job_name: b\n  - job_name: a\n", 4,
         "duplicate job_name"},
        {"scrape_configs:\n  - scheme: http\n", 2, "no job_name"},
        {"scrape_configs:\n  - job_name: ''\n", 2, "job_name is empty"},
        {"scrape_configs:\n  - job_name: a\n    static_configs:\n      - targets: []\n", 4,
         "no targets"},
        {"scrape_configs:\n  - job_name: a\n    static_configs:\n      - labels: {a: b}\n", 4,
         "no targets"},
        {"scrape_configs:\n  - job_name: a\n    static_configs:\n      - targets:\n          - "
         "''\n",
         5, "invalid target"},
        {"scrape_configs:\n  - job_name: a\n    static_configs:\n      - targets: ['http://h:1']\n",
         4, "invalid target"},
        {"scrape_configs:\n  - job_name: a\n    static_configs:\n      - targets: ['h:99999']\n", 4,
         "invalid target"},
        {"scrape_configs:\n  - job_name: a\n    static_configs:\n      - targets: ['h:1']\n"
         "        labels:\n          \"bad\\tname\": x\n",
         6, "not a valid label name"},
        {"scrape_configs:\n  - job_name: a\n    static_configs:\n      - targets: ['h:1']\n"
         "        labels:\n          __name__: x\n",
         6, "reserved"},
        {"scrape_configs:\n  - job_name: a\n    scheme: ftp\n", 3, "want http or https"},
        {"scrape_configs:\n  - job_name: a\n    params:\n      x: y\n", 4, "expected a list"},
        {"scrape_configs:\n  - job_name: a\n    profiling_config:\n      pprof_config:\n"
         "        custom: {enabled: true}\n",
         5, "needs a path"},
        {"scrape_configs:\n  - job_name: a\n    profiling_config:\n      pprof_config:\n"
         "        \"my\\ttype\": {path: /x}\n",
         5, "invalid profile type name"},
        {"scrape_configs:\n  - job_name: a\n    profiling_config:\n      pprof_config:\n"
         "        heap:\n          enabled: maybe\n",
         6, "expected true or false"},
        {"scrape_configs:\n  - job_name: a\n    profiling_config:\n      pprof_config:\n"
         "        cpu:\n          seconds: 2.5\n",
         6, "expected an integer"},
        {"scrape_configs:\n  - job_name: a\n    scrape_interval: 5s\n    profiling_config:\n"
         "      pprof_config:\n        cpu:\n          seconds: 30\n",
         7, "longer than the scrape_interval"},
        {"scrape_configs:\n  - job_name: a\n    profiling_config:\n      pprof_config:\n"
         "        heap:\n          path: debug/heap\n",
         6, "must start with"},
        {"scrape_configs:\n  - job_name: a\n    profiling_config:\n      pprof_config:\n"
         "        heap:\n          colour: red\n",
         6, "unknown key \"colour\""},
        {"scrape_configs:\n  - job_name: a\n    job_name: b\n", 3, "duplicate key"},
        {"scrape_configs: {job_name: a}\n", 1, "expected a list"},
        {"global:\n  scrape_interval: 10s\n   bad: [\n", 3, "YAML"},
        {"- just\n- a list\n", 1, "expected a mapping"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        pd_config c;
        pd_err e;
        int rc = parse(cases[i].yaml, &c, &e);
        char want[32];
        snprintf(want, sizeof want, "cfg.yaml:%d:", cases[i].line);
        if (rc == 0 || !strstr(e.msg, want) || !strstr(e.msg, cases[i].substr))
            fail_msg("case %zu: rc=%d msg=\"%s\"; want line %d and \"%s\"", i, rc, e.msg,
                     cases[i].line, cases[i].substr);
        assert_true(rc == PD_EINVAL || rc == PD_EPARSE);
        assert_int_equal(c.n_jobs, 0); /* left empty */
    }
}

static void test_load_file(void **state)
{
    (void)state;
    pd_config c;
    pd_err e;
    pd_err_clear(&e);
    assert_int_equal(pd_config_load_file("/nonexistent/profd.yaml", &c, &e), -ENOENT);
    assert_non_null(strstr(e.msg, "/nonexistent/profd.yaml"));

    char path[] = "/tmp/profd-cfg-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *y = "scrape_configs:\n  - job_name: f\n    static_configs: [{targets: ['a:1']}]\n"
                    "  - job_name: g\n    scrape_interval: nope\n";
    assert_int_equal(write(fd, y, strlen(y)), (ssize_t)strlen(y));
    close(fd);
    int rc = pd_config_load_file(path, &c, &e);
    assert_int_equal(rc, PD_EINVAL);
    char want[64];
    snprintf(want, sizeof want, "%s:5:22:", path); /* the file name, line and column */
    if (!strstr(e.msg, want))
        fail_msg("got \"%s\", want \"%s\"", e.msg, want);
    unlink(path);
}

/* Each warning in order, exactly: "cfg.yaml:LINE:COL: text". */
static void check_warnings(const pd_config *c, const char *const *want, size_t n)
{
    for (size_t i = 0; i < c->n_warnings && i < n; i++)
        if (strcmp(c->warnings[i], want[i]) != 0) {
            print_error("warning %zu:\n got  %s\n want %s\n", i, c->warnings[i], want[i]);
            fail();
        }
    if (c->n_warnings != n) {
        for (size_t i = 0; i < c->n_warnings; i++)
            print_error("  %s\n", c->warnings[i]);
        print_error("%zu warnings, want %zu\n", c->n_warnings, n);
        fail();
    }
}

/* The structure of Prometheus' documentation/examples/prometheus.yml and of
 * Debian's /etc/prometheus/prometheus.yml (written anew, targets local). */
static void test_prometheus_example(void **state)
{
    (void)state;
    const char *y = "# my global config\n"
                    "global:\n"
                    "  scrape_interval: 15s\n"
                    "  evaluation_interval: 15s\n"
                    "  external_labels:\n"
                    "    monitor: 'example'\n"
                    "alerting:\n"
                    "  alertmanagers:\n"
                    "    - static_configs:\n"
                    "        - targets: ['localhost:9093']\n"
                    "rule_files:\n"
                    "  # - \"first_rules.yml\"\n"
                    "scrape_configs:\n"
                    "  - job_name: 'prometheus'\n"
                    "    scrape_interval: 5s\n"
                    "    scrape_timeout: 5s\n"
                    "    metrics_path: /metrics\n"
                    "    honor_labels: false\n"
                    "    static_configs:\n"
                    "      - targets: ['localhost:9090', 'localhost:9090']\n"
                    "  - job_name: node\n"
                    "    static_configs:\n"
                    "      - targets: ['localhost:9100']\n"
                    "    metric_relabel_configs: []\n"
                    "    file_sd_configs:\n"
                    "      - files: ['targets/*.json']\n"
                    "    kubernetes_sd_configs:\n"
                    "      - role: pod\n"
                    "remote_write:\n"
                    "  - url: http://localhost:9201/write\n";
    pd_config c;
    pd_err e;
    assert_int_equal(parse(y, &c, &e), 0);
    assert_int_equal(c.dialect, PD_DIALECT_PROMETHEUS);
    assert_int_equal(c.scrape_interval_ms, 15000);
    assert_int_equal(c.scrape_timeout_ms, 10000);
    assert_string_equal(pd_labels_get(&c.external_labels, "monitor"), "example");
    const pd_scrape_job *j = job(&c, "prometheus");
    assert_non_null(j);
    assert_int_equal(j->interval_ms, 5000);
    assert_int_equal(j->static_configs[0].n_targets, 1); /* the duplicate is dropped */
    assert_string_equal(j->metrics_path, "/metrics");
    assert_non_null(ep(j, "cpu"));
    assert_int_equal(ep(j, "cpu")->seconds, 4);
    assert_int_equal(job(&c, "node")->interval_ms, 15000);
    assert_int_equal(job(&c, "node")->sd[0].kind, PD_SD_FILE);
    assert_string_equal(job(&c, "node")->sd[0].files[0], "targets/*.json");
    assert_int_equal(job(&c, "node")->sd[0].refresh_ms, 300000);
    assert_int_equal(job(&c, "node")->n_sd, 2); /* kubernetes_sd_configs, in-cluster */
    assert_int_equal(job(&c, "node")->sd[1].kind, PD_SD_K8S);
    assert_int_equal(job(&c, "node")->sd[1].role, PD_K8S_POD);
    assert_null(job(&c, "node")->sd[1].api_server);

    static const char *const want[] = {
        "cfg.yaml:7:1: the top level: \"alerting\" ignored: profd sends no alerts",
        "cfg.yaml:11:1: the top level: \"rule_files\" ignored: profd evaluates no rules",
        "cfg.yaml:29:1: the top level: \"remote_write\" ignored: profd writes no metrics remotely",
        "cfg.yaml:4:3: global: \"evaluation_interval\" ignored: profd evaluates no rules",
        "cfg.yaml:20:37: duplicate target \"localhost:9090\" in this static_configs entry dropped",
        "cfg.yaml:24:5: scrape_configs entry: \"metric_relabel_configs\" ignored: profiles have no "
        "metric series to relabel",
    };
    check_warnings(&c, want, sizeof want / sizeof *want);
    pd_config_release(&c);
    assert_int_equal(parse("scrape_configs:\n  - job_name: d\n    dns_sd_configs:\n"
                           "      - names: ['_x._tcp.example']\n      - names: [a.example]\n"
                           "        type: A\n        port: 6060\n        refresh_interval: 5s\n"
                           "    http_sd_configs: [{url: 'http://127.0.0.1:1/sd'}]\n",
                           &c, &e),
                     0);
    j = &c.jobs[0];
    assert_int_equal(j->n_sd, 3);
    assert_int_equal(j->sd[0].kind, PD_SD_HTTP);
    assert_int_equal(j->sd[0].refresh_ms, 60000);
    assert_int_equal(j->sd[1].kind, PD_SD_DNS);
    assert_int_equal(j->sd[1].refresh_ms, 30000);
    assert_int_equal(j->sd[1].port, 0);
    assert_int_equal(j->sd[2].port, 6060);
    assert_int_equal(j->sd[2].refresh_ms, 5000);
    assert_string_equal(j->sd[2].files[0], "a.example");
    pd_config_release(&c);
}

/* The structure of Parca's parca.yaml and its docs' scrape examples. */
static void test_parca_example(void **state)
{
    (void)state;
    const char *y = "object_storage:\n"
                    "  bucket:\n"
                    "    type: \"FILESYSTEM\"\n"
                    "    config:\n"
                    "      directory: \"./data\"\n"
                    "scrape_configs:\n"
                    "  - job_name: \"default\"\n"
                    "    scrape_interval: \"3s\"\n"
                    "    static_configs:\n"
                    "      - targets: [ '127.0.0.1:7070' ]\n"
                    "  - job_name: \"app\"\n"
                    "    scrape_interval: 10s\n"
                    "    scrape_timeout: 15s\n"
                    "    static_configs:\n"
                    "      - targets: ['127.0.0.1:6060']\n"
                    "    relabel_configs:\n"
                    "      - source_labels: [__address__]\n"
                    "        regex: '(.*):6060'\n"
                    "        target_label: host\n"
                    "    profiling_config:\n"
                    "      path_prefix: /app\n"
                    "      pprof_config:\n"
                    "        memory:\n"
                    "          keep_sample_type:\n"
                    "            - type: inuse_space\n"
                    "              unit: bytes\n"
                    "            - type: alloc_objects\n"
                    "        process_cpu:\n"
                    "          enabled: false\n"
                    "        fgprof:\n"
                    "          enabled: true\n"
                    "          path: /debug/fgprof\n"
                    "          delta: true\n";
    pd_config c;
    pd_err e;
    assert_int_equal(parse(y, &c, &e), 0);
    assert_int_equal(c.dialect, PD_DIALECT_PARCA);
    const pd_scrape_job *d = job(&c, "default");
    assert_int_equal(d->interval_ms, 3000);
    assert_int_equal(d->timeout_ms, 6000); /* Parca: interval + 3s */
    assert_int_equal(d->n_endpoints, 5);
    assert_string_equal(ep(d, "memory")->path, "/debug/pprof/allocs");
    assert_null(ep(d, "heap"));
    assert_true(ep(d, "process_cpu")->enabled);
    assert_true(ep(d, "process_cpu")->delta);
    assert_int_equal(ep(d, "process_cpu")->seconds, 3); /* ?seconds=<interval> */
    const pd_scrape_job *a = job(&c, "app");
    assert_int_equal(a->timeout_ms, 15000);
    assert_false(ep(a, "process_cpu")->enabled); /* no path needed to turn it off */
    assert_string_equal(ep(a, "memory")->path, "/app/debug/pprof/allocs");
    assert_string_equal(ep(a, "fgprof")->path, "/app/debug/fgprof");
    assert_int_equal(ep(a, "fgprof")->seconds, 10);
    assert_int_equal(a->n_relabel, 1);
    static const char *const want[] = {
        "cfg.yaml:1:1: the top level: \"object_storage\" ignored: Parca's block storage: profd "
        "stores under --storage.path",
    };
    assert_string_equal(ep(a, "memory")->keep_sample_types,
                        "inuse_space\tbytes\nalloc_objects\t\n");
    assert_null(ep(a, "fgprof")->keep_sample_types);
    check_warnings(&c, want, sizeof want / sizeof *want);
    pd_config_release(&c);

    /* Parca's rule: the timeout must be over the interval */
    static const bad_case bad[] = {
        {"object_storage: {}\nscrape_configs:\n  - job_name: a\n    scrape_interval: 10s\n"
         "    scrape_timeout: 10s\n",
         5, "must be greater than scrape_interval (10s)"},
        {"scrape_configs:\n  - job_name: a\n    scrape_interval: 500ms\n    scrape_timeout: 1s\n"
         "    profiling_config:\n      pprof_config:\n        process_cpu: {enabled: true}\n",
         7, "process_cpu scrape_timeout must be at least 2 seconds"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char want_pfx[32];
        assert_int_not_equal(parse(bad[i].yaml, &c, &e), 0);
        snprintf(want_pfx, sizeof want_pfx, "cfg.yaml:%d:", bad[i].line);
        if (strncmp(e.msg, want_pfx, strlen(want_pfx)) || !strstr(e.msg, bad[i].substr)) {
            print_error("parca case %zu: %s\n", i, e.msg);
            fail();
        }
    }
}

/* The structure of conprof's examples/conprof.yaml. */
static void test_conprof_example(void **state)
{
    (void)state;
    const char *y = "scrape_configs:\n"
                    "  - job_name: 'conprof'\n"
                    "    scrape_interval: 1m\n"
                    "    scrape_timeout: 1m\n"
                    "    static_configs:\n"
                    "      - targets: ['localhost:10902']\n"
                    "    profiling_config:\n"
                    "      pprof_config:\n"
                    "        profile:\n"
                    "          enabled: false\n"
                    "        trace:\n"
                    "          enabled: false\n"
                    "        heap:\n"
                    "          path: /debug/pprof/heap\n";
    pd_config c;
    pd_err e;
    assert_int_equal(parse(y, &c, &e), 0);
    assert_int_equal(c.dialect, PD_DIALECT_CONPROF);
    const pd_scrape_job *j = job(&c, "conprof");
    assert_int_equal(j->n_endpoints, 8);
    assert_false(ep(j, "profile")->enabled);
    assert_false(ep(j, "trace")->enabled);
    assert_null(ep(j, "cpu"));
    assert_true(ep(j, "threadcreate")->enabled);
    check_warnings(&c, NULL, 0);
    pd_config_release(&c);
    /* profile is the CPU profile: seconds from the timeout rule */
    assert_int_equal(parse("scrape_configs:\n  - job_name: a\n    profiling_config:\n"
                           "      pprof_config:\n        profile: {enabled: true}\n",
                           &c, &e),
                     0);
    assert_int_equal(ep(&c.jobs[0], "profile")->seconds, 9);
    pd_config_release(&c);
}

static void test_client_options(void **state)
{
    (void)state;
    const char *y = "scrape_configs:\n"
                    "  - job_name: a\n"
                    "    scheme: https\n"
                    "    body_size_limit: 2MB\n"
                    "    follow_redirects: false\n"
                    "    enable_http2: false\n"
                    "    proxy_url: http://127.0.0.1:3128\n"
                    "    basic_auth:\n"
                    "      username: u\n"
                    "      password_file: secrets/pw\n"
                    "    tls_config:\n"
                    "      ca_file: /etc/ca.pem\n"
                    "      cert_file: c.pem\n"
                    "      key_file: k.pem\n"
                    "      server_name: example\n"
                    "      insecure_skip_verify: true\n"
                    "      min_version: TLS12\n"
                    "  - job_name: b\n"
                    "    bearer_token_file: /run/token\n"
                    "  - job_name: c\n"
                    "    authorization: {type: Token, credentials: s3cret}\n"
                    "  - job_name: d\n"
                    "    oauth2:\n"
                    "      client_id: x\n"
                    "      client_secret_file: sec\n"
                    "      token_url: https://auth.example/token\n"
                    "      scopes: [a, b c]\n"
                    "      endpoint_params: {audience: 'p&q'}\n";
    pd_config c;
    pd_err e;
    pd_err_clear(&e);
    assert_int_equal(pd_config_parse(y, strlen(y), "/etc/profd/cfg.yaml", &c, &e), 0);
    const pd_scrape_client *a = &job(&c, "a")->client;
    assert_int_equal(job(&c, "a")->body_size_limit, 2u << 20);
    assert_false(a->follow_redirects);
    assert_false(a->enable_http2);
    assert_string_equal(a->proxy_url, "http://127.0.0.1:3128");
    assert_string_equal(a->basic_username, "u");
    assert_string_equal(a->basic_password_file, "/etc/profd/secrets/pw");
    assert_string_equal(a->ca_file, "/etc/ca.pem");
    assert_string_equal(a->cert_file, "/etc/profd/c.pem");
    assert_string_equal(a->server_name, "example");
    assert_true(a->insecure_skip_verify);
    assert_int_equal(a->tls_min_version, 12);
    const pd_scrape_client *b = &job(&c, "b")->client;
    assert_string_equal(b->auth_type, "Bearer");
    assert_string_equal(b->auth_credentials_file, "/run/token");
    assert_true(b->follow_redirects);
    const pd_scrape_client *cc = &job(&c, "c")->client;
    assert_string_equal(cc->auth_type, "Token");
    assert_string_equal(cc->auth_credentials, "s3cret");
    const pd_scrape_client *d = &job(&c, "d")->client;
    assert_string_equal(d->oauth2_client_id, "x");
    assert_string_equal(d->oauth2_client_secret_file, "/etc/profd/sec");
    assert_string_equal(d->oauth2_token_url, "https://auth.example/token");
    assert_string_equal(d->oauth2_scopes, "a b c");
    assert_string_equal(d->oauth2_params, "&audience=p%26q");
    pd_scrape_client dc;
    assert_int_equal(pd_scrape_client_copy(&dc, d), 0);
    assert_string_equal(dc.oauth2_params, d->oauth2_params);
    pd_scrape_client_release(&dc);
    check_warnings(&c, NULL, 0);
    pd_config_release(&c);

    static const bad_case bad[] = {
        {"scrape_configs:\n  - job_name: a\n    basic_auth: {username: u}\n    bearer_token: t\n",
         4, "at most one of basic_auth"},
        {"scrape_configs:\n  - job_name: a\n    basic_auth: {username: u}\n    oauth2: {token_url: "
         "'http://x/t'}\n",
         4, "at most one of basic_auth, authorization, oauth2"},
        {"scrape_configs:\n  - job_name: a\n    oauth2: {client_id: x}\n", 3,
         "oauth2 needs a token_url"},
        {"scrape_configs:\n  - job_name: a\n    kubernetes_sd_configs: [{role: pods}]\n", 3,
         "unknown Kubernetes SD role \"pods\""},
        {"scrape_configs:\n  - job_name: a\n    kubernetes_sd_configs:\n      - role: pod\n"
         "        selectors: [{role: node}]\n",
         5, "selector role \"node\" is not usable"},
        {"scrape_configs:\n  - job_name: a\n    kubernetes_sd_configs:\n      - role: pod\n"
         "        bearer_token: t\n",
         4, "please provide the 'api_server'"},
        {"scrape_configs:\n  - job_name: a\n    kubernetes_sd_configs:\n      - role: node\n"
         "        api_server: http://x\n        kubeconfig_file: k\n",
         5, "'kubeconfig_file' and 'api_server'"},
        {"scrape_configs:\n  - job_name: a\n    authorization: {type: Basic}\n", 3,
         "use \"basic_auth\""},
        {"scrape_configs:\n  - job_name: a\n    tls_config: {cert_file: c}\n", 3, "give both"},
        {"scrape_configs:\n  - job_name: a\n    tls_config:\n      min_version: TLS9\n", 4,
         "unknown TLS version"},
        {"scrape_configs:\n  - job_name: a\n    body_size_limit: lots\n", 3, "body_size_limit"},
        {"scrape_configs:\n  - job_name: a\n    proxy_url: ftp://x\n", 3, "proxy_url"},
        {"scrape_configs:\n  - job_name: a\n    relabel_configs:\n      - action: hashmod\n"
         "        target_label: h\n",
         4, "non-zero modulus"},
        {"scrape_configs:\n  - job_name: a\n    relabel_configs:\n      - action: nope\n", 4,
         "unknown relabel action"},
        {"scrape_configs:\n  - job_name: a\n    relabel_configs:\n      - regex: 'a('\n"
         "        target_label: x\n",
         4, "invalid regex"},
        {"scrape_configs:\n  - job_name: a\n    relabel_configs:\n      - source_labels: "
         "[\"a\\tb\"]\n",
         4, "not a valid label name"},
        {"scrape_configs:\n  - job_name: a\n    relabel_configs:\n      -\n", 4,
         "empty or null relabeling rule"},
        {"scrape_configs:\n  - job_name: a\n    file_sd_configs:\n      - files: ['a/*/b.json']\n",
         4, "not valid for file discovery"},
        {"scrape_configs:\n  - job_name: a\n    file_sd_configs:\n      - files: ['t.txt']\n", 4,
         "not valid for file discovery"},
        {"scrape_configs:\n  - job_name: a\n    file_sd_configs:\n      - refresh_interval: 1m\n",
         4, "at least one path name"},
        {"scrape_configs:\n  - job_name: a\n    http_sd_configs:\n      - url: ftp://x/\n", 4,
         "URL scheme must be"},
        {"scrape_configs:\n  - job_name: a\n    http_sd_configs:\n      - refresh_interval: 1m\n",
         4, "needs a url"},
        {"scrape_configs:\n  - job_name: a\n    dns_sd_configs:\n      - names: [x]\n        type: "
         "A\n",
         4, "a port is required"},
        {"scrape_configs:\n  - job_name: a\n    dns_sd_configs:\n      - names: [x]\n        type: "
         "MX\n",
         5, "invalid DNS-SD records type"},
        {"scrape_configs:\n  - job_name: a\n    dns_sd_configs:\n      - type: SRV\n", 4,
         "at least one SRV record name"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char want_pfx[32];
        if (parse(bad[i].yaml, &c, &e) == 0) {
            print_error("client case %zu parsed\n", i);
            fail();
        }
        snprintf(want_pfx, sizeof want_pfx, "cfg.yaml:%d:", bad[i].line);
        if (strncmp(e.msg, want_pfx, strlen(want_pfx)) || !strstr(e.msg, bad[i].substr)) {
            print_error("client case %zu: %s (want line %d, \"%s\")\n", i, e.msg, bad[i].line,
                        bad[i].substr);
            fail();
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_cpu_rule),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_cpu_rule_huge_timeout),
        cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_prometheus_example),
        cmocka_unit_test(test_parca_example),
        cmocka_unit_test(test_conprof_example),
        cmocka_unit_test(test_client_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
