/* Tests of src/scrape/store.c through the scrape loop (manager.c): the
 * scrapes one round finishes are stored with one pd_storage_append_many,
 * and each target's outcome is its own when some of them fail.
 *
 * A real HTTP server (libmicrohttpd on 127.0.0.1, port 0) serves the real
 * profiles of testdata go-demo-once under /gate/debug/pprof/<name>, and a
 * body that is no profile under /gate/garbage; every /gate/ request is
 * held until the test opens the gate. The test starts every transfer in one
 * round of its own clock, waits until the server has all of them, opens the
 * gate, waits until the server has sent every answer (loopback: they are
 * then in the client's socket buffers) and steps the loop once: that round
 * ends every transfer. pd_storage_append_many is wrapped at link time
 * (-Wl,--wrap, CMakeLists.txt) so the test sees each call the loop makes,
 * on a real store in a temp directory, and can hold a call (the store
 * thread's test: the loop goes on meanwhile). No assertion depends on how
 * fast the machine is; waits on real time only bound a hang. */
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

#define HANG_MS 120000 /* a hang guard: no assertion depends on it */

/* ---- pd_storage_append_many, seen from the test ---- */

#define MAX_CALLS 16
#define MAX_ITEMS 16
static int n_calls;
static size_t call_n[MAX_CALLS];                /* items of each call */
static char call_job[MAX_CALLS][MAX_ITEMS][32]; /* each item's job label */
static int call_rc[MAX_CALLS][MAX_ITEMS];
static bool call_shift[MAX_CALLS];

size_t __real_pd_storage_append_many(pd_storage *s, pd_storage_item *items, size_t n, bool shift);
size_t __wrap_pd_storage_append_many(pd_storage *s, pd_storage_item *items, size_t n, bool shift);
static atomic_bool store_hold;   /* a call waits while set (test_store_thread) */
static atomic_int store_entered; /* calls begun */
static atomic_bool stopping;

size_t __wrap_pd_storage_append_many(pd_storage *s, pd_storage_item *items, size_t n, bool shift)
{
    store_entered++;
    while (store_hold && !stopping)
        usleep(1000);
    size_t r = __real_pd_storage_append_many(s, items, n, shift);
    if (n_calls < MAX_CALLS) {
        call_n[n_calls] = n;
        call_shift[n_calls] = shift;
        for (size_t i = 0; i < n && i < MAX_ITEMS; i++) {
            const char *job = pd_labels_get(items[i].labels, "job");
            snprintf(call_job[n_calls][i], sizeof call_job[n_calls][i], "%s", job ? job : "");
            call_rc[n_calls][i] = items[i].rc;
        }
    }
    n_calls++;
    return r;
}

/* ---- the test's clock ---- */

#define MONO0 1000000
static _Atomic int64_t fake_ms;
static int64_t fake_wall0;

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

static int64_t real_ms(void)
{
    return pd_mono_ns() / 1000000;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) && errno == EINTR)
        ;
}

/* ---- the server ---- */

static atomic_bool gate_open;
static atomic_int gate_arrived, gate_sent, allocs_served;
static char gate_marker;

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const void *body,
                             size_t len)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    enum MHD_Result rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *upload,
                               size_t *upload_len, void **con_cls)
{
    (void)cls, (void)method, (void)version, (void)upload, (void)upload_len;
    if (!strncmp(url, "/gate/", 6)) {
        *con_cls = &gate_marker; /* counted in `completed` once sent */
        gate_arrived++;
        while (!gate_open && !stopping)
            usleep(1000);
        url += 5;
    }
    if (!strcmp(url, "/debug/pprof/allocs"))
        allocs_served++;
    if (!strcmp(url, "/garbage"))
        return reply(c, 200, "this is not a profile", 21);
    const char *name = strncmp(url, "/debug/pprof/", 13) ? NULL : url + 13;
    char path[512];
    if (!name || strchr(name, '/'))
        return reply(c, 404, "no\n", 3);
    snprintf(path, sizeof path, "%s/pprof/go-demo-once/%s.pb.gz", PD_TESTDATA, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return reply(c, 404, "no\n", 3);
    char *data = malloc(1 << 20); /* one connection per thread: not shared */
    size_t len = data ? fread(data, 1, 1 << 20, f) : 0;
    fclose(f);
    enum MHD_Result rc = data ? reply(c, 200, data, len) : MHD_NO;
    free(data);
    return rc;
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    (void)cls, (void)c;
    if (*con_cls == &gate_marker && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
        gate_sent++;
}

/* ---- fixture ---- */

typedef struct fixture {
    struct MHD_Daemon *d;
    int port;
    char dir[64];
    pd_storage *st;
    pd_scrape_manager *m;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    gate_open = stopping = false;
    gate_arrived = gate_sent = allocs_served = store_entered = 0;
    store_hold = false;
    n_calls = 0;
    fake_wall0 = (pd_now_ms() - 30 * 60000) / 60000 * 60000;
    fake_ms = MONO0;
    f->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION, 0,
                            NULL, NULL, handler, NULL, MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
                            MHD_OPTION_SOCK_ADDR,
                            (struct sockaddr *)&(struct sockaddr_in){
                                .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)},
                            MHD_OPTION_END);
    if (!f->d)
        return -1;
    f->port = MHD_get_daemon_info(f->d, MHD_DAEMON_INFO_BIND_PORT)->port;
    snprintf(f->dir, sizeof f->dir, "/tmp/profd-scrape-store-XXXXXX");
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
    stopping = true;
    MHD_stop_daemon(f->d);
    store_fixture_close(f->st, f->dir);
    free(f);
    return 0;
}

