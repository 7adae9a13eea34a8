/* Unit tests of src/storage/tsdb/ (db.c, head.c, replay.c, querier.c: the
 * storage.h implementation) with the real profiles of PD_TESTDATA/pprof, in temp directories.
 *
 * The store under test (fill_store):
 *   S0 heap{instance="a", job="demo"}  heap-0001..0030 at 1000, 2000, ..., 30000
 *   S1 heap{instance="b", job="demo"}  heap-0001..0030 at 500 + 2000*i, appended
 *                                      in DEScending time order
 *   S2 cpu{instance="a", job="demo"}   cpu-0001..0010 at 1000 + 3000*i
 *   S3.. <name>{instance="a", job="once"}  each go-demo-once file at 50000
 *   node-cpu / node-heap {job="node"}      at 60000
 * Expected answers follow from this table: which series a matcher selects is
 * worked out by hand; totals come from pd_profile_totals of the original
 * decode, profiles are compared with pd_profile_equal and raw bytes with the
 * files. Disk layout checks read the segment files with a small reader
 * written here from docs/format/wal.md, independent of wal.c.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include "../pd_test.h"

#include "base/crc32c.h"
#include "base/metrics.h"
#include "storage/storage.h"

#ifndef PD_TESTDATA
#error "PD_TESTDATA must be defined"
#endif

/* ---- test data ---- */

typedef struct tprof {
    const char *file;
    uint8_t *body;
    size_t len;
    pd_profile p;
    int64_t *totals;
} tprof;

static const char *FILES[] = {
#define H(n) "go-demo-series/heap-00" #n ".pb.gz"
    H(01),
    H(02),
    H(03),
    H(04),
    H(05),
    H(06),
    H(07),
    H(08),
    H(09),
    H(10),
    H(11),
    H(12),
    H(13),
    H(14),
    H(15),
    H(16),
    H(17),
    H(18),
    H(19),
    H(20),
    H(21),
    H(22),
    H(23),
    H(24),
    H(25),
    H(26),
    H(27),
    H(28),
    H(29),
    H(30),
#undef H
    "go-demo-series/cpu-0001.pb.gz",
    "go-demo-series/cpu-0002.pb.gz",
    "go-demo-series/cpu-0003.pb.gz",
    "go-demo-series/cpu-0004.pb.gz",
    "go-demo-series/cpu-0005.pb.gz",
    "go-demo-series/cpu-0006.pb.gz",
    "go-demo-series/cpu-0007.pb.gz",
    "go-demo-series/cpu-0008.pb.gz",
    "go-demo-series/cpu-0009.pb.gz",
    "go-demo-series/cpu-0010.pb.gz",
    "go-demo-once/allocs.pb.gz",
    "go-demo-once/block.pb.gz",
    "go-demo-once/goroutine.pb.gz",
    "go-demo-once/heap.pb.gz",
    "go-demo-once/mutex.pb.gz",
    "go-demo-once/profile.pb.gz",
    "go-demo-once/threadcreate.pb.gz",
    "node/node-cpu.pb.gz",
    "node/node-heap.pb.gz",
};
#define NFILES (sizeof FILES / sizeof FILES[0])
#define HEAP0 0
#define CPU0 30
#define ONCE0 40
#define NONCE 7
#define NODE0 47

static tprof PROF[NFILES];
#define NSERIES (3 + NONCE + 2)
static pd_labels SER[NSERIES];

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
    for (size_t i = 0; i < NFILES; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/pprof/%s", PD_TESTDATA, FILES[i]);
        PROF[i].file = FILES[i];
        load_file(path, &PROF[i].body, &PROF[i].len);
        pd_err err = {{0}};
        int rc = pd_profile_decode(&PROF[i].p, PROF[i].body, PROF[i].len, NULL, &err);
        if (rc < 0) {
            fprintf(stderr, "decode %s: %s\n", path, err.msg);
            return -1;
        }
        PROF[i].totals = calloc(PROF[i].p.n_sample_type + 1, sizeof(int64_t));
        pd_profile_totals(&PROF[i].p, PROF[i].totals);
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    for (size_t i = 0; i < NFILES; i++) {
        free(PROF[i].body);
        free(PROF[i].totals);
        pd_profile_release(&PROF[i].p);
    }
    for (size_t i = 0; i < NSERIES; i++)
        pd_labels_release(&SER[i]);
    return 0;
}

/* ---- directories and files ---- */

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

static void mk_tmpdir(char *buf, size_t n)
{
    snprintf(buf, n, "/tmp/pd_storage_test_XXXXXX");
    assert_non_null(mkdtemp(buf));
}

static off_t file_size(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return st.st_size;
}

/* Segment numbers in dir/wal, ascending; returns the count. */
static size_t list_segs(const char *dir, uint32_t *nums, size_t max)
{
    char wal[512];
    snprintf(wal, sizeof wal, "%s/wal", dir);
    DIR *d = opendir(wal);
    assert_non_null(d);
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strlen(de->d_name) == 8 && strspn(de->d_name, "0123456789") == 8 && n < max)
            nums[n++] = (uint32_t)strtoul(de->d_name, NULL, 10);
    }
    closedir(d);
    for (size_t i = 1; i < n; i++) /* insertion sort */
        for (size_t j = i; j > 0 && nums[j - 1] > nums[j]; j--) {
            uint32_t t = nums[j];
            nums[j] = nums[j - 1];
            nums[j - 1] = t;
        }
    return n;
}

static void seg_path(const char *dir, uint32_t num, char *buf, size_t n)
{
    snprintf(buf, n, "%s/wal/%08u", dir, num);
}

/* A record as docs/format/wal.md describes it, read by the test itself. */
typedef struct drec {
    off_t off; /* of the header */
    uint8_t type;
    uint32_t len;
    uint64_t ref; /* first 8 payload bytes (both record types) */
    int64_t ts;   /* PROFILE: next 8 */
} drec;

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* Parses a whole segment file; every record must be intact. */
static size_t parse_seg(const char *path, drec *out, size_t max)
{
    uint8_t *data;
    size_t len;
    load_file(path, &data, &len);
    assert_true(len >= 8);
    assert_memory_equal(data, "PDWAL\x02\0\0", 8); /* WAL format 2 */
    size_t off = 8, n = 0;
    while (off < len) {
        assert_true(len - off >= 9);
        drec r = {.off = (off_t)off, .type = data[off], .len = le32(data + off + 1)};
        uint32_t crc = le32(data + off + 5);
        assert_true(len - off - 9 >= r.len);
        uint32_t c = pd_crc32c(pd_crc32c(0, &r.type, 1), data + off + 9, r.len);
        assert_int_equal(c, crc);
        if (r.type == 3) { /* END: the segment rolled; the last record */
            assert_int_equal(r.len, 4);
            assert_int_equal(off + 13, len);
            off += 13;
            continue;
        }
        assert_true(r.type == 1 || r.type == 2);
        assert_true(r.len >= 16);
        r.ref = le64(data + off + 9);
        r.ts = (int64_t)le64(data + off + 17);
        if (n < max)
            out[n++] = r;
        off += 9 + r.len;
    }
    free(data);
    return n;
}

/* ---- the store ---- */

typedef struct entry {
    int series; /* index into the series table below */
    int64_t ts;
    int prof; /* index into PROF */
} entry;

static entry ENT[200];
static size_t NENT;

