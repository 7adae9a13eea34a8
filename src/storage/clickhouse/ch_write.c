/*
 * storage/clickhouse/ch_write.c — open (schema creation and migration),
 * the append path (encode → queue; the writer thread and its batches are
 * ch_batch.c), retention and stats of the ClickHouse backend. The design
 * (tables, batching, what an acknowledgement means) is in clickhouse.h.
 *
 * Queue: appenders encode their rows without a lock (ch_entry), then add
 * the entry to c->pending (a ch_batch) and wait for that batch to be done.
 * The writer thread takes the whole pending batch (the next one starts
 * gathering at once), sends it, sets every entry's result, marks the batch
 * done and wakes the appenders; the last appender to leave frees it.
 * Appenders wait (back-pressure) while the pending batch holds more than
 * 4 x batch_bytes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "base/log.h"
#include "base/metrics.h"
#include "base/time.h"
#include "base/varint.h"
#include "storage/clickhouse/ch_cache.h"
#include "storage/clickhouse/ch_int.h"

static void entry_free(ch_entry *e)
{
    if (!e)
        return;
    pd_buf_release(&e->prof_row);
    pd_buf_release(&e->series_row);
    pd_buf_release(&e->index_rows);
    pd_buf_release(&e->sample_rows);
    pd_buf_release(&e->stack_rows);
    pd_buf_release(&e->agg_rows);
    free(e->stack_hash);
    free(e->stack_end);
    free(e);
}

static void batch_free(ch_batch *b)
{
    for (ch_entry *e = b->head, *n; e; e = n) {
        n = e->next;
        entry_free(e);
    }
    pthread_cond_destroy(&b->cv);
    free(b);
}

/* ---- schema ---- */

typedef struct table_def {
    const char *name;
    const char *columns;
    const char *engine; /* after ENGINE = */
    const char *shard_key;
} table_def;

/* The columns of a profiles table (profiles, profiles_v3, profiles_v4 and
 * the Merge table profiles_all over the last two: every one alike). */
#define PROFILES_COLUMNS                                                                           \
    "day Date, ts Int64, fingerprint UInt64, write_id UInt64, types_hash UInt64, "                 \
    "sample_types Array(String), sample_units Array(String), totals Array(Int64), "                \
    "period_type String, period_unit String, period Int64, time_nanos Int64, "                     \
    "duration_nanos Int64, comments Array(String), drop_frames String, keep_frames String, "       \
    "default_sample_type String, doc_url String, body String"

/* Version 1. Every statement is CREATE ... IF NOT EXISTS: re-running is a
 * no-op. A later version appends its own list (ALTER TABLE ... ADD COLUMN
 * IF NOT EXISTS, new tables) and migrations run every version between the
 * database's and PD_CH_SCHEMA_VERSION in order. */
static const table_def schema_v1[] = {
    {"series", "fingerprint UInt64, names Array(String), values Array(String)",
     "ReplacingMergeTree() ORDER BY fingerprint", "fingerprint"},
    {"series_index", "day Date, name String, value String, fingerprint UInt64",
     "ReplacingMergeTree() PARTITION BY day ORDER BY (name, value, fingerprint)", "fingerprint"},
    {"profiles", PROFILES_COLUMNS, "MergeTree() PARTITION BY day ORDER BY (fingerprint, ts)",
     "fingerprint"},
    {"stacks", "stack_hash UInt64, stack String", "ReplacingMergeTree() ORDER BY stack_hash",
     "stack_hash"},
    {"samples",
     "day Date, ts Int64, fingerprint UInt64, write_id UInt64, types_hash UInt64, "
     "stack_hash UInt64, values Array(Int64)",
     "MergeTree() PARTITION BY day ORDER BY (fingerprint, ts, stack_hash)", "fingerprint"},
};

/* Version 3: new tables (the v1/v2 ones are left as they were; docs/clickhouse.md
 * says how to copy their rows over). What changed and why:
 *  - stacks_v3 and series_v3 are partitioned by day, a row written once per
 *    stack (series) per day of the profiles that use it, so that retention
 *    drops their old days with the profiles' (a stack still in use has a row
 *    in a newer day); reads take any() per key, as before;
 *  - stacks_v3 has index_granularity 64 and samples_v3 1024: a lookup by
 *    stack_hash or by (fingerprint, ts) reads a few granules, however large
 *    the table (8,192 rows of stack blobs per granule made `stack_hash IN
 *    (3 hashes)` read most of the table).
 * ClickHouse 18.16 has no column codecs, TTL or (without an experimental
 * setting) LowCardinality: verified on the server (syntax errors), so none
 * is used; retention is owned by the database (table retention, read by
 * every profd). */
static const table_def schema_v3[] = {
    {"series_v3", "day Date, fingerprint UInt64, names Array(String), values Array(String)",
     "ReplacingMergeTree() PARTITION BY day ORDER BY fingerprint", "fingerprint"},
    {"series_index_v3", "day Date, name String, value String, fingerprint UInt64",
     "ReplacingMergeTree() PARTITION BY day ORDER BY (name, value, fingerprint)", "fingerprint"},
    {"profiles_v3", PROFILES_COLUMNS, "MergeTree() PARTITION BY day ORDER BY (fingerprint, ts)",
     "fingerprint"},
    {"stacks_v3", "day Date, stack_hash UInt64, stack String",
     "ReplacingMergeTree() PARTITION BY day ORDER BY stack_hash SETTINGS index_granularity = 64",
     "stack_hash"},
    {"samples_v3",
     "day Date, ts Int64, fingerprint UInt64, write_id UInt64, types_hash UInt64, "
     "stack_hash UInt64, values Array(Int64)",
     "MergeTree() PARTITION BY day ORDER BY (fingerprint, ts, stack_hash) SETTINGS "
     "index_granularity = 1024",
     "fingerprint"},
};

/* The migrations, in version order: from a database at version v, every
 * migration above v runs (its tables created, then its statements), each
 * recorded in schema_version once done. PD_CH_SCHEMA_VERSION is the last. */
typedef struct migration {
    int version;
    const table_def *tables;
    size_t n_tables;
    const char *const *statements;
    size_t n_statements;
} migration;

/* Version 2 changes no table, only what rows mean: profiles.body is ''
 * (a single read rebuilds the profile from its samples rows, one per
 * sample of the producer's, zero-valued and repeated stacks included) where
 * v1 kept the producer's body (and summed repeated stacks into one row);
 * rows written by v1 (a body present) are still read from their body. The
 * version keeps a v1 profd (which would read an empty body as an empty
 * profile) from opening a database a v2 profd writes into. */
/* Version 4 changes no table either, only the rows of stacks_v3 (ch_int.h):
 * a stack is its locations' keys, each location a row of its own, shared
 * by every stack (and profile) using it — a stack's frames were 53% of the
 * database's bytes, each stack repeating its frames' strings (CPU profiles:
 * 1,301 B per profile, 816 with locations shared). Keys stay the hash of
 * the schema-3 blob, so v3 rows and v4 rows of one stack are
 * interchangeable and a v3 database stays readable as it is; the version
 * keeps a v3 profd (which cannot read a v4 row) from opening it. */
/* Version 5 adds aggs_v1: the samples pre-summed per (series, bucket, sample
 * types, stack) by a SummingMergeTree, and per (series, bucket) a
 * reconciliation row (types_hash = stack_hash = 0: n = profiles, wsum = the
 * sum of pd__ch_wid_hash of their write_ids). A merge uses a bucket's sums
 * only where that row equals the same computed from the bucket's profiles_v3
 * rows (ch_agg.c); buckets written before the migration have no row there and
 * are read from samples_v3 as before: exact either way. */
static const table_def schema_v5[] = {
    {"aggs_v1",
     "day Date, fingerprint UInt64, bucket Int64, types_hash UInt64, stack_hash UInt64, "
     "n UInt64, wsum UInt64, valuesMap Nested(type UInt16, value Int64)",
     "SummingMergeTree() PARTITION BY day ORDER BY (fingerprint, bucket, types_hash, stack_hash)",
     "fingerprint"},
};

