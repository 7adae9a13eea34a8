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
 *     pd__block_check naming the file — never a crash (run under ASan).
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

#include "storage/tsdb/block_int.h"

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
        assert_int_equal(pd_profile_decode(&t->p, b, (size_t)n, NULL, &err), 0);
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
        assert_int_equal(pd_labels_set(l, "__name__", strncmp(t->name, "cpu", 3) ? "heap" : "cpu",
                                       &err),
                         0);
        assert_int_equal(pd_labels_set(l, "job", "series", &err), 0);
    } else {
        assert_int_equal(pd_labels_set(l, "__name__", t->name, &err), 0);
        assert_int_equal(pd_labels_set(l, "job", t->dir, &err), 0);
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
            fail_msg("%s/%s differs after a block round trip: %s", g_profs[i].dir,
                     g_profs[i].name, err.msg);
        /* and the rebuilt profile encodes and decodes (it is a valid pprof) */
        pd_buf enc;
        pd_buf_init(&enc, 0);
        assert_int_equal(pd_profile_encode(&p, true, &enc), 0);
        pd_profile q;
        assert_int_equal(pd_profile_decode(&q, (uint8_t *)enc.data, enc.len, NULL, &err), 0);
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
    assert_int_equal(pd__block_open(dir, &b, &err), 0);
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
    assert_int_equal(pd__block_read_points(b, sid, INT64_MIN, INT64_MAX, &pts, &err), 0);
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
    assert_int_equal(pd__block_read_points(b, sid, h[5]->ts, h[9]->ts, &pts, &err), 0);
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
    assert_int_equal(pd__block_open(dir, &b, &err), 0);
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
            assert_int_equal(pd_matcher_init(&ms[k], cases[c][k].t, cases[c][k].n, cases[c][k].v,
                                             &err),
                             0);
        uint32_t *ids;
        size_t n;
        assert_int_equal(pd__block_select(b, ms, 2, &ids, &n, &err), 0);
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
    assert_int_equal(pd__block_writer_add(w, &l, 1, &g_profs[0].p, &err), 0);
    assert_int_equal(pd__block_writer_add(w, &l, 1, &g_profs[1].p, &err), PD_EEXIST);
    assert_int_equal(pd__block_writer_add(w, &l, 2, &g_profs[1].p, &err), 0);
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
        assert_int_equal(pd__block_writer_add(w, &l, g_profs[i].ts, &g_profs[i].p, &err), 0);
        pd_labels_release(&l);
    }
    assert_int_equal(pd__block_writer_write(w, tmp, id, &err), 0);
    pd__block_writer_free(w);
    snprintf(dir, sizeof dir, "%s/%s", tmp, id);
    assert_int_equal(pd__block_check(dir, NULL, &err), 0);

    const char *files[] = {"meta.json", "index", "symbols", "chunks/000001"};
    for (size_t f = 0; f < 4; f++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[f]);
        size_t len;
        uint8_t *orig = read_file(path, &len);
        uint8_t *b = malloc(len + 1);
        /* at most ~700 positions per file, always including the first and last bytes */
        size_t step = len / 700 + 1;
        for (size_t at = 0; at < len; at += (at + step < len || at == len - 1) ? step : len - 1 - at) {
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
        assert_int_equal(pd__block_check(dir, NULL, &err), 0);
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
        cmocka_unit_test(test_corruption),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
