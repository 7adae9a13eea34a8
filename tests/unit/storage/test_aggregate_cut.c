/* pd_storage_aggregate while head cuts move its range into blocks (issue 20:
 * the head walk releases the index lock between slices so pushes are not
 * held behind a merge; issue 19: nothing may be lost or counted twice).
 *
 * Each round fills a block range [k*DUR, (k+1)*DUR) of 8 series with a real
 * heap profile (PD_TESTDATA go-demo-series/heap-0001) every STEP, then one
 * thread aggregates that range over and over (the head walk sliced after
 * every profile: aggregate_slice_ns = 1) while the main thread appends a profile
 * far enough ahead that the maintenance thread cuts the range into a block.
 * Every aggregation must count every profile once: N_PER_RANGE profiles and
 * N_PER_RANGE x the file's totals — before, during and after the cut.
 * Without the cut_rw lock of aggregate.c/compact.c some aggregations of a
 * round miss the profiles the cut moved out of the head after the
 * aggregation's block snapshot (this test then fails).
 */
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include "../pd_test.h"

#include "base/metrics.h"
#include "storage/storage.h"

#ifndef PD_TESTDATA
#error "PD_TESTDATA must be defined"
#endif

#define DUR 10000LL /* block duration, ms */
#define STEP 100LL  /* one profile per series every STEP ms */
#define N_SERIES 8
#define N_PER_RANGE (N_SERIES * (DUR / STEP))
#define ROUNDS 4

static uint8_t *BODY;
static size_t LEN;
static pd_profile PROF;
static int64_t TOTALS[64];

static _Atomic int64_t NOW;
static int64_t test_clock(void)
{
    return atomic_load(&NOW);
}

typedef struct sums {
    size_t n_profiles;
    int64_t totals[64];
} sums;

static int sum_fn(void *ctx, const pd_storage_agg_part *part, const pd_profile *p, pd_err *err)
{
    (void)err;
    sums *s = ctx;
    int64_t t[64] = {0};
    s->n_profiles += part->n_profiles;
    pd_profile_totals(p, t);
    for (size_t i = 0; i < p->n_sample_type && i < 64; i++)
        s->totals[i] += t[i];
    return 0;
}

typedef struct walker {
    pd_storage *st;
    uint64_t refs[N_SERIES];
    int64_t mint, maxt;
    atomic_bool stop;
    size_t runs, bad;
    char first_bad[768];
} walker;

