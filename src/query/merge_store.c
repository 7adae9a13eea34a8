/*
 * query/merge_store.c — a merge or diff over the store (query.h:
 * pd_query_merge, pd_query_diff): each side's series selected, their sample
 * types checked before any profile body is read (per run of equal types:
 * pd_storage_read_type_runs), deltas decided for cumulative types, then
 * summed inside the store (pd_storage_aggregate*: per block and group of
 * series, on the store's ids) and each part folded into a pd_merge
 * (merge.c), which pd_merge_finish turns into the answer (merge_finish.c).
 */
#include "query/query.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/query_int.h"

/* ---- over the store ---- */

/* "[type/unit, ...]" of a point, for the sample-type check before reading
 * any profile body. */
static void point_types(const pd_point *pt, pd_buf *b)
{
    pd_buf_reset(b);
    pd_buf_putc(b, '[');
    for (size_t i = 0; i < pt->n_types; i++)
        pd_buf_printf(b, "%s%s/%s", i ? ", " : "", pt->types ? pt->types[i].type : "",
                      pt->types ? pt->types[i].unit : "");
    pd_buf_putc(b, ']');
}

/* Whether a and b have the same sample types (type and unit, in order):
 * check_point's answer for b is then a's, with no formatting (a merge of N
 * profiles checks N points; consecutive ones of a series mostly share them). */
static bool same_types(const pd_point *a, const pd_point *b)
{
    if (a->n_types != b->n_types || !a->types != !b->types)
        return false;
    if (a->types == b->types)
        return true;
    for (size_t i = 0; i < a->n_types; i++)
        if (strcmp(a->types[i].type ? a->types[i].type : "",
                   b->types[i].type ? b->types[i].type : "") ||
            strcmp(a->types[i].unit ? a->types[i].unit : "",
                   b->types[i].unit ? b->types[i].unit : ""))
            return false;
    return true;
}

typedef struct run {
    pd_storage *st;
    pd_merge *m;
    pd_buf first_types; /* of the first point seen; empty before */
    char first_source[320];
    pd_buf types, name;
    size_t series;
    const char *by;            /* the merge option by (groups of series, pd__query_groups) */
    const pd_merge_options *o; /* may be NULL */
    bool delta;                /* deltas were taken on some side */
} run;

static void source_name(const pd_labels *ls, int64_t ts, const char *side, pd_buf *b)
{
    pd_buf_reset(b);
    pd_buf_puts(b, "series ");
    pd_labels_format(ls, b);
    pd_buf_printf(b, " at %" PRId64 " ms", ts);
    if (side)
        pd_buf_printf(b, " (%s)", side);
}

/* Checks a point's sample types against the first point of the query. */
static int check_point(run *r, const pd_labels *ls, const pd_point *pt, const char *side,
                       pd_err *err)
{
    point_types(pt, &r->types);
    if (!r->types.data)
        return pd_err_set(err, PD_ENOMEM, "merge: out of memory");
    if (!r->first_types.len) {
        pd_buf_append(&r->first_types, r->types.data, r->types.len);
        source_name(ls, pt->ts_ms, side, &r->name);
        snprintf(r->first_source, sizeof r->first_source, "%s", r->name.data ? r->name.data : "");
        return r->first_types.len ? 0 : pd_err_set(err, PD_ENOMEM, "merge: out of memory");
    }
    if (r->types.len == r->first_types.len &&
        !memcmp(r->types.data, r->first_types.data, r->types.len))
        return 0;
    source_name(ls, pt->ts_ms, side, &r->name);
    return pd_err_set(err, PD_EINVAL,
                      "cannot merge profiles with different sample types: %.150s has %.100s but "
                      "%.150s has %.100s; select series of one profile type",
                      r->name.data ? r->name.data : "", r->types.data, r->first_source,
                      r->first_types.data);
}

/* source_name for one more profile of the series whose "series {...}"
 * prefix (prefix bytes) r->name already holds: no label formatting per
 * profile. */
