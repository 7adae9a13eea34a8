/* Unit tests of the block life cycle of src/storage/tsdb/ (compact.c,
 * retention.c, db.c): head cut into blocks, WAL checkpoint, compaction, retention by time and size,
 * the crash left-overs of each step, damaged block files, and kill -9 of a writing child at random
 * moments while it ingests, cuts and compacts.
 *
 * Profiles are the real ones of PD_TESTDATA/pprof (go-demo-series heap and
 * cpu, cycled). Series used:
 *   heap{job="demo", instance="a"}  one profile every STEP ms
 *   cpu{job="demo", instance="a"}   one profile every 3 * STEP ms
 * Every expectation is computed from what the test appended (a table of
 * (series, ts, file)) and the original decodes: a profile read back must be
 * pd_profile_equal to the decode of the file appended at that time (the
 * lossless property of DESIGN.md §1, for head reads, block reads and reads
 * after compaction), and read_points totals must equal pd_profile_totals.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include "../pd_test.h"

#include "base/metrics.h"
#include "storage/storage.h"
#include "storage/tsdb/block_int.h"
#include "storage/tsdb/headmem_int.h"

#ifndef PD_TESTDATA
#error "PD_TESTDATA must be defined"
#endif

#define NHEAP 30
#define NCPU 10
#define STEP 1000 /* ms between heap profiles */
#define DUR 10000 /* block duration of the tests, ms */

typedef struct tprof {
    uint8_t *body;
    size_t len;
    pd_profile p;
    int64_t *totals;
} tprof;

static tprof HEAP[NHEAP], CPU[NCPU];
static pd_labels L_HEAP, L_CPU;

static void load(tprof *t, const char *rel)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/pprof/%s", PD_TESTDATA, rel);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    t->body = malloc((size_t)n + 1);
    assert_non_null(t->body);
    assert_int_equal(fread(t->body, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    t->len = (size_t)n;
    pd_err err = {{0}};
    if (pd_profile_decode(&t->p, t->body, t->len, NULL, &err) < 0)
        fail_msg("decode %s: %s", path, err.msg);
    t->totals = calloc(t->p.n_sample_type + 1, sizeof *t->totals);
    pd_profile_totals(&t->p, t->totals);
}

static int group_setup(void **state)
{
    (void)state;
    for (int i = 0; i < NHEAP; i++) {
        char rel[64];
        snprintf(rel, sizeof rel, "go-demo-series/heap-%04d.pb.gz", i + 1);
        load(&HEAP[i], rel);
    }
    for (int i = 0; i < NCPU; i++) {
        char rel[64];
        snprintf(rel, sizeof rel, "go-demo-series/cpu-%04d.pb.gz", i + 1);
        load(&CPU[i], rel);
    }
    pd_labels_init(&L_HEAP);
    pd_labels_init(&L_CPU);
    assert_int_equal(pd_labels_set(&L_HEAP, "__name__", "heap", NULL), 0);
    assert_int_equal(pd_labels_set(&L_HEAP, "job", "demo", NULL), 0);
    assert_int_equal(pd_labels_set(&L_HEAP, "instance", "a", NULL), 0);
    assert_int_equal(pd_labels_set(&L_CPU, "__name__", "cpu", NULL), 0);
    assert_int_equal(pd_labels_set(&L_CPU, "job", "demo", NULL), 0);
    assert_int_equal(pd_labels_set(&L_CPU, "instance", "a", NULL), 0);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    for (int i = 0; i < NHEAP; i++) {
        free(HEAP[i].body);
        free(HEAP[i].totals);
        pd_profile_release(&HEAP[i].p);
    }
    for (int i = 0; i < NCPU; i++) {
        free(CPU[i].body);
        free(CPU[i].totals);
        pd_profile_release(&CPU[i].p);
    }
    pd_labels_release(&L_HEAP);
    pd_labels_release(&L_CPU);
    return 0;
}

/* ---- files ---- */

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void rm_rf(const char *dir)
{
    nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* Block directories (26-char ULID names) under dir, sorted; returns count. */
static size_t list_blocks(const char *dir, char names[][27], size_t max)
{
    struct dirent **v;
    int n = scandir(dir, &v, NULL, alphasort);
    assert_true(n >= 0);
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        if (strlen(v[i]->d_name) == 26 && k < max)
            memcpy(names[k++], v[i]->d_name, 27);
        free(v[i]);
    }
    free(v);
    return k;
}

static size_t count_tmp_dirs(const char *dir)
{
    struct dirent **v;
    int n = scandir(dir, &v, NULL, alphasort);
    assert_true(n >= 0);
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        size_t l = strlen(v[i]->d_name);
        k += l > 4 && !strcmp(v[i]->d_name + l - 4, ".tmp");
        free(v[i]);
    }
    free(v);
    return k;
}

static size_t count_wal_segments(const char *dir)
{
    char wal[512];
    snprintf(wal, sizeof wal, "%s/wal", dir);
    DIR *d = opendir(wal);
    assert_non_null(d);
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += strlen(de->d_name) == 8 && strspn(de->d_name, "0123456789") == 8;
    closedir(d);
    return n;
}

static uint32_t first_wal_segment(const char *dir)
{
    char wal[512];
    snprintf(wal, sizeof wal, "%s/wal", dir);
    DIR *d = opendir(wal);
    assert_non_null(d);
    uint32_t first = UINT32_MAX;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strlen(de->d_name) == 8 && strspn(de->d_name, "0123456789") == 8) {
            uint32_t v = (uint32_t)strtoul(de->d_name, NULL, 10);
            if (v < first)
                first = v;
        }
    closedir(d);
    return first;
}

static void copy_tree(const char *from, const char *to)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cp -a '%s' '%s'", from, to);
    assert_int_equal(system(cmd), 0);
}

/* ---- the store ---- */

typedef struct fx {
    char dir[256];
    pd_storage *st;
} fx;

/* The stores' wall clock (pd_storage_options.clock_ms): append_steps moves it
 * with the profiles it appends, as if they arrived in real time, so the time
 * bounds of appends and retention see the synthetic timeline of the tests. */
static int64_t g_now;
static int64_t test_clock(void)
{
    return g_now;
}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    g_now = 0;
    /* tmpfs when there is one: the many fsyncs of block writes cost nothing
       there, so the kill -9 rounds reach the cuts and compactions */
    struct stat st;
    bool shm = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0;
    snprintf(f->dir, sizeof f->dir, "%s/pd_blocks_test_XXXXXX", shm ? "/dev/shm" : "/tmp");
    assert_non_null(mkdtemp(f->dir));
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    pd_storage_close(f->st);
    rm_rf(f->dir);
    free(f);
    return 0;
}

static pd_storage *open_opts(const char *dir, int64_t dur, int64_t ret_ms, uint64_t ret_bytes)
{
    pd_storage_options o = pd_storage_options_default();
    o.clock_ms = test_clock;
    o.path = dir;
    o.segment_bytes = 16 * 1024; /* many segments: the checkpoint has work */
    o.fsync = PD_FSYNC_NEVER;
    o.block_duration_ms = dur;
    o.retention_ms = ret_ms;
    o.retention_bytes = ret_bytes;
    o.maintenance_ms = -1; /* the tests call pd_storage_maintain */
    pd_storage *st = NULL;
    pd_err err = {{0}};
    int rc = pd_storage_open(&o, &st, &err);
    if (rc < 0)
        fail_msg("open %s: %s (%d)", dir, err.msg, rc);
    return st;
}

