/*
 * scrape/store.c — the scrapes one round of the loop finished, stored
 * together (contract in scrape_int.h; the loop is manager.c).
 *
 * A round of the loop (manager.c) takes every transfer that ended; those
 * that brought a body with HTTP 200 become a pd__scrape_fin each:
 *
 *     pd__scrape_fin_decode   per scrape: decode, keep_sample_type, split
 *                             by the samples' labels, encode the parts
 *     pd__scrape_store        the round: one pd_storage_append_many of every
 *                             label set of every decoded scrape, then each
 *                             scrape's outcome from its items' results
 *     (manager.c)             per target: health, metrics, adaptive capture
 *
 * Why one call: on ClickHouse an append returns when the batch it went
 * into is acknowledged (group commit, batches at least
 * --clickhouse.flush-interval apart), so storing the round's profiles one
 * by one waited one batch each — a few profiles a second, whatever the
 * number of targets — while the loop, blocked, started no scrape and
 * counted the wait against the timeouts of the transfers in flight. One
 * call puts them in one batch: one wait per round (figures in
 * bench/scrape_clickhouse/RESULTS.md). On the embedded store the call is
 * the same appends in a row.
 *
 * A scrape's label sets are items first..first+n of the call, in order; the
 * first that failed gives the scrape's outcome (as when they were stored
 * one by one and the first failure stopped the rest; now the others are
 * stored all the same).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/metrics.h"
#include "base/time.h"
#include "scrape/scrape_int.h"

void pd__scrape_store_describe(void)
{
    pd_metrics_describe("profd_scrape_store_batches_total", PD_METRIC_COUNTER,
                        "Storage calls of the scrape loop: one per round of the loop that "
                        "finished scrapes with a profile, holding every label set of every such "
                        "scrape (on ClickHouse, one batch).");
    pd_metrics_add("profd_scrape_store_batches_total", NULL, 0);
    pd_metrics_describe("profd_scrape_store_seconds_total", PD_METRIC_COUNTER,
                        "Wall time the scrape loop spent in those storage calls; no scrape "
                        "starts or reads its answer meanwhile.");
    pd_metrics_add("profd_scrape_store_seconds_total", NULL, 0);
}

void pd__scrape_fin_decode(pd__scrape_fin *f, const pd_pprof_limits *lim)
{
    pd_err e;
    pd_err_clear(&e);
    f->ready = false;
    f->inuse = -1;
    f->msg[0] = '\0';
    f->outcome = "success";
    f->enc = NULL;
    memset(&f->sp, 0, sizeof f->sp);
    pd_buf_init(&f->kept, f->max_body);
    int rc = pd_profile_decode(&f->p, f->body, f->len, lim, &e);
    if (rc) {
        memset(&f->p, 0, sizeof f->p); /* nothing to free (pprof.h) */
        f->outcome = rc == PD_ETOOBIG ? "too_large" : "bad_profile";
        snprintf(f->msg, sizeof f->msg, "%s", e.msg[0] ? e.msg : pd_strerror(rc));
        return;
    }
    if (f->keep && (rc = pd__scrape_keep_types(&f->p, f->keep, &f->kept, &e)) != 0) {
        f->outcome = rc == PD_ENOMEM ? "error" : "bad_profile";
        snprintf(f->msg, sizeof f->msg, "%s", e.msg[0] ? e.msg : pd_strerror(rc));
        goto fail;
    }
    rc = pd_pprof_split_by_labels(&f->p, f->labels, PD__SCRAPE_MAX_SPLIT, &f->sp, &e);
    if (rc == PD_ETOOBIG) { /* stored whole: its labels stay on the samples */
        pd_log(PD_LOG_WARN, "scrape: profile not split by its labels", "err=\"%s\"", e.msg);
        pd_metrics_add("profd_scrape_split_skipped_total", NULL, 1);
        memset(&f->sp, 0, sizeof f->sp);
        rc = 0;
    }
    if (rc == 0 && f->sp.n && !(f->enc = calloc(f->sp.n, sizeof *f->enc)))
        rc = PD_ENOMEM;
    for (size_t i = 0; rc == 0 && i < f->sp.n; i++) {
        pd_buf_init(&f->enc[i], 0);
        if ((rc = pd_profile_encode(&f->sp.v[i].view, true, &f->enc[i])) < 0)
            pd_err_set(&e, rc, "encoding the profile of label set %zu: %s", i + 1, pd_strerror(rc));
    }
    if (rc < 0) { /* as a storage failure before: the target is down */
        f->outcome = "error";
        snprintf(f->msg, sizeof f->msg, "storage: %s", e.msg[0] ? e.msg : pd_strerror(rc));
        goto fail;
    }
    f->ready = true;
    return;
