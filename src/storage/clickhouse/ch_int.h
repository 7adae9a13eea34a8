/*
 * storage/clickhouse/ch_int.h — private to the ClickHouse backend: the
 * store's state, the HTTP client (ch_http.c), RowBinary encoding/reading
 * and the stack codec (ch_stack.c).
 */
#ifndef PD_STORAGE_CLICKHOUSE_CH_INT_H
#define PD_STORAGE_CLICKHOUSE_CH_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/u64map.h"
#include "storage/clickhouse/clickhouse.h"

typedef struct ch_entry ch_entry;
typedef struct ch_batch ch_batch;
typedef struct ch_aggw ch_aggw;

struct pd_ch {
    char **urls; /* n_urls, owned, without a trailing '/' */
    size_t n_urls;
    size_t cur; /* index of the URL that answered last (__atomic) */
    char *user, *password, *db, *cluster;
    bool replicated; /* --clickhouse.replicated: Replicated*MergeTree tables */
    bool *schema_ok; /* n_urls: server u has its tables (maintenance retries the
                        others: a replica down at start gets them when it returns) */
    int64_t timeout_ms;
    int retries;
    void *share;              /* CURLSH: the kept connections (ch_http.c) */
    pthread_mutex_t share_mu; /* its lock */
    size_t batch_bytes;
    size_t batch_rows; /* a batch goes at once when it holds this many samples rows */
    int64_t batch_wait_ms;
    int64_t flush_interval_ms; /* the longest gathering window (ch_batch.c) */
    size_t batch_profiles;     /* a batch goes at once at this many profiles; 0: no bound */
    pd_pprof_limits limits;
    int64_t retention_ms;      /* the database's (table retention; __atomic) */
    int64_t flag_retention_ms; /* this profd's --storage.retention.time */
    bool retention_said;       /* a differing flag was logged (maintenance thread) */
    int64_t grace_ms, maint_ms;
    int64_t (*clock)(void);
    uint64_t gen;         /* appends acknowledged (__atomic): invalidates prefetched points */
    bool legacy_samples;  /* samples_v3 may hold rows (written before schema 6): reads
                             read it beside stack_samples_v1 (__atomic; set at open,
                             cleared by maintenance once it is empty) */
    bool legacy_profiles; /* profiles_v3 may hold rows (written before schema 8):
                             reads name profiles_all, else profiles_v4 (__atomic;
                             set at open, cleared by maintenance once it is empty) */
    int loc_version;      /* the location rows appends write: 7 (locations_v1); 4 (stacks_v3, as
                             versions 4-6 wrote them) only where a test builds such a database */
    const char *profiles_table; /* the table appends write profiles rows into:
                                   PD_CH_PROFILES; "profiles_v3" (as versions 3-7
                                   did) only where a test builds such a database */

    /* the write queue (ch_write.c) */
    pthread_mutex_t mu;
    pthread_cond_t cv_work; /* to the writer: a batch to gather, full, or stopping */
    pthread_cond_t cv_done; /* to back-pressured appenders: the pending batch was taken */
    size_t bp_waiting;      /* appenders waiting on cv_done */
    ch_batch *pending;      /* gathering; NULL when empty */
    bool stopping;
    pthread_t writer;
    bool writer_running;
    /* written successfully before (writer thread only) */
    pd_u64map known_stacks; /* stack hash -> day + 1 of its last row */
    pd_u64map known_series; /* fingerprint -> day + 1 of its last index rows */
    pd_u64map known_last;   /* fingerprint -> 1 + ts of the series' last profile this profd
                               stored (0: check again) */
    bool forget_known;      /* a read missed a stack (__atomic): the writer clears the
                               two maps above before its next batch */
    ch_aggw *aggw;          /* aggs_v1's pending sums (ch_aggw.c); NULL: aggs_v1 rows go
                               beside every batch's profile rows (agg_flush_idle_ms < 0) */

    /* what reads keep of ClickHouse's answers (ch_cache.h; NULL: none) */
    struct ch_cache *cache;

    /* maintenance */
    pthread_t maint;
    bool maint_running;
    pthread_mutex_t stop_mu;
    pthread_cond_t stop_cv;
};

/* One queued append: its encoded rows (ch_write.c) and, once its batch is
 * done, its result (ch_batch.c). */
