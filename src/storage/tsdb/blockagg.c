/*
 * storage/tsdb/blockagg.c — per-block partial aggregates (blockagg_int.h;
 * the format: docs/format/aggregates.md).
 *
 * File DIR/aggregates (all integers little-endian):
 *
 *   0   magic "PDAG" (0x47414450)                               u32
 *   4   version (1)                                             u8
 *   5   reserved (0)                                            3 bytes
 *   8   the block's ULID                                        26 bytes
 *   34  series in the block                                     u64
 *   42  payload bytes, decompressed                             u64
 *   50  the payload, one zstd frame                             ...
 *   end CRC-32C of every byte before it                         u32
 *
 * Payload: n_records (uvarint), then per record, ascending series id:
 *   id delta from the previous record's id + 1 (uvarint), record bytes
 *   (uvarint), the record:
 *     CRC-32C of the series' bytes in chunks/000001 (its extent: value
 *     groups and time chunk) when summed, checked at a record's first use
 *     (a record whose chunks changed is not used: the decode reports the
 *     damage), n_profiles, min_ts (zigzag), max_ts - min_ts, flags (bit 0: tn_reset),
 *     n_types, types (2 x n_types string ids), period_type, period_unit,
 *     period, time_nanos, duration_nanos (zigzag), n_comment, comments,
 *     drop_frames, keep_frames, default_sample_type, doc_url (string ids),
 *     totals (n_types zigzag), n_entries, then per entry (ascending
 *     (stack, lset)): stack delta from the previous entry's stack, lset,
 *     n_types values (zigzag).
 * Every id is a string, stack or label-set id of the block's symbols.
 *
 * The header fold of a record is aggregate.c's (pprof's profile.Merge) over
 * the series' profiles in time order, from an empty part; it combines with a
 * fold so far because each rule is associative: duration summed; period the
 * largest (records only of periods >= 0, where "0 or smaller" is max);
 * default_sample_type/doc_url the first non-empty; comments the distinct
 * ones in first-seen order; the rest from the first profile; time_nanos
 * "the smallest, but 0 restarts it" — the fold of a sequence holding a 0 no
 * longer depends on what came before, which tn_reset says.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "base/crc32c.h"
#include "base/log.h"
#include "base/u64map.h"
#include "base/varint.h"
#include "storage/tsdb/block_file_int.h"
#include "storage/tsdb/blockagg_int.h"
#include "storage/tsdb/db_int.h"

#define BAGG_MAGIC 0x47414450u
#define BAGG_HDR 50
#define BAGG_MAX_PAYLOAD ((uint64_t)1 << 32) /* decompressed: 4 GiB */

struct pd_bagg {
    const pd_block *b; /* borrowed: the hblock's, which outlives g */
    uint8_t *chk;      /* n_series, __atomic: 0 record not checked against the chunks
                          yet, 1 it matches them, 2 it does not (decode the series) */
    uint8_t *raw;      /* the payload */
    size_t n_raw;
    uint64_t *off; /* n_series: where series id's record starts in raw, + 1 (0: none) */
    size_t n_series, n_rec;
    uint8_t *file; /* the encoded file (built ones until written), else NULL */
    size_t n_file;
};

void pd__bagg_free(pd_bagg *g)
{
    if (!g)
        return;
    free(g->raw);
    free(g->chk);
    free(g->off);
    free(g->file);
    free(g);
}

size_t pd__bagg_n_records(const pd_bagg *g)
{
    return g ? g->n_rec : 0;
}
size_t pd__bagg_file_bytes(const pd_bagg *g)
{
    return g ? g->n_file : 0;
}

void pd__bagg_scratch_release(pd_bagg_scratch *sc)
{
    free(sc->acc);
    pd_buf_release(&sc->eb);
    free(sc->types);
    free(sc->comment);
    free(sc->stack);
    free(sc->lset);
    free(sc->value);
    free(sc->totals);
    memset(sc, 0, sizeof *sc);
}

/* ---- decoding a record (also the verification at load) ---- */

typedef struct rd {
    const uint8_t *p;
    size_t n, i;
    bool bad;
} rd;

static uint64_t rd_u(rd *r)
{
    if (!r->bad &&
        r->n - r->i >= 9) { /* inline up to 9 bytes (63 bits): a record is mostly varints */
        const uint8_t *q = r->p + r->i;
        uint64_t v = 0;
        for (int k = 0; k < 9; k++) {
            v |= (uint64_t)(q[k] & 0x7f) << (7 * k);
            if (q[k] < 0x80) {
                r->i += (size_t)k + 1;
                return v;
            }
        }
        /* 10 bytes: pd_varint_get's rules */
    }
    uint64_t v = 0;
    size_t k = r->bad ? 0 : pd_varint_get(r->p + r->i, r->n - r->i, &v);
    if (!k) {
        r->bad = true;
        return 0;
    }
    r->i += k;
    return v;
}
static int64_t rd_z(rd *r)
{
    return pd_zigzag_dec(rd_u(r));
}

static bool grow(void **p, size_t *cap, size_t n, size_t elem)
{
    if (n <= *cap)
        return true;
    size_t nc = n < 16 ? 16 : n;
    void *q = realloc(*p, nc * elem);
    if (!q)
        return false;
    *p = q;
    *cap = nc;
    return true;
}