/* Version 6 writes samples rows into stack_samples_v1: samples_v3's
 * columns, ordered by (series, 10-minute bucket, stack, ts) instead of
 * (series, ts, stack), so a stack's rows of consecutive profiles lie side by
 * side and ClickHouse's LZ4 (18.16 has no per-column codecs) finds the
 * values a profile repeats from the last one (samples: 365 -> ~270 B per
 * profile on bench/clickhouse/size.mjs's 600 real profiles). Granules of
 * 4,096 rows (1,024 before): a read names the series and bucket, so a single
 * profile reads its series' bucket (all its profiles of those 10 minutes,
 * in whole granules) — bounded by what the series writes in 10 minutes, not
 * by the table — and bigger granules make bigger compressed blocks (fewer
 * marks, ~8% fewer bytes). samples_v3's rows are not copied (a copy at start
 * could take hours and, on replicas, run on each): reads read them beside
 * the new ones while samples_v3 has rows (pd_ch.legacy_samples), retention
 * drops its days as before, and then it is left empty. */
static const table_def schema_v6[] = {
    {PD_CH_SAMPLES,
     "day Date, ts Int64, fingerprint UInt64, write_id UInt64, types_hash UInt64, "
     "stack_hash UInt64, values Array(Int64)",
     "MergeTree() PARTITION BY day ORDER BY (fingerprint, intDiv(ts, 600000), stack_hash, ts) "
     "SETTINGS index_granularity = 4096",
     "fingerprint"},
};

_Static_assert(PD_CH_AGG_BUCKET_MS == 600000, "stack_samples_v1's key names the bucket width");

/* Version 7 writes location rows into a table of their own, locations_v1
 * (stacks_v3's layout and granules: a lookup reads a granule of 64 rows per
 * key), in a new format: a function's system name only where it differs
 * from its name (ch_int.h). Stack rows stay in stacks_v3. Measured on
 * bench/clickhouse/size.mjs's 600 real profiles (10 s apart, LZ4): stacks
 * 307 -> ~257 B per profile — LZ4 compresses a block of location rows
 * alone better than one interleaved with stack rows of random keys (-28),
 * and no longer pays for Go's name written twice (-21). Older location
 * rows are not copied: they stay in stacks_v3 (with the stack rows that
 * name them, in the same day partitions) and a read looks there for the
 * keys locations_v1 does not have (ch_read.c): a round more only for stacks
 * written before the upgrade. Retention drops locations_v1's days as the
 * other tables'. */
static const table_def schema_v7[] = {
    {"locations_v1", "day Date, loc_key UInt64, loc String",
     "ReplacingMergeTree() PARTITION BY day ORDER BY loc_key SETTINGS index_granularity = 64",
     "loc_key"},
};

/* Version 8 writes profiles rows into profiles_v4: profiles_v3's columns,
 * partitioned by 10-minute bucket (aggs_v1's, stack_samples_v1's key) within
 * the day. ClickHouse 18.16 keeps merging each INSERT's new part with the
 * partition's big one while that one is only a few MiB (its merge selector
 * weighs every part with a fixed cost of a few MiB), and profiles rows are
 * ~5 B each on disk: a day's partition of a 100 profiles/s fleet was
 * rewritten whole with nearly every INSERT, 3,600 rows rewritten per row
 * inserted an hour into the day and more after (bench/clickhouse/RESULTS.md).
 * A 10-minute partition bounds that rewrite by what the fleet writes in 10
 * minutes. While profiles_v3 has rows (written before: not copied,
 * retention drops their days) reads name the Merge table profiles_all
 * (PD_CH_PROFILES_ALL), which reads both tables alike, each with its own
 * keys and partition pruning (every read names a ts range, or a ts, beside
 * the day); then profiles_v4 itself (pd__ch_profiles_read, legacy_check). On a
 * cluster profiles_all_local merges the local tables and profiles_all is
 * Distributed over it, as over every table (18.16's Merge over Distributed
 * tables loses the columns of the WHERE: "Not found column day in block"). */
static const table_def schema_v8[] = {
    {PD_CH_PROFILES, PROFILES_COLUMNS,
     "MergeTree() PARTITION BY (day, intDiv(ts, 600000)) ORDER BY (fingerprint, ts)",
     "fingerprint"},
    /* put_engine fills in the database's name (18.16 evaluates a
       currentDatabase() there again when it loads the table at a restart,
       in no database) and the table suffix ("_local" on a cluster) */
    {PD_CH_PROFILES_ALL, PROFILES_COLUMNS, "Merge(%s, '^profiles_v[34]%s$')", "fingerprint"},
};

static const migration migrations[] = {
    {1, schema_v1, sizeof schema_v1 / sizeof schema_v1[0], NULL, 0},
    {2, NULL, 0, NULL, 0},
    {3, schema_v3, sizeof schema_v3 / sizeof schema_v3[0], NULL, 0},
    {4, NULL, 0, NULL, 0},
    {5, schema_v5, sizeof schema_v5 / sizeof schema_v5[0], NULL, 0},
    {6, schema_v6, sizeof schema_v6 / sizeof schema_v6[0], NULL, 0},
    {7, schema_v7, sizeof schema_v7 / sizeof schema_v7[0], NULL, 0},
    {8, schema_v8, sizeof schema_v8 / sizeof schema_v8[0], NULL, 0},
};

_Static_assert(sizeof migrations / sizeof migrations[0] == PD_CH_SCHEMA_VERSION,
               "one migration per schema version");

static int exec_on_sql(pd_ch *c, size_t u, pd_buf *sql, pd_buf *resp, pd_err *err)
{
    if (pd_buf_putc(sql, 0) < 0)
        return pd_err_set(err, PD_ENOMEM, "out of memory");
    return pd__ch_exec_on(c, u, (const char *)sql->data, resp, err);
}

/* Appends the ENGINE clause of table t on one server to sql: t->engine, or
 * with --clickhouse.replicated its Replicated* form — "MergeTree() ..."
 * becomes "ReplicatedMergeTree('/clickhouse/tables/{shard}/<db>/<name>_local',
 * '{replica}') ...", "ReplacingMergeTree()" ReplicatedReplacingMergeTree:
 * the shard and replica come from each server's <macros>, so the same
 * statement runs on every server and the replicas of a shard share one
 * ZooKeeper path. A Merge(...) engine (profiles_all) gets the database's
 * name and the table suffix at its two %s: it merges this server's tables,
 * local ones on a cluster. */
static int put_engine(const pd_ch *c, const table_def *t, pd_buf *sql)
{
    if (strncmp(t->engine, "Merge(", 6) == 0) {
        pd_buf db;
        pd_buf_init(&db, 0);
        int rc = pd__ch_put_sql_string(&db, c->db, strlen(c->db));
        rc = rc ? rc : pd_buf_putc(&db, 0);
        rc = rc ? rc : pd_buf_printf(sql, t->engine, (const char *)db.data, pd__ch_local_suffix(c));
        pd_buf_release(&db);
        return rc;
    }
    const char *mt = strstr(t->engine, "MergeTree()");
    if (!c->replicated || !mt)
        return pd_buf_puts(sql, t->engine);
    return pd_buf_printf(sql,
                         "Replicated%.*sMergeTree('/clickhouse/tables/{shard}/%s/%s%s', "
                         "'{replica}')%s",
                         (int)(mt - t->engine), t->engine, c->db, t->name, pd__ch_local_suffix(c),
                         mt + strlen("MergeTree()"));
}

/* Replicated layout: server u must define the {shard} and {replica}
 * macros (else CREATE fails with a message naming neither profd's flag nor
 * the fix), and the tables profd finds there must be what the flag says:
 * --clickhouse.replicated over plain MergeTree tables would promise copies
 * that do not exist; without it over replicated ones a later migration
 * would add unreplicated tables. PD_EINVAL with the fix, or -EIO. */