struct ch_entry {
    uint64_t fp, write_id;
    int64_t ts, day;
    pd_buf prof_row, series_row, index_rows, sample_rows, stack_rows;
    pd_buf agg_rows;      /* aggs_v1 rows (schema 5): its stacks summed, its reconciliation row */
    uint64_t types_hash;  /* pd__ch_types_hash of its profile */
    size_t n_types;       /* its sample types */
    uint64_t *stack_hash; /* n_stacks keys of stacks_v3 rows (stacks and, schema 4,
                             locations), in stack_rows order */
    size_t *stack_end;    /* end offset of each stack row in stack_rows */
    size_t n_stacks, n_samples;
    bool check; /* in the batch's PD_EEXIST check (ch_batch.c) */
    int rc;
    pd_err err;
    ch_entry *next;
};

/* The appends sent as one batch; freed by the last appender to leave. */
struct ch_batch {
    ch_entry *head, *tail;
    size_t n, bytes, rows; /* entries, their rows' bytes, their samples rows */
    int refs;
    bool done;
    pthread_cond_t cv; /* broadcast when done: its appenders alone wake */
};

/* Whether the pending batch is full (batch_rows samples rows, batch_bytes
 * or batch_profiles profiles): it goes at once (c->mu held; ch_batch.c). */
bool pd__ch_batch_full(const pd_ch *c);

/* table name for DDL on one server: in cluster mode the local table */
static inline const char *pd__ch_local_suffix(const pd_ch *c)
{
    return c->cluster ? "_local" : "";
}

/* ---- aggs_v1 (schema 5; ch_agg.c) ---- */

/* The width of an aggs_v1 bucket (ms): bucket = ts / PD_CH_AGG_BUCKET_MS.
 * Ten minutes: a "last hour" merge has 5 whole buckets of 6 (hours would
 * leave it none), and a series pushing every 10-60 s has 10-60 profiles a
 * bucket to sum; a day has 144 (the partition holds whole buckets). */
#define PD_CH_AGG_BUCKET_MS 600000ll

/* What a profile's write_id adds to its bucket's wsum (mod 2^64): a 64-bit
 * mix (splitmix64's finalizer) so that two sets of write_ids of the same
 * size have the same sum only by chance (2^-64), never by structure. */
static inline uint64_t pd__ch_wid_hash(uint64_t w)
{
    w ^= w >> 30;
    w *= 0xbf58476d1ce4e5b9ull;
    w ^= w >> 27;
    w *= 0x94d049bb133111ebull;
    return w ^ (w >> 31);
}
/* pd__ch_wid_hash(write_id) as a ClickHouse expression (UInt64 arithmetic
 * wraps as C's; checked against the C function by storage_clickhouse_agg). */
#define PD_CH_WID_HASH_SQL                                                                         \
    "bitXor(multiply(bitXor(multiply(bitXor(write_id, bitShiftRight(write_id, 30)), "              \
    "13787848793156543929) AS wh1, bitShiftRight(wh1, 27)), 10723151780598845931) AS wh2, "        \
    "bitShiftRight(wh2, 31))"

/* Appends the columns of an aggs_v1 row before valuesMap (day, fingerprint,
 * bucket, types_hash, stack_hash, n, wsum) to b. 0 or PD_ENOMEM. */
int pd__ch_put_agg_key(pd_buf *b, int64_t day, uint64_t fp, int64_t bucket, uint64_t th,
                       uint64_t sh, uint64_t n, uint64_t wsum);

/* ---- aggs_v1's pending sums (ch_aggw.c: the design) ---- */

/* Sets up c->aggw: series-buckets written once idle for idle_ms (> 0) on
 * clock (NULL: the monotonic clock, ms), or oldest first while they hold
 * more than cap bytes. PD_ENOMEM. */
int pd__ch_aggw_new(pd_ch *c, int64_t idle_ms, size_t cap, int64_t (*clock)(void));
/* Frees c->aggw and what it still holds, unwritten (after a final
 * pd__ch_aggw_flush). NULL c->aggw: no-op. */
void pd__ch_aggw_free(pd_ch *c);
/* Drops every pending sum, unwritten (what a crash does; tests). */
void pd__ch_aggw_drop(pd_ch *c);
/* Adds acknowledged entry e (its agg_rows) to its series-bucket's sums (the
 * writer, after its profiles INSERT succeeded). 0; on an error the
 * series-bucket is dropped (logged, counted) and PD_ENOMEM or -1 returned. */
int pd__ch_aggw_add(pd_ch *c, const ch_entry *e);
/* ms until a pending series-bucket is due (0: one is, or the cap is
 * exceeded), -1 when none is pending. */
