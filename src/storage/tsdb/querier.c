/*
 * storage/tsdb/querier.c — the read side of storage.h (as Prometheus'
 * tsdb/querier.go): series selection (postings intersected, then matchers
 * tested on the candidates), timestamps + totals (no profile decode), one
 * profile (from the head, the WAL or a block). Readers take idx for reading
 * and rebuild a head profile under it (CPU only); block reads and the WAL
 * read of raw bytes run after releasing it, holding a reference on the
 * block. A damaged block part is skipped with a warning (warnings.c).
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
#include "base/cancel.h"
#include "base/crc32c.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/time.h"
#include "base/varint.h"
#include "storage/latest_int.h"
#include "storage/storage.h"
#include "storage/tsdb/block_int.h"
#include "storage/tsdb/blockagg_int.h"
#include "storage/tsdb/head_int.h"
#include "storage/tsdb/headmem_int.h"
#include "storage/tsdb/postings_int.h"
#include "storage/tsdb/wal_int.h"
#include "storage/tsdb/warnings_int.h"
#include "storage/tsdb/db_int.h"

/* ---- querier ---- */

static int cmp_series_info(const void *a, const void *b)
{
    return pd_labels_cmp(&((const pd_series_info *)a)->labels,
                         &((const pd_series_info *)b)->labels);
}

/* select's test of one series: 1 when it has profiles in [mint, maxt] and
 * matches (!exact: a block part overlapping the range counts whole,
 * unread), with *cnt, *min_ts, *max_ts of those profiles; 0 when not;
 * PD_ENOMEM. idx read lock. */
static int select_test(const series *se, const pd_matcher *ms, size_t n, int64_t mint, int64_t maxt,
                       bool exact, size_t *cnt_out, int64_t *min_out, int64_t *max_out)
{
    bool matched = false;
    size_t cnt = 0;
    int64_t mn = 0, mx = 0;
    if (se->n_pts) {
        size_t lo = pd__tsdb_lower_bound(se, mint);
        if (lo < se->n_pts && se->pts[lo].ts <= maxt) {
            size_t hi = lo;
            if (se->pts[se->n_pts - 1].ts <= maxt) {
                hi = se->n_pts;
            } else {
                hi = pd__tsdb_lower_bound(se, maxt);
                if (hi < se->n_pts && se->pts[hi].ts == maxt)
                    hi++;
            }
            cnt = hi - lo;
            mn = se->pts[lo].ts;
            mx = se->pts[hi - 1].ts;
        }
    }
    for (size_t k = 0; k < se->n_brefs; k++) {
        const bref *r = &se->brefs[k];
        if (r->maxt < mint || r->mint > maxt || !r->n)
            continue;
        if (!matched) { /* matchers before any block I/O */
            if (!pd_matchers_match(ms, n, &se->labels))
                return 0;
            matched = true;
        }
        if (pd__tsdb_hb_bad(r->hb, r->id)) {
            pd__tsdb_hb_warn_known(r->hb, r->id, se->ref);
            continue;
        }
        int64_t bmn = r->mint, bmx = r->maxt;
        size_t bn = (size_t)r->n;
        if (exact && (r->mint < mint || r->maxt > maxt)) {
            pd_points pts;
            pd_err e;
            pd_err_clear(&e);
            int brc = pd__block_read_points(r->hb->b, r->id, mint, maxt, &pts, &e);
            if (brc == PD_ENOMEM)
                return brc;
            if (brc < 0) {
                pd__tsdb_hb_read_failed(r->hb, r->id, brc, &e);
                continue;
            }
            bn = pts.n;
            if (pts.n) {
                bmn = pts.v[0].ts_ms;
                bmx = pts.v[pts.n - 1].ts_ms;
            }
            pd_points_release(&pts);
        }
        if (!bn)
            continue;
        if (!cnt || bmn < mn)
            mn = bmn;
        if (!cnt || bmx > mx)
            mx = bmx;
        cnt += bn;
    }
    if (!cnt)
        return 0;
    if (!matched && !pd_matchers_match(ms, n, &se->labels))
        return 0;
    *cnt_out = cnt;
    *min_out = mn;
    *max_out = mx;
    return 1;
}

/* select's step for one series: appends it to out (capacity *cap) when
 * select_test takes it. 0 or PD_ENOMEM. idx read lock. */
static int select_one(const series *se, const pd_matcher *ms, size_t n, int64_t mint, int64_t maxt,
                      bool exact, pd_series_set *out, size_t *cap)
{
    size_t cnt = 0;
    int64_t mn = 0, mx = 0;
    int rc = select_test(se, ms, n, mint, maxt, exact, &cnt, &mn, &mx);
    if (rc <= 0)
        return rc;
    if (out->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        pd_series_info *nv = realloc(out->v, nc * sizeof *nv);
        if (!nv)
            return PD_ENOMEM;
        out->v = nv;
        *cap = nc;
    }
    pd_series_info *si = &out->v[out->n];
    if (pd_labels_copy(&si->labels, &se->labels) < 0)
        return PD_ENOMEM;
    si->ref = se->ref;
    si->n_profiles = cnt;
    si->min_ts = mn;
    si->max_ts = mx;
    out->n++;
    return 0;
}

