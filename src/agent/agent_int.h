/*
 * agent/agent_int.h — private to src/agent: the lock-free stack table
 * shared by the CPU and heap profilers, the frame-pointer unwinder, and
 * the pprof export.
 *
 * Stack table: a fixed array of slots (mmap'd, never malloc'd, so the heap
 * interposers and the SIGPROF handler may use it), open addressing on a
 * hash of the PCs, at most PD__AGENT_PROBES probes. A slot's `state` is 0
 * (empty), 1 (being written by the thread that claimed it with a CAS) or
 * the stack hash (>= 2, published with release order after depth and PCs).
 * A writer that meets a slot being written moves on; the same stack may
 * then sit in two slots, which the pprof builder merges. Nothing ever
 * blocks, so the table is async-signal-safe. Values are atomics added to.
 */
#ifndef PD_AGENT_AGENT_INT_H
#define PD_AGENT_AGENT_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "agent/profd_agent.h"

#define PD__AGENT_MAX_DEPTH 64
#define PD__AGENT_PROBES 64

typedef struct pd__agent_slot {
    _Atomic uint64_t state;
    uint32_t depth;
    uintptr_t pc[PD__AGENT_MAX_DEPTH]; /* leaf first; callers are return address - 1 */
    _Atomic uint64_t v[2];
} pd__agent_slot;

typedef struct pd__agent_table {
    pd__agent_slot *slot; /* cap slots, mmap'd */
    size_t cap;           /* power of two */
    _Atomic uint64_t dropped;
} pd__agent_table;

/* mmaps cap (a power of two) slots. 0 or -errno. Not signal-safe. */
int pd__agent_table_init(pd__agent_table *t, size_t cap);

/* Adds a to v[0] and b to v[1] of the slot of stack pc[0..depth) and
 * returns its index, or -1 when no slot was free within the probe bound
 * (t->dropped counts it). Async-signal-safe, lock-free. */
long pd__agent_table_add(pd__agent_table *t, const uintptr_t *pc, uint32_t depth, uint64_t a,
                         uint64_t b);

/* Empties the table. Only when no writer can run. */
void pd__agent_table_reset(pd__agent_table *t);

/* Walks frame pointers from fp: pc[0] = leaf (when non-zero), then each
 * frame's return address - 1 while the frame lies in [lo, hi) and frames
 * go up the stack; at most max entries. Reads only memory inside [lo, hi):
 * the caller proves that range is mapped. Async-signal-safe. Returns the
 * number of PCs written. */
uint32_t pd__agent_unwind(uintptr_t leaf, uintptr_t fp, uintptr_t lo, uintptr_t hi, uintptr_t *pc,
                          uint32_t max);

/* One stack for the export: PCs and its values (already unsampled). */
typedef struct pd__agent_export_stack {
    const uintptr_t *pc;
    uint32_t depth;
    int64_t value[4];
} pd__agent_export_stack;

typedef struct pd__agent_export {
    const char *const *type, *const *unit; /* n_type sample types */
    size_t n_type;
    const char *period_type, *period_unit, *default_type;
    int64_t period, time_nanos, duration_nanos;
    const char *comment; /* NULL: none */
    const pd__agent_export_stack *stack;
    size_t n_stack;
} pd__agent_export;

/* Builds the profile described by e — mappings from /proc/self/maps with
 * GNU build ids (dl_iterate_phdr), function names by dladdr1 — and appends
 * it to out as gzip pprof. 0, PD_ENOMEM, PD_ETOOBIG, or -errno reading
 * /proc/self/maps. */
int pd__agent_export_pprof(const pd__agent_export *e, pd_buf *out, pd_err *err);

/* Thread-local "inside the agent" flag: the heap interposers do not sample
 * while it is set (the agent's own allocations, dlsym, stdio). Increments
 * and decrements; a no-op under ASan. */
void pd__agent_enter(void);
void pd__agent_leave(void);

/* Heap sampling is compiled out where a sanitizer owns malloc. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PD_AGENT_NO_HEAP 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                         \
    __has_feature(memory_sanitizer)
#define PD_AGENT_NO_HEAP 1
#endif
#endif

#define PD__AGENT_HIDDEN __attribute__((visibility("hidden")))

/* Region (region.c): the reserved address range [lo, hi) sampled heap
 * blocks are served from. free() tests p < pd__agent_region_hi first (one
 * compare: the range sits below the program's heap when it can), then
 * p >= pd__agent_region_lo. Both are read with plain loads (so that they
 * fold into the compares): each is stored once, atomically, lo first,
 * before any block of the range exists, and they start as hi 0 and lo the
 * top, so any pair a racing reader sees is false for a pointer not from the
 * range. Blocks are 4 KiB << class bytes, aligned to their size. */
extern PD__AGENT_HIDDEN uintptr_t pd__agent_region_lo;
extern PD__AGENT_HIDDEN uintptr_t pd__agent_region_hi;

/* Reserves the range (once; concurrent callers get -1 until it is ready).
 * 0, or -1 when it is not there (every mmap size refused). */
PD__AGENT_HIDDEN int pd__agent_region_init(void);

/* A block of at least n bytes aligned to align (a power of two, or 0),
 * *cls set to its class and *zeroed to whether all of it reads as zero;
 * NULL when the range is not ready, n or align exceeds it, or it is used
 * up (counted by pd__agent_region_exhausted). Takes a spin lock: not
 * async-signal-safe. */
PD__AGENT_HIDDEN void *pd__agent_region_alloc(size_t n, size_t align, unsigned *cls, bool *zeroed);

/* Gives back block p of class cls (as returned by pd__agent_region_alloc;
 * the caller knows the class: heap.c's live table). */
PD__AGENT_HIDDEN void pd__agent_region_free(void *p, unsigned cls);

/* Bytes of a block of class cls (its usable size). */
PD__AGENT_HIDDEN size_t pd__agent_region_class_size(unsigned cls);

/* True when p is a block of the region (a sampled allocation); false
 * where heap sampling is compiled out. For tests. */
bool pd__agent_region_owns(const void *p);

/* Sampled allocations served by glibc because the range was used up. */
PD__AGENT_HIDDEN uint64_t pd__agent_region_exhausted(void);

#endif
