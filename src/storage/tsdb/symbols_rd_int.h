/*
 * storage/tsdb/symbols_rd_int.h — helpers shared by symbols.c (tables,
 * dedup, payload encode/decode) and symbols_file.c (the `symbols` file):
 * a bounds-checked payload reader whose errors name "symbols payload offset
 * N", array growth, and the PUT/PUTB writers (out `o`, result `rc`).
 * Private to src/storage/tsdb.
 */
#ifndef PD_STORAGE_TSDB_SYMBOLS_RD_INT_H
#define PD_STORAGE_TSDB_SYMBOLS_RD_INT_H

#include <stdint.h>
#include <stdlib.h>
#include "base/buf.h"
#include "base/error.h"
#include "base/varint.h"

/* Grows *arr (element size el) to hold n+1 entries. */
static inline int grow(void *arrp, size_t *cap, size_t n, size_t el)
{
    void **arr = arrp;
    if (n < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 256;
    while (nc <= n)
        nc *= 2;
    void *na = realloc(*arr, nc * el);
    if (!na)
        return PD_ENOMEM;
    *arr = na;
    *cap = nc;
    return 0;
}

typedef struct rd {
    const uint8_t *p;
    size_t len, off;
    pd_err *err;
    int bad;
} rd;

static inline uint64_t get(rd *r, const char *what)
{
    uint64_t v = 0;
    if (r->bad)
        return 0;
    size_t k = pd_varint_get(r->p + r->off, r->len - r->off, &v);
    if (!k) {
        r->bad = pd_err_set(r->err, PD_ECORRUPT, "symbols payload offset %zu: bad varint (%s)",
                            r->off, what);
        return 0;
    }
    r->off += k;
    return v;
}

static inline uint8_t getb(rd *r, const char *what)
{
    if (r->bad)
        return 0;
    if (r->off >= r->len) {
        r->bad = pd_err_set(r->err, PD_ECORRUPT, "symbols payload offset %zu: truncated (%s)",
                            r->off, what);
        return 0;
    }
    return r->p[r->off++];
}

/* A count of entries of at least min_bytes each must fit in what is left. */
static inline size_t getn(rd *r, size_t min_bytes, const char *what)
{
    size_t at = r->off;
    uint64_t n = get(r, what);
    if (!r->bad && n > (r->len - r->off) / (min_bytes ? min_bytes : 1) + 1)
        r->bad = pd_err_set(r->err, PD_ECORRUPT,
                            "symbols payload offset %zu: %s count %llu exceeds the payload", at,
                            what, (unsigned long long)n);
    return r->bad ? 0 : (size_t)n;
}

static inline uint32_t getref(rd *r, size_t limit, const char *what)
{
    size_t at = r->off;
    uint64_t v = get(r, what);
    if (!r->bad && v >= limit)
        r->bad = pd_err_set(r->err, PD_ECORRUPT,
                            "symbols payload offset %zu: %s %llu out of range (%zu)", at, what,
                            (unsigned long long)v, limit);
    return r->bad ? 0 : (uint32_t)v;
}

/* The tables of a symbols payload, in file order. */
enum { T_STR = 1, T_MAP, T_FN, T_LOC, T_STACK, T_LSET, T_N };

/* Appends entry i of table t of s to o, row-wise: the encoding of one
 * mapping, function, location or label set in every version, and of one
 * string or stack in the framed files (versions 2 and 3; docs/format/
 * symbols.md). i counts from 0, from 1 for stacks and label sets. 0 or
 * pd_buf's PD_ENOMEM. (symbols_file.c) */
int pd__symbols_entry_encode(const pd_symbols *s, int t, size_t i, pd_buf *o);

/* Writers of a payload into pd_buf *o; on failure return rc from the caller. */
#define PUT(v)                                                                                     \
    do {                                                                                           \
        if ((rc = pd_buf_put_varint(o, (uint64_t)(v))))                                            \
            return rc;                                                                             \
    } while (0)
#define PUTB(v)                                                                                    \
    do {                                                                                           \
        if ((rc = pd_buf_putc(o, (char)(v))))                                                      \
            return rc;                                                                             \
    } while (0)

#endif
