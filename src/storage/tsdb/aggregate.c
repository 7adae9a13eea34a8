/*
 * storage/tsdb/aggregate.c — the merge pushed down into the embedded store
 * (storage.h: pd_tsdb_aggregate; DESIGN.md §3 "Aggregation pushed
 * down"), as Parca and Pyroscope merge inside their storage: by stack id,
 * with symbols resolved once at the end.
 *
 * For each series asked for, each block holding profiles of it in the range
 * is walked in its decomposed form (pd__block_series_foreach_dprof: value
 * groups decompressed and decoded into stack id, label-set id, values; no
 * pd_profile per input): the values are summed per (stack id, label-set id)
 * in a hash map keyed on the two ids — memory is one entry per distinct
 * (stack, label set) of the series in that block, not per profile — and
 * the part's header is folded with the rules of google/pprof's
 * profile.Merge (time_nanos the earliest with pprof's zero quirk,
 * duration_nanos summed, period the largest, comments concatenated without
 * repeats, default_sample_type and doc_url the first non-empty, period type
 * and drop/keep frames from the first). At the end of the block the sum is
 * turned into one pd_profile (pd__dprof_to_profile against the block's
 * symbols: the only symbolization, for the stacks that survived the sum)
 * and handed to the caller, who folds it into a pd_merge (query/merge.c)
 * with the same rules: the result is the merge of the inputs one by one
 * (the property tests of tests/unit/query/test_aggregate.c check it).
 *
 * Profiles whose sample types or period type differ from the part's so far
 * end the part (it is handed over) and start a new one, so the caller's
 * merger sees the mismatch and names it, as before.
 *
 * Series are summed together per block when the caller puts them in one
 * group (pd_tsdb_aggregate's group[]: the query layer groups by the
 * by= labels, all series in one group without them).
 *
 * The head (the recent hours, not yet cut into a block) is summed the same
 * way on its own ids, from its groups' running sums where the range holds a
 * group whole (aggregate_head.c). Blocks come first, in ascending time,
 * then the head.
 *
 * The blocks' sums may run on a pool of threads (aggregate_workers; "the
 * blocks walked on worker threads" below), handed to the caller in the
 * same order as the one-by-one walk.
 *
 * A sample filter (pd_tsdb_aggregate_filtered: span profiles) is
 * decided per label-set id of the part's symbols, the first time the id is
 * met in the part, from the set's labels (lset_passes: a byte per id,
 * cleared with the part); a sample whose set does not pass is never added,
 * so the sum, and the symbolization after it, hold only the span's stacks.
 * Replayed head profiles (WAL_ONLY) are filtered on their decoded labels.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/time.h"
#include "base/u64map.h"
#include "storage/delta_int.h"
#include "storage/storage.h"
#include "storage/tsdb/blockagg_int.h"
#include "storage/tsdb/chunks_int.h"
#include "storage/tsdb/db_int.h"
#include "storage/tsdb/aggregate_int.h"

/* The weight of series i's profile at ts (1 when a has no weights). */
int pd__agg_weight(const agg *a, size_t i, int64_t ts)
{
    if (!a->wt)
        return 1;
    if (!a->wt[i].on)
        return ts >= a->wt[i].lo && ts <= a->wt[i].hi;
    const agg_w *w = &a->wt[i];
    size_t lo = 0, hi = w->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (w->ts[mid] < ts)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < w->n && w->ts[lo] == ts ? w->w[lo] : 0;
}

static void agg_clear(agg *a)
{
    if (a->n_lok)
        memset(a->lok, 0, a->n_lok); /* the next part may read other symbols */
    pd_u64map_release(&a->map);
    pd_u64map_init(&a->map);
    a->n = 0;
    a->memo_n = 0; /* its entries are gone */
    a->part.n_profiles = 0;
    a->part.n_series = 0;
    a->last_i = 0;
    memset(&a->h, 0, sizeof a->h);
}

void pd__agg_release(agg *a)
{
    pd_u64map_release(&a->map);
    free(a->types);
    free(a->comment);
    free(a->stack);
    free(a->lset);
    free(a->val);
    free(a->totals);
    free(a->memo_stack);
    free(a->memo_lset);
    free(a->memo_e);
    free(a->cur_stack);
    free(a->cur_lset);
    free(a->cur_e);
    free(a->lok);
    pd__bagg_scratch_release(&a->sc);
}

/* Whether label set ls of sym passes f (storage.h's rule, label by label). A
 * damaged label set (a block's frame that did not verify) never does. */
static bool lset_passes_sym(const pd_symbols *sym, const pd_storage_sample_filter *f, uint32_t ls)
{
    if (ls == 0 || ls > sym->n_lset || (sym->lset_bad && sym->lset_bad[ls]))
        return false;
    for (uint64_t j = sym->lset_off[ls - 1]; j < sym->lset_off[ls]; j++) {
        const pd_sym_label *lb = &sym->lab[j];
        if (lb->key >= sym->n_str || lb->str >= sym->n_str)
            continue;
        if (pd__storage_span_label_passes(f, sym->str[lb->key], sym->str_len[lb->key],
                                          sym->str[lb->str], sym->str_len[lb->str]))
            return true;
    }
    return false;
}

/* Whether the samples of label set ls pass a's filter (true without one),
 * decided once per label set and part. */
static bool lset_passes(agg *a, uint32_t ls)
{
    if (!a->flt)
        return true;
    if (ls >= a->n_lok) {
        size_t nc = (size_t)ls + 1 > 2 * a->n_lok ? (size_t)ls + 1 : 2 * a->n_lok;
        uint8_t *nl = realloc(a->lok, nc);
        if (!nl) /* out of memory: decided each time */
            return lset_passes_sym(a->sym, a->flt, ls);
        memset(nl + a->n_lok, 0, nc - a->n_lok);
        a->lok = nl;
        a->n_lok = nc;
    }
    if (!a->lok[ls])
        a->lok[ls] = lset_passes_sym(a->sym, a->flt, ls) ? 1 : 2;
    return a->lok[ls] == 1;
}

static __thread const agg *sort_agg;