/* Applies the configuration yaml to f's manager. */
static void apply_yaml(fixture *f, const char *yaml)
{
    pd_config c;
    pd_err e;
    pd_err_clear(&e);
    if (pd_config_parse(yaml, strlen(yaml), "test.yaml", &c, &e))
        fail_msg("config: %s", e.msg);
    PD_ASSERT_OK(pd_scrape_manager_apply(f->m, &c, &e), &e);
    pd_config_release(&c);
}

/* A manager of f's store on the test's clock, with the configuration yaml
 * (not started: the tests step it, or start it themselves). */
static void new_manager(fixture *f, const char *yaml)
{
    pd_err e;
    pd_err_clear(&e);
    PD_ASSERT_OK(pd_scrape_manager_new(f->st, NULL, &f->m, &e), &e);
    pd_scrape_manager_set_clock(f->m, &fake_clock);
    apply_yaml(f, yaml);
}

/* ---- helpers ---- */

static double scrapes(const char *job, const char *type, const char *outcome)
{
    char l[256];
    snprintf(l, sizeof l, "job=\"%s\",profile_type=\"%s\",outcome=\"%s\"", job, type, outcome);
    return pd_metrics_get("profd_scrapes_total", l);
}

static json_t *target(pd_scrape_manager *m, const char *job, const char *type)
{
    pd_buf b;
    pd_buf_init(&b, 0);
    assert_int_equal(pd_scrape_manager_targets_json(m, NULL, NULL, &b), 0);
    json_t *j = json_loads(b.data, 0, NULL);
    pd_buf_release(&b);
    assert_non_null(j);
    size_t i;
    json_t *t, *found = NULL;
    json_array_foreach(json_object_get(j, "activeTargets"), i, t)
    {
        if (!strcmp(json_string_value(json_object_get(t, "scrapePool")), job) &&
            !strcmp(json_string_value(json_object_get(t, "profileType")), type))
            found = json_deep_copy(t);
    }
    json_decref(j);
    if (!found)
        fail_msg("no target %s/%s", job, type);
    return found;
}

/* health and lastError of job/type */
static void want_health(pd_scrape_manager *m, const char *job, const char *type, const char *health,
                        const char *error_part)
{
    json_t *t = target(m, job, type);
    const char *h = json_string_value(json_object_get(t, "health"));
    const char *le = json_string_value(json_object_get(t, "lastError"));
    if (strcmp(h, health) || (error_part ? !strstr(le, error_part) : le[0] != '\0'))
        fail_msg("%s/%s: health %s, lastError \"%s\"; want %s, \"%s\"", job, type, h, le, health,
                 error_part ? error_part : "");
    json_decref(t);
}

/* Profiles of the series {__name__=name, job=job} (0 when there is none). */
static size_t stored(pd_storage *st, const char *name, const char *job)
{
    pd_matcher ms[2];
    pd_err e;
    PD_ASSERT_OK(pd_matcher_init(&ms[0], PD_MATCH_EQ, "__name__", name, &e), &e);
    PD_ASSERT_OK(pd_matcher_init(&ms[1], PD_MATCH_EQ, "job", job, &e), &e);
    pd_series_set set;
    PD_ASSERT_OK(pd_storage_select(st, ms, 2, 0, INT64_MAX, &set, &e), &e);
    pd_matcher_release(&ms[0]);
    pd_matcher_release(&ms[1]);
    assert_true(set.n <= 1);
    size_t n = set.n ? set.v[0].n_profiles : 0;
    pd_series_set_release(&set);
    return n;
}