int64_t pd__ch_aggw_wait_ms(pd_ch *c);
/* Writes what is due (PD_CH_AGGW_DUE: idle, then oldest first over the
 * cap) or everything (PD_CH_AGGW_ALL: close) to aggs_v1; failures are
 * logged, counted and dropped. One flush at a time: PD_CH_AGGW_DUE_TRY is
 * PD_CH_AGGW_DUE but returns at once while another flush runs. Any thread;
 * NULL c->aggw: no-op. */
enum { PD_CH_AGGW_DUE = 0, PD_CH_AGGW_ALL = 1, PD_CH_AGGW_DUE_TRY = 2 };
void pd__ch_aggw_flush(pd_ch *c, int why);

/* ---- profiles rows (schema 8) ---- */

/* The table profiles rows are written to since schema 8 (clickhouse.h):
 * profiles_v3's columns, PARTITION BY (day, intDiv(ts, PD_CH_AGG_BUCKET_MS)). */
#define PD_CH_PROFILES "profiles_v4"
/* The table reads name for profiles rows: a Merge table over profiles_v3
 * (rows written before schema 8) and profiles_v4, which hands each of them
 * the query's conditions (their keys and partitions still prune); on a
 * cluster Distributed over such a Merge table of each shard's. */
#define PD_CH_PROFILES_ALL "profiles_all"

/* The table a read of profiles rows names: PD_CH_PROFILES_ALL while
 * profiles_v3 may hold rows (written before schema 8), else PD_CH_PROFILES
 * itself (one table less per statement: the Merge table cost 2-5 ms a
 * statement, bench/clickhouse/RESULTS.md). */
static inline const char *pd__ch_profiles_read(pd_ch *c)
{
    return __atomic_load_n(&c->legacy_profiles, __ATOMIC_RELAXED) ? PD_CH_PROFILES_ALL
                                                                  : PD_CH_PROFILES;
}

/* ---- samples rows (schema 6) ---- */

/* The table samples rows are written to since schema 6 (clickhouse.h):
 * ORDER BY (fingerprint, intDiv(ts, PD_CH_AGG_BUCKET_MS), stack_hash, ts). */
#define PD_CH_SAMPLES "stack_samples_v1"

/* Appends " AND intDiv(ts, 600000) BETWEEN a AND b" (the buckets of [mint,
 * maxt]) to a WHERE on PD_CH_SAMPLES: the condition its primary key serves
 * (18.16 does not derive the key's expression from a ts range). 0 or
 * PD_ENOMEM. */
int pd__ch_put_sample_buckets(pd_buf *b, int64_t mint, int64_t maxt);

/* Whether reads must read samples_v3 too (rows written before schema 6). */
static inline bool pd__ch_legacy_samples(pd_ch *c)
{
    return __atomic_load_n(&c->legacy_samples, __ATOMIC_RELAXED);
}

/* ---- ch_batch.c ---- */

/* INSERTs rows (RowBinary) into table as one block (one part per server:
 * max_insert_block_size lifted), with the writer's settings (cluster,
 * replicated). An INSERT whose outcome is unknown is not sent again: an
 * error. pd__ch_exec's errors. */
int pd__ch_insert_block(pd_ch *c, const char *table, const pd_buf *rows, pd_err *err);

/* The writer thread (arg: the pd_ch): sends c->pending as batches until
 * c->stopping and the queue is empty. */
void *pd__ch_writer_main(void *arg);

/* ---- ch_http.c ---- */

/* Sets up c's HTTP state (the connections kept between statements): once, at
 * open, before any statement. PD_ENOMEM. pd__ch_http_release frees it once
 * no statement runs any more (at close, after the threads are joined). */
int pd__ch_http_init(pd_ch *c);
void pd__ch_http_release(pd_ch *c);

/* Runs one statement. insert == NULL: `sql` is a query sent as the POST
 * body; its answer is appended to resp (may be NULL to discard). insert !=
 * NULL: `sql` is the INSERT statement (sent as query=) and insert[0..len)
 * its RowBinary rows (the body). settings: extra URL parameters
 * ("a=1&b=2") or NULL. Retries and failover as clickhouse.h says; for an
 * INSERT whose outcome is unknown, *ambiguous is set (may be NULL: such an
 * insert is then not retried but failed). Errors: -EIO (err: the URL and
 * ClickHouse's or curl's message), PD_ETOOBIG (answer over the cap of
 * resp), PD_ENOMEM. */
