/*
 * tests/unit/storage/test_block.c — blocks (block.c, symbols.c, chunks.c)
 * with the real profiles of PD_TESTDATA/pprof:
 *   - lossless: every real profile written to a block and read back is
 *     pd_profile_equal to the original (both stack formats, several group
 *     sizes so that profiles land mid-group), and the go-demo-series heap and
 *     cpu series as two series of one block;
 *   - points: timestamps and totals from the time chunk equal the originals'
 *     (pd_profile_totals), time range filtering;
 *   - select: postings selection equals brute-force pd_matchers_match;
 *   - writer errors: duplicate (series, ts), missing __name__;
 *   - corruption: flipping bytes across, and truncating, each block file
 *     (meta.json, index, symbols, chunks/000001) gives PD_ECORRUPT from
 *     pd__block_check naming the file — never a crash (run under ASan);
 *   - value groups (chunks.c) on synthetic series: exact round trip of added,
 *     removed, duplicated samples, int64 extremes, changing sample-type
 *     counts, stateful and stateless writers; hand-made corrupt payloads
 *     (each check), every truncation and byte flip of a group; a chunks file
 *     of version 1 refused by name.
 */
#include <dirent.h>
#include <errno.h>
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

#include "base/varint.h"
#include "storage/storage.h"
#include "storage/tsdb/block_int.h"
#include "storage/tsdb/chunks_int.h"
#include "sym_closure.h"

typedef struct tprof {
    char name[256]; /* file stem, e.g. heap-0001 */
    char dir[64];   /* go-demo-once, go-demo-series, node */
    pd_profile p;
    int64_t ts;
} tprof;

static tprof *g_profs;
static size_t g_n;

static int cmp_name(const void *a, const void *b)
{
    const tprof *x = a, *y = b;
    int c = strcmp(x->dir, y->dir);
    return c ? c : strcmp(x->name, y->name);
}

static void load_dir(const char *sub)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/pprof/%s", PD_TESTDATA, sub);
    DIR *d = opendir(path);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strstr(e->d_name, ".pb.gz"))
            continue;
        char fp[8192];
        snprintf(fp, sizeof fp, "%s/%s", path, e->d_name);
        FILE *f = fopen(fp, "rb");
        assert_non_null(f);
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        uint8_t *b = malloc((size_t)n);
        assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
        fclose(f);
        g_profs = realloc(g_profs, (g_n + 1) * sizeof *g_profs);
        tprof *t = &g_profs[g_n];
        memset(t, 0, sizeof *t);
        snprintf(t->dir, sizeof t->dir, "%s", sub);
        snprintf(t->name, sizeof t->name, "%.*s", (int)(strstr(e->d_name, ".pb.gz") - e->d_name),
                 e->d_name);
        pd_err err;
        PD_ASSERT_OK(pd_profile_decode(&t->p, b, (size_t)n, NULL, &err), &err);
        free(b);
        g_n++;
    }
    closedir(d);
}

static int setup(void **state)
{
    load_dir("go-demo-once");
    load_dir("go-demo-series");
    load_dir("node");
    qsort(g_profs, g_n, sizeof *g_profs, cmp_name);
    /* timestamps: distinct, in file order; time_nanos when set */
    for (size_t i = 0; i < g_n; i++)
        g_profs[i].ts = g_profs[i].p.time_nanos ? g_profs[i].p.time_nanos / 1000000
                                                : 1700000000000 + (int64_t)i * 1000;
    return 0;
}

static int teardown(void **state)
{
    for (size_t i = 0; i < g_n; i++)
        pd_profile_release(&g_profs[i].p);
    free(g_profs);
    return 0;
}

static char *mktmp(void)
{
    char *d = strdup("/tmp/pd_test_block_XXXXXX");
    assert_non_null(mkdtemp(d));
    return d;
}

static void rm_rf(const char *path)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    assert_int_equal(system(cmd), 0);
}

/* The labels of a test profile: series-dir files become two series (heap, cpu);
 * every other file is its own series. */
static void labels_of(const tprof *t, pd_labels *l)
{
    pd_err err;
    pd_labels_init(l);
    if (!strcmp(t->dir, "go-demo-series")) {
        assert_int_equal(
            pd_labels_set(l, "__name__", strncmp(t->name, "cpu", 3) ? "heap" : "cpu", &err), 0);
        PD_ASSERT_OK(pd_labels_set(l, "job", "series", &err), &err);
    } else {
        PD_ASSERT_OK(pd_labels_set(l, "__name__", t->name, &err), &err);
        PD_ASSERT_OK(pd_labels_set(l, "job", t->dir, &err), &err);
    }
}

static void write_all(const char *parent, const pd_block_writer_opts *o, char id[27])
{
    pd_block_writer *w;
    pd_err err;
    assert_int_equal(pd__block_writer_new(o, &w), 0);
    /* any order: add back to front */
    for (size_t i = g_n; i-- > 0;) {
        pd_labels l;
        labels_of(&g_profs[i], &l);
        int rc = pd__block_writer_add(w, &l, g_profs[i].ts, &g_profs[i].p, &err);
        if (rc)
            fail_msg("add %s: %s", g_profs[i].name, err.msg);
        pd_labels_release(&l);
    }
    assert_int_equal(pd__block_writer_count(w), g_n);
    int rc = pd__block_writer_write(w, parent, id, &err);
    if (rc)
        fail_msg("write: %s", err.msg);
    pd__block_writer_free(w);
}

static uint32_t find_series(pd_block *b, const pd_labels *l)
{
    for (uint32_t i = 0; i < pd__block_n_series(b); i++)
        if (!pd_labels_cmp(pd__block_series_labels(b, i), l))
            return i;
    fail_msg("series not found");
    return 0;
}

static void check_lossless(const pd_block_writer_opts *o)
{
    char *tmp = mktmp(), id[27], dir[4200];
    pd_err err;
    write_all(tmp, o, id);
    snprintf(dir, sizeof dir, "%s/%s", tmp, id);
    pd_block *b;
    if (pd__block_open(dir, &b, &err))
        fail_msg("open: %s", err.msg);
    const pd_block_meta *m = pd__block_meta(b);
    assert_int_equal(m->n_profiles, g_n);
    /* 2 series from go-demo-series + one per other file */
    size_t others = 0;
    for (size_t i = 0; i < g_n; i++)
        others += strcmp(g_profs[i].dir, "go-demo-series") != 0;
    assert_int_equal(pd__block_n_series(b), others + 2);
    for (size_t i = 0; i < g_n; i++) {
        pd_labels l;
        labels_of(&g_profs[i], &l);
        uint32_t id2 = find_series(b, &l);
        pd_labels_release(&l);
        pd_profile p;
        if (pd__block_read_profile(b, id2, g_profs[i].ts, &p, &err))
            fail_msg("read %s/%s: %s", g_profs[i].dir, g_profs[i].name, err.msg);
        if (!pd_profile_equal(&g_profs[i].p, &p, &err))
            fail_msg("%s/%s differs after a block round trip: %s", g_profs[i].dir, g_profs[i].name,
                     err.msg);
        /* and the rebuilt profile encodes and decodes (it is a valid pprof) */
        pd_buf enc;
        pd_buf_init(&enc, 0);
        assert_int_equal(pd_profile_encode(&p, true, &enc), 0);
        pd_profile q;
        PD_ASSERT_OK(pd_profile_decode(&q, (uint8_t *)enc.data, enc.len, NULL, &err), &err);
        assert_true(pd_profile_equal(&g_profs[i].p, &q, &err));
        pd_profile_release(&q);
        pd_buf_release(&enc);
        pd_profile_release(&p);
    }
    /* a timestamp between two profiles is not found */
    pd_profile p;
    pd_labels l;
    labels_of(&g_profs[0], &l);
    assert_int_equal(pd__block_read_profile(b, find_series(b, &l), g_profs[0].ts + 1, &p, &err),
                     PD_ENOTFOUND);
    pd_labels_release(&l);
    pd__block_close(b);
    pd_block_meta cm;
    if (pd__block_check(dir, &cm, &err))
        fail_msg("check: %s", err.msg);
    rm_rf(tmp);
    free(tmp);
}

static void test_lossless_tree_default(void **state)
{
    pd_block_writer_opts o = {0};
    check_lossless(&o);
}

static void test_lossless_tree_groups_of_4(void **state)
{
    pd_block_writer_opts o = {.group = 4, .stack_format = PD_STACKS_TREE};
    check_lossless(&o);
}

static void test_lossless_list_groups_of_7(void **state)
{
    pd_block_writer_opts o = {.group = 7, .stack_format = PD_STACKS_LIST, .zstd_level = 3};
    check_lossless(&o);
}