/* Starts every target's slot of [now, now + IV) in one round, waits for the
 * server to hold all `want` requests, opens the gate, waits for every
 * answer to be sent, then ends them all in one more round. */
static void one_round(fixture *f, int64_t iv, int want)
{
    gate_open = false;
    gate_arrived = gate_sent = 0;
    fake_ms += iv; /* every target's next slot is due */
    int running = 0;
    pd__scrape_round(f->m, 0, &running);
    int64_t deadline = real_ms() + HANG_MS;
    while (gate_arrived < want) { /* the loop sends the requests */
        pd__scrape_round(f->m, 5, &running);
        if (real_ms() > deadline)
            fail_msg("%d of %d requests reached the server", (int)gate_arrived, want);
    }
    assert_int_equal(running, want); /* all held */
    int calls = n_calls;
    gate_open = true;
    while (gate_sent < want) {
        sleep_ms(1);
        if (real_ms() > deadline)
            fail_msg("%d of %d answers sent", (int)gate_sent, want);
    }
    assert_int_equal(n_calls, calls); /* nothing stored while the loop was not stepped */
    pd__scrape_round(f->m, 0, &running);
    assert_int_equal(running, 0); /* that round ended every transfer */
}

/* ---- tests ---- */

static void test_round_stored_by_one_call(void **state)
{
    fixture *f = *state;
    enum { IV = 60000 };
    char yaml[4096];
    const char *off = "{enabled: false}";
    snprintf(yaml, sizeof yaml,
             "global: {scrape_interval: 60s, scrape_timeout: 60s}\n"
             "scrape_configs:\n"
             "  - job_name: batch\n"
             "    profiling_config:\n"
             "      pprof_config:\n"
             "        block: %s\n        goroutine: %s\n        mutex: %s\n"
             "        threadcreate: %s\n        cpu: %s\n"
             "        allocs: {path: /gate/debug/pprof/allocs}\n"
             "        heap: {path: /gate/debug/pprof/heap}\n"
             "        garbage: {path: /gate/garbage}\n"
             "    static_configs: [{targets: ['127.0.0.1:%d']}]\n"
             /* two jobs whose series are the same one (job relabeled to
              * "dup"): scraped at the same instant, the second to be stored
              * is a duplicate */
             "  - job_name: dupa\n"
             "    relabel_configs: [{target_label: job, replacement: dup}]\n"
             "    profiling_config:\n"
             "      pprof_config: {allocs: %s, block: %s, goroutine: %s, mutex: %s, "
             "threadcreate: %s, cpu: %s, heap: {path: /gate/debug/pprof/heap}}\n"
             "    static_configs: [{targets: ['127.0.0.1:%d']}]\n"
             "  - job_name: dupb\n"
             "    relabel_configs: [{target_label: job, replacement: dup}]\n"
             "    profiling_config:\n"
             "      pprof_config: {allocs: %s, block: %s, goroutine: %s, mutex: %s, "
             "threadcreate: %s, cpu: %s, heap: {path: /gate/debug/pprof/heap}}\n"
             "    static_configs: [{targets: ['127.0.0.1:%d']}]\n",
             off, off, off, off, off, f->port, off, off, off, off, off, off, f->port, off, off, off,
             off, off, off, f->port);
    new_manager(f, yaml);

    /* round 1: five transfers end together; four bodies are profiles */
    one_round(f, IV, 5);
    assert_int_equal(n_calls, 1);
    assert_int_equal(call_n[0], 4); /* allocs, heap, and both dup heaps: one call */
    assert_false(call_shift[0]);    /* scrapes keep their time: no push shift */
    int dup_ok = 0, dup_exist = 0, batch_ok = 0;
    for (size_t i = 0; i < call_n[0]; i++) {
        if (!strcmp(call_job[0][i], "dup")) {
            dup_ok += call_rc[0][i] == 0;
            dup_exist += call_rc[0][i] == PD_EEXIST;
        } else {
            assert_string_equal(call_job[0][i], "batch");
            batch_ok += call_rc[0][i] == 0;
        }
    }
    assert_int_equal(batch_ok, 2);
    assert_int_equal(dup_ok, 1);
    assert_int_equal(dup_exist, 1);
    assert_true(pd_metrics_get("profd_scrape_store_batches_total", NULL) == 1);

    /* each target's outcome is its own */
    assert_true(scrapes("batch", "allocs", "success") == 1);
    assert_true(scrapes("batch", "heap", "success") == 1);
    assert_true(scrapes("batch", "garbage", "bad_profile") == 1);
    assert_true(scrapes("dupa", "heap", "success") + scrapes("dupb", "heap", "success") == 1);
    assert_true(scrapes("dupa", "heap", "duplicate") + scrapes("dupb", "heap", "duplicate") == 1);
    want_health(f->m, "batch", "allocs", "up", NULL);
    want_health(f->m, "batch", "heap", "up", NULL);
    want_health(f->m, "batch", "garbage", "down", "");
    want_health(f->m, "dupa", "heap", "up", NULL); /* a duplicate leaves the target up */
    want_health(f->m, "dupb", "heap", "up", NULL);
    assert_true(pd_metrics_get("profd_ingested_profiles_total", "source=\"scrape\"") == 3);
    assert_int_equal(stored(f->st, "heap", "batch"), 1);
    assert_int_equal(stored(f->st, "allocs", "batch"), 1);
    assert_int_equal(stored(f->st, "heap", "dup"), 1);

    /* round 2, the next interval: again one call for the round */
    one_round(f, IV, 5);
    assert_int_equal(n_calls, 2);
    assert_int_equal(call_n[1], 4);
    assert_true(pd_metrics_get("profd_scrape_store_batches_total", NULL) == 2);
    assert_true(pd_metrics_get("profd_ingested_profiles_total", "source=\"scrape\"") == 6);
    assert_int_equal(stored(f->st, "heap", "dup"), 2);
    assert_true(scrapes("batch", "garbage", "bad_profile") == 2);
}

