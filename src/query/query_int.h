/*
 * query/query_int.h — helpers shared by the files of the query module.
 * Not part of the module's interface.
 */
#ifndef PD_QUERY_QUERY_INT_H
#define PD_QUERY_QUERY_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/buf.h"
#include "query/query.h"
#include "storage/storage.h"

/* Appends s[0..len) as a JSON string literal, quotes included. Unlike
 * pd_buf_put_json_string, invalid UTF-8 (profiles and labels come from the
 * network) is replaced by U+FFFD so the output always parses as JSON.
 * Returns 0, PD_ENOMEM or PD_ETOOBIG (b's cap). */
int pd__query_json_str(pd_buf *b, const char *s, size_t len);

/* Appends a C string (NULL as "") as with pd__query_json_str. */
int pd__query_json_cstr(pd_buf *b, const char *s);

/* Appends a finite double as a JSON number (non-finite values as 0).
 * Returns 0, PD_ENOMEM or PD_ETOOBIG. */
int pd__query_json_double(pd_buf *b, double v);

/* The longest decimal int64_t: "-9223372036854775808". */
#define PD_QUERY_I64_MAX 20

/* Writes v in decimal to dst (no NUL; room for PD_QUERY_I64_MAX bytes):
 * exactly what printf's "%lld" writes (tests/unit/query/test_json.c checks
 * it on edge and random values). Returns the number of bytes written. */
size_t pd__query_fmt_i64(char *dst, int64_t v);

/* Appends v as a JSON integer, as pd__query_fmt_i64. 0, PD_ENOMEM or
 * PD_ETOOBIG (b's cap). */
int pd__query_json_i64(pd_buf *b, int64_t v);

/* Cuts b back to `len` bytes (used to undo a partial append on failure). */
void pd__query_buf_truncate(pd_buf *b, size_t len);

/* The groups of pd_storage_aggregate for a merge with option by (query.h,
 * pd_merge_options.by): series whose labels agree on every name listed in
 * by (comma-separated, spaces trimmed; a name a series lacks counts as its
 * own value) get the same group[i] in [0, n); by NULL or without names:
 * all in group 0 (series labels are then not added to samples, so the
 * series can be summed together). 0 or PD_ENOMEM. */
int pd__query_groups(const pd_series_info *const *v, size_t n, const char *by,
                     uint32_t *group /* OUT */);

/* Timeline of deltas (delta.c): turns pts in place into the deltas of the
 * cumulative types in mask (pd_query_range_ex's rule); prev is the series'
 * point before pts' first (NULL: none, that first is the series' first and
 * shows 0). mask 0: pts unchanged. */
void pd__query_points_delta(pd_points *pts, const pd_point *prev, uint64_t mask);

/* With deltas the inputs a merger counts (for agg=avg and its stats) are
 * deltas, not profiles: the last `counted` inputs of one side (base or
 * not) folded in count as n instead. */
void pd__merge_recount(pd_merge *m, bool base, size_t counted, size_t n);

/* PD_DELTA_AUTO's choice (pd_merge_options.delta): whether the sample
 * type the answer is read for (o->sample_type, a name or an index; NULL:
 * the default_sample_type of series ref's profile at pt, read from the
 * store, else the last type — pprof's rule) is in mask (cumulative types
 * of pt's sample types). */
bool pd__query_shown_cumulative(pd_storage *st, const pd_merge_options *o, uint64_t ref,
                                const pd_point *pt, uint64_t mask);

/* Names the address-only frames of a merged answer in place through the
 * process-wide symbolizer (symbolize/symbolize.h; none set: no-op). Stored
 * profiles keep their addresses: this runs on answers only. Out of memory
 * leaves frames unnamed (the answer stays valid). */
void pd__query_symbolize(pd_profile *p);

#endif
