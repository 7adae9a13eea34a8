/*
 * storage/storage.c — the storage.h entry points: each call goes to the
 * backend the store was opened with (options.backend).
 *
 * The TSDB's entry points are pd_tsdb_* (tsdb/tsdb.h), the ClickHouse
 * backend's pd__ch_* (clickhouse/clickhouse.h). A pd_storage is a tag and
 * the backend's own handle.
 *
 * The deltas of cumulative profiles (pd_storage_aggregate_delta,
 * pd_storage_read_point_before) are the TSDB's own; for ClickHouse they are
 * made here from its primitives with the same rule (storage.h): the
 * weights of each series from its points (the last profile of each
 * lifetime +1, the baseline -1), each weighted profile aggregated alone.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/cancel.h"
#include "base/metrics.h"
#include "base/time.h"
#include "storage/delta_int.h"
#include "storage/latest_int.h"
#include "storage/storage.h"
#include "storage/clickhouse/clickhouse.h"
#include "storage/tsdb/tsdb.h"

struct pd_storage {
    pd_storage_backend backend;
    pd_tsdb *tsdb;
    pd_ch *ch;
    /* aggregations walking the store at once (options.max_aggregations) */
    pthread_mutex_t agg_mu;
    pthread_cond_t agg_cv;                   /* CLOCK_MONOTONIC */
    unsigned agg_max;                        /* 0: no limit */
    unsigned agg_running;                    /* turns held */
    struct agg_waiter *agg_queue, *agg_tail; /* waiting, in arrival order */
    struct append_observer *observer;        /* pd_storage_on_append, __atomic */
};

/* pd_storage_on_append's pair; replaced ones are kept until close (an
 * append may still be calling one). */
typedef struct append_observer {
    pd_storage_append_fn fn;
    void *ctx;
    struct append_observer *prev;
} append_observer;

/* ---- turns for aggregations (storage.h, max_aggregations) ---- */

static unsigned agg_limit(int opt)
{
    if (opt < 0)
        return 0;
    if (opt > 0)
        return (unsigned)opt;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n >= 4 ? (unsigned)(n / 2) : 1;
}

/* A call waiting for its turn; turns are handed over in arrival order. */
typedef struct agg_waiter {
    struct agg_waiter *next;
    bool granted;
} agg_waiter;

/* Gives the turn held to the first waiter, or back (agg_mu held). */
static void agg_pass_locked(pd_storage *s)
{
    agg_waiter *w = s->agg_queue;
    if (w) {
        s->agg_queue = w->next;
        if (!s->agg_queue)
            s->agg_tail = NULL;
        w->granted = true; /* the turn goes to it: agg_running unchanged */
        pthread_cond_broadcast(&s->agg_cv);
    } else
        s->agg_running--;
}

/* Waits for a turn (polling every ~20 ms). 0, or poll's negative code. */
static int agg_enter(pd_storage *s, int (*poll)(void *ctx, pd_err *err), void *ctx, pd_err *err)
{
    if (!s->agg_max)
        return 0;
    pthread_mutex_lock(&s->agg_mu);
    if (s->agg_running < s->agg_max && !s->agg_queue) {
        s->agg_running++;
        pthread_mutex_unlock(&s->agg_mu);
        return 0;
    }
    int64_t t0 = pd_mono_ns();
    int rc = 0;
    agg_waiter w = {NULL, false};
    if (s->agg_tail)
        s->agg_tail->next = &w;
    else
        s->agg_queue = &w;
    s->agg_tail = &w;
    pd_metrics_add("profd_storage_merges_waiting", NULL, 1);
    while (!w.granted) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 20 * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&s->agg_cv, &s->agg_mu, &ts);
        if (w.granted || !poll)
            continue;
        pthread_mutex_unlock(&s->agg_mu);
        rc = poll(ctx, err);
        pthread_mutex_lock(&s->agg_mu);
        if (rc < 0)
            break;
    }
    if (rc < 0) {
        if (w.granted) {
            agg_pass_locked(s); /* granted meanwhile: not used */
        } else {                /* out of the queue */
            agg_waiter **pp = &s->agg_queue, *prev = NULL;
            while (*pp != &w) {
                prev = *pp;
                pp = &(*pp)->next;
            }
            *pp = w.next;
            if (s->agg_tail == &w)
                s->agg_tail = prev;
        }
    }
    pthread_mutex_unlock(&s->agg_mu);
    pd_metrics_add("profd_storage_merges_waiting", NULL, -1);
    pd_metrics_add("profd_storage_merge_wait_seconds_total", NULL,
                   (double)(pd_mono_ns() - t0) / 1e9);
    return rc < 0 ? rc : 0;
}