static int cmp_entry(const void *x, const void *y)
{
    const agg *a = sort_agg;
    uint32_t i = *(const uint32_t *)x, j = *(const uint32_t *)y;
    if (a->stack[i] != a->stack[j])
        return a->stack[i] < a->stack[j] ? -1 : 1;
    return a->lset[i] < a->lset[j] ? -1 : a->lset[i] > a->lset[j];
}

/* Hands the part summed so far to the caller as one profile. */
int pd__agg_flush(agg *a)
{
    if (!a->part.n_profiles)
        return 0;
    size_t nt = a->h.n_types, k = 0;
    int rc = 0;
    uint32_t *ord = malloc((a->n ? a->n : 1) * sizeof *ord);
    pd_dprof d = a->h;
    d.types = a->types;
    d.comment = a->comment;
    d.stack = malloc((a->n ? a->n : 1) * sizeof *d.stack);
    d.lset = malloc((a->n ? a->n : 1) * sizeof *d.lset);
    d.value = malloc((a->n ? a->n : 1) * (nt ? nt : 1) * sizeof *d.value);
    d.totals = a->totals;
    if (!ord || !d.stack || !d.lset || !d.value) {
        rc = pd_err_set(a->err, PD_ENOMEM, "aggregate: out of memory");
        goto out;
    }
    for (size_t i = 0; i < a->n; i++) {
        bool zero = true; /* summed to zero: pprof drops it (merge.c would) */
        for (size_t v = 0; v < nt && zero; v++)
            zero = a->val[i * nt + v] == 0;
        if (!zero)
            ord[k++] = (uint32_t)i;
    }
    sort_agg = a;
    if (k)
        qsort(ord, k, sizeof *ord, cmp_entry);
    for (size_t i = 0; i < k; i++) {
        d.stack[i] = a->stack[ord[i]];
        d.lset[i] = a->lset[ord[i]];
        memcpy(d.value + i * nt, a->val + (size_t)ord[i] * nt, nt * sizeof *d.value);
    }
    d.n_sample = (uint32_t)k;
    pd_profile p;
    if ((rc = pd__dprof_to_profile(a->sym, &d, &p, a->err)) < 0)
        goto out;
    if (a->take) { /* a worker's part: kept for the calling thread's fn, in order */
        rc = a->take(a->ctx, &a->part, &p, a->err);
        goto out;
    }
    /* p owns its strings (pd_profile_intern): the caller's fold needs no
       lock of the store, and the head walk lets writers in meanwhile */
    if (a->fn_unlock)
        pthread_rwlock_unlock(a->fn_unlock);
    rc = a->fn(a->ctx, &a->part, &p, a->err);
    if (a->fn_unlock)
        pthread_rwlock_rdlock(a->fn_unlock);
    pd_profile_release(&p);
out:
    free(ord);
    free(d.stack);
    free(d.lset);
    free(d.value);
    agg_clear(a);
    return rc;
}

static bool same_header(const agg *a, const pd_dprof *d)
{
    return d->n_types == a->h.n_types && d->period_type == a->h.period_type &&
           d->period_unit == a->h.period_unit &&
           !memcmp(d->types, a->types, 2 * (size_t)d->n_types * sizeof *d->types);
}

/* Folds d's header into the part's (first: d's header starts it, with nt
 * sample types and zero totals; else pprof's header rules, profile.Merge, as
 * query/merge.c; tn_reset: d's time_nanos replaces the part's) and adds d's
 * comments not seen yet. PD_ENOMEM (a->err set). */
static int agg_fold_header(agg *a, const pd_dprof *d, size_t nt, bool first, bool tn_reset)
{
    if (first) {
        a->h = *d;
        a->h.n_comment = 0;
        uint32_t *t = realloc(a->types, (2 * nt + 1) * sizeof *t);
        int64_t *tot = realloc(a->totals, (nt + 1) * sizeof *tot);
        if (t)
            a->types = t;
        if (tot)
            a->totals = tot;
        if (!t || !tot)
            return pd_err_set(a->err, PD_ENOMEM, "aggregate: out of memory");
        memcpy(a->types, d->types, 2 * nt * sizeof *t);
        memset(a->totals, 0, nt * sizeof *tot);
    } else {
        if (tn_reset || a->h.time_nanos == 0 || d->time_nanos < a->h.time_nanos)
            a->h.time_nanos = d->time_nanos;
        if (a->h.period == 0 || a->h.period < d->period)
            a->h.period = d->period;
        a->h.duration_nanos =
            (int64_t)((uint64_t)a->h.duration_nanos + (uint64_t)d->duration_nanos);
        if (!a->h.default_sample_type)
            a->h.default_sample_type = d->default_sample_type;
        if (!a->h.doc_url)
            a->h.doc_url = d->doc_url;
    }
    for (size_t i = 0; i < d->n_comment; i++) {
        bool seen = false;
        for (size_t j = 0; j < a->h.n_comment && !seen; j++)
            seen = a->comment[j] == d->comment[i];
        if (seen)
            continue;
        if (a->h.n_comment == a->cap_comment) {
            size_t nc = a->cap_comment ? 2 * a->cap_comment : 8;
            uint32_t *c = realloc(a->comment, nc * sizeof *c);
            if (!c)
                return pd_err_set(a->err, PD_ENOMEM, "aggregate: out of memory");
            a->comment = c;
            a->cap_comment = nc;
        }
        a->comment[a->h.n_comment++] = d->comment[i];
    }
    return 0;
}

/* A new zeroed entry of nt values for (stack, lset) under key in a->map: its index in *e.
 * PD_ETOOBIG past AGG_MAX_ENTRIES, PD_ENOMEM (a->err set). */
