/*
 * storage/clickhouse/ch_read_hdr.c — the header side of the ClickHouse
 * querier (ch_read_int.h): a read folds its profiles' headers into one part
 * per sample-type set under pprof's rules (profile.Merge, as
 * tsdb/aggregate.c: time_nanos the earliest non-zero, period the largest,
 * duration_nanos summed, comments unique in order, default_sample_type and
 * doc_url the first non-empty), from profiles rows or, for a merge, from
 * per-bucket summaries. The sums, stacks and the building of the answer
 * are in ch_read.c.
 *
 * A merge folds every profile's header (fold_hdr). Instead of one
 * profiles row per profile, ClickHouse answers one summary per (sample
 * types, series, 10-minute bucket): count and sum of the write_ids' hashes
 * (the bucket's reconciliation numbers, ch_agg.h), min and max ts, min
 * time_nanos, max period, summed duration_nanos, the invariant fields of
 * any of its rows and how many distinct sets of them it holds. pprof's
 * fold is order-free — min, max, sum — when no period or time_nanos is 0
 * and the invariant fields (types, units, period type, comments,
 * drop/keep frames, default sample type, doc URL) are one and the same
 * across the profiles; a sample-type set whose summaries are not all so
 * is folded from its rows, in time order, as before (a second query). The
 * parts are then ordered by their first profile (ts, fingerprint), as the
 * rows' fold creates them.
 */
#include <stdlib.h>
#include <string.h>

#include "base/metrics.h"
#include "storage/clickhouse/ch_agg.h"
#include "storage/clickhouse/ch_cache.h"
#include "storage/clickhouse/ch_int.h"
#include "storage/clickhouse/ch_read_int.h"

ch_part *pd__ch_find_part(ch_parts *g, uint64_t th)
{
    for (size_t i = 0; i < g->n_parts; i++)
        if (g->parts[i].types_hash == th)
            return &g->parts[i];
    return NULL;
}

/* A profile header as the headers query answers it (one profiles row,
 * or a bucket's summary: period max, time_nanos min, duration_nanos summed
 * and the invariant fields of any of its rows). Strings in the ch_parts' arena. */
typedef struct hdr {
    char **types, **units; /* n_types */
    size_t n_types;
    char *pt, *pu;
    int64_t period, tn, dn;
    char **cm; /* n_cm */
    size_t n_cm;
    char *drop, *keep, *dst, *doc;
} hdr;

/* Reads the fields of a header types_hash determines (sample_types,
 * sample_units, period_type, period_unit: pd__ch_types_hash hashes them)
 * from r. 0, 1 (malformed), PD_ENOMEM. */
static int read_hdr_set(ch_parts *g, ch_rd *r, hdr *h, pd_err *err)
{
    uint64_t nt = pd__ch_rd_varint(r);
    if (r->bad || nt > r->len)
        return 1;
    h->types = pd_arena_calloc(&g->a, nt + 1, sizeof *h->types);
    h->units = pd_arena_calloc(&g->a, nt + 1, sizeof *h->units);
    if (!h->types || !h->units)
        return pd__ch_nomem(err);
    h->n_types = nt;
    for (size_t i = 0; i < nt; i++)
        h->types[i] = pd__ch_rd_arena_str(r, &g->a);
    if (pd__ch_rd_varint(r) != nt)
        return 1;
    for (size_t i = 0; i < nt; i++)
        h->units[i] = pd__ch_rd_arena_str(r, &g->a);
    h->pt = pd__ch_rd_arena_str(r, &g->a);
    h->pu = pd__ch_rd_arena_str(r, &g->a);
    if (r->bad)
        return 1;
    for (size_t i = 0; i < nt; i++)
        if (!h->types[i] || !h->units[i])
            return pd__ch_nomem(err);
    return h->pt && h->pu ? 0 : pd__ch_nomem(err);
}

/* Reads the rest of a header (period, time_nanos, duration_nanos,
 * comments, drop_frames, keep_frames, default_sample_type, doc_url) from
 * r. 0, 1 (malformed), PD_ENOMEM. */
