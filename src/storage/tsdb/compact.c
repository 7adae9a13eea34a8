/*
 * storage/tsdb/compact.c — writing blocks (as Prometheus' tsdb/compact.go):
 * the head cut (the oldest aligned range of the head becomes a block, then
 * the WAL is checkpointed) and the compaction of adjacent blocks into
 * larger ones. Retention is in retention.c.
 *
 * Head cut (cut_head): after an append (and at open), with d =
 * block_duration_ms and a = floor(head min ts / d) * d, when the head's max
 * ts >= a + 1.5 d (or, with --storage.retention.size, when the WAL is past
 * wal_budget: a quarter of the limit), every head profile in [a, a + d) is rebuilt from the
 * head's value groups and written as a block (tmp dir, fsync, rename:
 * block.c, which re-interns the symbols and recompresses at zstd 19); the
 * block is opened, its series mapped onto the head's refs and the cut
 * points dropped from the head (a head group is freed with its last
 * profile); the head starts a new symbol generation (the old one is freed
 * with its last group: nothing is re-encoded); then PATH/series is
 * rewritten and WAL segments below the oldest segment any head point still
 * uses are removed. Points keep their WAL location, and cut points are kept
 * per series in cpts until the checkpoint removes their segment, so
 * read_profile's raw is the producer's bytes while the record exists;
 * afterwards (or if the record is damaged) raw is the profile re-encoded.
 * A crash at any point leaves either no block (tmp dir ignored) and the
 * whole WAL, or the block and (part of) the WAL: on open, head points whose
 * (series, ts) is in a block are dropped (no duplicates). A cut that fails
 * is logged and retried no earlier than 60 s later; the head keeps the data.
 * With the maintenance thread (the default), an append that finds a cut due
 * wakes the thread, which copies the points to cut under app_mu, reads,
 * decodes and writes them with app_mu released (appends go on; points
 * appended into the range meanwhile stay for the next cut), then swaps the
 * block in under app_mu + the idx write lock. Without the thread
 * (maintenance_ms < 0) the append itself cuts, under app_mu.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/arena.h"
#include "base/crc32c.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/time.h"
#include "base/varint.h"
#include "storage/storage.h"
#include "storage/tsdb/block_int.h"
#include "storage/tsdb/head_int.h"
#include "storage/tsdb/headmem_int.h"
#include "storage/tsdb/postings_int.h"
#include "storage/tsdb/wal_int.h"
#include "storage/tsdb/warnings_int.h"
#include "storage/tsdb/db_int.h"

/* ---- head cut ---- */

/* Start of the range to cut, when one is due (see the top of the file). */
/* The head's min and max time, cached: pd__tsdb_cut_due runs after every append, and
 * a scan of every series there cost O(series) per append. Appends widen the
 * cached range; removing head points (cut, open) invalidates it, and the
 * next call scans once. With app_mu held (or during open). */
static bool head_range(pd_tsdb *s, int64_t *mn, int64_t *mx)
{
    if (!s->hr_valid) {
        bool any = false;
        for (size_t i = 0; i < s->n_series; i++) {
            const series *se = s->by_ref[i];
            if (!se->n_pts)
                continue;
            if (!any || se->pts[0].ts < s->hr_min)
                s->hr_min = se->pts[0].ts;
            if (!any || se->pts[se->n_pts - 1].ts > s->hr_max)
                s->hr_max = se->pts[se->n_pts - 1].ts;
            any = true;
        }
        s->hr_any = any;
        s->hr_valid = true;
    }
    *mn = s->hr_min;
    *mx = s->hr_max;
    return s->hr_any;
}

/* After an append of ts (app_mu held): widens the cached head range. */
void pd__tsdb_head_range_add(pd_tsdb *s, int64_t ts)
{
    if (!s->hr_valid)
        return;
    if (!s->hr_any || ts < s->hr_min)
        s->hr_min = ts;
    if (!s->hr_any || ts > s->hr_max)
        s->hr_max = ts;
    s->hr_any = true;
}

