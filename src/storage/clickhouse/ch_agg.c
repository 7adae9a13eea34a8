/*
 * storage/clickhouse/ch_agg.c — which buckets of a merge are read from
 * aggs_v1 (schema 5, clickhouse.h) and the SQL that reads them.
 *
 * The rule (exact by construction): a series' bucket is read from its
 * pre-summed rows only when it lies wholly inside the merge's range and its
 * reconciliation row in aggs_v1 — n (profiles) and wsum (the sum of
 * pd__ch_wid_hash of their write_ids, mod 2^64), summed over every write —
 * equals the same computed from the bucket's profiles rows, the commit
 * records the raw path counts. A write whose profiles INSERT failed (its
 * aggs rows landed), an aggs INSERT that failed or landed twice, a bucket
 * written before schema 5: the two differ, and the bucket is read from
 * the samples rows (stack_samples_v1; samples_v3 beside it, schema 6) like the buckets cut by the
 * range's ends. Equal sets of write_ids give equal sums; unequal ones equal sums only by a 2^-64
 * chance (the hash is a 64-bit mix of random ids).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/metrics.h"
#include "storage/clickhouse/ch_agg.h"

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

void pd__ch_buckets_init(ch_buckets *h, int64_t mint, int64_t maxt)
{
    memset(h, 0, sizeof *h);
    pd_u64map_init(&h->at);
    if (mint < 0)
        mint = 0; /* no profile is older (pd__ch_check_time) */
    h->mint = mint;
    h->maxt = maxt;
    /* bucket k covers [k * H, (k + 1) * H - 1] */
    h->lo = floor_div(mint, PD_CH_AGG_BUCKET_MS) + (mint % PD_CH_AGG_BUCKET_MS != 0);
    h->hi = maxt == INT64_MAX ? floor_div(maxt, PD_CH_AGG_BUCKET_MS) - 1
                              : floor_div(maxt + 1, PD_CH_AGG_BUCKET_MS) - 1;
    if (maxt < mint)
        h->hi = h->lo - 1; /* none */
    /* the buckets the ends cut (no profile is at INT64_MAX's bucket) */
    h->cut_lo = h->lo <= h->hi && mint % PD_CH_AGG_BUCKET_MS != 0;
    h->cut_hi = h->lo <= h->hi && maxt != INT64_MAX && (maxt + 1) % PD_CH_AGG_BUCKET_MS != 0;
}

void pd__ch_buckets_release(ch_buckets *h)
{
    pd_u64map_release(&h->at);
    free(h->v);
    free(h->odd);
    memset(h, 0, sizeof *h);
}

static uint64_t slot_key(uint64_t fp, int64_t bucket)
{
    uint64_t k = pd__ch_wid_hash(fp ^ pd__ch_wid_hash((uint64_t)bucket + 0x9e3779b97f4a7c15ull));
    return k == UINT64_MAX ? k - 1 : k;
}

int pd__ch_buckets_add(ch_buckets *h, uint64_t fp, int64_t ts, uint64_t write_id)
{
    return pd__ch_buckets_add_sum(h, fp, ts, 1, pd__ch_wid_hash(write_id));
}

int pd__ch_buckets_add_sum(ch_buckets *h, uint64_t fp, int64_t ts, uint64_t n, uint64_t wsum)
{
    int64_t bucket = floor_div(ts, PD_CH_AGG_BUCKET_MS);
    if (bucket < h->lo - h->cut_lo || bucket > h->hi + h->cut_hi) {
        h->n_cut += n;
        return 0;
    }
    uint64_t k = slot_key(fp, bucket), at;
    if (pd_u64map_get(&h->at, k, &at)) {
        if (h->v[at].fp != fp || h->v[at].bucket != bucket)
            h->clash = true; /* two buckets, one key: this merge reads raw */
    } else {
        if (h->n == h->cap) {
            size_t nc = h->cap ? 2 * h->cap : 64;
            ch_bucket *v = realloc(h->v, nc * sizeof *v);
            if (!v)
                return PD_ENOMEM;
            h->v = v;
            h->cap = nc;
        }
        at = h->n;
        if (pd_u64map_put(&h->at, k, at) < 0)
            return PD_ENOMEM;
        h->v[h->n++] = (ch_bucket){.fp = fp, .bucket = bucket};
    }
    h->v[at].n += n;
    h->v[at].wsum += wsum;
    return 0;
}