/* Decodes the record at r into *o (arrays in sc). sym non-NULL: every id is
 * checked against it (load); *why names what is wrong. 0, PD_ECORRUPT,
 * PD_ENOMEM. */
static int rec_decode_to(rd *r, const pd_symbols *sym, pd_bagg_rec *o, pd_bagg_scratch *sc,
                         const char **why, bool header_only)
{
    memset(o, 0, sizeof *o);
    *why = "truncated record";
    uint64_t crc = rd_u(r);
    o->chunks_crc = (uint32_t)crc;
    o->n_profiles = rd_u(r);
    o->min_ts = rd_z(r);
    o->max_ts = (int64_t)((uint64_t)o->min_ts + rd_u(r));
    uint64_t flags = rd_u(r);
    o->tn_reset = flags & 1;
    uint64_t nt = rd_u(r);
    if (r->bad)
        return PD_ECORRUPT;
    if (nt > PD_BAGG_MAX_TYPES || flags > 1 || crc > UINT32_MAX || o->max_ts < o->min_ts ||
        !o->n_profiles) {
        *why = "record header out of range";
        return PD_ECORRUPT;
    }
    pd_dprof *h = &o->h;
    h->n_types = (uint32_t)nt;
    if (!grow((void **)&sc->types, &sc->cap_types, 2 * nt + 1, sizeof *sc->types) ||
        !grow((void **)&sc->totals, &sc->cap_totals, nt + 1, sizeof *sc->totals))
        return PD_ENOMEM;
    for (size_t i = 0; i < 2 * nt; i++)
        sc->types[i] = (uint32_t)rd_u(r);
    h->types = sc->types;
    h->period_type = (uint32_t)rd_u(r);
    h->period_unit = (uint32_t)rd_u(r);
    h->period = rd_z(r);
    h->time_nanos = rd_z(r);
    h->duration_nanos = rd_z(r);
    uint64_t nc = rd_u(r);
    if (r->bad || nc > r->n - r->i)
        return PD_ECORRUPT;
    if (!grow((void **)&sc->comment, &sc->cap_comment, nc + 1, sizeof *sc->comment))
        return PD_ENOMEM;
    for (size_t i = 0; i < nc; i++)
        sc->comment[i] = (uint32_t)rd_u(r);
    h->n_comment = (uint32_t)nc;
    h->comment = sc->comment;
    h->drop_frames = (uint32_t)rd_u(r);
    h->keep_frames = (uint32_t)rd_u(r);
    h->default_sample_type = (uint32_t)rd_u(r);
    h->doc_url = (uint32_t)rd_u(r);
    for (size_t v = 0; v < nt; v++)
        sc->totals[v] = rd_z(r);
    h->totals = sc->totals;
    if (header_only) /* (pd__bagg_get_header: r was verified at load) */
        return r->bad ? PD_ECORRUPT : 0;
    uint64_t ne = rd_u(r);
    if (r->bad)
        return PD_ECORRUPT;
    if (ne > PD_BAGG_MAX_ENTRIES || ne > r->n - r->i) {
        *why = "entry count out of range";
        return PD_ECORRUPT;
    }
    if (!grow((void **)&sc->stack, &sc->cap_n, ne + 1, sizeof *sc->stack) ||
        !grow((void **)&sc->lset, &sc->cap_lset, ne + 1, sizeof *sc->lset) ||
        !grow((void **)&sc->value, &sc->cap_value, (size_t)ne * (nt ? nt : 1) + 1,
              sizeof *sc->value))
        return PD_ENOMEM;
    uint64_t stack = 0;
    for (size_t e = 0; e < ne && !r->bad; e++) {
        stack += rd_u(r);
        sc->stack[e] = (uint32_t)stack;
        sc->lset[e] = (uint32_t)rd_u(r);
        if (stack > UINT32_MAX) {
            *why = "stack id out of range";
            return PD_ECORRUPT;
        }
        for (size_t v = 0; v < nt; v++)
            sc->value[e * nt + v] = rd_z(r);
    }
    if (r->bad)
        return PD_ECORRUPT;
    h->n_sample = (uint32_t)ne;
    h->stack = sc->stack;
    h->lset = sc->lset;
    h->value = sc->value;
    if (sym) { /* every id in the block's symbols */
        *why = "string id out of range";
        uint32_t ids[6] = {h->period_type, h->period_unit,         h->drop_frames,
                           h->keep_frames, h->default_sample_type, h->doc_url};
        for (int i = 0; i < 6; i++)
            if (ids[i] >= sym->n_str)
                return PD_ECORRUPT;
        for (size_t i = 0; i < 2 * nt; i++)
            if (h->types[i] >= sym->n_str)
                return PD_ECORRUPT;
        for (size_t i = 0; i < nc; i++)
            if (h->comment[i] >= sym->n_str)
                return PD_ECORRUPT;
        for (size_t e = 0; e < ne; e++) {
            if (h->stack[e] > sym->n_stack || h->lset[e] > sym->n_lset) {
                *why = "stack or label-set id out of range";
                return PD_ECORRUPT;
            }
            if (e && h->stack[e] == h->stack[e - 1] && h->lset[e] <= h->lset[e - 1]) {
                *why = "entries out of order";
                return PD_ECORRUPT;
            }
        }
    }
    return 0;
}

