/*
 * api/querier.c — Pyroscope's querier API (querier.v1.QuerierService, the
 * Connect RPCs Grafana's Pyroscope data source calls) over profd's store.
 *
 * Every method decodes its request with pd_connect_decode (binary or JSON),
 * selects virtual series (querier_select.c), and answers through
 * pd_connect_reply. Reply messages are built in a per-request arena. Merges
 * go through the query layer's pd_merge (pd_query_merge_refs), the same
 * merger as /api/v1/query?mode=merge.
 *
 * Times are Unix ms. start = end = 0 means all time; end = 0 alone means
 * now. SelectSeries buckets profiles by step (seconds): bucket k holds the
 * profiles with start + k*step <= t < start + (k+1)*step and is reported at
 * start + k*step, the sum (or average) of their totals of the type; empty
 * buckets are left out.
 *
 * stack_trace_selector (types.v1.StackTraceSelector: call site prefix, or
 * Go PGO's keep_locations/aggregate_callees) is applied to the merged
 * profile of SelectMergeStacktraces and SelectMergeProfile, to each side
 * of a Diff (left's to the base, right's to the other), and in
 * SelectSeries to each profile before its value is summed (querier_stack.c;
 * SelectSeries then reads the profiles, not only the stored totals; a
 * series stored cumulative, e.g. a scraped Go mutex profile, then shows
 * its running counters of the selected stacks, not per-profile deltas).
 * A malformed profile type ID is invalid_argument (pd__ptid_check).
 */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include "api/querier_int.h"
#include "base/cancel.h"
#include "base/time.h"
#include "base/u64map.h"
#include "google/v1/profile.pb-c.h"
#include "querier/v1/querier.pb-c.h"
#include "types/v1/types.pb-c.h"

typedef struct ctx {
    const pd__querier_env *env;
    pd_http_response *resp;
    pd_connect_call call;
    pd_arena a;
    pd_err err;
} ctx;

#define NEW(c, T, init) new_msg(&(c)->a, sizeof(T), &(T)init)
static void *new_msg(pd_arena *a, size_t size, const void *init)
{
    void *m = pd_arena_alloc(a, size);
    if (m)
        memcpy(m, init, size);
    return m;
}

static void fail(ctx *c, int rc)
{
    if (pd_connect_code_of(rc) == PD_CONNECT_INVALID_ARGUMENT)
        pd__api_count_rejected("querier_invalid_argument");
    pd_connect_error(c->resp, pd_connect_code_of(rc), "%s",
                     c->err.msg[0] ? c->err.msg : pd_strerror(rc));
}

static void range_of(int64_t start, int64_t end, int64_t *s, int64_t *e)
{
    if (start == 0 && end == 0) {
        *s = INT64_MIN;
        *e = INT64_MAX;
        return;
    }
    *e = end ? end : pd_now_ms();
    *s = start;
}

/* ---- label listings ---- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static uint64_t str_hash(const char *s, uint64_t seed)
{
    uint64_t h = XXH3_64bits_withSeed(s, strlen(s), seed);
    return h == UINT64_MAX ? 0 : h;
}

static uint64_t labels_hash(const pd_labels *ls, uint64_t seed)
{
    uint64_t h = seed;
    for (size_t i = 0; i < ls->n; i++) {
        h = XXH3_64bits_withSeed(ls->v[i].name, strlen(ls->v[i].name) + 1, h);
        h = XXH3_64bits_withSeed(ls->v[i].value, strlen(ls->v[i].value) + 1, h);
    }
    return h == UINT64_MAX ? 0 : h;
}

/* Keeps the first of each run of equal items of v[0..n) (items of `size`
 * bytes), in order, by a hash set (a hash seen before is compared, a
 * collision of unequal items rehashed with the next seed): O(n), where
 * sorting first cost n log n comparisons of whole strings or label sets
 * (most of LabelNames and Series over 50k series). Returns the count kept,
 * or -1 (PD_ENOMEM). */
static long dedupe(void *v, size_t n, size_t size, uint64_t (*hash)(const void *, uint64_t),
                   bool (*eq)(const void *, const void *))
{
    pd_u64map seen;
    pd_u64map_init(&seen);
    char *b = v;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        bool dup = false;
        for (uint64_t seed = 0;; seed++) {
            uint64_t at, h = hash(b + i * size, seed);
            if (!pd_u64map_get(&seen, h, &at)) {
                if (pd_u64map_put(&seen, h, k) < 0) {
                    pd_u64map_release(&seen);
                    return -1;
                }
                break;
            }
            if ((dup = eq(b + at * size, b + i * size)))
                break;
        }
        if (!dup) {
            if (k != i)
                memcpy(b + k * size, b + i * size, size);
            k++;
        }
    }
    pd_u64map_release(&seen);
    return (long)k;
}

static uint64_t hash_str_item(const void *p, uint64_t seed)
{
    return str_hash(*(char *const *)p, seed);
}

static bool eq_str_item(const void *a, const void *b)
{
    return !strcmp(*(char *const *)a, *(char *const *)b);
}

static uint64_t hash_labels_item(const void *p, uint64_t seed)
{
    return labels_hash(p, seed);
}

static bool eq_labels_item(const void *a, const void *b)
{
    return pd_labels_cmp(a, b) == 0;
}

/* Sorted unique strings from an array (in place); returns the new count,
 * or -1 when out of memory. */
static long uniq(char **v, size_t n)
{
    if (!n)
        return 0;
    long u = dedupe(v, n, sizeof *v, hash_str_item, eq_str_item);
    if (u < 0)
        return -1;
    n = (size_t)u;
    qsort(v, n, sizeof *v, cmp_str);
    size_t k = 1;
    for (size_t i = 1; i < n; i++)
        if (strcmp(v[i], v[k - 1]))
            v[k++] = v[i];
    return (long)k;
}

