/*
 * agent/region.c — the address range that sampled heap blocks are served
 * from (see agent_int.h, "Region").
 *
 * Why: free() sees every pointer of the program and must tell a sampled
 * block from the others. With every sampled block inside one reserved
 * range that is a subtract and a compare (heap.c's free), and the free of
 * an unsampled block never reads the agent's tables.
 *
 * Layout: one reservation of g_size bytes (64 GiB, halved while mmap
 * refuses, down to 16 MiB), aligned to its size, at 16 TiB when that is
 * free: below a position-independent executable (0x55…) and its brk heap,
 * and below glibc's mmap'd chunks and arenas (0x7f…), so free()'s first
 * test is a single compare with the range's end (a non-PIE program's heap
 * lies below too: its frees take a second compare). PROT_NONE above a
 * read-write frontier that grows in 4 MiB steps. Committed memory: none
 * under vm.overcommit_memory 0 and 1 (MAP_NORESERVE: mprotect does not
 * charge it either); under 2 the range below the frontier, its high-water
 * mark. Pages untouched or given back take no RAM. Blocks are power-of-two runs of pages, class
 * c = 4 KiB << c bytes, aligned to their size. Free blocks of a class are a
 * LIFO list linked through their first word; new blocks come from a bump
 * offset, and the gap that aligning it leaves is cut into aligned runs for
 * the smaller classes' lists. No coalescing: the address space used is at
 * most the sum of each class's peak; when the range is used up the caller
 * serves the allocation from glibc, unsampled, and counts it. Freed blocks
 * of 64 KiB and more stay resident ("dirty", reused as they are, like
 * glibc's free chunks) while the dirty ones add up to at most DIRTY_CAP
 * bytes; past that a freed one goes back to the kernel (MADV_DONTNEED) and
 * is zero when reused. So the region's resident memory is its live blocks,
 * the small free ones and at most DIRTY_CAP more. (Giving every large block
 * back at once cost a program reusing big buffers a page fault per page:
 * profd merging large profiles spent ~20 % of its CPU in madvise and
 * faults.) A list entry says whether its block is dirty (bit 1).
 * A sampled block costs at least a page: ~0.8 % of the bytes of small
 * blocks live at a 512 KiB mean (4 KiB per 512 KiB).
 *
 * One spin lock guards the lists and the bump offset (taken about twice per
 * 512 KiB allocated, held for a pop or a push, or an mprotect when the
 * frontier grows); pthread_atfork keeps it usable in a forked child.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include "agent/agent_int.h"

#ifndef PD_AGENT_NO_HEAP

#define PAGE_SHIFT 12
#define MAX_SIZE (1ull << 36)  /* 64 GiB */
#define MIN_SIZE (16ull << 20) /* 16 MiB */
#define GROW (4ull << 20)      /* frontier step */
#define HINT (16ull << 40)     /* 16 TiB: below a PIE and its heap, above 0 */
#define NCLASS 40
#define MADV_CLASS 4            /* 64 KiB and more: MADV_DONTNEED on free past DIRTY_CAP */
#define DIRTY_CAP (32ull << 20) /* large free blocks kept resident, bytes */

/* Until the range exists: hi 0 (no pointer is below it) and lo the top
 * (no pointer is above it), so any pair a racing reader sees is false. */
PD__AGENT_HIDDEN uintptr_t pd__agent_region_lo = UINTPTR_MAX;
PD__AGENT_HIDDEN uintptr_t pd__agent_region_hi;

static atomic_flag g_mu = ATOMIC_FLAG_INIT; /* a spin lock: held for a list pop or push */
static uintptr_t g_base;                    /* == pd__agent_region_lo once reserved */
static uintptr_t g_size;                    /* bytes reserved */
static uintptr_t g_bump;                    /* offset of the first never-used byte */
static uintptr_t g_frontier;                /* [0, g_frontier) is read-write */
static uintptr_t g_head[NCLASS];            /* offset + 1, + 2 when the block is dirty; 0 = empty */
static uintptr_t g_dirty;                   /* bytes of large free blocks kept resident */
static _Atomic uint64_t g_exhausted;
static _Atomic int g_state; /* 0 none, 1 in progress, 2 ready, 3 failed */

static void lock(void)
{
    while (atomic_flag_test_and_set_explicit(&g_mu, memory_order_acquire))
        sched_yield();
}

static void unlock(void)
{
    atomic_flag_clear_explicit(&g_mu, memory_order_release);
}

/* fork() while another thread holds the lock: the child would never see
 * it released */
static void fork_prepare(void)
{
    lock();
}
static void fork_parent(void)
{
    unlock();
}
static void fork_child(void)
{
    unlock();
}

