/*
 * api/querier_int.h — what the Connect handlers of api/ share:
 *
 *   querier.c          POST /querier.v1.QuerierService/<Method> (Pyroscope's
 *                      querier API, what Grafana's Pyroscope data source calls)
 *   querier_select.c   the virtual series Pyroscope's API sees over profd's
 *                      store (profile type IDs, service_name, __profile_type__)
 *                      and the flame graph levels format
 *   querier_render.c   GET /pyroscope/render and /pyroscope/render-diff
 *                      (flamebearer JSON with its timeline; format=dot)
 *   querier_stack.c    StackTraceSelector (call site, Go PGO) on a merged
 *                      profile
 *   push_connect.c     POST /push.v1.PusherService/Push
 *
 * Virtual series. Pyroscope names a profile type by five parts,
 * name:sample_type:sample_unit:period_type:period_unit, one per sample type.
 * Each stored series of profd with sample types T1..Tn (of its first profile
 * in the queried range) is seen as n virtual series, each with the stored
 * labels plus:
 *   __name__          Pyroscope's name of the type: cpu -> process_cpu,
 *                     heap and allocs -> memory, goroutine -> goroutines,
 *                     any other name as stored (pushes via Connect give
 *                     Pyroscope's names already)
 *   __profile_type__  the five-part ID; __type__, __unit__, __period_type__,
 *                     __period_unit__ its parts
 *   service_name      the stored service_name, else the series' job (a
 *                     scraped target), else "unknown_service"
 * Period type/unit come from a table for Go's types (process_cpu cpu/
 * nanoseconds, memory space/bytes, goroutines goroutine/count), else from
 * the latest profile (mutex and block: Go's contentions/count, JFR's
 * mutex/count and block/count).
 *
 * JFR (api/ingest_jfr.c stores each event kind as its own series, named
 * as ingest/jfr.h says) is seen under grafana/jfr-parser's IDs, as
 * Pyroscope serves a Java agent's upload:
 *   cpu                process_cpu:cpu:nanoseconds:cpu:nanoseconds
 *   wall               wall:wall:nanoseconds:wall:nanoseconds
 *   alloc_in_new_tlab  memory:alloc_in_new_tlab_objects:count:space:bytes,
 *                      memory:alloc_in_new_tlab_bytes:bytes:space:bytes
 *   alloc_outside_tlab memory:alloc_outside_tlab_{objects:count,bytes:bytes}:space:bytes
 *   alloc_sample       memory:alloc_sample_{objects:count,bytes:bytes}:space:bytes
 *   live               memory:live:count:objects:count
 *   mutex              mutex:contentions:count:mutex:count, mutex:delay:nanoseconds:mutex:count
 *   block              block:contentions:count:block:count, block:delay:nanoseconds:block:count
 * Those IDs are canonical (ProfileTypes lists them, __profile_type__ holds
 * them). profd's own ID of a virtual series — its stored __name__ and the
 * table's period, e.g. alloc_in_new_tlab:alloc_in_new_tlab_bytes:bytes:
 * space:bytes or mutex:contentions:count:contentions:count (what profd
 * answered before) — is accepted as an alias wherever an ID selects.
 * The delay values are nanoseconds (profd converts JFR's ticks with the
 * chunk's ticksPerSecond; jfr-parser passes the ticks through, so
 * Pyroscope's delay of the same recording is ticksPerSecond/1e9 times
 * larger: ingest/jfr.h).
 * Both Go's heap and allocs carry the four memory types: when both kinds of
 * series exist, alloc_* types are taken from allocs and inuse_* from heap
 * only, so a memory type is never counted twice.
 */
#ifndef PD_API_QUERIER_INT_H
#define PD_API_QUERIER_INT_H

#include <stdbool.h>
#include <stdint.h>
#include "api/api_int.h"
#include "api/connect.h"
#include "base/arena.h"
#include "query/query.h"

/* What the querier handlers use (borrowed). */
typedef struct pd__querier_env {
    pd_storage *st;
    const pd_pprof_limits *limits;
    int64_t timeout_ms; /* merges stop after it; 0 = 2 min */
    size_t max_samples; /* distinct samples of a merge; 0 = default */
} pd__querier_env;

