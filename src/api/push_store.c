/*
 * api/push_store.c — the one place every push dialect stores a profile
 * through (/ingest in all its formats, its JFR, Connect push, OTLP): issue
 * 26's two rules, so that no dialect can forget one.
 *
 * 1. Duplicates and replicas: a push never gets "already stored". Two
 *    profiles of one series at one ms (two replicas with identical labels,
 *    SDKs sending whole seconds) are both kept: the second at the next free
 *    ms (pd_storage_append_shift, storage.h's duplicate rule).
 * 2. Dynamic labels become series: a profile whose samples carry pprof
 *    string labels is split by them (pprof/split.h: which labels, which
 *    are kept on the samples); each part is stored under the push's labels
 *    plus its samples' labels, as one profile, gzip pprof.
 *
 * The cap on series per service (--ingest.max-series-per-service): the
 * series a push would store are checked, all of them before the first is
 * stored, against the series the service (its service_name label; "" when
 * none) already has; a push that would take the service past the cap is
 * refused whole (PD_ELIMIT -> 429 naming the service, the cap and the
 * flag, counted in profd_rejected_input_total{reason="series_limit"});
 * nothing is stored, so nothing is lost silently and a retry after the
 * cap is raised stores it. A series counts while it is active: pushed
 * within the last CAP_WINDOW_MS (an hour), as Mimir's and Pyroscope's
 * series limits count the series in their heads — so labels that churn
 * (a pod name per restart) free their budget an hour after their last push.
 * The active series of a service are learnt from the store once
 * (pd_storage_select of service_name over the last hour) the first time
 * the service pushes, then kept in memory with their last push time (a
 * series is stamped when admitted: a store failure afterwards leaves it
 * counted for the hour). Scrapes are not counted (a scrape config names its
 * targets).
 *
 * profefe's API stores with pd__api_store_exact: its own rules (its ids are
 * series + ms; no split).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "api/api_int.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/time.h"
#include "base/u64map.h"
#include "pprof/split.h"

#define CAP_WINDOW_MS (3600 * 1000)

typedef struct svc {
    char *name;
    pd_u64map series; /* pd_labels_hash -> Unix ms of its last push */
} svc;

struct pd__series_cap {
    pthread_mutex_t mu;
    size_t max;        /* 0: no cap */
    pd_u64map by_name; /* XXH3 of the name -> index in v */
    svc *v;
    size_t n, cap;
};

int pd__series_cap_new(size_t max, pd__series_cap **out)
{
    pd__series_cap *c = calloc(1, sizeof *c);
    if (!c)
        return PD_ENOMEM;
    pthread_mutex_init(&c->mu, NULL);
    c->max = max;
    pd_u64map_init(&c->by_name);
    *out = c;
    return 0;
}

void pd__series_cap_free(pd__series_cap *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++) {
        free(c->v[i].name);
        pd_u64map_release(&c->v[i].series);
    }
    free(c->v);
    pd_u64map_release(&c->by_name);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static uint64_t key_of(uint64_t h)
{
    return h == UINT64_MAX ? h - 1 : h; /* UINT64_MAX is u64map's empty key */
}

/* The service's entry, learnt from the store the first time. Under c->mu. */
static int find_svc(pd__series_cap *c, pd_storage *st, const char *name, svc **out, pd_err *err)
{
    uint64_t h = key_of(XXH3_64bits(name, strlen(name))), at;
    if (pd_u64map_get(&c->by_name, h, &at)) {
        *out = &c->v[at];
        return 0;
    }
    if (c->n == c->cap) {
        size_t nc = c->cap ? c->cap * 2 : 16;
        svc *nv = realloc(c->v, nc * sizeof *nv);
        if (!nv)
            return pd_err_set(err, PD_ENOMEM, "out of memory");
        c->v = nv;
        c->cap = nc;
    }
    svc *s = &c->v[c->n];
    memset(s, 0, sizeof *s);
    pd_u64map_init(&s->series);
    if (!(s->name = strdup(name)))
        return pd_err_set(err, PD_ENOMEM, "out of memory");
    pd_matcher m;
    int rc = pd_matcher_init(&m, PD_MATCH_EQ, "service_name", name, err);
    if (rc < 0) {
        free(s->name);
        return rc;
    }
    pd_series_set set = {0};
    int64_t now = pd_now_ms();
    rc = pd_storage_select(st, &m, 1, now - CAP_WINDOW_MS, INT64_MAX, &set, err);
    pd_matcher_release(&m);
    for (size_t i = 0; rc == 0 && i < set.n; i++)
        if (pd_u64map_put(&s->series, key_of(pd_labels_hash(&set.v[i].labels)), (uint64_t)now) < 0)
            rc = pd_err_set(err, PD_ENOMEM, "out of memory");
    pd_series_set_release(&set);
    if (rc == 0 && pd_u64map_put(&c->by_name, h, c->n) < 0)
        rc = pd_err_set(err, PD_ENOMEM, "out of memory");
    if (rc < 0) {
        free(s->name);
        pd_u64map_release(&s->series);
        return rc;
    }
    c->n++;
    *out = s;
    return 0;
}

