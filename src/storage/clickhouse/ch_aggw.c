/*
 * storage/clickhouse/ch_aggw.c — aggs_v1's sums kept in memory per series
 * and 10-minute bucket, written once the bucket goes idle (schema 5's
 * table, clickhouse.h; the rule that keeps merges exact is ch_agg.c's).
 *
 * Why: aggs_v1 written per profile doubles the rows ClickHouse inserts and
 * merges (a series pushing every 10 s has ~60 profiles a bucket, each with
 * its ~200 stack rows and a reconciliation row). Summed here first, a
 * series-bucket costs one row set.
 *
 * State: c->aggw (NULL when agg_flush_idle_ms < 0: every batch then sends
 * its entries' agg_rows beside its profile rows, ch_batch.c). A pending
 * series-bucket (ch_sb) is keyed by (fingerprint, bucket, types_hash) and
 * holds the sums of its stacks (per sample type index) and its
 * reconciliation numbers: n = the profiles added, wsum = the sum of their
 * pd__ch_wid_hash(write_id) mod 2^64.
 *
 * Invariants:
 *  - only profiles acknowledged are added (the writer, after the batch's
 *    profiles INSERT succeeded; PD_EEXIST and failed entries are not),
 *    each once: so a series-bucket's pending rows are the sum over a subset
 *    of its profiles rows, with that subset's reconciliation;
 *  - a series-bucket's rows and its reconciliation row go in one INSERT
 *    (one block: ch_batch.c's pd__ch_insert_block), so they land together
 *    or not at all; an INSERT holds whole series-buckets and at most
 *    CH_AGGW_INSERT_ROWS rows (below ClickHouse's max_insert_block_size
 *    default of 1,048,576) unless one series-bucket alone is larger;
 *  - a series-bucket detached for writing is gone from the map: appends
 *    after it start a new one (a second subset: SummingMergeTree adds the
 *    two, reconciliation rows included). So ClickHouse's aggs_v1 holds, per
 *    bucket, sums of disjoint subsets whose reconciliation rows add up.
 *
 * When written (pd__ch_aggw_flush): a series-bucket that got no append for
 * idle_ms (the writer thread after each batch — unless a flush is running —
 * and when it wakes for it; the maintenance pass too); the oldest first while the pending bytes
 * exceed the cap; all at close. A failed INSERT is logged, counted
 * (profd_clickhouse_agg_write_errors_total) and dropped: never sent again
 * when its outcome is unknown (it may have landed; a second copy would add
 * its reconciliation twice, which merges detect as a mismatch). Lost sums —
 * a failure, a crash, a kill — leave their buckets' reconciliation short of
 * the profiles rows: merges read those buckets from the samples rows, exact
 * and only slower.
 *
 * Locking: aggw->mu guards the map and list; held only to add, detach or
 * look (never across an INSERT). The writer takes it under c->mu (lock order
 * c->mu or flush_mu, then aggw->mu); nothing here takes c->mu. flush_mu
 * makes flushes one at a time (taken without c->mu).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "base/log.h"
#include "base/metrics.h"
#include "base/time.h"
#include "base/varint.h"
#include "storage/clickhouse/ch_int.h"

/* Rows per aggs_v1 INSERT of a flush (whole series-buckets): below
 * ClickHouse's default max_insert_block_size (1,048,576). */
#define CH_AGGW_INSERT_ROWS 1000000u

typedef struct ch_sb {
    uint64_t fp, th;
    int64_t bucket, day;
    uint64_t n, wsum; /* the reconciliation: profiles added, their hashes summed */
    int64_t last_ms;  /* the aggregation clock at its last append */
    size_t nt;        /* sample types (fixed by th) */
    pd_u64map at;     /* stack hash -> index into sh */
    size_t max_at;    /* the index of stack hash UINT64_MAX (u64map's reserved key) */
    uint64_t *sh;     /* n_st stack hashes */
    int64_t *val;     /* n_st x nt sums (wrapping, as ClickHouse's Int64 sums) */
    size_t n_st, cap;
    size_t bytes;              /* what it holds, counted in aggw->bytes */
    struct ch_sb *prev, *next; /* the list, least recently appended first */
    struct ch_sb *hnext;       /* another series-bucket under the same index key */
} ch_sb;

