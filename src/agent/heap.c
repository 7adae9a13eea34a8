/*
 * agent/heap.c — sampled heap profiling by malloc interposition.
 *
 * Sampling (as tcmalloc and Go): each thread counts down bytes allocated;
 * when the count passes zero the allocation is sampled and the next
 * distance is drawn from an exponential distribution of mean g_rate, so a
 * sample stands for 1/(1-exp(-size/rate)) allocations of its size
 * (unsampling at export, per stack on the mean size, as Go's
 * scaleHeapSample).
 *
 * State: the stack table g_heap_tbl (v[0] = sampled count, v[1] = sampled
 * bytes, cumulative) and the live table g_live of sampled allocations not
 * freed yet (open addressing on the pointer: 0 empty, 1 tombstone, 2 being
 * filled, else the pointer; CAS to claim). free() first checks the 16-bit counting
 * filter g_filter (8 KiB, stays in cache) so that the common free of an
 * unsampled pointer costs one load. Both tables are mmap'd on first use.
 *
 * Recursion: the real allocator is glibc's __libc_malloc family (no dlsym,
 * which may allocate); the sampling path sets the thread-local t_depth so
 * that allocations made inside it (pthread_getattr_np's fopen) are not
 * sampled. Under AddressSanitizer the interposers are not compiled.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "agent/agent_int.h"

#if defined(__SANITIZE_ADDRESS__)
#define PD_AGENT_NO_HEAP 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define PD_AGENT_NO_HEAP 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define PD_AGENT_NO_HEAP 1
#endif

#define TLS __thread __attribute__((tls_model("initial-exec")))
#define HEAP_SLOTS 8192
#define LIVE_CAP (1u << 17)
#define LIVE_PROBES 64
#define FILTER_CAP 4096

static TLS int t_depth;

void pd__agent_enter(void) { t_depth++; }
void pd__agent_leave(void) { t_depth--; }

static _Atomic uint64_t g_rate = PD_AGENT_DEFAULT_HEAP_RATE;
static _Atomic uint64_t g_heap_samples;

#ifndef PD_AGENT_NO_HEAP

static _Atomic uint64_t g_live_dropped;

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

typedef struct live {
    _Atomic uintptr_t ptr;
    uint32_t stack;
    uint64_t size;
} live;

static pd__agent_table g_heap_tbl;
static live *g_live;
static _Atomic uint16_t g_filter[FILTER_CAP];
static _Atomic int g_init; /* 0 no, 1 in progress, 2 ready, 3 failed */
static _Atomic uint64_t g_n_live;

static TLS int64_t t_left;
static TLS int t_seeded;
static TLS uint64_t t_rng;
static TLS uintptr_t t_stack_lo, t_stack_hi;

/* The counting filter's cell of p: bits 4..15 (glibc's chunks are 16-byte
 * aligned), two instructions on the free path. */
static inline size_t filter_cell(uintptr_t p)
{
    return (size_t)(p >> 4) & (FILTER_CAP - 1);
}

static size_t ptr_hash(uintptr_t p)
{
    uint64_t h = (uint64_t)p * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 32);
}

static int init_tables(void)
{
    int st = atomic_load_explicit(&g_init, memory_order_acquire);
    if (st == 2)
        return 0;
    int zero = 0;
    if (st != 0 || !atomic_compare_exchange_strong(&g_init, &zero, 1))
        return -1; /* another thread is at it, or it failed: skip this sample */
    pd__agent_table t;
    if (pd__agent_table_init(&g_heap_tbl, HEAP_SLOTS) < 0 ||
        pd__agent_table_init(&t, (LIVE_CAP * sizeof(live)) / sizeof(pd__agent_slot) + 1) < 0) {
        atomic_store(&g_init, 3);
        return -1;
    }
    g_live = (live *)(void *)t.slot;
    atomic_store_explicit(&g_init, 2, memory_order_release);
    return 0;
}

