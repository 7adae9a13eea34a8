/*
 * api/querier_select.c — the virtual series of Pyroscope's API over profd's
 * store, merges of them, and Pyroscope's flame graph levels format
 * (querier_int.h documents the mapping).
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>
#include "api/querier_int.h"
#include "base/cancel.h"
#include "base/time.h"
#include "base/u64map.h"

/* profd's stored __name__ -> Pyroscope's name and period type/unit.
 * period_stored: the period type/unit is the latest stored profile's when
 * it has one, the table's otherwise (mutex and block: Go's are
 * contentions/count, a JFR recording's mutex/count and block/count, as
 * grafana/jfr-parser's pprof converter names them). Go's names first, then
 * the JFR kinds of ingest/jfr.h. */
static const struct {
    const char *stored, *pyro, *ptype, *punit;
    bool period_stored;
} names[] = {
    {"cpu", "process_cpu", "cpu", "nanoseconds", false},
    {"process_cpu", "process_cpu", "cpu", "nanoseconds", false},
    {"heap", "memory", "space", "bytes", false},
    {"allocs", "memory", "space", "bytes", false},
    {"memory", "memory", "space", "bytes", true},
    {"goroutine", "goroutines", "goroutine", "count", false},
    {"goroutines", "goroutines", "goroutine", "count", false},
    {"mutex", "mutex", "contentions", "count", true},
    {"block", "block", "contentions", "count", true},
    {"threadcreate", "threadcreate", "threadcreate", "count", false},
    /* JFR (api/ingest_jfr.c stores each kind under these names) */
    {"wall", "wall", "wall", "nanoseconds", false},
    {"alloc_in_new_tlab", "memory", "space", "bytes", false},
    {"alloc_outside_tlab", "memory", "space", "bytes", false},
    {"alloc_sample", "memory", "space", "bytes", false},
    {"live", "memory", "objects", "count", false},
};

int pd__ptid_check(const char *ptid, size_t *match_len, pd_err *err)
{
    size_t parts = 1, n = strlen(ptid), five = n;
    for (size_t i = 0; i < n; i++)
        if (ptid[i] == ':' && ++parts == 6)
            five = i;
    if (parts != 5 && parts != 6)
        return pd_err_set(err, PD_EINVAL,
                          "profile-type selection must be of the form "
                          "<name>:<sample-type>:<sample-unit>:<period-type>:<period-unit>(:delta), "
                          "got(%zu): \"%.300s\"",
                          parts, ptid);
    *match_len = five;
    return 0;
}

/* Period type/unit of a series not in the table: from its latest profile. */
static void period_of(pd_storage *st, const pd_series_info *si, const pd_points *pts, char *pt,
                      char *pu, size_t cap)
{
    pd_profile p;
    pd_err err;
    snprintf(pt, cap, "unknown");
    snprintf(pu, cap, "unknown");
    if (!pts->n ||
        pd_storage_read_profile(st, si->ref, pts->v[pts->n - 1].ts_ms, &p, NULL, &err) < 0)
        return;
    if (p.period_type.type > 0 && (size_t)p.period_type.type < p.n_string)
        snprintf(pt, cap, "%s", p.string_table[p.period_type.type]);
    if (p.period_type.unit > 0 && (size_t)p.period_type.unit < p.n_string)
        snprintf(pu, cap, "%s", p.string_table[p.period_type.unit]);
    pd_profile_release(&p);
}

static bool is_empty_selector(const char *s)
{
    if (!s)
        return true;
    while (isspace((unsigned char)*s))
        s++;
    if (!*s)
        return true;
    if (*s != '{')
        return false;
    s++;
    while (isspace((unsigned char)*s))
        s++;
    if (*s != '}')
        return false;
    s++;
    while (isspace((unsigned char)*s))
        s++;
    return !*s;
}

void pd__vselection_release(pd__vselection *s)
{
    pd_arena_release(&s->a); /* every vl */
    free(s->v);
    if (s->pts)
        for (size_t i = 0; i < s->set.n; i++)
            pd_points_release(&s->pts[i]);
    free(s->pts);
    pd_series_set_release(&s->set);
    pd_series_latest_set_release(&s->latest);
    free(s->infos);
    memset(s, 0, sizeof *s);
}

typedef struct sel {
    pd_matcher *ms;
    size_t n;
} sel;

/* A virtual label's value is kept when pd_labels_set would take it (no
 * control byte, within PD_LABEL_MAX_VALUE); "" removes the label. */
static bool vvalue_ok(const char *v)
{
    size_t n = strlen(v);
    if (n > PD_LABEL_MAX_VALUE)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f)
            return false;
    return true;
}

