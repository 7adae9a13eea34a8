/* Regression tests of issue 19 (damage costs only what it touches), one per
 * case that broke, named after it: a one-byte flip in one series' chunk, a
 * block without meta.json, compaction around a failed block, a WAL segment
 * gap, the `series` file deleted, and `profd tsdb repair`. The store is the
 * fixture of damage_fixture.h (real profiles; the test knows where each
 * profile lives). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "damage_fixture.h"
#include "storage/tsdb/tsdb_cli_int.h"

typedef struct tfx {
    char dir[256];
    pd_storage *st;
} tfx;

static int setup(void **state)
{
    tfx *f = calloc(1, sizeof *f);
    fx_mkdtemp(f->dir, sizeof f->dir, "damage");
    fx_build(f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    tfx *f = *state;
    pd_storage_close(f->st);
    fx_rm_rf(f->dir);
    free(f);
    return 0;
}

/* A byte flipped in the time chunk of S0 in the oldest block: select, points
 * and merges of every series go on (S0 without that block's part), the
 * damage is logged and counted once, and each answer carries a warning
 * naming the file and offset. */
static void test_one_byte_chunk_flip(void **state)
{
    tfx *f = *state;
    char names[8][27];
    int64_t mint[8];
    assert_int_equal(fx_blocks(f->dir, names, mint, 8), 2);
    char bdir[600], path[700];
    snprintf(bdir, sizeof bdir, "%s/%s", f->dir, names[0]);
    pd_block *b;
    pd_err err = {{0}};
    assert_int_equal(pd__block_open(bdir, &b, &err), 0);
    uint64_t start = 0, end = 0;
    for (uint32_t id = 0; id < pd__block_n_series(b); id++)
        if (!pd_labels_cmp(pd__block_series_labels(b, id), &FX_L[0]))
            pd__block_series_extent(b, id, &start, &end);
    pd__block_close(b);
    assert_true(end > start + 8);
    snprintf(path, sizeof path, "%s/chunks/000001", bdir);
    flip(path, (off_t)end - 6); /* inside S0's time chunk */

    double c0 = fx_corruptions();
    f->st = fx_open(f->dir, -1);
    uint64_t refs[FX_NSERIES];
    pd_storage_warnings w;
    for (int round = 0; round < 3; round++) {
        pd_storage_warnings_begin(&w);
        for (int s = 0; s < FX_NSERIES; s++)
            refs[s] = fx_ref(f->st, s);
        for (int s = 0; s < FX_NSERIES; s++)
            assert_true(refs[s] != 0);
        for (size_t k = 0; k < FX_NE; k++) {
            const fx_exp *e = &FX_E[k];
            bool hit = e->s == 0 && e->ts < FX_DUR;
            assert_int_equal(fx_has_point(f->st, refs[e->s], e->ts), !hit);
            if (!hit)
                assert_true(fx_served(f->st, refs, e));
        }
        pd_storage_warnings_end();
        assert_true(w.n >= 1);
        bool named = false;
        for (size_t i = 0; i < w.n; i++)
            named |= strstr(w.v[i], names[0]) && strstr(w.v[i], "chunks/000001 offset");
        assert_true(named);
        pd_storage_warnings_release(&w);
    }
    assert_int_equal(fx_corruptions(), c0 + 1); /* once, not per read */
    char out[8192];
    assert_int_equal(run_tsdb(out, sizeof out, "check", f->dir), 1);
    assert_non_null(strstr(out, "chunks/000001 offset"));
}

/* meta.json deleted: the block is still served (meta rebuilt from index,
 * symbols and sizes), reported and counted; check names it. */