static void agg_leave(pd_storage *s)
{
    if (!s->agg_max)
        return;
    pthread_mutex_lock(&s->agg_mu);
    agg_pass_locked(s);
    pthread_mutex_unlock(&s->agg_mu);
}

int pd_storage_open(const pd_storage_options *opts, pd_storage **out, pd_err *err)
{
    *out = NULL;
    pd_storage *s = calloc(1, sizeof *s);
    if (!s)
        return pd_err_set(err, PD_ENOMEM, "out of memory opening the storage");
    s->backend = opts->backend;
    int rc;
    if (opts->backend == PD_STORAGE_CLICKHOUSE)
        rc = pd__ch_open(opts, &s->ch, err);
    else if (opts->backend == PD_STORAGE_TSDB)
        rc = pd_tsdb_open(opts, &s->tsdb, err);
    else
        rc = pd_err_set(err, PD_EINVAL, "unknown storage backend %d", (int)opts->backend);
    if (rc < 0) {
        free(s);
        return rc;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&s->agg_mu, NULL);
    pthread_cond_init(&s->agg_cv, &ca);
    pthread_condattr_destroy(&ca);
    s->agg_max = agg_limit(opts->max_aggregations);
    *out = s;
    return 0;
}

void pd_storage_close(pd_storage *s)
{
    if (!s)
        return;
    if (s->ch)
        pd__ch_close(s->ch);
    else
        pd_tsdb_close(s->tsdb);
    pthread_cond_destroy(&s->agg_cv);
    pthread_mutex_destroy(&s->agg_mu);
    for (append_observer *o = s->observer, *p; o; o = p) {
        p = o->prev;
        free(o);
    }
    free(s);
}

void pd_storage_on_append(pd_storage *s, pd_storage_append_fn fn, void *ctx)
{
    append_observer *o = calloc(1, sizeof *o);
    if (!o)
        return;
    o->fn = fn;
    o->ctx = ctx;
    o->prev = __atomic_load_n(&s->observer, __ATOMIC_ACQUIRE);
    __atomic_store_n(&s->observer, o, __ATOMIC_RELEASE);
}

static void notify_append(pd_storage *s, const pd_labels *labels, int64_t ts_ms,
                          const pd_profile *profile)
{
    append_observer *o = __atomic_load_n(&s->observer, __ATOMIC_ACQUIRE);
    if (o && o->fn && profile)
        o->fn(o->ctx, labels, ts_ms, profile);
}

int pd_storage_append(pd_storage *s, const pd_labels *labels, int64_t ts_ms, const uint8_t *body,
                      size_t len, const pd_profile *profile, pd_err *err)
{
    int rc = s->ch ? pd__ch_append(s->ch, labels, ts_ms, body, len, profile, err)
                   : pd_tsdb_append(s->tsdb, labels, ts_ms, body, len, profile, err);
    if (rc == 0)
        notify_append(s, labels, ts_ms, profile);
    return rc;
}