static int agg_new_entry(agg *a, size_t nt, uint64_t key, uint32_t stack, uint32_t lset,
                         uint64_t *e)
{
    if (a->n == a->cap) {
        size_t nc = a->cap ? 2 * a->cap : 1024;
        if (nc > AGG_MAX_ENTRIES)
            return pd_err_set(a->err, PD_ETOOBIG,
                              "aggregate: more than %zu distinct stacks in one block",
                              AGG_MAX_ENTRIES);
        uint32_t *st = realloc(a->stack, nc * sizeof *st);
        if (st)
            a->stack = st;
        uint32_t *ls = realloc(a->lset, nc * sizeof *ls);
        if (ls)
            a->lset = ls;
        int64_t *va = realloc(a->val, nc * (nt ? nt : 1) * sizeof *va);
        if (va)
            a->val = va;
        if (!st || !ls || !va)
            return pd_err_set(a->err, PD_ENOMEM, "aggregate: out of memory");
        a->cap = nc;
    }
    *e = a->n++;
    a->stack[*e] = stack;
    a->lset[*e] = lset;
    memset(a->val + *e * nt, 0, nt * sizeof *a->val);
    if (pd_u64map_put(&a->map, key, *e) < 0)
        return pd_err_set(a->err, PD_ENOMEM, "aggregate: out of memory");
    return 0;
}

static int agg_add_w(agg *a, const pd_dprof *d, int64_t w);

/* Room for n keys in the memo's two sets; false when out of memory (the
 * samples are then looked up as usual). */
static bool memo_room(agg *a, size_t n)
{
    if (n <= a->memo_cap)
        return true;
    size_t nc = 2 * n;
    uint32_t **v[6] = {&a->memo_stack, &a->memo_lset, &a->memo_e,
                       &a->cur_stack,  &a->cur_lset,  &a->cur_e};
    for (int i = 0; i < 6; i++) {
        uint32_t *p = realloc(*v[i], nc * sizeof *p);
        if (!p) {
            a->memo_n = 0; /* (some arrays grew: the old keys are kept, unused) */
            return false;
        }
        *v[i] = p;
    }
    a->memo_cap = nc;
    return true;
}

/* pd__block_series_foreach_dprof's callback: folds d into the part, times
 * its weight (pd__agg_weight: 1 unless a delta aggregation says otherwise). */
int pd__agg_add(void *ctx, const pd_dprof *d)
{
    agg *a = ctx;
    int rc;
    if (a->poll && (++a->n_added & 15) == 0 && (rc = a->poll(a->ctx, a->err)) < 0)
        return rc;
    if (a->stop && __atomic_load_n(a->stop, __ATOMIC_RELAXED))
        return PD_ECANCELED;
    int w = pd__agg_weight(a, a->cur_i, d->ts);
    return w ? agg_add_w(a, d, w) : 0;
}

/* Folds d into the part with its values and totals times w (1 or -1). */
static int agg_add_w(agg *a, const pd_dprof *d, int64_t w)
{
    int rc;
    if (a->part.n_profiles && !same_header(a, d)) {
        if ((rc = pd__agg_flush(a)) < 0)
            return rc;
        /* the new part starts with the series whose profile differs (the
           caller's merger names it when it refuses the mismatch) */
        a->part.series = a->cur_i;
        a->part.n_series = 1;
        a->last_i = a->cur_i + 1;
    }
    size_t nt = d->n_types;
    bool first = !a->part.n_profiles;
    if ((rc = agg_fold_header(a, d, nt, first, false)) < 0)
        return rc;
    if (first)
        a->part.min_ts = a->part.max_ts = d->ts;
    a->part.n_profiles++;
    if (d->ts < a->part.min_ts)
        a->part.min_ts = d->ts;
    if (d->ts > a->part.max_ts)
        a->part.max_ts = d->ts;
    for (size_t v = 0; v < nt; v++)
        a->totals[v] = (int64_t)((uint64_t)a->totals[v] + (uint64_t)d->totals[v] * (uint64_t)w);
    bool memo = memo_room(a, d->n_sample);
    size_t j = 0; /* the merge walk's position in the last profile's keys */
    for (uint32_t s = 0; s < d->n_sample; s++) {
        const int64_t *sv = d->value + (size_t)s * nt;
        uint64_t key = (uint64_t)d->stack[s] << 32 | d->lset[s], e;
        uint32_t known = UINT32_MAX;
        if (memo) {
            while (j < a->memo_n && ((uint64_t)a->memo_stack[j] << 32 | a->memo_lset[j]) < key)
                j++;
            if (j < a->memo_n && ((uint64_t)a->memo_stack[j] << 32 | a->memo_lset[j]) == key)
                known = a->memo_e[j];
            a->cur_stack[s] = d->stack[s];
            a->cur_lset[s] = d->lset[s];
            a->cur_e[s] = known;
        }
        if (a->flt && !lset_passes(a, d->lset[s]))
            continue; /* (never gets an entry: its memo stays UINT32_MAX) */
        bool zero = true;
        for (size_t v = 0; v < nt && zero; v++)
            zero = sv[v] == 0;
        if (zero)
            continue;
        if (known != UINT32_MAX) {
            int64_t *dv = a->val + (size_t)known * nt;
            for (size_t v = 0; v < nt; v++)
                dv[v] = (int64_t)((uint64_t)dv[v] + (uint64_t)sv[v] * (uint64_t)w);
            continue;
        }
        if (key == UINT64_MAX)
            return pd_err_set(a->err, PD_ECORRUPT, "aggregate: stack id out of range");
        if (!pd_u64map_get(&a->map, key, &e)) {
            int erc = agg_new_entry(a, nt, key, d->stack[s], d->lset[s], &e);
            if (erc < 0)
                return erc;
        }
        if (memo)
            a->cur_e[s] = (uint32_t)e; /* < AGG_MAX_ENTRIES */
        int64_t *dv = a->val + e * nt;
        for (size_t v = 0; v < nt; v++)
            dv[v] = (int64_t)((uint64_t)dv[v] + (uint64_t)sv[v] * (uint64_t)w);
    }
    if (memo) { /* this profile's keys are the next one's memo */
        uint32_t *t;
        t = a->memo_stack, a->memo_stack = a->cur_stack, a->cur_stack = t;
        t = a->memo_lset, a->memo_lset = a->cur_lset, a->cur_lset = t;
        t = a->memo_e, a->memo_e = a->cur_e, a->cur_e = t;
        a->memo_n = d->n_sample;
    }
    return 0;
}

