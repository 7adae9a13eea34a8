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
static int poll_part(void *ctx, pd_err *err) { return pd_merge_check(((refs_ctx *)ctx)->m, err); }

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

/* Sums q's profiles inside the store (pd_storage_aggregate: by stack id,
 * per block and group of series as by= allows; with deltas,
 * pd_storage_aggregate_delta) and folds the sums into m. */
static int add_refs(pd_storage *st, pd_merge *m, const pd_query_refs *q, const pd_merge_options *o,
                    bool base, size_t *series, bool *delta, pd_err *err)
{
    const char *by = o ? o->by : NULL;
    refs_ctx c = {.m = m, .q = q, .base = base};
    pd_buf_init(&c.name, 4096);
    size_t n1 = q->n ? q->n : 1;
    uint64_t *refs = malloc(n1 * sizeof *refs);
    uint32_t *group = malloc(n1 * sizeof *group);
    const pd_series_info **v = malloc(n1 * sizeof *v);
    uint64_t *mask = malloc(n1 * sizeof *mask);
    size_t n_count = 0;
    int rc = refs && group && v && mask ? 0 : PD_ENOMEM;
    for (size_t i = 0; !rc && i < q->n; i++) {
        refs[i] = q->series[i].ref;
        v[i] = &q->series[i];
    }
    if (!rc)
        rc = pd__query_groups(v, q->n, by, group);
    if (rc == PD_ENOMEM) {
        pd_err_set(err, rc, "merge: out of memory");
    } else if ((rc = delta_plan(st, o, q, mask, &n_count, delta, err)) >= 0) {
        pd_merge_stats before, after;
        pd_merge_get_stats(m, &before);
        size_t n_deltas = 0;
        rc = pd_storage_aggregate_delta(st, refs, group, *delta ? mask : NULL, q->n, q->from, q->to,
                                        add_part, poll_part, &c, &c.series, &n_deltas, err);
        if (rc >= 0 && *delta) {
            pd_merge_get_stats(m, &after);
            pd__merge_recount(m, base, after.profiles - before.profiles, n_count + n_deltas);
        }
    }
    *series += c.series; /* series with profiles in the range */
    free(refs);
    free(group);
    free(v);
    free(mask);
    pd_buf_release(&c.name);
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
    /* the new side first, then the base: pprof's order for -diff_base */
    if ((rc = add_refs(st, m, cur, o, false, &series, &dcur, err)) < 0)
        goto out;
    if (base && (rc = add_refs(st, m, base, o, true, &series, &dbase, err)) < 0)
        goto out;
    if (stats) {
        pd_merge_get_stats(m, stats);
        stats->series = series;
        stats->delta = dcur || dbase;
    }
    rc = pd_merge_finish(m, out, err);
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