static void mk_labels(pd_labels *ls, ...)
{
    va_list ap;
    va_start(ap, ls);
    pd_labels_init(ls);
    const char *k;
    while ((k = va_arg(ap, const char *)) != NULL) {
        const char *v = va_arg(ap, const char *);
        assert_int_equal(pd_labels_set(ls, k, v, NULL), 0);
    }
    va_end(ap);
}

static void build_plan(void)
{
    static bool done;
    if (done)
        goto entries;
    done = true;
    mk_labels(&SER[0], "__name__", "heap", "job", "demo", "instance", "a", NULL);
    mk_labels(&SER[1], "__name__", "heap", "job", "demo", "instance", "b", NULL);
    mk_labels(&SER[2], "__name__", "cpu", "job", "demo", "instance", "a", NULL);
    for (int i = 0; i < NONCE; i++) {
        char name[64];
        const char *f = strchr(FILES[ONCE0 + i], '/') + 1;
        snprintf(name, sizeof name, "%.*s", (int)(strchr(f, '.') - f), f);
        mk_labels(&SER[3 + i], "__name__", name, "job", "once", "instance", "a", NULL);
    }
    mk_labels(&SER[3 + NONCE], "__name__", "wall", "job", "node", NULL);
    mk_labels(&SER[4 + NONCE], "__name__", "nodeheap", "job", "node", NULL);
entries:
    NENT = 0;
    for (int i = 0; i < 30; i++)
        ENT[NENT++] = (entry){0, 1000 + 1000 * i, HEAP0 + i};
    for (int i = 29; i >= 0; i--)
        ENT[NENT++] = (entry){1, 500 + 2000 * i, HEAP0 + i};
    for (int i = 0; i < 10; i++)
        ENT[NENT++] = (entry){2, 1000 + 3000 * i, CPU0 + i};
    for (int i = 0; i < NONCE; i++)
        ENT[NENT++] = (entry){3 + i, 50000, ONCE0 + i};
    ENT[NENT++] = (entry){3 + NONCE, 60000, NODE0};
    ENT[NENT++] = (entry){4 + NONCE, 60000, NODE0 + 1};
}

static pd_storage *open_store(const char *dir, size_t seg_bytes, pd_fsync_policy fs)
{
    pd_storage_options o = pd_storage_options_default();
    o.path = dir;
    o.segment_bytes = seg_bytes;
    o.retention_ms = -1; /* synthetic times from 1970: no lower time bound */
    o.fsync = fs;
    pd_storage *st = NULL;
    pd_err err = {{0}};
    int rc = pd_storage_open(&o, &st, &err);
    if (rc < 0)
        fail_msg("open %s: %s (%d)", dir, err.msg, rc);
    return st;
}

static int append_entry(pd_storage *st, const entry *e)
{
    pd_err err = {{0}};
    const tprof *t = &PROF[e->prof];
    return pd_storage_append(st, &SER[e->series], e->ts, t->body, t->len, &t->p, &err);
}

static void fill_store(pd_storage *st, size_t upto)
{
    build_plan();
    for (size_t i = 0; i < upto && i < NENT; i++)
        assert_int_equal(append_entry(st, &ENT[i]), 0);
}