/* Profile appended at heap step i (ts = (i+1) * STEP) and cpu step j
 * (ts = (j+1) * 3 * STEP). */
static const tprof *heap_at(int i)
{
    return &HEAP[i % NHEAP];
}
static const tprof *cpu_at(int j)
{
    return &CPU[j % NCPU];
}

/* Appends heap steps [from, to) and the cpu steps that fall in that time. */
static void append_steps(pd_storage *st, int from, int to)
{
    for (int i = from; i < to; i++) {
        int64_t ts = (int64_t)(i + 1) * STEP;
        if (g_now < ts)
            g_now = ts;
        const tprof *t = heap_at(i);
        pd_err err = {{0}};
        int rc = pd_storage_append(st, &L_HEAP, ts, t->body, t->len, &t->p, &err);
        if (rc < 0)
            fail_msg("append heap at %lld: %s", (long long)ts, err.msg);
        if ((i + 1) % 3 == 0) {
            int j = (i + 1) / 3 - 1;
            const tprof *c = cpu_at(j);
            rc = pd_storage_append(st, &L_CPU, ts, c->body, c->len, &c->p, &err);
            if (rc < 0)
                fail_msg("append cpu at %lld: %s", (long long)ts, err.msg);
        }
    }
}

static uint64_t ref_of(pd_storage *st, const char *name)
{
    pd_matcher m;
    assert_int_equal(pd_matcher_init(&m, PD_MATCH_EQ, "__name__", name, NULL), 0);
    pd_series_set set;
    assert_int_equal(pd_storage_select(st, &m, 1, INT64_MIN, INT64_MAX, &set, NULL), 0);
    pd_matcher_release(&m);
    uint64_t ref = set.n == 1 ? set.v[0].ref : 0;
    pd_series_set_release(&set);
    return ref;
}

/* Checks that exactly the heap steps [from, to) (and their cpu steps) are in
 * the store, each equal to its original, with the right totals. */
static void verify_steps(pd_storage *st, int from, int to)
{
    uint64_t refs[2] = {ref_of(st, "heap"), ref_of(st, "cpu")};
    assert_true(refs[0] != 0 && refs[1] != 0);
    for (int s = 0; s < 2; s++) {
        pd_points pts;
        pd_err err = {{0}};
        PD_ASSERT_OK(pd_storage_read_points(st, refs[s], INT64_MIN, INT64_MAX, &pts, &err), &err);
        size_t want = 0;
        for (int i = from; i < to; i++)
            want += s == 0 || (i + 1) % 3 == 0;
        if (pts.n != want)
            fail_msg("%s: %zu points, want %zu (steps %d..%d)", s ? "cpu" : "heap", pts.n, want,
                     from, to);
        size_t k = 0;
        for (int i = from; i < to; i++) {
            if (s == 1 && (i + 1) % 3)
                continue;
            int64_t ts = (int64_t)(i + 1) * STEP;
            const tprof *t = s == 0 ? heap_at(i) : cpu_at((i + 1) / 3 - 1);
            assert_int_equal(pts.v[k].ts_ms, ts);
            assert_int_equal(pts.v[k].n_types, t->p.n_sample_type);
            for (size_t j = 0; j < t->p.n_sample_type; j++)
                assert_int_equal(pts.v[k].totals[j], t->totals[j]);
            k++;
            pd_profile got;
            pd_buf raw;
            pd_buf_init(&raw, 0);
            int rc = pd_storage_read_profile(st, refs[s], ts, &got, &raw, &err);
            if (rc < 0)
                fail_msg("read %s at %lld: %s", s ? "cpu" : "heap", (long long)ts, err.msg);
            pd_err why = {{0}};
            if (!pd_profile_equal(&t->p, &got, &why))
                fail_msg("%s at %lld differs from its original: %s", s ? "cpu" : "heap",
                         (long long)ts, why.msg);
            /* raw is a pprof body that decodes to the same profile */
            pd_profile again;
            assert_int_equal(
                pd_profile_decode(&again, (const uint8_t *)raw.data, raw.len, NULL, &err), 0);
            assert_true(pd_profile_equal(&t->p, &again, NULL));
            pd_profile_release(&again);
            pd_profile_release(&got);
            pd_buf_release(&raw);
        }
        pd_points_release(&pts);
    }
}

static pd_storage_stats stats(pd_storage *st)
{
    pd_storage_stats ss;
    pd_storage_stats_get(st, &ss);
    return ss;
}

static int64_t heap_steps_profiles(int from, int to)
{
    int64_t n = 0;
    for (int i = from; i < to; i++)
        n += 1 + ((i + 1) % 3 == 0);
    return n;
}

/* Reads heap step i (ts (i+1) * STEP) of st and checks it against its
 * original; raw must be a body that decodes to the same profile. */
static void check_heap_step(pd_storage *st, uint64_t ref, int i)
{
    int64_t ts = (int64_t)(i + 1) * STEP;
    pd_profile got, again;
    pd_buf raw;
    pd_buf_init(&raw, 0);
    pd_err err = {{0}}, why = {{0}};
    if (pd_storage_read_profile(st, ref, ts, &got, &raw, &err) < 0)
        fail_msg("read heap step %d: %s", i, err.msg);
    if (!pd_profile_equal(&heap_at(i)->p, &got, &why))
        fail_msg("heap step %d differs from its original: %s", i, why.msg);
    PD_ASSERT_OK(pd_profile_decode(&again, (const uint8_t *)raw.data, raw.len, NULL, &err), &err);
    assert_true(pd_profile_equal(&heap_at(i)->p, &again, NULL));
    pd_profile_release(&again);
    pd_profile_release(&got);
    pd_buf_release(&raw);
}

/* The head holds its profiles decomposed in memory (symbols + value groups,
 * headmem_int.h), not as WAL references: appended out of time order across
 * several sealed and compressed groups, every profile reads back equal even
 * after the WAL files are deleted under the open store; the value groups take
 * far less memory than the bodies; replay rebuilds the same; head cuts start
 * new symbol generations and the old ones are freed with their last group. */