/* A round whose transfers all fail before storing makes no call. */
static void test_round_without_profiles_makes_no_call(void **state)
{
    fixture *f = *state;
    char yaml[1024];
    const char *off = "{enabled: false}";
    snprintf(yaml, sizeof yaml,
             "global: {scrape_interval: 60s, scrape_timeout: 60s}\n"
             "scrape_configs:\n"
             "  - job_name: bad\n"
             "    profiling_config:\n"
             "      pprof_config: {allocs: %s, block: %s, goroutine: %s, mutex: %s, "
             "threadcreate: %s, cpu: %s, heap: %s, garbage: {path: /gate/garbage}, "
             "missing: {path: /gate/debug/pprof/none}}\n"
             "    static_configs: [{targets: ['127.0.0.1:%d']}]\n",
             off, off, off, off, off, off, off, f->port);
    new_manager(f, yaml);
    one_round(f, 60000, 2);
    assert_int_equal(n_calls, 0);
    assert_true(pd_metrics_get("profd_scrape_store_batches_total", NULL) == 0);
    assert_true(scrapes("bad", "garbage", "bad_profile") == 1);
    assert_true(scrapes("bad", "missing", "error") == 1);
    want_health(f->m, "bad", "missing", "down", "HTTP 404");
}

static bool wait_real(bool (*cond)(void))
{
    for (int64_t deadline = real_ms() + HANG_MS; !cond();) {
        if (real_ms() > deadline)
            return false;
        sleep_ms(2);
    }
    return true;
}
static bool one_entered(void)
{
    return store_entered >= 1;
}
static bool allocs_asked(void)
{
    return allocs_served >= 1;
}
static bool two_calls(void)
{
    return n_calls >= 2;
}
static const char *recorded_job;
static bool allocs_recorded(void)
{
    return scrapes(recorded_job, "allocs", "success") == 1;
}

/* The mono ms of the first slot at or after `from` of job/url. */
static int64_t first_slot(const char *job, const char *url, int64_t iv, int64_t from)
{
    int64_t w = fake_wall0 + (from - MONO0);
    return from + ((pd__scrape_offset_ms(job, url, iv) - w % iv) % iv + iv) % iv;
}

/* With the store thread (pd_scrape_manager_start), a store call that waits
 * does not hold up the loop: the next target is scraped meanwhile, a
 * reload drops the target being stored (it is freed only once recorded),
 * and what ended meanwhile is the next call. */