int pd__ch_exec(pd_ch *c, const char *sql, const uint8_t *insert, size_t len, const char *settings,
                pd_buf *resp, bool *ambiguous, pd_err *err);

/* The same on one URL only, one attempt (schema set-up on every shard). */
int pd__ch_exec_on(pd_ch *c, size_t url, const char *sql, pd_buf *resp, pd_err *err);
/* The same with `database=db` instead of c's (CREATE DATABASE: the
 * database does not exist yet). */
int pd__ch_exec_on_db(pd_ch *c, size_t url, const char *db, const char *sql, pd_buf *resp,
                      pd_err *err);

/* Appends s as a quoted SQL string literal ('...' with \\ and \' escaped).
 * 0 or PD_ENOMEM/PD_ETOOBIG. */
int pd__ch_put_sql_string(pd_buf *b, const char *s, size_t len);
/* Appends the date of day d (days since 1970) as 'YYYY-MM-DD'. */
int pd__ch_put_sql_day(pd_buf *b, int64_t d);
/* Day of a Unix ms time, clamped to ClickHouse's Date range [0, 49672] (1970-01-01 to 2105-12-31,
 * as 18.16 parses Date). */
int64_t pd__ch_day(int64_t ts_ms);

/* RowBinary writers (little endian; String = varint length + bytes). */
int pd__ch_put_u16(pd_buf *b, uint16_t v);
int pd__ch_put_u32(pd_buf *b, uint32_t v);
int pd__ch_put_u64(pd_buf *b, uint64_t v);
int pd__ch_put_str(pd_buf *b, const char *s, size_t len);

/* RowBinary reader over an answer; any read past the end sets bad. */
typedef struct ch_rd {
    const uint8_t *p;
    size_t len, pos;
    bool bad;
} ch_rd;

uint64_t pd__ch_rd_u64(ch_rd *r);
uint32_t pd__ch_rd_u32(ch_rd *r);
uint16_t pd__ch_rd_u16(ch_rd *r);
uint64_t pd__ch_rd_varint(ch_rd *r);
/* A String: *s points into the answer (not NUL-terminated), *n its length. */
void pd__ch_rd_str(ch_rd *r, const uint8_t **s, size_t *n);
static inline bool pd__ch_rd_more(const ch_rd *r)
{
    return !r->bad && r->pos < r->len;
}

/* ---- ch_select.c: series, points, and the helpers of every read ---- */

/* Largest answer a read takes (bytes). */
#define CH_MAX_ANSWER (1024u << 20)

/* The oldest and newest profile (ms; *first > *last: none) of the series
 * this thread's last pd__ch_select chose over a range holding [mint, maxt],
 * while that answer is current (no append by this process since, at most
 * CH_CACHE_MS old): true; else false (not known). Profiles another process
 * wrote since may lie outside: a caller may only use it to skip reading
 * what its own later reads would find missing (ch_read.c: a merge's cut
 * buckets, checked against the fresh header summaries). */
bool pd__ch_select_span(pd_ch *c, int64_t mint, int64_t maxt, int64_t *first /* OUT */,
                        int64_t *last /* OUT */);
/* Drops the calling thread's prefetched points if they are c's. */
void pd__ch_cache_forget(const pd_ch *c);
/* Sets err to "out of memory (ClickHouse read)"; returns PD_ENOMEM. */
int pd__ch_nomem(pd_err *err);
/* Appends "fingerprint IN (a,b,c)" (the n fingerprints, decimal) to b.
 * 0, PD_ENOMEM/PD_ETOOBIG. */
int pd__ch_put_fp_in(pd_buf *b, const uint64_t *fps, size_t n);
/* Appends " day BETWEEN 'a' AND 'b' AND ts BETWEEN x AND y" (the partition
 * key and the time, ms) to b. 0, PD_ENOMEM/PD_ETOOBIG. */
int pd__ch_put_range(pd_buf *b, int64_t mint, int64_t maxt);
/* Runs the SELECT in sql (NUL appended here) with the read settings (large
 * IN lists allowed), its answer appended to resp. pd__ch_exec's errors. */