int pd__agent_region_init(void)
{
    int st = atomic_load_explicit(&g_state, memory_order_acquire);
    if (st == 2)
        return 0;
    int zero = 0;
    if (st != 0 || !atomic_compare_exchange_strong(&g_state, &zero, 1))
        return -1; /* another thread is at it, or it failed */
    for (uintptr_t size = MAX_SIZE; size >= MIN_SIZE; size >>= 1) {
        /* first at HINT (aligned to every size); else twice the size
         * anywhere, trimmed to an aligned half: blocks are aligned to their
         * size in the address space, not only in the range */
        uintptr_t b = 0;
        void *m = mmap((void *)HINT, size, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
        if (m != MAP_FAILED && (uintptr_t)m == HINT) {
            b = HINT;
        } else {
            if (m != MAP_FAILED) /* a kernel before 4.17 took it as a hint */
                munmap(m, size);
            m = mmap(NULL, 2 * size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (m == MAP_FAILED)
                continue;
            uintptr_t a = (uintptr_t)m;
            b = (a + size - 1) & ~(size - 1);
            if (b > a)
                munmap(m, b - a);
            if (a + 2 * size > b + size)
                munmap((void *)(b + size), a + 2 * size - (b + size));
        }
        g_base = b;
        g_size = size;
        pthread_atfork(fork_prepare, fork_parent, fork_child);
        __atomic_store_n(&pd__agent_region_lo, b, __ATOMIC_RELEASE);
        __atomic_store_n(&pd__agent_region_hi, b + size, __ATOMIC_RELEASE);
        atomic_store_explicit(&g_state, 2, memory_order_release);
        return 0;
    }
    atomic_store(&g_state, 3);
    return -1;
}

static void push(unsigned c, uintptr_t off, bool dirty)
{
    *(uintptr_t *)(g_base + off) = g_head[c];
    g_head[c] = off + 1 + (dirty ? 2 : 0); /* +1: offset 0 is a block too; 0 is the empty list */
}

/* Makes [0, end) read-write. Under g_mu. */
static int grow(uintptr_t end)
{
    if (end <= g_frontier)
        return 0;
    uintptr_t f = (end + GROW - 1) & ~(GROW - 1);
    if (f > g_size)
        f = g_size;
    if (mprotect((void *)(g_base + g_frontier), f - g_frontier, PROT_READ | PROT_WRITE) != 0)
        return -1;
    g_frontier = f;
    return 0;
}

void *pd__agent_region_alloc(size_t n, size_t align, unsigned *cls, bool *zeroed)
{
    if (atomic_load_explicit(&g_state, memory_order_acquire) != 2)
        return NULL;
    size_t need = n > align ? n : align;
    if (need > g_size)
        return NULL;
    unsigned c = 0;
    while (((size_t)1 << (c + PAGE_SHIFT)) < need)
        c++;
    uintptr_t sz = (uintptr_t)1 << (c + PAGE_SHIFT), off;
    lock();
    if (g_head[c]) {
        bool dirty = g_head[c] & 2;
        off = (g_head[c] - 1) & ~(uintptr_t)3;
        g_head[c] = *(uintptr_t *)(g_base + off);
        *(uintptr_t *)(g_base + off) = 0;
        *zeroed = c >= MADV_CLASS && !dirty; /* given back to the kernel when freed */
        if (c >= MADV_CLASS && dirty)
            g_dirty -= sz;
    } else {
        off = (g_bump + sz - 1) & ~(sz - 1);
        if (off > g_size - sz || grow(off + sz) < 0) {
            unlock();
            atomic_fetch_add_explicit(&g_exhausted, 1, memory_order_relaxed);
            return NULL;
        }
        while (g_bump < off) { /* the gap: the largest aligned run that fits, repeatedly */
            unsigned k = (unsigned)__builtin_ctzll(g_bump) - PAGE_SHIFT;
            while (g_bump + ((uintptr_t)1 << (k + PAGE_SHIFT)) > off)
                k--;
            push(k, g_bump, false); /* never used: zero */
            g_bump += (uintptr_t)1 << (k + PAGE_SHIFT);
        }
        g_bump = off + sz;
        *zeroed = true;
    }
    unlock();
    *cls = c;
    return (void *)(g_base + off);
}

size_t pd__agent_region_class_size(unsigned cls)
{
    return (size_t)1 << (cls + PAGE_SHIFT);
}

void pd__agent_region_free(void *p, unsigned cls)
{
    uintptr_t off = (uintptr_t)p - g_base, sz = pd__agent_region_class_size(cls);
    bool keep = cls < MADV_CLASS;
    if (!keep) {
        lock();
        if (g_dirty + sz <= DIRTY_CAP) { /* kept resident, counted now */
            g_dirty += sz;
            keep = true;
        }
        unlock();
    }
    if (!keep)
        madvise(p, sz, MADV_DONTNEED);
    lock();
    push(cls, off, cls >= MADV_CLASS && keep);
    unlock();
}

uint64_t pd__agent_region_exhausted(void)
{
    return atomic_load(&g_exhausted);
}

#endif /* !PD_AGENT_NO_HEAP */