static void *walk_main(void *arg)
{
    walker *w = arg;
    while (!atomic_load(&w->stop)) {
        sums s;
        memset(&s, 0, sizeof s);
        pd_err err = {{0}};
        int rc = pd_storage_aggregate(w->st, w->refs, NULL, N_SERIES, w->mint, w->maxt, sum_fn,
                                      NULL, &s, NULL, &err);
        bool ok = rc == 0 && s.n_profiles == (size_t)N_PER_RANGE;
        for (size_t i = 0; ok && i < PROF.n_sample_type; i++)
            ok = s.totals[i] == TOTALS[i] * N_PER_RANGE;
        if (!ok && !w->bad++)
            snprintf(w->first_bad, sizeof w->first_bad,
                     "rc %d (%s): %zu profiles of %lld, totals[0] %lld of %lld", rc, err.msg,
                     s.n_profiles, (long long)N_PER_RANGE, (long long)s.totals[0],
                     (long long)(TOTALS[0] * N_PER_RANGE));
        __atomic_add_fetch(&w->runs, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void append(pd_storage *st, const char *name, int instance, int64_t ts)
{
    pd_labels ls;
    pd_labels_init(&ls);
    char inst[16];
    snprintf(inst, sizeof inst, "i%d", instance);
    assert_int_equal(pd_labels_set(&ls, "__name__", name, NULL), 0);
    assert_int_equal(pd_labels_set(&ls, "instance", inst, NULL), 0);
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_storage_append(st, &ls, ts, BODY, LEN, &PROF, &err), &err);
    pd_labels_release(&ls);
}

static void test_aggregate_during_cuts(void **state)
{
    (void)state;
    char dir[] = "/tmp/pd_aggregate_cut_XXXXXX";
    assert_non_null(mkdtemp(dir));
    const int64_t T0 = 1700000000000LL / DUR * DUR;
    atomic_store(&NOW, T0);
    pd_storage_options o = pd_storage_options_default();
    o.path = dir;
    o.fsync = PD_FSYNC_NEVER;
    o.clock_ms = test_clock;
    o.retention_ms = -1;
    o.future_grace_ms = -1;
    o.block_duration_ms = DUR;
    o.maintenance_ms = 5;
    o.aggregate_slice_ns = 1; /* release the lock after every profile */
    pd_storage *st;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_storage_open(&o, &st, &err), &err);

    size_t runs = 0, slices = 0;
    for (int k = 0; k < ROUNDS; k++) {
        int64_t a = T0 + k * DUR;
        for (int64_t t = a; t < a + DUR; t += STEP)
            for (int i = 0; i < N_SERIES; i++)
                append(st, "heap", i, t);
        walker w = {.st = st, .mint = a, .maxt = a + DUR - 1};
        pd_series_set set;
        pd_matcher m;
        PD_ASSERT_OK(pd_matcher_init(&m, PD_MATCH_EQ, "__name__", "heap", &err), &err);
        PD_ASSERT_OK(pd_storage_select(st, &m, 1, w.mint, w.maxt, &set, &err), &err);
        pd_matcher_release(&m);
        assert_int_equal(set.n, N_SERIES);
        for (size_t i = 0; i < N_SERIES; i++)
            w.refs[i] = set.v[i].ref;
        pd_series_set_release(&set);
        pd_storage_stats s0;
        pd_storage_stats_get(st, &s0);
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, walk_main, &w), 0);
        struct timespec ms10 = {0, 10 * 1000 * 1000};
        /* the walker has summed the range from the head once (so lock slices
           were taken) before the cut starts, however late it is scheduled */
        for (int i = 0; i < 12000 && !__atomic_load_n(&w.runs, __ATOMIC_RELAXED); i++)
            nanosleep(&ms10, NULL); /* 120 s: a hang guard */
        assert_true(__atomic_load_n(&w.runs, __ATOMIC_RELAXED) > 0);
        /* a profile of another series at the end of range k+1 makes range
           k due (the head's newest 1.5 x DUR past its start), not k+1: the
           maintenance thread cuts range k while the walker runs */
        atomic_store(&NOW, a + 3 * DUR);
        append(st, "pusher", 0, a + 2 * DUR - 1);
        pd_storage_stats s1 = s0;
        for (int i = 0; i < 12000 && s1.n_cuts == s0.n_cuts; i++) { /* 120 s: a hang guard */
            nanosleep(&ms10, NULL);
            pd_storage_stats_get(st, &s1);
        }
        assert_true(s1.n_cuts > s0.n_cuts);
        nanosleep(&ms10, NULL);
        nanosleep(&ms10, NULL);
        atomic_store(&w.stop, true);
        pthread_join(th, NULL);
        if (w.bad)
            fail_msg("round %d: %zu of %zu aggregations wrong during a head cut; first: %s", k,
                     w.bad, w.runs, w.first_bad);
        runs += w.runs;
        slices = s1.n_aggregate_slices;
    }
    printf("%zu aggregations, %zu lock slices, during %d head cuts: all exact\n", runs, slices,
           ROUNDS);
    assert_true(slices > 0);
    pd_storage_close(st);
    nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- turns (storage.h: max_aggregations) ----
 * With max_aggregations = 1 a second aggregation waits while the first
 * walks, polling meanwhile: its poll's error ends the wait (the walk never
 * starts), it is counted as waiting, and it runs once the first is done.
 * With no limit (< 0) both walk at once. */
typedef struct turn {
    pd_storage *st;
    uint64_t ref;
    _Atomic int entered, release;
    size_t polls, parts;
    double waiting_seen;
    int rc;
} turn;

static int hold_fn(void *ctx, const pd_storage_agg_part *part, const pd_profile *p, pd_err *err)
{
    (void)part, (void)p, (void)err;
    turn *t = ctx;
    atomic_store(&t->entered, 1);
    while (!atomic_load(&t->release)) {
        struct timespec ms1 = {0, 1000 * 1000};
        nanosleep(&ms1, NULL);
    }
    return 0;
}

static void *hold_main(void *arg)
{
    turn *t = arg;
    pd_err err = {{0}};
    t->rc = pd_storage_aggregate(t->st, &t->ref, NULL, 1, INT64_MIN, INT64_MAX, hold_fn, NULL, t,
                                 NULL, &err);
    return NULL;
}