static void test_lossless_group_bytes_small(void **state)
{
    /* every group ends after its first profile passes 1 byte: groups of 1 */
    pd_block_writer_opts o = {.group_bytes = 1};
    check_lossless(&o);
}

static void test_points(void **state)
{
    char *tmp = mktmp(), id[27], dir[4200];
    pd_err err;
    pd_block_writer_opts o = {.group = 8};
    write_all(tmp, &o, id);
    snprintf(dir, sizeof dir, "%s/%s", tmp, id);
    pd_block *b;
    PD_ASSERT_OK(pd__block_open(dir, &b, &err), &err);
    pd_labels l;
    pd_labels_init(&l);
    pd_labels_set(&l, "__name__", "heap", &err);
    pd_labels_set(&l, "job", "series", &err);
    uint32_t sid = find_series(b, &l);
    pd_labels_release(&l);
    /* the originals of the heap series, ascending ts */
    tprof *h[64];
    size_t nh = 0;
    for (size_t i = 0; i < g_n; i++)
        if (!strcmp(g_profs[i].dir, "go-demo-series") && !strncmp(g_profs[i].name, "heap", 4))
            h[nh++] = &g_profs[i];
    assert_int_equal(nh, 30);
    pd_points pts;
    PD_ASSERT_OK(pd__block_read_points(b, sid, INT64_MIN, INT64_MAX, &pts, &err), &err);
    assert_int_equal(pts.n, nh);
    for (size_t i = 0; i < nh; i++) {
        assert_int_equal(pts.v[i].ts_ms, h[i]->ts);
        assert_int_equal(pts.v[i].n_types, h[i]->p.n_sample_type);
        int64_t tot[16];
        pd_profile_totals(&h[i]->p, tot);
        for (size_t t = 0; t < pts.v[i].n_types; t++) {
            assert_int_equal(pts.v[i].totals[t], tot[t]);
            assert_string_equal(pts.v[i].types[t].type,
                                pd_profile_str(&h[i]->p, h[i]->p.sample_type[t].type));
            assert_string_equal(pts.v[i].types[t].unit,
                                pd_profile_str(&h[i]->p, h[i]->p.sample_type[t].unit));
        }
    }
    pd_points_release(&pts);
    /* a range covering profiles 5..9 */
    PD_ASSERT_OK(pd__block_read_points(b, sid, h[5]->ts, h[9]->ts, &pts, &err), &err);
    assert_int_equal(pts.n, 5);
    assert_int_equal(pts.v[0].ts_ms, h[5]->ts);
    pd_points_release(&pts);
    assert_int_equal(pd__block_read_points(b, 100000, 0, 1, &pts, &err), PD_ENOTFOUND);
    pd__block_close(b);
    rm_rf(tmp);
    free(tmp);
}

static void test_select(void **state)
{
    char *tmp = mktmp(), id[27], dir[4200];
    pd_err err;
    write_all(tmp, NULL, id);
    snprintf(dir, sizeof dir, "%s/%s", tmp, id);
    pd_block *b;
    PD_ASSERT_OK(pd__block_open(dir, &b, &err), &err);
    struct {
        pd_match_type t;
        const char *n, *v;
    } cases[][2] = {
        {{PD_MATCH_EQ, "__name__", "heap"}, {PD_MATCH_EQ, "job", "series"}},
        {{PD_MATCH_EQ, "job", "go-demo-once"}, {PD_MATCH_NEQ, "__name__", "heap"}},
        {{PD_MATCH_RE, "__name__", "h.*|cpu"}, {PD_MATCH_NRE, "job", "node"}},
        {{PD_MATCH_NRE, "job", "go-.*"}, {PD_MATCH_EQ, "nolabel", ""}},
        {{PD_MATCH_NEQ, "nolabel", ""}, {PD_MATCH_EQ, "job", "series"}},
        {{PD_MATCH_RE, "job", ".*"}, {PD_MATCH_NEQ, "job", "x"}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        pd_matcher ms[2];
        for (int k = 0; k < 2; k++)
            assert_int_equal(
                pd_matcher_init(&ms[k], cases[c][k].t, cases[c][k].n, cases[c][k].v, &err), 0);
        uint32_t *ids;
        size_t n;
        PD_ASSERT_OK(pd__block_select(b, ms, 2, &ids, &n, &err), &err);
        size_t want = 0;
        for (uint32_t i = 0; i < pd__block_n_series(b); i++)
            if (pd_matchers_match(ms, 2, pd__block_series_labels(b, i))) {
                assert_true(want < n);
                assert_int_equal(ids[want], i);
                want++;
            }
        assert_int_equal(n, want);
        free(ids);
        for (int k = 0; k < 2; k++)
            pd_matcher_release(&ms[k]);
    }
    /* case 0 selects exactly one series, case 4 none */
    pd__block_close(b);
    rm_rf(tmp);
    free(tmp);
}

static void test_writer_errors(void **state)
{
    pd_block_writer *w;
    pd_err err;
    char id[27];
    assert_int_equal(pd__block_writer_new(NULL, &w), 0);
    pd_labels l;
    pd_labels_init(&l);
    pd_labels_set(&l, "job", "x", &err);
    assert_int_equal(pd__block_writer_add(w, &l, 1, &g_profs[0].p, &err), PD_EINVAL);
    pd_labels_set(&l, "__name__", "heap", &err);
    PD_ASSERT_OK(pd__block_writer_add(w, &l, 1, &g_profs[0].p, &err), &err);
    assert_int_equal(pd__block_writer_add(w, &l, 1, &g_profs[1].p, &err), PD_EEXIST);
    PD_ASSERT_OK(pd__block_writer_add(w, &l, 2, &g_profs[1].p, &err), &err);
    pd_labels_release(&l);
    pd__block_writer_free(w);
    assert_int_equal(pd__block_writer_new(NULL, &w), 0);
    char *tmp = mktmp();
    assert_int_equal(pd__block_writer_write(w, tmp, id, &err), PD_EINVAL);
    pd__block_writer_free(w);
    /* nothing left behind, not even a .tmp directory */
    DIR *d = opendir(tmp);
    struct dirent *e;
    size_t n = 0;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    assert_int_equal(n, 0);
    rm_rf(tmp);
    free(tmp);
}

static uint8_t *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*len + 1);
    assert_int_equal(fread(b, 1, *len, f), *len);
    fclose(f);
    return b;
}

static void put_file(const char *path, const uint8_t *b, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, len, f), len);
    fclose(f);
}

