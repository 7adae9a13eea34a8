/* A small store with blocks and a head, for the damage tests
 * (test_damage.c, test_corruption_matrix.c). Profiles are real ones of
 * PD_TESTDATA/pprof/go-demo-series. Series:
 *   S0 heap{job="demo",instance="a"}  one profile every STEP ms
 *   S1 heap{job="demo",instance="b"}  one profile every STEP ms
 *   S2 cpu{job="demo",instance="a"}   one every 3 * STEP ms
 * for ts = STEP .. NSTEP * STEP; block duration DUR: the store holds blocks
 * [0, 10 s) and [10 s, 20 s), and a head with the rest (its WAL in several
 * small segments, the `series` file written by the checkpoint).
 * fx_expected lists every profile appended (the test's truth). */
#ifndef PD_TEST_DAMAGE_FIXTURE_H
#define PD_TEST_DAMAGE_FIXTURE_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/metrics.h"
#include "storage/storage.h"
#include "storage/tsdb/block_int.h"
#include "storage/tsdb/tsdb_cli_int.h"

#ifndef PD_TESTDATA
#error "PD_TESTDATA must be defined"
#endif

#define FX_NHEAP 12
#define FX_NCPU 4
#define FX_STEP 1000
#define FX_DUR 10000
#define FX_NSTEP 26
#define FX_NSERIES 3
#define FX_MAXEXP (FX_NSTEP * 3)

typedef struct fx_prof {
    uint8_t *body;
    size_t len;
    pd_profile p;
} fx_prof;

typedef struct fx_exp {
    int s;          /* series index */
    int64_t ts;
    const fx_prof *t;
} fx_exp;

static fx_prof FX_HEAP[FX_NHEAP], FX_CPU[FX_NCPU];
static pd_labels FX_L[FX_NSERIES];
static fx_exp FX_E[FX_MAXEXP];
static size_t FX_NE;

static void fx_load(fx_prof *t, const char *rel)
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
}

static int fx_group_setup(void **state)
{
    (void)state;
    for (int i = 0; i < FX_NHEAP; i++) {
        char rel[64];
        snprintf(rel, sizeof rel, "go-demo-series/heap-%04d.pb.gz", i + 1);
        fx_load(&FX_HEAP[i], rel);
    }
    for (int i = 0; i < FX_NCPU; i++) {
        char rel[64];
        snprintf(rel, sizeof rel, "go-demo-series/cpu-%04d.pb.gz", i + 1);
        fx_load(&FX_CPU[i], rel);
    }
    const char *nm[FX_NSERIES] = {"heap", "heap", "cpu"}, *in[FX_NSERIES] = {"a", "b", "a"};
    for (int s = 0; s < FX_NSERIES; s++) {
        pd_labels_init(&FX_L[s]);
        assert_int_equal(pd_labels_set(&FX_L[s], "__name__", nm[s], NULL), 0);
        assert_int_equal(pd_labels_set(&FX_L[s], "job", "demo", NULL), 0);
        assert_int_equal(pd_labels_set(&FX_L[s], "instance", in[s], NULL), 0);
    }
    FX_NE = 0;
    for (int i = 0; i < FX_NSTEP; i++) {
        int64_t ts = (int64_t)(i + 1) * FX_STEP;
        FX_E[FX_NE++] = (fx_exp){0, ts, &FX_HEAP[i % FX_NHEAP]};
        FX_E[FX_NE++] = (fx_exp){1, ts, &FX_HEAP[(i + 5) % FX_NHEAP]};
        if ((i + 1) % 3 == 0)
            FX_E[FX_NE++] = (fx_exp){2, ts, &FX_CPU[((i + 1) / 3) % FX_NCPU]};
    }
    return 0;
}

