/*
 * query/delta.c — which sample types are cumulative, and timelines of
 * deltas (issue 12; query.h: pd_query_cumulative_mask, pd_query_sample_kind,
 * pd_query_range_ex).
 *
 * The rule, in one place:
 *   - A series is *served cumulative* when it carries the stored mark
 *     PD_LABEL_DELTA="false" (storage.h): the scrape layer adds it to what
 *     it scrapes as served, without a ?seconds= window, from Go's allocs,
 *     heap, block and mutex endpoints (src/scrape/target.c). A delta scrape
 *     (seconds: / delta: true, Parca's and conprof's form), a push
 *     (Pyroscope SDKs send deltas, profefe, OTLP) or an import is not.
 *   - In such a series the *cumulative* sample types are those Go's runtime
 *     counts since the process started: alloc_objects and alloc_space
 *     (heap, allocs), contentions and delay (block, mutex). The others of
 *     the same profile (inuse_objects, inuse_space) are gauges.
 *   - A *gauge* elsewhere: inuse_* and the counts of goroutine and
 *     threadcreate (what exists at the moment of the profile). Everything
 *     else (cpu, wall, samples, ...) is a *delta* (a window's worth).
 * The reset rule is storage.h's pd_point_is_reset.
 *
 * Timeline of deltas: point k shows totals[k] - totals[k-1] for the
 * cumulative types (totals[k] itself after a reset), where point k-1 may
 * lie before the range (the series' previous stored profile); the series'
 * first stored profile shows 0 (nothing is known before it). Gauge types
 * keep their level. So the points of a timeline add up to what a merge of
 * the same range with deltas gives (storage.h, pd_storage_aggregate_delta),
 * and adjacent ranges add up.
 */
#include <stdlib.h>
#include <string.h>

#include "query/query.h"
#include "query/query_int.h"

static const char *const CUMULATIVE[] = {"alloc_objects", "alloc_space", "contentions", "delay"};
static const char *const GAUGE[] = {"inuse_objects", "inuse_space", "goroutine", "threadcreate"};

static bool in(const char *const *set, size_t n, const char *s)
{
    for (size_t i = 0; s && i < n; i++)
        if (!strcmp(set[i], s))
            return true;
    return false;
}

bool pd_query_served_cumulative(const pd_labels *series)
{
    const char *v = series ? pd_labels_get(series, PD_LABEL_DELTA) : NULL;
    return v && !strcmp(v, "false");
}

uint64_t pd_query_cumulative_mask(const pd_labels *series, const pd_point *pt)
{
    if (!pt || !pd_query_served_cumulative(series))
        return 0;
    uint64_t m = 0;
    for (size_t v = 0; v < pt->n_types && v < 64; v++)
        if (pt->types && in(CUMULATIVE, 4, pt->types[v].type))
            m |= (uint64_t)1 << v;
    return m;
}

const char *pd_query_sample_kind(const pd_labels *series, const char *type)
{
    if (pd_query_served_cumulative(series) && in(CUMULATIVE, 4, type))
        return "cumulative";
    if (in(GAUGE, 4, type) || (type && !strncmp(type, "inuse_", 6)))
        return "gauge";
    return "delta";
}

int pd_query_points_delta(pd_storage *st, const pd_series_info *si, pd_points *pts, bool *applied,
                          pd_err *err)
{
    if (applied)
        *applied = false;
    uint64_t mask = pts->n ? pd_query_cumulative_mask(&si->labels, &pts->v[0]) : 0;
    if (!mask)
        return 0;
    pd_points prev = {0};
    int rc = pd_storage_read_point_before(st, si->ref, pts->v[0].ts_ms, &prev, err);
    if (rc == PD_ENOTFOUND) { /* deleted since: as if it had no earlier profile */
        pd_err_clear(err);
        rc = 0;
    }
    if (rc >= 0) {
        pd__query_points_delta(pts, prev.n ? &prev.v[0] : NULL, mask);
        if (applied)
            *applied = true;
    }
    pd_points_release(&prev);
    return rc;
}

void pd__query_points_delta(pd_points *pts, const pd_point *prev, uint64_t mask)
{
    if (!mask || !pts->n)
        return;
    /* backwards, so that each step still sees the raw totals before it */
    for (size_t k = pts->n; k-- > 0;) {
        pd_point *cur = &pts->v[k];
        const pd_point *before = k ? &pts->v[k - 1] : prev;
        if (before && pd_point_is_reset(before, cur, mask))
            continue; /* counts from 0: the profile itself */
        for (size_t v = 0; v < cur->n_types && v < 64; v++)
            if (mask >> v & 1)
                cur->totals[v] =
                    before ? (int64_t)((uint64_t)cur->totals[v] - (uint64_t)before->totals[v])
                           : 0; /* the first stored profile: no delta */
    }
}
