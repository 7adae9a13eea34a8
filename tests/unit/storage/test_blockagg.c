/*
 * The blocks' pre-summed records (storage/tsdb/blockagg.c,
 * docs/format/aggregates.md) against decoding every profile: the same
 * store is aggregated with its aggregates in memory (pd_storage_maintain
 * built them) and without (reopened, maintenance never run: every block
 * part decoded), over ranges that hold whole blocks, cut blocks in half
 * and hold nothing; plain, one group, as deltas of a cumulative series (one
 * counter reset), with a span filter (pd_storage_aggregate_filtered); on
 * the calling thread and on worker threads. Every part handed over (its
 * pd_storage_agg_part and the encoded profile) must be byte-identical.
 * Profiles vary time_nanos (0 among them: the fold's restart), period and
 * duration, so the header rules are checked too. Then the files are
 * damaged (a byte flipped) and removed: the store falls back to decoding,
 * the maintenance round rebuilds them (counted in n_aggregates_built), and
 * the answers stay the same.
 */
#include <ftw.h>
#include <inttypes.h>
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

#include "storage/storage.h"
#include "span_fixture.h"

#define DUR 10000LL /* block duration, ms */
#define N_PROF 24   /* per series, DUR / 4 apart: 6 blocks */

static int64_t T0;
static int64_t now_ms;
static int64_t test_clock(void)
{
    return now_ms;
}

static void append(pd_storage *st, const char *name, const char *inst, int64_t ts, int j, int mul)
{
    pd_profile p;
    span_build(j, &p);
    for (size_t i = 0; i < p.n_sample; i++)
        p.sample[i].value[0] *= mul;
    p.time_nanos = j % 7 == 3 ? 0 : (T0 + (N_PROF - j) * 1000) * 1000000; /* not ascending */
    p.duration_nanos = 1000000 * (j + 1);
    p.period = j % 5 ? 10000000 + j : 0;
    pd_buf body;
    pd_buf_init(&body, 0);
    assert_int_equal(pd_profile_encode(&p, true, &body), 0);
    pd_labels ls;
    pd_labels_init(&ls);
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_labels_set(&ls, "__name__", name, &err), &err);
    PD_ASSERT_OK(pd_labels_set(&ls, "instance", inst, &err), &err);
    PD_ASSERT_OK(pd_storage_append(st, &ls, ts, (const uint8_t *)body.data, body.len, &p, &err),
                 &err);
    pd_labels_release(&ls);
    pd_buf_release(&body);
    pd_profile_release(&p);
}

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static pd_storage *open_store(const char *dir, int workers)
{
    pd_storage_options o = pd_storage_options_default();
    o.path = dir;
    o.fsync = PD_FSYNC_NEVER;
    o.clock_ms = test_clock;
    o.retention_ms = 25 * DUR; /* compaction up to 10 %: none, blocks stay apart */
    o.future_grace_ms = -1;
    o.block_duration_ms = DUR;
    o.maintenance_ms = -1; /* aggregates only where pd_storage_maintain runs */
    o.aggregate_workers = workers;
    pd_storage *st;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_storage_open(&o, &st, &err), &err);
    return st;
}

static int record(void *ctx, const pd_storage_agg_part *part, const pd_profile *p, pd_err *err)
{
    (void)err;
    pd_buf *out = ctx;
    pd_buf_printf(out, "part series=%zu n_series=%zu n_profiles=%zu [%" PRId64 ", %" PRId64 "]\n",
                  part->series, part->n_series, part->n_profiles, part->min_ts - T0,
                  part->max_ts - T0);
    pd_buf b;
    pd_buf_init(&b, 0);
    assert_int_equal(pd_profile_encode(p, false, &b), 0);
    pd_buf_printf(
        out, "%zu bytes, %zu samples, time %" PRId64 " period %" PRId64 " duration %" PRId64 "\n",
        b.len, p->n_sample, p->time_nanos, p->period, p->duration_nanos);
    pd_buf_append(out, b.data, b.len);
    pd_buf_release(&b);
    return 0;
}