static void test_meta_json_missing(void **state)
{
    tfx *f = *state;
    char names[8][27];
    int64_t mint[8];
    assert_int_equal(fx_blocks(f->dir, names, mint, 8), 2);
    char path[700];
    snprintf(path, sizeof path, "%s/%s/meta.json", f->dir, names[1]);
    assert_int_equal(unlink(path), 0);
    double c0 = fx_corruptions();
    f->st = fx_open(f->dir, -1);
    assert_int_equal(fx_corruptions(), c0 + 1);
    pd_storage_stats ss;
    pd_storage_stats_get(f->st, &ss);
    assert_int_equal(ss.n_blocks, 2);
    uint64_t refs[FX_NSERIES];
    for (int s = 0; s < FX_NSERIES; s++)
        refs[s] = fx_ref(f->st, s);
    for (size_t k = 0; k < FX_NE; k++)
        assert_true(fx_served(f->st, refs, &FX_E[k]));
    pd_storage_close(f->st);
    f->st = NULL;
    char out[8192];
    assert_int_equal(run_tsdb(out, sizeof out, "check", f->dir), 1);
    assert_non_null(strstr(out, "meta.json"));
}

/* Refs of the fixture series (opened without a cut, closed again). */
static void pristine_refs(const char *dir, uint64_t refs[FX_NSERIES])
{
    pd_storage *st = fx_open(dir, -1);
    for (int s = 0; s < FX_NSERIES; s++)
        refs[s] = fx_ref(st, s);
    pd_storage_close(st);
}

/* One WAL segment lost or cut short: which = 0 the first, 1 a middle one,
 * 2 the newest; cut: truncated exactly at the record boundary before its
 * last PROFILE record (else deleted). Open logs and counts it and serves
 * every profile but the lost records'; `tsdb check` fails naming the
 * segment (want, a printf format taking the segment number). Continuity
 * (WAL format 2): a middle gap by the numbering, the first segment by the
 * series file's CHECKPOINT record, the newest by the END record its
 * predecessor ends with, a cut by the missing END record. */
static void wal_segment_lost(tfx *f, int which, bool cut, const char *want_fmt)
{
    uint64_t refs[FX_NSERIES];
    pristine_refs(f->dir, refs);
    uint32_t nums[64];
    size_t n = fx_segments(f->dir, nums, 64);
    assert_true(n >= 3);
    uint32_t victim = nums[which == 0 ? 0 : which == 1 ? n / 2 : n - 1];
    char path[700];
    snprintf(path, sizeof path, "%s/wal/%08u", f->dir, victim);
    fx_rec recs[256];
    size_t nr = fx_records(path, recs, 256);
    uint64_t from = 0; /* records at or past this offset are lost */
    if (cut) {
        for (size_t i = 0; i < nr; i++)
            if (recs[i].type == 2)
                from = recs[i].off;
        assert_true(from > 8);
    }
    size_t lost_n = 0;
    int64_t lost_ts[256];
    int lost_s[256];
    for (size_t i = 0; i < nr; i++)
        if (recs[i].type == 2 && recs[i].off >= from)
            for (int s = 0; s < FX_NSERIES; s++)
                if (recs[i].ref == refs[s]) {
                    lost_s[lost_n] = s;
                    lost_ts[lost_n++] = recs[i].ts;
                }
    assert_true(lost_n > 0);
    if (cut)
        assert_int_equal(truncate(path, (off_t)from), 0);
    else
        assert_int_equal(unlink(path), 0);
    /* check before any open (an open seals what it found) */
    char out[16384], want[128];
    assert_int_equal(run_tsdb(out, sizeof out, "check", f->dir), 1);
    snprintf(want, sizeof want, want_fmt, victim);
    if (!strstr(out, want))
        fail_msg("check does not say \"%s\":\n%s", want, out);
    double c0 = fx_corruptions();
    f->st = fx_open(f->dir, -1);
    assert_true(fx_corruptions() >= c0 + 1);
    for (int s = 0; s < FX_NSERIES; s++)
        assert_int_equal(fx_ref(f->st, s), refs[s]);
    size_t served = 0;
    for (size_t k = 0; k < FX_NE; k++) {
        const fx_exp *e = &FX_E[k];
        bool lost = false;
        for (size_t i = 0; i < lost_n; i++)
            lost |= lost_s[i] == e->s && lost_ts[i] == e->ts;
        if (!lost) {
            assert_true(fx_served(f->st, refs, e));
            served++;
        } else {
            assert_false(fx_served(f->st, refs, e));
        }
    }
    assert_int_equal(served, FX_NE - lost_n);
    pd_storage_close(f->st);
    f->st = NULL;
}