bool pd__tsdb_cut_due(pd_tsdb *s, int64_t *start /* OUT */)
{
    if (s->block_ms <= 0 || !s->n_profiles)
        return false;
    int64_t mn = 0, mx = 0;
    if (!head_range(s, &mn, &mx))
        return false;
    int64_t d = s->block_ms;
    int64_t a = mn / d * d;
    if (mn < 0 && a != mn)
        a -= d;
    if (a > INT64_MAX - 2 * d)
        return false;
    /* with --storage.retention.size the WAL counts (issue 27): past its
       budget the oldest range is cut now, so the checkpoint frees its
       segments, even before the head spans 1.5 block durations (appends
       into that range later go into a block of their own; compaction
       merges the two) */
    bool over = s->wal_budget && pd__wal_bytes(s->wal) > s->wal_budget;
    if (mx - a < d + d / 2 && !over)
        return false;
    *start = a;
    return true;
}

/* A head series' points in the range being cut, copied. */
typedef struct cut_part {
    series *se; /* series are never freed while the store is open */
    point *pts;
    int64_t *ts;
    size_t n;
} cut_part;

static void cut_parts_free(cut_part *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].pts);
        free(v[i].ts);
    }
    free(v);
}

/* After a head cut: each cut series' first head group, when the cut took its
 * first profiles and left the rest, gets the sum of that rest
 * (pd_hgroup.sum_from), so that merges add it instead of decoding each of
 * them until a later cut takes them (docs/format/aggregates.md: a group
 * straddles every block boundary of a series pushing steadily, up to 31
 * profiles). Only groups of an older symbol generation than the current
 * one (no append extends them again) that had a sum. Each is decoded and
 * summed under the idx read lock (an appender's compression swaps a group's
 * bytes under the write lock) and installed under the write lock only if
 * unchanged meanwhile; without memory it simply stays decoded by merges. */
static void resum_split(pd_tsdb *s, const cut_part *parts, size_t n_parts)
{
    for (size_t i = 0; i < n_parts; i++) {
        series *se = parts[i].se;
        uint8_t *sum = NULL;
        size_t sl = 0;
        uint32_t gid = 0, from = 0, n = 0;
        uint64_t uid = 0;
        const pd_hgroup *g = NULL;
        pthread_rwlock_rdlock(&s->idx);
        if (se->n_pts && se->pts[0].gid != WAL_ONLY) {
            gid = se->pts[0].gid;
            g = pd__hmem_group(&se->hc, gid);
            if (g && g->sum && g->syms != s->hm.cur && g->n_live && g->n_live < g->n &&
                se->pts[0].gpos == g->n - g->n_live && g->sum_from < g->n - g->n_live) {
                from = g->n - g->n_live;
                n = g->n;
                uid = g->uid;
                if (pd__hgroup_sum(g, from, &sum, &sl) < 0)
                    sum = NULL;
            }
        }
        pthread_rwlock_unlock(&s->idx);
        if (!sum)
            continue;
        pthread_rwlock_wrlock(&s->idx);
        if (pd__hmem_group(&se->hc, gid) == g && g->uid == uid && g->n == n &&
            g->n_live == n - from && g->sum_from < from) {
            /* (pd__hmem_group gives readers a const view; this is the writer) */
            pd__hgroup_set_sum(&s->hm, (pd_hgroup *)g, from, sum, sl);
            sum = NULL;
        }
        pthread_rwlock_unlock(&s->idx);
        free(sum);
    }
}

/* Cuts the head's profiles in [a, a + block_ms) into a block, then
 * checkpoints the WAL. With `locked`, the caller holds app_mu throughout
 * (appends wait for the whole cut: the store without a maintenance thread).
 * Else (the maintenance thread, maint_mu held) app_mu is taken only to copy
 * the points to cut, to swap the block in, and for the checkpoint: the WAL
 * reads, decodes and the block write run while appends go on. Points
 * appended into the range meanwhile stay in the head (the next cut takes
 * them). On failure the head is unchanged (the data stays in the WAL). */
