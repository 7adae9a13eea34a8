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
 * Sampled blocks are served from the agent's own address range
 * (region.c), the others by glibc: free() tells them apart by address,
 * and the free of an unsampled block reads no table. The fast paths
 * (measured with cachegrind, bench/agent/RESULTS.md) are malloc: the
 * countdown (one subtract on thread-local memory) and a tail jump through
 * the GOT into glibc; free: one compare with the region's end and the same
 * jump. calloc, realloc and the aligned allocators take the same
 * countdown; a sampled realloc moves the block (into or out of the range).
 *
 * State: the stack table g_heap_tbl (v[0] = sampled count, v[1] = sampled
 * bytes, cumulative) and the live table g_live of sampled blocks not freed
 * yet (open addressing on the pointer: 0 empty, 1 tombstone, 2 being
 * filled, else the pointer; CAS to claim), which also holds each block's
 * region class (its usable size). Both tables are mmap'd on first use. A
 * sampled allocation that finds no room (live table, stack table or range
 * full) is served by glibc and counted as dropped.
 *
 * Recursion: the real allocator is glibc's __libc_malloc family (no dlsym,
 * which may allocate, except once for glibc's malloc_usable_size); the
 * sampling path sets the thread-local t_depth so that allocations made
 * inside it (pthread_getattr_np's fopen) are not sampled. Under
 * AddressSanitizer or ThreadSanitizer the interposers are not compiled.
 */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "agent/agent_int.h"

#define TLS __thread __attribute__((tls_model("initial-exec")))
#define HEAP_SLOTS 8192
#define LIVE_CAP (1u << 17)
#define LIVE_PROBES 64

static TLS int t_depth;

void pd__agent_enter(void)
{
    t_depth++;
}
void pd__agent_leave(void)
{
    t_depth--;
}

static _Atomic uint64_t g_rate = PD_AGENT_DEFAULT_HEAP_RATE;
static _Atomic uint64_t g_heap_samples;

#ifndef PD_AGENT_NO_HEAP

static _Atomic uint64_t g_live_dropped;

/* glibc's allocator, called through the GOT (noplt: one jump, not two) */
#define NOPLT __attribute__((noplt))
extern void *__libc_malloc(size_t) NOPLT;
extern void __libc_free(void *) NOPLT;
extern void *__libc_calloc(size_t, size_t) NOPLT;
extern void *__libc_realloc(void *, size_t) NOPLT;
extern void *__libc_memalign(size_t, size_t) NOPLT;

typedef struct live {
    _Atomic uintptr_t ptr;
    uint32_t stack;
    uint32_t cls; /* region class of the block */
    uint64_t size;
} live;

static pd__agent_table g_heap_tbl;
static live *g_live;
static _Atomic int g_init;              /* 0 no, 1 in progress, 2 ready, 3 failed */
static size_t (*g_libc_usable)(void *); /* glibc's malloc_usable_size */

/* The thread's countdown of bytes to the next sample. Not static: the
 * countdown's assembly names it. */
PD__AGENT_HIDDEN TLS int64_t pd__agent_heap_left __attribute__((used));
static TLS int t_seeded;
static TLS uint64_t t_rng;
static TLS uintptr_t t_stack_lo, t_stack_hi;

/* pd__agent_heap_left -= n; true when it reached zero or below. On x86-64
 * one subtract on the thread's TLS block whose flags are the answer
 * (local-exec in an executable; initial-exec, one more load, in the shared
 * library); GCC's own code for the C line loads, subtracts, stores and
 * tests. */
static inline __attribute__((always_inline)) bool countdown(size_t n)
{
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
    bool le;
#if defined(__PIE__) || !defined(__PIC__)
    __asm__("subq %1, %%fs:pd__agent_heap_left@tpoff" : "=@ccle"(le) : "r"(n) : "memory");
#else
    uintptr_t off;
    __asm__("movq pd__agent_heap_left@gottpoff(%%rip), %0" : "=r"(off));
    __asm__("subq %2, %%fs:(%1)" : "=@ccle"(le) : "r"(off), "r"(n) : "memory");
#endif
    return le;
#else
    return (pd__agent_heap_left -= (int64_t)n) <= 0;
#endif
}

/* p may lie in the region: one compare (the region sits below the heap) */
static inline __attribute__((always_inline)) bool below_region_end(const void *p)
{
    return (uintptr_t)p < pd__agent_region_hi;
}

/* p lies in the region */
static inline __attribute__((always_inline)) bool in_region(const void *p)
{
    return below_region_end(p) && (uintptr_t)p >= pd__agent_region_lo;
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
    g_libc_usable = (size_t(*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
    if (!g_libc_usable || pd__agent_region_init() < 0 ||
        pd__agent_table_init(&g_heap_tbl, HEAP_SLOTS) < 0 ||
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

static bool live_insert(uintptr_t p, uint32_t stack, uint32_t cls, uint64_t size)
{
    size_t h = ptr_hash(p);
    for (size_t i = 0; i < LIVE_PROBES; i++) {
        live *e = &g_live[(h + i) & (LIVE_CAP - 1)];
        uintptr_t cur = atomic_load_explicit(&e->ptr, memory_order_relaxed);
        while (cur <= 1) {
            if (atomic_compare_exchange_weak(&e->ptr, &cur, (uintptr_t)2)) {
                /* claimed: 2 ("busy") while we fill it */
                e->stack = stack;
                e->cls = cls;
                e->size = size;
                atomic_store_explicit(&e->ptr, p, memory_order_release);
                return true;
            }
        }
    }
    return false;
}

/* The live entry of region block p, or NULL (p is not a live block: a
 * double free or a pointer never returned). */
static live *live_find(uintptr_t p)
{
    if (!g_live)
        return NULL;
    size_t h = ptr_hash(p);
    for (size_t i = 0; i < LIVE_PROBES; i++) {
        live *e = &g_live[(h + i) & (LIVE_CAP - 1)];
        uintptr_t cur = atomic_load_explicit(&e->ptr, memory_order_acquire);
        if (cur == p)
            return e;
        if (cur == 0)
            return NULL;
    }
    return NULL;
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

/* The countdown of this thread passed zero: draws the next distance and,
 * when this allocation of n bytes (aligned to align, 0: malloc's) is
 * sampled, records its stack and serves it from the region (*zeroed:
 * whether it reads as zero). The stack: when leaf is non-zero, leaf, then
 * the frames from fp (the caller's frame: a frameless interposer);
 * else the frames from fp (the interposer's own frame), or ret - 1 (ret:
 * its return address) when none can be walked. NULL: not sampled, or no
 * room (counted); the caller serves it from glibc. */
__attribute__((noinline)) static void *take_sample(size_t n, size_t align, bool *zeroed,
                                                   uintptr_t fp, uintptr_t ret, uintptr_t leaf)
{
    uint64_t rate = atomic_load_explicit(&g_rate, memory_order_relaxed);
    void *p = NULL;
    t_depth++;
    if (!t_seeded) { /* the first allocation of a thread only arms the counter */
        t_seeded = 1;
        pd__agent_heap_left = draw_next(rate ? rate : PD_AGENT_DEFAULT_HEAP_RATE);
        goto out;
    }
    pd__agent_heap_left = draw_next(rate ? rate : PD_AGENT_DEFAULT_HEAP_RATE);
    if (!rate || t_depth > 1 || init_tables() < 0)
        goto out;
    if (!t_stack_hi)
        stack_bounds();
    uintptr_t pcs[PD__AGENT_MAX_DEPTH];
    uintptr_t lo = fp > t_stack_lo ? fp : t_stack_lo;
    uint32_t depth = pd__agent_unwind(leaf, fp, lo, t_stack_hi, pcs, PD__AGENT_MAX_DEPTH);
    if (depth == 0) {
        pcs[0] = ret - 1;
        depth = 1;
    }
    long idx = pd__agent_table_add(&g_heap_tbl, pcs, depth, 1, n);
    atomic_fetch_add_explicit(&g_heap_samples, 1, memory_order_relaxed);
    if (idx < 0)
        goto out; /* counted by the table */
    unsigned cls;
    p = pd__agent_region_alloc(n, align, &cls, zeroed);
    if (p && !live_insert((uintptr_t)p, (uint32_t)idx, cls, n)) {
        pd__agent_region_free(p, cls);
        p = NULL;
    }
    if (!p)
        atomic_fetch_add_explicit(&g_live_dropped, 1, memory_order_relaxed);
out:
    t_depth--;
    return p;
}

#define FP() ((uintptr_t)__builtin_frame_address(0))
#define RET() ((uintptr_t)__builtin_return_address(0))

/* The free of a region block: out of the live table, back to the region.
 * A pointer the live table does not hold (freed twice) is ignored. */
__attribute__((noinline)) static void free_sampled(void *p)
{
    live *e = live_find((uintptr_t)p);
    if (!e)
        return;
    unsigned cls = e->cls; /* read before the entry can be reused */
    uintptr_t cur = (uintptr_t)p;
    if (atomic_compare_exchange_strong(&e->ptr, &cur, (uintptr_t)1))
        pd__agent_region_free(p, cls);
}

/* malloc's slow path, when the thread's countdown passed zero. On x86-64
 * malloc (frameless) hands over its caller's frame pointer and its return
 * address; elsewhere this is reached by a tail call from malloc, so its own
 * frame's return address is malloc's caller. */
__attribute__((noinline)) static void *malloc_slow(size_t n, uintptr_t fp, uintptr_t ret)
{
    bool z;
    void *p = fp ? take_sample(n, 0, &z, fp, ret, ret - 1) : take_sample(n, 0, &z, FP(), RET(), 0);
    return p ? p : __libc_malloc(n);
}

/* No frame: the countdown, then a tail jump into glibc or the slow path. */
__attribute__((optimize("omit-frame-pointer"))) void *malloc(size_t n)
{
    if (__builtin_expect(!countdown(n), 1))
        return __libc_malloc(n);
#if defined(__x86_64__)
    uintptr_t fp; /* malloc has no frame: %rbp is still its caller's */
    __asm__("movq %%rbp, %0" : "=r"(fp));
    return malloc_slow(n, fp, RET());
#else
    return malloc_slow(n, 0, 0);
#endif
}

/* free of a pointer below the region's end: NULL, a non-PIE program's
 * heap, or a sampled block */
__attribute__((noinline)) static void free_low(void *p)
{
    if ((uintptr_t)p >= pd__agent_region_lo)
        free_sampled(p);
    else
        __libc_free(p);
}

/* No frame: one compare, then a tail jump into glibc or the slow path. */
__attribute__((optimize("omit-frame-pointer"))) void free(void *p)
{
    if (__builtin_expect(below_region_end(p), 0))
        return free_low(p);
    __libc_free(p);
}

void *calloc(size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total) || __builtin_expect(!countdown(total), 1))
        return __libc_calloc(n, size); /* glibc answers the overflow (ENOMEM) */
    bool z = false;
    void *p = take_sample(total, 0, &z, FP(), RET(), 0);
    if (!p)
        return __libc_calloc(n, size);
    if (!z)
        memset(p, 0, total);
    return p;
}

/* realloc of a region block: always moves (the new size is a new
 * allocation for the countdown); n == 0 frees, as glibc. */
__attribute__((noinline)) static void *realloc_sampled(void *old, size_t n, uintptr_t fp,
                                                       uintptr_t ret)
{
    live *e = live_find((uintptr_t)old);
    if (!e) {
        errno = EINVAL;
        return NULL; /* not a live block of ours */
    }
    size_t have = pd__agent_region_class_size(e->cls);
    if (n == 0) {
        free_sampled(old);
        return NULL;
    }
    void *p = NULL;
    bool z;
    if (countdown(n))
        p = take_sample(n, 0, &z, fp, ret, 0);
    if (!p && !(p = __libc_malloc(n)))
        return NULL; /* old stays */
    memcpy(p, old, have < n ? have : n);
    free_sampled(old);
    return p;
}

void *realloc(void *old, size_t n)
{
    if (__builtin_expect(in_region(old), 0))
        return realloc_sampled(old, n, FP(), RET());
    if (!old || n != 0) {
        if (__builtin_expect(!countdown(n), 1))
            return __libc_realloc(old, n);
        bool z;
        void *p = take_sample(n, 0, &z, FP(), RET(), 0);
        if (!p)
            return __libc_realloc(old, n);
        if (old) { /* sampled: the block moves into the region */
            size_t have = g_libc_usable(old);
            memcpy(p, old, have < n ? have : n);
            __libc_free(old);
        }
        return p;
    }
    return __libc_realloc(old, n); /* n == 0: glibc frees old */
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

/* The aligned allocators: align as glibc's memalign takes it (a power of
 * two; others are rounded up, which the region's size-aligned blocks
 * satisfy too). */
static inline __attribute__((always_inline)) void *aligned(size_t align, size_t n, uintptr_t fp,
                                                           uintptr_t ret)
{
    if (__builtin_expect(!countdown(n), 1))
        return __libc_memalign(align, n);
    bool z;
    void *p = take_sample(n, align, &z, fp, ret, 0);
    return p ? p : __libc_memalign(align, n);
}

void *memalign(size_t align, size_t n)
{
    return aligned(align, n, FP(), RET());
}

void *aligned_alloc(size_t align, size_t n)
{
    return aligned(align, n, FP(), RET());
}

int posix_memalign(void **out, size_t align, size_t n)
{
    if (align < sizeof(void *) || (align & (align - 1)))
        return EINVAL;
    void *p = aligned(align, n, FP(), RET());
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

void *valloc(size_t n)
{
    return aligned((size_t)sysconf(_SC_PAGESIZE), n, FP(), RET());
}

void *pvalloc(size_t n)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    size_t r = (n + pg - 1) & ~(pg - 1);
    if (r < n) {
        errno = ENOMEM;
        return NULL;
    }
    return aligned(pg, r ? r : pg, FP(), RET());
}

/* Usable size: a region block's whole class; else glibc's answer. */
size_t malloc_usable_size(void *p)
{
    if (in_region(p)) {
        live *e = live_find((uintptr_t)p);
        return e ? pd__agent_region_class_size(e->cls) : 0;
    }
    if (!g_libc_usable) {
        t_depth++;
        g_libc_usable = (size_t(*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
        t_depth--;
    }
    return g_libc_usable ? g_libc_usable(p) : 0;
}

bool pd__agent_region_owns(const void *p)
{
    return p && in_region(p);
}

#else
bool pd__agent_region_owns(const void *p)
{
    (void)p;
    return false;
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
        .type = type,
        .unit = unit,
        .n_type = 4,
        .period_type = "space",
        .period_unit = "bytes",
        .period = (int64_t)rate,
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
    else if (atomic_load(&g_init) == 3)
        e.comment = "heap sampling could not start (no address range for sampled blocks)";
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
uint64_t pd__agent_heap_samples(void)
{
    return atomic_load(&g_heap_samples);
}
uint64_t pd__agent_heap_dropped(void)
{
#ifdef PD_AGENT_NO_HEAP
    return 0;
#else
    return atomic_load(&g_live_dropped) + atomic_load(&g_heap_tbl.dropped);
#endif
}
