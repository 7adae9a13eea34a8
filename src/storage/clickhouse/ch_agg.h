/*
 * storage/clickhouse/ch_agg.h — private to the ClickHouse backend: the
 * series-hours of a merge that its pre-summed aggs_v1 rows may serve, and
 * the SQL reading them (ch_agg.c says the rule; clickhouse.h the table).
 *
 * Use: pd__ch_hours_init with the merge's range; pd__ch_hours_add for
 * every profiles_v3 row the merge folds (its fingerprint, ts and write_id);
 * pd__ch_hours_match with the answer to the summary SQL; then the hours
 * matched are read with pd__ch_hours_put_agg_sql and every other row of the
 * range from samples_v3, its WHERE extended by pd__ch_hours_put_raw_excl.
 */
#ifndef PD_STORAGE_CLICKHOUSE_CH_AGG_H
#define PD_STORAGE_CLICKHOUSE_CH_AGG_H

#include <stdbool.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/u64map.h"
#include "storage/clickhouse/ch_int.h"

/* One series' hour: its profiles rows' count and wsum, and whether aggs_v1
 * has the same (its sums then serve it). */
typedef struct ch_hour {
    uint64_t fp;
    int64_t hour;
    uint64_t n, wsum;
    bool match;
} ch_hour;

typedef struct ch_hours {
    int64_t lo, hi;      /* hours wholly inside the range: [lo, hi]; none if lo > hi */
    pd_u64map at;        /* (fp, hour) key -> index into v */
    ch_hour *v;          /* n (cap) */
    size_t n, cap;
    size_t n_cut;        /* profiles rows added outside [lo, hi] */
    size_t n_match;      /* hours matched (pd__ch_hours_match) */
    size_t n_raw_rows;   /* profiles rows whose sums come from samples_v3 */
    bool clash;          /* two hours under one key: nothing matches (all raw) */
} ch_hours;

/* Sets h up (no allocation) for a merge over [mint, maxt] (ms). */
void pd__ch_hours_init(ch_hours *h, int64_t mint, int64_t maxt);
/* Frees h's memory; h must be initialised again before reuse. */
void pd__ch_hours_release(ch_hours *h);
/* Whether any hour lies wholly inside the range (else: all raw). */
static inline bool pd__ch_hours_any(const ch_hours *h)
{
    return h->lo <= h->hi;
}
/* Counts one profiles_v3 row of series fp at ts (ms) of write write_id.
 * 0 or PD_ENOMEM. */
int pd__ch_hours_add(ch_hours *h, uint64_t fp, int64_t ts, uint64_t write_id);
/* Appends the SELECT of aggs_v1's reconciliation rows of the series
 * fps[0..n) over h's hours (RowBinary: fingerprint, hour, n, wsum) to sql.
 * 0 or PD_ENOMEM/PD_ETOOBIG. */
int pd__ch_hours_put_summary_sql(const ch_hours *h, const uint64_t *fps, size_t n, pd_buf *sql);
/* Marks the hours whose (n, wsum) equal resp's (the summary SQL's answer;
 * borrowed) and counts them in profd_clickhouse_merge_hours_total; sets
 * n_match and n_raw_rows. 0, or -1 for a malformed answer. */
int pd__ch_hours_match(ch_hours *h, const pd_buf *resp);
/* Appends the SELECT of the matched hours' sums (RowBinary: types_hash,
 * stack_hash, Tuple(Array(UInt16) sample type indexes, Array(Int64)
 * values), zero values left out) to sql. Only with n_match > 0. */
int pd__ch_hours_put_agg_sql(const ch_hours *h, pd_buf *sql);
/* Appends " AND (fingerprint, hour of ts) NOT IN (the matched hours)" to a
 * samples_v3 WHERE (nothing when none matched). 0 or PD_ENOMEM/PD_ETOOBIG. */
int pd__ch_hours_put_raw_excl(const ch_hours *h, pd_buf *b);

#endif
