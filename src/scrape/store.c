/*
 * scrape/store.c — the store step of the scrape loop: the scrapes that
 * ended, stored together by one call, on a thread of their own (contract in
 * scrape_int.h; the loop is manager.c).
 *
 * Each round of the loop (manager.c) takes every transfer that ended; each
 * becomes a pd__scrape_fin in the storer's gathering array (decoded there
 * when the body came with HTTP 200), and the round hands the array over:
 *
 *     pd__scrape_fin_decode   loop, per scrape: decode, keep_sample_type,
 *                             split by the samples' labels, encode the parts
 *     pd__scrape_store        store thread, per call: one
 *                             pd_storage_append_many of every label set of
 *                             every scrape handed over since the last call,
 *                             then each scrape's outcome from its items
 *     done (manager.c)        store thread, per scrape: health, metrics,
 *                             adaptive capture; the target is free again
 *
 * Two arrays: the loop fills one while the store thread stores the other;
 * a hand-over swaps them when the thread is idle (under mu), else the loop
 * keeps filling and the next hand-over after the call takes them all. The
 * thread wakes the loop after each call (idle) so that nothing waits for
 * the loop's next event. Without the thread (a test stepping the loop) a
 * hand-over stores at once, before the round returns.
 *
 * Why one call, and why not on the loop: on ClickHouse an append returns
 * when the batch it went into is acknowledged (group commit, batches at
 * least --clickhouse.flush-interval apart), so profiles stored one by one
 * waited one batch each — ~10 a second, however many targets — and the
 * loop, blocked meanwhile, started no scrape and let the timeouts of the
 * transfers in flight run (figures in bench/scrape_clickhouse/RESULTS.md).
 * On the embedded store the call is the same appends in a row.
 *
 * A scrape's label sets are items first..first+n of the call, in order; the
 * first that failed gives the scrape's outcome (as when they were stored
 * one by one and the first failure stopped the rest; now the others are
 * stored all the same).
 */
#include <errno.h>
#include <pthread.h>
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
                        "Storage calls of the scrape loop's store thread, each holding every "
                        "label set of every scrape that ended since the previous call (on "
                        "ClickHouse, one batch).");
    pd_metrics_add("profd_scrape_store_batches_total", NULL, 0);
    pd_metrics_describe("profd_scrape_store_seconds_total", PD_METRIC_COUNTER,
                        "Wall time spent in those storage calls (the scrape loop goes on "
                        "meanwhile).");
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

/* ---- the store step of the loop ---- */

struct pd__scrape_storer {
    pd_storage *st;
    pd__scrape_done_fn done;
    void (*idle)(void *arg);
    void *arg;
    pd__scrape_fin *acc; /* the scrapes being gathered: the loop's */
    size_t acc_n, acc_cap;
    pd__scrape_fin *work; /* the scrapes being stored: the store thread's while busy */
    size_t work_n, work_cap;
    pthread_mutex_t mu; /* guards busy, stop and the swap of acc and work */
    pthread_cond_t cv;
    bool busy, stop, running;
    pthread_t thread;
};

/* Stores v[0..n), releases each, passes each to done. */
static void store_all(pd__scrape_storer *s, pd__scrape_fin *v, size_t n)
{
    pd__scrape_store(s->st, v, n);
    for (size_t i = 0; i < n; i++) {
        pd__scrape_fin_release(&v[i]);
        s->done(s->arg, &v[i]);
    }
}

static void *store_thread(void *arg)
{
    pd__scrape_storer *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->busy && !s->stop)
            pthread_cond_wait(&s->cv, &s->mu);
        if (!s->busy)
            break;
        pthread_mutex_unlock(&s->mu);
        store_all(s, s->work, s->work_n);
        pthread_mutex_lock(&s->mu);
        s->work_n = 0;
        s->busy = false;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        if (s->idle) /* the loop hands over what gathered meanwhile */
            s->idle(s->arg);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int pd__scrape_storer_new(pd_storage *st, pd__scrape_done_fn done, void (*idle)(void *arg),
                          void *arg, pd__scrape_storer **out)
{
    pd__scrape_storer *s = calloc(1, sizeof *s);
    *out = NULL;
    if (!s)
        return PD_ENOMEM;
    s->acc = calloc(64, sizeof *s->acc);
    s->work = calloc(64, sizeof *s->work);
    if (!s->acc || !s->work) {
        free(s->acc);
        free(s->work);
        free(s);
        return PD_ENOMEM;
    }
    s->acc_cap = s->work_cap = 64;
    s->st = st;
    s->done = done;
    s->idle = idle;
    s->arg = arg;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    *out = s;
    return 0;
}

void pd__scrape_storer_flush(pd__scrape_storer *s, bool wait)
{
    if (!s->running) {
        store_all(s, s->acc, s->acc_n);
        s->acc_n = 0;
        return;
    }
    pthread_mutex_lock(&s->mu);
    for (;;) {
        if (!s->busy && s->acc_n) { /* swap: the loop gathers into the other array */
            pd__scrape_fin *v = s->work;
            size_t cap = s->work_cap;
            s->work = s->acc;
            s->work_n = s->acc_n;
            s->work_cap = s->acc_cap;
            s->acc = v;
            s->acc_cap = cap;
            s->acc_n = 0;
            s->busy = true;
            pthread_cond_broadcast(&s->cv);
        }
        if (!wait || (!s->busy && !s->acc_n))
            break;
        pthread_cond_wait(&s->cv, &s->mu);
    }
    pthread_mutex_unlock(&s->mu);
}

pd__scrape_fin *pd__scrape_storer_slot(pd__scrape_storer *s)
{
    if (s->acc_n == s->acc_cap) {
        pd__scrape_fin *v = realloc(s->acc, 2 * s->acc_cap * sizeof *v);
        if (v) {
            s->acc = v;
            s->acc_cap *= 2;
        } else { /* out of memory: what gathered is stored first */
            pd__scrape_storer_flush(s, true);
        }
    }
    pd__scrape_fin *f = &s->acc[s->acc_n++];
    memset(f, 0, sizeof *f);
    return f;
}

int pd__scrape_storer_start(pd__scrape_storer *s, pd_err *err)
{
    int rc = pthread_create(&s->thread, NULL, store_thread, s);
    if (rc)
        return pd_err_set(err, -rc, "cannot start the scrape store thread: %s", strerror(rc));
    s->running = true;
    return 0;
}

void pd__scrape_storer_free(pd__scrape_storer *s)
{
    if (!s)
        return;
    pd__scrape_storer_flush(s, true);
    if (s->running) {
        pthread_mutex_lock(&s->mu);
        s->stop = true;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->thread, NULL);
    }
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->acc);
    free(s->work);
    free(s);
}
