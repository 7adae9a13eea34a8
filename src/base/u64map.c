#include "base/u64map.h"
#include "base/error.h"

#include <stdlib.h>
#include <string.h>

#define EMPTY UINT64_MAX

/* Slot j is kv[2j] (key) and kv[2j + 1] (value): one cache line holds both,
 * so a hit costs one miss, not two (interning looks up every stack node). */

static inline uint64_t mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
}

void pd_u64map_init(pd_u64map *m)
{
    memset(m, 0, sizeof *m);
}

void pd_u64map_release(pd_u64map *m)
{
    free(m->kv);
    pd_u64map_init(m);
}

static int grow(pd_u64map *m)
{
    size_t nc = m->cap ? m->cap * 2 : 16;
    uint64_t *nkv = malloc(2 * nc * sizeof *nkv);
    if (!nkv)
        return PD_ENOMEM;
    for (size_t j = 0; j < nc; j++)
        nkv[2 * j] = EMPTY;
    for (size_t i = 0; i < m->cap; i++) {
        uint64_t k = m->kv[2 * i];
        if (k == EMPTY)
            continue;
        size_t j = mix(k) & (nc - 1);
        while (nkv[2 * j] != EMPTY)
            j = (j + 1) & (nc - 1);
        nkv[2 * j] = k;
        nkv[2 * j + 1] = m->kv[2 * i + 1];
    }
    free(m->kv);
    m->kv = nkv;
    m->cap = nc;
    return 0;
}

int pd_u64map_put(pd_u64map *m, uint64_t key, uint64_t val)
{
    if (key == EMPTY)
        return PD_EINVAL;
    if ((m->len + 1) * 10 > m->cap * 7) {
        int rc = grow(m);
        if (rc)
            return rc;
    }
    size_t j = mix(key) & (m->cap - 1);
    while (m->kv[2 * j] != EMPTY && m->kv[2 * j] != key)
        j = (j + 1) & (m->cap - 1);
    if (m->kv[2 * j] == EMPTY)
        m->len++;
    m->kv[2 * j] = key;
    m->kv[2 * j + 1] = val;
    return 0;
}

int pd_u64map_get(const pd_u64map *m, uint64_t key, uint64_t *val)
{
    if (!m->cap || key == EMPTY)
        return 0;
    size_t j = mix(key) & (m->cap - 1);
    while (m->kv[2 * j] != EMPTY) {
        if (m->kv[2 * j] == key) {
            if (val)
                *val = m->kv[2 * j + 1];
            return 1;
        }
        j = (j + 1) & (m->cap - 1);
    }
    return 0;
}