static void test_head_decomposed(void **state)
{
    fx *f = *state;
    enum { N = 100 }; /* > 3 groups of PD_HMEM_GROUP */
    int order[N];
    for (int i = 0; i < N; i++)
        order[i] = i;
    srand(7);
    for (int i = N - 1; i > 0; i--) { /* shuffled: out-of-order appends */
        int j = rand() % (i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    uint64_t gens0 = pd__hmem_generations(); /* (0: no store open) */
    f->st = open_opts(f->dir, -1, -1, 0);    /* no cuts yet */
    size_t bodies = 0;
    for (int k = 0; k < N; k++) {
        int i = order[k];
        const tprof *t = heap_at(i);
        pd_err err = {{0}};
        if (pd_storage_append(f->st, &L_HEAP, (int64_t)(i + 1) * STEP, t->body, t->len, &t->p,
                              &err) < 0)
            fail_msg("append heap step %d: %s", i, err.msg);
        bodies += t->len;
    }
    double chunk_bytes = pd_metrics_get("profd_storage_head_chunk_bytes", NULL);
    /* decomposed, delta-encoded and compressed: well under the gzip bodies */
    if (!(chunk_bytes > 0 && chunk_bytes * 4 < (double)bodies))
        fail_msg("head value groups hold %.0f bytes for %zu bytes of bodies", chunk_bytes, bodies);
    uint64_t ref = ref_of(f->st, "heap");
    for (int i = 0; i < N; i++)
        check_heap_step(f->st, ref, i);
    /* a copy for the replay below, then the WAL goes: reads need only memory */
    char copy[300], wal[300];
    snprintf(copy, sizeof copy, "%s-copy", f->dir);
    rm_rf(copy);
    copy_tree(f->dir, copy);
    snprintf(wal, sizeof wal, "%s/wal", f->dir);
    DIR *d = opendir(wal);
    assert_non_null(d);
    struct dirent *de;
    int removed = 0;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char pth[600];
        snprintf(pth, sizeof pth, "%s/%s", wal, de->d_name);
        removed += unlink(pth) == 0;
    }
    closedir(d);
    assert_true(removed >= 1);
    for (int i = 0; i < N; i++)
        check_heap_step(f->st, ref, i);
    pd_storage_close(f->st);
    f->st = NULL;

    /* replay indexes the WAL (reads come from it meanwhile); a maintenance
       round decomposes the replayed profiles into the head */
    pd_storage *st = open_opts(copy, -1, -1, 0);
    ref = ref_of(st, "heap");
    assert_int_equal(pd_metrics_get("profd_storage_head_wal_only_profiles", NULL), N);
    assert_int_equal(pd_metrics_get("profd_storage_head_chunk_bytes", NULL), 0);
    for (int i = 0; i < N; i++)
        check_heap_step(st, ref, i);
    pd_err merr = {{0}};
    PD_ASSERT_OK(pd_storage_maintain(st, &merr), &merr);
    assert_int_equal(pd_metrics_get("profd_storage_head_wal_only_profiles", NULL), 0);
    for (int i = 0; i < N; i++)
        check_heap_step(st, ref, i);
    double replayed = pd_metrics_get("profd_storage_head_chunk_bytes", NULL);
    assert_true(replayed > 0 && replayed * 4 < (double)bodies);
    pd_storage_close(st);

    /* with cuts: [0, 100 s) spans ten blocks of DUR; cutting at open (from
       the WAL: nothing is decomposed yet — the head snapshot of the clean
       close above is removed, else the head would be decomposed at open)
       leaves the newest ~1.5 DUR in the head, which the next maintenance
       round decomposes */
    char snap[700];
    snprintf(snap, sizeof snap, "%s/head.snapshot", copy);
    assert_int_equal(unlink(snap), 0);
    st = open_opts(copy, DUR, -1, 0);
    pd_storage_stats ss = stats(st);
    assert_true(ss.n_cuts >= 8);
    assert_true(ss.n_head_profiles < N / 4);
    assert_int_equal(ss.n_profiles, N);
    ref = ref_of(st, "heap");
    for (int i = 0; i < N; i++)
        check_heap_step(st, ref, i);
    PD_ASSERT_OK(pd_storage_maintain(st, &merr), &merr);
    assert_int_equal(pd_metrics_get("profd_storage_head_wal_only_profiles", NULL), 0);
    assert_int_equal(pd__hmem_generations(), gens0 + 1);
    for (int i = 0; i < N; i++)
        check_heap_step(st, ref, i);
    /* newer profiles push the old ones out: each cut starts a generation,
       and an older one goes with its last group */
    for (int i = N; i < N + 40; i++) {
        const tprof *t = heap_at(i);
        pd_err err = {{0}};
        if (pd_storage_append(st, &L_HEAP, (int64_t)(i + 1) * STEP, t->body, t->len, &t->p, &err) <
            0)
            fail_msg("append heap step %d: %s", i, err.msg);
    }
    ss = stats(st);
    assert_true(ss.n_head_profiles < 25);
    assert_int_equal(pd__hmem_generations(), gens0 + 2); /* this cut's and the current */
    double after_cut = pd_metrics_get("profd_storage_head_chunk_bytes", NULL);
    if (!(after_cut < replayed / 2))
        fail_msg("head value groups: %.0f bytes after the cuts, %.0f before", after_cut, replayed);
    for (int i = 0; i < N + 40; i++)
        check_heap_step(st, ref, i);
    pd_storage_close(st);
    assert_int_equal(pd__hmem_generations(), gens0);
    rm_rf(copy);
}

typedef struct bgctx {
    pd_storage *st;
    volatile int *stop;
    int max_step; /* steps below are appended (read by readers, racy: a hint) */
    size_t reads;
} bgctx;

static void *bg_reader(void *arg)
{
    bgctx *c = arg;
    unsigned seed = 99;
    pd_matcher m;
    assert_int_equal(pd_matcher_init(&m, PD_MATCH_EQ, "__name__", "heap", NULL), 0);
    while (!__atomic_load_n(c->stop, __ATOMIC_ACQUIRE)) {
        pd_series_set set;
        assert_int_equal(pd_storage_select(c->st, &m, 1, INT64_MIN, INT64_MAX, &set, NULL), 0);
        if (set.n != 1) {
            pd_series_set_release(&set);
            continue;
        }
        pd_points pts;
        assert_int_equal(
            pd_storage_read_points(c->st, set.v[0].ref, INT64_MIN, INT64_MAX, &pts, NULL), 0);
        for (int k = 0; k < 4 && pts.n; k++) {
            size_t j = (size_t)rand_r(&seed) % pts.n;
            int64_t ts = pts.v[j].ts_ms;
            int i = (int)(ts / STEP) - 1;
            pd_profile p;
            pd_err err = {{0}}, why = {{0}};
            if (pd_storage_read_profile(c->st, set.v[0].ref, ts, &p, NULL, &err) < 0)
                fail_msg("read heap at %lld during cuts: %s", (long long)ts, err.msg);
            if (!pd_profile_equal(&heap_at(i)->p, &p, &why))
                fail_msg("heap at %lld differs during cuts: %s", (long long)ts, why.msg);
            pd_profile_release(&p);
            __atomic_fetch_add(&c->reads, 1, __ATOMIC_RELAXED);
        }
        pd_points_release(&pts);
        pd_series_set_release(&set);
    }
    pd_matcher_release(&m);
    return NULL;
}

/* The maintenance thread cuts the decomposed head into blocks (dropping head
 * groups, switching symbol generations) and compacts while one thread
 * appends and two read random profiles: every read equals its original,
 * and at the end every profile is in the store once. */
static void test_background_cuts_with_readers(void **state)
{
    fx *f = *state;
    pd_storage_options o = pd_storage_options_default();
    o.path = f->dir;
    o.segment_bytes = 64 * 1024;
    o.fsync = PD_FSYNC_NEVER;
    o.block_duration_ms = DUR;
    o.retention_ms = -1;
    o.maintenance_ms = 20;
    pd_err err = {{0}};
    if (pd_storage_open(&o, &f->st, &err) < 0)
        fail_msg("open: %s", err.msg);
    volatile int stop = 0;
    bgctx c[2] = {{f->st, &stop, 0, 0}, {f->st, &stop, 0, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, bg_reader, &c[i]), 0);
    enum { STEPS = 150 };
    for (int i = 0; i < STEPS; i++) {
        append_steps(f->st, i, i + 1);
        if (i % 10 == 9)
            usleep(20 * 1000); /* let the thread cut while reads go on */
    }
    /* wait for the cuts the appends made due */
    /* and for a read of the readers beside them (waited for: 120 s is a hang guard) */
    for (int w = 0; w < 6000 && ((int64_t)stats(f->st).n_head_profiles >
                                     heap_steps_profiles(STEPS - 25, STEPS) ||
                                 __atomic_load_n(&c[0].reads, __ATOMIC_RELAXED) +
                                         __atomic_load_n(&c[1].reads, __ATOMIC_RELAXED) ==
                                     0);
         w++)
        usleep(20 * 1000);
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    pd_storage_stats ss = stats(f->st);
    assert_true(ss.n_cuts >= 10);
    assert_true(c[0].reads + c[1].reads > 0);
    assert_int_equal(ss.n_profiles, heap_steps_profiles(0, STEPS));
    verify_steps(f->st, 0, STEPS);
}

/* ---- tests ---- */

/* Head cut: once the head spans 1.5 block durations past an aligned start,
 * that range becomes a block, leaves the head, and its WAL segments go. */
static void test_head_cut(void **state)
{
    fx *f = *state;
    f->st = open_opts(f->dir, DUR, -1, 0);
    append_steps(f->st, 0, 9); /* ts 1000..9000: nothing due */
    pd_storage_stats ss = stats(f->st);
    assert_int_equal(ss.n_blocks, 0);
    assert_int_equal(ss.n_cuts, 0);
    uint32_t first_before = first_wal_segment(f->dir);
    append_steps(f->st, 9, 30); /* ts up to 30000: [0,10s) and [10s,20s) due */
    ss = stats(f->st);
    assert_int_equal(ss.n_blocks, 2);
    assert_int_equal(ss.n_cuts, 2);
    /* the head keeps ts >= 20000: heap steps 19..29 */
    assert_int_equal(ss.n_head_profiles, heap_steps_profiles(19, 30));
    assert_int_equal(ss.n_profiles, heap_steps_profiles(0, 30));
    assert_int_equal(ss.min_ts, 1000);
    assert_int_equal(ss.max_ts, 30000);
    char names[16][27];
    assert_int_equal(list_blocks(f->dir, names, 16), 2);
    /* every block is whole and checks clean */
    for (int i = 0; i < 2; i++) {
        char dir[8192];
        snprintf(dir, sizeof dir, "%s/%s", f->dir, names[i]);
        pd_block_meta m;
        pd_err err = {{0}};
        if (pd__block_check(dir, &m, &err) < 0)
            fail_msg("check %s: %s", dir, err.msg);
        assert_true(m.min_t >= (int64_t)i * DUR && m.max_t < (int64_t)(i + 1) * DUR);
        assert_int_equal(m.level, 1);
    }
    /* the WAL checkpoint removed the oldest segments (only blocks needed them) */
    assert_true(first_wal_segment(f->dir) > first_before);
    assert_true(count_wal_segments(f->dir) >= 1);
    verify_steps(f->st, 0, 30);
    /* a duplicate of a profile now in a block is refused */
    pd_err err = {{0}};
    assert_int_equal(
        pd_storage_append(f->st, &L_HEAP, 5000, HEAP[0].body, HEAP[0].len, &HEAP[0].p, &err),
        PD_EEXIST);
    pd_storage_close(f->st);
    f->st = open_opts(f->dir, DUR, -1, 0);
    ss = stats(f->st);
    assert_int_equal(ss.n_blocks, 2);
    assert_int_equal(ss.n_profiles, heap_steps_profiles(0, 30));
    verify_steps(f->st, 0, 30);
}

/* A crash after a block's rename but before the WAL checkpoint leaves the
 * profiles in both: the store shows each once. */
static void test_cut_crash_leftover(void **state)
{
    fx *f = *state;
    char saved[300];
    snprintf(saved, sizeof saved, "%s.wal", f->dir);
    f->st = open_opts(f->dir, DUR, -1, 0);
    append_steps(f->st, 0, 14);
    pd_storage_close(f->st);
    f->st = NULL;
    char wal[300];
    snprintf(wal, sizeof wal, "%s/wal", f->dir);
    copy_tree(wal, saved); /* the WAL before any cut */
    f->st = open_opts(f->dir, DUR, -1, 0);
    append_steps(f->st, 14, 20); /* cuts [0,10s) */
    assert_int_equal(stats(f->st).n_blocks, 1);
    pd_storage_close(f->st);
    f->st = NULL;
    /* put the removed pre-cut segments back (the others are newer) */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cp -an '%s'/. '%s'/", saved, wal);
    assert_int_equal(system(cmd), 0);
    rm_rf(saved);
    f->st = open_opts(f->dir, -1, -1, 0); /* no cut: look at the state as found */
    pd_storage_stats ss = stats(f->st);
    assert_int_equal(ss.n_blocks, 1);
    assert_int_equal(ss.n_profiles, heap_steps_profiles(0, 20));
    verify_steps(f->st, 0, 20);
}

/* Compaction merges the blocks of each closed 3 x duration range; the
 * sources go; everything reads back equal; levels and sources are
 * recorded; a source left behind by a crash is dropped at open. */
static void test_compaction(void **state)
{
    fx *f = *state;
    char backup[300];
    snprintf(backup, sizeof backup, "%s.bak", f->dir);
    f->st = open_opts(f->dir, DUR, -1, 0);
    append_steps(f->st, 0, 60); /* cuts [0,10s) .. [40s,50s) */
    pd_storage_stats ss = stats(f->st);
    assert_int_equal(ss.n_blocks, 5);
    char before[16][27];
    assert_int_equal(list_blocks(f->dir, before, 16), 5);
    copy_tree(f->dir, backup);
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_storage_maintain(f->st, &err), &err);
    ss = stats(f->st);
    /* [0,30s) from 3 blocks, [30s,60s) from 2; [0,90s) is not closed yet */
    assert_int_equal(ss.n_compactions, 2);
    assert_int_equal(ss.n_blocks, 2);
    assert_int_equal(ss.n_profiles, heap_steps_profiles(0, 60));
    char after[16][27];
    assert_int_equal(list_blocks(f->dir, after, 16), 2);
    assert_int_equal(count_tmp_dirs(f->dir), 0);
    for (int i = 0; i < 2; i++) {
        char dir[8192];
        snprintf(dir, sizeof dir, "%s/%s", f->dir, after[i]);
        pd_block *b;
        PD_ASSERT_OK(pd__block_open(dir, &b, &err), &err);
        assert_int_equal(pd__block_meta(b)->level, 2);
        size_t ns;
        const char(*src)[27] = pd__block_sources(b, &ns);
        assert_true(ns == 2 || ns == 3);
        for (size_t k = 0; k < ns; k++) { /* the sources are the old blocks */
            bool known = false;
            for (int j = 0; j < 5; j++)
                known |= !strcmp(src[k], before[j]);
            assert_true(known);
        }
        pd__block_close(b);
        PD_ASSERT_OK(pd__block_check(dir, NULL, &err), &err);
    }
    verify_steps(f->st, 0, 60);
    /* nothing more to do */
    PD_ASSERT_OK(pd_storage_maintain(f->st, &err), &err);
    assert_int_equal(stats(f->st).n_compactions, 2);
    pd_storage_close(f->st);
    f->st = NULL;

    /* crash between the compacted block's rename and the sources' removal:
       put a source back; open drops it and shows every profile once */
    char src_dir[600], dst_dir[600];
    snprintf(src_dir, sizeof src_dir, "%s/%s", backup, before[1]);
    snprintf(dst_dir, sizeof dst_dir, "%s/%s", f->dir, before[1]);
    copy_tree(src_dir, dst_dir);
    /* and a half-deleted one (renamed to .tmp) */
    snprintf(src_dir, sizeof src_dir, "%s/%s", backup, before[3]);
    snprintf(dst_dir, sizeof dst_dir, "%s/%s.tmp", f->dir, before[3]);
    copy_tree(src_dir, dst_dir);
    rm_rf(backup);
    f->st = open_opts(f->dir, DUR, -1, 0);
    ss = stats(f->st);
    assert_int_equal(ss.n_blocks, 2);
    assert_int_equal(ss.n_profiles, heap_steps_profiles(0, 60));
    assert_int_equal(list_blocks(f->dir, after, 16), 2);
    assert_int_equal(count_tmp_dirs(f->dir), 0);
    verify_steps(f->st, 0, 60);

    /* more time: [50s,60s) is cut and joins [30s,50s) at level 3 (its range
       [30s,60s) was compacted before it closed), [60s,90s) closes at level 2,
       then [0,90s) is closed and all three become one block at level 4 */
    append_steps(f->st, 60, 100);
    PD_ASSERT_OK(pd_storage_maintain(f->st, &err), &err);
    ss = stats(f->st);
    assert_int_equal(ss.n_profiles, heap_steps_profiles(0, 100));
    assert_int_equal(ss.n_compactions, 3);
    assert_int_equal(ss.n_blocks, 1);
    verify_steps(f->st, 0, 100);
    assert_int_equal(list_blocks(f->dir, after, 16), 1);
    char dir[8192];
    snprintf(dir, sizeof dir, "%s/%s", f->dir, after[0]);
    pd_block_meta m;
    PD_ASSERT_OK(pd__block_check(dir, &m, &err), &err);
    assert_int_equal(m.level, 4);
    assert_int_equal(m.min_t, 1000);
    assert_int_equal(m.max_t, 89000);
    assert_int_equal(m.n_profiles, heap_steps_profiles(0, 89));
}