/* " day BETWEEN 'a' AND 'b' AND bucket BETWEEN lo AND hi" (pair: "bucket IN
 * (lo, hi)") */
static int put_buckets(pd_buf *b, int64_t lo, int64_t hi, bool pair)
{
    int rc = pd_buf_puts(b, " day BETWEEN ");
    rc = rc ? rc : pd__ch_put_sql_day(b, pd__ch_day(lo * PD_CH_AGG_BUCKET_MS));
    rc = rc ? rc : pd_buf_puts(b, " AND ");
    rc = rc ? rc : pd__ch_put_sql_day(b, pd__ch_day(hi * PD_CH_AGG_BUCKET_MS));
    return rc ? rc
              : pd_buf_printf(
                    b, pair ? " AND bucket IN (%lld, %lld)" : " AND bucket BETWEEN %lld AND %lld",
                    (long long)lo, (long long)hi);
}

/* The merge's read of aggs_v1 over the buckets put_buckets(lo, hi, pair)
 * names (pd__ch_buckets_put_merge_sql's answer format). */
static int put_class_sums(const ch_buckets *h, const uint64_t *fps, size_t n, int64_t lo,
                          int64_t hi, bool pair, pd_buf *sql)
{
    int rc = pd_buf_printf(sql,
                           "SELECT types_hash, stack_hash, toUInt8(multiIf(bucket < %lld, 1, "
                           "bucket > %lld, 2, 0)) AS cls, sumMap(valuesMap.type, valuesMap.value), "
                           "groupArrayIf((fingerprint, bucket, n, wsum), types_hash = 0 AND "
                           "stack_hash = 0) FROM aggs_v1 WHERE ",
                           (long long)h->lo, (long long)h->hi);
    rc = rc ? rc : pd__ch_put_fp_in(sql, fps, n);
    rc = rc ? rc : pd_buf_puts(sql, " AND");
    rc = rc ? rc : put_buckets(sql, lo, hi, pair);
    return rc ? rc : pd_buf_puts(sql, " GROUP BY types_hash, stack_hash, cls FORMAT RowBinary");
}

int pd__ch_buckets_put_merge_sql(const ch_buckets *h, const uint64_t *fps, size_t n, pd_buf *sql)
{
    return put_class_sums(h, fps, n, h->lo - h->cut_lo, h->hi + h->cut_hi, false, sql);
}

int pd__ch_buckets_put_ends_sql(const ch_buckets *h, const uint64_t *fps, size_t n, pd_buf *sql)
{
    if (!h->cut_lo && !h->cut_hi)
        return 0;
    int64_t a = h->cut_lo ? h->lo - 1 : h->hi + 1, b = h->cut_hi ? h->hi + 1 : a;
    return put_class_sums(h, fps, n, a, b, true, sql);
}

/* One row of an answer to put_class_sums at r: *cls, the sums map at
 * [*map_at, *map_end) (a Tuple(Array(UInt16), Array(Int64))), *n_recon
 * reconciliation tuples (32 bytes each) from r's position on return, the
 * row starting at *at. 0, -1 (malformed). */
static int class_row(ch_rd *r, size_t *at, uint8_t *cls, size_t *map_at, size_t *map_end,
                     uint64_t *n_recon)
{
    *at = r->pos;
    r->pos += 16; /* types_hash, stack_hash */
    if (r->pos >= r->len)
        return -1;
    *cls = r->p[r->pos++];
    *map_at = r->pos;
    uint64_t nk = pd__ch_rd_varint(r);
    if (r->bad || nk > r->len - r->pos)
        return -1;
    r->pos += 2 * nk;
    uint64_t nv = pd__ch_rd_varint(r);
    if (r->bad || nv != nk || nv > (r->len - r->pos) / 8)
        return -1;
    r->pos += 8 * nv;
    *map_end = r->pos;
    *n_recon = pd__ch_rd_varint(r);
    if (r->bad || *n_recon > (r->len - r->pos) / 32 || *cls > 2)
        return -1;
    return 0;
}

int pd__ch_buckets_class_rows(const pd_buf *resp, int cls, pd_buf *out)
{
    ch_rd r = {(const uint8_t *)resp->data, resp->len, 0, false};
    while (pd__ch_rd_more(&r)) {
        size_t at, map_at, map_end;
        uint8_t k;
        uint64_t nr;
        if (class_row(&r, &at, &k, &map_at, &map_end, &nr) < 0)
            return -1;
        r.pos += 32 * nr;
        if (k == cls && pd_buf_append(out, r.p + at, r.pos - at) < 0)
            return PD_ENOMEM;
    }
    return r.bad ? -1 : 0;
}

