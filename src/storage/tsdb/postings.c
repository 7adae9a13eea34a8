/*
 * storage/tsdb/postings.c — label pair -> ascending series refs (API:
 * postings_int.h).
 */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "base/error.h"
#include "storage/tsdb/postings_int.h"

#define NONE UINT32_MAX

void pd__postings_init(pd_postings *p)
{
    memset(p, 0, sizeof *p);
}

void pd__postings_release(pd_postings *p)
{
    for (size_t i = 0; i < p->n; i++) {
        free(p->v[i].name);
        free(p->v[i].value);
        free(p->v[i].refs);
    }
    free(p->v);
    pd_u64map_release(&p->head);
    memset(p, 0, sizeof *p);
}

static uint64_t pair_hash(const char *name, const char *value)
{
    uint64_t h = XXH3_64bits_withSeed(value, strlen(value), XXH3_64bits(name, strlen(name)));
    return h == UINT64_MAX ? 0 : h;
}

static pd_posting *find(const pd_postings *p, const char *name, const char *value, uint64_t h)
{
    uint64_t first;
    if (!pd_u64map_get(&p->head, h, &first))
        return NULL;
    for (uint32_t i = (uint32_t)first; i != NONE; i = p->v[i].next)
        if (!strcmp(p->v[i].name, name) && !strcmp(p->v[i].value, value))
            return &p->v[i];
    return NULL;
}

static int add_ref(pd_posting *e, uint64_t ref)
{
    if (e->n && e->refs[e->n - 1] == ref)
        return 0;
    if (e->n == e->cap) {
        size_t nc = e->cap ? 2 * e->cap : 4;
        uint64_t *nv = realloc(e->refs, nc * sizeof *nv);
        if (!nv)
            return PD_ENOMEM;
        e->refs = nv;
        e->cap = nc;
    }
    size_t i = e->n;
    while (i && e->refs[i - 1] > ref) /* (refs nearly always come ascending) */
        i--;
    if (i && e->refs[i - 1] == ref)
        return 0;
    memmove(e->refs + i + 1, e->refs + i, (e->n - i) * sizeof *e->refs);
    e->refs[i] = ref;
    e->n++;
    return 0;
}

int pd__postings_add(pd_postings *p, const pd_labels *ls, uint64_t ref)
{
    for (size_t i = 0; i < ls->n; i++) {
        const char *name = ls->v[i].name, *value = ls->v[i].value;
        uint64_t h = pair_hash(name, value);
        pd_posting *e = find(p, name, value, h);
        if (!e) {
            if (p->n >= NONE - 1)
                return PD_ENOMEM;
            if (p->n == p->cap) {
                size_t nc = p->cap ? 2 * p->cap : 64;
                pd_posting *nv = realloc(p->v, nc * sizeof *nv);
                if (!nv)
                    return PD_ENOMEM;
                p->v = nv;
                p->cap = nc;
            }
            e = &p->v[p->n];
            memset(e, 0, sizeof *e);
            uint64_t first;
            e->next = pd_u64map_get(&p->head, h, &first) ? (uint32_t)first : NONE;
            if (!(e->name = strdup(name)) || !(e->value = strdup(value)) ||
                pd_u64map_put(&p->head, h, p->n) < 0) {
                free(e->name);
                free(e->value);
                return PD_ENOMEM;
            }
            p->n++;
        }
        if (add_ref(e, ref) < 0)
            return PD_ENOMEM;
    }
    return 0;
}

/* dst = dst ∩ src (both ascending). */
static size_t intersect(uint64_t *dst, size_t nd, const uint64_t *src, size_t ns)
{
    size_t i = 0, j = 0, w = 0;
    while (i < nd && j < ns) {
        if (dst[i] < src[j])
            i++;
        else if (dst[i] > src[j])
            j++;
        else {
            dst[w++] = dst[i];
            i++, j++;
        }
    }
    return w;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The ascending union of the lists of every value of m->name that m
 * matches, in *out / *n. */
static int union_of(const pd_postings *p, const pd_matcher *m, uint64_t **out, size_t *n)
{
    size_t total = 0;
    for (size_t i = 0; i < p->n; i++)
        if (!strcmp(p->v[i].name, m->name) && pd_matcher_matches(m, p->v[i].value))
            total += p->v[i].n;
    uint64_t *v = malloc((total ? total : 1) * sizeof *v);
    if (!v)
        return PD_ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < p->n; i++)
        if (!strcmp(p->v[i].name, m->name) && pd_matcher_matches(m, p->v[i].value)) {
            memcpy(v + k, p->v[i].refs, p->v[i].n * sizeof *v);
            k += p->v[i].n;
        }
    qsort(v, k, sizeof *v, cmp_u64);
    size_t w = 0;
    for (size_t i = 0; i < k; i++)
        if (!w || v[w - 1] != v[i])
            v[w++] = v[i];
    *out = v;
    *n = w;
    return 0;
}

int pd__postings_select(const pd_postings *p, const pd_matcher *ms, size_t n, uint64_t **refs,
                        size_t *n_refs, bool *all)
{
    *refs = NULL;
    *n_refs = 0;
    *all = true;
    uint64_t *cur = NULL;
    size_t nc = 0;
    /* equality first (one list each, the cheapest), then regexes */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < n; i++) {
            const pd_matcher *m = &ms[i];
            if (pass == 0 && !(m->type == PD_MATCH_EQ && m->value[0]))
                continue;
            if (pass == 1 && !(m->type == PD_MATCH_RE && !pd_matcher_matches(m, "")))
                continue;
            if (!*all && !nc)
                break; /* already empty */
            if (pass == 0) {
                const pd_posting *e = find(p, m->name, m->value, pair_hash(m->name, m->value));
                if (*all) {
                    cur = malloc(((e ? e->n : 0) + 1) * sizeof *cur);
                    if (!cur)
                        return PD_ENOMEM;
                    nc = e ? e->n : 0;
                    if (nc)
                        memcpy(cur, e->refs, nc * sizeof *cur);
                    *all = false;
                } else
                    nc = e ? intersect(cur, nc, e->refs, e->n) : 0;
            } else {
                uint64_t *u;
                size_t nu;
                if (union_of(p, m, &u, &nu) < 0) {
                    free(cur);
                    return PD_ENOMEM;
                }
                if (*all) {
                    cur = u;
                    nc = nu;
                    *all = false;
                } else {
                    nc = intersect(cur, nc, u, nu);
                    free(u);
                }
            }
        }
    }
    *refs = cur;
    *n_refs = nc;
    return 0;
}