/* out = the stored labels st (sorted) with the NV virtual pairs vn/vv
 * (sorted by name) set over them, as pd_labels_set would one by one (an
 * invalid value — ok[j] false — keeps the stored one, "" removes it, new
 * names past PD_LABEL_MAX_COUNT are left out): one arena array, the
 * strings borrowed (from st and vv: they outlive out). 0 or PD_ENOMEM.
 * This replaced a pd_labels_copy and 7 pd_labels_set per virtual series
 * (~25 mallocs each: the bulk of a Series/LabelNames answer over 50k
 * series). */
#define NV 7
static const char *const vnames[NV] = {"__name__",         "__period_type__", "__period_unit__",
                                       "__profile_type__", "__type__",        "__unit__",
                                       "service_name"};
static int virtual_labels(pd_arena *a, const pd_labels *st, const char *const vv[NV],
                          const bool ok[NV], pd_labels *out)
{
    pd_label *v = pd_arena_alloc(a, (st->n + NV) * sizeof *v);
    if (!v)
        return PD_ENOMEM;
    size_t i = 0, j = 0, k = 0, added = 0;
    while (i < st->n || j < NV) {
        int c = i == st->n ? 1 : j == NV ? -1 : strcmp(st->v[i].name, vnames[j]);
        if (c < 0) {
            v[k++] = st->v[i++];
            continue;
        }
        if (c == 0) {
            if (!ok[j])
                v[k++] = st->v[i];
            else if (vv[j][0]) /* (the name as vnames': one pointer per name) */
                v[k++] = (pd_label){(char *)vnames[j], (char *)vv[j]};
            i++;
        } else if (ok[j] && vv[j][0] && st->n + added < PD_LABEL_MAX_COUNT) {
            v[k++] = (pd_label){(char *)vnames[j], (char *)vv[j]};
            added++;
        }
        j++;
    }
    out->v = v;
    out->n = k;
    return 0;
}

/* What a stored series' name and sample types give its virtual series,
 * the same for every series of that name and types (Pyroscope's name,
 * period, and per type the profile type ID), except the period of a name
 * whose period is the stored profile's (period_stored, or a name not in
 * the table): that kind is one series' own. Strings in the selection's
 * arena. */
typedef struct vkind {
    const char *pyro, *ptype, *punit;
    bool ok_pyro, ok_ptype, ok_punit;
    size_t n;
    const char **ty, **un; /* per type ("" for none) */
    const char **id;       /* per type: its __profile_type__, NULL when the
                              type has no virtual series (the heap/allocs rule,
                              or not the selection's profile type) */
    bool *ok_id, *ok_ty, *ok_un;
} vkind;

/* The kind of a series named stored ("" for none) with types (n), see
 * vkind. has_heap/has_allocs: the selection holds heap/allocs series (each
 * then keeps only its own types of the pair); ptid/plen: the profile type
 * asked (NULL: any). ptb/pub: the series' stored period (from_profile
 * names only, else NULL). 0 or PD_ENOMEM. */
