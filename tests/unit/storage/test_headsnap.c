/* Unit tests of src/storage/tsdb/headsnap.c (the head snapshot written at a
 * clean close and adopted at the next open; docs/format/head_snapshot.md)
 * through storage.h, with the real heap and CPU profiles of
 * PD_TESTDATA/pprof/go-demo-series:
 *   - a clean close then open leaves nothing WAL-only, every profile reads
 *     back equal (pd_profile_equal), the file is read once; a second
 *     close/open writes the adopted groups again;
 *   - with a head cut before the close (positions no longer in the head);
 *   - a flipped byte (payload, header), a truncation, an empty file: ignored,
 *     counted result="damaged", removed; everything reads from the WAL;
 *   - a snapshot older than the WAL (an append after it): result="stale";
 *   - a head.snapshot.tmp (a close killed while writing) is removed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include "../pd_test.h"

#include "base/metrics.h"
#include "storage/storage.h"

#ifndef PD_TESTDATA
#error "PD_TESTDATA must be defined"
#endif

#define NHEAP 30
#define NCPU 10
#define NPROF (NHEAP + NCPU)

typedef struct tprof {
    uint8_t *body;
    size_t len;
    pd_profile p;
} tprof;

static tprof PROF[NPROF];
static pd_labels L[3]; /* heap a, heap b, cpu a */

/* profile i: series and time. heap i -> a at 1000(i+1) and b at 500+1000 i
 * (two series sharing symbols); cpu -> c at 1000 + 3000 i. */
#define NPTS (2 * NHEAP + NCPU)
typedef struct pt {
    int ser, prof;
    int64_t ts;
} pt;
static pt PTS[NPTS];