/* The candidates of a select, ascending ref: every series (all), or the
 * postings' refs, found in by_ref by one forward walk when they are many
 * (a binary search per ref costs a cache miss per step over 50k series)
 * or by binary search when few. idx read lock. */
typedef struct cands {
    const pd_tsdb *s;
    const uint64_t *refs;
    size_t n_refs, i, at; /* next ref; by_ref position of the walk */
    bool all, walk;
} cands;

static void cands_init(cands *c, const pd_tsdb *s, const uint64_t *refs, size_t n_refs, bool all)
{
    *c = (cands){.s = s, .refs = refs, .n_refs = all ? s->n_series : n_refs, .all = all};
    c->walk = !all && n_refs > s->n_series / 16;
}

/* The next candidate, or NULL when done; *i counts the candidates taken. */
static const series *cands_next(cands *c)
{
    while (c->i < c->n_refs) {
        size_t i = c->i++;
        if (c->all)
            return c->s->by_ref[i];
        uint64_t ref = c->refs[i];
        if (!c->walk) {
            const series *se = pd__tsdb_find_by_ref(c->s, ref);
            if (se)
                return se;
            continue;
        }
        while (c->at < c->s->n_series && c->s->by_ref[c->at]->ref < ref)
            c->at++;
        if (c->at < c->s->n_series && c->s->by_ref[c->at]->ref == ref)
            return c->s->by_ref[c->at];
    }
    return NULL;
}

static int select_series(pd_tsdb *s, const pd_matcher *ms, size_t n, int64_t mint, int64_t maxt,
                         bool exact, pd_series_set *out, pd_err *err)
{
    out->v = NULL;
    out->n = 0;
    if (mint > maxt)
        return 0;
    int rc = 0;
    size_t cap = 0;
    pthread_rwlock_rdlock(&s->idx);
    /* candidates from the postings (a superset: select_one applies every matcher) */
    uint64_t *refs = NULL;
    size_t n_refs = 0;
    bool all = true;
    if (!s->post_broken)
        rc = pd__postings_select(&s->post, ms, n, &refs, &n_refs, &all);
    /* (a cancelled query stops: base/cancel.h, polled every 4,096 series) */
    cands c;
    cands_init(&c, s, refs, n_refs, all);
    for (const series *se; rc == 0 && (se = cands_next(&c));) {
        if (!((c.i - 1) & 4095) && pd_cancel_requested())
            rc = PD_ECANCELED;
        else
            rc = select_one(se, ms, n, mint, maxt, exact, out, &cap);
    }
    free(refs);
    pthread_rwlock_unlock(&s->idx);
    if (rc < 0) {
        pd_series_set_release(out);
        return pd_err_set(err, rc, "%s",
                          rc == PD_ECANCELED ? pd_cancel_message()
                                             : "select series: out of memory");
    }
    if (out->n > 1)
        qsort(out->v, out->n, sizeof *out->v, cmp_series_info);
    return 0;
}

/* ---- select_latest (storage.h: label listings) ----
 *
 * One pass under the idx read lock, as select_series, but nothing copied:
 * each taken series lends its labels and, when its newest profile in the
 * range is a head point at or after every block part's newest possible one
 * in the range, that point's type set (series, labels and type sets live
 * until the store closes: db_int.h). A series whose newest profile may lie
 * in a block is marked and read after the lock by
 * pd_tsdb_read_point_before (types copied into the set). */

