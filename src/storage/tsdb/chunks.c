/*
 * storage/tsdb/chunks.c — decomposed profiles, value groups and time chunks
 * (API: chunks_int.h; layout: docs/format/chunks.md). varint = unsigned
 * LEB128, zz = zigzag varint; "string" = block string id (symbols).
 *
 * Value group payload (chunks file version 3, and 2 without flag bits 1-3;
 * before zstd), for each of its n profiles in time order, "prev" being the
 * previous profile of the group (none for the first, so a group decodes on
 * its own):
 *
 *   flags: bit 0 quanta reset (every sample's quantum starts unknown), bit 1
 *     same header as prev (the fields in [1] are not written), bit 2 the last
 *     listed sample's values are the profile's totals minus the other
 *     samples' (not written), bit 3 time_nanos from the time chunk (not
 *     written); bits 2-3 need the time chunk's totals and time (the block
 *     writer sets them, pd_vgroup_enc.derive; the head does not)
 *   [1] n_types | n_types x (type, unit) | period_type | period_unit | zz period
 *   [3] zz (time_nanos - ts_ms x 1e6)
 *   [1] zz duration_nanos | n_comment | comments | drop_frames | keep_frames |
 *       default_sample_type | doc_url
 *   n_sample
 *   edit script turning prev's keys into this profile's keys — repeated
 *   (keep, del, add, add x (zz stack delta, lset)) until both lists are used;
 *   keys are (stack, lset) ascending; keep = keys equal to prev's, taken as is;
 *   del = prev keys dropped; add = new keys, stack as a delta from the last
 *   key written
 *   n_changed | n_changed x gap: the *matched* samples (a prev sample with
 *     the same key, prev with the same n_types) whose residuals are not all 0,
 *     ascending, each as (index - index after the previous one)
 *   for each sample, in order, that is unmatched or changed (but the last of
 *   them when bit 2 is set): [mask] residuals
 *     — mask: a varint whose bit z says residual z is non-zero (only when the
 *     sample has 2..63 residuals; non-zero for a changed sample), then the
 *     non-zero residuals, zz each (all of them when no mask).
 * A matched sample not listed keeps its prev values.
 *
 * The value model (residuals of one sample). P = the matched prev sample's
 * values when prev has the same number of types, else none; C = this one's;
 * all arithmetic wraps (uint64), predictions are integer only (128-bit
 * products), so writer and reader agree bit for bit.
 *   - no P: the residuals are C as is (n_types of them).
 *   - types in pairs (0,1), (2,3), ... (pprof pairs count and size: Go heap
 *     alloc_objects/alloc_space, inuse_objects/inuse_space; cpu
 *     samples/nanoseconds; contentions/delay). In a pair the *lead* is the type
 *     with the larger |P| (the second on a tie), the other the *follower*;
 *     dl, df = their deltas C - P.
 *     lead, quantum q unknown (0):  dl
 *     lead, quantum q known:        m = round(dl x A / B), dl - round(m x B / A)
 *       with A/B = round(|Pl| / q) / |Pl| when |Pl| >= q, else 1/q: m is the
 *       delta in quanta, the second residual what rounding left (Go scales
 *       sampled counts by a per-stack factor, so deltas are ~m x quantum)
 *     follower:                     df - round(dl x Pf / Pl) (0 if Pl or Pf is 0;
 *       a pair whose P are both 0 uses the ratio of the first pair whose P are
 *       both non-zero)
 *   - an odd last type: its delta.
 *   - q is per sample: carried from the matched prev sample (0 for an added
 *     sample, after a reset, or when the number of types changed); after the
 *     sample, q = the smallest non-zero |dl| seen (this profile's pairs
 *     included), read with the q from before the sample for every pair.
 * So an unchanged sample costs nothing, a changed Go heap sample ~4 bytes
 * (mask, m, rounding, follower), which zstd (block.c) reduces further.
 *
 * Time chunks: tchunk.c.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/varint.h"
#include "storage/tsdb/chunks_int.h"
#include "storage/tsdb/payload_int.h"

#define MAX_MASK 63 /* residuals of a sample covered by a mask varint */

void pd__dprof_release(pd_dprof *d)
{
    free(d->types);
    free(d->comment);
    free(d->stack);
    free(d->lset);
    free(d->value);
    free(d->totals);
    memset(d, 0, sizeof *d);
}

typedef struct skey {
    uint32_t stack, lset, idx;
} skey;

