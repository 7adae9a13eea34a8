/*
 * query/query.h — the query engine of DESIGN.md §5: PromQL series selectors,
 * range queries (timestamps + totals), single profiles, series/label
 * listings, and reports (top, flame graph, meta) of a profile.
 *
 * Results are JSON text appended to a pd_buf: the value of the "data" field of
 * Prometheus' envelope (the api layer wraps it). Timestamps in JSON are
 * integer Unix milliseconds.
 */
#ifndef PD_QUERY_QUERY_H
#define PD_QUERY_QUERY_H

#include <stddef.h>
#include <stdint.h>
#include "base/buf.h"
#include "base/error.h"
#include "base/labels.h"
#include "pprof/pprof.h"
#include "storage/storage.h"

/* Longest selector text accepted, bytes (input from the network). */
#define PD_SELECTOR_MAX_BYTES 65536

/* Parses a PromQL series selector: `heap`, `heap{job="api"}`,
 * `{__name__="heap", instance=~"10\\..*"}`, with = != =~ !~, single, double
 * or back-quoted strings with Go escapes, optional trailing comma.
 * A leading metric name becomes __name__="name". At least one matcher must
 * not match the empty string (Prometheus' rule).
 * On success *ms is a malloc'd array of *n matchers (free with
 * pd_matchers_free). Errors: PD_EPARSE with err "at character N: ...",
 * PD_EINVAL for a bad regex or a selector that matches everything. */
int pd_selector_parse(const char *s, pd_matcher **ms /* OUT */, size_t *n /* OUT */, pd_err *err);
/* Releases n matchers and the array (from pd_selector_parse). NULL is a no-op. */
void pd_matchers_free(pd_matcher *ms, size_t n);

/* /api/v1/query_range: for each series matching `selector` with profiles in
 * [from, to] ms, appends to out a JSON array element
 *   {"labels":{...},"sample_types":[{"type":..,"unit":..}],
 *    "timestamps":[ms...],"totals":[[v per type]...]}
 * The whole result is one JSON array ("[]" when nothing matches); series
 * sorted by labels, timestamps ascending, totals[i] the totals of point i.
 * sample_types are those of the first point (a series whose type list
 * changes over time keeps each point's totals as stored).
 * Reads no profile body. Errors: PD_EPARSE/PD_EINVAL (selector), PD_ENOMEM,
 * PD_ETOOBIG (out's cap), storage errors; on error out is left as it was. */
int pd_query_range(pd_storage *st, const char *selector, int64_t from, int64_t to, pd_buf *out,
                   pd_err *err);

/* The profile of the one series matching `selector` nearest to time t (ms):
 * the latest at or before t, else the earliest after. On success, *out holds
 * the profile, *labels (overwritten) the series, *ts_ms its timestamp.
 * Errors: PD_ENOTFOUND (no profile), PD_EAMBIGUOUS (err lists the matching
 * series, up to 10), PD_EPARSE/PD_EINVAL (selector), storage errors.
 * The series is chosen among all series matching the selector that hold a
 * profile at any time (the choice does not depend on t). out must be
 * released with pd_profile_release on success; on error nothing is held and
 * *labels is unchanged. */
int pd_query_single(pd_storage *st, const char *selector, int64_t t, pd_profile *out /* OUT */,
                    pd_labels *labels /* OUT */, int64_t *ts_ms /* OUT */, pd_err *err);

/* /api/v1/series: JSON array of label objects of series matching any of the
 * n selectors (all series when n == 0) with profiles in [start, end] ms,
 * sorted by labels, each series once. The three listings below fail with
 * PD_EPARSE/PD_EINVAL naming a bad selector, PD_ENOMEM, PD_ETOOBIG (out's
 * cap, or over a million series), storage errors; out is then unchanged. */
int pd_query_series(pd_storage *st, const char *const *selectors, size_t n, int64_t start,
                    int64_t end, pd_buf *out, pd_err *err);
/* /api/v1/labels: sorted JSON array of label names (same filters). */
int pd_query_label_names(pd_storage *st, const char *const *selectors, size_t n, int64_t start,
                         int64_t end, pd_buf *out, pd_err *err);
/* /api/v1/label/NAME/values: sorted JSON array of values of `name` (unique;
 * series without the label contribute nothing). PD_EINVAL for an empty name. */
int pd_query_label_values(pd_storage *st, const char *name, const char *const *selectors, size_t n,
                          int64_t start, int64_t end, pd_buf *out, pd_err *err);

/* report=top: JSON {"sample_type":{"type","unit"},"total":N,"rows":[
 *   {"function":..,"file":..,"flat":..,"flat_pct":..,"cum":..,"cum_pct":..}]}
 * rows sorted by flat descending (then cum, then name), at most max_rows
 * (0 = all). Per function name as `go tool pprof -top` shows it: flat counts
 * a sample's value on its leaf frame (innermost line of the first location),
 * cum counts it once on every distinct function of its stack.
 * Details: total is the signed sum of the sample type's values over all
 * samples (= pd_profile_totals; samples without a stack count in it but on no
 * row, as in pprof); rows with flat == cum == 0 are left out; a location
 * without lines (or a function without a name) is named by its address
 * "0x4a5b6c"; file is the source file of the first function of that name;
 * percentages (floating point, 100 = all) are of the sum of |values| as pprof
 * computes them, which is total for a profile without negative values, and
 * 0 when that sum is 0. Strings are made valid UTF-8 (U+FFFD).
 * Errors: PD_EINVAL (sample_index >= n_sample_type), PD_ENOMEM, PD_ETOOBIG
 * (out's cap); on error out is left as it was. */
int pd_report_top(const pd_profile *p, size_t sample_index, size_t max_rows, pd_buf *out);

/* report=flamegraph: JSON tree {"name":"root","value":total,"children":[
 *   {"name":function,"value":cum,"self":flat,"children":[...]}]} built from
 * the root (outermost frame) down, inlined frames expanded, children sorted
 * by name. Frames are named as in pd_report_top. Every node, the root too,
 * has "self" (the root's is the value of samples without a stack), and
 * value == self + the sum of its children's values.
 * Errors: PD_EINVAL (sample_index), PD_ENOMEM, PD_ETOOBIG (out's cap, or more
 * than 8M nodes); on error out is left as it was. */
int pd_report_flamegraph(const pd_profile *p, size_t sample_index, pd_buf *out);

/* report=meta: JSON {"sample_types":[..],"default_sample_type":..,
 * "period_type":..,"period":..,"time_nanos":..,"duration_nanos":..,
 * "samples":N,"locations":N,"functions":N,"mappings":N,"comments":[..],
 * "totals":[..]} — sample_types as [{"type","unit"}], period_type as
 * {"type","unit"}, default_sample_type and comments as strings, totals as
 * pd_profile_totals. Errors: PD_ENOMEM, PD_ETOOBIG; out is then unchanged. */
int pd_report_meta(const pd_profile *p, pd_buf *out);

#endif