static int kind_of(pd_arena *a, const char *stored, const pd_sample_type_desc *types, size_t n,
                   bool has_heap, bool has_allocs, const char *ptid, size_t plen, const char *ptb,
                   const char *pub, vkind *k)
{
    memset(k, 0, sizeof *k);
    const char *pyro = stored, *ptype = NULL, *punit = NULL, *aptype = NULL, *apunit = NULL;
    bool from_profile = true;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(names[i].stored, stored)) {
            pyro = names[i].pyro;
            ptype = aptype = names[i].ptype;
            punit = apunit = names[i].punit;
            from_profile = names[i].period_stored;
            break;
        }
    if (from_profile && ptb) {
        if (!ptype || strcmp(ptb, "unknown")) {
            ptype = ptb;
            punit = pub;
        }
    }
    if (!aptype) {
        aptype = ptype;
        apunit = punit;
    }
    /* (ptype is NULL only for a from_profile name asked without ptb) */
    if (!(k->pyro = pd_arena_strdup(a, pyro)) ||
        !(k->ptype = pd_arena_strdup(a, ptype ? ptype : "")) ||
        !(k->punit = pd_arena_strdup(a, punit ? punit : "")))
        return PD_ENOMEM;
    k->ok_pyro = vvalue_ok(k->pyro);
    k->ok_ptype = vvalue_ok(k->ptype);
    k->ok_punit = vvalue_ok(k->punit);
    k->n = n;
    k->ty = pd_arena_calloc(a, n ? n : 1, sizeof *k->ty);
    k->un = pd_arena_calloc(a, n ? n : 1, sizeof *k->un);
    k->id = pd_arena_calloc(a, n ? n : 1, sizeof *k->id);
    k->ok_id = pd_arena_calloc(a, n ? n : 1, 3 * sizeof *k->ok_id);
    if (!k->ty || !k->un || !k->id || !k->ok_id)
        return PD_ENOMEM;
    k->ok_ty = k->ok_id + n;
    k->ok_un = k->ok_id + 2 * n;
    for (size_t t = 0; t < n; t++) {
        const char *ty = types[t].type ? types[t].type : "",
                   *un = types[t].unit ? types[t].unit : "";
        if (!(k->ty[t] = pd_arena_strdup(a, ty)) || !(k->un[t] = pd_arena_strdup(a, un)))
            return PD_ENOMEM;
        k->ok_ty[t] = vvalue_ok(ty);
        k->ok_un[t] = vvalue_ok(un);
        bool alloc = !strncmp(ty, "alloc_", 6), inuse = !strncmp(ty, "inuse_", 6);
        if (!strcmp(stored, "heap") && alloc && has_allocs)
            continue;
        if (!strcmp(stored, "allocs") && inuse && has_heap)
            continue;
        /* the canonical ID is Pyroscope's; profd's own (its stored name,
           and the table's period: what profd answered before) is an alias */
        char id[600], alias[600];
        snprintf(id, sizeof id, "%s:%s:%s:%s:%s", pyro, ty, un, ptype, punit);
        snprintf(alias, sizeof alias, "%s:%s:%s:%s:%s", *stored ? stored : pyro, ty, un, aptype,
                 apunit);
        if (ptid && *ptid && !(strlen(id) == plen && !strncmp(ptid, id, plen)) &&
            !(strlen(alias) == plen && !strncmp(ptid, alias, plen)))
            continue;
        if (!(k->id[t] = pd_arena_strdup(a, id)))
            return PD_ENOMEM;
        k->ok_id[t] = vvalue_ok(id);
    }
    return 0;
}

/* Whether the kind of a series of this name is the same for every series
 * of its name and types (not read from its stored profile). */
static bool kind_shared(const char *stored)
{
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(names[i].stored, stored))
            return !names[i].period_stored;
    return false;
}

/* Appends the virtual series of stored series si (its kind k; pts its
 * points) that match a selector (all: every one) to out->v (room made by
 * the caller). 0 or PD_ENOMEM. */
static int add_vseries(pd__vselection *out, const pd_series_info *si, const pd_points *pts,
                       const vkind *k, const sel *sels, size_t nsel, bool all)
{
    const char *svc = pd_labels_get(&si->labels, "service_name");
    if (!svc)
        svc = pd_labels_get(&si->labels, "job");
    if (!svc)
        svc = "unknown_service";
    bool ok_svc = vvalue_ok(svc);
    for (size_t t = 0; t < k->n; t++) {
        if (!k->id[t])
            continue;
        pd__vseries *vs = &out->v[out->n];
        /* a set at its label cap keeps what fits: virtual labels are best
           effort (names sorted, as virtual_labels needs) */
        const char *vv[NV] = {k->pyro, k->ptype, k->punit, k->id[t], k->ty[t], k->un[t], svc};
        const bool ok[NV] = {k->ok_pyro,  k->ok_ptype, k->ok_punit, k->ok_id[t],
                             k->ok_ty[t], k->ok_un[t], ok_svc};
        if (virtual_labels(&out->a, &si->labels, vv, ok, &vs->vl) < 0)
            return PD_ENOMEM;
        bool match = all;
        for (size_t s = 0; s < nsel && !match; s++)
            match = pd_matchers_match(sels[s].ms, sels[s].n, &vs->vl);
        if (!match)
            continue;
        out->n++;
        vs->si = si;
        vs->type_idx = t;
        vs->pts = pts;
        /* (an ID pd_labels_set would refuse leaves the stored label, if any) */
        vs->ptid = k->ok_id[t] ? k->id[t] : pd_labels_get(&vs->vl, "__profile_type__");
    }
    return 0;
}

/* Memo of the shared kinds of one selection: by name and types_id. */
typedef struct kmemo {
    pd_u64map at; /* hash(name, types_id, seed) -> index in v */
    struct kentry {
        const char *name;
        uint32_t types_id;
        vkind k;
    } * v;
    size_t n, cap;
} kmemo;

