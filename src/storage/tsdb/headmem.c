/*
 * storage/tsdb/headmem.c — the head's profiles in memory, decomposed as in
 * blocks (API and locking: headmem_int.h).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "storage/tsdb/blockagg_int.h"
#include "storage/tsdb/headmem_int.h"

static uint64_t g_uid; /* __atomic */

static uint64_t next_uid(void)
{
    return __atomic_add_fetch(&g_uid, 1, __ATOMIC_RELAXED);
}

static uint64_t g_gens; /* __atomic: live generations of every store (a gauge) */

uint64_t pd__hmem_generations(void)
{
    return __atomic_load_n(&g_gens, __ATOMIC_RELAXED);
}

static uint64_t g_gen; /* __atomic */

static pd_hsyms *hsyms_new(void)
{
    pd_hsyms *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->gen = __atomic_add_fetch(&g_gen, 1, __ATOMIC_RELAXED);
    if (pd__symbols_init(&h->sym, PD_STACKS_TREE, true) < 0) {
        free(h);
        return NULL;
    }
    h->refs = 1;
    __atomic_add_fetch(&g_gens, 1, __ATOMIC_RELAXED);
    return h;
}

/* refs change under the idx write lock (groups, generations) or, for the
 * aggregation's pins, under the read lock by several readers at once: so
 * atomically. The last put frees: nothing can reach a generation then. */