/* One virtual series. */
typedef struct pd__vseries {
    const pd_series_info *si; /* the stored series (in the selection's set) */
    size_t type_idx;          /* its sample type */
    pd_labels vl;             /* stored + virtual labels (read only: the
                                 selection's arena, never pd_labels_release) */
    const char *ptid;         /* __profile_type__ (in vl) */
    const pd_points *pts;     /* the stored series' points in range */
} pd__vseries;

/* The stored series come from pd_storage_select (set, with pts their points
 * in range) or, for a listing (meta), from pd_storage_select_latest (latest;
 * infos and pts then hold each series' ref, labels and newest point,
 * borrowed from latest). */
typedef struct pd__vselection {
    pd_arena a; /* every v[i].vl (its array; strings borrowed from set,
                   latest or a) and the kinds' strings */
    pd_series_set set;
    pd_series_latest_set latest;
    pd_series_info *infos; /* latest.n (meta), shallow */
    pd_points *pts;        /* set.n, or latest.n (meta: one point each, priv NULL) */
    pd__vseries *v;
    size_t n;
} pd__vselection;

/* Checks a profile type ID as Pyroscope's ParseProfileTypeSelector does:
 * five parts name:sample_type:sample_unit:period_type:period_unit, or six
 * (a trailing ":delta" or other sixth part, ignored). *match_len is the
 * length of the five-part prefix. PD_EINVAL with upstream's message
 * ("profile-type selection must be of the form ..., got(N): ...") else. */
int pd__ptid_check(const char *ptid, size_t *match_len /* OUT */, pd_err *err);

/* Selects the virtual series in [start, end] ms whose __profile_type__ is
 * ptid or whose profd alias is (NULL or "": any; a malformed ID is
 * PD_EINVAL as pd__ptid_check) and whose labels match any of the n selectors (n ==
 * 0, or a selector "" or "{}": all). Errors: PD_EPARSE/PD_EINVAL naming the
 * bad selector, storage errors, PD_ENOMEM. Release with
 * pd__vselection_release (also after an error). */
int pd__vselect(pd_storage *st, const char *ptid, const char *const *selectors, size_t n,
                int64_t start, int64_t end, pd__vselection *out /* OUT */, pd_err *err);
/* pd__vselect; meta: for label listings only (Series, LabelNames,
 * LabelValues, ProfileTypes): each v[i].pts holds the series' newest point
 * in range alone (its sample types; totals NULL), never a delta, and
 * v[i].si only its ref and labels (pd_storage_select_latest: no copy, no
 * sort; the virtual labels that depend only on a series' name and sample
 * types are computed once per distinct pair). PD_ECANCELED when the query
 * is cancelled (base/cancel.h). */
int pd__vselect_ex(pd_storage *st, const char *ptid, const char *const *selectors, size_t n,
                   int64_t start, int64_t end, bool meta, pd__vselection *out /* OUT */,
                   pd_err *err);
void pd__vselection_release(pd__vselection *s);

/* Merges the profiles of the selection (all of one profile type) in [start,
 * end] with base (may be NULL) as diff base, as pd_query_merge_refs.
 * *type_idx is the index of the selection's sample type in the result.
 * PD_ENOTFOUND when the selection is empty. */
int pd__vmerge(const pd__querier_env *env, const pd__vselection *base, int64_t bstart, int64_t bend,
               const pd__vselection *cur, int64_t start, int64_t end, pd_profile *out /* OUT */,
               size_t *type_idx /* OUT */, pd_err *err);

/* pd__vmerge of only the samples filter passes (storage.h,
 * pd_storage_sample_filter; NULL: pd__vmerge): SelectMergeSpanProfile. */
int pd__vmerge_filtered(const pd__querier_env *env, const pd_storage_sample_filter *filter,
                        const pd__vselection *base, int64_t bstart, int64_t bend,
                        const pd__vselection *cur, int64_t start, int64_t end,
                        pd_profile *out /* OUT */, size_t *type_idx /* OUT */, pd_err *err);

/* A flame graph in Pyroscope's levels format, built from the tree of
 * pd_report_flamegraph_ex (so max_nodes cuts as the native report does; the
 * cut children of a node become one "other" node). names[0] is "total".
 * Single: 4 values per node (x offset from the previous node's end in the
 * level, total, self, name index). Diff: 7 (left x, total, self, right x,
 * total, self, name index). Memory from the arena. */
typedef struct pd__levels {
    char **names;
    size_t n_names;
    int64_t **levels;  /* n_levels arrays */
    size_t *level_len; /* values in each */
    size_t n_levels;
    int64_t total, max_self, left_ticks, right_ticks;
} pd__levels;

