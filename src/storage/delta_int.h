/*
 * storage/delta_int.h — the weights behind pd_storage_aggregate_delta
 * (storage.h: "deltas of cumulative profiles"), shared by the backends:
 * the TSDB sums each profile times its weight on its own ids
 * (tsdb/aggregate.c), the ClickHouse dispatcher aggregates each weighted
 * profile alone (storage.c); and the span filter's label rule, which the
 * same two files share. Private to src/storage.
 */
#ifndef PD_STORAGE_DELTA_INT_H
#define PD_STORAGE_DELTA_INT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "storage/storage.h"

/* The sum of the deltas of a series' profiles telescopes: with b the
 * baseline (prev's one point, the series' previous stored profile, or else
 * the range's first), within a lifetime d_1 + ... + d_k = p_k - b, and a
 * reset's delta (pd_point_is_reset with mask) is the new profile itself. So
 * b weighs -1, the last profile of each lifetime +1 (b itself 0 when it is
 * also the last of its lifetime), every other profile 0. prev: 0 or 1
 * point before the range; pts: the points in the range, ascending. Writes
 * the profiles with a non-zero weight, ascending, into ts/w (room for
 * prev->n + pts->n each) and returns how many; 0 when pts is empty or there
 * is a single point (no delta). Never fails. */
size_t pd__delta_weights(const pd_points *prev, const pd_points *pts, uint64_t mask,
                         int64_t *ts /* OUT */, int8_t *w /* OUT */);

/* The span filter's rule (storage.h, pd_storage_sample_filter) for one
 * label: true when key[0..key_len) is "span_id" or "profile_id" and
 * val[0..val_len) is 16 hex digits of a non-zero id in f->span_ids.
 * Shared by storage.c (decoded profiles) and tsdb/aggregate.c (label sets
 * of the symbols). Never fails. */
bool pd__storage_span_label_passes(const pd_storage_sample_filter *f, const char *key,
                                   size_t key_len, const char *val, size_t val_len);

#endif