static int rec_decode(rd *r, const pd_symbols *sym, pd_bagg_rec *o, pd_bagg_scratch *sc,
                      const char **why)
{
    return rec_decode_to(r, sym, o, sc, why, false);
}

int pd__bagg_get_header(const pd_bagg *g, uint32_t id, pd_bagg_rec *r, pd_bagg_scratch *sc)
{
    if (!g || id >= g->n_series || !g->off[id] ||
        __atomic_load_n(&g->chk[id], __ATOMIC_ACQUIRE) == 2)
        return 0;
    rd x = {.p = g->raw, .n = g->n_raw, .i = (size_t)(g->off[id] - 1)};
    const char *why;
    int rc = rec_decode_to(&x, NULL, r, sc, &why, true);
    if (rc < 0)
        return rc == PD_ENOMEM ? rc : 0;
    return 1;
}

int pd__bagg_get(const pd_bagg *g, uint32_t id, pd_bagg_rec *r, pd_bagg_scratch *sc)
{
    if (!g || id >= g->n_series || !g->off[id])
        return 0;
    rd x = {.p = g->raw, .n = g->n_raw, .i = (size_t)(g->off[id] - 1)};
    const char *why;
    int rc = rec_decode(&x, NULL, r, sc, &why);
    if (rc < 0)
        return rc == PD_ENOMEM ? rc : 0; /* verified at load: no PD_ECORRUPT */
    /* the first use: do the chunks still hold what was summed? (a byte
       flipped since must cost what it touches, reported by the decode) */
    uint8_t c = __atomic_load_n(&g->chk[id], __ATOMIC_ACQUIRE);
    if (!c) {
        uint32_t crc;
        c = pd__block_series_crc(g->b, id, &crc) == 0 && crc == r->chunks_crc ? 1 : 2;
        __atomic_store_n(&g->chk[id], c, __ATOMIC_RELEASE);
    }
    return c == 1;
}

/* Indexes payload raw (owned by g from now on) into g, verifying every
 * record against b. 0, PD_ECORRUPT (err), PD_ENOMEM. */
static int index_payload(pd_block *b, pd_bagg *g, const char *path, pd_err *err)
{
    const pd_symbols *sym = pd__block_symbols(b);
    g->n_series = pd__block_n_series(b);
    g->b = b;
    if (!(g->off = calloc(g->n_series + 1, sizeof *g->off)) ||
        !(g->chk = calloc(g->n_series + 1, 1)))
        return PD_ENOMEM;
    rd r = {.p = g->raw, .n = g->n_raw};
    uint64_t n = rd_u(&r), id = 0;
    pd_bagg_scratch sc = {0};
    int rc = 0;
    const char *why = "truncated payload";
    if (r.bad || n > g->n_series) {
        rc = PD_ECORRUPT;
        goto out;
    }
    for (uint64_t k = 0; k < n; k++) {
        uint64_t d = rd_u(&r), len = rd_u(&r);
        id = k ? id + d + 1 : d;
        if (r.bad || id >= g->n_series || d >= g->n_series || len > r.n - r.i) {
            why = "record id or length out of range";
            rc = PD_ECORRUPT;
            goto out;
        }
        size_t start = r.i;
        rd one = {.p = g->raw, .n = r.i + (size_t)len, .i = r.i};
        pd_bagg_rec rec;
        if ((rc = rec_decode(&one, sym, &rec, &sc, &why)) < 0)
            goto out;
        if (one.i != one.n) {
            why = "record longer than it says";
            rc = PD_ECORRUPT;
            goto out;
        }
        int64_t mn, mx;
        uint64_t np, tb, vb;
        pd__block_series_info(b, (uint32_t)id, &mn, &mx, &np, &tb, &vb);
        if (np != rec.n_profiles || mn != rec.min_ts || mx != rec.max_ts) {
            why = "a record disagrees with the block's index (profiles or time range)";
            rc = PD_ECORRUPT;
            goto out;
        }
        g->off[id] = start + 1;
        r.i += (size_t)len;
        g->n_rec++;
    }
    if (r.i != r.n) {
        why = "trailing bytes in the payload";
        rc = PD_ECORRUPT;
    }
out:
    pd__bagg_scratch_release(&sc);
    if (rc == PD_ECORRUPT)
        pd_err_set(err, PD_ECORRUPT, "%s payload offset %zu: %s", path, r.i, why);
    else if (rc == PD_ENOMEM)
        pd_err_set(err, PD_ENOMEM, "%s: out of memory", path);
    return rc;
}