static int skey_cmp(const void *a, const void *b)
{
    const skey *x = a, *y = b;
    if (x->stack != y->stack)
        return x->stack < y->stack ? -1 : 1;
    if (x->lset != y->lset)
        return x->lset < y->lset ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

int pd__dprof_from_profile(pd_symbols *s, const pd_profile *p, int64_t ts_ms, pd_dprof *d,
                           pd_err *err)
{
    return pd__dprof_map_profile(s, p, ts_ms, false, d, err);
}

int pd__dprof_map_profile(pd_symbols *s, const pd_profile *p, int64_t ts_ms, bool find_only,
                          pd_dprof *d, pd_err *err)
{
    int rc = PD_ENOMEM;
    uint32_t *sm = malloc((p->n_string + 1) * sizeof *sm);
    uint32_t *st = malloc((p->n_sample + 1) * sizeof *st);
    uint32_t *ls = malloc((p->n_sample + 1) * sizeof *ls);
    skey *k = malloc((p->n_sample + 1) * sizeof *k);
    size_t nt = p->n_sample_type;
    memset(d, 0, sizeof *d);
    if (!sm || !st || !ls || !k)
        goto out;
    if ((rc = pd__symbols_map_profile(s, p, find_only, sm, st, ls, err)))
        goto out; /* (1: not every symbol is in s yet) */
#define SID(x) (((x) >= 0 && (size_t)(x) < p->n_string) ? sm[(x)] : sm[0])
    rc = PD_ENOMEM;
    d->ts = ts_ms;
    d->n_types = (uint32_t)nt;
    d->types = malloc((2 * nt + 1) * sizeof *d->types);
    d->totals = malloc((nt + 1) * sizeof *d->totals);
    d->comment = malloc((p->n_comment + 1) * sizeof *d->comment);
    d->stack = malloc((p->n_sample + 1) * sizeof *d->stack);
    d->lset = malloc((p->n_sample + 1) * sizeof *d->lset);
    d->value = malloc((p->n_sample * nt + 1) * sizeof *d->value);
    if (!d->types || !d->totals || !d->comment || !d->stack || !d->lset || !d->value)
        goto out;
    for (size_t i = 0; i < nt; i++) {
        d->types[2 * i] = SID(p->sample_type[i].type);
        d->types[2 * i + 1] = SID(p->sample_type[i].unit);
    }
    d->period_type = SID(p->period_type.type);
    d->period_unit = SID(p->period_type.unit);
    d->period = p->period;
    d->time_nanos = p->time_nanos;
    d->duration_nanos = p->duration_nanos;
    d->n_comment = (uint32_t)p->n_comment;
    for (size_t i = 0; i < p->n_comment; i++)
        d->comment[i] = SID(p->comment[i]);
    d->drop_frames = SID(p->drop_frames);
    d->keep_frames = SID(p->keep_frames);
    d->default_sample_type = SID(p->default_sample_type);
    d->doc_url = SID(p->doc_url);
#undef SID
    d->n_sample = (uint32_t)p->n_sample;
    for (size_t i = 0; i < p->n_sample; i++)
        k[i] = (skey){st[i], ls[i], (uint32_t)i};
    qsort(k, p->n_sample, sizeof *k, skey_cmp);
    for (size_t i = 0; i < p->n_sample; i++) {
        const pd_pprof_sample *sa = &p->sample[k[i].idx];
        d->stack[i] = k[i].stack;
        d->lset[i] = k[i].lset;
        for (size_t t = 0; t < nt; t++)
            d->value[i * nt + t] = t < sa->n_value ? sa->value[t] : 0;
    }
    pd_profile_totals(p, d->totals);
    rc = 0;
out:
    free(sm);
    free(st);
    free(ls);
    free(k);
    if (rc)
        pd__dprof_release(d);
    return rc;
}

/* ---- rebuild a pd_profile ---- */

/* Symbol index -> position in the profile being rebuilt. A dense table over
 * the block's symbols with a generation stamp per slot, so nothing is
 * cleared between profiles; the tables are per thread (a merge rebuilds
 * thousands of profiles in a row: a hash map here was 12% of a block merge)
 * and freed when the thread exits. */
typedef struct dense {
    uint32_t *pos, *gen;
    size_t cap;
    uint32_t cur;
} dense;

typedef struct dense_set {
    dense d[3]; /* locations, functions, mappings */
} dense_set;

static pthread_key_t dense_key;
static pthread_once_t dense_once = PTHREAD_ONCE_INIT;

static void dense_free(void *p)
{
    dense_set *ds = p;
    for (int i = 0; ds && i < 3; i++) {
        free(ds->d[i].pos);
        free(ds->d[i].gen);
    }
    free(ds);
}

static void dense_init_key(void)
{
    pthread_key_create(&dense_key, dense_free);
}

/* Starts a profile on table k with room for n symbols. 0 or PD_ENOMEM. */
static int dense_begin(dense *t, size_t n)
{
    if (n > t->cap) {
        uint32_t *np = realloc(t->pos, n * sizeof *np), *ng;
        if (!np)
            return PD_ENOMEM;
        t->pos = np;
        if (!(ng = realloc(t->gen, n * sizeof *ng)))
            return PD_ENOMEM;
        memset(ng + t->cap, 0, (n - t->cap) * sizeof *ng);
        t->gen = ng;
        t->cap = n;
    }
    if (++t->cur == 0) { /* wrapped: clear the stamps once */
        memset(t->gen, 0, t->cap * sizeof *t->gen);
        t->cur = 1;
    }
    return 0;
}

typedef struct used {
    dense *t;    /* symbol index -> position (dense, stamped) */
    uint32_t *v; /* positions -> symbol index */
    size_t n, cap, limit;
} used;

static int use(used *u, uint32_t idx, uint32_t *pos)
{
    if (idx >= u->limit)
        return PD_ECORRUPT; /* references are checked when the symbols are read */
    dense *t = u->t;
    if (t->gen[idx] == t->cur) {
        *pos = t->pos[idx];
        return 0;
    }
    if (u->n == u->cap) {
        size_t nc = u->cap ? 2 * u->cap : 64;
        uint32_t *nv = realloc(u->v, nc * sizeof *nv);
        if (!nv)
            return PD_ENOMEM;
        u->v = nv;
        u->cap = nc;
    }
    u->v[u->n] = idx;
    *pos = (uint32_t)u->n;
    t->gen[idx] = t->cur;
    t->pos[idx] = (uint32_t)u->n;
    u->n++;
    return 0;
}

static void used_release(used *u)
{
    free(u->v);
}

/* The three tables of this thread, started for a profile of symbols s. */
static int used_begin(const pd_symbols *s, used *ul, used *uf, used *um)
{
    pthread_once(&dense_once, dense_init_key);
    dense_set *ds = pthread_getspecific(dense_key);
    if (!ds) {
        if (!(ds = calloc(1, sizeof *ds)))
            return PD_ENOMEM;
        if (pthread_setspecific(dense_key, ds)) {
            free(ds);
            return PD_ENOMEM;
        }
    }
    if (dense_begin(&ds->d[0], s->n_loc + 1) || dense_begin(&ds->d[1], s->n_fn + 1) ||
        dense_begin(&ds->d[2], s->n_map + 1))
        return PD_ENOMEM;
    *ul = (used){.t = &ds->d[0], .limit = s->n_loc};
    *uf = (used){.t = &ds->d[1], .limit = s->n_fn};
    *um = (used){.t = &ds->d[2], .limit = s->n_map};
    return 0;
}

int pd__dprof_to_profile(const pd_symbols *s, const pd_dprof *d, pd_profile *out, pd_err *err)
{
    int rc;
    used ul = {0}, uf = {0}, um = {0};
    pd_u64map smap;
    uint32_t *tmp = NULL;
    pd_u64map_init(&smap);
    if ((rc = used_begin(s, &ul, &uf, &um)))
        return pd_err_set(err, rc, "out of memory rebuilding a profile");
    if ((rc = pd_profile_init(out)))
        return rc;
    pd_profile *p = out;
    rc = PD_ENOMEM;
#define S(sid, dst)                                                                                \
    do {                                                                                           \
        int64_t _v = pd_profile_intern(p, s->str[(sid)], s->str_len[(sid)]);                       \
        if (_v < 0)                                                                                \
            goto fail;                                                                             \
        (dst) = _v;                                                                                \
    } while (0)
    size_t nt = d->n_types;
    p->n_sample_type = nt;
    if (!(p->sample_type = pd_arena_calloc(&p->arena, nt + 1, sizeof *p->sample_type)))
        goto fail;
    for (size_t i = 0; i < nt; i++) {
        S(d->types[2 * i], p->sample_type[i].type);
        S(d->types[2 * i + 1], p->sample_type[i].unit);
    }
    S(d->period_type, p->period_type.type);
    S(d->period_unit, p->period_type.unit);
    p->period = d->period;
    p->time_nanos = d->time_nanos;
    p->duration_nanos = d->duration_nanos;
    if (!(p->comment = pd_arena_calloc(&p->arena, d->n_comment + 1, sizeof *p->comment)))
        goto fail;
    p->n_comment = d->n_comment;
    for (size_t i = 0; i < d->n_comment; i++)
        S(d->comment[i], p->comment[i]);
    S(d->drop_frames, p->drop_frames);
    S(d->keep_frames, p->keep_frames);
    S(d->default_sample_type, p->default_sample_type);
    S(d->doc_url, p->doc_url);

    if (!(tmp = malloc((s->max_depth + 1) * sizeof *tmp)))
        goto fail;
    if (!(p->sample = pd_arena_calloc(&p->arena, d->n_sample + 1, sizeof *p->sample)))
        goto fail;
    p->n_sample = d->n_sample;
    for (size_t i = 0; i < d->n_sample; i++) {
        pd_pprof_sample *sa = &p->sample[i];
        int n = pd__symbols_stack(s, d->stack[i], tmp, s->max_depth);
        if (n < 0) {
            rc = pd_err_set(err, PD_ECORRUPT, "sample %zu: stack %u deeper than the symbols say", i,
                            d->stack[i]);
            goto fail;
        }
        sa->n_location = (size_t)n;
        if (!(sa->location_id = pd_arena_calloc(&p->arena, (size_t)n + 1, sizeof(uint64_t))))
            goto fail;
        for (int j = 0; j < n; j++) {
            uint32_t pos;
            if (use(&ul, tmp[j], &pos))
                goto fail;
            sa->location_id[j] = pos + 1;
        }
        sa->n_value = nt;
        if (!(sa->value = pd_arena_calloc(&p->arena, nt + 1, sizeof *sa->value)))
            goto fail;
        memcpy(sa->value, d->value + i * nt, nt * sizeof *sa->value);
        if (d->lset[i]) {
            uint64_t a = s->lset_off[d->lset[i] - 1], b = s->lset_off[d->lset[i]];
            sa->n_label = (size_t)(b - a);
            if (!(sa->label = pd_arena_calloc(&p->arena, sa->n_label + 1, sizeof *sa->label)))
                goto fail;
            for (uint64_t j = a; j < b; j++) {
                pd_pprof_label *lb = &sa->label[j - a];
                S(s->lab[j].key, lb->key);
                S(s->lab[j].str, lb->str);
                lb->num = s->lab[j].num;
                S(s->lab[j].num_unit, lb->num_unit);
            }
        }
    }
    /* locations (the list may grow while we walk it? no: only functions and mappings) */
    p->n_location = ul.n;
    if (!(p->location = pd_arena_calloc(&p->arena, ul.n + 1, sizeof *p->location)))
        goto fail;
    for (size_t k = 0; k < ul.n; k++) {
        const pd_sym_location *sl = &s->loc[ul.v[k]];
        pd_pprof_location *l = &p->location[k];
        uint32_t pos;
        l->id = k + 1;
        l->address = sl->address;
        l->is_folded = sl->folded;
        if (sl->mapping) {
            if (use(&um, sl->mapping - 1, &pos))
                goto fail;
            l->mapping_id = pos + 1;
        }
        l->n_line = sl->n_line;
        if (!(l->line = pd_arena_calloc(&p->arena, sl->n_line + 1, sizeof *l->line)))
            goto fail;
        for (uint32_t j = 0; j < sl->n_line; j++) {
            const pd_sym_line *ln = &s->line[sl->first_line + j];
            if (ln->function) {
                if (use(&uf, ln->function - 1, &pos))
                    goto fail;
                l->line[j].function_id = pos + 1;
            }
            l->line[j].line = ln->line;
            l->line[j].column = ln->column;
        }
    }
    p->n_function = uf.n;
    if (!(p->function = pd_arena_calloc(&p->arena, uf.n + 1, sizeof *p->function)))
        goto fail;
    for (size_t k = 0; k < uf.n; k++) {
        const pd_sym_function *sf = &s->fn[uf.v[k]];
        pd_pprof_function *f = &p->function[k];
        f->id = k + 1;
        S(sf->name, f->name);
        S(sf->system_name, f->system_name);
        S(sf->filename, f->filename);
        f->start_line = sf->start_line;
    }
    p->n_mapping = um.n;
    if (!(p->mapping = pd_arena_calloc(&p->arena, um.n + 1, sizeof *p->mapping)))
        goto fail;
    for (size_t k = 0; k < um.n; k++) {
        const pd_sym_mapping *sm = &s->map[um.v[k]];
        pd_pprof_mapping *m = &p->mapping[k];
        m->id = k + 1;
        m->memory_start = sm->start;
        m->memory_limit = sm->limit;
        m->file_offset = sm->offset;
        S(sm->filename, m->filename);
        S(sm->build_id, m->build_id);
        m->has_functions = sm->flags & 1;
        m->has_filenames = (sm->flags >> 1) & 1;
        m->has_line_numbers = (sm->flags >> 2) & 1;
        m->has_inline_frames = (sm->flags >> 3) & 1;
    }
#undef S
    if ((rc = pd_profile_index(p, err)) || (rc = pd_profile_validate(p, err))) {
        pd_err_prefix(err, "rebuilt profile");
        rc = PD_ECORRUPT;
        goto fail;
    }
    rc = 0;
    goto out;
fail:
    if (rc == PD_ENOMEM)
        pd_err_set(err, PD_ENOMEM, "out of memory rebuilding a profile");
    pd_profile_release(p);
out:
    free(tmp);
    used_release(&ul);
    used_release(&uf);
    used_release(&um);
    pd_u64map_release(&smap);
    return rc;
}

/* ---- value groups ---- */

static int keycmp(uint32_t s1, uint32_t l1, uint32_t s2, uint32_t l2)
{
    if (s1 != s2)
        return s1 < s2 ? -1 : 1;
    if (l1 != l2)
        return l1 < l2 ? -1 : 1;
    return 0;
}

/* ---- the value model (see the top of the file) ---- */

#ifndef __SIZEOF_INT128__
#error "chunks.c needs unsigned __int128 (gcc or clang on a 64-bit target)"
#endif
typedef unsigned __int128 u128;

/* |x| as an unsigned (2^63 for INT64_MIN). */
static uint64_t mag(int64_t x)
{
    return x < 0 ? 0 - (uint64_t)x : (uint64_t)x;
}

static int64_t wadd(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a + (uint64_t)b);
}
static int64_t wsub(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a - (uint64_t)b);
}