static int64_t draw_next(uint64_t rate)
{
    if (!t_rng) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        t_rng = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)(uintptr_t)&t_rng ^ 0x9e3779b97f4a7c15ull;
    }
    t_rng ^= t_rng << 13;
    t_rng ^= t_rng >> 7;
    t_rng ^= t_rng << 17;
    double u = ((double)(t_rng >> 11) + 1.0) / 9007199254740993.0; /* (0, 1] */
    double d = -log(u) * (double)rate;
    if (d > 1e15)
        d = 1e15;
    return (int64_t)d + 1;
}

static void live_insert(uintptr_t p, uint32_t stack, uint64_t size)
{
    size_t h = ptr_hash(p);
    for (size_t i = 0; i < LIVE_PROBES; i++) {
        live *e = &g_live[(h + i) & (LIVE_CAP - 1)];
        uintptr_t cur = atomic_load_explicit(&e->ptr, memory_order_relaxed);
        while (cur <= 1) {
            if (atomic_compare_exchange_weak(&e->ptr, &cur, (uintptr_t)2)) {
                /* claimed: 2 ("busy") while we fill it */
                e->stack = stack;
                e->size = size;
                atomic_fetch_add(&g_filter[filter_cell(p)], 1);
                atomic_store_explicit(&e->ptr, p, memory_order_release);
                atomic_fetch_add(&g_n_live, 1);
                return;
            }
        }
    }
    atomic_fetch_add_explicit(&g_live_dropped, 1, memory_order_relaxed);
}

/* Called only when the counting filter says p may be live. */
__attribute__((noinline)) static void live_remove(uintptr_t p)
{
    size_t h = ptr_hash(p);
    for (size_t i = 0; i < LIVE_PROBES; i++) {
        live *e = &g_live[(h + i) & (LIVE_CAP - 1)];
        uintptr_t cur = atomic_load_explicit(&e->ptr, memory_order_acquire);
        if (cur == p) {
            if (atomic_compare_exchange_strong(&e->ptr, &cur, (uintptr_t)1)) {
                atomic_fetch_sub(&g_filter[filter_cell(p)], 1);
                atomic_fetch_sub(&g_n_live, 1);
            }
            return;
        }
        if (cur == 0)
            return;
    }
}

static void stack_bounds(void)
{
    pthread_attr_t a;
    void *addr;
    size_t size;
    if (pthread_getattr_np(pthread_self(), &a) == 0) {
        if (pthread_attr_getstack(&a, &addr, &size) == 0) {
            t_stack_lo = (uintptr_t)addr;
            t_stack_hi = (uintptr_t)addr + size;
        }
        pthread_attr_destroy(&a);
    }
    if (!t_stack_hi)
        t_stack_hi = 1; /* unknown: record the caller only */
}

__attribute__((noinline)) static void sample(void *p, size_t size, uintptr_t fp, uintptr_t ret)
{
    uint64_t rate = atomic_load_explicit(&g_rate, memory_order_relaxed);
    t_depth++;
    if (!t_seeded) { /* the first allocation of a thread only arms the counter */
        t_seeded = 1;
        t_left = draw_next(rate ? rate : PD_AGENT_DEFAULT_HEAP_RATE);
        goto out;
    }
    t_left = draw_next(rate ? rate : PD_AGENT_DEFAULT_HEAP_RATE);
    if (!rate || init_tables() < 0)
        goto out;
    if (!t_stack_hi)
        stack_bounds();
    uintptr_t pcs[PD__AGENT_MAX_DEPTH];
    uintptr_t lo = fp > t_stack_lo ? fp : t_stack_lo;
    uint32_t n = pd__agent_unwind(0, fp, lo, t_stack_hi, pcs, PD__AGENT_MAX_DEPTH);
    if (n == 0) {
        pcs[0] = ret - 1;
        n = 1;
    }
    long idx = pd__agent_table_add(&g_heap_tbl, pcs, n, 1, size);
    atomic_fetch_add_explicit(&g_heap_samples, 1, memory_order_relaxed);
    if (idx >= 0)
        live_insert((uintptr_t)p, (uint32_t)idx, size);
out:
    t_depth--;
}

