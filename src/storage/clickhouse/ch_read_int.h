/*
 * storage/clickhouse/ch_read_int.h — private to the ClickHouse querier
 * (ch_read.c and ch_read_hdr.c): the parts a read folds its profiles into,
 * and the header side of a merge, a diff and a single profile.
 *
 * A read (a merge's group, a diff's side, one profile) owns a ch_parts:
 * one ch_part per sample-type set, whose header is folded from its
 * profiles' headers under pprof's rules (ch_read_hdr.c) and whose sums are
 * added from the samples or aggs_v1 rows (ch_read.c). Header strings live in
 * the ch_parts' arena; a part's maps and arrays are freed by ch_read.c's
 * parts_release.
 */
#ifndef PD_STORAGE_CLICKHOUSE_CH_READ_INT_H
#define PD_STORAGE_CLICKHOUSE_CH_READ_INT_H

#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/u64map.h"
#include "storage/clickhouse/ch_agg.h"
#include "storage/clickhouse/ch_int.h"

/* One sample-type set's answer: its header, folded, and its sums. */
typedef struct ch_part {
    uint64_t types_hash;
    pd_storage_agg_part info;
    size_t first_ref;  /* lowest index into refs among its series */
    uint64_t first_fp; /* the series of its first profile (min_ts, then fingerprint) */
    pd_u64map fps;     /* distinct fingerprints */
    /* header (from the first profile, folded); strings in the ch_parts' arena */
    char **types, **units; /* n_types */
    size_t n_types;
    char *period_type, *period_unit, *drop, *keep, *dst, *doc;
    int64_t period, time_nanos, duration_nanos;
    char **comments;
    size_t n_comments;
    /* sums */
    pd_u64map at;    /* stack hash -> index (a merge's sums from two sources) */
    uint64_t *stack; /* n_stacks */
    int64_t *values; /* n_stacks x n_types */
    size_t n_stacks, cap_stacks;
} ch_part;

/* A read's parts (one per sample-type set, in the order they were first
 * folded; pd__ch_fold_headers sorts them by first profile). */
typedef struct ch_parts {
    pd_ch *c;
    const pd_storage_sample_filter *flt; /* pd__ch_aggregate_filtered's; NULL: none */
    pd_arena a;                          /* header strings */
    ch_part *parts;
    size_t n_parts;
} ch_parts;

/* The part of sample-type set th (types_hash) in g, or NULL if none was
 * folded yet. Borrowed: valid until g's parts are added to or released. */
ch_part *pd__ch_find_part(ch_parts *g, uint64_t th);

/* Appends " fingerprint IN (fps[0..n)) AND day ... AND ts ..." — the
 * series and the range [mint, maxt] (ms, inclusive), naming the partition
 * key — to b. 0 or PD_ENOMEM. */
int pd__ch_put_fp_range(pd_buf *b, const uint64_t *fps, size_t n, int64_t mint, int64_t maxt);

/* Reads one profiles row of a headers query from r — types_hash,
 * fingerprint, ts, then sample_types, sample_units, period_type,
 * period_unit, period, time_nanos, duration_nanos, comments, drop_frames,
 * keep_frames, default_sample_type, doc_url in RowBinary — and folds it
 * into the part of its sample-type set (new or folded; rows must come in
 * (ts, fingerprint) order for pprof's order-dependent rules). ref_idx maps
 * a fingerprint to its index into the caller's refs (the part's
 * first_ref; absent: 0). Strings go to g's arena. 0, 1 (r malformed: the
 * caller names the answer), PD_ENOMEM (set in err). */
int pd__ch_fold_row(ch_parts *g, ch_rd *r, const pd_u64map *ref_idx, pd_err *err);

/* Folds the headers of every profile of the series fps[0..n) in [mint,
 * maxt] (ms, inclusive) into g's parts — from one summary per (sample
 * types, series, 10-minute bucket) where pprof's fold is exact on them,
 * else that sample-type set's profiles rows in time order (a second
 * query) — then sorts the parts by first profile (ts, fingerprint). When H
 * is not NULL, each bucket's count and write_id hash sum is added to it
 * (pd__ch_buckets_add_sum) for aggs_v1's reconciliation. Counts the
 * profiles in profd_clickhouse_merge_header_profiles_total by path. 0, or
 * a negative PD_E* set in err (the query's, PD_ENOMEM, or a malformed
 * answer). */
int pd__ch_fold_headers(ch_parts *g, const uint64_t *fps, size_t n, const pd_u64map *ref_idx,
                        int64_t mint, int64_t maxt, ch_buckets *H, pd_err *err);

#endif