static int layout_check(pd_ch *c, size_t u, pd_err *err)
{
    pd_buf sql, resp;
    pd_buf_init(&sql, 0);
    pd_buf_init(&resp, 1 << 20);
    int rc = 0;
    if (c->replicated) {
        rc = pd_buf_puts(&sql, "SELECT count() FROM system.macros WHERE macro IN ('shard', "
                               "'replica') FORMAT RowBinary");
        rc = rc ? rc : exec_on_sql(c, u, &sql, &resp, err);
        if (rc < 0)
            goto out;
        ch_rd r = {(const uint8_t *)resp.data, resp.len, 0, false};
        if (pd__ch_rd_u64(&r) != 2 || r.bad) {
            rc = pd_err_set(err, PD_EINVAL,
                            "ClickHouse %s: --clickhouse.replicated needs the server's config "
                            "to define <macros><shard>...</shard><replica>...</replica></macros> "
                            "(and <zookeeper>); see docs/clickhouse.md#replicas",
                            c->urls[u]);
            goto out;
        }
    }
    pd_buf_reset(&sql);
    pd_buf_reset(&resp);
    rc = pd_buf_puts(&sql, "SELECT name, engine FROM system.tables WHERE database = ");
    rc = rc ? rc : pd__ch_put_sql_string(&sql, c->db, strlen(c->db));
    rc = rc ? rc
            : pd_buf_puts(&sql, " AND engine LIKE '%MergeTree' AND endsWith(name, '_local') "
                                "FORMAT RowBinary");
    rc = rc ? rc : exec_on_sql(c, u, &sql, &resp, err);
    if (rc < 0)
        goto out;
    ch_rd r = {(const uint8_t *)resp.data, resp.len, 0, false};
    while (pd__ch_rd_more(&r)) {
        const uint8_t *n, *e;
        size_t nn, en;
        pd__ch_rd_str(&r, &n, &nn);
        pd__ch_rd_str(&r, &e, &en);
        if (r.bad)
            break;
        bool rep = en >= 10 && memcmp(e, "Replicated", 10) == 0;
        if (rep != c->replicated) {
            if (c->replicated)
                rc = pd_err_set(err, PD_EINVAL,
                                "ClickHouse %s: table %s.%.*s is %.*s, not replicated: "
                                "--clickhouse.replicated needs the tables it creates (copy the "
                                "rows over as docs/clickhouse.md#replicas says)",
                                c->urls[u], c->db, (int)nn, (const char *)n, (int)en,
                                (const char *)e);
            else
                rc = pd_err_set(err, PD_EINVAL,
                                "ClickHouse %s: table %s.%.*s is %.*s: start profd with "
                                "--clickhouse.replicated",
                                c->urls[u], c->db, (int)nn, (const char *)n, (int)en,
                                (const char *)e);
            goto out;
        }
    }
out:
    pd_buf_release(&sql);
    pd_buf_release(&resp);
    return rc;
}

/* Creates or migrates the schema on server u. */
static int schema_on(pd_ch *c, size_t u, pd_err *err)
{
    pd_buf sql, resp;
    pd_buf_init(&sql, 0);
    pd_buf_init(&resp, 1 << 20);
    int rc;
    /* the database must exist before a request names it (the writer and
       readers run meanwhile when maintenance creates a late replica's) */
    rc = pd_buf_printf(&sql, "CREATE DATABASE IF NOT EXISTS `%s`", c->db);
    rc = rc ? rc : pd_buf_putc(&sql, 0);
    rc = rc ? rc : pd__ch_exec_on_db(c, u, "default", (const char *)sql.data, NULL, err);
    if (rc < 0)
        goto out;
    pd_buf_reset(&sql);
    rc = pd_buf_puts(&sql, "CREATE TABLE IF NOT EXISTS schema_version (version UInt32, "
                           "applied_ms Int64) ENGINE = MergeTree() ORDER BY version");
    rc = rc ? rc : exec_on_sql(c, u, &sql, NULL, err);
    if (rc < 0)
        goto out;
    pd_buf_reset(&sql);
    rc = pd_buf_puts(&sql, "SELECT max(version) FROM schema_version FORMAT RowBinary");
    rc = rc ? rc : exec_on_sql(c, u, &sql, &resp, err);
    if (rc < 0)
        goto out;
    ch_rd r = {(const uint8_t *)resp.data, resp.len, 0, false};
    uint32_t have = pd__ch_rd_u32(&r);
    if (r.bad) {
        rc = pd_err_set(err, -EIO, "ClickHouse %s: unreadable answer to max(version)", c->urls[u]);
        goto out;
    }
    if (have > PD_CH_SCHEMA_VERSION) {
        rc = pd_err_set(err, PD_ECORRUPT,
                        "ClickHouse %s: database %s has profd schema version %u, newer than "
                        "this profd's %d; run a newer profd",
                        c->urls[u], c->db, have, PD_CH_SCHEMA_VERSION);
        goto out;
    }
    if (c->cluster && (rc = layout_check(c, u, err)) < 0)
        goto out;
    if (have == PD_CH_SCHEMA_VERSION)
        goto out;
    for (size_t m = 0; m < sizeof migrations / sizeof migrations[0]; m++) {
        const migration *mg = &migrations[m];
        if (mg->version <= (int)have)
            continue;
        for (size_t i = 0; i < mg->n_tables; i++) {
            const table_def *t = &mg->tables[i];
            pd_buf_reset(&sql);
            rc = pd_buf_printf(&sql, "CREATE TABLE IF NOT EXISTS %s%s (%s) ENGINE = ", t->name,
                               pd__ch_local_suffix(c), t->columns);
            rc = rc ? rc : put_engine(c, t, &sql);
            rc = rc ? rc : exec_on_sql(c, u, &sql, NULL, err);
            if (rc == 0 && c->cluster) {
                pd_buf_reset(&sql);
                rc = pd_buf_printf(&sql,
                                   "CREATE TABLE IF NOT EXISTS %s AS %s_local ENGINE = "
                                   "Distributed(%s, %s, %s_local, %s)",
                                   t->name, t->name, c->cluster, c->db, t->name, t->shard_key);
                rc = rc ? rc : exec_on_sql(c, u, &sql, NULL, err);
            }
            if (rc < 0)
                goto out;
        }
        /* statements of later versions name the table to alter with %1$s (the
           table suffix, "_local" on a cluster) and must be idempotent
           (ADD COLUMN IF NOT EXISTS): a migration cut short runs again */
        for (size_t i = 0; i < mg->n_statements; i++) {
            pd_buf_reset(&sql);
            rc = pd_buf_printf(&sql, mg->statements[i], pd__ch_local_suffix(c));
            rc = rc ? rc : exec_on_sql(c, u, &sql, NULL, err);
            if (rc < 0)
                goto out;
        }
        pd_buf_reset(&sql);
        rc = pd_buf_printf(&sql, "INSERT INTO schema_version VALUES (%d, %lld)", mg->version,
                           (long long)pd_now_ms());
        rc = rc ? rc : exec_on_sql(c, u, &sql, NULL, err);
        if (rc < 0)
            goto out;
        pd_log(PD_LOG_INFO, "clickhouse schema migrated", "url=%s database=%s from=%u to=%d",
               c->urls[u], c->db, have, mg->version);
        have = (uint32_t)mg->version;
    }
out:
    pd_buf_release(&sql);
    pd_buf_release(&resp);
    return rc;
}

/* ---- writer ---- */

static uint64_t new_write_id(void)
{
    static uint64_t seed, counter;
    uint64_t s = __atomic_load_n(&seed, __ATOMIC_RELAXED);
    if (s == 0) {
        uint64_t v = 0;
        if (getrandom(&v, sizeof v, 0) != sizeof v)
            v = (uint64_t)pd_now_ms() ^ (uint64_t)getpid() << 32;
        v |= 1;
        uint64_t z = 0;
        __atomic_compare_exchange_n(&seed, &z, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
        s = __atomic_load_n(&seed, __ATOMIC_RELAXED);
    }
    uint64_t n = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    uint64_t in[2] = {s, n};
    uint64_t id = XXH3_64bits(in, sizeof in);
    return id ? id : 1;
}

/* ---- append ---- */

static int put_arr_str_p(pd_buf *b, const pd_profile *p, size_t n, const int64_t *idx,
                         size_t stride)
{
    int rc = pd_buf_put_varint(b, n);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        int64_t k = *(const int64_t *)((const char *)idx + i * stride);
        const char *s = pd_profile_str(p, k);
        rc = pd__ch_put_str(b, s, strlen(s));
    }
    return rc;
}

static int put_pstr(pd_buf *b, const pd_profile *p, int64_t idx)
{
    const char *s = pd_profile_str(p, idx);
    return pd__ch_put_str(b, s, strlen(s));
}

/* Appends a stacks_v3 row (day, key, blob[0..len)) to e's stack rows. */
static int add_stack_row(ch_entry *e, size_t *n, size_t *cap, uint64_t key, const char *blob,
                         size_t len)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        uint64_t *nh = realloc(e->stack_hash, nc * sizeof *nh);
        if (!nh)
            return PD_ENOMEM;
        e->stack_hash = nh;
        size_t *ne = realloc(e->stack_end, nc * sizeof *ne);
        if (!ne)
            return PD_ENOMEM;
        e->stack_end = ne;
        *cap = nc;
    }
    if (pd__ch_put_u16(&e->stack_rows, (uint16_t)e->day) < 0 ||
        pd__ch_put_u64(&e->stack_rows, key) < 0 || pd__ch_put_str(&e->stack_rows, blob, len) < 0)
        return PD_ENOMEM;
    e->stack_hash[*n] = key;
    e->stack_end[(*n)++] = e->stack_rows.len;
    return 0;
}