int pd__bagg_load(pd_block *b, pd_bagg **out, pd_err *err)
{
    *out = NULL;
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", pd__block_dir(b), PD_BAGG_FILE);
    FILE *f = fopen(path, "rb");
    if (!f)
        return errno == ENOENT ? PD_ENOTFOUND
                               : pd_err_set(err, -errno, "open %s: %s", path, strerror(errno));
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (;;) {
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 65536;
            if (nc > MAX_FILE + 1) {
                rc = pd_err_set(err, PD_ECORRUPT, "%s: larger than %llu bytes", path,
                                (unsigned long long)MAX_FILE);
                goto out;
            }
            uint8_t *q = realloc(buf, nc);
            if (!q) {
                rc = pd_err_set(err, PD_ENOMEM, "%s: out of memory", path);
                goto out;
            }
            buf = q;
            cap = nc;
        }
        size_t k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (k == 0)
            break;
    }
    if (ferror(f)) {
        rc = pd_err_set(err, -EIO, "read %s: I/O error", path);
        goto out;
    }
    if (n < BAGG_HDR + 4 || get_u32(buf) != BAGG_MAGIC) {
        rc = pd_err_set(err, PD_ECORRUPT, "%s offset 0: not an aggregates file", path);
        goto out;
    }
    if (get_u32(buf + n - 4) != pd_crc32c(0, buf, n - 4)) {
        rc = pd_err_set(err, PD_ECORRUPT, "%s offset %zu: checksum mismatch", path, n - 4);
        goto out;
    }
    if (buf[4] != PD_BAGG_VERSION) {
        rc = pd_err_set(err, PD_ECORRUPT, "%s offset 4: version %u, this profd reads %d", path,
                        buf[4], PD_BAGG_VERSION);
        goto out;
    }
    if (memcmp(buf + 8, pd__block_meta(b)->ulid, 26)) {
        rc = pd_err_set(err, PD_ECORRUPT, "%s offset 8: the aggregates of another block", path);
        goto out;
    }
    uint64_t nser = 0, plen = 0;
    for (int i = 7; i >= 0; i--) {
        nser = nser << 8 | buf[34 + i];
        plen = plen << 8 | buf[42 + i];
    }
    if (nser != pd__block_n_series(b) || plen > BAGG_MAX_PAYLOAD) {
        rc = pd_err_set(err, PD_ECORRUPT,
                        "%s offset 34: %llu series or %llu payload bytes "
                        "(the block has %zu series)",
                        path, (unsigned long long)nser, (unsigned long long)plen,
                        pd__block_n_series(b));
        goto out;
    }
    pd_bagg *g = calloc(1, sizeof *g);
    if (!g || !(g->raw = malloc(plen ? plen : 1))) {
        free(g);
        rc = pd_err_set(err, PD_ENOMEM, "%s: out of memory", path);
        goto out;
    }
    size_t z = ZSTD_decompress(g->raw, plen, buf + BAGG_HDR, n - 4 - BAGG_HDR);
    if (ZSTD_isError(z) || z != plen) {
        pd__bagg_free(g);
        rc = pd_err_set(err, PD_ECORRUPT,
                        "%s offset %d: payload does not decompress to %llu "
                        "bytes",
                        path, BAGG_HDR, (unsigned long long)plen);
        goto out;
    }
    g->n_raw = plen;
    g->n_file = n;
    if ((rc = index_payload(b, g, path, err)) < 0) {
        pd__bagg_free(g);
        goto out;
    }
    *out = g;
out:
    fclose(f);
    free(buf);
    return rc;
}

/* ---- building ---- */

typedef struct bstate {
    pd_dprof h; /* header of the first profile; h.types/h.comment ours */
    uint32_t *types, *comment;
    size_t n_comment, cap_comment;
    int64_t *totals;
    uint64_t n;
    int64_t min_ts, max_ts;
    bool tn_reset, bad; /* bad: not aggregable */
    pd_u64map map;      /* (stack << 32 | lset) -> entry */
    uint32_t *stack, *lset;
    int64_t *val;
    size_t n_e, cap_e;
} bstate;

static void bs_reset(bstate *s)
{
    pd_u64map_release(&s->map);
    pd_u64map_init(&s->map);
    s->n = 0;
    s->n_e = 0;
    s->n_comment = 0;
    s->bad = false;
    s->tn_reset = false;
}

static void bs_release(bstate *s)
{
    pd_u64map_release(&s->map);
    free(s->types);
    free(s->comment);
    free(s->totals);
    free(s->stack);
    free(s->lset);
    free(s->val);
}