int pd_tsdb_select_latest(pd_tsdb *s, const pd_matcher *ms, size_t n, int64_t mint, int64_t maxt,
                          pd_series_latest_set *out, pd_err *err)
{
    int rc = pd__latest_init(out);
    bool *later = NULL; /* per entry: newest point read after the lock */
    size_t cap_later = 0, n_later = 0;
    if (rc < 0)
        return pd_err_set(err, rc, "select: out of memory");
    if (mint > maxt)
        return 0;
    pthread_rwlock_rdlock(&s->idx);
    uint64_t *refs = NULL;
    size_t n_refs = 0;
    bool all = true;
    if (!s->post_broken)
        rc = pd__postings_select(&s->post, ms, n, &refs, &n_refs, &all);
    cands c;
    cands_init(&c, s, refs, n_refs, all);
    for (const series *se; rc == 0 && (se = cands_next(&c));) {
        if (!((c.i - 1) & 4095) && pd_cancel_requested()) {
            rc = PD_ECANCELED;
            break;
        }
        size_t cnt;
        int64_t mn, mx;
        int t = select_test(se, ms, n, mint, maxt, true, &cnt, &mn, &mx);
        if (t <= 0) {
            rc = t;
            continue;
        }
        /* the head's newest point in range, if any */
        const point *hp = NULL;
        if (se->n_pts) {
            size_t hi = maxt == INT64_MAX ? se->n_pts : pd__tsdb_lower_bound(se, maxt + 1);
            if (hi > 0 && se->pts[hi - 1].ts >= mint)
                hp = &se->pts[hi - 1];
        }
        bool blk = !hp;
        for (size_t k = 0; k < se->n_brefs && !blk; k++) {
            const bref *r = &se->brefs[k];
            if (r->n && r->maxt >= mint && r->mint <= maxt &&
                (r->maxt < maxt ? r->maxt : maxt) > hp->ts)
                blk = true;
        }
        if (out->n == cap_later) {
            size_t nc = cap_later ? cap_later * 2 : 64;
            bool *nl = realloc(later, nc * sizeof *nl);
            if (!nl) {
                rc = PD_ENOMEM;
                break;
            }
            later = nl;
            cap_later = nc;
        }
        later[out->n] = blk;
        n_later += blk;
        const typeset *ts = hp && !blk ? &se->tsets[hp->tset] : NULL;
        rc = pd__latest_add(out, se->ref, &se->labels, hp && !blk ? hp->ts : 0, ts ? ts->d : NULL,
                            ts ? ts->n : 0, false, false);
    }
    free(refs);
    pthread_rwlock_unlock(&s->idx);
    if (rc < 0) {
        free(later);
        return pd_err_set(err, rc, "%s",
                          rc == PD_ECANCELED ? pd_cancel_message()
                                             : "select series: out of memory");
    }
    if (!n_later) {
        free(later);
        return 0;
    }
    /* the newest points in blocks; the entries' types_id are renumbered
       by re-adding every entry in order (ids stay dense and consistent) */
    pd_series_latest_set fin;
    if ((rc = pd__latest_init(&fin)) < 0) {
        free(later);
        return pd_err_set(err, PD_ENOMEM, "select: out of memory");
    }
    for (size_t i = 0; i < out->n && rc >= 0; i++) {
        const pd_series_latest *e = &out->v[i];
        if (!later[i]) {
            rc = pd__latest_add(&fin, e->ref, e->labels, e->ts_ms, e->types, e->n_types, false,
                                false);
            continue;
        }
        pd_points pt = {0};
        rc = pd_tsdb_read_point_before(s, e->ref, maxt == INT64_MAX ? maxt : maxt + 1, &pt, err);
        if (rc >= 0 && pt.n)
            rc = pd__latest_add(&fin, e->ref, e->labels, pt.v[0].ts_ms, pt.v[0].types,
                                pt.v[0].n_types, false, true);
        /* (none: its block part is damaged, warned, and the series left out) */
        if (rc == PD_ENOMEM)
            pd_err_set(err, rc, "select: out of memory");
        pd_points_release(&pt);
    }
    free(later);
    pd_series_latest_set_release(out);
    *out = fin;
    return rc < 0 ? rc : 0;
}

int pd_tsdb_select(pd_tsdb *s, const pd_matcher *ms, size_t n, int64_t mint, int64_t maxt,
                   pd_series_set *out, pd_err *err)
{
    return select_series(s, ms, n, mint, maxt, true, out, err);
}

int pd_tsdb_select_overlapping(pd_tsdb *s, const pd_matcher *ms, size_t n, int64_t mint,
                               int64_t maxt, pd_series_set *out, pd_err *err)
{
    return select_series(s, ms, n, mint, maxt, false, out, err);
}

void pd_series_set_release(pd_series_set *set)
{
    if (!set)
        return;
    for (size_t i = 0; i < set->n; i++)
        pd_labels_release(&set->v[i].labels);
    free(set->v);
    set->v = NULL;
    set->n = 0;
}

static int cmp_point_ts(const void *a, const void *b)
{
    int64_t x = ((const pd_point *)a)->ts_ms, y = ((const pd_point *)b)->ts_ms;
    return x < y ? -1 : x > y;
}

/* Appends copies (into arena a) of the points of bp to *v. 0 or PD_ENOMEM. */
static int copy_block_points(pd_arena *a, const pd_points *bp, pd_point **v, size_t *n, size_t *cap)
{
    const pd_sample_type_desc *src = NULL;
    pd_sample_type_desc *dst = NULL;
    size_t src_n = 0;
    for (size_t i = 0; i < bp->n; i++) {
        const pd_point *p = &bp->v[i];
        if (*n == *cap) {
            size_t nc = *cap ? *cap * 2 : 64;
            pd_point *nv = realloc(*v, nc * sizeof *nv);
            if (!nv)
                return PD_ENOMEM;
            *v = nv;
            *cap = nc;
        }
        pd_point *q = &(*v)[*n];
        q->ts_ms = p->ts_ms;
        q->n_types = p->n_types;
        q->types = NULL;
        q->totals = NULL;
        if (p->n_types) {
            if (p->types != src || p->n_types != src_n) {
                dst = pd_arena_calloc(a, p->n_types, sizeof *dst);
                if (!dst)
                    return PD_ENOMEM;
                for (size_t j = 0; j < p->n_types; j++) {
                    dst[j].type = pd_arena_strdup(a, p->types[j].type ? p->types[j].type : "");
                    dst[j].unit = pd_arena_strdup(a, p->types[j].unit ? p->types[j].unit : "");
                    if (!dst[j].type || !dst[j].unit)
                        return PD_ENOMEM;
                }
                src = p->types;
                src_n = p->n_types;
            }
            q->types = dst;
            q->totals = pd_arena_alloc(a, p->n_types * sizeof *q->totals);
            if (!q->totals)
                return PD_ENOMEM;
            memcpy(q->totals, p->totals, p->n_types * sizeof *q->totals);
        }
        (*n)++;
    }
    return 0;
}

