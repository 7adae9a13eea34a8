/*
 * storage/storage.h — the one storage interface the other layers see
 * (DESIGN.md §2): an appender (scrape/ and ingest see only this part) and a
 * querier (series selection, timestamps + totals, one profile) and the
 * aggregation (merges pushed down: pd_storage_aggregate).
 *
 * A *series* is a label set (base/labels.h) whose __name__ is the profile
 * type. A series holds profiles at int64 Unix-millisecond timestamps; at most
 * one profile per (series, timestamp) — a second pd_storage_append at the
 * same time replaces nothing and fails with PD_EEXIST.
 *
 * Duplicates and replicas (issue 26): the push paths store with
 * pd_storage_append_shift instead, which never refuses a taken ms: a
 * second profile of a series at a ms already stored goes side by side, at
 * the next free ms after it (two replicas of one app with identical labels
 * pushing the same whole second: ts and ts + 1). Both are then ordinary
 * profiles of the series — written to the log as such (a replay restores
 * both), cut into blocks and compacted as such, summed by every merge
 * over a range holding them, listed as two points. Pyroscope keeps them the
 * same way (two profiles of one series and time); profd's points being
 * keyed by ms, the second sits 1 ms later. ClickHouse honours the same
 * rule (storage.c tries the next ms when a batch finds the ms taken).
 * Scrapes and profefe's API keep their own rules (one scrape per target
 * and time; profefe's push moves forward itself).
 *
 * Backends: the embedded TSDB (storage/tsdb/, the default) and ClickHouse
 * (storage/clickhouse/, options.backend); storage.c hands each call to the
 * backend the store was opened with. What follows about disk, the log and
 * blocks is the TSDB's; storage/clickhouse/clickhouse.h says the same for
 * ClickHouse.
 *
 * On disk (tsdb/db.c): PATH/wal/ (the log), PATH/<ULID>/ (immutable blocks,
 * e.g. written by `profd tsdb import` or cut from the head), PATH/series
 * (series refs). Reads merge the head and the blocks transparently.
 *
 * Durability: pd_storage_append returns 0 only after the profile's record is
 * written to the log (and fsynced per the fsync policy). A profile
 * acknowledged this way survives kill -9 (with fsync=always also a power
 * loss). On open, the log is replayed; a torn or corrupt tail is cut off and
 * logged with the file and offset.
 *
 * Thread-safety: all functions may be called from any thread concurrently.
 * Results are copies owned by the caller.
 */
#ifndef PD_STORAGE_STORAGE_H
#define PD_STORAGE_STORAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/error.h"
#include "base/labels.h"
#include "pprof/pprof.h"

typedef struct pd_storage pd_storage;

typedef enum { PD_FSYNC_ALWAYS, PD_FSYNC_BATCH, PD_FSYNC_NEVER } pd_fsync_policy;

typedef enum { PD_STORAGE_TSDB = 0, PD_STORAGE_CLICKHOUSE = 1 } pd_storage_backend;

/* pd_clickhouse_options.flush_interval_ms when 0, ms: about one INSERT per
 * second, as ClickHouse advises. */
#define PD_STORAGE_CH_FLUSH_MS_DEFAULT 1000
/* pd_clickhouse_options.cache_bytes when 0: 64 MiB. */
#define PD_STORAGE_CH_CACHE_DEFAULT (64ll << 20)
/* pd_clickhouse_options.agg_flush_idle_ms when 0, ms (--clickhouse.agg-flush-idle). */
#define PD_STORAGE_CH_AGG_IDLE_MS_DEFAULT 60000
/* pd_clickhouse_options.agg_pending_bytes when 0. */
#define PD_STORAGE_CH_AGG_PENDING_DEFAULT (64u << 20)

