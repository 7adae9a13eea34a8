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
        case '"': rc = pd_buf_puts(b, "\\\""); break;
        case '\\': rc = pd_buf_puts(b, "\\\\"); break;
        case '\n': rc = pd_buf_puts(b, "\\n"); break;
        case '\r': rc = pd_buf_puts(b, "\\r"); break;
        case '\t': rc = pd_buf_puts(b, "\\t"); break;
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

void pd__query_buf_truncate(pd_buf *b, size_t len)
{
    if (b->len > len) {
        b->len = len;
        b->data[len] = '\0';
    }
}