static int kmemo_get(kmemo *m, pd_arena *a, const char *stored, const pd_series_latest *e,
                     bool has_heap, bool has_allocs, const char *ptid, size_t plen,
                     const vkind **out)
{
    for (uint64_t seed = 0;; seed++) {
        uint64_t at, h = XXH3_64bits_withSeed(stored, strlen(stored), seed ^ e->types_id);
        h = h == UINT64_MAX ? 0 : h;
        if (pd_u64map_get(&m->at, h, &at)) {
            if (m->v[at].types_id != e->types_id || strcmp(m->v[at].name, stored))
                continue; /* a collision: the next seed */
            *out = &m->v[at].k;
            return 0;
        }
        if (m->n == m->cap) {
            size_t nc = m->cap ? m->cap * 2 : 8;
            struct kentry *nv = realloc(m->v, nc * sizeof *nv);
            if (!nv)
                return PD_ENOMEM;
            m->v = nv;
            m->cap = nc;
        }
        struct kentry *ke = &m->v[m->n];
        ke->types_id = e->types_id;
        int rc;
        if (!(ke->name = pd_arena_strdup(a, stored)) ||
            (rc = kind_of(a, stored, e->types, e->n_types, has_heap, has_allocs, ptid, plen, NULL,
                          NULL, &ke->k)) < 0 ||
            pd_u64map_put(&m->at, h, m->n) < 0)
            return PD_ENOMEM;
        *out = &m->v[m->n++].k;
        return 0;
    }
}

/* pd__vselect_ex's listings (meta): pd_storage_select_latest, each series'
 * kind computed once per name and types (kmemo) unless its period is its
 * profile's. */
