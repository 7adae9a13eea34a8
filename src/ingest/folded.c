/*
 * ingest/folded.c — collapsed ("folded") stacks and Pyroscope's "lines"
 * format into pprof.
 *
 * folded grammar, per line (lines end in "\n" or "\r\n"):
 *     line   = stack SP+ count SP*        ; split at the LAST run of spaces
 *     stack  = frame *( ";" frame )       ; root first, frames may hold spaces
 *     count  = 1*DIGIT                    ; fits in int64
 * Blank lines (only spaces/tabs) are skipped; leading and trailing spaces and
 * tabs of a line are ignored. A line without a count, with a negative or
 * non-numeric or overflowing count, with an empty frame or with a NUL byte is
 * an error naming the line. A count of 0 adds nothing.
 * lines grammar: each non-blank line is a stack (as above, no count) that
 * counts 1; equal lines add up.
 *
 * Model (as pprof's own collapsed importer): one function per distinct frame
 * name, one location per function (no mapping, address 0) holding one line
 * of that function; a sample per distinct stack, leaf first (the reverse of
 * the text). Values: see pd_ingest_opts in ingest.h.
 */
#include "ingest/ingest_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct folded_state {
    pd_profile_builder *b;
    pd_ingest_limits lim;
    bool two_values; /* samples/count + TYPE/nanoseconds */
    int64_t period;  /* ns per sample when two_values */
    uint64_t *stack; /* location ids, root first while parsing */
    size_t cap_stack;
    char *name; /* NUL-terminated copy of one frame name */
    size_t cap_name;
} folded_state;

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* The location id of the frame name f[0..n); *id. */
static int frame_location(folded_state *st, size_t lineno, const char *f, size_t n, uint64_t *id,
                          pd_err *err)
{
    int rc;
    if (n + 1 > st->cap_name) {
        char *nn = realloc(st->name, n + 1);
        if (!nn)
            return pd_err_set(err, PD_ENOMEM, "line %zu: out of memory", lineno);
        st->name = nn;
        st->cap_name = n + 1;
    }
    memcpy(st->name, f, n);
    st->name[n] = 0;
    uint64_t fid;
    if ((rc = pd_profile_builder_function(st->b, st->name, NULL, NULL, 0, &fid, err))) {
        if (rc == PD_ETOOBIG)
            return pd_err_set(err, rc, "line %zu: more than max_frames=%zu distinct frames", lineno,
                              st->lim.max_frames);
        pd_err_prefix(err, "line %zu", lineno);
        return rc;
    }
    pd_pprof_line ln = {.function_id = fid};
    if ((rc = pd_profile_builder_location(st->b, 0, 0, &ln, 1, id, err))) {
        if (rc == PD_ETOOBIG)
            return pd_err_set(err, rc, "line %zu: more than max_frames=%zu distinct frames", lineno,
                              st->lim.max_frames);
        pd_err_prefix(err, "line %zu", lineno);
        return rc;
    }
    return 0;
}

/* Parses stack s[0..n) (root first) and adds it with `count`. */
static int add_stack(folded_state *st, size_t lineno, const char *s, size_t n, int64_t count,
                     pd_err *err)
{
    size_t depth = 0;
    int rc;
    const char *end = s + n;
    for (const char *f = s;;) {
        const char *semi = memchr(f, ';', (size_t)(end - f));
        const char *fe = semi ? semi : end;
        if (fe == f)
            return pd_err_set(err, PD_EPARSE,
                              "line %zu: frame %zu is empty (two ';' in a row, "
                              "or ';' at an end of the stack)",
                              lineno, depth + 1);
        if (depth >= st->lim.max_stack_depth)
            return pd_err_set(err, PD_ETOOBIG,
                              "line %zu: stack deeper than max_stack_depth=%zu "
                              "frames",
                              lineno, st->lim.max_stack_depth);
        if (depth == st->cap_stack) {
            size_t nc = st->cap_stack ? st->cap_stack * 2 : 64;
            uint64_t *ns = realloc(st->stack, nc * sizeof *ns);
            if (!ns)
                return pd_err_set(err, PD_ENOMEM, "line %zu: out of memory", lineno);
            st->stack = ns;
            st->cap_stack = nc;
        }
        if ((rc = frame_location(st, lineno, f, (size_t)(fe - f), &st->stack[depth], err)))
            return rc;
        depth++;
        if (!semi)
            break;
        f = semi + 1;
    }
    if (count == 0)
        return 0;
    for (size_t i = 0, j = depth - 1; i < j; i++, j--) { /* root first -> leaf first */
        uint64_t t = st->stack[i];
        st->stack[i] = st->stack[j];
        st->stack[j] = t;
    }
    int64_t v[2] = {count, 0};
    if (st->two_values && __builtin_mul_overflow(count, st->period, &v[1]))
        return pd_err_set(err, PD_EPARSE,
                          "line %zu: count %" PRId64 " times the period %" PRId64
                          " ns overflows int64",
                          lineno, count, st->period);
    if ((rc = pd_profile_builder_sample(st->b, st->stack, depth, v, NULL, 0, err))) {
        if (rc == PD_ETOOBIG && strstr(err ? err->msg : "", "max_samples"))
            return pd_err_set(err, rc, "line %zu: more than max_samples=%zu distinct stacks",
                              lineno, st->lim.max_samples);
        pd_err_prefix(err, "line %zu", lineno);
        return rc;
    }
    return 0;
}