/* round(a x b / c), halves away from zero, c > 0, exact in 128 bits; the
 * magnitude saturates at INT64_MAX. Integer only, so the writer and every
 * reader compute the same prediction. */
static int64_t rdiv(int64_t a, uint64_t b, uint64_t c)
{
    u128 x = ((u128)mag(a) * b + c / 2) / c;
    int64_t r = x > (u128)INT64_MAX ? INT64_MAX : (int64_t)x;
    return a < 0 ? -r : r;
}

/* The follower's delta predicted from the lead's: round(dl x pf / pl). */
static int64_t follow(int64_t dl, int64_t pf, int64_t pl)
{
    if (!pl || !pf)
        return 0;
    int64_t r = rdiv(dl, mag(pf), mag(pl));
    return (pf < 0) != (pl < 0) ? -r : r;
}

/* Residuals of a sample with matched previous values P (n_types nt): a pair
 * (t, t+1) has 3 residuals with a quantum, 2 without; an odd last type 1. */
static size_t n_res(size_t nt, uint64_t q)
{
    return (nt / 2) * (q ? 3 : 2) + (nt & 1);
}

/* The lead of pair (t, t+1): the larger previous magnitude (t+1 on a tie). */
static size_t lead_of(const int64_t *P, size_t t)
{
    return mag(P[t + 1]) >= mag(P[t]) ? t + 1 : t;
}

