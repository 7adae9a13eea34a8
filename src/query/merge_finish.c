/*
 * query/merge_finish.c — the end of a merge (pd_merge_finish; the state and
 * rules: merge.c's top comment, merge_int.h): pprof's FilterSamplesByName
 * (focus, ignore, hide: the regexes compiled here), a diff's sides scaled,
 * merged samples that sum to zero dropped, the tables compacted (what no
 * sample references removed) and the output's arrays written.
 */
#include "query/query.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/time.h"
#include "query/merge_int.h"
#include "query/query_int.h"

/* ---- the focus/ignore/hide regexes ---- */

void pd__merge_regex_release(regex *r)
{
    if (r->md)
        pcre2_match_data_free(r->md);
    if (r->re)
        pcre2_code_free(r->re);
    memset(r, 0, sizeof *r);
}

int pd__merge_regex_compile(regex *r, const char *what, const char *pat, pd_err *err)
{
    r->what = what;
    if (!pat || !*pat)
        return 0;
    int ecode;
    PCRE2_SIZE eoff;
    r->re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_MATCH_INVALID_UTF, &ecode, &eoff, NULL);
    if (!r->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ecode, msg, sizeof msg);
        return pd_err_set(err, PD_EINVAL, "invalid %s regex \"%.200s\": %s at character %zu", what,
                          pat, (const char *)msg, (size_t)eoff);
    }
    if (!(r->md = pcre2_match_data_create_from_pattern(r->re, NULL))) {
        pd__merge_regex_release(r);
        return pd_err_set(err, PD_ENOMEM, "out of memory compiling the %s regex", what);
    }
    return 0;
}

/* Unanchored search, as Go's regexp.MatchString, under the backtracking
 * limits of labels.h; past them: no match, r->limit_hit, and no more work. */
static bool regex_search(const regex *r, const char *s, size_t len)
{
    if (r->limit_hit)
        return false;
    int rc = pcre2_match(r->re, (PCRE2_SPTR)s, len, 0, 0, r->md, pd_regex_match_context());
    if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT ||
        rc == PCRE2_ERROR_HEAPLIMIT) {
        ((regex *)r)->limit_hit = true; /* never a const object */
        return false;
    }
    return rc >= 0;
}

/* PD_ETOOBIG (a 422) when a focus/ignore/hide regex hit a limit, else 0. */
/* PD_ETOOBIG (a 422) when a focus/ignore/hide regex hit a limit, else 0. */
static int regex_check_limits(const pd_merge *m, pd_err *err);

/* ---- finish: filters, compaction, output arrays ---- */

static bool line_matches(const pd_merge *m, const regex *r, const pd_pprof_line *ln)
{
    if (!ln->function_id)
        return false;
    const pd_pprof_function *f = &m->fn[ln->function_id - 1];
    const pd_profile *o = &m->out;
    return regex_search(r, o->string_table[f->name], o->string_len[f->name]) ||
           regex_search(r, o->string_table[f->filename], o->string_len[f->filename]);
}

static bool mapping_matches(const pd_merge *m, const regex *r, const mloc *l)
{
    if (!l->mapping_id)
        return false;
    int64_t file = m->map[l->mapping_id - 1].filename;
    return regex_search(r, m->out.string_table[file], m->out.string_len[file]);
}

static bool loc_matches(const pd_merge *m, const regex *r, const mloc *l)
{
    for (uint32_t j = 0; j < l->n_line; j++)
        if (line_matches(m, r, &m->lines[l->line_off + j]))
            return true;
    return mapping_matches(m, r, l);
}

/* pprof's FilterSamplesByName on the distinct locations and samples.
 * fi[i]: 1 focused, -1 ignored, 0 neither; hidden[i]: location dropped from
 * stacks; hiding rewrites loc[i]'s lines in place (a subset, in order).
 * keep[s] is cleared for samples the filters drop; stacks are shortened in
 * place. */
