/*
 * storage/clickhouse/ch_agg.h — private to the ClickHouse backend: the
 * series-buckets of a merge that its pre-summed aggs_v1 rows may serve, and
 * the SQL reading them (ch_agg.c says the rule; clickhouse.h the table).
 *
 * Use: pd__ch_buckets_init with the merge's range; send
 * pd__ch_buckets_put_merge_sql (the sums of every bucket the range touches,
 * by class, and the reconciliation rows: one read of aggs_v1) beside the
 * headers; pd__ch_buckets_add_sum for every header summary the merge folds;
 * pd__ch_buckets_take with the answer. Then, when a whole bucket did not
 * match (or is odd): read aggs_v1 again without the exceptions
 * (pd__ch_buckets_put_agg_sql) and their rows from the samples rows
 * (pd__ch_buckets_put_raw_unmatched); and the cut ends aggs_v1 does not
 * serve from the samples rows (pd__ch_buckets_put_raw_ends).
 */
#ifndef PD_STORAGE_CLICKHOUSE_CH_AGG_H
#define PD_STORAGE_CLICKHOUSE_CH_AGG_H

#include <stdbool.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/u64map.h"
#include "storage/clickhouse/ch_int.h"

/* One series' bucket: its profiles rows' count and wsum, and whether aggs_v1
 * has the same (its sums then serve it). */
typedef struct ch_bucket {
    uint64_t fp;
    int64_t bucket;
    uint64_t n, wsum;   /* its profiles rows in the range */
    uint64_t an, awsum; /* its reconciliation rows in aggs_v1, summed */
    bool match;
} ch_bucket;

typedef struct ch_buckets {
    int64_t mint, maxt;  /* the range (ms; mint >= 0) */
    int64_t lo, hi;      /* buckets wholly inside the range: [lo, hi]; none if lo > hi */
    bool cut_lo, cut_hi; /* the range starts (ends) inside bucket lo - 1 (hi + 1) */
    bool use[3];         /* pd__ch_buckets_take: aggs_v1 serves the whole buckets (0),
                            the cut bucket at the start (1), at the end (2) */
    pd_u64map at;        /* (fp, bucket) key -> index into v */
    ch_bucket *v;        /* n (cap) */
    size_t n, cap;
    ch_bucket *odd; /* n_odd (cap_odd): reconciliation rows of no profiles row */
    size_t n_odd, cap_odd;
    size_t n_cut;      /* profiles rows added outside [lo - cut_lo, hi + cut_hi] */
    size_t n_match;    /* whole buckets matched (pd__ch_buckets_take) */
    size_t n_raw_rows; /* profiles rows whose sums come from the samples rows */
    bool clash;        /* two buckets under one key: nothing matches (all raw) */
} ch_buckets;

/* Sets h up (no allocation) for a merge over [mint, maxt] (ms). */
void pd__ch_buckets_init(ch_buckets *h, int64_t mint, int64_t maxt);
/* Frees h's memory; h must be initialised again before reuse. */
void pd__ch_buckets_release(ch_buckets *h);
/* Whether any bucket lies wholly inside the range (else: all raw). */
static inline bool pd__ch_buckets_any(const ch_buckets *h)
{
    return h->lo <= h->hi;
}
/* Counts one profiles row of series fp at ts (ms) of write write_id.
 * 0 or PD_ENOMEM. */
int pd__ch_buckets_add(ch_buckets *h, uint64_t fp, int64_t ts, uint64_t write_id);
/* Counts n profiles rows of series fp in the bucket holding ts (ms) whose
 * pd__ch_wid_hash(write_id) sum (mod 2^64) to wsum: a bucket's header
 * summary (the SQL's sum of PD_CH_WID_HASH_SQL). 0 or PD_ENOMEM. */
int pd__ch_buckets_add_sum(ch_buckets *h, uint64_t fp, int64_t ts, uint64_t n, uint64_t wsum);
/* Appends the SELECT of the sums in aggs_v1 of the series fps[0..n) over
 * h's whole buckets (RowBinary: types_hash, stack_hash, Tuple(Array(UInt16)
 * sample type indexes, Array(Int64) values), zero values left out) to sql:
 * of every whole bucket, or, exceptions, of every whole bucket but those
 * not matched and the odd ones (after pd__ch_buckets_take, when some did
 * not: the merge SQL's whole-bucket sums are then not used — subtracting
 * the exceptions' sums read later could take back writes the first did not
 * see). The text grows with the exceptions, not with series x buckets.
 * Sound because an aggs_v1 INSERT is one block (ch_batch.c): a write's rows
 * of one series land with its reconciliation row or not at all. 0 or
 * PD_ENOMEM/PD_ETOOBIG. */
