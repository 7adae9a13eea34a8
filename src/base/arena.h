/*
 * base/arena.h — a bump allocator for memory freed all at once (h2o mem_pool):
 * per-request and per-decode memory. Not thread-safe.
 */
#ifndef PD_BASE_ARENA_H
#define PD_BASE_ARENA_H

#include <stddef.h>

typedef struct pd_arena_chunk pd_arena_chunk;
typedef struct pd_arena {
    pd_arena_chunk *head;
    size_t used;  /* bytes used in head */
    size_t total; /* bytes allocated from the system, all chunks */
    size_t chunk; /* size of the next chunk; 0: 64 KiB (pd_arena_init_small) */
} pd_arena;

/* Sets up an empty arena. No allocation. */
void pd_arena_init(pd_arena *a);
/* An empty arena whose chunks start at `first` bytes and double up to the
 * usual 64 KiB: for the many small arenas a query holds at once (one per
 * series' points: 64 KiB each made 50k series cost 3 GB of address space
 * and hundreds of MB of RSS). No allocation. */
void pd_arena_init_small(pd_arena *a, size_t first);
/* Frees every allocation of the arena; it can be used again. */
void pd_arena_release(pd_arena *a);
/* Returns `size` bytes aligned to 16, or NULL when out of memory. Contents undefined. */
void *pd_arena_alloc(pd_arena *a, size_t size);
/* As pd_arena_alloc for n*size bytes, zeroed; NULL on overflow or out of memory. */
void *pd_arena_calloc(pd_arena *a, size_t n, size_t size);
/* Copies s[0..len) and a NUL into the arena. NULL when out of memory. */
char *pd_arena_strndup(pd_arena *a, const char *s, size_t len);
char *pd_arena_strdup(pd_arena *a, const char *s);

#endif