/* A series' part in one block, to be summed with the others of its group. */
typedef struct entry {
    hblock *hb;
    uint32_t id;          /* series id in the block */
    size_t i;             /* index into refs */
    size_t gfirst;        /* first index of refs in i's group */
    int64_t bmint;        /* the block's min time */
    int64_t smint, smaxt; /* of the series in the block */
} entry;

static int cmp_entry_order(const void *x, const void *y)
{
    const entry *a = x, *b = y;
    if (a->bmint != b->bmint)
        return a->bmint < b->bmint ? -1 : 1;
    if (a->hb != b->hb) /* blocks of equal start (cut apart): by id, the same every run */
        return strcmp(pd__block_meta(a->hb->b)->ulid, pd__block_meta(b->hb->b)->ulid) < 0 ? -1 : 1;
    if (a->gfirst != b->gfirst)
        return a->gfirst < b->gfirst ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

/* ---- a block's pre-summed records (blockagg_int.h) ----
 *
 * A series whose whole part in a block lies inside the walk's range (and
 * inside its weight window: a series summed as is in a delta aggregation)
 * is added from the block's record — the sum of its profiles there, with
 * the header folded by the same rules — instead of decoding each profile:
 * pd__agg_add_rec is agg_add_w for a run of profiles at once, in the same order
 * (blockagg.c says why each header rule combines). A cumulative series'
 * deltas add only a few of its profiles (the last of each lifetime, the
 * baseline): those are read alone, a value group each, when few; a part the
 * range cuts, or one without a record, is decoded as before. */

/* Folds record r (series a->cur_i's whole part in a block) into the part. */
int pd__agg_add_rec(agg *a, const pd_bagg_rec *r)
{
    const pd_dprof *d = &r->h;
    int rc;
    if (a->poll && (rc = a->poll(a->ctx, a->err)) < 0)
        return rc;
    if (a->stop && __atomic_load_n(a->stop, __ATOMIC_RELAXED))
        return PD_ECANCELED;
    if (a->part.n_profiles && !same_header(a, d)) {
        if ((rc = pd__agg_flush(a)) < 0)
            return rc;
        a->part.series = a->cur_i;
        a->part.n_series = 1;
        a->last_i = a->cur_i + 1;
    }
    size_t nt = d->n_types;
    bool first = !a->part.n_profiles;
    if ((rc = agg_fold_header(a, d, nt, first, r->tn_reset)) < 0)
        return rc;
    if (first) {
        a->part.min_ts = r->min_ts;
        a->part.max_ts = r->max_ts;
    }
    a->part.n_profiles += r->n_profiles;
    if (r->min_ts < a->part.min_ts)
        a->part.min_ts = r->min_ts;
    if (r->max_ts > a->part.max_ts)
        a->part.max_ts = r->max_ts;
    for (size_t v = 0; v < nt; v++)
        a->totals[v] = (int64_t)((uint64_t)a->totals[v] + (uint64_t)d->totals[v]);
    for (uint32_t s = 0; s < d->n_sample; s++) {
        if (a->flt && !lset_passes(a, d->lset[s]))
            continue;
        const int64_t *sv = d->value + (size_t)s * nt;
        uint64_t key = (uint64_t)d->stack[s] << 32 | d->lset[s], e;
        if (!pd_u64map_get(&a->map, key, &e)) {
            int erc = agg_new_entry(a, nt, key, d->stack[s], d->lset[s], &e);
            if (erc < 0)
                return erc;
        }
        int64_t *dv = a->val + e * nt;
        for (size_t v = 0; v < nt; v++)
            dv[v] = (int64_t)((uint64_t)dv[v] + (uint64_t)sv[v]);
    }
    if (a->n_rec)
        __atomic_add_fetch(a->n_rec, 1, __ATOMIC_RELAXED);
    return 0;
}

#define SPARSE_MAX 8 /* weighted profiles of a part read one group each, at most */

/* Sums entry en's series in its block over [mint, maxt] into a (a->cur_i
 * set): from the block's record when the range holds the whole part, the
 * weighted profiles alone when a delta aggregation adds few of them, else
 * every profile decoded. Returns as pd__block_series_foreach_dprof. */
static int walk_series(agg *a, const entry *en, int64_t mint, int64_t maxt, pd_err *err)
{
    pd_block *b = en->hb->b;
    const agg_w *w = a->wt ? &a->wt[a->cur_i] : NULL;
    int64_t lo = mint, hi = maxt;
    if (w && !w->on) {
        lo = lo > w->lo ? lo : w->lo;
        hi = hi < w->hi ? hi : w->hi;
    }
    const pd_bagg *g = __atomic_load_n(&en->hb->agg, __ATOMIC_ACQUIRE);
    if (g && (!w || !w->on) && en->smint >= lo && en->smaxt <= hi) {
        pd_bagg_rec r;
        int rc = pd__bagg_get(g, en->id, &r, &a->sc);
        if (rc < 0)
            return pd_err_set(err, rc, "aggregate: out of memory");
        if (rc > 0 && r.min_ts == en->smint && r.max_ts == en->smaxt)
            return pd__agg_add_rec(a, &r);
    }
    if (w && w->on) { /* the weighted profiles in the part, when few: one by one */
        size_t k0 = 0, k1;
        while (k0 < w->n && w->ts[k0] < en->smint)
            k0++;
        for (k1 = k0; k1 < w->n && w->ts[k1] <= en->smaxt; k1++)
            ;
        if (k1 - k0 <= SPARSE_MAX) {
            int bad = 0;
            pd_err be;
            pd_err_clear(&be);
            for (size_t k = k0; k < k1; k++) {
                if (w->ts[k] < mint || w->ts[k] > maxt)
                    continue;
                pd_err e1;
                pd_err_clear(&e1);
                int rc = pd__block_series_foreach_dprof(b, en->id, w->ts[k], w->ts[k], pd__agg_add,
                                                        a, &e1);
                if (rc == PD_ECORRUPT) { /* as the full walk: skipped, reported at the end */
                    if (!bad)
                        be = e1;
                    bad = PD_ECORRUPT;
                    continue;
                }
                if (rc < 0) {
                    if (err)
                        *err = e1;
                    return rc;
                }
            }
            if (bad && err)
                *err = be;
            return bad;
        }
    }
    return pd__block_series_foreach_dprof(b, en->id, mint, maxt, pd__agg_add, a, err);
}

/* ---- the blocks walked on worker threads ----
 *
 * A query's block work is a list of *units*: the entries of one block and
 * one group ([k, e) of the sorted entries), each summed into one or more
 * parts. With aggregate_workers > 1 (storage.h) and two units or more,
 * walk_pool starts min(workers, units) threads for the call; each takes the
 * next unit not yet taken, sums it with its own agg (its own hash map),
 * symbolizes its parts (pd__dprof_to_profile, reading the block's symbols,
 * which are immutable) and keeps them in the unit. The calling thread hands
 * the units' parts to fn strictly in unit order — the order of the one-by-
 * one walk — and, for the damage a worker met, calls the hblock's reporting
 * (pd__tsdb_hb_damaged, _warn_known) there too, so that the warnings reach
 * the caller's collector (a per-thread one) in the same order.
 *
 * Memory: a worker takes unit u only while u < delivered + window, window =
 * 2 x threads: at most `window` units' parts are held at once (each one
 * entry per distinct (stack, label set) of one group in one block,
 * symbolized), plus one sum map per thread — never per profile.
 *
 * Stopping: the calling thread calls poll at least every POOL_POLL_MS while
 * it waits and after each unit handed over; a negative code (a deadline, a
 * client gone), an error of fn or of a unit (the first in unit order) sets
 * stop, which every worker sees before its next profile (PD_ECANCELED), and
 * the call returns after joining them. Errors of units after the first
 * failed one are dropped with their parts, as the one-by-one walk would
 * never have reached them. */

#define POOL_POLL_MS 10

typedef struct wpart {
    pd_storage_agg_part part;
    pd_profile p; /* owned */
} wpart;

typedef struct wdmg { /* damage met by a worker, reported by the calling thread */
    size_t j;         /* the entry */
    bool known;       /* already known damaged: pd__tsdb_hb_warn_known */
    pd_err e;         /* else what the read said: pd__tsdb_hb_damaged */
} wdmg;

typedef struct wunit {
    size_t k, e; /* its entries */
    int state;   /* 0 to walk, 1 being walked, 2 walked (pool mu) */
    int rc;
    pd_err err;
    wpart *parts;
    size_t n_parts, cap_parts;
    wdmg *dmg;
    size_t n_dmg, cap_dmg;
} wunit;

typedef struct wpool {
    pthread_mutex_t mu;
    pthread_cond_t cv_done; /* a unit was walked (CLOCK_MONOTONIC) */
    pthread_cond_t cv_work; /* delivered moved, or stop */
    wunit *u;
    size_t n_u, next, delivered, window;
    int stop; /* __atomic; written under mu */
    const entry *es;
    const agg_w *wt;
    const pd_storage_sample_filter *flt;
    int64_t mint, maxt;
    uint64_t *n_rec;
} wpool;

static void unit_release(wunit *u)
{
    for (size_t i = 0; i < u->n_parts; i++)
        pd_profile_release(&u->parts[i].p);
    free(u->parts);
    free(u->dmg);
    u->parts = NULL;
    u->dmg = NULL;
    u->n_parts = u->n_dmg = 0;
}

/* agg.take of a worker: keeps the part in its unit (a->ctx). */
static int take_part(void *ctx, const pd_storage_agg_part *part, pd_profile *p, pd_err *err)
{
    wunit *u = ctx;
    if (u->n_parts == u->cap_parts) {
        size_t nc = u->cap_parts ? 2 * u->cap_parts : 4;
        wpart *np = realloc(u->parts, nc * sizeof *np);
        if (!np) {
            pd_profile_release(p);
            return pd_err_set(err, PD_ENOMEM, "aggregate: out of memory");
        }
        u->parts = np;
        u->cap_parts = nc;
    }
    u->parts[u->n_parts].part = *part;
    u->parts[u->n_parts++].p = *p; /* moved */
    return 0;
}

static int add_dmg(wunit *u, size_t j, bool known, const pd_err *e)
{
    if (u->n_dmg == u->cap_dmg) {
        size_t nc = u->cap_dmg ? 2 * u->cap_dmg : 4;
        wdmg *nd = realloc(u->dmg, nc * sizeof *nd);
        if (!nd)
            return PD_ENOMEM;
        u->dmg = nd;
        u->cap_dmg = nc;
    }
    wdmg *d = &u->dmg[u->n_dmg++];
    d->j = j;
    d->known = known;
    if (e)
        d->e = *e;
    else
        pd_err_clear(&d->e);
    return 0;
}

/* Sums unit u's entries with a (a worker's), as the one-by-one loop of
 * aggregate() does, into u's parts and damage list. */
static void walk_unit(wpool *w, wunit *u, agg *a)
{
    const entry *es = w->es;
    pd_err_clear(&u->err);
    a->sym = pd__block_symbols(es[u->k].hb->b);
    a->part = (pd_storage_agg_part){.series = es[u->k].i};
    a->ctx = u;
    a->err = &u->err;
    int rc = 0;
    for (size_t j = u->k; j < u->e && rc >= 0; j++) {
        if (pd__tsdb_hb_bad(es[j].hb, es[j].id)) {
            if (add_dmg(u, j, true, NULL) < 0)
                rc = pd_err_set(&u->err, PD_ENOMEM, "aggregate: out of memory");
            continue;
        }
        a->part.n_series++;
        a->cur_i = es[j].i;
        rc = walk_series(a, &es[j], w->mint, w->maxt, &u->err);
        if (rc == PD_ECORRUPT) { /* what read is summed; the damage is reported */
            if (add_dmg(u, j, false, &u->err) < 0)
                rc = pd_err_set(&u->err, PD_ENOMEM, "aggregate: out of memory");
            else
                rc = 0;
            pd_err_clear(&u->err);
        }
    }
    if (rc >= 0)
        rc = pd__agg_flush(a);
    else
        agg_clear(a); /* the next unit starts empty */
    u->rc = rc;
}

static void *pool_worker(void *arg)
{
    wpool *w = arg;
    pthread_setname_np(pthread_self(), "pd-aggregate"); /* in top -H, perf */
    agg a = {.wt = w->wt, .take = take_part, .stop = &w->stop, .flt = w->flt, .n_rec = w->n_rec};
    pd_u64map_init(&a.map);
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->stop && w->next < w->n_u && w->next >= w->delivered + w->window)
            pthread_cond_wait(&w->cv_work, &w->mu);
        if (w->stop || w->next >= w->n_u)
            break;
        wunit *u = &w->u[w->next++];
        u->state = 1;
        pthread_mutex_unlock(&w->mu);
        walk_unit(w, u, &a);
        pthread_mutex_lock(&w->mu);
        u->state = 2;
        pthread_cond_broadcast(&w->cv_done);
    }
    pthread_mutex_unlock(&w->mu);
    pd__agg_release(&a);
    return NULL;
}