int pd_storage_append_shift(pd_storage *s, const pd_labels *labels, int64_t ts_ms,
                            const uint8_t *body, size_t len, const pd_profile *profile,
                            int64_t *stored_ts, pd_err *err)
{
    if (!s->ch) {
        int64_t at = ts_ms;
        int rc = pd_tsdb_append_shift(s->tsdb, labels, ts_ms, body, len, profile, &at, err);
        if (stored_ts && rc == 0)
            *stored_ts = at;
        if (rc == 0)
            notify_append(s, labels, at, profile);
        return rc;
    }
    pd_storage_item it = {
        .labels = labels, .ts_ms = ts_ms, .body = body, .len = len, .profile = profile};
    pd_storage_append_many(s, &it, 1, true);
    if (it.rc == 0 && stored_ts)
        *stored_ts = it.ts_ms;
    if (it.rc < 0 && err)
        *err = it.err;
    return it.rc;
}

size_t pd_storage_append_many(pd_storage *s, pd_storage_item *items, size_t n, bool shift)
{
    size_t stored = 0;
    if (!s->ch) {
        for (size_t i = 0; i < n; i++) {
            pd_storage_item *it = &items[i];
            pd_err_clear(&it->err);
            int64_t at = it->ts_ms;
            it->rc = shift ? pd_tsdb_append_shift(s->tsdb, it->labels, it->ts_ms, it->body, it->len,
                                                  it->profile, &at, &it->err)
                           : pd_tsdb_append(s->tsdb, it->labels, it->ts_ms, it->body, it->len,
                                            it->profile, &it->err);
            if (it->rc == 0) {
                it->ts_ms = at;
                notify_append(s, it->labels, at, it->profile);
                stored++;
            }
        }
        return stored;
    }
    /* ClickHouse: one batch for all; with shift, the items whose ms was
       taken (found when their batch was checked) go again 1 ms later, together */
    pd_storage_item **v = malloc((n ? n : 1) * sizeof *v);
    int64_t *want = malloc((n ? n : 1) * sizeof *want);
    if (!v || !want) {
        free(v);
        free(want);
        for (size_t i = 0; i < n; i++)
            items[i].rc = pd_err_set(&items[i].err, PD_ENOMEM, "out of memory");
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        v[i] = &items[i];
        want[i] = items[i].ts_ms;
    }
    size_t k = n;
    for (int64_t d = 0; k && d <= PD_STORAGE_MAX_SHIFT_MS; d++) {
        pd__ch_append_many(s->ch, v, k);
        size_t again = 0;
        for (size_t j = 0; j < k; j++) {
            pd_storage_item *it = v[j];
            if (it->rc == 0) {
                notify_append(s, it->labels, it->ts_ms, it->profile);
                stored++;
            } else if (shift && it->rc == PD_EEXIST && d < PD_STORAGE_MAX_SHIFT_MS) {
                it->ts_ms = want[it - items] + d + 1;
                v[again++] = it;
            }
        }
        k = again;
    }
    for (size_t i = 0; i < n; i++)
        if (items[i].rc < 0)
            items[i].ts_ms = want[i];
    free(v);
    free(want);
    return stored;
}

int pd_storage_select(pd_storage *s, const pd_matcher *ms, size_t n, int64_t mint, int64_t maxt,
                      pd_series_set *out, pd_err *err)
{
    if (s->ch)
        return pd__ch_select(s->ch, ms, n, mint, maxt, out, err);
    return pd_tsdb_select(s->tsdb, ms, n, mint, maxt, out, err);
}

static int cmp_info_ref(const void *a, const void *b)
{
    uint64_t x = ((const pd_series_info *)a)->ref, y = ((const pd_series_info *)b)->ref;
    return x < y ? -1 : x > y;
}

/* ClickHouse: the selection (put in ref order), then each series' newest
 * point, copied. */
