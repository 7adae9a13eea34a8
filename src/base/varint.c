#include "base/varint.h"

size_t pd_varint_get(const uint8_t *p, size_t len, uint64_t *v)
{
    uint64_t r = 0;
    for (size_t i = 0; i < len && i < 10; i++) {
        if (i == 9 && p[i] > 1)
            return 0; /* a 10th byte may carry only bit 63 (protobuf's rule) */
        r |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (!(p[i] & 0x80)) {
            *v = r;
            return i + 1;
        }
    }
    return 0;
}

size_t pd_varint_put(uint8_t *out, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (uint8_t)v;
    return n;
}

int pd_buf_put_varint(pd_buf *b, uint64_t v)
{
    /* straight into the buffer (the encoders' hot path: a call of memcpy for
       every 1-3 bytes showed in profiles); near b->max the exact size decides */
    if (pd_buf_reserve(b, 10) == 0) {
        b->len += pd_varint_put((uint8_t *)b->data + b->len, v);
        b->data[b->len] = '\0';
        return 0;
    }
    uint8_t tmp[10];
    return pd_buf_append(b, tmp, pd_varint_put(tmp, v));
}
