/*
 * agent/stack.c — the lock-free stack table and the frame-pointer unwinder
 * (see agent_int.h for the slot states). Everything here but init is
 * async-signal-safe: atomics and plain loads, no locks, no allocation.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include "agent/agent_int.h"

int pd__agent_table_init(pd__agent_table *t, size_t cap)
{
    void *m = mmap(NULL, cap * sizeof(pd__agent_slot), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return -errno;
    t->slot = m;
    t->cap = cap;
    atomic_store(&t->dropped, 0);
    return 0;
}

static uint64_t hash_pcs(const uintptr_t *pc, uint32_t depth)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ depth;
    for (uint32_t i = 0; i < depth; i++) {
        h ^= (uint64_t)pc[i];
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 33;
    }
    return h < 2 ? h + 2 : h;
}

long pd__agent_table_add(pd__agent_table *t, const uintptr_t *pc, uint32_t depth, uint64_t a,
                         uint64_t b)
{
    if (!t->slot)
        return -1;
    uint64_t h = hash_pcs(pc, depth);
    for (size_t i = 0; i < PD__AGENT_PROBES; i++) {
        size_t idx = (size_t)(h + i) & (t->cap - 1);
        pd__agent_slot *s = &t->slot[idx];
        uint64_t cur = atomic_load_explicit(&s->state, memory_order_acquire);
        if (cur == 0) {
            uint64_t zero = 0;
            if (atomic_compare_exchange_strong_explicit(&s->state, &zero, 1, memory_order_acq_rel,
                                                        memory_order_acquire)) {
                s->depth = depth;
                memcpy(s->pc, pc, depth * sizeof *pc);
                atomic_store_explicit(&s->v[0], a, memory_order_relaxed);
                atomic_store_explicit(&s->v[1], b, memory_order_relaxed);
                atomic_store_explicit(&s->state, h, memory_order_release);
                return (long)idx;
            }
            cur = zero;
        }
        if (cur == h && s->depth == depth && memcmp(s->pc, pc, depth * sizeof *pc) == 0) {
            atomic_fetch_add_explicit(&s->v[0], a, memory_order_relaxed);
            atomic_fetch_add_explicit(&s->v[1], b, memory_order_relaxed);
            return (long)idx;
        }
    }
    atomic_fetch_add_explicit(&t->dropped, 1, memory_order_relaxed);
    return -1;
}

void pd__agent_table_reset(pd__agent_table *t)
{
    for (size_t i = 0; t->slot && i < t->cap; i++)
        if (atomic_load_explicit(&t->slot[i].state, memory_order_relaxed))
            atomic_store_explicit(&t->slot[i].state, 0, memory_order_relaxed);
}

/* Not instrumented by ASan: a frame walk reads other frames' stack slots,
 * which may lie in (valid, mapped) redzones of an instrumented build. */
__attribute__((no_sanitize("address"))) uint32_t pd__agent_unwind(uintptr_t leaf, uintptr_t fp,
                                                                  uintptr_t lo, uintptr_t hi,
                                                                  uintptr_t *pc, uint32_t max)
{
    uint32_t n = 0;
    if (leaf && n < max)
        pc[n++] = leaf;
    while (n < max) {
        /* the frame record {saved fp, return address} must lie in [lo, hi) */
        if (fp < lo || hi < 16 || fp > hi - 16 || (fp & 7))
            break;
        const uintptr_t *frame = (const uintptr_t *)fp;
        uintptr_t next = frame[0], ret = frame[1];
        if (ret < 4096)
            break;
        pc[n++] = ret - 1;
        if (next <= fp) /* frames go up the stack; anything else is garbage */
            break;
        lo = fp + 16;
        fp = next;
    }
    return n;
}