/* The ref of series si (exactly one series must match its labels). */
static uint64_t ref_of(pd_storage *st, int si)
{
    pd_matcher ms[8];
    const pd_labels *ls = &SER[si];
    for (size_t i = 0; i < ls->n; i++)
        assert_int_equal(pd_matcher_init(&ms[i], PD_MATCH_EQ, ls->v[i].name, ls->v[i].value, NULL),
                         0);
    pd_series_set set;
    assert_int_equal(pd_storage_select(st, ms, ls->n, INT64_MIN, INT64_MAX, &set, NULL), 0);
    assert_int_equal(set.n, 1);
    assert_int_equal(pd_labels_cmp(&set.v[0].labels, ls), 0);
    uint64_t ref = set.v[0].ref;
    pd_series_set_release(&set);
    for (size_t i = 0; i < ls->n; i++)
        pd_matcher_release(&ms[i]);
    return ref;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Checks one stored profile: raw bytes, semantic equality. */
static void check_profile(pd_storage *st, uint64_t ref, const entry *e)
{
    pd_profile got;
    pd_buf raw;
    pd_buf_init(&raw, 0);
    pd_err err = {{0}};
    int rc = pd_storage_read_profile(st, ref, e->ts, &got, &raw, &err);
    if (rc < 0)
        fail_msg("read_profile ref %llu ts %lld: %s", (unsigned long long)ref, (long long)e->ts,
                 err.msg);
    const tprof *t = &PROF[e->prof];
    assert_int_equal(raw.len, t->len);
    assert_memory_equal(raw.data, t->body, t->len);
    pd_err why = {{0}};
    if (!pd_profile_equal(&got, &t->p, &why))
        fail_msg("profile %s at %lld differs: %s", t->file, (long long)e->ts, why.msg);
    pd_profile_release(&got);
    pd_buf_release(&raw);
}

/* Checks every entry in ENT[0..n) except those for which skip[i] is true,
 * through select, read_points and read_profile; refs[] must match if given. */
static void verify_store(pd_storage *st, size_t n, const bool *skip, uint64_t *refs)
{
    for (int si = 0; si < (int)NSERIES; si++) {
        int64_t ts[64];
        const entry *byts[64];
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (ENT[i].series == si && !(skip && skip[i]))
                ts[k++] = ENT[i].ts;
        if (k == 0)
            continue;
        qsort(ts, k, sizeof ts[0], cmp_i64);
        for (size_t j = 0; j < k; j++)
            for (size_t i = 0; i < n; i++)
                if (ENT[i].series == si && ENT[i].ts == ts[j])
                    byts[j] = &ENT[i];
        uint64_t ref = ref_of(st, si);
        if (refs && refs[si])
            assert_int_equal(ref, refs[si]);
        if (refs)
            refs[si] = ref;
        pd_points pts;
        assert_int_equal(pd_storage_read_points(st, ref, INT64_MIN, INT64_MAX, &pts, NULL), 0);
        assert_int_equal(pts.n, k);
        for (size_t j = 0; j < k; j++) {
            const tprof *t = &PROF[byts[j]->prof];
            assert_int_equal(pts.v[j].ts_ms, ts[j]);
            assert_int_equal(pts.v[j].n_types, t->p.n_sample_type);
            for (size_t q = 0; q < t->p.n_sample_type; q++) {
                assert_int_equal(pts.v[j].totals[q], t->totals[q]);
                assert_string_equal(pts.v[j].types[q].type,
                                    pd_profile_str(&t->p, t->p.sample_type[q].type));
                assert_string_equal(pts.v[j].types[q].unit,
                                    pd_profile_str(&t->p, t->p.sample_type[q].unit));
            }
            check_profile(st, ref, byts[j]);
        }
        pd_points_release(&pts);
    }
}

typedef struct fx {
    char dir[256];
    pd_storage *st;
} fx;

static int setup(void **state)
{
    build_plan();
    fx *f = calloc(1, sizeof *f);
    mk_tmpdir(f->dir, sizeof f->dir);
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

/* Series selection goes through the postings (label pair -> refs): for 300
 * series with random labels (some absent) and 400 random matcher sets of
 * every kind (= != =~ !~, values present, absent, empty, regexes that match
 * "" or not), select returns exactly the series a brute-force
 * pd_matchers_match over every series finds, before and after reopen. */
static void test_select_postings(void **state)
{
    fx *f = *state;
    enum { NS = 300, NQ = 400 };
    static const char *NAMES[] = {"job", "instance", "zone", "team"};
    static const char *VALS[] = {"api", "db", "a", "b", "c", "api-2", "x.y"};
    static const char *RES[] = {"api.*", "a|b", ".*", "", "d.*", "[abc]", ".+", "x\\.y"};
    pd_labels *ls = calloc(NS, sizeof *ls);
    srand(11);
    f->st = open_store(f->dir, 0, PD_FSYNC_NEVER);
    for (int i = 0; i < NS; i++) {
        pd_labels_init(&ls[i]);
        assert_int_equal(pd_labels_set(&ls[i], "__name__", i % 3 ? "heap" : "cpu", NULL), 0);
        for (int k = 0; k < 4; k++)
            if (rand() % 4) /* absent in a quarter of the series */
                assert_int_equal(pd_labels_set(&ls[i], NAMES[k], VALS[rand() % 7], NULL), 0);
        char id[16];
        snprintf(id, sizeof id, "%d", i); /* unique series */
        assert_int_equal(pd_labels_set(&ls[i], "id", id, NULL), 0);
        pd_err err = {{0}};
        const tprof *t = &PROF[0];
        assert_int_equal(pd_storage_append(f->st, &ls[i], 1000 + i, t->body, t->len, &t->p, &err),
                         0);
    }
    for (int round = 0; round < 2; round++) {
        for (int q = 0; q < NQ; q++) {
            pd_matcher ms[4];
            size_t nm = 1 + (size_t)(rand() % 3);
            for (size_t j = 0; j < nm; j++) {
                pd_match_type ty = (pd_match_type)(rand() % 4);
                const char *name = j == 0 && rand() % 2 ? "__name__" : NAMES[rand() % 4];
                const char *val;
                if (ty == PD_MATCH_RE || ty == PD_MATCH_NRE)
                    val = RES[rand() % 8];
                else if (!strcmp(name, "__name__"))
                    val = rand() % 2 ? "heap" : "cpu";
                else
                    val = rand() % 8 == 0 ? "" : VALS[rand() % 7];
                assert_int_equal(pd_matcher_init(&ms[j], ty, name, val, NULL), 0);
            }
            bool want[NS];
            size_t n_want = 0;
            for (int i = 0; i < NS; i++)
                n_want += want[i] = pd_matchers_match(ms, nm, &ls[i]);
            pd_series_set set;
            assert_int_equal(pd_storage_select(f->st, ms, nm, INT64_MIN, INT64_MAX, &set, NULL), 0);
            if (set.n != n_want)
                fail_msg("query %d (%zu matchers, first %s %s \"%s\"): %zu series, want %zu", q, nm,
                         ms[0].name, pd_match_type_str(ms[0].type), ms[0].value, set.n, n_want);
            for (size_t k = 0; k < set.n; k++) {
                int id = atoi(pd_labels_get(&set.v[k].labels, "id"));
                assert_true(id >= 0 && id < NS && want[id]);
            }
            pd_series_set_release(&set);
            for (size_t j = 0; j < nm; j++)
                pd_matcher_release(&ms[j]);
        }
        pd_storage_close(f->st); /* the postings are rebuilt at open */
        f->st = open_store(f->dir, 0, PD_FSYNC_NEVER);
    }
    for (int i = 0; i < NS; i++)
        pd_labels_release(&ls[i]);
    free(ls);
}

/* ---- tests ---- */

static size_t select_count(pd_storage *st, int64_t mint, int64_t maxt, pd_series_set *keep, ...)
{
    pd_matcher ms[8];
    size_t n = 0;
    va_list ap;
    va_start(ap, keep);
    const char *name;
    while ((name = va_arg(ap, const char *)) != NULL) {
        pd_match_type t = (pd_match_type)va_arg(ap, int);
        const char *v = va_arg(ap, const char *);
        assert_int_equal(pd_matcher_init(&ms[n++], t, name, v, NULL), 0);
    }
    va_end(ap);
    pd_series_set set;
    assert_int_equal(pd_storage_select(st, ms, n, mint, maxt, &set, NULL), 0);
    for (size_t i = 1; i < set.n; i++)
        assert_true(pd_labels_cmp(&set.v[i - 1].labels, &set.v[i].labels) < 0);
    for (size_t i = 0; i < n; i++)
        pd_matcher_release(&ms[i]);
    size_t c = set.n;
    if (keep)
        *keep = set;
    else
        pd_series_set_release(&set);
    return c;
}

#define ALL INT64_MIN, INT64_MAX

static void test_append_select_read(void **state)
{
    fx *f = *state;
    f->st = open_store(f->dir, 0, PD_FSYNC_BATCH);
    fill_store(f->st, NENT);
    uint64_t refs[NSERIES] = {0};
    verify_store(f->st, NENT, NULL, refs);
    /* refs are assigned in first-append order: 1, 2, 3, ... */
    for (int i = 0; i < (int)NSERIES; i++)
        assert_int_equal(refs[i], (uint64_t)i + 1);

    pd_storage *st = f->st;
    pd_series_set set;
    /* = : three heap series (demo a, demo b, once a) */
    assert_int_equal(select_count(st, ALL, NULL, "__name__", PD_MATCH_EQ, "heap", NULL), 3);
    /* both demo heap series, instance a before b */
    assert_int_equal(select_count(st, ALL, &set, "__name__", PD_MATCH_EQ, "heap", "job",
                                  PD_MATCH_EQ, "demo", NULL),
                     2);
    assert_string_equal(pd_labels_get(&set.v[0].labels, "instance"), "a");
    assert_string_equal(pd_labels_get(&set.v[1].labels, "instance"), "b");
    assert_int_equal(set.v[0].n_profiles, 30);
    assert_int_equal(set.v[0].min_ts, 1000);
    assert_int_equal(set.v[0].max_ts, 30000);
    assert_int_equal(set.v[1].min_ts, 500);
    assert_int_equal(set.v[1].max_ts, 500 + 2000 * 29);
    pd_series_set_release(&set);
    /* =~ (anchored: "hea" must not match "heap"): the three heaps and cpu */
    assert_int_equal(select_count(st, ALL, NULL, "__name__", PD_MATCH_RE, "heap|cpu", NULL), 4);
    assert_int_equal(select_count(st, ALL, NULL, "__name__", PD_MATCH_RE, "hea", NULL), 0);
    /* != : everything but the demo job */
    assert_int_equal(select_count(st, ALL, NULL, "job", PD_MATCH_NEQ, "demo", NULL), NONCE + 2);
    /* !~ combined with = */
    assert_int_equal(select_count(st, ALL, NULL, "__name__", PD_MATCH_NRE, "heap|cpu", "job",
                                  PD_MATCH_EQ, "demo", NULL),
                     0);
    assert_int_equal(select_count(st, ALL, &set, "job", PD_MATCH_EQ, "demo", "instance",
                                  PD_MATCH_NEQ, "a", NULL),
                     1);
    assert_string_equal(pd_labels_get(&set.v[0].labels, "instance"), "b");
    pd_series_set_release(&set);
    /* absent label matches as "": the node series have no instance */
    assert_int_equal(select_count(st, ALL, NULL, "instance", PD_MATCH_EQ, "", NULL), 2);
    /* no matchers: all */
    assert_int_equal(select_count(st, ALL, NULL, NULL), NSERIES);

    /* time ranges: cpu points at 1000, 4000, 7000, ..., 28000 */
    assert_int_equal(select_count(st, 7000, 13000, &set, "__name__", PD_MATCH_EQ, "cpu", NULL), 1);
    assert_int_equal(set.v[0].n_profiles, 3);
    assert_int_equal(set.v[0].min_ts, 7000);
    assert_int_equal(set.v[0].max_ts, 13000);
    pd_series_set_release(&set);
    assert_int_equal(select_count(st, 7001, 9999, NULL, "__name__", PD_MATCH_EQ, "cpu", NULL), 0);
    assert_int_equal(select_count(st, 28001, 49999, NULL, "job", PD_MATCH_EQ, "demo", NULL),
                     2); /* heap b goes to 58500 */
    assert_int_equal(select_count(st, 60001, INT64_MAX, NULL, NULL), 0);
    assert_int_equal(select_count(st, 10, 5, NULL, NULL), 0);

    /* read_points in a sub-range */
    pd_points pts;
    assert_int_equal(pd_storage_read_points(st, refs[1], 4500, 8500, &pts, NULL), 0);
    assert_int_equal(pts.n, 3); /* 4500, 6500, 8500 */
    assert_int_equal(pts.v[0].ts_ms, 4500);
    assert_int_equal(pts.v[2].ts_ms, 8500);
    assert_int_equal(pts.v[1].totals[1], PROF[HEAP0 + 3].totals[1]);
    pd_points_release(&pts);
    assert_int_equal(pd_storage_read_points(st, refs[1], 4501, 4502, &pts, NULL), 0);
    assert_int_equal(pts.n, 0);
    pd_points_release(&pts);

    /* not found */
    pd_profile p;
    assert_int_equal(pd_storage_read_points(st, 9999, ALL, &pts, NULL), PD_ENOTFOUND);
    assert_int_equal(pd_storage_read_profile(st, refs[0], 1001, &p, NULL, NULL), PD_ENOTFOUND);
    assert_int_equal(pd_storage_read_profile(st, 9999, 1000, &p, NULL, NULL), PD_ENOTFOUND);

    /* stats and metrics */
    pd_storage_stats ss;
    pd_storage_stats_get(st, &ss);
    assert_int_equal(ss.n_series, NSERIES);
    assert_int_equal(ss.n_profiles, NENT);
    assert_int_equal(ss.min_ts, 500);
    assert_int_equal(ss.max_ts, 60000);
    uint32_t segs[16];
    size_t ns = list_segs(f->dir, segs, 16);
    assert_int_equal(ns, 1);
    char path[512];
    seg_path(f->dir, segs[0], path, sizeof path);
    assert_int_equal(ss.bytes_on_disk, (uint64_t)file_size(path));
    size_t body_sum = 0;
    for (size_t i = 0; i < NENT; i++)
        body_sum += PROF[ENT[i].prof].len;
    assert_true(ss.bytes_on_disk > body_sum);
    assert_true(ss.bytes_on_disk < body_sum + NENT * 200); /* small framing overhead */
    assert_int_equal((uint64_t)pd_metrics_get("profd_storage_profiles", NULL), NENT);
    assert_int_equal((uint64_t)pd_metrics_get("profd_storage_series", NULL), NSERIES);
    assert_int_equal((uint64_t)pd_metrics_get("profd_storage_bytes", NULL), ss.bytes_on_disk);

    /* the disk holds what the format says: one SERIES per series before its first
     * PROFILE, then one PROFILE per append, in append order */
    drec recs[256];
    size_t nr = parse_seg(path, recs, 256);
    assert_int_equal(nr, NENT + NSERIES);
    size_t pi = 0;
    bool seen[NSERIES + 1] = {0};
    for (size_t i = 0; i < nr; i++) {
        if (recs[i].type == 1) {
            assert_false(seen[recs[i].ref]);
            seen[recs[i].ref] = true;
            continue;
        }
        assert_true(seen[recs[i].ref]);
        assert_int_equal(recs[i].ref, refs[ENT[pi].series]);
        assert_int_equal(recs[i].ts, ENT[pi].ts);
        pi++;
    }
}

static void test_reopen(void **state)
{
    fx *f = *state;
    f->st = open_store(f->dir, 64 * 1024, PD_FSYNC_ALWAYS);
    fill_store(f->st, NENT);
    uint64_t refs[NSERIES] = {0};
    verify_store(f->st, NENT, NULL, refs);
    pd_storage_stats before, after;
    pd_storage_stats_get(f->st, &before);
    pd_storage_close(f->st);

    uint32_t segs[64];
    size_t ns = list_segs(f->dir, segs, 64);
    assert_true(ns > 3); /* ~200 KiB of bodies in 64 KiB segments */
    off_t sum = 0;
    for (size_t i = 0; i < ns; i++) {
        char path[512];
        seg_path(f->dir, segs[i], path, sizeof path);
        assert_int_equal(segs[i], i + 1);
        off_t sz = file_size(path);
        sum += sz;
        /* a segment is only over the cap when it holds one record */
        drec r[64];
        if (sz > 64 * 1024)
            assert_int_equal(parse_seg(path, r, 64), 1);
    }
    assert_int_equal(before.bytes_on_disk, (uint64_t)sum);

    f->st = open_store(f->dir, 64 * 1024, PD_FSYNC_ALWAYS);
    verify_store(f->st, NENT, NULL, refs); /* same refs */
    pd_storage_stats_get(f->st, &after);
    assert_memory_equal(&before, &after, sizeof before);
    /* the maintenance thread decomposes the replayed profiles into the head
       (kicked by the open); reads give the same before and after */
    for (int w = 0; w < 6000 && pd_metrics_get("profd_storage_head_wal_only_profiles", NULL) > 0;
         w++)
        usleep(20 * 1000);
    assert_int_equal(pd_metrics_get("profd_storage_head_wal_only_profiles", NULL), 0);
    assert_true(pd_metrics_get("profd_storage_head_chunk_bytes", NULL) > 0);
    verify_store(f->st, NENT, NULL, refs);

    /* appends go on after reopen, a new series gets the next ref */
    pd_labels ls;
    mk_labels(&ls, "__name__", "heap", "job", "demo", "instance", "c", NULL);
    const tprof *t = &PROF[HEAP0];
    assert_int_equal(pd_storage_append(f->st, &ls, 7, t->body, t->len, &t->p, NULL), 0);
    pd_storage_close(f->st);
    f->st = open_store(f->dir, 64 * 1024, PD_FSYNC_NEVER);
    verify_store(f->st, NENT, NULL, refs);
    pd_series_set set;
    assert_int_equal(select_count(f->st, ALL, &set, "instance", PD_MATCH_EQ, "c", NULL), 1);
    assert_int_equal(set.v[0].ref, NSERIES + 1);
    pd_series_set_release(&set);
    pd_labels_release(&ls);
}

static void test_duplicate_and_invalid(void **state)
{
    fx *f = *state;
    f->st = open_store(f->dir, 0, PD_FSYNC_NEVER);
    fill_store(f->st, 3);
    pd_err err = {{0}};
    const tprof *t = &PROF[HEAP0 + 5];
    assert_int_equal(pd_storage_append(f->st, &SER[0], ENT[1].ts, t->body, t->len, &t->p, &err),
                     PD_EEXIST);
    assert_non_null(strstr(err.msg, "2000"));
    /* the stored one is unchanged */
    check_profile(f->st, 1, &ENT[1]);
    /* same ts in another series is fine */
    PD_ASSERT_OK(pd_storage_append(f->st, &SER[2], ENT[1].ts, t->body, t->len, &t->p, &err), &err);
    /* no __name__ */
    pd_labels ls;
    mk_labels(&ls, "job", "x", NULL);
    assert_int_equal(pd_storage_append(f->st, &ls, 1, t->body, t->len, &t->p, &err), PD_EINVAL);
    pd_labels_release(&ls);
    pd_storage_stats ss;
    pd_storage_stats_get(f->st, &ss);
    assert_int_equal(ss.n_profiles, 4);

    /* still a duplicate after a restart */
    pd_storage_close(f->st);
    f->st = open_store(f->dir, 0, PD_FSYNC_NEVER);
    assert_int_equal(pd_storage_append(f->st, &SER[0], ENT[1].ts, t->body, t->len, &t->p, &err),
                     PD_EEXIST);

    /* a second open of the same path is refused while the first holds it */
    pd_storage_options o = pd_storage_options_default();
    o.path = f->dir;
    pd_storage *st2 = NULL;
    assert_int_equal(pd_storage_open(&o, &st2, &err), PD_EEXIST);
    assert_null(st2);
    assert_non_null(strstr(err.msg, f->dir));
    pd_storage_close(f->st);
    f->st = NULL;
    PD_ASSERT_OK(pd_storage_open(&o, &st2, &err), &err);
    pd_storage_close(st2);
}

/* Truncates the last segment at offsets inside its last record: the store
 * opens, loses that record only, and takes appends that survive a reopen. */
static void test_torn_tail(void **state)
{
    fx *f = *state;
    f->st = open_store(f->dir, 32 * 1024, PD_FSYNC_NEVER);
    /* the last entry must be a profile of a series that already exists */
    size_t n = 12;
    fill_store(f->st, n - 1);
    entry saved = ENT[n - 1];                 /* restored at the end (and by the next setup) */
    ENT[n - 1] = (entry){0, 99000, CPU0 + 3}; /* a cpu profile into heap{a}: new type set */
    assert_int_equal(append_entry(f->st, &ENT[n - 1]), 0);
    pd_storage_close(f->st);
    f->st = NULL;

    uint32_t segs[32];
    size_t ns = list_segs(f->dir, segs, 32);
    char path[512];
    seg_path(f->dir, segs[ns - 1], path, sizeof path);
    drec recs[64];
    size_t nr = parse_seg(path, recs, 64);
    assert_true(nr >= 1);
    assert_int_equal(recs[nr - 1].ts, 99000);
    uint8_t *orig;
    size_t olen;
    load_file(path, &orig, &olen);
    off_t start = recs[nr - 1].off;

    bool skip[200] = {0};
    skip[n - 1] = true;
    size_t tried = 0;
    for (off_t cut = start; cut < (off_t)olen; cut += (cut < start + 40 ? 1 : 211)) {
        int fd = open(path, O_WRONLY | O_TRUNC);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, orig, (size_t)cut), cut);
        close(fd);
        f->st = open_store(f->dir, 32 * 1024, PD_FSYNC_NEVER);
        assert_int_equal(file_size(path), start); /* cut back to the record boundary */
        pd_storage_stats ss;
        pd_storage_stats_get(f->st, &ss);
        assert_int_equal(ss.n_profiles, n - 1);
        pd_profile p;
        assert_int_equal(pd_storage_read_profile(f->st, 1, 99000, &p, NULL, NULL), PD_ENOTFOUND);
        pd_storage_close(f->st);
        f->st = NULL;
        tried++;
    }
    assert_true(tried > 40);
    free(orig);

    f->st = open_store(f->dir, 32 * 1024, PD_FSYNC_NEVER);
    verify_store(f->st, n, skip, NULL);
    /* appending the lost one again works and survives a reopen */
    assert_int_equal(append_entry(f->st, &ENT[n - 1]), 0);
    pd_storage_close(f->st);
    f->st = open_store(f->dir, 32 * 1024, PD_FSYNC_NEVER);
    verify_store(f->st, n, NULL, NULL);
    ENT[n - 1] = saved;
}