/* Options of the ClickHouse backend (--clickhouse.*); zeroes are defaults. */
typedef struct pd_clickhouse_options {
    const char *const *urls; /* n_urls base URLs of the HTTP interface, e.g.
                                "http://127.0.0.1:8123"; tried in order, the next one
                                after a connection failure or a 5xx (failover) */
    size_t n_urls;
    const char *user;          /* NULL: "default" */
    const char *password;      /* NULL or "": none */
    const char *database;      /* NULL: "profd"; created if missing */
    const char *cluster;       /* NULL: single server. Else the name of a cluster in
                                  ClickHouse's remote_servers: every URL gets the local
                                  tables (<table>_local) and Distributed tables over the
                                  cluster's shards under the plain names */
    bool replicated;           /* with cluster: the <table>_local tables are
                                  Replicated*MergeTree (ZooKeeper path
                                  /clickhouse/tables/{shard}/<database>/<table>, replica
                                  '{replica}': each server's <macros>), the cluster's
                                  shards listing their replicas with
                                  internal_replication; a retried INSERT relies on
                                  ClickHouse's block deduplication (clickhouse.h) */
    size_t batch_bytes;        /* flush a batch of inserts at this size; 0 = 8 MiB */
    size_t batch_rows;         /* ... or when it holds this many samples rows (one per
                                  sample of each profile); 0 = 1,000,000 */
    int64_t batch_wait_ms;     /* --clickhouse.batch-wait: the gathering window's
                                  floor, ms — a batch starts at least this long after
                                  the previous one started, however few profiles it
                                  holds; 0 = none (the window adapts, flush_interval_ms) */
    int64_t flush_interval_ms; /* the longest gathering window: under concurrent
                                  appends a batch starts up to this long after the
                                  previous one started, the window growing with the
                                  previous batch's profiles (full at
                                  PD_CH_FULL_WINDOW_PROFILES; a lone append waits
                                  none: clickhouse.h). ClickHouse wants few, large
                                  inserts: each makes a part per table. 0 =
                                  PD_STORAGE_CH_FLUSH_MS_DEFAULT, < 0 = none */
    size_t batch_profiles;     /* a gathering batch goes at once when it holds this
                                  many profiles (main.c passes --web.threads: every
                                  push worker is then waiting on it); 0 = no bound */
    int64_t agg_flush_idle_ms; /* aggs_v1's sums are kept per series and 10-minute
                                  bucket in memory and written once the bucket got no
                                  append for this long (docs/clickhouse.md#aggregates);
                                  0 = PD_STORAGE_CH_AGG_IDLE_MS_DEFAULT, < 0 = written
                                  beside every batch's profile rows, per profile.
                                  Measured on clock_ms when set (tests), else on the
                                  monotonic clock */
    size_t agg_pending_bytes;  /* ... or, oldest first, while those sums hold more than
                                  this; 0 = PD_STORAGE_CH_AGG_PENDING_DEFAULT */
    int64_t timeout_ms;        /* one HTTP request; 0 = 30 s */
    int retries;               /* attempts per statement; 0 = 5 (backoff 100 ms doubling) */
    int64_t cache_bytes;       /* the read cache (storage/clickhouse/ch_cache.h: stack,
                                  location and sample-type rows, merges' pre-summed
                                  whole buckets), bytes; 0 = PD_STORAGE_CH_CACHE_DEFAULT,
                                  < 0 = none */
} pd_clickhouse_options;

typedef struct pd_storage_options {
    /* --storage.backend: where profiles are stored. PD_STORAGE_TSDB (0, the
     * default) is the embedded TSDB under path; PD_STORAGE_CLICKHOUSE stores
     * in ClickHouse over its HTTP interface (storage/clickhouse/clickhouse.h
     * documents the schema, batching and what an acknowledgement means) and
     * ignores path, segment_bytes, fsync, block_duration_ms and
     * retention_bytes. */
    pd_storage_backend backend;
    pd_clickhouse_options clickhouse; /* used when backend == PD_STORAGE_CLICKHOUSE */
    const char *path;                 /* directory; created if missing */
    size_t segment_bytes;             /* log segment size; 0 = 32 MiB (the checkpoint after a head
                                         cut frees whole segments: smaller ones free sooner) */
    pd_fsync_policy fsync;            /* default PD_FSYNC_BATCH */
    int64_t fsync_batch_ms;           /* batch window; 0 = 1000 ms */
    pd_pprof_limits limits;           /* caps for decoding stored bodies */
    int64_t block_duration_ms;        /* head cut (--storage.block-duration): once the head's newest
                                         profile is 1.5 x this past the start of the oldest aligned
                                         range [k*d, (k+1)*d) holding head data, that range is
                                         written as a block and the WAL checkpointed;
                                         0 = 2 h, < 0 = never cut */
    int64_t retention_ms;             /* --storage.retention.time: blocks whose newest profile is
                                         older than this before the wall clock (clock_ms) are
                                         deleted (whole blocks, oldest first), and appends older
                                         than now - this are refused (PD_EOUTOFBOUNDS);
                                         0 = 15 d, < 0 = no time limit */
    int64_t future_grace_ms;          /* --storage.future-grace: appends more than this after the
                                         wall clock are refused (PD_EOUTOFBOUNDS), as Mimir's and
                                         Pyroscope's creation grace period; 0 = 10 min,
                                         < 0 = no limit */
    int64_t (*clock_ms)(void);        /* the wall clock, Unix ms, for the two bounds above and
                                         retention; NULL = pd_now_ms (tests set their own) */
    uint64_t retention_bytes;         /* --storage.retention.size: oldest blocks are deleted while
                                         blocks + WAL exceed this many bytes; 0 = no size limit */
    int64_t maintenance_ms;           /* period of the background thread that compacts blocks and
                                         applies retention; 0 = 60 s, < 0 = no thread (only
                                         pd_storage_maintain) */
    int max_aggregations;             /* --query.max-merge-concurrency: pd_storage_aggregate and
                                         pd_storage_aggregate_delta calls computed at once; the
                                         others wait their turn (polling, so deadlines and
                                         cancels still apply), so merges leave CPU to appends
                                         (issue 20: 4 merging clients on 2 cores halved the
                                         pushes acknowledged); 0 = half the online CPUs, at
                                         least 1; < 0 = no limit */
    int64_t aggregate_slice_ns;       /* pd_storage_aggregate holds the head's index read lock
                                         for slices of about this many nanoseconds, then lets
                                         writers in (the lock prefers them) and resumes;
                                         0 = 1 ms (tests set 1 to slice as often as possible) */
    int aggregate_workers;            /* --storage.aggregate-workers: threads pd_storage_aggregate
                                         walks a query's blocks on (one (block, group) at a time
                                         each; the parts still reach fn in order); 1 = the
                                         calling thread walks them one after another; 0 = the
                                         number of online cores, at most 4; capped at
                                         PD_STORAGE_MAX_AGG_WORKERS */
    bool no_head_snapshot;            /* the TSDB writes the head's decomposed state to
                                         PATH/head.snapshot at close and adopts it at the next
                                         open (docs/format/head_snapshot.md); true: neither
                                         (tests of the WAL-only path) */
} pd_storage_options;

