/*
 * storage/tsdb/chunks.c — decomposed profiles, value groups and time chunks
 * (API: chunks_int.h; layout: docs/format/chunks.md). varint = unsigned
 * LEB128, zz = zigzag varint; "string" = block string id (symbols).
 *
 * Value group payload (before zstd), for each of its n profiles in time order,
 * "prev" being the previous profile of the group (none for the first, so a
 * group decodes on its own):
 *
 *   n_types | n_types x (type, unit) | period_type | period_unit | zz period
 *   zz (time_nanos - ts_ms x 1e6) | zz duration_nanos
 *   n_comment | comments | drop_frames | keep_frames | default_sample_type | doc_url
 *   n_sample
 *   edit script turning prev's keys into this profile's keys — repeated
 *   (keep, del, add, add x (zz stack delta, lset)) until both lists are used;
 *   keys are (stack, lset) ascending; keep = keys equal to prev's, taken as is;
 *   del = prev keys dropped; add = new keys, stack as a delta from the last
 *   key written
 *   values, column by column: for each type t, for each sample j:
 *     zz (value - value of the matched prev sample, or 0 for an added one or
 *         when prev has a different number of types)
 *
 * So an unchanged profile costs its header plus ~(1 + n_types x n_sample)
 * zero bytes, which zstd squeezes to almost nothing.
 *
 * Time chunk payload:
 *   n | n_tset | n_tset x (k, k x (type, unit))
 *   n x (zz ts dod, tset, k x zz (total - prev total of the same tset, else total))
 *   n_group | n_group x (profiles in group, chunk offset delta from previous group)
 * ts dod: the first is ts, the second ts - ts0, then (ts_i - ts_i-1) - (ts_i-1 - ts_i-2).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/varint.h"
#include "storage/tsdb/chunks_int.h"

#define MAX_TYPES 1024

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
    int rc = PD_ENOMEM;
    uint32_t *sm = malloc((p->n_string + 1) * sizeof *sm);
    uint32_t *st = malloc((p->n_sample + 1) * sizeof *st);
    uint32_t *ls = malloc((p->n_sample + 1) * sizeof *ls);
    skey *k = malloc((p->n_sample + 1) * sizeof *k);
    size_t nt = p->n_sample_type;
    memset(d, 0, sizeof *d);
    if (!sm || !st || !ls || !k)
        goto out;
    if ((rc = pd__symbols_add_profile(s, p, sm, st, ls, err)))
        goto out;
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

static void dense_init_key(void) { pthread_key_create(&dense_key, dense_free); }

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

static void used_release(used *u) { free(u->v); }

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
            rc = pd_err_set(err, PD_ECORRUPT, "sample %zu: stack %u deeper than the symbols say",
                            i, d->stack[i]);
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

#define PUT(v)                                                                                     \
    do {                                                                                           \
        if ((rc = pd_buf_put_varint(out, (uint64_t)(v))))                                          \
            goto out;                                                                              \
    } while (0)
#define PUTZ(v) PUT(pd_zigzag_enc((int64_t)(v)))

int pd__vgroup_encode_one(const pd_dprof *pv, const pd_dprof *c, pd_buf *out)
{
    int rc = 0;
    int64_t *match = NULL; /* per cur sample: matched prev index or -1 */
    PUT(c->n_types);
    for (size_t i = 0; i < 2u * c->n_types; i++)
        PUT(c->types[i]);
    PUT(c->period_type);
    PUT(c->period_unit);
    PUTZ(c->period);
    PUTZ((uint64_t)c->time_nanos - (uint64_t)c->ts * 1000000u);
    PUTZ(c->duration_nanos);
    PUT(c->n_comment);
    for (size_t i = 0; i < c->n_comment; i++)
        PUT(c->comment[i]);
    PUT(c->drop_frames);
    PUT(c->keep_frames);
    PUT(c->default_sample_type);
    PUT(c->doc_url);
    PUT(c->n_sample);
    if (!(match = malloc((c->n_sample + 1) * sizeof *match))) {
        rc = PD_ENOMEM;
        goto out;
    }
    size_t np = pv ? pv->n_sample : 0, nc = c->n_sample, i = 0, j = 0;
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
    bool same = pv && pv->n_types == c->n_types;
    for (size_t t = 0; t < c->n_types; t++)
        for (size_t x = 0; x < nc; x++) {
            int64_t base = same && match[x] >= 0 ? pv->value[match[x] * c->n_types + t] : 0;
            PUTZ((uint64_t)c->value[x * c->n_types + t] - (uint64_t)base);
        }