/* Flips a byte in a middle record of an earlier segment: that record is
 * skipped (counted), the replay finds the next one (issue 27), everything
 * else survives. */
static void test_corrupt_earlier_segment(void **state)
{
    fx *f = *state;
    f->st = open_store(f->dir, 16 * 1024, PD_FSYNC_NEVER);
    fill_store(f->st, NENT);
    uint64_t refs[NSERIES] = {0};
    verify_store(f->st, NENT, NULL, refs);
    pd_storage_close(f->st);
    f->st = NULL;

    uint32_t segs[64];
    size_t ns = list_segs(f->dir, segs, 64);
    assert_true(ns >= 4);
    /* an earlier segment (not the first) whose middle record is a PROFILE
       with a PROFILE after it */
    size_t victim = 0;
    drec recs[64];
    size_t nr = 0;
    char path[512];
    for (size_t i = 1; i + 1 < ns && !victim; i++) {
        seg_path(f->dir, segs[i], path, sizeof path);
        nr = parse_seg(path, recs, 64);
        if (nr >= 3 && recs[nr / 2].type == 2 && recs[nr / 2 + 1].type == 2)
            victim = i;
    }
    assert_true(victim > 0);
    seg_path(f->dir, segs[victim], path, sizeof path);
    size_t bad = nr / 2;
    bool skip[200] = {0};
    size_t n_skip = 0;
    for (size_t j = bad; j <= bad; j++)
        for (size_t i = 0; i < NENT; i++)
            if (refs[ENT[i].series] == recs[j].ref && ENT[i].ts == recs[j].ts) {
                skip[i] = true;
                n_skip++;
            }
    assert_int_equal(n_skip, 1);
    /* flip a byte in the middle of the record's payload (the body) */
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    off_t at = recs[bad].off + 9 + recs[bad].len / 2;
    uint8_t b;
    assert_int_equal(pread(fd, &b, 1, at), 1);
    b ^= 0x5a;
    assert_int_equal(pwrite(fd, &b, 1, at), 1);
    close(fd);
    off_t size_before = file_size(path);

    double c0 = pd_metrics_get("profd_storage_corruptions_total", NULL);
    f->st = open_store(f->dir, 16 * 1024, PD_FSYNC_NEVER);
    assert_int_equal(pd_metrics_get("profd_storage_corruptions_total", NULL), c0 + 1);
    assert_int_equal(file_size(path), size_before); /* an earlier segment is not cut */
    pd_storage_stats ss;
    pd_storage_stats_get(f->st, &ss);
    assert_int_equal(ss.n_profiles, NENT - n_skip);
    verify_store(f->st, NENT, skip, refs);
    for (size_t i = 0; i < NENT; i++)
        if (skip[i]) {
            pd_profile p;
            assert_int_equal(
                pd_storage_read_profile(f->st, refs[ENT[i].series], ENT[i].ts, &p, NULL, NULL),
                PD_ENOTFOUND);
        }
    /* the store goes on working */
    size_t first_skipped = 0;
    while (!skip[first_skipped])
        first_skipped++;
    assert_int_equal(append_entry(f->st, &ENT[first_skipped]), 0);
    check_profile(f->st, refs[ENT[first_skipped].series], &ENT[first_skipped]);

    /* a segment with a bad magic is skipped as a whole */
    pd_storage_close(f->st);
    f->st = NULL;
    seg_path(f->dir, segs[victim], path, sizeof path);
    fd = open(path, O_RDWR);
    assert_int_equal(pwrite(fd, "XXWAL", 5, 0), 5);
    close(fd);
    f->st = open_store(f->dir, 16 * 1024, PD_FSYNC_NEVER);
    assert_int_equal(pd_metrics_get("profd_storage_corruptions_total", NULL), c0 + 2);
    pd_storage_stats_get(f->st, &ss);
    size_t np = 0; /* the segment's profiles, all lost with it */
    for (size_t j = 0; j < nr; j++)
        np += recs[j].type == 2;
    assert_int_equal(ss.n_profiles, NENT - np + 1);
}

