/*
 * storage/clickhouse/clickhouse.h — the ClickHouse backend of storage.h
 * (--storage.backend=clickhouse): stateless profd processes in front of one
 * ClickHouse server or a cluster of shards. storage.c calls these; nothing
 * else does. Each function has the contract of its storage.h namesake
 * (pd__ch_X = pd_storage_X); what differs is written here.
 *
 * Transport: ClickHouse's HTTP interface through libcurl (POST; SELECTs in
 * the body with FORMAT RowBinary answers, INSERTs as `query=INSERT ...
 * FORMAT RowBinary` with the rows in the body), basic auth, the database
 * given as `database=`. Each statement is tried up to `retries` times with
 * backoff (100 ms doubling, at most 2 s), moving to the next URL after a
 * connection failure, a timeout or a server error that is not the
 * statement's fault (failover). An error ClickHouse gives for the statement
 * itself (syntax, unknown table, authentication, ...) is not retried. Every
 * error names the URL and carries ClickHouse's own message (which names the
 * shard host:port when a shard of a Distributed table is down: reads then
 * fail with that error, never a silent partial answer).
 *
 * Schema (version PD_CH_SCHEMA_VERSION; created, or migrated from an older
 * version, at open; a newer version in the database refuses to open). Only
 * SQL that ClickHouse 18.16 (Debian 12) runs and current ClickHouse still
 * accepts: MergeTree with PARTITION BY/ORDER BY and index_granularity; 18.16
 * has no column codecs and no TTL (syntax errors on the server) and
 * LowCardinality only behind an experimental setting, so none is used.
 *
 *   schema_version (version UInt32, applied_ms Int64)       MergeTree, per server
 *   retention    (set_ms Int64, retention_ms Int64)          MergeTree, per server:
 *                the database's retention (the row of largest set_ms)
 *   series_v3    (day Date, fingerprint, names Array(String), values Array(String))
 *                ReplacingMergeTree PARTITION BY day ORDER BY fingerprint
 *                fingerprint → labels, a row per series per day it has profiles
 *   series_index_v3 (day Date, name, value, fingerprint)
 *                ReplacingMergeTree PARTITION BY day ORDER BY (name, value, fingerprint)
 *                the inverted label index, one row per label per series per day
 *   profiles_v3  (day, ts Int64 ms, fingerprint, write_id, types_hash,
 *                sample_types, sample_units, totals Array(Int64), period_type,
 *                period_unit, period, time_nanos, duration_nanos, comments,
 *                drop_frames, keep_frames, default_sample_type, doc_url,
 *                body String: '' since v2)
 *                MergeTree PARTITION BY day ORDER BY (fingerprint, ts).
 *                Written up to v7; since v8 read through profiles_all while it has rows
 *   profiles_v4  (the columns of profiles_v3)
 *                MergeTree PARTITION BY (day, intDiv(ts, 600000)) ORDER BY
 *                (fingerprint, ts): since v8 the profiles rows, a partition
 *                per 10-minute bucket, so that ClickHouse's merges of the
 *                newest partition rewrite at most 10 minutes of rows
 *                (ch_write.c's schema_v8 says why)
 *   profiles_all Merge('<database>', '^profiles_v[34]$') (on a
 *                cluster Merge over the _local tables, and Distributed over
 *                that): what reads of profiles rows name while
 *                profiles_v3 has rows (then profiles_v4)
 *   stacks_v3    (day Date, stack_hash UInt64, stack String)
 *                ReplacingMergeTree PARTITION BY day ORDER BY stack_hash,
 *                index_granularity 64 — a "stack" is one sample's key
 *                resolved to frames (ch_stack.c: mappings, addresses,
 *                functions, files, lines, columns, and the sample's labels),
 *                stack_hash the XXH3-64 of its schema-3 blob; since v4 a
 *                stack row holds its locations' keys and each location is a
 *                row of its own (ch_int.h; since v7 in locations_v1); a row
 *                per stack (location) per day of the profiles that use it
 *   locations_v1 (day Date, loc_key UInt64, loc String)
 *                ReplacingMergeTree PARTITION BY day ORDER BY loc_key,
 *                index_granularity 64: since v7 the location rows (schema
 *                7's format: a function's system name only where it differs
 *                from its name), apart from the stack rows so that LZ4
 *                compresses blocks of like rows; a location key a stack
 *                row names is looked up here, then (rows written before v7)
 *                in stacks_v3
 *   samples_v3   (day, ts, fingerprint, write_id, types_hash, stack_hash,
 *                values Array(Int64))
 *                MergeTree PARTITION BY day ORDER BY (fingerprint, ts, stack_hash),
 *                index_granularity 1024; one row per sample of the producer's
 *                (a repeated stack, a zero-valued sample: a row each).
 *                Written up to v5; since v6 read only while it has rows
 *                (pd_ch.legacy_samples), beside stack_samples_v1
 *   stack_samples_v1 (the columns of samples_v3)
 *                MergeTree PARTITION BY day ORDER BY (fingerprint,
 *                intDiv(ts, 600000), stack_hash, ts), index_granularity
 *                4096: since v6 the samples rows, a stack's rows of one
 *                series' 10-minute bucket (aggs_v1's) side by side, so that
 *                LZ4 finds the values repeated from profile to profile (a
 *                heap profile repeats ~90% of them). A read names the bucket
 *                (intDiv(ts, 600000) = / BETWEEN, the key's own expression:
 *                18.16 does not derive it from a ts condition), so a single
 *                profile reads its series' bucket: rows bounded by what that
 *                series wrote in 10 minutes, not by the table
 *   aggs_v1      (day, fingerprint, bucket Int64 = ts / 600,000 (10 min), types_hash,
 *                stack_hash, n UInt64, wsum UInt64, valuesMap Nested(type
 *                UInt16, value Int64))
 *                SummingMergeTree PARTITION BY day ORDER BY (fingerprint,
 *                bucket, types_hash, stack_hash): since v5, the stacks of
 *                a set of stored profiles of one series-bucket summed (n =
 *                wsum = 0; valuesMap: the non-zero values by sample type
 *                index), and with them the set's reconciliation row
 *                (types_hash = stack_hash = 0, n = its profiles, wsum = the
 *                sum of their pd__ch_wid_hash(write_id)); a set is a
 *                series-bucket's profiles summed in memory until it is idle
 *                (ch_aggw.c; agg_flush_idle_ms) or, with agg_flush_idle_ms
 *                < 0, one profile written beside its profiles row.
 *                A merge reads a series' bucket from its sums only when that
 *                bucket lies wholly in the range and its summed n and wsum
 *                equal those of its profiles rows (ch_agg.c): otherwise
 *                (a failed or repeated write, buckets from before v5) from
 *                samples_v3 as before
 * Versions: v1 kept the producer's body in profiles.body and summed the
 * samples of one stack; v2 (no table changed) writes '' there and a single
 * read rebuilds the profile from samples + stacks + the profiles row; v3
 * moves to new tables (the *_v3 names; ch_write.c's schema_v3 says why) and
 * leaves the v1/v2 tables as they are: their rows are read only once copied
 * over (docs/clickhouse.md gives the INSERT ... SELECT statements). Rows of
 * v1 (a body) and v2 are read alike. v4 (no table changed) writes stacks as
 * location keys plus shared location rows; v3 stack rows are still read.
 * v5 adds aggs_v1 (older buckets have no rows there: they are read raw).
 * v6 writes samples rows into stack_samples_v1 (same columns, rows of a
 * stack side by side); samples_v3's rows stay where they are and are read
 * beside the new ones (UNION ALL) until retention has dropped them all.
 * v7 writes location rows into locations_v1 (a new format, new keys); the
 * older ones stay in stacks_v3 with the stack rows naming them, found there
 * by a second lookup of the keys locations_v1 lacks.
 * v8 writes profiles rows into profiles_v4 (same columns, 10-minute
 * partitions); profiles_v3's rows stay and are read beside them through the
 * Merge table profiles_all until retention has dropped them all.
 * fingerprint = pd_labels_hash(labels) is also the series ref. types_hash
 * hashes the sample types/units and the period type/unit: a merge part
 * never mixes two of them. write_id is random per append: a query counts
 * samples only of (fingerprint, ts, write_id) present in profiles, so rows
 * of a failed write are never counted. In cluster mode the tables above
 * are Distributed over <table>_local on each shard, sharded by fingerprint
 * (stacks by stack_hash).
 *
 * Write path and acknowledgement: pd__ch_append encodes the rows and queues
 * them; a writer thread sends what queued as one batch in two round trips:
 * the INSERTs into stacks, locations, series and series_index (tables that
 * replace, so repeating rows is harmless) and samples at once on five threads beside
 * the PD_EEXIST check, then profiles — so a profile row is written only
 * when all it refers to is (samples rows of an entry refused as PD_EEXIST
 * are written under a write_id no profiles row has: never counted).
 * Group commit (ch_batch.c): while a batch is in flight the next one
 * gathers; under concurrent appends batches start up to flush_interval_ms
 * apart, the window growing with the batches' profiles (ch_batch.c; an
 * append alone waits none), or wait batch_wait_ms for more; a batch goes
 * at once when it holds batch_rows samples rows, batch_bytes or
 * batch_profiles profiles. Stacks and series written before (same
 * day) are not sent again. Connections are kept between queries (not
 * INSERTs: ch_http.c). The append returns 0 only after
 * ClickHouse has acknowledged the INSERT of the profile's row (in cluster
 * mode with insert_distributed_sync=1: after every shard wrote it). There is no local
 * WAL: a crash of profd loses only what was not acknowledged; a crash of
 * ClickHouse loses what ClickHouse loses (it does not fsync inserts by
 * default). A failed batch fails every append in it, with the error; an
 * INSERT whose outcome is unknown (the connection broke after sending) is
 * retried only after `SELECT count()` by write_id shows it did not land.
 * PD_EEXIST: checked per batch against profiles (and within the batch),
 * for the entries not newer than the last profile of their series this
 * profd stored (every entry of a series unknown to it: after a start, a
 * failed batch, or a read that missed a stack) — newer ones cannot collide
 * as a series has one writer (below);
 * pd_storage_append_shift (the push rule, storage.h) then tries the next ms
 * (storage.c: one append per ms tried, so a taken ms found by a batch costs
 * that batch's round trip);
 * two profd processes writing the same series at the same instant at once
 * could both store it (series are split across writers by hashmod, so one
 * series has one writer).
 *
 * Replicated layout (--clickhouse.replicated, with a cluster whose shards
 * list two or more replicas with internal_replication): every <table>_local
 * above is Replicated<engine> at ZooKeeper path
 * /clickhouse/tables/{shard}/<db>/<table>_local, replica '{replica}' (each
 * server's macros; open refuses a server without them, and tables whose
 * engine disagrees with the flag, PD_EINVAL naming the fix). The URLs are
 * every replica's; open succeeds with one down (maintenance creates its
 * tables when it returns). Writes as above through the Distributed tables:
 * ClickHouse writes each shard's rows to one live replica and replication
 * copies them (asynchronously: no insert_quorum, which with two replicas
 * would refuse every write while one is down). An INSERT whose outcome is
 * unknown is sent again, to the next URL, with insert_deduplicate=1: the
 * same rows make the same block, which ClickHouse keeps once (its checksum
 * in ZooKeeper, the last replicated_deduplication_window = 100 blocks per
 * table and shard); rows safe to repeat (stacks, series) or unique per
 * append (write_id) are all profd writes, so deduplicating two equal blocks
 * of different batches loses nothing. Reads, in any cluster mode, pass
 * skip_unavailable_shards=0: a shard with no replica answering fails the
 * read naming it.
 *
 * Read path (all pushed down): select = the index (equality matchers as
 * IN subqueries on series_index) then every matcher re-checked on the
 * labels (so regex semantics are PCRE2's, as the TSDB's); read_points =
 * the profiles' totals only; read_profile = the profile rebuilt from its
 * profiles row, its samples rows (each a sample, repeats kept) and their
 * stacks: lossless in DESIGN.md §1's sense, as the TSDB's blocks (raw = it
 * re-encoded, gzip; a v1 row's stored body, byte for byte); aggregate = `GROUP BY
 * types_hash, stack_hash` with sumForEach over samples per group, then the
 * stacks that did not sum to zero (dropped by ClickHouse: HAVING) resolved
 * with `stack_hash IN (...)` and symbolized once, headers folded from the
 * profiles' rows; aggregate_diff (a diff's two sides, pd_query_diff) = one
 * headers query with a flag per side, one GROUP BY with sumForEachIf per
 * side, one IN for the stacks of both.
 *
 * Not pushed down: a "top N stacks" (ORDER BY ... LIMIT N before the IN).
 * The reports' nodes/max-nodes cap is on graph nodes (functions for top and
 * callgraph, call-tree paths for the flame graph, Grafana's levels), and
 * every figure they show — a kept node's value, the cut beside it, total,
 * rows_total/nodes_total — sums over every stack through it, so leaving any
 * non-zero stack unresolved changes the answer; the TSDB's answer is only
 * reproduced with all of them. Reads pass max_query_size/max_ast_elements
 * large enough for IN lists of ~500,000 fingerprints.
 *
 * Retention: owned by the database (table retention): the first profd to
 * open a database without a row records its --storage.retention.time;
 * every profd uses the recorded value (re-read by each pd__ch_maintain, at
 * open for the time check of appends) and logs when its flag differs.
 * pd__ch_maintain (and a thread every maintenance_ms) drops the whole day
 * partitions older than it of aggs, profiles, samples (both tables),
 * series_index, stacks, locations and series (on every URL in cluster mode, each shard with its own
 * record).
 */