/* Every aggregation of the store's series into out. */
static void record_all(pd_storage *st, pd_buf *out)
{
    pd_series_set set;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_storage_select(st, NULL, 0, INT64_MIN, INT64_MAX, &set, &err), &err);
    uint64_t refs[8], mask[8] = {0};
    uint32_t one[8] = {0}, each[8];
    assert_true(set.n <= 8);
    for (size_t i = 0; i < set.n; i++) {
        refs[i] = set.v[i].ref;
        each[i] = (uint32_t)i;
        if (!strcmp(pd_labels_get(&set.v[i].labels, "__name__"), "allocs"))
            mask[i] = ~(uint64_t)0;
    }
    const int64_t ranges[][2] = {
        {INT64_MIN, T0 + 10 * DUR},             /* every block whole (not the head: a replayed
                                                    profile is symbolized in another order) */
        {T0 + DUR / 2, T0 + 4 * DUR + DUR / 3}, /* cut at both ends */
        {T0 + DUR, T0 + 4 * DUR - 1},           /* on block bounds */
        {T0 + DUR + 1, T0 + DUR + 2},           /* inside one block, no profile */
        {T0 + 2 * DUR, T0 + 2 * DUR},           /* one profile */
    };
    uint64_t sa = SA;
    pd_storage_sample_filter f = {.span_ids = &sa, .n_span_ids = 1};
    for (size_t r = 0; r < sizeof ranges / sizeof *ranges; r++) {
        int64_t lo = ranges[r][0], hi = ranges[r][1];
        const uint32_t *groups[3] = {NULL, one, each};
        for (int g = 0; g < 3; g++) {
            size_t ns = 0, nd = 0;
            pd_buf_printf(out, "== range %zu group %d\n", r, g);
            PD_ASSERT_OK(pd_storage_aggregate(st, refs, groups[g], set.n, lo, hi, record, NULL, out,
                                              &ns, &err),
                         &err);
            pd_buf_printf(out, "series %zu\n== deltas\n", ns);
            PD_ASSERT_OK(pd_storage_aggregate_delta(st, refs, groups[g], mask, set.n, lo, hi,
                                                    record, NULL, out, &ns, &nd, &err),
                         &err);
            pd_buf_printf(out, "series %zu deltas %zu\n== span filter\n", ns, nd);
            PD_ASSERT_OK(pd_storage_aggregate_filtered(st, &f, refs, groups[g], NULL, set.n, lo, hi,
                                                       record, NULL, out, &ns, &nd, &err),
                         &err);
            pd_buf_printf(out, "== span filter, deltas\n");
            PD_ASSERT_OK(pd_storage_aggregate_filtered(st, &f, refs, groups[g], mask, set.n, lo, hi,
                                                       record, NULL, out, &ns, &nd, &err),
                         &err);
            pd_buf_printf(out, "series %zu deltas %zu\n", ns, nd);
        }
    }
    pd_series_set_release(&set);
}

static void same(const pd_buf *a, const pd_buf *b, const char *what)
{
    if (a->len != b->len || memcmp(a->data, b->data, a->len)) {
        size_t i = 0;
        while (i < a->len && i < b->len && a->data[i] == b->data[i])
            i++;
        FILE *fa = fopen("/tmp/pd_blockagg_a.out", "wb"),
             *fb = fopen("/tmp/pd_blockagg_b.out", "wb");
        if (fa && fb) {
            fwrite(a->data, 1, a->len, fa);
            fwrite(b->data, 1, b->len, fb);
        }
        if (fa)
            fclose(fa);
        if (fb)
            fclose(fb);
        fail_msg("%s: answers differ at byte %zu of %zu/%zu", what, i, a->len, b->len);
    }
}

/* The aggregates files of the store's blocks into files[] (paths). */
static size_t agg_files(const char *dir, char files[][512], size_t cap)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls %s/*/aggregates 2>/dev/null", dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = 0;
    while (n < cap && fgets(files[n], 512, p)) {
        files[n][strcspn(files[n], "\n")] = 0;
        n++;
    }
    pclose(p);
    return n;
}

static uint64_t stat_of(pd_storage *st, int which)
{
    pd_storage_stats s;
    pd_storage_stats_get(st, &s);
    return which ? s.n_aggregate_records : s.n_aggregates_built;
}

/* pd_storage_read_type_runs (storage.h) against pd_storage_read_points, for
 * every series over ranges holding whole blocks, cutting blocks and empty:
 * the same profile count, and the runs are the points' first of each run of
 * equal sample types (from the records' headers when the store has them). */