static void test_store_thread(void **state)
{
    fixture *f = *state;
    enum { IV = 60000 };
    char yaml[2048], a_url[128], b_url[128];
    const char *off = "{enabled: false}";
    snprintf(a_url, sizeof a_url, "http://127.0.0.1:%d/debug/pprof/heap", f->port);
    snprintf(b_url, sizeof b_url, "http://127.0.0.1:%d/debug/pprof/allocs", f->port);
    int64_t from = fake_ms;
    int64_t sa = first_slot("a", a_url, IV, from), sb = first_slot("b", b_url, IV, from);
    /* job a (heap) is scraped first: its slot comes first on the test's clock */
    bool a_first = sa < sb;
    const char *job_heap = a_first ? "a" : "b", *job_allocs = a_first ? "b" : "a";
    if (!a_first) { /* swap the endpoints so the heap scrape comes first */
        snprintf(a_url, sizeof a_url, "http://127.0.0.1:%d/debug/pprof/allocs", f->port);
        snprintf(b_url, sizeof b_url, "http://127.0.0.1:%d/debug/pprof/heap", f->port);
        sa = first_slot("a", a_url, IV, from);
        sb = first_slot("b", b_url, IV, from);
        job_heap = "b";
        job_allocs = "a";
    }
    int64_t s_heap = a_first ? sa : sb, s_allocs = a_first ? sb : sa;
    if (s_heap >= s_allocs)
        skip(); /* the same instant for both (1 in 60,000) */
    snprintf(yaml, sizeof yaml,
             "global: {scrape_interval: 60s, scrape_timeout: 60s}\n"
             "scrape_configs:\n"
             "  - job_name: %s\n"
             "    profiling_config: {pprof_config: {allocs: %s, block: %s, goroutine: %s, "
             "mutex: %s, threadcreate: %s, cpu: %s}}\n"
             "    static_configs: [{targets: ['127.0.0.1:%d']}]\n"
             "  - job_name: %s\n"
             "    profiling_config: {pprof_config: {heap: %s, block: %s, goroutine: %s, "
             "mutex: %s, threadcreate: %s, cpu: %s}}\n"
             "    static_configs: [{targets: ['127.0.0.1:%d']}]\n",
             job_heap, off, off, off, off, off, off, f->port, job_allocs, off, off, off, off, off,
             off, f->port);
    new_manager(f, yaml);
    store_hold = true;
    pd_err e;
    pd_err_clear(&e);
    PD_ASSERT_OK(pd_scrape_manager_start(f->m, &e), &e);

    /* the heap scrape ends and its store call waits */
    fake_ms = s_heap;
    pd_scrape_manager_wake(f->m);
    assert_true(wait_real(one_entered));
    /* the loop goes on: the allocs target is scraped while that call waits */
    fake_ms = s_allocs;
    pd_scrape_manager_wake(f->m);
    assert_true(wait_real(allocs_asked));
    assert_int_equal(n_calls, 0);
    /* a reload drops the heap target while its profile is being stored */
    snprintf(yaml, sizeof yaml,
             "global: {scrape_interval: 60s, scrape_timeout: 60s}\n"
             "scrape_configs:\n"
             "  - job_name: %s\n"
             "    profiling_config: {pprof_config: {heap: %s, block: %s, goroutine: %s, "
             "mutex: %s, threadcreate: %s, cpu: %s}}\n"
             "    static_configs: [{targets: ['127.0.0.1:%d']}]\n",
             job_allocs, off, off, off, off, off, off, f->port);
    apply_yaml(f, yaml);
    store_hold = false;
    assert_true(wait_real(two_calls));
    assert_int_equal(call_n[0], 1);
    assert_string_equal(call_job[0][0], job_heap);
    assert_int_equal(call_rc[0][0], 0);
    assert_int_equal(call_n[1], 1);
    assert_string_equal(call_job[1][0], job_allocs);
    recorded_job = job_allocs;
    assert_true(wait_real(allocs_recorded)); /* recorded after the call */
    /* the dropped target's counters are gone and not brought back by its outcome */
    char l[128];
    snprintf(l, sizeof l, "job=\"%s\",profile_type=\"heap\",outcome=\"success\"", job_heap);
    assert_false(pd_metrics_has("profd_scrapes_total", l));
    pd_scrape_manager_free(f->m);
    f->m = NULL;
    assert_int_equal(stored(f->st, "heap", job_heap), 1); /* stored, then dropped */
    assert_int_equal(stored(f->st, "allocs", job_allocs), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_stored_by_one_call, setup, teardown),
        cmocka_unit_test_setup_teardown(test_round_without_profiles_makes_no_call, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_thread, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