/* A stored body damaged while the store is open: the head holds the profile
 * decomposed in memory, so the read still gives it whole (equal to the
 * original); only its original bytes are lost: raw is the profile re-encoded,
 * and the damage is logged and counted. At the next open the replay reports
 * the record (file and offset, counted) and skips it with the rest of its segment, as any corrupt
 * record. */
static void test_read_damaged_record(void **state)
{
    fx *f = *state;
    f->st = open_store(f->dir, 0, PD_FSYNC_NEVER);
    fill_store(f->st, 3);
    char path[512];
    seg_path(f->dir, 1, path, sizeof path);
    drec recs[8];
    size_t nr = parse_seg(path, recs, 8);
    assert_int_equal(nr, 4); /* SERIES + 3 PROFILE */
    int fd = open(path, O_RDWR);
    off_t at = recs[2].off + 9 + recs[2].len - 10; /* inside the body of ENT[1] */
    uint8_t b;
    assert_int_equal(pread(fd, &b, 1, at), 1);
    b ^= 0xff;
    assert_int_equal(pwrite(fd, &b, 1, at), 1);
    close(fd);
    double c0 = pd_metrics_get("profd_storage_corruptions_total", NULL);
    pd_profile p;
    pd_buf raw;
    pd_buf_init(&raw, 0);
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_storage_read_profile(f->st, 1, ENT[1].ts, &p, &raw, &err), &err);
    const tprof *t = &PROF[ENT[1].prof];
    pd_err why = {{0}};
    if (!pd_profile_equal(&p, &t->p, &why))
        fail_msg("head profile differs: %s", why.msg);
    pd_profile_release(&p);
    /* raw: not the damaged bytes, but a body that decodes to the same profile */
    assert_true(raw.len != t->len || memcmp(raw.data, t->body, t->len) != 0);
    pd_profile back;
    PD_ASSERT_OK(pd_profile_decode(&back, (const uint8_t *)raw.data, raw.len, NULL, &err), &err);
    assert_true(pd_profile_equal(&back, &t->p, &why));
    pd_profile_release(&back);
    pd_buf_release(&raw);
    assert_true(pd_metrics_get("profd_storage_corruptions_total", NULL) >= c0 + 1);
    check_profile(f->st, 1, &ENT[0]);
    check_profile(f->st, 1, &ENT[2]);
    /* reopen: the replay skips the damaged record, naming file and offset */
    pd_storage_close(f->st);
    double c1 = pd_metrics_get("profd_storage_corruptions_total", NULL);
    f->st = open_store(f->dir, 0, PD_FSYNC_NEVER);
    assert_true(pd_metrics_get("profd_storage_corruptions_total", NULL) >= c1 + 1);
    pd_buf_init(&raw, 0);
    assert_int_equal(pd_storage_read_profile(f->st, 1, ENT[1].ts, &p, &raw, &err), PD_ENOTFOUND);
    pd_buf_release(&raw);
    check_profile(f->st, 1, &ENT[0]);
    /* the record after the damaged one is found again (issue 27: wal.md) */
    check_profile(f->st, 1, &ENT[2]);
    pd_points pts;
    assert_int_equal(pd_storage_read_points(f->st, 1, ALL, &pts, NULL), 0);
    assert_int_equal(pts.n, 2);
    pd_points_release(&pts);
}

