/*
 * storage/tsdb/tchunk.c — the time chunk of a series in a block (API:
 * chunks_int.h; layout: docs/format/chunks.md): its timestamps, sample-type
 * sets, totals, time_nanos (versions 3-4) and the table of its value groups —
 * everything a timeline reads, so that it reads no value group, and what a
 * value group of version 3 takes from it (chunks.c). varint = unsigned
 * LEB128, zz = zigzag varint.
 *
 * Time chunk payload, version 4 (columns):
 *   n | n_tset | n_tset x (k, k x (type, unit))
 *   zz ts0 | [n > 1:] zz D (the median of ts_i - ts_i-1) |
 *     [n > 1:] column of n-1 x (ts_i - ts_i-1 - D)
 *   n x tset
 *   per type position t: column of the totals t (of the profiles with a type
 *     t), each minus the previous profile's when it has the same set
 *   column of n x (time_nanos - ts x 1e6)
 *   n_group | n_group x (profiles in group, chunk offset delta from previous group)
 * column (put_column): mode | 0: g = gcd of the magnitudes | B = bits of the
 *   largest zigzag(v / g) | byte planes of zigzag(v / g), the top one
 *   bit-packed (put_planes); 1: k | exp-Golomb codes of order k (put_golomb);
 *   2 (version 4, written when no value is negative): as 0 of v / g itself.
 * Version 3 (read): as 4 but zz ts0 | zz (ts1 - ts0) | column of n-2
 *   delta-of-delta of ts, and no column mode 2.
 * Version 2 (read): n | n_tset | sets | n x (zz ts dod, tset, k x zz total
 *   delta) | groups; ts dod: the first is ts, the second ts - ts0, then
 *   (ts_i - ts_i-1) - (ts_i-1 - ts_i-2).
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/varint.h"
#include "storage/tsdb/chunks_int.h"
#include "storage/tsdb/payload_int.h"

/* v[0..n) (signed, as uint64) as a column: g = the gcd of their magnitudes
 * (0: all 0), then z = zigzag(v / g) in byte planes: the bit length B of the
 * largest z, then byte 0 of every z, byte 1 of every z, ... up to the last
 * byte that holds bits, which is bit-packed: its k = B - 8 x (planes before)
 * bits of every z, LSB first. A column of nanosecond offsets or of large
 * counter deltas is random in its low bytes and near constant in its high
 * ones: as varints zstd saw one mixed byte stream (and gained nothing on the
 * offsets, whose random bytes flatten the one literal table of the chunk);
 * as planes it codes the high bytes apart, and the top one costs its bits.
 * The gcd takes out a common quantum (cpu nanoseconds = samples x period;
 * Go scales mutex contentions by the sampling fraction). */
static uint64_t col_z(uint64_t v, uint64_t g, bool uns)
{
    if (uns) /* mode 2: every value >= 0 */
        return g > 1 ? v / g : v;
    return pd_zigzag_enc(g > 1 ? (int64_t)v / (int64_t)g : (int64_t)v);
}

/* uns: mode 2 (no value negative: v / g as is, not zigzag — the sign bit a
 * column of time_nanos offsets or of counter deltas never uses costs a bit
 * per value in the top plane) */
static int put_planes(pd_buf *out, const uint64_t *v, size_t n, bool uns)
{
    uint64_t g = 0, all = 0;
    for (size_t i = 0; i < n && g != 1; i++) {
        uint64_t a = v[i] >> 63 ? 0 - v[i] : v[i];
        while (a) {
            uint64_t t = g % a;
            g = a;
            a = t;
        }
    }
    for (size_t i = 0; i < n; i++)
        all |= col_z(v[i], g, uns);
    size_t B = 0;
    while (B < 64 && all >> B)
        B++;
    size_t full = B ? (B - 1) / 8 : 0, k = B - 8 * full; /* planes before the top one */
    int rc = pd_buf_put_varint(out, g);
    if (rc || (rc = pd_buf_put_varint(out, B)) ||
        (rc = pd_buf_reserve(out, full * n + (k * n + 7) / 8)))
        return rc;
    uint8_t *o = (uint8_t *)out->data + out->len;
    for (size_t b = 0; b < full; b++)
        for (size_t i = 0; i < n; i++)
            *o++ = (uint8_t)(col_z(v[i], g, uns) >> (8 * b));
    size_t top = (k * n + 7) / 8;
    memset(o, 0, top);
    for (size_t i = 0, bit = 0; k && i < n; i++, bit += k) {
        uint64_t t = col_z(v[i], g, uns) >> (8 * full); /* < 2^k */
        for (size_t j = 0; j < k; j++)
            o[(bit + j) / 8] |= (uint8_t)(((t >> j) & 1) << ((bit + j) % 8));
    }
    out->len += full * n + top;
    return 0;
}

