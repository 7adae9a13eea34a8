/*
 * storage/tsdb/aggregate_head.c — the head's part of the pushed-down merge
 * (aggregate.c: the design; aggregate_int.h).
 *
 * The head (the recent hours, not yet cut into a block) is summed on its
 * own ids: each group (headmem_int.h) whose profiles the range holds whole
 * is added as its sum (pd_hgroup.sum, the head's aggregates: sealed groups
 * and the open one alike, docs/format/aggregates.md), other profiles are
 * decoded (pd__hmem_read_dprof: the group's value group decoded, the
 * symbols of its generation), under the idx read lock, a new part when the
 * symbol generation changes; replayed profiles not decomposed yet
 * (WAL_ONLY) are read one by one (pd_tsdb_read_profile).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/time.h"
#include "storage/tsdb/aggregate_int.h"

/* The head's aggregates: when the point at k of se starts what a group's
 * sum (pd_hgroup.sum) covers — its profiles sum_from..n-1 (sealed, or the
 * open one: its sum covers the n profiles visible under the lock; after a
 * head cut took a group's first profiles, the rest summed again) — and
 * those are points k.. of se, none dropped, none in between from another
 * group, all at or before maxt and, with weights w, in a series summed as
 * is (w->on false) inside its window, returns how many points the sum
 * stands for, else 0. idx read lock. */
static size_t head_group_run(const series *se, size_t k, int64_t maxt, const agg_w *w)
{
    const point *pt = &se->pts[k];
    if (pt->gid == WAL_ONLY || (w && w->on))
        return 0;
    const pd_hgroup *g = pd__hmem_group(&se->hc, pt->gid);
    if (!g || !g->sum || g->sum_from >= g->n || pt->gpos != g->sum_from)
        return 0;
    uint32_t n = g->n - g->sum_from;
    if (g->n_live != n || g->ts[g->sum_from] != pt->ts || k + n > se->n_pts ||
        g->ts[g->n - 1] > maxt)
        return 0;
    if (w && (pt->ts < w->lo || g->ts[g->n - 1] > w->hi))
        return 0;
    for (uint32_t j = 1; j < n; j++)
        if (se->pts[k + j].gid != pt->gid || se->pts[k + j].gpos != g->sum_from + j)
            return 0;
    return n;
}

/* Hands the head profiles of series i at ts[0..n) over one by one, each
 * times its weight in wt (NULL: 1; 0 skips it, -1 negates its values); with
 * a filter flt, the samples it does not pass are zeroed (the merger drops
 * samples that sum to zero). */