/* Retention by time deletes whole blocks whose newest profile is older
 * than the store's newest minus the retention; the head is kept. */
static void test_retention_time(void **state)
{
    fx *f = *state;
    f->st = open_opts(f->dir, DUR, 25000, 0); /* 10% of 25 s < 3 x DUR: no compaction */
    append_steps(f->st, 0, 60);
    assert_int_equal(stats(f->st).n_blocks, 5);
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_storage_maintain(f->st, &err), &err);
    pd_storage_stats ss = stats(f->st);
    assert_int_equal(ss.n_compactions, 0);
    /* newest 60000: blocks with max_t < 35000 go: [0,10s) [10s,20s) [20s,30s) */
    assert_int_equal(ss.n_retention_deletes, 3);
    assert_int_equal(ss.n_blocks, 2);
    char names[16][27];
    assert_int_equal(list_blocks(f->dir, names, 16), 2);
    assert_int_equal(count_tmp_dirs(f->dir), 0);
    verify_steps(f->st, 29, 60);
    pd_storage_close(f->st);
    f->st = open_opts(f->dir, DUR, 25000, 0);
    verify_steps(f->st, 29, 60);
}

/* Issue 19 "one push with a future timestamp wipes the store": a profile
 * more than the future grace (10 min) after the wall clock is refused and
 * changes nothing; one inside the grace is kept, and retention, measured
 * against the wall clock, does not age the others out because of it. */