/* The first pair whose previous values are both non-zero (its ratio stands in
 * for a pair that was all zero), or nt. */
static size_t full_pair(const int64_t *P, size_t nt)
{
    for (size_t u = 0; u + 1 < nt; u += 2)
        if (P[u] && P[u + 1])
            return u;
    return nt;
}

/* Lead delta dl = round(m x B / A) + r; A/B is the quantum's scale. */
static void lead_scale(int64_t pl, uint64_t q, uint64_t *A, uint64_t *B)
{
    uint64_t pm = mag(pl);
    if (pm >= q) { /* A = the previous value in quanta, B = the previous value */
        *A = (uint64_t)(((u128)pm + q / 2) / q);
        *B = pm;
    } else {
        *A = 1;
        *B = q;
    }
}

/* Encodes values C against P (NULL: none, then the residuals are C) into
 * e[0..return); *q: the sample's quantum, updated. */
static size_t vres_enc(const int64_t *P, const int64_t *C, size_t nt, uint64_t *q, int64_t *e)
{
    size_t ne = 0, t = 0;
    if (!P) {
        memcpy(e, C, nt * sizeof *e);
        return nt;
    }
    uint64_t q0 = *q, qn = q0;
    size_t fp = full_pair(P, nt);
    for (; t + 1 < nt; t += 2) {
        size_t L = lead_of(P, t), F = L ^ 1;
        int64_t pl = P[L], pf = P[F];
        if (!pl && fp < nt) { /* both 0: the ratio of the first full pair */
            size_t L2 = lead_of(P, fp);
            pl = P[L2], pf = P[L2 ^ 1];
        }
        int64_t dl = wsub(C[L], P[L]), df = wsub(C[F], P[F]);
        if (q0) {
            uint64_t A, B;
            lead_scale(P[L], q0, &A, &B);
            int64_t m = rdiv(dl, A, B);
            e[ne++] = m;
            e[ne++] = wsub(dl, rdiv(m, B, A));
        } else {
            e[ne++] = dl;
        }
        e[ne++] = wsub(df, follow(dl, pf, pl));
        if (dl && (!qn || mag(dl) < qn))
            qn = mag(dl);
    }
    for (; t < nt; t++)
        e[ne++] = wsub(C[t], P[t]);
    *q = qn;
    return ne;
}

/* The inverse of vres_enc: C from P and e[0..n_res). */
static void vres_dec(const int64_t *P, const int64_t *e, size_t nt, uint64_t *q, int64_t *C)
{
    size_t k = 0, t = 0;
    if (!P) {
        memcpy(C, e, nt * sizeof *C);
        return;
    }
    uint64_t q0 = *q, qn = q0;
    size_t fp = full_pair(P, nt);
    for (; t + 1 < nt; t += 2) {
        size_t L = lead_of(P, t), F = L ^ 1;
        int64_t pl = P[L], pf = P[F], dl;
        if (!pl && fp < nt) {
            size_t L2 = lead_of(P, fp);
            pl = P[L2], pf = P[L2 ^ 1];
        }
        if (q0) {
            uint64_t A, B;
            lead_scale(P[L], q0, &A, &B);
            int64_t m = e[k++];
            dl = wadd(rdiv(m, B, A), e[k++]);
        } else {
            dl = e[k++];
        }
        int64_t df = wadd(follow(dl, pf, pl), e[k++]);
        C[L] = wadd(P[L], dl);
        C[F] = wadd(P[F], df);
        if (dl && (!qn || mag(dl) < qn))
            qn = mag(dl);
    }
    for (; t < nt; t++)
        C[t] = wadd(P[t], e[k++]);
    *q = qn;
}