fail:
    pd__scrape_fin_release(f);
}

/* The outcome of f from its first failed item (rc, err). */
static void set_failure(pd__scrape_fin *f, int rc, const pd_err *e)
{
    if (rc == PD_EEXIST) {
        /* this series already has a profile at this ms (two targets with
         * the same labels): the target itself is fine */
        f->outcome = "duplicate";
    } else if (rc == PD_EOUTOFBOUNDS) {
        /* the scrape's start time is outside the store's window: the clock
         * of this machine jumped, or the retention is tiny */
        f->outcome = "out_of_bounds";
        snprintf(f->msg, sizeof f->msg, "storage: %s", e->msg);
    } else {
        f->outcome = "error";
        snprintf(f->msg, sizeof f->msg, "storage: %s", e->msg[0] ? e->msg : pd_strerror(rc));
    }
}

size_t pd__scrape_store(pd_storage *st, pd__scrape_fin *v, size_t n)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        if (v[i].ready)
            total += v[i].sp.n ? v[i].sp.n : 1;
    if (!total)
        return 0;
    pd_storage_item *items = calloc(total, sizeof *items);
    if (!items) {
        for (size_t i = 0; i < n; i++)
            if (v[i].ready) {
                v[i].outcome = "error";
                snprintf(v[i].msg, sizeof v[i].msg, "storage: out of memory");
            }
        return 0;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        pd__scrape_fin *f = &v[i];
        if (!f->ready)
            continue;
        f->first = k;
        f->n = f->sp.n ? f->sp.n : 1;
        const uint8_t *body = f->keep ? (const uint8_t *)f->kept.data : f->body;
        size_t len = f->keep ? f->kept.len : f->len;
        if (!f->sp.n) {
            items[k++] = (pd_storage_item){f->labels, f->ts_ms, body, len, &f->p, 0, {{0}}};
            continue;
        }
        for (size_t j = 0; j < f->sp.n; j++)
            items[k++] = (pd_storage_item){&f->sp.v[j].labels,
                                           f->ts_ms,
                                           (const uint8_t *)f->enc[j].data,
                                           f->enc[j].len,
                                           &f->sp.v[j].view,
                                           0,
                                           {{0}}};
    }
    int64_t t0 = pd_mono_ns();
    size_t stored = pd_storage_append_many(st, items, total, false);
    pd_metrics_add("profd_scrape_store_batches_total", NULL, 1);
    pd_metrics_add("profd_scrape_store_seconds_total", NULL, (double)(pd_mono_ns() - t0) / 1e9);
    for (size_t i = 0; i < n; i++) {
        pd__scrape_fin *f = &v[i];
        if (!f->ready)
            continue;
        size_t bad = f->n;
        for (size_t j = 0; j < f->n && bad == f->n; j++)
            if (items[f->first + j].rc)
                bad = j;
        if (bad < f->n) {
            set_failure(f, items[f->first + bad].rc, &items[f->first + bad].err);
            continue;
        }
        f->inuse = pd__adaptive_heap_inuse(&f->p);
        pd_metrics_add("profd_ingested_profiles_total", "source=\"scrape\"", 1);
        pd_metrics_add("profd_ingested_bytes_total", "source=\"scrape\"", (double)f->len);
    }
    free(items);
    return stored;
}

void pd__scrape_fin_release(pd__scrape_fin *f)
{
    for (size_t i = 0; f->enc && i < f->sp.n; i++)
        pd_buf_release(&f->enc[i]);
    free(f->enc);
    f->enc = NULL;
    pd_pprof_split_release(&f->sp);
    memset(&f->sp, 0, sizeof f->sp);
    pd_buf_release(&f->kept);
    pd_profile_release(&f->p); /* zeroed when never decoded */
    f->ready = false;
}
