/* Unit tests of src/agent/cpu.c: a CPU profile of a known busy function
 * decodes and names it; argument errors; one profile at a time; and the
 * signal-safety stress: many threads created and exiting while profiling
 * (run under ASan+UBSan by the sanitizer build). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include "agent/profd_agent.h"
#include "pprof/pprof.h"

static _Atomic int g_stop; /* atomics: the test runs under TSan too */
_Atomic uint64_t g_sink;

__attribute__((noipa)) uint64_t test_cpu_burn(uint64_t n)
{
    uint64_t h = 7;
    for (uint64_t i = 0; i < n; i++)
        h = h * 6364136223846793005ull + i;
    return h;
}

static void *burner(void *arg)
{
    (void)arg;
    while (!g_stop)
        g_sink += test_cpu_burn(100000);
    return NULL;
}

/* Sums sample value vi of the samples whose stack holds a function named fn. */
static int64_t value_with(const pd_profile *p, const char *fn, size_t vi, int64_t *total)
{
    int64_t v = 0;
    *total = 0;
    for (size_t s = 0; s < p->n_sample; s++) {
        const pd_pprof_sample *smp = &p->sample[s];
        *total += smp->value[vi];
        int hit = 0;
        for (size_t k = 0; k < smp->n_location && !hit; k++) {
            const pd_pprof_location *l = pd_profile_location(p, smp->location_id[k]);
            for (size_t j = 0; l && j < l->n_line; j++) {
                const pd_pprof_function *f = pd_profile_function(p, l->line[j].function_id);
                if (f && strcmp(pd_profile_str(p, f->name), fn) == 0)
                    hit = 1;
            }
        }
        if (hit)
            v += smp->value[vi];
    }
    return v;
}

static void decode(pd_buf *b, pd_profile *p)
{
    pd_err err = {{0}};
    pd_pprof_limits lim = pd_pprof_limits_default();
    int rc = pd_profile_decode(p, (const uint8_t *)b->data, b->len, &lim, &err);
    if (rc < 0)
        fail_msg("decode: %s", err.msg);
}

static void profile_names_the_busy_function(void **st)
{
    (void)st;
    g_stop = 0;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, burner, NULL), 0);
    pd_buf b;
    pd_buf_init(&b, 0);
    pd_err err = {{0}};
    int rc = pd_agent_cpu_profile(2, 0, NULL, &b, &err);
    g_stop = 1;
    pthread_join(t, NULL);
    if (rc < 0)
        fail_msg("profile: %s", err.msg);
    pd_profile p;
    decode(&b, &p);
    assert_int_equal(p.n_sample_type, 2);
    assert_string_equal(pd_profile_str(&p, p.sample_type[1].type), "cpu");
    assert_int_equal(p.period, 10000000);
    int64_t total, hot = value_with(&p, "test_cpu_burn", 0, &total);
    pd_agent_stats sts;
    pd_agent_get_stats(&sts);
    print_message("samples %lld of test_cpu_burn %lld; recorded %llu dropped %llu\n",
                  (long long)total, (long long)hot, (unsigned long long)sts.cpu_samples,
                  (unsigned long long)sts.cpu_dropped);
    /* ~2 s of one busy thread at 100 Hz: ~200 samples; be generous on a loaded machine */
    assert_true(total >= 5);
    assert_true(hot * 2 > total);
    assert_true(p.n_mapping >= 1);
    pd_profile_release(&p);
    pd_buf_release(&b);
}

static void bad_arguments_are_refused(void **st)
{
    (void)st;
    pd_buf b;
    pd_buf_init(&b, 0);
    pd_err err = {{0}};
    assert_int_equal(pd_agent_cpu_profile(0, 0, NULL, &b, &err), PD_EINVAL);
    assert_non_null(strstr(err.msg, "seconds=0"));
    assert_int_equal(pd_agent_cpu_profile(1, 5000, NULL, &b, &err), PD_EINVAL);
    assert_non_null(strstr(err.msg, "hz=5000"));
    assert_int_equal(b.len, 0);
}

static atomic_bool first_stop;
static atomic_int first_ok;