#ifndef PD_STORAGE_CLICKHOUSE_CLICKHOUSE_H
#define PD_STORAGE_CLICKHOUSE_CLICKHOUSE_H

#include "storage/storage.h"

#define PD_CH_SCHEMA_VERSION 8

/* The previous batch's profiles from which the writer waits the whole
 * flush interval before the next batch (fewer: proportionally less; one:
 * none). ch_batch.c's top comment says why. */
#define PD_CH_FULL_WINDOW_PROFILES 16

typedef struct pd_ch pd_ch;

/* Connects (the first URL that answers), creates or migrates the schema,
 * starts the writer and maintenance threads. Errors: PD_EINVAL (no URL, a
 * bad URL or database name; err says which), PD_ECORRUPT (the database has
 * a newer schema), -EIO with ClickHouse's or curl's message naming the URL,
 * PD_ENOMEM. */
int pd__ch_open(const pd_storage_options *opts, pd_ch **out /* OUT */, pd_err *err);
/* Flushes the queue (waiting for the batch in flight), stops the threads,
 * frees. NULL is a no-op. */
void pd__ch_close(pd_ch *c);

int pd__ch_append(pd_ch *c, const pd_labels *labels, int64_t ts_ms, const uint8_t *body, size_t len,
                  const pd_profile *profile, pd_err *err);
