/*
 * storage/tsdb/payload_int.h — reading and writing the varint payloads of
 * chunks (chunks.c: value groups, tchunk.c: time chunks). Private to
 * src/storage/tsdb.
 *
 * Reading: an rd over p[0..len); the first error (PD_ECORRUPT, naming
 * "<what> payload offset N" and the field) is kept in err and r->bad, and
 * every later read returns 0, so a decoder reads on and checks r->bad where
 * a wrong value would do harm (a count before allocating, an id before
 * using it). Writing: PUT / PUTZ append a varint / zigzag varint to
 * `pd_buf *out`, setting `int rc` and jumping to `out:` on failure.
 */
#ifndef PD_STORAGE_TSDB_PAYLOAD_INT_H
#define PD_STORAGE_TSDB_PAYLOAD_INT_H

#include <stddef.h>
#include <stdint.h>
#include "base/buf.h"
#include "base/error.h"
#include "base/varint.h"

#define MAX_TYPES 1024 /* sample types of one profile a reader takes */

#define PUT(v)                                                                                     \
    do {                                                                                           \
        if ((rc = pd_buf_put_varint(out, (uint64_t)(v))))                                          \
            goto out;                                                                              \
    } while (0)
#define PUTZ(v) PUT(pd_zigzag_enc((int64_t)(v)))

typedef struct rd {
    const uint8_t *p;
    size_t len, off;
    pd_err *err;
    int bad;
    const char *what;
} rd;

static inline uint64_t get(rd *r, const char *what)
{
    uint64_t v = 0;
    if (r->bad)
        return 0;
    size_t k = pd_varint_get(r->p + r->off, r->len - r->off, &v);
    if (!k) {
        r->bad = pd_err_set(r->err, PD_ECORRUPT, "%s payload offset %zu: bad varint (%s)", r->what,
                            r->off, what);
        return 0;
    }
    r->off += k;
    return v;
}

static inline int64_t getz(rd *r, const char *what)
{
    return pd_zigzag_dec(get(r, what));
}

/* A value < limit. */
static inline uint32_t getref(rd *r, uint64_t limit, const char *what)
{
    size_t at = r->off;
    uint64_t v = get(r, what);
    if (!r->bad && v >= limit)
        r->bad = pd_err_set(r->err, PD_ECORRUPT, "%s payload offset %zu: %s %llu out of range",
                            r->what, at, what, (unsigned long long)v);
    return r->bad ? 0 : (uint32_t)v;
}

/* A count whose entries take at least min bytes each. */
static inline size_t getn(rd *r, size_t min, size_t cap, const char *what)
{
    size_t at = r->off;
    uint64_t v = get(r, what);
    if (!r->bad && (v > cap || v > (r->len - r->off) / min + 1))
        r->bad = pd_err_set(r->err, PD_ECORRUPT, "%s payload offset %zu: %s count %llu too big",
                            r->what, at, what, (unsigned long long)v);
    return r->bad ? 0 : (size_t)v;
}

#endif