/* Parses the count token t[0..n) of line lineno. */
static int parse_count(const char *t, size_t n, size_t lineno, int64_t *out, pd_err *err)
{
    int64_t v = 0;
    if (n && t[0] == '-')
        return pd_err_set(err, PD_EPARSE, "line %zu: count '%.*s' is negative", lineno,
                          (int)(n > 40 ? 40 : n), t);
    size_t i = (n && t[0] == '+') ? 1 : 0;
    if (i == n)
        return pd_err_set(err, PD_EPARSE, "line %zu: missing count after the stack", lineno);
    for (; i < n; i++) {
        if (t[i] < '0' || t[i] > '9')
            return pd_err_set(err, PD_EPARSE,
                              "line %zu: count '%.*s' is not a whole number "
                              "(expected 'frame;frame;... COUNT')",
                              lineno, (int)(n > 40 ? 40 : n), t);
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, t[i] - '0', &v))
            return pd_err_set(err, PD_EPARSE, "line %zu: count '%.*s' overflows int64", lineno,
                              (int)(n > 40 ? 40 : n), t);
    }
    *out = v;
    return 0;
}

int pd_ingest_folded(const char *data, size_t len, bool lines, const pd_ingest_opts *opts,
                     pd_profile *out, pd_err *err)
{
    static const pd_ingest_opts none;
    const pd_ingest_opts *o = opts ? opts : &none;
    folded_state st = {.lim = pd__ingest_limits_effective(opts)};
    int rc;
    memset(out, 0, sizeof *out);

    const char *type = o->type && *o->type ? o->type : "cpu";
    const char *unit = o->unit && *o->unit ? o->unit : "count";
    if (o->sample_rate_hz < 0 || o->sample_rate_hz > 1000000000)
        return pd_err_set(err, PD_EINVAL, "sample rate %" PRId64 " Hz is out of range (1..1e9)",
                          o->sample_rate_hz);
    st.two_values = o->sample_rate_hz > 0 || !strcmp(type, "cpu") || !strcmp(type, "wall");
    if (st.two_values)
        st.period = 1000000000 / (o->sample_rate_hz > 0 ? o->sample_rate_hz : 100);
    if (len > st.lim.max_input_bytes)
        return pd_err_set(err, PD_ETOOBIG, "input of %zu bytes exceeds max_input_bytes=%zu", len,
                          st.lim.max_input_bytes);

    pd_pprof_limits pl = {.max_samples = st.lim.max_samples,
                          .max_locations = st.lim.max_frames,
                          .max_functions = st.lim.max_frames,
                          .max_stack_depth = st.lim.max_stack_depth,
                          .max_strings = st.lim.max_frames + 16};
    if ((rc = pd_profile_builder_new(&pl, &st.b)))
        return pd_err_set(err, rc, "out of memory");
    if (st.two_values) {
        if ((rc = pd_profile_builder_sample_type(st.b, "samples", "count", err)) < 0 ||
            (rc = pd_profile_builder_sample_type(st.b, type, "nanoseconds", err)) < 0 ||
            (rc = pd_profile_builder_period(st.b, type, "nanoseconds", st.period, err)))
            goto out;
    } else {
        if ((rc = pd_profile_builder_sample_type(st.b, type, unit, err)) < 0 ||
            (rc = pd_profile_builder_period(st.b, type, unit, 1, err)))
            goto out;
    }
    rc = 0;
    pd_profile_builder_profile(st.b)->time_nanos = o->time_nanos;
    pd_profile_builder_profile(st.b)->duration_nanos = o->duration_nanos;

    size_t pos = 0, lineno = 0, n;
    const char *line;
    while (pd__ingest_next_line(data, len, &pos, &line, &n)) {
        lineno++;
        if (lineno > st.lim.max_lines) {
            rc = pd_err_set(err, PD_ETOOBIG, "line %zu: more than max_lines=%zu lines", lineno,
                            st.lim.max_lines);
            goto out;
        }
        if (n > st.lim.max_line_bytes) {
            rc = pd_err_set(err, PD_ETOOBIG, "line %zu: %zu bytes exceed max_line_bytes=%zu",
                            lineno, n, st.lim.max_line_bytes);
            goto out;
        }
        if (memchr(line, 0, n)) {
            rc = pd_err_set(err, PD_EPARSE, "line %zu: NUL byte in text", lineno);
            goto out;
        }
        while (n && is_blank(line[n - 1]))
            n--;
        while (n && is_blank(line[0]))
            line++, n--;
        if (!n)
            continue;
        int64_t count = 1;
        size_t stack_len = n;
        if (!lines) {
            size_t sp = n;
            while (sp && !is_blank(line[sp - 1]))
                sp--;
            if (!sp) {
                rc = pd_err_set(err, PD_EPARSE,
                                "line %zu: no count after the stack (expected "
                                "'frame;frame;... COUNT')",
                                lineno);
                goto out;
            }
            if ((rc = parse_count(line + sp, n - sp, lineno, &count, err)))
                goto out;
            stack_len = sp;
            while (stack_len && is_blank(line[stack_len - 1]))
                stack_len--;
            if (!stack_len) {
                rc = pd_err_set(err, PD_EPARSE, "line %zu: empty stack before the count", lineno);
                goto out;
            }
        }
        if ((rc = add_stack(&st, lineno, line, stack_len, count, err)))
            goto out;
    }
    rc = pd_profile_builder_finish(st.b, out, err);
out:
    pd_profile_builder_free(st.b);
    free(st.stack);
    free(st.name);
    return rc;
}