static int cut_head(pd_tsdb *s, int64_t a, bool locked, pd_err *err)
{
    int64_t b_end = a + s->block_ms;
    pd_block_writer *w = NULL;
    pd_block *blk = NULL;
    cut_part *parts = NULL;
    size_t n_parts = 0;
    char id[27] = {0}, dir[4400], name[4200];
    pd_log_info("storage: head cut starts", "mint=%lld maxt=%lld", (long long)a,
                (long long)(b_end - 1));
    int rc = pd__block_writer_new(NULL, &w);
    if (rc < 0) {
        rc = pd_err_set(err, rc, "head cut: out of memory");
        goto out;
    }
    /* 1. the points to cut */
    if (!locked)
        pthread_mutex_lock(&s->app_mu);
    parts = calloc(s->n_series + 1, sizeof *parts);
    for (size_t i = 0; parts && i < s->n_series; i++) {
        series *se = s->by_ref[i];
        size_t lo = pd__tsdb_lower_bound(se, a), hi = pd__tsdb_lower_bound(se, b_end);
        if (hi == lo)
            continue;
        cut_part *cp = &parts[n_parts++];
        cp->se = se;
        cp->n = hi - lo;
        cp->pts = malloc(cp->n * sizeof *cp->pts);
        cp->ts = malloc(cp->n * sizeof *cp->ts);
        if (!cp->pts || !cp->ts) {
            rc = PD_ENOMEM;
            break;
        }
        memcpy(cp->pts, se->pts + lo, cp->n * sizeof *cp->pts);
        for (size_t j = 0; j < cp->n; j++)
            cp->ts[j] = cp->pts[j].ts;
    }
    if (!locked)
        pthread_mutex_unlock(&s->app_mu);
    if (!parts || rc < 0) {
        rc = pd_err_set(err, PD_ENOMEM, "head cut: out of memory");
        goto out;
    }
    /* 2. rebuild them from the head's decomposed form and add them (only this
       cut drops head points, so their groups stay while it runs) */
    size_t skipped = 0;
    int64_t t0 = pd__tsdb_now_mono_ms();
    for (size_t i = 0; i < n_parts; i++) {
        series *se = parts[i].se;
        for (size_t j = 0; j < parts[i].n; j++) {
            point pt = parts[i].pts[j];
            pd_err e;
            pd_err_clear(&e);
            pd_profile p;
            if (pt.gid == WAL_ONLY) /* replayed, not decomposed yet */
                rc = pd__tsdb_wal_profile(s, se->ref, &pt, &p, NULL, &e);
            else {
                pthread_rwlock_rdlock(&s->idx);
                rc = pd__hmem_read(&se->hc, pt.gid, pt.gpos, pt.ts, &p, &e);
                pthread_rwlock_unlock(&s->idx);
            }
            if (rc == 0) {
                rc = pd__block_writer_add(w, &se->labels, pt.ts, &p, &e);
                pd_profile_release(&p);
            }
            if (rc == PD_ENOMEM) {
                rc = pd_err_set(err, rc, "head cut: out of memory");
                goto out;
            }
            if (rc < 0) {
                pd__tsdb_seg_name(s, pt.seg, name, sizeof name);
                pd_log_warn("storage: head cut skips an unreadable profile",
                            "file=%s offset=%llu ts_ms=%lld err=\"%s\"", name,
                            (unsigned long long)pt.off, (long long)pt.ts, e.msg);
                pd_metrics_add("profd_storage_corruptions_total", NULL, 1);
                skipped++;
            }
            rc = 0;
        }
    }
    size_t n = pd__block_writer_count(w);
    if (n) {
        if ((rc = pd__block_writer_write(w, s->path, id, err)) < 0)
            goto out;
        snprintf(dir, sizeof dir, "%s/%s", s->path, id);
        if ((rc = pd__block_open(dir, &blk, err)) < 0) {
            /* never leave a block behind that the head also keeps */
            pd__tsdb_remove_block_dir(dir);
            goto out;
        }
    }
    /* 3. swap: the block in, its points out of the head (cut_rw: not while
       an aggregation walks the head between its block snapshot and its end) */
    pthread_rwlock_wrlock(&s->cut_rw);
    if (!locked)
        pthread_mutex_lock(&s->app_mu);
    bool added = false;
    pthread_rwlock_wrlock(&s->idx);
    if (blk) {
        rc = pd__tsdb_add_block(s, blk, &added);
        blk = NULL;
    }
    for (size_t i = 0; i < n_parts; i++)
        s->n_profiles -= pd__tsdb_drop_points(s, parts[i].se, parts[i].ts, parts[i].n);
    s->hr_valid = false;
    /* new appends intern into fresh symbols: the old generation goes with
       its last group (no re-encoding) */
    if (n && pd__hmem_new_generation(&s->hm) < 0)
        pd_log_warn("storage: out of memory starting a new head symbol generation", "%s", "");
    pthread_rwlock_unlock(&s->idx);
    pthread_rwlock_unlock(&s->cut_rw);
    if (rc < 0) {
        /* the block is on disk and complete; the next open maps it fully */
        pd_log_error("storage: out of memory mapping a new block", "block=%s", id);
        rc = 0;
    }
    __atomic_add_fetch(&s->n_cuts, 1, __ATOMIC_RELAXED);
    pd_metrics_add("profd_storage_head_cuts_total", NULL, 1);
    /* 4. checkpoint: segments below the oldest one a head point uses */
    uint32_t keep = pd__wal_current(s->wal);
    for (size_t i = 0; i < s->n_series; i++) {
        const series *se = s->by_ref[i];
        for (size_t j = 0; j < se->n_pts; j++)
            if (se->pts[j].seg < keep)
                keep = se->pts[j].seg;
    }
    pthread_rwlock_wrlock(&s->idx);
    for (size_t i = 0; i < s->n_series; i++)
        pd__tsdb_prune_stash(s->by_ref[i], keep);
    pthread_rwlock_unlock(&s->idx);
    if ((rc = pd__tsdb_write_series_file(s, keep, err)) < 0 ||
        (rc = pd__wal_remove_before(s->wal, keep, err)) < 0) {
        pd_log_warn("storage: wal checkpoint failed (retried at the next cut)", "err=\"%s\"",
                    err->msg);
        rc = 0;
    }
    pd__tsdb_update_gauges(s);
    pthread_cond_broadcast(&s->wal_cv); /* appends held at the WAL's bound (head.c) */
    if (!locked)
        pthread_mutex_unlock(&s->app_mu);
    pd_log_info("storage: head cut",
                "block=%s mint=%lld maxt=%lld profiles=%zu skipped=%zu ms=%lld", n ? id : "-",
                (long long)a, (long long)(b_end - 1), n, skipped,
                (long long)(pd__tsdb_now_mono_ms() - t0));
    resum_split(s, parts, n_parts);
out:
    cut_parts_free(parts, n_parts);
    pd__block_close(blk);
    pd__block_writer_free(w);
    return rc;
}

