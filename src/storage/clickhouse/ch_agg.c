/*
 * storage/clickhouse/ch_agg.c — which hours of a merge are read from
 * aggs_v1 (schema 5, clickhouse.h) and the SQL that reads them.
 *
 * The rule (exact by construction): a series' hour is read from its
 * pre-summed rows only when it lies wholly inside the merge's range and its
 * reconciliation row in aggs_v1 — n (profiles) and wsum (the sum of
 * pd__ch_wid_hash of their write_ids, mod 2^64), summed over every write —
 * equals the same computed from the hour's profiles_v3 rows, the commit
 * records the raw path counts. A write whose profiles INSERT failed (its
 * aggs rows landed), an aggs INSERT that failed or landed twice, an hour
 * written before schema 5: the two differ, and the hour is read from
 * samples_v3 like the hours cut by the range's ends. Equal sets of
 * write_ids give equal sums; unequal ones equal sums only by a 2^-64
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

void pd__ch_hours_init(ch_hours *h, int64_t mint, int64_t maxt)
{
    memset(h, 0, sizeof *h);
    pd_u64map_init(&h->at);
    if (mint < 0)
        mint = 0; /* no profile is older (pd__ch_check_time) */
    /* hour k covers [k * H, (k + 1) * H - 1] */
    h->lo = floor_div(mint, PD_CH_AGG_HOUR_MS) + (mint % PD_CH_AGG_HOUR_MS != 0);
    h->hi = maxt == INT64_MAX ? floor_div(maxt, PD_CH_AGG_HOUR_MS) - 1
                              : floor_div(maxt + 1, PD_CH_AGG_HOUR_MS) - 1;
    if (maxt < mint)
        h->hi = h->lo - 1; /* none */
}

void pd__ch_hours_release(ch_hours *h)
{
    pd_u64map_release(&h->at);
    free(h->v);
    memset(h, 0, sizeof *h);
}

static uint64_t slot_key(uint64_t fp, int64_t hour)
{
    uint64_t k = pd__ch_wid_hash(fp ^ pd__ch_wid_hash((uint64_t)hour + 0x9e3779b97f4a7c15ull));
    return k == UINT64_MAX ? k - 1 : k;
}

int pd__ch_hours_add(ch_hours *h, uint64_t fp, int64_t ts, uint64_t write_id)
{
    int64_t hour = floor_div(ts, PD_CH_AGG_HOUR_MS);
    if (hour < h->lo || hour > h->hi) {
        h->n_cut++;
        return 0;
    }
    uint64_t k = slot_key(fp, hour), at;
    if (pd_u64map_get(&h->at, k, &at)) {
        if (h->v[at].fp != fp || h->v[at].hour != hour)
            h->clash = true; /* two hours, one key: this merge reads raw */
    } else {
        if (h->n == h->cap) {
            size_t nc = h->cap ? 2 * h->cap : 64;
            ch_hour *v = realloc(h->v, nc * sizeof *v);
            if (!v)
                return PD_ENOMEM;
            h->v = v;
            h->cap = nc;
        }
        at = h->n;
        if (pd_u64map_put(&h->at, k, at) < 0)
            return PD_ENOMEM;
        h->v[h->n++] = (ch_hour){.fp = fp, .hour = hour};
    }
    h->v[at].n++;
    h->v[at].wsum += pd__ch_wid_hash(write_id);
    return 0;
}

/* " day BETWEEN 'a' AND 'b' AND hour BETWEEN lo AND hi" */
static int put_hours(pd_buf *b, int64_t lo, int64_t hi)
{
    int rc = pd_buf_puts(b, " day BETWEEN ");
    rc = rc ? rc : pd__ch_put_sql_day(b, pd__ch_day(lo * PD_CH_AGG_HOUR_MS));
    rc = rc ? rc : pd_buf_puts(b, " AND ");
    rc = rc ? rc : pd__ch_put_sql_day(b, pd__ch_day(hi * PD_CH_AGG_HOUR_MS));
    return rc ? rc : pd_buf_printf(b, " AND hour BETWEEN %lld AND %lld", (long long)lo, (long long)hi);
}

