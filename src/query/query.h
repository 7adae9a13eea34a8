/*
 * query/query.h — the query engine of DESIGN.md §5: PromQL series selectors,
 * range queries (timestamps + totals), single profiles, series/label
 * listings, merges and diffs of many profiles (merge.c, merge_finish.c,
 * merge_store.c), and reports (top, flame graph, folded, meta) of a profile.
 *
 * Results are JSON text appended to a pd_buf: the value of the "data" field of
 * Prometheus' envelope (the api layer wraps it). Timestamps in JSON are
 * integer Unix milliseconds.
 */
#ifndef PD_QUERY_QUERY_H
#define PD_QUERY_QUERY_H

#include <stdbool.h>
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
 * or back-quoted strings with Go escapes, optional trailing comma; and
 * Prometheus 3's quoted forms: a quoted label name `{"otel.scope.name"="x"}`
 * and a quoted metric name alone in the braces `{"cpu", job="a"}`.
 * A metric name becomes __name__="name". At least one matcher must
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
 * Reads no profile body. With 128 series or more the series are read and
 * written in contiguous shares (at least 64 each) on up to
 * pd_storage_workers(st) threads, the first on the calling thread; the
 * bytes are those of one thread, and the storage warnings of every share
 * reach the calling thread's collector. Numbers are written as printf's
 * "%lld" would (pd__query_fmt_i64). Room for the answer is reserved at once
 * (about 120 bytes per profile, within out's cap).
 * Errors: PD_EPARSE/PD_EINVAL (selector), PD_ENOMEM, PD_ETOOBIG (out's cap:
 * only when the answer itself does not fit), storage errors (the first
 * share's in series order); on error out is left as it was. */
int pd_query_range(pd_storage *st, const char *selector, int64_t from, int64_t to, pd_buf *out,
                   pd_err *err);

/* pd_query_range with the choice of deltas (pd_query_range is this with
 * delta true). Each element of "sample_types" also has "kind":
 * "cumulative", "gauge" or "delta" (pd_query_sample_kind). With delta, a
 * series served cumulative (pd_query_cumulative_mask != 0) shows deltas
 * (delta.c): the element gets "delta":true, point k's totals of the
 * cumulative types are totals[k] - totals[k-1] (totals[k] itself after a
 * reset, storage.h's pd_point_is_reset), where k-1 is the series' previous
 * stored profile even before `from` (pd_storage_read_point_before); the
 * series' first stored profile shows 0 there. Gauge types keep their
 * level. Every point is shown. Without delta (raw) every series shows its
 * stored totals. Errors as pd_query_range. */
int pd_query_range_ex(pd_storage *st, const char *selector, int64_t from, int64_t to, bool delta,
                      pd_buf *out, pd_err *err);

/* ---- cumulative sample types (delta.c; the rule is documented there and
 * in docs/api.md "Cumulative profiles") ---- */

/* Turns pts (the points of series si read with pd_storage_read_points,
 * ascending) in place into the timeline of deltas of pd_query_range_ex:
 * for a series served cumulative, each point's cumulative totals minus
 * those of the point before (the series' previous stored profile for the
 * first, pd_storage_read_point_before; 0 for the series' first profile;
 * the point itself after a reset); gauges and other series unchanged.
 * *applied (may be NULL) says whether deltas were taken. Errors: storage
 * errors, PD_ENOMEM; pts is then unchanged. */
int pd_query_points_delta(pd_storage *st, const pd_series_info *si, pd_points *pts,
                          bool *applied /* OUT, may be NULL */, pd_err *err);

/* True when the series carries the stored mark PD_LABEL_DELTA="false"
 * (storage.h): its profiles were scraped as served, counters since process
 * start. NULL: false. */
bool pd_query_served_cumulative(const pd_labels *series);

/* The cumulative sample types of a profile of `series` with pt's sample
 * types, as a mask (bit v = pt->types[v]; storage.h's cum_mask): in a
 * series served cumulative, alloc_objects, alloc_space, contentions and
 * delay. 0 for any other series, or pt NULL. */
uint64_t pd_query_cumulative_mask(const pd_labels *series, const pd_point *pt);

/* The kind of sample type `type` (may be NULL) in `series`, a static
 * string: "cumulative" (as pd_query_cumulative_mask), "gauge" (inuse_*,
 * goroutine, threadcreate: a level at the profile's time; averaged, not
 * summed, over a range) or "delta" (a window's worth: cpu, a delta
 * scrape, pushes). */
const char *pd_query_sample_kind(const pd_labels *series, const char *type);

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
/* /api/v1/profile_types: the profile types (values of __name__) of the
 * series matching the selectors in [start, end] (same filters as
 * pd_query_series), sorted by name, as a JSON array of {"name", "series"
 * (how many), "sample_types": [{"type", "unit", "kind"}]} — the sample
 * types of the newest profile in the range of the type's last series
 * (kind as pd_query_sample_kind). Series without __name__ are left out.
 * Errors as below. */
int pd_query_profile_types(pd_storage *st, const char *const *selectors, size_t n, int64_t start,
                           int64_t end, pd_buf *out, pd_err *err);
/* /api/v1/labels: sorted JSON array of label names (same filters). */
int pd_query_label_names(pd_storage *st, const char *const *selectors, size_t n, int64_t start,
                         int64_t end, pd_buf *out, pd_err *err);
/* /api/v1/label/NAME/values: sorted JSON array of values of `name` (unique;
 * series without the label contribute nothing). PD_EINVAL for an empty name. */
int pd_query_label_values(pd_storage *st, const char *name, const char *const *selectors, size_t n,
                          int64_t start, int64_t end, pd_buf *out, pd_err *err);

/* report=top: JSON {"sample_type":{"type","unit"},"total":N,
 *   "rows_total":R,"rows_cut":C,"cut_flat":F,"rows":[
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
 * rows_total counts the non-zero rows, rows_cut those left out by max_rows,
 * and cut_flat is the sum of their flat values (the cut, reported).
 * Errors: PD_EINVAL (sample_index >= n_sample_type), PD_ENOMEM, PD_ETOOBIG
 * (out's cap); on error out is left as it was. */
int pd_report_top(const pd_profile *p, size_t sample_index, size_t max_rows, pd_buf *out);

/* report=flamegraph: JSON tree {"name":"root","value":total,"children":[
 *   {"name":function,"value":cum,"self":flat,"children":[...]}]} built from
 * the root (outermost frame) down, inlined frames expanded, children sorted
 * by name. Frames are named as in pd_report_top. Every node, the root too,
 * has "self" (the root's is the value of samples without a stack), and
 * value == self + the sum of its children's values.
 * The root also has "nodes" and "nodes_total": the nodes shown and in the
 * tree, the root excluded (equal here; see pd_report_flamegraph_ex), and
 * "functions": {name: {"file", "line", "mapping", "build_id"}} for the
 * function names drawn, sorted by name (members unknown left out; a name
 * with nothing known left out): of all the frames of that name, the least
 * by (file, line, mapping, build id) — file of its function, line its start
 * line (the frame's line when the profile has none, as Go before 1.20),
 * the mapping's file and build id of the frame's location — so the same
 * frames give the same answer whatever their order; what a tooltip shows,
 * once per name, not per node.
 * Errors: PD_EINVAL (sample_index), PD_ENOMEM, PD_ETOOBIG (out's cap, or more
 * than 8M nodes); on error out is left as it was. */
int pd_report_flamegraph(const pd_profile *p, size_t sample_index, pd_buf *out);

/* Options of the _ex reports and of pd_report_folded. */
typedef struct pd_report_options {
    size_t sample_index; /* < n_sample_type */
    size_t max_nodes;    /* top: rows; flame graph: nodes besides the root; 0 = all */
    /* A diff (pd_query_diff, `go tool pprof -diff_base`): split each value
     * into the base side (samples labelled pprof::base=true, whose values
     * were negated; shown as positive amounts) and the new side. */
    bool diff;
    /* report=top only: the column the rows are sorted by before max_nodes
     * cuts them (so "the 100 largest by cum" is what comes back, not the
     * 100 largest by flat re-sorted), ascending or not, and a filter:
     * only functions whose name contains `filter` (ASCII case-insensitive;
     * NULL or "" = all) are rows. PD_TOP_SORT_DEFAULT is pprof's order (flat
     * descending, then cum, then name; |flat| for a diff); FLAT and CUM
     * sort by the signed value (the delta for a diff), ties by the other
     * column and the name; NAME by bytes of the name, ties by flat. */
    enum { PD_TOP_SORT_DEFAULT = 0, PD_TOP_SORT_FLAT, PD_TOP_SORT_CUM, PD_TOP_SORT_NAME } sort;
    bool ascending;     /* with sort != DEFAULT: smallest (or A) first */
    const char *filter; /* borrowed for the call */
} pd_report_options;

/* True when some sample of p carries pprof::base=true (p is a diff). */
bool pd_report_is_diff(const pd_profile *p);

/* report=top with options: rows capped at o->max_nodes (the cut reported in
 * rows_cut/cut_flat). With o->diff, flat/cum/total are the deltas (new -
 * base) and each row also has "base_flat","new_flat","base_cum","new_cum",
 * the top level "base_total","new_total"; rows are sorted by |flat|
 * descending, then name, then |cum| (pprof's order), and percentages are of
 * the base side's sum of |values| when it is non-zero (as pprof computes
 * them for -diff_base), else of all. o->sort, o->ascending and o->filter
 * choose the order and the rows before the cut (see pd_report_options);
 * rows_total then counts the rows that pass the filter and the object also
 * has "sort" ("flat", "cum", "name" or "default"), "order" ("asc"/"desc")
 * and "filter" (the text, "" for none). Errors as pd_report_top. */
int pd_report_top_ex(const pd_profile *p, const pd_report_options *o, pd_buf *out);

/* report=flamegraph with options. o->max_nodes caps the nodes shown: kept
 * greedily by |value| among the children of kept nodes (so a kept node's
 * parent is kept); a node whose children were cut gets "cut" (the sum of
 * their values) and "cut_children" (how many), and "base_cut" for a diff;
 * the root's "nodes" is then less than "nodes_total". With o->diff every
 * node also has "base","new" (cumulative, each side) and
 * "base_self","new_self"; value/self are the deltas (new - base).
 * Errors as pd_report_flamegraph. */
int pd_report_flamegraph_ex(const pd_profile *p, const pd_report_options *o, pd_buf *out);

/* report=folded: Brendan Gregg's collapsed stacks, one line per distinct
 * stack (frames named as in pd_report_top, inlined frames expanded):
 *   "outermost;...;leaf VALUE\n"
 * with the values of that exact stack summed; lines in name order of the
 * frames (depth first). With o->diff, the two-column form difffolded.pl
 * and flamegraph.pl read: "stack BASE NEW\n" (both positive amounts).
 * Stacks summing to zero and samples without a stack are left out; a ';'
 * inside a frame name is written ':' (CR/LF as space). o->max_nodes is
 * ignored. Plain text (UTF-8 as in the profile). Errors: PD_EINVAL
 * (sample_index), PD_ENOMEM, PD_ETOOBIG (out's cap, or more than 8M tree
 * nodes); on error out is left as it was. */
int pd_report_folded(const pd_profile *p, const pd_report_options *o, pd_buf *out);

/* report=callgraph, as Graphviz DOT text (render with `dot -Tsvg`, like
 * pprof's -svg): a box per function (name, flat and cum with percentages as
 * pd_report_top) and an edge caller -> callee weighted by the value of the
 * samples through it (counted once per sample). At most o->max_nodes boxes
 * (0 = all), the largest |cum| first; edges only between shown boxes. For
 * a diff, boxes that grew are red and those that shrank green. Names are
 * escaped for DOT. Errors: PD_EINVAL (sample_index), PD_ENOMEM, PD_ETOOBIG
 * (out's cap); on error out is left as it was. */
int pd_report_dot(const pd_profile *p, const pd_report_options *o, pd_buf *out);

/* report=meta: JSON {"sample_types":[..],"default_sample_type":..,
 * "period_type":..,"period":..,"time_nanos":..,"duration_nanos":..,
 * "samples":N,"locations":N,"functions":N,"mappings":N,"comments":[..],
 * "totals":[..]} — sample_types as [{"type","unit"}], period_type as
 * {"type","unit"}, default_sample_type and comments as strings, totals as
 * pd_profile_totals. Errors: PD_ENOMEM, PD_ETOOBIG; out is then unchanged. */
int pd_report_meta(const pd_profile *p, pd_buf *out);

/* ---- merge and diff (merge.c; over the store: merge_store.c) ----
 *
 * Merging follows google/pprof's profile.Merge (what `go tool pprof -proto
 * A B C` writes), diff its -diff_base: see merge.c for the rules. Inputs are
 * folded in one at a time and may be released right after; memory grows
 * with the distinct samples/locations/functions of the result, not with the
 * number of inputs. */

/* Distinct samples a merge may hold unless told otherwise. */
#define PD_MERGE_DEFAULT_MAX_SAMPLES ((size_t)1000000)

typedef struct pd_merge_options {
    /* Sample labels: NULL keeps every sample label (pprof). Else a
     * comma-separated list of label names: only sample labels with those
     * names are kept, and each listed name that is a label of the input's
     * series (e.g. "instance") is added to its samples as a string label
     * (unless they have one of that name). "" drops all labels. */
    const char *by;
    /* pprof's -focus / -ignore / -hide: PCRE2 regexes (unanchored search,
     * UTF-8) on frame names: a location matches when one of its lines'
     * function name or file name, or its mapping's file, matches. NULL or
     * "" = none. focus keeps samples with a matching location, ignore drops
     * samples with one, hide removes matching frames from stacks. */
    const char *focus, *ignore, *hide;
    size_t max_samples; /* distinct samples in the result; 0 = PD_MERGE_DEFAULT_MAX_SAMPLES */
    /* How profiles over a range are combined (issue 12): PD_MERGE_SUM adds
     * them (pprof's merge; right for deltas such as CPU); PD_MERGE_AVG
     * divides each side's sums by its number of profiles (the profile
     * "on average" over the range: what a gauge such as inuse_space or
     * goroutine means; a diff then compares per-profile averages, like with
     * like, whatever the number of profiles on each side). Values are
     * rounded to the nearest integer. */
    enum { PD_MERGE_SUM = 0, PD_MERGE_AVG = 1 } agg;
    /* Deltas of cumulative profiles (issue 12; rule: pd_query_cumulative_mask,
     * arithmetic: storage.h pd_storage_aggregate_delta). For a merge over a
     * range, each series served cumulative contributes the sum of the
     * deltas of its profiles in the range (each against the previous stored
     * profile, also one before the range; per lifetime last - that
     * baseline, reset-aware) instead of the sum of its running counters;
     * other series are summed as they are. PD_DELTA_AUTO (the default):
     * deltas when the sample type the answer is read for (sample_type
     * below) is cumulative in a selected series; PD_DELTA_RAW: never (the
     * stored counters summed); PD_DELTA_ON: for every series served
     * cumulative. With deltas, agg=avg divides by the number of deltas (a
     * series' profiles in the range, less its first stored profile) and
     * stats.profiles counts deltas; PD_ENOTFOUND when there is none. A
     * single selection (mode single) is never differenced. */
    enum { PD_DELTA_AUTO = 0, PD_DELTA_RAW = 1, PD_DELTA_ON = 2 } delta;
    /* For PD_DELTA_AUTO: the sample type the report shows, a name
     * ("alloc_space") or an index ("1") into the series' types, as the
     * sample_index parameter; NULL = the profile's default_sample_type, else
     * its last (pprof's rule; one profile of the first served-cumulative
     * series is read to know it). */
    const char *sample_type;
    /* A diff only: `go tool pprof -normalize` — the new side is scaled so
     * that each sample type's total equals the base side's (after agg), so
     * the diff shows shifts of shares, not of volume. */
    bool normalize;
    /* Only the samples this filter passes are merged (storage.h,
     * pd_storage_sample_filter: span profiles, by their span_id sample
     * label), inside the store's aggregation. NULL = every sample. A single
     * selection (mode single) is filtered the same way. Borrowed for the
     * call. */
    const pd_storage_sample_filter *sample_filter;
    int64_t deadline_ns; /* pd_mono_ns() value after which work stops; 0 = none */
    int64_t timeout_ms;  /* the timeout that set deadline_ns, for the message */
    /* Polled every ~1000 samples; true stops with PD_ECANCELED. May be NULL. */
    bool (*cancelled)(void *ctx);
    void *cancel_ctx;
} pd_merge_options;

typedef struct pd_merge_stats {
    size_t profiles;    /* inputs merged */
    size_t series;      /* series they came from (query functions only) */
    size_t samples_in;  /* non-zero input samples folded in */
    size_t samples_out; /* distinct samples held (before zero-sum and filters) */
    bool delta;         /* deltas of cumulative series were taken (pd_merge_options.delta) */
} pd_merge_stats;

typedef struct pd_merge pd_merge;

/* A new merger with options o (NULL = defaults; strings are used during the
 * call only). Errors: PD_EINVAL (a bad regex or more than 64 by= names; err
 * says which), PD_ENOMEM. *out is NULL on failure. */
int pd_merge_new(const pd_merge_options *o, pd_merge **out /* OUT */, pd_err *err);

/* Folds profile p (indexed, as decode leaves it; borrowed for the call) into
 * the merge. series: the labels of p's series (for by=), may be NULL.
 * base: p is the diff base — its values are negated and its samples marked
 * pprof::base=true (add the new side first). source names p in messages
 * ("series heap{...} at 1700000000000 ms"), may be NULL.
 * Errors: PD_EINVAL when p's sample types (type and unit, in order) or period
 * type differ from the first input's — err names both inputs; nothing of p
 * was added and the merger may go on. PD_ETOOBIG (more distinct samples than
 * max_samples), PD_ETIMEOUT (deadline), PD_ECANCELED, PD_ENOMEM: the merger
 * can then only be freed. */
int pd_merge_add(pd_merge *m, const pd_profile *p, const pd_labels *series, bool base,
                 const char *source, pd_err *err);

/* pd_merge_add for a profile that is already the merge of n_inputs
 * profiles (a part of pd_storage_aggregate: same header rules, values
 * summed): counted as n_inputs in the stats. */
int pd_merge_add_n(pd_merge *m, const pd_profile *p, const pd_labels *series, bool base,
                   const char *source, size_t n_inputs, pd_err *err);

/* The merger's deadline and cancel callback (options deadline_ns,
 * cancelled): 0, PD_ETIMEOUT (err names --query.timeout) or PD_ECANCELED.
 * For work done on the merger's behalf (pd_storage_aggregate's poll). */
int pd_merge_check(pd_merge *m, pd_err *err);

/* The monotonic clock (ns) a merge checks its deadline (deadline_ns) against:
 * pd_mono_ns unless a test sets another (read and written with __atomic), so
 * that a test passes a deadline by moving the clock, not by being slow. */
extern int64_t (*pd_query_clock_ns)(void);

/* Applies the filters, drops samples summing to zero, compacts, and moves
 * the result into *out (indexed; pd_profile_release it). After it the merger
 * can only be freed. Errors: PD_ENOTFOUND (nothing was added), PD_ENOMEM,
 * PD_ETIMEOUT/PD_ECANCELED (while filtering). *out holds nothing on error. */
int pd_merge_finish(pd_merge *m, pd_profile *out /* OUT */, pd_err *err);

/* Counts so far (series is left 0). */
void pd_merge_get_stats(const pd_merge *m, pd_merge_stats *st /* OUT */);

/* Frees the merger. NULL is a no-op. */
void pd_merge_free(pd_merge *m);

typedef enum { PD_QUERY_MODE_SINGLE = 0, PD_QUERY_MODE_MERGE = 1 } pd_query_mode;

/* One selection of profiles: the profile of the one series matching
 * `selector` nearest to `time` (single, as pd_query_single), or every
 * profile of every series matching it in [from, to] ms (merge). */
typedef struct pd_query_side {
    const char *selector;
    pd_query_mode mode;
    int64_t time;     /* single */
    int64_t from, to; /* merge, inclusive */
    /* merge: series matching any of these n_exclude selectors are left out
     * (the UI's hidden legend entries, each an exact selector); borrowed for
     * the call. A bad one fails with PD_EPARSE/PD_EINVAL naming it. */
    const char *const *exclude;
    size_t n_exclude;
} pd_query_side;

/* Merges the profiles of selection q (series in label order, each series'
 * profiles in time order; a single selection goes through the merger too,
 * so by= and the filters apply) into *out (release with pd_profile_release).
 * Sample types are checked from the stored totals before any profile body
 * is read. stats may be NULL.
 * Errors: PD_EPARSE/PD_EINVAL (selector, options), PD_EINVAL naming two
 * series whose sample types differ, PD_ENOTFOUND (nothing matches),
 * PD_EAMBIGUOUS (single: several series), PD_ETOOBIG, PD_ETIMEOUT,
 * PD_ECANCELED, storage errors, PD_ENOMEM. *out holds nothing on error. */
int pd_query_merge(pd_storage *st, const pd_query_side *q, const pd_merge_options *o,
                   pd_profile *out /* OUT */, pd_merge_stats *stats /* OUT */, pd_err *err);

/* pprof's `-diff_base=BASE NEW`: the profiles of `cur` merged, plus those of
 * `base` with values negated and the sample label pprof::base=true. Both
 * sides must have the same sample types (PD_EINVAL naming a series of each,
 * marked "(query_a)" for base and "(query_b)" for cur). Reports split on the
 * label (pd_report_options.diff). Errors as pd_query_merge. */
int pd_query_diff(pd_storage *st, const pd_query_side *base, const pd_query_side *cur,
                  const pd_merge_options *o, pd_profile *out /* OUT */,
                  pd_merge_stats *stats /* OUT */, pd_err *err);

/* ---- merges over series already selected (refs.c) ----
 *
 * For callers that pick series themselves (the Connect querier matches
 * virtual labels such as __profile_type__ and service_name, query.h's
 * selectors cannot): the same pd_merge as pd_query_merge/pd_query_diff,
 * fed from series refs. */

/* Series (borrowed; their ref and labels are used) and the range of
 * profiles [from, to] ms to take from each. */
typedef struct pd_query_refs {
    const pd_series_info *series;
    size_t n;
    int64_t from, to;
} pd_query_refs;

/* Merges every profile of cur's series in cur's range (series in the given
 * order, profiles in time order) into *out — series served cumulative as
 * deltas per o->delta and o->sample_type, as pd_query_merge does (stats->delta
 * says so); with base != NULL, base's
 * profiles are added as the diff base (values negated, pprof::base=true) as
 * pd_query_diff does. Errors: PD_ENOTFOUND (no profile at all on the cur
 * side), PD_EINVAL (sample types differ; err names both), PD_ETOOBIG,
 * PD_ETIMEOUT, PD_ECANCELED, storage errors, PD_ENOMEM. *out holds nothing
 * on error. stats may be NULL. */
int pd_query_merge_refs(pd_storage *st, const pd_query_refs *base, const pd_query_refs *cur,
                        const pd_merge_options *o, pd_profile *out /* OUT */,
                        pd_merge_stats *stats /* OUT */, pd_err *err);

/* Keeps only sample type `index` of p (in place): every sample keeps that
 * one value, default_sample_type is cleared. PD_EINVAL when index >=
 * n_sample_type. */
int pd_query_keep_sample_type(pd_profile *p, size_t index, pd_err *err);

/* The regression report (regress.c, issue 30; the method is documented
 * there): the series matching selector in [from, to] ms, grouped by the
 * value of label `by` (series without it left out), versions ordered by
 * their first profile; for each version against the previous one the
 * functions whose share of sample_type (NULL/"": the first) changed by at
 * least min_change (a fraction) and by more than 4 standard errors of the
 * per-profile spread, largest change first, at most limit. At most
 * max_profiles newest profiles per version are decoded (0: all). Appends
 * {"by","versions":[{"version","firstSeen","profiles"}],"comparisons":
 * [{"from","to","compare":{"query","query_b"},"functions":[{"function",
 * "direction","shareBefore","shareAfter","change","spreadBefore",
 * "spreadAfter","noise"}],"reported"}]} to out. Errors: PD_EPARSE/PD_EINVAL
 * (selector), storage errors, PD_ENOMEM, PD_ETOOBIG (out's cap). */
int pd_query_regressions(pd_storage *st, const char *selector, const char *by, int64_t from,
                         int64_t to, const char *sample_type, size_t limit, double min_change,
                         size_t max_profiles, pd_buf *out, pd_err *err);

/* ---- the cost of one function per source line (lines.c; the UI's source
 * view, issue 31 item 7) ---- */

typedef struct pd_line_cost {
    int64_t line;        /* 1-based, as pprof's Line.line */
    int64_t self, total; /* in the sample type's unit */
} pd_line_cost;

typedef struct pd_function_lines {
    char *file;          /* the file shown: Function.filename ("" when none) */
    pd_line_cost *lines; /* ascending by line; lines with self == total == 0 left out */
    size_t n_lines;
    int64_t self, total;                 /* the function's in that file (total once per sample) */
    int64_t no_line_self, no_line_total; /* frames without a line number (Line.line 0) */
    char **files; /* every file of functions of that name, largest total first */
    size_t n_files;
    char **build_ids; /* of the mappings of the file's frames, most value first, each once */
    size_t n_build_ids;
} pd_function_lines;

/* Sums, per source line, the values of sample type sample_index of the
 * frames of p whose function is named `function` (exactly, as the reports
 * name frames): self on the leaf frame, total once per sample per line, and
 * the rule for inlined frames and recursion at the top of lines.c. A
 * function name can live in several files (static functions, versions):
 * `file` (NULL: the file with the largest total) picks one; *out (release
 * with pd_function_lines_release) lists them all. Errors: PD_ENOTFOUND
 * (no function of that name, or `file` is not one of its files; err says
 * which), PD_EINVAL (sample_index), PD_ENOMEM; *out is then empty. */
int pd_query_function_lines(const pd_profile *p, size_t sample_index, const char *function,
                            const char *file, pd_function_lines *out /* OUT */, pd_err *err);
/* Frees what f holds (f itself is the caller's). NULL is a no-op. */
void pd_function_lines_release(pd_function_lines *f);

#endif
