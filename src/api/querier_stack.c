/*
 * api/querier_stack.c — Pyroscope's StackTraceSelector (types.v1, vendored
 * third_party/grafana-pyroscope/types/v1/types.proto) applied to a merged
 * profile, for SelectMergeStacktraces, SelectMergeProfile and SelectSeries.
 *
 * The profile is rebuilt with the pprof builder (so equal stacks that the
 * selector makes equal are joined, values added):
 *   call_site [c0, c1, ..]  keeps the samples whose stack, read from the
 *                           root and with inlined frames expanded (a
 *                           location's lines outermost first), starts with
 *                           functions named c0, c1, ..; stacks are kept
 *                           whole (Pyroscope's "only stack traces having
 *                           the prefix")
 *   go_pgo                  (call_site then ignored, as upstream) keeps the
 *                           keep_locations leaf-most locations of each stack
 *                           (0: all); aggregate_callees sets the line
 *                           numbers of the leaf location's innermost line to
 *                           0 (a variant location), so the callee's samples
 *                           are joined whatever line they were at (at one
 *                           address: locations at different addresses stay
 *                           apart, as pprof's Merge keeps them upstream)
 * Sample labels, sample types, period, times, comments and the other
 * profile fields are kept. In a diff (pd_query_diff's shape: base samples
 * labelled pprof::base=true) each side gets its own selector, as
 * Pyroscope's Diff selects each side with its own request.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "api/querier_int.h"
#include "base/u64map.h"

bool pd__stack_selector_active(const pd__stack_selector *s)
{
    return s && (s->go_pgo || s->n_call_site > 0);
}

/* Whether sample s's stack, root first with inlined frames expanded,
 * starts with the selector's call site. */
static bool call_site_match(const pd_profile *p, const pd_pprof_sample *s,
                            const pd__stack_selector *sel)
{
    size_t j = 0;
    for (size_t li = s->n_location; li-- > 0 && j < sel->n_call_site;) {
        const pd_pprof_location *l = pd_profile_location(p, s->location_id[li]);
        if (!l)
            return false;
        if (!l->n_line) /* an address-only frame names no function */
            return false;
        for (size_t k = l->n_line; k-- > 0 && j < sel->n_call_site; j++) {
            const pd_pprof_function *f = pd_profile_function(p, l->line[k].function_id);
            const char *nm = f ? pd_profile_str(p, f->name) : NULL;
            if (!nm || strcmp(nm, sel->call_site[j]) != 0)
                return false;
        }
    }
    return j == sel->n_call_site;
}

typedef struct rb {
    const pd_profile *p;
    pd_profile_builder *b;
    pd_u64map loc, fn, map, leaf; /* old id -> new id */
    pd_err *err;
} rb;

static int str_of(rb *r, int64_t i, int64_t *out)
{
    if (i <= 0) {
        *out = 0;
        return 0;
    }
    int64_t k = pd_profile_builder_string(r->b, pd_profile_str(r->p, i), r->err);
    if (k < 0)
        return (int)k;
    *out = k;
    return 0;
}

static int fn_of(rb *r, uint64_t id, uint64_t *out)
{
    uint64_t v;
    if (!id) {
        *out = 0;
        return 0;
    }
    if (pd_u64map_get(&r->fn, id, &v)) {
        *out = v;
        return 0;
    }
    const pd_pprof_function *f = pd_profile_function(r->p, id);
    if (!f)
        return pd_err_set(r->err, PD_EINVAL, "function %" PRIu64 " missing", id);
    int rc = pd_profile_builder_function(
        r->b, pd_profile_str(r->p, f->name), pd_profile_str(r->p, f->system_name),
        pd_profile_str(r->p, f->filename), f->start_line, &v, r->err);
    if (rc < 0 || (rc = pd_u64map_put(&r->fn, id, v)) < 0)
        return rc;
    *out = v;
    return 0;
}

static int loc_of(rb *r, uint64_t id, bool leaf_variant, uint64_t *out)
{
    uint64_t v;
    pd_u64map *m = leaf_variant ? &r->leaf : &r->loc;
    if (pd_u64map_get(m, id, &v)) {
        *out = v;
        return 0;
    }
    const pd_pprof_location *l = pd_profile_location(r->p, id);
    if (!l)
        return pd_err_set(r->err, PD_EINVAL, "location %" PRIu64 " missing", id);
    uint64_t mid = 0;
    int rc;
    if (l->mapping_id && !pd_u64map_get(&r->map, l->mapping_id, &mid)) {
        const pd_pprof_mapping *pm = pd_profile_mapping(r->p, l->mapping_id);
        if (!pm)
            return pd_err_set(r->err, PD_EINVAL, "mapping %" PRIu64 " missing", l->mapping_id);
        if ((rc = pd_profile_builder_mapping(r->b, pm, pd_profile_str(r->p, pm->filename),
                                             pd_profile_str(r->p, pm->build_id), &mid, r->err)) <
                0 ||
            (rc = pd_u64map_put(&r->map, l->mapping_id, mid)) < 0)
            return rc;
    }
    pd_pprof_line lines[64];
    size_t n = l->n_line < 64 ? l->n_line : 64;
    for (size_t k = 0; k < n; k++) {
        lines[k] = l->line[k];
        if ((rc = fn_of(r, l->line[k].function_id, &lines[k].function_id)) < 0)
            return rc;
    }
    if (leaf_variant && n)
        lines[0].line = 0;
    if ((rc = pd_profile_builder_location(r->b, mid, l->address, lines, n, &v, r->err)) < 0 ||
        (rc = pd_u64map_put(m, id, v)) < 0)
        return rc;
    *out = v;
    return 0;
}