static void check_type_runs(pd_storage *st)
{
    pd_err err = {{0}};
    pd_series_set set;
    PD_ASSERT_OK(pd_storage_select(st, NULL, 0, INT64_MIN, INT64_MAX, &set, &err), &err);
    int64_t ranges[][2] = {{INT64_MIN, INT64_MAX},
                           {T0 + DUR / 8, T0 + 3 * DUR - DUR / 8},
                           {T0 + DUR, T0 + 2 * DUR - 1},
                           {T0 - 2 * DUR, T0 - DUR}};
    for (size_t i = 0; i < set.n; i++)
        for (size_t r = 0; r < sizeof ranges / sizeof *ranges; r++) {
            pd_points pts, runs;
            size_t np = 99;
            PD_ASSERT_OK(
                pd_storage_read_points(st, set.v[i].ref, ranges[r][0], ranges[r][1], &pts, &err),
                &err);
            PD_ASSERT_OK(pd_storage_read_type_runs(st, set.v[i].ref, ranges[r][0], ranges[r][1],
                                                   &runs, &np, &err),
                         &err);
            assert_int_equal(np, pts.n);
            size_t k = 0;
            for (size_t j = 0; j < pts.n; j++) {
                bool same_types = j && pts.v[j].n_types == pts.v[j - 1].n_types;
                for (size_t t = 0; same_types && t < pts.v[j].n_types; t++)
                    same_types = !strcmp(pts.v[j].types[t].type, pts.v[j - 1].types[t].type) &&
                                 !strcmp(pts.v[j].types[t].unit, pts.v[j - 1].types[t].unit);
                if (same_types)
                    continue;
                assert_true(k < runs.n);
                assert_int_equal(runs.v[k].ts_ms, pts.v[j].ts_ms);
                assert_int_equal(runs.v[k].n_types, pts.v[j].n_types);
                for (size_t t = 0; t < pts.v[j].n_types; t++) {
                    assert_string_equal(runs.v[k].types[t].type, pts.v[j].types[t].type);
                    assert_string_equal(runs.v[k].types[t].unit, pts.v[j].types[t].unit);
                }
                k++;
            }
            assert_int_equal(k, runs.n);
            pd_points_release(&pts);
            pd_points_release(&runs);
        }
    pd_series_set_release(&set);
}