static int read_hdr_rest(ch_parts *g, ch_rd *r, hdr *h, pd_err *err)
{
    h->period = (int64_t)pd__ch_rd_u64(r);
    h->tn = (int64_t)pd__ch_rd_u64(r);
    h->dn = (int64_t)pd__ch_rd_u64(r);
    uint64_t nc = pd__ch_rd_varint(r);
    if (r->bad || nc > r->len)
        return 1;
    h->cm = pd_arena_calloc(&g->a, nc + 1, sizeof *h->cm);
    if (!h->cm)
        return pd__ch_nomem(err);
    h->n_cm = nc;
    for (size_t i = 0; i < nc; i++)
        h->cm[i] = pd__ch_rd_arena_str(r, &g->a);
    h->drop = pd__ch_rd_arena_str(r, &g->a);
    h->keep = pd__ch_rd_arena_str(r, &g->a);
    h->dst = pd__ch_rd_arena_str(r, &g->a);
    h->doc = pd__ch_rd_arena_str(r, &g->a);
    if (r->bad)
        return 1;
    for (size_t i = 0; i < nc; i++)
        if (!h->cm[i])
            return pd__ch_nomem(err);
    if (!h->drop || !h->keep || !h->dst || !h->doc)
        return pd__ch_nomem(err);
    return 0;
}

/* Reads a whole header (read_hdr_set's fields, then read_hdr_rest's) from
 * r. 0, 1 (malformed), PD_ENOMEM. */
static int read_hdr(ch_parts *g, ch_rd *r, hdr *h, pd_err *err)
{
    int rc = read_hdr_set(g, r, h, err);
    return rc ? rc : read_hdr_rest(g, r, h, err);
}

/* Whether a and b have the same invariant fields besides those their
 * types_hash determines (comments, drop/keep frames, default sample type,
 * doc URL). */
static bool same_invariants(const hdr *a, const hdr *b)
{
    if (a->n_cm != b->n_cm || strcmp(a->drop, b->drop) || strcmp(a->keep, b->keep) ||
        strcmp(a->dst, b->dst) || strcmp(a->doc, b->doc))
        return false;
    for (size_t i = 0; i < a->n_cm; i++)
        if (strcmp(a->cm[i], b->cm[i]))
            return false;
    return true;
}

/* Folds n profiles of series fp with sample-type set th, times [t0, t1]
 * (ms), header h, into their part (new or folded) under pprof's header
 * rules (profile.Merge, as tsdb/aggregate.c). n = 1: one profiles row, in
 * (ts, fingerprint) order; n > 1: a bucket's summary (hsum), whose
 * headers are uniform and hold no zero period or time_nanos — the rules
 * are then min, max and sum, whatever the order. */