static void load_file(const char *path, uint8_t **data, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *data = malloc((size_t)n + 1);
    assert_non_null(*data);
    assert_int_equal(fread(*data, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
}

static int group_setup(void **state)
{
    (void)state;
    for (int i = 0; i < NPROF; i++) {
        char path[1024];
        if (i < NHEAP)
            snprintf(path, sizeof path, "%s/pprof/go-demo-series/heap-%04d.pb.gz", PD_TESTDATA,
                     i + 1);
        else
            snprintf(path, sizeof path, "%s/pprof/go-demo-series/cpu-%04d.pb.gz", PD_TESTDATA,
                     i - NHEAP + 1);
        load_file(path, &PROF[i].body, &PROF[i].len);
        pd_err err = {{0}};
        if (pd_profile_decode(&PROF[i].p, PROF[i].body, PROF[i].len, NULL, &err) < 0) {
            fprintf(stderr, "decode %s: %s\n", path, err.msg);
            return -1;
        }
    }
    const char *inst[3] = {"a", "b", "a"}, *name[3] = {"heap", "heap", "cpu"};
    for (int s = 0; s < 3; s++) {
        pd_labels_init(&L[s]);
        pd_labels_set(&L[s], "__name__", name[s], NULL);
        pd_labels_set(&L[s], "instance", inst[s], NULL);
        pd_labels_set(&L[s], "job", "snap", NULL);
    }
    int k = 0;
    for (int i = 0; i < NHEAP; i++) {
        PTS[k++] = (pt){0, i, 1000 * (int64_t)(i + 1)};
        PTS[k++] = (pt){1, i, 500 + 1000 * (int64_t)i};
    }
    for (int i = 0; i < NCPU; i++)
        PTS[k++] = (pt){2, NHEAP + i, 1000 + 3000 * (int64_t)i};
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    for (int i = 0; i < NPROF; i++) {
        free(PROF[i].body);
        pd_profile_release(&PROF[i].p);
    }
    for (int s = 0; s < 3; s++)
        pd_labels_release(&L[s]);
    return 0;
}

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

typedef struct fx {
    char dir[256];
    char snap[320];
    pd_storage *st;
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/pd_headsnap_test_XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->snap, sizeof f->snap, "%s/head.snapshot", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    pd_storage_close(f->st);
    nftw(f->dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

static pd_storage *open_store(const char *dir, int64_t block_ms, bool no_snapshot)
{
    pd_storage_options o = pd_storage_options_default();
    o.path = dir;
    o.fsync = PD_FSYNC_NEVER;
    o.maintenance_ms = -1; /* rounds are the test's */
    o.retention_ms = -1;   /* synthetic times from 1970 */
    o.future_grace_ms = -1;
    o.no_head_snapshot = no_snapshot;
    if (block_ms)
        o.block_duration_ms = block_ms;
    pd_storage *st = NULL;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_storage_open(&o, &st, &err), &err);
    return st;
}

static void append_all(pd_storage *st, int n)
{
    for (int k = 0; k < n; k++) {
        const tprof *t = &PROF[PTS[k].prof];
        pd_err err = {{0}};
        PD_ASSERT_OK(pd_storage_append(st, &L[PTS[k].ser], PTS[k].ts, t->body, t->len, &t->p, &err),
                     &err);
    }
}

static uint64_t ref_of(pd_storage *st, int s)
{
    pd_matcher m[2];
    assert_int_equal(pd_matcher_init(&m[0], PD_MATCH_EQ, "__name__", s == 2 ? "cpu" : "heap", NULL),
                     0);
    assert_int_equal(pd_matcher_init(&m[1], PD_MATCH_EQ, "instance", s == 1 ? "b" : "a", NULL), 0);
    pd_series_set set;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_storage_select(st, m, 2, INT64_MIN, INT64_MAX, &set, &err), &err);
    pd_matcher_release(&m[0]);
    pd_matcher_release(&m[1]);
    assert_int_equal(set.n, 1);
    uint64_t ref = set.v[0].ref;
    pd_series_set_release(&set);
    return ref;
}

/* Every one of the first n points reads back equal to what was appended. */
static void check_all(pd_storage *st, int n)
{
    uint64_t refs[3];
    for (int s = 0; s < 3; s++)
        refs[s] = ref_of(st, s);
    for (int k = 0; k < n; k++) {
        pd_profile p;
        pd_err err = {{0}};
        PD_ASSERT_OK(pd_storage_read_profile(st, refs[PTS[k].ser], PTS[k].ts, &p, NULL, &err),
                     &err);
        pd_err why = {{0}};
        if (!pd_profile_equal(&p, &PROF[PTS[k].prof].p, &why))
            fail_msg("point %d (series %d at %lld): %s", k, PTS[k].ser, (long long)PTS[k].ts,
                     why.msg);
        pd_profile_release(&p);
    }
    pd_storage_stats ss;
    pd_storage_stats_get(st, &ss);
    assert_int_equal(ss.n_profiles, n);
}

static double loads(const char *result)
{
    char l[64];
    snprintf(l, sizeof l, "result=\"%s\"", result);
    return pd_metrics_get("profd_storage_head_snapshot_loads_total", l);
}

static double wal_only(void)
{
    return pd_metrics_get("profd_storage_head_wal_only_profiles", NULL);
}

static bool exists(const char *p)
{
    return access(p, F_OK) == 0;
}

static void test_clean_restart(void **state)
{
    fx *f = *state;
    f->st = open_store(f->dir, 0, false);
    append_all(f->st, NPTS - 5);
    pd_storage_close(f->st);
    f->st = NULL;
    assert_true(exists(f->snap));
    double l0 = loads("loaded");
    f->st = open_store(f->dir, 0, false);
    assert_true(pd_storage_ready(f->st));
    assert_int_equal(wal_only(), 0);
    assert_int_equal(loads("loaded"), l0 + 1);
    assert_false(exists(f->snap)); /* read once */
    check_all(f->st, NPTS - 5);
    /* appends after it go to new groups; a second close writes both */
    for (int k = NPTS - 5; k < NPTS; k++) {
        const tprof *t = &PROF[PTS[k].prof];
        pd_err err = {{0}};
        PD_ASSERT_OK(
            pd_storage_append(f->st, &L[PTS[k].ser], PTS[k].ts, t->body, t->len, &t->p, &err),
            &err);
    }
    check_all(f->st, NPTS);
    pd_storage_close(f->st);
    f->st = open_store(f->dir, 0, false);
    assert_int_equal(wal_only(), 0);
    assert_int_equal(loads("loaded"), l0 + 2);
    check_all(f->st, NPTS);
}

static void test_after_cut(void **state)
{
    fx *f = *state;
    /* 30 s of points, 10 s blocks: a maintenance round cuts the oldest */
    f->st = open_store(f->dir, 10000, false);
    append_all(f->st, NPTS);
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_storage_maintain(f->st, &err), &err);
    pd_storage_stats ss;
    pd_storage_stats_get(f->st, &ss);
    assert_true(ss.n_cuts >= 1);
    assert_true(ss.n_head_profiles < NPTS);
    pd_storage_close(f->st);
    f->st = open_store(f->dir, 10000, false);
    assert_int_equal(wal_only(), 0);
    check_all(f->st, NPTS);
    /* and the adopted groups go with the next cuts */
    PD_ASSERT_OK(pd_storage_maintain(f->st, &err), &err);
    check_all(f->st, NPTS);
}

static void damage_and_check(fx *f, void (*damage)(const char *path))
{
    f->st = open_store(f->dir, 0, false);
    append_all(f->st, NPTS);
    pd_storage_close(f->st);
    f->st = NULL;
    assert_true(exists(f->snap));
    damage(f->snap);
    double d0 = loads("damaged"), l0 = loads("loaded");
    f->st = open_store(f->dir, 0, false);
    assert_int_equal(loads("damaged"), d0 + 1);
    assert_int_equal(loads("loaded"), l0);
    assert_false(exists(f->snap));
    assert_int_equal(wal_only(), NPTS); /* all from the WAL */
    check_all(f->st, NPTS);
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_storage_maintain(f->st, &err), &err);
    assert_int_equal(wal_only(), 0);
    check_all(f->st, NPTS);
}