static void run(int workers)
{
    char dir[] = "/tmp/pd_blockagg_XXXXXX";
    assert_non_null(mkdtemp(dir));
    T0 = 1700000000000LL / DUR * DUR;
    now_ms = T0;
    pd_storage *st = open_store(dir, workers);
    for (int j = 0; j < N_PROF; j++) {
        int64_t ts = T0 + j * (DUR / 4);
        append(st, "cpu", "i0", ts, j, 1);
        append(st, "cpu", "i1", ts, j, 3);
        /* a counter since start, reset (restart) at profile 13 */
        append(st, "allocs", "i0", ts, j, j < 13 ? j + 1 : j - 12);
    }
    /* a profile far ahead makes every range due for a cut */
    now_ms = T0 + 20 * DUR;
    append(st, "other", "x", T0 + 19 * DUR, 0, 1);
    pd_err err = {{0}};
    for (int k = 0; k < 4; k++)
        PD_ASSERT_OK(pd_storage_maintain(st, &err), &err);
    pd_storage_stats ss;
    pd_storage_stats_get(st, &ss);
    assert_true(ss.n_blocks >= 6);
    assert_int_equal(ss.n_head_profiles, 1);
    uint64_t nb = ss.n_blocks;
    assert_int_equal(ss.n_aggregates_built, nb);
    char files[32][512];
    assert_int_equal(agg_files(dir, files, 32), nb);

    pd_buf with, without, again;
    pd_buf_init(&with, 0);
    pd_buf_init(&without, 0);
    pd_buf_init(&again, 0);
    record_all(st, &with);
    assert_true(stat_of(st, 1) > 0); /* parts added from records */
    check_type_runs(st);

    /* the same store, no aggregates in memory: every part decoded */
    pd_storage_close(st);
    st = open_store(dir, workers);
    record_all(st, &without);
    assert_int_equal(stat_of(st, 1), 0);
    check_type_runs(st); /* no records: from the points */
    same(&with, &without, "records vs decoding");

    /* damaged files: refused, rebuilt by the maintenance round */
    pd_storage_close(st);
    size_t n = agg_files(dir, files, 32);
    for (size_t i = 0; i < n; i++) {
        FILE *f = fopen(files[i], "r+b");
        assert_non_null(f);
        struct stat sb;
        assert_int_equal(stat(files[i], &sb), 0);
        long at = i % 2 ? (long)sb.st_size / 2 : 9; /* the payload; the block's id */
        fseek(f, at, SEEK_SET);
        int c = fgetc(f);
        fseek(f, at, SEEK_SET);
        fputc(c ^ 0x20, f);
        fclose(f);
    }
    st = open_store(dir, workers);
    PD_ASSERT_OK(pd_storage_maintain(st, &err), &err);
    assert_int_equal(stat_of(st, 0), nb);
    record_all(st, &again);
    assert_true(stat_of(st, 1) > 0);
    same(&with, &again, "records rebuilt from damaged files");

    /* files gone: rebuilt too; a reopen then loads them (nothing built) */
    pd_storage_close(st);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(unlink(files[i]), 0);
    st = open_store(dir, workers);
    PD_ASSERT_OK(pd_storage_maintain(st, &err), &err);
    assert_int_equal(stat_of(st, 0), nb);
    assert_int_equal(agg_files(dir, files, 32), nb);
    pd_storage_close(st);
    st = open_store(dir, workers);
    PD_ASSERT_OK(pd_storage_maintain(st, &err), &err);
    assert_int_equal(stat_of(st, 0), 0);
    pd_buf_reset(&again);
    record_all(st, &again);
    assert_true(stat_of(st, 1) > 0);
    same(&with, &again, "records loaded from rebuilt files");

    /* a byte of a block's chunks flipped after its records were summed: the
       records of the series it hits are not used (their chunks' CRC
       differs), so the answer is the decode's, damage reported and all */
    pd_storage_close(st);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "ls %s/*/chunks/000001 | head -1", dir);
    FILE *ls = popen(cmd, "r");
    char chunks[512] = "";
    assert_non_null(fgets(chunks, sizeof chunks, ls));
    pclose(ls);
    chunks[strcspn(chunks, "\n")] = 0;
    FILE *f = fopen(chunks, "r+b");
    assert_non_null(f);
    fseek(f, 8 + 12, SEEK_SET);
    int c = fgetc(f);
    fseek(f, 8 + 12, SEEK_SET);
    fputc(c ^ 0x5a, f);
    fclose(f);
    pd_buf dec, rec;
    pd_buf_init(&dec, 0);
    pd_buf_init(&rec, 0);
    st = open_store(dir, workers); /* no maintain: decoded */
    record_all(st, &dec);
    assert_int_equal(stat_of(st, 1), 0);
    pd_storage_close(st);
    st = open_store(dir, workers);
    PD_ASSERT_OK(pd_storage_maintain(st, &err), &err);
    record_all(st, &rec);
    assert_true(stat_of(st, 1) > 0); /* the other series' records still serve */
    same(&dec, &rec, "records vs decoding after chunk damage");
    pd_buf_release(&dec);
    pd_buf_release(&rec);

    pd_storage_close(st);
    pd_buf_release(&with);
    pd_buf_release(&without);
    pd_buf_release(&again);
    nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static void test_one_thread(void **state)
{
    (void)state;
    run(1);
}

static void test_workers(void **state)
{
    (void)state;
    run(4);
}

int main(void)
{
    (void)span_check_cases;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_thread),
        cmocka_unit_test(test_workers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