/* The block parts of se overlapping [mint, maxt], each block pinned
 * (pd__tsdb_hb_get) so it stays open after the idx lock is released:
 * *out (malloc'd, NULL when se has none) and *n. Under the idx read lock.
 * 0 or PD_ENOMEM (nothing pinned). Released by unpin_brefs. */
static int pin_brefs(const series *se, int64_t mint, int64_t maxt, bref **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!se->n_brefs)
        return 0;
    if (!(*out = malloc(se->n_brefs * sizeof **out)))
        return PD_ENOMEM;
    for (size_t k = 0; k < se->n_brefs; k++)
        if (se->brefs[k].maxt >= mint && se->brefs[k].mint <= maxt) {
            pd__tsdb_hb_get(se->brefs[k].hb);
            (*out)[(*n)++] = se->brefs[k];
        }
    return 0;
}

static void unpin_brefs(bref *brs, size_t n)
{
    for (size_t k = 0; k < n; k++)
        pd__tsdb_hb_put(brs[k].hb);
    free(brs);
}

int pd_tsdb_read_points(pd_tsdb *s, uint64_t ref, int64_t mint, int64_t maxt, pd_points *out,
                        pd_err *err)
{
    out->v = NULL;
    out->n = 0;
    out->priv = NULL;
    pd_arena *a = malloc(sizeof *a);
    if (!a)
        return pd_err_set(err, PD_ENOMEM, "read points: out of memory");
    pd_arena_init_small(a, 1024); /* one per series a query holds */
    int rc = 0;
    pd_sample_type_desc **copied = NULL;
    pd_point *v = NULL;
    size_t nv = 0, cap = 0;
    bref *brs = NULL;
    size_t n_brs = 0;
    pthread_rwlock_rdlock(&s->idx);
    const series *se = pd__tsdb_find_by_ref(s, ref);
    if (!se) {
        pthread_rwlock_unlock(&s->idx);
        rc = pd_err_set(err, PD_ENOTFOUND, "no series with ref %llu", (unsigned long long)ref);
        goto out;
    }
    if (mint > maxt) {
        pthread_rwlock_unlock(&s->idx);
        goto out;
    }
    /* the blocks' parts to read after the lock (blocks stay open until close) */
    if ((rc = pin_brefs(se, mint, maxt, &brs, &n_brs)) < 0) {
        pthread_rwlock_unlock(&s->idx);
        goto out;
    }
    size_t lo = pd__tsdb_lower_bound(se, mint), hi = lo;
    while (hi < se->n_pts && se->pts[hi].ts <= maxt)
        hi++;
    if (hi > lo) {
        /* each sample-type set is copied once and shared by its points */
        copied = calloc(se->n_tsets, sizeof *copied);
        cap = hi - lo;
        v = malloc(cap * sizeof *v);
        if (!copied || !v) {
            rc = PD_ENOMEM;
            goto unlock;
        }
        for (size_t i = lo; i < hi; i++) {
            const point *p = &se->pts[i];
            const typeset *t = &se->tsets[p->tset];
            pd_point *q = &v[nv++];
            memset(q, 0, sizeof *q);
            q->ts_ms = p->ts;
            q->n_types = t->n;
            if (!copied[p->tset] && t->n) {
                pd_sample_type_desc *d = pd_arena_calloc(a, t->n, sizeof *d);
                if (!d) {
                    rc = PD_ENOMEM;
                    goto unlock;
                }
                for (size_t j = 0; j < t->n; j++) {
                    d[j].type = pd_arena_strdup(a, t->d[j].type);
                    d[j].unit = pd_arena_strdup(a, t->d[j].unit);
                    if (!d[j].type || !d[j].unit) {
                        rc = PD_ENOMEM;
                        goto unlock;
                    }
                }
                copied[p->tset] = d;
            }
            q->types = copied[p->tset];
            if (t->n) {
                q->totals = pd_arena_alloc(a, t->n * sizeof *q->totals);
                if (!q->totals) {
                    rc = PD_ENOMEM;
                    goto unlock;
                }
                memcpy(q->totals, se->totals + p->tot, t->n * sizeof *q->totals);
            }
        }
    }
unlock:
    pthread_rwlock_unlock(&s->idx);
    if (rc < 0)
        goto out;
    for (size_t k = 0; k < n_brs; k++) {
        pd_points bp;
        if (pd__tsdb_hb_bad(brs[k].hb, brs[k].id)) {
            pd__tsdb_hb_warn_known(brs[k].hb, brs[k].id, ref);
            continue;
        }
        pd_err be;
        pd_err_clear(&be);
        if ((rc = pd__block_read_points(brs[k].hb->b, brs[k].id, mint, maxt, &bp, &be)) < 0) {
            if (rc == PD_ENOMEM) {
                if (err)
                    *err = be;
                goto out;
            }
            pd__tsdb_hb_read_failed(brs[k].hb, brs[k].id, rc, &be); /* the rest is served */
            rc = 0;
            continue;
        }
        if (nv == 0 && k == n_brs - 1) {
            /* the only source with points (a range within one block, the
               common case of a timeline): handed over as read, no copy */
            if (!bp.n) {
                pd_points_release(&bp);
                goto out;
            }
            pd_arena_release(a);
            free(a);
            a = NULL;
            *out = bp;
            goto out;
        }
        rc = copy_block_points(a, &bp, &v, &nv, &cap);
        pd_points_release(&bp);
        if (rc < 0)
            goto out;
    }
    if (nv == 0)
        goto out;
    bool sorted = true;
    for (size_t i = 1; i < nv && sorted; i++)
        sorted = v[i - 1].ts_ms < v[i].ts_ms;
    if (!sorted) {
        qsort(v, nv, sizeof *v, cmp_point_ts);
        size_t w = 1; /* (series, ts) is unique; drop a duplicate defensively */
        for (size_t i = 1; i < nv; i++)
            if (v[i].ts_ms != v[w - 1].ts_ms)
                v[w++] = v[i];
        nv = w;
    }
    out->v = pd_arena_alloc(a, nv * sizeof *out->v);
    if (!out->v) {
        rc = PD_ENOMEM;
        goto out;
    }
    memcpy(out->v, v, nv * sizeof *v);
    out->n = nv;
out:
    free(copied);
    free(v);
    unpin_brefs(brs, n_brs);
    if (rc == PD_ENOMEM)
        pd_err_set(err, rc, "read points of series %llu: out of memory", (unsigned long long)ref);
    if (!a) /* out holds a block's points (above) */
        return 0;
    if (rc < 0 || out->n == 0) {
        pd_arena_release(a);
        free(a);
        out->v = NULL;
        out->n = 0;
        return rc;
    }
    out->priv = a;
    return 0;
}

