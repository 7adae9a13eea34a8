/*
 * ui/ui.c — looks up embedded assets. Every file src/ui/assets/F is served at
 * /static/F; index.html is also served at "/" and at the UI's client-side
 * routes so that a reload of /targets works.
 */
#include "ui.h"

#include <string.h>

extern const pd_ui_asset pd__ui_assets[];

const pd_ui_asset *pd_ui_find(const char *path)
{
    if (!path)
        return NULL;
    if (strcmp(path, "/") == 0 || strcmp(path, "/index.html") == 0 ||
        strcmp(path, "/targets") == 0 || strcmp(path, "/graph") == 0 ||
        strcmp(path, "/status") == 0)
        path = "/static/index.html";
    for (const pd_ui_asset *a = pd__ui_assets; a->path; a++)
        if (strcmp(a->path, path) == 0)
            return a;
    return NULL;
}
