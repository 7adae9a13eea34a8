#include "base/buf.h"
#include "base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pd_buf_init(pd_buf *b, size_t max)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max ? max : SIZE_MAX / 2;
}

void pd_buf_release(pd_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

int pd_buf_reserve(pd_buf *b, size_t extra)
{
    if (extra > b->max || b->len > b->max - extra)
        return PD_ETOOBIG;
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap = cap < SIZE_MAX / 2 ? cap * 2 : need;
    char *d = realloc(b->data, cap);
    if (!d)
        return PD_ENOMEM;
    b->data = d;
    b->cap = cap;
    return 0;
}

int pd_buf_append(pd_buf *b, const void *data, size_t len)
{
    int rc = pd_buf_reserve(b, len);
    if (rc)
        return rc;
    if (len)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
    return 0;
}

int pd_buf_puts(pd_buf *b, const char *s)
{
    return pd_buf_append(b, s, strlen(s));
}

int pd_buf_putc(pd_buf *b, char c)
{
    return pd_buf_append(b, &c, 1);
}

int pd_buf_vprintf(pd_buf *b, const char *fmt, va_list ap)
{
    va_list cp;
    va_copy(cp, ap);
    int n = vsnprintf(NULL, 0, fmt, cp);
    va_end(cp);
    if (n < 0)
        return PD_EINVAL;
    int rc = pd_buf_reserve(b, (size_t)n);
    if (rc)
        return rc;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return 0;
}

int pd_buf_printf(pd_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = pd_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

int pd_buf_put_json_string(pd_buf *b, const char *s, size_t len)
{
    int rc = pd_buf_putc(b, '"');
    for (size_t i = 0; i < len && !rc; i++) {
        unsigned char c = (unsigned char)s[i];
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
            if (c < 0x20)
                rc = pd_buf_printf(b, "\\u%04x", c);
            else
                rc = pd_buf_putc(b, (char)c);
        }
    }
    if (!rc)
        rc = pd_buf_putc(b, '"');
    return rc;
}

void pd_buf_reset(pd_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

char *pd_buf_detach(pd_buf *b, size_t *len)
{
    char *d = b->data;
    if (len)
        *len = b->len;
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    return d;
}