static void source_name_at(run *r, size_t prefix, int64_t ts, const char *side)
{
    pd_buf *b = &r->name;
    if (!b->data || b->len < prefix) {
        b->len = 0;
        return;
    }
    b->len = prefix;
    char num[24], *e = num + sizeof num, *q = e;
    uint64_t u = ts < 0 ? 0 - (uint64_t)ts : (uint64_t)ts;
    do
        *--q = (char)('0' + u % 10);
    while ((u /= 10) != 0);
    if (ts < 0)
        *--q = '-';
    pd_buf_puts(b, " at ");
    pd_buf_append(b, q, (size_t)(e - q));
    pd_buf_puts(b, " ms");
    if (side) {
        pd_buf_puts(b, " (");
        pd_buf_puts(b, side);
        pd_buf_putc(b, ')');
    }
}

/* The series being folded in by add_side, for add_part. */
typedef struct part_ctx {
    run *r;
    const pd_series_info *const *v; /* the series aggregated (refs' order) */
    bool base;
    const char *side;
} part_ctx;

/* pd_storage_aggregate's poll: the merge's deadline and cancel. */
static int poll_part(void *ctx, pd_err *err)
{
    return pd_merge_check(((part_ctx *)ctx)->r->m, err);
}

/* pd_storage_aggregate's callback: one part (a block's sum over a group of
 * series, or one head profile) into the merger. */
static int add_part(void *ctx, const pd_storage_agg_part *part, const pd_profile *p, pd_err *err)
{
    part_ctx *c = ctx;
    run *r = c->r;
    const pd_series_info *si = c->v[part->series];
    pd_buf_reset(&r->name);
    pd_buf_puts(&r->name, "series ");
    pd_labels_format(&si->labels, &r->name);
    if (part->n_series > 1)
        pd_buf_printf(&r->name, " and %zu more", part->n_series - 1);
    size_t prefix = r->name.len;
    source_name_at(r, prefix, part->min_ts, c->side);
    if (part->n_profiles > 1 && r->name.data) {
        /* "... at T ms" -> "... from T to T2 ms (N profiles)" */
        r->name.len = prefix;
        pd_buf_printf(&r->name, " from %" PRId64 " to %" PRId64 " ms (%zu profiles)%s%s%s",
                      part->min_ts, part->max_ts, part->n_profiles, c->side ? " (" : "",
                      c->side ? c->side : "", c->side ? ")" : "");
    }
    return pd_merge_add_n(r->m, p, &si->labels, c->base, r->name.data, part->n_profiles, err);
}

/* Drops from set the series matching any of q's exclude selectors. */
static int exclude_series(const pd_query_side *q, pd_series_set *set, pd_err *err)
{
    for (size_t e = 0; e < q->n_exclude; e++) {
        pd_matcher *xm = NULL;
        size_t xn = 0;
        int rc = pd_selector_parse(q->exclude[e], &xm, &xn, err);
        if (rc < 0) {
            pd_err_prefix(err, "exclude %.100s", q->exclude[e]);
            return rc;
        }
        size_t k = 0;
        for (size_t i = 0; i < set->n; i++) {
            if (pd_matchers_match(xm, xn, &set->v[i].labels)) {
                pd_labels_release(&set->v[i].labels);
                continue;
            }
            set->v[k++] = set->v[i];
        }
        set->n = k;
        pd_matchers_free(xm, xn);
    }
    return 0;
}

/* PD_DELTA_AUTO: whether the sample type the answer is read for
 * (options sample_type: a name or an index; else the default_sample_type of
 * series ref's profile at pt, else the last type, pprof's rule) is one of
 * the cumulative types in mask. */
bool pd__query_shown_cumulative(pd_storage *st, const pd_merge_options *o, uint64_t ref,
                                const pd_point *pt, uint64_t mask)
{
    const char *want = o ? o->sample_type : NULL;
    size_t idx = pt->n_types ? pt->n_types - 1 : 0;
    pd_profile p;
    bool have_p = false;
    if (want && *want) {
        char *end;
        unsigned long u = strtoul(want, &end, 10);
        if (*end == 0 && want[0] >= '0' && want[0] <= '9') {
            idx = (size_t)u;
        } else {
            idx = SIZE_MAX;
            for (size_t t = 0; t < pt->n_types && pt->types; t++)
                if (pt->types[t].type && !strcmp(pt->types[t].type, want))
                    idx = t;
        }
    } else {
        pd_err e;
        pd_err_clear(&e);
        have_p = pd_storage_read_profile(st, ref, pt->ts_ms, &p, NULL, &e) == 0;
        if (have_p && p.default_sample_type) {
            const char *d = pd_profile_str(&p, p.default_sample_type);
            for (size_t t = 0; t < pt->n_types && pt->types; t++)
                if (pt->types[t].type && d && !strcmp(pt->types[t].type, d))
                    idx = t;
        }
    }
    if (have_p)
        pd_profile_release(&p);
    return idx < 64 && (mask >> idx & 1);
}