static int apply_filters(pd_merge *m, bool *keep, pd_err *err)
{
    int8_t *fi = calloc(m->n_loc + 1, 1);
    bool *hidden = calloc(m->n_loc + 1, sizeof *hidden);
    if (!fi || !hidden) {
        free(fi);
        free(hidden);
        return pd_err_set(err, PD_ENOMEM, "merge: out of memory");
    }
    bool any_hidden = false;
    for (size_t i = 0; i < m->n_loc; i++) {
        mloc *l = &m->loc[i];
        if (m->ignore.re && loc_matches(m, &m->ignore, l))
            fi[i] = -1;
        else if (!m->focus.re || loc_matches(m, &m->focus, l))
            fi[i] = 1;
        if (m->hide.re && loc_matches(m, &m->hide, l)) {
            if (mapping_matches(m, &m->hide, l)) {
                l->n_line = 0;
            } else {
                uint32_t w = 0;
                for (uint32_t j = 0; j < l->n_line; j++) {
                    pd_pprof_line ln = m->lines[l->line_off + j];
                    if (!line_matches(m, &m->hide, &ln))
                        m->lines[l->line_off + w++] = ln;
                }
                l->n_line = w;
            }
            if (l->n_line == 0) {
                hidden[i] = true;
                any_hidden = true;
            }
        }
    }
    for (size_t s = 0; s < m->n_smp; s++) {
        if (!keep[s])
            continue;
        msmp *sp = &m->smp[s];
        uint64_t *stk = &m->stk[sp->stk_off];
        bool focused = false, ignored = false;
        for (uint32_t j = 0; j < sp->n_loc && !ignored; j++) {
            int8_t f = fi[stk[j] - 1];
            if (f < 0)
                ignored = true;
            else if (f > 0)
                focused = true;
        }
        if (ignored || !focused) {
            keep[s] = false;
            continue;
        }
        if (any_hidden) {
            uint32_t w = 0;
            for (uint32_t j = 0; j < sp->n_loc; j++)
                if (!hidden[stk[j] - 1])
                    stk[w++] = stk[j];
            sp->n_loc = w;
            if (w == 0)
                keep[s] = false;
        }
    }
    free(fi);
    free(hidden);
    return 0;
}

static int regex_check_limits(const pd_merge *m, pd_err *err)
{
    const regex *rs[3] = {&m->focus, &m->ignore, &m->hide};
    for (int i = 0; i < 3; i++)
        if (rs[i]->limit_hit)
            return pd_err_set(err, PD_ETOOBIG,
                              "%s regex: matching a frame name ran past the backtracking limit "
                              "(PCRE2 match limit %u, depth limit %u); simplify the regex",
                              rs[i]->what, PD_REGEX_MATCH_LIMIT, PD_REGEX_DEPTH_LIMIT);
    return 0;
}

static bool smp_is_base(const pd_merge *m, size_t s)
{
    const msmp *sp = &m->smp[s];
    for (uint32_t j = 0; j < sp->n_lab; j++)
        if (m->labs[sp->lab_off + j].key == m->base_key &&
            m->labs[sp->lab_off + j].str == m->base_true)
            return true;
    return false;
}

static int64_t scale_round(int64_t v, double f)
{
    double r = (double)v * f;
    r = r < 0 ? r - 0.5 : r + 0.5;
    if (r >= 9.2e18)
        return INT64_MAX;
    if (r <= -9.2e18)
        return INT64_MIN;
    return (int64_t)r;
}

/* Options agg=avg (each side's values divided by its number of profiles)
 * and normalize (pprof's -normalize: the new side scaled so that each
 * sample type's total equals the base side's), applied before the zero-sum
 * drop. Base samples carry pprof::base=true and negated values. */
static void scale_sides(pd_merge *m)
{
    const size_t nt = m->n_type;
    size_t n_new = m->n_inputs - m->n_base_inputs, n_base = m->n_base_inputs;
    double f_new = m->o.agg == PD_MERGE_AVG && n_new ? 1.0 / (double)n_new : 1.0;
    double f_base = m->o.agg == PD_MERGE_AVG && n_base ? 1.0 / (double)n_base : 1.0;
    double fn[64];
    for (size_t v = 0; v < nt && v < 64; v++)
        fn[v] = f_new;
    if (m->o.normalize && n_base && n_new) {
        /* totals of each side after averaging; the base's values are negated */
        double tn[64] = {0}, tb[64] = {0};
        for (size_t s = 0; s < m->n_smp; s++) {
            bool b = smp_is_base(m, s);
            for (size_t v = 0; v < nt && v < 64; v++) {
                if (b)
                    tb[v] -= (double)m->vals[s * nt + v] * f_base;
                else
                    tn[v] += (double)m->vals[s * nt + v] * f_new;
            }
        }
        for (size_t v = 0; v < nt && v < 64; v++)
            if (tn[v] != 0)
                fn[v] = f_new * (tb[v] / tn[v]);
    }
    for (size_t s = 0; s < m->n_smp; s++) {
        bool b = smp_is_base(m, s);
        for (size_t v = 0; v < nt; v++) {
            int64_t *x = &m->vals[s * nt + v];
            *x = scale_round(*x, b ? f_base : (v < 64 ? fn[v] : f_new));
        }
    }
}

