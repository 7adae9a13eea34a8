/*
 * base/u64map.h — an open-addressing hash map from uint64 keys to uint64
 * values (linear probing, power-of-two capacity, load <= 0.7).
 *
 * The building block for id lookups (pprof location id -> index) and for
 * interning: callers hash composite keys with xxh3 and keep the candidates'
 * indexes as values, comparing on hit. Key UINT64_MAX is reserved.
 */
#ifndef PD_BASE_U64MAP_H
#define PD_BASE_U64MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct pd_u64map {
    uint64_t *kv; /* 2 x cap: key, value of each slot side by side */
    size_t cap;   /* slots, power of two, or 0 */
    size_t len;   /* entries */
} pd_u64map;

/* Empty map, no allocation. */
void pd_u64map_init(pd_u64map *m);
/* Frees the slots. */
void pd_u64map_release(pd_u64map *m);
/* Sets key -> val (replacing). 0, PD_ENOMEM, or PD_EINVAL for key UINT64_MAX. */
int pd_u64map_put(pd_u64map *m, uint64_t key, uint64_t val);
/* Returns 1 and *val when key is present, else 0. val may be NULL. */
int pd_u64map_get(const pd_u64map *m, uint64_t key, uint64_t *val /* OUT */);

#endif