/* Largest zigzag value written as exp-Golomb (its code then fits 2 x 64 bits). */
#define EG_MAX ((uint64_t)1 << 56)

/* v[0..n) (signed) as exp-Golomb codes of order k of zigzag(v), MSB first:
 * x = z + 2^k has b bits; b - 1 - k zero bits, then x's b bits. The cheaper
 * k is chosen (written first). For a column of small values with a peaked
 * distribution — the scrape jitter in a ts delta-of-delta (~5.6 bits of
 * entropy; a byte plane and zstd took ~9.5) — it takes ~6.3 bits. */
static int put_golomb(pd_buf *out, const uint64_t *v, size_t n)
{
    size_t best = 0;
    uint64_t best_bits = UINT64_MAX;
    for (size_t k = 0; k < 16; k++) {
        uint64_t bits = 0;
        for (size_t i = 0; i < n; i++) {
            uint64_t x = pd_zigzag_enc((int64_t)v[i]) + ((uint64_t)1 << k), w = 0;
            while (x >> w)
                w++;
            bits += 2 * w - 1 - k;
        }
        if (bits < best_bits)
            best_bits = bits, best = k;
    }
    int rc = pd_buf_put_varint(out, best);
    size_t len = (size_t)((best_bits + 7) / 8);
    if (rc || (rc = pd_buf_reserve(out, len)))
        return rc;
    uint8_t *o = (uint8_t *)out->data + out->len;
    memset(o, 0, len);
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t x = pd_zigzag_enc((int64_t)v[i]) + ((uint64_t)1 << best), w = 0;
        while (x >> w)
            w++;
        at += w - 1 - best; /* the zeros */
        for (uint64_t j = w; j-- > 0; at++)
            o[at / 8] |= (uint8_t)(((x >> j) & 1) << (7 - at % 8));
    }
    out->len += len;
    return 0;
}

/* A column: a varint mode, then 0: put_planes, 1: put_golomb, 2: put_planes
 * unsigned. Exp-Golomb is taken when asked (golomb) and every zigzag value is
 * below EG_MAX; else planes, unsigned when no value is negative. */
