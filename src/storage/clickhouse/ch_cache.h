/*
 * storage/clickhouse/ch_cache.h — private to the ClickHouse backend: what a
 * profd keeps of ClickHouse's answers from one read to the next, so that a
 * merge asked again (a dashboard refreshing, `top` then `proto` of the same
 * selection) skips the round trips whose answer it already has.
 *
 * Two stores, each bounded by bytes (half of --clickhouse.cache-size each):
 *
 *  - rows: bytes by a key that names them forever (content-addressed): a
 *    stacks_v3 / locations_v1 row's String by its stack_hash / loc_key (the
 *    XXH3 of what it encodes), a sample-type set's RowBinary row by its
 *    types_hash (the hash of those arrays). A hit is exact whatever was
 *    written or dropped since: the key cannot name other bytes.
 *  - merge: the whole buckets' part of a merge's aggs_v1 read (ch_agg.c), by
 *    the hash of that read's SQL (series, days, buckets). A snapshot: the
 *    merge checks it bucket by bucket against the profiles' fresh (n, wsum)
 *    exactly as it checks a fresh answer, so a stale one costs a second
 *    read, never a wrong sum (ch_read.c agg_group).
 *
 * Each store keeps two generations: puts go to the young one; when it
 * outgrows half the store's bound, the old one is freed and the young one
 * becomes old; a hit in the old one is copied to the young one. So the
 * bytes held stay below the bound and what merges keep using stays.
 *
 * Thread-safe (one mutex); every function takes NULL (no cache: misses,
 * puts dropped). Metrics: profd_clickhouse_cache_lookups_total{cache,
 * result} and the gauge profd_clickhouse_cache_bytes{cache} (cache = rows
 * or merge).
 */
#ifndef PD_STORAGE_CLICKHOUSE_CH_CACHE_H
#define PD_STORAGE_CLICKHOUSE_CH_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

typedef struct ch_cache ch_cache;

typedef enum { CH_CACHE_ROWS = 0, CH_CACHE_MERGE = 1 } ch_cache_kind;

/* A merge keeps its whole buckets' sums (CH_CACHE_MERGE) only when the
 * last of them ended at least this long ago (ms): a push still due there
 * would make the snapshot stale at the next merge (one more read). */
#define CH_SEALED_MS 60000

/* XORed into a types_hash to key its sample-type row among the rows (stack
 * and location keys are the keys themselves). */
#define CH_TYPES_KEY 0x5459504553534554ull

/* A cache of at most cap bytes (both stores; the maps' slots counted).
 * NULL when cap is 0 (no cache) or on out of memory (then none either:
 * reads only go to ClickHouse). Owned by the caller: pd__ch_cache_free. */
ch_cache *pd__ch_cache_new(size_t cap);
/* Frees c and all it holds; NULL is fine. */
void pd__ch_cache_free(ch_cache *c);
/* Appends the bytes kept under key in store k to out; true on a hit
 * (*at, when not NULL, is then their offset in out), false on a miss or
 * out of memory (out unchanged). key UINT64_MAX never hits. */
bool pd__ch_cache_get(ch_cache *c, ch_cache_kind k, uint64_t key, pd_buf *out,
                      size_t *at /* OUT */);
/* Keeps a copy of p[0..n) under key in store k (replacing nothing: a key
 * already held keeps its bytes). Dropped silently when larger than a
 * quarter of the store's bound, on out of memory, or for key UINT64_MAX. */
void pd__ch_cache_put(ch_cache *c, ch_cache_kind k, uint64_t key, const void *p, size_t n);
/* Forgets key in store k (a merge snapshot found stale). */
void pd__ch_cache_drop(ch_cache *c, ch_cache_kind k, uint64_t key);
/* Bytes held by store k (its generations' bytes and slots). */
size_t pd__ch_cache_bytes(ch_cache *c, ch_cache_kind k);

#endif