static int select_latest_generic(pd_storage *s, const pd_matcher *ms, size_t n, int64_t mint,
                                 int64_t maxt, pd_series_latest_set *out, pd_err *err)
{
    pd_series_set set = {0};
    int rc = pd__latest_init(out);
    if (rc < 0)
        return pd_err_set(err, rc, "select: out of memory");
    if ((rc = pd_storage_select(s, ms, n, mint, maxt, &set, err)) < 0)
        return rc;
    if (set.n > 1)
        qsort(set.v, set.n, sizeof *set.v, cmp_info_ref);
    for (size_t i = 0; i < set.n && rc >= 0; i++) {
        if (!(i & 4095) && pd_cancel_requested()) {
            rc = pd_err_set(err, PD_ECANCELED, "%s", pd_cancel_message());
            break;
        }
        pd_points pt = {0};
        rc = pd_storage_read_point_before(s, set.v[i].ref, maxt == INT64_MAX ? maxt : maxt + 1, &pt,
                                          err);
        if (rc == PD_ENOTFOUND) { /* gone since selected */
            pd_err_clear(err);
            rc = 0;
        } else if (rc >= 0 && pt.n) {
            rc = pd__latest_add(out, set.v[i].ref, &set.v[i].labels, pt.v[0].ts_ms, pt.v[0].types,
                                pt.v[0].n_types, true, true);
            if (rc < 0)
                rc = pd_err_set(err, rc, "select: out of memory");
        }
        pd_points_release(&pt);
    }
    pd_series_set_release(&set);
    return rc < 0 ? rc : 0;
}

int pd_storage_select_latest(pd_storage *s, const pd_matcher *ms, size_t n, int64_t mint,
                             int64_t maxt, pd_series_latest_set *out, pd_err *err)
{
    if (s->ch)
        return select_latest_generic(s, ms, n, mint, maxt, out, err);
    return pd_tsdb_select_latest(s->tsdb, ms, n, mint, maxt, out, err);
}

int pd_storage_select_overlapping(pd_storage *s, const pd_matcher *ms, size_t n, int64_t mint,
                                  int64_t maxt, pd_series_set *out, pd_err *err)
{
    if (s->ch)
        return pd__ch_select(s->ch, ms, n, mint, maxt, out, err);
    return pd_tsdb_select_overlapping(s->tsdb, ms, n, mint, maxt, out, err);
}

int pd_storage_read_points(pd_storage *s, uint64_t ref, int64_t mint, int64_t maxt, pd_points *out,
                           pd_err *err)
{
    if (s->ch)
        return pd__ch_read_points(s->ch, ref, mint, maxt, out, err);
    return pd_tsdb_read_points(s->tsdb, ref, mint, maxt, out, err);
}

/* Whether points a and b have the same sample types (type and unit, in order). */
static bool same_point_types(const pd_point *a, const pd_point *b)
{
    if (a->n_types != b->n_types || !a->types != !b->types)
        return false;
    for (size_t i = 0; a->types != b->types && i < a->n_types; i++)
        if (strcmp(a->types[i].type ? a->types[i].type : "",
                   b->types[i].type ? b->types[i].type : "") ||
            strcmp(a->types[i].unit ? a->types[i].unit : "",
                   b->types[i].unit ? b->types[i].unit : ""))
            return false;
    return true;
}

int pd_storage_read_type_runs(pd_storage *s, uint64_t ref, int64_t mint, int64_t maxt,
                              pd_points *out, size_t *n_profiles, pd_err *err)
{
    *n_profiles = 0;
    if (!s->ch)
        return pd_tsdb_read_type_runs(s->tsdb, ref, mint, maxt, out, n_profiles, err);
    int rc = pd__ch_read_points(s->ch, ref, mint, maxt, out, err);
    if (rc < 0)
        return rc;
    *n_profiles = out->n;
    size_t k = 0; /* the points, compacted to the first of each run */
    for (size_t i = 0; i < out->n; i++)
        if (!k || !same_point_types(&out->v[k - 1], &out->v[i])) {
            out->v[k] = out->v[i];
            out->v[k++].totals = NULL;
        }
    out->n = k;
    return 0;
}