static int count_fn(void *ctx, const pd_storage_agg_part *part, const pd_profile *p, pd_err *err)
{
    (void)p, (void)err;
    turn *t = ctx;
    t->parts += part->n_profiles;
    return 0;
}

static int give_up_poll(void *ctx, pd_err *err)
{
    turn *t = ctx;
    t->waiting_seen = pd_metrics_get("profd_storage_merges_waiting", NULL);
    if (++t->polls == 5)
        return pd_err_set(err, PD_ETIMEOUT, "test: gave up waiting");
    return 0;
}

static void test_turns(void **state)
{
    (void)state;
    for (int limit = 1; limit >= -1; limit -= 2) {
        char dir[] = "/tmp/pd_aggregate_turns_XXXXXX";
        assert_non_null(mkdtemp(dir));
        pd_storage_options o = pd_storage_options_default();
        o.path = dir;
        o.fsync = PD_FSYNC_NEVER;
        o.retention_ms = -1;
        o.future_grace_ms = -1;
        o.max_aggregations = limit;
        pd_storage *st;
        pd_err err = {{0}};
        PD_ASSERT_OK(pd_storage_open(&o, &st, &err), &err);
        for (int64_t ts = 1000; ts <= 4000; ts += 1000)
            append(st, "heap", 0, ts);
        pd_series_set set;
        pd_matcher m;
        PD_ASSERT_OK(pd_matcher_init(&m, PD_MATCH_EQ, "__name__", "heap", &err), &err);
        PD_ASSERT_OK(pd_storage_select(st, &m, 1, INT64_MIN, INT64_MAX, &set, &err), &err);
        pd_matcher_release(&m);
        assert_int_equal(set.n, 1);
        turn a = {.st = st, .ref = set.v[0].ref}, b = {.st = st, .ref = set.v[0].ref};
        pd_series_set_release(&set);
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, hold_main, &a), 0);
        while (!atomic_load(&a.entered)) {
            struct timespec ms1 = {0, 1000 * 1000};
            nanosleep(&ms1, NULL);
        }
        double w0 = pd_metrics_get("profd_storage_merge_wait_seconds_total", NULL);
        int rc = pd_storage_aggregate(st, &b.ref, NULL, 1, INT64_MIN, INT64_MAX, count_fn,
                                      give_up_poll, &b, NULL, &err);
        if (limit == 1) {
            /* waited (polled while counted), gave up, never walked */
            assert_int_equal(rc, PD_ETIMEOUT);
            assert_int_equal(b.polls, 5);
            assert_true(b.waiting_seen == 1);
            assert_int_equal(b.parts, 0);
            assert_true(pd_metrics_get("profd_storage_merge_wait_seconds_total", NULL) > w0);
            assert_true(pd_metrics_get("profd_storage_merges_waiting", NULL) == 0);
        } else {
            /* no limit: walked beside the first (polled at its start and
               every 16 profiles and at its end only) */
            PD_ASSERT_OK(rc, &err);
            assert_int_equal(b.parts, 4);
            assert_true(b.polls < 5);
        }
        atomic_store(&a.release, 1);
        pthread_join(th, NULL);
        PD_ASSERT_OK(a.rc, &err);
        /* the turn was given back: the next one walks at once */
        turn c = {.st = st, .ref = b.ref};
        PD_ASSERT_OK(pd_storage_aggregate(st, &c.ref, NULL, 1, INT64_MIN, INT64_MAX, count_fn,
                                          give_up_poll, &c, NULL, &err),
                     &err);
        assert_int_equal(c.parts, 4);
        pd_storage_close(st);
        nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    }
}

int main(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/pprof/go-demo-series/heap-0001.pb.gz", PD_TESTDATA);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        return 1;
    }
    fseek(f, 0, SEEK_END);
    LEN = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    BODY = malloc(LEN);
    if (!BODY || fread(BODY, 1, LEN, f) != LEN)
        return 1;
    fclose(f);
    pd_err err = {{0}};
    if (pd_profile_decode(&PROF, BODY, LEN, NULL, &err) < 0 || PROF.n_sample_type > 64) {
        fprintf(stderr, "decode %s: %s\n", path, err.msg);
        return 1;
    }
    pd_profile_totals(&PROF, TOTALS);
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_aggregate_during_cuts),
                                       cmocka_unit_test(test_turns)};
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    pd_profile_release(&PROF);
    free(BODY);
    return rc;
}