#define PD_STORAGE_MAX_AGG_WORKERS 16

/* The threads pd_storage_aggregate uses for the option value n
 * (aggregate_workers): n capped at PD_STORAGE_MAX_AGG_WORKERS; n <= 0: the
 * online cores (sysconf), at most 4. Always >= 1. Never fails. */
int pd_storage_aggregate_workers(int n);

/* The threads a caller may spread the reads of one query over (the query
 * layer's query_range: a share of the series each): the TSDB's
 * aggregate_workers as opened; 1 for ClickHouse (its reads are prefetched
 * per thread by the select). Never fails. */
int pd_storage_workers(pd_storage *s);

/* Defaults for the options above with path "./data". */
pd_storage_options pd_storage_options_default(void);

/* Opens (creating if needed) the store at opts->path and replays its log.
 * Takes an exclusive lock on the directory (flock on path/lock).
 * Errors: -errno for the file system (err names the path), PD_EEXIST when
 * another process holds the lock, PD_ENOMEM. Corrupt records do not fail the
 * open: they are logged, counted in profd_storage_corruptions_total, skipped. */
int pd_storage_open(const pd_storage_options *opts, pd_storage **out /* OUT */, pd_err *err);
/* Flushes, fsyncs and frees. NULL is a no-op. */
void pd_storage_close(pd_storage *s);

/* ---- appender ---- */

/* Stores one profile of the series `labels` at ts_ms.
 * ts_ms must lie in [now - retention_ms, now + future_grace_ms] (now =
 * clock_ms()): a profile outside would be deleted by retention at once, or
 * would age every stored profile out of retention (Prometheus answers "out
 * of bounds", Mimir and Pyroscope refuse samples past a grace period).
 * body/len: the pprof body as received (gzip or raw), already decoded and
 * validated by the caller into `profile` (used for sample types and totals;
 * the body is what is stored, so reads give back the producer's exact bytes).
 * labels must contain __name__ and only valid names (pd_labels_set ensures it).
 * Errors: PD_EINVAL (no __name__), PD_EEXIST (same series and ts_ms stored),
 * PD_EOUTOFBOUNDS (ts_ms outside the window above; err names the bound and its
 * flag), -errno writing the log (err names the file), PD_ENOMEM, PD_ECLOSED. */
int pd_storage_append(pd_storage *s, const pd_labels *labels, int64_t ts_ms, const uint8_t *body,
                      size_t len, const pd_profile *profile, pd_err *err);

/* The most a pushed profile is moved forward by pd_storage_append_shift, ms. */
#define PD_STORAGE_MAX_SHIFT_MS 999

/* pd_storage_append with the push rule for a taken time (top of this
 * file): when the series already has a profile at ts_ms, the profile is
 * stored at the first free ms of (ts_ms, ts_ms + PD_STORAGE_MAX_SHIFT_MS]
 * (the search and the append are one step under the store's append lock:
 * two pushes racing for one ms both find theirs). *stored_ts (may be NULL)
 * receives the ms used. The shifted time is held to the same bounds.
 * Errors as pd_storage_append; PD_EEXIST only when every ms of that window
 * is taken (a thousand identical replicas in one ms). */
int pd_storage_append_shift(pd_storage *s, const pd_labels *labels, int64_t ts_ms,
                            const uint8_t *body, size_t len, const pd_profile *profile,
                            int64_t *stored_ts /* OUT, may be NULL */, pd_err *err);

/* One profile of a pd_storage_append_many call. */
typedef struct pd_storage_item {
    const pd_labels *labels;   /* in: the series, as for pd_storage_append */
    int64_t ts_ms;             /* in: the time wanted (Unix ms); out: the time stored at */
    const uint8_t *body;       /* in: the pprof body as received (gzip or raw) */
    size_t len;                /* in: body's length, bytes */
    const pd_profile *profile; /* in: body decoded, borrowed for the call */
    int rc;                    /* out: 0 or the error pd_storage_append(_shift) gives */
    pd_err err;                /* out: set when rc < 0 */
} pd_storage_item;

/* pd_storage_append (shift false) or pd_storage_append_shift (shift true) of
 * each of items[0..n): the profiles of one request (a push split by its
 * samples' labels, the scrapes a loop round finished). Each item is stored
 * or refused on its own (its rc, err and, when stored, ts_ms say which);
 * two items of one series and ms: the second is PD_EEXIST, or with shift
 * stored 1 ms later. On ClickHouse they go into one batch: one wait for one
 * acknowledgement instead of n (each would otherwise wait for its own
 * batch, up to --clickhouse.flush-interval apart); on the embedded store it
 * is the n appends. Returns how many were stored (rc == 0). */
size_t pd_storage_append_many(pd_storage *s, pd_storage_item *items, size_t n, bool shift);

/* Called after each profile a pd_storage_append, _append_shift or
 * _append_many stored (rc 0), with the series, the time it was stored at and the decoded
 * profile (borrowed for the call). Runs on the appender's thread, outside the
 * store's locks, so it may read the store; it must not keep the pointers.
 * This is how rules/ (recording rules, DESIGN.md §2) sees profiles arrive
 * from every ingest path without knowing them. */