/* One side of a merge or diff once selected (prep_side), before its sum. */
typedef struct side_prep {
    pd_matcher *ms;
    size_t n;
    pd_series_set set;
    const pd_series_info **v; /* nv series with profiles in range (refs' order) */
    uint64_t *refs, *mask;
    uint32_t *group;
    size_t *npts;
    size_t nv;
    bool delta;     /* summed as deltas (pd_storage_aggregate_delta) */
    size_t n_count; /* what the side counts as inputs besides deltas */
} side_prep;

static void side_prep_release(side_prep *sp)
{
    free(sp->v);
    free(sp->refs);
    free(sp->group);
    free(sp->mask);
    free(sp->npts);
    pd_series_set_release(&sp->set);
    pd_matchers_free(sp->ms, sp->n);
    memset(sp, 0, sizeof *sp);
}

/* Selects a merge side's series, checks their sample types (all before any
 * profile is read), decides deltas and groups. */
static int prep_side(run *r, const pd_query_side *q, const char *side, side_prep *sp, pd_err *err)
{
    memset(sp, 0, sizeof *sp);
    int delta_mode = r->o ? (int)r->o->delta : PD_DELTA_AUTO;
    bool auto_decided = false, auto_cum = false;
    int rc;
    if ((rc = pd_selector_parse(q->selector, &sp->ms, &sp->n, err)) < 0)
        return rc;
    if ((rc = pd_storage_select(r->st, sp->ms, sp->n, q->from, q->to, &sp->set, err)) < 0 ||
        (rc = pd_matchers_check_limits(sp->ms, sp->n, err)) < 0)
        return rc;
    if ((rc = exclude_series(q, &sp->set, err)) < 0)
        return rc;
    if (sp->set.n == 0)
        return pd_err_set(
            err, PD_ENOTFOUND,
            "no series matching %.200s has profiles between %" PRId64 " and %" PRId64 " ms%s%s%s",
            q->selector, q->from, q->to, side ? " (" : "", side ? side : "", side ? ")" : "");
    size_t n = sp->set.n;
    sp->v = malloc(n * sizeof *sp->v);
    sp->refs = malloc(n * sizeof *sp->refs);
    sp->group = malloc(n * sizeof *sp->group);
    sp->mask = malloc(n * sizeof *sp->mask);
    sp->npts = malloc(n * sizeof *sp->npts);
    if (!sp->v || !sp->refs || !sp->group || !sp->mask || !sp->npts)
        return pd_err_set(err, PD_ENOMEM, "merge: out of memory");
    for (size_t i = 0; i < n && rc >= 0; i++) {
        pd_points pts = {0};
        size_t np = 0; /* the profiles; pts holds the first of each run of equal types */
        rc = pd_storage_read_type_runs(r->st, sp->set.v[i].ref, q->from, q->to, &pts, &np, err);
        if (rc == PD_ENOTFOUND) {
            rc = 0;
            continue;
        }
        if (rc < 0)
            break;
        /* all sample types first: a mismatch fails before any body is read */
        for (size_t j = 0; j < pts.n && rc >= 0; j++)
            if (!j || !same_types(&pts.v[j], &pts.v[j - 1])) /* equal to one checked: passes */
                rc = check_point(r, &sp->set.v[i].labels, &pts.v[j], side, err);
        if (pts.n && rc >= 0) {
            size_t k = sp->nv;
            r->series++;
            sp->mask[k] = pd_query_cumulative_mask(&sp->set.v[i].labels, &pts.v[0]);
            if (sp->mask[k] && delta_mode == PD_DELTA_AUTO && !auto_decided) {
                auto_decided = true;
                auto_cum = pd__query_shown_cumulative(r->st, r->o, sp->set.v[i].ref, &pts.v[0],
                                                      sp->mask[k]);
            }
            sp->npts[k] = np;
            sp->refs[k] = sp->set.v[i].ref;
            sp->v[sp->nv++] = &sp->set.v[i];
        }
        pd_points_release(&pts);
    }
    if (rc < 0)
        return rc;
    bool any_mask = false;
    for (size_t i = 0; i < sp->nv; i++)
        any_mask = any_mask || sp->mask[i] != 0;
    sp->delta =
        any_mask && (delta_mode == PD_DELTA_ON || (delta_mode == PD_DELTA_AUTO && auto_cum));
    for (size_t i = 0; i < sp->nv; i++)
        sp->n_count += sp->delta && sp->mask[i] ? 0 : sp->npts[i];
    if (sp->nv && (rc = pd__query_groups(sp->v, sp->nv, r->by, sp->group)) < 0)
        return pd_err_set(err, rc, "merge: out of memory");
    return 0;
}