/* The block part of aggregate() on a pool of threads (see above): es[0..n_es)
 * sorted, units = runs of equal (hb, gfirst). Returns fn's, poll's or the
 * first failed unit's code, or 0; *started = false (nothing done) when
 * there is a single unit or no thread could be started, so the caller
 * walks one by one. */
static int walk_pool(pd_tsdb *s, const entry *es, size_t n_es, const uint64_t *refs,
                     const agg_w *wt, const pd_storage_sample_filter *flt, int64_t mint,
                     int64_t maxt, pd_storage_agg_fn fn, int (*poll)(void *ctx, pd_err *err),
                     void *ctx, size_t threads, bool *started, pd_err *err)
{
    *started = false;
    size_t n_u = 0;
    for (size_t k = 0; k < n_es; k++)
        n_u += !k || es[k].hb != es[k - 1].hb || es[k].gfirst != es[k - 1].gfirst;
    if (n_u < 2)
        return 0; /* nothing to share: the one-by-one walk */
    wpool w = {.es = es,
               .wt = wt,
               .flt = flt,
               .mint = mint,
               .maxt = maxt,
               .n_u = n_u,
               .n_rec = &s->n_agg_records};
    if (!(w.u = calloc(n_u, sizeof *w.u)))
        return pd_err_set(err, PD_ENOMEM, "aggregate: out of memory");
    for (size_t k = 0, x = 0; k < n_es; x++) {
        size_t e = k;
        while (e < n_es && es[e].hb == es[k].hb && es[e].gfirst == es[k].gfirst)
            e++;
        w.u[x].k = k;
        w.u[x].e = e;
        k = e;
    }
    if (threads > n_u)
        threads = n_u;
    w.window = 2 * threads;
    pthread_t *tid = calloc(threads, sizeof *tid);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv_done, &ca);
    pthread_cond_init(&w.cv_work, NULL);
    pthread_condattr_destroy(&ca);
    size_t n_t = 0;
    while (tid && n_t < threads && pthread_create(&tid[n_t], NULL, pool_worker, &w) == 0)
        n_t++;
    int rc = 0;
    if (!n_t)
        goto out;
    *started = true;
    if (n_t > 1)
        __atomic_add_fetch(&s->n_agg_parallel, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&w.mu);
    for (size_t x = 0; x < n_u && rc >= 0; x++) {
        wunit *u = &w.u[x];
        while (u->state != 2 && rc >= 0) {
            if (poll) {
                pthread_mutex_unlock(&w.mu);
                rc = poll(ctx, err);
                pthread_mutex_lock(&w.mu);
                if (rc < 0)
                    break;
            }
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_nsec += POOL_POLL_MS * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            if (u->state != 2)
                pthread_cond_timedwait(&w.cv_done, &w.mu, &ts);
        }
        if (rc < 0)
            break;
        pthread_mutex_unlock(&w.mu);
        /* in the order of the one-by-one walk: damage, then the parts */
        for (size_t d = 0; d < u->n_dmg; d++) {
            const entry *en = &es[u->dmg[d].j];
            if (u->dmg[d].known)
                pd__tsdb_hb_warn_known(en->hb, en->id, refs[en->i]);
            else
                pd__tsdb_hb_damaged(en->hb, en->id, &u->dmg[d].e);
        }
        for (size_t i = 0; i < u->n_parts && rc >= 0; i++) /* those flushed before a failure too */
            rc = fn(ctx, &u->parts[i].part, &u->parts[i].p, err);
        if (u->rc < 0 && rc >= 0) {
            rc = u->rc;
            if (err)
                *err = u->err;
        }
        unit_release(u);
        if (rc >= 0 && poll)
            rc = poll(ctx, err);
        pthread_mutex_lock(&w.mu);
        w.delivered = x + 1;
        pthread_cond_broadcast(&w.cv_work);
    }
    __atomic_store_n(&w.stop, 1, __ATOMIC_RELAXED);
    pthread_cond_broadcast(&w.cv_work);
    pthread_mutex_unlock(&w.mu);
    for (size_t t = 0; t < n_t; t++)
        pthread_join(tid[t], NULL);