struct ch_aggw {
    pthread_mutex_t flush_mu; /* held through a flush: one at a time, so a flush
                                 returns after what an earlier one detached is
                                 written (close, maintenance after the writer) */
    pthread_mutex_t mu;
    pd_u64map idx; /* XXH3 of (fp, bucket, th) -> the first ch_sb of that key */
    ch_sb *head, *tail;
    size_t n, bytes;
    int64_t idle_ms;
    size_t cap;
    int64_t (*clock)(void);
};

static int64_t mono_ms(void)
{
    return pd_mono_ns() / 1000000;
}

static uint64_t sb_key(uint64_t fp, int64_t bucket, uint64_t th)
{
    uint64_t k[3] = {fp, (uint64_t)bucket, th};
    uint64_t h = XXH3_64bits(k, sizeof k);
    return h == UINT64_MAX ? 0 : h;
}

static size_t sb_bytes(const ch_sb *s)
{
    return sizeof *s + s->at.cap * 16 + s->cap * (sizeof *s->sh + s->nt * sizeof *s->val);
}

static void sb_free(ch_sb *s)
{
    pd_u64map_release(&s->at);
    free(s->sh);
    free(s->val);
    free(s);
}

int pd__ch_aggw_new(pd_ch *c, int64_t idle_ms, size_t cap, int64_t (*clock)(void))
{
    ch_aggw *w = calloc(1, sizeof *w);
    if (!w)
        return PD_ENOMEM;
    pthread_mutex_init(&w->mu, NULL);
    pthread_mutex_init(&w->flush_mu, NULL);
    pd_u64map_init(&w->idx);
    w->idle_ms = idle_ms;
    w->cap = cap;
    w->clock = clock ? clock : mono_ms;
    c->aggw = w;
    pd_metrics_describe("profd_clickhouse_agg_pending_buckets", PD_METRIC_GAUGE,
                        "Series-buckets (10 minutes) whose aggs_v1 sums wait in memory "
                        "(--clickhouse.agg-flush-idle).");
    pd_metrics_describe("profd_clickhouse_agg_pending_bytes", PD_METRIC_GAUGE,
                        "Bytes those pending sums hold.");
    pd_metrics_describe("profd_clickhouse_agg_flushed_buckets_total", PD_METRIC_COUNTER,
                        "Series-buckets whose pending sums were sent to aggs_v1, by why: "
                        "idle, memory (the pending cap) or close.");
    return 0;
}

/* Unlinks s from the list and the index (w->mu held). */
static void sb_detach(ch_aggw *w, ch_sb *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        w->head = s->next;
    if (s->next)
        s->next->prev = s->prev;
    else
        w->tail = s->prev;
    s->prev = s->next = NULL;
    uint64_t k = sb_key(s->fp, s->bucket, s->th), v = 0;
    (void)pd_u64map_get(&w->idx, k, &v);
    ch_sb *first = (ch_sb *)(uintptr_t)v;
    if (first == s) {
        (void)pd_u64map_put(&w->idx, k, (uint64_t)(uintptr_t)s->hnext); /* 0: none */
    } else {
        for (ch_sb *x = first; x; x = x->hnext)
            if (x->hnext == s) {
                x->hnext = s->hnext;
                break;
            }
    }
    s->hnext = NULL;
    w->n--;
    w->bytes -= s->bytes;
    pd_metrics_add("profd_clickhouse_agg_pending_buckets", NULL, -1);
    pd_metrics_add("profd_clickhouse_agg_pending_bytes", NULL, -(double)s->bytes);
}

static void aggw_drop_all(ch_aggw *w)
{
    while (w->head) {
        ch_sb *s = w->head;
        sb_detach(w, s);
        sb_free(s);
    }
}

void pd__ch_aggw_free(pd_ch *c)
{
    ch_aggw *w = c->aggw;
    if (!w)
        return;
    aggw_drop_all(w);
    pd_u64map_release(&w->idx);
    pthread_mutex_destroy(&w->mu);
    pthread_mutex_destroy(&w->flush_mu);
    free(w);
    c->aggw = NULL;
}