int pd__ch_put_agg_key(pd_buf *b, int64_t day, uint64_t fp, int64_t bucket, uint64_t th,
                       uint64_t sh, uint64_t n, uint64_t wsum)
{
    int rc = pd__ch_put_u16(b, (uint16_t)day);
    rc = rc ? rc : pd__ch_put_u64(b, fp);
    rc = rc ? rc : pd__ch_put_u64(b, (uint64_t)bucket);
    rc = rc ? rc : pd__ch_put_u64(b, th);
    rc = rc ? rc : pd__ch_put_u64(b, sh);
    rc = rc ? rc : pd__ch_put_u64(b, n);
    return rc ? rc : pd__ch_put_u64(b, wsum);
}

/* The columns of e's aggs_v1 row before valuesMap. */
static int put_agg_key(pd_buf *b, const ch_entry *e, int64_t bucket, uint64_t th, uint64_t sh,
                       uint64_t n, uint64_t wsum)
{
    return pd__ch_put_agg_key(b, e->day, e->fp, bucket, th, sh, n, wsum);
}

/* Encodes every row of one append into e. */
static int encode_entry(ch_entry *e, const pd_labels *labels, const uint8_t *body, size_t len,
                        const pd_profile *p, int loc_version, pd_err *err)
{
    uint64_t th = pd__ch_types_hash(p);
    size_t nt = p->n_sample_type;
    e->types_hash = th;
    e->n_types = nt;
    int rc = 0;
    pd_buf blob;
    pd_buf_init(&blob, 0);
    pd_u64map idx;
    pd_u64map_init(&idx);
    ch_loc_cache lc; /* the profile's locations, each encoded and hashed once */
    pd__ch_loc_cache_init(&lc, p, loc_version);
    int64_t *sums = NULL, *totals = calloc(nt ? nt : 1, sizeof *totals);
    uint64_t *sidx = NULL, *hashes = NULL, *keys = NULL;
    size_t n_st = 0, cap_st = 0, n_sum = 0, cap_sum = 0, cap_keys = 0;
    if (!totals)
        goto nomem;
    pd_profile_totals(p, totals);

    /* profile row */
    pd_buf *pr = &e->prof_row;
    rc = pd__ch_put_u16(pr, (uint16_t)e->day);
    rc = rc ? rc : pd__ch_put_u64(pr, (uint64_t)e->ts);
    rc = rc ? rc : pd__ch_put_u64(pr, e->fp);
    rc = rc ? rc : pd__ch_put_u64(pr, e->write_id);
    rc = rc ? rc : pd__ch_put_u64(pr, th);
    rc = rc ? rc : put_arr_str_p(pr, p, nt, &p->sample_type[0].type, sizeof p->sample_type[0]);
    rc = rc ? rc : put_arr_str_p(pr, p, nt, &p->sample_type[0].unit, sizeof p->sample_type[0]);
    rc = rc ? rc : pd_buf_put_varint(pr, nt);
    for (size_t i = 0; rc == 0 && i < nt; i++)
        rc = pd__ch_put_u64(pr, (uint64_t)totals[i]);
    rc = rc ? rc : put_pstr(pr, p, p->period_type.type);
    rc = rc ? rc : put_pstr(pr, p, p->period_type.unit);
    rc = rc ? rc : pd__ch_put_u64(pr, (uint64_t)p->period);
    rc = rc ? rc : pd__ch_put_u64(pr, (uint64_t)p->time_nanos);
    rc = rc ? rc : pd__ch_put_u64(pr, (uint64_t)p->duration_nanos);
    rc = rc ? rc : put_arr_str_p(pr, p, p->n_comment, p->comment, sizeof *p->comment);
    rc = rc ? rc : put_pstr(pr, p, p->drop_frames);
    rc = rc ? rc : put_pstr(pr, p, p->keep_frames);
    rc = rc ? rc : put_pstr(pr, p, p->default_sample_type);
    rc = rc ? rc : put_pstr(pr, p, p->doc_url);
    /* schema v2: no body; a single read rebuilds the profile from its
       samples rows, their stacks and this row's header (clickhouse.h) */
    (void)body;
    (void)len;
    rc = rc ? rc : pd__ch_put_str(pr, "", 0);
    /* series row and index rows */
    rc = rc ? rc : pd__ch_put_u16(&e->series_row, (uint16_t)e->day);
    rc = rc ? rc : pd__ch_put_u64(&e->series_row, e->fp);
    rc = rc ? rc : pd_buf_put_varint(&e->series_row, labels->n);
    for (size_t i = 0; rc == 0 && i < labels->n; i++)
        rc = pd__ch_put_str(&e->series_row, labels->v[i].name, strlen(labels->v[i].name));
    rc = rc ? rc : pd_buf_put_varint(&e->series_row, labels->n);
    for (size_t i = 0; rc == 0 && i < labels->n; i++)
        rc = pd__ch_put_str(&e->series_row, labels->v[i].value, strlen(labels->v[i].value));
    for (size_t i = 0; rc == 0 && i < labels->n; i++) {
        rc = pd__ch_put_u16(&e->index_rows, (uint16_t)e->day);
        rc = rc ? rc : pd__ch_put_str(&e->index_rows, labels->v[i].name, strlen(labels->v[i].name));
        rc = rc ? rc
                : pd__ch_put_str(&e->index_rows, labels->v[i].value, strlen(labels->v[i].value));
        rc = rc ? rc : pd__ch_put_u64(&e->index_rows, e->fp);
    }
    if (rc < 0)
        goto nomem;

    /* one samples row per sample, in the profile's order: a producer may
       repeat a stack (Go's heap profiles do) and a single read rebuilds the
       multiset (schema v2); the stack of each is written once per append,
       and each of its locations (schema 4) once per append too, as rows
       under their own keys (flush() sends schema-7 locations to
       locations_v1, the rest to stacks_v3).
       The values of one stack are still summed here, only to refuse a
       profile whose per-stack sums overflow int64 (as merges would) */
    if (p->n_sample && !(sidx = malloc(p->n_sample * sizeof *sidx)))
        goto nomem;
    for (size_t i = 0; i < p->n_sample; i++) {
        const pd_pprof_sample *sm = &p->sample[i];
        uint64_t h, at;
        if (pd__ch_stack_key(&lc, i, &h) < 0)
            goto nomem;
        if (pd_u64map_get(&idx, h, &at)) {
            for (size_t k = 0; k < nt && k < sm->n_value; k++)
                if (__builtin_add_overflow(sums[at * nt + k], sm->value[k], &sums[at * nt + k])) {
                    rc = pd_err_set(err, PD_EINVAL,
                                    "sample %zu: values of one stack overflow "
                                    "int64 when summed",
                                    i);
                    goto out;
                }
            sidx[i] = hashes[at];
            continue;
        }
        if (n_sum == cap_sum) {
            size_t nc = cap_sum ? cap_sum * 2 : 64;
            int64_t *ns = realloc(sums, nc * (nt ? nt : 1) * sizeof *ns);
            if (ns)
                sums = ns;
            uint64_t *nh = ns ? realloc(hashes, nc * sizeof *nh) : NULL;
            if (!nh)
                goto nomem;
            hashes = nh;
            cap_sum = nc;
        }
        for (size_t k = 0; k < nt; k++)
            sums[n_sum * nt + k] = k < sm->n_value ? sm->value[k] : 0;
        if (pd_u64map_put(&idx, h, n_sum) < 0)
            goto nomem;
        hashes[n_sum++] = h;
        sidx[i] = h;
        /* its locations' rows (new to this append), then its own */
        if (sm->n_location > cap_keys) {
            uint64_t *nk = realloc(keys, sm->n_location * sizeof *nk);
            if (!nk)
                goto nomem;
            keys = nk;
            cap_keys = sm->n_location;
        }
        for (size_t k = 0; k < sm->n_location; k++) {
            size_t j;
            if (pd__ch_loc_cache_get(&lc, sm->location_id[k], &j) < 0)
                goto nomem;
            ch_loc_ent *le = &lc.ent[j];
            keys[k] = le->key;
            if (le->rowed)
                continue;
            le->rowed = true;
            if (add_stack_row(e, &n_st, &cap_st, le->key, lc.bytes.data + le->off, le->len) < 0)
                goto nomem;
        }
        pd_buf_reset(&blob);
        if (pd__ch_stack_encode(p, i, keys, &blob) < 0 ||
            add_stack_row(e, &n_st, &cap_st, h, blob.data, blob.len) < 0)
            goto nomem;
    }
    e->n_stacks = n_st;
    for (size_t i = 0; i < p->n_sample; i++) {
        const pd_pprof_sample *sm = &p->sample[i];
        pd_buf *sr = &e->sample_rows;
        rc = pd__ch_put_u16(sr, (uint16_t)e->day);
        rc = rc ? rc : pd__ch_put_u64(sr, (uint64_t)e->ts);
        rc = rc ? rc : pd__ch_put_u64(sr, e->fp);
        rc = rc ? rc : pd__ch_put_u64(sr, e->write_id);
        rc = rc ? rc : pd__ch_put_u64(sr, th);
        rc = rc ? rc : pd__ch_put_u64(sr, sidx[i]);
        rc = rc ? rc : pd_buf_put_varint(sr, nt);
        for (size_t k = 0; rc == 0 && k < nt; k++)
            rc = pd__ch_put_u64(sr, k < sm->n_value ? (uint64_t)sm->value[k] : 0);
        if (rc < 0)
            goto nomem;
        e->n_samples++;
    }
    /* aggs_v1 (schema 5): the profile's stacks summed (all-zero ones left
       out, as merges leave them out), then its reconciliation row */
    int64_t bucket = e->ts / PD_CH_AGG_BUCKET_MS;
    for (size_t i = 0; i < n_sum; i++) {
        size_t nz = 0;
        for (size_t k = 0; k < nt; k++)
            nz += sums[i * nt + k] != 0;
        if (nz == 0)
            continue;
        rc = put_agg_key(&e->agg_rows, e, bucket, th, hashes[i], 0, 0);
        rc = rc ? rc : pd_buf_put_varint(&e->agg_rows, nz);
        for (size_t k = 0; rc == 0 && k < nt; k++)
            if (sums[i * nt + k] != 0)
                rc = pd__ch_put_u16(&e->agg_rows, (uint16_t)k);
        rc = rc ? rc : pd_buf_put_varint(&e->agg_rows, nz);
        for (size_t k = 0; rc == 0 && k < nt; k++)
            if (sums[i * nt + k] != 0)
                rc = pd__ch_put_u64(&e->agg_rows, (uint64_t)sums[i * nt + k]);
        if (rc < 0)
            goto nomem;
    }
    rc = put_agg_key(&e->agg_rows, e, bucket, 0, 0, 1, pd__ch_wid_hash(e->write_id));
    rc = rc ? rc : pd_buf_put_varint(&e->agg_rows, 0);
    rc = rc ? rc : pd_buf_put_varint(&e->agg_rows, 0);
    if (rc < 0)
        goto nomem;
    rc = 0;
    goto out;
nomem:
    rc = pd_err_set(err, PD_ENOMEM, "out of memory encoding a profile for ClickHouse");
out:
    free(sums);
    free(sidx);
    free(hashes);
    free(keys);
    free(totals);
    pd_u64map_release(&idx);
    pd__ch_loc_cache_release(&lc);
    pd_buf_release(&blob);
    return rc;
}