#define MAYBE_SAMPLE(p, n)                                                                 \
    do {                                                                                   \
        if (__builtin_expect((t_left -= (int64_t)(n)) <= 0, 0) && (p) && !t_depth)         \
            sample((p), (n), (uintptr_t)__builtin_frame_address(0),         \
                   (uintptr_t)__builtin_return_address(0));                   \
    } while (0)

/* The free path of every pointer: inline, one relaxed load of g_n_live,
 * then (while sampled blocks are live) one hash and one filter load; the
 * table walk only when the filter says p may be live. */
static inline __attribute__((always_inline)) void forget(void *p)
{
    if (__builtin_expect(p != NULL, 1) &&
        __builtin_expect(atomic_load_explicit(&g_n_live, memory_order_relaxed) != 0, 1)) {
        if (__builtin_expect(atomic_load_explicit(&g_filter[filter_cell((uintptr_t)p)],
                                                  memory_order_relaxed) != 0, 0))
            live_remove((uintptr_t)p);
    }
}

/* malloc's slow path, when the thread's countdown passed zero: allocate,
 * then sample. Reached by a tail call from malloc, so its frame's return
 * address is malloc's caller (the unwind starts there). */
__attribute__((noinline)) static void *malloc_slow(size_t n)
{
    void *p = __libc_malloc(n);
    if (p && !t_depth)
        sample(p, n, (uintptr_t)__builtin_frame_address(0),
               (uintptr_t)__builtin_return_address(0));
    return p;
}

/* The fast path is the countdown and a tail call into glibc: no frame, no
 * atomics (measured with cachegrind: 7 instructions besides glibc's). */
__attribute__((optimize("omit-frame-pointer"))) void *malloc(size_t n)
{
    if (__builtin_expect((t_left -= (int64_t)n) > 0, 1))
        return __libc_malloc(n);
    return malloc_slow(n);
}

void free(void *p)
{
    forget(p);
    __libc_free(p);
}

void *calloc(size_t n, size_t size)
{
    void *p = __libc_calloc(n, size);
    MAYBE_SAMPLE(p, n * size);
    return p;
}

void *realloc(void *old, size_t n)
{
    if (old && n == 0) {
        forget(old);
        return __libc_realloc(old, n);
    }
    void *p = __libc_realloc(old, n);
    if (p) {
        forget(old);
        MAYBE_SAMPLE(p, n);
    }
    return p;
}

void *reallocarray(void *old, size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(old, total);
}

void *memalign(size_t align, size_t n)
{
    void *p = __libc_memalign(align, n);
    MAYBE_SAMPLE(p, n);
    return p;
}

void *aligned_alloc(size_t align, size_t n)
{
    void *p = __libc_memalign(align, n);
    MAYBE_SAMPLE(p, n);
    return p;
}

int posix_memalign(void **out, size_t align, size_t n)
{
    if (align < sizeof(void *) || (align & (align - 1)))
        return EINVAL;
    void *p = __libc_memalign(align, n);
    if (!p)
        return ENOMEM;
    MAYBE_SAMPLE(p, n);
    *out = p;
    return 0;
}

void *valloc(size_t n)
{
    void *p = __libc_memalign((size_t)sysconf(_SC_PAGESIZE), n);
    MAYBE_SAMPLE(p, n);
    return p;
}

void *pvalloc(size_t n)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    size_t r = (n + pg - 1) & ~(pg - 1);
    if (r < n) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = __libc_memalign(pg, r ? r : pg);
    MAYBE_SAMPLE(p, r);
    return p;
}