void pd_points_release(pd_points *pts)
{
    if (!pts)
        return;
    if (pts->priv) {
        pd_arena_release(pts->priv);
        free(pts->priv);
    }
    pts->v = NULL;
    pts->n = 0;
    pts->priv = NULL;
}

/* ---- sample-type runs (storage.h: pd_tsdb_read_type_runs) ----
 *
 * A merge checks the sample types of every profile it will add before it
 * reads any body; with one point per profile that check read every time
 * chunk of every block part (a pread and a decode per series and block),
 * most of a merge's time over many small series once the parts themselves
 * are summed from aggregates. Here a run of profiles with equal types is
 * one point: the head's points are walked in memory (their typeset index),
 * a block part wholly in the range with an aggregates record gives its one
 * set of types from the record's header (no chunk read), and only a part
 * the range cuts, or one without a record, has its points read. */

typedef struct runs {
    pd_arena *a;
    pd_point *v;
    size_t n, cap;
} runs;

/* Appends a run starting at ts with types d[0..nt) (copied into the arena
 * unless owned: already there). 0 or PD_ENOMEM. */
static int runs_add(runs *r, int64_t ts, size_t nt, const pd_sample_type_desc *d, bool owned)
{
    if (r->n == r->cap) {
        size_t nc = r->cap ? 2 * r->cap : 8;
        pd_point *nv = realloc(r->v, nc * sizeof *nv);
        if (!nv)
            return PD_ENOMEM;
        r->v = nv;
        r->cap = nc;
    }
    pd_sample_type_desc *c = (pd_sample_type_desc *)(uintptr_t)d;
    if (!owned && nt) {
        if (!(c = pd_arena_calloc(r->a, nt, sizeof *c)))
            return PD_ENOMEM;
        for (size_t j = 0; j < nt; j++)
            if (!(c[j].type = pd_arena_strdup(r->a, d[j].type ? d[j].type : "")) ||
                !(c[j].unit = pd_arena_strdup(r->a, d[j].unit ? d[j].unit : "")))
                return PD_ENOMEM;
    }
    r->v[r->n++] = (pd_point){.ts_ms = ts, .n_types = nt, .types = nt ? c : NULL};
    return 0;
}

static bool same_desc(const pd_point *a, const pd_point *b)
{
    if (a->n_types != b->n_types)
        return false;
    for (size_t j = 0; a->types != b->types && j < a->n_types; j++)
        if (strcmp(a->types[j].type ? a->types[j].type : "",
                   b->types[j].type ? b->types[j].type : "") ||
            strcmp(a->types[j].unit ? a->types[j].unit : "",
                   b->types[j].unit ? b->types[j].unit : ""))
            return false;
    return true;
}

