#include "base/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct pd_arena_chunk {
    pd_arena_chunk *next;
    size_t size;
    _Alignas(16) unsigned char data[];
};

#define PD_ARENA_CHUNK 65536

void pd_arena_init(pd_arena *a)
{
    a->head = NULL;
    a->used = 0;
    a->total = 0;
    a->chunk = 0;
}

void pd_arena_init_small(pd_arena *a, size_t first)
{
    pd_arena_init(a);
    a->chunk = first < 64 ? 64 : first > PD_ARENA_CHUNK ? PD_ARENA_CHUNK : first;
}

void pd_arena_release(pd_arena *a)
{
    pd_arena_chunk *c = a->head;
    while (c) {
        pd_arena_chunk *n = c->next;
        free(c);
        c = n;
    }
    size_t chunk = a->chunk;
    pd_arena_init(a);
    a->chunk = chunk;
}

void *pd_arena_alloc(pd_arena *a, size_t size)
{
    size = (size + 15) & ~(size_t)15;
    if (size == 0)
        size = 16;
    if (!a->head || a->head->size - a->used < size) {
        size_t cs = a->chunk ? a->chunk : PD_ARENA_CHUNK;
        size_t csize = size > cs / 4 ? size : cs;
        if (csize > SIZE_MAX - sizeof(pd_arena_chunk))
            return NULL;
        pd_arena_chunk *c = malloc(sizeof *c + csize);
        if (!c)
            return NULL;
        c->size = csize;
        a->total += csize;
        if (a->chunk && a->chunk < PD_ARENA_CHUNK)
            a->chunk *= 2;
        if (csize != cs && a->head) {
            /* big one-off: link behind head so the current chunk stays usable */
            c->next = a->head->next;
            a->head->next = c;
            return c->data;
        }
        c->next = a->head;
        a->head = c;
        a->used = 0;
    }
    void *p = a->head->data + a->used;
    a->used += size;
    return p;
}

void *pd_arena_calloc(pd_arena *a, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    void *p = pd_arena_alloc(a, n * size);
    if (p)
        memset(p, 0, n * size);
    return p;
}

char *pd_arena_strndup(pd_arena *a, const char *s, size_t len)
{
    char *p = pd_arena_alloc(a, len + 1);
    if (!p)
        return NULL;
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

char *pd_arena_strdup(pd_arena *a, const char *s)
{
    return pd_arena_strndup(a, s, strlen(s));
}