/* Drops the series of s not pushed since before = now - CAP_WINDOW_MS (the
 * map has no delete: rebuilt). 0 or PD_ENOMEM (s unchanged). */
static int sweep(svc *s, int64_t now)
{
    pd_u64map kept;
    pd_u64map_init(&kept);
    for (size_t i = 0; i < s->series.cap; i++) {
        uint64_t k = s->series.kv[2 * i], v = s->series.kv[2 * i + 1];
        if (k != UINT64_MAX && (int64_t)v >= now - CAP_WINDOW_MS &&
            pd_u64map_put(&kept, k, v) < 0) {
            pd_u64map_release(&kept);
            return PD_ENOMEM;
        }
    }
    pd_u64map_release(&s->series);
    s->series = kept;
    return 0;
}

/* Admits the series of one push — `one` when nothing was split (sp->n == 0),
 * else the label sets of sp's groups — under the cap of their service:
 * PD_ELIMIT when the ones not active would take it past the cap (none is
 * stamped then); else every one is stamped active now. */
static int admit(pd__series_cap *c, pd_storage *st, const pd_labels *one, const pd_pprof_split *sp,
                 pd_err *err)
{
    if (!c || !c->max)
        return 0;
    size_t n = sp->n ? sp->n : 1;
    int rc = 0;
    pthread_mutex_lock(&c->mu);
    /* every set of one push has the push's service_name (split never adds one) */
    const char *name = pd_labels_get(one, "service_name");
    svc *s = NULL;
    if ((rc = find_svc(c, st, name ? name : "", &s, err)) < 0)
        goto out;
    int64_t now = pd_now_ms();
    size_t fresh = 0;
    for (int round = 0; round < 2; round++) {
        fresh = 0;
        for (size_t i = 0; i < n; i++) {
            uint64_t at;
            if (!pd_u64map_get(&s->series, key_of(pd_labels_hash(sp->n ? &sp->v[i].labels : one)),
                               &at) ||
                (int64_t)at < now - CAP_WINDOW_MS)
                fresh++;
        }
        if (!fresh || s->series.len + fresh <= c->max || round == 1)
            break;
        if (sweep(s, now) < 0) { /* past the cap with stale ones counted: drop them, recount */
            rc = pd_err_set(err, PD_ENOMEM, "out of memory");
            goto out;
        }
    }
    if (fresh && s->series.len + fresh > c->max) {
        rc = pd_err_set(err, PD_ELIMIT,
                        "service \"%.200s\" has %zu series pushed in the last hour; this push "
                        "would add %zu, past the cap of %zu (--ingest.max-series-per-service; its "
                        "samples' labels make %zu series): nothing was stored",
                        s->name, s->series.len, fresh, c->max, n);
        goto out;
    }
    for (size_t i = 0; i < n; i++) /* stamped: active for the next hour */
        if (pd_u64map_put(&s->series, key_of(pd_labels_hash(sp->n ? &sp->v[i].labels : one)),
                          (uint64_t)now) < 0) {
            rc = pd_err_set(err, PD_ENOMEM, "out of memory");
            goto out;
        }
out:
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static void count_stored(const char *source, size_t len)
{
    char lbl[96];
    snprintf(lbl, sizeof lbl, "source=\"%s\"", source);
    pd_metrics_add("profd_ingested_profiles_total", lbl, 1);
    pd_metrics_add("profd_ingested_bytes_total", lbl, (double)len);
}

int pd__api_store_exact(pd_storage *st, const pd_labels *ls, int64_t ts_ms, const uint8_t *body,
                        size_t len, const pd_profile *p, const char *source, pd_err *err)
{
    int rc = pd_storage_append(st, ls, ts_ms, body, len, p, err);
    if (rc == PD_EOUTOFBOUNDS)
        pd__api_count_rejected("out_of_bounds");
    if (rc < 0)
        return rc;
    count_stored(source, len);
    return 0;
}

int pd__api_store(const pd__api_env *env, const pd_labels *ls, int64_t ts_ms, const uint8_t *body,
                  size_t len, const pd_profile *p, const char *source, pd_err *err)
{
    pd_pprof_split sp;
    size_t max = env->cap ? pd__series_cap_max(env->cap) : 0;
    int rc = pd_pprof_split_by_labels(p, ls, max, &sp, err);
    if (rc == PD_ETOOBIG) {
        pd__api_count_rejected("series_limit");
        return pd_err_set(err, PD_ELIMIT,
                          "%s, over the cap of series per service "
                          "(--ingest.max-series-per-service=%zu): nothing was stored",
                          err->msg, max);
    }
    if (rc < 0)
        return rc;
    if ((rc = admit(env->cap, env->st, ls, &sp, err)) < 0) {
        if (rc == PD_ELIMIT)
            pd__api_count_rejected("series_limit");
        goto out;
    }
    if (sp.n == 0) { /* nothing to split: stored as received */
        rc = pd_storage_append_shift(env->st, ls, ts_ms, body, len, p, NULL, err);
        if (rc == 0)
            count_stored(source, len);
        goto out;
    }
    /* every series' profile encoded first, then stored together: on
       ClickHouse one batch and one acknowledgement for the whole push */
    pd_buf *enc = calloc(sp.n, sizeof *enc);
    pd_storage_item *items = calloc(sp.n, sizeof *items);
    if (!enc || !items) {
        free(enc);
        free(items);
        rc = pd_err_set(err, PD_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < sp.n && rc == 0; i++) {
        pd_buf_init(&enc[i], 0);
        if ((rc = pd_profile_encode(&sp.v[i].view, true, &enc[i])) < 0)
            pd_err_set(err, rc, "encoding the profile of series %zu of %zu: %s", i + 1, sp.n,
                       pd_strerror(rc));
        items[i] = (pd_storage_item){.labels = &sp.v[i].labels,
                                     .ts_ms = ts_ms,
                                     .body = (const uint8_t *)enc[i].data,
                                     .len = enc[i].len,
                                     .profile = &sp.v[i].view};
    }
    if (rc == 0) {
        size_t stored = pd_storage_append_many(env->st, items, sp.n, true);
        for (size_t i = 0; i < sp.n; i++)
            if (items[i].rc == 0)
                count_stored(source, enc[i].len);
            else if (rc == 0) { /* the first failure is the answer */
                rc = items[i].rc;
                if (err)
                    *err = items[i].err;
            }
        if (rc < 0 && stored && err) /* say what is stored: a retry would store those again */
            snprintf(err->msg + strlen(err->msg), sizeof err->msg - strlen(err->msg),
                     " (%zu of the %zu series its samples' labels make were stored)", stored, sp.n);
    }
    for (size_t i = 0; i < sp.n; i++)
        pd_buf_release(&enc[i]);
    free(enc);
    free(items);
    if (rc == 0)
        pd_metrics_add("profd_ingested_split_series_total", NULL, (double)sp.n);
out:
    if (rc == PD_EOUTOFBOUNDS)
        pd__api_count_rejected("out_of_bounds");
    pd_pprof_split_release(&sp);
    return rc;
}

size_t pd__series_cap_max(const pd__series_cap *c)
{
    return c ? c->max : 0;
}

int pd__api_store_status(int rc)
{
    switch (rc) {
    case PD_EOUTOFBOUNDS:
    case PD_EINVAL:
        return 400;
    case PD_ELIMIT:
        return 429;
    case PD_ETOOBIG:
        return 413;
    case PD_ETIMEOUT: /* the WAL at its bound under --storage.retention.size: retry */
        return 503;
    default:
        return 500;
    }
}