int pd__ch_query(pd_ch *c, pd_buf *sql, pd_buf *resp, pd_err *err);
/* pd__ch_query once sql is built: build_rc is its builder's result (the
 * last of a chain `rc = rc ? rc : pd_buf_...(sql, ...)`). build_rc < 0:
 * nothing is sent; err is set to "out of memory (ClickHouse read)" and the
 * result is PD_ENOMEM, whatever the builder's error (an uncapped statement
 * buffer fails only for memory; a PD_ETOOBIG or PD_EINVAL of pd_buf is
 * reported the same). Else pd__ch_query's result: 0 (its answer appended to
 * resp), -EIO, PD_ETOOBIG (answer over resp's cap) or PD_ENOMEM. */
int pd__ch_query_built(pd_ch *c, int build_rc, pd_buf *sql, pd_buf *resp, pd_err *err);
/* Sets err to "malformed RowBinary answer to <what>" naming the URL; -EIO. */
int pd__ch_bad_answer(pd_ch *c, pd_err *err, const char *what);

/* A query sent beside others (one round trip of latency for several
 * statements): pd__ch_bg_start runs pd__ch_query(c, sql, resp) on a thread
 * of its own (or, if no thread can be made, at pd__ch_bg_join, in the
 * caller's); pd__ch_bg_join waits for it and returns its result, its error
 * copied into err. sql and resp stay the caller's and must outlive the
 * join; every started query must be joined. */
typedef struct ch_bg {
    pd_ch *c;
    pd_buf *sql, *resp;
    int rc;
    pd_err err;
    pthread_t th;
    bool started, ran;
} ch_bg;
/* Starts q (c, sql and resp set by the caller; the rest is set here). */
void pd__ch_bg_start(ch_bg *q);
/* Waits for q (started) and returns pd__ch_query's result (0 or its
 * negative PD_E*, set in err). */
int pd__ch_bg_join(ch_bg *q, pd_err *err);
/* A String of r copied into a (NUL-terminated); NULL when out of memory. */
char *pd__ch_rd_arena_str(ch_rd *r, pd_arena *a);

/* ---- ch_stack.c: a sample's key resolved to frames ----
 *
 * Rows of stacks_v3 (varints; str = varint length + bytes; s = zigzag
 * varint; LOCATION = has_mapping; if 1: memory_start, memory_limit,
 * file_offset, str filename, str build_id, flags (bit 0..3 has_functions,
 * has_filenames, has_line_numbers, has_inline_frames); then address,
 * n_line, per line (innermost first): has_function; if 1: str name, str
 * system_name, str filename, s start_line; then s line, s column; LABELS =
 * n_label, per label: str key, str str, s num, str num_unit):
 *   schema 3 — a stack, every location inline: n_loc, LOCATION x n_loc
 *     (leaf first), LABELS. Its XXH3-64 is the stack's key (stack_hash) in
 *     every schema: all strings in full, so equal frames hash equal
 *     whatever ids a producer gave them.
 *   schema 4 — a stack: 80 00 01, n_loc, n_loc location keys (8 bytes
 *     each, little endian, leaf first), LABELS; a location: 80 00 02,
 *     LOCATION, under key XXH3-64 of the row itself. A location shared by
 *     many stacks (and profiles) is stored once per day. 80 00 is a varint
 *     0 in two bytes, which a schema-3 row never starts with.
 *   schema 7 — a location: 80 00 03, LOCATION where has_function is 0
 *     (none), 1 (a function whose system_name equals its name: not
 *     stored) or 2 (str system_name stored after str name), under key
 *     XXH3-64 of the row itself, in table locations_v1 (stack rows stay in
 *     stacks_v3, and reference locations of either kind). Go writes the
 *     same string twice in nearly every function: the pair cost LZ4 ~9 of
 *     the ~35 bytes of a location row.
 */

/* Appends the schema-3 blob of sample i of p (indexed) to out: what its
 * key hashes (and what schema-3 rows hold). 0, PD_ENOMEM, PD_ETOOBIG. */
int pd__ch_stack_encode_v3(const pd_profile *p, size_t i, pd_buf *out);
/* Appends the schema-4 stack row of sample i, its locations' keys
 * loc_key[0..n_location) (pd__ch_loc_encode's rows hashed). Errors as above. */
int pd__ch_stack_encode(const pd_profile *p, size_t i, const uint64_t *loc_key, pd_buf *out);
/* Appends the location row of p's location loc_id: schema 7's (version
 * >= 7; what profd writes) or schema 4's (4 to 6: what older profds wrote,
 * into stacks_v3; only tests write it, to build such a database). Errors as
 * above. */
