/*
 * storage/tsdb/aggregate_int.h — the pushed-down merge's sum, shared by
 * aggregate.c (the blocks, the walk, deltas) and aggregate_head.c (the
 * head). Private to src/storage/tsdb; the design: top of aggregate.c.
 */
#ifndef PD_STORAGE_TSDB_AGGREGATE_INT_H
#define PD_STORAGE_TSDB_AGGREGATE_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/u64map.h"
#include "storage/storage.h"
#include "storage/tsdb/blockagg_int.h"
#include "storage/tsdb/chunks_int.h"
#include "storage/tsdb/db_int.h"

#define AGG_MAX_ENTRIES ((size_t)1 << 22) /* distinct (stack, label set) per part */

typedef struct agg {
    pd_storage_agg_fn fn;
    int (*poll)(void *ctx, pd_err *err);
    size_t n_added; /* profiles added since the walk started (poll every 16) */
    void *ctx;
    pd_storage_agg_part part;
    const pd_symbols *sym;
    pd_err *err;
    /* the part's header, as the first profile's ids */
    pd_dprof h;
    uint32_t *types; /* 2 * h.n_types */
    uint32_t *comment;
    size_t cap_comment;
    /* the sum */
    pd_u64map map; /* (stack << 32 | lset) -> entry */
    uint32_t *stack, *lset;
    int64_t *val; /* n x h.n_types */
    int64_t *totals;
    size_t n, cap;
    /* the keys of the last profile added, in its order (sorted, as value
       groups keep them), and the entry of each (UINT32_MAX: none): a
       profile's samples are matched against them in one merge walk, so a
       stack the previous profile had too — most of them: a series' stacks
       repeat — adds with no map lookup (the lookups were ~25 % of a merge's
       CPU); memo_* is the last profile's, cur_* the one being added */
    uint32_t *memo_stack, *memo_lset, *memo_e, *cur_stack, *cur_lset, *cur_e;
    size_t memo_n, memo_cap;
    size_t last_i;               /* head: the series last counted in part.n_series, + 1 */
    pthread_rwlock_t *fn_unlock; /* held for reading, released around fn (agg_flush) */
    /* pd_tsdb_aggregate_delta: per index of refs, the weights of its
       profiles (NULL: every profile adds, weight 1); cur_i the series being
       walked */
    const struct agg_w *wt;
    size_t cur_i;
    /* a block walk on a worker thread (walk_pool below): take receives each
       part's profile (and owns it) instead of fn; the walk stops (PD_ECANCELED)
       once *stop is set; poll is NULL there */
    int (*take)(void *ctx, const pd_storage_agg_part *part, pd_profile *p, pd_err *err);
    const int *stop;
    /* pd_tsdb_aggregate_filtered: only samples whose label set passes
       flt are summed (NULL: all). lok[ls] caches the answer for label set
       ls of a->sym (0 not known yet, 1 passes, 2 does not), cleared with
       the part (a part has one a->sym) */
    const pd_storage_sample_filter *flt;
    uint8_t *lok;
    size_t n_lok;
    /* a block's pre-summed records (blockagg_int.h): decoded into sc;
       n_rec counts those added (the store's n_agg_records) */
    pd_bagg_scratch sc;
    uint64_t *n_rec;
} agg;

/* The weights of one series' profiles in a delta aggregation: on == false
 * (a series summed as is) adds every profile in [lo, hi] (the walk may
 * start earlier, at another series' baseline); else the profile at ts[k]
 * adds w[k] times (+1 or -1) and any profile not listed adds nothing. */
typedef struct agg_w {
    bool on;
    int64_t lo, hi;
    int64_t *ts; /* ascending */
    int8_t *w;
    size_t n;
} agg_w;

/* The weight of series i's profile at ts (1 when a has no weights). */
int pd__agg_weight(const agg *a, size_t i, int64_t ts);
/* Frees what a holds (not a). */
void pd__agg_release(agg *a);
/* Hands the part summed so far to the caller (a->fn, or a->take) as one
 * profile and starts an empty one. fn's, or PD_ENOMEM/PD_ECORRUPT (a->err). */
int pd__agg_flush(agg *a);
/* pd__block_series_foreach_dprof's callback: folds d into the part, times
 * its weight. */
int pd__agg_add(void *ctx, const pd_dprof *d);
/* Folds record r (a run of series a->cur_i's profiles summed: a block's
 * record, a head group's sum) into the part. */
int pd__agg_add_rec(agg *a, const pd_bagg_rec *r);

/* ---- aggregate_head.c ---- */

/* Hands the head profiles of series i at ts[0..n) over one by one, each
 * times its weight in wt (NULL: 1); filtered by flt (may be NULL). */
int pd__agg_head_parts(pd_tsdb *s, uint64_t ref, size_t i, const int64_t *ts, size_t n,
                       const agg_w *wt, const pd_storage_sample_filter *flt, pd_storage_agg_fn fn,
                       void *ctx, pd_err *err);
/* The head's part of an aggregation (aggregate_head.c says how); replayed
 * points not decomposed yet are returned in wal_i/wal_ts (malloc'ed, n_wal)
 * for pd__agg_head_parts. */
int pd__agg_head_sum(pd_tsdb *s, const uint64_t *refs, const size_t *gfirst, size_t n, int64_t mint,
                     int64_t maxt, const agg_w *wt, const pd_storage_sample_filter *f,
                     pd_storage_agg_fn fn, int (*poll)(void *ctx, pd_err *err), void *ctx,
                     size_t **wal_i, int64_t **wal_ts, size_t *n_wal, pd_err *err);

#endif