out:
    for (size_t x = 0; x < n_u; x++)
        unit_release(&w.u[x]);
    free(w.u);
    free(tid);
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv_done);
    pthread_cond_destroy(&w.cv_work);
    return rc;
}

/* storage.c's pd_storage_workers for this backend */
int pd_tsdb_workers(pd_tsdb *s);
int pd_tsdb_workers(pd_tsdb *s)
{
    return s->agg_workers;
}

int pd_storage_aggregate_workers(int n)
{
    if (n > 0)
        return n < PD_STORAGE_MAX_AGG_WORKERS ? n : PD_STORAGE_MAX_AGG_WORKERS;
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c < 1 ? 1 : c > 4 ? 4 : (int)c;
}

/* pd_tsdb_aggregate, and with wt (per index of refs, may be NULL) the
 * weighted walk of pd_tsdb_aggregate_delta; with flt (may be NULL) only
 * the samples it passes (pd_tsdb_aggregate_filtered). */
static int aggregate(pd_tsdb *s, const uint64_t *refs, const uint32_t *group, const agg_w *wt,
                     const pd_storage_sample_filter *flt, size_t n, int64_t mint, int64_t maxt,
                     pd_storage_agg_fn fn, int (*poll)(void *ctx, pd_err *err), void *ctx,
                     size_t *n_series, pd_err *err)
{
    pd_err_clear(err);
    if (n_series)
        *n_series = 0;
    int rc = 0;
    bool cut_locked = false;
    entry *es = NULL;
    size_t n_es = 0, cap_es = 0;
    size_t *gfirst = malloc((n ? n : 1) * sizeof *gfirst);
    pd_u64map gm; /* group -> first index */
    pd_u64map_init(&gm);
    if (!gfirst)
        goto nomem;
    for (size_t i = 0; i < n; i++) {
        uint64_t f;
        if (!group)
            gfirst[i] = i;
        else if (pd_u64map_get(&gm, group[i], &f))
            gfirst[i] = (size_t)f;
        else if (pd_u64map_put(&gm, group[i], (gfirst[i] = i)) < 0)
            goto nomem;
    }
    /* no head cut moves profiles into a block this snapshot misses before
       the head walk below has seen them */
    pthread_rwlock_rdlock(&s->cut_rw);
    cut_locked = true;
    pthread_rwlock_rdlock(&s->idx);
    for (size_t i = 0; i < n && rc >= 0; i++) {
        const series *se = pd__tsdb_find_by_ref(s, refs[i]);
        if (!se || mint > maxt)
            continue; /* deleted since it was selected: nothing to add */
        for (size_t k = 0; k < se->n_brefs && rc >= 0; k++) {
            const bref *br = &se->brefs[k];
            if (br->maxt < mint || br->mint > maxt)
                continue;
            if (n_es == cap_es) {
                size_t nc = cap_es ? 2 * cap_es : 64;
                entry *ne = realloc(es, nc * sizeof *ne);
                if (!ne) {
                    rc = PD_ENOMEM;
                    break;
                }
                es = ne;
                cap_es = nc;
            }
            pd__tsdb_hb_get(br->hb);
            es[n_es++] = (entry){br->hb,   br->id,  i, gfirst[i], pd__block_meta(br->hb->b)->min_t,
                                 br->mint, br->maxt};
        }
        size_t lo = pd__tsdb_lower_bound(se, mint);
        bool in_head = lo < se->n_pts && se->pts[lo].ts <= maxt;
        if (n_series && (in_head || (n_es && es[n_es - 1].i == i)))
            (*n_series)++;
    }
    pthread_rwlock_unlock(&s->idx);
    if (rc < 0)
        goto nomem;

    /* blocks in time order; in each, the groups in the order of refs */
    if (n_es)
        qsort(es, n_es, sizeof *es, cmp_entry_order);
    agg a = {.fn = fn, .poll = poll, .ctx = ctx, .wt = wt, .flt = flt, .n_rec = &s->n_agg_records};
    pd_u64map_init(&a.map);
    if (poll && (rc = poll(ctx, err)) < 0)
        goto out;
    bool pooled = false;
    if (s->agg_workers > 1 && n_es > 1)
        rc = walk_pool(s, es, n_es, refs, wt, flt, mint, maxt, fn, poll, ctx,
                       (size_t)s->agg_workers, &pooled, err);
    for (size_t k = 0; k < n_es && rc >= 0 && !pooled;) {
        size_t e = k;
        while (e < n_es && es[e].hb == es[k].hb && es[e].gfirst == es[k].gfirst)
            e++;
        a.sym = pd__block_symbols(es[k].hb->b);
        a.part = (pd_storage_agg_part){.series = es[k].i};
        pd_err be;
        pd_err_clear(&be);
        a.err = &be;
        for (size_t j = k; j < e && rc >= 0; j++) {
            if (pd__tsdb_hb_bad(es[j].hb, es[j].id)) {
                pd__tsdb_hb_warn_known(es[j].hb, es[j].id, refs[es[j].i]);
                continue;
            }
            a.part.n_series++;
            a.cur_i = es[j].i;
            rc = walk_series(&a, &es[j], mint, maxt, &be);
            if (rc == PD_ECORRUPT) { /* what read is summed; the damage is reported */
                pd__tsdb_hb_damaged(es[j].hb, es[j].id, &be);
                pd_err_clear(&be);
                rc = 0;
            }
        }
        if (rc >= 0)
            rc = pd__agg_flush(&a);
        if (rc < 0 && err)
            *err = be;
        k = e;
    }
    pd__agg_release(&a);
    /* the head: summed on its own ids; replayed points not decomposed yet
       one by one */
    size_t *wal_i = NULL, n_wal = 0;
    int64_t *wal_ts = NULL;
    if (rc >= 0)
        rc = pd__agg_head_sum(s, refs, gfirst, n, mint, maxt, wt, flt, fn, poll, ctx, &wal_i,
                              &wal_ts, &n_wal, err);
    pthread_rwlock_unlock(&s->cut_rw);
    cut_locked = false;
    for (size_t k = 0; k < n_wal && rc >= 0; k++)
        rc = pd__agg_head_parts(s, refs[wal_i[k]], wal_i[k], wal_ts + k, 1, wt, flt, fn, ctx, err);
    free(wal_i);
    free(wal_ts);
    if (rc >= 0 && poll)
        rc = poll(ctx, err); /* a walk that ended past the deadline counts as over it */
    goto out;
nomem:
    rc = pd_err_set(err, PD_ENOMEM, "aggregate: out of memory");
out:
    if (cut_locked)
        pthread_rwlock_unlock(&s->cut_rw);
    for (size_t k = 0; k < n_es; k++)
        pd__tsdb_hb_put(es[k].hb);
    free(es);
    free(gfirst);
    pd_u64map_release(&gm);
    return rc;
}