/* Block part br of series ref into r: from its record when the range holds
 * it whole, else its points (runs of them). *n += its profiles. 0, or
 * PD_ENOMEM (err); a damaged part is left out as read_points does. */
static int part_runs(const bref *br, uint64_t ref, int64_t mint, int64_t maxt, pd_bagg_scratch *sc,
                     runs *r, size_t *n, pd_err *err)
{
    if (pd__tsdb_hb_bad(br->hb, br->id)) {
        pd__tsdb_hb_warn_known(br->hb, br->id, ref);
        return 0;
    }
    const pd_bagg *g = __atomic_load_n(&br->hb->agg, __ATOMIC_ACQUIRE);
    if (g && br->mint >= mint && br->maxt <= maxt) {
        pd_bagg_rec rec;
        int rc = pd__bagg_get_header(g, br->id, &rec, sc);
        if (rc < 0)
            return rc;
        if (rc > 0 && rec.min_ts == br->mint && rec.max_ts == br->maxt && rec.n_profiles == br->n) {
            const pd_symbols *sym = pd__block_symbols(br->hb->b);
            size_t nt = rec.h.n_types;
            pd_sample_type_desc *d = nt ? pd_arena_calloc(r->a, nt, sizeof *d) : NULL;
            if (nt && !d)
                return PD_ENOMEM;
            for (size_t j = 0; j < nt; j++) {
                uint32_t ty = rec.h.types[2 * j], un = rec.h.types[2 * j + 1];
                if (!(d[j].type = pd_arena_strndup(r->a, sym->str[ty], sym->str_len[ty])) ||
                    !(d[j].unit = pd_arena_strndup(r->a, sym->str[un], sym->str_len[un])))
                    return PD_ENOMEM;
            }
            *n += (size_t)br->n;
            return runs_add(r, br->mint, nt, d, true);
        }
    }
    pd_points bp;
    pd_err be;
    pd_err_clear(&be);
    int rc = pd__block_read_points(br->hb->b, br->id, mint, maxt, &bp, &be);
    if (rc == PD_ENOMEM) {
        if (err)
            *err = be;
        return rc;
    }
    if (rc < 0) {
        pd__tsdb_hb_read_failed(br->hb, br->id, rc, &be); /* the rest is served */
        return 0;
    }
    *n += bp.n;
    for (size_t i = 0; i < bp.n && rc >= 0; i++)
        if (!i || !same_desc(&bp.v[i - 1], &bp.v[i]))
            rc = runs_add(r, bp.v[i].ts_ms, bp.v[i].n_types, bp.v[i].types, false);
    pd_points_release(&bp);
    return rc;
}

int pd_tsdb_read_type_runs(pd_tsdb *s, uint64_t ref, int64_t mint, int64_t maxt, pd_points *out,
                           size_t *n_profiles, pd_err *err)
{
    memset(out, 0, sizeof *out);
    *n_profiles = 0;
    runs r = {.a = malloc(sizeof *r.a)};
    if (!r.a)
        return pd_err_set(err, PD_ENOMEM, "read sample types: out of memory");
    pd_arena_init_small(r.a, 1024);
    pd_bagg_scratch sc = {0};
    bref *brs = NULL;
    size_t n_brs = 0, n = 0;
    int rc = 0;
    pthread_rwlock_rdlock(&s->idx);
    const series *se = pd__tsdb_find_by_ref(s, ref);
    if (!se || mint > maxt) {
        pthread_rwlock_unlock(&s->idx);
        if (!se)
            rc = pd_err_set(err, PD_ENOTFOUND, "no series with ref %llu", (unsigned long long)ref);
        goto out;
    }
    if ((rc = pin_brefs(se, mint, maxt, &brs, &n_brs)) < 0) {
        pthread_rwlock_unlock(&s->idx);
        goto out;
    }
    /* the head's points: a new run where the typeset changes */
    size_t lo = pd__tsdb_lower_bound(se, mint);
    uint32_t last = UINT32_MAX;
    for (size_t i = lo; i < se->n_pts && se->pts[i].ts <= maxt && rc >= 0; i++, n++) {
        const point *p = &se->pts[i];
        if (p->tset == last)
            continue;
        const typeset *t = &se->tsets[p->tset];
        pd_point q = {.n_types = t->n, .types = t->d};
        if (last == UINT32_MAX || !same_desc(&r.v[r.n - 1], &q))
            rc = runs_add(&r, p->ts, t->n, t->d, false);
        last = p->tset;
    }
    pthread_rwlock_unlock(&s->idx);
    for (size_t k = 0; k < n_brs && rc >= 0; k++)
        rc = part_runs(&brs[k], ref, mint, maxt, &sc, &r, &n, err);
    if (rc < 0 || !r.n)
        goto out;
    bool sorted = true;
    for (size_t i = 1; i < r.n && sorted; i++)
        sorted = r.v[i - 1].ts_ms < r.v[i].ts_ms;
    if (!sorted)
        qsort(r.v, r.n, sizeof *r.v, cmp_point_ts);
    size_t w = 1; /* runs of the head and of blocks with equal types joined */
    for (size_t i = 1; i < r.n; i++)
        if (!same_desc(&r.v[w - 1], &r.v[i]))
            r.v[w++] = r.v[i];
    r.n = w;
    if (!(out->v = pd_arena_alloc(r.a, r.n * sizeof *out->v))) {
        rc = PD_ENOMEM;
        goto out;
    }
    memcpy(out->v, r.v, r.n * sizeof *r.v);
    out->n = r.n;
    out->priv = r.a;
    r.a = NULL;
    *n_profiles = n;
out:
    unpin_brefs(brs, n_brs);
    free(r.v);
    pd__bagg_scratch_release(&sc);
    if (r.a) {
        pd_arena_release(r.a);
        free(r.a);
    }
    if (rc == PD_ENOMEM)
        pd_err_set(err, rc, "read sample types of series %llu: out of memory",
                   (unsigned long long)ref);
    return rc;
}

