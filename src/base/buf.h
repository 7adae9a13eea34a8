/*
 * base/buf.h — a growable byte buffer with a hard cap (git strbuf meanings,
 * curl dynbuf "toobig").
 *
 * data is always NUL-terminated after len bytes (so text can be used as a C
 * string), and data is NULL only before the first append. A buffer that
 * would grow past `max` bytes fails with PD_ETOOBIG and keeps its contents.
 */
#ifndef PD_BASE_BUF_H
#define PD_BASE_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pd_buf {
    char *data;
    size_t len;
    size_t cap;
    size_t max; /* hard cap on len, bytes; 0 means SIZE_MAX/2 */
} pd_buf;

/* Sets up an empty buffer capped at `max` bytes (0: no practical cap). No allocation. */
void pd_buf_init(pd_buf *b, size_t max);
/* Frees what b holds and leaves it empty (max unchanged). */
void pd_buf_release(pd_buf *b);
/* Ensures room for `extra` more bytes. PD_ENOMEM, PD_ETOOBIG. */
int pd_buf_reserve(pd_buf *b, size_t extra);
/* Appends bytes. PD_ENOMEM, PD_ETOOBIG. */
int pd_buf_append(pd_buf *b, const void *data, size_t len);
/* Appends a C string. PD_ENOMEM, PD_ETOOBIG. */
int pd_buf_puts(pd_buf *b, const char *s);
/* Appends one byte. PD_ENOMEM, PD_ETOOBIG. */
int pd_buf_putc(pd_buf *b, char c);
/* Appends printf-formatted text. PD_ENOMEM, PD_ETOOBIG. */
int pd_buf_printf(pd_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int pd_buf_vprintf(pd_buf *b, const char *fmt, va_list ap);
/* Appends s as a JSON string literal, quotes included. PD_ENOMEM, PD_ETOOBIG. */
int pd_buf_put_json_string(pd_buf *b, const char *s, size_t len);
/* Empties the buffer, keeping its memory. */
void pd_buf_reset(pd_buf *b);
/* Hands the memory to the caller (free() it); b is left empty. May return NULL
 * for a buffer that never held anything. */
char *pd_buf_detach(pd_buf *b, size_t *len /* OUT, may be NULL */);

#endif
