/*
 * storage/latest_int.h — building a pd_series_latest_set (storage.h: label
 * listings), shared by the backends: the TSDB adds its series with their
 * labels and sample types borrowed from the store (tsdb/querier.c), the
 * ClickHouse dispatcher adds copies (storage.c). The builder numbers the
 * distinct sample-type lists (types_id) by a hash set, comparing on hit.
 * Private to src/storage.
 */
#ifndef PD_STORAGE_LATEST_INT_H
#define PD_STORAGE_LATEST_INT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "storage/storage.h"

/* Starts an empty set (out->priv allocated). 0 or PD_ENOMEM (out then
 * empty, priv NULL). */
int pd__latest_init(pd_series_latest_set *out /* OUT */);

/* Appends one series. labels (types) are borrowed for the set's life when
 * copy_labels (copy_types) is false — the caller guarantees they outlive
 * it — and copied into the set's memory when true (types: only a list
 * not in the set yet). 0 or PD_ENOMEM. */
int pd__latest_add(pd_series_latest_set *set, uint64_t ref, const pd_labels *labels, int64_t ts_ms,
                   const pd_sample_type_desc *types, size_t n_types, bool copy_labels,
                   bool copy_types);

#endif