/* The header fields of c other than time_nanos, as the payload writes them
 * (both parts, without the time between them) into h: what flag bit 1
 * compares with the previous profile's. *split: where the time goes. */
static int enc_header(const pd_dprof *c, pd_buf *out, size_t *split)
{
    int rc = 0;
    pd_buf_reset(out);
    PUT(c->n_types);
    for (size_t i = 0; i < 2u * c->n_types; i++)
        PUT(c->types[i]);
    PUT(c->period_type);
    PUT(c->period_unit);
    PUTZ(c->period);
    *split = out->len;
    PUTZ(c->duration_nanos);
    PUT(c->n_comment);
    for (size_t i = 0; i < c->n_comment; i++)
        PUT(c->comment[i]);
    PUT(c->drop_frames);
    PUT(c->keep_frames);
    PUT(c->default_sample_type);
    PUT(c->doc_url);
out:
    return rc;
}

/* One profile c against pv (NULL: none) whose samples' quanta are pq (NULL:
 * all unknown, written as a reset); c's quanta go to cq[0..c->n_sample).
 * ph: pv's header bytes (enc_header; NULL: not known, c's header is written
 * whole); c's go to ch (NULL: not wanted). derive: the last listed sample's
 * values are left out (flag bit 2) when c has totals. */
static int enc_profile(const pd_dprof *pv, const uint64_t *pq, const pd_dprof *c, uint64_t *cq,
                       const pd_buf *ph, pd_buf *ch, bool derive, pd_buf *out)
{
    int rc = 0;
    int64_t *match = NULL; /* per cur sample: matched prev index or -1 */
    int64_t *e = NULL;     /* one sample's residuals */
    uint32_t *chg = NULL;
    size_t nt = c->n_types, ne_max = n_res(nt, 1) > nt ? n_res(nt, 1) : nt, split = 0;
    pd_buf hb;
    pd_buf_init(&hb, 0);
    pd_buf *h = ch ? ch : &hb;
    if ((rc = enc_header(c, h, &split)))
        goto out;
    bool same_hdr = pv && ph && ph->len == h->len && !memcmp(ph->data, h->data, h->len);
    size_t flags_at = out->len; /* flags (< 128: one byte) are known after the samples */
    PUT(0);
    if (!same_hdr && (rc = pd_buf_append(out, h->data, split)))
        goto out;
    if (!derive) /* else the time chunk holds it */
        PUTZ((uint64_t)c->time_nanos - (uint64_t)c->ts * 1000000u);
    if (!same_hdr && (rc = pd_buf_append(out, h->data + split, h->len - split)))
        goto out;
    PUT(c->n_sample);
    size_t np = pv ? pv->n_sample : 0, nc = c->n_sample, i = 0, j = 0;
    if (!(match = malloc((nc + 1) * sizeof *match)) || !(chg = malloc((nc + 1) * sizeof *chg)) ||
        !(e = malloc((ne_max + 1) * sizeof *e))) {
        rc = PD_ENOMEM;
        goto out;
    }
    uint32_t last = 0;
    while (i < np || j < nc) {
        size_t keep = 0, del = 0, add = 0;
        while (i < np && j < nc && !keycmp(pv->stack[i], pv->lset[i], c->stack[j], c->lset[j])) {
            match[j] = (int64_t)i;
            i++, j++, keep++;
        }
        while (i < np &&
               (j >= nc || keycmp(pv->stack[i], pv->lset[i], c->stack[j], c->lset[j]) < 0))
            i++, del++;
        size_t j0 = j;
        while (j < nc &&
               (i >= np || keycmp(c->stack[j], c->lset[j], pv->stack[i], pv->lset[i]) < 0)) {
            match[j] = -1;
            j++, add++;
        }
        PUT(keep);
        PUT(del);
        PUT(add);
        for (size_t x = j0; x < j; x++) {
            PUTZ((int64_t)c->stack[x] - (int64_t)last);
            PUT(c->lset[x]);
            last = c->stack[x];
        }
        if (j)
            last = c->stack[j - 1];
    }
    /* the changed samples: matched ones with a non-zero residual (computed
       twice for them: once to find them, once to write them) */
    bool same = pv && pv->n_types == nt;
    size_t n_chg = 0;
    for (size_t x = 0; x < nc; x++) {
        const int64_t *P = same && match[x] >= 0 ? pv->value + (size_t)match[x] * nt : NULL;
        cq[x] = P && pq ? pq[match[x]] : 0;
        if (!P)
            continue;
        size_t ne = vres_enc(P, c->value + x * nt, nt, &cq[x], e);
        for (size_t z = 0; z < ne; z++)
            if (e[z]) {
                chg[n_chg++] = (uint32_t)x;
                break;
            }
    }
    PUT(n_chg);
    for (size_t k = 0, at = 0; k < n_chg; k++) {
        PUT(chg[k] - at);
        at = chg[k] + 1;
    }
    /* the last listed sample (unmatched or changed): with derive its values
       are the totals minus the other samples' (the time chunk holds the
       totals), so it costs no residual byte */
    size_t dx = SIZE_MAX;
    for (size_t x = nc; x-- > 0;)
        if (!(same && match[x] >= 0) || (n_chg && chg[n_chg - 1] == x)) {
            dx = x;
            break;
        }
    bool drv = derive && c->totals && dx != SIZE_MAX;
    ((uint8_t *)out->data)[flags_at] =
        (uint8_t)((pq ? 0 : 1) | (same_hdr ? 2 : 0) | (drv ? 4 : 0) | (derive ? 8 : 0));
    /* residuals of the unmatched samples and of the changed ones, in order */
    for (size_t x = 0, k = 0; x < nc; x++) {
        const int64_t *P = same && match[x] >= 0 ? pv->value + (size_t)match[x] * nt : NULL;
        if (P && (k == n_chg || chg[k] != x))
            continue;
        k += P != NULL;
        if (drv && x == dx)
            break;
        uint64_t q = P && pq ? pq[match[x]] : 0;
        size_t ne = vres_enc(P, c->value + x * nt, nt, &q, e);
        if (ne > 1 && ne <= MAX_MASK) {
            uint64_t mask = 0;
            for (size_t z = 0; z < ne; z++)
                if (e[z])
                    mask |= (uint64_t)1 << z;
            PUT(mask);
            for (size_t z = 0; z < ne; z++)
                if (e[z])
                    PUTZ(e[z]);
        } else {
            for (size_t z = 0; z < ne; z++)
                PUTZ(e[z]);
        }
    }
out:
    free(match);
    free(chg);
    free(e);
    pd_buf_release(&hb);
    return rc;
}