static int bs_add(void *ctx, const pd_dprof *d)
{
    bstate *s = ctx;
    if (s->bad)
        return 0;
    size_t nt = d->n_types;
    if (d->period < 0 || nt > PD_BAGG_MAX_TYPES) {
        s->bad = true;
        return 0;
    }
    if (!s->n) {
        s->h = *d;
        uint32_t *t = realloc(s->types, (2 * nt + 1) * sizeof *t);
        if (t)
            s->types = t;
        int64_t *tot = realloc(s->totals, (nt + 1) * sizeof *tot);
        if (tot)
            s->totals = tot;
        if (!t || !tot)
            return PD_ENOMEM;
        memcpy(s->types, d->types, 2 * nt * sizeof *t);
        memset(s->totals, 0, nt * sizeof *tot);
        s->min_ts = s->max_ts = d->ts;
        s->tn_reset = d->time_nanos == 0;
    } else {
        if (d->n_types != s->h.n_types || d->period_type != s->h.period_type ||
            d->period_unit != s->h.period_unit ||
            memcmp(d->types, s->types, 2 * nt * sizeof *d->types)) {
            s->bad = true; /* a new part in a merge: decoded */
            return 0;
        }
        if (s->h.time_nanos == 0 || d->time_nanos < s->h.time_nanos)
            s->h.time_nanos = d->time_nanos;
        if (d->time_nanos == 0)
            s->tn_reset = true;
        if (s->h.period == 0 || s->h.period < d->period)
            s->h.period = d->period;
        s->h.duration_nanos =
            (int64_t)((uint64_t)s->h.duration_nanos + (uint64_t)d->duration_nanos);
        if (!s->h.default_sample_type)
            s->h.default_sample_type = d->default_sample_type;
        if (!s->h.doc_url)
            s->h.doc_url = d->doc_url;
        if (d->ts < s->min_ts)
            s->min_ts = d->ts;
        if (d->ts > s->max_ts)
            s->max_ts = d->ts;
    }
    for (size_t i = 0; i < d->n_comment; i++) {
        bool seen = false;
        for (size_t j = 0; j < s->n_comment && !seen; j++)
            seen = s->comment[j] == d->comment[i];
        if (seen)
            continue;
        if (!grow((void **)&s->comment, &s->cap_comment, s->n_comment + 1, sizeof *s->comment))
            return PD_ENOMEM;
        s->comment[s->n_comment++] = d->comment[i];
    }
    s->n++;
    for (size_t v = 0; v < nt; v++)
        s->totals[v] = (int64_t)((uint64_t)s->totals[v] + (uint64_t)d->totals[v]);
    for (uint32_t k = 0; k < d->n_sample; k++) {
        const int64_t *sv = d->value + (size_t)k * nt;
        uint64_t key = (uint64_t)d->stack[k] << 32 | d->lset[k], e;
        if (!pd_u64map_get(&s->map, key, &e)) {
            bool zero = true;
            for (size_t v = 0; v < nt && zero; v++)
                zero = sv[v] == 0;
            if (zero)
                continue;
            if (s->n_e == s->cap_e) {
                size_t nc = s->cap_e ? 2 * s->cap_e : 1024;
                if (nc > PD_BAGG_MAX_ENTRIES) {
                    s->bad = true;
                    return 0;
                }
                uint32_t *st = realloc(s->stack, nc * sizeof *st);
                if (st)
                    s->stack = st;
                uint32_t *ls = realloc(s->lset, nc * sizeof *ls);
                if (ls)
                    s->lset = ls;
                int64_t *va = realloc(s->val, nc * (nt ? nt : 1) * sizeof *va);
                if (va)
                    s->val = va;
                if (!st || !ls || !va)
                    return PD_ENOMEM;
                s->cap_e = nc;
            }
            e = s->n_e++;
            s->stack[e] = d->stack[k];
            s->lset[e] = d->lset[k];
            memset(s->val + e * nt, 0, nt * sizeof *s->val);
            if (pd_u64map_put(&s->map, key, e) < 0)
                return PD_ENOMEM;
        }
        int64_t *dv = s->val + e * nt;
        for (size_t v = 0; v < nt; v++)
            dv[v] = (int64_t)((uint64_t)dv[v] + (uint64_t)sv[v]);
    }
    return 0;
}

static __thread const bstate *sort_bs;

static int cmp_e(const void *x, const void *y)
{
    const bstate *s = sort_bs;
    uint32_t i = *(const uint32_t *)x, j = *(const uint32_t *)y;
    if (s->stack[i] != s->stack[j])
        return s->stack[i] < s->stack[j] ? -1 : 1;
    return s->lset[i] < s->lset[j] ? -1 : s->lset[i] > s->lset[j];
}

#define PU(x) (rc = rc < 0 ? rc : pd_buf_put_varint(out, (uint64_t)(x)))
#define PZ(x) PU(pd_zigzag_enc((int64_t)(x)))

/* Appends a record's fields up to its totals (the layout at the top): h's
 * header with its n_types types, n_comment comments and totals. 0,
 * PD_ENOMEM, PD_ETOOBIG. */
static int put_rec_head(pd_buf *out, uint32_t chunks_crc, uint64_t n, int64_t min_ts,
                        int64_t max_ts, bool tn_reset, const pd_dprof *h)
{
    int rc = 0;
    size_t nt = h->n_types;
    PU(chunks_crc);
    PU(n);
    PZ(min_ts);
    PU((uint64_t)max_ts - (uint64_t)min_ts);
    PU(tn_reset ? 1 : 0);
    PU(nt);
    for (size_t i = 0; i < 2 * nt; i++)
        PU(h->types[i]);
    PU(h->period_type);
    PU(h->period_unit);
    PZ(h->period);
    PZ(h->time_nanos);
    PZ(h->duration_nanos);
    PU(h->n_comment);
    for (size_t i = 0; i < h->n_comment; i++)
        PU(h->comment[i]);
    PU(h->drop_frames);
    PU(h->keep_frames);
    PU(h->default_sample_type);
    PU(h->doc_url);
    for (size_t v = 0; v < nt; v++)
        PZ(h->totals[v]);
    return rc;
}

