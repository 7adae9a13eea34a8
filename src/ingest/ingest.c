/*
 * ingest/ingest.c — what the converters share: caps, format names, the
 * dispatcher, and line splitting.
 */
#include "ingest/ingest_int.h"

#include <string.h>

pd_ingest_limits pd_ingest_limits_default(void)
{
    pd_ingest_limits l = {
        .max_input_bytes = (size_t)512 << 20,
        .max_line_bytes = (size_t)1 << 20,
        .max_lines = 50000000,
        .max_stack_depth = 4096,
        .max_frames = 1000000,
        .max_samples = 1000000,
    };
    return l;
}

pd_ingest_limits pd__ingest_limits_effective(const pd_ingest_opts *opts)
{
    pd_ingest_limits d = pd_ingest_limits_default();
    if (!opts)
        return d;
    pd_ingest_limits l = opts->lim;
#define DEF(f)                                                                                     \
    if (!l.f)                                                                                      \
        l.f = d.f;
    DEF(max_input_bytes)
    DEF(max_line_bytes)
    DEF(max_lines)
    DEF(max_stack_depth)
    DEF(max_frames)
    DEF(max_samples)
#undef DEF
    return l;
}

pd_ingest_format pd_ingest_format_parse(const char *name)
{
    if (!name)
        return 0;
    if (!strcmp(name, "folded") || !strcmp(name, "collapsed"))
        return PD_INGEST_FOLDED;
    if (!strcmp(name, "lines"))
        return PD_INGEST_LINES;
    if (!strcmp(name, "perf-script") || !strcmp(name, "perf"))
        return PD_INGEST_PERF_SCRIPT;
    return 0;
}

int pd_ingest_convert(pd_ingest_format fmt, const char *data, size_t len,
                      const pd_ingest_opts *opts, pd_profile *out, pd_err *err)
{
    memset(out, 0, sizeof *out);
    switch (fmt) {
    case PD_INGEST_FOLDED:
        return pd_ingest_folded(data, len, false, opts, out, err);
    case PD_INGEST_LINES:
        return pd_ingest_folded(data, len, true, opts, out, err);
    case PD_INGEST_PERF_SCRIPT:
        return pd_ingest_perf_script(data, len, opts, out, err);
    }
    return pd_err_set(err, PD_EINVAL, "unknown input format %d", (int)fmt);
}

int pd__ingest_next_line(const char *data, size_t len, size_t *pos, const char **line,
                         size_t *line_len)
{
    if (*pos >= len)
        return 0;
    const char *s = data + *pos;
    const char *nl = memchr(s, '\n', len - *pos);
    size_t n = nl ? (size_t)(nl - s) : len - *pos;
    *pos += n + (nl ? 1 : 0);
    if (n && s[n - 1] == '\r')
        n--;
    *line = s;
    *line_len = n;
    return 1;
}