static void test_future_push_does_not_wipe_the_store(void **state)
{
    fx *f = *state;
    f->st = open_opts(f->dir, DUR, 25000, 0);
    append_steps(f->st, 0, 60); /* clock at 60 s: blocks up to [50s,60s) */
    pd_storage_stats s0 = stats(f->st);
    pd_err err = {{0}};
    const tprof *t = heap_at(0);
    int64_t far = g_now + 10 * 60 * 1000 + 1;
    assert_int_equal(pd_storage_append(f->st, &L_HEAP, far, t->body, t->len, &t->p, &err),
                     PD_EOUTOFBOUNDS);
    assert_non_null(strstr(err.msg, "--storage.future-grace=10m"));
    assert_int_equal(stats(f->st).n_profiles, s0.n_profiles);
    /* 2030 as in the report: refused too */
    assert_int_equal(pd_storage_append(f->st, &L_HEAP, 1893456000000, t->body, t->len, &t->p, &err),
                     PD_EOUTOFBOUNDS);
    /* inside the grace: kept, and the blocks before it outlive retention */
    int64_t near = g_now + 9 * 60 * 1000;
    pd_labels other; /* its own series: verify_steps counts heap and cpu exactly */
    pd_labels_init(&other);
    assert_int_equal(pd_labels_set(&other, "__name__", "allocs", NULL), 0);
    assert_int_equal(pd_labels_set(&other, "instance", "future", NULL), 0);
    PD_ASSERT_OK(pd_storage_append(f->st, &other, near, t->body, t->len, &t->p, &err), &err);
    pd_labels_release(&other);
    PD_ASSERT_OK(pd_storage_maintain(f->st, &err), &err);
    /* the clock says 60 s: [0,10s) [10s,20s) [20s,30s) are older than 35 s and
       go, as without the future profile; the old code (newest - retention)
       deleted every block */
    pd_storage_stats s1 = stats(f->st);
    assert_int_equal(s1.n_retention_deletes, 3);
    verify_steps(f->st, 29, 60);
}

/* Issue 19 "an old push is acknowledged, then deleted": a profile older than
 * the retention keeps is refused (PD_EOUTOFBOUNDS naming the flag), not
 * acknowledged and then deleted by the next retention round. */
static void test_old_push_refused(void **state)
{
    fx *f = *state;
    f->st = open_opts(f->dir, DUR, 25000, 0);
    append_steps(f->st, 0, 40); /* clock at 40 s: oldest accepted 15 s */
    pd_storage_stats s0 = stats(f->st);
    pd_err err = {{0}};
    const tprof *t = heap_at(3);
    assert_int_equal(pd_storage_append(f->st, &L_HEAP, 14999, t->body, t->len, &t->p, &err),
                     PD_EOUTOFBOUNDS);
    assert_non_null(strstr(err.msg, "--storage.retention.time=25s"));
    assert_int_equal(stats(f->st).n_profiles, s0.n_profiles);
    /* at the bound: accepted, and still there after a maintenance round */
    assert_int_equal(pd_storage_append(f->st, &L_CPU, 15000 + 500, t->body, t->len, &t->p, &err),
                     0);
    PD_ASSERT_OK(pd_storage_maintain(f->st, &err), &err);
    pd_profile p;
    assert_int_equal(pd_storage_read_profile(f->st, ref_of(f->st, "cpu"), 15500, &p, NULL, &err),
                     0);
    pd_profile_release(&p);
}