void pd__vgroup_enc_init(pd_vgroup_enc *e)
{
    memset(e, 0, sizeof *e);
    pd_buf_init(&e->hdr, 0);
    pd_buf_init(&e->hdr_next, 0);
}

void pd__vgroup_enc_reset(pd_vgroup_enc *e)
{
    e->n = 0;
    e->n_values = 0;
}

void pd__vgroup_enc_release(pd_vgroup_enc *e)
{
    free(e->stack);
    free(e->lset);
    free(e->value);
    free(e->q);
    pd_buf_release(&e->hdr);
    pd_buf_release(&e->hdr_next);
    memset(e, 0, sizeof *e);
    pd_buf_init(&e->hdr, 0);
    pd_buf_init(&e->hdr_next, 0);
}

/* A capacity for n items kept per series between appends: n plus an
 * eighth (issue 35: doubling kept ~2x each series' last profile, ~6 KiB of
 * the ~9.6 KiB an active series cost). */
static size_t keep_cap(size_t n)
{
    return n + n / 8 + 8;
}

int pd__vgroup_enc_append(pd_vgroup_enc *e, const pd_dprof *c, pd_buf *out)
{
    size_t nc = c->n_sample, nt = c->n_types;
    if ((uint64_t)nc * nt > PD_VGROUP_MAX_VALUES - (e->n ? e->n_values : 0))
        return PD_ETOOBIG; /* a reader would refuse the group */
    /* this profile's quanta: kept as e->q once encoded (the previous q is
       freed then, so a series holds one set of quanta between appends) */
    uint64_t *qn = malloc((nc + 1) * sizeof *qn);
    if (!qn)
        return PD_ENOMEM;
    /* the previous profile as a pd_dprof view of what we kept of it */
    pd_dprof pv = {.n_types = e->n_types,
                   .n_sample = e->n_sample,
                   .stack = e->stack,
                   .lset = e->lset,
                   .value = e->value};
    size_t len0 = out->len;
    int rc = enc_profile(e->n ? &pv : NULL, e->n ? e->q : NULL, c, qn, e->n ? &e->hdr : NULL,
                         &e->hdr_next, e->derive, out);
    if (rc) {
        free(qn);
        out->len = len0; /* e unchanged: c may be appended again */
        return rc;
    }
    /* keep c (keys, values, quanta) for the next append */
    if (nc + 1 > e->cap) {
        size_t cap = keep_cap(nc + 1);
        uint32_t *ns = realloc(e->stack, cap * sizeof *ns), *nl;
        if (ns)
            e->stack = ns;
        nl = ns ? realloc(e->lset, cap * sizeof *nl) : NULL;
        if (nl)
            e->lset = nl;
        if (!ns || !nl)
            goto nomem;
        e->cap = cap;
    }
    if ((size_t)nc * nt + 1 > e->vcap) {
        size_t vcap = keep_cap((size_t)nc * nt + 1);
        int64_t *nv = realloc(e->value, vcap * sizeof *nv);
        if (!nv)
            goto nomem;
        e->value = nv;
        e->vcap = vcap;
    }
    memcpy(e->stack, c->stack, nc * sizeof *e->stack);
    memcpy(e->lset, c->lset, nc * sizeof *e->lset);
    memcpy(e->value, c->value, (size_t)nc * nt * sizeof *e->value);
    free(e->q);
    e->q = qn;
    pd_buf th = e->hdr;
    e->hdr = e->hdr_next;
    e->hdr_next = th;
    pd_buf_release(&e->hdr_next); /* (rebuilt by the next append) */
    e->n_sample = c->n_sample;
    e->n_types = c->n_types;
    e->n++;
    e->n_values += (uint64_t)nc * nt;
    return 0;
nomem:
    free(qn);
    out->len = len0;
    e->n = 0; /* what we kept is incomplete: the next profile starts a group */
    return PD_ENOMEM;
}

int pd__vgroup_encode_one(const pd_dprof *prev, const pd_dprof *c, pd_buf *out)
{
    if ((uint64_t)c->n_sample * c->n_types > PD_VGROUP_MAX_VALUES)
        return PD_ETOOBIG;
    uint64_t *cq = malloc((c->n_sample + 1) * sizeof *cq);
    if (!cq)
        return PD_ENOMEM;
    int rc = enc_profile(prev, NULL, c, cq, NULL, NULL, false, out);
    free(cq);
    return rc;
}

int pd__vgroup_encode(const pd_dprof *const *d, size_t n, pd_buf *out)
{
    pd_vgroup_enc e;
    int rc = 0;
    pd__vgroup_enc_init(&e);
    for (size_t k = 0; k < n && !rc; k++)
        rc = pd__vgroup_enc_append(&e, d[k], out);
    pd__vgroup_enc_release(&e);
    return rc;
}