int pd_storage_read_profile(pd_storage *s, uint64_t ref, int64_t ts_ms, pd_profile *out,
                            pd_buf *raw, pd_err *err)
{
    if (s->ch)
        return pd__ch_read_profile(s->ch, ref, ts_ms, out, raw, err);
    return pd_tsdb_read_profile(s->tsdb, ref, ts_ms, out, raw, err);
}

int pd_storage_aggregate(pd_storage *s, const uint64_t *refs, const uint32_t *group, size_t n,
                         int64_t mint, int64_t maxt, pd_storage_agg_fn fn,
                         int (*poll)(void *ctx, pd_err *err), void *ctx, size_t *n_series,
                         pd_err *err)
{
    int rc = agg_enter(s, poll, ctx, err);
    if (rc < 0)
        return rc;
    if (s->ch)
        rc = pd__ch_aggregate(s->ch, refs, group, n, mint, maxt, fn, poll, ctx, n_series, err);
    else
        rc = pd_tsdb_aggregate(s->tsdb, refs, group, n, mint, maxt, fn, poll, ctx, n_series, err);
    agg_leave(s);
    return rc;
}

/* A part of one side of a diff handed on with its side (poll: the
 * caller's, on the caller's ctx). */
typedef struct side_call {
    pd_storage_agg_fn fn;
    int (*poll)(void *ctx, pd_err *err);
    void *ctx;
    int side;
} side_call;

static int side_part(void *ctx, const pd_storage_agg_part *part, const pd_profile *p, pd_err *err)
{
    side_call *c = ctx;
    pd_storage_agg_part pt = *part;
    pt.side = c->side;
    return c->fn(c->ctx, &pt, p, err);
}

static int side_poll(void *ctx, pd_err *err)
{
    side_call *c = ctx;
    return c->poll(c->ctx, err);
}

/* One group for all of a side's refs (what a diff without `by` asks). */
static bool one_group(const pd_storage_agg_side *sd)
{
    if (sd->n <= 1)
        return true;
    if (!sd->group)
        return false;
    for (size_t i = 1; i < sd->n; i++)
        if (sd->group[i] != sd->group[0])
            return false;
    return true;
}

int pd_storage_aggregate_diff(pd_storage *s, pd_storage_agg_side side[2], pd_storage_agg_fn fn,
                              int (*poll)(void *ctx, pd_err *err), void *ctx, pd_err *err)
{
    side[0].n_series = side[1].n_series = 0;
    if (s->ch && one_group(&side[0]) && one_group(&side[1])) {
        int rc = agg_enter(s, poll, ctx, err); /* one turn for the one pass */
        if (rc < 0)
            return rc;
        rc = pd__ch_aggregate_diff(s->ch, side, fn, poll, ctx, err);
        agg_leave(s);
        return rc;
    }
    /* the two walks, one side after the other */
    int rc = 0;
    for (int k = 0; k < 2 && rc >= 0; k++) {
        side_call c = {fn, poll, ctx, k};
        rc = pd_storage_aggregate(s, side[k].refs, side[k].group, side[k].n, side[k].mint,
                                  side[k].maxt, side_part, poll ? side_poll : NULL, &c,
                                  &side[k].n_series, err);
    }
    return rc;
}

int pd_storage_maintain(pd_storage *s, pd_err *err)
{
    if (s->ch)
        return pd__ch_maintain(s->ch, err);
    return pd_tsdb_maintain(s->tsdb, err);
}

int pd_storage_check_time(pd_storage *s, int64_t ts_ms, pd_err *err)
{
    if (s->ch)
        return pd__ch_check_time(s->ch, ts_ms, err);
    return pd_tsdb_check_time(s->tsdb, ts_ms, err);
}