int pd__ch_buckets_put_agg_sql(const ch_buckets *h, const uint64_t *fps, size_t n, bool exceptions,
                               pd_buf *sql);
/* Appends the one SELECT a merge sends to aggs_v1 beside its headers (one
 * read of the table): over the series fps[0..n) and the buckets the range
 * touches (its whole buckets and the cut ones at its ends), the sums per
 * (types_hash, stack_hash, class: 0 whole, 1 the start's cut bucket, 2 the
 * end's) and, in the group of the reconciliation rows (types_hash =
 * stack_hash = 0), those rows as an array of (fingerprint, bucket, n,
 * wsum). RowBinary: UInt64, UInt64, UInt8, Tuple(Array(UInt16),
 * Array(Int64)), Array(Tuple(UInt64, Int64, UInt64, UInt64)). 0 or
 * PD_ENOMEM/PD_ETOOBIG. */
int pd__ch_buckets_put_merge_sql(const ch_buckets *h, const uint64_t *fps, size_t n, pd_buf *sql);
/* Appends the SELECT of pd__ch_buckets_put_merge_sql restricted to the cut
 * buckets (its classes 1 and 2: the rows a merge reads beside a cached
 * class 0, ch_cache.h); nothing when the range cuts no bucket. Same answer
 * format. 0 or PD_ENOMEM/PD_ETOOBIG. */
int pd__ch_buckets_put_ends_sql(const ch_buckets *h, const uint64_t *fps, size_t n, pd_buf *sql);
/* Appends to out, verbatim, the rows of class cls (0, 1, 2) of an answer to
 * pd__ch_buckets_put_merge_sql: e.g. its whole buckets' sums and
 * reconciliation rows, to be taken again later with other classes' rows
 * beside them. 0, -1 (malformed), PD_ENOMEM. */
int pd__ch_buckets_class_rows(const pd_buf *resp, int cls, pd_buf *out);
/* Takes the answer to pd__ch_buckets_put_merge_sql (borrowed): adds up the
 * reconciliation rows per bucket, marks the buckets whose (n, wsum) equal
 * their profiles rows' (pd__ch_buckets_add_sum before), notes the odd ones,
 * and sets use[k]: class k's sums are exact for the merge when every bucket
 * of it matched, none is odd and no key clashed — for a cut bucket that
 * means every profile aggs_v1 summed there lies inside the range. Copies
 * each class's sum rows to out[k] in pd__ch_buckets_put_agg_sql's answer
 * format (for the ch_read.c's add_sums). Counts the whole buckets in
 * profd_clickhouse_merge_buckets_total{path="aggregate"|"raw"} and the cut
 * ones aggs_v1 serves in {path="aggregate_cut"}. 0, -1 for a malformed
 * answer, PD_ENOMEM. */
int pd__ch_buckets_take(ch_buckets *h, const pd_buf *resp, pd_buf out[3]);
/* Appends " AND (ts in the cut ends aggs_v1 does not serve)" (use[1],
 * use[2]) to a samples WHERE. 0 or PD_ENOMEM/PD_ETOOBIG. */
int pd__ch_buckets_put_raw_ends(const ch_buckets *h, pd_buf *b);

/* Appends " AND (ts outside the whole buckets)" to a samples WHERE: both
 * cut ends (pd__ch_buckets_put_raw_ends' case of both). 0 or PD_ENOMEM/PD_ETOOBIG. */
int pd__ch_buckets_put_raw_cut(const ch_buckets *h, pd_buf *b);
/* Appends " AND (fingerprint, bucket of ts) IN (the whole buckets with
 * profiles rows not matched)" to a samples WHERE. Only when some whole
 * bucket did not match. */
int pd__ch_buckets_put_raw_unmatched(const ch_buckets *h, pd_buf *b);

#endif