/* Cuts every due range. With `locked`, the caller holds app_mu (appends of
 * a store without a maintenance thread, and open); else maint_mu is held
 * and app_mu is taken per step. */
void pd__tsdb_maybe_cut(pd_tsdb *s, bool locked)
{
    if (s->block_ms <= 0 || pd__tsdb_now_mono_ms() < s->cut_retry_after)
        return;
    int64_t a;
    for (int i = 0; i < 64; i++) {
        if (!locked)
            pthread_mutex_lock(&s->app_mu);
        bool due = pd__tsdb_cut_due(s, &a);
        if (!locked)
            pthread_mutex_unlock(&s->app_mu);
        if (!due)
            break;
        pd_err e;
        pd_err_clear(&e);
        if (cut_head(s, a, locked, &e) < 0) {
            pd_log_error("storage: head cut failed; retrying in 60 s", "err=\"%s\"", e.msg);
            s->cut_retry_after = pd__tsdb_now_mono_ms() + 60000;
            break;
        }
    }
}

/* ---- compaction ----
 *
 * Compaction (as Prometheus' leveled compactor): ranges R_k = d * 3^k for
 * k >= 1 (d = block duration), the largest at most 10% of the retention
 * time (at least R_1). For the smallest R first, blocks are grouped by the
 * aligned range [j*R, (j+1)*R) that holds them whole; a group of two or
 * more blocks whose range lies wholly before the store's newest profile
 * (no more data can arrive there from a head cut) is compacted: every
 * profile of every source is read (one value group decompressed at a time),
 * re-added to a new block writer (symbols interned anew, so re-mapped; a
 * (series, ts) met twice, as overlapping imports can have, is kept once),
 * written with compaction.level = 1 + max source level and
 * compaction.sources = the sources' ULIDs. Only after the new block is
 * durable (rename + fsync of PATH) and loaded are the sources unlinked and
 * deleted; a crash in between leaves both, and open deletes the sources
 * (pd__tsdb_load_blocks). Blocks straddling a range boundary (imports) are left as
 * they are.
 *
 * The work (reading, writing) runs under maint_mu only (as retention's), so appends and
 * reads go on; the swap runs under app_mu + the idx write lock.
 */