static void test_wal_gap(void **state)
{
    wal_segment_lost(*state, 1, false, "wal/%08u: missing segment");
}
static void test_wal_first_segment_deleted(void **state)
{
    wal_segment_lost(*state, 0, false, "wal/%08u: missing segment (the oldest");
}
static void test_wal_last_segment_deleted(void **state)
{
    wal_segment_lost(*state, 2, false, "wal/%08u: missing segment (the newest");
}
static void test_wal_cut_at_record_boundary(void **state)
{
    wal_segment_lost(*state, 1, true, "wal/%08u offset");
}
static void test_wal_first_segment_cut_at_record_boundary(void **state)
{
    wal_segment_lost(*state, 0, true, "wal/%08u offset");
}

/* DIR/series deleted after a checkpoint removed segment 1: open logs and
 * counts it (the head profiles of those series are lost, the blocks
 * served), and tsdb check fails naming the file. */
static void test_series_file_deleted(void **state)
{
    tfx *f = *state;
    uint32_t nums[64];
    assert_true(fx_segments(f->dir, nums, 64) >= 1);
    assert_true(nums[0] > 1); /* the fixture's cuts checkpointed */
    char path[700];
    snprintf(path, sizeof path, "%s/series", f->dir);
    assert_int_equal(unlink(path), 0);
    char out[16384];
    assert_int_equal(run_tsdb(out, sizeof out, "check", f->dir), 1);
    assert_non_null(strstr(out, "/series: missing"));
    double c0 = fx_corruptions();
    f->st = fx_open(f->dir, -1);
    assert_true(fx_corruptions() >= c0 + 1);
    uint64_t refs[FX_NSERIES];
    for (int s = 0; s < FX_NSERIES; s++)
        refs[s] = fx_ref(f->st, s);
    for (size_t k = 0; k < FX_NE; k++)
        if (FX_E[k].ts < 2 * FX_DUR) /* in the blocks */
            assert_true(fx_served(f->st, refs, &FX_E[k]));
}

/* A byte flipped in the middle block: the compaction of [0, 30 s) cannot
 * read it, marks it failed in its meta.json (compaction.failed) and compacts
 * the other two; the failed block stays served for what reads, and later
 * rounds (also after a reopen) plan around it. */
static void test_compaction_around_failed_block(void **state)
{
    tfx *f = *state;
    f->st = fx_open(f->dir, FX_DUR);
    for (int i = FX_NSTEP; i < 45; i++) { /* blocks [20 s, 30 s), [30 s, 40 s) */
        int64_t ts = (int64_t)(i + 1) * FX_STEP;
        pd_err err = {{0}};
        const fx_prof *t = &FX_HEAP[i % FX_NHEAP];
        assert_int_equal(pd_storage_append(f->st, &FX_L[0], ts, t->body, t->len, &t->p, &err), 0);
    }
    pd_storage_close(f->st);
    f->st = NULL;
    char names[8][27];
    int64_t mint[8];
    size_t nb = fx_blocks(f->dir, names, mint, 8);
    assert_true(nb >= 3);
    assert_int_equal(mint[1], 10000);
    char path[700];
    snprintf(path, sizeof path, "%s/%s/chunks/000001", f->dir, names[1]);
    flip(path, 8 + 20); /* inside the first series' first value group */
    double c0 = fx_corruptions();
    f->st = fx_open(f->dir, FX_DUR);
    pd_err err = {{0}};
    assert_int_equal(pd_storage_maintain(f->st, &err), 0);
    pd_storage_stats ss;
    pd_storage_stats_get(f->st, &ss);
    assert_int_equal(ss.n_compactions, 1); /* [0,10 s) + [20 s,30 s) */
    assert_true(fx_corruptions() >= c0 + 1);
    snprintf(path, sizeof path, "%s/%s/meta.json", f->dir, names[1]);
    FILE *mf = fopen(path, "r");
    assert_non_null(mf);
    char meta[8192];
    size_t ml = fread(meta, 1, sizeof meta - 1, mf);
    meta[ml] = 0;
    fclose(mf);
    assert_non_null(strstr(meta, "\"failed\":true")); /* compact JSON */
    /* every profile outside the damaged block still served */
    uint64_t refs[FX_NSERIES];
    for (int s = 0; s < FX_NSERIES; s++)
        refs[s] = fx_ref(f->st, s);
    for (size_t k = 0; k < FX_NE; k++)
        if (FX_E[k].ts < 10000 || FX_E[k].ts >= 20000)
            assert_true(fx_served(f->st, refs, &FX_E[k]));
    pd_storage_close(f->st);
    f->st = fx_open(f->dir, FX_DUR);
    assert_int_equal(pd_storage_maintain(f->st, &err), 0);
    pd_storage_stats_get(f->st, &ss);
    assert_int_equal(ss.n_compactions, 0); /* nothing else due, no retry of the failed one */
    assert_int_equal(ss.n_blocks, nb - 1);
}