/* Retention runs on the wall clock: with no new profile, blocks older than
 * now - retention still go (the old code waited for a newer profile). */
static void test_retention_by_wall_clock(void **state)
{
    fx *f = *state;
    f->st = open_opts(f->dir, DUR, 25000, 0);
    append_steps(f->st, 0, 60);
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_storage_maintain(f->st, &err), &err);
    assert_int_equal(stats(f->st).n_retention_deletes, 3);
    g_now = 60000 + 20000; /* 20 s later, nothing new: [30s,40s) [40s,50s) are past 55 s */
    PD_ASSERT_OK(pd_storage_maintain(f->st, &err), &err);
    pd_storage_stats ss = stats(f->st);
    assert_int_equal(ss.n_retention_deletes, 5);
    verify_steps(f->st, 49, 60);
}

/* Retention by size deletes the oldest blocks until blocks + WAL fit. */
static void test_retention_size(void **state)
{
    fx *f = *state;
    f->st = open_opts(f->dir, DUR, -1, 0);
    append_steps(f->st, 0, 45); /* blocks [0,10s) [10s,20s) [20s,30s) [30s,40s) */
    pd_storage_stats ss = stats(f->st);
    assert_int_equal(ss.n_blocks, 4);
    pd_storage_close(f->st);
    f->st = NULL;
    /* a limit half the oldest block under the size: exactly the oldest goes
       (the others are larger than that half) */
    char names[16][27], dir[8192];
    assert_int_equal(list_blocks(f->dir, names, 16), 4);
    pd_block_meta m;
    pd_err e = {{0}};
    snprintf(dir, sizeof dir, "%s/%s", f->dir, names[0]);
    PD_ASSERT_OK(pd__block_check(dir, &m, &e), &e);
    uint64_t oldest = m.meta_bytes + m.index_bytes + m.symbols_bytes + m.chunks_bytes;
    /* (no block duration: compaction ranges are then 6 h and more, none closed) */
    f->st = open_opts(f->dir, -1, -1, ss.bytes_on_disk - oldest / 2);
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_storage_maintain(f->st, &err), &err);
    pd_storage_stats s2 = stats(f->st);
    assert_int_equal(s2.n_retention_deletes, 1);
    assert_int_equal(s2.n_blocks, 3);
    assert_true(s2.bytes_on_disk < ss.bytes_on_disk);
    verify_steps(f->st, 9, 45);
}

/* Damaged block files (format 2): a flipped byte in one series entry of a
 * block's index loses that series of that block only; a truncated symbols
 * file loses the profiles that reference its frames past the cut, and what is
 * still served is the original (never a wrong profile); both are counted and
 * left on disk for tsdb check/repair; a damaged value chunk fails only the
 * reads of the profiles in it. */
static void flip_byte(const char *path, off_t off)
{
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint8_t c;
    assert_int_equal(pread(fd, &c, 1, off), 1);
    c ^= 0x5a;
    assert_int_equal(pwrite(fd, &c, 1, off), 1);
    close(fd);
}

static void test_damaged_blocks(void **state)
{
    fx *f = *state;
    f->st = open_opts(f->dir, DUR, -1, 0);
    append_steps(f->st, 0, 45); /* blocks [0,10s) [10s,20s) [20s,30s) [30s,40s) */
    pd_storage_close(f->st);
    f->st = NULL;
    char names[16][27];
    assert_int_equal(list_blocks(f->dir, names, 16), 4);
    char path[600];
    /* block 0: a flipped byte in the index; block 1: truncated symbols */
    snprintf(path, sizeof path, "%s/%s/index", f->dir, names[0]);
    flip_byte(path, 20);
    snprintf(path, sizeof path, "%s/%s/symbols", f->dir, names[1]);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(truncate(path, st.st_size / 2), 0);
    double c0 = pd_metrics_get("profd_storage_corruptions_total", NULL);
    f->st = open_opts(f->dir, -1, -1, 0);
    pd_storage_stats ss = stats(f->st);
    assert_int_equal(ss.n_blocks, 4);
    assert_true(pd_metrics_get("profd_storage_corruptions_total", NULL) >=
                c0 + 2); /* both blocks reported */
    {
        uint64_t refs[2] = {ref_of(f->st, "heap"), ref_of(f->st, "cpu")};
        int served[2] = {0, 0}, want[2] = {0, 0};
        for (int i = 0; i < 45; i++)
            for (int k = 0; k < 2; k++) {
                if (k == 1 && (i + 1) % 3)
                    continue;
                const tprof *t = k == 0 ? heap_at(i) : cpu_at((i + 1) / 3 - 1);
                pd_profile got;
                pd_err err = {{0}};
                int rc = pd_storage_read_profile(f->st, refs[k], (int64_t)(i + 1) * STEP, &got,
                                                 NULL, &err);
                if (i >= 19 && rc)
                    fail_msg("step %d of an intact block or the head not served: %s", i, err.msg);
                if (rc == 0) { /* whatever is served is the original */
                    assert_true(pd_profile_equal(&t->p, &got, NULL));
                    pd_profile_release(&got);
                }
                if (i < 9) { /* block 0 */
                    want[k]++;
                    served[k] += rc == 0;
                }
            }
        /* exactly one series of block 0 is lost: the one whose entry was hit */
        if (!((served[0] == want[0] && served[1] == 0) || (served[1] == want[1] && served[0] == 0)))
            fail_msg("block 0 with one index entry damaged: heap %d of %d, cpu %d of %d served",
                     served[0], want[0], served[1], want[1]);
    }
    pd_storage_close(f->st);
    f->st = NULL;
    assert_int_equal(list_blocks(f->dir, names, 16), 4); /* left for tsdb check */

    /* block 2: a flipped byte inside its chunks file, past the header */
    snprintf(path, sizeof path, "%s/%s/chunks/000001", f->dir, names[2]);
    assert_int_equal(stat(path, &st), 0);
    flip_byte(path, 8 + 9);
    char dir[8192];
    snprintf(dir, sizeof dir, "%s/%s", f->dir, names[2]);
    pd_err err = {{0}};
    assert_true(pd__block_check(dir, NULL, &err) == PD_ECORRUPT);
    assert_non_null(strstr(err.msg, "chunks/000001"));
    f->st = open_opts(f->dir, -1, -1, 0);
    assert_int_equal(stats(f->st).n_blocks, 4); /* opens: chunks are checked when read */
    /* the profiles of the head and block 3 still read; some of block 2's
       fail cleanly, naming the file */
    uint64_t refs[2] = {ref_of(f->st, "heap"), ref_of(f->st, "cpu")};
    int bad = 0, good = 0;
    for (int i = 19; i < 45; i++) {
        for (int k = 0; k < 2; k++) {
            if (k == 1 && (i + 1) % 3)
                continue;
            const tprof *t = k == 0 ? heap_at(i) : cpu_at((i + 1) / 3 - 1);
            pd_profile got;
            int rc =
                pd_storage_read_profile(f->st, refs[k], (int64_t)(i + 1) * STEP, &got, NULL, &err);
            if (rc == 0) {
                assert_true(pd_profile_equal(&t->p, &got, NULL));
                pd_profile_release(&got);
                good++;
            } else {
                assert_int_equal(rc, PD_ECORRUPT);
                assert_non_null(strstr(err.msg, "chunks/000001"));
                assert_true(i < 29); /* only block 2's profiles (ts < 30000) */
                bad++;
            }
        }
    }
    assert_true(bad > 0);
    assert_true(good >= 20);
}

