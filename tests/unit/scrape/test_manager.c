/* Tests of src/scrape/manager.c against a real HTTP server (libmicrohttpd on
 * 127.0.0.1, port 0) serving the real profiles of testdata, and a real
 * storage in a temp directory.
 *
 * The schedule runs on a clock the test moves (pd_scrape_manager_set_clock):
 * the loop is stepped on the test's thread (pd__scrape_round) or runs on its
 * own thread and is woken after each move. No assertion depends on how fast
 * this machine is: what is due at each instant of the test's clock is run,
 * and the tests count and check exactly that. Waits on real time only bound a
 * hang (60 s).
 *
 * Server paths: /debug/pprof/<name> -> testdata go-demo-once/<name>.pb.gz
 * (cpu: profile.pb.gz, the "seconds" query value is recorded); /missing ->
 * 404; /garbage -> 200 with a body that is not a profile; /slow -> held until
 * the server stops (past any scrape timeout); /hold -> the same, counted in
 * hold_requests; /late -> answers once the test's clock is 1.1 or 0.5
 * intervals (alternately) past the request; /big -> 200 with a body 4x the
 * body cap. */
#include <arpa/inet.h>
#include <errno.h>
#include <ftw.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include "../pd_test.h"
#include <jansson.h>
#include <microhttpd.h>

#include "base/labels.h"
#include "base/metrics.h"
#include "base/time.h"
#include "scrape/manager.h"
#include "scrape/scrape_int.h"
#include "store_fixture.h"

#define BODY_CAP (64 * 1024)

/* ---- the test server ---- */

static atomic_bool server_stopping;
static atomic_int cpu_requests, hold_requests, late_requests;

/* ---- the test's clock ---- */

#define LATE_IV 60000 /* test_slot_met_busy: the interval of /late (ms on the test's clock) */
#define MONO0 1000000 /* the test clock's monotonic ms at the start of each test */
static _Atomic int64_t fake_ms; /* monotonic ms, moved by the tests only */
static int64_t fake_wall0;      /* Unix ms at fake_ms == MONO0 */

static int64_t fake_mono(void *arg)
{
    (void)arg;
    return fake_ms;
}

static int64_t fake_wall(void *arg)
{
    (void)arg;
    return fake_wall0 + (fake_ms - MONO0);
}

static const pd_scrape_clock fake_clock = {fake_mono, fake_wall, NULL};

static int64_t wall_of(int64_t mono)
{
    return fake_wall0 + (mono - MONO0);
}

/* Real monotonic ms: only to bound waits (a hang). */
static int64_t real_ms(void)
{
    return pd_mono_ns() / 1000000;
}

#define HANG_MS 120000 /* a hang guard: no assertion depends on it */
static char cpu_seconds[32];
static pthread_mutex_t server_mu = PTHREAD_MUTEX_INITIALIZER;

static int read_file(const char *path, char **data, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *data = malloc((size_t)n + 1);
    *len = fread(*data, 1, (size_t)n, f);
    fclose(f);
    return (long)*len == n ? 0 : -1;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const void *body,
                             size_t len)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    enum MHD_Result rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

/* Endless zeros, chunked; stops at 4x the cap so a broken cap ends too. */
static ssize_t zeros(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)cls;
    if (pos >= BODY_CAP * 4 || server_stopping)
        return MHD_CONTENT_READER_END_OF_STREAM;
    memset(buf, 0, max);
    return (ssize_t)max;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *upload,
                               size_t *upload_len, void **con_cls)
{
    (void)cls, (void)method, (void)version, (void)upload, (void)upload_len, (void)con_cls;
    if (!strcmp(url, "/missing"))
        return reply(c, 404, "not here\n", 9);
    if (!strcmp(url, "/garbage"))
        return reply(c, 200, "this is not a profile", 21);
    if (!strcmp(url, "/big")) {
        char *b = calloc(1, BODY_CAP * 4);
        enum MHD_Result rc = reply(c, 200, b, BODY_CAP * 4);
        free(b);
        return rc;
    }
    if (!strcmp(url, "/bigchunked")) { /* no Content-Length: the write callback must cap */
        struct MHD_Response *r =
            MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, zeros, NULL, NULL);
        enum MHD_Result rc = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        return rc;
    }
    const char *name = NULL;
    if (!strcmp(url, "/late")) {
        /* test_slot_met_busy: the n-th request is answered once the test's
         * clock is 1.1 (n even) or 0.5 (n odd) intervals past its arrival */
        int64_t at = fake_ms;
        int n = atomic_fetch_add(&late_requests, 1);
        int64_t due = at + (n % 2 ? LATE_IV / 2 : LATE_IV * 11 / 10);
        while (fake_ms < due && !server_stopping)
            usleep(1000);
        name = "profile";
    } else if (!strcmp(url, "/slow") || !strcmp(url, "/hold")) {
        if (!strcmp(url, "/hold"))
            hold_requests++;
        for (int i = 0; i < 30000 && !server_stopping; i++) /* until the server stops (300 s) */
            usleep(10000);
        name = "heap";
    } else if (!strncmp(url, "/debug/pprof/", 13)) {
        name = url + 13;
        if (!strcmp(name, "profile")) {
            const char *s = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "seconds");
            pthread_mutex_lock(&server_mu);
            snprintf(cpu_seconds, sizeof cpu_seconds, "%s", s ? s : "(none)");
            pthread_mutex_unlock(&server_mu);
            cpu_requests++;
        }
    }
    char path[512], *data;
    size_t len;
    if (!name || strchr(name, '/') ||
        (snprintf(path, sizeof path, "%s/pprof/go-demo-once/%s.pb.gz", PD_TESTDATA, name),
         read_file(path, &data, &len) != 0))
        return reply(c, 404, "no such profile\n", 16);
    enum MHD_Result rc = reply(c, 200, data, len);
    free(data);
    return rc;
}

/* ---- fixture ---- */

typedef struct fixture {
    struct MHD_Daemon *d;
    int port, dead_port;
    char dir[64];
    pd_storage *st;
    pd_scrape_manager *m;
} fixture;

static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) ||
        getsockname(s, (struct sockaddr *)&a, &al))
        return -1;
    close(s); /* nothing listens there afterwards */
    return ntohs(a.sin_port);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    server_stopping = false;
    cpu_requests = hold_requests = late_requests = 0;
    /* the test's wall clock: 30 minutes ago (in the store's bounds however far
     * a test moves it), on a whole minute */
    fake_wall0 = (pd_now_ms() - 30 * 60000) / 60000 * 60000;
    fake_ms = MONO0;
    f->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION, 0,
                            NULL, NULL, handler, NULL, MHD_OPTION_LISTENING_ADDRESS_REUSE, 1,
                            MHD_OPTION_SOCK_ADDR,
                            (struct sockaddr *)&(struct sockaddr_in){
                                .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)},
                            MHD_OPTION_END);
    if (!f->d)
        return -1;
    f->port = MHD_get_daemon_info(f->d, MHD_DAEMON_INFO_BIND_PORT)->port;
    f->dead_port = free_port();
    snprintf(f->dir, sizeof f->dir, "/tmp/profd-scrape-XXXXXX");
    if (store_fixture_open(f->dir, &f->st) < 0)
        return -1;
    pd_metrics_reset();
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    pd_scrape_manager_free(f->m);
    server_stopping = true;
    MHD_stop_daemon(f->d);
    store_fixture_close(f->st, f->dir);
    free(f);
    return 0;
}

/* ---- helpers ---- */

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) && errno == EINTR)
        ;
}

/* Steps m's loop (not started) until every slot up to the test clock's now
 * has run and no transfer is in flight but `held` ones the server holds.
 * Returns the ms to the next slot. Fails after HANG_MS of real time. */