int pd_storage_workers(pd_storage *s)
{
    return s->ch ? 1 : pd_tsdb_workers(s->tsdb);
}

void pd_storage_stats_get(pd_storage *s, pd_storage_stats *out)
{
    if (s->ch)
        pd__ch_stats_get(s->ch, out);
    else
        pd_tsdb_stats_get(s->tsdb, out);
}

bool pd_storage_ready(pd_storage *s)
{
    return s->ch ? true : pd_tsdb_ready(s->tsdb);
}

int pd_storage_read_point_before(pd_storage *s, uint64_t ref, int64_t t, pd_points *out,
                                 pd_err *err)
{
    if (!s->ch)
        return pd_tsdb_read_point_before(s->tsdb, ref, t, out, err);
    memset(out, 0, sizeof *out);
    if (t == INT64_MIN)
        return 0;
    pd_points pts;
    int rc = pd__ch_read_points(s->ch, ref, INT64_MIN, t - 1, &pts, err);
    if (rc < 0)
        return rc;
    if (pts.n <= 1) {
        *out = pts;
        return 0;
    }
    int64_t last = pts.v[pts.n - 1].ts_ms; /* read again alone */
    pd_points_release(&pts);
    return pd__ch_read_points(s->ch, ref, last, last, out, err);
}

/* A weighted profile of one series handed on as a part of refs[i]. */
typedef struct delta_call {
    pd_storage_agg_fn fn;
    int (*poll)(void *ctx, pd_err *err);
    void *ctx;
    size_t i;
    int64_t w;
} delta_call;

/* The caller's poll on the caller's ctx (not on the delta_call). */
static int delta_poll(void *ctx, pd_err *err)
{
    delta_call *c = ctx;
    return c->poll(c->ctx, err);
}

static int delta_part(void *ctx, const pd_storage_agg_part *part, const pd_profile *p, pd_err *err)
{
    delta_call *c = ctx;
    pd_storage_agg_part pt = *part;
    pt.series = c->i;
    if (c->w != 1) {
        /* the backend built p for this call alone and releases it after:
           scaled in place (values wrap as sums do) */
        pd_profile *q = (pd_profile *)(uintptr_t)p;
        for (size_t k = 0; k < q->n_sample; k++)
            for (size_t v = 0; v < q->sample[k].n_value; v++)
                q->sample[k].value[v] = (int64_t)((uint64_t)q->sample[k].value[v] * (uint64_t)c->w);
    }
    return c->fn(c->ctx, &pt, p, err);
}

static int aggregate_delta(pd_storage *s, const pd_storage_sample_filter *f, const uint64_t *refs,
                           const uint32_t *group, const uint64_t *cum_mask, size_t n, int64_t mint,
                           int64_t maxt, pd_storage_agg_fn fn, int (*poll)(void *ctx, pd_err *err),
                           void *ctx, size_t *n_series, size_t *n_deltas, pd_err *err);

int pd_storage_aggregate_delta(pd_storage *s, const uint64_t *refs, const uint32_t *group,
                               const uint64_t *cum_mask, size_t n, int64_t mint, int64_t maxt,
                               pd_storage_agg_fn fn, int (*poll)(void *ctx, pd_err *err), void *ctx,
                               size_t *n_series, size_t *n_deltas, pd_err *err)
{
    int rc = agg_enter(s, poll, ctx, err);
    if (rc < 0)
        return rc;
    rc = aggregate_delta(s, NULL, refs, group, cum_mask, n, mint, maxt, fn, poll, ctx, n_series,
                         n_deltas, err);
    agg_leave(s);
    return rc;
}

bool pd_storage_span_id_parse(const char *s, size_t len, uint64_t *out)
{
    if (len != 16)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < 16; i++) {
        char ch = s[i];
        unsigned d;
        if (ch >= '0' && ch <= '9')
            d = (unsigned)(ch - '0');
        else if (ch >= 'a' && ch <= 'f')
            d = (unsigned)(ch - 'a' + 10);
        else if (ch >= 'A' && ch <= 'F')
            d = (unsigned)(ch - 'A' + 10);
        else
            return false;
        v = v << 4 | d;
    }
    *out = v;
    return true;
}

