/*
 * storage/tsdb/warnings.c — the per-thread collector of storage warnings
 * (storage.h: pd_storage_warnings_begin). Reads that skip damaged data add a
 * message here; the API layer puts them in the answer's `warnings`.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "storage/storage.h"
#include "storage/tsdb/warnings_int.h"

static _Thread_local pd_storage_warnings *g_sink;

void pd_storage_warnings_begin(pd_storage_warnings *w)
{
    w->v = NULL;
    w->n = 0;
    w->dropped = 0;
    g_sink = w;
}

void pd_storage_warnings_end(void)
{
    g_sink = NULL;
}

void pd_storage_warnings_add(const pd_storage_warnings *from)
{
    if (!g_sink || !from || from == g_sink)
        return;
    for (size_t i = 0; i < from->n; i++)
        pd__storage_warn("%s", from->v[i]);
    g_sink->dropped += from->dropped;
}

void pd_storage_warnings_release(pd_storage_warnings *w)
{
    if (!w)
        return;
    if (g_sink == w)
        g_sink = NULL;
    for (size_t i = 0; i < w->n; i++)
        free(w->v[i]);
    free(w->v);
    w->v = NULL;
    w->n = 0;
    w->dropped = 0;
}

void pd__storage_warn(const char *fmt, ...)
{
    pd_storage_warnings *w = g_sink;
    if (!w)
        return;
    char msg[PD_STORAGE_WARNING_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (size_t i = 0; i < w->n; i++)
        if (!strcmp(w->v[i], msg))
            return; /* once per answer */
    if (w->n == PD_STORAGE_MAX_WARNINGS) {
        w->dropped++;
        return;
    }
    if (!w->v && !(w->v = calloc(PD_STORAGE_MAX_WARNINGS, sizeof *w->v))) {
        w->dropped++;
        return;
    }
    if (!(w->v[w->n] = strdup(msg))) {
        w->dropped++;
        return;
    }
    w->n++;
}