static int64_t settle_held(pd_scrape_manager *m, int held)
{
    int64_t deadline = real_ms() + HANG_MS;
    for (;;) {
        int running;
        int64_t next = pd__scrape_round(m, 5, &running);
        if (running <= held && next > 0)
            return next;
        if (real_ms() > deadline)
            fail_msg("the scrape loop did not settle in %d s at t=%lld: %d transfers running, "
                     "next slot in %lld ms",
                     HANG_MS / 1000, (long long)fake_ms, running, (long long)next);
    }
}

static int64_t settle(pd_scrape_manager *m)
{
    return settle_held(m, 0);
}

/* Runs every slot up to the instant `until` of the test's clock, moving the
 * clock to each slot in turn. */
static void run_until(pd_scrape_manager *m, int64_t until)
{
    for (int64_t next = settle(m); fake_ms + next <= until; next = settle(m))
        fake_ms += next;
    fake_ms = until;
    settle(m);
}

/* The number of slots of a target (job, URL, interval iv) applied at the
 * test clock's instant `from`, in [from, to]: its first slot is the first
 * wall-clock instant t >= wall_of(from) with t mod iv == its offset. */
static int64_t slots_in(const char *job, const char *url, int64_t iv, int64_t from, int64_t to)
{
    int64_t off = pd__scrape_offset_ms(job, url, iv), w = wall_of(from);
    int64_t first = from + ((off - w % iv) % iv + iv) % iv;
    return first > to ? 0 : (to - first) / iv + 1;
}

/* Polls cond() every ms until it holds; fails after HANG_MS of real time. */
static void wait_until(bool (*cond)(void), const char *what)
{
    int64_t deadline = real_ms() + HANG_MS;
    while (!cond()) {
        if (real_ms() > deadline)
            fail_msg("timed out after %d s waiting for %s", HANG_MS / 1000, what);
        sleep_ms(1);
    }
}

static void load(pd_config *c, const char *yaml)
{
    pd_err e;
    pd_err_clear(&e);
    int rc = pd_config_parse(yaml, strlen(yaml), "test.yaml", c, &e);
    if (rc)
        fail_msg("config: %s", e.msg);
}

static json_t *targets(pd_scrape_manager *m)
{
    pd_buf b;
    pd_buf_init(&b, 0);
    assert_int_equal(pd_scrape_manager_targets_json(m, NULL, NULL, &b), 0);
    json_error_t je;
    json_t *j = json_loads(b.data, 0, &je);
    if (!j)
        fail_msg("targets JSON does not parse: %s: %s", je.text, b.data);
    pd_buf_release(&b);
    json_t *a = json_object_get(j, "activeTargets");
    assert_true(json_is_array(a));
    json_incref(a);
    json_decref(j);
    return a;
}

static json_t *find_target(json_t *a, const char *job, const char *type)
{
    size_t i;
    json_t *t;
    json_array_foreach(a, i, t)
    {
        if (!strcmp(json_string_value(json_object_get(t, "scrapePool")), job) &&
            !strcmp(json_string_value(json_object_get(t, "profileType")), type))
            return t;
    }
    return NULL;
}

static const char *str(json_t *t, const char *k)
{
    const char *s = json_string_value(json_object_get(t, k));
    return s ? s : "";
}

static double scrapes(const char *job, const char *type, const char *outcome)
{
    char l[256];
    snprintf(l, sizeof l, "job=\"%s\",profile_type=\"%s\",outcome=\"%s\"", job, type, outcome);
    return pd_metrics_get("profd_scrapes_total", l);
}

/* The labels of the per-target gauges of a target without static labels
 * (sorted: instance, job, profile_type). */
