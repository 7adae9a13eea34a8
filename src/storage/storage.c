/*
 * storage/storage.c — the storage.h entry points: each call goes to the
 * backend the store was opened with (options.backend).
 *
 * The TSDB's sources are compiled with storage/tsdb_names.h, which renames
 * their storage.h functions to pd__tsdb_*; the ClickHouse backend's are
 * pd__ch_* (clickhouse/clickhouse.h). A pd_storage is a tag and the
 * backend's own handle.
 */
#include <stdlib.h>

#include "storage/storage.h"
#include "storage/clickhouse/clickhouse.h"

typedef struct pd__tsdb_storage pd__tsdb_storage;

/* The TSDB's entry points (storage/tsdb/, renamed by tsdb_names.h). */
int pd__tsdb_open(const pd_storage_options *opts, pd__tsdb_storage **out, pd_err *err);
void pd__tsdb_close(pd__tsdb_storage *s);
int pd__tsdb_append(pd__tsdb_storage *s, const pd_labels *labels, int64_t ts_ms,
                    const uint8_t *body, size_t len, const pd_profile *profile, pd_err *err);
int pd__tsdb_select(pd__tsdb_storage *s, const pd_matcher *ms, size_t n, int64_t mint, int64_t maxt,
                    pd_series_set *out, pd_err *err);
int pd__tsdb_read_points(pd__tsdb_storage *s, uint64_t ref, int64_t mint, int64_t maxt,
                         pd_points *out, pd_err *err);
int pd__tsdb_read_profile(pd__tsdb_storage *s, uint64_t ref, int64_t ts_ms, pd_profile *out,
                          pd_buf *raw, pd_err *err);
int pd__tsdb_aggregate(pd__tsdb_storage *s, const uint64_t *refs, const uint32_t *group, size_t n,
                       int64_t mint, int64_t maxt, pd_storage_agg_fn fn,
                       int (*poll)(void *ctx, pd_err *err), void *ctx, size_t *n_series,
                       pd_err *err);
int pd__tsdb_maintain(pd__tsdb_storage *s, pd_err *err);
int pd__tsdb_check_time_store(pd__tsdb_storage *s, int64_t ts_ms, pd_err *err);
void pd__tsdb_stats_get(pd__tsdb_storage *s, pd_storage_stats *out);

struct pd_storage {
    pd_storage_backend backend;
    pd__tsdb_storage *tsdb;
    pd_ch *ch;
};

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
        rc = pd__tsdb_open(opts, &s->tsdb, err);
    else
        rc = pd_err_set(err, PD_EINVAL, "unknown storage backend %d", (int)opts->backend);
    if (rc < 0) {
        free(s);
        return rc;
    }
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
        pd__tsdb_close(s->tsdb);
    free(s);
}

int pd_storage_append(pd_storage *s, const pd_labels *labels, int64_t ts_ms, const uint8_t *body,
                      size_t len, const pd_profile *profile, pd_err *err)
{
    if (s->ch)
        return pd__ch_append(s->ch, labels, ts_ms, body, len, profile, err);
    return pd__tsdb_append(s->tsdb, labels, ts_ms, body, len, profile, err);
}

int pd_storage_select(pd_storage *s, const pd_matcher *ms, size_t n, int64_t mint, int64_t maxt,
                      pd_series_set *out, pd_err *err)
{
    if (s->ch)
        return pd__ch_select(s->ch, ms, n, mint, maxt, out, err);
    return pd__tsdb_select(s->tsdb, ms, n, mint, maxt, out, err);
}

int pd_storage_read_points(pd_storage *s, uint64_t ref, int64_t mint, int64_t maxt, pd_points *out,
                           pd_err *err)
{
    if (s->ch)
        return pd__ch_read_points(s->ch, ref, mint, maxt, out, err);
    return pd__tsdb_read_points(s->tsdb, ref, mint, maxt, out, err);
}

int pd_storage_read_profile(pd_storage *s, uint64_t ref, int64_t ts_ms, pd_profile *out,
                            pd_buf *raw, pd_err *err)
{
    if (s->ch)
        return pd__ch_read_profile(s->ch, ref, ts_ms, out, raw, err);
    return pd__tsdb_read_profile(s->tsdb, ref, ts_ms, out, raw, err);
}

int pd_storage_aggregate(pd_storage *s, const uint64_t *refs, const uint32_t *group, size_t n,
                         int64_t mint, int64_t maxt, pd_storage_agg_fn fn,
                         int (*poll)(void *ctx, pd_err *err), void *ctx, size_t *n_series,
                         pd_err *err)
{
    if (s->ch)
        return pd__ch_aggregate(s->ch, refs, group, n, mint, maxt, fn, poll, ctx, n_series, err);
    return pd__tsdb_aggregate(s->tsdb, refs, group, n, mint, maxt, fn, poll, ctx, n_series, err);
}

int pd_storage_maintain(pd_storage *s, pd_err *err)
{
    if (s->ch)
        return pd__ch_maintain(s->ch, err);
    return pd__tsdb_maintain(s->tsdb, err);
}

int pd_storage_check_time(pd_storage *s, int64_t ts_ms, pd_err *err)
{
    if (s->ch)
        return pd__ch_check_time(s->ch, ts_ms, err);
    return pd__tsdb_check_time_store(s->tsdb, ts_ms, err);
}

void pd_storage_stats_get(pd_storage *s, pd_storage_stats *out)
{
    if (s->ch)
        pd__ch_stats_get(s->ch, out);
    else
        pd__tsdb_stats_get(s->tsdb, out);
}