out:
    free(match);
    return rc;
}

int pd__vgroup_encode(const pd_dprof *const *d, size_t n, pd_buf *out)
{
    int rc = 0;
    for (size_t k = 0; k < n && !rc; k++)
        rc = pd__vgroup_encode_one(k ? d[k - 1] : NULL, d[k], out);
    return rc;
}

typedef struct rd {
    const uint8_t *p;
    size_t len, off;
    pd_err *err;
    int bad;
    const char *what;
} rd;

static uint64_t get(rd *r, const char *what)
{
    uint64_t v = 0;
    if (r->bad)
        return 0;
    size_t k = pd_varint_get(r->p + r->off, r->len - r->off, &v);
    if (!k) {
        r->bad = pd_err_set(r->err, PD_ECORRUPT, "%s payload offset %zu: bad varint (%s)",
                            r->what, r->off, what);
        return 0;
    }
    r->off += k;
    return v;
}

static int64_t getz(rd *r, const char *what) { return pd_zigzag_dec(get(r, what)); }

/* A value < limit. */
static uint32_t getref(rd *r, uint64_t limit, const char *what)
{
    size_t at = r->off;
    uint64_t v = get(r, what);
    if (!r->bad && v >= limit)
        r->bad = pd_err_set(r->err, PD_ECORRUPT, "%s payload offset %zu: %s %llu out of range",
                            r->what, at, what, (unsigned long long)v);
    return r->bad ? 0 : (uint32_t)v;
}

/* A count whose entries take at least min bytes each. */
static size_t getn(rd *r, size_t min, size_t cap, const char *what)
{
    size_t at = r->off;
    uint64_t v = get(r, what);
    if (!r->bad && (v > cap || v > (r->len - r->off) / min + 1))
        r->bad = pd_err_set(r->err, PD_ECORRUPT, "%s payload offset %zu: %s count %llu too big",
                            r->what, at, what, (unsigned long long)v);
    return r->bad ? 0 : (size_t)v;
}

