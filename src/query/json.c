/*
 * query/json.c — small JSON writing helpers for the query module's results.
 *
 * Results are written straight into a capped pd_buf (no intermediate tree):
 * reports of large profiles stay one pass and the buffer cap bounds the
 * output. Text that came from the network (function names, label values) may
 * hold invalid UTF-8; it is replaced by U+FFFD so every result parses.
 */
#include "query/query_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s[0..n), or 0 when it is invalid
 * (overlong, surrogate, above U+10FFFF, truncated). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t len;
    uint32_t cp, min;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        cp = c & 0x1F;
        min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        cp = c & 0x0F;
        min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        cp = c & 0x07;
        min = 0x10000;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

int pd__query_json_str(pd_buf *b, const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    int rc = pd_buf_putc(b, '"');
    size_t i = 0;
    while (i < len && !rc) {
        unsigned char c = u[i];
        if (c >= 0x80) {
            size_t l = utf8_seq(u + i, len - i);
            if (l == 0) {
                rc = pd_buf_puts(b, "\xEF\xBF\xBD");
                i++;
            } else {
                rc = pd_buf_append(b, u + i, l);
                i += l;
            }
            continue;
        }
        switch (c) {
        case '"':
            rc = pd_buf_puts(b, "\\\"");
            break;
        case '\\':
            rc = pd_buf_puts(b, "\\\\");
            break;
        case '\n':
            rc = pd_buf_puts(b, "\\n");
            break;
        case '\r':
            rc = pd_buf_puts(b, "\\r");
            break;
        case '\t':
            rc = pd_buf_puts(b, "\\t");
            break;
        default:
            if (c < 0x20 || c == 0x7F)
                rc = pd_buf_printf(b, "\\u%04x", c);
            else
                rc = pd_buf_putc(b, (char)c);
        }
        i++;
    }
    if (!rc)
        rc = pd_buf_putc(b, '"');
    return rc;
}

int pd__query_json_cstr(pd_buf *b, const char *s)
{
    if (!s)
        s = "";
    size_t n = 0;
    while (s[n])
        n++;
    return pd__query_json_str(b, s, n);
}

int pd__query_json_double(pd_buf *b, double v)
{
    if (!isfinite(v))
        v = 0;
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%.6g", v);
    return pd_buf_puts(b, tmp);
}

/* "00".."99": two digits per division (the formatter of
 * Prometheus' strconv.FormatInt and of fmt's fmtInteger do the same). */
static const char DIGITS2[201] = "00010203040506070809101112131415161718192021222324"
                                 "25262728293031323334353637383940414243444546474849"
                                 "50515253545556575859606162636465666768697071727374"
                                 "75767778798081828384858687888990919293949596979899";

/* Writes u's last 2k digits before p (zero-padded), 32-bit arithmetic. */
static char *put_digits32(char *p, uint32_t u, int pairs)
{
    while (pairs-- > 0) {
        unsigned d = (u % 100) * 2;
        u /= 100;
        *--p = DIGITS2[d + 1];
        *--p = DIGITS2[d];
    }
    return p;
}

size_t pd__query_fmt_i64(char *dst, int64_t v)
{
    static const uint64_t POW10[19] = {10ull,
                                       100ull,
                                       1000ull,
                                       10000ull,
                                       100000ull,
                                       1000000ull,
                                       10000000ull,
                                       100000000ull,
                                       1000000000ull,
                                       10000000000ull,
                                       100000000000ull,
                                       1000000000000ull,
                                       10000000000000ull,
                                       100000000000000ull,
                                       1000000000000000ull,
                                       10000000000000000ull,
                                       100000000000000000ull,
                                       1000000000000000000ull,
                                       10000000000000000000ull};
    /* the magnitude as unsigned: -INT64_MIN does not fit an int64_t */
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    size_t n = 1; /* digits of u: written backwards from dst + len, in place */
    while (n < 20 && u >= POW10[n - 1])
        n++;
    size_t len = n + (v < 0);
    char *p = dst + len;
    /* 8 digits at a time while u needs 64 bits (a timestamp in ms has 13),
       then the rest in 32-bit arithmetic, two digits per division */
    while (u > UINT32_MAX) {
        p = put_digits32(p, (uint32_t)(u % 100000000), 4);
        u /= 100000000;
    }
    uint32_t w = (uint32_t)u;
    while (w >= 100) {
        unsigned d = (w % 100) * 2;
        w /= 100;
        *--p = DIGITS2[d + 1];
        *--p = DIGITS2[d];
    }
    if (w >= 10) {
        *--p = DIGITS2[w * 2 + 1];
        *--p = DIGITS2[w * 2];
    } else {
        *--p = (char)('0' + w);
    }
    if (v < 0)
        *--p = '-';
    return len;
}

int pd__query_json_i64(pd_buf *b, int64_t v)
{
    int rc = pd_buf_reserve(b, PD_QUERY_I64_MAX);
    if (rc)
        return rc;
    b->len += pd__query_fmt_i64(b->data + b->len, v);
    b->data[b->len] = '\0';
    return 0;
}

void pd__query_buf_truncate(pd_buf *b, size_t len)
{
    if (b->len > len) {
        b->len = len;
        b->data[len] = '\0';
    }
}