static int cmp_tprof_ts(const void *a, const void *b)
{
    const tprof *x = *(const tprof *const *)a, *y = *(const tprof *const *)b;
    return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/* Writes the go-demo-series heap profiles (ascending ts) as one series, with
 * `early` (the first profile's content at an earlier ts) added first (A) or
 * last (B); returns the block dir (malloc'ed) under parent. */
static char *write_heap_series(const char *parent, bool early_last, size_t *n_out)
{
    const tprof *v[128];
    size_t n = 0;
    for (size_t i = 0; i < g_n && n < 128; i++)
        if (!strcmp(g_profs[i].dir, "go-demo-series") && !strncmp(g_profs[i].name, "heap", 4))
            v[n++] = &g_profs[i];
    assert_true(n >= 20);
    qsort(v, n, sizeof *v, cmp_tprof_ts);
    pd_labels l;
    pd_err err;
    pd_labels_init(&l);
    PD_ASSERT_OK(pd_labels_set(&l, "__name__", "heap", &err), &err);
    pd_block_writer_opts o = {.group = 4};
    pd_block_writer *w;
    assert_int_equal(pd__block_writer_new(&o, &w), 0);
    int64_t early = v[0]->ts - 60000;
    if (!early_last)
        PD_ASSERT_OK(pd__block_writer_add(w, &l, early, &v[0]->p, &err), &err);
    for (size_t i = 0; i < n; i++)
        if (pd__block_writer_add(w, &l, v[i]->ts, &v[i]->p, &err))
            fail_msg("add: %s", err.msg);
    /* a duplicate is refused in both modes */
    assert_int_equal(pd__block_writer_add(w, &l, v[3]->ts, &v[3]->p, &err), PD_EEXIST);
    if (early_last) /* older than everything: the series is decoded back (buffered) */
        PD_ASSERT_OK(pd__block_writer_add(w, &l, early, &v[0]->p, &err), &err);
    assert_int_equal(pd__block_writer_add(w, &l, v[5]->ts, &v[5]->p, &err), PD_EEXIST);
    char id[27], *dir = malloc(4200);
    if (pd__block_writer_write(w, parent, id, &err))
        fail_msg("write: %s", err.msg);
    pd__block_writer_free(w);
    pd_labels_release(&l);
    snprintf(dir, 4200, "%s/%s", parent, id);
    *n_out = n;
    return dir;
}

/* The writer encodes a series whose profiles come in ascending time as they
 * are added (streamed) and decodes it back when an older one comes
 * (buffered): both give byte-identical files, and every profile reads back
 * equal to its original. */
static void test_writer_streamed_equals_buffered(void **state)
{
    (void)state;
    char *tmp = mktmp();
    size_t n;
    char *a = write_heap_series(tmp, false, &n), *b = write_heap_series(tmp, true, &n);
    static const char *FILES[] = {"index", "symbols", "chunks/000001"};
    for (int f = 0; f < 3; f++) {
        char pa[4400], pb[4400];
        snprintf(pa, sizeof pa, "%s/%s", a, FILES[f]);
        snprintf(pb, sizeof pb, "%s/%s", b, FILES[f]);
        size_t la, lb;
        uint8_t *da = read_file(pa, &la), *db = read_file(pb, &lb);
        if (la != lb || memcmp(da, db, la))
            fail_msg("%s differs: streamed %zu bytes, buffered %zu", FILES[f], la, lb);
        free(da);
        free(db);
    }
    pd_err err;
    pd_block *blk;
    if (pd__block_open(b, &blk, &err) || pd__block_check(b, NULL, &err))
        fail_msg("open/check: %s", err.msg);
    const pd_block_meta *m = pd__block_meta(blk);
    assert_int_equal(m->n_profiles, n + 1);
    for (size_t i = 0; i < g_n; i++) {
        if (strcmp(g_profs[i].dir, "go-demo-series") || strncmp(g_profs[i].name, "heap", 4))
            continue;
        pd_profile p;
        if (pd__block_read_profile(blk, 0, g_profs[i].ts, &p, &err))
            fail_msg("read: %s", err.msg);
        assert_true(pd_profile_equal(&g_profs[i].p, &p, &err));
        pd_profile_release(&p);
    }
    pd__block_close(blk);
    free(a);
    free(b);
    rm_rf(tmp);
    free(tmp);
}

static void expect_corrupt(const char *dir, const char *file, const char *what, size_t at)
{
    pd_err err;
    err.msg[0] = 0;
    int rc = pd__block_check(dir, NULL, &err);
    if (rc != PD_ECORRUPT)
        fail_msg("%s of %s at %zu: check returned %d (%s), want PD_ECORRUPT", what, file, at, rc,
                 err.msg);
    if (!strstr(err.msg, file))
        fail_msg("%s of %s at %zu: message does not name the file: %s", what, file, at, err.msg);
    if (strcmp(file, "meta.json") && !strstr(err.msg, "offset"))
        fail_msg("%s of %s at %zu: message has no offset: %s", what, file, at, err.msg);
}

static void test_corruption(void **state)
{
    char *tmp = mktmp(), id[27], dir[4200], path[4300];
    pd_err err;
    /* the go-demo-series only, small groups so the chunks file has many frames */
    pd_block_writer *w;
    pd_block_writer_opts o = {.group = 4};
    assert_int_equal(pd__block_writer_new(&o, &w), 0);
    for (size_t i = 0; i < g_n; i++) {
        if (strcmp(g_profs[i].dir, "go-demo-series"))
            continue;
        pd_labels l;
        labels_of(&g_profs[i], &l);
        PD_ASSERT_OK(pd__block_writer_add(w, &l, g_profs[i].ts, &g_profs[i].p, &err), &err);
        pd_labels_release(&l);
    }
    PD_ASSERT_OK(pd__block_writer_write(w, tmp, id, &err), &err);
    pd__block_writer_free(w);
    snprintf(dir, sizeof dir, "%s/%s", tmp, id);
    PD_ASSERT_OK(pd__block_check(dir, NULL, &err), &err);

    const char *files[] = {"meta.json", "index", "symbols", "chunks/000001"};
    for (size_t f = 0; f < 4; f++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[f]);
        size_t len;
        uint8_t *orig = read_file(path, &len);
        uint8_t *b = malloc(len + 1);
        /* at most ~700 positions per file, always including the first and last bytes */
        size_t step = len / 700 + 1;
        for (size_t at = 0; at < len;
             at += (at + step < len || at == len - 1) ? step : len - 1 - at) {
            memcpy(b, orig, len);
            b[at] ^= 0x5a;
            put_file(path, b, len);
            expect_corrupt(dir, files[f], "flip", at);
            if (at == len - 1)
                break;
        }
        size_t cuts[] = {0, 1, 4, 7, 8, len / 3, len / 2, len - 5, len - 1};
        for (size_t k = 0; k < sizeof cuts / sizeof *cuts; k++) {
            if (cuts[k] >= len)
                continue;
            put_file(path, orig, cuts[k]);
            expect_corrupt(dir, files[f], "truncation", cuts[k]);
        }
        /* a byte appended is corruption too */
        memcpy(b, orig, len);
        b[len] = 0;
        put_file(path, b, len + 1);
        expect_corrupt(dir, files[f], "extension", len);
        put_file(path, orig, len);
        PD_ASSERT_OK(pd__block_check(dir, NULL, &err), &err);
        free(b);
        free(orig);
    }
    /* a renamed directory no longer matches its meta.json ulid */
    char moved[4300];
    snprintf(moved, sizeof moved, "%s/01ARZ3NDEKTSV4RRFFQ69G5FAV", tmp);
    assert_int_equal(rename(dir, moved), 0);
    assert_int_equal(pd__block_check(moved, NULL, &err), PD_ECORRUPT);
    rm_rf(tmp);
    free(tmp);
}

/* ---- block format v2: damage costs only what it touches ----
 * A block of every test profile is written with small symbols frames. For
 * each index section and each symbols frame in turn, one byte in it is
 * flipped; the block must still open, serve every profile the damage did not
 * touch (equal to the original) and refuse exactly the others
 * (PD_ECORRUPT), and check must name the file and offset. Which profiles a
 * symbols frame touches is computed here from the intact block: the closure
 * of a profile's stacks, label sets and strings down to every table entry,
 * against the frame's entry range (strings a series' time chunk names are
 * kept inline by the index and restored from there). */

static size_t tprof_of(const pd_block *b, uint32_t series, int64_t ts)
{
    for (size_t i = 0; i < g_n; i++) {
        pd_labels l;
        labels_of(&g_profs[i], &l);
        bool same = g_profs[i].ts == ts && !pd_labels_cmp(&l, pd__block_series_labels(b, series));
        pd_labels_release(&l);
        if (same)
            return i;
    }
    fail_msg("profile %u@%lld not among the test profiles", series, (long long)ts);
    return 0;
}

/* Opens dir and checks that exactly the profiles not in lost[] are served. */
static size_t expect_served(const char *dir, const bool *lost, const char *what)
{
    pd_block *b;
    pd_err err;
    if (pd__block_open(dir, &b, &err))
        fail_msg("%s: the block does not open: %s", what, err.msg);
    size_t n_lost = 0;
    for (size_t i = 0; i < g_n; i++) {
        pd_labels l;
        labels_of(&g_profs[i], &l);
        uint32_t id = UINT32_MAX;
        for (uint32_t k = 0; k < pd__block_n_series(b); k++)
            if (!pd_labels_cmp(pd__block_series_labels(b, k), &l))
                id = k;
        /* the postings agree with the series (rebuilt when damaged) */
        pd_matcher m[2];
        assert_int_equal(
            pd_matcher_init(&m[0], PD_MATCH_EQ, "__name__", pd_labels_get(&l, "__name__"), &err),
            0);
        assert_int_equal(pd_matcher_init(&m[1], PD_MATCH_EQ, "job", pd_labels_get(&l, "job"), &err),
                         0);
        uint32_t *ids;
        size_t n_ids;
        assert_int_equal(pd__block_select(b, m, 2, &ids, &n_ids, &err), 0);
        assert_int_equal(n_ids, id == UINT32_MAX ? 0 : 1);
        if (n_ids)
            assert_int_equal(ids[0], id);
        free(ids);
        pd_matcher_release(&m[0]);
        pd_matcher_release(&m[1]);
        pd_labels_release(&l);
        pd_profile p;
        int rc = id == UINT32_MAX ? PD_ENOTFOUND
                                  : pd__block_read_profile(b, id, g_profs[i].ts, &p, &err);
        if (lost[i]) {
            if (rc != PD_ECORRUPT && rc != PD_ENOTFOUND)
                fail_msg("%s: %s/%s is served, but the damage touches it (rc %d)", what,
                         g_profs[i].dir, g_profs[i].name, rc);
            if (!rc)
                pd_profile_release(&p);
            n_lost++;
            continue;
        }
        if (rc)
            fail_msg("%s: %s/%s not served: %s", what, g_profs[i].dir, g_profs[i].name, err.msg);
        if (!pd_profile_equal(&g_profs[i].p, &p, &err))
            fail_msg("%s: %s/%s differs: %s", what, g_profs[i].dir, g_profs[i].name, err.msg);
        pd_profile_release(&p);
    }
    pd__block_close(b);
    return n_lost;
}