static int fold_hdr(ch_parts *g, uint64_t th, uint64_t fp, int64_t t0, int64_t t1, uint64_t n,
                    const hdr *h, const pd_u64map *ref_idx, pd_err *err)
{
    uint64_t ri = 0;
    (void)pd_u64map_get(ref_idx, fp, &ri);
    ch_part *p = pd__ch_find_part(g, th);
    if (!p) {
        ch_part *v = realloc(g->parts, (g->n_parts + 1) * sizeof *v);
        if (!v)
            return pd__ch_nomem(err);
        g->parts = v;
        p = &g->parts[g->n_parts++];
        memset(p, 0, sizeof *p);
        pd_u64map_init(&p->fps);
        pd_u64map_init(&p->at);
        p->types_hash = th;
        p->types = h->types;
        p->units = h->units;
        p->n_types = h->n_types;
        p->period_type = h->pt;
        p->period_unit = h->pu;
        p->period = h->period;
        p->time_nanos = h->tn;
        p->duration_nanos = h->dn;
        p->drop = h->drop;
        p->keep = h->keep;
        p->dst = h->dst;
        p->doc = h->doc;
        p->comments = pd_arena_calloc(&g->a, 64, sizeof *p->comments);
        if (!p->comments)
            return pd__ch_nomem(err);
        p->info.min_ts = t0;
        p->info.max_ts = t1;
        p->first_ref = (size_t)ri;
        p->first_fp = fp;
    } else {
        if (p->time_nanos == 0 || h->tn < p->time_nanos)
            p->time_nanos = h->tn;
        if (p->period == 0 || p->period < h->period)
            p->period = h->period;
        p->duration_nanos = (int64_t)((uint64_t)p->duration_nanos + (uint64_t)h->dn);
        if (!p->dst[0])
            p->dst = h->dst;
        if (!p->doc[0])
            p->doc = h->doc;
        if (t0 < p->info.min_ts || (t0 == p->info.min_ts && fp < p->first_fp)) {
            p->info.min_ts = t0;
            p->first_fp = fp;
        }
        if (t1 > p->info.max_ts)
            p->info.max_ts = t1;
        if (ri < p->first_ref)
            p->first_ref = (size_t)ri;
    }
    for (size_t i = 0; i < h->n_cm; i++) {
        bool seen = false;
        for (size_t j = 0; j < p->n_comments && !seen; j++)
            seen = strcmp(p->comments[j], h->cm[i]) == 0;
        if (seen)
            continue;
        if (p->n_comments >= 64 && (p->n_comments & (p->n_comments - 1)) == 0) {
            char **x = pd_arena_calloc(&g->a, 2 * p->n_comments, sizeof *x);
            if (!x)
                return pd__ch_nomem(err);
            memcpy(x, p->comments, p->n_comments * sizeof *x);
            p->comments = x;
        }
        p->comments[p->n_comments++] = h->cm[i];
    }
    p->info.n_profiles += n;
    if (!pd_u64map_get(&p->fps, fp, NULL)) {
        if (pd_u64map_put(&p->fps, fp, 1) < 0)
            return pd__ch_nomem(err);
        p->info.n_series++;
    }
    return 0;
}

/* Reads one profiles row of a headers query (types_hash, fingerprint, ts,
 * the header) into its part. 0, 1 (malformed), PD_ENOMEM. */
int pd__ch_fold_row(ch_parts *g, ch_rd *r, const pd_u64map *ref_idx, pd_err *err)
{
    uint64_t th = pd__ch_rd_u64(r), fp = pd__ch_rd_u64(r);
    int64_t ts = (int64_t)pd__ch_rd_u64(r);
    hdr h;
    int rc = r->bad ? 1 : read_hdr(g, r, &h, err);
    if (rc != 0)
        return rc;
    return fold_hdr(g, th, fp, ts, ts, 1, &h, ref_idx, err);
}

/* " fingerprint IN (a,b,c) AND day ... AND ts ..." */
int pd__ch_put_fp_range(pd_buf *b, const uint64_t *fps, size_t n, int64_t mint, int64_t maxt)
{
    int rc = pd_buf_putc(b, ' ');
    rc = rc ? rc : pd__ch_put_fp_in(b, fps, n);
    rc = rc ? rc : pd_buf_puts(b, " AND");
    return rc ? rc : pd__ch_put_range(b, mint, maxt);
}

typedef struct hsum {
    uint64_t th, fp, n, wsum, n_zero, n_distinct;
    int64_t bucket, t0, t1;
    hdr h;
} hsum;

static int cmp_part_first(const void *a, const void *b)
{
    const ch_part *x = a, *y = b;
    if (x->info.min_ts != y->info.min_ts)
        return x->info.min_ts < y->info.min_ts ? -1 : 1;
    return x->first_fp < y->first_fp ? -1 : x->first_fp > y->first_fp;
}

/* The fields types_hash determines (read_hdr_set's) of each summed set —
 * every key of rep (types_hash -> index into v of its first summary) not
 * in bad — read from one profiles row of it (the first of its first
 * summary: a point read by key) and copied into all of v's summaries of
 * it; a set whose row is gone meanwhile is added to bad (*n_bad). 0 or an
 * error (set). */
