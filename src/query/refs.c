/*
 * query/refs.c — merges over series the caller already selected (query.h:
 * pd_query_merge_refs), and keeping one sample type of a profile.
 *
 * The same pd_merge as pd_query_merge, fed by pd_storage_aggregate: the
 * profiles of each block are summed inside the store by stack id and each
 * sum folded in, so memory follows the result, not the inputs.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "query/query.h"
#include "query/query_int.h"
#include "base/log.h"
#include "symbolize/symbolize.h"

typedef struct gkey {
    char *key;
    size_t i;
} gkey;

static int cmp_gkey(const void *x, const void *y)
{
    const gkey *a = x, *b = y;
    int c = strcmp(a->key, b->key);
    return c ? c : (a->i > b->i) - (a->i < b->i);
}

int pd__query_groups(const pd_series_info *const *v, size_t n, const char *by, uint32_t *group)
{
    bool any = false;
    for (const char *c = by; c && *c && !any; c++)
        any = *c != ',' && *c != ' ';
    if (!any) {
        memset(group, 0, n * sizeof *group);
        return 0;
    }
    gkey *k = calloc(n ? n : 1, sizeof *k);
    pd_buf b;
    pd_buf_init(&b, 0);
    int rc = k ? 0 : PD_ENOMEM;
    for (size_t i = 0; i < n && !rc; i++) {
        pd_buf_reset(&b);
        const char *s = by;
        while (*s) {
            const char *e = strchr(s, ',');
            size_t len = e ? (size_t)(e - s) : strlen(s);
            while (len && *s == ' ') {
                s++;
                len--;
            }
            while (len && s[len - 1] == ' ')
                len--;
            if (len) {
                const char *val = NULL;
                for (size_t j = 0; j < v[i]->labels.n && !val; j++)
                    if (strlen(v[i]->labels.v[j].name) == len &&
                        !memcmp(v[i]->labels.v[j].name, s, len))
                        val = v[i]->labels.v[j].value;
                /* "\x01v<value>\x02" or "\x01-\x02" for an absent label */
                pd_buf_putc(&b, 1);
                if (val) {
                    pd_buf_putc(&b, 'v');
                    pd_buf_puts(&b, val);
                } else
                    pd_buf_putc(&b, '-');
                pd_buf_putc(&b, 2);
            }
            if (!e)
                break;
            s = e + 1;
        }
        if (!(k[i].key = strdup(b.data ? b.data : "")))
            rc = PD_ENOMEM;
        k[i].i = i;
    }
    if (!rc) {
        qsort(k, n, sizeof *k, cmp_gkey);
        uint32_t g = 0;
        for (size_t i = 0; i < n; i++) {
            if (i && strcmp(k[i].key, k[i - 1].key))
                g++;
            group[k[i].i] = g;
        }
    }
    for (size_t i = 0; k && i < n; i++)
        free(k[i].key);
    free(k);
    pd_buf_release(&b);
    return rc;
}

typedef struct refs_ctx {
    pd_merge *m;
    const pd_query_refs *q;
    bool base;
    pd_buf name;
    size_t series; /* series with profiles */
} refs_ctx;

/* pd_storage_aggregate's callback: one part (a block's sum over a group of
 * series, or one head profile) into the merger. */
static int add_part(void *ctx, const pd_storage_agg_part *part, const pd_profile *p, pd_err *err)
{
    refs_ctx *c = ctx;
    const pd_series_info *si = &c->q->series[part->series];
    pd_buf_reset(&c->name);
    pd_buf_puts(&c->name, "series ");
    pd_labels_format(&si->labels, &c->name);
    if (part->n_series > 1)
        pd_buf_printf(&c->name, " and %zu more", part->n_series - 1);
    if (part->n_profiles > 1)
        pd_buf_printf(&c->name, " from %" PRId64 " to %" PRId64 " ms (%zu profiles)%s",
                      part->min_ts, part->max_ts, part->n_profiles, c->base ? " (base)" : "");
    else
        pd_buf_printf(&c->name, " at %" PRId64 " ms%s", part->min_ts, c->base ? " (base)" : "");
    return pd_merge_add_n(c->m, p, &si->labels, c->base, c->name.data, part->n_profiles, err);
}

/* pd_storage_aggregate's poll: the merge's deadline and cancel. */
static int poll_part(void *ctx, pd_err *err)
{
    return pd_merge_check(((refs_ctx *)ctx)->m, err);
}

/* Deltas of cumulative series (pd_merge_options.delta, as pd_query_merge
 * takes them): mask[i] the cumulative types of series i (0: summed as is),
 * *n_count the profiles of the series summed as is (their inputs; those
 * with a mask count their deltas); *delta whether deltas apply at all.
 * Reads the series' points (no profile body, but one for PD_DELTA_AUTO
 * without a sample type). */
