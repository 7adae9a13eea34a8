/*
 * pprof/gzip.c — gzip and gunzip with zlib, with a cap on the output.
 *
 * pd_gunzip inflates into out in steps, never giving zlib more room than
 * max_out + 1 bytes in total, so a gzip bomb stops with PD_ETOOBIG after at
 * most max_out + 1 bytes were written (memory bounded by the cap, not by the
 * bomb). Concatenated gzip members are decoded one after the other (as Go's
 * gzip.Reader does); bytes after a member that are not another member are
 * an error.
 *
 * Fast path (libdeflate, whole buffer): a gzip trailer ends with ISIZE, the
 * member's uncompressed size mod 2^32. When that size is within the cap and
 * the output buffer's room, the output is reserved once and libdeflate
 * inflates the whole member into it (checking CRC-32 and ISIZE). Only a
 * clean success that consumed every input byte is kept; anything else
 * (several members, a lying ISIZE, corrupt data) is redone from the start
 * by the zlib loop below, so caps, errors and their messages are zlib's.
 */
#include "pprof/pprof_int.h"

#include <libdeflate.h>
#include <limits.h>
#include <pthread.h>
#include <string.h>
#include <zlib.h>

bool pd_is_gzip(const uint8_t *data, size_t len)
{
    return len >= 2 && data[0] == 0x1f && data[1] == 0x8b;
}

#define STEP (64u << 10)

/* One libdeflate decompressor per thread (allocating one costs as much as
 * inflating a small profile); freed when the thread exits. */
static pthread_key_t dd_key;
static pthread_once_t dd_once = PTHREAD_ONCE_INIT;
static bool dd_ok;

static void dd_free(void *d)
{
    libdeflate_free_decompressor(d);
}

static void dd_init(void)
{
    dd_ok = pthread_key_create(&dd_key, dd_free) == 0;
}

static struct libdeflate_decompressor *dd_get(void)
{
    pthread_once(&dd_once, dd_init);
    if (!dd_ok)
        return NULL;
    struct libdeflate_decompressor *d = pthread_getspecific(dd_key);
    if (!d && (d = libdeflate_alloc_decompressor()) && pthread_setspecific(dd_key, d) != 0) {
        libdeflate_free_decompressor(d);
        d = NULL;
    }
    return d;
}

/* 1: done (out holds the data); 0: not done, out unchanged (use zlib). */
static int gunzip_whole(const uint8_t *in, size_t len, size_t max_out, pd_buf *out)
{
    if (len < 18) /* 10-byte header + empty deflate + 8-byte trailer, at least */
        return 0;
    const uint8_t *t = in + len - 4;
    size_t isize = (size_t)t[0] | (size_t)t[1] << 8 | (size_t)t[2] << 16 | (size_t)t[3] << 24;
    /* deflate expands at most ~1032:1: a larger ISIZE is a lie (or a member
       of a multi-member body) and must not size an allocation */
    if (isize > max_out || isize > out->max - out->len || isize / 1032 > len ||
        pd_buf_reserve(out, isize) != 0)
        return 0;
    struct libdeflate_decompressor *d = dd_get();
    if (!d)
        return 0;
    size_t used = 0, got = 0;
    enum libdeflate_result r =
        libdeflate_gzip_decompress_ex(d, in, len, out->data + out->len, isize, &used, &got);
    if (r != LIBDEFLATE_SUCCESS || used != len || got != isize)
        return 0;
    out->len += got;
    out->data[out->len] = '\0';
    return 1;
}

