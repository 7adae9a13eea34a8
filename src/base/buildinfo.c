/*
 * base/buildinfo.c — formatting of a build's facts (base/buildinfo.h).
 */
#include "base/buildinfo.h"

#include <stdio.h>
#include <string.h>

#include "base/error.h"

int pd_build_info_write_text(const pd_build_info *bi, const char *program, pd_buf *out)
{
    return pd_buf_printf(out,
                         "%s, version %s (branch: %s, revision: %s)\n"
                         "  build user:       %s\n"
                         "  build date:       %s\n"
                         "  compiler:         %s\n"
                         "  platform:         %s\n",
                         program, bi->version, bi->branch, bi->revision, bi->build_user,
                         bi->build_date, bi->compiler, bi->platform);
}

/* Appends v escaped for a label value of the text format (\\, \", \n). */
static size_t put_escaped(char *out, size_t cap, size_t o, const char *v)
{
    for (; *v; v++) {
        const char *s = NULL;
        if (*v == '\\')
            s = "\\\\";
        else if (*v == '"')
            s = "\\\"";
        else if (*v == '\n')
            s = "\\n";
        size_t n = s ? 2 : 1;
        for (size_t i = 0; i < n; i++, o++)
            if (o + 1 < cap)
                out[o] = s ? s[i] : *v;
    }
    return o;
}

size_t pd_build_info_labels(const pd_build_info *bi, char *out, size_t cap)
{
    const char *names[] = {"branch", "compiler", "platform", "revision", "version"};
    const char *vals[] = {bi->branch, bi->compiler, bi->platform, bi->revision, bi->version};
    size_t o = 0;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const char *pre = i ? "," : "";
        for (const char *p = pre; *p; p++, o++)
            if (o + 1 < cap)
                out[o] = *p;
        for (const char *p = names[i]; *p; p++, o++)
            if (o + 1 < cap)
                out[o] = *p;
        for (const char *p = "=\""; *p; p++, o++)
            if (o + 1 < cap)
                out[o] = *p;
        o = put_escaped(out, cap, o, vals[i]);
        if (o + 1 < cap)
            out[o] = '"';
        o++;
    }
    if (cap)
        out[o < cap ? o : cap - 1] = 0;
    return o;
}