void pd__ch_aggw_drop(pd_ch *c)
{
    ch_aggw *w = c->aggw;
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    aggw_drop_all(w);
    pthread_mutex_unlock(&w->mu);
}

/* The index of stack h in s, added (zero sums) if new: *i. 0 or PD_ENOMEM. */
static int sb_stack(ch_sb *s, uint64_t h, size_t *i)
{
    uint64_t v;
    if (h == UINT64_MAX ? s->max_at != SIZE_MAX : pd_u64map_get(&s->at, h, &v)) {
        *i = h == UINT64_MAX ? s->max_at : (size_t)v;
        return 0;
    }
    if (s->n_st == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 64;
        uint64_t *nh = realloc(s->sh, nc * sizeof *nh);
        if (!nh)
            return PD_ENOMEM;
        s->sh = nh;
        int64_t *nv = realloc(s->val, nc * (s->nt ? s->nt : 1) * sizeof *nv);
        if (!nv)
            return PD_ENOMEM;
        s->val = nv;
        s->cap = nc;
    }
    if (h == UINT64_MAX)
        s->max_at = s->n_st;
    else if (pd_u64map_put(&s->at, h, s->n_st) < 0)
        return PD_ENOMEM;
    s->sh[s->n_st] = h;
    memset(&s->val[s->n_st * s->nt], 0, s->nt * sizeof *s->val);
    *i = s->n_st++;
    return 0;
}

/* Adds e's agg_rows (ch_write.c's encoding: per stack day, fp, bucket, th,
 * stack hash, n = 0, wsum = 0, valuesMap; then the reconciliation row) to
 * s. 0, PD_ENOMEM, -1 on rows it did not write (a bug: never from input). */
static int sb_add(ch_sb *s, const ch_entry *e)
{
    ch_rd r = {(const uint8_t *)e->agg_rows.data, e->agg_rows.len, 0, false};
    while (pd__ch_rd_more(&r)) {
        (void)pd__ch_rd_u16(&r); /* day */
        (void)pd__ch_rd_u64(&r); /* fp */
        (void)pd__ch_rd_u64(&r); /* bucket */
        uint64_t th = pd__ch_rd_u64(&r), sh = pd__ch_rd_u64(&r);
        uint64_t n = pd__ch_rd_u64(&r), wsum = pd__ch_rd_u64(&r);
        size_t k = (size_t)pd__ch_rd_varint(&r);
        if (r.bad || k > s->nt || r.len - r.pos < k * 2)
            return -1;
        ch_rd rt = r; /* the type indexes, read beside the values */
        r.pos += k * 2;
        if (pd__ch_rd_varint(&r) != k || r.bad)
            return -1;
        if (th == 0 && sh == 0) { /* the reconciliation row */
            s->n += n;
            s->wsum += wsum;
            continue;
        }
        size_t i;
        if (sb_stack(s, sh, &i) < 0)
            return PD_ENOMEM;
        for (size_t j = 0; j < k; j++) {
            uint16_t ty = pd__ch_rd_u16(&rt);
            uint64_t v = pd__ch_rd_u64(&r);
            if (ty >= s->nt)
                return -1;
            int64_t *p = &s->val[i * s->nt + ty];
            *p = (int64_t)((uint64_t)*p + v); /* wraps, as ClickHouse's sum */
        }
        if (r.bad)
            return -1;
    }
    return 0;
}