/* A block of one series: go-demo-once's threadcreate profile (1 sample) n
 * times, 10 s apart (time_nanos with it), the symbols file in sym_version.
 * Returns the block's bytes (meta.json, index, symbols, chunks); *sym: the
 * symbols file (malloc'd), *sym_len its size. */
static size_t tiny_block(const char *tmp, size_t n, int sym_version, uint8_t **sym, size_t *sym_len)
{
    tprof *t = NULL;
    for (size_t i = 0; i < g_n; i++)
        if (!strcmp(g_profs[i].dir, "go-demo-once") && !strcmp(g_profs[i].name, "threadcreate"))
            t = &g_profs[i];
    assert_non_null(t);
    pd_block_writer_opts o = {.sym_version = sym_version};
    pd_block_writer *w;
    pd_err err;
    assert_int_equal(pd__block_writer_new(&o, &w), 0);
    pd_labels l;
    pd_labels_init(&l);
    assert_int_equal(pd_labels_set(&l, "__name__", "threadcreate", &err), 0);
    assert_int_equal(pd_labels_set(&l, "job", "tiny", &err), 0);
    int64_t tn = t->p.time_nanos;
    for (size_t i = 0; i < n; i++) {
        int64_t ts = 1700000000000 + 10000 * (int64_t)i;
        t->p.time_nanos = ts * 1000000 + 123456;
        PD_ASSERT_OK(pd__block_writer_add(w, &l, ts, &t->p, &err), &err);
    }
    t->p.time_nanos = tn;
    pd_labels_release(&l);
    char id[27], path[2048];
    PD_ASSERT_OK(pd__block_writer_write(w, tmp, id, &err), &err);
    pd__block_writer_free(w);
    size_t total = 0;
    const char *files[] = {"meta.json", "index", "symbols", "chunks/000001"};
    for (size_t k = 0; k < 4; k++) {
        snprintf(path, sizeof path, "%s/%s/%s", tmp, id, files[k]);
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        total += (size_t)st.st_size;
    }
    snprintf(path, sizeof path, "%s/%s/symbols", tmp, id);
    *sym = read_file(path, sym_len);
    snprintf(path, sizeof path, "%s/%s", tmp, id);
    rm_rf(path);
    return total;
}

/* Issue 27 item 4: what a tiny series costs its block. (1) The symbols file
 * (version 3) holds a block's small tables in one frame, and is smaller than
 * the same tables in version 2 (one frame, with its zstd header and
 * directory entry, per table); (2) a profile identical to the previous one,
 * 10 s later, costs the block at most a quarter of a byte. */
static void test_tiny_series_costs(void **state)
{
    (void)state;
    char *tmp = mktmp();
    uint8_t *s3, *s2, *s3b;
    size_t l3, l2, l3b;
    size_t b100 = tiny_block(tmp, 100, 0, &s3, &l3);
    size_t b200 = tiny_block(tmp, 200, 0, &s3b, &l3b);
    tiny_block(tmp, 100, 2, &s2, &l2);
    static vframe fr[16];
    uint64_t dend, copy;
    assert_int_equal(s3[4], 3);
    assert_int_equal(sym_frames_at(s3, l3, fr, 16, &dend, &copy), 1);
    assert_true(fr[0].np >= 4); /* strings, mappings, functions, locations, stacks */
    assert_int_equal(s2[4], 2);
    assert_true(sym_frames(s2, l2, fr, 16) >= 4);
    print_message("tiny series: symbols v3 %zu B (v2 %zu B); block of 100 profiles %zu B, of 200 "
                  "%zu B\n",
                  l3, l2, b100, b200);
    assert_true(l3 < l2);
    assert_int_equal(l3, l3b);      /* the same symbols */
    assert_true(b200 - b100 <= 25); /* a quarter of a byte per profile */
    free(s3);
    free(s3b);
    free(s2);
    rm_rf(tmp);
    free(tmp);
}

/* Issue 27: a version-3 symbols file keeps its directory twice (at the head
 * and after the frames): one damaged byte anywhere in the head's directory,
 * its length or CRC, or in the copy, costs no profile and is reported with
 * the file and an offset; both copies damaged lose the block. A block whose
 * symbols file is version 2 (no copy, a frame per table range) still reads
 * back every profile. */
static void test_v3_symbols_directory_damage_costs_nothing(void **state)
{
    (void)state;
    char *tmp = mktmp(), id[27], dir[4200], path[4300];
    pd_err err;
    pd_block_writer_opts o = {.sym_frame_bytes = 2048};
    write_all(tmp, &o, id);
    snprintf(dir, sizeof dir, "%s/%s", tmp, id);
    snprintf(path, sizeof path, "%s/symbols", dir);
    size_t len;
    uint8_t *orig = read_file(path, &len), *buf = malloc(len);
    assert_int_equal(orig[4], 3);
    static vframe fr[4096];
    uint64_t dend, copy;
    size_t nf = sym_frames_at(orig, len, fr, 4096, &dend, &copy);
    assert_true(nf >= 4);
    bool *lost = calloc(g_n + 1, sizeof *lost);
    const uint64_t range[2][2] = {{8, dend}, {copy, len}};
    size_t cases = 0;
    for (int r = 0; r < 2; r++) {
        uint64_t lo = range[r][0], hi = range[r][1], step = (hi - lo) / 48 + 1;
        for (uint64_t x = lo; x < hi; x = x + step < hi || x == hi - 1 ? x + step : hi - 1) {
            memcpy(buf, orig, len);
            buf[x] ^= 0x5a;
            put_file(path, buf, len);
            char what[160];
            snprintf(what, sizeof what, "symbols %s byte %llu flipped",
                     r ? "directory copy" : "directory", (unsigned long long)x);
            assert_int_equal(expect_served(dir, lost, what), 0);
            err.msg[0] = 0;
            if (pd__block_check(dir, NULL, &err) != PD_ECORRUPT || !strstr(err.msg, "symbols") ||
                !strstr(err.msg, "offset"))
                fail_msg("%s: check does not name the file and an offset: %s", what, err.msg);
            cases++;
        }
    }
    /* both copies: the block is lost, and says why */
    memcpy(buf, orig, len);
    buf[dend - 5] ^= 0x5a;
    buf[len - 9] ^= 0x5a;
    put_file(path, buf, len);
    pd_block *b;
    err.msg[0] = 0;
    assert_int_equal(pd__block_open(dir, &b, &err), PD_ECORRUPT);
    assert_non_null(strstr(err.msg, "symbols"));
    put_file(path, orig, len);
    PD_ASSERT_OK(pd__block_check(dir, NULL, &err), &err);
    print_message("symbols v3: %zu directory bytes flipped (head and copy), every profile served\n",
                  cases);
    /* version 2 is still read */
    o.sym_version = 2;
    write_all(tmp, &o, id);
    snprintf(dir, sizeof dir, "%s/%s", tmp, id);
    snprintf(path, sizeof path, "%s/symbols", dir);
    size_t len2;
    uint8_t *v2 = read_file(path, &len2);
    assert_int_equal(v2[4], 2);
    assert_int_equal(expect_served(dir, lost, "symbols version 2"), 0);
    PD_ASSERT_OK(pd__block_check(dir, NULL, &err), &err);
    free(v2);
    free(lost);
    free(buf);
    free(orig);
    rm_rf(tmp);
    free(tmp);
}