static int put_column(pd_buf *out, const uint64_t *v, size_t n, bool golomb)
{
    bool uns = true;
    for (size_t i = 0; i < n; i++) {
        if (pd_zigzag_enc((int64_t)v[i]) >= EG_MAX)
            golomb = false;
        if (v[i] >> 63)
            uns = false;
    }
    int rc = pd_buf_put_varint(out, golomb ? 1 : uns ? 2 : 0);
    if (rc)
        return rc;
    return golomb ? put_golomb(out, v, n) : put_planes(out, v, n, uns);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

int pd__tchunk_encode(const pd_dprof *const *d, size_t n, const uint32_t *g_first,
                      const uint64_t *g_off, size_t n_group, pd_buf *out)
{
    int rc = 0;
    uint64_t *col = NULL; /* one column */
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
    size_t n_tot = 0, max_k = 0;
    for (size_t i = 0; i < n; i++) {
        n_tot += d[i]->n_types;
        if (d[i]->n_types > max_k)
            max_k = d[i]->n_types;
    }
    /* columns (versions 3-4): zstd finds each column's regularity (a
       regular scrape interval, one sample-type set, totals that move alike)
       where interleaved rows broke its matches every few bytes. ts (version
       4): each interval minus the median interval D. A scraper on a fixed
       schedule (ts_i = t0 + i x D + jitter_i) leaves jitter_i - jitter_i-1:
       the delta-of-delta of version 3 was jitter_i - 2 jitter_i-1 +
       jitter_i-2, of 3 times the variance (~0.8 bit more per profile). */
    if (!(col = malloc((n_tot + n + 1) * sizeof *col))) {
        rc = PD_ENOMEM;
        goto out;
    }
    if (n > 0)
        PUTZ(d[0]->ts);
    if (n > 1) {
        int64_t *dl = (int64_t *)col, D;
        for (size_t i = 1; i < n; i++)
            dl[i - 1] = (int64_t)((uint64_t)d[i]->ts - (uint64_t)d[i - 1]->ts);
        qsort(dl, n - 1, sizeof *dl, cmp_i64);
        D = dl[(n - 2) / 2];
        PUTZ((uint64_t)D);
        for (size_t i = 1; i < n; i++)
            col[i - 1] = (uint64_t)d[i]->ts - (uint64_t)d[i - 1]->ts - (uint64_t)D;
        if ((rc = put_column(out, col, n - 1, true)))
            goto out;
    }
    for (size_t i = 0; i < n; i++)
        PUT(tset[i]);
    /* totals, type by type (all profiles' first type, then their second...),
       and time_nanos: zigzag values in byte planes (put_planes) */
    for (size_t t = 0; t < max_k; t++) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            bool same = i && tset[i] == tset[i - 1];
            if (t < d[i]->n_types)
                col[m++] = (uint64_t)d[i]->totals[t] - (uint64_t)(same ? d[i - 1]->totals[t] : 0);
        }
        if ((rc = put_column(out, col, m, false)))
            goto out;
    }
    for (size_t i = 0; i < n; i++)
        col[i] = (uint64_t)d[i]->time_nanos - (uint64_t)d[i]->ts * 1000000u;
    if ((rc = put_column(out, col, n, false)))
        goto out;
    PUT(n_group);
    for (size_t g = 0; g < n_group; g++) {
        PUT(g_first[g + 1] - g_first[g]);
        PUT(g_off[g] - (g ? g_off[g - 1] : 0));
    }
out:
    free(tset);
    free(rep);
    free(col);
    return rc;
}

void pd__tchunk_release(pd_tchunk *t)
{
    free(t->ts);
    free(t->time_nanos);
    free(t->tset);
    free(t->tot_off);
    free(t->totals);
    free(t->tset_off);
    free(t->tset_str);
    free(t->g_first);
    free(t->g_off);
    memset(t, 0, sizeof *t);
}

/* One profile's totals (m of them) at t->tot_off[i], as deltas from the
 * previous profile's when it has the same sample-type set. */
static int tchunk_totals(rd *r, pd_tchunk *t, size_t i, size_t *tot_cap)
{
    size_t m = (size_t)(t->tset_off[t->tset[i] + 1] - t->tset_off[t->tset[i]]);
    t->tot_off[i + 1] = t->tot_off[i] + m;
    if (t->tot_off[i + 1] > *tot_cap) {
        *tot_cap = 2 * t->tot_off[i + 1] + 16;
        int64_t *nt = realloc(t->totals, *tot_cap * sizeof *nt);
        if (!nt)
            return PD_ENOMEM;
        t->totals = nt;
    }
    bool same = i && t->tset[i] == t->tset[i - 1];
    for (size_t x = 0; x < m; x++) {
        int64_t base = same ? t->totals[t->tot_off[i - 1] + x] : 0;
        t->totals[t->tot_off[i] + x] = (int64_t)((uint64_t)getz(r, "total") + (uint64_t)base);
    }
    return 0;
}