int pd__ch_hours_put_summary_sql(const ch_hours *h, const uint64_t *fps, size_t n, pd_buf *sql)
{
    int rc = pd_buf_puts(sql, "SELECT fingerprint, hour, sum(n), sum(wsum) FROM aggs_v1 WHERE "
                              "fingerprint IN (");
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = pd_buf_printf(sql, "%s%llu", i ? "," : "", (unsigned long long)fps[i]);
    rc = rc ? rc : pd_buf_puts(sql, ") AND");
    rc = rc ? rc : put_hours(sql, h->lo, h->hi);
    return rc ? rc
              : pd_buf_puts(sql, " AND types_hash = 0 AND stack_hash = 0 GROUP BY fingerprint, "
                                 "hour FORMAT RowBinary");
}

int pd__ch_hours_match(ch_hours *h, const pd_buf *resp)
{
    h->n_match = 0;
    h->n_raw_rows = h->n_cut;
    ch_rd r = {(const uint8_t *)resp->data, resp->len, 0, false};
    while (pd__ch_rd_more(&r)) {
        uint64_t fp = pd__ch_rd_u64(&r);
        int64_t hour = (int64_t)pd__ch_rd_u64(&r);
        uint64_t n = pd__ch_rd_u64(&r), wsum = pd__ch_rd_u64(&r), at;
        if (r.bad)
            return -1;
        if (h->clash || !pd_u64map_get(&h->at, slot_key(fp, hour), &at))
            continue; /* an hour without profiles rows now: nothing to read */
        ch_hour *x = &h->v[at];
        if (x->fp == fp && x->hour == hour && x->n == n && x->wsum == wsum && !x->match) {
            x->match = true;
            h->n_match++;
        }
    }
    for (size_t i = 0; i < h->n; i++)
        if (!h->v[i].match)
            h->n_raw_rows += h->v[i].n;
    if (h->n_match)
        pd_metrics_add("profd_clickhouse_merge_hours_total", "path=\"aggregate\"",
                       (double)h->n_match);
    if (h->n > h->n_match)
        pd_metrics_add("profd_clickhouse_merge_hours_total", "path=\"raw\"",
                       (double)(h->n - h->n_match));
    return 0;
}

/* "(fp,hour),(fp,hour)..." of the matched hours. */
static int put_matched(const ch_hours *h, pd_buf *b)
{
    int rc = 0;
    bool first = true;
    for (size_t i = 0; rc == 0 && i < h->n; i++)
        if (h->v[i].match) {
            rc = pd_buf_printf(b, "%s(%llu,%lld)", first ? "" : ",",
                               (unsigned long long)h->v[i].fp, (long long)h->v[i].hour);
            first = false;
        }
    return rc;
}

int pd__ch_hours_put_agg_sql(const ch_hours *h, pd_buf *sql)
{
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (size_t i = 0; i < h->n; i++)
        if (h->v[i].match) {
            lo = h->v[i].hour < lo ? h->v[i].hour : lo;
            hi = h->v[i].hour > hi ? h->v[i].hour : hi;
        }
    int rc = pd_buf_puts(sql, "SELECT types_hash, stack_hash, sumMap(valuesMap.type, "
                              "valuesMap.value) FROM aggs_v1 WHERE fingerprint IN (");
    pd_u64map seen;
    pd_u64map_init(&seen);
    bool first = true;
    for (size_t i = 0; rc == 0 && i < h->n; i++)
        if (h->v[i].match && !pd_u64map_get(&seen, h->v[i].fp, NULL)) {
            rc = pd_u64map_put(&seen, h->v[i].fp, 1);
            rc = rc ? rc
                    : pd_buf_printf(sql, "%s%llu", first ? "" : ",",
                                    (unsigned long long)h->v[i].fp);
            first = false;
        }
    pd_u64map_release(&seen);
    rc = rc ? rc : pd_buf_puts(sql, ") AND");
    rc = rc ? rc : put_hours(sql, lo, hi);
    rc = rc ? rc : pd_buf_puts(sql, " AND (fingerprint, hour) IN (");
    rc = rc ? rc : put_matched(h, sql);
    return rc ? rc
              : pd_buf_puts(sql, ") GROUP BY types_hash, stack_hash FORMAT RowBinary");
}

int pd__ch_hours_put_raw_excl(const ch_hours *h, pd_buf *b)
{
    if (h->n_match == 0)
        return 0;
    int rc = pd_buf_printf(b, " AND (fingerprint, intDiv(ts, %lld)) NOT IN (",
                           (long long)PD_CH_AGG_HOUR_MS);
    rc = rc ? rc : put_matched(h, b);
    return rc ? rc : pd_buf_putc(b, ')');
}