static void test_v2_damage_costs_only_what_it_touches(void **state)
{
    (void)state;
    char *tmp = mktmp(), id[27], dir[4200], path[4300];
    pd_err err;
    pd_block_writer_opts o = {.sym_frame_bytes = 2048};
    write_all(tmp, &o, id);
    snprintf(dir, sizeof dir, "%s/%s", tmp, id);
    PD_ASSERT_OK(pd__block_check(dir, NULL, &err), &err);
    pd_block *b;
    PD_ASSERT_OK(pd__block_open(dir, &b, &err), &err);
    assert_int_equal(pd__block_meta(b)->version, 2);
    assert_null(pd__block_section_damage(b));
    const pd_symbols *S = pd__block_symbols(b);
    uses_ctx c = {S, calloc(g_n + 1, sizeof(uses)), 0, 0, calloc(S->n_str + 1, 1)};
    size_t n_series = pd__block_n_series(b);
    for (uint32_t k = 0; k < n_series; k++) {
        c.series = k;
        PD_ASSERT_OK(
            pd__block_series_foreach_dprof(b, k, INT64_MIN, INT64_MAX, collect_uses, &c, &err),
            &err);
    }
    assert_int_equal(c.n, g_n);
    for (size_t i = 0; i < c.n; i++)
        c.v[i].tp = tprof_of(b, c.v[i].series, c.v[i].ts);
    bool *lost = calloc(g_n + 1, sizeof *lost);

    /* symbols: every frame */
    snprintf(path, sizeof path, "%s/symbols", dir);
    size_t len;
    uint8_t *orig = read_file(path, &len), *buf = malloc(len);
    static vframe fr[4096];
    size_t nf = sym_frames(orig, len, fr, 4096);
    assert_true(nf >= 12); /* several frames per big table */
    size_t cases = 0, partial = 0, lost_total = 0;
    for (size_t k = 0; k < nf; k++) {
        memcpy(buf, orig, len);
        uint64_t at = fr[k].off + fr[k].zlen / 2;
        buf[at] ^= 0x5a;
        put_file(path, buf, len);
        size_t want = 0;
        for (size_t i = 0; i < c.n; i++)
            want += lost[c.v[i].tp] = frame_touches(&c.v[i], &fr[k], c.type_str);
        char what[200];
        snprintf(what, sizeof what,
                 "symbols frame %zu (%d parts, table %d, entries %llu+%llu) "
                 "flipped at %llu",
                 k, fr[k].np, fr[k].part[0].t, (unsigned long long)fr[k].part[0].first,
                 (unsigned long long)fr[k].part[0].count, (unsigned long long)at);
        size_t got = expect_served(dir, lost, what);
        assert_int_equal(got, want);
        char off[64];
        snprintf(off, sizeof off, "offset %llu", (unsigned long long)fr[k].off);
        err.msg[0] = 0;
        assert_int_equal(pd__block_check(dir, NULL, &err), PD_ECORRUPT);
        if (!strstr(err.msg, "symbols") || !strstr(err.msg, off))
            fail_msg("%s: check does not name the file and %s: %s", what, off, err.msg);
        cases++;
        partial += want > 0 && want < g_n;
        lost_total += want;
    }
    put_file(path, orig, len);
    free(orig);
    free(buf);
    /* a truncation keeps the frames before the cut */
    print_message("symbols: %zu frames damaged one at a time, %zu lost some but not all of the "
                  "%zu profiles (%zu lost in all)\n",
                  cases, partial, g_n, lost_total);
    assert_true(partial > 0);

    /* index: every series entry, the postings, the toc */
    snprintf(path, sizeof path, "%s/index", dir);
    orig = read_file(path, &len);
    buf = malloc(len);
    uint64_t toc = 0;
    for (int i = 7; i >= 0; i--)
        toc = toc << 8 | orig[len - 12 + i];
    uint32_t nt = (uint32_t)orig[toc] | (uint32_t)orig[toc + 1] << 8 |
                  (uint32_t)orig[toc + 2] << 16 | (uint32_t)orig[toc + 3] << 24;
    assert_int_equal(nt, n_series);
    for (uint32_t k = 0; k <= nt + 1; k++) {
        uint64_t at;
        if (k <= nt) { /* entry k, or (k == nt) the postings */
            uint64_t eo = 0;
            for (int i = 7; i >= 0; i--)
                eo = eo << 8 | orig[toc + 4 + 8 * (uint64_t)k + (uint64_t)i];
            uint32_t L = (uint32_t)orig[eo] | (uint32_t)orig[eo + 1] << 8 |
                         (uint32_t)orig[eo + 2] << 16 | (uint32_t)orig[eo + 3] << 24;
            at = eo + 4 + L / 2;
        } else
            at = toc + 2; /* the toc: entries found by a walk */
        memcpy(buf, orig, len);
        buf[at] ^= 0x5a;
        put_file(path, buf, len);
        for (size_t i = 0; i < c.n; i++)
            lost[c.v[i].tp] = k < nt && c.v[i].series == k;
        char what[200];
        snprintf(what, sizeof what, "index %s %u flipped at %llu",
                 k < nt    ? "entry"
                 : k == nt ? "postings"
                           : "toc",
                 k, (unsigned long long)at);
        expect_served(dir, lost, what);
        err.msg[0] = 0;
        assert_int_equal(pd__block_check(dir, NULL, &err), PD_ECORRUPT);
        if (!strstr(err.msg, "index offset"))
            fail_msg("%s: check does not name the file and offset: %s", what, err.msg);
    }
    put_file(path, orig, len);
    free(orig);
    free(buf);
    PD_ASSERT_OK(pd__block_check(dir, NULL, &err), &err);
    for (size_t i = 0; i < c.n; i++)
        for (int t = 1; t < TT_N; t++)
            free(c.v[i].u[t]);
    free(c.v);
    free(c.type_str);
    free(lost);
    pd__block_close(b);
    rm_rf(tmp);
    free(tmp);
}

/* The store over a block with a damaged symbols frame: reading a lost
 * profile through pd_storage (PD_ECORRUPT, a warning) does not make the
 * store skip the rest of that series in that block — every untouched
 * profile is still served, also on a second pass, and select lists every
 * series. */
static void test_store_serves_around_lost_profiles(void **state)
{
    (void)state;
    char *tmp = mktmp(), id[27], dir[4200], path[4300];
    pd_err err;
    pd_block_writer_opts o = {.sym_frame_bytes = 2048};
    write_all(tmp, &o, id);
    snprintf(dir, sizeof dir, "%s/%s", tmp, id);
    pd_block *b;
    PD_ASSERT_OK(pd__block_open(dir, &b, &err), &err);
    const pd_symbols *S = pd__block_symbols(b);
    uses_ctx c = {S, calloc(g_n + 1, sizeof(uses)), 0, 0, calloc(S->n_str + 1, 1)};
    for (uint32_t k = 0; k < pd__block_n_series(b); k++) {
        c.series = k;
        PD_ASSERT_OK(
            pd__block_series_foreach_dprof(b, k, INT64_MIN, INT64_MAX, collect_uses, &c, &err),
            &err);
    }
    for (size_t i = 0; i < c.n; i++)
        c.v[i].tp = tprof_of(b, c.v[i].series, c.v[i].ts);
    snprintf(path, sizeof path, "%s/symbols", dir);
    size_t len;
    uint8_t *orig = read_file(path, &len);
    static vframe fr[4096];
    size_t nf = sym_frames(orig, len, fr, 4096);
    /* a frame that loses some, not all, profiles of one series */
    bool *lost = calloc(g_n + 1, sizeof *lost);
    size_t pick = nf;
    for (size_t k = 0; k < nf && pick == nf; k++) {
        for (uint32_t sid = 0; sid < pd__block_n_series(b) && pick == nf; sid++) {
            size_t nl = 0, nk = 0;
            for (size_t i = 0; i < c.n; i++)
                if (c.v[i].series == sid) {
                    bool t = frame_touches(&c.v[i], &fr[k], c.type_str);
                    nl += t;
                    nk += !t;
                }
            if (nl && nk)
                pick = k;
        }
    }
    assert_true(pick < nf);
    for (size_t i = 0; i < c.n; i++)
        lost[c.v[i].tp] = frame_touches(&c.v[i], &fr[pick], c.type_str);
    pd__block_close(b);
    orig[fr[pick].off + fr[pick].zlen / 2] ^= 0x5a;
    put_file(path, orig, len);
    free(orig);

    pd_storage_options so = pd_storage_options_default();
    so.path = tmp;
    so.fsync = PD_FSYNC_NEVER;
    so.retention_ms = -1;
    so.maintenance_ms = -1;
    pd_storage *st = NULL;
    PD_ASSERT_OK(pd_storage_open(&so, &st, &err), &err);
    pd_series_set set;
    PD_ASSERT_OK(pd_storage_select(st, NULL, 0, INT64_MIN, INT64_MAX, &set, &err), &err);
    size_t n_lost = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < g_n; i++) {
            pd_labels l;
            labels_of(&g_profs[i], &l);
            uint64_t ref = 0;
            for (size_t k = 0; k < set.n; k++)
                if (!pd_labels_cmp(&set.v[k].labels, &l))
                    ref = set.v[k].ref;
            pd_labels_release(&l);
            if (!ref)
                fail_msg("%s/%s: its series is not selected", g_profs[i].dir, g_profs[i].name);
            pd_profile p;
            int rc = pd_storage_read_profile(st, ref, g_profs[i].ts, &p, NULL, &err);
            if (lost[i]) {
                assert_int_equal(rc, PD_ECORRUPT);
                n_lost += !pass;
                continue;
            }
            if (rc)
                fail_msg("pass %d: %s/%s not served: %s", pass, g_profs[i].dir, g_profs[i].name,
                         err.msg);
            assert_true(pd_profile_equal(&g_profs[i].p, &p, NULL));
            pd_profile_release(&p);
        }
    assert_true(n_lost > 0 && n_lost < g_n);
    /* the timelines and the selection still hold every untouched profile */
    pd_series_set set2;
    PD_ASSERT_OK(pd_storage_select(st, NULL, 0, INT64_MIN, INT64_MAX, &set2, &err), &err);
    assert_int_equal(set2.n, set.n);
    pd_series_set_release(&set2);
    for (size_t i = 0; i < g_n; i++) {
        pd_labels l;
        labels_of(&g_profs[i], &l);
        uint64_t ref = 0;
        for (size_t k = 0; k < set.n; k++)
            if (!pd_labels_cmp(&set.v[k].labels, &l))
                ref = set.v[k].ref;
        pd_labels_release(&l);
        pd_points pts;
        pd_storage_warnings w;
        pd_storage_warnings_begin(&w);
        PD_ASSERT_OK(pd_storage_read_points(st, ref, g_profs[i].ts, g_profs[i].ts, &pts, &err),
                     &err);
        pd_storage_warnings_end();
        if (lost[i]) {
            /* issue 27: an unreadable profile is missing from the timeline,
               with a warning, not a point that fails when clicked */
            if (pts.n != 0 || w.n == 0 || !strstr(w.v[0], PD_BLOCK_LOST_PROFILE))
                fail_msg("%s/%s: unreadable, yet %zu points and %zu warnings (%s)", g_profs[i].dir,
                         g_profs[i].name, pts.n, w.n, w.n ? w.v[0] : "");
            pd_storage_warnings_release(&w);
            pd_points_release(&pts);
            continue;
        }
        pd_storage_warnings_release(&w);
        if (pts.n != 1)
            fail_msg("%s/%s: no point in the timeline after a lost neighbour was read",
                     g_profs[i].dir, g_profs[i].name);
        pd_points_release(&pts);
    }
    pd_series_set_release(&set);
    pd_storage_close(st);
    for (size_t i = 0; i < c.n; i++)
        for (int t = 1; t < TT_N; t++)
            free(c.v[i].u[t]);
    free(c.v);
    free(c.type_str);
    free(lost);
    rm_rf(tmp);
    free(tmp);
}