/* A PROFILE record whose CRC is right but whose body is not a profile (a
 * bug or a disk that lies): the replay only indexes the WAL, so the store
 * opens and the read of that profile says PD_ECORRUPT with file and offset;
 * the maintenance round that decomposes the replayed profiles into the head
 * reports it (counted) and drops it; the profiles before and after it stay. */
static void test_replay_undecodable_body(void **state)
{
    fx *f = *state;
    f->st = open_store(f->dir, 0, PD_FSYNC_NEVER);
    fill_store(f->st, 3);
    pd_storage_close(f->st);
    f->st = NULL;
    /* the record is rewritten below with a valid CRC, which no crash or
       bit rot makes: the head snapshot of the close above (headsnap.c),
       which holds the profile as appended, would stand in for it */
    char snap[600];
    snprintf(snap, sizeof snap, "%s/head.snapshot", f->dir);
    assert_int_equal(unlink(snap), 0);
    char path[512];
    seg_path(f->dir, 1, path, sizeof path);
    drec recs[8];
    assert_int_equal(parse_seg(path, recs, 8), 4); /* SERIES + 3 PROFILE */
    /* garble the last 16 body bytes of ENT[1] (gzip trailer and data), then
       write a CRC that matches */
    int fd = open(path, O_RDWR);
    uint8_t *rec = malloc(9 + recs[2].len);
    assert_int_equal(pread(fd, rec, 9 + recs[2].len, recs[2].off), (ssize_t)(9 + recs[2].len));
    for (uint32_t i = recs[2].len - 16; i < recs[2].len; i++)
        rec[9 + i] ^= 0x5a;
    uint8_t type = rec[0];
    uint32_t c = pd_crc32c(pd_crc32c(0, &type, 1), rec + 9, recs[2].len);
    for (int i = 0; i < 4; i++)
        rec[5 + i] = (uint8_t)(c >> (8 * i));
    assert_int_equal(pwrite(fd, rec, 9 + recs[2].len, recs[2].off), (ssize_t)(9 + recs[2].len));
    close(fd);
    free(rec);
    double c0 = pd_metrics_get("profd_storage_corruptions_total", NULL);
    pd_storage_options o = pd_storage_options_default();
    o.path = f->dir;
    o.fsync = PD_FSYNC_NEVER;
    o.maintenance_ms = -1; /* the rounds are this test's */
    o.retention_ms = -1;   /* synthetic times from 1970: no lower time bound */
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_storage_open(&o, &f->st, &err), &err);
    /* not decomposed yet: read from the WAL */
    check_profile(f->st, 1, &ENT[0]);
    pd_profile p;
    assert_int_equal(pd_storage_read_profile(f->st, 1, ENT[1].ts, &p, NULL, &err), PD_ECORRUPT);
    assert_non_null(strstr(err.msg, path));
    assert_int_equal(pd_metrics_get("profd_storage_head_wal_only_profiles", NULL), 3);
    PD_ASSERT_OK(pd_storage_maintain(f->st, &err), &err);
    assert_int_equal(pd_metrics_get("profd_storage_head_wal_only_profiles", NULL), 0);
    assert_true(pd_metrics_get("profd_storage_corruptions_total", NULL) >= c0 + 1);
    check_profile(f->st, 1, &ENT[0]);
    check_profile(f->st, 1, &ENT[2]);
    assert_int_equal(pd_storage_read_profile(f->st, 1, ENT[1].ts, &p, NULL, &err), PD_ENOTFOUND);
    pd_points pts;
    assert_int_equal(pd_storage_read_points(f->st, 1, ALL, &pts, NULL), 0);
    assert_int_equal(pts.n, 2);
    pd_points_release(&pts);
}

/* The SERIES record of the newest series is lost in an earlier segment while
 * its PROFILE records live on in later ones: every segment holding a
 * series' profiles names it again (issue 27), so none is lost — the ones
 * met before a later SERIES record are replayed after the whole WAL — and
 * the ref is never handed to another series. */
