/* A minimal in-memory implementation of storage/storage.h, used only by
 * test_query_engine_mockstore so the query engine's tests run without the
 * real store (and independently of it). Not thread-safe; no durability.
 * Semantics follow storage.h: select sorts by labels and keeps series with a
 * profile in [mint, maxt]; points ascend; read_profile decodes the body. */
#include <stdlib.h>
#include <string.h>

#include "storage/storage.h"

typedef struct mprof {
    int64_t ts;
    uint8_t *body;
    size_t len;
    size_t n_types;
    char **type, **unit;
    int64_t *totals;
} mprof;

typedef struct mseries {
    pd_labels labels;
    mprof *p;
    size_t n;
} mseries;

struct pd_storage {
    mseries *s;
    size_t n;
};

pd_storage_options pd_storage_options_default(void)
{
    pd_storage_options o = {0};
    o.path = "./data";
    o.fsync = PD_FSYNC_BATCH;
    o.limits = pd_pprof_limits_default();
    return o;
}

int pd_storage_open(const pd_storage_options *opts, pd_storage **out, pd_err *err)
{
    (void)opts;
    (void)err;
    *out = calloc(1, sizeof **out);
    return *out ? 0 : PD_ENOMEM;
}

void pd_storage_close(pd_storage *st)
{
    if (!st)
        return;
    for (size_t i = 0; i < st->n; i++) {
        mseries *se = &st->s[i];
        for (size_t j = 0; j < se->n; j++) {
            mprof *p = &se->p[j];
            for (size_t t = 0; t < p->n_types; t++) {
                free(p->type[t]);
                free(p->unit[t]);
            }
            free(p->type);
            free(p->unit);
            free(p->totals);
            free(p->body);
        }
        free(se->p);
        pd_labels_release(&se->labels);
    }
    free(st->s);
    free(st);
}

int pd_storage_append(pd_storage *st, const pd_labels *labels, int64_t ts_ms, const uint8_t *body,
                      size_t len, const pd_profile *profile, pd_err *err)
{
    if (!pd_labels_get(labels, "__name__"))
        return pd_err_set(err, PD_EINVAL, "no __name__");
    mseries *se = NULL;
    for (size_t i = 0; i < st->n; i++)
        if (pd_labels_cmp(&st->s[i].labels, labels) == 0)
            se = &st->s[i];
    if (!se) {
        st->s = realloc(st->s, (st->n + 1) * sizeof *st->s);
        se = &st->s[st->n++];
        memset(se, 0, sizeof *se);
        pd_labels_copy(&se->labels, labels);
    }
    size_t at = se->n;
    for (size_t j = 0; j < se->n; j++) {
        if (se->p[j].ts == ts_ms)
            return PD_EEXIST;
        if (se->p[j].ts > ts_ms && at == se->n)
            at = j;
    }
    se->p = realloc(se->p, (se->n + 1) * sizeof *se->p);
    memmove(&se->p[at + 1], &se->p[at], (se->n - at) * sizeof *se->p);
    se->n++;
    mprof *p = &se->p[at];
    memset(p, 0, sizeof *p);
    p->ts = ts_ms;
    p->body = malloc(len);
    memcpy(p->body, body, len);
    p->len = len;
    p->n_types = profile->n_sample_type;
    p->type = calloc(p->n_types + 1, sizeof *p->type);
    p->unit = calloc(p->n_types + 1, sizeof *p->unit);
    p->totals = calloc(p->n_types + 1, sizeof *p->totals);
    for (size_t t = 0; t < p->n_types; t++) {
        p->type[t] = strdup(pd_profile_str(profile, profile->sample_type[t].type));
        p->unit[t] = strdup(pd_profile_str(profile, profile->sample_type[t].unit));
    }
    pd_profile_totals(profile, p->totals);
    return 0;
}

static int cmp_info(const void *a, const void *b)
{
    return pd_labels_cmp(&((const pd_series_info *)a)->labels,
                         &((const pd_series_info *)b)->labels);
}

int pd_storage_select(pd_storage *st, const pd_matcher *ms, size_t n, int64_t mint, int64_t maxt,
                      pd_series_set *out, pd_err *err)
{
    (void)err;
    out->v = calloc(st->n + 1, sizeof *out->v);
    out->n = 0;
    for (size_t i = 0; i < st->n; i++) {
        mseries *se = &st->s[i];
        if (!pd_matchers_match(ms, n, &se->labels))
            continue;
        pd_series_info si = {.ref = i + 1};
        for (size_t j = 0; j < se->n; j++) {
            if (se->p[j].ts < mint || se->p[j].ts > maxt)
                continue;
            if (!si.n_profiles++)
                si.min_ts = se->p[j].ts;
            si.max_ts = se->p[j].ts;
        }
        if (!si.n_profiles)
            continue;
        pd_labels_copy(&si.labels, &se->labels);
        out->v[out->n++] = si;
    }
    qsort(out->v, out->n, sizeof *out->v, cmp_info);
    return 0;
}

void pd_series_set_release(pd_series_set *set)
{
    for (size_t i = 0; i < set->n; i++)
        pd_labels_release(&set->v[i].labels);
    free(set->v);
    set->v = NULL;
    set->n = 0;
}

int pd_storage_read_points(pd_storage *st, uint64_t ref, int64_t mint, int64_t maxt,
                           pd_points *out, pd_err *err)
{
    (void)err;
    if (ref == 0 || ref > st->n)
        return PD_ENOTFOUND;
    mseries *se = &st->s[ref - 1];
    out->v = calloc(se->n + 1, sizeof *out->v);
    out->n = 0;
    out->priv = NULL;
    for (size_t j = 0; j < se->n; j++) {
        mprof *p = &se->p[j];
        if (p->ts < mint || p->ts > maxt)
            continue;
        pd_point *pt = &out->v[out->n++];
        pt->ts_ms = p->ts;
        pt->n_types = p->n_types;
        pt->types = calloc(p->n_types + 1, sizeof *pt->types);
        pt->totals = calloc(p->n_types + 1, sizeof *pt->totals);
        for (size_t t = 0; t < p->n_types; t++) {
            pt->types[t].type = strdup(p->type[t]);
            pt->types[t].unit = strdup(p->unit[t]);
            pt->totals[t] = p->totals[t];
        }
    }
    return 0;
}

void pd_points_release(pd_points *pts)
{
    for (size_t i = 0; i < pts->n; i++) {
        for (size_t t = 0; t < pts->v[i].n_types; t++) {
            free(pts->v[i].types[t].type);
            free(pts->v[i].types[t].unit);
        }
        free(pts->v[i].types);
        free(pts->v[i].totals);
    }
    free(pts->v);
    pts->v = NULL;
    pts->n = 0;
}

int pd_storage_read_profile(pd_storage *st, uint64_t ref, int64_t ts_ms, pd_profile *out,
                            pd_buf *raw, pd_err *err)
{
    if (ref == 0 || ref > st->n)
        return PD_ENOTFOUND;
    mseries *se = &st->s[ref - 1];
    for (size_t j = 0; j < se->n; j++) {
        if (se->p[j].ts != ts_ms)
            continue;
        if (raw)
            pd_buf_append(raw, se->p[j].body, se->p[j].len);
        return pd_profile_decode(out, se->p[j].body, se->p[j].len, NULL, err);
    }
    return PD_ENOTFOUND;
}

void pd_storage_stats_get(pd_storage *st, pd_storage_stats *out)
{
    memset(out, 0, sizeof *out);
    out->n_series = st->n;
}