static void m_label_names(ctx *c, const pd_http_request *req, bool values)
{
    ProtobufCMessage *in = NULL;
    pd__vselection s = {0};
    const ProtobufCMessageDescriptor *d = values ? &types__v1__label_values_request__descriptor
                                                 : &types__v1__label_names_request__descriptor;
    if (pd_connect_decode(req, d, &in, &c->call, c->resp) < 0)
        return;
    const char *name = NULL;
    char **matchers;
    size_t nm;
    int64_t start, end;
    if (values) {
        Types__V1__LabelValuesRequest *r = (void *)in;
        name = r->name;
        matchers = r->matchers;
        nm = r->n_matchers;
        range_of(r->start, r->end, &start, &end);
        if (!name || !*name) {
            pd__api_count_rejected("querier_invalid_argument");
            pd_connect_error(c->resp, PD_CONNECT_INVALID_ARGUMENT, "LabelValues: name is required");
            goto out;
        }
    } else {
        Types__V1__LabelNamesRequest *r = (void *)in;
        matchers = r->matchers;
        nm = r->n_matchers;
        range_of(r->start, r->end, &start, &end);
    }
    int rc = pd__vselect_ex(c->env->st, NULL, (const char *const *)matchers, nm, start, end, true,
                            &s, &c->err);
    if (rc == 0 && pd_cancel_test_hold())
        rc = pd_err_set(&c->err, PD_ECANCELED, "%s", pd_cancel_message());
    if (rc < 0) {
        fail(c, rc);
        goto out;
    }
    size_t total = 0;
    for (size_t i = 0; i < s.n; i++)
        total += s.v[i].vl.n;
    char **v = pd_arena_calloc(&c->a, total ? total : 1, sizeof *v);
    if (!v) {
        pd_connect_error(c->resp, PD_CONNECT_RESOURCE_EXHAUSTED, "out of memory");
        goto out;
    }
    /* the strings of the virtual series are shared (a stored series' own
       for each of its types, one pointer per virtual name, per name and
       types' kind): each pointer is taken once (a u64map on the address)
       before uniq compares strings — 2M names over 50k series were 2M
       hashes of strings, now ~100k */
    pd_u64map seen;
    pd_u64map_init(&seen);
    size_t k = 0;
    for (size_t i = 0; i < s.n; i++)
        for (size_t j = 0; j < s.v[i].vl.n; j++) {
            const pd_label *l = &s.v[i].vl.v[j];
            if (values && strcmp(l->name, name))
                continue;
            char *str = values ? l->value : l->name; /* borrowed from s until out */
            uint64_t key = (uint64_t)(uintptr_t)str;
            if (pd_u64map_get(&seen, key, NULL))
                continue;
            if (pd_u64map_put(&seen, key, 0) < 0) {
                pd_u64map_release(&seen);
                pd_connect_error(c->resp, PD_CONNECT_RESOURCE_EXHAUSTED, "out of memory");
                goto out;
            }
            v[k++] = str;
        }
    pd_u64map_release(&seen);
    long u = uniq(v, k);
    if (u < 0) {
        pd_connect_error(c->resp, PD_CONNECT_RESOURCE_EXHAUSTED, "out of memory");
        goto out;
    }
    k = (size_t)u;
    Types__V1__LabelNamesResponse out = TYPES__V1__LABEL_NAMES_RESPONSE__INIT;
    Types__V1__LabelValuesResponse outv = TYPES__V1__LABEL_VALUES_RESPONSE__INIT;
    if (values) {
        outv.names = v;
        outv.n_names = k;
        pd_connect_reply(c->resp, &c->call, &outv.base);
    } else {
        out.names = v;
        out.n_names = k;
        pd_connect_reply(c->resp, &c->call, &out.base);
    }
out:
    pd__vselection_release(&s);
    protobuf_c_message_free_unpacked(in, NULL);
}

static void m_profile_types(ctx *c, const pd_http_request *req)
{
    Querier__V1__ProfileTypesRequest *in = NULL;
    pd__vselection s = {0};
    if (pd_connect_decode(req, &querier__v1__profile_types_request__descriptor,
                          (ProtobufCMessage **)&in, &c->call, c->resp) < 0)
        return;
    int64_t start, end;
    range_of(in->start, in->end, &start, &end);
    int rc = pd__vselect_ex(c->env->st, NULL, NULL, 0, start, end, true, &s, &c->err);
    if (rc < 0) {
        fail(c, rc);
        goto out;
    }
    char **ids = pd_arena_calloc(&c->a, s.n ? s.n : 1, sizeof *ids);
    if (!ids)
        goto nomem;
    for (size_t i = 0; i < s.n; i++)
        ids[i] = (char *)s.v[i].ptid;
    long u = uniq(ids, s.n);
    if (u < 0)
        goto nomem;
    size_t k = (size_t)u;
    Types__V1__ProfileType **pts = pd_arena_calloc(&c->a, k ? k : 1, sizeof *pts);
    if (!pts)
        goto nomem;
    for (size_t i = 0; i < k; i++) {
        Types__V1__ProfileType *t = NEW(c, Types__V1__ProfileType, TYPES__V1__PROFILE_TYPE__INIT);
        char *parts = pd_arena_strdup(&c->a, ids[i]);
        if (!t || !parts)
            goto nomem;
        char *f[5] = {0};
        char *p = parts;
        for (int j = 0; j < 5 && p; j++) {
            f[j] = p;
            p = j < 4 ? strchr(p, ':') : NULL;
            if (p)
                *p++ = 0;
        }
        t->id = ids[i];
        t->name = f[0] ? f[0] : "";
        t->sample_type = f[1] ? f[1] : "";
        t->sample_unit = f[2] ? f[2] : "";
        t->period_type = f[3] ? f[3] : "";
        t->period_unit = f[4] ? f[4] : "";
        pts[i] = t;
    }
    Querier__V1__ProfileTypesResponse out = QUERIER__V1__PROFILE_TYPES_RESPONSE__INIT;
    out.profile_types = pts;
    out.n_profile_types = k;
    pd_connect_reply(c->resp, &c->call, &out.base);
    goto out;
nomem:
    pd_connect_error(c->resp, PD_CONNECT_RESOURCE_EXHAUSTED, "out of memory");
out:
    pd__vselection_release(&s);
    protobuf_c_message_free_unpacked(&in->base, NULL);
}