int pd__agg_head_parts(pd_tsdb *s, uint64_t ref, size_t i, const int64_t *ts, size_t n,
                       const agg_w *wt, const pd_storage_sample_filter *flt, pd_storage_agg_fn fn,
                       void *ctx, pd_err *err)
{
    const agg wa = {.wt = wt};
    for (size_t k = 0; k < n; k++) {
        int w = pd__agg_weight(&wa, i, ts[k]);
        if (!w)
            continue;
        pd_profile p;
        int rc = pd_tsdb_read_profile(s, ref, ts[k], &p, NULL, err);
        if (rc == PD_ENOTFOUND || rc == PD_ECORRUPT) { /* gone since, or damaged: skipped */
            pd_err_clear(err);
            continue;
        }
        if (rc < 0)
            return rc;
        for (size_t j = 0; w < 0 && j < p.n_sample; j++)
            for (size_t v = 0; v < p.sample[j].n_value; v++)
                p.sample[j].value[v] = (int64_t)(0 - (uint64_t)p.sample[j].value[v]);
        for (size_t j = 0; flt && j < p.n_sample; j++)
            if (!pd_storage_sample_passes(flt, &p, p.sample[j].label, p.sample[j].n_label))
                memset(p.sample[j].value, 0, p.sample[j].n_value * sizeof *p.sample[j].value);
        pd_storage_agg_part part = {
            .series = i, .n_series = 1, .n_profiles = 1, .min_ts = ts[k], .max_ts = ts[k]};
        rc = fn(ctx, &part, &p, err);
        pd_profile_release(&p);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Before series i adds a profile or a head group's sum made with symbols
 * sym to a's part: a part of other symbols is flushed first (and *pin, its
 * generation, let go), and series i is counted once in the part. 0, or
 * pd__agg_flush's error. */
static int part_enter(agg *a, const pd_symbols *sym, size_t i, pd_hsyms **pin)
{
    if (a->part.n_profiles && a->sym != sym) {
        int rc = pd__agg_flush(a);
        pd__hmem_unpin(*pin);
        *pin = NULL;
        if (rc < 0)
            return rc;
        a->part.series = i;
    }
    a->sym = sym;
    if (a->last_i != i + 1) {
        a->part.n_series++;
        a->last_i = i + 1;
    }
    return 0;
}
/* The head's part of the aggregation: for each group, the decomposed head
 * profiles of its series (pd__hmem_read_dprof: the head's own stack ids,
 * no pd_profile per input) summed under the idx read lock, a new part when
 * the symbol generation changes (a head cut started a new one); fn is
 * called under that lock (it must not call the store). Replayed points not
 * decomposed yet (WAL_ONLY) are collected in wal_i/wal_ts for pd__agg_head_parts.
 *
 * The lock is held for slices of about s->agg_slice_ns (storage.h
 * aggregate_slice_ns; the lock prefers writers, so a push waits at most
 * about this long behind a merge of the whole head): at the end of one the
 * part's symbol generation is pinned (pd__hmem_pin: a head cut meanwhile
 * must not free the symbols its stack ids refer to), the lock released and
 * taken again, and the walk resumes at the same series (found again by its
 * ref: it may have moved or gone) at the first point not summed. The clock
 * is read after every profile (decoding one of 16,384 stacks takes ~1 ms).
 * The part is symbolized (pd__agg_flush) only under the lock, once per group or
 * generation, as without slices; the caller's fn then runs with the lock
 * released at a group's end (the profile it gets owns its strings). */
int pd__agg_head_sum(pd_tsdb *s, const uint64_t *refs, const size_t *gfirst, size_t n, int64_t mint,
                     int64_t maxt, const agg_w *wt, const pd_storage_sample_filter *flt,
                     pd_storage_agg_fn fn, int (*poll)(void *ctx, pd_err *err), void *ctx,
                     size_t **wal_i, int64_t **wal_ts, size_t *n_wal, pd_err *err)
{
    agg a = {.fn = fn, .poll = poll, .ctx = ctx, .err = err, .wt = wt, .flt = flt};
    pd_u64map_init(&a.map);
    int rc = 0;
    size_t cap_wal = 0, n_slice = 0; /* profiles walked in this slice */
    pd_hsyms *pin = NULL;            /* a.sym's generation, while a slice ended in the part */
    pthread_rwlock_rdlock(&s->idx);
    int64_t slice_end = pd_mono_ns() + s->agg_slice_ns;
    for (size_t g = 0; g < n && rc >= 0; g++) {
        if (gfirst[g] != g)
            continue;
        a.part.series = g;
        for (size_t i = g; i < n && rc >= 0; i++) {
            if (gfirst[i] != g || mint > maxt)
                continue;
            int64_t from = mint; /* where the walk of series i resumes */
            for (;;) {
                const series *se = pd__tsdb_find_by_ref(s, refs[i]);
                if (!se)
                    break;
                bool sliced = false;
                for (size_t k = pd__tsdb_lower_bound(se, from); k < se->n_pts && rc >= 0; k++) {
                    const point *pt = &se->pts[k];
                    if (pt->ts > maxt)
                        break;
                    /* the clock is read per profile (a decode of a large
                       profile takes ~1 ms: every 16th let writers wait 20-30
                       ms); at least one profile per slice, so the walk ends */
                    if (n_slice++ && pd_mono_ns() >= slice_end) {
                        /* let writers in, then find the series again (at
                           pt's time, read first: an append meanwhile may
                           move se->pts) */
                        from = pt->ts;
                        if (a.part.n_profiles && !pin)
                            pin = pd__hmem_pin(a.sym);
                        pthread_rwlock_unlock(&s->idx);
                        pthread_rwlock_rdlock(&s->idx);
                        slice_end = pd_mono_ns() + s->agg_slice_ns;
                        n_slice = 0;
                        __atomic_add_fetch(&s->n_agg_slices, 1, __ATOMIC_RELAXED);
                        sliced = true;
                        break;
                    }
                    a.cur_i = i;
                    if (wt && !pd__agg_weight(&a, i, pt->ts))
                        continue; /* a delta aggregation's profile that adds nothing */
                    if (pt->gid == WAL_ONLY) {
                        if (*n_wal == cap_wal) {
                            size_t nc = cap_wal ? 2 * cap_wal : 64;
                            size_t *ni = realloc(*wal_i, nc * sizeof *ni);
                            if (ni)
                                *wal_i = ni;
                            int64_t *nt = realloc(*wal_ts, nc * sizeof *nt);
                            if (nt)
                                *wal_ts = nt;
                            if (!ni || !nt) {
                                rc = pd_err_set(err, PD_ENOMEM, "aggregate: out of memory");
                                break;
                            }
                            cap_wal = nc;
                        }
                        (*wal_i)[*n_wal] = i;
                        (*wal_ts)[(*n_wal)++] = pt->ts;
                        continue;
                    }
                    /* a group (sealed or open) whose profiles are the next ones of
                       the series, all in range: its sum (the head's
                       aggregates) instead of each profile */
                    size_t gn = head_group_run(se, k, maxt, wt ? &wt[i] : NULL);
                    if (gn) {
                        const pd_hgroup *hg = pd__hmem_group(&se->hc, pt->gid);
                        pd_bagg_rec rec;
                        int r = pd__bagg_rec_decode(hg->sum, hg->sum_len, &rec, &a.sc);
                        if (r < 0) {
                            rc = pd_err_set(err, r, "aggregate: out of memory");
                            break;
                        }
                        if (r > 0) {
                            if ((rc = part_enter(&a, &hg->syms->sym, i, &pin)) < 0 ||
                                (rc = pd__agg_add_rec(&a, &rec)) < 0)
                                break;
                            __atomic_add_fetch(__atomic_load_n(&hg->sealed, __ATOMIC_RELAXED)
                                                   ? &s->n_agg_head_groups
                                                   : &s->n_agg_head_open,
                                               1, __ATOMIC_RELAXED);
                            k += gn - 1;
                            continue;
                        }
                    }
                    const pd_dprof *d;
                    const pd_symbols *sym;
                    pd_err he;
                    int r = pd__hmem_read_dprof(&se->hc, pt->gid, pt->gpos, pt->ts, &d, &sym, &he);
                    if (r == PD_ENOTFOUND || r == PD_ECORRUPT)
                        continue; /* as pd_tsdb_read_profile's callers skip it */
                    if (r < 0) {
                        rc = pd_err_set(err, r, "aggregate: %s", he.msg);
                        break;
                    }
                    if ((rc = part_enter(&a, sym, i, &pin)) < 0)
                        break;
                    rc = pd__agg_add(&a, d);
                }
                if (!sliced || rc < 0)
                    break;
            }
        }
        if (rc >= 0) { /* the group's end: no series pointer is held across it */
            a.fn_unlock = &s->idx;
            rc = pd__agg_flush(&a);
            a.fn_unlock = NULL;
        }
        pd__hmem_unpin(pin);
        pin = NULL;
    }
    pthread_rwlock_unlock(&s->idx);
    pd__hmem_unpin(pin);
    pd__agg_release(&a);
    return rc;
}