/* Version 1 blocks (written before v2) are still read whole. */
static void test_lossless_v1(void **state)
{
    pd_block_writer_opts o = {.version = 1};
    check_lossless(&o);
}

/* ---- value groups (chunks.c) on synthetic series ----
 * The value model predicts each changed sample from its previous values, a
 * per-sample quantum learnt in the group and the ratio of the sample's pair of
 * types; these series exercise what real ones rarely do: samples added,
 * removed and duplicated, values at the int64 limits (deltas wrap), a
 * changing number of sample types, zero pairs, negative values. Decoding
 * must give back every value exactly, for groups written by the stateful
 * writer (pd__vgroup_encode) and by the stateless one (pd__vgroup_encode_one). */

static uint64_t g_rng = 88172645463325252ull;
static uint64_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

#define SYN_STACKS 400
#define SYN_LSETS 3

static const int64_t g_extreme[] = {0,
                                    1,
                                    -1,
                                    INT64_MAX,
                                    INT64_MIN,
                                    INT64_MAX - 1,
                                    INT64_MIN + 1,
                                    (int64_t)1 << 62,
                                    -((int64_t)1 << 62),
                                    524288};

static int64_t syn_value(void)
{
    switch (rnd() % 4) {
    case 0:
        return 0;
    case 1:
        return g_extreme[rnd() % (sizeof g_extreme / sizeof *g_extreme)];
    default:
        return (int64_t)(rnd() % 100000000) - 1000;
    }
}

/* n_types of profile k: mostly 4 (Go heap), sometimes 2, 3, 1 or 0 */
static uint32_t syn_types(int k)
{
    return k % 37 == 17 ? 2 : k % 53 == 30 ? 3 : k % 71 == 40 ? 1 : k == 90 ? 0 : 4;
}

/* Profile k of a synthetic series, made from prev (NULL for the first). */
static void syn_profile(const pd_dprof *prev, int k, pd_dprof *d)
{
    uint32_t nt = syn_types(k), cap = (prev ? prev->n_sample : 0) + 16;
    memset(d, 0, sizeof *d);
    d->ts = 1700000000000 + k * 1000;
    d->n_types = nt;
    d->types = calloc(2 * nt + 1, sizeof *d->types);
    for (uint32_t i = 0; i < 2 * nt; i++)
        d->types[i] = i % 5;
    d->period = k % 3 ? 524288 : INT64_MIN;
    d->time_nanos = d->ts * 1000000 + (int64_t)(rnd() % 1000000);
    d->duration_nanos = k % 5 ? 0 : INT64_MAX;
    d->n_comment = k % 4 == 1;
    d->comment = calloc(2, sizeof *d->comment);
    d->comment[0] = 3;
    d->default_sample_type = 1;
    d->stack = calloc(cap, sizeof *d->stack);
    d->lset = calloc(cap, sizeof *d->lset);
    d->value = calloc((size_t)cap * (nt ? nt : 1), sizeof *d->value);
    d->totals = calloc(nt + 1, sizeof *d->totals);
    /* keys: prev's minus ~3%, plus up to 15 random ones (duplicates allowed), merged in order */
    uint32_t n = 0, np = prev ? prev->n_sample : 0, i = 0;
    uint32_t add[16], addl[16], na = k == 0 ? 15 : (uint32_t)(rnd() % 6);
    for (uint32_t a = 0; a < na; a++) {
        add[a] = (uint32_t)(rnd() % (SYN_STACKS + 1));
        addl[a] = (uint32_t)(rnd() % (SYN_LSETS + 1));
    }
    for (uint32_t a = 1; a < na; a++) /* insertion sort by (stack, lset) */
        for (uint32_t b = a;
             b > 0 && (add[b] < add[b - 1] || (add[b] == add[b - 1] && addl[b] < addl[b - 1]));
             b--) {
            uint32_t t = add[b], tl = addl[b];
            add[b] = add[b - 1], addl[b] = addl[b - 1];
            add[b - 1] = t, addl[b - 1] = tl;
        }
    uint32_t a = 0;
    while (i < np || a < na) {
        bool from_prev =
            a >= na || (i < np && (prev->stack[i] < add[a] ||
                                   (prev->stack[i] == add[a] && prev->lset[i] <= addl[a])));
        if (from_prev) {
            if (rnd() % 100 >= 3) {
                d->stack[n] = prev->stack[i];
                d->lset[n] = prev->lset[i];
                for (uint32_t t = 0; t < nt; t++) {
                    int64_t v = prev->n_types == nt ? prev->value[(size_t)i * nt + t] : syn_value();
                    uint64_t r = rnd() % 100;
                    if (r < 15) /* heap-like: a multiple of a per-stack quantum, +-1 */
                        v = (int64_t)((uint64_t)v +
                                      (uint64_t)(rnd() % 4) * (prev->stack[i] * 7919u + 524288u) +
                                      rnd() % 3 - 1);
                    else if (r < 17)
                        v = syn_value();
                    else if (r < 19)
                        v = (int64_t)((uint64_t)v -
                                      (uint64_t)(rnd() % 4) * (prev->stack[i] * 31u + 1u));
                    d->value[(size_t)n * nt + t] = v;
                }
                n++;
            }
            i++;
        } else {
            d->stack[n] = add[a];
            d->lset[n] = addl[a];
            for (uint32_t t = 0; t < nt; t++)
                d->value[(size_t)n * nt + t] = syn_value();
            n++, a++;
        }
    }
    d->n_sample = n;
    for (uint32_t x = 0; x < n; x++)
        for (uint32_t t = 0; t < nt; t++)
            d->totals[t] =
                (int64_t)((uint64_t)d->totals[t] + (uint64_t)d->value[(size_t)x * nt + t]);
}

static pd_symbols syn_symbols(void)
{
    pd_symbols s;
    memset(&s, 0, sizeof s);
    s.n_str = 5;
    s.n_stack = SYN_STACKS;
    s.n_lset = SYN_LSETS;
    return s;
}