/* Appends the body of the WAL record of pt (series ref at ts_ms) to raw:
 * the producer's bytes. PD_ENOTFOUND when its segment is gone (checkpointed
 * meanwhile), PD_ECORRUPT (err: file and offset), -errno, PD_ENOMEM. */
static int wal_body(pd_tsdb *s, uint64_t ref, int64_t ts_ms, const point *pt, pd_buf *raw,
                    pd_err *err)
{
    pd_buf rec;
    pd_buf_init(&rec, (size_t)PD_WAL_MAX_RECORD + 1);
    int rc = pd__wal_read(s->wal, pt->seg, pt->off, PD_WAL_REC_PROFILE, pt->len, &rec, err);
    if (rc < 0)
        goto out;
    char name[4200];
    pd__tsdb_seg_name(s, pt->seg, name, sizeof name);
    /* the record passed its CRC; still check it is the one the index means */
    profile_rec pr;
    const char *why = NULL;
    rc = pd__profile_rec_parse((const uint8_t *)rec.data, rec.len, &pr, &why);
    if (rc == PD_ECORRUPT ||
        (rc == 0 && (pr.ref != ref || pr.ts != ts_ms || pr.body_off != pt->body_off ||
                     pr.body_len != pt->body_len))) {
        if (rc == 0)
            pd__profile_rec_release(&pr);
        rc = pd_err_set(err, PD_ECORRUPT, "%s offset %llu: %s", name, (unsigned long long)pt->off,
                        why ? why : "record is not the indexed profile");
        goto out;
    }
    if (rc < 0) {
        pd_err_set(err, rc, "read profile: out of memory");
        goto out;
    }
    pd__profile_rec_release(&pr);
    if ((rc = pd_buf_append(raw, (const uint8_t *)rec.data + pt->body_off, pt->body_len)) < 0)
        pd_err_set(err, rc, "read profile: no room for the %u-byte body", pt->body_len);
out:
    pd_buf_release(&rec);
    return rc;
}

/* The profile of WAL-only head point pt of series ref, decoded from its
 * record into out (and its body appended to raw if not NULL). Errors as
 * wal_body, and PD_ECORRUPT when the body does not decode (err: file,
 * offset). */
int pd__tsdb_wal_profile(pd_tsdb *s, uint64_t ref, const point *pt, pd_profile *out, pd_buf *raw,
                         pd_err *err)
{
    memset(out, 0, sizeof *out);
    pd_buf body;
    pd_buf_init(&body, 0);
    int rc = wal_body(s, ref, pt->ts, pt, &body, err);
    if (rc == 0) {
        pd_err derr;
        pd_err_clear(&derr);
        rc = pd_profile_decode(out, (const uint8_t *)body.data, body.len, &s->limits, &derr);
        if (rc < 0) {
            memset(out, 0, sizeof *out);
            if (rc == PD_EPARSE || rc == PD_EINVAL)
                rc = PD_ECORRUPT;
            char name[4200];
            pd__tsdb_seg_name(s, pt->seg, name, sizeof name);
            pd_err_set(err, rc, "%s offset %llu: stored profile does not decode: %s", name,
                       (unsigned long long)pt->off, derr.msg);
        } else if (raw && (rc = pd_buf_append(raw, body.data, body.len)) < 0) {
            pd_profile_release(out);
            memset(out, 0, sizeof *out);
            pd_err_set(err, rc, "read profile: out of memory");
        }
    }
    pd_buf_release(&body);
    return rc;
}

/* raw for a profile read into out: the producer's bytes from the WAL while
 * its record exists (pt != NULL), else out re-encoded. */