static Types__V1__LabelPair **pairs_of(ctx *c, const pd_labels *ls, char **only, size_t n_only,
                                       size_t *n_out)
{
    Types__V1__LabelPair **v = pd_arena_calloc(&c->a, ls->n ? ls->n : 1, sizeof *v);
    size_t k = 0;
    if (!v)
        return NULL;
    for (size_t i = 0; i < ls->n; i++) {
        bool keep = n_only == 0;
        for (size_t j = 0; j < n_only && !keep; j++)
            keep = !strcmp(only[j], ls->v[i].name);
        if (!keep)
            continue;
        Types__V1__LabelPair *p = NEW(c, Types__V1__LabelPair, TYPES__V1__LABEL_PAIR__INIT);
        if (!p)
            return NULL;
        p->name = ls->v[i].name;
        p->value = ls->v[i].value;
        v[k++] = p;
    }
    *n_out = k;
    return v;
}

static int cmp_labels(const void *a, const void *b)
{
    return pd_labels_cmp(a, b);
}

static void m_series(ctx *c, const pd_http_request *req)
{
    Querier__V1__SeriesRequest *in = NULL;
    pd__vselection s = {0};
    pd_labels *sets = NULL;
    size_t nsets = 0;
    if (pd_connect_decode(req, &querier__v1__series_request__descriptor, (ProtobufCMessage **)&in,
                          &c->call, c->resp) < 0)
        return;
    int64_t start, end;
    range_of(in->start, in->end, &start, &end);
    int rc = pd__vselect_ex(c->env->st, NULL, (const char *const *)in->matchers, in->n_matchers,
                            start, end, true, &s, &c->err);
    if (rc == 0 && pd_cancel_test_hold())
        rc = pd_err_set(&c->err, PD_ECANCELED, "%s", pd_cancel_message());
    if (rc < 0) {
        fail(c, rc);
        goto out;
    }
    /* each virtual series' labels, cut to label_names, once each */
    sets = calloc(s.n ? s.n : 1, sizeof *sets);
    if (!sets)
        goto nomem;
    for (size_t i = 0; i < s.n; i++) {
        /* the kept pairs of vl (sorted, so l is too), borrowed from s */
        const pd_labels *vl = &s.v[i].vl;
        if (!in->n_label_names) {
            sets[nsets++] = *vl;
            continue;
        }
        /* (at most one pair per name asked: vl's names are unique) */
        size_t cap = vl->n < in->n_label_names ? vl->n : in->n_label_names;
        pd_labels l = {pd_arena_alloc(&c->a, (cap ? cap : 1) * sizeof *l.v), 0};
        if (!l.v)
            goto nomem;
        for (size_t j = 0; j < vl->n && l.n < cap; j++) {
            const char *nm = vl->v[j].name;
            bool keep = false;
            for (size_t k = 0; k < in->n_label_names && !keep; k++)
                keep = !strcmp(in->label_names[k], nm);
            if (keep)
                l.v[l.n++] = vl->v[j];
        }
        sets[nsets++] = l;
    }
    /* once each, by a hash set, then sorted (the pairwise test this replaces
       was quadratic: 10k series took 8 s, 50k never ended) */
    long u = dedupe(sets, nsets, sizeof *sets, hash_labels_item, eq_labels_item);
    if (u < 0)
        goto nomem;
    nsets = (size_t)u;
    if (nsets > 1)
        qsort(sets, nsets, sizeof *sets, cmp_labels);
    Types__V1__Labels **ls = pd_arena_calloc(&c->a, nsets ? nsets : 1, sizeof *ls);
    if (!ls)
        goto nomem;
    for (size_t i = 0; i < nsets; i++) {
        Types__V1__Labels *l = NEW(c, Types__V1__Labels, TYPES__V1__LABELS__INIT);
        if (!l || !(l->labels = pairs_of(c, &sets[i], NULL, 0, &l->n_labels)))
            goto nomem;
        ls[i] = l;
    }
    Querier__V1__SeriesResponse out = QUERIER__V1__SERIES_RESPONSE__INIT;
    out.labels_set = ls;
    out.n_labels_set = nsets;
    pd_connect_reply(c->resp, &c->call, &out.base);
    goto out;
nomem:
    pd_connect_error(c->resp, PD_CONNECT_RESOURCE_EXHAUSTED, "out of memory");
out:
    free(sets); /* (each set's array is c's arena's, its strings s's) */
    pd__vselection_release(&s);
    protobuf_c_message_free_unpacked(&in->base, NULL);
}

/* ---- merges ---- */