static int delta_plan(pd_storage *st, const pd_merge_options *o, const pd_query_refs *q,
                      uint64_t *mask, size_t *n_count, bool *delta, pd_err *err)
{
    int mode = o ? (int)o->delta : PD_DELTA_AUTO;
    bool decided = false, cum = false, any = false;
    *delta = false;
    *n_count = 0;
    memset(mask, 0, (q->n ? q->n : 1) * sizeof *mask);
    if (mode == PD_DELTA_RAW)
        return 0;
    int rc = 0;
    for (size_t i = 0; i < q->n && rc >= 0; i++) {
        if (!pd_query_served_cumulative(&q->series[i].labels))
            continue;
        pd_points pts = {0};
        rc = pd_storage_read_points(st, q->series[i].ref, q->from, q->to, &pts, err);
        if (rc == PD_ENOTFOUND) {
            pd_err_clear(err);
            rc = 0;
            continue;
        }
        if (rc < 0 || !pts.n) {
            pd_points_release(&pts);
            continue;
        }
        mask[i] = pd_query_cumulative_mask(&q->series[i].labels, &pts.v[0]);
        any = any || mask[i];
        if (mask[i] && mode == PD_DELTA_AUTO && !decided) {
            decided = true;
            cum = pd__query_shown_cumulative(st, o, q->series[i].ref, &pts.v[0], mask[i]);
        }
        pd_points_release(&pts);
    }
    *delta = rc >= 0 && any && (mode == PD_DELTA_ON || cum);
    for (size_t i = 0; i < q->n && *delta && rc >= 0; i++) {
        if (mask[i])
            continue;
        pd_points pts = {0}; /* a series summed as is counts its profiles */
        rc = pd_storage_read_points(st, q->series[i].ref, q->from, q->to, &pts, err);
        if (rc == PD_ENOTFOUND) {
            pd_err_clear(err);
            rc = 0;
        }
        *n_count += pts.n;
        pd_points_release(&pts);
    }
    return rc;
}

/* What add_refs sums: q's refs, groups (by=) and delta plan. */
typedef struct refs_plan {
    uint64_t *refs, *mask;
    uint32_t *group;
    const pd_series_info **v;
    size_t n_count;
    bool delta;
    const pd_storage_sample_filter *filter; /* o->sample_filter */
} refs_plan;

static void refs_plan_release(refs_plan *pl)
{
    free(pl->refs);
    free(pl->group);
    free(pl->v);
    free(pl->mask);
    memset(pl, 0, sizeof *pl);
}

static int plan_refs(pd_storage *st, const pd_query_refs *q, const pd_merge_options *o,
                     refs_plan *pl, pd_err *err)
{
    memset(pl, 0, sizeof *pl);
    const char *by = o ? o->by : NULL;
    pl->filter = o ? o->sample_filter : NULL;
    size_t n1 = q->n ? q->n : 1;
    pl->refs = malloc(n1 * sizeof *pl->refs);
    pl->group = malloc(n1 * sizeof *pl->group);
    pl->v = malloc(n1 * sizeof *pl->v);
    pl->mask = malloc(n1 * sizeof *pl->mask);
    int rc = pl->refs && pl->group && pl->v && pl->mask ? 0 : PD_ENOMEM;
    for (size_t i = 0; !rc && i < q->n; i++) {
        pl->refs[i] = q->series[i].ref;
        pl->v[i] = &q->series[i];
    }
    if (!rc)
        rc = pd__query_groups(pl->v, q->n, by, pl->group);
    if (rc == PD_ENOMEM)
        return pd_err_set(err, rc, "merge: out of memory");
    return delta_plan(st, o, q, pl->mask, &pl->n_count, &pl->delta, err);
}

/* Sums q's profiles inside the store (pd_storage_aggregate: by stack id,
 * per block and group of series as by= allows; with deltas and/or a sample
 * filter, pd_storage_aggregate_filtered) and folds the sums into m. */
static int sum_refs(pd_storage *st, pd_merge *m, const pd_query_refs *q, bool base,
                    const refs_plan *pl, size_t *series, pd_err *err)
{
    refs_ctx c = {.m = m, .q = q, .base = base};
    pd_buf_init(&c.name, 4096);
    pd_merge_stats before, after;
    pd_merge_get_stats(m, &before);
    size_t n_deltas = 0;
    int rc = pd_storage_aggregate_filtered(st, pl->filter, pl->refs, pl->group,
                                           pl->delta ? pl->mask : NULL, q->n, q->from, q->to,
                                           add_part, poll_part, &c, &c.series, &n_deltas, err);
    if (rc >= 0 && pl->delta) {
        pd_merge_get_stats(m, &after);
        pd__merge_recount(m, base, after.profiles - before.profiles, pl->n_count + n_deltas);
    }
    *series += c.series; /* series with profiles in the range */
    pd_buf_release(&c.name);
    return rc;
}