int pd__vgroup_decode(const pd_symbols *s, const uint8_t *p, size_t len, size_t n, pd_dprof *out,
                      pd_err *err)
{
    rd r = {p, len, 0, err, 0, "value group"};
    int64_t *match = NULL;
    size_t match_cap = 0;
    uint64_t NS = s->n_str;
    for (size_t k = 0; k < n && !r.bad; k++) {
        pd_dprof *c = &out[k];
        const pd_dprof *pv = k ? &out[k - 1] : NULL;
        c->n_types = (uint32_t)getn(&r, 2, MAX_TYPES, "sample types");
        if (r.bad)
            break;
        if (!(c->types = malloc((2 * c->n_types + 1) * sizeof *c->types)) ||
            !(c->totals = calloc(c->n_types + 1, sizeof *c->totals)))
            goto nomem;
        for (size_t i = 0; i < 2u * c->n_types; i++)
            c->types[i] = getref(&r, NS, "sample type string");
        c->period_type = getref(&r, NS, "period type");
        c->period_unit = getref(&r, NS, "period unit");
        c->period = getz(&r, "period");
        c->time_nanos = (int64_t)((uint64_t)getz(&r, "time") + (uint64_t)c->ts * 1000000u);
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
        /* a kept key costs no byte, so n_sample is bounded by prev + the bytes left */
        size_t nc = getn(&r, 1, SIZE_MAX / 16, "samples");
        size_t np = pv ? pv->n_sample : 0;
        if (!r.bad && nc > np + (r.len - r.off))
            r.bad = pd_err_set(err, PD_ECORRUPT, "value group payload offset %zu: %zu samples",
                               r.off, nc);
        if (r.bad)
            break;
        c->n_sample = (uint32_t)nc;
        if (!(c->stack = malloc((nc + 1) * sizeof *c->stack)) ||
            !(c->lset = malloc((nc + 1) * sizeof *c->lset)) ||
            !(c->value = malloc((nc * c->n_types + 1) * sizeof *c->value)))
            goto nomem;
        if (nc > match_cap) {
            free(match);
            match_cap = nc;
            if (!(match = malloc(match_cap * sizeof *match)))
                goto nomem;
        }
        size_t i = 0, j = 0;
        uint32_t last = 0;
        while ((i < np || j < nc) && !r.bad) {
            size_t at = r.off;
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
                int64_t st = (int64_t)last + getz(&r, "stack delta");
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
        bool same = pv && pv->n_types == c->n_types;
        for (size_t t = 0; t < c->n_types; t++)
            for (size_t x = 0; x < nc; x++) {
                int64_t base = same && match[x] >= 0 ? pv->value[match[x] * c->n_types + t] : 0;
                int64_t v = (int64_t)((uint64_t)getz(&r, "value") + (uint64_t)base);
                c->value[x * c->n_types + t] = v;
                c->totals[t] = (int64_t)((uint64_t)c->totals[t] + (uint64_t)v);
            }
    }
    if (!r.bad && r.off != r.len)
        r.bad = pd_err_set(err, PD_ECORRUPT, "value group payload offset %zu: %zu trailing bytes",
                           r.off, r.len - r.off);
    free(match);
    return r.bad;
nomem:
    free(match);
    return pd_err_set(err, PD_ENOMEM, "out of memory decoding a value group");
}

/* ---- time chunks ---- */

int pd__tchunk_encode(const pd_dprof *const *d, size_t n, const uint32_t *g_first,
                      const uint64_t *g_off, size_t n_group, pd_buf *out)
{
    int rc = 0;
    uint32_t *tset = malloc((n + 1) * sizeof *tset);
    size_t n_tset = 0;
    if (!tset)
        return PD_ENOMEM;
    /* sample-type sets: the distinct (types) of the series, in first-use order */
    const pd_dprof **rep = malloc((n + 1) * sizeof *rep);
    if (!rep) {
        free(tset);
        return PD_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        size_t k;
        for (k = 0; k < n_tset; k++)
            if (rep[k]->n_types == d[i]->n_types &&
                !memcmp(rep[k]->types, d[i]->types, 2 * d[i]->n_types * sizeof *d[i]->types))
                break;
        if (k == n_tset)
            rep[n_tset++] = d[i];
        tset[i] = (uint32_t)k;
    }
    PUT(n);
    PUT(n_tset);
    for (size_t k = 0; k < n_tset; k++) {
        PUT(rep[k]->n_types);
        for (size_t i = 0; i < 2u * rep[k]->n_types; i++)
            PUT(rep[k]->types[i]);
    }
    int64_t pts = 0, pdelta = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t delta = (int64_t)((uint64_t)d[i]->ts - (uint64_t)pts);
        if (i == 0)
            PUTZ(d[i]->ts);
        else if (i == 1)
            PUTZ(delta);
        else
            PUTZ((uint64_t)delta - (uint64_t)pdelta);
        pdelta = delta;
        pts = d[i]->ts;
        PUT(tset[i]);
        bool same = i && tset[i] == tset[i - 1];
        for (size_t t = 0; t < d[i]->n_types; t++)
            PUTZ((uint64_t)d[i]->totals[t] - (uint64_t)(same ? d[i - 1]->totals[t] : 0));
    }
    PUT(n_group);
    for (size_t g = 0; g < n_group; g++) {
        PUT(g_first[g + 1] - g_first[g]);
        PUT(g_off[g] - (g ? g_off[g - 1] : 0));
    }
out:
    free(tset);
    free(rep);
    return rc;
}

void pd__tchunk_release(pd_tchunk *t)
{
    free(t->ts);
    free(t->tset);
    free(t->tot_off);
    free(t->totals);
    free(t->tset_off);
    free(t->tset_str);
    free(t->g_first);
    free(t->g_off);
    memset(t, 0, sizeof *t);
}