static void test_lost_series_record(void **state)
{
    fx *f = *state;
    f->st = open_store(f->dir, 8 * 1024, PD_FSYNC_NEVER);
    fill_store(f->st, 2); /* heap{a}: ref 1 */
    for (int i = 0; i < 10; i++) {
        entry e = {2, 1000 * i, CPU0 + i}; /* cpu: ref 2, spread over segments */
        assert_int_equal(append_entry(f->st, &e), 0);
    }
    pd_storage_close(f->st);
    f->st = NULL;
    uint32_t segs[64];
    size_t ns = list_segs(f->dir, segs, 64);
    off_t at = -1;
    char path[512];
    for (size_t i = 0; i + 1 < ns && at < 0; i++) {
        drec recs[32];
        seg_path(f->dir, segs[i], path, sizeof path);
        size_t nr = parse_seg(path, recs, 32);
        for (size_t j = 0; j < nr; j++)
            if (recs[j].type == 1 && recs[j].ref == 2)
                at = recs[j].off + 9 + 8; /* the label count */
    }
    assert_true(at > 0);
    int fd = open(path, O_RDWR);
    uint8_t b;
    assert_int_equal(pread(fd, &b, 1, at), 1);
    b ^= 0x40;
    assert_int_equal(pwrite(fd, &b, 1, at), 1);
    close(fd);
    double c0 = pd_metrics_get("profd_storage_corruptions_total", NULL);
    f->st = open_store(f->dir, 8 * 1024, PD_FSYNC_NEVER);
    assert_true(pd_metrics_get("profd_storage_corruptions_total", NULL) >= c0 + 1);
    pd_storage_stats ss;
    pd_storage_stats_get(f->st, &ss);
    assert_int_equal(ss.n_series, 2);
    assert_int_equal(ref_of(f->st, 2), 2);
    for (int i = 0; i < 10; i++) {
        entry e = {2, 1000 * i, CPU0 + i};
        check_profile(f->st, 2, &e);
    }
    verify_store(f->st, 2, NULL, NULL);
    assert_int_equal(append_entry(f->st, &ENT[NENT - 1]), 0);
    assert_int_equal(ref_of(f->st, ENT[NENT - 1].series), 3);
    pd_storage_close(f->st);
    f->st = open_store(f->dir, 8 * 1024, PD_FSYNC_NEVER);
    assert_int_equal(ref_of(f->st, ENT[NENT - 1].series), 3);
    check_profile(f->st, 3, &ENT[NENT - 1]);
}

/* ---- concurrency ---- */

typedef struct cctx {
    pd_storage *st;
    int id;
    int ok, dup;
    atomic_int *stop;
} cctx;

#define CONC_TS 40

static void *conc_writer(void *arg)
{
    cctx *c = arg;
    /* every writer tries the same (series, ts) pairs of the shared series, and
     * its own series: exactly one writer wins each shared pair */
    pd_labels own;
    char inst[16];
    snprintf(inst, sizeof inst, "w%d", c->id);
    mk_labels(&own, "__name__", "heap", "job", "conc", "instance", inst, NULL);
    pd_labels shared;
    mk_labels(&shared, "__name__", "heap", "job", "conc", "instance", "shared", NULL);
    for (int i = 0; i < CONC_TS; i++) {
        const tprof *t = &PROF[HEAP0 + (i + c->id) % 30];
        pd_err err;
        int rc = pd_storage_append(c->st, &shared, i * 10, t->body, t->len, &t->p, &err);
        if (rc == 0)
            c->ok++;
        else if (rc == PD_EEXIST)
            c->dup++;
        else
            fail_msg("append: %s", err.msg);
        PD_ASSERT_OK(pd_storage_append(c->st, &own, i * 10, t->body, t->len, &t->p, &err), &err);
    }
    pd_labels_release(&own);
    pd_labels_release(&shared);
    return NULL;
}

static void *conc_reader(void *arg)
{
    cctx *c = arg;
    pd_matcher m;
    assert_int_equal(pd_matcher_init(&m, PD_MATCH_EQ, "job", "conc", NULL), 0);
    while (!atomic_load(c->stop)) {
        pd_series_set set;
        assert_int_equal(pd_storage_select(c->st, &m, 1, ALL, &set, NULL), 0);
        for (size_t i = 0; i < set.n; i++) {
            pd_points pts;
            assert_int_equal(pd_storage_read_points(c->st, set.v[i].ref, ALL, &pts, NULL), 0);
            assert_true(pts.n >= set.v[i].n_profiles);
            for (size_t j = 1; j < pts.n; j++)
                assert_true(pts.v[j - 1].ts_ms < pts.v[j].ts_ms);
            /* the newest profile and a random one: a writer's own series
               ("wN") holds PROF[HEAP0 + (i + N) % 30] at ts i * 10, so those
               must equal their original while groups fill, seal and compress */
            const char *inst = pd_labels_get(&set.v[i].labels, "instance");
            for (int k = 0; k < 2 && pts.n; k++) {
                size_t j = k == 0 ? pts.n - 1 : (size_t)rand() % pts.n;
                pd_profile p;
                pd_err err;
                int rc =
                    pd_storage_read_profile(c->st, set.v[i].ref, pts.v[j].ts_ms, &p, NULL, &err);
                if (rc < 0)
                    fail_msg("read_profile: %s", err.msg);
                assert_int_equal(p.n_sample_type, pts.v[j].n_types);
                if (inst && inst[0] == 'w') {
                    int id = atoi(inst + 1), ti = (int)(pts.v[j].ts_ms / 10);
                    pd_err why;
                    if (!pd_profile_equal(&p, &PROF[HEAP0 + (ti + id) % 30].p, &why))
                        fail_msg("%s at %lld differs: %s", inst, (long long)pts.v[j].ts_ms,
                                 why.msg);
                }
                pd_profile_release(&p);
            }
            pd_points_release(&pts);
        }
        pd_series_set_release(&set);
    }
    pd_matcher_release(&m);
    return NULL;
}