/* Flips a bit of the byte at where x the file's size, or at byte -where
 * when where < 0. */
static void flip_at(const char *path, double where)
{
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    off_t at = where < 0 ? (off_t)-where : (off_t)((double)st.st_size * where);
    uint8_t b;
    assert_int_equal(pread(fd, &b, 1, at), 1);
    b ^= 0x10;
    assert_int_equal(pwrite(fd, &b, 1, at), 1);
    close(fd);
}

static void flip_payload(const char *path)
{
    flip_at(path, 0.5);
}
static void flip_header(const char *path)
{
    flip_at(path, -12);
} /* the WAL size it names */
static void truncate_70(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(truncate(path, st.st_size * 7 / 10), 0);
}
static void empty(const char *path)
{
    assert_int_equal(truncate(path, 0), 0);
}

static void test_damaged_payload(void **state)
{
    damage_and_check(*state, flip_payload);
}
static void test_damaged_header(void **state)
{
    damage_and_check(*state, flip_header);
}
static void test_truncated(void **state)
{
    damage_and_check(*state, truncate_70);
}
static void test_empty(void **state)
{
    damage_and_check(*state, empty);
}

static void test_stale(void **state)
{
    fx *f = *state;
    f->st = open_store(f->dir, 0, false);
    append_all(f->st, NPTS - 1);
    pd_storage_close(f->st);
    assert_true(exists(f->snap));
    /* a run that neither reads nor writes snapshots appends one more */
    f->st = open_store(f->dir, 0, true);
    const pt *q = &PTS[NPTS - 1];
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_storage_append(f->st, &L[q->ser], q->ts, PROF[q->prof].body, PROF[q->prof].len,
                                   &PROF[q->prof].p, &err),
                 &err);
    pd_storage_close(f->st);
    f->st = NULL;
    assert_true(exists(f->snap));
    double s0 = loads("stale");
    f->st = open_store(f->dir, 0, false);
    assert_int_equal(loads("stale"), s0 + 1);
    assert_false(exists(f->snap));
    assert_int_equal(wal_only(), NPTS);
    check_all(f->st, NPTS);
}

static void test_tmp_left(void **state)
{
    fx *f = *state;
    f->st = open_store(f->dir, 0, false);
    append_all(f->st, NPTS);
    pd_storage_close(f->st);
    f->st = NULL;
    /* as a close killed while writing: the .tmp beside no snapshot */
    char tmp[400];
    snprintf(tmp, sizeof tmp, "%s.tmp", f->snap);
    assert_int_equal(rename(f->snap, tmp), 0);
    assert_int_equal(truncate(tmp, 100), 0);
    f->st = open_store(f->dir, 0, false);
    assert_false(exists(tmp));
    assert_int_equal(wal_only(), NPTS);
    check_all(f->st, NPTS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_clean_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_after_cut, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged_payload, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged_header, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tmp_left, setup, teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