/* The store's newest profile time over head and blocks; false if empty. */
bool pd__tsdb_newest_ts(pd_tsdb *s, int64_t *out)
{
    bool any = false;
    pthread_rwlock_rdlock(&s->idx);
    for (size_t i = 0; i < s->n_blocks; i++) {
        int64_t t = pd__block_meta(s->blocks[i]->b)->max_t;
        if (!any || t > *out)
            *out = t;
        any = true;
    }
    for (size_t i = 0; i < s->n_series; i++) {
        const series *se = s->by_ref[i];
        if (se->n_pts && (!any || se->pts[se->n_pts - 1].ts > *out)) {
            *out = se->pts[se->n_pts - 1].ts;
            any = true;
        }
    }
    pthread_rwlock_unlock(&s->idx);
    return any;
}

/* A snapshot of the store's blocks with a reference each (pd__tsdb_hb_put them). */
int pd__tsdb_snapshot_blocks(pd_tsdb *s, hblock ***out, size_t *n)
{
    pthread_rwlock_rdlock(&s->idx);
    *n = s->n_blocks;
    *out = malloc((*n ? *n : 1) * sizeof **out);
    if (*out)
        for (size_t i = 0; i < *n; i++) {
            (*out)[i] = s->blocks[i];
            pd__tsdb_hb_get(s->blocks[i]);
        }
    pthread_rwlock_unlock(&s->idx);
    return *out ? 0 : PD_ENOMEM;
}

void pd__tsdb_put_blocks(hblock **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        pd__tsdb_hb_put(v[i]);
    free(v);
}

int pd__tsdb_cmp_hb_mint(const void *a, const void *b)
{
    const pd_block_meta *x = pd__block_meta((*(hblock *const *)a)->b);
    const pd_block_meta *y = pd__block_meta((*(hblock *const *)b)->b);
    if (x->min_t != y->min_t)
        return x->min_t < y->min_t ? -1 : 1;
    return strcmp(x->ulid, y->ulid);
}

static int64_t floor_div(int64_t a, int64_t d)
{
    return a / d - (a % d != 0 && a < 0);
}

/* Picks the next group to compact from v (sorted by min time): its first
 * index and size, or false. */
bool pd__tsdb_plan_compaction(const pd_tsdb *s, hblock **v, size_t n, int64_t newest, size_t *first,
                              size_t *count)
{
    int64_t d = s->block_ms > 0 ? s->block_ms : 2 * 3600 * 1000;
    /* as Prometheus: 10% of the retention time, else 31 days */
    int64_t max_r = s->retention_ms > 0 ? s->retention_ms / 10 : 31ll * 24 * 3600 * 1000;
    for (int64_t r = d * 3; r > 0; r *= 3) {
        if (r > max_r)
            break;
        size_t i = 0;
        while (i < n) {
            const pd_block_meta *m = pd__block_meta(v[i]->b);
            int64_t j = floor_div(m->min_t, r);
            if (j > INT64_MAX / r - 1) {
                i++;
                continue;
            }
            int64_t end = (j + 1) * r; /* exclusive */
            size_t k = i;
            bool whole = true;
            while (k < n && pd__block_meta(v[k]->b)->min_t < end) {
                if (pd__block_meta(v[k]->b)->max_t >= end)
                    whole = false;
                k++;
            }
            if (whole && k - i >= 2 && newest >= end) {
                *first = i;
                *count = k - i;
                return true;
            }
            i = k > i ? k : i + 1;
        }
        if (r > INT64_MAX / 3 / 4)
            break;
    }
    return false;
}

