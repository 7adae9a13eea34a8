#include "base/u64map.h"
#include "base/error.h"

#include <stdlib.h>
#include <string.h>

#define EMPTY UINT64_MAX

static inline uint64_t mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
}

void pd_u64map_init(pd_u64map *m) { memset(m, 0, sizeof *m); }

void pd_u64map_release(pd_u64map *m)
{
    free(m->keys);
    free(m->vals);
    pd_u64map_init(m);
}

static int grow(pd_u64map *m)
{
    size_t nc = m->cap ? m->cap * 2 : 16;
    uint64_t *nk = malloc(nc * sizeof *nk), *nv = malloc(nc * sizeof *nv);
    if (!nk || !nv) {
        free(nk);
        free(nv);
        return PD_ENOMEM;
    }
    memset(nk, 0xff, nc * sizeof *nk);
    for (size_t i = 0; i < m->cap; i++) {
        if (m->keys[i] == EMPTY)
            continue;
        size_t j = mix(m->keys[i]) & (nc - 1);
        while (nk[j] != EMPTY)
            j = (j + 1) & (nc - 1);
        nk[j] = m->keys[i];
        nv[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = nk;
    m->vals = nv;
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
    while (m->keys[j] != EMPTY && m->keys[j] != key)
        j = (j + 1) & (m->cap - 1);
    if (m->keys[j] == EMPTY)
        m->len++;
    m->keys[j] = key;
    m->vals[j] = val;
    return 0;
}

int pd_u64map_get(const pd_u64map *m, uint64_t key, uint64_t *val)
{
    if (!m->cap || key == EMPTY)
        return 0;
    size_t j = mix(key) & (m->cap - 1);
    while (m->keys[j] != EMPTY) {
        if (m->keys[j] == key) {
            if (val)
                *val = m->vals[j];
            return 1;
        }
        j = (j + 1) & (m->cap - 1);
    }
    return 0;
}