typedef void (*pd_storage_append_fn)(void *ctx, const pd_labels *labels, int64_t ts_ms,
                                     const pd_profile *profile);
/* Sets the one observer (fn NULL: none). Set it before appends start (the
 * pointers are published atomically, but an append already running may
 * still see the previous observer). */
void pd_storage_on_append(pd_storage *s, pd_storage_append_fn fn, void *ctx);

/* ---- querier ---- */

typedef struct pd_sample_type_desc {
    char *type; /* e.g. "inuse_space" */
    char *unit; /* e.g. "bytes" */
} pd_sample_type_desc;

typedef struct pd_series_info {
    uint64_t ref;           /* stable id of the series in this store */
    pd_labels labels;       /* owned copy */
    size_t n_profiles;      /* profiles in the selected time range */
    int64_t min_ts, max_ts; /* of those profiles, ms */
} pd_series_info;

typedef struct pd_series_set {
    pd_series_info *v;
    size_t n;
} pd_series_set;

/* Selects the series matching every matcher that have at least one profile in
 * [mint, maxt] (ms, inclusive), sorted by labels. n matchers may be 0 (all
 * series). Errors: PD_ENOMEM, PD_ECANCELED (the calling thread's query was
 * cancelled, base/cancel.h). out is overwritten. */
int pd_storage_select(pd_storage *s, const pd_matcher *ms, size_t n, int64_t mint, int64_t maxt,
                      pd_series_set *out /* OUT */, pd_err *err);

/* pd_storage_select for a caller that reads the points of every series
 * selected anyway (query_range): the embedded store takes a block part
 * that overlaps [mint, maxt] without reading its time chunk to count the
 * profiles inside — so a series may be selected with no profile in the
 * range (its points then come back empty), and n_profiles, min_ts, max_ts
 * count such parts whole (an upper bound; the head's are exact). A range
 * that cuts blocks costs one decode of each series' time chunk instead of
 * two. ClickHouse: pd_storage_select. Errors as pd_storage_select. */
int pd_storage_select_overlapping(pd_storage *s, const pd_matcher *ms, size_t n, int64_t mint,
                                  int64_t maxt, pd_series_set *out /* OUT */, pd_err *err);
void pd_series_set_release(pd_series_set *set);

/* ---- label listings: each series with its newest profile ----
 *
 * What a label listing (Grafana's Series, LabelNames, LabelValues,
 * ProfileTypes) needs of a series is its labels and the sample types of its
 * newest profile in the range: pd_storage_select_latest gives exactly that
 * for every selected series in one pass, with no point per profile read, no
 * copy of the labels and no sort (a listing sorts what it answers, which is
 * far less than what it reads: 50,000 series are 4 distinct Series sets of
 * Grafana's label browser). */

/* One selected series. Everything is borrowed from the set (valid until
 * pd_series_latest_set_release; the embedded store lends its own immutable
 * copies: a series is never forgotten while the store is open). */
typedef struct pd_series_latest {
    uint64_t ref;
    const pd_labels *labels; /* sorted by name, as stored */
    int64_t ts_ms;           /* the series' newest profile in [mint, maxt] */
    size_t n_types;
    const pd_sample_type_desc *types; /* that profile's sample types, n_types */
    uint32_t types_id;                /* within one set: equal ids <=> equal types (every
                                         type and unit, in order), so that a caller can
                                         compute what depends on them once per id */
} pd_series_latest;

typedef struct pd_series_latest_set {
    pd_series_latest *v; /* ascending ref (not in label order) */
    size_t n;
    size_t n_types_ids; /* every v[i].types_id < n_types_ids */
    void *priv;         /* the set's memory; freed by the release */
} pd_series_latest_set;

/* Selects the series pd_storage_select would (every matcher, at least one
 * profile in [mint, maxt] ms inclusive; n may be 0), each with its newest
 * profile in the range (as pd_storage_read_point_before(maxt + 1) finds it),
 * ascending ref. A series whose newest point cannot be read (a damaged block
 * part: a warning) is left out. The embedded store answers from its head
 * under one read lock and reads a block's time chunk only for a series whose
 * newest profile in the range is in a block. Errors: PD_ENOMEM, PD_ECANCELED
 * (base/cancel.h), storage errors of the reads. out is overwritten; release
 * it with pd_series_latest_set_release (also after an error). */
int pd_storage_select_latest(pd_storage *s, const pd_matcher *ms, size_t n, int64_t mint,
                             int64_t maxt, pd_series_latest_set *out /* OUT */, pd_err *err);
void pd_series_latest_set_release(pd_series_latest_set *set);

typedef struct pd_point {
    int64_t ts_ms;
    size_t n_types;
    pd_sample_type_desc *types; /* n_types, owned by the pd_points */
    int64_t *totals;            /* n_types sums of values, owned by the pd_points */
} pd_point;

typedef struct pd_points {
    pd_point *v; /* ascending ts_ms */
    size_t n;
    void *priv; /* storage-private; freed by pd_points_release */
} pd_points;

/* Reads timestamps and per-sample-type totals of series `ref` in [mint, maxt],
 * ascending. Reads no profile body. A damaged block part is left out (a
 * warning, see below). Errors: PD_ENOTFOUND (no such series),
 * PD_ENOMEM. out is overwritten. */
