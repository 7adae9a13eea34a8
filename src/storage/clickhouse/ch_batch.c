/*
 * storage/clickhouse/ch_batch.c — the ClickHouse backend's writer thread:
 * group commit of the queued appends (ch_write.c encodes and queues them).
 *
 * Queue: appenders encode their rows without a lock (ch_entry), then add
 * the entry to c->pending (a ch_batch) and wait for that batch to be done.
 * The writer thread takes the whole pending batch (the next one starts
 * gathering at once), sends it (flush), sets every entry's result, marks the
 * batch done and wakes the appenders; the last appender to leave frees it.
 * Appenders wait (back-pressure) while the pending batch holds more than
 * 4 x batch_bytes.
 *
 * The gathering window. ClickHouse's cost is per INSERT (a part per table),
 * so under concurrent appends a batch should hold many; an append alone
 * (one pusher after another, a scrape loop on its own) should not wait for
 * company that is not coming. A batch therefore starts
 *     window = flush_interval_ms x min(1, (n - 1) / (PD_CH_FULL_WINDOW_PROFILES - 1))
 * after the previous one started, n being the larger of the previous
 * batch's profiles and the gathering one's: after a batch of one profile
 * the next goes at once (as soon as the previous is acknowledged: one in
 * flight at a time); after a batch of 16 or more, the full interval (1 s by
 * default, ClickHouse's advice of about one INSERT per second). A fleet
 * pushing on a timer at r pushes/s thus settles on batches of r x interval
 * once r x interval reaches about 16 (the window widens as the batch
 * grows); a client sending k < 16 pushes at a time, one round after
 * another, waits (k - 1) / 15 of the interval per round.
 * A fleet of fewer pushes than that per interval (r x interval < ~16:
 * 100 agents every 10 s) thus sends a batch per push. batch_wait_ms
 * (--clickhouse.batch-wait) is then the window's floor: every batch
 * starts at least that long after the previous one started, so such a
 * fleet's batches hold r x batch_wait_ms, every push waiting up to that long
 * (a lone pusher too).
 * A batch goes at once, window or not, when it holds batch_rows samples
 * rows, batch_bytes bytes or batch_profiles profiles (--web.threads: every
 * push worker is waiting on it, so no more can come).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/metrics.h"
#include "base/time.h"
#include "storage/clickhouse/ch_int.h"

/* Concatenates the rows of the live entries (rc == 0) chosen by `field`. */
static int gather(ch_batch *b, size_t off, pd_buf *out, size_t *n_live)
{
    *n_live = 0;
    for (ch_entry *e = b->head; e; e = e->next) {
        if (e->rc)
            continue;
        const pd_buf *src = (const pd_buf *)((const char *)e + off);
        if (src->len && pd_buf_append(out, src->data, src->len) < 0)
            return PD_ENOMEM;
        (*n_live)++;
    }
    return 0;
}

static void fail_live(ch_batch *b, int rc, const pd_err *err)
{
    for (ch_entry *e = b->head; e; e = e->next)
        if (e->rc == 0) {
            e->rc = rc;
            e->err = *err;
        }
}

/* SELECT count() FROM table WHERE write_id IN (live entries). -1 on error. */
static int64_t count_written(pd_ch *c, ch_batch *b, const char *table, pd_err *err)
{
    pd_buf sql, resp;
    pd_buf_init(&sql, 0);
    pd_buf_init(&resp, 1024);
    int64_t n = -1;
    int rc = pd_buf_printf(&sql, "SELECT count() FROM %s WHERE write_id IN (", table);
    bool first = true;
    for (ch_entry *e = b->head; rc == 0 && e; e = e->next)
        if (e->rc == 0) {
            rc = pd_buf_printf(&sql, "%s%llu", first ? "" : ",", (unsigned long long)e->write_id);
            first = false;
        }
    rc = rc ? rc : pd_buf_puts(&sql, ") FORMAT RowBinary");
    rc = rc ? rc : pd_buf_putc(&sql, 0);
    if (rc == 0 && pd__ch_exec(c, (const char *)sql.data, NULL, 0, NULL, &resp, NULL, err) == 0) {
        ch_rd r = {(const uint8_t *)resp.data, resp.len, 0, false};
        uint64_t v = pd__ch_rd_u64(&r);
        if (!r.bad)
            n = (int64_t)v;
    }
    pd_buf_release(&sql);
    pd_buf_release(&resp);
    return n;
}