int pd__ch_aggw_add(pd_ch *c, const ch_entry *e)
{
    ch_aggw *w = c->aggw;
    int64_t bucket = e->ts / PD_CH_AGG_BUCKET_MS;
    uint64_t k = sb_key(e->fp, bucket, e->types_hash), v = 0;
    int rc = 0;
    pthread_mutex_lock(&w->mu);
    (void)pd_u64map_get(&w->idx, k, &v);
    ch_sb *s = (ch_sb *)(uintptr_t)v;
    while (s && !(s->fp == e->fp && s->bucket == bucket && s->th == e->types_hash))
        s = s->hnext;
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s) {
            rc = PD_ENOMEM;
            goto out;
        }
        s->fp = e->fp;
        s->th = e->types_hash;
        s->bucket = bucket;
        s->day = e->day;
        s->nt = e->n_types;
        s->max_at = SIZE_MAX;
        pd_u64map_init(&s->at);
        s->hnext = (ch_sb *)(uintptr_t)v;
        if (pd_u64map_put(&w->idx, k, (uint64_t)(uintptr_t)s) < 0) {
            sb_free(s);
            rc = PD_ENOMEM;
            goto out;
        }
        s->bytes = sb_bytes(s);
        s->prev = w->tail;
        if (w->tail)
            w->tail->next = s;
        else
            w->head = s;
        w->tail = s;
        w->n++;
        w->bytes += s->bytes;
        pd_metrics_add("profd_clickhouse_agg_pending_buckets", NULL, 1);
        pd_metrics_add("profd_clickhouse_agg_pending_bytes", NULL, (double)s->bytes);
    } else if (s != w->tail) { /* the most recently appended: last */
        if (s->prev)
            s->prev->next = s->next;
        else
            w->head = s->next;
        s->next->prev = s->prev;
        s->prev = w->tail;
        s->next = NULL;
        w->tail->next = s;
        w->tail = s;
    }
    s->last_ms = w->clock();
    rc = sb_add(s, e);
    size_t nb = sb_bytes(s);
    w->bytes += nb - s->bytes;
    pd_metrics_add("profd_clickhouse_agg_pending_bytes", NULL, (double)nb - (double)s->bytes);
    s->bytes = nb;
    if (rc != 0) {
        /* partly added: its sums no longer match its reconciliation (and
           might not even be a subset's): dropped, its bucket read raw */
        sb_detach(w, s);
        sb_free(s);
        pd_log(PD_LOG_WARN,
               "clickhouse: pending aggs_v1 sums dropped (merges read their bucket raw)",
               "err=\"%s\"", rc == PD_ENOMEM ? "out of memory" : "malformed rows");
        pd_metrics_add("profd_clickhouse_agg_write_errors_total", NULL, 1);
    }
out:
    pthread_mutex_unlock(&w->mu);
    return rc;
}

int64_t pd__ch_aggw_wait_ms(pd_ch *c)
{
    ch_aggw *w = c->aggw;
    int64_t wait = -1;
    pthread_mutex_lock(&w->mu);
    if (w->head) {
        wait = w->head->last_ms + w->idle_ms - w->clock();
        if (wait < 0 || w->bytes > w->cap)
            wait = 0;
        if (wait > w->idle_ms) /* a clock that went back */
            wait = w->idle_ms;
    }
    pthread_mutex_unlock(&w->mu);
    return wait;
}

/* Appends s's rows to b: each stack's non-zero sums, then the
 * reconciliation row; *rows counts them. 0 or PD_ENOMEM. */
static int sb_encode(const ch_sb *s, pd_buf *b, size_t *rows)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < s->n_st; i++) {
        const int64_t *v = &s->val[i * s->nt];
        size_t nz = 0;
        for (size_t k = 0; k < s->nt; k++)
            nz += v[k] != 0;
        if (nz == 0) /* summed to zero: as ClickHouse's merges would drop it */
            continue;
        rc = pd__ch_put_agg_key(b, s->day, s->fp, s->bucket, s->th, s->sh[i], 0, 0);
        rc = rc ? rc : pd_buf_put_varint(b, nz);
        for (size_t k = 0; rc == 0 && k < s->nt; k++)
            if (v[k] != 0)
                rc = pd__ch_put_u16(b, (uint16_t)k);
        rc = rc ? rc : pd_buf_put_varint(b, nz);
        for (size_t k = 0; rc == 0 && k < s->nt; k++)
            if (v[k] != 0)
                rc = pd__ch_put_u64(b, (uint64_t)v[k]);
        ++*rows;
    }
    rc = rc ? rc : pd__ch_put_agg_key(b, s->day, s->fp, s->bucket, 0, 0, s->n, s->wsum);
    rc = rc ? rc : pd_buf_put_varint(b, 0);
    rc = rc ? rc : pd_buf_put_varint(b, 0);
    ++*rows;
    return rc < 0 ? PD_ENOMEM : 0;
}