static Querier__V1__FlameGraph *flamegraph_msg(ctx *c, const pd__levels *lv)
{
    Querier__V1__FlameGraph *fg = NEW(c, Querier__V1__FlameGraph, QUERIER__V1__FLAME_GRAPH__INIT);
    Querier__V1__Level **levels =
        pd_arena_calloc(&c->a, lv->n_levels ? lv->n_levels : 1, sizeof *levels);
    if (!fg || !levels)
        return NULL;
    for (size_t i = 0; i < lv->n_levels; i++) {
        Querier__V1__Level *l = NEW(c, Querier__V1__Level, QUERIER__V1__LEVEL__INIT);
        if (!l)
            return NULL;
        l->values = lv->levels[i];
        l->n_values = lv->level_len[i];
        levels[i] = l;
    }
    fg->names = lv->names;
    fg->n_names = lv->n_names;
    fg->levels = levels;
    fg->n_levels = lv->n_levels;
    fg->total = lv->total;
    fg->max_self = lv->max_self;
    return fg;
}

/* An empty flame graph: names ["total"], one level [0,0,0,0]. */
static Querier__V1__FlameGraph *empty_flamegraph(ctx *c)
{
    pd__levels lv = {0};
    static char total[] = "total";
    static char *names[] = {total};
    int64_t *vals = pd_arena_calloc(&c->a, 4, sizeof *vals);
    int64_t **levels = pd_arena_calloc(&c->a, 1, sizeof *levels);
    size_t *lens = pd_arena_calloc(&c->a, 1, sizeof *lens);
    if (!vals || !levels || !lens)
        return NULL;
    levels[0] = vals;
    lens[0] = 4;
    lv.names = names;
    lv.n_names = 1;
    lv.levels = levels;
    lv.level_len = lens;
    lv.n_levels = 1;
    return flamegraph_msg(c, &lv);
}

/* The flame graph of merged profile p's sample type ti cut at max_nodes (<= 0:
 * all), or the empty one. NULL when it failed: the error is replied. */
static Querier__V1__FlameGraph *merged_flamegraph(ctx *c, const pd_profile *p, size_t ti,
                                                  bool empty, int64_t max_nodes)
{
    Querier__V1__FlameGraph *fg;
    if (empty) {
        fg = empty_flamegraph(c);
    } else {
        pd__levels lv;
        int rc = pd__levels_build(p, ti, max_nodes > 0 ? (size_t)max_nodes : 0, false, &c->a, &lv,
                                  &c->err);
        if (rc < 0) {
            fail(c, rc);
            return NULL;
        }
        fg = flamegraph_msg(c, &lv);
    }
    if (!fg)
        pd_connect_error(c->resp, PD_CONNECT_RESOURCE_EXHAUSTED, "out of memory");
    return fg;
}

/* The request's StackTraceSelector as pd__stack_selector (names in the
 * request message, array in the arena). PD_ENOMEM. */
static int stack_sel_of(ctx *c, const Types__V1__StackTraceSelector *in, pd__stack_selector *out)
{
    memset(out, 0, sizeof *out);
    if (!in)
        return 0;
    if (in->go_pgo) {
        out->go_pgo = true;
        out->keep_locations = in->go_pgo->keep_locations;
        out->aggregate_callees = in->go_pgo->aggregate_callees;
        return 0;
    }
    if (!in->n_call_site)
        return 0;
    const char **names = pd_arena_calloc(&c->a, in->n_call_site, sizeof *names);
    if (!names)
        return pd_err_set(&c->err, PD_ENOMEM, "out of memory");
    for (size_t i = 0; i < in->n_call_site; i++)
        names[i] = in->call_site[i] && in->call_site[i]->name ? in->call_site[i]->name : "";
    out->call_site = names;
    out->n_call_site = in->n_call_site;
    return 0;
}

static int select_merge(ctx *c, const char *ptid, const char *selector, int64_t start, int64_t end,
                        const Types__V1__StackTraceSelector *sts, pd__vselection *s, pd_profile *p,
                        size_t *type_idx, bool *empty)
{
    *empty = false;
    if (!ptid || !*ptid)
        return pd_err_set(&c->err, PD_EINVAL, "profile_typeID is required");
    int64_t s0, e0;
    range_of(start, end, &s0, &e0);
    const char *sels[1] = {selector ? selector : ""};
    int rc = pd__vselect(c->env->st, ptid, sels, 1, s0, e0, s, &c->err);
    if (rc < 0)
        return rc;
    if (!s->n) {
        *empty = true;
        return 0;
    }
    pd__stack_selector ss;
    if ((rc = stack_sel_of(c, sts, &ss)) < 0 ||
        (rc = pd__vmerge(c->env, NULL, 0, 0, s, s0, e0, p, type_idx, &c->err)) < 0)
        return rc;
    return pd__stack_select(p, &ss, c->env->limits, &c->err);
}

/* Replies with p's type_idx as a google.v1.Profile (alone or in PprofProfile). */
static void reply_profile(ctx *c, pd_profile *p, size_t type_idx, bool have, bool wrapped)
{
    pd_buf enc;
    pd_buf_init(&enc, 0);
    Google__V1__Profile *gp = NULL;
    int rc = 0;
    if (have) {
        if ((rc = pd_query_keep_sample_type(p, type_idx, &c->err)) < 0 ||
            (rc = pd_profile_encode(p, false, &enc)) < 0) {
            fail(c, rc);
            goto out;
        }
        gp = google__v1__profile__unpack(NULL, enc.len, (const uint8_t *)enc.data);
        if (!gp) {
            pd_connect_error(c->resp, PD_CONNECT_INTERNAL, "re-encoding the merged profile failed");
            goto out;
        }
    }
    Google__V1__Profile empty = GOOGLE__V1__PROFILE__INIT;
    if (wrapped) {
        Querier__V1__SelectMergeStacktracesResponse out =
            QUERIER__V1__SELECT_MERGE_STACKTRACES_RESPONSE__INIT;
        Querier__V1__PprofProfile pp = QUERIER__V1__PPROF_PROFILE__INIT;
        pp.profile = gp ? gp : &empty;
        out.pprof = &pp;
        pd_connect_reply(c->resp, &c->call, &out.base);
    } else {
        pd_connect_reply(c->resp, &c->call, gp ? &gp->base : &empty.base);
    }
out:
    if (gp)
        google__v1__profile__free_unpacked(gp, NULL);
    pd_buf_release(&enc);
}