/* Adds one reconciliation row (fp, bucket, n, wsum) to its bucket, or
 * notes it odd (no profiles row there: a write whose commit failed). 0 or
 * PD_ENOMEM. */
static int take_recon(ch_buckets *h, uint64_t fp, int64_t bucket, uint64_t n, uint64_t wsum)
{
    uint64_t at;
    if (h->clash)
        return 0;
    if (!pd_u64map_get(&h->at, slot_key(fp, bucket), &at)) {
        if (h->n_odd == h->cap_odd) {
            size_t nc = h->cap_odd ? 2 * h->cap_odd : 16;
            ch_bucket *o = realloc(h->odd, nc * sizeof *o);
            if (!o)
                return PD_ENOMEM;
            h->odd = o;
            h->cap_odd = nc;
        }
        h->odd[h->n_odd++] = (ch_bucket){.fp = fp, .bucket = bucket};
        return 0;
    }
    ch_bucket *x = &h->v[at];
    if (x->fp != fp || x->bucket != bucket) {
        h->clash = true; /* two buckets, one key: all read raw */
        return 0;
    }
    x->an += n;
    x->awsum += wsum;
    return 0;
}

/* The class of bucket b: 0 whole, 1 cut at the start, 2 at the end. */
static int bucket_class(const ch_buckets *h, int64_t b)
{
    return b < h->lo ? 1 : b > h->hi ? 2 : 0;
}

int pd__ch_buckets_take(ch_buckets *h, const pd_buf *resp, pd_buf out[3])
{
    h->n_match = 0;
    h->n_raw_rows = h->n_cut;
    ch_rd r = {(const uint8_t *)resp->data, resp->len, 0, false};
    while (pd__ch_rd_more(&r)) {
        size_t at, map_at, map_end;
        uint8_t cls;
        uint64_t nr;
        if (class_row(&r, &at, &cls, &map_at, &map_end, &nr) < 0)
            return -1;
        if (pd_buf_append(&out[cls], r.p + at, 16) < 0 ||
            pd_buf_append(&out[cls], r.p + map_at, map_end - map_at) < 0)
            return PD_ENOMEM;
        for (uint64_t k = 0; k < nr; k++) {
            uint64_t fp = pd__ch_rd_u64(&r);
            int64_t bucket = (int64_t)pd__ch_rd_u64(&r);
            uint64_t n = pd__ch_rd_u64(&r), wsum = pd__ch_rd_u64(&r);
            if (r.bad)
                return -1;
            if (take_recon(h, fp, bucket, n, wsum) < 0)
                return PD_ENOMEM;
        }
    }
    if (r.bad)
        return -1;
    bool ok[3] = {!h->clash, !h->clash, !h->clash};
    size_t n_class[3] = {0, 0, 0}, n_ok[3] = {0, 0, 0};
    for (size_t i = 0; i < h->n; i++) {
        ch_bucket *x = &h->v[i];
        int k = bucket_class(h, x->bucket);
        x->match = !h->clash && x->n == x->an && x->wsum == x->awsum;
        n_class[k]++;
        if (x->match)
            n_ok[k]++;
        else
            ok[k] = false;
    }
    for (size_t i = 0; i < h->n_odd; i++)
        ok[bucket_class(h, h->odd[i].bucket)] = false;
    for (int k = 0; k < 3; k++)
        h->use[k] = ok[k];
    h->n_match = n_ok[0];
    for (size_t i = 0; i < h->n; i++)
        if (!h->use[bucket_class(h, h->v[i].bucket)])
            h->n_raw_rows += h->v[i].n;
    if (n_ok[0])
        pd_metrics_add("profd_clickhouse_merge_buckets_total", "path=\"aggregate\"",
                       (double)n_ok[0]);
    if (n_class[0] > n_ok[0])
        pd_metrics_add("profd_clickhouse_merge_buckets_total", "path=\"raw\"",
                       (double)(n_class[0] - n_ok[0]));
    size_t n_cut_served = (h->use[1] ? n_class[1] : 0) + (h->use[2] ? n_class[2] : 0);
    if (n_cut_served)
        pd_metrics_add("profd_clickhouse_merge_buckets_total", "path=\"aggregate_cut\"",
                       (double)n_cut_served);
    return 0;
}

