/*
 * api/merge.c — pd__merger: merges pprof profiles one at a time into a
 * pd_profile_builder (rules and ownership: api_int.h).
 *
 * For each added profile, its mappings, functions and locations are
 * re-added to the builder (which deduplicates them by content and hands out
 * new ids); three u64maps translate the profile's ids to the builder's for
 * the duration of that add. Samples are then added with translated stacks
 * and re-interned label strings; the builder adds the values of samples with
 * equal stack and labels. Scalars (time, duration, period, comments) are
 * accumulated here and written into the builder's profile at finish.
 */
#include <stdlib.h>
#include <string.h>

#include "api/api_int.h"

struct pd__merger {
    pd_profile_builder *b;
    size_t n_added;
    size_t n_types;
    char **types, **units; /* sample types of the first profile */
    int64_t time_nanos, duration_nanos, period;
    pd_u64map comments; /* builder string index of a comment -> 1 */
};

int pd__merger_new(const pd_pprof_limits *lim, pd__merger **out)
{
    *out = NULL;
    pd__merger *m = calloc(1, sizeof *m);
    if (!m)
        return PD_ENOMEM;
    if (pd_profile_builder_new(lim, &m->b) < 0) {
        free(m);
        return PD_ENOMEM;
    }
    pd_u64map_init(&m->comments);
    *out = m;
    return 0;
}

void pd__merger_free(pd__merger *m)
{
    if (!m)
        return;
    pd_profile_builder_free(m->b);
    for (size_t i = 0; i < m->n_types; i++) {
        free(m->types[i]);
        free(m->units[i]);
    }
    free(m->types);
    free(m->units);
    pd_u64map_release(&m->comments);
    free(m);
}

size_t pd__merger_count(const pd__merger *m)
{
    return m->n_added;
}

/* First profile: declares its sample types and period type. */
static int take_types(pd__merger *m, const pd_profile *p, pd_err *err)
{
    int rc;
    m->types = calloc(p->n_sample_type ? p->n_sample_type : 1, sizeof *m->types);
    m->units = calloc(p->n_sample_type ? p->n_sample_type : 1, sizeof *m->units);
    if (!m->types || !m->units)
        return pd_err_set(err, PD_ENOMEM, "merge: out of memory");
    for (size_t i = 0; i < p->n_sample_type; i++) {
        const char *t = pd_profile_str(p, p->sample_type[i].type);
        const char *u = pd_profile_str(p, p->sample_type[i].unit);
        m->types[i] = strdup(t);
        m->units[i] = strdup(u);
        m->n_types = i + 1;
        if (!m->types[i] || !m->units[i])
            return pd_err_set(err, PD_ENOMEM, "merge: out of memory");
        if ((rc = pd_profile_builder_sample_type(m->b, t, u, err)) < 0)
            return rc;
    }
    if ((rc = pd_profile_builder_period(m->b, pd_profile_str(p, p->period_type.type),
                                        pd_profile_str(p, p->period_type.unit), p->period, err)) <
        0)
        return rc;
    pd_profile *bp = pd_profile_builder_profile(m->b);
    int64_t s;
    const int64_t fields[4] = {p->default_sample_type, p->doc_url, p->drop_frames, p->keep_frames};
    int64_t *dst[4] = {&bp->default_sample_type, &bp->doc_url, &bp->drop_frames, &bp->keep_frames};
    for (int i = 0; i < 4; i++) {
        if (!fields[i])
            continue;
        if ((s = pd_profile_builder_string(m->b, pd_profile_str(p, fields[i]), err)) < 0)
            return (int)s;
        *dst[i] = s;
    }
    return 0;
}

static int check_types(const pd__merger *m, const pd_profile *p, pd_err *err)
{
    bool same = p->n_sample_type == m->n_types;
    for (size_t i = 0; same && i < m->n_types; i++)
        same = !strcmp(m->types[i], pd_profile_str(p, p->sample_type[i].type)) &&
               !strcmp(m->units[i], pd_profile_str(p, p->sample_type[i].unit));
    if (same)
        return 0;
    return pd_err_set(err, PD_EINVAL,
                      "cannot merge profiles with different sample types: the first has %zu "
                      "(%s/%s...), profile %zu has %zu (%s/%s...)",
                      m->n_types, m->n_types ? m->types[0] : "", m->n_types ? m->units[0] : "",
                      m->n_added + 1, p->n_sample_type,
                      p->n_sample_type ? pd_profile_str(p, p->sample_type[0].type) : "",
                      p->n_sample_type ? pd_profile_str(p, p->sample_type[0].unit) : "");
}