int pd_tsdb_aggregate(pd_tsdb *s, const uint64_t *refs, const uint32_t *group, size_t n,
                      int64_t mint, int64_t maxt, pd_storage_agg_fn fn,
                      int (*poll)(void *ctx, pd_err *err), void *ctx, size_t *n_series, pd_err *err)
{
    return aggregate(s, refs, group, NULL, NULL, n, mint, maxt, fn, poll, ctx, n_series, err);
}

/* ---- deltas of cumulative profiles (storage.h: pd_tsdb_aggregate_delta) ----
 *
 * The sum of the deltas of a series' profiles in a range telescopes: with
 * b the profile before the range's first (the series' previous stored
 * profile, or the range's first itself when there is none: the series'
 * first profile has no delta), within one lifetime (profiles between two
 * resets) d_1 + ... + d_k = p_k - b, and a reset's delta is the new
 * profile itself. So per series only the last profile of each lifetime
 * adds (+1) and b is subtracted (-1); the weights (pd__delta_weights,
 * storage/delta_int.h, shared with the ClickHouse path of storage.c) come
 * from the stored points (timestamps and totals, no profile read) and the
 * walk above sums
 * each profile times its weight on the store's own ids, from the earliest
 * b on (series summed as is keep to [mint, maxt]). */

int pd_tsdb_read_point_before(pd_tsdb *s, uint64_t ref, int64_t t, pd_points *out, pd_err *err)
{
    memset(out, 0, sizeof *out);
    if (t == INT64_MIN)
        return 0;
    /* the newest candidate start: the head's last point before t, the end
       of each block part wholly before t, the start of one spanning t */
    int64_t lo = INT64_MIN;
    bool any = false;
    pthread_rwlock_rdlock(&s->idx);
    const series *se = pd__tsdb_find_by_ref(s, ref);
    if (!se) {
        pthread_rwlock_unlock(&s->idx);
        return pd_err_set(err, PD_ENOTFOUND, "no series with ref %llu", (unsigned long long)ref);
    }
    size_t k = pd__tsdb_lower_bound(se, t);
    if (k > 0) {
        lo = se->pts[k - 1].ts;
        any = true;
    }
    for (size_t j = 0; j < se->n_brefs; j++) {
        const bref *br = &se->brefs[j];
        if (br->mint >= t)
            continue;
        int64_t c = br->maxt < t ? br->maxt : br->mint;
        if (!any || c > lo)
            lo = c;
        any = true;
    }
    pthread_rwlock_unlock(&s->idx);
    if (!any)
        return 0;
    pd_points pts;
    int rc = pd_tsdb_read_points(s, ref, lo, t - 1, &pts, err);
    if (rc < 0)
        return rc;
    if (pts.n > 1) { /* keep the last */
        pts.v[0] = pts.v[pts.n - 1];
        pts.n = 1;
    }
    *out = pts;
    return 0;
}