/* Appends s's record to out. 0, PD_ENOMEM, PD_ETOOBIG. */
static int bs_encode(const bstate *s, uint32_t chunks_crc, pd_buf *out)
{
    size_t nt = s->h.n_types, k = 0;
    uint32_t *ord = malloc((s->n_e ? s->n_e : 1) * sizeof *ord);
    if (!ord)
        return PD_ENOMEM;
    for (size_t i = 0; i < s->n_e; i++) {
        bool zero = true;
        for (size_t v = 0; v < nt && zero; v++)
            zero = s->val[i * nt + v] == 0;
        if (!zero)
            ord[k++] = (uint32_t)i;
    }
    sort_bs = s;
    if (k)
        qsort(ord, k, sizeof *ord, cmp_e);
    pd_dprof h = s->h;
    h.types = s->types;
    h.comment = s->comment;
    h.n_comment = (uint32_t)s->n_comment;
    h.totals = s->totals;
    int rc = put_rec_head(out, chunks_crc, s->n, s->min_ts, s->max_ts, s->tn_reset, &h);
    PU(k);
    uint32_t prev = 0;
    for (size_t i = 0; i < k && rc >= 0; i++) {
        uint32_t e = ord[i];
        PU(s->stack[e] - prev);
        prev = s->stack[e];
        PU(s->lset[e]);
        for (size_t v = 0; v < nt; v++)
            PZ(s->val[(size_t)e * nt + v]);
    }
    free(ord);
    return rc;
}

/* ---- a head group's sum (headmem.c: the head's aggregates) ---- */

int pd__bagg_sum_record(const pd_dprof *d, size_t n, pd_buf *out)
{
    bstate s = {0};
    pd_u64map_init(&s.map);
    int rc = 0;
    for (size_t i = 0; i < n && rc >= 0 && !s.bad; i++)
        rc = bs_add(&s, &d[i]);
    if (rc >= 0 && !s.bad && s.n) {
        rc = bs_encode(&s, 0, out);
        rc = rc == 0 ? 1 : rc == PD_ENOMEM ? rc : 0;
    } else if (rc >= 0)
        rc = 0;
    bs_release(&s);
    return rc;
}

int pd__bagg_rec_decode(const uint8_t *p, size_t n, pd_bagg_rec *r, pd_bagg_scratch *sc)
{
    rd x = {.p = p, .n = n};
    const char *why;
    int rc = rec_decode(&x, NULL, r, sc, &why);
    return rc == PD_ENOMEM ? rc : rc < 0 ? 0 : 1;
}

/* ---- the open head group's running sum (headmem.c) ----
 *
 * r + d, written as the record pd__bagg_sum_record would write for r's
 * profiles followed by d: the header folded by bs_add's rules, totals and
 * values added (wrapping), entries merged in one walk over r's entries and
 * d's samples (both ascending by (stack, lset); d may repeat a key), an
 * entry that sums to all-zero left out — as bs_encode leaves it out, and a
 * later sample of its key starts it again from zero, which adds the same. */

int pd__bagg_same_header(const uint8_t *p, size_t n, const pd_dprof *d, pd_bagg_scratch *sc)
{
    pd_bagg_rec r;
    rd x = {.p = p, .n = n};
    const char *why;
    if (rec_decode_to(&x, NULL, &r, sc, &why, true) < 0)
        return 1; /* (not a record: the fold says no sum) */
    return d->n_types == r.h.n_types && d->period_type == r.h.period_type &&
           d->period_unit == r.h.period_unit &&
           !memcmp(d->types, r.h.types, 2 * (size_t)d->n_types * sizeof *d->types);
}

