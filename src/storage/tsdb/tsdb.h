/*
 * storage/tsdb/tsdb.h — the embedded TSDB's entry points, as storage.c
 * dispatches to them (DESIGN.md §3).
 *
 * storage.h is one interface with two backends: this TSDB and ClickHouse
 * (clickhouse/clickhouse.h, pd__ch_*). storage.c keeps the public
 * pd_storage_* names and calls, for a store opened with the embedded
 * backend, the function of the same name here: pd_storage_append →
 * pd_tsdb_append, and so on. Each one has exactly the contract of its
 * storage.h namesake — arguments, units (milliseconds since the Unix epoch
 * for every timestamp), ownership of results and every error code — which
 * storage.h documents; only the handle type differs (pd_tsdb, the TSDB's
 * own state: db_int.h). The functions that are not per store (options,
 * the warnings collector, releases of results, pd_storage_aggregate_workers)
 * keep their storage.h names: both backends use them.
 *
 * Threads: as storage.h says of the namesakes — any function from any
 * thread at once; pd_tsdb_close only after every other call on the store
 * has returned.
 */
#ifndef PD_STORAGE_TSDB_TSDB_H
#define PD_STORAGE_TSDB_TSDB_H

#include "storage/storage.h"

/* The TSDB's state for one open store (defined in db_int.h). */
typedef struct pd_tsdb pd_tsdb;

/* pd_storage_open: opens (creating) the store at opts->path, replays its
 * WAL and maps its blocks; *out owned by the caller, closed with
 * pd_tsdb_close. */
int pd_tsdb_open(const pd_storage_options *opts, pd_tsdb **out, pd_err *err);

/* pd_storage_close: stops maintenance, syncs the WAL and frees s (NULL: no-op). */
void pd_tsdb_close(pd_tsdb *s);

/* pd_storage_append: stores one profile (body: its pprof bytes, len bytes;
 * profile: the same, decoded; both borrowed) under labels at ts_ms. */
int pd_tsdb_append(pd_tsdb *s, const pd_labels *labels, int64_t ts_ms, const uint8_t *body,
                   size_t len, const pd_profile *profile, pd_err *err);

/* pd_storage_append_shift: as pd_tsdb_append; a millisecond the series
 * already holds moves the profile to the next free one (*stored_ts: the
 * millisecond used; may be NULL). */
int pd_tsdb_append_shift(pd_tsdb *s, const pd_labels *labels, int64_t ts_ms, const uint8_t *body,
                         size_t len, const pd_profile *profile, int64_t *stored_ts, pd_err *err);

/* pd_storage_select: the series matching ms[0..n) with profiles in
 * [mint, maxt]; *out released with pd_series_set_release. */
int pd_tsdb_select(pd_tsdb *s, const pd_matcher *ms, size_t n, int64_t mint, int64_t maxt,
                   pd_series_set *out, pd_err *err);

/* pd_storage_select_latest: labels and head sample types borrowed from the
 * store (a series, its labels and its type sets are never freed while the
 * store is open: db_int.h); a newest point in a block is read after the
 * idx lock and its types copied. */
int pd_tsdb_select_latest(pd_tsdb *s, const pd_matcher *ms, size_t n, int64_t mint, int64_t maxt,
                          pd_series_latest_set *out, pd_err *err);

/* pd_storage_select_overlapping: as pd_tsdb_select, a block part that
 * overlaps [mint, maxt] counted whole (no block read). */
int pd_tsdb_select_overlapping(pd_tsdb *s, const pd_matcher *ms, size_t n, int64_t mint,
                               int64_t maxt, pd_series_set *out, pd_err *err);

/* pd_storage_read_points: the points (timestamps, sample types, totals) of
 * series ref in [mint, maxt]; *out released with pd_points_release. */
int pd_tsdb_read_points(pd_tsdb *s, uint64_t ref, int64_t mint, int64_t maxt, pd_points *out,
                        pd_err *err);

/* pd_storage_read_type_runs: one point per run of profiles with the same
 * sample types of series ref in [mint, maxt] (ts_ms and types; totals
 * NULL), and *n_profiles the profiles in the range; block parts wholly in
 * the range answered from their aggregates records. */
int pd_tsdb_read_type_runs(pd_tsdb *s, uint64_t ref, int64_t mint, int64_t maxt, pd_points *out,
                           size_t *n_profiles, pd_err *err);

/* pd_storage_read_profile: the profile of series ref at ts_ms, decoded into
 * *out (released with pd_profile_release) and, when raw is not NULL, its
 * stored pprof bytes appended to raw. */
int pd_tsdb_read_profile(pd_tsdb *s, uint64_t ref, int64_t ts_ms, pd_profile *out, pd_buf *raw,
                         pd_err *err);

/* pd_storage_aggregate: calls fn with the summed samples of the profiles
 * of refs[0..n) (grouped by group[], may be NULL) in [mint, maxt]. */
int pd_tsdb_aggregate(pd_tsdb *s, const uint64_t *refs, const uint32_t *group, size_t n,
                      int64_t mint, int64_t maxt, pd_storage_agg_fn fn,
                      int (*poll)(void *ctx, pd_err *err), void *ctx, size_t *n_series,
                      pd_err *err);

/* pd_storage_aggregate_delta: as pd_tsdb_aggregate, the series flagged in
 * cum_mask (a bit per series) taken as cumulative: their deltas summed. */
int pd_tsdb_aggregate_delta(pd_tsdb *s, const uint64_t *refs, const uint32_t *group,
                            const uint64_t *cum_mask, size_t n, int64_t mint, int64_t maxt,
                            pd_storage_agg_fn fn, int (*poll)(void *ctx, pd_err *err), void *ctx,
                            size_t *n_series, size_t *n_deltas, pd_err *err);

/* pd_storage_aggregate_filtered: as pd_tsdb_aggregate_delta, only the
 * samples f keeps (labels, span IDs). */
int pd_tsdb_aggregate_filtered(pd_tsdb *s, const pd_storage_sample_filter *f, const uint64_t *refs,
                               const uint32_t *group, const uint64_t *cum_mask, size_t n,
                               int64_t mint, int64_t maxt, pd_storage_agg_fn fn,
                               int (*poll)(void *ctx, pd_err *err), void *ctx, size_t *n_series,
                               size_t *n_deltas, pd_err *err);

/* pd_storage_read_point_before: the newest point of series ref before t
 * (exclusive); PD_ENOTFOUND when there is none. */
int pd_tsdb_read_point_before(pd_tsdb *s, uint64_t ref, int64_t t, pd_points *out, pd_err *err);

/* pd_storage_maintain: one maintenance round now (head cut, compaction,
 * retention, aggregates). */
int pd_tsdb_maintain(pd_tsdb *s, pd_err *err);

/* pd_storage_check_time: PD_EOUTOFBOUNDS (message naming the flag) when
 * ts_ms is outside the window s accepts, else 0. */
int pd_tsdb_check_time(pd_tsdb *s, int64_t ts_ms, pd_err *err);

/* pd_storage_stats_get: counts and bytes of s into *out. */
void pd_tsdb_stats_get(pd_tsdb *s, pd_storage_stats *out);

/* pd_storage_ready: false while profiles replayed from the WAL are still
 * being decomposed into the head; lock-free. */
bool pd_tsdb_ready(pd_tsdb *s);

/* The threads an aggregation of s may walk blocks with (>= 1;
 * pd_storage_aggregate_workers). */
int pd_tsdb_workers(pd_tsdb *s);

#endif