/* Reads n values written by put_planes into v (as uint64: two's complement). */
static void get_planes(rd *r, uint64_t *v, size_t n, const char *what, bool uns)
{
    size_t at = r->off;
    uint64_t g = get(r, what), B = get(r, what);
    size_t full = B ? (size_t)(B - 1) / 8 : 0, k = (size_t)B - 8 * full;
    if (!r->bad && (B > 64 || (n && (full > (r->len - r->off) / n ||
                                     (k * n + 7) / 8 > r->len - r->off - full * n))))
        r->bad = pd_err_set(r->err, PD_ECORRUPT,
                            "%s payload offset %zu: %s: %llu bits "
                            "of %zu values",
                            r->what, at, what, (unsigned long long)B, n);
    if (r->bad)
        return;
    memset(v, 0, n * sizeof *v);
    for (size_t b = 0; b < full; b++)
        for (size_t i = 0; i < n; i++)
            v[i] |= (uint64_t)r->p[r->off++] << (8 * b);
    const uint8_t *o = r->p + r->off;
    for (size_t i = 0, bit = 0; k && i < n; i++, bit += k)
        for (size_t j = 0; j < k; j++)
            v[i] |= (uint64_t)((o[(bit + j) / 8] >> ((bit + j) % 8)) & 1) << (8 * full + j);
    r->off += (k * n + 7) / 8;
    for (size_t i = 0; i < n; i++) /* wraps like the writer's division undone */
        v[i] = (uns ? v[i] : (uint64_t)pd_zigzag_dec(v[i])) * (g > 1 ? g : 1);
}

/* Reads n values written by put_golomb into v. */
static void get_golomb(rd *r, uint64_t *v, size_t n, const char *what)
{
    size_t at0 = r->off;
    uint64_t k = get(r, what);
    if (!r->bad && k >= 16)
        r->bad = pd_err_set(r->err, PD_ECORRUPT,
                            "%s payload offset %zu: %s: exp-Golomb order "
                            "%llu",
                            r->what, at0, what, (unsigned long long)k);
    if (r->bad)
        return;
    const uint8_t *o = r->p + r->off;
    uint64_t nbits = (uint64_t)(r->len - r->off) * 8, at = 0;
#define BIT() ((o[at / 8] >> (7 - at % 8)) & 1)
    for (size_t i = 0; i < n; i++) {
        uint64_t zeros = 0;
        while (at < nbits && !BIT() && zeros <= 56)
            at++, zeros++;
        uint64_t w = zeros + 1 + k;
        if (w > 57 || nbits - at < w) {
            r->bad = pd_err_set(r->err, PD_ECORRUPT,
                                "%s payload offset %zu: %s: bad "
                                "exp-Golomb code %zu",
                                r->what, r->off + (size_t)(at / 8), what, i);
            return;
        }
        uint64_t x = 0;
        for (uint64_t j = 0; j < w; j++, at++)
            x = (x << 1) | BIT();
        v[i] = (uint64_t)pd_zigzag_dec(x - ((uint64_t)1 << k));
    }
#undef BIT
    r->off += (size_t)((at + 7) / 8);
}

/* Reads a column (put_column) of n values into v. */
static void get_column(rd *r, uint64_t *v, size_t n, const char *what, int version)
{
    size_t at = r->off;
    uint64_t mode = get(r, what);
    if (!r->bad && mode > (version >= 4 ? 2u : 1u))
        r->bad = pd_err_set(r->err, PD_ECORRUPT, "%s payload offset %zu: %s: column mode %llu",
                            r->what, at, what, (unsigned long long)mode);
    if (r->bad)
        return;
    if (mode == 1)
        get_golomb(r, v, n, what);
    else
        get_planes(r, v, n, what, mode == 2);
}

/* Versions 3-4: the totals (type by type, as deltas from the previous profile's
 * of the same sample-type set) and time_nanos columns, after the set column.
 * PD_ENOMEM (r->bad on a corrupt payload). */
