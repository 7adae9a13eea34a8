/*
 * base/varint.h — unsigned LEB128 varints and zigzag, as protobuf encodes them
 * (https://protobuf.dev/programming-guides/encoding/). Used by the pprof codec and the WAL.
 */
#ifndef PD_BASE_VARINT_H
#define PD_BASE_VARINT_H

#include <stddef.h>
#include <stdint.h>
#include "base/buf.h"

/* Decodes a varint from p[0..len). Returns the bytes consumed (1..10), or 0
 * when the input is truncated, longer than 10 bytes or overflows 64 bits
 * (never reads past len). */
size_t pd_varint_get(const uint8_t *p, size_t len, uint64_t *v /* OUT */);
/* Writes v into out (needs 10 bytes); returns bytes written. */
size_t pd_varint_put(uint8_t *out, uint64_t v);
/* Appends v to b. PD_ENOMEM, PD_ETOOBIG. */
int pd_buf_put_varint(pd_buf *b, uint64_t v);

static inline uint64_t pd_zigzag_enc(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}
static inline int64_t pd_zigzag_dec(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

#endif
