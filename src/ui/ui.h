/*
 * ui/ui.h — the web UI's static assets (HTML, JS, CSS under src/ui/assets/),
 * embedded into the binary at build time by cmake/embed.cmake.
 */
#ifndef PD_UI_UI_H
#define PD_UI_UI_H

#include <stddef.h>

typedef struct pd_ui_asset {
    const char *path;         /* URL path, e.g. "/" or "/static/app.js" */
    const char *content_type; /* e.g. "text/html; charset=utf-8" */
    const unsigned char *data;
    size_t len;
    const char *etag; /* a weak entity tag (W/"<20 hex digits of its SHA-256>") made at
                         build time: the same for the same content (and encoding-blind,
                         hence weak: the api may serve it gzip'ed) */
} pd_ui_asset;

/* The asset served at URL path `path` ("/" and "/index.html" give the page;
 * the UI's client-side routes "/targets", "/status" and "/graph" give it
 * too), or NULL.
 * Static storage; never freed. */
const pd_ui_asset *pd_ui_find(const char *path);

#endif