static int add_refs(pd_storage *st, pd_merge *m, const pd_query_refs *q, const pd_merge_options *o,
                    bool base, size_t *series, bool *delta, pd_err *err)
{
    refs_plan pl;
    int rc = plan_refs(st, q, o, &pl, err);
    *delta = pl.delta;
    if (rc >= 0)
        rc = sum_refs(st, m, q, base, &pl, series, err);
    refs_plan_release(&pl);
    return rc;
}

/* The parts of a diff in one pass: each to its side's add_part. */
static int add_diff_part(void *ctx, const pd_storage_agg_part *part, const pd_profile *p,
                         pd_err *err)
{
    refs_ctx *c = ctx;
    return add_part(&c[part->side ? 1 : 0], part, p, err);
}

/* A diff: both sides planned, then, without deltas, summed in one pass by
 * the store (pd_storage_aggregate_diff: the parts two add_refs give, so the
 * same answer); with deltas on a side, one side after the other. */
static int add_diff(pd_storage *st, pd_merge *m, const pd_query_refs *base,
                    const pd_query_refs *cur, const pd_merge_options *o, size_t *series, bool *dcur,
                    bool *dbase, pd_err *err)
{
    refs_plan pc, pb;
    memset(&pb, 0, sizeof pb);
    int rc = plan_refs(st, cur, o, &pc, err);
    *dcur = pc.delta;
    if (rc >= 0 && pc.delta) { /* the new side first, then the base, as before */
        rc = sum_refs(st, m, cur, false, &pc, series, err);
        if (rc >= 0)
            rc = add_refs(st, m, base, o, true, series, dbase, err);
        goto out;
    }
    if (rc >= 0)
        rc = plan_refs(st, base, o, &pb, err);
    *dbase = pb.delta;
    if (rc >= 0 && (pb.delta || pb.filter)) { /* (the one pass has no sample filter) */
        rc = sum_refs(st, m, cur, false, &pc, series, err);
        if (rc >= 0)
            rc = sum_refs(st, m, base, true, &pb, series, err);
        goto out;
    }
    if (rc >= 0) {
        refs_ctx c[2] = {{.m = m, .q = cur, .base = false}, {.m = m, .q = base, .base = true}};
        pd_buf_init(&c[0].name, 4096);
        pd_buf_init(&c[1].name, 4096);
        pd_storage_agg_side sd[2] = {
            {.refs = pc.refs, .group = pc.group, .n = cur->n, .mint = cur->from, .maxt = cur->to},
            {.refs = pb.refs,
             .group = pb.group,
             .n = base->n,
             .mint = base->from,
             .maxt = base->to},
        };
        rc = pd_storage_aggregate_diff(st, sd, add_diff_part, poll_part, c, err);
        *series += sd[0].n_series + sd[1].n_series;
        pd_buf_release(&c[0].name);
        pd_buf_release(&c[1].name);
    }
out:
    refs_plan_release(&pc);
    refs_plan_release(&pb);
    return rc;
}

int pd_query_merge_refs(pd_storage *st, const pd_query_refs *base, const pd_query_refs *cur,
                        const pd_merge_options *o, pd_profile *out, pd_merge_stats *stats,
                        pd_err *err)
{
    pd_merge *m = NULL;
    size_t series = 0;
    bool dcur = false, dbase = false;
    memset(out, 0, sizeof *out);
    int rc = pd_merge_new(o, &m, err);
    if (rc < 0)
        return rc;
    if (base) {
        if ((rc = add_diff(st, m, base, cur, o, &series, &dcur, &dbase, err)) < 0)
            goto out;
    } else if ((rc = add_refs(st, m, cur, o, false, &series, &dcur, err)) < 0) {
        goto out;
    }
    if (stats) {
        pd_merge_get_stats(m, stats);
        stats->series = series;
        stats->delta = dcur || dbase;
    }
    rc = pd_merge_finish(m, out, err);
    if (rc == 0)
        pd__query_symbolize(out);
out:
    pd_merge_free(m);
    return rc;
}

int pd_query_keep_sample_type(pd_profile *p, size_t index, pd_err *err)
{
    if (index >= p->n_sample_type)
        return pd_err_set(err, PD_EINVAL, "sample type %zu: the profile has %zu", index,
                          p->n_sample_type);
    for (size_t i = 0; i < p->n_sample; i++) {
        pd_pprof_sample *s = &p->sample[i];
        if (index < s->n_value)
            s->value[0] = s->value[index];
        s->n_value = 1;
    }
    p->sample_type[0] = p->sample_type[index];
    p->n_sample_type = 1;
    p->default_sample_type = 0;
    return 0;
}

void pd__query_symbolize(pd_profile *p)
{
    pd_symbolizer *s = pd_symbolizer_global();
    if (!s)
        return;
    pd_err err;
    if (pd_symbolizer_profile(s, p, &err) < 0)
        pd_log_warn("symbolization failed", "err=\"%s\"", err.msg);
}