int pd__ch_check_time(pd_ch *c, int64_t ts_ms, pd_err *err)
{
    pd_storage_options o = pd_storage_options_default();
    o.retention_ms = __atomic_load_n(&c->retention_ms, __ATOMIC_RELAXED);
    o.future_grace_ms = c->grace_ms;
    int rc = pd_storage_options_check_time(&o, c->clock(), ts_ms, err);
    if (rc == 0 && (ts_ms < 0 || ts_ms >= 49673ll * 86400000))
        rc = pd_err_set(
            err, PD_EOUTOFBOUNDS,
            "timestamp %lld ms is outside ClickHouse's Date range (1970-01-01 to 2105-12-31)",
            (long long)ts_ms);
    return rc;
}

/* A new entry of the series `labels` at ts_ms, checked and encoded (no
 * lock): *out or an error as pd__ch_append's before queueing. */
static int entry_new(pd_ch *c, const pd_labels *labels, int64_t ts_ms, const uint8_t *body,
                     size_t len, const pd_profile *profile, ch_entry **out, pd_err *err)
{
    *out = NULL;
    if (!pd_labels_get(labels, "__name__"))
        return pd_err_set(err, PD_EINVAL, "the series has no __name__ label");
    int rc = pd__ch_check_time(c, ts_ms, err);
    if (rc < 0)
        return rc;
    ch_entry *e = calloc(1, sizeof *e);
    if (!e)
        return pd_err_set(err, PD_ENOMEM, "out of memory");
    e->fp = pd_labels_hash(labels);
    e->ts = ts_ms;
    e->day = pd__ch_day(ts_ms);
    e->write_id = new_write_id();
    pd_buf_init(&e->prof_row, 0);
    pd_buf_init(&e->series_row, 0);
    pd_buf_init(&e->index_rows, 0);
    pd_buf_init(&e->sample_rows, 0);
    pd_buf_init(&e->stack_rows, 0);
    pd_buf_init(&e->agg_rows, 0);
    rc = encode_entry(e, labels, body, len, profile, c->loc_version, err);
    if (rc < 0) {
        entry_free(e);
        return rc;
    }
    *out = e;
    return 0;
}

/* Whether the pending batch b already holds a profile of e's series at
 * e's time (c->mu held). */
static bool pending_has(const ch_batch *b, const ch_entry *e)
{
    for (const ch_entry *x = b ? b->head : NULL; x; x = x->next)
        if (x->fp == e->fp && x->ts == e->ts)
            return true;
    return false;
}

void pd__ch_append_many(pd_ch *c, pd_storage_item *const *items, size_t n)
{
    ch_entry **ents = calloc(n ? n : 1, sizeof *ents);
    if (!ents) {
        for (size_t i = 0; i < n; i++)
            items[i]->rc = pd_err_set(&items[i]->err, PD_ENOMEM, "out of memory");
        return;
    }
    size_t queued = 0;
    for (size_t i = 0; i < n; i++) { /* encoded without the lock */
        pd_storage_item *it = items[i];
        pd_err_clear(&it->err);
        it->rc =
            entry_new(c, it->labels, it->ts_ms, it->body, it->len, it->profile, &ents[i], &it->err);
    }

    pthread_mutex_lock(&c->mu);
    while (!c->stopping && c->pending && c->pending->bytes > 4 * c->batch_bytes) {
        c->bp_waiting++;
        pthread_cond_wait(&c->cv_done, &c->mu);
        c->bp_waiting--;
    }
    ch_batch *b = c->pending;
    bool fresh = b == NULL; /* the writer waits for a batch to appear */
    for (size_t i = 0; i < n; i++) {
        ch_entry *e = ents[i];
        if (!e)
            continue;
        int rc = 0;
        if (c->stopping)
            rc = pd_err_set(&items[i]->err, PD_ECLOSED, "the storage is closing");
        else if (pending_has(b, e)) /* also one of this call's */
            rc = pd_err_set(&items[i]->err, PD_EEXIST,
                            "a profile of this series at %lld is already stored", (long long)e->ts);
        else if (!b && !(b = calloc(1, sizeof *b)))
            rc = pd_err_set(&items[i]->err, PD_ENOMEM, "out of memory");
        else if (b != c->pending && pthread_cond_init(&b->cv, NULL) != 0) {
            free(b);
            b = NULL;
            rc = pd_err_set(&items[i]->err, PD_ENOMEM, "out of resources for a batch");
        }
        if (rc < 0) {
            items[i]->rc = rc;
            entry_free(e);
            ents[i] = NULL;
            continue;
        }
        c->pending = b;
        if (b->tail)
            b->tail->next = e;
        else
            b->head = e;
        b->tail = e;
        b->n++;
        b->bytes += e->prof_row.len + e->sample_rows.len + e->stack_rows.len + e->agg_rows.len;
        b->rows += e->n_samples;
        queued++;
    }
    if (queued) { /* one wait for all: they are in one batch */
        pd_metrics_add("profd_clickhouse_queued_profiles", NULL, (double)queued);
        b->refs++;
        /* the writer, gathering, wakes at its window's end by itself: woken
           only when it waits for a batch or this one is full (a wake per
           push was 8% of profd's CPU under a fleet) */
        if (fresh || pd__ch_batch_full(c))
            pthread_cond_signal(&c->cv_work);
        while (!b->done)
            pthread_cond_wait(&b->cv, &c->mu);
        for (size_t i = 0; i < n; i++) {
            if (!ents[i])
                continue;
            items[i]->rc = ents[i]->rc;
            if (ents[i]->rc < 0)
                items[i]->err = ents[i]->err;
            else
                __atomic_add_fetch(&c->gen, 1, __ATOMIC_RELEASE);
        }
        if (--b->refs == 0)
            batch_free(b);
    }
    pthread_mutex_unlock(&c->mu);
    free(ents);
}