/* Builds the levels of p's sample type_idx, at most max_nodes nodes (0 =
 * all); diff: p is a diff (pd_query_diff). Errors: PD_ENOMEM, PD_ETOOBIG. */
int pd__levels_build(const pd_profile *p, size_t type_idx, size_t max_nodes, bool diff, pd_arena *a,
                     pd__levels *out /* OUT */, pd_err *err);

/* Writes Pyroscope's FlamebearerProfile of lv (pkg/og/structs/flamebearer
 * FlamebearerProfileV1: what /render answers and what Pyroscope's UI exports
 * and imports as .json) into b, without its "timeline" member and closing
 * brace, which the caller writes:
 *   {"version":1,"flamebearer":{"names":[..],"levels":[[..]],"numTicks":N,
 *    "maxSelf":N},"metadata":{"format":"single"|"double","spyName":"",
 *    "sampleRate":R,"units":U,"name":NAME}[,"leftTicks":L,"rightTicks":R]
 * Levels as pd__levels (x offsets delta-encoded, as upstream's reader
 * flamebearerV1ToTree decodes them); R and U from NAME, a five-part profile
 * type ID (querier_render.c says how). Errors: PD_ENOMEM, PD_ETOOBIG (b's cap). */
int pd__flamebearer_put(pd_buf *b, const pd__levels *lv, bool diff, const char *name);

/* The whole FlamebearerProfile of p's sample type_idx (at most max_nodes
 * nodes, 0 = all; diff: p is a pd_query_diff profile, "double" format with
 * leftTicks = the base's total, rightTicks = the new one's), "timeline":null,
 * named metric:type:unit:period_type:period_unit from p (metric NULL or "":
 * "profile"): /api/v1/query's report=flamebearer, the UI's export. Errors as
 * pd__levels_build and pd__flamebearer_put, with a message in err. */
int pd__flamebearer_report(const pd_profile *p, size_t type_idx, size_t max_nodes, bool diff,
                           const char *metric, pd_buf *out, pd_err *err);

/* Pyroscope's types.v1.StackTraceSelector, decoded (borrowed strings). */
typedef struct pd__stack_selector {
    const char *const *call_site; /* function names, root first */
    size_t n_call_site;
    bool go_pgo;             /* set: call_site is ignored */
    uint32_t keep_locations; /* go_pgo: leaf-most locations kept; 0 = all */
    bool aggregate_callees;  /* go_pgo: the leaf location's line set to 0 */
} pd__stack_selector;

/* True when s selects anything (NULL, no call site and no go_pgo: no). */
bool pd__stack_selector_active(const pd__stack_selector *s);

/* Applies s to *p (querier_stack.c documents the rules): p is replaced by
 * the rebuilt profile (held to lim; NULL: defaults), or left as it was
 * when s is not active or on error. Errors: PD_ENOMEM, PD_ETOOBIG (a cap
 * of lim), PD_EINVAL (p is inconsistent). */
int pd__stack_select(pd_profile *p, const pd__stack_selector *s, const pd_pprof_limits *lim,
                     pd_err *err);

/* The same on a diff (pd__vmerge with a base): samples labelled
 * pprof::base=true get base, the others cur; an inactive one (NULL) leaves
 * its side's samples as they are. Errors as pd__stack_select. */
int pd__stack_select_diff(pd_profile *p, const pd__stack_selector *base,
                          const pd__stack_selector *cur, const pd_pprof_limits *lim, pd_err *err);

/* Parses a time of Pyroscope's HTTP API: "now", "now-1h" (s, m, h, d),
 * Unix seconds, milliseconds or nanoseconds (told apart by size), RFC 3339.
 * Result in ms. PD_EPARSE naming the text. */
int pd__pyro_time(const char *s, int64_t now_ms, int64_t *out_ms /* OUT */, pd_err *err);

/* Routes /querier.v1.QuerierService/<Method>. Returns the handler name. */
const char *pd__querier_route(const pd__querier_env *env, const pd_http_request *req,
                              pd_http_response *resp);
/* GET /pyroscope/render and /pyroscope/render-diff. */
const char *pd__querier_render(const pd__querier_env *env, const pd_http_request *req,
                               pd_http_response *resp);
/* POST /push.v1.PusherService/Push. */
const char *pd__push_connect(const pd__api_env *env, const pd_http_request *req,
                             pd_http_response *resp);

#endif