/* ---- kill -9 during ingest, head cut and compaction ---- */

#define KROUNDS 100      /* issue 19: >= 100 rounds with cuts and compactions in flight */
#define KSTEP 100        /* ms between profiles in the child */
#define KDUR 2000        /* block duration in the child: a cut every ~20 profiles */
#define KMARK UINT32_MAX /* child -> parent: a background compaction completed */

/* The child: appends heap profiles at ts = (round * 1000 + i + 1) * KSTEP,
 * writing i to the pipe after each acknowledged append, while the
 * maintenance thread compacts every few ms. Never returns. */
static void child_main(const char *dir, int round, int fd)
{
    pd_storage_options o = pd_storage_options_default();
    o.path = dir;
    o.segment_bytes = 64 * 1024;
    o.fsync = PD_FSYNC_NEVER; /* kill -9 keeps the page cache */
    o.block_duration_ms = KDUR;
    o.retention_ms = -1;
    o.maintenance_ms = 5;
    pd_storage *st = NULL;
    pd_err err = {{0}};
    if (pd_storage_open(&o, &st, &err) < 0)
        _exit(3);
    for (uint32_t i = 0; i < 400; i++) {
        int64_t ts = ((int64_t)round * 1000 + i + 1) * KSTEP;
        const tprof *t = heap_at((int)i);
        if (pd_storage_append(st, &L_HEAP, ts, t->body, t->len, &t->p, &err) < 0)
            _exit(4);
        if (write(fd, &i, sizeof i) != sizeof i)
            _exit(5);
    }
    /* then the maintenance thread works on; tell the parent each time a
       compaction has completed (KMARK), until the kill */
    pd_storage_stats ss;
    pd_storage_stats_get(st, &ss);
    uint64_t seen = ss.n_compactions;
    for (;;) {
        usleep(2000);
        pd_storage_stats_get(st, &ss);
        if (ss.n_compactions > seen) {
            seen = ss.n_compactions;
            uint32_t m = KMARK;
            if (write(fd, &m, sizeof m) != sizeof m)
                _exit(5);
        }
    }
}

static void test_kill9_lifecycle(void **state)
{
    fx *f = *state;
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    srand(seed);
    print_message("kill9 seed %u\n", seed);
    uint64_t total = 0, blocks_seen = 0, compactions_seen = 0, marks = 0;
    static char checked[4096][27];
    size_t n_checked = 0;
    for (int round = 0; round < KROUNDS; round++) {
        int p[2];
        assert_int_equal(pipe(p), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(p[0]);
            child_main(f->dir, round, p[1]);
        }
        close(p[1]);
        /* a third of the rounds let the child ingest all it has and wait for
           a background compaction to complete, then kill it a moment later
           (in the next cut or compaction, or idle); the others kill it
           mid-ingest, soon or a little later */
        bool settle = rand() % 3 == 0;
        uint32_t want = settle ? 400 : 1 + (uint32_t)(rand() % 120), msg = 0, acked = 0;
        while (acked < want && read(p[0], &msg, sizeof msg) == sizeof msg) {
            if (msg == KMARK)
                marks++;
            else
                acked++;
        }
        long us = rand() % 3 ? rand() % 20000 : rand() % 400000;
        if (settle) {
            struct pollfd pfd = {.fd = p[0], .events = POLLIN};
            bool marked = false;
            for (int waited = 0; !marked && waited < 60000; waited += 100) {
                if (poll(&pfd, 1, 100) == 1 && read(p[0], &msg, sizeof msg) == sizeof msg) {
                    if (msg == KMARK) {
                        marks++;
                        marked = true;
                    } else {
                        acked++;
                    }
                }
            }
            us = rand() % 50000;
        }
        struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (!WIFSIGNALED(status))
            fail_msg("round %d: child failed with exit code %d", round, WEXITSTATUS(status));
        while (read(p[0], &msg, sizeof msg) == sizeof msg) {
            if (msg == KMARK)
                marks++;
            else
                acked++;
        }
        close(p[0]);

        f->st = open_opts(f->dir, -1, -1, 0); /* as found: no cut, no compaction */
        uint64_t ref = ref_of(f->st, "heap");
        assert_true(ref != 0);
        pd_points pts;
        pd_err err = {{0}};
        int64_t lo = ((int64_t)round * 1000 + 1) * KSTEP;
        int64_t hi = ((int64_t)round * 1000 + 400) * KSTEP;
        PD_ASSERT_OK(pd_storage_read_points(f->st, ref, lo, hi, &pts, &err), &err);
        /* every acknowledged append is there, at most one more (written, not acked) */
        if (pts.n != acked && pts.n != acked + 1)
            fail_msg("round %d: %zu profiles stored, %u acknowledged", round, pts.n, acked);
        for (uint32_t i = 0; i < pts.n; i++) {
            int64_t t = ((int64_t)round * 1000 + i + 1) * KSTEP;
            assert_int_equal(pts.v[i].ts_ms, t);
            const tprof *tp = heap_at((int)i);
            for (size_t j = 0; j < tp->p.n_sample_type; j++)
                assert_int_equal(pts.v[i].totals[j], tp->totals[j]);
            if (i % 7 == 0 || i + 1 == pts.n) { /* a sample of full reads */
                pd_profile got;
                if (pd_storage_read_profile(f->st, ref, t, &got, NULL, &err) < 0)
                    fail_msg("round %d: profile %u unreadable: %s", round, i, err.msg);
                assert_true(pd_profile_equal(&tp->p, &got, NULL));
                pd_profile_release(&got);
            }
        }
        total += pts.n;
        pd_points_release(&pts);
        pd_storage_stats ss = stats(f->st);
        assert_int_equal(ss.n_profiles, total); /* earlier rounds intact, none twice */
        if (ss.n_blocks > blocks_seen)
            blocks_seen = ss.n_blocks;
        pd_storage_close(f->st);
        f->st = NULL;
        /* every block on disk checks clean (what tsdb check does); blocks are
           immutable, so each is checked once */
        char names[256][27];
        size_t nb = list_blocks(f->dir, names, 256);
        for (size_t b = 0; b < nb; b++) {
            bool seen = false;
            for (size_t c = 0; c < n_checked && !seen; c++)
                seen = !strcmp(checked[c], names[b]);
            if (seen)
                continue;
            if (n_checked < sizeof checked / sizeof *checked)
                memcpy(checked[n_checked++], names[b], 27);
            char dir[8192];
            snprintf(dir, sizeof dir, "%s/%s", f->dir, names[b]);
            pd_block_meta m;
            if (pd__block_check(dir, &m, &err) < 0)
                fail_msg("round %d: block %s: %s", round, names[b], err.msg);
            if (m.level > 1)
                compactions_seen++;
        }
    }
    print_message("kill9: %llu profiles kept over %d rounds, up to %llu blocks, %llu "
                  "compactions completed in children, %llu compacted blocks on disk\n",
                  (unsigned long long)total, KROUNDS, (unsigned long long)blocks_seen,
                  (unsigned long long)marks, (unsigned long long)compactions_seen);
    /* the rounds did cut and compact, or the test proved nothing */
    assert_true(blocks_seen >= 2);
    assert_true(marks >= 1);
}