/* pd_storage_append of each of items[0..n) (pointers, borrowed): encoded
 * without the lock, then queued together under it, so all go into one
 * batch, and one wait for its acknowledgement. Sets each item's rc and err
 * (PD_EEXIST also for a second item of one series and ms in the call). */
void pd__ch_append_many(pd_ch *c, pd_storage_item *const *items, size_t n);
int pd__ch_select(pd_ch *c, const pd_matcher *ms, size_t n, int64_t mint, int64_t maxt,
                  pd_series_set *out /* OUT */, pd_err *err);
int pd__ch_read_points(pd_ch *c, uint64_t ref, int64_t mint, int64_t maxt, pd_points *out /* OUT */,
                       pd_err *err);
/* pd_storage_read_type_runs from what the last pd__ch_select of this
 * thread remembered (same store and range, no append since, CH_CACHE_MS):
 * 1 and out/n_profiles filled (release out with pd_points_release), 0 when
 * not remembered (the caller reads the points), PD_ENOMEM. */
int pd__ch_read_type_runs(pd_ch *c, uint64_t ref, int64_t mint, int64_t maxt,
                          pd_points *out /* OUT */, size_t *n_profiles /* OUT */, pd_err *err);
int pd__ch_read_profile(pd_ch *c, uint64_t ref, int64_t ts_ms, pd_profile *out /* OUT */,
                        pd_buf *raw, pd_err *err);