typedef struct compact_ctx {
    pd_block_writer *w;
    const pd_labels *labels;
    uint64_t dups;
    pd_err *err;
} compact_ctx;

static int compact_add(void *ctx, int64_t ts_ms, const pd_profile *p)
{
    compact_ctx *c = ctx;
    int rc = pd__block_writer_add(c->w, c->labels, ts_ms, p, c->err);
    if (rc == PD_EEXIST) {
        c->dups++;
        return 0;
    }
    return rc;
}

/* Compacts v[0..n) into one block and swaps it in. With maint_mu held.
 * A source that does not read (*bad_src = its index, else n) fails the
 * compaction; the caller marks it failed. */
int pd__tsdb_compact_blocks(pd_tsdb *s, hblock **v, size_t n, size_t *bad_src, pd_err *err)
{
    *bad_src = n;
    int64_t t0 = pd__tsdb_now_mono_ms();
    pd_block_writer *w = NULL;
    pd_block *blk = NULL;
    char id[27] = {0}, dir[4400];
    char(*srcs)[27] = calloc(n, sizeof *srcs);
    int level = 1;
    if (!srcs)
        return pd_err_set(err, PD_ENOMEM, "compaction: out of memory");
    for (size_t i = 0; i < n; i++) {
        const pd_block_meta *m = pd__block_meta(v[i]->b);
        memcpy(srcs[i], m->ulid, 27);
        if (m->level + 1 > level)
            level = m->level + 1;
    }
    pd_block_writer_opts o = {.level = level, .sources = (const char(*)[27])srcs, .n_sources = n};
    int rc = pd__block_writer_new(&o, &w);
    if (rc < 0) {
        rc = pd_err_set(err, rc, "compaction: out of memory");
        goto out;
    }
    compact_ctx c = {.w = w, .err = err};
    for (size_t i = 0; i < n; i++) {
        pd_block *b = v[i]->b;
        size_t ns = pd__block_n_series(b);
        for (uint32_t id2 = 0; id2 < ns; id2++) {
            c.labels = pd__block_series_labels(b, id2);
            if ((rc = pd__block_series_foreach(b, id2, compact_add, &c, err)) < 0) {
                pd_err_prefix(err, "compaction of block %s", pd__block_meta(b)->ulid);
                if (rc != PD_ENOMEM && !(rc < 0 && rc > -1000 && rc != -EIO))
                    *bad_src = i; /* damaged data, not a resource problem */
                goto out;
            }
        }
    }
    if ((rc = pd__block_writer_write(w, s->path, id, err)) < 0)
        goto out;
    snprintf(dir, sizeof dir, "%s/%s", s->path, id);
    if ((rc = pd__block_open(dir, &blk, err)) < 0) {
        pd__tsdb_remove_block_dir(dir); /* the sources stay */
        goto out;
    }
    bool added = false;
    pthread_mutex_lock(&s->app_mu);
    pthread_rwlock_wrlock(&s->idx);
    rc = pd__tsdb_add_block(s, blk, &added);
    blk = NULL;
    if (rc == 0)
        for (size_t i = 0; i < n; i++)
            pd__tsdb_unlink_block(s, v[i]); /* the store's reference is now ours */
    pthread_rwlock_unlock(&s->idx);
    pthread_mutex_unlock(&s->app_mu);
    if (rc < 0) {
        /* the new block is on disk and lists its sources: the next open
           keeps it and drops them; this run goes on with the sources */
        rc = pd_err_set(err, rc, "compaction: out of memory adding block %s", id);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        pd__tsdb_remove_block_dir(pd__block_dir(v[i]->b));
        pd__tsdb_hb_put(v[i]); /* the store's reference */
    }
    __atomic_add_fetch(&s->n_compactions, 1, __ATOMIC_RELAXED);
    pd_metrics_add("profd_storage_compactions_total", NULL, 1);
    pd_log_info("storage: compacted blocks",
                "block=%s sources=%zu level=%d profiles=%zu dups=%llu ms=%lld", id, n, level,
                pd__block_writer_count(w), (unsigned long long)c.dups,
                (long long)(pd__tsdb_now_mono_ms() - t0));
out:
    pd__block_close(blk);
    pd__block_writer_free(w);
    free(srcs);
    return rc;
}