/* ---- pd_storage_select_latest ---- */

static bool types_equal(const pd_sample_type_desc *a, size_t na, const pd_sample_type_desc *b,
                        size_t nb)
{
    if (na != nb)
        return false;
    for (size_t i = 0; i < na; i++)
        if (strcmp(a[i].type, b[i].type) || strcmp(a[i].unit, b[i].unit))
            return false;
    return true;
}

/* pd_storage_select_latest against what the per-profile path says:
 * pd_storage_select for the series and labels, the last point of
 * pd_storage_read_points for the newest profile and its types; types_id
 * equal exactly when the types are. Returns the count selected. */
static size_t check_latest(pd_storage *st, int64_t mint, int64_t maxt)
{
    pd_err err = {{0}};
    pd_series_set set;
    pd_series_latest_set ls;
    PD_ASSERT_OK(pd_storage_select(st, NULL, 0, mint, maxt, &set, &err), &err);
    PD_ASSERT_OK(pd_storage_select_latest(st, NULL, 0, mint, maxt, &ls, &err), &err);
    if (ls.n != set.n)
        fail_msg("[%lld, %lld]: select_latest %zu series, select %zu", (long long)mint,
                 (long long)maxt, ls.n, set.n);
    for (size_t i = 0; i < ls.n; i++) {
        const pd_series_latest *e = &ls.v[i];
        if (i)
            assert_true(ls.v[i - 1].ref < e->ref);
        size_t j = 0;
        while (j < set.n && set.v[j].ref != e->ref)
            j++;
        assert_true(j < set.n);
        assert_int_equal(pd_labels_cmp(e->labels, &set.v[j].labels), 0);
        pd_points pts;
        PD_ASSERT_OK(pd_storage_read_points(st, e->ref, mint, maxt, &pts, &err), &err);
        assert_true(pts.n > 0);
        const pd_point *last = &pts.v[pts.n - 1];
        if (e->ts_ms != last->ts_ms)
            fail_msg("[%lld, %lld] series %llu: newest %lld, read_points' last %lld",
                     (long long)mint, (long long)maxt, (unsigned long long)e->ref,
                     (long long)e->ts_ms, (long long)last->ts_ms);
        assert_true(types_equal(e->types, e->n_types, last->types, last->n_types));
        assert_true(e->types_id < ls.n_types_ids);
        pd_points_release(&pts);
        for (size_t k = 0; k < i; k++)
            assert_int_equal(ls.v[k].types_id == e->types_id,
                             types_equal(ls.v[k].types, ls.v[k].n_types, e->types, e->n_types));
    }
    size_t n = ls.n;
    pd_series_latest_set_release(&ls);
    pd_series_set_release(&set);
    return n;
}

static const int64_t LATEST_RANGES[][2] = {
    {INT64_MIN, INT64_MAX}, {0, 4000},      {0, 5000},      {1000, 19999}, {2500, 2500},
    {3000, 3000},           {15000, 25000}, {21000, 40000}, {4500, 4500},  {60000, 70000},
};

static void check_latest_ranges(pd_storage *st)
{
    for (size_t i = 0; i < sizeof LATEST_RANGES / sizeof LATEST_RANGES[0]; i++)
        check_latest(st, LATEST_RANGES[i][0], LATEST_RANGES[i][1]);
}

/* The newest profile of each series and its sample types, from the head,
 * from blocks (after head cuts), after compaction and after a restart, for
 * a series whose sample types change (mix: cpu, then heap, then cpu again):
 * a range's answer follows the profile that is newest in it. */
static void test_select_latest(void **state)
{
    fx *f = *state;
    pd_labels mix;
    pd_labels_init(&mix);
    assert_int_equal(pd_labels_set(&mix, "__name__", "mix", NULL), 0);
    assert_int_equal(pd_labels_set(&mix, "job", "demo", NULL), 0);
    f->st = open_opts(f->dir, DUR, -1, 0);
    append_steps(f->st, 0, 9);
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_storage_append(f->st, &mix, 1500, CPU[0].body, CPU[0].len, &CPU[0].p, &err),
                 &err);
    PD_ASSERT_OK(pd_storage_append(f->st, &mix, 4500, HEAP[0].body, HEAP[0].len, &HEAP[0].p, &err),
                 &err);
    check_latest_ranges(f->st); /* head only */
    assert_int_equal(check_latest(f->st, 2500, 2500), 0);
    assert_int_equal(check_latest(f->st, 4500, 4500), 1);
    append_steps(f->st, 9, 30); /* cuts [0,10s) and [10s,20s): mix is in a block */
    assert_int_equal(stats(f->st).n_blocks, 2);
    g_now = 31500;
    PD_ASSERT_OK(pd_storage_append(f->st, &mix, 31500, CPU[1].body, CPU[1].len, &CPU[1].p, &err),
                 &err);
    check_latest_ranges(f->st); /* blocks and head */
    /* mix's newest: heap at 4500 (a block) in [0, 5000], cpu at 31500 overall */
    pd_series_latest_set ls;
    PD_ASSERT_OK(pd_storage_select_latest(f->st, NULL, 0, 0, 5000, &ls, &err), &err);
    bool seen = false;
    for (size_t i = 0; i < ls.n; i++)
        if (!strcmp(pd_labels_get(ls.v[i].labels, "__name__"), "mix")) {
            assert_int_equal(ls.v[i].ts_ms, 4500);
            assert_true(ls.v[i].n_types > 0);
            assert_string_equal(ls.v[i].types[0].type,
                                HEAP[0].p.string_table[HEAP[0].p.sample_type[0].type]);
            seen = true;
        }
    assert_true(seen);
    pd_series_latest_set_release(&ls);
    append_steps(f->st, 30, 60); /* more blocks: compaction has work */
    PD_ASSERT_OK(pd_storage_maintain(f->st, &err), &err);
    assert_true(stats(f->st).n_compactions >= 1);
    check_latest_ranges(f->st); /* compacted */
    pd_storage_close(f->st);
    f->st = open_opts(f->dir, DUR, -1, 0);
    check_latest_ranges(f->st); /* after a restart */
    pd_labels_release(&mix);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_head_cut, setup, teardown),
        cmocka_unit_test_setup_teardown(test_head_decomposed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_background_cuts_with_readers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cut_crash_leftover, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compaction, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retention_time, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retention_size, setup, teardown),
        cmocka_unit_test_setup_teardown(test_future_push_does_not_wipe_the_store, setup, teardown),
        cmocka_unit_test_setup_teardown(test_old_push_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retention_by_wall_clock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged_blocks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kill9_lifecycle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_select_latest, setup, teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