/* A byte flipped in one series entry of the middle block's index (format 2):
 * the block opens without that series (logged, counted), is marked
 * compaction.failed at once — a compaction would keep only what verifies and
 * delete the rest — and the other blocks of its range compact without it;
 * its other series are still served. */
static void test_compaction_around_damaged_index_entry(void **state)
{
    tfx *f = *state;
    f->st = fx_open(f->dir, FX_DUR);
    for (int i = FX_NSTEP; i < 45; i++) { /* blocks [20 s, 30 s), [30 s, 40 s) */
        int64_t ts = (int64_t)(i + 1) * FX_STEP;
        pd_err err = {{0}};
        const fx_prof *t = &FX_HEAP[i % FX_NHEAP];
        assert_int_equal(pd_storage_append(f->st, &FX_L[0], ts, t->body, t->len, &t->p, &err), 0);
    }
    pd_storage_close(f->st);
    f->st = NULL;
    char names[8][27];
    int64_t mint[8];
    size_t nb = fx_blocks(f->dir, names, mint, 8);
    assert_true(nb >= 3);
    assert_int_equal(mint[1], 10000);
    char path[700];
    snprintf(path, sizeof path, "%s/%s", f->dir, names[1]);
    pd_block *b;
    pd_err err = {{0}};
    if (pd__block_open(path, &b, &err))
        fail_msg("open %s: %s", path, err.msg);
    assert_int_equal(pd__block_meta(b)->version, 2);
    pd_labels gone;
    pd_labels_init(&gone);
    const pd_labels *l0 = pd__block_series_labels(b, 0);
    for (size_t j = 0; j < l0->n; j++)
        assert_int_equal(pd_labels_set(&gone, l0->v[j].name, l0->v[j].value, NULL), 0);
    pd__block_close(b);
    snprintf(path, sizeof path, "%s/%s/index", f->dir, names[1]);
    flip(path, 8 + 5 + 3); /* inside entry 0's body */
    double c0 = fx_corruptions();
    f->st = fx_open(f->dir, FX_DUR);
    assert_true(fx_corruptions() >= c0 + 1);
    assert_int_equal(pd_storage_maintain(f->st, &err), 0);
    pd_storage_stats ss;
    pd_storage_stats_get(f->st, &ss);
    assert_int_equal(ss.n_compactions, 1); /* [0,10 s) + [20 s,30 s) */
    snprintf(path, sizeof path, "%s/%s/meta.json", f->dir, names[1]);
    FILE *mf = fopen(path, "r");
    assert_non_null(mf);
    char meta[8192];
    size_t ml = fread(meta, 1, sizeof meta - 1, mf);
    meta[ml] = 0;
    fclose(mf);
    assert_non_null(strstr(meta, "\"failed\":true")); /* compact JSON */
    uint64_t refs[FX_NSERIES];
    for (int s = 0; s < FX_NSERIES; s++)
        refs[s] = fx_ref(f->st, s);
    size_t kept = 0, lost = 0;
    for (size_t k = 0; k < FX_NE; k++) {
        const fx_exp *e = &FX_E[k];
        bool in_block = e->ts >= 10000 && e->ts < 20000;
        if (in_block && !pd_labels_cmp(&FX_L[e->s], &gone)) {
            assert_false(fx_served(f->st, refs, e));
            lost++;
        } else {
            assert_true(fx_served(f->st, refs, e));
            kept += in_block;
        }
    }
    assert_true(lost > 0 && kept > 0);
    pd_labels_release(&gone);
    char out[16384];
    pd_storage_close(f->st);
    f->st = NULL;
    assert_int_equal(run_tsdb(out, sizeof out, "check", f->dir), 1);
    snprintf(path, sizeof path, "%s/index offset", names[1]);
    if (!strstr(out, path))
        fail_msg("check does not name %s:\n%s", path, out);
}