#define CH_ONE_BLOCK "max_insert_block_size=4294967295&min_insert_block_size_rows=0"

/* INSERTs rows into table; an outcome unknown is settled by counting the
 * live entries' rows (expect of them): all there = done, none = sent
 * again (once), some = failure. */
static int insert_rows(pd_ch *c, ch_batch *b, const char *table, const pd_buf *rows,
                       bool by_write_id, uint64_t expect, pd_err *err)
{
    if (rows->len == 0)
        return 0;
    char sql[128];
    snprintf(sql, sizeof sql, "INSERT INTO %s FORMAT RowBinary", table);
    /* replicated: deduplication on whatever the user's profile says, as a
       cut INSERT is sent again (ch_http.c) */
    const char *settings = c->replicated ? "insert_distributed_sync=1&insert_deduplicate=1"
                           : c->cluster  ? "insert_distributed_sync=1"
                                         : NULL;
    /* aggs_v1: one block, so one part per server: a series' rows of the
       batch land with its reconciliation row or not at all (ch_agg.h) */
    if (strcmp(table, "aggs_v1") == 0)
        settings = c->replicated ? "insert_distributed_sync=1&insert_deduplicate=1&" CH_ONE_BLOCK
                   : c->cluster  ? "insert_distributed_sync=1&" CH_ONE_BLOCK
                                 : CH_ONE_BLOCK;
    int64_t backoff = 100;
    for (int round = 0;; round++) {
        bool amb = false;
        int rc = pd__ch_exec(c, sql, (const uint8_t *)rows->data, rows->len, settings, NULL,
                             by_write_id ? &amb : NULL, err);
        if (rc == 0 || !amb || round + 1 >= c->retries)
            return rc;
        pd_err e2;
        pd_err_clear(&e2);
        int64_t have = count_written(c, b, table, &e2);
        if (have == (int64_t)expect)
            return 0;
        if (have != 0) /* some rows landed (or unknown): never sent twice */
            return have < 0
                       ? rc
                       : pd_err_set(err, -EIO,
                                    "%s (INSERT INTO %s: %lld of %llu rows "
                                    "written; not retried)",
                                    err->msg, table, (long long)have, (unsigned long long)expect);
        struct timespec ts = {backoff / 1000, (long)(backoff % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        backoff = backoff * 2 > 2000 ? 2000 : backoff * 2;
    }
}

int pd__ch_insert_block(pd_ch *c, const char *table, const pd_buf *rows, pd_err *err)
{
    return insert_rows(c, NULL, table, rows, false, 0, err);
}

/* One INSERT run on its own thread so that the five of a batch (stacks,
 * locations, series, series_index: rows safe to repeat, as these tables replace; and
 * samples, settled by write_id when its outcome is unknown) and its
 * PD_EEXIST check go at once. */
typedef struct par_insert {
    pd_ch *c;
    const char *table;
    ch_batch *b;     /* by write_id (samples): the batch, else NULL */
    uint64_t expect; /* by write_id: the rows of the batch */
    pd_buf rows;
    int rc;
    pd_err err;
    pthread_t th;
    bool started;
} par_insert;

static void *par_main(void *arg)
{
    par_insert *p = arg;
    p->rc = insert_rows(p->c, p->b, p->table, &p->rows, p->b != NULL, p->expect, &p->err);
    return NULL;
}

static void par_start(par_insert *p)
{
    p->started = pthread_create(&p->th, NULL, par_main, p) == 0;
    if (!p->started)
        par_main(p);
}

static void par_join(par_insert *p)
{
    if (p->started)
        pthread_join(p->th, NULL);
    p->started = false;
}

/* A failed INSERT of profile rows may have written some (a Distributed
 * INSERT with one shard down writes the others; an answer lost after the
 * server wrote): those profiles would be stored but not acknowledged.
 * Deletes them by write_id on every server that answers (ALTER ... DELETE,
 * a mutation ClickHouse applies in the background), best effort: logged. */
static void undo_profiles(pd_ch *c, ch_batch *b)
{
    pd_buf sql;
    pd_buf_init(&sql, 0);
    int rc = pd_buf_printf(&sql, "ALTER TABLE %s%s DELETE WHERE write_id IN (", c->profiles_table,
                           pd__ch_local_suffix(c));
    bool first = true;
    for (ch_entry *e = b->head; rc == 0 && e; e = e->next)
        if (e->rc == 0) {
            rc = pd_buf_printf(&sql, "%s%llu", first ? "" : ",", (unsigned long long)e->write_id);
            first = false;
        }
    rc = rc ? rc : pd_buf_putc(&sql, ')');
    rc = rc ? rc : pd_buf_putc(&sql, 0);
    pd_err err;
    pd_err_clear(&err);
    if (rc == 0 && !c->cluster && /* one server: the others are its failover */
        pd__ch_exec(c, (const char *)sql.data, NULL, 0, NULL, NULL, NULL, &err) < 0)
        pd_log(PD_LOG_WARN, "clickhouse: cannot delete the rows of a failed insert", "err=\"%s\"",
               err.msg);
    for (size_t u = 0; rc == 0 && c->cluster && u < c->n_urls; u++) /* every shard */
        if (pd__ch_exec_on(c, u, (const char *)sql.data, NULL, &err) < 0)
            pd_log(PD_LOG_WARN, "clickhouse: cannot delete the rows of a failed insert",
                   "url=%s err=\"%s\"", c->urls[u], err.msg);
    pd_buf_release(&sql);
}

/* Whether e needs the PD_EEXIST check: its series is unknown to this
 * profd (never stored by it since start, or forgotten after a failed batch
 * or a read that missed a stack), or e is not newer than the series' last
 * profile this profd stored. */
static bool exist_check_needed(const pd_ch *c, const ch_entry *e)
{
    uint64_t last;
    return !pd_u64map_get(&c->known_last, e->fp, &last) || last == 0 || (uint64_t)e->ts + 1 <= last;
}

/* The INSERTs of a batch's first round trip: stacks, series, series_index,
 * samples and (schema 7) locations. */
#define N_PAR 5

/* Whether the stacks row row[0..n) (day, key, String) holds a schema-7
 * location: those go to locations_v1, every other to stacks_v3. */
static bool row_is_location(const uint8_t *row, size_t n)
{
    ch_rd r = {row, n, 10, false};
    const uint8_t *s;
    size_t sn;
    pd__ch_rd_str(&r, &s, &sn);
    return !r.bad && pd__ch_row_is_location_v7(s, sn);
}

static void flush(pd_ch *c, ch_batch *b)
{
    pd_err err;
    pd_err_clear(&err);
    pd_buf sql, resp, rows;
    pd_buf_init(&sql, 0);
    pd_buf_init(&resp, 64u << 20);
    pd_buf_init(&rows, 0);
    pd_u64map seen, seen_fp;
    pd_u64map_init(&seen);
    pd_u64map_init(&seen_fp);
    par_insert par[N_PAR] = {{.c = c, .table = "stacks_v3"},
                             {.c = c, .table = "series_v3"},
                             {.c = c, .table = "series_index_v3"},
                             {.c = c, .table = PD_CH_SAMPLES, .b = b},
                             {.c = c, .table = "locations_v1"}};
    for (int k = 0; k < N_PAR; k++) {
        pd_buf_init(&par[k].rows, 0);
        pd_err_clear(&par[k].err);
    }
    int rc = 0;
    size_t n_live;
    int64_t t0 = pd_mono_ns();
    if (__atomic_exchange_n(&c->forget_known, false, __ATOMIC_RELAXED)) {
        pd_u64map_release(&c->known_stacks);
        pd_u64map_init(&c->known_stacks);
        pd_u64map_release(&c->known_series);
        pd_u64map_init(&c->known_series);
        pd_u64map_release(&c->known_last);
        pd_u64map_init(&c->known_last);
    }

    /* stacks, series and their index rows once per stack (series) and day
       of the profiles using them (schema v3: retention drops a stack's old
       days only; one still used has a newer row). For every entry: rows of
       one refused below as PD_EEXIST are already there or harmless, as these
       tables replace */
    for (ch_entry *e = b->head; e; e = e->next) {
        size_t start = 0;
        uint64_t v, dv = (uint64_t)e->day + 1;
        for (size_t i = 0; i < e->n_stacks; i++) {
            uint64_t h = e->stack_hash[i];
            size_t end = e->stack_end[i];
            if (!(pd_u64map_get(&c->known_stacks, h, &v) && v == dv) &&
                !(pd_u64map_get(&seen, h, &v) && v == dv) &&
                (pd_u64map_put(&seen, h, dv) < 0 ||
                 pd_buf_append(
                     &par[row_is_location((const uint8_t *)e->stack_rows.data + start, end - start)
                              ? 4
                              : 0]
                          .rows,
                     e->stack_rows.data + start, end - start) < 0)) {
                rc = pd_err_set(&err, PD_ENOMEM, "out of memory batching inserts");
                goto fail;
            }
            start = end;
        }
        if ((pd_u64map_get(&c->known_series, e->fp, &v) && v == (uint64_t)e->day + 1) ||
            (pd_u64map_get(&seen_fp, e->fp, &v) && v == (uint64_t)e->day + 1))
            continue;
        if (pd_u64map_put(&seen_fp, e->fp, (uint64_t)e->day + 1) < 0 ||
            pd_buf_append(&par[1].rows, e->series_row.data, e->series_row.len) < 0 ||
            pd_buf_append(&par[2].rows, e->index_rows.data, e->index_rows.len) < 0) {
            rc = pd_err_set(&err, PD_ENOMEM, "out of memory batching inserts");
            goto fail;
        }
    }
    /* samples at once with them (2 round trips a batch, not 3): the rows of
       an entry refused below as PD_EEXIST are then written too, under a
       write_id no profiles row has, so no query ever counts them (they go
       with their day) */
    for (ch_entry *e = b->head; e; e = e->next)
        par[3].expect += e->n_samples;
    if (gather(b, offsetof(ch_entry, sample_rows), &par[3].rows, &n_live) < 0) {
        rc = pd_err_set(&err, PD_ENOMEM, "out of memory batching inserts");
        goto fail;
    }
    for (int k = 0; k < N_PAR; k++)
        par_start(&par[k]);

    /* meanwhile: profiles already stored at the same (series, time): PD_EEXIST.
       Only for entries not newer than the last profile of their series this
       profd stored (known_last; a series has one writer, clickhouse.h): a
       fleet's pushes are each newer than its series' last, so a batch of
       known series sends no SELECT at all */
    /* the fingerprints and days alone too, for the primary key and the
       partitions (a tuple IN alone scanned the whole table: a batch's CPU
       in ClickHouse grew with the database) */
    size_t n_check = 0;
    for (ch_entry *e = b->head; e; e = e->next)
        if ((e->check = exist_check_needed(c, e)))
            n_check++;
    if (n_check) {
        rc = pd_buf_printf(&sql, "SELECT fingerprint, ts FROM %s WHERE fingerprint IN (",
                           pd__ch_profiles_read(c));
        bool first = true;
        for (ch_entry *e = b->head; rc == 0 && e; e = e->next)
            if (e->check) {
                rc = pd_buf_printf(&sql, "%s%llu", first ? "" : ",", (unsigned long long)e->fp);
                first = false;
            }
        rc = rc ? rc : pd_buf_puts(&sql, ") AND day IN (");
        first = true;
        for (ch_entry *e = b->head; rc == 0 && e; e = e->next)
            if (e->check) {
                rc = first ? 0 : pd_buf_putc(&sql, ',');
                rc = rc ? rc : pd__ch_put_sql_day(&sql, e->day);
                first = false;
            }
        rc = rc ? rc : pd_buf_puts(&sql, ") AND (fingerprint, ts) IN (");
        first = true;
        for (ch_entry *e = b->head; rc == 0 && e; e = e->next)
            if (e->check) {
                rc = pd_buf_printf(&sql, "%s(%llu,%lld)", first ? "" : ",",
                                   (unsigned long long)e->fp, (long long)e->ts);
                first = false;
            }
        rc = rc ? rc : pd_buf_puts(&sql, ") FORMAT RowBinary");
        rc = rc ? rc : pd_buf_putc(&sql, 0);
        if (rc < 0)
            rc = pd_err_set(&err, PD_ENOMEM, "out of memory batching inserts");
        else
            rc = pd__ch_exec(c, (const char *)sql.data, NULL, 0, NULL, &resp, NULL, &err);
        pd_metrics_add("profd_clickhouse_exist_checks_total", NULL, 1);
    }
    for (int k = 0; k < N_PAR; k++) {
        par_join(&par[k]);
        if (rc == 0 && par[k].rc < 0) {
            rc = par[k].rc;
            err = par[k].err;
        }
    }
    if (rc < 0)
        goto fail;
    ch_rd r = {(const uint8_t *)resp.data, resp.len, 0, false};
    while (pd__ch_rd_more(&r)) {
        uint64_t fp = pd__ch_rd_u64(&r);
        int64_t ts = (int64_t)pd__ch_rd_u64(&r);
        for (ch_entry *e = b->head; e; e = e->next)
            if (e->rc == 0 && e->fp == fp && e->ts == ts)
                e->rc =
                    pd_err_set(&e->err, PD_EEXIST,
                               "a profile of this series at %lld is already stored", (long long)ts);
    }

    /* then profiles (the row that makes a profile visible), and beside it
       (agg_flush_idle_ms < 0: c->aggw NULL) the live entries' aggs_v1 rows
       (schema 5). These are not part of the acknowledgement: whichever of
       the two fails, lands twice or half, a bucket's reconciliation row (n,
       wsum) then differs from its profiles rows and merges read that bucket
       from the samples rows (ch_agg.c) — exact either way; so an aggs INSERT
       whose outcome is unknown is not sent again, and its failure only
       logged and counted. With c->aggw the rows wait, summed per
       series-bucket, for the bucket to go idle (ch_aggw.c): added below once
       the profile rows are written */
    par_insert pa = {.c = c, .table = "aggs_v1"};
    pd_buf_init(&pa.rows, 0);
    pd_err_clear(&pa.err);
    if (!c->aggw) {
        if (gather(b, offsetof(ch_entry, agg_rows), &pa.rows, &n_live) == 0)
            par_start(&pa);
        else
            pa.rc = pd_err_set(&pa.err, PD_ENOMEM, "out of memory batching the aggs_v1 rows");
    }
    pd_buf_reset(&rows);
    if (gather(b, offsetof(ch_entry, prof_row), &rows, &n_live) < 0)
        rc = pd_err_set(&err, PD_ENOMEM, "out of memory batching inserts");
    else
        rc = insert_rows(c, b, c->profiles_table, &rows, true, n_live, &err);
    par_join(&pa);
    pd_buf_release(&pa.rows);
    if (pa.rc < 0) {
        pd_log(PD_LOG_WARN, "clickhouse: aggs_v1 rows not written (merges read their buckets raw)",
               "profiles=%zu err=\"%s\"", n_live, pa.err.msg);
        pd_metrics_add("profd_clickhouse_agg_write_errors_total", NULL, 1);
    }
    if (rc < 0) {
        undo_profiles(c, b);
        goto fail;
    }

    /* written: remember stacks and series */
    if (c->known_stacks.len > (4u << 20))
        pd_u64map_release(&c->known_stacks), pd_u64map_init(&c->known_stacks);
    if (c->known_series.len > (1u << 20))
        pd_u64map_release(&c->known_series), pd_u64map_init(&c->known_series);
    if (c->known_last.len > (1u << 20))
        pd_u64map_release(&c->known_last), pd_u64map_init(&c->known_last);
    for (ch_entry *e = b->head; e; e = e->next) {
        if (e->rc)
            continue;
        uint64_t last;
        if (!pd_u64map_get(&c->known_last, e->fp, &last) || last < (uint64_t)e->ts + 1)
            (void)pd_u64map_put(&c->known_last, e->fp, (uint64_t)e->ts + 1);
        for (size_t i = 0; i < e->n_stacks; i++)
            (void)pd_u64map_put(&c->known_stacks, e->stack_hash[i], (uint64_t)e->day + 1);
        (void)pd_u64map_put(&c->known_series, e->fp, (uint64_t)e->day + 1);
        if (c->aggw) /* stored: its sums join its series-bucket's */
            (void)pd__ch_aggw_add(c, e);
    }
    pd_metrics_add("profd_clickhouse_batches_total", NULL, 1);
    pd_metrics_add("profd_clickhouse_inserted_rows_total", NULL, (double)par[3].expect);
    pd_metrics_add("profd_clickhouse_inserted_profiles_total", NULL, (double)n_live);
    pd_metrics_add("profd_clickhouse_batch_seconds_sum", NULL, (double)(pd_mono_ns() - t0) / 1e9);
    goto out;
fail:
    pd_log(PD_LOG_ERROR, "clickhouse batch failed", "profiles=%zu err=\"%s\"", b->n, err.msg);
    /* some rows of it may be stored (an undo not applied yet): pushes of
       its series are checked again */
    for (ch_entry *e = b->head; e; e = e->next)
        (void)pd_u64map_put(&c->known_last, e->fp, 0);
    pd_metrics_add("profd_clickhouse_failed_profiles_total", NULL, (double)b->n);
    fail_live(b, rc, &err);
out:
    for (int k = 0; k < N_PAR; k++)
        pd_buf_release(&par[k].rows);
    pd_u64map_release(&seen);
    pd_u64map_release(&seen_fp);
    pd_buf_release(&sql);
    pd_buf_release(&resp);
    pd_buf_release(&rows);
}

bool pd__ch_batch_full(const pd_ch *c)
{
    const ch_batch *b = c->pending;
    return b && (b->rows >= c->batch_rows || b->bytes >= c->batch_bytes ||
                 (c->batch_profiles && b->n >= c->batch_profiles));
}

/* The gathering window after a batch of n profiles, ms (top of the file):
 * at least batch_wait_ms. */
static int64_t window_ms(const pd_ch *c, size_t n)
{
    int64_t w;
    if (c->flush_interval_ms <= 0 || n <= 1)
        w = 0;
    else if (n >= PD_CH_FULL_WINDOW_PROFILES)
        w = c->flush_interval_ms;
    else
        w = c->flush_interval_ms * (int64_t)(n - 1) / (PD_CH_FULL_WINDOW_PROFILES - 1);
    return w > c->batch_wait_ms ? w : c->batch_wait_ms;
}

/* Waits on cv_work until the window after the batch started at start_ms
 * holding prev profiles is over — the window widening as the gathering
 * batch grows — or stopping, or the pending batch full. */
static void wait_window(pd_ch *c, int64_t start_ms, size_t prev)
{
    for (;;) {
        size_t n = c->pending && c->pending->n > prev ? c->pending->n : prev;
        int64_t until_ms = start_ms + window_ms(c, n);
        int64_t now = pd_mono_ns() / 1000000;
        if (c->stopping || now >= until_ms || pd__ch_batch_full(c))
            return;
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        int64_t ns = dl.tv_nsec + (until_ms - now) * 1000000;
        dl.tv_sec += ns / 1000000000;
        dl.tv_nsec = ns % 1000000000;
        pthread_cond_timedwait(&c->cv_work, &c->mu, &dl);
    }
}

void *pd__ch_writer_main(void *arg)
{
    pd_ch *c = arg;
    int64_t last_start = INT64_MIN / 2; /* monotonic ms */
    size_t last_n = 0;                  /* profiles in the batch started then */
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->pending && !c->stopping) {
            int64_t wait = c->aggw ? pd__ch_aggw_wait_ms(c) : -1;
            if (wait < 0) {
                pthread_cond_wait(&c->cv_work, &c->mu);
            } else if (wait == 0) { /* aggs_v1 sums due: written meanwhile */
                pthread_mutex_unlock(&c->mu);
                pd__ch_aggw_flush(c, PD_CH_AGGW_DUE);
                pthread_mutex_lock(&c->mu);
            } else {
                struct timespec dl;
                clock_gettime(CLOCK_REALTIME, &dl);
                int64_t ns = dl.tv_nsec + (wait % 1000) * 1000000;
                dl.tv_sec += wait / 1000 + ns / 1000000000;
                dl.tv_nsec = ns % 1000000000;
                pthread_cond_timedwait(&c->cv_work, &c->mu, &dl);
            }
        }
        if (!c->pending)
            break;
        wait_window(c, last_start, last_n);
        last_start = pd_mono_ns() / 1000000;
        ch_batch *b = c->pending;
        c->pending = NULL;
        last_n = b->n;
        pd_metrics_add("profd_clickhouse_queued_profiles", NULL, -(double)b->n);
        if (c->bp_waiting) /* back-pressured appenders */
            pthread_cond_broadcast(&c->cv_done);
        pthread_mutex_unlock(&c->mu);
        flush(c, b);
        pthread_mutex_lock(&c->mu);
        b->done = true;
        pthread_cond_broadcast(&b->cv);
        /* acknowledged: now the aggs_v1 sums that are due (idle, or over the
           cap), while the next batch gathers (not waiting for a flush that
           maintenance is writing: the next batch would wait too) */
        if (c->aggw && pd__ch_aggw_wait_ms(c) == 0) {
            pthread_mutex_unlock(&c->mu);
            pd__ch_aggw_flush(c, PD_CH_AGGW_DUE_TRY);
            pthread_mutex_lock(&c->mu);
        }
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}