#endif /* !PD_AGENT_NO_HEAP */

void pd_agent_heap_set_rate(uint64_t bytes)
{
    atomic_store(&g_rate, bytes);
}

bool pd_agent_heap_enabled(void)
{
#ifdef PD_AGENT_NO_HEAP
    return false;
#else
    return atomic_load(&g_rate) != 0;
#endif
}

#ifndef PD_AGENT_NO_HEAP
static void scale(uint64_t count, uint64_t bytes, uint64_t rate, int64_t *c, int64_t *b)
{
    if (!count || !bytes || rate <= 1) {
        *c = (int64_t)count, *b = (int64_t)bytes;
        return;
    }
    double avg = (double)bytes / (double)count;
    double s = 1.0 / (1.0 - exp(-avg / (double)rate));
    *c = (int64_t)((double)count * s);
    *b = (int64_t)((double)bytes * s);
}
#endif

int pd_agent_heap_profile(pd_buf *out, pd_err *err)
{
    static const char *const type[] = {"alloc_objects", "alloc_space", "inuse_objects",
                                       "inuse_space"};
    static const char *const unit[] = {"count", "bytes", "count", "bytes"};
    uint64_t rate = atomic_load(&g_rate);
    pd__agent_export e = {
        .type = type, .unit = unit, .n_type = 4,
        .period_type = "space", .period_unit = "bytes", .period = (int64_t)rate,
        .default_type = "inuse_space",
    };
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    e.time_nanos = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    int rc = 0;
    pd__agent_enter();
#ifdef PD_AGENT_NO_HEAP
    e.comment = "heap sampling is off in this build (AddressSanitizer owns malloc)";
    rc = pd__agent_export_pprof(&e, out, err);
#else
    if (!rate)
        e.comment = "heap sampling is off (rate 0)";
    pd__agent_export_stack *st = NULL;
    uint64_t(*inuse)[2] = NULL;
    if (atomic_load_explicit(&g_init, memory_order_acquire) == 2) {
        st = calloc(HEAP_SLOTS, sizeof *st);
        inuse = calloc(HEAP_SLOTS, sizeof *inuse);
        if (!st || !inuse) {
            rc = pd_err_set(err, PD_ENOMEM, "agent: out of memory exporting the heap profile");
            goto out;
        }
        for (size_t i = 0; i < LIVE_CAP; i++) {
            uintptr_t p = atomic_load_explicit(&g_live[i].ptr, memory_order_acquire);
            if (p > 2 && g_live[i].stack < HEAP_SLOTS) {
                inuse[g_live[i].stack][0]++;
                inuse[g_live[i].stack][1] += g_live[i].size;
            }
        }
        for (size_t i = 0; i < HEAP_SLOTS; i++) {
            pd__agent_slot *s = &g_heap_tbl.slot[i];
            if (atomic_load_explicit(&s->state, memory_order_acquire) < 2)
                continue;
            pd__agent_export_stack *x = &st[e.n_stack++];
            x->pc = s->pc;
            x->depth = s->depth;
            scale(atomic_load(&s->v[0]), atomic_load(&s->v[1]), rate, &x->value[0], &x->value[1]);
            scale(inuse[i][0], inuse[i][1], rate, &x->value[2], &x->value[3]);
        }
        e.stack = st;
    }
    rc = pd__agent_export_pprof(&e, out, err);
out:
    free(st);
    free(inuse);
#endif
    pd__agent_leave();
    return rc;
}

uint64_t pd__agent_heap_samples(void);
uint64_t pd__agent_heap_dropped(void);
uint64_t pd__agent_heap_samples(void) { return atomic_load(&g_heap_samples); }
uint64_t pd__agent_heap_dropped(void)
{
#ifdef PD_AGENT_NO_HEAP
    return 0;
#else
    return atomic_load(&g_live_dropped) + atomic_load(&g_heap_tbl.dropped);
#endif
}