static const char *tl(const char *job, int port, const char *type)
{
    static char l[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(l[k], sizeof l[k], "instance=\"127.0.0.1:%d\",job=\"%s\",profile_type=\"%s\"", port,
             job, type);
    return l[k];
}

/* 1 when the series is present, with *v its value. */
static int gauge(const char *family, const char *labels, double *v)
{
    *v = pd_metrics_get(family, labels);
    return pd_metrics_has(family, labels);
}

/* The /metrics text (caller frees). */
static char *metrics_text(void)
{
    pd_buf b;
    pd_buf_init(&b, 0);
    assert_int_equal(pd_metrics_write(&b), 0);
    return pd_buf_detach(&b, NULL);
}

/* The series matching {__name__=name, job=job}; n_out series found. */
static pd_series_set select_series(pd_storage *st, const char *name, const char *job)
{
    pd_matcher ms[2];
    pd_err e;
    PD_ASSERT_OK(pd_matcher_init(&ms[0], PD_MATCH_EQ, "__name__", name, &e), &e);
    PD_ASSERT_OK(pd_matcher_init(&ms[1], PD_MATCH_EQ, "job", job, &e), &e);
    pd_series_set set;
    PD_ASSERT_OK(pd_storage_select(st, ms, 2, 0, INT64_MAX, &set, &e), &e);
    pd_matcher_release(&ms[0]);
    pd_matcher_release(&ms[1]);
    return set;
}

/* ---- tests ---- */

static void test_url_and_offset(void **state)
{
    (void)state;
    pd_config c;
    load(&c, "scrape_configs:\n"
             "  - job_name: j\n"
             "    scheme: https\n"
             "    scrape_interval: 10s\n"
             "    params: {seconds: ['99'], 'a b': ['x&y', z]}\n"
             "    static_configs: [{targets: ['h:1']}]\n");
    const pd_scrape_job *j = &c.jobs[0];
    pd_buf b;
    pd_buf_init(&b, 0);
    const pd_pprof_endpoint *cpu = NULL, *heap = NULL;
    for (size_t i = 0; i < j->n_endpoints; i++) {
        if (!strcmp(j->endpoints[i].name, "cpu"))
            cpu = &j->endpoints[i];
        if (!strcmp(j->endpoints[i].name, "heap"))
            heap = &j->endpoints[i];
    }
    assert_int_equal(pd__scrape_url(j, "h:1", cpu, &b), 0);
    /* the endpoint's seconds win over params' seconds; params are escaped */
    assert_string_equal(b.data, "https://h:1/debug/pprof/profile?seconds=9&a%20b=x%26y&a%20b=z");
    pd_buf_reset(&b);
    assert_int_equal(pd__scrape_url(j, "h:1", heap, &b), 0);
    assert_string_equal(b.data, "https://h:1/debug/pprof/heap?seconds=99&a%20b=x%26y&a%20b=z");
    pd_buf_release(&b);
    pd_config_release(&c);

    /* stable, inside the interval, and spread */
    int64_t o1 = pd__scrape_offset_ms("j", "http://a:1/debug/pprof/heap", 10000);
    assert_int_equal(o1, pd__scrape_offset_ms("j", "http://a:1/debug/pprof/heap", 10000));
    int distinct = 0;
    int64_t prev = -1;
    for (int i = 0; i < 20; i++) {
        char url[64];
        snprintf(url, sizeof url, "http://a:%d/debug/pprof/heap", 1000 + i);
        int64_t o = pd__scrape_offset_ms("j", url, 10000);
        assert_true(o >= 0 && o < 10000);
        distinct += o != prev;
        prev = o;
    }
    assert_true(distinct >= 15);
}

static void test_scrape(void **state)
{
    fixture *f = *state;
    char yaml[4096];
    snprintf(yaml, sizeof yaml,
             "global: {scrape_interval: 60s, scrape_timeout: 60s}\n"
             "scrape_configs:\n"
             "  - job_name: good\n"
             "    static_configs:\n"
             "      - targets: ['127.0.0.1:%d']\n"
             "        labels: {env: test}\n"
             "  - job_name: bad\n"
             "    profiling_config:\n"
             "      pprof_config:\n"
             "        allocs: {enabled: false}\n"
             "        block: {enabled: false}\n"
             "        goroutine: {enabled: false}\n"
             "        heap: {enabled: false}\n"
             "        mutex: {enabled: false}\n"
             "        threadcreate: {enabled: false}\n"
             "        cpu: {enabled: false}\n"
             "        missing: {path: /missing}\n"
             "        garbage: {path: /garbage}\n"
             "        big: {path: /big}\n"
             "        bigchunked: {path: /bigchunked}\n"
             "    static_configs: [{targets: ['127.0.0.1:%d']}]\n"
             "  - job_name: hang\n"
             "    scrape_timeout: 250ms\n"
             "    profiling_config:\n"
             "      pprof_config:\n"
             "        allocs: {enabled: false}\n"
             "        block: {enabled: false}\n"
             "        goroutine: {enabled: false}\n"
             "        heap: {enabled: false}\n"
             "        mutex: {enabled: false}\n"
             "        threadcreate: {enabled: false}\n"
             "        cpu: {enabled: false}\n"
             "        slow: {path: /slow}\n"
             "    static_configs: [{targets: ['127.0.0.1:%d']}]\n"
             "  - job_name: dead\n"
             "    profiling_config:\n"
             "      pprof_config:\n"
             "        allocs: {enabled: false}\n"
             "        block: {enabled: false}\n"
             "        goroutine: {enabled: false}\n"
             "        mutex: {enabled: false}\n"
             "        threadcreate: {enabled: false}\n"
             "        cpu: {enabled: false}\n"
             "    static_configs: [{targets: ['127.0.0.1:%d']}]\n",
             f->port, f->port, f->port, f->dead_port);
    pd_config c;
    load(&c, yaml);
    pd_pprof_limits lim = pd_pprof_limits_default();
    lim.max_body_bytes = BODY_CAP;
    pd_err e;
    pd_err_clear(&e);
    PD_ASSERT_OK(pd_scrape_manager_new(f->st, &lim, &f->m, &e), &e);
    pd_scrape_manager_set_clock(f->m, &fake_clock);
    int64_t t0 = fake_wall(NULL), from = fake_ms;
    PD_ASSERT_OK(pd_scrape_manager_apply(f->m, &c, &e), &e);
    pd_config_release(&c);

    /* before the first slot: every target listed, health unknown */
    json_t *a = targets(f->m);
    assert_int_equal(json_array_size(a), 7 + 4 + 1 + 1);
    assert_string_equal(str(find_target(a, "good", "heap"), "health"), "unknown");
    json_decref(a);

    /* four intervals of the test's clock (60 s): every target's four slots.
     * Scrape timeouts are real time: 60 s (a hang guard) for the targets
     * that answer — a 256 KiB body took over 250 ms on a busy machine and
     * timed out before it was found too large — and 250 ms for the one the
     * server never answers (job hang) */
    enum { IV = 60000, SLOTS = 4 };
    run_until(f->m, from + SLOTS * IV - 1);

    a = targets(f->m);
    static const char *const good[] = {"allocs", "block",        "goroutine", "heap",
                                       "mutex",  "threadcreate", "cpu"};
    char inst[64];
    snprintf(inst, sizeof inst, "127.0.0.1:%d", f->port);
    for (size_t i = 0; i < 7; i++) {
        json_t *t = find_target(a, "good", good[i]);
        assert_non_null(t);
        if (strcmp(str(t, "health"), "up") != 0)
            fail_msg("good/%s: health %s, error \"%s\"", good[i], str(t, "health"),
                     str(t, "lastError"));
        assert_string_equal(str(t, "lastError"), "");
        assert_true(json_integer_value(json_object_get(t, "lastScrape")) >= t0);
        json_t *labels = json_object_get(t, "labels");
        assert_string_equal(str(labels, "__name__"), good[i]);
        assert_string_equal(str(labels, "job"), "good");
        assert_string_equal(str(labels, "instance"), inst);
        assert_string_equal(str(labels, "env"), "test");
        assert_true(json_real_value(json_object_get(t, "lastScrapeDuration")) >= 0);
    }
    /* the cpu profile is asked for with the seconds of the rule (timeout 60s -> 54) */
    assert_int_equal(cpu_requests, SLOTS);
    pthread_mutex_lock(&server_mu);
    assert_string_equal(cpu_seconds, "54");
    pthread_mutex_unlock(&server_mu);
    char want_url[128];
    snprintf(want_url, sizeof want_url, "http://127.0.0.1:%d/debug/pprof/profile?seconds=54",
             f->port);
    assert_string_equal(str(find_target(a, "good", "cpu"), "scrapeUrl"), want_url);

    json_t *t = find_target(a, "bad", "missing");
    assert_string_equal(str(t, "health"), "down");
    assert_string_equal(str(t, "lastError"), "HTTP 404");
    t = find_target(a, "bad", "garbage");
    assert_string_equal(str(t, "health"), "down");
    assert_true(strlen(str(t, "lastError")) > 0);
    t = find_target(a, "hang", "slow");
    assert_string_equal(str(t, "health"), "down");
    if (!strstr(str(t, "lastError"), "timed out"))
        fail_msg("slow: lastError \"%s\"", str(t, "lastError"));
    t = find_target(a, "bad", "big");
    assert_string_equal(str(t, "health"), "down");
    char want[64];
    snprintf(want, sizeof want, "body exceeds %d bytes", BODY_CAP);
    assert_string_equal(str(t, "lastError"), want);
    t = find_target(a, "bad", "bigchunked");
    assert_string_equal(str(t, "health"), "down");
    assert_string_equal(str(t, "lastError"), want);
    t = find_target(a, "dead", "heap");
    assert_string_equal(str(t, "health"), "down");
    if (!strstr(str(t, "lastError"), "onnect"))
        fail_msg("dead: lastError \"%s\"", str(t, "lastError"));
    json_decref(a);

    /* profd_target_up: 1 for every profile type of the live target, 0 for a
     * 404, a body that is not a profile, a timeout, a body over the cap and a
     * port nobody listens on */
    double v;
    char good_l[256];
    for (size_t i = 0; i < 7; i++) {
        snprintf(good_l, sizeof good_l,
                 "env=\"test\",instance=\"127.0.0.1:%d\",job=\"good\",profile_type=\"%s\"", f->port,
                 good[i]);
        if (!gauge("profd_target_up", good_l, &v) || v != 1)
            fail_msg("profd_target_up{%s} is %g (present: %d)", good_l, v,
                     pd_metrics_has("profd_target_up", good_l));
        assert_true(gauge("profd_scrape_last_duration_seconds", good_l, &v) && v >= 0);
        assert_true(gauge("profd_scrape_last_success_timestamp_seconds", good_l, &v));
        /* the start of the last slot, on the test's clock */
        assert_true(v >= (double)(t0 + (SLOTS - 1) * IV) / 1000 &&
                    v <= (double)fake_wall(NULL) / 1000);
    }
    static const char *const bad[] = {"missing", "garbage", "slow", "big", "bigchunked"};
    for (size_t i = 0; i < 5; i++) {
        const char *l = tl(strcmp(bad[i], "slow") ? "bad" : "hang", f->port, bad[i]);
        if (!gauge("profd_target_up", l, &v) || v != 0)
            fail_msg("profd_target_up{%s} is %g (present: %d)", l, v,
                     pd_metrics_has("profd_target_up", l));
        assert_true(gauge("profd_scrape_last_duration_seconds", l, &v));
        /* never succeeded: no success timestamp */
        assert_false(pd_metrics_has("profd_scrape_last_success_timestamp_seconds", l));
    }
    assert_true(gauge("profd_target_up", tl("dead", f->dead_port, "heap"), &v) && v == 0);
    /* the slow one ended at its timeout (the server never answers): its
     * duration is at least the 250 ms (real time) */
    assert_true(gauge("profd_scrape_last_duration_seconds", tl("hang", f->port, "slow"), &v));
    assert_true(v >= 0.2);
    char *txt = metrics_text();
    assert_non_null(strstr(txt, "# TYPE profd_target_up gauge\n"));
    char line[320];
    snprintf(line, sizeof line, "\nprofd_target_up{%s} 0\n", tl("dead", f->dead_port, "heap"));
    assert_non_null(strstr(txt, line));
    snprintf(line, sizeof line,
             "\nprofd_target_up{env=\"test\",instance=\"127.0.0.1:%d\",job=\"good\","
             "profile_type=\"heap\"} 1\n",
             f->port);
    assert_non_null(strstr(txt, line));
    free(txt);

    /* metrics by outcome: each target scraped once a slot, none missed */
    for (size_t i = 0; i < 7; i++)
        assert_true(scrapes("good", good[i], "success") == SLOTS);
    assert_true(scrapes("bad", "missing", "error") == SLOTS);
    assert_true(scrapes("bad", "garbage", "bad_profile") == SLOTS);
    assert_true(scrapes("hang", "slow", "timeout") == SLOTS);
    assert_true(scrapes("bad", "big", "too_large") == SLOTS);
    assert_true(scrapes("bad", "bigchunked", "too_large") == SLOTS);
    assert_true(scrapes("dead", "heap", "error") == SLOTS);
    assert_true(scrapes("good", "heap", "error") == 0);
    assert_true(scrapes("bad", "missing", "success") == 0);
    assert_true(pd_metrics_get("profd_scrape_slots_missed_total",
                               "job=\"hang\",profile_type=\"slow\"") == 0);
    assert_true(pd_metrics_get("profd_scrape_duration_seconds_total",
                               "job=\"good\",profile_type=\"heap\"") > 0);
    double ingested = pd_metrics_get("profd_ingested_profiles_total", "source=\"scrape\"");
    double succ = 0;
    for (size_t i = 0; i < 7; i++)
        succ += scrapes("good", good[i], "success");
    assert_true(ingested == succ);
    assert_true(pd_metrics_get("profd_ingested_bytes_total", "source=\"scrape\"") > 500 * ingested);

    /* storage: one heap series with exactly the expected labels, one interval apart */
    pd_series_set set = select_series(f->st, "heap", "good");
    assert_int_equal(set.n, 1);
    pd_labels want_ls;
    pd_labels_init(&want_ls);
    PD_ASSERT_OK(pd_labels_set(&want_ls, "__name__", "heap", &e), &e);
    PD_ASSERT_OK(pd_labels_set(&want_ls, "job", "good", &e), &e);
    PD_ASSERT_OK(pd_labels_set(&want_ls, "instance", inst, &e), &e);
    PD_ASSERT_OK(pd_labels_set(&want_ls, "env", "test", &e), &e);
    /* heap scraped as served counts since process start (issue 12) */
    PD_ASSERT_OK(pd_labels_set(&want_ls, "__delta__", "false", &e), &e);
    assert_int_equal(pd_labels_cmp(&set.v[0].labels, &want_ls), 0);
    pd_labels_release(&want_ls);
    assert_true(set.v[0].n_profiles == SLOTS);
    pd_points pts;
    PD_ASSERT_OK(pd_storage_read_points(f->st, set.v[0].ref, 0, INT64_MAX, &pts, &e), &e);
    assert_int_equal(pts.n, SLOTS);
    /* on the schedule: the first at the target's offset in the interval, the
     * others exactly one interval apart (the timestamp is the slot's start) */
    char heap_url[128];
    snprintf(heap_url, sizeof heap_url, "http://127.0.0.1:%d/debug/pprof/heap", f->port);
    int64_t off = pd__scrape_offset_ms("good", heap_url, IV);
    assert_true(pts.v[0].ts_ms >= t0 && pts.v[0].ts_ms < t0 + IV);
    assert_int_equal(pts.v[0].ts_ms % IV, off);
    for (size_t i = 1; i < pts.n; i++)
        if (pts.v[i].ts_ms - pts.v[i - 1].ts_ms != IV)
            fail_msg("heap scrapes %zu and %zu are %lld ms apart, want %d", i - 1, i,
                     (long long)(pts.v[i].ts_ms - pts.v[i - 1].ts_ms), IV);
    /* the stored body is the served file, byte for byte */
    pd_profile p;
    pd_buf raw;
    pd_buf_init(&raw, 0);
    PD_ASSERT_OK(pd_storage_read_profile(f->st, set.v[0].ref, pts.v[0].ts_ms, &p, &raw, &e), &e);
    char path[512], *data;
    size_t len;
    snprintf(path, sizeof path, "%s/pprof/go-demo-once/heap.pb.gz", PD_TESTDATA);
    assert_int_equal(read_file(path, &data, &len), 0);
    assert_int_equal(raw.len, len);
    assert_memory_equal(raw.data, data, len);
    free(data);
    pd_buf_release(&raw);
    pd_profile_release(&p);
    pd_points_release(&pts);
    pd_series_set_release(&set);

    set = select_series(f->st, "cpu", "good");
    assert_int_equal(set.n, 1);
    pd_series_set_release(&set);
    set = select_series(f->st, "missing", "bad");
    assert_int_equal(set.n, 0);
    pd_series_set_release(&set);
    set = select_series(f->st, "heap", "dead");
    assert_int_equal(set.n, 0);
    pd_series_set_release(&set);

    /* reload while running: good stays with its health, bad and dead go,
     * extra comes. hang/slow's next scrape is started first (it is likely in
     * flight at the reload: its series must go all the same). */
    char slow_url[128];
    snprintf(slow_url, sizeof slow_url, "http://127.0.0.1:%d/slow", f->port);
    fake_ms = from + SLOTS * IV +
              (pd__scrape_offset_ms("hang", slow_url, IV) - wall_of(from) % IV + IV) % IV;
    pd__scrape_round(f->m, 0, NULL);
    snprintf(yaml, sizeof yaml,
             "global: {scrape_interval: 60s, scrape_timeout: 60s}\n"
             "scrape_configs:\n"
             "  - job_name: good\n"
             "    static_configs:\n"
             "      - targets: ['127.0.0.1:%d']\n"
             "        labels: {env: test}\n"
             "  - job_name: extra\n"
             "    scrape_timeout: 250ms\n"
             "    profiling_config:\n"
             "      pprof_config:\n"
             "        allocs: {enabled: false}\n"
             "        block: {enabled: false}\n"
             "        goroutine: {enabled: false}\n"
             "        mutex: {enabled: false}\n"
             "        threadcreate: {enabled: false}\n"
             "        cpu: {enabled: false}\n"
             "        slow: {path: /slow, seconds: 0}\n"
             "    static_configs: [{targets: ['127.0.0.1:%d'], labels: {team: \"q\\\"x\"}}]\n",
             f->port, f->port);
    load(&c, yaml);
    PD_ASSERT_OK(pd_scrape_manager_apply(f->m, &c, &e), &e);
    pd_config_release(&c);
    a = targets(f->m);
    assert_int_equal(json_array_size(a), 7 + 2);
    assert_string_equal(str(find_target(a, "good", "heap"), "health"), "up"); /* kept */
    assert_null(find_target(a, "bad", "missing"));
    assert_null(find_target(a, "hang", "slow"));
    assert_null(find_target(a, "dead", "heap"));
    t = find_target(a, "extra", "heap");
    assert_non_null(t);
    assert_string_equal(str(t, "health"), "unknown");
    /* a label value with a quote survives the JSON round trip */
    assert_string_equal(str(json_object_get(t, "labels"), "team"), "q\"x");
    json_decref(a);
    double dead_before = scrapes("dead", "heap", "error");
    run_until(f->m, fake_ms + 2 * IV);
    a = targets(f->m);
    assert_string_equal(str(find_target(a, "extra", "heap"), "health"), "up");
    assert_string_equal(str(find_target(a, "good", "heap"), "health"), "up");
    json_decref(a);
    assert_true(scrapes("dead", "heap", "error") == dead_before); /* no longer scraped */
    /* the dropped targets' series are gone, also those of scrapes that were
     * in flight during the reload (hang/slow); the kept and new ones are there */
    assert_true(dead_before == 0); /* the whole job "dead" went: its counters too */
    for (size_t i = 0; i < 5; i++) {
        const char *job = strcmp(bad[i], "slow") ? "bad" : "hang";
        const char *l = tl(job, f->port, bad[i]);
        assert_false(pd_metrics_has("profd_target_up", l));
        assert_false(pd_metrics_has("profd_scrape_last_duration_seconds", l));
        char jl[128];
        snprintf(jl, sizeof jl, "job=\"%s\",profile_type=\"%s\"", job, bad[i]);
        assert_false(pd_metrics_has("profd_scrape_duration_seconds_total", jl));
    }
    assert_false(pd_metrics_has("profd_target_up", tl("dead", f->dead_port, "heap")));
    assert_false(
        pd_metrics_has("profd_scrape_last_duration_seconds", tl("dead", f->dead_port, "heap")));
    snprintf(good_l, sizeof good_l,
             "env=\"test\",instance=\"127.0.0.1:%d\",job=\"good\",profile_type=\"heap\"", f->port);
    assert_true(gauge("profd_target_up", good_l, &v) && v == 1);
    assert_true(scrapes("good", "heap", "success") >= 3); /* kept job: counters kept */
    snprintf(good_l, sizeof good_l,
             "instance=\"127.0.0.1:%d\",job=\"extra\",profile_type=\"heap\",team=\"q\\\"x\"",
             f->port);
    assert_true(gauge("profd_target_up", good_l, &v) && v == 1);
    /* 250 ms timeout, never answered: down once scraped (absent before) */
    gauge("profd_target_up", tl("extra", f->port, "slow"), &v);
    assert_true(v == 0);
    txt = metrics_text();
    if (strstr(txt, "job=\"dead\"") || strstr(txt, "job=\"bad\"") || strstr(txt, "job=\"hang\""))
        fail_msg("series of dropped jobs remain in /metrics:\n%s", txt);
    free(txt);
    set = select_series(f->st, "heap", "extra");
    assert_int_equal(set.n, 1);
    assert_string_equal(pd_labels_get(&set.v[0].labels, "team"), "q\"x");
    pd_series_set_release(&set);

    /* the freed manager's targets leave no per-target series behind */
    pd_scrape_manager_free(f->m);
    f->m = NULL;
    txt = metrics_text();
    assert_null(strstr(txt, "profd_target_up{"));
    assert_null(strstr(txt, "profd_scrape_last_duration_seconds{"));
    free(txt);
}

static void test_apply_before_start_and_empty(void **state)
{
    fixture *f = *state;
    pd_err e;
    pd_config c;
    pd_config_init(&c);
    PD_ASSERT_OK(pd_scrape_manager_new(f->st, NULL, &f->m, &e), &e);
    PD_ASSERT_OK(pd_scrape_manager_apply(f->m, &c, &e), &e);
    PD_ASSERT_OK(pd_scrape_manager_start(f->m, &e), &e);
    pd_buf b;
    pd_buf_init(&b, 0);
    assert_int_equal(pd_scrape_manager_targets_json(f->m, NULL, NULL, &b), 0);
    assert_string_equal(b.data,
                        "{\"activeTargets\":[],\"droppedTargets\":[],\"droppedTargetCounts\":{}}");
    pd_buf_release(&b);
    /* a tiny output cap is an error, not a crash */
    pd_buf_init(&b, 8);
    assert_int_equal(pd_scrape_manager_targets_json(f->m, NULL, NULL, &b), PD_ETOOBIG);
    pd_buf_release(&b);
    /* freed without stopping first, no targets (a hang is the ctest timeout) */
    pd_scrape_manager_free(f->m);
    f->m = NULL;
}

/* Target expansion without scraping: static labels override job and
 * instance (Prometheus), identical targets are kept once, disabled endpoints
 * give no target. */
static void test_target_labels(void **state)
{
    (void)state;
    pd_config c;
    load(&c, "scrape_configs:\n"
             "  - job_name: j\n"
             "    profiling_config:\n"
             "      pprof_config:\n"
             "        allocs: {enabled: false}\n"
             "        block: {enabled: false}\n"
             "        goroutine: {enabled: false}\n"
             "        mutex: {enabled: false}\n"
             "        threadcreate: {enabled: false}\n"
             "        cpu: {enabled: false}\n"
             "    static_configs:\n"
             "      - targets: ['a:1']\n"
             "        labels: {instance: my-host, job: other}\n"
             "      - targets: ['b:1']\n"
             "      - targets: ['b:1']\n"
             "      - targets: ['b:1']\n"
             "        labels: {x: y}\n");
    pd_scrape_manager *m;
    pd_err e;
    PD_ASSERT_OK(pd_scrape_manager_new(NULL, NULL, &m, &e), &e);
    PD_ASSERT_OK(pd_scrape_manager_apply(m, &c, &e), &e);
    pd_config_release(&c);
    json_t *a = targets(m);
    assert_int_equal(json_array_size(a), 3); /* a, b, b{x=y}: heap only */
    json_t *l0 = json_object_get(json_array_get(a, 0), "labels");
    assert_string_equal(str(l0, "instance"), "my-host");
    assert_string_equal(str(l0, "job"), "other");
    assert_string_equal(str(l0, "__name__"), "heap");
    assert_string_equal(str(json_array_get(a, 0), "scrapePool"), "j");
    assert_string_equal(str(json_array_get(a, 0), "scrapeUrl"), "http://a:1/debug/pprof/heap");
    json_t *l1 = json_object_get(json_array_get(a, 1), "labels");
    assert_string_equal(str(l1, "instance"), "b:1");
    assert_string_equal(str(l1, "job"), "j");
    assert_int_equal(json_object_size(l1), 3);
    json_t *l2 = json_object_get(json_array_get(a, 2), "labels");
    assert_string_equal(str(l2, "x"), "y");
    assert_string_equal(str(json_array_get(a, 2), "health"), "unknown");
    json_decref(a);
    pd_scrape_manager_free(m);
}

/* The JSON of pd_scrape_manager_targets_json(m, state, pool). */
static json_t *targets_doc(pd_scrape_manager *m, const char *state, const char *pool)
{
    pd_buf b;
    pd_buf_init(&b, 0);
    assert_int_equal(pd_scrape_manager_targets_json(m, state, pool, &b), 0);
    json_error_t je;
    json_t *j = json_loads(b.data, 0, &je);
    if (!j)
        fail_msg("targets JSON does not parse: %s: %s", je.text, b.data);
    pd_buf_release(&b);
    return j;
}

/* Dropped targets as Prometheus lists them: discoveredLabels (before
 * relabeling) and scrapePool, per job at most keep_dropped_targets (job's,
 * else global's), droppedTargetCounts counting every one; state and
 * scrapePool filter. */
static void test_dropped_targets(void **state)
{
    (void)state;
    static const char *const heap_only = "    profiling_config:\n"
                                         "      pprof_config:\n"
                                         "        allocs: {enabled: false}\n"
                                         "        block: {enabled: false}\n"
                                         "        goroutine: {enabled: false}\n"
                                         "        mutex: {enabled: false}\n"
                                         "        threadcreate: {enabled: false}\n"
                                         "        cpu: {enabled: false}\n";
    char yaml[4096];
    snprintf(yaml, sizeof yaml,
             "global: {keep_dropped_targets: 2}\n"
             "scrape_configs:\n"
             "  - job_name: a\n%s"
             "    static_configs:\n"
             "      - targets: ['k:1', 'd1:1', 'd2:1', 'd3:1']\n"
             "        labels: {team: x}\n"
             "    relabel_configs:\n"
             "      - source_labels: [__address__]\n"
             "        regex: 'd.*'\n"
             "        action: drop\n"
             "  - job_name: b\n%s"
             "    keep_dropped_targets: 1\n"
             "    static_configs: [{targets: ['e1:1', 'e2:1']}]\n"
             "    relabel_configs: [{action: drop, source_labels: [job], regex: b}]\n"
             "  - job_name: c\n%s"
             "    static_configs: [{targets: ['c:1']}]\n",
             heap_only, heap_only, heap_only);
    pd_config c;
    load(&c, yaml);
    pd_scrape_manager *m;
    pd_err e;
    PD_ASSERT_OK(pd_scrape_manager_new(NULL, NULL, &m, &e), &e);
    PD_ASSERT_OK(pd_scrape_manager_apply(m, &c, &e), &e);
    pd_config_release(&c);

    json_t *j = targets_doc(m, NULL, NULL);
    assert_int_equal(json_array_size(json_object_get(j, "activeTargets")), 2); /* k, c */
    json_t *d = json_object_get(j, "droppedTargets");
    assert_int_equal(json_array_size(d), 3); /* a: 2 of 3 (global), b: 1 of 2 (job's) */
    json_t *d0 = json_array_get(d, 0);
    assert_string_equal(str(d0, "scrapePool"), "a");
    json_t *dl = json_object_get(d0, "discoveredLabels");
    assert_string_equal(str(dl, "__address__"), "d1:1");
    assert_string_equal(str(dl, "job"), "a");
    assert_string_equal(str(dl, "team"), "x");
    assert_string_equal(str(dl, "__metrics_path__"), "/metrics");
    assert_string_equal(str(dl, "__scheme__"), "http");
    assert_true(strlen(str(dl, "__scrape_interval__")) > 0);
    assert_string_equal(
        str(json_object_get(json_array_get(d, 1), "discoveredLabels"), "__address__"), "d2:1");
    assert_string_equal(str(json_array_get(d, 2), "scrapePool"), "b");
    json_t *counts = json_object_get(j, "droppedTargetCounts");
    assert_int_equal(json_integer_value(json_object_get(counts, "a")), 3);
    assert_int_equal(json_integer_value(json_object_get(counts, "b")), 2);
    assert_int_equal(json_integer_value(json_object_get(counts, "c")), 0);
    json_decref(j);

    j = targets_doc(m, "dropped", NULL);
    assert_int_equal(json_array_size(json_object_get(j, "activeTargets")), 0);
    assert_int_equal(json_array_size(json_object_get(j, "droppedTargets")), 3);
    json_decref(j);
    j = targets_doc(m, "Active", NULL);
    assert_int_equal(json_array_size(json_object_get(j, "activeTargets")), 2);
    assert_int_equal(json_array_size(json_object_get(j, "droppedTargets")), 0);
    assert_true(json_is_null(json_object_get(j, "droppedTargetCounts")));
    json_decref(j);
    j = targets_doc(m, "any", "b");
    assert_int_equal(json_array_size(json_object_get(j, "activeTargets")), 0);
    assert_int_equal(json_array_size(json_object_get(j, "droppedTargets")), 1);
    json_decref(j);
    j = targets_doc(m, "bogus", NULL); /* as Prometheus: neither list */
    assert_int_equal(json_array_size(json_object_get(j, "activeTargets")), 0);
    assert_int_equal(json_array_size(json_object_get(j, "droppedTargets")), 0);
    json_decref(j);

    /* a reload that drops nothing empties the list */
    snprintf(yaml, sizeof yaml,
             "scrape_configs:\n  - job_name: c\n%s"
             "    static_configs: [{targets: ['c:1']}]\n",
             heap_only);
    load(&c, yaml);
    PD_ASSERT_OK(pd_scrape_manager_apply(m, &c, &e), &e);
    pd_config_release(&c);
    j = targets_doc(m, NULL, NULL);
    assert_int_equal(json_array_size(json_object_get(j, "droppedTargets")), 0);
    assert_int_equal(json_object_size(json_object_get(j, "droppedTargetCounts")), 1);
    json_decref(j);
    pd_scrape_manager_free(m);
}

/* ---- per-target series: reload races, label clashes, duplicates ---- */

static pd_scrape_manager *hook_m;
static pd_config hook_cfg;
static atomic_int hook_reloads;

/* The first finished scrape of job "gone" reloads to a config without it,
 * between storing the profile and recording the scrape. */
static void reload_in_finish(const char *url)
{
    if (!strstr(url, "x=1") || hook_reloads)
        return;
    pd_err e;
    pd_err_clear(&e);
    if (pd_scrape_manager_apply(hook_m, &hook_cfg, &e) == 0)
        hook_reloads++;
}

static void test_target_up_series(void **state)
{
    fixture *f = *state;
    static const char *const heap_only = "    profiling_config:\n"
                                         "      pprof_config:\n"
                                         "        allocs: {enabled: false}\n"
                                         "        block: {enabled: false}\n"
                                         "        goroutine: {enabled: false}\n"
                                         "        mutex: {enabled: false}\n"
                                         "        threadcreate: {enabled: false}\n"
                                         "        cpu: {enabled: false}\n";
    char stay[2048], gone[1024], yaml[4096];
    snprintf(stay, sizeof stay,
             "  - job_name: stay\n%s"
             "    static_configs: [{targets: ['127.0.0.1:%d']}]\n"
             "  - job_name: clash\n%s"
             "    static_configs: [{targets: ['127.0.0.1:%d'],"
             " labels: {profile_type: custom, exported_profile_type: taken}}]\n"
             "  - job_name: dup\n"
             "    scrape_interval: 120s\n%s"
             "    static_configs: [{targets: ['127.0.0.1:%d']}]\n",
             heap_only, f->port, heap_only, f->port, heap_only, f->port);
    snprintf(gone, sizeof gone,
             "  - job_name: gone\n"
             "    params: {x: ['1']}\n%s"
             "    static_configs: [{targets: ['127.0.0.1:%d']}]\n",
             heap_only, f->port);
    snprintf(yaml, sizeof yaml,
             "global: {scrape_interval: 60s, scrape_timeout: 60s}\nscrape_configs:\n%s%s", stay,
             gone);
    pd_config c;
    load(&c, yaml);
    snprintf(yaml, sizeof yaml,
             "global: {scrape_interval: 60s, scrape_timeout: 60s}\nscrape_configs:\n%s", stay);
    load(&hook_cfg, yaml);
    pd_err e;
    pd_err_clear(&e);
    PD_ASSERT_OK(pd_scrape_manager_new(f->st, NULL, &f->m, &e), &e);
    pd_scrape_manager_set_clock(f->m, &fake_clock);
    int64_t from = fake_ms;
    PD_ASSERT_OK(pd_scrape_manager_apply(f->m, &c, &e), &e);
    pd_config_release(&c);

    /* job "dup": its series already holds a profile at each of its next
     * slots (t mod 120 s == offset), so its scrapes, stamped with the slot's
     * start, find their timestamp taken */
    char url[128], path[512], *data;
    size_t len;
    snprintf(url, sizeof url, "http://127.0.0.1:%d/debug/pprof/heap", f->port);
    int64_t off = pd__scrape_offset_ms("dup", url, 120000);
    snprintf(path, sizeof path, "%s/pprof/go-demo-once/heap.pb.gz", PD_TESTDATA);
    assert_int_equal(read_file(path, &data, &len), 0);
    pd_pprof_limits lim = pd_pprof_limits_default();
    pd_profile p;
    PD_ASSERT_OK(pd_profile_decode(&p, (const uint8_t *)data, len, &lim, &e), &e);
    pd_labels ls;
    pd_labels_init(&ls);
    char inst[64];
    snprintf(inst, sizeof inst, "127.0.0.1:%d", f->port);
    PD_ASSERT_OK(pd_labels_set(&ls, "__name__", "heap", &e), &e);
    PD_ASSERT_OK(pd_labels_set(&ls, "job", "dup", &e), &e);
    PD_ASSERT_OK(pd_labels_set(&ls, "instance", inst, &e), &e);
    PD_ASSERT_OK(pd_labels_set(&ls, "__delta__", "false", &e), &e); /* as the scrape stores it */
    int64_t now = fake_wall(NULL);
    int64_t slot = now - now % 120000 + off;
    if (slot < now)
        slot += 120000;
    for (int k = 0; k < 8; k++, slot += 120000)
        assert_int_equal(pd_storage_append(f->st, &ls, slot, (const uint8_t *)data, len, &p, &e),
                         0);
    pd_labels_release(&ls);
    pd_profile_release(&p);
    free(data);

    hook_m = f->m;
    hook_reloads = 0;
    pd__scrape_before_record = reload_in_finish;
    int64_t until = from + 216000;
    run_until(f->m, until);

    /* the reload happened while gone's scrape was being finished: that scrape
     * is not counted and left no series; the others carry on */
    assert_int_equal(hook_reloads, 1);
    double v;
    assert_false(pd_metrics_has("profd_target_up", tl("gone", f->port, "heap")));
    assert_false(pd_metrics_has("profd_scrape_last_duration_seconds", tl("gone", f->port, "heap")));
    assert_false(
        pd_metrics_has("profd_scrape_last_success_timestamp_seconds", tl("gone", f->port, "heap")));
    assert_true(scrapes("gone", "heap", "success") == 0);
    assert_true(gauge("profd_target_up", tl("stay", f->port, "heap"), &v) && v == 1);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/debug/pprof/heap", f->port);
    assert_true(scrapes("stay", "heap", "success") == slots_in("stay", url, 60000, from, until));

    /* a static label named profile_type does not clash with ours: it moves
     * to exported_profile_type, taken here, so exported_exported_... */
    char l[512];
    snprintf(l, sizeof l,
             "exported_exported_profile_type=\"custom\",exported_profile_type=\"taken\","
             "instance=\"127.0.0.1:%d\",job=\"clash\",profile_type=\"heap\"",
             f->port);
    if (!gauge("profd_target_up", l, &v) || v != 1) {
        char *txt = metrics_text();
        fprintf(stderr, "%s", txt);
        free(txt);
        fail_msg("no profd_target_up{%s} 1 in the text above", l);
    }

    /* a scrape whose profile is already stored keeps the target up: every
     * scrape of dup (one or two slots in 216 s at 120 s) found its timestamp taken */
    int64_t n_dup = slots_in("dup", url, 120000, from, until);
    assert_true(n_dup >= 1);
    if (scrapes("dup", "heap", "duplicate") != n_dup)
        fail_msg("%g duplicate scrapes of job dup, want %lld: %g success, %g error",
                 scrapes("dup", "heap", "duplicate"), (long long)n_dup,
                 scrapes("dup", "heap", "success"), scrapes("dup", "heap", "error"));
    assert_true(scrapes("dup", "heap", "success") == 0);
    assert_true(scrapes("dup", "heap", "error") == 0);
    assert_true(gauge("profd_target_up", tl("dup", f->port, "heap"), &v) && v == 1);
    json_t *a = targets(f->m);
    assert_string_equal(str(find_target(a, "dup", "heap"), "health"), "up");
    assert_null(find_target(a, "gone", "heap"));
    json_decref(a);

    pd_scrape_manager_free(f->m);
    f->m = NULL;
    pd__scrape_before_record = NULL;
    pd_config_release(&hook_cfg);
}

/* Finished scrapes (pd__scrape_before_record), and those of /hold. */
static atomic_int finished, hold_finished;
static void count_finish(const char *url)
{
    finished++;
    if (strstr(url, "/hold"))
        hold_finished++;
}

static int want_req, want_fin;
static bool late_reached(void)
{
    return late_requests >= want_req && finished >= want_fin;
}

/* Steps m's loop (not started) until cond() holds; fails after HANG_MS. */
static void step_until(pd_scrape_manager *m, bool (*cond)(void), const char *what)
{
    int64_t deadline = real_ms() + HANG_MS;
    while (!cond()) {
        if (real_ms() > deadline)
            fail_msg("timed out after %d s at t=%lld waiting for %s", HANG_MS / 1000,
                     (long long)fake_ms, what);
        pd__scrape_round(m, 5, NULL);
    }
}

/* The first slot of a target (job, URL, interval iv) applied at the test
 * clock's instant `from`. */
static int64_t first_slot(const char *job, const char *url, int64_t iv, int64_t from)
{
    int64_t off = pd__scrape_offset_ms(job, url, iv);
    return from + ((off - wall_of(from) % iv) % iv + iv) % iv;
}

/* A windowed profile (seconds: a CPU profile) whose answer comes after its
 * interval (answers of 1.1 and 0.5 intervals in turn, on the test's clock)
 * runs the slot it met busy as soon as it ends: no slot is missed
 * (profd_scrape_slots_missed_total stays 0), every slot gives one stored
 * profile, and the schedule keeps its phase. Every windowed profile does so
 * now (pd__scrape_catch_up): before, only windows within 1 s of the
 * interval, so a 9 s CPU profile at 10 s whose answer and storing took over
 * 1 s skipped its next slot (the fleet bench's missed slots). With the old
 * rule (skip) this test sees 1 missed slot per pair and half the profiles.
 * The clock is the test's: the answers come when the test moves it, so a
 * busy machine changes nothing (issue 34). */
static void test_slot_met_busy(void **state)
{
    fixture *f = *state;
    enum { PAIRS = 4, I = LATE_IV };
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "global: {scrape_interval: 60s, scrape_timeout: 60s}\n"
             "scrape_configs:\n"
             "  - job_name: lateness\n"
             "    profiling_config:\n"
             "      pprof_config:\n"
             "        allocs: {enabled: false}\n"
             "        block: {enabled: false}\n"
             "        goroutine: {enabled: false}\n"
             "        heap: {enabled: false}\n"
             "        mutex: {enabled: false}\n"
             "        threadcreate: {enabled: false}\n"
             "        cpu: {enabled: false}\n"
             "        windowed: {path: /late, seconds: 30}\n"
             "    static_configs: [{targets: ['127.0.0.1:%d']}]\n",
             f->port);
    pd_config c;
    load(&c, yaml);
    pd_pprof_limits lim = pd_pprof_limits_default();
    pd_err e;
    pd_err_clear(&e);
    PD_ASSERT_OK(pd_scrape_manager_new(f->st, &lim, &f->m, &e), &e);
    pd_scrape_manager_set_clock(f->m, &fake_clock);
    int64_t from = fake_ms;
    PD_ASSERT_OK(pd_scrape_manager_apply(f->m, &c, &e), &e);
    pd_config_release(&c);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/late?seconds=30", f->port);
    json_t *a = targets(f->m);
    assert_string_equal(str(json_array_get(a, 0), "scrapeUrl"), url);
    json_decref(a);
    int64_t s0 = first_slot("lateness", url, I, from);
    finished = hold_finished = 0;
    pd__scrape_before_record = count_finish;

    int64_t want_ts[2 * PAIRS];
    for (int k = 0; k < PAIRS; k++) {
        int64_t slot = s0 + 2 * (int64_t)k * I;
        fake_ms = slot; /* slot 2k, idle: its scrape starts (answered at +1.1 I) */
        want_req = 2 * k + 1, want_fin = 2 * k;
        step_until(f->m, late_reached, "the scrape of an idle slot");
        want_ts[2 * k] = wall_of(slot);
        fake_ms = slot + I; /* slot 2k+1 comes while that scrape runs */
        pd__scrape_round(f->m, 0, NULL);
        assert_int_equal(late_requests, 2 * k + 1); /* no second transfer of the target */
        fake_ms = slot + I * 11 / 10;               /* the answer: the slot met busy runs at once */
        want_req = 2 * k + 2, want_fin = 2 * k + 1;
        step_until(f->m, late_reached, "the run of the slot met busy (it never came: skipped)");
        want_ts[2 * k + 1] = wall_of(slot + I * 11 / 10);
        fake_ms = slot + I * 16 / 10; /* its answer (0.5 I) */
        want_fin = 2 * k + 2;
        step_until(f->m, late_reached, "the answer of the catch-up run");
        /* back on the schedule's phase: the next slot is slot 2k+2 */
        assert_int_equal(settle(f->m), slot + 2 * I - fake_ms);
        assert_int_equal(late_requests, 2 * k + 2);
    }
    const char *wl = "job=\"lateness\",profile_type=\"windowed\"";
    double missed = pd_metrics_get("profd_scrape_slots_missed_total", wl);
    double ok = scrapes("lateness", "windowed", "success");
    print_message(
        "windowed, answers of 1.1 and 0.5 intervals: %g scrapes for %d slots, %g missed\n", ok,
        2 * PAIRS, missed);
    assert_true(missed == 0);
    assert_true(ok == 2 * PAIRS);
    /* one profile a slot, stamped with the time its scrape started */
    pd_series_set set = select_series(f->st, "windowed", "lateness");
    assert_int_equal(set.n, 1);
    pd_points pts;
    PD_ASSERT_OK(pd_storage_read_points(f->st, set.v[0].ref, 0, INT64_MAX, &pts, &e), &e);
    assert_int_equal(pts.n, 2 * PAIRS);
    for (size_t i = 0; i < pts.n; i++)
        assert_int_equal(pts.v[i].ts_ms, want_ts[i]);
    pd_points_release(&pts);
    pd_series_set_release(&set);
    pd_scrape_manager_free(f->m);
    f->m = NULL;
    pd__scrape_before_record = NULL;
    /* the rule: every windowed profile catches up (the fleet bench's 9 s of 10 s) */
    assert_true(pd__scrape_catch_up(9, 10000));
    assert_true(pd__scrape_catch_up(1, 1000));
    assert_true(pd__scrape_catch_up(30, 60000));
    assert_false(pd__scrape_catch_up(0, 10000));
}

