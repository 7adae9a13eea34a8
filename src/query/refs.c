/*
 * query/refs.c — merges over series the caller already selected (query.h:
 * pd_query_merge_refs), and keeping one sample type of a profile.
 *
 * The same pd_merge as pd_query_merge, fed by pd_storage_aggregate: the
 * profiles of each block are summed inside the store by stack id and each
 * sum folded in, so memory follows the result, not the inputs.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "query/query.h"

typedef struct refs_ctx {
    pd_merge *m;
    const pd_query_refs *q;
    bool base;
    pd_buf name;
    size_t series, last; /* series with profiles; the last counted + 1 */
} refs_ctx;

/* pd_storage_aggregate's callback: one part (a block's sum, or one head
 * profile) into the merger. */
static int add_part(void *ctx, const pd_storage_agg_part *part, const pd_profile *p, pd_err *err)
{
    refs_ctx *c = ctx;
    const pd_series_info *si = &c->q->series[part->series];
    if (c->last != part->series + 1) {
        c->series++;
        c->last = part->series + 1;
    }
    pd_buf_reset(&c->name);
    pd_buf_puts(&c->name, "series ");
    pd_labels_format(&si->labels, &c->name);
    if (part->n_profiles > 1)
        pd_buf_printf(&c->name, " from %" PRId64 " to %" PRId64 " ms (%zu profiles)%s",
                      part->min_ts, part->max_ts, part->n_profiles, c->base ? " (base)" : "");
    else
        pd_buf_printf(&c->name, " at %" PRId64 " ms%s", part->min_ts, c->base ? " (base)" : "");
    return pd_merge_add_n(c->m, p, &si->labels, c->base, c->name.data, part->n_profiles, err);
}

/* Sums q's profiles inside the store (pd_storage_aggregate: by stack id,
 * per block) and folds the sums into m. */
static int add_refs(pd_storage *st, pd_merge *m, const pd_query_refs *q, bool base,
                    size_t *series, pd_err *err)
{
    refs_ctx c = {.m = m, .q = q, .base = base};
    pd_buf_init(&c.name, 4096);
    uint64_t *refs = malloc((q->n ? q->n : 1) * sizeof *refs);
    int rc = refs ? 0 : pd_err_set(err, PD_ENOMEM, "merge: out of memory");
    for (size_t i = 0; refs && i < q->n; i++)
        refs[i] = q->series[i].ref;
    if (refs)
        rc = pd_storage_aggregate(st, refs, q->n, q->from, q->to, add_part, &c, err);
    *series += c.series;
    free(refs);
    pd_buf_release(&c.name);
    return rc;
}

int pd_query_merge_refs(pd_storage *st, const pd_query_refs *base, const pd_query_refs *cur,
                        const pd_merge_options *o, pd_profile *out, pd_merge_stats *stats,
                        pd_err *err)
{
    pd_merge *m = NULL;
    size_t series = 0;
    memset(out, 0, sizeof *out);
    int rc = pd_merge_new(o, &m, err);
    if (rc < 0)
        return rc;
    /* the new side first, then the base: pprof's order for -diff_base */
    if ((rc = add_refs(st, m, cur, false, &series, err)) < 0)
        goto out;
    if (base && (rc = add_refs(st, m, base, true, &series, err)) < 0)
        goto out;
    if (stats) {
        pd_merge_get_stats(m, stats);
        stats->series = series;
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
