/* Unit tests of storage.h's duplicate rule for pushes (issue 26 item 1):
 * pd_storage_append_shift keeps two profiles of one series at one ms side by
 * side (the second at the next free ms), in the head, across a WAL replay,
 * in a block cut from the head, and when two threads race for one ms; plain
 * pd_storage_append still refuses a taken ms (PD_EEXIST).
 *
 * Profiles: the real go-demo-series heap profiles of PD_TESTDATA/pprof.
 * Expectations come from pd_profile_totals of the files' decodes: a merge
 * over the range must hold the samples of both (its totals are the sum of
 * both files' totals), and each profile read back must be pd_profile_equal
 * to the file stored at its ms.
 */
#include <ftw.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include "../pd_test.h"

#include "storage/storage.h"

#ifndef PD_TESTDATA
#error "PD_TESTDATA must be defined"
#endif

typedef struct tprof {
    uint8_t *body;
    size_t len;
    pd_profile p;
    int64_t totals[8];
} tprof;

#define NPROF 4
static tprof PROF[NPROF];
static int64_t g_now = 100000;
static int64_t test_clock(void)
{
    return g_now;
}

static void load(tprof *t, int i)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/pprof/go-demo-series/heap-%04d.pb.gz", PD_TESTDATA, i + 1);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    t->body = malloc((size_t)n);
    assert_int_equal(fread(t->body, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    t->len = (size_t)n;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_profile_decode(&t->p, t->body, t->len, NULL, &err), &err);
    assert_true(t->p.n_sample_type <= 8);
    pd_profile_totals(&t->p, t->totals);
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

typedef struct fx {
    char dir[256];
    pd_storage *st;
    pd_labels ls;
} fx;

static pd_storage *open_store(const char *dir)
{
    pd_storage_options o = pd_storage_options_default();
    o.clock_ms = test_clock;
    o.path = dir;
    o.fsync = PD_FSYNC_NEVER;
    o.block_duration_ms = 10000;
    o.maintenance_ms = -1;
    pd_storage *st = NULL;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_storage_open(&o, &st, &err), &err);
    return st;
}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/pd_dup_test_XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    f->st = open_store(f->dir);
    pd_labels_init(&f->ls);
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_labels_set(&f->ls, "__name__", "heap", &err), &err);
    PD_ASSERT_OK(pd_labels_set(&f->ls, "service_name", "replicated", &err), &err);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    pd_storage_close(f->st);
    nftw(f->dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    pd_labels_release(&f->ls);
    free(f);
    return 0;
}

static uint64_t the_ref(fx *f)
{
    pd_series_set set = {0};
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_storage_select(f->st, NULL, 0, INT64_MIN, INT64_MAX, &set, &err), &err);
    assert_int_equal(set.n, 1);
    uint64_t ref = set.v[0].ref;
    pd_series_set_release(&set);
    return ref;
}

static int sum_fn(void *ctx, const pd_storage_agg_part *part, const pd_profile *p, pd_err *err)
{
    (void)part;
    (void)err;
    int64_t *sum = ctx;
    for (size_t i = 0; i < p->n_sample; i++)
        for (size_t v = 0; v < p->sample[i].n_value && v < 8; v++)
            sum[v] += p->sample[i].value[v];
    return 0;
}

/* The merge of [mint, maxt] has exactly the totals of the profiles want[]. */
static void assert_merge_holds(fx *f, int64_t mint, int64_t maxt, const int *want, size_t n)
{
    uint64_t ref = the_ref(f);
    int64_t sum[8] = {0}, exp[8] = {0};
    for (size_t k = 0; k < n; k++)
        for (size_t v = 0; v < PROF[want[k]].p.n_sample_type; v++)
            exp[v] += PROF[want[k]].totals[v];
    pd_err err = {{0}};
    PD_ASSERT_OK(
        pd_storage_aggregate(f->st, &ref, NULL, 1, mint, maxt, sum_fn, NULL, sum, NULL, &err),
        &err);
    for (size_t v = 0; v < PROF[0].p.n_sample_type; v++)
        assert_int_equal(sum[v], exp[v]);
}

/* The series' points are exactly ts[0..n) and each profile equals its file. */
static void assert_points(fx *f, const int64_t *ts, const int *file, size_t n)
{
    uint64_t ref = the_ref(f);
    pd_points pts = {0};
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_storage_read_points(f->st, ref, INT64_MIN, INT64_MAX, &pts, &err), &err);
    assert_int_equal(pts.n, n);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(pts.v[i].ts_ms, ts[i]);
        pd_profile got;
        PD_ASSERT_OK(pd_storage_read_profile(f->st, ref, ts[i], &got, NULL, &err), &err);
        pd_err why = {{0}};
        if (!pd_profile_equal(&got, &PROF[file[i]].p, &why))
            fail_msg("profile at %lld differs from file %d: %s", (long long)ts[i], file[i],
                     why.msg);
        pd_profile_release(&got);
    }
    pd_points_release(&pts);
}