int pd__bagg_fold_record(const uint8_t *p, size_t n, const pd_dprof *d, pd_bagg_scratch *sc,
                         pd_buf *out)
{
    if (!p)
        return pd__bagg_sum_record(d, 1, out);
    size_t nt = d->n_types;
    if (d->period < 0 || nt > PD_BAGG_MAX_TYPES)
        return 0;
    pd_bagg_rec r;
    rd x = {.p = p, .n = n};
    const char *why;
    int rc = rec_decode(&x, NULL, &r, sc, &why);
    if (rc < 0)
        return rc == PD_ENOMEM ? rc : 0;
    pd_dprof h = r.h;
    if (d->ts <= r.max_ts)
        return 0; /* not in time order: the merge's fold order differs */
    if (nt != h.n_types || d->period_type != h.period_type || d->period_unit != h.period_unit ||
        memcmp(d->types, h.types, 2 * nt * sizeof *d->types))
        return 0;
    if (h.time_nanos == 0 || d->time_nanos < h.time_nanos)
        h.time_nanos = d->time_nanos;
    bool tn_reset = r.tn_reset || d->time_nanos == 0;
    if (h.period == 0 || h.period < d->period)
        h.period = d->period;
    h.duration_nanos = (int64_t)((uint64_t)h.duration_nanos + (uint64_t)d->duration_nanos);
    if (!h.default_sample_type)
        h.default_sample_type = d->default_sample_type;
    if (!h.doc_url)
        h.doc_url = d->doc_url;
    if (d->n_comment && !grow((void **)&sc->comment, &sc->cap_comment,
                              (size_t)h.n_comment + d->n_comment + 1, sizeof *sc->comment))
        return PD_ENOMEM;
    h.comment = sc->comment; /* (rec_decode put r's there: grow kept them) */
    for (size_t i = 0; i < d->n_comment; i++) {
        bool seen = false;
        for (size_t j = 0; j < h.n_comment && !seen; j++)
            seen = h.comment[j] == d->comment[i];
        if (!seen)
            h.comment[h.n_comment++] = d->comment[i];
    }
    for (size_t v = 0; v < nt; v++)
        sc->totals[v] = (int64_t)((uint64_t)sc->totals[v] + (uint64_t)d->totals[v]);
    /* the entries, merged into sc->eb (their count goes first) */
    if (!grow((void **)&sc->acc, &sc->cap_acc, nt + 1, sizeof *sc->acc))
        return PD_ENOMEM;
    pd_buf *eb = &sc->eb;
    if (!eb->data)
        pd_buf_init(eb, 0);
    eb->len = 0;
    /* room for every entry at once (at most 10 bytes a varint): the varints
       are written straight in (pd_buf_put_varint's check per value was a
       tenth of an append's CPU) */
    size_t room = ((size_t)r.h.n_sample + d->n_sample) * (2 + nt) * 10 + 1;
    if ((rc = pd_buf_reserve(eb, room)) < 0)
        return rc == PD_ENOMEM ? rc : 0;
    uint8_t *w = (uint8_t *)eb->data;
    size_t i = 0, j = 0, k = 0;
    uint32_t prev = 0;
    while (i < r.h.n_sample || j < d->n_sample) {
        uint64_t kr = i < r.h.n_sample ? (uint64_t)r.h.stack[i] << 32 | r.h.lset[i] : 0;
        uint64_t kd = j < d->n_sample ? (uint64_t)d->stack[j] << 32 | d->lset[j] : 0;
        bool take_r = i < r.h.n_sample && (j >= d->n_sample || kr <= kd);
        bool take_d = j < d->n_sample && (i >= r.h.n_sample || kd <= kr);
        uint64_t key = take_r ? kr : kd;
        int64_t *acc = sc->acc;
        if (take_r) {
            memcpy(acc, r.h.value + i * nt, nt * sizeof *acc);
            i++;
        } else
            memset(acc, 0, nt * sizeof *acc);
        for (; take_d && j < d->n_sample && ((uint64_t)d->stack[j] << 32 | d->lset[j]) == key; j++)
            for (size_t v = 0; v < nt; v++)
                acc[v] = (int64_t)((uint64_t)acc[v] + (uint64_t)d->value[j * nt + v]);
        bool zero = true;
        for (size_t v = 0; v < nt && zero; v++)
            zero = acc[v] == 0;
        if (zero)
            continue;
        if (++k > PD_BAGG_MAX_ENTRIES)
            return 0;
        uint32_t st = (uint32_t)(key >> 32);
        w += pd_varint_put(w, st - prev);
        prev = st;
        w += pd_varint_put(w, (uint32_t)key);
        for (size_t v = 0; v < nt; v++)
            w += pd_varint_put(w, pd_zigzag_enc(acc[v]));
    }
    eb->len = (size_t)(w - (uint8_t *)eb->data);
    eb->data[eb->len] = 0;
    rc = 0;
    h.totals = sc->totals;
    if (rc >= 0)
        rc = put_rec_head(out, 0, r.n_profiles + 1, r.min_ts, d->ts, tn_reset, &h);
    PU(k);
    if (rc >= 0 && eb->len)
        rc = pd_buf_append(out, eb->data, eb->len);
    return rc == 0 ? 1 : rc == PD_ENOMEM ? rc : 0;
}

int pd__bagg_build(pd_block *b, bool (*skip)(void *ctx, uint32_t id), void *ctx, pd_bagg **out,
                   pd_err *err)
{
    *out = NULL;
    size_t ns = pd__block_n_series(b);
    pd_buf recs, pay;
    pd_buf_init(&recs, 0);
    pd_buf_init(&pay, 0);
    bstate s = {0};
    pd_u64map_init(&s.map);
    pd_bagg *g = calloc(1, sizeof *g);
    int rc = 0;
    size_t n_rec = 0;
    uint64_t prev_id = 0;
    if (!g || !(g->off = calloc(ns + 1, sizeof *g->off)) || !(g->chk = calloc(ns + 1, 1)))
        goto nomem;
    g->n_series = ns;
    g->b = b;
    pd_buf body; /* one record at a time */
    pd_buf_init(&body, 0);
    for (uint32_t id = 0; id < ns; id++) {
        if (skip && skip(ctx, id))
            continue;
        bs_reset(&s);
        pd_err e;
        pd_err_clear(&e);
        rc = pd__block_series_foreach_dprof(b, id, INT64_MIN, INT64_MAX, bs_add, &s, &e);
        if (rc == PD_ECORRUPT || rc == PD_ENOTFOUND) { /* decoded when read, damage reported then */
            rc = 0;
            continue;
        }
        if (rc < 0) {
            pd_err_set(err, rc, "aggregates of block %s: %s", pd__block_meta(b)->ulid,
                       e.msg[0] ? e.msg : "out of memory");
            pd_buf_release(&body);
            goto fail;
        }
        if (s.bad || !s.n)
            continue;
        uint32_t crc;
        if (pd__block_series_crc(b, id, &crc) < 0)
            continue; /* read again when decoded */
        g->chk[id] = 1;
        pd_buf_reset(&body);
        if ((rc = bs_encode(&s, crc, &body)) < 0) {
            pd_buf_release(&body);
            goto nomem;
        }
        if ((rc = pd_buf_put_varint(&recs, n_rec ? id - prev_id - 1 : id)) < 0 ||
            (rc = pd_buf_put_varint(&recs, body.len)) < 0)
            goto nomem_body;
        g->off[id] = recs.len + 1; /* of recs for now: shifted below */
        if ((rc = pd_buf_append(&recs, body.data, body.len)) < 0)
            goto nomem_body;
        prev_id = id;
        n_rec++;
    }
    pd_buf_release(&body);
    /* payload = n_records + recs */
    if (pd_buf_put_varint(&pay, n_rec) < 0)
        goto nomem;
    size_t shift = pay.len;
    if (recs.len && pd_buf_append(&pay, recs.data, recs.len) < 0)
        goto nomem;
    for (size_t i = 0; i < ns; i++)
        if (g->off[i])
            g->off[i] += shift;
    g->n_rec = n_rec;
    g->n_raw = pay.len;
    g->raw = (uint8_t *)pd_buf_detach(&pay, NULL);
    if (!g->raw)
        goto nomem;
    /* the file */
    size_t bound = ZSTD_compressBound(g->n_raw);
    if (!(g->file = malloc(BAGG_HDR + bound + 4)))
        goto nomem;
    memset(g->file, 0, BAGG_HDR);
    put_u32(g->file, BAGG_MAGIC);
    g->file[4] = PD_BAGG_VERSION;
    memcpy(g->file + 8, pd__block_meta(b)->ulid, 26);
    for (int i = 0; i < 8; i++) {
        g->file[34 + i] = (uint8_t)((uint64_t)ns >> (8 * i));
        g->file[42 + i] = (uint8_t)((uint64_t)g->n_raw >> (8 * i));
    }
    size_t z = ZSTD_compress(g->file + BAGG_HDR, bound, g->raw, g->n_raw, 3);
    if (ZSTD_isError(z))
        goto nomem;
    put_u32(g->file + BAGG_HDR + z, pd_crc32c(0, g->file, BAGG_HDR + z));
    g->n_file = BAGG_HDR + z + 4;
    pd_buf_release(&recs);
    bs_release(&s);
    *out = g;
    return 0;
nomem_body:
    pd_buf_release(&body);
nomem:
    rc = pd_err_set(err, PD_ENOMEM, "aggregates of block %s: out of memory",
                    pd__block_meta(b)->ulid);
fail:
    pd_buf_release(&recs);
    pd_buf_release(&pay);
    bs_release(&s);
    pd__bagg_free(g);
    return rc;
}