int pd_storage_read_points(pd_storage *s, uint64_t ref, int64_t mint, int64_t maxt,
                           pd_points *out /* OUT */, pd_err *err);
void pd_points_release(pd_points *pts);

/* The sample types of series `ref`'s profiles in [mint, maxt] without a
 * point per profile (a merge's check before any body is read): out holds
 * the first point of each run of time-consecutive profiles with the same
 * sample types (ts_ms and types; totals NULL), ascending ts_ms, and
 * *n_profiles the profiles in the range (as pd_storage_read_points would
 * count them). The embedded store answers a block part that lies wholly in
 * the range from its aggregates record (docs/format/aggregates.md: one
 * record = one set of sample types) without reading its time chunk; a part
 * whose data later turns out damaged is then counted here and left out by
 * the aggregation (which reports it). Errors as pd_storage_read_points.
 * Release out with pd_points_release. */
int pd_storage_read_type_runs(pd_storage *s, uint64_t ref, int64_t mint, int64_t maxt,
                              pd_points *out /* OUT */, size_t *n_profiles /* OUT */, pd_err *err);

/* Reads the profile of series `ref` at exactly ts_ms, decoded into out (which
 * is overwritten; release with pd_profile_release). If raw != NULL, a pprof
 * body is also appended to it: the producer's exact bytes while the
 * profile's WAL record exists (in the head, and after a head cut until the
 * WAL checkpoint removes its segment); for a profile only in a block (e.g.
 * imported, or cut and checkpointed) the profile re-encoded
 * (pd_profile_encode, gzip) — semantically equal, not byte-equal.
 * Errors: PD_ENOTFOUND, PD_ECORRUPT (checksum or decode failure of stored
 * bytes; err names file and offset; also a warning, see below), -errno,
 * PD_ENOMEM. */
int pd_storage_read_profile(pd_storage *s, uint64_t ref, int64_t ts_ms, pd_profile *out /* OUT */,
                            pd_buf *raw /* may be NULL */, pd_err *err);

/* ---- aggregation: the merge pushed down into storage ----
 *
 * pd_storage_aggregate sums the profiles of series refs[0..n) with ts in
 * [mint, maxt] (ms, inclusive) inside the store, on its own ids: per block,
 * values are summed per (stack id, sample-label set id) without rebuilding
 * any input profile, over every series of one group (group[i]: refs with
 * equal group values are summed together — the caller's "group by labels";
 * NULL = each ref alone), and the sum is symbolized once, for the stacks
 * whose values did not sum to zero. Each such sum (a *part*) is handed to fn
 * as one pd_profile (indexed, valid only during the call): samples = the
 * distinct (stack, label set) with their values summed per sample type;
 * header folded as google/pprof's profile.Merge (time_nanos the earliest,
 * duration_nanos summed, period the largest, comments concatenated without
 * repeats, default_sample_type and doc_url the first non-empty, period type
 * and drop/keep frames from the first). So folding every part into a
 * pd_merge (query/query.h) gives the merge of the inputs one by one (up to
 * the order of samples, ids and of comments from different parts).
 * Order: the blocks in ascending time (blocks of equal start by block id),
 * in each the groups in the order of their first ref; then the head, group by group (summed the
 * same way on the head's ids, a part per symbol generation; profiles replayed from the log and not
 * decomposed yet are handed over one per part). fn may be called with the store's index
 * read-locked: it must not call the store. A part never mixes sample types or period types
 * (profiles that differ start a new part). A ref unknown to the store (deleted since selected) adds
 * nothing; damaged block data is skipped with a warning (below), a profile gone meanwhile is
 * skipped. Memory: one entry per distinct (stack, label set) of one group in one block, never per
 * profile. n_series (may be NULL) receives how many refs have a block part or head profiles in the
 * range. Threads: with aggregate_workers > 1 (options) and more than one (block, group) to sum,
 * those are summed and symbolized on up to that many threads started for the call, and the calling
 * thread hands the parts to fn in the order above (fn, poll and the warnings stay on the calling
 * thread). Memory is then bounded by 2 x workers (block, group) sums held
 * at once (parts ready, not yet handed over) plus one sum per worker.
 * Concurrency: appends go on during the walk — the head is walked holding
 * the index read lock for slices of aggregate_slice_ns (a push waits at
 * most about that long), the profiles appended meanwhile inside the range
 * may or may not be summed; a head cut during the walk waits for its end,
 * so every profile stored in the range before the call is summed once.
 * poll (may be NULL) is called with ctx at the start, every 16 profiles
 * summed and at the end (deadlines, a client gone) — on worker threads'
 * walks: every 10 ms while waiting for them and after each (block, group)
 * handed over: a negative code stops the walk (every worker stops before
 * its next profile and is joined) and is returned. At most max_aggregations
 * (options) calls walk the store at once: a call over the limit waits for a
 * turn (turns go in arrival order), calling poll about every 20 ms
 * meanwhile (its negative code ends the wait and is returned); waiting
 * calls are counted in profd_storage_merges_waiting and their wait in
 * profd_storage_merge_wait_seconds_total.
 * Errors: fn's or poll's negative code (stops the walk, returned), PD_ETOOBIG (more
 * than 4M distinct stacks in one part), -errno, PD_ENOMEM. */
