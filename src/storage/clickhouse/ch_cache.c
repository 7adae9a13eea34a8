/*
 * storage/clickhouse/ch_cache.c — the read cache of the ClickHouse backend
 * (ch_cache.h says what it holds and why a hit is exact).
 *
 * A generation is a byte log and a map: entry = u32 length + bytes,
 * appended to `log`; `at` maps key -> 1 + offset of its entry (0: dropped).
 * A store is two generations (young, old) and its bound. A put appends to
 * young; when young's bytes pass half the bound, old is freed and young
 * becomes old. A hit in old is appended to young too.
 */
#include "storage/clickhouse/ch_cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/metrics.h"
#include "base/u64map.h"

typedef struct gen {
    pd_u64map at;
    pd_buf log;
} gen;

typedef struct store {
    gen young, old;
    size_t cap; /* bytes of both generations */
} store;

struct ch_cache {
    pthread_mutex_t mu;
    store s[2];
};

static const char *const kind_label[2] = {"cache=\"rows\"", "cache=\"merge\""};
static const char *const lookup_label[2][2] = {/* [kind][hit] */
                                               {"cache=\"rows\",result=\"miss\"",
                                                "cache=\"rows\",result=\"hit\""},
                                               {"cache=\"merge\",result=\"miss\"",
                                                "cache=\"merge\",result=\"hit\""}};

static size_t gen_bytes(const gen *g)
{
    return g->log.len + g->at.cap * 2 * sizeof(uint64_t);
}

static size_t store_bytes(const store *s)
{
    return gen_bytes(&s->young) + gen_bytes(&s->old);
}

static void gen_init(gen *g)
{
    pd_u64map_init(&g->at);
    pd_buf_init(&g->log, 0);
}

static void gen_release(gen *g)
{
    pd_u64map_release(&g->at);
    pd_buf_release(&g->log);
}

ch_cache *pd__ch_cache_new(size_t cap)
{
    if (cap == 0)
        return NULL;
    ch_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        return NULL;
    }
    for (int k = 0; k < 2; k++) {
        gen_init(&c->s[k].young);
        gen_init(&c->s[k].old);
        c->s[k].cap = cap / 2;
        pd_metrics_set("profd_clickhouse_cache_bytes", kind_label[k], 0);
    }
    return c;
}

void pd__ch_cache_free(ch_cache *c)
{
    if (!c)
        return;
    for (int k = 0; k < 2; k++) {
        gen_release(&c->s[k].young);
        gen_release(&c->s[k].old);
    }
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* The entry of key in g: its bytes and length, or NULL. */
static const uint8_t *gen_find(const gen *g, uint64_t key, uint32_t *n)
{
    uint64_t v;
    if (!pd_u64map_get(&g->at, key, &v) || v == 0)
        return NULL;
    const uint8_t *e = (const uint8_t *)g->log.data + (v - 1);
    memcpy(n, e, sizeof *n);
    return e + sizeof *n;
}

/* Appends key's entry to s's young generation, turning generations first
 * when it would pass half the bound. 0 or PD_ENOMEM. */
static int store_add(store *s, uint64_t key, const void *p, size_t n)
{
    if (gen_bytes(&s->young) + n + 64 > s->cap / 2) {
        gen_release(&s->old);
        s->old = s->young;
        gen_init(&s->young);
    }
    uint32_t len = (uint32_t)n;
    size_t off = s->young.log.len;
    if (pd_buf_append(&s->young.log, &len, sizeof len) < 0 ||
        pd_buf_append(&s->young.log, p, n) < 0 || pd_u64map_put(&s->young.at, key, off + 1) < 0) {
        s->young.log.len = off;
        return -1;
    }
    return 0;
}

bool pd__ch_cache_get(ch_cache *c, ch_cache_kind k, uint64_t key, pd_buf *out, size_t *at)
{
    if (!c || key == UINT64_MAX)
        return false;
    pthread_mutex_lock(&c->mu);
    store *s = &c->s[k];
    uint32_t n = 0;
    const uint8_t *p = gen_find(&s->young, key, &n);
    bool old = false;
    if (!p) {
        p = gen_find(&s->old, key, &n);
        old = p != NULL;
    }
    size_t off = out->len;
    bool hit = p && pd_buf_append(out, p, n) == 0;
    if (hit && old) { /* kept in use: into the young generation (from out: the
                         turn may free the old one under p) */
        (void)store_add(s, key, out->data + off, n);
        pd_metrics_set("profd_clickhouse_cache_bytes", kind_label[k], (double)store_bytes(s));
    }
    pthread_mutex_unlock(&c->mu);
    pd_metrics_add("profd_clickhouse_cache_lookups_total", lookup_label[k][hit], 1);
    if (hit && at)
        *at = off;
    return hit;
}

void pd__ch_cache_put(ch_cache *c, ch_cache_kind k, uint64_t key, const void *p, size_t n)
{
    if (!c || key == UINT64_MAX)
        return;
    pthread_mutex_lock(&c->mu);
    store *s = &c->s[k];
    uint32_t have;
    if (n <= s->cap / 4 && !gen_find(&s->young, key, &have)) {
        (void)store_add(s, key, p, n);
        pd_metrics_set("profd_clickhouse_cache_bytes", kind_label[k], (double)store_bytes(s));
    }
    pthread_mutex_unlock(&c->mu);
}

void pd__ch_cache_drop(ch_cache *c, ch_cache_kind k, uint64_t key)
{
    if (!c || key == UINT64_MAX)
        return;
    pthread_mutex_lock(&c->mu);
    store *s = &c->s[k];
    uint32_t n;
    if (gen_find(&s->young, key, &n))
        (void)pd_u64map_put(&s->young.at, key, 0);
    if (gen_find(&s->old, key, &n))
        (void)pd_u64map_put(&s->old.at, key, 0);
    pthread_mutex_unlock(&c->mu);
}

size_t pd__ch_cache_bytes(ch_cache *c, ch_cache_kind k)
{
    if (!c)
        return 0;
    pthread_mutex_lock(&c->mu);
    size_t n = store_bytes(&c->s[k]);
    pthread_mutex_unlock(&c->mu);
    return n;
}
