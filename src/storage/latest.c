/*
 * storage/latest.c — the set pd_storage_select_latest answers (storage.h)
 * and its builder (latest_int.h). priv holds the entries' array, an arena
 * for what is copied, and the table of distinct sample-type lists: a
 * u64map from the xxh3 of a list (with a seed) to its id; a hit is compared,
 * and an unequal list (a collision) tries the next seed.
 */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "base/arena.h"
#include "base/u64map.h"
#include "storage/latest_int.h"

typedef struct tlist {
    const pd_sample_type_desc *d;
    size_t n;
} tlist;

typedef struct latest_priv {
    pd_arena a;
    size_t cap;
    pd_u64map ids; /* hash(list, seed) -> id */
    tlist *lists;  /* by id */
    size_t cap_lists;
} latest_priv;

int pd__latest_init(pd_series_latest_set *out)
{
    memset(out, 0, sizeof *out);
    latest_priv *p = calloc(1, sizeof *p);
    if (!p)
        return PD_ENOMEM;
    pd_arena_init(&p->a);
    pd_u64map_init(&p->ids);
    out->priv = p;
    return 0;
}

void pd_series_latest_set_release(pd_series_latest_set *set)
{
    if (!set)
        return;
    latest_priv *p = set->priv;
    if (p) {
        pd_arena_release(&p->a);
        pd_u64map_release(&p->ids);
        free(p->lists);
        free(p);
    }
    free(set->v);
    memset(set, 0, sizeof *set);
}

static const char *nz(const char *s)
{
    return s ? s : "";
}

static uint64_t list_hash(const pd_sample_type_desc *d, size_t n, uint64_t seed)
{
    uint64_t h = XXH3_64bits_withSeed(&n, sizeof n, seed);
    for (size_t i = 0; i < n; i++) {
        const char *t = nz(d[i].type), *u = nz(d[i].unit);
        h = XXH3_64bits_withSeed(t, strlen(t) + 1, h);
        h = XXH3_64bits_withSeed(u, strlen(u) + 1, h);
    }
    return h == UINT64_MAX ? 0 : h;
}

static bool list_eq(const tlist *l, const pd_sample_type_desc *d, size_t n)
{
    if (l->n != n)
        return false;
    if (l->d == d)
        return true;
    for (size_t i = 0; i < n; i++)
        if (strcmp(nz(l->d[i].type), nz(d[i].type)) || strcmp(nz(l->d[i].unit), nz(d[i].unit)))
            return false;
    return true;
}

/* The id of list (d, n), added when new (with the copy's d when copy). */
static int list_id(pd_series_latest_set *set, const pd_sample_type_desc **d, size_t n, bool copy,
                   uint32_t *id)
{
    latest_priv *p = set->priv;
    /* neighbours (ascending ref) mostly share their list: the last id first */
    if (set->n && list_eq(&p->lists[set->v[set->n - 1].types_id], *d, n)) {
        *id = set->v[set->n - 1].types_id;
        *d = p->lists[*id].d;
        return 0;
    }
    for (uint64_t seed = 0;; seed++) {
        uint64_t at, h = list_hash(*d, n, seed);
        if (pd_u64map_get(&p->ids, h, &at)) {
            if (!list_eq(&p->lists[at], *d, n))
                continue; /* a collision: the next seed */
            *id = (uint32_t)at;
            *d = p->lists[at].d;
            return 0;
        }
        if (set->n_types_ids >= UINT32_MAX)
            return PD_ENOMEM;
        if (set->n_types_ids == p->cap_lists) {
            size_t nc = p->cap_lists ? p->cap_lists * 2 : 8;
            tlist *nl = realloc(p->lists, nc * sizeof *nl);
            if (!nl)
                return PD_ENOMEM;
            p->lists = nl;
            p->cap_lists = nc;
        }
        const pd_sample_type_desc *kept = *d;
        if (copy && n) {
            pd_sample_type_desc *c = pd_arena_calloc(&p->a, n, sizeof *c);
            if (!c)
                return PD_ENOMEM;
            for (size_t i = 0; i < n; i++)
                if (!(c[i].type = pd_arena_strdup(&p->a, nz((*d)[i].type))) ||
                    !(c[i].unit = pd_arena_strdup(&p->a, nz((*d)[i].unit))))
                    return PD_ENOMEM;
            kept = c;
        }
        if (pd_u64map_put(&p->ids, h, set->n_types_ids) < 0)
            return PD_ENOMEM;
        p->lists[set->n_types_ids] = (tlist){kept, n};
        *id = (uint32_t)set->n_types_ids++;
        *d = kept;
        return 0;
    }
}

int pd__latest_add(pd_series_latest_set *set, uint64_t ref, const pd_labels *labels, int64_t ts_ms,
                   const pd_sample_type_desc *types, size_t n_types, bool copy_labels,
                   bool copy_types)
{
    latest_priv *p = set->priv;
    if (set->n == p->cap) {
        size_t nc = p->cap ? p->cap * 2 : 64;
        pd_series_latest *nv = realloc(set->v, nc * sizeof *nv);
        if (!nv)
            return PD_ENOMEM;
        set->v = nv;
        p->cap = nc;
    }
    pd_series_latest *e = &set->v[set->n];
    memset(e, 0, sizeof *e);
    e->ref = ref;
    e->ts_ms = ts_ms;
    e->labels = labels;
    if (copy_labels) {
        pd_labels *l = pd_arena_alloc(&p->a, sizeof *l);
        if (!l)
            return PD_ENOMEM;
        l->n = labels->n;
        l->v = pd_arena_calloc(&p->a, labels->n ? labels->n : 1, sizeof *l->v);
        if (!l->v)
            return PD_ENOMEM;
        for (size_t i = 0; i < labels->n; i++)
            if (!(l->v[i].name = pd_arena_strdup(&p->a, labels->v[i].name)) ||
                !(l->v[i].value = pd_arena_strdup(&p->a, labels->v[i].value)))
                return PD_ENOMEM;
        e->labels = l;
    }
    const pd_sample_type_desc *d = types;
    int rc = list_id(set, &d, n_types, copy_types, &e->types_id);
    if (rc < 0)
        return rc;
    e->types = d;
    e->n_types = n_types;
    set->n++;
    return 0;
}