static int want_finished;
static bool finished_reached(void)
{
    return finished >= want_finished;
}

static bool hold_arrived(void)
{
    return hold_requests >= 1;
}

/* The scrape thread on the test's clock: a slot runs once the clock reaches
 * it (the thread woken), stamped with the slot's start; a reload adds a
 * target whose server never answers; pd_scrape_manager_free with that
 * transfer in flight aborts it (its scrape never finishes) instead of
 * waiting for it (a 120 s timeout). */
static void test_thread_clock(void **state)
{
    fixture *f = *state;
    static const char *const heap_only = "    profiling_config:\n"
                                         "      pprof_config:\n"
                                         "        allocs: {enabled: false}\n"
                                         "        block: {enabled: false}\n"
                                         "        goroutine: {enabled: false}\n"
                                         "        mutex: {enabled: false}\n"
                                         "        threadcreate: {enabled: false}\n"
                                         "        cpu: {enabled: false}\n";
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "global: {scrape_interval: 60s, scrape_timeout: 60s}\n"
             "scrape_configs:\n"
             "  - job_name: t\n%s"
             "    static_configs: [{targets: ['127.0.0.1:%d']}]\n",
             heap_only, f->port);
    pd_config c;
    load(&c, yaml);
    pd_err e;
    pd_err_clear(&e);
    PD_ASSERT_OK(pd_scrape_manager_new(f->st, NULL, &f->m, &e), &e);
    pd_scrape_manager_set_clock(f->m, &fake_clock);
    int64_t from = fake_ms;
    PD_ASSERT_OK(pd_scrape_manager_apply(f->m, &c, &e), &e);
    pd_config_release(&c);
    finished = hold_finished = 0;
    pd__scrape_before_record = count_finish;
    PD_ASSERT_OK(pd_scrape_manager_start(f->m, &e), &e);

    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/debug/pprof/heap", f->port);
    int64_t s0 = first_slot("t", url, 60000, from);
    for (int k = 0; k < 2; k++) {
        fake_ms = s0 + k * 60000;
        pd_scrape_manager_wake(f->m);
        want_finished = k + 1;
        wait_until(finished_reached, "a scrape at its slot");
    }
    assert_int_equal(finished, 2);
    pd_series_set set = select_series(f->st, "heap", "t");
    assert_int_equal(set.n, 1);
    pd_points pts;
    PD_ASSERT_OK(pd_storage_read_points(f->st, set.v[0].ref, 0, INT64_MAX, &pts, &e), &e);
    assert_int_equal(pts.n, 2);
    assert_int_equal(pts.v[0].ts_ms, wall_of(s0));
    assert_int_equal(pts.v[1].ts_ms, wall_of(s0) + 60000);
    pd_points_release(&pts);
    pd_series_set_release(&set);

    /* reload: a target the server holds (until it stops; its timeout is 120 s) */
    snprintf(yaml, sizeof yaml,
             "global: {scrape_interval: 60s, scrape_timeout: 60s}\n"
             "scrape_configs:\n"
             "  - job_name: t\n%s"
             "    static_configs: [{targets: ['127.0.0.1:%d']}]\n"
             "  - job_name: held\n"
             "    scrape_interval: 120s\n"
             "    scrape_timeout: 120s\n"
             "    profiling_config:\n"
             "      pprof_config:\n"
             "        allocs: {enabled: false}\n"
             "        block: {enabled: false}\n"
             "        goroutine: {enabled: false}\n"
             "        heap: {enabled: false}\n"
             "        mutex: {enabled: false}\n"
             "        threadcreate: {enabled: false}\n"
             "        cpu: {enabled: false}\n"
             "        hold: {path: /hold}\n"
             "    static_configs: [{targets: ['127.0.0.1:%d']}]\n",
             heap_only, f->port, f->port);
    load(&c, yaml);
    int64_t at = fake_ms;
    PD_ASSERT_OK(pd_scrape_manager_apply(f->m, &c, &e), &e);
    pd_config_release(&c);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/hold", f->port);
    fake_ms = first_slot("held", url, 120000, at);
    pd_scrape_manager_wake(f->m);
    wait_until(hold_arrived, "the held target's request");
    pd_scrape_manager_free(f->m);
    f->m = NULL;
    pd__scrape_before_record = NULL;
    assert_int_equal(hold_requests, 1);
    assert_int_equal(hold_finished, 0); /* aborted by free, not waited for */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_url_and_offset),
        cmocka_unit_test(test_target_labels),
        cmocka_unit_test(test_dropped_targets),
        cmocka_unit_test_setup_teardown(test_scrape, setup, teardown),
        cmocka_unit_test_setup_teardown(test_apply_before_start_and_empty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_target_up_series, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slot_met_busy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_thread_clock, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