static int tchunk_columns(rd *r, pd_tchunk *t, int version)
{
    size_t max_k = 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t k = (size_t)(t->tset_off[t->tset[i] + 1] - t->tset_off[t->tset[i]]);
        t->tot_off[i + 1] = t->tot_off[i] + k;
        if (k > max_k)
            max_k = k;
    }
    size_t m = (size_t)t->tot_off[t->n];
    uint64_t *col = malloc((m > t->n ? m : t->n) * sizeof *col + 1);
    if (!col || !(t->totals = malloc((m + 1) * sizeof *t->totals))) {
        free(col);
        return PD_ENOMEM;
    }
    for (size_t tt = 0; !r->bad && tt < max_k; tt++) {
        size_t mt = 0, j = 0; /* the profiles with a type tt */
        for (size_t i = 0; i < t->n; i++)
            mt += t->tot_off[i] + tt < t->tot_off[i + 1];
        get_column(r, col, mt, "totals", version);
        for (size_t i = 0; !r->bad && i < t->n; i++) {
            if (t->tot_off[i] + tt >= t->tot_off[i + 1])
                continue;
            bool same = i && t->tset[i] == t->tset[i - 1];
            int64_t base = same ? t->totals[t->tot_off[i - 1] + tt] : 0;
            t->totals[t->tot_off[i] + tt] = (int64_t)(col[j++] + (uint64_t)base);
        }
    }
    get_column(r, col, t->n, "time", version);
    for (size_t i = 0; !r->bad && i < t->n; i++)
        t->time_nanos[i] = (int64_t)(col[i] + (uint64_t)t->ts[i] * 1000000u);
    free(col);
    return 0;
}

int pd__tchunk_decode(const uint8_t *p, size_t len, size_t n_str, int version, pd_tchunk *t,
                      pd_err *err)
{
    rd r = {p, len, 0, err, 0, "time chunk"};
    memset(t, 0, sizeof *t);
    size_t tot_cap = 0, str_cap = 0;
    uint64_t *dod = NULL; /* the ts column: version 3 delta-of-delta, 4 interval - D */
    t->n = getn(&r, 2, SIZE_MAX / 16, "profiles");
    t->n_tset = getn(&r, 1, SIZE_MAX / 16, "sample type sets");
    if (r.bad)
        goto fail;
    if (!(t->ts = malloc((t->n + 1) * sizeof *t->ts)) ||
        !(t->tset = malloc((t->n + 1) * sizeof *t->tset)) ||
        !(t->tot_off = calloc(t->n + 1, sizeof *t->tot_off)) ||
        !(t->tset_off = calloc(t->n_tset + 1, sizeof *t->tset_off)) ||
        (version >= 3 && !(t->time_nanos = malloc((t->n + 1) * sizeof *t->time_nanos))))
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
    /* version 2: rows (ts, tset, totals); version 3: a column of each, then
       time_nanos */
    if (version >= 3) {
        if (!(dod = malloc(t->n * sizeof *dod)))
            goto nomem;
        t->ts[0] = getz(&r, "timestamp");
        int64_t delta = t->n > 1 ? getz(&r, "timestamp") : 0, D = delta; /* v4: D */
        size_t nc = version >= 4 ? t->n - 1 : t->n - 2;
        if (t->n > 2 || (version >= 4 && t->n > 1))
            get_column(&r, dod, nc, "timestamps", version);
        for (size_t i = 1; i < t->n && !r.bad; i++) {
            if (version >= 4)
                delta = (int64_t)((uint64_t)D + dod[i - 1]);
            else if (i > 1)
                delta = (int64_t)((uint64_t)delta + dod[i - 2]);
            t->ts[i] = (int64_t)((uint64_t)t->ts[i - 1] + (uint64_t)delta);
            if (t->ts[i] <= t->ts[i - 1])
                r.bad =
                    pd_err_set(err, PD_ECORRUPT,
                               "time chunk payload offset %zu: timestamps not ascending", r.off);
        }
    }
    int64_t pts = 0, pdelta = 0;
    for (size_t i = 0; version < 3 && i < t->n && !r.bad; i++) {
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
        if (!r.bad && tchunk_totals(&r, t, i, &tot_cap))
            goto nomem;
    }
    for (size_t i = 0; version >= 3 && i < t->n && !r.bad; i++)
        t->tset[i] = getref(&r, t->n_tset, "sample type set");
    if (version >= 3 && !r.bad && tchunk_columns(&r, t, version))
        goto nomem;
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
        r.bad =
            pd_err_set(err, PD_ECORRUPT, "time chunk payload offset %zu: trailing bytes", r.off);
    if (r.bad)
        goto fail;
    free(dod);
    return 0;
nomem:
    free(dod);
    pd__tchunk_release(t);
    return pd_err_set(err, PD_ENOMEM, "out of memory decoding a time chunk");
fail:
    free(dod);
    pd__tchunk_release(t);
    return r.bad;
}