int pd__ch_append(pd_ch *c, const pd_labels *labels, int64_t ts_ms, const uint8_t *body, size_t len,
                  const pd_profile *profile, pd_err *err)
{
    pd_storage_item it = {
        .labels = labels, .ts_ms = ts_ms, .body = body, .len = len, .profile = profile};
    pd_storage_item *p = &it;
    pd__ch_append_many(c, &p, 1);
    if (it.rc < 0 && err)
        *err = it.err;
    return it.rc;
}

/* ---- retention ----
 *
 * Owned by the database, not by a flag: table `retention` (set_ms, retention_ms; on every
 * server, like schema_version) holds it, the row with the largest set_ms counting. The
 * first profd to open a database without a row records its --storage.retention.time
 * there; every profd then uses the recorded value (re-read at each maintenance run) and
 * says so in its log when its own flag differs. Changing it is one INSERT (docs/clickhouse.md).
 * Retention drops the day partitions older than it of every table: profiles, samples,
 * series_index, and since schema v3 stacks and series (a row each per day of use; since v7
 * locations_v1 too); since schema v5 aggs_v1, first: a day whose samples are gone but whose
 * profiles rows are not yet must not be answered from sums (without its aggs rows the bucket is
 * read raw). */

static const char *const partitioned[] = {"aggs_v1",    "profiles_v3",  PD_CH_PROFILES,
                                          "samples_v3", PD_CH_SAMPLES,  "series_index_v3",
                                          "stacks_v3",  "locations_v1", "series_v3"};

/* The database's retention on server u into *out (ms; <= 0: none); records
 * c->flag_retention_ms first when there is none. */
static int retention_on(pd_ch *c, size_t u, int64_t *out, pd_err *err)
{
    pd_buf sql, resp;
    pd_buf_init(&sql, 0);
    pd_buf_init(&resp, 1 << 16);
    int rc = pd_buf_puts(&sql, "CREATE TABLE IF NOT EXISTS retention (set_ms Int64, retention_ms "
                               "Int64) ENGINE = MergeTree() ORDER BY set_ms");
    rc = rc ? rc : exec_on_sql(c, u, &sql, NULL, err);
    if (rc < 0)
        goto out;
    pd_buf_reset(&sql);
    rc = pd_buf_puts(&sql, "SELECT retention_ms FROM retention ORDER BY set_ms DESC LIMIT 1 "
                           "FORMAT RowBinary");
    rc = rc ? rc : exec_on_sql(c, u, &sql, &resp, err);
    if (rc < 0)
        goto out;
    if (resp.len >= 8) {
        ch_rd r = {(const uint8_t *)resp.data, resp.len, 0, false};
        *out = (int64_t)pd__ch_rd_u64(&r);
        goto out;
    }
    pd_buf_reset(&sql);
    rc = pd_buf_printf(&sql, "INSERT INTO retention VALUES (%lld, %lld)", (long long)pd_now_ms(),
                       (long long)c->flag_retention_ms);
    rc = rc ? rc : exec_on_sql(c, u, &sql, NULL, err);
    if (rc == 0) {
        *out = c->flag_retention_ms;
        pd_log(PD_LOG_INFO, "clickhouse retention recorded for the database",
               "url=%s database=%s retention_ms=%lld", c->urls[u], c->db,
               (long long)c->flag_retention_ms);
    }
out:
    pd_buf_release(&sql);
    pd_buf_release(&resp);
    return rc;
}

/* Adopts the database's retention v (read from server u). */
static void retention_adopt(pd_ch *c, size_t u, int64_t v)
{
    int64_t was = __atomic_exchange_n(&c->retention_ms, v, __ATOMIC_RELAXED);
    if (!__atomic_exchange_n(&c->retention_said, true, __ATOMIC_RELAXED) || was != v) {
        if (v != c->flag_retention_ms)
            pd_log(PD_LOG_WARN, "clickhouse retention is the database's, not this profd's flag",
                   "url=%s database=%s retention_ms=%lld flag_ms=%lld", c->urls[u], c->db,
                   (long long)v, (long long)c->flag_retention_ms);
    }
}

static int drop_old_on(pd_ch *c, size_t u, int64_t keep_day, pd_err *err)
{
    pd_buf sql, resp;
    pd_buf_init(&sql, 0);
    pd_buf_init(&resp, 16u << 20);
    /* by max_date (the partition key's day) and partition ID: a partition
       of profiles_v4 is (day, bucket), its name no day string */
    int rc = pd_buf_puts(&sql, "SELECT DISTINCT table, partition_id, partition FROM system.parts "
                               "WHERE active AND database = ");
    rc = rc ? rc : pd__ch_put_sql_string(&sql, c->db, strlen(c->db));
    rc = rc ? rc : pd_buf_puts(&sql, " AND table IN (");
    for (size_t i = 0; rc == 0 && i < sizeof partitioned / sizeof partitioned[0]; i++)
        rc = pd_buf_printf(&sql, "%s'%s%s'", i ? "," : "", partitioned[i], pd__ch_local_suffix(c));
    rc = rc ? rc : pd_buf_puts(&sql, ") AND max_date < ");
    rc = rc ? rc : pd__ch_put_sql_day(&sql, keep_day);
    rc = rc ? rc : pd_buf_puts(&sql, " ORDER BY startsWith(table, 'aggs_') DESC FORMAT RowBinary");
    rc = rc ? rc : exec_on_sql(c, u, &sql, &resp, err);
    if (rc < 0)
        goto out;
    ch_rd r = {(const uint8_t *)resp.data, resp.len, 0, false};
    while (pd__ch_rd_more(&r)) {
        const uint8_t *t, *id, *pt;
        size_t tn, idn, pn;
        pd__ch_rd_str(&r, &t, &tn);
        pd__ch_rd_str(&r, &id, &idn);
        pd__ch_rd_str(&r, &pt, &pn);
        if (r.bad)
            break;
        pd_buf_reset(&sql);
        rc = pd_buf_printf(&sql, "ALTER TABLE %.*s DROP PARTITION ID ", (int)tn, (const char *)t);
        rc = rc ? rc : pd__ch_put_sql_string(&sql, (const char *)id, idn);
        rc = rc ? rc : exec_on_sql(c, u, &sql, NULL, err);
        if (rc < 0)
            goto out;
        pd_log(PD_LOG_INFO, "clickhouse retention dropped a partition",
               "url=%s table=%.*s partition=%.*s", c->urls[u], (int)tn, (const char *)t, (int)pn,
               (const char *)pt);
        pd_metrics_add("profd_storage_retention_deletes_total", NULL, 1);
    }
out:
    pd_buf_release(&sql);
    pd_buf_release(&resp);
    return rc;
}

static int maintain_retention(pd_ch *c, pd_err *err);

/* Clears c->legacy_samples once samples_v3 (written before schema 6) has
 * no rows left — retention dropped its days, or there never were any: reads
 * then read PD_CH_SAMPLES alone; and c->legacy_profiles once profiles_v3
 * (written before schema 8) has none: reads then name PD_CH_PROFILES, not
 * the Merge table. Only ever cleared (a newer profd never writes the old
 * tables); an error keeps them (reads stay exact, a little slower). */