static int fx_group_teardown(void **state)
{
    (void)state;
    for (int i = 0; i < FX_NHEAP; i++) {
        free(FX_HEAP[i].body);
        pd_profile_release(&FX_HEAP[i].p);
    }
    for (int i = 0; i < FX_NCPU; i++) {
        free(FX_CPU[i].body);
        pd_profile_release(&FX_CPU[i].p);
    }
    for (int s = 0; s < FX_NSERIES; s++)
        pd_labels_release(&FX_L[s]);
    return 0;
}

static int fx_rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void fx_rm_rf(const char *dir) { nftw(dir, fx_rm_cb, 16, FTW_DEPTH | FTW_PHYS); }

__attribute__((unused)) static void fx_copy_tree(const char *from, const char *to)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cp -a '%s' '%s'", from, to);
    assert_int_equal(system(cmd), 0);
}

/* A fresh directory (tmpfs when there is one). */
static void fx_mkdtemp(char *dir, size_t n, const char *tag)
{
    struct stat st;
    bool shm = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0;
    snprintf(dir, n, "%s/pd_%s_XXXXXX", shm ? "/dev/shm" : "/tmp", tag);
    assert_non_null(mkdtemp(dir));
}

static pd_storage *fx_open(const char *dir, int64_t dur)
{
    pd_storage_options o = pd_storage_options_default();
    o.path = dir;
    o.segment_bytes = 8 * 1024; /* several segments in the head */
    o.fsync = PD_FSYNC_NEVER;
    o.block_duration_ms = dur;
    o.retention_ms = -1;
    o.maintenance_ms = -1;
    pd_storage *st = NULL;
    pd_err err = {{0}};
    int rc = pd_storage_open(&o, &st, &err);
    if (rc < 0)
        fail_msg("open %s: %s (%d)", dir, err.msg, rc);
    return st;
}

/* Writes the fixture store into dir. */
static void fx_build(const char *dir)
{
    pd_storage *st = fx_open(dir, FX_DUR);
    for (size_t k = 0; k < FX_NE; k++) {
        pd_err err = {{0}};
        const fx_exp *e = &FX_E[k];
        int rc = pd_storage_append(st, &FX_L[e->s], e->ts, e->t->body, e->t->len, &e->t->p, &err);
        if (rc < 0)
            fail_msg("append %d at %lld: %s", e->s, (long long)e->ts, err.msg);
    }
    pd_storage_close(st);
}

/* Ref of series s in st, 0 when not selected. */
static uint64_t fx_ref(pd_storage *st, int s)
{
    pd_series_set set;
    assert_int_equal(pd_storage_select(st, NULL, 0, INT64_MIN, INT64_MAX, &set, NULL), 0);
    uint64_t ref = 0;
    for (size_t i = 0; i < set.n; i++)
        if (!pd_labels_cmp(&set.v[i].labels, &FX_L[s]))
            ref = set.v[i].ref;
    pd_series_set_release(&set);
    return ref;
}

/* Whether profile e is served equal to what was appended. */
static bool fx_served(pd_storage *st, const uint64_t refs[FX_NSERIES], const fx_exp *e)
{
    if (!refs[e->s])
        return false;
    pd_profile got;
    pd_err err = {{0}};
    if (pd_storage_read_profile(st, refs[e->s], e->ts, &got, NULL, &err) < 0)
        return false;
    bool eq = pd_profile_equal(&e->t->p, &got, NULL);
    pd_profile_release(&got);
    return eq;
}

/* Whether read_points of series s lists ts (and fails for nothing). */
static bool fx_has_point(pd_storage *st, uint64_t ref, int64_t ts)
{
    pd_points pts;
    pd_err err = {{0}};
    int rc = pd_storage_read_points(st, ref, INT64_MIN, INT64_MAX, &pts, &err);
    if (rc < 0)
        fail_msg("read_points of %llu failed: %s", (unsigned long long)ref, err.msg);
    bool found = false;
    for (size_t i = 0; i < pts.n; i++)
        found |= pts.v[i].ts_ms == ts;
    pd_points_release(&pts);
    return found;
}