static void m_select_merge_stacktraces(ctx *c, const pd_http_request *req)
{
    Querier__V1__SelectMergeStacktracesRequest *in = NULL;
    pd__vselection s = {0};
    pd_profile p = {0};
    size_t ti = 0;
    bool empty;
    if (pd_connect_decode(req, &querier__v1__select_merge_stacktraces_request__descriptor,
                          (ProtobufCMessage **)&in, &c->call, c->resp) < 0)
        return;
    int rc = select_merge(c, in->profile_typeid, in->label_selector, in->start, in->end,
                          in->stack_trace_selector, &s, &p, &ti, &empty);
    if (rc < 0) {
        fail(c, rc);
        goto out;
    }
    if (in->format == QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_PPROF) {
        reply_profile(c, &p, ti, !empty, true);
        goto out;
    }
    if (in->format != QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_UNSPECIFIED &&
        in->format != QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_FLAMEGRAPH) {
        pd_connect_error(
            c->resp, PD_CONNECT_UNIMPLEMENTED,
            "format %d is not supported; use PROFILE_FORMAT_FLAMEGRAPH or PROFILE_FORMAT_PPROF",
            (int)in->format);
        goto out;
    }
    Querier__V1__FlameGraph *fg = merged_flamegraph(c, &p, ti, empty, in->max_nodes);
    if (!fg)
        goto out;
    Querier__V1__SelectMergeStacktracesResponse out =
        QUERIER__V1__SELECT_MERGE_STACKTRACES_RESPONSE__INIT;
    out.flamegraph = fg;
    pd_connect_reply(c->resp, &c->call, &out.base);
out:
    pd_profile_release(&p);
    pd__vselection_release(&s);
    protobuf_c_message_free_unpacked(&in->base, NULL);
}