bool pd__storage_span_label_passes(const pd_storage_sample_filter *f, const char *key,
                                   size_t key_len, const char *val, size_t val_len)
{
    if (!((key_len == 7 && !memcmp(key, "span_id", 7)) ||
          (key_len == 10 && !memcmp(key, "profile_id", 10))))
        return false;
    uint64_t id;
    if (!pd_storage_span_id_parse(val, val_len, &id) || id == 0)
        return false;
    size_t lo = 0, hi = f->n_span_ids;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (f->span_ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < f->n_span_ids && f->span_ids[lo] == id;
}

bool pd_storage_sample_passes(const pd_storage_sample_filter *f, const pd_profile *p,
                              const pd_pprof_label *label, size_t n_label)
{
    if (!f)
        return true;
    for (size_t j = 0; j < n_label; j++) {
        const pd_pprof_label *lb = &label[j];
        if (lb->key <= 0 || (size_t)lb->key >= p->n_string || lb->str <= 0 ||
            (size_t)lb->str >= p->n_string)
            continue;
        if (pd__storage_span_label_passes(f, p->string_table[lb->key], p->string_len[lb->key],
                                          p->string_table[lb->str], p->string_len[lb->str]))
            return true;
    }
    return false;
}

int pd_storage_aggregate_filtered(pd_storage *s, const pd_storage_sample_filter *f,
                                  const uint64_t *refs, const uint32_t *group,
                                  const uint64_t *cum_mask, size_t n, int64_t mint, int64_t maxt,
                                  pd_storage_agg_fn fn, int (*poll)(void *ctx, pd_err *err),
                                  void *ctx, size_t *n_series, size_t *n_deltas, pd_err *err)
{
    int rc = agg_enter(s, poll, ctx, err);
    if (rc < 0)
        return rc;
    rc = aggregate_delta(s, f, refs, group, cum_mask, n, mint, maxt, fn, poll, ctx, n_series,
                         n_deltas, err);
    agg_leave(s);
    return rc;
}

/* (the turn taken) */
static int aggregate_delta(pd_storage *s, const pd_storage_sample_filter *f, const uint64_t *refs,
                           const uint32_t *group, const uint64_t *cum_mask, size_t n, int64_t mint,
                           int64_t maxt, pd_storage_agg_fn fn, int (*poll)(void *ctx, pd_err *err),
                           void *ctx, size_t *n_series, size_t *n_deltas, pd_err *err)
{
    if (!s->ch)
        return pd_tsdb_aggregate_filtered(s->tsdb, f, refs, group, cum_mask, n, mint, maxt, fn,
                                          poll, ctx, n_series, n_deltas, err);
    pd_err_clear(err);
    if (n_deltas)
        *n_deltas = 0;
    if (n_series)
        *n_series = 0;
    size_t nd = 0, ns = 0;
    int rc = 0;
    /* the series summed as they are, in one call */
    uint64_t *plain = malloc((n ? n : 1) * sizeof *plain);
    uint32_t *pgroup = malloc((n ? n : 1) * sizeof *pgroup);
    if (!plain || !pgroup) {
        free(plain);
        free(pgroup);
        return pd_err_set(err, PD_ENOMEM, "aggregate: out of memory");
    }
    size_t np = 0;
    for (size_t i = 0; i < n; i++)
        if (!cum_mask || !cum_mask[i]) {
            plain[np] = refs[i];
            pgroup[np++] = group ? group[i] : (uint32_t)i;
        }
    if (np) {
        size_t k = 0;
        rc = pd__ch_aggregate_filtered(s->ch, f, plain, pgroup, np, mint, maxt, fn, poll, ctx, &k,
                                       err);
        ns += k;
    }
    free(plain);
    free(pgroup);
    /* each cumulative series: its weighted profiles (storage.h's rule) */
    for (size_t i = 0; i < n && rc >= 0 && cum_mask; i++) {
        if (!cum_mask[i] || mint > maxt)
            continue;
        pd_points prev = {0}, pts = {0};
        rc = pd_storage_read_point_before(s, refs[i], mint, &prev, err);
        if (rc >= 0)
            rc = pd__ch_read_points(s->ch, refs[i], mint, maxt, &pts, err);
        if (rc == PD_ENOTFOUND) { /* gone since selected: adds nothing */
            pd_err_clear(err);
            rc = 0;
        }
        size_t m = prev.n + pts.n, nw = 0;
        if (rc >= 0 && pts.n) {
            nd += m - 1;
            ns++;
        }
        int64_t *wts = malloc((m ? m : 1) * sizeof *wts);
        int8_t *ww = malloc((m ? m : 1) * sizeof *ww);
        if (rc >= 0 && (!wts || !ww))
            rc = pd_err_set(err, PD_ENOMEM, "aggregate: out of memory");
        if (rc >= 0)
            nw = pd__delta_weights(&prev, &pts, cum_mask[i], wts, ww);
        for (size_t k = 0; k < nw && rc >= 0; k++) {
            delta_call c = {fn, poll, ctx, i, ww[k]};
            uint64_t one = refs[i];
            rc = pd__ch_aggregate_filtered(s->ch, f, &one, NULL, 1, wts[k], wts[k], delta_part,
                                           poll ? delta_poll : NULL, &c, NULL, err);
        }
        free(wts);
        free(ww);
        pd_points_release(&prev);
        pd_points_release(&pts);
    }
    if (n_deltas)
        *n_deltas = nd;
    if (n_series)
        *n_series = ns;
    return rc;
}

/* ---- the reset rule and the weights of deltas (storage.h, delta_int.h) ---- */

static bool same_types(const pd_point *a, const pd_point *b)
{
    if (a->n_types != b->n_types)
        return false;
    for (size_t v = 0; v < a->n_types; v++) {
        const char *ta = a->types ? a->types[v].type : "", *tb = b->types ? b->types[v].type : "";
        const char *ua = a->types ? a->types[v].unit : "", *ub = b->types ? b->types[v].unit : "";
        if (strcmp(ta ? ta : "", tb ? tb : "") || strcmp(ua ? ua : "", ub ? ub : ""))
            return false;
    }
    return true;
}

bool pd_point_is_reset(const pd_point *prev, const pd_point *cur, uint64_t cum_mask)
{
    if (!prev)
        return false;
    if (!same_types(prev, cur))
        return true;
    for (size_t v = 0; v < cur->n_types && v < 64; v++)
        if ((cum_mask >> v & 1) && cur->totals[v] < prev->totals[v])
            return true;
    return false;
}

size_t pd__delta_weights(const pd_points *prev, const pd_points *pts, uint64_t mask, int64_t *ts,
                         int8_t *w)
{
    size_t n = prev->n + pts->n, k_out = 0;
    if (!pts->n || n < 2)
        return 0;
    /* the sequence b, points in range: b (k = 0) is subtracted, the last
       of each lifetime adds */
    int8_t acc = -1;
    for (size_t k = 0; k < n; k++) {
        const pd_point *p = k < prev->n ? &prev->v[0] : &pts->v[k - prev->n];
        const pd_point *nx =
            k + 1 < n ? (k + 1 < prev->n ? &prev->v[0] : &pts->v[k + 1 - prev->n]) : NULL;
        if (!nx || pd_point_is_reset(p, nx, mask))
            acc++;
        if (acc) {
            ts[k_out] = p->ts_ms;
            w[k_out++] = acc;
        }
        acc = 0;
    }
    return k_out;
}