/* Sums a prepared side into r->m inside the store (pd_storage_aggregate by
 * stack id, per block and group of series; with deltas, each profile times
 * its weight: pd_storage_aggregate_delta). */
static int agg_side(run *r, const pd_query_side *q, bool base, const char *side, side_prep *sp,
                    pd_err *err)
{
    if (!sp->nv)
        return 0;
    part_ctx c = {r, sp->v, base, side};
    size_t n_deltas = 0;
    pd_merge_stats before;
    pd_merge_get_stats(r->m, &before);
    int rc = pd_storage_aggregate_filtered(r->st, r->o ? r->o->sample_filter : NULL, sp->refs,
                                           sp->group, sp->delta ? sp->mask : NULL, sp->nv, q->from,
                                           q->to, add_part, poll_part, &c, NULL, &n_deltas, err);
    if (rc >= 0 && sp->delta && sp->n_count + n_deltas == 0)
        rc = pd_err_set(err, PD_ENOTFOUND,
                        "no delta: every series matching %.200s between %" PRId64 " and %" PRId64
                        " ms has only its first stored profile there (the baseline deltas "
                        "start from)%s%s%s; widen the range, or ask delta=false for the "
                        "stored counters",
                        q->selector, q->from, q->to, side ? " (" : "", side ? side : "",
                        side ? ")" : "");
    if (rc >= 0 && sp->delta) {
        pd_merge_stats after;
        pd_merge_get_stats(r->m, &after);
        pd__merge_recount(r->m, base, after.profiles - before.profiles, sp->n_count + n_deltas);
        r->delta = true;
    }
    return rc;
}

/* Folds one side (single or merge) into r->m. */
static int add_side(run *r, const pd_query_side *q, bool base, const char *side, pd_err *err)
{
    int rc;
    if (!q->selector)
        return pd_err_set(err, PD_EINVAL, "no selector given%s%s%s", side ? " (" : "",
                          side ? side : "", side ? ")" : "");
    if (q->mode == PD_QUERY_MODE_SINGLE) {
        pd_profile p;
        pd_labels ls;
        pd_labels_init(&ls);
        int64_t ts = 0;
        if ((rc = pd_query_single(r->st, q->selector, q->time, &p, &ls, &ts, err)) < 0)
            return rc;
        r->series++;
        source_name(&ls, ts, side, &r->name);
        const pd_storage_sample_filter *f = r->o ? r->o->sample_filter : NULL;
        for (size_t j = 0; f && j < p.n_sample; j++) /* zero sums are dropped */
            if (!pd_storage_sample_passes(f, &p, p.sample[j].label, p.sample[j].n_label))
                memset(p.sample[j].value, 0, p.sample[j].n_value * sizeof *p.sample[j].value);
        rc = pd_merge_add(r->m, &p, &ls, base, r->name.data, err);
        pd_profile_release(&p);
        pd_labels_release(&ls);
        return rc;
    }
    side_prep sp;
    rc = prep_side(r, q, side, &sp, err);
    if (rc >= 0)
        rc = agg_side(r, q, base, side, &sp, err);
    side_prep_release(&sp);
    return rc;
}

/* The parts of a diff in one pass (pd_storage_aggregate_diff): each to its
 * side's add_part. */
static int add_diff_part(void *ctx, const pd_storage_agg_part *part, const pd_profile *p,
                         pd_err *err)
{
    part_ctx *c = ctx;
    return add_part(&c[part->side ? 1 : 0], part, p, err);
}