/* Block directories of dir sorted by min time (up to max). */
static size_t fx_blocks(const char *dir, char names[][27], int64_t *mint, size_t max)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        if (strlen(e->d_name) != 26)
            continue;
        char p[600];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        pd_block *b;
        pd_err err = {{0}};
        if (pd__block_open(p, &b, &err) < 0)
            continue;
        int64_t t = pd__block_meta(b)->min_t;
        pd__block_close(b);
        size_t i = n++;
        while (i > 0 && mint[i - 1] > t) {
            mint[i] = mint[i - 1];
            memcpy(names[i], names[i - 1], 27);
            i--;
        }
        mint[i] = t;
        memcpy(names[i], e->d_name, 27);
    }
    closedir(d);
    return n;
}

/* The WAL segments of dir (numbers ascending, up to max). */
static size_t fx_segments(const char *dir, uint32_t *nums, size_t max)
{
    char w[600];
    snprintf(w, sizeof w, "%s/wal", dir);
    DIR *d = opendir(w);
    assert_non_null(d);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        if (strlen(e->d_name) != 8 || strspn(e->d_name, "0123456789") != 8)
            continue;
        uint32_t v = (uint32_t)strtoul(e->d_name, NULL, 10);
        size_t i = n++;
        while (i > 0 && nums[i - 1] > v) {
            nums[i] = nums[i - 1];
            i--;
        }
        nums[i] = v;
    }
    closedir(d);
    return n;
}

/* A record of a WAL segment or of the series file. */
typedef struct fx_rec {
    uint64_t off, end; /* header offset, end of payload */
    uint8_t type;
    uint64_t ref;      /* SERIES and PROFILE */
    int64_t ts;        /* PROFILE */
} fx_rec;

/* Parses the records of file path (WAL framing) into v (up to max). */
static size_t fx_records(const char *path, fx_rec *v, size_t max)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    static uint8_t buf[1 << 20];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    size_t n = 0, off = 8;
    while (off + 9 <= len && n < max) {
        uint32_t l = (uint32_t)buf[off + 1] | (uint32_t)buf[off + 2] << 8 |
                     (uint32_t)buf[off + 3] << 16 | (uint32_t)buf[off + 4] << 24;
        /* (an END record of a segment or the CHECKPOINT of the series file:
           4 bytes, no ref) */
        if (l > len - off - 9 || (l < 8 && l != 4))
            break;
        fx_rec r = {.off = off, .end = off + 9 + l, .type = buf[off]};
        const uint8_t *p = buf + off + 9;
        for (int i = 0; i < 8 && l >= 8; i++)
            r.ref |= (uint64_t)p[i] << (8 * i);
        uint64_t t = 0;
        for (int i = 0; i < 8 && l >= 16; i++)
            t |= (uint64_t)p[8 + i] << (8 * i);
        r.ts = (int64_t)t;
        v[n++] = r;
        off = (size_t)r.end;
    }
    return n;
}

__attribute__((unused)) static void flip(const char *path, off_t off)
{
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint8_t c;
    assert_int_equal(pread(fd, &c, 1, off), 1);
    c ^= 0x5a;
    assert_int_equal(pwrite(fd, &c, 1, off), 1);
    close(fd);
}

/* Runs `profd tsdb ARGS` in-process with stdout into a buffer; returns rc. */
__attribute__((unused)) static int run_tsdb(char *out, size_t n, const char *cmd, const char *dir)
{
    fflush(stdout);
    char tmp[] = "/tmp/pd_tsdb_out_XXXXXX";
    int fd = mkstemp(tmp);
    assert_true(fd >= 0);
    int saved = dup(1);
    dup2(fd, 1);
    char *argv[] = {"tsdb", (char *)cmd, (char *)dir, NULL};
    int rc = pd_tsdb_cli_main(3, argv);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    ssize_t got = pread(fd, out, n - 1, 0);
    out[got > 0 ? got : 0] = 0;
    close(fd);
    unlink(tmp);
    return rc;
}

static double fx_corruptions(void)
{
    return pd_metrics_get("profd_storage_corruptions_total", NULL);
}

#endif
