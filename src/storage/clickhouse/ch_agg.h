/*
 * storage/clickhouse/ch_agg.h — private to the ClickHouse backend: the
 * series-buckets of a merge that its pre-summed aggs_v1 rows may serve, and
 * the SQL reading them (ch_agg.c says the rule; clickhouse.h the table).
 *
 * Use: pd__ch_buckets_init with the merge's range; send at once the summary
 * SQL, the sums of every whole bucket (pd__ch_buckets_put_agg_sql) and of
 * the cut ends from the samples rows (pd__ch_buckets_put_raw_cut) beside the
 * headers; pd__ch_buckets_add for every profiles_v3 row the merge folds (its
 * fingerprint, ts and write_id); pd__ch_buckets_match with the summary's
 * answer; when a bucket did not match (or is odd): read aggs_v1 again
 * without the exceptions and their rows from the samples rows
 * (pd__ch_buckets_put_raw_unmatched).
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
    uint64_t n, wsum;
    bool match;
} ch_bucket;

typedef struct ch_buckets {
    int64_t mint, maxt; /* the range (ms; mint >= 0) */
    int64_t lo, hi;     /* buckets wholly inside the range: [lo, hi]; none if lo > hi */
    pd_u64map at;       /* (fp, bucket) key -> index into v */
    ch_bucket *v;       /* n (cap) */
    size_t n, cap;
    ch_bucket *odd; /* n_odd (cap_odd): reconciliation rows of no profiles row */
    size_t n_odd, cap_odd;
    size_t n_cut;      /* profiles rows added outside [lo, hi] */
    size_t n_match;    /* buckets matched (pd__ch_buckets_match) */
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
/* Counts one profiles_v3 row of series fp at ts (ms) of write write_id.
 * 0 or PD_ENOMEM. */
int pd__ch_buckets_add(ch_buckets *h, uint64_t fp, int64_t ts, uint64_t write_id);
/* Counts n profiles rows of series fp in the bucket holding ts (ms) whose
 * pd__ch_wid_hash(write_id) sum (mod 2^64) to wsum: a bucket's header
 * summary (the SQL's sum of PD_CH_WID_HASH_SQL). 0 or PD_ENOMEM. */
int pd__ch_buckets_add_sum(ch_buckets *h, uint64_t fp, int64_t ts, uint64_t n, uint64_t wsum);
/* Appends the SELECT of aggs_v1's reconciliation rows of the series
 * fps[0..n) over h's buckets (RowBinary: fingerprint, bucket, n, wsum) to sql.
 * 0 or PD_ENOMEM/PD_ETOOBIG. */
int pd__ch_buckets_put_summary_sql(const ch_buckets *h, const uint64_t *fps, size_t n, pd_buf *sql);
/* Marks the buckets whose (n, wsum) equal resp's (the summary SQL's answer;
 * borrowed), notes those resp has and no profiles row (odd), and counts them
 * in profd_clickhouse_merge_buckets_total; sets n_match and n_raw_rows. 0,
 * -1 for a malformed answer, PD_ENOMEM. */
int pd__ch_buckets_match(ch_buckets *h, const pd_buf *resp);
/* Appends the SELECT of the sums in aggs_v1 of the series fps[0..n) over
 * h's whole buckets (RowBinary: types_hash, stack_hash, Tuple(Array(UInt16)
 * sample type indexes, Array(Int64) values), zero values left out) to sql:
 * of every bucket (sent before the match, beside the headers: the common
 * case, every bucket matching, is then one round trip), or, exceptions, of
 * every bucket but those not matched and the odd ones (after the match,
 * when some did not: the first answer is then not used — subtracting the
 * exceptions' sums read later could take back writes the first did not
 * see). The text grows with the exceptions, not with series x buckets.
 * Sound because an aggs_v1 INSERT is one block (ch_batch.c): a write's rows
 * of one series land with its reconciliation row or not at all. 0 or
 * PD_ENOMEM/PD_ETOOBIG. */
int pd__ch_buckets_put_agg_sql(const ch_buckets *h, const uint64_t *fps, size_t n, bool exceptions,
                               pd_buf *sql);
/* Whether the range has time outside its whole buckets (its cut ends). */
bool pd__ch_buckets_cut(const ch_buckets *h);
/* Appends " AND (ts outside the whole buckets)" to a samples WHERE: the
 * cut ends, read raw whatever the match. 0 or PD_ENOMEM/PD_ETOOBIG. */
int pd__ch_buckets_put_raw_cut(const ch_buckets *h, pd_buf *b);
/* Appends " AND (fingerprint, bucket of ts) IN (the buckets with profiles
 * rows not matched)" to a samples WHERE. Only with n > n_match. */
int pd__ch_buckets_put_raw_unmatched(const ch_buckets *h, pd_buf *b);

#endif