int pd__tchunk_decode(const uint8_t *p, size_t len, size_t n_str, pd_tchunk *t, pd_err *err)
{
    rd r = {p, len, 0, err, 0, "time chunk"};
    memset(t, 0, sizeof *t);
    size_t tot_cap = 0, str_cap = 0;
    t->n = getn(&r, 2, SIZE_MAX / 16, "profiles");
    t->n_tset = getn(&r, 1, SIZE_MAX / 16, "sample type sets");
    if (r.bad)
        goto fail;
    if (!(t->ts = malloc((t->n + 1) * sizeof *t->ts)) ||
        !(t->tset = malloc((t->n + 1) * sizeof *t->tset)) ||
        !(t->tot_off = calloc(t->n + 1, sizeof *t->tot_off)) ||
        !(t->tset_off = calloc(t->n_tset + 1, sizeof *t->tset_off)))
        goto nomem;
    for (size_t k = 0; k < t->n_tset && !r.bad; k++) {
        size_t m = getn(&r, 2, MAX_TYPES, "sample types");
        t->tset_off[k + 1] = t->tset_off[k] + m;
        if (2 * t->tset_off[k + 1] > str_cap) {
            str_cap = 2 * t->tset_off[k + 1] + 16;
            uint32_t *ns = realloc(t->tset_str, str_cap * sizeof *ns);
            if (!ns)
                goto nomem;
            t->tset_str = ns;
        }
        for (size_t i = 2 * t->tset_off[k]; i < 2 * t->tset_off[k + 1]; i++)
            t->tset_str[i] = getref(&r, n_str, "sample type string");
    }
    int64_t pts = 0, pdelta = 0;
    for (size_t i = 0; i < t->n && !r.bad; i++) {
        int64_t v = getz(&r, "timestamp"), delta;
        if (i == 0)
            delta = v, pts = 0;
        else if (i == 1)
            delta = v;
        else
            delta = (int64_t)((uint64_t)pdelta + (uint64_t)v);
        t->ts[i] = i == 0 ? v : (int64_t)((uint64_t)pts + (uint64_t)delta);
        if (!r.bad && i && t->ts[i] <= t->ts[i - 1])
            r.bad = pd_err_set(err, PD_ECORRUPT,
                               "time chunk payload offset %zu: timestamps not ascending", r.off);
        pdelta = delta;
        pts = t->ts[i];
        t->tset[i] = getref(&r, t->n_tset, "sample type set");
        if (r.bad)
            break;
        size_t m = (size_t)(t->tset_off[t->tset[i] + 1] - t->tset_off[t->tset[i]]);
        t->tot_off[i + 1] = t->tot_off[i] + m;
        if (t->tot_off[i + 1] > tot_cap) {
            tot_cap = 2 * t->tot_off[i + 1] + 16;
            int64_t *nt = realloc(t->totals, tot_cap * sizeof *nt);
            if (!nt)
                goto nomem;
            t->totals = nt;
        }
        bool same = i && t->tset[i] == t->tset[i - 1];
        for (size_t x = 0; x < m; x++) {
            int64_t base = same ? t->totals[t->tot_off[i - 1] + x] : 0;
            t->totals[t->tot_off[i] + x] =
                (int64_t)((uint64_t)getz(&r, "total") + (uint64_t)base);
        }
    }
    t->n_group = getn(&r, 2, t->n, "groups");
    if (r.bad)
        goto fail;
    if (!(t->g_first = calloc(t->n_group + 1, sizeof *t->g_first)) ||
        !(t->g_off = calloc(t->n_group + 1, sizeof *t->g_off)))
        goto nomem;
    for (size_t g = 0; g < t->n_group && !r.bad; g++) {
        uint64_t m = get(&r, "group size");
        if (!r.bad && (m == 0 || m > t->n - t->g_first[g]))
            r.bad = pd_err_set(err, PD_ECORRUPT, "time chunk payload offset %zu: group size %llu",
                               r.off, (unsigned long long)m);
        t->g_first[g + 1] = (uint32_t)(t->g_first[g] + m);
        t->g_off[g] = (g ? t->g_off[g - 1] : 0) + get(&r, "group offset");
    }
    if (!r.bad && t->n_group && t->g_first[t->n_group] != t->n)
        r.bad = pd_err_set(err, PD_ECORRUPT, "time chunk: groups cover %u of %zu profiles",
                           t->g_first[t->n_group], t->n);
    if (!r.bad && r.off != r.len)
        r.bad = pd_err_set(err, PD_ECORRUPT, "time chunk payload offset %zu: trailing bytes",
                           r.off);
    if (r.bad)
        goto fail;
    return 0;
nomem:
    pd__tchunk_release(t);
    return pd_err_set(err, PD_ENOMEM, "out of memory decoding a time chunk");
fail:
    pd__tchunk_release(t);
    return r.bad;
}