static void legacy_check(pd_ch *c)
{
    bool ls = pd__ch_legacy_samples(c);
    bool lp = __atomic_load_n(&c->legacy_profiles, __ATOMIC_RELAXED);
    if (!ls && !lp)
        return;
    pd_buf sql, resp;
    pd_buf_init(&sql, 0);
    pd_buf_init(&resp, 1 << 10);
    pd_err err;
    pd_err_clear(&err);
    if (pd_buf_puts(&sql, "SELECT (SELECT count() FROM samples_v3), (SELECT count() FROM "
                          "profiles_v3) FORMAT RowBinary") == 0 &&
        pd__ch_query(c, &sql, &resp, &err) == 0) {
        ch_rd r = {(const uint8_t *)resp.data, resp.len, 0, false};
        uint64_t ns = pd__ch_rd_u64(&r), np = pd__ch_rd_u64(&r);
        if (!r.bad && ls && ns == 0) {
            __atomic_store_n(&c->legacy_samples, false, __ATOMIC_RELAXED);
            pd_log(PD_LOG_INFO,
                   "clickhouse samples_v3 is empty: reads read " PD_CH_SAMPLES " alone",
                   "database=%s", c->db);
        }
        if (!r.bad && lp && np == 0) {
            __atomic_store_n(&c->legacy_profiles, false, __ATOMIC_RELAXED);
            pd_log(PD_LOG_INFO,
                   "clickhouse profiles_v3 is empty: reads read " PD_CH_PROFILES " alone",
                   "database=%s", c->db);
        }
    }
    pd_buf_release(&sql);
    pd_buf_release(&resp);
}

int pd__ch_maintain(pd_ch *c, pd_err *err)
{
    /* idle aggs_v1 sums too (the writer writes them when it wakes; this is
       the pass tests drive with their clock) */
    pd__ch_aggw_flush(c, PD_CH_AGGW_DUE);
    int rc = maintain_retention(c, err);
    legacy_check(c);
    return rc;
}

static int maintain_retention(pd_ch *c, pd_err *err)
{
    int rc = 0;
    bool adopted = false;
    /* a replica that was down when profd started gets its tables now */
    for (size_t u = 0; c->replicated && u < c->n_urls; u++) {
        pd_err e;
        pd_err_clear(&e);
        if (!__atomic_load_n(&c->schema_ok[u], __ATOMIC_RELAXED) && schema_on(c, u, &e) == 0) {
            __atomic_store_n(&c->schema_ok[u], true, __ATOMIC_RELAXED);
            pd_log(PD_LOG_INFO, "clickhouse replica has its tables", "url=%s", c->urls[u]);
        }
    }
    for (size_t u = 0; u < c->n_urls; u++) {
        int64_t ret;
        int r = retention_on(c, u, &ret, err);
        if (r == 0 && !adopted) {
            retention_adopt(c, u, ret);
            adopted = true;
        }
        int64_t limit = c->clock() - ret;
        /* day d holds [d, d+1) days: dropped once all of it is before limit */
        if (r == 0 && ret > 0 && limit > 0)
            r = drop_old_on(c, u, limit / 86400000, err);
        if (r < 0) {
            rc = r;
            if (c->cluster)
                continue; /* every shard must trim its own */
        } else if (!c->cluster) {
            return 0; /* one server (the others are its failover) */
        }
    }
    return rc;
}

static void *maint_main(void *arg)
{
    pd_ch *c = arg;
    pthread_mutex_lock(&c->stop_mu);
    while (!c->stopping) {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += c->maint_ms / 1000;
        int64_t ns = dl.tv_nsec + (c->maint_ms % 1000) * 1000000;
        dl.tv_sec += ns / 1000000000;
        dl.tv_nsec = ns % 1000000000;
        pthread_cond_timedwait(&c->stop_cv, &c->stop_mu, &dl);
        if (c->stopping)
            break;
        pthread_mutex_unlock(&c->stop_mu);
        pd_err err;
        pd_err_clear(&err);
        if (pd__ch_maintain(c, &err) < 0)
            pd_log(PD_LOG_WARN, "clickhouse retention failed", "err=\"%s\"", err.msg);
        pthread_mutex_lock(&c->stop_mu);
    }
    pthread_mutex_unlock(&c->stop_mu);
    return NULL;
}

/* ---- stats ---- */

void pd__ch_stats_get(pd_ch *c, pd_storage_stats *out)
{
    memset(out, 0, sizeof *out);
    pd_buf resp;
    pd_buf_init(&resp, 1 << 16);
    pd_err err;
    pd_err_clear(&err);
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT (SELECT uniqExact(fingerprint) FROM series_v3), count(), min(ts), max(ts) "
             "FROM %s FORMAT RowBinary",
             pd__ch_profiles_read(c));
    if (pd__ch_exec(c, sql, NULL, 0, NULL, &resp, NULL, &err) == 0) {
        ch_rd r = {(const uint8_t *)resp.data, resp.len, 0, false};
        uint64_t ns = pd__ch_rd_u64(&r), np = pd__ch_rd_u64(&r);
        int64_t mn = (int64_t)pd__ch_rd_u64(&r), mx = (int64_t)pd__ch_rd_u64(&r);
        if (!r.bad) {
            out->n_series = ns;
            out->n_profiles = np;
            out->min_ts = np ? mn : 0;
            out->max_ts = np ? mx : 0;
        }
    }
    pd_buf_reset(&resp);
    snprintf(sql, sizeof sql,
             "SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND database = '%s' "
             "FORMAT RowBinary",
             c->db);
    if (pd__ch_exec(c, sql, NULL, 0, NULL, &resp, NULL, &err) == 0) {
        ch_rd r = {(const uint8_t *)resp.data, resp.len, 0, false};
        uint64_t v = pd__ch_rd_u64(&r);
        if (!r.bad)
            out->bytes_on_disk = v;
    }
    pd_buf_release(&resp);
}

/* ---- open / close ---- */

static bool name_ok(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return false;
    return true;
}