void pd__merge_recount(pd_merge *m, bool base, size_t counted, size_t n)
{
    if (counted > m->n_inputs)
        counted = m->n_inputs;
    m->n_inputs = m->n_inputs - counted + n;
    if (base) {
        size_t c = counted < m->n_base_inputs ? counted : m->n_base_inputs;
        m->n_base_inputs = m->n_base_inputs - c + n;
    }
}

int pd_merge_finish(pd_merge *m, pd_profile *out, pd_err *err)
{
    memset(out, 0, sizeof *out);
    if (m->failed)
        return pd_err_set(err, PD_EINVAL, "merge: used after an error");
    if (m->n_inputs == 0)
        return pd_err_set(err, PD_ENOTFOUND, "no profile to merge");
    int rc = 0;
    const size_t nt = m->n_type;
    bool *keep = malloc((m->n_smp + 1) * sizeof *keep);
    uint64_t *loc_new = calloc(m->n_loc + 1, sizeof *loc_new);
    uint64_t *fn_new = calloc(m->n_fn + 1, sizeof *fn_new);
    uint64_t *map_new = calloc(m->n_map + 1, sizeof *map_new);
    if (!keep || !loc_new || !fn_new || !map_new) {
        rc = pd_err_set(err, PD_ENOMEM, "merge: out of memory");
        goto out;
    }
    size_t n_keep = 0;
    if (m->o.agg == PD_MERGE_AVG || m->o.normalize)
        scale_sides(m);
    for (size_t s = 0; s < m->n_smp; s++) {
        bool zero = true;
        for (size_t v = 0; v < nt && zero; v++)
            zero = m->vals[s * nt + v] == 0;
        keep[s] = !zero;
    }
    if (m->focus.re || m->ignore.re || m->hide.re) {
        if ((rc = pd_merge_check(m, err)) < 0 || (rc = apply_filters(m, keep, err)) < 0 ||
            (rc = regex_check_limits(m, err)) < 0)
            goto out;
    }
    /* mark what kept samples reference; new ids in order of first creation */
    size_t n_stk = 0, n_labs = 0;
    for (size_t s = 0; s < m->n_smp; s++) {
        if (!keep[s])
            continue;
        n_keep++;
        const msmp *sp = &m->smp[s];
        n_stk += sp->n_loc;
        n_labs += sp->n_lab;
        for (uint32_t j = 0; j < sp->n_loc; j++)
            loc_new[m->stk[sp->stk_off + j] - 1] = 1;
    }
    size_t n_loc = 0, n_fn = 0, n_map = 0, n_lines = 0;
    /* the main binary stays mapping 1 when anything is kept */
    if (m->n_map && n_keep)
        map_new[0] = 1;
    for (size_t i = 0; i < m->n_loc; i++) {
        if (!loc_new[i])
            continue;
        loc_new[i] = ++n_loc;
        const mloc *l = &m->loc[i];
        n_lines += l->n_line;
        if (l->mapping_id)
            map_new[l->mapping_id - 1] = 1;
        for (uint32_t j = 0; j < l->n_line; j++) {
            uint64_t f = m->lines[l->line_off + j].function_id;
            if (f)
                fn_new[f - 1] = 1;
        }
    }
    for (size_t i = 0; i < m->n_fn; i++)
        if (fn_new[i])
            fn_new[i] = ++n_fn;
    for (size_t i = 0; i < m->n_map; i++)
        if (map_new[i])
            map_new[i] = ++n_map;

    pd_profile *o = &m->out;
    pd_arena *a = &o->arena;
    o->n_sample_type = nt;
    o->sample_type = pd_arena_calloc(a, nt ? nt : 1, sizeof *o->sample_type);
    o->sample = pd_arena_calloc(a, n_keep ? n_keep : 1, sizeof *o->sample);
    o->location = pd_arena_calloc(a, n_loc ? n_loc : 1, sizeof *o->location);
    o->function = pd_arena_calloc(a, n_fn ? n_fn : 1, sizeof *o->function);
    o->mapping = pd_arena_calloc(a, n_map ? n_map : 1, sizeof *o->mapping);
    o->comment = pd_arena_calloc(a, m->n_comment ? m->n_comment : 1, sizeof *o->comment);
    uint64_t *ids = pd_arena_calloc(a, n_stk ? n_stk : 1, sizeof *ids);
    int64_t *vals = pd_arena_calloc(a, n_keep * nt + 1, sizeof *vals);
    pd_pprof_label *labs = pd_arena_calloc(a, n_labs ? n_labs : 1, sizeof *labs);
    pd_pprof_line *lines = pd_arena_calloc(a, n_lines ? n_lines : 1, sizeof *lines);
    if (!o->sample_type || !o->sample || !o->location || !o->function || !o->mapping ||
        !o->comment || !ids || !vals || !labs || !lines) {
        rc = pd_err_set(err, PD_ENOMEM, "merge: out of memory");
        goto out;
    }
    for (size_t i = 0; i < nt; i++)
        o->sample_type[i] = (pd_pprof_value_type){m->st_type[i], m->st_unit[i]};
    o->period_type = (pd_pprof_value_type){m->pt_type, m->pt_unit};
    if (m->n_comment)
        memcpy(o->comment, m->comment, m->n_comment * sizeof *o->comment);
    o->n_comment = m->n_comment;
    for (size_t i = 0; i < m->n_fn; i++) {
        if (!fn_new[i])
            continue;
        pd_pprof_function f = m->fn[i];
        f.id = fn_new[i];
        o->function[o->n_function++] = f;
    }
    for (size_t i = 0; i < m->n_map; i++) {
        if (!map_new[i])
            continue;
        pd_pprof_mapping mp = m->map[i];
        mp.id = map_new[i];
        o->mapping[o->n_mapping++] = mp;
    }
    size_t lo = 0;
    for (size_t i = 0; i < m->n_loc; i++) {
        if (!loc_new[i])
            continue;
        const mloc *l = &m->loc[i];
        pd_pprof_location *d = &o->location[o->n_location++];
        d->id = loc_new[i];
        d->mapping_id = l->mapping_id ? map_new[l->mapping_id - 1] : 0;
        d->address = l->address;
        d->is_folded = l->is_folded;
        d->line = &lines[lo];
        d->n_line = l->n_line;
        for (uint32_t j = 0; j < l->n_line; j++) {
            pd_pprof_line ln = m->lines[l->line_off + j];
            ln.function_id = ln.function_id ? fn_new[ln.function_id - 1] : 0;
            lines[lo++] = ln;
        }
    }
    size_t so = 0, lb = 0;
    for (size_t s = 0; s < m->n_smp; s++) {
        if (!keep[s])
            continue;
        const msmp *sp = &m->smp[s];
        pd_pprof_sample *d = &o->sample[o->n_sample];
        d->location_id = &ids[so];
        d->n_location = sp->n_loc;
        for (uint32_t j = 0; j < sp->n_loc; j++)
            ids[so++] = loc_new[m->stk[sp->stk_off + j] - 1];
        d->value = &vals[o->n_sample * nt];
        d->n_value = nt;
        if (nt)
            memcpy(d->value, &m->vals[s * nt], nt * sizeof *vals);
        d->label = &labs[lb];
        d->n_label = sp->n_lab;
        if (sp->n_lab)
            memcpy(&labs[lb], &m->labs[sp->lab_off], sp->n_lab * sizeof *labs);
        lb += sp->n_lab;
        o->n_sample++;
    }
    if ((rc = pd_profile_index(o, err)) < 0)
        goto out;
    *out = *o; /* moved: the merger no longer owns it */
    memset(o, 0, sizeof *o);
    m->failed = true; /* finished: only pd_merge_free is left */
out:
    free(keep);
    free(loc_new);
    free(fn_new);
    free(map_new);
    return rc;
}