/* A diff of two merge sides: both selected and checked as add_side does,
 * then, without deltas, summed in one pass by the store
 * (pd_storage_aggregate_diff: the same parts as two add_side calls give,
 * so the same answer); a side with deltas is summed on its own, as
 * add_side does. 1 when it does not apply (a single side): nothing was
 * done. */
static int add_diff(run *r, const pd_query_side *base, const pd_query_side *cur, pd_err *err)
{
    if (!base->selector || !cur->selector || base->mode == PD_QUERY_MODE_SINGLE ||
        cur->mode == PD_QUERY_MODE_SINGLE)
        return 1;
    side_prep sc, sb;
    memset(&sb, 0, sizeof sb);
    int rc = prep_side(r, cur, "query_b", &sc, err);
    if (rc >= 0 && sc.delta) { /* the new side first, then the base, as before */
        rc = agg_side(r, cur, false, "query_b", &sc, err);
        /* each side's sample types are checked alone; the merger checks
         * the two sides against each other */
        pd_buf_reset(&r->first_types);
        if (rc >= 0)
            rc = add_side(r, base, true, "query_a", err);
        goto out;
    }
    pd_buf_reset(&r->first_types);
    if (rc >= 0)
        rc = prep_side(r, base, "query_a", &sb, err);
    if (rc >= 0 && (sb.delta || !sc.nv || !sb.nv || (r->o && r->o->sample_filter))) {
        rc = agg_side(r, cur, false, "query_b", &sc, err);
        if (rc >= 0)
            rc = agg_side(r, base, true, "query_a", &sb, err);
        goto out;
    }
    if (rc >= 0) {
        part_ctx c[2] = {{r, sc.v, false, "query_b"}, {r, sb.v, true, "query_a"}};
        pd_storage_agg_side sd[2] = {
            {.refs = sc.refs, .group = sc.group, .n = sc.nv, .mint = cur->from, .maxt = cur->to},
            {.refs = sb.refs, .group = sb.group, .n = sb.nv, .mint = base->from, .maxt = base->to},
        };
        rc = pd_storage_aggregate_diff(r->st, sd, add_diff_part, poll_part, c, err);
    }
out:
    side_prep_release(&sc);
    side_prep_release(&sb);
    return rc;
}

static int run_query(pd_storage *st, const pd_query_side *base, const pd_query_side *cur,
                     const pd_merge_options *o, pd_profile *out, pd_merge_stats *stats, pd_err *err)
{
    run r = {.st = st, .by = o ? o->by : NULL, .o = o};
    pd_buf_init(&r.first_types, 0);
    pd_buf_init(&r.types, 0);
    pd_buf_init(&r.name, 0);
    memset(out, 0, sizeof *out);
    int rc = pd_merge_new(o, &r.m, err);
    if (rc < 0)
        goto out;
    /* a diff of two merges: one pass in the store when it can */
    if (base && (rc = add_diff(&r, base, cur, err)) <= 0)
        goto stats;
    /* the new side first, then the base: pprof's order for -diff_base */
    if ((rc = add_side(&r, cur, false, base ? "query_b" : NULL, err)) < 0)
        goto out;
    if (base) {
        /* each side's sample types are checked alone; the merger checks
         * the two sides against each other */
        pd_buf_reset(&r.first_types);
        if ((rc = add_side(&r, base, true, "query_a", err)) < 0)
            goto out;
    }
stats:
    if (rc < 0)
        goto out;
    if (stats) {
        pd_merge_get_stats(r.m, stats);
        stats->series = r.series;
        stats->delta = r.delta;
    }
    rc = pd_merge_finish(r.m, out, err);
    if (rc == 0)
        pd__query_symbolize(out);
out:
    pd_merge_free(r.m);
    pd_buf_release(&r.first_types);
    pd_buf_release(&r.types);
    pd_buf_release(&r.name);
    return rc;
}

int pd_query_merge(pd_storage *st, const pd_query_side *q, const pd_merge_options *o,
                   pd_profile *out, pd_merge_stats *stats, pd_err *err)
{
    return run_query(st, NULL, q, o, out, stats, err);
}

int pd_query_diff(pd_storage *st, const pd_query_side *base, const pd_query_side *cur,
                  const pd_merge_options *o, pd_profile *out, pd_merge_stats *stats, pd_err *err)
{
    return run_query(st, base, cur, o, out, stats, err);
}
