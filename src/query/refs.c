/*
 * query/refs.c — merges over series the caller already selected (query.h:
 * pd_query_merge_refs), and keeping one sample type of a profile.
 *
 * The same pd_merge as pd_query_merge: profiles are read one at a time
 * (pd_storage_read_profile) and folded in, so memory follows the result.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include "query/query.h"

static int add_refs(pd_storage *st, pd_merge *m, const pd_query_refs *q, bool base,
                    size_t *series, pd_err *err)
{
    pd_buf name;
    pd_buf_init(&name, 4096);
    int rc = 0;
    for (size_t i = 0; i < q->n && rc >= 0; i++) {
        const pd_series_info *si = &q->series[i];
        pd_points pts = {0};
        rc = pd_storage_read_points(st, si->ref, q->from, q->to, &pts, err);
        if (rc == PD_ENOTFOUND) {
            rc = 0;
            continue;
        }
        if (rc < 0)
            break;
        if (pts.n)
            (*series)++;
        for (size_t j = 0; j < pts.n && rc >= 0; j++) {
            pd_profile p;
            rc = pd_storage_read_profile(st, si->ref, pts.v[j].ts_ms, &p, NULL, err);
            if (rc == PD_ENOTFOUND) { /* deleted since (retention) */
                rc = 0;
                continue;
            }
            if (rc < 0)
                break;
            pd_buf_reset(&name);
            pd_buf_puts(&name, "series ");
            pd_labels_format(&si->labels, &name);
            pd_buf_printf(&name, " at %" PRId64 " ms%s", pts.v[j].ts_ms, base ? " (base)" : "");
            rc = pd_merge_add(m, &p, &si->labels, base, name.data, err);
            pd_profile_release(&p);
        }
        pd_points_release(&pts);
    }
    pd_buf_release(&name);
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