typedef struct pd_storage_agg_part {
    size_t series;          /* index into refs of the part's first series */
    size_t n_series;        /* series summed into this part (>= 1) */
    size_t n_profiles;      /* profiles summed into this part (>= 1) */
    int64_t min_ts, max_ts; /* of those profiles, ms (inputs in time order per series) */
    int side;               /* pd_storage_aggregate_diff: 0 the new side, 1 the base;
                               0 from every other call */
} pd_storage_agg_part;

typedef int (*pd_storage_agg_fn)(void *ctx, const pd_storage_agg_part *part, const pd_profile *p,
                                 pd_err *err);

int pd_storage_aggregate(pd_storage *s, const uint64_t *refs, const uint32_t *group, size_t n,
                         int64_t mint, int64_t maxt, pd_storage_agg_fn fn,
                         int (*poll)(void *ctx, pd_err *err), void *ctx,
                         size_t *n_series /* OUT, may be NULL */, pd_err *err);

/* ---- a diff in one pass (issue 16) ----
 *
 * The two sides of a diff (`go tool pprof -diff_base`: pd_query_diff), each
 * a pd_storage_aggregate of its own refs, groups and range, summed in one
 * call so that a backend can read both in one pass: ClickHouse runs one
 * GROUP BY over samples with the sums of each side (sumForEachIf) and
 * resolves the stacks of both sides with one IN. side[0] is the new side,
 * side[1] the base (pprof's order). fn receives every part of side[0],
 * then every part of side[1], with part->side = 0 or 1 and part->series an
 * index into that side's refs — the parts, their order and contents are
 * those of pd_storage_aggregate(side[0]) then pd_storage_aggregate(side[1])
 * (so the answers are identical). A series may be on both sides (ranges
 * may overlap): its profiles count on each side whose range holds them.
 * side[k].n_series (OUT) as pd_storage_aggregate's n_series. The TSDB (and
 * ClickHouse when a side has more than one group, a `by`) runs the two
 * aggregations one after the other. poll, ctx, errors as
 * pd_storage_aggregate. */
typedef struct pd_storage_agg_side {
    const uint64_t *refs;  /* n series */
    const uint32_t *group; /* as pd_storage_aggregate's group (NULL: each ref alone) */
    size_t n;
    int64_t mint, maxt; /* ms, inclusive */
    size_t n_series;    /* OUT: refs with profiles in the range */
} pd_storage_agg_side;

int pd_storage_aggregate_diff(pd_storage *s, pd_storage_agg_side side[2], pd_storage_agg_fn fn,
                              int (*poll)(void *ctx, pd_err *err), void *ctx, pd_err *err);

/* ---- deltas of cumulative profiles (issue 12) ----
 *
 * Some sample types count since the process started (Go's alloc_objects,
 * alloc_space, and the contentions/delay of block and mutex profiles, as
 * net/http/pprof serves them): the query layer knows which (query.h,
 * pd_query_cumulative_mask) and says so with a bit mask per series, bit v
 * for sample type v (types past the 64th are never cumulative). The store
 * only applies the arithmetic, on its own ids.
 *
 * Reset rule, as Prometheus' increase(): between two consecutive profiles
 * of a series, the process restarted when a cumulative type's total went
 * down, or when the sample types themselves changed; the new profile then
 * counts from 0 (its delta is the profile itself). A restart after which
 * every cumulative total already exceeds the last one before it is not seen
 * (Prometheus has the same blind spot). */

/* The stored mark of a series whose profiles are served cumulative (Prometheus'
 * reserved "__" prefix; the name and value Grafana Alloy's pyroscope.scrape
 * and Pyroscope use): the scrape layer adds PD_LABEL_DELTA="false" to the
 * series it scrapes as served (no ?seconds= window) from Go's allocs, heap,
 * block and mutex endpoints; a delta scrape or a push does not carry it. */
#define PD_LABEL_DELTA "__delta__"

/* True when cur follows prev across a restart by the rule above. cum_mask:
 * the cumulative sample types (bit v = type v of cur). prev == NULL: false. */
bool pd_point_is_reset(const pd_point *prev, const pd_point *cur, uint64_t cum_mask);

/* The newest point of series ref strictly before t (ms): out->n is 1 with
 * it, or 0 when the series has none (release with pd_points_release).
 * Reads timestamps and totals only, of at most the one block part (or the
 * head) where it lies. Errors as pd_storage_read_points. */
int pd_storage_read_point_before(pd_storage *s, uint64_t ref, int64_t t, pd_points *out /* OUT */,
                                 pd_err *err);

/* pd_storage_aggregate with deltas: for each refs[i] with cum_mask[i] != 0,
 * its profiles in [mint, maxt] are combined as the sum of their deltas. The
 * delta of a profile is it minus the series' previous stored profile —
 * also when that one lies before mint (so the deltas of [a, b] and of
 * [b', c] add up to those of [a, c]) — reset-aware by the rule above; the
 * series' first stored profile has no delta (nothing is known before it:
 * it is the baseline). That sum is computed without any delta materialized:
 * per lifetime (the profiles between two resets) + its last profile, and
 * for the first lifetime - the baseline b (the previous profile, or the
 * series' first); later lifetimes start from 0. Every other profile adds
 * nothing (it is still decoded, the value chunks being encoded against the
 * previous profile, but not summed). Every sample type of a profile is
 * differenced that way (as `go tool pprof -base` and Go's own ?seconds=
 * profiles do), so a gauge type in the same profile (inuse_* of a heap)
 * gives its change. Per-stack values may be negative (a stack whose count
 * went down without a total going down): they are kept, so that the sum
 * stays exactly last - b, as pprof -base shows it. Refs with cum_mask[i]
 * == 0 (or cum_mask NULL) are summed over [mint, maxt] as
 * pd_storage_aggregate does. The deltas are taken from the stored points
 * as read at the start (pd_storage_read_points); a profile appended later
 * adds nothing. n_deltas (may be NULL) receives the number of deltas summed
 * (profiles in the range with a previous one, over the refs with a mask).
 * part.n_profiles counts the profiles summed, a subtracted baseline too;
 * parts come in pd_storage_aggregate's order, with the baselines' time
 * (possibly before mint) in min_ts. fn, poll, memory, errors as
 * pd_storage_aggregate. */