/* The weights of series ref over [mint, maxt] (see above) into *w;
 * *n_deltas += its profiles in the range that have a delta; *b_ts the
 * baseline's time (lowered, never raised). */
static int delta_weights(pd_tsdb *s, uint64_t ref, uint64_t mask, int64_t mint, int64_t maxt,
                         agg_w *w, size_t *n_deltas, int64_t *b_ts, pd_err *err)
{
    pd_points prev = {0}, pts = {0};
    w->on = true;
    int rc = pd_tsdb_read_point_before(s, ref, mint, &prev, err);
    if (rc >= 0)
        rc = pd_tsdb_read_points(s, ref, mint, maxt, &pts, err);
    if (rc == PD_ENOTFOUND) { /* gone since selected: adds nothing */
        pd_err_clear(err);
        rc = 0;
        goto out;
    }
    if (rc < 0)
        goto out;
    size_t n = prev.n + pts.n;
    if (pts.n)
        *n_deltas += n - 1;
    if (n < 2 || !pts.n)
        goto out;
    w->ts = malloc(n * sizeof *w->ts);
    w->w = malloc(n * sizeof *w->w);
    if (!w->ts || !w->w) {
        rc = pd_err_set(err, PD_ENOMEM, "aggregate: out of memory");
        goto out;
    }
    w->n = pd__delta_weights(&prev, &pts, mask, w->ts, w->w);
    if (w->n && w->ts[0] < *b_ts)
        *b_ts = w->ts[0];
out:
    pd_points_release(&prev);
    pd_points_release(&pts);
    return rc;
}

int pd_tsdb_aggregate_delta(pd_tsdb *s, const uint64_t *refs, const uint32_t *group,
                            const uint64_t *cum_mask, size_t n, int64_t mint, int64_t maxt,
                            pd_storage_agg_fn fn, int (*poll)(void *ctx, pd_err *err), void *ctx,
                            size_t *n_series, size_t *n_deltas, pd_err *err)
{
    return pd_tsdb_aggregate_filtered(s, NULL, refs, group, cum_mask, n, mint, maxt, fn, poll, ctx,
                                      n_series, n_deltas, err);
}

int pd_tsdb_aggregate_filtered(pd_tsdb *s, const pd_storage_sample_filter *flt,
                               const uint64_t *refs, const uint32_t *group,
                               const uint64_t *cum_mask, size_t n, int64_t mint, int64_t maxt,
                               pd_storage_agg_fn fn, int (*poll)(void *ctx, pd_err *err), void *ctx,
                               size_t *n_series, size_t *n_deltas, pd_err *err)
{
    pd_err_clear(err);
    if (n_deltas)
        *n_deltas = 0;
    if (!cum_mask)
        return aggregate(s, refs, group, NULL, flt, n, mint, maxt, fn, poll, ctx, n_series, err);
    agg_w *wt = calloc(n ? n : 1, sizeof *wt);
    if (!wt)
        return pd_err_set(err, PD_ENOMEM, "aggregate: out of memory");
    int rc = 0;
    size_t nd = 0;
    int64_t walk_min = mint;
    for (size_t i = 0; i < n && rc >= 0; i++) {
        wt[i].lo = mint;
        wt[i].hi = maxt;
        if (cum_mask[i] && mint <= maxt)
            rc = delta_weights(s, refs[i], cum_mask[i], mint, maxt, &wt[i], &nd, &walk_min, err);
    }
    if (rc >= 0)
        rc = aggregate(s, refs, group, wt, flt, n, walk_min, maxt, fn, poll, ctx, n_series, err);
    if (n_deltas)
        *n_deltas = nd;
    for (size_t i = 0; i < n; i++) {
        free(wt[i].ts);
        free(wt[i].w);
    }
    free(wt);
    return rc;
}