static void m_select_merge_profile(ctx *c, const pd_http_request *req)
{
    Querier__V1__SelectMergeProfileRequest *in = NULL;
    pd__vselection s = {0};
    pd_profile p = {0};
    size_t ti = 0;
    bool empty;
    if (pd_connect_decode(req, &querier__v1__select_merge_profile_request__descriptor,
                          (ProtobufCMessage **)&in, &c->call, c->resp) < 0)
        return;
    int rc = select_merge(c, in->profile_typeid, in->label_selector, in->start, in->end,
                          in->stack_trace_selector, &s, &p, &ti, &empty);
    if (rc < 0)
        fail(c, rc);
    else
        reply_profile(c, &p, ti, !empty, false);
    pd_profile_release(&p);
    pd__vselection_release(&s);
    protobuf_c_message_free_unpacked(&in->base, NULL);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* SelectMergeSpanProfile (Tempo -> Pyroscope, Grafana's "Profiles for this
 * span"): the merge of select_merge narrowed to the samples whose span_id
 * sample label is one of span_selector (storage.h, pd_storage_sample_filter:
 * the filter runs inside the store's aggregation). As Pyroscope: each id is
 * 16 hex digits (else invalid_argument naming it), no id selects nothing,
 * the answer is a flame graph cut at max_nodes. */
static void m_select_merge_span_profile(ctx *c, const pd_http_request *req)
{
    Querier__V1__SelectMergeSpanProfileRequest *in = NULL;
    pd__vselection s = {0};
    pd_profile p = {0};
    uint64_t *ids = NULL;
    if (pd_connect_decode(req, &querier__v1__select_merge_span_profile_request__descriptor,
                          (ProtobufCMessage **)&in, &c->call, c->resp) < 0)
        return;
    int rc = 0;
    if (in->format != QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_UNSPECIFIED &&
        in->format != QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_FLAMEGRAPH) {
        pd_connect_error(c->resp, PD_CONNECT_UNIMPLEMENTED,
                         "SelectMergeSpanProfile: format %d is not supported; use "
                         "PROFILE_FORMAT_FLAMEGRAPH",
                         (int)in->format);
        goto out;
    }
    size_t n = in->n_span_selector;
    if (!(ids = malloc((n ? n : 1) * sizeof *ids))) {
        pd_connect_error(c->resp, PD_CONNECT_RESOURCE_EXHAUSTED, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const char *t = in->span_selector[i] ? in->span_selector[i] : "";
        if (!pd_storage_span_id_parse(t, strlen(t), &ids[i])) {
            pd__api_count_rejected("querier_invalid_argument");
            pd_connect_error(c->resp, PD_CONNECT_INVALID_ARGUMENT,
                             "SelectMergeSpanProfile: span_selector[%zu] \"%.64s\" is not a span "
                             "id (16 hex digits, as OpenTelemetry writes a span id)",
                             i, t);
            goto out;
        }
    }
    if (n)
        qsort(ids, n, sizeof *ids, cmp_u64);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!k || ids[i] != ids[k - 1])
            ids[k++] = ids[i];
    pd_storage_sample_filter f = {.span_ids = ids, .n_span_ids = k};
    if (!in->profile_typeid || !*in->profile_typeid) {
        rc = pd_err_set(&c->err, PD_EINVAL, "profile_typeID is required");
        fail(c, rc);
        goto out;
    }
    int64_t s0, e0;
    range_of(in->start, in->end, &s0, &e0);
    const char *sels[1] = {in->label_selector ? in->label_selector : ""};
    size_t ti = 0;
    bool empty = k == 0; /* no span: nothing passes (Pyroscope's answer too) */
    if (!empty &&
        (rc = pd__vselect(c->env->st, in->profile_typeid, sels, 1, s0, e0, &s, &c->err)) < 0) {
        fail(c, rc);
        goto out;
    }
    empty = empty || !s.n;
    if (!empty) {
        rc = pd__vmerge_filtered(c->env, &f, NULL, 0, 0, &s, s0, e0, &p, &ti, &c->err);
        if (rc == PD_ENOTFOUND) { /* nothing in the range */
            pd_err_clear(&c->err);
            empty = true;
        } else if (rc < 0) {
            fail(c, rc);
            goto out;
        }
        empty = empty || !p.n_sample;
    }
    Querier__V1__FlameGraph *fg = merged_flamegraph(c, &p, ti, empty, in->max_nodes);
    if (!fg)
        goto out;
    Querier__V1__SelectMergeSpanProfileResponse r =
        QUERIER__V1__SELECT_MERGE_SPAN_PROFILE_RESPONSE__INIT;
    r.flamegraph = fg;
    pd_connect_reply(c->resp, &c->call, &r.base);
out:
    free(ids);
    pd_profile_release(&p);
    pd__vselection_release(&s);
    protobuf_c_message_free_unpacked(&in->base, NULL);
}

static void m_diff(ctx *c, const pd_http_request *req)
{
    Querier__V1__DiffRequest *in = NULL;
    pd__vselection ls = {0}, rs = {0};
    pd_profile p = {0};
    size_t ti = 0;
    int rc;
    if (pd_connect_decode(req, &querier__v1__diff_request__descriptor, (ProtobufCMessage **)&in,
                          &c->call, c->resp) < 0)
        return;
    Querier__V1__SelectMergeStacktracesRequest *l = in->left, *r = in->right;
    if (!l || !r || !l->profile_typeid || !*l->profile_typeid || !r->profile_typeid ||
        !*r->profile_typeid) {
        pd_connect_error(c->resp, PD_CONNECT_INVALID_ARGUMENT,
                         "Diff: left and right, each with a profile_typeID, are required");
        goto out;
    }
    int64_t ls0, le0, rs0, re0;
    range_of(l->start, l->end, &ls0, &le0);
    range_of(r->start, r->end, &rs0, &re0);
    const char *lsel[1] = {l->label_selector ? l->label_selector : ""};
    const char *rsel[1] = {r->label_selector ? r->label_selector : ""};
    if ((rc = pd__vselect(c->env->st, l->profile_typeid, lsel, 1, ls0, le0, &ls, &c->err)) < 0 ||
        (rc = pd__vselect(c->env->st, r->profile_typeid, rsel, 1, rs0, re0, &rs, &c->err)) < 0) {
        fail(c, rc);
        goto out;
    }
    Querier__V1__FlameGraphDiff *fd =
        NEW(c, Querier__V1__FlameGraphDiff, QUERIER__V1__FLAME_GRAPH_DIFF__INIT);
    if (!fd)
        goto nomem;
    if (!rs.n || !ls.n) {
        pd_connect_error(c->resp, PD_CONNECT_NOT_FOUND, "Diff: no profiles on the %s side",
                         !ls.n ? "left" : "right");
        goto out;
    }
    pd__stack_selector lss, rss;
    if ((rc = stack_sel_of(c, l->stack_trace_selector, &lss)) < 0 ||
        (rc = stack_sel_of(c, r->stack_trace_selector, &rss)) < 0 ||
        (rc = pd__vmerge(c->env, &ls, ls0, le0, &rs, rs0, re0, &p, &ti, &c->err)) < 0 ||
        (rc = pd__stack_select_diff(&p, &lss, &rss, c->env->limits, &c->err)) < 0) {
        fail(c, rc);
        goto out;
    }
    pd__levels lv;
    int64_t mn = r->max_nodes > 0 ? r->max_nodes : 0;
    if ((rc = pd__levels_build(&p, ti, (size_t)mn, true, &c->a, &lv, &c->err)) < 0) {
        fail(c, rc);
        goto out;
    }
    Querier__V1__FlameGraph *fg = flamegraph_msg(c, &lv);
    if (!fg)
        goto nomem;
    fd->names = fg->names;
    fd->n_names = fg->n_names;
    fd->levels = fg->levels;
    fd->n_levels = fg->n_levels;
    fd->total = lv.total;
    fd->max_self = lv.max_self;
    fd->leftticks = lv.left_ticks;
    fd->rightticks = lv.right_ticks;
    Querier__V1__DiffResponse out = QUERIER__V1__DIFF_RESPONSE__INIT;
    out.flamegraph = fd;
    pd_connect_reply(c->resp, &c->call, &out.base);
    goto out;
nomem:
    pd_connect_error(c->resp, PD_CONNECT_RESOURCE_EXHAUSTED, "out of memory");
out:
    pd_profile_release(&p);
    pd__vselection_release(&ls);
    pd__vselection_release(&rs);
    protobuf_c_message_free_unpacked(&in->base, NULL);
}

/* ---- SelectSeries ---- */

typedef struct bucket {
    int64_t k;
    double sum;
    int64_t count;
} bucket;

typedef struct group {
    pd_labels key;
    bucket *b;
    size_t n, cap;
    double total;
} group;

static int add_point(group *g, int64_t k, double v)
{
    for (size_t i = g->n; i-- > 0;)
        if (g->b[i].k == k) {
            g->b[i].sum += v;
            g->b[i].count++;
            return 0;
        }
    if (g->n == g->cap) {
        size_t c = g->cap ? g->cap * 2 : 32;
        bucket *nb = realloc(g->b, c * sizeof *nb);
        if (!nb)
            return PD_ENOMEM;
        g->b = nb;
        g->cap = c;
    }
    g->b[g->n++] = (bucket){k, v, 1};
    return 0;
}

static int cmp_bucket(const void *a, const void *b)
{
    const bucket *x = a, *y = b;
    return x->k < y->k ? -1 : x->k > y->k;
}

static int cmp_group_total(const void *a, const void *b)
{
    const group *x = a, *y = b;
    if (x->total != y->total)
        return x->total > y->total ? -1 : 1;
    return pd_labels_cmp(&x->key, &y->key);
}

static int cmp_group_labels(const void *a, const void *b)
{
    return pd_labels_cmp(&((const group *)a)->key, &((const group *)b)->key);
}

/* The value of type ty/un of vs's stored profile at ts_ms after the stack
 * selector (0 when the profile has no such type). */
static int selected_value(ctx *c, const pd__vseries *vs, int64_t ts_ms, const char *ty,
                          const char *un, const pd__stack_selector *ss, int64_t *out)
{
    pd_profile p;
    *out = 0;
    int rc = pd_storage_read_profile(c->env->st, vs->si->ref, ts_ms, &p, NULL, &c->err);
    if (rc == PD_ENOTFOUND)
        return 0;
    if (rc < 0)
        return rc;
    if ((rc = pd__stack_select(&p, ss, c->env->limits, &c->err)) == 0) {
        for (size_t t = 0; t < p.n_sample_type; t++) {
            if (strcmp(pd_profile_str(&p, p.sample_type[t].type), ty) ||
                strcmp(pd_profile_str(&p, p.sample_type[t].unit), un))
                continue;
            for (size_t i = 0; i < p.n_sample; i++)
                *out += p.sample[i].value[t];
            break;
        }
    }
    pd_profile_release(&p);
    return rc;
}

static void m_select_series(ctx *c, const pd_http_request *req)
{
    Querier__V1__SelectSeriesRequest *in = NULL;
    pd__vselection s = {0};
    group *g = NULL;
    size_t ng = 0;
    int rc;
    if (pd_connect_decode(req, &querier__v1__select_series_request__descriptor,
                          (ProtobufCMessage **)&in, &c->call, c->resp) < 0)
        return;
    if (!in->profile_typeid || !*in->profile_typeid) {
        pd_connect_error(c->resp, PD_CONNECT_INVALID_ARGUMENT,
                         "SelectSeries: profile_typeID is required");
        goto out;
    }
    if (!(in->step > 0) || !isfinite(in->step)) {
        pd_connect_error(c->resp, PD_CONNECT_INVALID_ARGUMENT,
                         "SelectSeries: step must be > 0 seconds, got %g", in->step);
        goto out;
    }
    int64_t start, end;
    range_of(in->start, in->end, &start, &end);
    if (start == INT64_MIN) {
        pd_connect_error(c->resp, PD_CONNECT_INVALID_ARGUMENT,
                         "SelectSeries: start and end are required");
        goto out;
    }
    double stepd = in->step * 1000.0;
    if (stepd < 1 || stepd > 1e15 || (double)(end - start) / stepd > 1e6) {
        pd_connect_error(c->resp, PD_CONNECT_INVALID_ARGUMENT,
                         "SelectSeries: step %g s gives too many points for the range", in->step);
        goto out;
    }
    int64_t step = (int64_t)stepd;
    const char *sels[1] = {in->label_selector ? in->label_selector : ""};
    pd__stack_selector ss;
    if ((rc = stack_sel_of(c, in->stack_trace_selector, &ss)) < 0 ||
        (rc = pd__vselect(c->env->st, in->profile_typeid, sels, 1, start, end, &s, &c->err)) < 0) {
        fail(c, rc);
        goto out;
    }
    g = calloc(s.n ? s.n : 1, sizeof *g);
    if (!g)
        goto nomem;
    for (size_t i = 0; i < s.n; i++) {
        pd__vseries *vs = &s.v[i];
        pd_labels key;
        pd_labels_init(&key);
        for (size_t k = 0; k < in->n_group_by; k++) {
            const char *v = pd_labels_get(&vs->vl, in->group_by[k]);
            if (v)
                pd_labels_set(&key, in->group_by[k], v, &c->err);
        }
        group *gr = NULL;
        for (size_t k = 0; k < ng && !gr; k++)
            if (!pd_labels_cmp(&g[k].key, &key))
                gr = &g[k];
        if (gr) {
            pd_labels_release(&key);
        } else {
            gr = &g[ng++];
            gr->key = key;
        }
        const pd_point *tp = &vs->pts->v[0];
        const char *ty = tp->types[vs->type_idx].type, *un = tp->types[vs->type_idx].unit;
        for (size_t j = 0; j < vs->pts->n; j++) {
            const pd_point *pt = &vs->pts->v[j];
            if (pt->ts_ms < start || pt->ts_ms > end || !pt->types)
                continue;
            size_t t = vs->type_idx;
            if (t >= pt->n_types || strcmp(pt->types[t].type, ty) ||
                strcmp(pt->types[t].unit, un)) {
                for (t = 0; t < pt->n_types; t++)
                    if (!strcmp(pt->types[t].type, ty) && !strcmp(pt->types[t].unit, un))
                        break;
                if (t == pt->n_types)
                    continue;
            }
            double v = (double)pt->totals[t];
            if (pd__stack_selector_active(&ss)) {
                int64_t sv;
                if ((rc = selected_value(c, vs, pt->ts_ms, ty, un, &ss, &sv)) < 0) {
                    fail(c, rc);
                    goto out;
                }
                v = (double)sv;
            }
            if (add_point(gr, (pt->ts_ms - start) / step, v) < 0)
                goto nomem;
            gr->total += v;
        }
    }
    size_t keep = ng;
    if (in->limit > 0 && (size_t)in->limit < ng) {
        qsort(g, ng, sizeof *g, cmp_group_total);
        keep = (size_t)in->limit;
    }
    qsort(g, keep, sizeof *g, cmp_group_labels);
    Types__V1__Series **ser = pd_arena_calloc(&c->a, keep ? keep : 1, sizeof *ser);
    if (!ser)
        goto nomem;
    size_t nser = 0;
    for (size_t i = 0; i < keep; i++) {
        if (!g[i].n)
            continue;
        qsort(g[i].b, g[i].n, sizeof *g[i].b, cmp_bucket);
        Types__V1__Series *se = NEW(c, Types__V1__Series, TYPES__V1__SERIES__INIT);
        Types__V1__Point **pts = pd_arena_calloc(&c->a, g[i].n, sizeof *pts);
        if (!se || !pts || !(se->labels = pairs_of(c, &g[i].key, NULL, 0, &se->n_labels)))
            goto nomem;
        for (size_t j = 0; j < g[i].n; j++) {
            Types__V1__Point *pt = NEW(c, Types__V1__Point, TYPES__V1__POINT__INIT);
            if (!pt)
                goto nomem;
            pt->timestamp = start + g[i].b[j].k * step;
            pt->value =
                in->aggregation ==
                        TYPES__V1__TIME_SERIES_AGGREGATION_TYPE__TIME_SERIES_AGGREGATION_TYPE_AVERAGE
                    ? g[i].b[j].sum / (double)g[i].b[j].count
                    : g[i].b[j].sum;
            pts[j] = pt;
        }
        se->points = pts;
        se->n_points = g[i].n;
        ser[nser++] = se;
    }
    Querier__V1__SelectSeriesResponse out = QUERIER__V1__SELECT_SERIES_RESPONSE__INIT;
    out.series = ser;
    out.n_series = nser;
    pd_connect_reply(c->resp, &c->call, &out.base);
    goto out;
nomem:
    pd_connect_error(c->resp, PD_CONNECT_RESOURCE_EXHAUSTED, "out of memory");
out:
    for (size_t i = 0; i < ng; i++) {
        pd_labels_release(&g[i].key);
        free(g[i].b);
    }
    free(g);
    pd__vselection_release(&s);
    protobuf_c_message_free_unpacked(&in->base, NULL);
}

static void m_get_profile_stats(ctx *c, const pd_http_request *req)
{
    ProtobufCMessage *in = NULL;
    pd_series_set set = {0};
    if (pd_connect_decode(req, &types__v1__get_profile_stats_request__descriptor, &in, &c->call,
                          c->resp) < 0)
        return;
    int rc = pd_storage_select(c->env->st, NULL, 0, INT64_MIN, INT64_MAX, &set, &c->err);
    if (rc < 0) {
        fail(c, rc);
        goto out;
    }
    Types__V1__GetProfileStatsResponse out = TYPES__V1__GET_PROFILE_STATS_RESPONSE__INIT;
    out.data_ingested = set.n > 0;
    for (size_t i = 0; i < set.n; i++) {
        if (i == 0 || set.v[i].min_ts < out.oldest_profile_time)
            out.oldest_profile_time = set.v[i].min_ts;
        if (i == 0 || set.v[i].max_ts > out.newest_profile_time)
            out.newest_profile_time = set.v[i].max_ts;
    }
    pd_connect_reply(c->resp, &c->call, &out.base);
out:
    pd_series_set_release(&set);
    protobuf_c_message_free_unpacked(in, NULL);
}

const char *pd__querier_route(const pd__querier_env *env, const pd_http_request *req,
                              pd_http_response *resp)
{
    const char *m = req->path + strlen("/querier.v1.QuerierService/");
    ctx c = {.env = env, .resp = resp};
    pd_arena_init(&c.a);
    const char *h = "/querier.v1.QuerierService";
    if (!strcmp(m, "ProfileTypes"))
        m_profile_types(&c, req);
    else if (!strcmp(m, "LabelNames"))
        m_label_names(&c, req, false);
    else if (!strcmp(m, "LabelValues"))
        m_label_names(&c, req, true);
    else if (!strcmp(m, "Series"))
        m_series(&c, req);
    else if (!strcmp(m, "SelectMergeStacktraces"))
        m_select_merge_stacktraces(&c, req);
    else if (!strcmp(m, "SelectMergeProfile"))
        m_select_merge_profile(&c, req);
    else if (!strcmp(m, "SelectMergeSpanProfile"))
        m_select_merge_span_profile(&c, req);
    else if (!strcmp(m, "SelectSeries"))
        m_select_series(&c, req);
    else if (!strcmp(m, "Diff"))
        m_diff(&c, req);
    else if (!strcmp(m, "GetProfileStats"))
        m_get_profile_stats(&c, req);
    else {
        pd_connect_error(resp, PD_CONNECT_UNIMPLEMENTED,
                         "querier.v1.QuerierService/%.100s is not implemented", m);
        resp->status = 404;
    }
    pd_arena_release(&c.a);
    return h;
}
