/* tests/unit/storage/ch_fixture.h — the fixtures of the ClickHouse backend's
 * unit tests (test_clickhouse.c, test_clickhouse_agg.c): the real profiles of
 * PD_TESTDATA/pprof (g_prof[0..g_n): go-demo-series heap 1-4, cpu 1-2, the
 * go-demo-once set, node when present) and a clickhouse-server the test
 * starts on free loopback ports in its own temp directory (start_server /
 * stop_server as the group's setup and teardown; need_server skips a test
 * where it is not installed), with a clock the test sets (g_now).
 * Include once per test program, after cmocka.h and pd_test.h.
 */
#ifndef PD_TESTS_UNIT_STORAGE_CH_FIXTURE_H
#define PD_TESTS_UNIT_STORAGE_CH_FIXTURE_H

#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/labels.h"
#include "pprof/pprof.h"
#include "storage/clickhouse/ch_int.h"
#include "storage/storage.h"

#ifndef PD_TESTDATA
#error "PD_TESTDATA must be defined"
#endif

#define PD_CH_FIXTURE_FN __attribute__((unused)) static

static const char *CH_BIN = "/usr/sbin/clickhouse-server";

static const char *FILES[] = {
    "go-demo-series/heap-0001.pb.gz",
    "go-demo-series/heap-0002.pb.gz",
    "go-demo-series/heap-0003.pb.gz",
    "go-demo-series/heap-0004.pb.gz",
    "go-demo-series/cpu-0001.pb.gz",
    "go-demo-series/cpu-0002.pb.gz",
    "go-demo-once/allocs.pb.gz",
    "go-demo-once/block.pb.gz",
    "go-demo-once/goroutine.pb.gz",
    "go-demo-once/mutex.pb.gz",
    "go-demo-once/threadcreate.pb.gz",
    "go-demo-once/profile.pb.gz",
    "node/" /* filled below: the node directory's files */,
};
#define N_GO 12

typedef struct tprof {
    char path[512];
    uint8_t *body;
    size_t len;
    pd_profile p;
} tprof;

static tprof g_prof[16];
static size_t g_n;

PD_CH_FIXTURE_FN int load(const char *path, tprof *t)
{
    snprintf(t->path, sizeof t->path, "%s", path);
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    t->body = malloc((size_t)n);
    t->len = fread(t->body, 1, (size_t)n, f);
    fclose(f);
    pd_err err;
    return pd_profile_decode(&t->p, t->body, t->len, NULL, &err);
}

PD_CH_FIXTURE_FN int load_all(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_GO; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/pprof/%s", PD_TESTDATA, FILES[i]);
        if (load(p, &g_prof[g_n]) != 0)
            fail_msg("cannot load %s", p);
        g_n++;
    }
    const char *node[] = {"node-heap.pb.gz", "node-cpu.pb.gz"};
    for (size_t i = 0; i < 2; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/pprof/node/%s", PD_TESTDATA, node[i]);
        if (access(p, R_OK) == 0 && load(p, &g_prof[g_n]) == 0)
            g_n++;
    }
    return 0;
}

/* ---- a real server ---- */

static pid_t g_pid;
static char g_dir[256];
static char g_url[64];
static int64_t g_now;

PD_CH_FIXTURE_FN int64_t fake_clock(void)
{
    return __atomic_load_n(&g_now, __ATOMIC_RELAXED);
}

PD_CH_FIXTURE_FN int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) < 0 ||
        getsockname(s, (struct sockaddr *)&a, &l) < 0)
        return -1;
    close(s);
    return ntohs(a.sin_port);
}

PD_CH_FIXTURE_FN int start_server(void **state)
{
    (void)state;
    if (access(CH_BIN, X_OK) != 0)
        return 0;
    snprintf(g_dir, sizeof g_dir, "/tmp/pd-test-ch-XXXXXX");
    if (!mkdtemp(g_dir))
        return -1;
    int http = free_port(), tcp = free_port(), inter = free_port();
    char path[512];
    snprintf(path, sizeof path, "%s/config.xml", g_dir);
    FILE *f = fopen(path, "w");
    fprintf(
        f,
        "<?xml version=\"1.0\"?>\n<yandex>\n"
        "<logger><level>warning</level><log>%s/server.log</log><errorlog>%s/err.log</errorlog>"
        "<size>10M</size><count>1</count></logger>\n"
        "<http_port>%d</http_port><tcp_port>%d</tcp_port>"
        "<interserver_http_port>%d</interserver_http_port>\n"
        "<listen_host>127.0.0.1</listen_host><path>%s/data/</path><tmp_path>%s/tmp/</tmp_path>\n"
        "<user_files_path>%s/uf/</user_files_path><format_schema_path>%s/fs/</format_schema_path>\n"
        "<mark_cache_size>67108864</mark_cache_size><uncompressed_cache_size>0</"
        "uncompressed_cache_size>"
        "<query_log><database>system</database><table>query_log</table>"
        "<flush_interval_milliseconds>1000</flush_interval_milliseconds></query_log>\n"
        "<users_config>%s/users.xml</users_config><default_profile>default</default_profile>"
        "<default_database>default</default_database><timezone>UTC</timezone>\n</yandex>\n",
        g_dir, g_dir, http, tcp, inter, g_dir, g_dir, g_dir, g_dir, g_dir);
    fclose(f);
    snprintf(path, sizeof path, "%s/users.xml", g_dir);
    f = fopen(path, "w");
    fprintf(f,
            "<?xml version=\"1.0\"?>\n<yandex><profiles><default><log_queries>1</log_queries>"
            "</default></profiles><users><default>"
            "<password></password><networks><ip>127.0.0.1</ip></networks><profile>default</profile>"
            "<quota>default</quota></default></users><quotas><default/></quotas></yandex>\n");
    fclose(f);
    snprintf(g_url, sizeof g_url, "http://127.0.0.1:%d", http);
    g_pid = fork();
    if (g_pid == 0) {
        char cfg[300];
        snprintf(cfg, sizeof cfg, "--config-file=%s/config.xml", g_dir);
        if (chdir(g_dir) != 0)
            _exit(126);
        freopen("/dev/null", "w", stdout);
        freopen("/dev/null", "w", stderr);
        execl(CH_BIN, CH_BIN, cfg, (char *)NULL);
        _exit(127);
    }
    return 0;
}