int pd_gunzip(const uint8_t *in, size_t len, size_t max_out, pd_buf *out, pd_err *err)
{
    if (gunzip_whole(in, len, max_out, out))
        return 0;
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
        return pd_err_set(err, PD_ENOMEM, "gunzip: inflateInit2 failed");
    size_t start = out->len, pos = 0;
    int rc = 0;
    for (;;) {
        size_t produced = out->len - start;
        if (produced > max_out) {
            rc = pd_err_set(err, PD_ETOOBIG,
                            "gunzip: decompressed data exceeds the cap max_decompressed_bytes=%zu",
                            max_out);
            goto out;
        }
        size_t room = max_out - produced + 1;
        if (room > STEP)
            room = STEP;
        if (room > out->max - out->len)
            room = out->max - out->len;
        if (room == 0 || (rc = pd_buf_reserve(out, room))) {
            if (room == 0)
                rc = PD_ETOOBIG;
            if (rc == PD_ETOOBIG)
                pd_err_set(err, rc,
                           "gunzip: decompressed data exceeds the output buffer's cap of %zu bytes",
                           out->max);
            else
                pd_err_set(err, rc, "gunzip: out of memory after %zu bytes", produced);
            goto out;
        }
        size_t avail_in = len - pos;
        zs.next_in = (Bytef *)(in + pos);
        zs.avail_in = avail_in > UINT_MAX ? UINT_MAX : (uInt)avail_in;
        zs.next_out = (Bytef *)out->data + out->len;
        zs.avail_out = (uInt)room;
        int z = inflate(&zs, Z_NO_FLUSH);
        size_t got = room - zs.avail_out;
        out->len += got;
        out->data[out->len] = '\0';
        pos += (avail_in > UINT_MAX ? UINT_MAX : avail_in) - zs.avail_in;
        if (z == Z_STREAM_END) {
            if (out->len - start > max_out) {
                rc = pd_err_set(
                    err, PD_ETOOBIG,
                    "gunzip: decompressed data exceeds the cap max_decompressed_bytes=%zu",
                    max_out);
                goto out;
            }
            if (pos == len)
                break;
            if (!pd_is_gzip(in + pos, len - pos)) {
                rc = pd_err_set(
                    err, PD_EPARSE,
                    "gunzip: %zu bytes of trailing garbage after the gzip data at byte %zu",
                    len - pos, pos);
                goto out;
            }
            if (inflateReset(&zs) != Z_OK) {
                rc = pd_err_set(err, PD_EPARSE, "gunzip: inflateReset failed at byte %zu", pos);
                goto out;
            }
            continue;
        }
        if (z == Z_OK)
            continue;
        if (z == Z_BUF_ERROR) {
            if (zs.avail_out != 0 && pos == len) {
                rc = pd_err_set(err, PD_EPARSE, "gunzip: truncated gzip data (%zu bytes in)", len);
                goto out;
            }
            continue; /* no progress possible only when out of room: loop reserves more */
        }
        if (z == Z_MEM_ERROR) {
            rc = pd_err_set(err, PD_ENOMEM, "gunzip: out of memory");
            goto out;
        }
        rc = pd_err_set(err, PD_EPARSE, "gunzip: corrupt gzip data near byte %zu: %s", pos,
                        zs.msg ? zs.msg : "data error");
        goto out;
    }
out:
    inflateEnd(&zs);
    return rc;
}

int pd_gzip(const uint8_t *in, size_t len, pd_buf *out)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return PD_ENOMEM;
    size_t pos = 0;
    int rc = 0;
    for (;;) {
        size_t step = out->max - out->len < STEP ? out->max - out->len : STEP;
        if (step == 0) {
            rc = PD_ETOOBIG;
            goto out;
        }
        if ((rc = pd_buf_reserve(out, step)))
            goto out;
        size_t avail_in = len - pos, give = avail_in > UINT_MAX ? UINT_MAX : avail_in;
        zs.next_in = (Bytef *)(in + pos);
        zs.avail_in = (uInt)give;
        zs.next_out = (Bytef *)out->data + out->len;
        zs.avail_out = (uInt)step;
        int z = deflate(&zs, give == avail_in ? Z_FINISH : Z_NO_FLUSH);
        out->len += step - zs.avail_out;
        out->data[out->len] = '\0';
        pos += give - zs.avail_in;
        if (z == Z_STREAM_END)
            break;
        if (z != Z_OK && z != Z_BUF_ERROR) {
            rc = PD_ENOMEM;
            goto out;
        }
    }
out:
    deflateEnd(&zs);
    return rc;
}