int pd__ch_loc_encode(const pd_profile *p, uint64_t loc_id, int version, pd_buf *out);
/* Whether the row s[0..n) is a schema-7 location (locations_v1's) rather
 * than a stack or an older location (stacks_v3's). */
bool pd__ch_row_is_location_v7(const uint8_t *s, size_t n);
/* One profile's locations, each encoded once (its pd__ch_loc_encode row,
 * and the schema-3 fields a stack's key hashes) and hashed (its key), for
 * the stacks of that profile: a stack's key and its rows are built from
 * them instead of encoding a location per frame (a Go heap profile: ~20
 * frames a sample over a few hundred distinct locations). Valid for the one
 * profile given to pd__ch_loc_cache_init. */
typedef struct ch_loc_ent {
    size_t off, len;   /* its row: bytes[off, off + len), 3 marker bytes first */
    size_t off3, len3; /* its schema-3 fields (no marker): bytes[off3, off3 + len3) */
    uint64_t key;      /* XXH3-64 of the row (its locations_v1 or stacks_v3 key) */
    bool rowed;        /* the caller's: its row is queued already */
} ch_loc_ent;
typedef struct ch_loc_cache {
    const pd_profile *p; /* borrowed */
    int version;         /* of the rows (pd__ch_loc_encode's version) */
    pd_u64map idx;       /* location id -> index into ent */
    size_t max_id_at;    /* the entry of id UINT64_MAX (u64map's reserved key); SIZE_MAX: none */
    ch_loc_ent *ent;
    size_t n, cap;
    pd_buf bytes; /* the rows, back to back */
    pd_buf blob;  /* scratch: a stack's schema-3 blob */
} ch_loc_cache;

/* An empty cache for the locations of p (borrowed: it outlives the cache),
 * their rows in the given schema version (as pd__ch_loc_encode's). */
void pd__ch_loc_cache_init(ch_loc_cache *lc, const pd_profile *p, int version);
/* Frees what the cache holds (not p). */
void pd__ch_loc_cache_release(ch_loc_cache *lc);
/* The index into lc->ent of location loc_id, encoded and hashed at its first
 * use: *at (the pointer lc->ent moves as entries are added). 0, PD_ENOMEM,
 * PD_ETOOBIG. */
int pd__ch_loc_cache_get(ch_loc_cache *lc, uint64_t loc_id, size_t *at);
/* The key of sample i of the cache's profile: XXH3-64 of its schema-3 blob,
 * byte for byte pd__ch_stack_encode_v3's, made from the cached locations:
 * *out. Errors as pd__ch_loc_cache_get. */
int pd__ch_stack_key(ch_loc_cache *lc, size_t i, uint64_t *out);

/* The location keys of a schema-4 stack row s[0..n): their count (0 for a
 * schema-3 row, a location row or a malformed one) and *keys (read each
 * with pd__ch_stack_loc_key). */
size_t pd__ch_stack_locs(const uint8_t *s, size_t n, const uint8_t **keys);
uint64_t pd__ch_stack_loc_key(const uint8_t *keys, size_t k);

/* The location rows a build may use: blob_at maps a key to the offset of
 * its row's String (RowBinary: length + bytes) in blobs (both borrowed;
 * NULL: none); built caches key -> the builder's location id (one
 * builder per ch_locs; pd_u64map_init it, release it after). */
typedef struct ch_locs {
    const pd_u64map *blob_at;
    const pd_buf *blobs;
    pd_u64map built;
} ch_locs;

typedef struct pd_profile_builder pd_profile_builder;
/* Adds a sample with values value[0..n_types) and the stack row s[0..n)
 * (either schema; a schema-4 one's locations from L; NULL: none) to b (its locations,
 * functions, mappings and label strings through b's deduplication).
 * PD_ECORRUPT (a malformed row; err says so), PD_ENOTFOUND (a location row
 * not in L), or the builder's errors. */
int pd__ch_stack_add(pd_profile_builder *b, const uint8_t *s, size_t n, const int64_t *value,
                     ch_locs *L, pd_err *err);

/* Whether the sample whose stack blob is s[0..n) passes f (storage.h's
 * span rule on the blob's labels; the frames are skipped, not decoded). A
 * malformed blob does not pass (pd__ch_stack_add then names it, if it is
 * ever built). Never fails. */
bool pd__ch_stack_passes(const uint8_t *s, size_t n, const pd_storage_sample_filter *f);

/* The hash of a sample type set: types/units and period type/unit. */
uint64_t pd__ch_types_hash(const pd_profile *p);

#endif