static int fill_sets(ch_parts *g, hsum *v, size_t nv, const pd_u64map *rep, pd_u64map *bad,
                     size_t *n_bad, int64_t mint, int64_t maxt, pd_err *err)
{
    pd_ch *c = g->c;
    pd_buf sql, resp;
    pd_buf_init(&sql, 0);
    pd_buf_init(&resp, CH_MAX_ANSWER);
    pd_u64map at;
    pd_u64map_init(&at);
    uint64_t *fps = malloc((rep->len ? rep->len : 1) * sizeof *fps);
    uint64_t *ks = malloc((rep->len ? rep->len : 1) * sizeof *ks);
    hdr *sets = calloc(rep->len ? rep->len : 1, sizeof *sets);
    size_t n = 0, n_sets = 0, n_ask = 0;
    int rc = fps && ks && sets ? 0 : PD_ENOMEM;
    /* each set once: from the cache (its types_hash names it), else asked
       of one of its profiles (v[k], its representative) */
    for (size_t i = 0; rc == 0 && i < rep->cap; i++) {
        uint64_t th = rep->kv[2 * i], k;
        if (th == UINT64_MAX || !pd_u64map_get(rep, th, &k) || pd_u64map_get(bad, th, NULL))
            continue;
        n++;
        if (!pd__ch_cache_get(c->cache, CH_CACHE_ROWS, th ^ CH_TYPES_KEY, &resp, NULL)) {
            ks[n_ask] = k;
            fps[n_ask++] = v[k].fp;
        }
    }
    if (rc == 0 && n == 0)
        goto out;
    rc = rc ? rc
            : pd_buf_printf(&sql,
                            "SELECT types_hash, sample_types, sample_units, period_type, "
                            "period_unit FROM %s WHERE",
                            pd__ch_profiles_read(g->c));
    rc = rc ? rc : pd__ch_put_fp_range(&sql, fps, n_ask, mint, maxt);
    rc = rc ? rc : pd_buf_puts(&sql, " AND (fingerprint, ts) IN (");
    for (size_t i = 0; rc == 0 && i < n_ask; i++)
        rc = pd_buf_printf(&sql, "%s(%llu,%lld)", i ? "," : "", (unsigned long long)v[ks[i]].fp,
                           (long long)v[ks[i]].t0);
    rc = rc ? rc : pd_buf_puts(&sql, ") LIMIT 1 BY types_hash FORMAT RowBinary");
    if (rc < 0) {
        rc = pd__ch_nomem(err);
        goto out;
    }
    size_t from = resp.len;
    if (n_ask && (rc = pd__ch_query(c, &sql, &resp, err)) < 0)
        goto out;
    ch_rd r = {(const uint8_t *)resp.data, resp.len, 0, false};
    while (pd__ch_rd_more(&r)) {
        /* a set once (LIMIT BY runs per shard on a cluster), and only a
           set asked for */
        size_t row = r.pos;
        uint64_t th = pd__ch_rd_u64(&r);
        bool keep = !r.bad && n_sets < rep->len && pd_u64map_get(rep, th, NULL) &&
                    !pd_u64map_get(&at, th, NULL);
        hdr skip;
        rc = r.bad ? 1 : read_hdr_set(g, &r, keep ? &sets[n_sets] : &skip, err);
        if (rc < 0)
            goto out;
        if (rc > 0) {
            rc = pd__ch_bad_answer(c, err, "the profiles' sample types");
            goto out;
        }
        if (keep && pd_u64map_put(&at, th, n_sets++) < 0) {
            rc = pd__ch_nomem(err);
            goto out;
        }
        if (keep && row >= from)
            pd__ch_cache_put(c->cache, CH_CACHE_ROWS, th ^ CH_TYPES_KEY, resp.data + row,
                             r.pos - row);
    }
    for (size_t i = 0; i < nv; i++) {
        uint64_t k;
        if (pd_u64map_get(bad, v[i].th, NULL))
            continue;
        if (!pd_u64map_get(&at, v[i].th, &k)) { /* gone meanwhile: its rows, if any */
            if (pd_u64map_put(bad, v[i].th, 1) < 0) {
                rc = pd__ch_nomem(err);
                goto out;
            }
            (*n_bad)++;
            continue;
        }
        v[i].h.types = sets[k].types;
        v[i].h.units = sets[k].units;
        v[i].h.n_types = sets[k].n_types;
        v[i].h.pt = sets[k].pt;
        v[i].h.pu = sets[k].pu;
    }
    rc = 0;
out:
    if (rc == PD_ENOMEM)
        rc = pd__ch_nomem(err);
    free(fps);
    free(ks);
    free(sets);
    pd_u64map_release(&at);
    pd_buf_release(&sql);
    pd_buf_release(&resp);
    return rc;
}