static void assert_dprof_equal(const pd_dprof *a, const pd_dprof *b, size_t k)
{
    if (a->n_types != b->n_types || a->n_sample != b->n_sample || a->period != b->period ||
        a->time_nanos != b->time_nanos || a->duration_nanos != b->duration_nanos ||
        a->n_comment != b->n_comment || a->default_sample_type != b->default_sample_type)
        fail_msg("profile %zu: header or counts differ", k);
    assert_memory_equal(a->types, b->types, 2 * a->n_types * sizeof *a->types + 0 * 1);
    for (uint32_t x = 0; x < a->n_sample; x++) {
        if (a->stack[x] != b->stack[x] || a->lset[x] != b->lset[x])
            fail_msg("profile %zu sample %u: key differs", k, x);
        for (uint32_t t = 0; t < a->n_types; t++)
            if (a->value[(size_t)x * a->n_types + t] != b->value[(size_t)x * a->n_types + t])
                fail_msg("profile %zu sample %u type %u: %lld decoded as %lld", k, x, t,
                         (long long)a->value[(size_t)x * a->n_types + t],
                         (long long)b->value[(size_t)x * a->n_types + t]);
    }
    for (uint32_t t = 0; t < a->n_types; t++)
        assert_int_equal(a->totals[t], b->totals[t]);
}

/* Decodes p[0..len) as n profiles and compares them with d[0..n). */
static void check_group(const pd_symbols *s, const pd_buf *p, const pd_dprof *d, size_t n)
{
    pd_dprof *out = calloc(n + 1, sizeof *out);
    pd_err err;
    for (size_t k = 0; k < n; k++)
        out[k].ts = d[k].ts;
    if (pd__vgroup_decode(s, (const uint8_t *)p->data, p->len, n, out, &err))
        fail_msg("decode: %s", err.msg);
    for (size_t k = 0; k < n; k++)
        assert_dprof_equal(&d[k], &out[k], k);
    for (size_t k = 0; k < n; k++)
        pd__dprof_release(&out[k]);
    free(out);
}

static void test_vgroup_roundtrip(void **state)
{
    g_rng = 88172645463325252ull; /* the same series whichever tests run */
    enum { N = 200 };
    pd_dprof d[N];
    const pd_dprof *ptrs[N];
    pd_symbols s = syn_symbols();
    for (int k = 0; k < N; k++) {
        syn_profile(k ? &d[k - 1] : NULL, k, &d[k]);
        ptrs[k] = &d[k];
    }
    size_t sizes[] = {1, 7, 64, N};
    size_t stateful = 0, stateless = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        for (size_t a = 0; a < N; a += sizes[si]) {
            size_t g = N - a < sizes[si] ? N - a : sizes[si];
            pd_buf p;
            pd_buf_init(&p, 0);
            assert_int_equal(pd__vgroup_encode(ptrs + a, g, &p), 0); /* stateful */
            check_group(&s, &p, d + a, g);
            stateful += p.len;
            pd_buf_reset(&p);
            for (size_t k = 0; k < g; k++) /* stateless */
                assert_int_equal(pd__vgroup_encode_one(k ? &d[a + k - 1] : NULL, &d[a + k], &p), 0);
            check_group(&s, &p, d + a, g);
            stateless += p.len;
            pd_buf_release(&p);
        }
    }
    assert_true(stateful > 0 && stateless > 0);
    /* the writer keeps its own copy of the last profile: a reset then new appends */
    pd_vgroup_enc e;
    pd_buf p;
    pd__vgroup_enc_init(&e);
    pd_buf_init(&p, 0);
    assert_int_equal(pd__vgroup_enc_append(&e, &d[5], &p), 0);
    assert_int_equal(pd__vgroup_enc_append(&e, &d[6], &p), 0);
    assert_int_equal(e.n, 2);
    assert_int_equal(e.n_values, (uint64_t)d[5].n_sample * d[5].n_types +
                                     (uint64_t)d[6].n_sample * d[6].n_types);
    pd__vgroup_enc_reset(&e);
    pd_buf_reset(&p);
    for (int k = 10; k < 20; k++)
        assert_int_equal(pd__vgroup_enc_append(&e, &d[k], &p), 0);
    check_group(&s, &p, d + 10, 10);
    /* a group that would decode to more than PD_VGROUP_MAX_VALUES is not written */
    pd_dprof huge = {.n_types = 8, .n_sample = (uint32_t)(PD_VGROUP_MAX_VALUES / 8) + 1};
    size_t len = p.len, n = e.n;
    assert_int_equal(pd__vgroup_enc_append(&e, &huge, &p), PD_ETOOBIG);
    assert_int_equal(pd__vgroup_encode_one(NULL, &huge, &p), PD_ETOOBIG);
    assert_int_equal(p.len, len);
    assert_int_equal(e.n, n);
    pd_buf_release(&p);
    pd__vgroup_enc_release(&e);
    for (int k = 0; k < N; k++)
        pd__dprof_release(&d[k]);
}

/* A busy heap-like series costs a few bytes per changed sample: the value
 * model turns ~3-byte deltas into 1-byte residuals (a regression in the model
 * shows here as a size jump, not only in bench/storage_size). */
static void test_vgroup_heap_model(void **state)
{
    g_rng = 88172645463325252ull; /* the same series whichever tests run */
    enum { N = 64, S = 300 };
    pd_dprof d[N];
    const pd_dprof *ptrs[N];
    pd_symbols s = syn_symbols();
    int64_t C[S];
    for (int x = 0; x < S; x++)
        C[x] = 1 + x % 50;
    for (int k = 0; k < N; k++) {
        pd_dprof *c = &d[k];
        memset(c, 0, sizeof *c);
        c->ts = 1700000000000 + k * 1000;
        c->n_types = 4;
        c->types = calloc(8, sizeof *c->types);
        c->n_sample = S;
        c->stack = calloc(S, sizeof *c->stack);
        c->lset = calloc(S, sizeof *c->lset);
        c->value = calloc(4 * S, sizeof *c->value);
        c->totals = calloc(4, sizeof *c->totals);
        c->comment = calloc(1, sizeof *c->comment);
        for (int x = 0; x < S; x++) {
            /* Go's scaleHeapSample: count x scale, bytes x scale (here in 1/16ths) */
            if (k && rnd() % 10 == 0)
                C[x] += 1 + (int64_t)(rnd() % 3);
            int64_t size = 16 * (x + 1), scale16 = 16 * 524288 / size + 8;
            c->stack[x] = (uint32_t)x + 1;
            c->value[4 * x] = C[x] * scale16 / 16;
            c->value[4 * x + 1] = C[x] * size * scale16 / 16;
            for (int t = 0; t < 4; t++)
                c->totals[t] += c->value[4 * x + t];
        }
        ptrs[k] = c;
    }
    pd_buf p;
    pd_buf_init(&p, 0);
    assert_int_equal(pd__vgroup_encode(ptrs, N, &p), 0);
    check_group(&s, &p, d, N);
    /* ~30 changed samples per profile after the first: mask + ~2 one-byte residuals */
    size_t first = 0;
    pd_buf q;
    pd_buf_init(&q, 0);
    assert_int_equal(pd__vgroup_encode(ptrs, 1, &q), 0);
    first = q.len;
    pd_buf_release(&q);
    pd_buf_init(&q, 0);
    for (int k = 0; k < N; k++) /* stateless: no quanta */
        assert_int_equal(pd__vgroup_encode_one(k ? &d[k - 1] : NULL, &d[k], &q), 0);
    check_group(&s, &q, d, N);
    double per_profile = (double)(p.len - first) / (N - 1),
           stateless = (double)(q.len - first) / (N - 1);
    print_message("heap-like: first profile %zu B, then %.1f B/profile raw (%.1f without quanta; "
                  "%d values per profile)\n",
                  first, per_profile, stateless, 4 * S);
    assert_true(per_profile < 200);             /* old dense format: > 4 x S */
    assert_true(per_profile < 0.8 * stateless); /* the quanta pay */
    pd_buf_release(&q);
    pd_buf_release(&p);
    for (int k = 0; k < N; k++)
        pd__dprof_release(&d[k]);
}

/* Hand-made payloads: the layout of docs/format/chunks.md, and each check. */
static void put_v(pd_buf *b, uint64_t v)
{
    assert_int_equal(pd_buf_put_varint(b, v), 0);
}
static void put_z(pd_buf *b, int64_t v)
{
    put_v(b, pd_zigzag_enc(v));
}

/* header of a profile with nt types and n samples (all strings id 0) */
static void put_header(pd_buf *b, uint64_t flags, uint32_t nt, uint64_t n)
{
    put_v(b, flags);
    put_v(b, nt);
    for (uint32_t i = 0; i < 2 * nt; i++)
        put_v(b, 0);
    for (int i = 0; i < 2; i++) /* period type, unit */
        put_v(b, 0);
    for (int i = 0; i < 3; i++) /* period, time, duration */
        put_z(b, 0);
    for (int i = 0; i < 5; i++) /* n_comment, drop, keep, default type, doc url */
        put_v(b, 0);
    put_v(b, n);
}

enum {
    H_OK,
    H_FLAGS,
    H_MASK0,
    H_MASKHIGH,
    H_GAP,
    H_NCHG,
    H_UNMATCHED,
    H_STACK,
    H_STACKWRAP,
    H_TRAIL,
    H_NSAMPLE
};