int pd_storage_aggregate_delta(pd_storage *s, const uint64_t *refs, const uint32_t *group,
                               const uint64_t *cum_mask, size_t n, int64_t mint, int64_t maxt,
                               pd_storage_agg_fn fn, int (*poll)(void *ctx, pd_err *err), void *ctx,
                               size_t *n_series /* OUT, may be NULL */,
                               size_t *n_deltas /* OUT, may be NULL */, pd_err *err);

/* ---- a filter on the samples summed: span profiles (issue 26) ----
 *
 * Traces to profiles (Grafana's "Profiles for this span", Pyroscope's
 * SelectMergeSpanProfile): a program instrumented with OpenTelemetry and
 * grafana/otel-profiling-go (Go) or pyroscope-otel (Java) labels the
 * samples taken while a (root) span runs with the pprof sample label
 * `span_id` = the span's id as 16 hex digits (OpenTelemetry's
 * SpanID.String(), e.g. "9a517183f26a089d"); Pyroscope's older SDKs named
 * it `profile_id` (Pyroscope's ingester renames it to span_id). The store
 * keeps sample labels as they came (DESIGN.md §1), so a span's samples are
 * the ones carrying its id; the filter picks them inside the aggregation,
 * on the store's own label-set ids, before anything is symbolized.
 *
 * A sample passes when one of its labels has the key "span_id" or
 * "profile_id", a string value of exactly 16 hex digits (either case), and
 * that value (pd_storage_span_id_parse) is in span_ids; id 0 ("0000...")
 * never passes (OpenTelemetry's invalid span id; Pyroscope stores it as
 * "no span"). A sample without such a label never passes. */
typedef struct pd_storage_sample_filter {
    const uint64_t *span_ids; /* n_span_ids ids, ascending, no repeats (borrowed for
                                 the call); n_span_ids == 0: no sample passes */
    size_t n_span_ids;
} pd_storage_sample_filter;

/* Parses a span id as the filter reads it: s[0..len) must be exactly 16 hex
 * digits (0-9, a-f, A-F); *out is their value read as a big-endian number
 * (a one-to-one mapping of the 8 bytes: only equality matters). Returns
 * false (and leaves *out alone) for any other text. */
bool pd_storage_span_id_parse(const char *s, size_t len, uint64_t *out /* OUT */);

/* True when a sample with labels label[0..n_label) of profile p passes f
 * (the rule above); f == NULL passes everything. For a whole profile (the
 * head's replayed profiles, which are handed over undecomposed). */
bool pd_storage_sample_passes(const pd_storage_sample_filter *f, const pd_profile *p,
                              const pd_pprof_label *label, size_t n_label);

/* pd_storage_aggregate_delta summing only the samples f passes (f == NULL:
 * exactly pd_storage_aggregate_delta). Parts, their order, headers,
 * n_series and n_deltas are as without the filter — a profile none of
 * whose samples pass still counts in its part (which may then hold no
 * sample). The TSDB decides per label set once per part (block and group,
 * or head generation), so a span costs no more than the merge it narrows.
 * ClickHouse keeps a sample's labels inside its stack blob: the GROUP BY
 * runs as without the filter (samples of two spans never share a stack
 * hash) and each stack that survives it is checked on its blob before it
 * is symbolized — a span's merge costs ClickHouse as much as the whole
 * merge. Errors as pd_storage_aggregate_delta. */
int pd_storage_aggregate_filtered(pd_storage *s, const pd_storage_sample_filter *f,
                                  const uint64_t *refs, const uint32_t *group,
                                  const uint64_t *cum_mask, size_t n, int64_t mint, int64_t maxt,
                                  pd_storage_agg_fn fn, int (*poll)(void *ctx, pd_err *err),
                                  void *ctx, size_t *n_series /* OUT, may be NULL */,
                                  size_t *n_deltas /* OUT, may be NULL */, pd_err *err);