static int add_comments(pd__merger *m, const pd_profile *p, pd_err *err)
{
    for (size_t i = 0; i < p->n_comment; i++) {
        int64_t s = pd_profile_builder_string(m->b, pd_profile_str(p, p->comment[i]), err);
        if (s < 0)
            return (int)s;
        if (pd_u64map_get(&m->comments, (uint64_t)s, NULL))
            continue;
        int rc = pd_u64map_put(&m->comments, (uint64_t)s, 1);
        if (rc == 0)
            rc = pd_profile_builder_comment(m->b, pd_profile_str(p, p->comment[i]), err);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int pd__merger_add(pd__merger *m, const pd_profile *p, const int64_t *scale, pd_err *err)
{
    int rc = 0;
    pd_u64map mapid, fnid, locid;
    pd_u64map_init(&mapid);
    pd_u64map_init(&fnid);
    pd_u64map_init(&locid);
    pd_pprof_line *lines = NULL;
    size_t cap_lines = 0;
    uint64_t *stack = NULL;
    pd_pprof_label *labels = NULL;
    int64_t *vals = NULL;
    size_t cap_stack = 0, cap_labels = 0;

    if (m->n_added == 0)
        rc = take_types(m, p, err);
    else
        rc = check_types(m, p, err);
    if (rc < 0)
        goto out;
    if ((rc = add_comments(m, p, err)) < 0)
        goto out;
    if (scale && !(vals = malloc((p->n_sample_type ? p->n_sample_type : 1) * sizeof *vals))) {
        rc = PD_ENOMEM;
        goto out;
    }

    for (size_t i = 0; i < p->n_mapping; i++) {
        const pd_pprof_mapping *mp = &p->mapping[i];
        uint64_t id;
        if ((rc = pd_profile_builder_mapping(m->b, mp, pd_profile_str(p, mp->filename),
                                             pd_profile_str(p, mp->build_id), &id, err)) < 0 ||
            (rc = pd_u64map_put(&mapid, mp->id, id)) < 0)
            goto out;
    }
    for (size_t i = 0; i < p->n_function; i++) {
        const pd_pprof_function *f = &p->function[i];
        uint64_t id;
        if ((rc = pd_profile_builder_function(
                 m->b, pd_profile_str(p, f->name), pd_profile_str(p, f->system_name),
                 pd_profile_str(p, f->filename), f->start_line, &id, err)) < 0 ||
            (rc = pd_u64map_put(&fnid, f->id, id)) < 0)
            goto out;
    }
    for (size_t i = 0; i < p->n_location; i++) {
        const pd_pprof_location *l = &p->location[i];
        if (l->n_line > cap_lines) {
            free(lines);
            cap_lines = l->n_line;
            if (!(lines = malloc(cap_lines * sizeof *lines))) {
                rc = PD_ENOMEM;
                goto out;
            }
        }
        for (size_t k = 0; k < l->n_line; k++) {
            uint64_t fid = 0;
            if (l->line[k].function_id && !pd_u64map_get(&fnid, l->line[k].function_id, &fid)) {
                rc = pd_err_set(err, PD_EINVAL, "location %llu: function %llu not found",
                                (unsigned long long)l->id,
                                (unsigned long long)l->line[k].function_id);
                goto out;
            }
            lines[k] = l->line[k];
            lines[k].function_id = fid;
        }
        uint64_t mid = 0, id;
        if (l->mapping_id && !pd_u64map_get(&mapid, l->mapping_id, &mid)) {
            rc = pd_err_set(err, PD_EINVAL, "location %llu: mapping %llu not found",
                            (unsigned long long)l->id, (unsigned long long)l->mapping_id);
            goto out;
        }
        if ((rc = pd_profile_builder_location(m->b, mid, l->address, lines, l->n_line, &id, err)) <
                0 ||
            (rc = pd_u64map_put(&locid, l->id, id)) < 0)
            goto out;
    }
    for (size_t i = 0; i < p->n_sample; i++) {
        const pd_pprof_sample *s = &p->sample[i];
        if (s->n_location > cap_stack) {
            free(stack);
            cap_stack = s->n_location;
            if (!(stack = malloc(cap_stack * sizeof *stack))) {
                rc = PD_ENOMEM;
                goto out;
            }
        }
        if (s->n_label > cap_labels) {
            free(labels);
            cap_labels = s->n_label;
            if (!(labels = malloc(cap_labels * sizeof *labels))) {
                rc = PD_ENOMEM;
                goto out;
            }
        }
        for (size_t k = 0; k < s->n_location; k++) {
            if (!pd_u64map_get(&locid, s->location_id[k], &stack[k])) {
                rc = pd_err_set(err, PD_EINVAL, "sample %zu: location %llu not found", i,
                                (unsigned long long)s->location_id[k]);
                goto out;
            }
        }
        for (size_t k = 0; k < s->n_label; k++) {
            const pd_pprof_label *lb = &s->label[k];
            int64_t key = pd_profile_builder_string(m->b, pd_profile_str(p, lb->key), err);
            int64_t str =
                lb->str ? pd_profile_builder_string(m->b, pd_profile_str(p, lb->str), err) : 0;
            int64_t nu = lb->num_unit
                             ? pd_profile_builder_string(m->b, pd_profile_str(p, lb->num_unit), err)
                             : 0;
            if (key < 0 || str < 0 || nu < 0) {
                rc = (int)(key < 0 ? key : str < 0 ? str : nu);
                goto out;
            }
            labels[k] = (pd_pprof_label){.key = key, .str = str, .num = lb->num, .num_unit = nu};
        }
        const int64_t *sv = s->value;
        if (scale) {
            for (size_t k = 0; k < s->n_value && k < p->n_sample_type; k++) {
                if (__builtin_mul_overflow(s->value[k], scale[k], &vals[k])) {
                    rc = pd_err_set(err, PD_EINVAL, "sample %zu: value %lld overflows when scaled",
                                    i, (long long)s->value[k]);
                    goto out;
                }
            }
            sv = vals;
        }
        if ((rc = pd_profile_builder_sample(m->b, stack, s->n_location, sv, labels, s->n_label,
                                            err)) < 0)
            goto out;
    }

    if (p->time_nanos && (!m->time_nanos || p->time_nanos < m->time_nanos))
        m->time_nanos = p->time_nanos;
    if (__builtin_add_overflow(m->duration_nanos, p->duration_nanos, &m->duration_nanos))
        m->duration_nanos = INT64_MAX;
    if (p->period > m->period)
        m->period = p->period;
    m->n_added++;
out:
    if (rc == PD_ENOMEM && !err->msg[0])
        pd_err_set(err, PD_ENOMEM, "merge: out of memory");
    free(lines);
    free(stack);
    free(labels);
    free(vals);
    pd_u64map_release(&mapid);
    pd_u64map_release(&fnid);
    pd_u64map_release(&locid);
    return rc;
}

int pd__merger_finish(pd__merger *m, bool drop_zero, pd_profile *out, pd_err *err)
{
    memset(out, 0, sizeof *out);
    if (m->n_added == 0)
        return pd_err_set(err, PD_EINVAL, "merge: no profiles");
    pd_profile *bp = pd_profile_builder_profile(m->b);
    bp->time_nanos = m->time_nanos;
    bp->duration_nanos = m->duration_nanos;
    bp->period = m->period;
    int rc = pd_profile_builder_finish(m->b, out, err);
    if (rc < 0 || !drop_zero)
        return rc;
    size_t k = 0;
    for (size_t i = 0; i < out->n_sample; i++) {
        bool zero = true;
        for (size_t j = 0; zero && j < out->sample[i].n_value; j++)
            zero = out->sample[i].value[j] == 0;
        if (!zero)
            out->sample[k++] = out->sample[i];
    }
    out->n_sample = k;
    return 0;
}