int pd__bagg_write(const pd_block *b, const pd_bagg *g, pd_err *err)
{
    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s/%s", pd__block_dir(b), PD_BAGG_FILE);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (!g->file)
        return pd_err_set(err, PD_EINVAL, "%s: nothing to write", path);
    int rc = pd__block_write_file(tmp, g->file, g->n_file);
    if (!rc && rename(tmp, path) < 0)
        rc = -errno;
    if (!rc)
        rc = pd__block_fsync_path(pd__block_dir(b), true);
    if (rc) {
        unlink(tmp);
        return pd_err_set(err, rc, "write %s: %s", path, strerror(-rc));
    }
    return 0;
}

/* ---- the maintenance round's part ---- */

static bool skip_bad(void *ctx, uint32_t id)
{
    return pd__tsdb_hb_bad(ctx, id);
}

bool pd__bagg_maintain(pd_tsdb *s, int64_t budget_ms)
{
    hblock **v;
    size_t n;
    if (pd__tsdb_snapshot_blocks(s, &v, &n) < 0)
        return false;
    int64_t end = pd__tsdb_now_mono_ms() + budget_ms;
    bool more = false;
    for (size_t i = 0; i < n; i++) {
        hblock *hb = v[i];
        if (__atomic_load_n(&hb->agg_tried, __ATOMIC_ACQUIRE))
            continue;
        if (pd__tsdb_now_mono_ms() >= end) {
            more = true;
            break;
        }
        pd_bagg *g = NULL;
        pd_err e;
        pd_err_clear(&e);
        int rc = pd__bagg_load(hb->b, &g, &e);
        if (rc < 0 && rc != PD_ENOMEM) {
            if (rc != PD_ENOTFOUND)
                pd_log_warn("storage: a block's aggregates file does not verify; rebuilding it "
                            "from the block (merges decode the block meanwhile)",
                            "block=%s err=\"%s\"", pd__block_meta(hb->b)->ulid, e.msg);
            pd_err_clear(&e);
            rc = pd__bagg_build(hb->b, skip_bad, hb, &g, &e);
            if (rc >= 0) {
                pd_err we;
                pd_err_clear(&we);
                if (pd__bagg_write(hb->b, g, &we) < 0)
                    pd_log_warn("storage: cannot write a block's aggregates (kept in memory, "
                                "rebuilt at the next start)",
                                "block=%s err=\"%s\"", pd__block_meta(hb->b)->ulid, we.msg);
                free(g->file); /* written: not needed in memory */
                g->file = NULL;
                __atomic_add_fetch(&s->n_agg_built, 1, __ATOMIC_RELAXED);
            }
        }
        if (rc < 0) {
            pd_log_warn("storage: cannot build a block's aggregates; its merges decode it",
                        "block=%s err=\"%s\"", pd__block_meta(hb->b)->ulid, e.msg);
            if (rc == PD_ENOMEM)
                continue; /* tried again next round */
        }
        pd__tsdb_hb_stat_agg(hb); /* counted by --storage.retention.size */
        __atomic_store_n(&hb->agg, g, __ATOMIC_RELEASE);
        __atomic_store_n(&hb->agg_tried, 1, __ATOMIC_RELEASE);
    }
    pd__tsdb_put_blocks(v, n);
    return more;
}