int pd__vgroup_decode(const pd_symbols *s, const uint8_t *p, size_t len, size_t n, pd_dprof *out,
                      pd_err *err)
{
    rd r = {p, len, 0, err, 0, "value group"};
    int64_t *match = NULL, *e = NULL;
    uint32_t *chg = NULL;
    uint64_t *q = NULL, *pq = NULL; /* quanta of this profile's and the previous one's samples */
    size_t match_cap = 0, e_cap = 0;
    uint64_t NS = s->n_str, n_values = 0;
    for (size_t k = 0; k < n && !r.bad; k++) {
        pd_dprof *c = &out[k];
        const pd_dprof *pv = k ? &out[k - 1] : NULL;
        size_t at = r.off;
        /* the caller's totals for this profile (from the time chunk), if any:
           kept in c->totals until this profile's own are summed */
        uint32_t given_nt = c->totals ? c->n_types : 0;
        int64_t given_time = c->time_nanos;
        uint64_t flags = get(&r, "flags");
        if (!r.bad && (flags > 15 || ((flags & 2) && !pv)))
            r.bad = pd_err_set(err, PD_ECORRUPT, "value group payload offset %zu: flags %llu", at,
                               (unsigned long long)flags);
        if (r.bad)
            break;
        if (flags & 2) { /* the header of the previous profile */
            c->n_types = pv->n_types;
            c->period_type = pv->period_type;
            c->period_unit = pv->period_unit;
            c->period = pv->period;
            c->n_comment = pv->n_comment;
            if (!(c->types = malloc((2 * c->n_types + 1) * sizeof *c->types)) ||
                !(c->comment = malloc((c->n_comment + 1) * sizeof *c->comment)))
                goto nomem;
            memcpy(c->types, pv->types, 2 * c->n_types * sizeof *c->types);
            memcpy(c->comment, pv->comment, c->n_comment * sizeof *c->comment);
            c->time_nanos =
                flags & 8 ? given_time
                          : (int64_t)((uint64_t)getz(&r, "time") + (uint64_t)c->ts * 1000000u);
            c->duration_nanos = pv->duration_nanos;
            c->drop_frames = pv->drop_frames;
            c->keep_frames = pv->keep_frames;
            c->default_sample_type = pv->default_sample_type;
            c->doc_url = pv->doc_url;
        } else {
            c->n_types = (uint32_t)getn(&r, 2, MAX_TYPES, "sample types");
            if (r.bad)
                break;
            if (!(c->types = malloc((2 * c->n_types + 1) * sizeof *c->types)))
                goto nomem;
            for (size_t i = 0; i < 2u * c->n_types; i++)
                c->types[i] = getref(&r, NS, "sample type string");
            c->period_type = getref(&r, NS, "period type");
            c->period_unit = getref(&r, NS, "period unit");
            c->period = getz(&r, "period");
            c->time_nanos =
                flags & 8 ? given_time
                          : (int64_t)((uint64_t)getz(&r, "time") + (uint64_t)c->ts * 1000000u);
            c->duration_nanos = getz(&r, "duration");
            c->n_comment = (uint32_t)getn(&r, 1, SIZE_MAX, "comments");
            if (r.bad)
                break;
            if (!(c->comment = malloc((c->n_comment + 1) * sizeof *c->comment)))
                goto nomem;
            for (size_t i = 0; i < c->n_comment; i++)
                c->comment[i] = getref(&r, NS, "comment");
            c->drop_frames = getref(&r, NS, "drop frames");
            c->keep_frames = getref(&r, NS, "keep frames");
            c->default_sample_type = getref(&r, NS, "default sample type");
            c->doc_url = getref(&r, NS, "doc url");
        }
        if (!r.bad && (flags & 12) && (!c->totals || given_nt != c->n_types))
            r.bad = pd_err_set(
                err, PD_ECORRUPT,
                "value group payload offset %zu: values or time from the time "
                "chunk, but %s",
                at, c->totals ? "the time chunk has another number of types" : "no totals given");
        if (r.bad)
            break;
        /* a kept key costs no byte (nor do its values if unchanged), an added
           one at least 2: n_sample is bounded by prev + the bytes left */
        at = r.off;
        uint64_t nc64 = get(&r, "samples");
        size_t np = pv ? pv->n_sample : 0, nt = c->n_types, nc = (size_t)nc64;
        if (!r.bad && (nc64 > UINT32_MAX || nc64 > np + (r.len - r.off)))
            r.bad = pd_err_set(err, PD_ECORRUPT, "value group payload offset %zu: %llu samples", at,
                               (unsigned long long)nc64);
        if (!r.bad && nt && nc > (PD_VGROUP_MAX_VALUES - n_values) / nt)
            r.bad = pd_err_set(err, PD_ECORRUPT,
                               "value group payload offset %zu: more than %llu values in the "
                               "group",
                               at, (unsigned long long)PD_VGROUP_MAX_VALUES);
        if (r.bad)
            break;
        n_values += (uint64_t)nc * nt;
        c->n_sample = (uint32_t)nc;
        if (!(c->stack = malloc((nc + 1) * sizeof *c->stack)) ||
            !(c->lset = malloc((nc + 1) * sizeof *c->lset)) ||
            !(c->value = malloc((nc * nt + 1) * sizeof *c->value)))
            goto nomem;
        if (nc + 1 > match_cap) {
            size_t cap = 2 * (nc + 1);
            int64_t *nm = realloc(match, cap * sizeof *nm);
            if (!nm)
                goto nomem;
            match = nm;
            uint32_t *nx = realloc(chg, cap * sizeof *nx);
            if (!nx)
                goto nomem;
            chg = nx;
            uint64_t *nq = realloc(q, cap * sizeof *nq); /* keeps the previous profile's */
            if (!nq)
                goto nomem;
            q = nq;
            if (!(nq = realloc(pq, cap * sizeof *nq)))
                goto nomem;
            pq = nq;
            match_cap = cap;
        }
        {
            uint64_t *t = pq; /* q holds the previous profile's quanta */
            pq = q;
            q = t;
        }
        size_t i = 0, j = 0;
        uint32_t last = 0;
        while ((i < np || j < nc) && !r.bad) {
            at = r.off;
            uint64_t keep = get(&r, "keep"), del = get(&r, "del"), add = get(&r, "add");
            if (r.bad)
                break;
            if (keep > np - i || keep > nc - j || del > np - i - keep || add > nc - j - keep ||
                keep + del + add == 0) {
                r.bad = pd_err_set(err, PD_ECORRUPT,
                                   "value group payload offset %zu: bad edit (keep %llu del %llu "
                                   "add %llu)",
                                   at, (unsigned long long)keep, (unsigned long long)del,
                                   (unsigned long long)add);
                break;
            }
            for (uint64_t x = 0; x < keep; x++, i++, j++) {
                c->stack[j] = pv->stack[i];
                c->lset[j] = pv->lset[i];
                match[j] = (int64_t)i;
            }
            i += del;
            for (uint64_t x = 0; x < add && !r.bad; x++, j++) {
                int64_t st = wadd((int64_t)last, getz(&r, "stack delta")); /* no UB on junk */
                if (!r.bad && (st < 0 || (uint64_t)st > s->n_stack))
                    r.bad = pd_err_set(err, PD_ECORRUPT,
                                       "value group payload offset %zu: stack %lld out of range",
                                       r.off, (long long)st);
                c->stack[j] = (uint32_t)st;
                c->lset[j] = getref(&r, s->n_lset + 1, "label set");
                match[j] = -1;
                last = c->stack[j];
            }
            if (j)
                last = c->stack[j - 1];
        }
        if (r.bad)
            break;
        /* changed samples; the others keep the matched previous values (0 if none) */
        bool same = pv && pv->n_types == nt;
        size_t ne_max = n_res(nt, 1) > nt ? n_res(nt, 1) : nt;
        if (ne_max + 1 > e_cap) {
            free(e);
            e_cap = ne_max + 1;
            if (!(e = malloc(e_cap * sizeof *e)))
                goto nomem;
        }
        size_t n_chg = getn(&r, 1, nc, "changed samples");
        for (size_t kk = 0, next = 0; kk < n_chg && !r.bad; kk++) {
            at = r.off;
            uint64_t gap = get(&r, "changed sample gap");
            if (!r.bad && (gap >= nc - next || !same || match[next + gap] < 0)) {
                r.bad = pd_err_set(err, PD_ECORRUPT,
                                   "value group payload offset %zu: changed sample %llu of %zu "
                                   "(or not matched)",
                                   at, (unsigned long long)(next + gap), nc);
                break;
            }
            chg[kk] = (uint32_t)(next + gap);
            next = chg[kk] + 1;
        }
        /* the last listed sample (unmatched or changed): derived from the
           totals when flag bit 2 is set */
        size_t dx = SIZE_MAX;
        for (size_t x = nc; (flags & 4) && x-- > 0;)
            if (!(same && match[x] >= 0) || (n_chg && chg[n_chg - 1] == x)) {
                dx = x;
                break;
            }
        if (!r.bad && (flags & 4) && dx == SIZE_MAX)
            r.bad = pd_err_set(err, PD_ECORRUPT,
                               "value group payload offset %zu: values derived from totals, "
                               "but no sample changed",
                               r.off);
        for (size_t x = 0, kk = 0; x < nc && !r.bad; x++) {
            int64_t *C = c->value + x * nt;
            bool matched = same && match[x] >= 0;
            q[x] = matched && !(flags & 1) ? pq[match[x]] : 0;
            if (matched && (kk == n_chg || chg[kk] != x)) { /* unchanged */
                memcpy(C, pv->value + (size_t)match[x] * nt, nt * sizeof *C);
                continue;
            }
            kk += matched;
            if (x == dx) /* derived below, once the others are known */
                continue;
            size_t ne = matched ? n_res(nt, q[x]) : nt;
            if (ne > 1 && ne <= MAX_MASK) {
                at = r.off;
                uint64_t mask = get(&r, "residual mask");
                if (!r.bad && ((matched && !mask) || mask >> ne)) {
                    r.bad = pd_err_set(err, PD_ECORRUPT,
                                       "value group payload offset %zu: residual mask %llx", at,
                                       (unsigned long long)mask);
                    break;
                }
                for (size_t z = 0; z < ne; z++)
                    e[z] = (mask >> z) & 1 ? getz(&r, "residual") : 0;
            } else {
                for (size_t z = 0; z < ne; z++)
                    e[z] = getz(&r, "residual");
            }
            if (r.bad)
                break;
            vres_dec(matched ? pv->value + (size_t)match[x] * nt : NULL, e, nt, &q[x], C);
        }
        if (r.bad)
            break;
        int64_t *tot = calloc(nt + 1, sizeof *tot);
        if (!tot)
            goto nomem;
        for (size_t y = 0; y < nc; y++)
            if (y != dx)
                for (size_t t = 0; t < nt; t++)
                    tot[t] = wadd(tot[t], c->value[y * nt + t]);
        if (dx != SIZE_MAX) { /* C = totals - the other samples */
            int64_t *C = c->value + dx * nt;
            for (size_t t = 0; t < nt; t++)
                C[t] = wsub(c->totals[t], tot[t]);
            bool matched = same && match[dx] >= 0;
            if (matched) { /* a changed sample: its quantum learns from it too */
                const int64_t *P = pv->value + (size_t)match[dx] * nt;
                if (!memcmp(P, C, nt * sizeof *C)) {
                    free(tot);
                    r.bad = pd_err_set(err, PD_ECORRUPT,
                                       "value group payload offset %zu: sample %zu listed as "
                                       "changed, but its derived values are unchanged",
                                       r.off, dx);
                    break;
                }
                vres_enc(P, C, nt, &q[dx], e);
            }
            for (size_t t = 0; t < nt; t++)
                tot[t] = wadd(tot[t], C[t]);
        }
        free(c->totals);
        c->totals = tot;
    }
    if (!r.bad && r.off != r.len)
        r.bad = pd_err_set(err, PD_ECORRUPT, "value group payload offset %zu: %zu trailing bytes",
                           r.off, r.len - r.off);
    free(match);
    free(chg);
    free(e);
    free(q);
    free(pq);
    return r.bad;
nomem:
    free(match);
    free(chg);
    free(e);
    free(q);
    free(pq);
    return pd_err_set(err, PD_ENOMEM, "out of memory decoding a value group");
}