static void hsyms_put(pd_hsyms *h)
{
    if (h && __atomic_sub_fetch(&h->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        pd__symbols_release(&h->sym);
        free(h);
        __atomic_sub_fetch(&g_gens, 1, __ATOMIC_RELAXED);
    }
}

pd_hsyms *pd__hmem_pin(const pd_symbols *sym)
{
    pd_hsyms *h = (pd_hsyms *)((char *)(uintptr_t)sym - offsetof(pd_hsyms, sym));
    __atomic_add_fetch(&h->refs, 1, __ATOMIC_ACQ_REL);
    return h;
}

void pd__hmem_unpin(pd_hsyms *h)
{
    hsyms_put(h);
}

int pd__hmem_init(pd_hmem *m)
{
    memset(m, 0, sizeof *m);
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    /* an interning appender is not starved by the others' lookups */
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    int e = pthread_rwlock_init(&m->sym_rw, &ra);
    pthread_rwlockattr_destroy(&ra);
    if (e)
        return PD_ENOMEM;
    if (!(m->fold = calloc(1, sizeof *m->fold)) || !(m->cur = hsyms_new())) {
        free(m->fold);
        m->fold = NULL;
        pthread_rwlock_destroy(&m->sym_rw);
        return PD_ENOMEM;
    }
    return 0;
}

void pd__hmem_release(pd_hmem *m)
{
    if (!m->cur)
        return;
    hsyms_put(m->cur);
    m->cur = NULL;
    pd__bagg_scratch_release(m->fold);
    free(m->fold);
    m->fold = NULL;
    pthread_rwlock_destroy(&m->sym_rw);
}

int pd__hmem_new_generation(pd_hmem *m)
{
    pd_hsyms *h = hsyms_new();
    if (!h)
        return PD_ENOMEM;
    pthread_rwlock_wrlock(&m->sym_rw);
    pd_hsyms *old = m->cur;
    m->cur = h;
    pthread_rwlock_unlock(&m->sym_rw);
    hsyms_put(old);
    return 0;
}

size_t pd__hmem_symbols_count(const pd_hmem *m)
{
    const pd_symbols *s = &m->cur->sym;
    return s->n_str + s->n_stack + s->n_loc + s->n_fn;
}

static size_t group_bytes(const pd_hgroup *g)
{
    return (g->z ? g->z_len : g->raw.cap) + g->sum_len;
}

static void group_free(pd_hmem *m, pd_hgroup *g)
{
    m->bytes -= group_bytes(g);
    hsyms_put(g->syms);
    pd_buf_release(&g->raw);
    free(g->z);
    free(g->sum);
    free(g);
}

void pd__hchunks_release(pd_hmem *m, pd_hchunks *c)
{
    for (size_t i = 0; i < c->n_g; i++)
        if (c->g[i])
            group_free(m, c->g[i]);
    free(c->g);
    pd__vgroup_enc_release(&c->enc);
    memset(c, 0, sizeof *c);
}

static pd_hgroup *group_at(const pd_hchunks *c, uint32_t gid)
{
    if (gid < c->base || gid - c->base >= c->n_g)
        return NULL;
    return c->g[gid - c->base];
}

/* The group an append may extend, or NULL. */
static pd_hgroup *open_group(const pd_hmem *m, const pd_hchunks *c)
{
    pd_hgroup *g = c->n_g ? c->g[c->n_g - 1] : NULL;
    if (!g || g->sealed || g->syms != m->cur || !c->open)
        return NULL;
    return g;
}

/* No more appends to c's last group; the encoder's copy of the last profile
 * is freed (an idle series keeps nothing but its groups). (`sealed` is read
 * by readers only for a statistic: aggregate.c counts open groups summed.) */
static void seal_last(pd_hchunks *c)
{
    pd_hgroup *g = c->n_g ? c->g[c->n_g - 1] : NULL;
    if (g)
        __atomic_store_n(&g->sealed, true, __ATOMIC_RELAXED);
    c->open = false;
    pd__vgroup_enc_release(&c->enc);
}

/* Runs fn(a) with the idx write lock when idx is given (else the caller
 * holds it). */
static void wlock(pthread_rwlock_t *idx)
{
    if (idx)
        pthread_rwlock_wrlock(idx);
}

static void wunlock(pthread_rwlock_t *idx)
{
    if (idx)
        pthread_rwlock_unlock(idx);
}

int pd__hmem_decompose(pd_hmem *m, const pd_profile *p, int64_t ts_ms, pd_hmem_dec *dec,
                       pd_err *err)
{
    memset(dec, 0, sizeof *dec);
    pthread_rwlock_rdlock(&m->sym_rw);
    dec->gen = m->cur->gen;
    int rc = pd__dprof_map_profile(&m->cur->sym, p, ts_ms, true, &dec->d, err);
    pthread_rwlock_unlock(&m->sym_rw);
    dec->found = rc == 0;
    return rc < 0 ? rc : 0;
}

void pd__hmem_dec_release(pd_hmem_dec *dec)
{
    pd__dprof_release(&dec->d);
    memset(dec, 0, sizeof *dec);
}

/* Room for `extra` more bytes (and pd_buf's NUL) in an open group's raw
 * encoding, growing by a quarter (at least 256 bytes) instead of doubling:
 * doubling from 64 left most series' one group at 16 KiB for a 9 KiB
 * profile (issue 35: head_chunk_bytes = 16,384 x series). extra 0 trims
 * the capacity to the length. 0, PD_ETOOBIG (pd_buf's max) or PD_ENOMEM. */
static int fit(pd_buf *b, size_t extra)
{
    size_t max = b->max ? b->max : SIZE_MAX / 2;
    if (extra > max || b->len > max - extra)
        return PD_ETOOBIG;
    size_t need = b->len + extra + 1, cap;
    if (extra == 0) {
        if (!b->data || b->cap <= need)
            return 0;
        cap = need;
    } else {
        if (need <= b->cap)
            return 0;
        cap = b->cap + (b->cap / 4 > 256 ? b->cap / 4 : 256);
        if (cap < need)
            cap = need;
    }
    char *d = realloc(b->data, cap);
    if (!d)
        return extra ? PD_ENOMEM : 0; /* (a failed trim keeps the buffer) */
    b->data = d;
    b->cap = cap;
    return 0;
}

int pd__hmem_prepare(pd_hmem *m, pd_hchunks *c, const pd_profile *p, int64_t ts_ms,
                     pthread_rwlock_t *idx, pd_hmem_dec *dec, pd_hmem_prep *pp, pd_err *err)
{
    memset(pp, 0, sizeof *pp);
    pd_buf_init(&pp->enc, 0);
    pd_dprof d;
    int rc;
    if (dec && dec->found && dec->gen == m->cur->gen) {
        d = dec->d; /* taken over */
        memset(dec, 0, sizeof *dec);
        rc = 0;
    } else {
        if (dec)
            pd__hmem_dec_release(dec);
        /* the symbols: looked up with readers going on (app_mu: no other
           appender interns meanwhile); interned (which moves what readers
           and pd__hmem_decompose read) under the write locks only when
           some are new */
        rc = pd__dprof_map_profile(&m->cur->sym, p, ts_ms, true, &d, err);
        if (rc == 1) {
            wlock(idx);
            pthread_rwlock_wrlock(&m->sym_rw);
            rc = pd__dprof_map_profile(&m->cur->sym, p, ts_ms, false, &d, err);
            pthread_rwlock_unlock(&m->sym_rw);
            wunlock(idx);
        }
    }
    if (rc < 0)
        return rc;
    pd_hgroup *g = open_group(m, c);
    if (g && g->sum && !pd__bagg_same_header(g->sum, g->sum_len, &d, m->fold))
        g = NULL; /* other sample types: a new group, which sums on its own */
    for (int attempt = 0;; attempt++) {
        if (!g) {
            seal_last(c); /* full, or of an older generation: compressed later */
            if (!(g = calloc(1, sizeof *g))) {
                pd__dprof_release(&d);
                return pd_err_set(err, PD_ENOMEM, "head: out of memory");
            }
            pd_buf_init(&g->raw, 0);
            g->syms = m->cur;
            g->uid = next_uid();
            pp->new_group = true;
            pd__vgroup_enc_reset(&c->enc);
        }
        /* encoded aside: readers keep reading the group meanwhile */
        pp->enc.len = 0;
        rc = pd__vgroup_enc_append(&c->enc, &d, &pp->enc);
        if (rc == 0)
            break;
        if (pp->new_group) {
            free(g);
            g = NULL;
            pp->new_group = false;
        } else if (rc == PD_ETOOBIG && attempt == 0) {
            g = NULL; /* the open group has no room for this one: a new group */
            continue;
        }
        c->open = false; /* the encoder's state is unknown now */
        pd__dprof_release(&d);
        pd_buf_release(&pp->enc);
        free(pp->sum);
        memset(pp, 0, sizeof *pp);
        if (rc == PD_ETOOBIG)
            return pd_err_set(err, rc, "head: the profile has more than %llu values",
                              (unsigned long long)PD_VGROUP_MAX_VALUES);
        return pd_err_set(err, rc, "head: out of memory encoding the profile");
    }
    /* the group's running sum with d folded in, aside (app_mu: g->sum
       changes only under it, and is swapped in by the publication) */
    if (pp->new_group || g->sum) {
        pd_buf sb;
        pd_buf_init(&sb, 0);
        const uint8_t *prev = pp->new_group ? NULL : g->sum;
        if (pd__bagg_fold_record(prev, prev ? g->sum_len : 0, &d, m->fold, &sb) == 1 && sb.len) {
            uint8_t *t = realloc(sb.data, sb.len);
            pp->sum = t ? t : (uint8_t *)sb.data;
            pp->sum_len = sb.len;
        } else /* none from now on (also without memory: the group is decoded) */
            pd_buf_release(&sb);
    }
    pd__dprof_release(&d); /* (the encoder keeps what the next delta needs) */
    if (pp->new_group)
        fit(&pp->enc, 0); /* a group starts at its first profile's size */
    pp->g = g;
    /* room for the publication, so that it cannot fail: memory readers use
       moves only under the write lock, and rarely (capacities double) */
    bool room_g = pp->new_group && c->n_g == c->cap_g;
    bool room_raw = !pp->new_group && g->raw.cap - g->raw.len <= pp->enc.len; /* (+ NUL) */
    if (room_g || room_raw) {
        rc = 0;
        wlock(idx);
        if (room_g) {
            size_t cap = c->cap_g ? 2 * c->cap_g : 4;
            pd_hgroup **v = realloc(c->g, cap * sizeof *v);
            if (v) {
                c->g = v;
                c->cap_g = cap;
            } else
                rc = PD_ENOMEM;
        }
        if (room_raw && rc == 0) {
            size_t cap0 = g->raw.cap;
            rc = fit(&g->raw, pp->enc.len);
            m->bytes += g->raw.cap - cap0;
        }
        wunlock(idx);
        if (rc < 0) {
            pd__hmem_abandon(m, c, pp);
            return pd_err_set(err, PD_ENOMEM, "head: out of memory");
        }
    }
    return 0;
}

void pd__hmem_publish(pd_hmem *m, pd_hchunks *c, pd_hmem_prep *pp, int64_t ts_ms, uint32_t *gid,
                      uint32_t *pos)
{
    pd_hgroup *g = pp->g;
    if (pp->new_group) {
        g->raw = pp->enc; /* moved */
        pd_buf_init(&pp->enc, 0);
        m->bytes += g->raw.cap;
        __atomic_add_fetch(&g->syms->refs, 1, __ATOMIC_ACQ_REL);
        c->g[c->n_g++] = g;
    } else {
        memcpy(g->raw.data + g->raw.len, pp->enc.data, pp->enc.len); /* room reserved */
        g->raw.len += pp->enc.len;
        g->raw.data[g->raw.len] = 0; /* as pd_buf keeps it */
    }
    c->open = true;
    *gid = c->base + (uint32_t)(c->n_g - 1);
    *pos = g->n;
    g->ts[g->n] = ts_ms;
    g->n++;
    g->n_live++;
    /* the sum of the n profiles now visible (NULL: none any more) */
    m->bytes -= g->sum_len;
    free(g->sum);
    g->sum = pp->sum;
    g->sum_len = pp->sum ? pp->sum_len : 0;
    m->bytes += g->sum_len;
    pd_buf_release(&pp->enc);
    memset(pp, 0, sizeof *pp);
    if (g->n >= PD_HMEM_GROUP || g->raw.len >= PD_HMEM_GROUP_BYTES ||
        c->enc.n_values >= PD_VGROUP_GROUP_VALUES)
        seal_last(c); /* readers never look at `sealed`; appenders hold app_mu */
}

void pd__hmem_abandon(pd_hmem *m, pd_hchunks *c, pd_hmem_prep *pp)
{
    (void)m;
    if (pp->new_group)
        free(pp->g); /* never seen by anyone (its raw is pp->enc) */
    pd_buf_release(&pp->enc);
    free(pp->sum);
    memset(pp, 0, sizeof *pp);
    seal_last(c); /* the encoder has seen the abandoned profile: start afresh */
}

int pd__hmem_append(pd_hmem *m, pd_hchunks *c, const pd_profile *p, int64_t ts_ms, uint32_t *gid,
                    uint32_t *pos, pd_err *err)
{
    pd_hmem_prep pp;
    int rc = pd__hmem_prepare(m, c, p, ts_ms, NULL, NULL, &pp, err);
    if (rc < 0)
        return rc;
    pd__hmem_publish(m, c, &pp, ts_ms, gid, pos);
    return 0;
}

int pd__hgroup_compress(const pd_hgroup *g, uint8_t **z, size_t *z_len)
{
    size_t bound = ZSTD_compressBound(g->raw.len);
    uint8_t *o = malloc(bound ? bound : 1);
    if (!o)
        return PD_ENOMEM;
    size_t n = ZSTD_compress(o, bound, g->raw.data, g->raw.len, PD_HMEM_ZSTD_LEVEL);
    if (ZSTD_isError(n)) {
        free(o);
        return PD_ENOMEM;
    }
    uint8_t *t = realloc(o, n ? n : 1);
    *z = t ? t : o;
    *z_len = n;
    return 0;
}

void pd__hgroup_install(pd_hmem *m, pd_hgroup *g, uint8_t *z, size_t z_len)
{
    m->bytes -= group_bytes(g);
    g->raw_len = g->raw.len;
    pd_buf_release(&g->raw);
    pd_buf_init(&g->raw, 0);
    g->z = z;
    g->z_len = z_len;
    m->bytes += group_bytes(g);
}

int pd__hgroup_sum(const pd_hgroup *g, uint32_t from, uint8_t **sum, size_t *sum_len)
{
    *sum = NULL;
    *sum_len = 0;
    if (from >= g->n)
        return 0;
    for (uint32_t i = 1; i < g->n; i++)
        if (g->ts[i] <= g->ts[i - 1])
            return 0; /* not in time order: the merge's fold order differs */
    const uint8_t *raw = (const uint8_t *)g->raw.data;
    size_t raw_len = g->raw.len;
    uint8_t *tmp = NULL;
    if (g->z) {
        if (!(tmp = malloc(g->raw_len ? g->raw_len : 1)))
            return PD_ENOMEM;
        size_t got = ZSTD_decompress(tmp, g->raw_len, g->z, g->z_len);
        if (ZSTD_isError(got) || got != g->raw_len) {
            free(tmp);
            return 0; /* (its reads say so) */
        }
        raw = tmp;
        raw_len = g->raw_len;
    }
    pd_dprof *d = calloc(g->n, sizeof *d);
    if (!d) {
        free(tmp);
        return PD_ENOMEM;
    }
    for (uint32_t i = 0; i < g->n; i++)
        d[i].ts = g->ts[i];
    pd_err e;
    pd_err_clear(&e);
    int rc = pd__vgroup_decode(&g->syms->sym, raw, raw_len, g->n, d, &e);
    free(tmp);
    pd_buf out;
    pd_buf_init(&out, 0);
    if (rc == 0)
        rc = pd__bagg_sum_record(d + from, g->n - from, &out);
    for (uint32_t i = 0; i < g->n; i++)
        pd__dprof_release(&d[i]);
    free(d);
    if (rc == 1 && out.len) {
        uint8_t *t = realloc(out.data, out.len);
        *sum = t ? t : (uint8_t *)out.data;
        *sum_len = out.len;
        return 0;
    }
    pd_buf_release(&out);
    return rc == PD_ENOMEM ? rc : 0;
}

void pd__hgroup_set_sum(pd_hmem *m, pd_hgroup *g, uint32_t from, uint8_t *sum, size_t sum_len)
{
    m->bytes -= group_bytes(g);
    free(g->sum);
    g->sum = sum;
    g->sum_len = sum ? sum_len : 0;
    g->sum_from = from;
    m->bytes += group_bytes(g);
}

const pd_hgroup *pd__hmem_group(const pd_hchunks *c, uint32_t gid)
{
    return group_at(c, gid);
}

size_t pd__hchunks_raw_sealed(pd_hchunks *c, pd_hgroup **out, size_t n)
{
    size_t k = 0;
    for (size_t i = c->n_g; i-- > 0 && k < n;)
        if (c->g[i] && c->g[i]->sealed && !c->g[i]->z)
            out[k++] = c->g[i];
    return k;
}

void pd__hmem_drop(pd_hmem *m, pd_hchunks *c, uint32_t gid)
{
    pd_hgroup *g = group_at(c, gid);
    if (!g || !g->n_live)
        return;
    if (--g->n_live || (!g->sealed && g->syms == m->cur && c->open && gid == c->base + c->n_g - 1))
        return;
    if (gid == c->base + c->n_g - 1 && !g->sealed)
        seal_last(c); /* the open group goes: the next append opens one */
    group_free(m, g);
    c->g[gid - c->base] = NULL;
    /* drop the freed prefix */
    size_t k = 0;
    while (k < c->n_g && !c->g[k])
        k++;
    if (k) {
        memmove(c->g, c->g + k, (c->n_g - k) * sizeof *c->g);
        c->n_g -= k;
        c->base += (uint32_t)k;
    }
}

/* ---- the head snapshot (headsnap.c) ---- */

pd_hsyms *pd__hmem_adopt_syms(pd_symbols *sym)
{
    pd_hsyms *h = calloc(1, sizeof *h);
    if (!h) {
        pd__symbols_release(sym);
        memset(sym, 0, sizeof *sym);
        return NULL;
    }
    h->gen = __atomic_add_fetch(&g_gen, 1, __ATOMIC_RELAXED);
    h->sym = *sym;
    memset(sym, 0, sizeof *sym);
    h->refs = 1; /* the adopter's, until pd__hmem_adopt_done */
    __atomic_add_fetch(&g_gens, 1, __ATOMIC_RELAXED);
    return h;
}

void pd__hmem_adopt_done(pd_hsyms *h)
{
    hsyms_put(h);
}

int pd__hmem_adopt_group(pd_hmem *m, pd_hchunks *c, pd_hsyms *h, uint32_t n, uint32_t n_live,
                         const int64_t *ts, uint8_t *raw, size_t raw_len, uint8_t *z, size_t z_len,
                         uint32_t *gid)
{
    pd_hgroup *g = n && n <= PD_HMEM_GROUP ? calloc(1, sizeof *g) : NULL;
    if (g && c->n_g == c->cap_g) {
        size_t cap = c->cap_g ? 2 * c->cap_g : 4;
        pd_hgroup **v = realloc(c->g, cap * sizeof *v);
        if (v) {
            c->g = v;
            c->cap_g = cap;
        } else {
            free(g);
            g = NULL;
        }
    }
    if (!g) {
        free(raw);
        free(z);
        return PD_ENOMEM;
    }
    pd_buf_init(&g->raw, 0);
    if (z) {
        free(raw);
        g->z = z;
        g->z_len = z_len;
    } else { /* pd_buf keeps a NUL past the bytes */
        g->raw.data = (char *)raw;
        g->raw.data[raw_len] = 0;
        g->raw.len = raw_len;
        g->raw.cap = raw_len + 1;
    }
    g->raw_len = raw_len;
    g->syms = h;
    __atomic_add_fetch(&h->refs, 1, __ATOMIC_ACQ_REL);
    g->uid = next_uid();
    g->n = n;
    g->n_live = n_live;
    g->sealed = true;
    memcpy(g->ts, ts, n * sizeof *ts);
    m->bytes += group_bytes(g);
    c->g[c->n_g++] = g;
    c->open = false;
    *gid = c->base + (uint32_t)(c->n_g - 1);
    return 0;
}

/* ---- reading: one decoded group per thread ---- */

typedef struct dcache {
    uint64_t uid;
    uint32_t n;
    pd_dprof *d;
} dcache;

static pthread_key_t dc_key;
static pthread_once_t dc_once = PTHREAD_ONCE_INIT;

static void dcache_clear(dcache *dc)
{
    for (uint32_t i = 0; dc->d && i < dc->n; i++)
        pd__dprof_release(&dc->d[i]);
    free(dc->d);
    dc->d = NULL;
    dc->n = 0;
    dc->uid = 0;
}

static void dc_free(void *p)
{
    if (p) {
        dcache_clear(p);
        free(p);
    }
}

static void dc_init_key(void)
{
    pthread_key_create(&dc_key, dc_free);
}

int pd__hmem_read(const pd_hchunks *c, uint32_t gid, uint32_t pos, int64_t ts_ms, pd_profile *out,
                  pd_err *err)
{
    memset(out, 0, sizeof *out);
    const pd_dprof *d;
    const pd_symbols *sym;
    int rc = pd__hmem_read_dprof(c, gid, pos, ts_ms, &d, &sym, err);
    return rc < 0 ? rc : pd__dprof_to_profile(sym, d, out, err);
}

int pd__hmem_read_dprof(const pd_hchunks *c, uint32_t gid, uint32_t pos, int64_t ts_ms,
                        const pd_dprof **out, const pd_symbols **sym, pd_err *err)
{
    *out = NULL;
    *sym = NULL;
    const pd_hgroup *g = group_at(c, gid);
    if (!g || pos >= g->n)
        return pd_err_set(err, PD_ENOTFOUND, "head: no profile %u of group %u", pos, gid);
    pthread_once(&dc_once, dc_init_key);
    dcache *dc = pthread_getspecific(dc_key);
    if (!dc) {
        if (!(dc = calloc(1, sizeof *dc)) || pthread_setspecific(dc_key, dc)) {
            free(dc);
            return pd_err_set(err, PD_ENOMEM, "head: out of memory");
        }
    }
    int rc = 0;
    if (dc->uid != g->uid || pos >= dc->n || !dc->d) {
        dcache_clear(dc);
        const uint8_t *p = (const uint8_t *)g->raw.data;
        size_t len = g->raw.len;
        uint8_t *tmp = NULL;
        if (g->z) {
            if (!(tmp = malloc(g->raw_len ? g->raw_len : 1)))
                return pd_err_set(err, PD_ENOMEM, "head: out of memory");
            size_t got = ZSTD_decompress(tmp, g->raw_len, g->z, g->z_len);
            if (ZSTD_isError(got) || got != g->raw_len) {
                free(tmp);
                return pd_err_set(err, PD_ECORRUPT, "head group %u does not decompress", gid);
            }
            p = tmp;
            len = g->raw_len;
        }
        pd_dprof *d = calloc(g->n, sizeof *d);
        if (!d) {
            free(tmp);
            return pd_err_set(err, PD_ENOMEM, "head: out of memory");
        }
        for (uint32_t i = 0; i < g->n; i++)
            d[i].ts = g->ts[i];
        rc = pd__vgroup_decode(&g->syms->sym, p, len, g->n, d, err);
        free(tmp);
        if (rc < 0) {
            for (uint32_t i = 0; i < g->n; i++)
                pd__dprof_release(&d[i]);
            free(d);
            return rc == PD_ENOMEM
                       ? rc
                       : pd_err_set(err, PD_ECORRUPT, "head group %u: %s", gid, err->msg);
        }
        dc->d = d;
        dc->n = g->n;
        dc->uid = g->uid;
    }
    if (dc->d[pos].ts != ts_ms)
        return pd_err_set(err, PD_ENOTFOUND, "head: profile %u of group %u is at %lld ms, not %lld",
                          pos, gid, (long long)dc->d[pos].ts, (long long)ts_ms);
    *out = &dc->d[pos];
    *sym = &g->syms->sym;
    return 0;
}