/* Two profiles of 2 types: the first adds samples (stack 1: 5, -7) and
 * (stack 2: 0, INT64_MIN), whose residuals are their values; the second keeps
 * both and changes the second sample (lead: type 1, delta +1). */
static void handmade(pd_buf *b, int bad)
{
    pd_buf_reset(b);
    put_header(b, bad == H_FLAGS ? 2 : 1, 2, bad == H_NSAMPLE ? 1000 : 2);
    put_v(b, 0); /* keep */
    put_v(b, 0); /* del */
    put_v(b, 2); /* add */
    put_z(b, 1); /* stack 1 */
    put_v(b, 0);
    /* stack 2; H_STACKWRAP: 1 + INT64_MAX wraps (was signed overflow, found by fuzzing) */
    put_z(b, bad == H_STACK ? SYN_STACKS : bad == H_STACKWRAP ? INT64_MAX : 1);
    put_v(b, 0);
    if (bad == H_UNMATCHED) { /* an added sample listed as changed */
        put_v(b, 1);
        put_v(b, 0);
    } else {
        put_v(b, 0); /* changed: none (added samples always carry residuals) */
    }
    put_v(b, bad == H_MASKHIGH ? 7 : 3); /* sample 0: both residuals */
    put_z(b, 5);
    put_z(b, -7);
    if (bad == H_MASKHIGH)
        put_z(b, 1);
    put_v(b, 2); /* sample 1: the second */
    put_z(b, INT64_MIN);
    put_header(b, 0, 2, 2); /* profile 2 */
    put_v(b, 2);            /* keep both */
    put_v(b, 0);
    put_v(b, 0);
    put_v(b, bad == H_NCHG ? 3 : 1);  /* changed */
    put_v(b, bad == H_GAP ? 2 : 1);   /* sample 1 (gap 2 = sample 2: out of range) */
    put_v(b, bad == H_MASK0 ? 0 : 1); /* its lead delta only */
    put_z(b, 1);
    if (bad == H_TRAIL)
        put_v(b, 0);
}

static void test_vgroup_corrupt(void **state)
{
    g_rng = 88172645463325252ull; /* the same series whichever tests run */
    pd_symbols s = syn_symbols();
    pd_buf b;
    pd_err err;
    pd_dprof out[2];
    pd_buf_init(&b, 0);
    handmade(&b, H_OK);
    memset(out, 0, sizeof out);
    if (pd__vgroup_decode(&s, (const uint8_t *)b.data, b.len, 2, out, &err))
        fail_msg("hand-made payload: %s", err.msg);
    assert_int_equal(out[0].n_sample, 2);
    assert_int_equal(out[0].stack[1], 2);
    assert_int_equal(out[0].value[0], 5);
    assert_int_equal(out[0].value[1], -7);
    assert_int_equal(out[0].value[2], 0);
    assert_true(out[0].value[3] == INT64_MIN);
    assert_int_equal(out[1].value[0], 5);
    assert_int_equal(out[1].value[1], -7);
    assert_int_equal(out[1].value[2], 0);
    assert_true(out[1].value[3] == INT64_MIN + 1);
    assert_true(out[1].totals[1] == (int64_t)((uint64_t)INT64_MIN + 1 - 7)); /* wraps */
    pd__dprof_release(&out[0]);
    pd__dprof_release(&out[1]);
    const char *want[] = {
        [H_FLAGS] = "flags",        [H_MASK0] = "mask",           [H_MASKHIGH] = "mask",
        [H_GAP] = "changed sample", [H_NCHG] = "changed samples", [H_UNMATCHED] = "not matched",
        [H_STACK] = "stack",        [H_STACKWRAP] = "stack",      [H_TRAIL] = "trailing",
        [H_NSAMPLE] = "samples"};
    for (int bad = H_FLAGS; bad <= H_NSAMPLE; bad++) {
        handmade(&b, bad);
        memset(out, 0, sizeof out);
        int rc = pd__vgroup_decode(&s, (const uint8_t *)b.data, b.len, 2, out, &err);
        pd__dprof_release(&out[0]);
        pd__dprof_release(&out[1]);
        if (rc != PD_ECORRUPT || !strstr(err.msg, want[bad]) || !strstr(err.msg, "offset"))
            fail_msg("case %d: rc %d, %s", bad, rc, rc ? err.msg : "accepted");
    }
    /* more values than a group may decode to: refused before any allocation */
    pd_buf_reset(&b);
    put_header(&b, 1, 1024, 70000);
    put_v(&b, 0);
    put_v(&b, 0);
    put_v(&b, 70000);
    for (int i = 0; i < 70000; i++)
        put_z(&b, 0), put_v(&b, 0);
    put_v(&b, 0);
    memset(out, 0, sizeof out);
    assert_int_equal(pd__vgroup_decode(&s, (const uint8_t *)b.data, b.len, 1, out, &err),
                     PD_ECORRUPT);
    assert_non_null(strstr(err.msg, "values"));
    pd__dprof_release(&out[0]);

    /* a real group: every truncation is refused, every byte flip decodes or is refused */
    enum { N = 12 };
    pd_dprof d[N];
    const pd_dprof *ptrs[N];
    for (int k = 0; k < N; k++) {
        syn_profile(k ? &d[k - 1] : NULL, k, &d[k]);
        ptrs[k] = &d[k];
    }
    pd_buf_reset(&b);
    assert_int_equal(pd__vgroup_encode(ptrs, N, &b), 0);
    pd_dprof o[N];
    for (size_t cut = 0; cut < b.len; cut++) {
        memset(o, 0, sizeof o);
        for (int k = 0; k < N; k++)
            o[k].ts = d[k].ts;
        assert_int_equal(pd__vgroup_decode(&s, (const uint8_t *)b.data, cut, N, o, &err),
                         PD_ECORRUPT);
        for (int k = 0; k < N; k++)
            pd__dprof_release(&o[k]);
    }
    uint8_t *f = malloc(b.len);
    for (size_t at = 0; at < b.len; at++) {
        memcpy(f, b.data, b.len);
        f[at] ^= (uint8_t)(1u << (at % 8));
        memset(o, 0, sizeof o);
        for (int k = 0; k < N; k++)
            o[k].ts = d[k].ts;
        int rc = pd__vgroup_decode(&s, f, b.len, N, o, &err);
        assert_true(rc == 0 || rc == PD_ECORRUPT);
        for (int k = 0; k < N; k++)
            pd__dprof_release(&o[k]);
    }
    free(f);
    for (int k = 0; k < N; k++)
        pd__dprof_release(&d[k]);
    pd_buf_release(&b);
}

/* chunks/000001 of version 1 (dense value deltas) is refused by name */
static void test_chunks_version(void **state)
{
    char *tmp = mktmp(), id[27], dir[4200], path[4300];
    pd_err err;
    pd_block_writer_opts o = {0};
    write_all(tmp, &o, id);
    snprintf(dir, sizeof dir, "%s/%s", tmp, id);
    snprintf(path, sizeof path, "%s/chunks/000001", dir);
    size_t len;
    uint8_t *b = read_file(path, &len);
    assert_int_equal(b[4], 4); /* written: version 4 (versions 2-3 read: test_chunks.c) */
    b[4] = 1;
    put_file(path, b, len);
    pd_block *blk;
    assert_int_equal(pd__block_open(dir, &blk, &err), PD_ECORRUPT);
    assert_non_null(strstr(err.msg, "chunks/000001"));
    assert_non_null(strstr(err.msg, "version 1"));
    free(b);
    rm_rf(tmp);
    free(tmp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lossless_tree_default),
        cmocka_unit_test(test_lossless_tree_groups_of_4),
        cmocka_unit_test(test_lossless_list_groups_of_7),
        cmocka_unit_test(test_lossless_group_bytes_small),
        cmocka_unit_test(test_points),
        cmocka_unit_test(test_select),
        cmocka_unit_test(test_writer_errors),
        cmocka_unit_test(test_writer_streamed_equals_buffered),
        cmocka_unit_test(test_corruption),
        cmocka_unit_test(test_v2_damage_costs_only_what_it_touches),
        cmocka_unit_test(test_v3_symbols_directory_damage_costs_nothing),
        cmocka_unit_test(test_tiny_series_costs),
        cmocka_unit_test(test_lossless_v1),
        cmocka_unit_test(test_store_serves_around_lost_profiles),
        cmocka_unit_test(test_vgroup_roundtrip),
        cmocka_unit_test(test_vgroup_heap_model),
        cmocka_unit_test(test_vgroup_corrupt),
        cmocka_unit_test(test_chunks_version),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