/* ---- warnings: damage a read skipped (the answer is partial) ----
 *
 * A read meeting damaged stored data that does not stop it (a block series
 * whose chunk fails its checksum, a block opened without its symbols, ...)
 * skips that data, logs it once per store with file and offset, counts it in
 * profd_storage_corruptions_total, and adds a message to the calling
 * thread's collector when one is active. The API layer wraps each request:
 *   pd_storage_warnings w;
 *   pd_storage_warnings_begin(&w);
 *   ... pd_storage_select / read_points / read_profile, any query/ call ...
 *   pd_storage_warnings_end();
 *   ... w.n messages -> the answer's "warnings" ...
 *   pd_storage_warnings_release(&w);
 * A collector belongs to one thread (storage calls made by other threads do
 * not add to it); begin/end do not nest (a second begin replaces the first).
 * Without an active collector the warnings are only logged and counted.
 * Identical messages are kept once; at most PD_STORAGE_MAX_WARNINGS are kept,
 * the rest counted in `dropped`. Each message is at most
 * PD_STORAGE_WARNING_BYTES - 1 bytes and names the block file and offset.
 * Where data is skipped: pd_storage_select leaves out a block part of a
 * series known damaged (a series with no other profile in range is not
 * selected); pd_storage_read_points leaves out the points of a damaged block
 * part; pd_storage_read_profile still fails with PD_ECORRUPT for a profile
 * whose bytes are damaged (and adds a warning), so that a merge can skip it. */
#define PD_STORAGE_MAX_WARNINGS 32
#define PD_STORAGE_WARNING_BYTES 512

typedef struct pd_storage_warnings {
    char **v; /* n messages, owned */
    size_t n;
    size_t dropped; /* messages not kept (over the cap, or out of memory) */
} pd_storage_warnings;

/* Clears *w and makes it the calling thread's collector. Never fails. */
void pd_storage_warnings_begin(pd_storage_warnings *w /* OUT */);
/* Stops collecting on the calling thread (w keeps its messages). */
void pd_storage_warnings_end(void);
/* Adds the messages of from (collected on another thread that read for the
 * same answer) and its dropped count to the calling thread's collector, if
 * one is active, with the rules above (identical ones once, the cap). */
void pd_storage_warnings_add(const pd_storage_warnings *from);
/* Frees the messages (and ends collection if w is still active). NULL is a
 * no-op. */
void pd_storage_warnings_release(pd_storage_warnings *w);

typedef struct pd_storage_stats {
    uint64_t n_series;
    uint64_t n_profiles;
    uint64_t bytes_on_disk;   /* every file under path */
    int64_t min_ts, max_ts;   /* 0,0 when empty */
    uint64_t n_blocks;        /* immutable blocks open */
    uint64_t n_head_profiles; /* profiles in the head (not yet in a block) */
    uint64_t n_cuts, n_compactions, n_retention_deletes; /* since open */
    uint64_t n_aggregate_slices;      /* since open: times an aggregation released the head's
                                         index lock mid-walk to let writers in */
    uint64_t n_aggregate_parallel;    /* since open: aggregations whose blocks were walked by
                                         more than one worker thread (aggregate_workers) */
    uint64_t n_aggregates_built;      /* since open: blocks whose aggregates file
                                         (docs/format/aggregates.md) was built from their chunks */
    uint64_t n_aggregate_records;     /* since open: series' parts in a block that a merge added
                                         as one pre-summed record instead of decoding them */
    uint64_t n_aggregate_head_groups; /* since open: sealed head groups a merge added as their
                                         sum (the head's aggregates) instead of decoding them */
    uint64_t n_aggregate_head_open;   /* since open: open head groups (a series' last <= 31
                                         profiles) a merge added as their running sum */
} pd_storage_stats;

/* One round of maintenance, as the background thread runs it: cuts the head
 * when due (block_duration_ms), compacts adjacent blocks into larger ones
 * (time ranges block_duration x 3^k, up to 10% of the retention time, as
 * Prometheus; a group is compacted once the store's newest profile is past
 * its range), then applies retention, and loads (or builds and writes) the
 * aggregates of blocks that have none in memory yet (at most ~2 s of building
 * per round; docs/format/aggregates.md). Safe to call from any thread; rounds
 * are serialized. Readers and appenders keep going meanwhile (appends wait
 * only during a head cut). A failure leaves the data as it was (a failed
 * compaction keeps its sources). A source block that does not read is marked
 * failed (compaction.failed in its meta.json, logged, counted in
 * profd_storage_corruptions_total and profd_storage_compactions_failed_total),
 * stays served for what reads, and is left out of every later plan (as
 * Prometheus); the rest compacts in the same round. Errors: -errno (err names
 * the path), PD_ENOMEM. */
int pd_storage_maintain(pd_storage *s, pd_err *err);

/* Checks ts_ms against the window the store accepts (see pd_storage_append);
 * for writers that do not go through the append (block import). 0 or
 * PD_EOUTOFBOUNDS with err naming the bound and its flag. */
int pd_storage_check_time(pd_storage *s, int64_t ts_ms, pd_err *err);

/* The same check for options not opened as a store (an offline import):
 * now is the wall clock given. */
int pd_storage_options_check_time(const pd_storage_options *o, int64_t now_ms, int64_t ts_ms,
                                  pd_err *err);

/* Fills the stats. Never fails. */
void pd_storage_stats_get(pd_storage *s, pd_storage_stats *out /* OUT */);

/* Whether the store answers at full speed (what /-/ready reports): false
 * while profiles replayed from the TSDB's WAL at open are still being
 * decomposed into the head by the maintenance thread (a merge meanwhile
 * reads and decodes each of them from the WAL); true once none is left
 * (after a clean close the head snapshot leaves none: true at once), and
 * from then on. Always true for ClickHouse and for a TSDB opened without
 * the maintenance thread (maintenance_ms < 0). Lock-free (an atomic load):
 * callable from the server's event loop. Never fails. */
bool pd_storage_ready(pd_storage *s);

#endif