/* Holds the profiler in 2 s profiles, one after the other, until first_stop
 * (the test's own atomic flag: the API's cancel flag is a plain volatile,
 * which ThreadSanitizer would see written by one thread and read by
 * another); retries while the main thread's probe holds it. */
static void *first_profile(void *arg)
{
    int *rc = arg;
    pd_buf b;
    pd_buf_init(&b, 0);
    pd_err err = {{0}};
    while (!atomic_load(&first_stop)) {
        pd_buf_reset(&b);
        int r = pd_agent_cpu_profile(2, 0, NULL, &b, &err);
        if (r == 0)
            first_ok++;
        else if (r != PD_EEXIST)
            *rc = r;
    }
    pd_buf_release(&b);
    return NULL;
}

/* A second CPU profile while one runs gets PD_EEXIST. No sleep decides the
 * overlap (issue 34): the main thread probes (a profile cancelled before it
 * starts) until a probe finds the profiler taken; the first thread holds it
 * nearly all the time and retries when a probe got it first. */
static void one_profile_at_a_time(void **st)
{
    (void)st;
    int rc1 = 0, rc2 = 1;
    atomic_store(&first_stop, false);
    first_ok = 0;
    pthread_t first;
    assert_int_equal(pthread_create(&first, NULL, first_profile, &rc1), 0);
    static const volatile bool cancelled = true;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        pd_buf b;
        pd_buf_init(&b, 0);
        pd_err err = {{0}};
        rc2 = pd_agent_cpu_profile(1, 0, &cancelled, &b, &err);
        pd_buf_release(&b);
        if (rc2 != 0)
            break;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec > 120) /* a hang guard: the first never started */
            break;
        sched_yield();
    }
    atomic_store(&first_stop, true);
    pthread_join(first, NULL);
    assert_int_equal(rc2, PD_EEXIST);
    assert_int_equal(rc1, 0);   /* the first thread saw no other error */
    assert_true(first_ok >= 1); /* and held the profiler */
}

static void *short_lived(void *arg)
{
    (void)arg;
    g_sink += test_cpu_burn(20000 + (uint64_t)(rand() % 50000));
    return NULL;
}

static void *spawner(void *arg)
{
    (void)arg;
    while (!g_stop) {
        pthread_t t[8];
        int n = 0;
        for (int i = 0; i < 8; i++)
            if (pthread_create(&t[n], NULL, short_lived, NULL) == 0)
                n++;
        for (int i = 0; i < n; i++)
            pthread_join(t[i], NULL);
    }
    return NULL;
}

static void stress_threads_come_and_go(void **st)
{
    (void)st;
    g_stop = 0;
    pthread_t sp[4], burn;
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&sp[i], NULL, spawner, NULL), 0);
    assert_int_equal(pthread_create(&burn, NULL, burner, NULL), 0);
    pd_agent_stats before, after;
    pd_agent_get_stats(&before);
    for (int round = 0; round < 2; round++) {
        pd_buf b;
        pd_buf_init(&b, 0);
        pd_err err = {{0}};
        int rc = pd_agent_cpu_profile(2, 1000, NULL, &b, &err); /* 1 kHz: many signals */
        if (rc < 0)
            fail_msg("profile: %s", err.msg);
        pd_profile p;
        decode(&b, &p);
        int64_t total;
        value_with(&p, "test_cpu_burn", 0, &total);
        assert_true(total > 0);
        pd_profile_release(&p);
        pd_buf_release(&b);
    }
    g_stop = 1;
    for (int i = 0; i < 4; i++)
        pthread_join(sp[i], NULL);
    pthread_join(burn, NULL);
    pd_agent_get_stats(&after);
    /* threads came and went: more timers than the 6 long-lived threads */
    assert_true(after.threads_profiled - before.threads_profiled > 6);
    assert_true(after.cpu_samples > before.cpu_samples);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bad_arguments_are_refused),
        cmocka_unit_test(profile_names_the_busy_function),
        cmocka_unit_test(one_profile_at_a_time),
        cmocka_unit_test(stress_threads_come_and_go),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