/* Whether s carries the diff base label pprof::base=true. */
static bool is_base(const pd_profile *p, const pd_pprof_sample *s)
{
    for (size_t i = 0; i < s->n_label; i++)
        if (!strcmp(pd_profile_str(p, s->label[i].key), "pprof::base") &&
            !strcmp(pd_profile_str(p, s->label[i].str), "true"))
            return true;
    return false;
}

int pd__stack_select(pd_profile *p, const pd__stack_selector *sel, const pd_pprof_limits *lim,
                     pd_err *err)
{
    return pd__stack_select_diff(p, sel, sel, lim, err);
}

int pd__stack_select_diff(pd_profile *p, const pd__stack_selector *base,
                          const pd__stack_selector *cur, const pd_pprof_limits *lim, pd_err *err)
{
    static const pd__stack_selector none;
    if (!pd__stack_selector_active(base) && !pd__stack_selector_active(cur))
        return 0;
    base = pd__stack_selector_active(base) ? base : &none;
    cur = pd__stack_selector_active(cur) ? cur : &none;
    rb r = {.p = p, .err = err};
    pd_u64map_init(&r.loc);
    pd_u64map_init(&r.fn);
    pd_u64map_init(&r.map);
    pd_u64map_init(&r.leaf);
    uint64_t *locs = NULL;
    pd_pprof_label *labs = NULL;
    size_t cap_l = 0, cap_b = 0;
    int rc = pd_profile_builder_new(lim, &r.b);
    if (rc < 0)
        return pd_err_set(err, rc, "out of memory");
    for (size_t i = 0; i < p->n_sample_type; i++)
        if ((rc = pd_profile_builder_sample_type(r.b, pd_profile_str(p, p->sample_type[i].type),
                                                 pd_profile_str(p, p->sample_type[i].unit), err)) <
            0)
            goto out;
    if ((rc = pd_profile_builder_period(r.b, pd_profile_str(p, p->period_type.type),
                                        pd_profile_str(p, p->period_type.unit), p->period, err)) <
        0)
        goto out;
    for (size_t i = 0; i < p->n_comment; i++)
        if ((rc = pd_profile_builder_comment(r.b, pd_profile_str(p, p->comment[i]), err)) < 0)
            goto out;
    pd_profile *np = pd_profile_builder_profile(r.b);
    np->time_nanos = p->time_nanos;
    np->duration_nanos = p->duration_nanos;
    if ((rc = str_of(&r, p->drop_frames, &np->drop_frames)) < 0 ||
        (rc = str_of(&r, p->keep_frames, &np->keep_frames)) < 0 ||
        (rc = str_of(&r, p->doc_url, &np->doc_url)) < 0 ||
        (rc = str_of(&r, p->default_sample_type, &np->default_sample_type)) < 0)
        goto out;
    for (size_t si = 0; si < p->n_sample; si++) {
        const pd_pprof_sample *s = &p->sample[si];
        const pd__stack_selector *sel = base == cur ? cur : is_base(p, s) ? base : cur;
        if (!sel->go_pgo && sel->n_call_site && !call_site_match(p, s, sel))
            continue;
        size_t n = s->n_location;
        if (sel->go_pgo && sel->keep_locations && n > sel->keep_locations)
            n = sel->keep_locations;
        if (n > cap_l) {
            uint64_t *nl = realloc(locs, n * sizeof *nl);
            if (!nl) {
                rc = pd_err_set(err, PD_ENOMEM, "out of memory");
                goto out;
            }
            locs = nl;
            cap_l = n;
        }
        for (size_t k = 0; k < n; k++)
            if ((rc = loc_of(&r, s->location_id[k], sel->go_pgo && sel->aggregate_callees && k == 0,
                             &locs[k])) < 0)
                goto out;
        if (s->n_label > cap_b) {
            pd_pprof_label *nb = realloc(labs, s->n_label * sizeof *nb);
            if (!nb) {
                rc = pd_err_set(err, PD_ENOMEM, "out of memory");
                goto out;
            }
            labs = nb;
            cap_b = s->n_label;
        }
        for (size_t k = 0; k < s->n_label; k++) {
            labs[k] = s->label[k];
            if ((rc = str_of(&r, s->label[k].key, &labs[k].key)) < 0 ||
                (rc = str_of(&r, s->label[k].str, &labs[k].str)) < 0 ||
                (rc = str_of(&r, s->label[k].num_unit, &labs[k].num_unit)) < 0)
                goto out;
        }
        if ((rc = pd_profile_builder_sample(r.b, locs, n, s->value, labs, s->n_label, err)) < 0)
            goto out;
    }
    pd_profile out;
    if ((rc = pd_profile_builder_finish(r.b, &out, err)) < 0)
        goto out;
    pd_profile_release(p);
    *p = out;
out:
    free(locs);
    free(labs);
    pd_profile_builder_free(r.b);
    pd_u64map_release(&r.loc);
    pd_u64map_release(&r.fn);
    pd_u64map_release(&r.map);
    pd_u64map_release(&r.leaf);
    return rc;
}