/* Sends rows (n_sb whole series-buckets) as one INSERT; a failure is
 * logged and counted, the rows dropped. */
static void send(pd_ch *c, pd_buf *rows, size_t n_sb, size_t n_rows)
{
    if (n_sb == 0)
        return;
    pd_err err;
    pd_err_clear(&err);
    if (pd__ch_insert_block(c, "aggs_v1", rows, &err) < 0) {
        pd_log(PD_LOG_WARN, "clickhouse: aggs_v1 rows not written (merges read their buckets raw)",
               "series_buckets=%zu rows=%zu err=\"%s\"", n_sb, n_rows, err.msg);
        pd_metrics_add("profd_clickhouse_agg_write_errors_total", NULL, 1);
    }
    pd_buf_reset(rows);
}

void pd__ch_aggw_flush(pd_ch *c, int why)
{
    ch_aggw *w = c->aggw;
    if (!w)
        return;
    /* detach what is due, oldest first (w->mu held only for this) */
    ch_sb *due = NULL, **tail = &due;
    size_t n_idle = 0, n_mem = 0, n_all = 0;
    if (why == PD_CH_AGGW_DUE_TRY) {
        if (pthread_mutex_trylock(&w->flush_mu) != 0)
            return; /* another flush is writing; what is due goes next time */
    } else {
        pthread_mutex_lock(&w->flush_mu);
    }
    pthread_mutex_lock(&w->mu);
    int64_t now = w->clock();
    while (w->head) {
        ch_sb *s = w->head;
        if (why == PD_CH_AGGW_ALL)
            n_all++;
        else if (s->last_ms + w->idle_ms <= now)
            n_idle++;
        else if (w->bytes > w->cap)
            n_mem++;
        else
            break;
        sb_detach(w, s);
        *tail = s;
        tail = &s->next;
    }
    pthread_mutex_unlock(&w->mu);
    if (n_idle)
        pd_metrics_add("profd_clickhouse_agg_flushed_buckets_total", "reason=\"idle\"",
                       (double)n_idle);
    if (n_mem)
        pd_metrics_add("profd_clickhouse_agg_flushed_buckets_total", "reason=\"memory\"",
                       (double)n_mem);
    if (n_all)
        pd_metrics_add("profd_clickhouse_agg_flushed_buckets_total", "reason=\"close\"",
                       (double)n_all);

    /* INSERTs of whole series-buckets, each below CH_AGGW_INSERT_ROWS */
    pd_buf rows, one;
    pd_buf_init(&rows, 0);
    pd_buf_init(&one, 0);
    size_t n_rows = 0, n_sb = 0;
    for (ch_sb *s = due, *next; s; s = next) {
        next = s->next;
        size_t r = 0;
        pd_buf_reset(&one);
        if (sb_encode(s, &one, &r) < 0) {
            pd_log(PD_LOG_WARN,
                   "clickhouse: aggs_v1 rows not written (merges read their buckets raw)",
                   "series_buckets=1 err=\"out of memory\"");
            pd_metrics_add("profd_clickhouse_agg_write_errors_total", NULL, 1);
            sb_free(s);
            continue;
        }
        sb_free(s);
        if (n_sb && n_rows + r > CH_AGGW_INSERT_ROWS) {
            send(c, &rows, n_sb, n_rows);
            n_rows = n_sb = 0;
        }
        if (pd_buf_append(&rows, one.data, one.len) < 0) {
            send(c, &rows, n_sb, n_rows); /* what fits; this one after */
            n_rows = n_sb = 0;
            if (pd_buf_append(&rows, one.data, one.len) < 0) {
                pd_metrics_add("profd_clickhouse_agg_write_errors_total", NULL, 1);
                continue;
            }
        }
        n_rows += r;
        n_sb++;
    }
    send(c, &rows, n_sb, n_rows);
    pthread_mutex_unlock(&w->flush_mu);
    pd_buf_release(&rows);
    pd_buf_release(&one);
}