/* Folds the headers of the profiles of series fps[0..n) in [mint, maxt]
 * into g's parts (summaries where exact, else rows) and counts them in H's
 * buckets (NULL: none). 0 or an error (set). */
int pd__ch_fold_headers(ch_parts *g, const uint64_t *fps, size_t n, const pd_u64map *ref_idx,
                        int64_t mint, int64_t maxt, ch_buckets *H, pd_err *err)
{
    pd_ch *c = g->c;
    pd_buf sql, resp;
    pd_buf_init(&sql, 0);
    pd_buf_init(&resp, CH_MAX_ANSWER);
    pd_u64map rep, bad;
    pd_u64map_init(&rep);
    pd_u64map_init(&bad);
    hsum *v = NULL;
    size_t nv = 0, cap = 0, n_bad = 0;
    uint64_t from_rows = 0, from_sums = 0;
    int rc = pd_buf_printf(&sql,
                           "SELECT types_hash, fingerprint, toInt64(intDiv(ts, %lld)) AS b, "
                           "count(), sum(",
                           (long long)PD_CH_AGG_BUCKET_MS);
    rc = rc ? rc
            : pd_buf_printf(&sql,
                            PD_CH_WID_HASH_SQL
                            "), min(ts), max(ts), countIf(time_nanos = 0 OR period = 0), "
                            "uniqExact(comments, drop_frames, keep_frames, "
                            "default_sample_type, doc_url), max(period), min(time_nanos), "
                            "sum(duration_nanos), "
                            "any(comments), any(drop_frames), any(keep_frames), "
                            "any(default_sample_type), any(doc_url) FROM %s WHERE",
                            pd__ch_profiles_read(c));
    rc = rc ? rc : pd__ch_put_fp_range(&sql, fps, n, mint, maxt);
    rc = rc ? rc : pd_buf_puts(&sql, " GROUP BY types_hash, fingerprint, b FORMAT RowBinary");
    if ((rc = pd__ch_query_built(c, rc, &sql, &resp, err)) < 0)
        goto out;
    ch_rd r = {(const uint8_t *)resp.data, resp.len, 0, false};
    while (pd__ch_rd_more(&r)) {
        if (nv == cap) {
            size_t nc = cap ? 2 * cap : 256;
            hsum *x = realloc(v, nc * sizeof *x);
            if (!x) {
                rc = pd__ch_nomem(err);
                goto out;
            }
            v = x;
            cap = nc;
        }
        hsum *s = &v[nv];
        s->th = pd__ch_rd_u64(&r);
        s->fp = pd__ch_rd_u64(&r);
        s->bucket = (int64_t)pd__ch_rd_u64(&r);
        s->n = pd__ch_rd_u64(&r);
        s->wsum = pd__ch_rd_u64(&r);
        s->t0 = (int64_t)pd__ch_rd_u64(&r);
        s->t1 = (int64_t)pd__ch_rd_u64(&r);
        s->n_zero = pd__ch_rd_u64(&r);
        s->n_distinct = pd__ch_rd_u64(&r);
        rc = r.bad ? 1 : read_hdr_rest(g, &r, &s->h, err);
        if (rc < 0)
            goto out;
        if (rc > 0 || s->n == 0 || s->t0 > s->t1) {
            rc = pd__ch_bad_answer(c, err, "the profiles' header summaries");
            goto out;
        }
        nv++;
        if (H && (rc = pd__ch_buckets_add_sum(H, s->fp, s->t0, s->n, s->wsum)) < 0) {
            rc = pd__ch_nomem(err);
            goto out;
        }
        /* exact when its rows are uniform, with no zero period or
           time_nanos, and its invariants are those of its set's others */
        uint64_t at;
        bool ok = s->n_zero == 0 && s->n_distinct == 1;
        if (ok && pd_u64map_get(&rep, s->th, &at))
            ok = same_invariants(&v[at].h, &s->h);
        else if (ok && pd_u64map_put(&rep, s->th, nv - 1) < 0)
            rc = pd__ch_nomem(err);
        if (!ok && !pd_u64map_get(&bad, s->th, NULL)) {
            if (pd_u64map_put(&bad, s->th, 1) < 0)
                rc = pd__ch_nomem(err);
            n_bad++;
        }
        if (rc < 0)
            goto out;
    }
    if ((rc = fill_sets(g, v, nv, &rep, &bad, &n_bad, mint, maxt, err)) < 0)
        goto out;
    for (size_t i = 0; i < nv; i++) {
        if (pd_u64map_get(&bad, v[i].th, NULL))
            continue;
        if ((rc = fold_hdr(g, v[i].th, v[i].fp, v[i].t0, v[i].t1, v[i].n, &v[i].h, ref_idx, err)) <
            0)
            goto out;
        from_sums += v[i].n;
    }
    if (n_bad) { /* the sets not summed exactly: their rows, in time order */
        pd_buf_reset(&sql);
        pd_buf_reset(&resp);
        rc = pd_buf_printf(&sql,
                           "SELECT types_hash, fingerprint, ts, sample_types, sample_units, "
                           "period_type, period_unit, period, time_nanos, duration_nanos, "
                           "comments, drop_frames, keep_frames, default_sample_type, doc_url "
                           "FROM %s WHERE",
                           pd__ch_profiles_read(c));
        rc = rc ? rc : pd__ch_put_fp_range(&sql, fps, n, mint, maxt);
        rc = rc ? rc : pd_buf_puts(&sql, " AND types_hash IN (");
        bool first = true;
        for (size_t i = 0; rc == 0 && i < bad.cap; i++) {
            uint64_t key = bad.kv[2 * i];
            if (key == UINT64_MAX || !pd_u64map_get(&bad, key, NULL))
                continue;
            rc = pd_buf_printf(&sql, "%s%llu", first ? "" : ",", (unsigned long long)key);
            first = false;
        }
        rc = rc ? rc : pd_buf_puts(&sql, ") ORDER BY ts, fingerprint FORMAT RowBinary");
        if ((rc = pd__ch_query_built(c, rc, &sql, &resp, err)) < 0)
            goto out;
        ch_rd q = {(const uint8_t *)resp.data, resp.len, 0, false};
        while (pd__ch_rd_more(&q)) {
            rc = pd__ch_fold_row(g, &q, ref_idx, err);
            if (rc < 0)
                goto out;
            if (rc > 0 || q.bad) {
                rc = pd__ch_bad_answer(c, err, "the profiles' headers");
                goto out;
            }
            from_rows++;
        }
    }
    if (g->n_parts > 1)
        qsort(g->parts, g->n_parts, sizeof *g->parts, cmp_part_first);
    if (from_sums)
        pd_metrics_add("profd_clickhouse_merge_header_profiles_total", "path=\"summary\"",
                       (double)from_sums);
    if (from_rows)
        pd_metrics_add("profd_clickhouse_merge_header_profiles_total", "path=\"rows\"",
                       (double)from_rows);
    rc = 0;
out:
    free(v);
    pd_u64map_release(&rep);
    pd_u64map_release(&bad);
    pd_buf_release(&sql);
    pd_buf_release(&resp);
    return rc;
}