/* profd tsdb repair: block 0 with a flipped byte in S0's value group, block
 * 1 without meta.json. Repair rewrites both from what verifies, moves the
 * originals aside, reports the dropped profiles; afterwards check passes and
 * every profile the damage did not touch is served. */
static void test_tsdb_repair(void **state)
{
    tfx *f = *state;
    char names[8][27];
    int64_t mint[8];
    assert_int_equal(fx_blocks(f->dir, names, mint, 8), 2);
    char bdir[600], path[700];
    snprintf(bdir, sizeof bdir, "%s/%s", f->dir, names[0]);
    pd_block *b;
    pd_err err = {{0}};
    assert_int_equal(pd__block_open(bdir, &b, &err), 0);
    uint64_t start = 0, end = 0;
    for (uint32_t id = 0; id < pd__block_n_series(b); id++)
        if (!pd_labels_cmp(pd__block_series_labels(b, id), &FX_L[0]))
            pd__block_series_extent(b, id, &start, &end);
    pd__block_close(b);
    snprintf(path, sizeof path, "%s/chunks/000001", bdir);
    flip(path, (off_t)start + 20); /* S0's value group */
    snprintf(path, sizeof path, "%s/%s/meta.json", f->dir, names[1]);
    assert_int_equal(unlink(path), 0);

    char out[65536];
    assert_int_equal(run_tsdb(out, sizeof out, "check", f->dir), 1);
    assert_int_equal(run_tsdb(out, sizeof out, "repair", f->dir), 0);
    assert_non_null(strstr(out, "dropped profile"));
    assert_non_null(strstr(out, "rewrote"));
    assert_non_null(strstr(out, "2 rewritten"));
    assert_non_null(strstr(out, "/repair-"));
    DIR *d = opendir(f->dir);
    bool found_aside = false;
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, "repair-", 7)) {
            snprintf(path, sizeof path, "%s/%s/%s/index", f->dir, e->d_name, names[0]);
            found_aside = access(path, F_OK) == 0;
        }
    closedir(d);
    assert_true(found_aside);
    assert_int_equal(run_tsdb(out, sizeof out, "check", f->dir), 0);

    f->st = fx_open(f->dir, -1);
    uint64_t refs[FX_NSERIES];
    for (int s = 0; s < FX_NSERIES; s++)
        refs[s] = fx_ref(f->st, s);
    size_t lost = 0;
    for (size_t k = 0; k < FX_NE; k++) {
        const fx_exp *e2 = &FX_E[k];
        bool hit = e2->s == 0 && e2->ts < FX_DUR;
        if (!hit)
            assert_true(fx_served(f->st, refs, e2));
        else
            lost += !fx_served(f->st, refs, e2);
    }
    assert_true(lost > 0);
    pd_storage_stats ss;
    pd_storage_stats_get(f->st, &ss);
    assert_int_equal(ss.n_blocks, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_one_byte_chunk_flip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_meta_json_missing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wal_gap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wal_first_segment_deleted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wal_last_segment_deleted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wal_cut_at_record_boundary, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wal_first_segment_cut_at_record_boundary, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_series_file_deleted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compaction_around_failed_block, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compaction_around_damaged_index_entry, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_tsdb_repair, setup, teardown),
    };
    return cmocka_run_group_tests(tests, fx_group_setup, fx_group_teardown);
}