/* "(fp,bucket),..." of the buckets with profiles rows not matched and (odd)
 * those aggs_v1 has a reconciliation row of but no profiles row now. */
static int put_unmatched(const ch_buckets *h, bool odd, pd_buf *b)
{
    int rc = 0;
    bool first = true;
    for (size_t i = 0; rc == 0 && i < h->n; i++)
        if (!h->v[i].match && bucket_class(h, h->v[i].bucket) == 0) {
            rc = pd_buf_printf(b, "%s(%llu,%lld)", first ? "" : ",", (unsigned long long)h->v[i].fp,
                               (long long)h->v[i].bucket);
            first = false;
        }
    for (size_t i = 0; rc == 0 && odd && i < h->n_odd; i++) {
        if (bucket_class(h, h->odd[i].bucket) != 0)
            continue;
        rc = pd_buf_printf(b, "%s(%llu,%lld)", first ? "" : ",", (unsigned long long)h->odd[i].fp,
                           (long long)h->odd[i].bucket);
        first = false;
    }
    return rc;
}

int pd__ch_buckets_put_agg_sql(const ch_buckets *h, const uint64_t *fps, size_t n, bool exceptions,
                               pd_buf *sql)
{
    int rc = pd_buf_puts(sql, "SELECT types_hash, stack_hash, sumMap(valuesMap.type, "
                              "valuesMap.value) FROM aggs_v1 WHERE ");
    rc = rc ? rc : pd__ch_put_fp_in(sql, fps, n);
    rc = rc ? rc : pd_buf_puts(sql, " AND");
    rc = rc ? rc : put_buckets(sql, h->lo, h->hi, false);
    if (rc == 0 && exceptions) {
        rc = pd_buf_puts(sql, " AND (fingerprint, bucket) NOT IN (");
        rc = rc ? rc : put_unmatched(h, true, sql);
        rc = rc ? rc : pd_buf_putc(sql, ')');
    }
    return rc ? rc : pd_buf_puts(sql, " GROUP BY types_hash, stack_hash FORMAT RowBinary");
}

int pd__ch_buckets_put_raw_cut(const ch_buckets *h, pd_buf *b)
{
    /* the same twice: on ts, and on the buckets for stack_samples_v1's key */
    return pd_buf_printf(b,
                         " AND (ts < %lld OR ts > %lld) AND (intDiv(ts, %lld) < %lld OR "
                         "intDiv(ts, %lld) > %lld)",
                         (long long)(h->lo * PD_CH_AGG_BUCKET_MS),
                         (long long)((h->hi + 1) * PD_CH_AGG_BUCKET_MS - 1),
                         (long long)PD_CH_AGG_BUCKET_MS, (long long)h->lo,
                         (long long)PD_CH_AGG_BUCKET_MS, (long long)h->hi);
}

int pd__ch_buckets_put_raw_ends(const ch_buckets *h, pd_buf *b)
{
    bool lo = h->cut_lo && !h->use[1], hi = h->cut_hi && !h->use[2];
    long long t_lo = (long long)(h->lo * PD_CH_AGG_BUCKET_MS);
    long long t_hi = (long long)((h->hi + 1) * PD_CH_AGG_BUCKET_MS - 1);
    long long bw = (long long)PD_CH_AGG_BUCKET_MS;
    /* each on ts, and on the buckets for stack_samples_v1's key */
    if (lo && hi)
        return pd__ch_buckets_put_raw_cut(h, b);
    if (lo)
        return pd_buf_printf(b, " AND ts < %lld AND intDiv(ts, %lld) < %lld", t_lo, bw,
                             (long long)h->lo);
    return pd_buf_printf(b, " AND ts > %lld AND intDiv(ts, %lld) > %lld", t_hi, bw,
                         (long long)h->hi);
}

int pd__ch_buckets_put_raw_unmatched(const ch_buckets *h, pd_buf *b)
{
    int rc = pd_buf_printf(b, " AND (fingerprint, intDiv(ts, %lld)) IN (",
                           (long long)PD_CH_AGG_BUCKET_MS);
    rc = rc ? rc : put_unmatched(h, false, b);
    return rc ? rc : pd_buf_putc(b, ')');
}