static void test_shift_head_replay_block(void **state)
{
    fx *f = *state;
    pd_err err = {{0}};
    const int64_t T = 1000;
    int64_t at = 0;
    PD_ASSERT_OK(
        pd_storage_append_shift(f->st, &f->ls, T, PROF[0].body, PROF[0].len, &PROF[0].p, &at, &err),
        &err);
    assert_int_equal(at, T);
    /* the second replica, same series, same ms: kept, at the next ms */
    PD_ASSERT_OK(
        pd_storage_append_shift(f->st, &f->ls, T, PROF[1].body, PROF[1].len, &PROF[1].p, &at, &err),
        &err);
    assert_int_equal(at, T + 1);
    /* the scrape/profefe rule is unchanged: a plain append of a taken ms */
    PD_ASSERT_RC(pd_storage_append(f->st, &f->ls, T, PROF[2].body, PROF[2].len, &PROF[2].p, &err),
                 PD_EEXIST, &err);
    int64_t ts2[] = {T, T + 1};
    int f2[] = {0, 1};
    assert_points(f, ts2, f2, 2);
    assert_merge_holds(f, 0, 1999, f2, 2);

    /* the WAL replay keeps both */
    pd_storage_close(f->st);
    f->st = open_store(f->dir);
    assert_points(f, ts2, f2, 2);
    assert_merge_holds(f, 0, 1999, f2, 2);
    /* and knows both ms: a third replica goes to T + 2 */
    PD_ASSERT_OK(
        pd_storage_append_shift(f->st, &f->ls, T, PROF[2].body, PROF[2].len, &PROF[2].p, &at, &err),
        &err);
    assert_int_equal(at, T + 2);

    /* a block written with all three: cut the head (newest profile past
       1.5 x the block duration after the range [0, 10000)) */
    g_now = 200000;
    PD_ASSERT_OK(pd_storage_append_shift(f->st, &f->ls, 16000, PROF[3].body, PROF[3].len,
                                         &PROF[3].p, &at, &err),
                 &err);
    PD_ASSERT_OK(pd_storage_maintain(f->st, &err), &err);
    pd_storage_stats stats;
    pd_storage_stats_get(f->st, &stats);
    assert_true(stats.n_blocks >= 1);
    assert_int_equal(stats.n_head_profiles, 1); /* only the one at 16000 */
    int64_t ts4[] = {T, T + 1, T + 2, 16000};
    int f4[] = {0, 1, 2, 3};
    assert_points(f, ts4, f4, 4);
    assert_merge_holds(f, 0, 1999, f4, 3);
    /* a fourth replica of T: the block holds T..T+2, so T + 3 */
    PD_ASSERT_OK(
        pd_storage_append_shift(f->st, &f->ls, T, PROF[3].body, PROF[3].len, &PROF[3].p, &at, &err),
        &err);
    assert_int_equal(at, T + 3);
    int f5[] = {0, 1, 2, 3};
    assert_merge_holds(f, 0, 1999, f5, 4);
    /* and after a reopen (blocks + replay of the rest) */
    pd_storage_close(f->st);
    f->st = open_store(f->dir);
    int64_t ts6[] = {T, T + 1, T + 2, T + 3, 16000};
    int f6[] = {0, 1, 2, 3, 3};
    assert_points(f, ts6, f6, 5);
}

typedef struct racer {
    fx *f;
    int which;
    int64_t got[16];
    int rc;
} racer;

static void *race(void *arg)
{
    racer *r = arg;
    pd_err err = {{0}};
    for (int i = 0; i < 16 && r->rc == 0; i++)
        r->rc = pd_storage_append_shift(r->f->st, &r->f->ls, 5000, PROF[r->which].body,
                                        PROF[r->which].len, &PROF[r->which].p, &r->got[i], &err);
    return NULL;
}

/* Two writers pushing the same ms 16 times each: 32 profiles, 32 distinct ms
 * in [5000, 5031], nothing refused. */
static void test_shift_race(void **state)
{
    fx *f = *state;
    racer r[2] = {{f, 0, {0}, 0}, {f, 1, {0}, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, race, &r[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(r[0].rc, 0);
    assert_int_equal(r[1].rc, 0);
    char seen[32] = {0};
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 16; k++) {
            int64_t d = r[i].got[k] - 5000;
            assert_true(d >= 0 && d < 32);
            assert_int_equal(seen[d], 0);
            seen[d] = 1;
        }
    int want[32];
    for (int i = 0; i < 32; i++)
        want[i] = i < 16 ? 0 : 1;
    assert_merge_holds(f, 5000, 5999, want, 32);
}

/* Every ms of the window taken: PD_EEXIST naming it (the only refusal). */
static void test_shift_window_full(void **state)
{
    fx *f = *state;
    pd_err err = {{0}};
    for (int64_t t = 7000; t <= 7000 + PD_STORAGE_MAX_SHIFT_MS; t++)
        PD_ASSERT_OK(
            pd_storage_append(f->st, &f->ls, t, PROF[0].body, PROF[0].len, &PROF[0].p, &err), &err);
    int64_t at = -1;
    PD_ASSERT_RC(pd_storage_append_shift(f->st, &f->ls, 7000, PROF[1].body, PROF[1].len, &PROF[1].p,
                                         &at, &err),
                 PD_EEXIST, &err);
    assert_non_null(strstr(err.msg, "every ms"));
    assert_int_equal(at, -1);
}

int main(void)
{
    for (int i = 0; i < NPROF; i++)
        load(&PROF[i], i);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_shift_head_replay_block, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shift_race, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shift_window_full, setup, teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    for (int i = 0; i < NPROF; i++) {
        pd_profile_release(&PROF[i].p);
        free(PROF[i].body);
    }
    return rc;
}