static void test_concurrent(void **state)
{
    fx *f = *state;
    f->st = open_store(f->dir, 64 * 1024, PD_FSYNC_BATCH);
    atomic_int stop = 0;
    cctx c[6];
    pthread_t th[6];
    for (int i = 0; i < 6; i++) {
        c[i] = (cctx){.st = f->st, .id = i, .stop = &stop};
        assert_int_equal(pthread_create(&th[i], NULL, i < 4 ? conc_writer : conc_reader, &c[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    atomic_store(&stop, 1);
    for (int i = 4; i < 6; i++)
        pthread_join(th[i], NULL);
    int ok = 0, dup = 0;
    for (int i = 0; i < 4; i++) {
        ok += c[i].ok;
        dup += c[i].dup;
    }
    assert_int_equal(ok, CONC_TS);
    assert_int_equal(dup, 3 * CONC_TS);
    pd_storage_stats ss;
    pd_storage_stats_get(f->st, &ss);
    assert_int_equal(ss.n_series, 5);
    assert_int_equal(ss.n_profiles, 5 * CONC_TS);
    /* and the same after a reopen, with each own-series profile intact */
    pd_storage_close(f->st);
    f->st = open_store(f->dir, 64 * 1024, PD_FSYNC_BATCH);
    pd_storage_stats ss2;
    pd_storage_stats_get(f->st, &ss2);
    assert_memory_equal(&ss, &ss2, sizeof ss);
    pd_series_set set;
    assert_int_equal(select_count(f->st, ALL, &set, "instance", PD_MATCH_RE, "w.", NULL), 4);
    for (size_t s = 0; s < set.n; s++) {
        int id = pd_labels_get(&set.v[s].labels, "instance")[1] - '0';
        for (int i = 0; i < CONC_TS; i++) {
            entry e = {0, i * 10, HEAP0 + (i + id) % 30};
            check_profile(f->st, set.v[s].ref, &e);
        }
    }
    pd_series_set_release(&set);
}

/* ---- a WAL write that fails ----
 * The append decomposes and encodes a profile before its WAL write and
 * publishes it after (headmem_int.h). A failed write must leave nothing
 * behind: the profile is not served, and the next one of the series must
 * not be encoded against it (the encoder saw it). The write is made to fail
 * with RLIMIT_FSIZE at the segment's current size (write(2): EFBIG). */
static off_t newest_segment_size(const char *dir)
{
    char wd[4200];
    snprintf(wd, sizeof wd, "%s/wal", dir);
    DIR *d = opendir(wd);
    assert_non_null(d);
    struct dirent *de;
    char best[256] = "";
    while ((de = readdir(d)))
        if (strspn(de->d_name, "0123456789") == strlen(de->d_name) && de->d_name[0] &&
            strcmp(de->d_name, best) > 0)
            snprintf(best, sizeof best, "%s", de->d_name);
    closedir(d);
    assert_true(best[0]);
    char p[4500];
    snprintf(p, sizeof p, "%s/%s", wd, best);
    struct stat stt;
    assert_int_equal(stat(p, &stt), 0);
    return stt.st_size;
}

static void test_wal_write_fails(void **state)
{
    fx *f = *state;
    build_plan();
    f->st = open_store(f->dir, 32 << 20, PD_FSYNC_BATCH);
    /* A and B in one group; C (new stacks: interned first) fails; D follows */
    entry a = {0, 1000, HEAP0}, b = {0, 2000, HEAP0 + 1}, c = {0, 3000, HEAP0 + 7},
          d = {0, 4000, HEAP0 + 2};
    assert_int_equal(append_entry(f->st, &a), 0);
    assert_int_equal(append_entry(f->st, &b), 0);
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    lim = old;
    lim.rlim_cur = (rlim_t)newest_segment_size(f->dir);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    pd_err err = {{0}};
    const tprof *t = &PROF[c.prof];
    int rc = pd_storage_append(f->st, &SER[0], c.ts, t->body, t->len, &t->p, &err);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, prev);
    assert_true(rc < 0);
    assert_int_equal(append_entry(f->st, &d), 0);
    for (int round = 0; round < 2; round++) {
        uint64_t ref = ref_of(f->st, 0);
        check_profile(f->st, ref, &a);
        check_profile(f->st, ref, &b);
        check_profile(f->st, ref, &d);
        pd_profile got;
        assert_int_equal(pd_storage_read_profile(f->st, ref, c.ts, &got, NULL, &err), PD_ENOTFOUND);
        pd_storage_stats ss;
        pd_storage_stats_get(f->st, &ss);
        assert_int_equal(ss.n_profiles, 3);
        /* and after a reopen (the WAL holds A, B and D only) */
        pd_storage_close(f->st);
        f->st = open_store(f->dir, 32 << 20, PD_FSYNC_BATCH);
    }
}

/* ---- kill -9 ---- */

static void child_main(const char *dir, int round, int wfd)
{
    pd_storage_options o = pd_storage_options_default();
    o.path = dir;
    o.fsync = PD_FSYNC_NEVER; /* write(2) done is enough for kill -9 */
    o.retention_ms = -1;      /* synthetic times from 1970: no lower time bound */
    o.segment_bytes = 48 * 1024;
    pd_storage *st = NULL;
    pd_err err;
    if (pd_storage_open(&o, &st, &err) < 0)
        _exit(3);
    pd_labels ls;
    char r[16];
    snprintf(r, sizeof r, "%d", round);
    pd_labels_init(&ls);
    pd_labels_set(&ls, "__name__", "heap", NULL);
    pd_labels_set(&ls, "round", r, NULL);
    for (uint32_t i = 0;; i++) {
        const tprof *t = &PROF[i % NFILES];
        if (pd_storage_append(st, &ls, (int64_t)i, t->body, t->len, &t->p, &err) < 0)
            _exit(4);
        if (write(wfd, &i, sizeof i) != sizeof i)
            _exit(5);
    }
}

static void test_kill9(void **state)
{
    fx *f = *state;
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    size_t total = 0;
    for (int round = 0; round < 20; round++) {
        int p[2];
        assert_int_equal(pipe(p), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(p[0]);
            child_main(f->dir, round, p[1]);
        }
        close(p[1]);
        /* let it run for a random number of acknowledgements, then a random moment */
        uint32_t want = 1 + (uint32_t)(rand() % 150), idx = 0, acked = 0;
        while (acked < want && read(p[0], &idx, sizeof idx) == sizeof idx)
            acked++;
        struct timespec ts = {0, (rand() % 3000) * 1000L};
        nanosleep(&ts, NULL);
        assert_int_equal(kill(pid, SIGKILL), 0);
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        while (read(p[0], &idx, sizeof idx) == sizeof idx) /* acks written before the kill */
            acked++;
        close(p[0]);
        assert_true(acked >= want);

        f->st = open_store(f->dir, 48 * 1024, PD_FSYNC_NEVER);
        pd_labels ls;
        char r[16];
        snprintf(r, sizeof r, "%d", round);
        mk_labels(&ls, "__name__", "heap", "round", r, NULL);
        pd_matcher m[2];
        assert_int_equal(pd_matcher_init(&m[0], PD_MATCH_EQ, "round", r, NULL), 0);
        pd_series_set set;
        assert_int_equal(pd_storage_select(f->st, m, 1, ALL, &set, NULL), 0);
        assert_int_equal(set.n, 1);
        /* every acknowledged append is there; at most one more (written, not acked) */
        assert_true(set.v[0].n_profiles == acked || set.v[0].n_profiles == acked + 1);
        for (uint32_t i = 0; i < acked; i++) {
            entry e = {0, (int64_t)i, (int)(i % NFILES)};
            pd_buf raw;
            pd_buf_init(&raw, 0);
            pd_profile got;
            pd_err err;
            int rc = pd_storage_read_profile(f->st, set.v[0].ref, e.ts, &got, &raw, &err);
            if (rc < 0)
                fail_msg("round %d: acknowledged profile %u lost: %s", round, i, err.msg);
            assert_int_equal(raw.len, PROF[e.prof].len);
            assert_memory_equal(raw.data, PROF[e.prof].body, raw.len);
            pd_profile_release(&got);
            pd_buf_release(&raw);
        }
        total += set.v[0].n_profiles;
        pd_series_set_release(&set);
        pd_matcher_release(&m[0]);
        pd_labels_release(&ls);
        pd_storage_stats ss;
        pd_storage_stats_get(f->st, &ss);
        assert_int_equal(ss.n_profiles, total); /* earlier rounds intact too */
        pd_storage_close(f->st);
        f->st = NULL;
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_append_select_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_select_postings, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reopen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicate_and_invalid, setup, teardown),
        cmocka_unit_test_setup_teardown(test_torn_tail, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_earlier_segment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_damaged_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replay_undecodable_body, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lost_series_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wal_write_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kill9, setup, teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