static int vselect_latest(pd_storage *st, const char *ptid, size_t plen, const sel *sels,
                          size_t nsel, bool all, int64_t start, int64_t end, pd__vselection *out,
                          pd_err *err)
{
    kmemo memo = {0};
    pd_u64map_init(&memo.at);
    const char **names_of = NULL; /* per stored series: its __name__ */
    pd_series_latest_set *ls = &out->latest;
    int rc = pd_storage_select_latest(st, NULL, 0, start, end, ls, err);
    if (rc < 0)
        goto out;
    /* per stored series: a pd_series_info (ref and labels, shallow) and its
       newest point as a one-point pd_points (priv NULL: nothing to free) */
    out->infos = calloc(ls->n ? ls->n : 1, sizeof *out->infos);
    out->pts = calloc(ls->n ? ls->n : 1, sizeof *out->pts);
    pd_point *pv = pd_arena_calloc(&out->a, ls->n ? ls->n : 1, sizeof *pv);
    if (!out->infos || !out->pts || !pv) {
        rc = pd_err_set(err, PD_ENOMEM, "out of memory");
        goto out;
    }
    bool has_heap = false, has_allocs = false;
    size_t total_types = 0;
    names_of = malloc((ls->n ? ls->n : 1) * sizeof *names_of);
    if (!names_of) {
        rc = pd_err_set(err, PD_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < ls->n; i++) {
        const pd_series_latest *e = &ls->v[i];
        const char *nm = names_of[i] = pd_labels_get(e->labels, "__name__");
        has_heap |= nm && !strcmp(nm, "heap");
        has_allocs |= nm && !strcmp(nm, "allocs");
        total_types += e->n_types;
        out->infos[i] = (pd_series_info){.ref = e->ref,
                                         .labels = *e->labels,
                                         .n_profiles = 1,
                                         .min_ts = e->ts_ms,
                                         .max_ts = e->ts_ms};
        pv[i] = (pd_point){
            .ts_ms = e->ts_ms, .n_types = e->n_types, .types = (pd_sample_type_desc *)e->types};
        out->pts[i] = (pd_points){.v = &pv[i], .n = 1};
    }
    out->v = calloc(total_types ? total_types : 1, sizeof *out->v);
    if (!out->v) {
        rc = pd_err_set(err, PD_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < ls->n; i++) {
        const pd_series_latest *e = &ls->v[i];
        if (!e->n_types)
            continue;
        if (!(i & 4095) && pd_cancel_requested()) {
            rc = pd_err_set(err, PD_ECANCELED, "%s", pd_cancel_message());
            goto out;
        }
        const char *stored = names_of[i] ? names_of[i] : "";
        const vkind *k;
        vkind own;
        if (kind_shared(stored)) {
            rc = kmemo_get(&memo, &out->a, stored, e, has_heap, has_allocs, ptid, plen, &k);
        } else {
            char ptb[128], pub[128];
            period_of(st, &out->infos[i], &out->pts[i], ptb, pub, sizeof ptb);
            rc = kind_of(&out->a, stored, e->types, e->n_types, has_heap, has_allocs, ptid, plen,
                         ptb, pub, &own);
            k = &own;
        }
        if (rc >= 0)
            rc = add_vseries(out, &out->infos[i], &out->pts[i], k, sels, nsel, all);
        if (rc < 0) {
            rc = pd_err_set(err, PD_ENOMEM, "out of memory");
            goto out;
        }
    }
out:
    free(names_of);
    pd_u64map_release(&memo.at);
    free(memo.v);
    return rc;
}

int pd__vselect(pd_storage *st, const char *ptid, const char *const *selectors, size_t n,
                int64_t start, int64_t end, pd__vselection *out, pd_err *err)
{
    return pd__vselect_ex(st, ptid, selectors, n, start, end, false, out, err);
}

int pd__vselect_ex(pd_storage *st, const char *ptid, const char *const *selectors, size_t n,
                   int64_t start, int64_t end, bool meta, pd__vselection *out, pd_err *err)
{
    memset(out, 0, sizeof *out);
    pd_arena_init(&out->a);
    size_t plen = 0;
    if (ptid && *ptid && pd__ptid_check(ptid, &plen, err) < 0)
        return PD_EINVAL;
    sel *sels = calloc(n ? n : 1, sizeof *sels);
    size_t nsel = 0;
    bool all = n == 0;
    int rc = 0;
    if (!sels)
        return pd_err_set(err, PD_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (is_empty_selector(selectors[i])) {
            all = true;
            continue;
        }
        if (strlen(selectors[i]) > PD_SELECTOR_MAX_BYTES) {
            rc = pd_err_set(err, PD_EINVAL, "selector longer than %d bytes", PD_SELECTOR_MAX_BYTES);
            goto out;
        }
        if ((rc = pd_selector_parse(selectors[i], &sels[nsel].ms, &sels[nsel].n, err)) < 0) {
            char m[sizeof err->msg];
            snprintf(m, sizeof m, "%s", err->msg);
            pd_err_set(err, rc, "label selector %.200s: %s", selectors[i], m);
            goto out;
        }
        nsel++;
    }
    if (meta) {
        rc = vselect_latest(st, ptid, plen, sels, nsel, all, start, end, out, err);
        goto out;
    }
    if ((rc = pd_storage_select(st, NULL, 0, start, end, &out->set, err)) < 0)
        goto out;
    out->pts = calloc(out->set.n ? out->set.n : 1, sizeof *out->pts);
    if (!out->pts) {
        rc = pd_err_set(err, PD_ENOMEM, "out of memory");
        goto out;
    }
    bool has_heap = false, has_allocs = false;
    size_t total_types = 0;
    for (size_t i = 0; i < out->set.n; i++) {
        const char *nm = pd_labels_get(&out->set.v[i].labels, "__name__");
        has_heap |= nm && !strcmp(nm, "heap");
        has_allocs |= nm && !strcmp(nm, "allocs");
        if (pd_cancel_requested()) {
            rc = pd_err_set(err, PD_ECANCELED, "%s", pd_cancel_message());
            goto out;
        }
        rc = pd_storage_read_points(st, out->set.v[i].ref, start, end, &out->pts[i], err);
        if (rc == PD_ENOTFOUND) {
            rc = 0;
            continue;
        }
        /* Go's allocs/block/mutex scraped as served count since process
           start: SelectSeries shows per-profile deltas, as Pyroscope
           stores them (query.h: pd_query_points_delta) */
        if (rc >= 0)
            rc = pd_query_points_delta(st, &out->set.v[i], &out->pts[i], NULL, err);
        if (rc < 0)
            goto out;
        if (out->pts[i].n)
            total_types += out->pts[i].v[0].n_types;
    }
    out->v = calloc(total_types ? total_types : 1, sizeof *out->v);
    if (!out->v) {
        rc = pd_err_set(err, PD_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < out->set.n; i++) {
        const pd_series_info *si = &out->set.v[i];
        const pd_points *pts = &out->pts[i];
        if (!pts->n || !pts->v[0].types)
            continue;
        const char *stored = pd_labels_get(&si->labels, "__name__");
        stored = stored ? stored : "";
        char ptb[128], pub[128];
        bool shared = kind_shared(stored);
        if (!shared)
            period_of(st, si, pts, ptb, pub, sizeof ptb);
        vkind k;
        if ((rc = kind_of(&out->a, stored, pts->v[0].types, pts->v[0].n_types, has_heap, has_allocs,
                          ptid, plen, shared ? NULL : ptb, shared ? NULL : pub, &k)) < 0 ||
            (rc = add_vseries(out, si, pts, &k, sels, nsel, all)) < 0) {
            rc = pd_err_set(err, PD_ENOMEM, "out of memory");
            goto out;
        }
    }
out:
    for (size_t i = 0; i < nsel; i++)
        pd_matchers_free(sels[i].ms, sels[i].n);
    free(sels);
    return rc;
}

/* pd_merge_options.cancelled: the request's token (base/cancel.h). */
static bool cancel_cb(void *tok)
{
    return pd_cancel_check(tok);
}

/* The stored series of a selection as refs (each series once). */
static int refs_of(const pd__vselection *s, int64_t from, int64_t to, pd_series_info **arr,
                   pd_query_refs *r)
{
    *arr = calloc(s->n ? s->n : 1, sizeof **arr);
    if (!*arr)
        return PD_ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++) {
        /* a stored series' virtual series are neighbours (pd__vselect makes
           them in set order), so comparing with the last one kept is enough */
        if (!k || (*arr)[k - 1].ref != s->v[i].si->ref)
            (*arr)[k++] = *s->v[i].si; /* shallow: labels stay the set's */
    }
    r->series = *arr;
    r->n = k;
    r->from = from;
    r->to = to;
    return 0;
}

int pd__vmerge(const pd__querier_env *env, const pd__vselection *base, int64_t bstart, int64_t bend,
               const pd__vselection *cur, int64_t start, int64_t end, pd_profile *out,
               size_t *type_idx, pd_err *err)
{
    return pd__vmerge_filtered(env, NULL, base, bstart, bend, cur, start, end, out, type_idx, err);
}

int pd__vmerge_filtered(const pd__querier_env *env, const pd_storage_sample_filter *filter,
                        const pd__vselection *base, int64_t bstart, int64_t bend,
                        const pd__vselection *cur, int64_t start, int64_t end, pd_profile *out,
                        size_t *type_idx, pd_err *err)
{
    pd_series_info *ca = NULL, *ba = NULL;
    pd_query_refs cr, br;
    int rc;
    memset(out, 0, sizeof *out);
    if (!cur->n)
        return pd_err_set(err, PD_ENOTFOUND, "no series matches");
    if (refs_of(cur, start, end, &ca, &cr) < 0 ||
        (base && refs_of(base, bstart, bend, &ba, &br) < 0)) {
        rc = pd_err_set(err, PD_ENOMEM, "out of memory");
        goto out;
    }
    int64_t timeout = env->timeout_ms > 0 ? env->timeout_ms : 120000;
    pd_merge_options o = {
        .max_samples = env->max_samples,
        .timeout_ms = timeout,
        .deadline_ns = pd_mono_ns() + timeout * 1000000,
        .sample_filter = filter,
        .cancelled = cancel_cb, /* the client left, or profd stops */
        .cancel_ctx = pd_cancel_current(),
    };
    /* cumulative types (Go's allocs, block, mutex scraped as served) are
       merged as deltas, as Pyroscope stores them (query.h: PD_DELTA_AUTO) */
    const pd_point *pt = &cur->v[0].pts->v[0];
    o.sample_type = pt->types[cur->v[0].type_idx].type;
    if ((rc = pd_query_merge_refs(env->st, base ? &br : NULL, &cr, &o, out, NULL, err)) < 0)
        goto out;
    /* the selection's sample type, by name, in the merged profile */
    const char *ty = pt->types[cur->v[0].type_idx].type, *un = pt->types[cur->v[0].type_idx].unit;
    *type_idx = 0;
    for (size_t i = 0; i < out->n_sample_type; i++) {
        const pd_pprof_value_type *vt = &out->sample_type[i];
        if ((size_t)vt->type < out->n_string && (size_t)vt->unit < out->n_string &&
            !strcmp(out->string_table[vt->type], ty ? ty : "") &&
            !strcmp(out->string_table[vt->unit], un ? un : "")) {
            *type_idx = i;
            break;
        }
    }
out:
    free(ca);
    free(ba);
    return rc;
}

/* ---- flame graph levels ---- */

typedef struct node {
    json_t *j;    /* NULL for an "other" node */
    int64_t x[2]; /* absolute offset: [0] single/left, [1] right */
    int64_t tot[2], self[2];
    size_t name;
} node;

typedef struct lv {
    node *v;
    size_t n, cap;
} lv;

typedef struct names_t {
    char **v;
    size_t n, cap;
    json_t *index; /* name -> idx */
} names_t;

static int64_t jint(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? (int64_t)json_integer_value(v)
           : json_is_real(v)  ? (int64_t)json_real_value(v)
                              : 0;
}

static int name_idx(names_t *nm, pd_arena *a, const char *s, size_t *out)
{
    json_t *v = json_object_get(nm->index, s);
    if (v) {
        *out = (size_t)json_integer_value(v);
        return 0;
    }
    if (nm->n == nm->cap) {
        size_t c = nm->cap ? nm->cap * 2 : 64;
        char **nv = realloc(nm->v, c * sizeof *nv);
        if (!nv)
            return PD_ENOMEM;
        nm->v = nv;
        nm->cap = c;
    }
    char *d = pd_arena_strdup(a, s);
    if (!d || json_object_set_new(nm->index, s, json_integer((json_int_t)nm->n)) < 0)
        return PD_ENOMEM;
    nm->v[nm->n] = d;
    *out = nm->n++;
    return 0;
}

static int lv_push(lv *l, const node *n)
{
    if (l->n == l->cap) {
        size_t c = l->cap ? l->cap * 2 : 16;
        node *nv = realloc(l->v, c * sizeof *nv);
        if (!nv)
            return PD_ENOMEM;
        l->v = nv;
        l->cap = c;
    }
    l->v[l->n++] = *n;
    return 0;
}

/* Values of a tree node: single [0] only; diff [0] base (left), [1] new (right). */
static void node_vals(json_t *j, bool diff, int64_t *tot, int64_t *self)
{
    if (!diff) {
        tot[0] = jint(j, "value");
        self[0] = jint(j, "self");
        tot[1] = self[1] = 0;
    } else {
        tot[0] = jint(j, "base");
        self[0] = jint(j, "base_self");
        tot[1] = jint(j, "new");
        self[1] = jint(j, "new_self");
    }
}

int pd__levels_build(const pd_profile *p, size_t type_idx, size_t max_nodes, bool diff, pd_arena *a,
                     pd__levels *out, pd_err *err)
{
    pd_buf js;
    pd_buf_init(&js, 0);
    names_t nm = {0};
    lv *levels = NULL;
    size_t n_levels = 0, cap_levels = 0;
    json_t *root = NULL;
    int rc;
    memset(out, 0, sizeof *out);
    pd_report_options o = {.sample_index = type_idx, .max_nodes = max_nodes, .diff = diff};
    if ((rc = pd_report_flamegraph_ex(p, &o, &js)) < 0) {
        pd_err_set(err, rc, "flame graph: %s", pd_strerror(rc));
        goto out;
    }
    json_error_t je;
    root = json_loadb(js.data, js.len, 0, &je);
    nm.index = json_object();
    if (!root || !nm.index) {
        rc = pd_err_set(err, PD_ENOMEM, "flame graph: out of memory");
        goto out;
    }
    size_t total_name;
    if ((rc = name_idx(&nm, a, "total", &total_name)) < 0)
        goto nomem;
    node r = {.j = root, .name = total_name};
    node_vals(root, diff, r.tot, r.self);
    for (;;) {
        if (n_levels == cap_levels) {
            size_t c = cap_levels ? cap_levels * 2 : 16;
            lv *nv = realloc(levels, c * sizeof *nv);
            if (!nv)
                goto nomem;
            memset(nv + cap_levels, 0, (c - cap_levels) * sizeof *nv);
            levels = nv;
            cap_levels = c;
        }
        lv *cur = &levels[n_levels];
        if (n_levels == 0) {
            if (lv_push(cur, &r) < 0)
                goto nomem;
        } else {
            lv *prev = &levels[n_levels - 1];
            for (size_t i = 0; i < prev->n; i++) {
                node *pn = &prev->v[i];
                if (!pn->j)
                    continue;
                int64_t x[2] = {pn->x[0], pn->x[1]};
                json_t *kids = json_object_get(pn->j, "children");
                size_t k;
                json_t *kid;
                json_array_foreach(kids, k, kid)
                {
                    node c = {.j = kid};
                    node_vals(kid, diff, c.tot, c.self);
                    /* a stack whose values are 0 in the type shown (Go's
                       inuse_space of a freed allocation site) has no width:
                       left out with its subtree, as Pyroscope's trees hold
                       no zero nodes (a reader finds no parent span for it) */
                    if (!c.tot[0] && !c.tot[1])
                        continue;
                    json_t *nmv = json_object_get(kid, "name");
                    if ((rc = name_idx(&nm, a, json_is_string(nmv) ? json_string_value(nmv) : "",
                                       &c.name)) < 0)
                        goto nomem;
                    c.x[0] = x[0];
                    c.x[1] = x[1];
                    x[0] += c.tot[0];
                    x[1] += c.tot[1];
                    if (lv_push(cur, &c) < 0)
                        goto nomem;
                    pn = &prev->v[i]; /* (prev is not reallocated; kept for clarity) */
                }
                int64_t cut[2] = {jint(pn->j, "cut"), 0};
                if (diff) {
                    cut[1] = cut[0] + jint(pn->j, "base_cut");
                    cut[0] = jint(pn->j, "base_cut");
                }
                if (cut[0] || cut[1]) {
                    node c = {.j = NULL,
                              .x = {x[0], x[1]},
                              .tot = {cut[0], cut[1]},
                              .self = {cut[0], cut[1]}};
                    if ((rc = name_idx(&nm, a, "other", &c.name)) < 0)
                        goto nomem;
                    if (lv_push(cur, &c) < 0)
                        goto nomem;
                }
            }
        }
        if (!cur->n)
            break;
        n_levels++;
    }
    out->levels = pd_arena_calloc(a, n_levels ? n_levels : 1, sizeof *out->levels);
    out->level_len = pd_arena_calloc(a, n_levels ? n_levels : 1, sizeof *out->level_len);
    if (!out->levels || !out->level_len)
        goto nomem;
    size_t per = diff ? 7 : 4;
    for (size_t l = 0; l < n_levels; l++) {
        lv *cur = &levels[l];
        int64_t *vals = pd_arena_calloc(a, cur->n * per, sizeof *vals);
        if (!vals)
            goto nomem;
        int64_t end[2] = {0, 0};
        for (size_t i = 0; i < cur->n; i++) {
            node *n = &cur->v[i];
            int64_t *v = vals + i * per;
            if (!diff) {
                v[0] = n->x[0] - end[0];
                v[1] = n->tot[0];
                v[2] = n->self[0];
                v[3] = (int64_t)n->name;
            } else {
                v[0] = n->x[0] - end[0];
                v[1] = n->tot[0];
                v[2] = n->self[0];
                v[3] = n->x[1] - end[1];
                v[4] = n->tot[1];
                v[5] = n->self[1];
                v[6] = (int64_t)n->name;
            }
            end[0] = n->x[0] + n->tot[0];
            end[1] = n->x[1] + n->tot[1];
            int64_t s = n->self[0] > n->self[1] ? n->self[0] : n->self[1];
            if (s > out->max_self)
                out->max_self = s;
        }
        out->levels[l] = vals;
        out->level_len[l] = cur->n * per;
    }
    out->n_levels = n_levels;
    out->names = pd_arena_calloc(a, nm.n ? nm.n : 1, sizeof *out->names);
    if (!out->names)
        goto nomem;
    memcpy(out->names, nm.v, nm.n * sizeof *nm.v);
    out->n_names = nm.n;
    if (diff) {
        out->left_ticks = r.tot[0];
        out->right_ticks = r.tot[1];
        out->total = r.tot[0] + r.tot[1];
    } else {
        out->total = r.tot[0];
    }
    rc = 0;
    goto out;
nomem:
    rc = pd_err_set(err, PD_ENOMEM, "flame graph: out of memory");
out:
    for (size_t l = 0; l < cap_levels; l++)
        free(levels[l].v);
    free(levels);
    free(nm.v);
    json_decref(nm.index);
    json_decref(root);
    pd_buf_release(&js);
    return rc;
}

/* ---- time ---- */

int pd__pyro_time(const char *s, int64_t now_ms, int64_t *out, pd_err *err)
{
    if (!s || !*s)
        return pd_err_set(err, PD_EPARSE, "empty time");
    if (!strncmp(s, "now", 3)) {
        const char *p = s + 3;
        if (!*p) {
            *out = now_ms;
            return 0;
        }
        if (*p != '-' && *p != '+')
            goto bad;
        char *e;
        errno = 0;
        long long v = strtoll(p + 1, &e, 10);
        if (e == p + 1 || errno || v < 0 || v > 100000000)
            goto bad;
        int64_t mul;
        if (!strcmp(e, "s"))
            mul = 1000;
        else if (!strcmp(e, "m"))
            mul = 60000;
        else if (!strcmp(e, "h"))
            mul = 3600000;
        else if (!strcmp(e, "d"))
            mul = 86400000;
        else if (!strcmp(e, "ms"))
            mul = 1;
        else
            goto bad;
        *out = now_ms + (*p == '-' ? -1 : 1) * (int64_t)v * mul;
        return 0;
    }
    {
        char *e;
        errno = 0;
        long long v = strtoll(s, &e, 10);
        if (e != s && !*e && !errno) {
            if (v > 100000000000000000LL) /* ns */
                *out = v / 1000000;
            else if (v > 100000000000LL) /* ms */
                *out = v;
            else
                *out = v * 1000;
            return 0;
        }
        struct tm tm = {0};
        const char *r = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
        if (r && (*r == 'Z' || *r == 0)) {
            *out = (int64_t)timegm(&tm) * 1000;
            return 0;
        }
    }
bad:
    return pd_err_set(err, PD_EPARSE, "time \"%.60s\": use now, now-1h, Unix seconds or RFC 3339",
                      s);
}