int pd__ch_aggregate(pd_ch *c, const uint64_t *refs, const uint32_t *group, size_t n, int64_t mint,
                     int64_t maxt, pd_storage_agg_fn fn, int (*poll)(void *ctx, pd_err *err),
                     void *ctx, size_t *n_series /* OUT, may be NULL */, pd_err *err);
/* pd__ch_aggregate summing only the samples f passes (storage.h,
 * pd_storage_sample_filter; NULL: everything): the GROUP BY is the same
 * (a sample's labels are part of its stack blob, so samples of different
 * spans never share a stack_hash), and each stack that survived it is
 * checked against f on its blob's labels (pd__ch_stack_passes) before it
 * is symbolized; a stack that does not pass adds nothing. */
int pd__ch_aggregate_filtered(pd_ch *c, const pd_storage_sample_filter *f, const uint64_t *refs,
                              const uint32_t *group, size_t n, int64_t mint, int64_t maxt,
                              pd_storage_agg_fn fn, int (*poll)(void *ctx, pd_err *err), void *ctx,
                              size_t *n_series /* OUT, may be NULL */, pd_err *err);
/* pd_storage_aggregate_diff when each side is one group (storage.c
 * checks): one query for both sides' headers, one GROUP BY over samples
 * with a sumForEachIf per side, one IN for the stacks of both. Rows are
 * filtered by an envelope (every fingerprint of either side, the union of
 * the ranges) and each row's side comes from transform() of its
 * fingerprint (a bit per side) and the side's range. */
int pd__ch_aggregate_diff(pd_ch *c, pd_storage_agg_side side[2], pd_storage_agg_fn fn,
                          int (*poll)(void *ctx, pd_err *err), void *ctx, pd_err *err);
/* Reads the database's retention (recording this profd's when there is
 * none) and drops the day partitions older than it. -EIO (ClickHouse's
 * message), PD_ENOMEM. */
int pd__ch_maintain(pd_ch *c, pd_err *err);
int pd__ch_check_time(pd_ch *c, int64_t ts_ms, pd_err *err);
/* n_series and n_profiles from ClickHouse (count() of series and profiles),
 * min/max ts; bytes_on_disk = the tables' active parts (system.parts);
 * block fields 0. A ClickHouse that does not answer gives zeros. */
void pd__ch_stats_get(pd_ch *c, pd_storage_stats *out /* OUT */);

#endif