int pd__ch_open(const pd_storage_options *opts, pd_ch **out, pd_err *err)
{
    *out = NULL;
    const pd_clickhouse_options *o = &opts->clickhouse;
    if (o->n_urls == 0)
        return pd_err_set(err, PD_EINVAL,
                          "--clickhouse.url: at least one URL is needed with "
                          "--storage.backend=clickhouse");
    const char *db = o->database && *o->database ? o->database : "profd";
    if (!name_ok(db))
        return pd_err_set(err, PD_EINVAL,
                          "--clickhouse.database: \"%s\" is not a name of "
                          "letters, digits and _",
                          db);
    if (o->cluster && !name_ok(o->cluster))
        return pd_err_set(err, PD_EINVAL,
                          "--clickhouse.cluster: \"%s\" is not a name of "
                          "letters, digits and _",
                          o->cluster);
    for (size_t i = 0; i < o->n_urls; i++)
        if (strncmp(o->urls[i], "http://", 7) != 0 && strncmp(o->urls[i], "https://", 8) != 0)
            return pd_err_set(err, PD_EINVAL,
                              "--clickhouse.url: \"%s\" is not an http:// or "
                              "https:// URL",
                              o->urls[i]);
    if (o->replicated && !o->cluster)
        return pd_err_set(err, PD_EINVAL,
                          "--clickhouse.replicated needs --clickhouse.cluster (the cluster "
                          "whose shards list the replicas)");
    pd_ch *c = calloc(1, sizeof *c);
    if (!c)
        return pd_err_set(err, PD_ENOMEM, "out of memory");
    c->legacy_samples = true;  /* until legacy_check finds samples_v3 empty */
    c->legacy_profiles = true; /* ... and profiles_v3 */
    c->loc_version = PD_CH_SCHEMA_VERSION;
    c->profiles_table = PD_CH_PROFILES;
    int rc = 0;
    c->urls = calloc(o->n_urls, sizeof *c->urls);
    c->n_urls = o->n_urls;
    c->user = strdup(o->user && *o->user ? o->user : "default");
    c->password = o->password && *o->password ? strdup(o->password) : NULL;
    c->db = strdup(db);
    c->cluster = o->cluster ? strdup(o->cluster) : NULL;
    c->replicated = o->replicated;
    c->schema_ok = calloc(o->n_urls, sizeof *c->schema_ok);
    if (!c->urls || !c->schema_ok || !c->user || !c->db ||
        (o->password && *o->password && !c->password) || (o->cluster && !c->cluster)) {
        rc = pd_err_set(err, PD_ENOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < o->n_urls; i++) {
        c->urls[i] = strdup(o->urls[i]);
        if (!c->urls[i]) {
            rc = pd_err_set(err, PD_ENOMEM, "out of memory");
            goto fail;
        }
        size_t n = strlen(c->urls[i]);
        while (n > 0 && c->urls[i][n - 1] == '/')
            c->urls[i][--n] = 0;
    }
    c->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 30000;
    c->retries = o->retries > 0 ? o->retries : 5;
    c->batch_bytes = o->batch_bytes ? o->batch_bytes : 8u << 20;
    c->batch_rows = o->batch_rows ? o->batch_rows : 1000000;
    c->batch_wait_ms = o->batch_wait_ms > 0 ? o->batch_wait_ms : 0;
    c->flush_interval_ms =
        o->flush_interval_ms == 0 ? PD_STORAGE_CH_FLUSH_MS_DEFAULT : o->flush_interval_ms;
    c->batch_profiles = o->batch_profiles;
    if (o->cache_bytes >= 0) /* no cache when out of memory: reads only go to ClickHouse */
        c->cache = pd__ch_cache_new(
            (size_t)(o->cache_bytes ? o->cache_bytes : PD_STORAGE_CH_CACHE_DEFAULT));
    if (o->agg_flush_idle_ms >= 0 &&
        pd__ch_aggw_new(
            c, o->agg_flush_idle_ms ? o->agg_flush_idle_ms : PD_STORAGE_CH_AGG_IDLE_MS_DEFAULT,
            o->agg_pending_bytes ? o->agg_pending_bytes : PD_STORAGE_CH_AGG_PENDING_DEFAULT,
            opts->clock_ms) < 0) {
        rc = pd_err_set(err, PD_ENOMEM, "out of memory");
        goto fail;
    }
    c->limits = opts->limits;
    c->retention_ms = opts->retention_ms == 0 ? 15ll * 24 * 3600 * 1000 : opts->retention_ms;
    c->flag_retention_ms = c->retention_ms;
    c->grace_ms = opts->future_grace_ms == 0 ? 10 * 60 * 1000 : opts->future_grace_ms;
    c->maint_ms = opts->maintenance_ms == 0 ? 60000 : opts->maintenance_ms;
    c->clock = opts->clock_ms ? opts->clock_ms : pd_now_ms;
    pd_u64map_init(&c->known_stacks);
    pd_u64map_init(&c->known_series);
    pd_u64map_init(&c->known_last);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv_work, NULL);
    pthread_cond_init(&c->cv_done, NULL);
    pthread_mutex_init(&c->stop_mu, NULL);
    pthread_cond_init(&c->stop_cv, NULL);
    if (pd__ch_http_init(c) < 0) {
        rc = pd_err_set(err, PD_ENOMEM, "out of memory (curl)");
        goto fail;
    }

    pd_metrics_describe("profd_clickhouse_errors_total", PD_METRIC_COUNTER,
                        "Failed HTTP requests to ClickHouse (each attempt).");
    pd_metrics_describe("profd_clickhouse_batches_total", PD_METRIC_COUNTER,
                        "Insert batches written to ClickHouse.");
    pd_metrics_describe("profd_clickhouse_inserted_rows_total", PD_METRIC_COUNTER,
                        "Samples rows sent to ClickHouse in insert batches.");
    pd_metrics_describe("profd_clickhouse_exist_checks_total", PD_METRIC_COUNTER,
                        "Duplicate checks (SELECTs) sent before insert batches: only "
                        "for pushes not newer than their series' last one stored.");
    pd_metrics_describe("profd_clickhouse_inserted_profiles_total", PD_METRIC_COUNTER,
                        "Profiles acknowledged by ClickHouse.");
    pd_metrics_describe("profd_clickhouse_failed_profiles_total", PD_METRIC_COUNTER,
                        "Profiles whose insert batch failed (not acknowledged).");
    pd_metrics_describe("profd_clickhouse_agg_write_errors_total", PD_METRIC_COUNTER,
                        "aggs_v1 INSERTs that failed, their sums dropped (merges read "
                        "their buckets from the samples rows).");
    pd_metrics_describe("profd_clickhouse_merge_buckets_total", PD_METRIC_COUNTER,
                        "Series-buckets wholly inside merges, by where their sums were read: "
                        "aggregate (aggs_v1) or raw (the samples rows: no or a mismatched "
                        "reconciliation row); aggregate_cut: buckets cut by a merge's range "
                        "whose profiles all lie inside it, read from aggs_v1.");
    pd_metrics_describe("profd_clickhouse_cache_lookups_total", PD_METRIC_COUNTER,
                        "Lookups in the read cache (--clickhouse.cache-size) by cache (rows: "
                        "stack, location and sample-type rows by key; merge: a merge's "
                        "pre-summed whole buckets) and result (hit or miss).");
    pd_metrics_describe("profd_clickhouse_cache_bytes", PD_METRIC_GAUGE,
                        "Bytes held by the read cache, by cache (rows or merge).");
    pd_metrics_describe("profd_clickhouse_batch_seconds_sum", PD_METRIC_COUNTER,
                        "Seconds spent writing insert batches.");
    /* the schema on every server that answers; at least one must */
    size_t ok = 0;
    pd_err first;
    pd_err_clear(&first);
    for (size_t u = 0; u < c->n_urls; u++) {
        pd_err e;
        pd_err_clear(&e);
        int r = schema_on(c, u, &e);
        if (r == PD_ECORRUPT || r == PD_EINVAL) {
            *err = e;
            rc = r;
            goto fail;
        }
        if (r < 0) {
            pd_log(PD_LOG_WARN, "clickhouse server not ready", "url=%s err=\"%s\"", c->urls[u],
                   e.msg);
            if (!first.msg[0])
                first = e;
            /* a shard without tables cannot take writes; a replica down is
               one of two (or more): its shard's other replicas take them,
               and maintenance gives it its tables when it returns */
            if (c->cluster && !c->replicated) {
                *err = e;
                rc = r;
                goto fail;
            }
            continue;
        }
        c->schema_ok[u] = true;
        if (ok++ == 0)
            c->cur = u;
    }
    if (ok == 0) {
        *err = first;
        rc = -EIO;
        goto fail;
    }
    /* the database's retention (recorded by the first profd, this one if none
       is), on every server that answers: each shard of a cluster trims itself */
    for (size_t u = 0; u < c->n_urls; u++) {
        int64_t ret;
        pd_err e;
        pd_err_clear(&e);
        if (!c->schema_ok[u])
            continue; /* a replica down (above) */
        int r = retention_on(c, u, &ret, &e);
        if (r < 0 && (u == c->cur || (c->cluster && !c->replicated))) {
            *err = e;
            rc = r;
            goto fail;
        }
        if (r == 0 && u == c->cur)
            retention_adopt(c, u, ret);
    }
    legacy_check(c);
    if (pthread_create(&c->writer, NULL, pd__ch_writer_main, c) != 0) {
        rc = pd_err_set(err, PD_ENOMEM, "cannot start the ClickHouse writer thread");
        goto fail;
    }
    c->writer_running = true;
    if (c->maint_ms > 0) {
        if (pthread_create(&c->maint, NULL, maint_main, c) == 0)
            c->maint_running = true;
    }
    pd_log(PD_LOG_INFO, "clickhouse storage open", "url=%s database=%s cluster=%s urls=%zu",
           c->urls[c->cur], c->db, c->cluster ? c->cluster : "", c->n_urls);
    *out = c;
    return 0;
fail:
    pd__ch_close(c);
    return rc;
}

void pd__ch_close(pd_ch *c)
{
    if (!c)
        return;
    pd__ch_cache_forget(c);
    pthread_mutex_lock(&c->mu);
    c->stopping = true;
    pthread_cond_broadcast(&c->cv_work);
    pthread_cond_broadcast(&c->cv_done);
    pthread_mutex_unlock(&c->mu);
    pthread_mutex_lock(&c->stop_mu);
    pthread_cond_broadcast(&c->stop_cv);
    pthread_mutex_unlock(&c->stop_mu);
    if (c->writer_running)
        pthread_join(c->writer, NULL);
    if (c->maint_running)
        pthread_join(c->maint, NULL);
    /* clean shutdown: the pending aggs_v1 sums written (a crash loses them:
       their buckets are then read raw, clickhouse.h) */
    if (c->writer_running)
        pd__ch_aggw_flush(c, PD_CH_AGGW_ALL);
    pd__ch_aggw_free(c);
    pd__ch_http_release(c);
    for (size_t i = 0; c->urls && i < c->n_urls; i++)
        free(c->urls[i]);
    free(c->urls);
    free(c->schema_ok);
    free(c->user);
    free(c->password);
    free(c->db);
    free(c->cluster);
    pd_u64map_release(&c->known_stacks);
    pd_u64map_release(&c->known_series);
    pd_u64map_release(&c->known_last);
    pd__ch_cache_free(c->cache);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv_work);
    pthread_cond_destroy(&c->cv_done);
    pthread_mutex_destroy(&c->stop_mu);
    pthread_cond_destroy(&c->stop_cv);
    free(c);
}