PD_CH_FIXTURE_FN int stop_server(void **state)
{
    (void)state;
    if (g_pid > 0) {
        kill(g_pid, SIGKILL);
        waitpid(g_pid, NULL, 0);
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
        if (!getenv("PD_KEEP") && system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", g_dir);
    }
    for (size_t i = 0; i < g_n; i++) {
        pd_profile_release(&g_prof[i].p);
        free(g_prof[i].body);
    }
    return 0;
}

PD_CH_FIXTURE_FN void need_server(void)
{
    if (g_pid <= 0) {
        print_message("SKIP: %s is not installed (Debian 12: apt-get install clickhouse-server)\n",
                      CH_BIN);
        skip();
    }
}

PD_CH_FIXTURE_FN pd_storage_options ch_opts(const char *const *urls, size_t n, const char *db)
{
    pd_storage_options o = pd_storage_options_default();
    o.backend = PD_STORAGE_CLICKHOUSE;
    o.clickhouse.urls = urls;
    o.clickhouse.n_urls = n;
    o.clickhouse.database = db;
    o.clickhouse.retries = 3;
    /* aggs_v1 rows beside every batch (the tests of deferred sums,
       test_clickhouse_agg.c's, set their own) */
    o.clickhouse.agg_flush_idle_ms = -1;
    o.clock_ms = fake_clock;
    o.retention_ms = 3ll * 86400000;
    o.maintenance_ms = -1;
    /* reads go to ClickHouse: the tests check what it answers and how
       (statements, rows read); test_merges_cached turns the cache on */
    o.clickhouse.cache_bytes = -1;
    return o;
}

/* Opens, waiting up to 60 s for the server to start. */
PD_CH_FIXTURE_FN pd_storage *open_store(const char *db)
{
    const char *urls[] = {g_url};
    pd_storage_options o = ch_opts(urls, 1, db);
    pd_storage *s = NULL;
    pd_err err;
    for (int i = 0; i < 240; i++) {
        if (pd_storage_open(&o, &s, &err) == 0)
            return s;
        usleep(250000);
    }
    fail_msg("cannot open ClickHouse storage at %s: %s", g_url, err.msg);
    return NULL;
}

PD_CH_FIXTURE_FN void labels(pd_labels *ls, const char *name, const char *inst, const char *extra)
{
    pd_err err;
    pd_labels_init(ls);
    PD_ASSERT_OK(pd_labels_set(ls, "__name__", name, &err), &err);
    PD_ASSERT_OK(pd_labels_set(ls, "instance", inst, &err), &err);
    if (extra)
        PD_ASSERT_OK(pd_labels_set(ls, "note", extra, &err), &err);
}

/* An embedded store in a new directory made from the mkdtemp template dir
 * (fake clock, no maintenance, no blocks cut): the answers ClickHouse's must
 * equal. Close and remove it with rm_tsdb. */
PD_CH_FIXTURE_FN pd_storage *open_tsdb(char *dir)
{
    assert_non_null(mkdtemp(dir));
    pd_storage_options o = pd_storage_options_default();
    o.path = dir;
    o.fsync = PD_FSYNC_NEVER;
    o.clock_ms = fake_clock;
    o.maintenance_ms = -1;
    o.block_duration_ms = -1;
    pd_storage *ts;
    pd_err err;
    PD_ASSERT_OK(pd_storage_open(&o, &ts, &err), &err);
    return ts;
}

PD_CH_FIXTURE_FN void rm_tsdb(pd_storage *ts, const char *dir)
{
    pd_storage_close(ts);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* Runs the query fmt... (printf; answering one UInt64 in RowBinary) on c's
 * server; its answer. */
__attribute__((format(printf, 2, 3))) PD_CH_FIXTURE_FN uint64_t ch_u64(pd_ch *c, const char *fmt,
                                                                       ...)
{
    char sql[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    pd_err err;
    pd_buf resp;
    pd_buf_init(&resp, 0);
    PD_ASSERT_OK(pd__ch_exec(c, sql, NULL, 0, NULL, &resp, NULL, &err), &err);
    ch_rd r = {(const uint8_t *)resp.data, resp.len, 0, false};
    uint64_t v = pd__ch_rd_u64(&r);
    assert_false(r.bad);
    pd_buf_release(&resp);
    return v;
}

#endif