static int read_raw(pd_tsdb *s, uint64_t ref, int64_t ts_ms, const point *pt, const pd_profile *out,
                    pd_buf *raw, pd_err *err)
{
    size_t len0 = raw->len;
    if (pt) {
        pd_err e;
        pd_err_clear(&e);
        int rc = wal_body(s, ref, ts_ms, pt, raw, &e);
        if (rc == 0)
            return 0;
        raw->len = len0;
        if (rc != PD_ENOTFOUND) { /* the record is damaged: the profile itself is not */
            pd_log_warn("storage: cannot read a profile's original bytes; re-encoding it",
                        "err=\"%s\"", e.msg);
            pd_metrics_add("profd_storage_corruptions_total", NULL, 1);
        }
    }
    int rc = pd_profile_encode(out, true, raw);
    if (rc < 0) {
        raw->len = len0;
        return pd_err_set(err, rc, "read profile: cannot re-encode the profile");
    }
    return 0;
}

#define RETRY_READ (-99999) /* read_profile_once: a WAL-only point's segment vanished */

/* One lookup and read for pd_tsdb_read_profile. */
static int read_profile_once(pd_tsdb *s, uint64_t ref, int64_t ts_ms, pd_profile *out, pd_buf *raw,
                             pd_err *err)
{
    memset(out, 0, sizeof *out);
    pthread_rwlock_rdlock(&s->idx);
    series *se = pd__tsdb_find_by_ref(s, ref);
    point pt, cpt;
    bool in_head = false, has_cpt = false;
    bref brs[8];
    size_t n_brs = 0;
    int rc = PD_ENOTFOUND;
    if (se) {
        size_t i = pd__tsdb_lower_bound(se, ts_ms);
        if (i < se->n_pts && se->pts[i].ts == ts_ms) {
            pt = se->pts[i];
            in_head = true;
            /* decoded from the head's groups, under the read lock (a replayed
               point not decomposed yet is read from the WAL below) */
            if (pt.gid != WAL_ONLY)
                rc = pd__hmem_read(&se->hc, pt.gid, pt.gpos, ts_ms, out, err);
        }
        /* moved into a block, but its WAL record is still there: raw can be
           the producer's bytes */
        size_t lo = 0, hi = se->n_cpts;
        while (!in_head && raw && lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (se->cpts[mid].ts < ts_ms)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (!in_head && raw && lo < se->n_cpts && se->cpts[lo].ts == ts_ms) {
            cpt = se->cpts[lo];
            has_cpt = true;
        }
        for (size_t k = 0; !in_head && k < se->n_brefs && n_brs < 8; k++)
            if (se->brefs[k].mint <= ts_ms && ts_ms <= se->brefs[k].maxt) {
                pd__tsdb_hb_get(se->brefs[k].hb);
                brs[n_brs++] = se->brefs[k];
            }
    }
    pthread_rwlock_unlock(&s->idx);
    if (!se)
        return pd_err_set(err, PD_ENOTFOUND, "no series with ref %llu", (unsigned long long)ref);
    if (in_head && pt.gid == WAL_ONLY) {
        /* a head cut may have moved it into a block and removed its segment
           since the lookup: look again */
        int wrc = pd__tsdb_wal_profile(s, ref, &pt, out, raw, err);
        return wrc == PD_ENOTFOUND ? RETRY_READ : wrc;
    }
    if (in_head) {
        if (rc < 0) {
            memset(out, 0, sizeof *out);
            return rc;
        }
        if (raw && (rc = read_raw(s, ref, ts_ms, &pt, out, raw, err)) < 0) {
            pd_profile_release(out);
            memset(out, 0, sizeof *out);
        }
        return rc;
    }
    for (size_t k = 0; k < n_brs && rc == PD_ENOTFOUND; k++) {
        rc = pd__block_read_profile(brs[k].hb->b, brs[k].id, ts_ms, out, err);
        if (rc < 0 && rc != PD_ENOTFOUND)
            memset(out, 0, sizeof *out);
        if (rc == PD_ECORRUPT)
            pd__tsdb_hb_damaged(brs[k].hb, brs[k].id, err);
    }
    for (size_t k = 0; k < n_brs; k++)
        pd__tsdb_hb_put(brs[k].hb);
    if (rc == PD_ENOTFOUND)
        return pd_err_set(err, PD_ENOTFOUND, "series %llu has no profile at %lld ms",
                          (unsigned long long)ref, (long long)ts_ms);
    if (rc == 0 && raw &&
        (rc = read_raw(s, ref, ts_ms, has_cpt ? &cpt : NULL, out, raw, err)) < 0) {
        pd_profile_release(out);
        memset(out, 0, sizeof *out);
    }
    return rc;
}

int pd_tsdb_read_profile(pd_tsdb *s, uint64_t ref, int64_t ts_ms, pd_profile *out, pd_buf *raw,
                         pd_err *err)
{
    size_t len0 = raw ? raw->len : 0;
    int rc = read_profile_once(s, ref, ts_ms, out, raw, err);
    if (rc == RETRY_READ) {
        if (raw)
            raw->len = len0;
        rc = read_profile_once(s, ref, ts_ms, out, raw, err);
        if (rc == RETRY_READ)
            rc = pd_err_set(err, PD_ENOTFOUND, "series %llu: the profile at %lld ms moved twice",
                            (unsigned long long)ref, (long long)ts_ms);
    }
    return rc;
}
