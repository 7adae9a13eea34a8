/*
 * ingest/speedscope.c — speedscope JSON into pprof profiles (see
 * speedscope.h for the format and the rules). JSON through jansson.
 */
#include "ingest/speedscope.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/ingest_int.h"

#define SCHEMA "https://www.speedscope.app/file-format-schema.json"

enum kind { K_TIME, K_NONE, K_BYTES };

/* One output profile: a builder and its key. */
typedef struct out_prof {
    char *name;
    bool bytes; /* value kind: bytes, else time */
    pd_profile_builder *b;
    uint64_t *loc; /* location id per shared frame index, 0: not yet made */
} out_prof;

typedef struct conv {
    const pd_ingest_opts *o;
    pd_ingest_limits lim;
    json_t *frames; /* shared.frames */
    size_t n_frames;
    out_prof *outs;
    size_t n_outs;
    size_t events; /* samples + events read, against max_samples */
    uint64_t *stack;
    size_t cap_stack;
} conv;

/* The unit's kind and nanoseconds per unit (time), or -1 when unknown. */
static int unit_of(const char *u, enum kind *k, double *ns)
{
    static const struct {
        const char *name;
        enum kind k;
        double ns;
    } T[] = {{"none", K_NONE, 0},           {"nanoseconds", K_TIME, 1},
             {"microseconds", K_TIME, 1e3}, {"milliseconds", K_TIME, 1e6},
             {"seconds", K_TIME, 1e9},      {"bytes", K_BYTES, 1}};
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++)
        if (!strcmp(u, T[i].name)) {
            *k = T[i].k;
            *ns = T[i].ns;
            return 0;
        }
    return -1;
}

static const char *str_or(json_t *o, const char *key, const char *def)
{
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : def;
}

/* A JSON number as a frame index below n (Go's int() of a float64
 * truncates). */
static int frame_index(json_t *v, size_t n, size_t *out)
{
    if (!json_is_number(v))
        return -1;
    double d = json_number_value(v);
    if (!isfinite(d) || d <= -1.0 || d >= (double)n)
        return -1;
    *out = (size_t)(d < 0 ? 0 : d);
    return 0;
}

static void out_free(out_prof *p)
{
    free(p->name);
    free(p->loc);
    if (p->b)
        pd_profile_builder_free(p->b);
}

/* The output profile for (name, bytes), made on first use. */
static int get_out(conv *c, const char *name, enum kind k, out_prof **res, pd_err *err)
{
    bool bytes = k == K_BYTES;
    for (size_t i = 0; i < c->n_outs; i++)
        if (c->outs[i].bytes == bytes && !strcmp(c->outs[i].name, name)) {
            *res = &c->outs[i];
            return 0;
        }
    out_prof *no = realloc(c->outs, (c->n_outs + 1) * sizeof *no);
    if (!no)
        return pd_err_set(err, PD_ENOMEM, "out of memory");
    c->outs = no;
    out_prof *p = &c->outs[c->n_outs];
    memset(p, 0, sizeof *p);
    p->bytes = bytes;
    p->name = strdup(name);
    p->loc = calloc(c->n_frames ? c->n_frames : 1, sizeof *p->loc);
    pd_pprof_limits pl = {.max_samples = c->lim.max_samples,
                          .max_locations = c->lim.max_frames,
                          .max_functions = c->lim.max_frames,
                          .max_stack_depth = c->lim.max_stack_depth,
                          .max_strings = 2 * c->lim.max_frames + 16};
    if (!p->name || !p->loc || pd_profile_builder_new(&pl, &p->b)) {
        out_free(p);
        return pd_err_set(err, PD_ENOMEM, "out of memory");
    }
    c->n_outs++;
    const char *type = c->o->type && *c->o->type ? c->o->type : bytes ? "memory" : "cpu";
    const char *unit = bytes ? "bytes" : "nanoseconds";
    int rc;
    if ((rc = pd_profile_builder_sample_type(p->b, type, unit, err)) < 0 ||
        (rc = pd_profile_builder_period(p->b, type, unit, 1, err)) < 0)
        return rc;
    pd_profile_builder_profile(p->b)->time_nanos = c->o->time_nanos;
    pd_profile_builder_profile(p->b)->duration_nanos = c->o->duration_nanos;
    *res = p;
    return 0;
}

/* The location of shared frame i in p. */
static int frame_loc(conv *c, out_prof *p, size_t i, uint64_t *id, pd_err *err)
{
    if (p->loc[i]) {
        *id = p->loc[i];
        return 0;
    }
    json_t *f = json_array_get(c->frames, i);
    const char *name = str_or(f, "name", "");
    const char *file = str_or(f, "file", NULL);
    json_t *lv = json_object_get(f, "line");
    double ld = json_is_number(lv) ? json_number_value(lv) : 0;
    int64_t line = isfinite(ld) && ld > 0 && ld < 2e9 ? (int64_t)ld : 0;
    uint64_t fid;
    int rc;
    if ((rc = pd_profile_builder_function(p->b, name, NULL, file, 0, &fid, err)) < 0)
        return rc;
    pd_pprof_line ln = {.function_id = fid, .line = line};
    if ((rc = pd_profile_builder_location(p->b, 0, 0, &ln, 1, &p->loc[i], err)) < 0)
        return rc;
    *id = p->loc[i];
    return 0;
}

/* Adds value v (in the output's unit, >= 0) to the stack of frame indexes
 * idx[0..n) (root first). */
static int add(conv *c, out_prof *p, const size_t *idx, size_t n, double v, pd_err *err)
{
    if (!isfinite(v) || v < 0 || v >= 9.2e18)
        return pd_err_set(err, PD_EPARSE, "value %g is out of range", v);
    int64_t iv = llround(v);
    if (iv == 0 || n == 0)
        return 0;
    if (n > c->cap_stack) {
        uint64_t *ns = realloc(c->stack, n * sizeof *ns);
        if (!ns)
            return pd_err_set(err, PD_ENOMEM, "out of memory");
        c->stack = ns;
        c->cap_stack = n;
    }
    int rc;
    for (size_t i = 0; i < n; i++) /* leaf first */
        if ((rc = frame_loc(c, p, idx[i], &c->stack[n - 1 - i], err)) < 0)
            return rc;
    return pd_profile_builder_sample(p->b, c->stack, n, &iv, NULL, 0, err);
}

static int count_event(conv *c, pd_err *err)
{
    if (++c->events > c->lim.max_samples)
        return pd_err_set(err, PD_ETOOBIG, "more than max_samples=%zu samples and events",
                          c->lim.max_samples);
    return 0;
}

static int sampled(conv *c, json_t *prof, out_prof *p, double mul, pd_err *err)
{
    json_t *samples = json_object_get(prof, "samples"), *weights = json_object_get(prof, "weights");
    size_t ns = json_array_size(samples), nw = json_array_size(weights);
    if ((samples && !json_is_array(samples)) || (weights && !json_is_array(weights)))
        return pd_err_set(err, PD_EPARSE, "samples and weights must be arrays");
    if (ns != nw)
        return pd_err_set(err, PD_EPARSE, "Unequal lengths of samples and weights: %zu != %zu", ns,
                          nw);
    size_t *idx = NULL, cap = 0;
    int rc = 0;
    for (size_t i = 0; i < ns && rc == 0; i++) {
        if ((rc = count_event(c, err)) < 0)
            break;
        json_t *s = json_array_get(samples, i), *w = json_array_get(weights, i);
        if (!json_is_array(s) || !json_is_number(w)) {
            rc = pd_err_set(err, PD_EPARSE,
                            "sample %zu: not an array of frame indexes with a "
                            "numeric weight",
                            i);
            break;
        }
        double wv = json_number_value(w);
        if (!isfinite(wv) || wv < 0) {
            rc = pd_err_set(err, PD_EPARSE, "sample %zu: Negative weight %g", i, wv);
            break;
        }
        size_t n = json_array_size(s);
        if (n > c->lim.max_stack_depth) {
            rc = pd_err_set(err, PD_ETOOBIG, "sample %zu: stack deeper than max_stack_depth=%zu", i,
                            c->lim.max_stack_depth);
            break;
        }
        if (n > cap) {
            size_t *ni = realloc(idx, n * sizeof *ni);
            if (!ni) {
                rc = pd_err_set(err, PD_ENOMEM, "out of memory");
                break;
            }
            idx = ni;
            cap = n;
        }
        for (size_t j = 0; j < n; j++)
            if (frame_index(json_array_get(s, j), c->n_frames, &idx[j]) < 0) {
                rc = pd_err_set(err, PD_EPARSE, "sample %zu: Invalid frame at position %zu", i, j);
                break;
            }
        if (rc == 0 && (rc = add(c, p, idx, n, wv * mul, err)) < 0)
            pd_err_prefix(err, "sample %zu", i);
    }
    free(idx);
    return rc;
}

static int evented(conv *c, json_t *prof, out_prof *p, double mul, pd_err *err)
{
    json_t *events = json_object_get(prof, "events");
    if (events && !json_is_array(events))
        return pd_err_set(err, PD_EPARSE, "events must be an array");
    json_t *sv = json_object_get(prof, "startValue");
    double last = json_is_number(sv) ? json_number_value(sv) : 0;
    size_t *open = NULL, depth = 0, cap = 0;
    int rc = 0;
    for (size_t i = 0; i < json_array_size(events) && rc == 0; i++) {
        if ((rc = count_event(c, err)) < 0)
            break;
        json_t *ev = json_array_get(events, i);
        json_t *at = json_object_get(ev, "at");
        const char *type = str_or(ev, "type", "");
        size_t fid;
        if (!json_is_number(at) || !isfinite(json_number_value(at))) {
            rc = pd_err_set(err, PD_EPARSE, "event %zu: \"at\" is not a number", i);
            break;
        }
        double t = json_number_value(at);
        if (t < last) {
            rc = pd_err_set(err, PD_EPARSE, "event %zu: Events out of order, %g < %g", i, t, last);
            break;
        }
        if (frame_index(json_object_get(ev, "frame"), c->n_frames, &fid) < 0) {
            rc = pd_err_set(err, PD_EPARSE, "event %zu: Invalid frame", i);
            break;
        }
        bool is_open = !strcmp(type, "O"), is_close = !strcmp(type, "C");
        if (!is_open && !is_close) {
            rc = pd_err_set(err, PD_EPARSE, "event %zu: Unknown event type %.16s", i, type);
            break;
        }
        if (is_close && depth == 0) {
            rc = pd_err_set(err, PD_EPARSE, "event %zu: No stack to close at %g", i, t);
            break;
        }
        if (is_close && open[depth - 1] != fid) {
            rc = pd_err_set(err, PD_EPARSE, "event %zu: Closing non-open frame %zu", i, fid);
            break;
        }
        /* the time since the last event belongs to the frames open then */
        if (depth > 0 && (rc = add(c, p, open, depth, (t - last) * mul, err)) < 0) {
            pd_err_prefix(err, "event %zu", i);
            break;
        }
        if (is_close) {
            depth--;
        } else {
            if (depth >= c->lim.max_stack_depth) {
                rc = pd_err_set(err, PD_ETOOBIG,
                                "event %zu: more than max_stack_depth=%zu "
                                "frames open",
                                i, c->lim.max_stack_depth);
                break;
            }
            if (depth == cap) {
                size_t nc = cap ? cap * 2 : 64;
                size_t *no = realloc(open, nc * sizeof *no);
                if (!no) {
                    rc = pd_err_set(err, PD_ENOMEM, "out of memory");
                    break;
                }
                open = no;
                cap = nc;
            }
            open[depth++] = fid;
        }
        last = t;
    }
    free(open);
    return rc;
}

int pd_ingest_speedscope(const char *data, size_t len, const pd_ingest_opts *opts,
                         pd_ingest_named_profile **out, size_t *n_out, pd_err *err)
{
    static const pd_ingest_opts none;
    conv c = {.o = opts ? opts : &none, .lim = pd__ingest_limits_effective(opts)};
    *out = NULL;
    *n_out = 0;
    if (len > c.lim.max_input_bytes)
        return pd_err_set(err, PD_ETOOBIG, "input of %zu bytes exceeds max_input_bytes=%zu", len,
                          c.lim.max_input_bytes);
    if (c.o->sample_rate_hz < 0 || c.o->sample_rate_hz > 1000000000)
        return pd_err_set(err, PD_EINVAL, "sample rate %" PRId64 " Hz is out of range (1..1e9)",
                          c.o->sample_rate_hz);
    double none_ns = 1e9 / (double)(c.o->sample_rate_hz > 0 ? c.o->sample_rate_hz : 100);
    json_error_t je;
    json_t *root = json_loadb(data, len, 0, &je);
    if (!root)
        return pd_err_set(err, PD_EPARSE, "not JSON: line %d column %d: %s", je.line, je.column,
                          je.text);
    int rc = 0;
    pd_ingest_named_profile *res = NULL;
    const char *schema = str_or(root, "$schema", "");
    json_t *profiles = json_object_get(root, "profiles");
    c.frames = json_object_get(json_object_get(root, "shared"), "frames");
    c.n_frames = json_array_size(c.frames);
    if (!json_is_object(root)) {
        rc = pd_err_set(err, PD_EPARSE, "not a speedscope file: the JSON is not an object");
        goto out;
    }
    if (strcmp(schema, SCHEMA) != 0) {
        rc = pd_err_set(err, PD_EPARSE, "Unknown schema: %.100s (want %s)", schema, SCHEMA);
        goto out;
    }
    if (c.n_frames > c.lim.max_frames) {
        rc = pd_err_set(err, PD_ETOOBIG, "%zu shared frames, more than max_frames=%zu", c.n_frames,
                        c.lim.max_frames);
        goto out;
    }
    if (!json_is_array(profiles) || json_array_size(profiles) == 0) {
        rc = pd_err_set(err, PD_EPARSE, "no \"profiles\" array, or an empty one");
        goto out;
    }
    for (size_t i = 0; i < json_array_size(profiles); i++) {
        json_t *prof = json_array_get(profiles, i);
        const char *name = str_or(prof, "name", ""), *type = str_or(prof, "type", "");
        const char *unit = str_or(prof, "unit", "");
        enum kind k;
        double ns;
        out_prof *p = NULL;
        if (!json_is_object(prof)) {
            rc = pd_err_set(err, PD_EPARSE, "profile %zu is not an object", i);
            goto out;
        }
        if (unit_of(unit, &k, &ns) < 0) {
            rc = pd_err_set(err, PD_EPARSE,
                            "profile %zu (\"%.100s\"): invalid profile unit: "
                            "unknown unit: %.40s",
                            i, name, unit);
            goto out;
        }
        if (strcmp(type, "sampled") != 0 && strcmp(type, "evented") != 0) {
            rc = pd_err_set(err, PD_EPARSE,
                            "profile %zu (\"%.100s\"): Profile type %.40s not "
                            "supported",
                            i, name, type);
            goto out;
        }
        if ((rc = get_out(&c, name, k, &p, err)) < 0)
            goto out;
        double mul = k == K_TIME ? ns : k == K_NONE ? none_ns : 1;
        rc = type[0] == 's' ? sampled(&c, prof, p, mul, err) : evented(&c, prof, p, mul, err);
        if (rc < 0) {
            pd_err_prefix(err, "profile %zu (\"%.100s\")", i, name);
            goto out;
        }
    }
    if (!(res = calloc(c.n_outs, sizeof *res))) {
        rc = pd_err_set(err, PD_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < c.n_outs; i++) {
        out_prof *p = &c.outs[i];
        if ((rc = pd_profile_builder_finish(p->b, &res[i].profile, err)) < 0) {
            pd_ingest_named_profiles_free(res, i);
            res = NULL;
            goto out;
        }
        res[i].name = p->name;
        p->name = NULL;
        res[i].type = c.o->type && *c.o->type ? c.o->type : p->bytes ? "memory" : "cpu";
    }
    *out = res;
    *n_out = c.n_outs;
out:
    for (size_t i = 0; i < c.n_outs; i++)
        out_free(&c.outs[i]);
    free(c.outs);
    free(c.stack);
    json_decref(root);
    return rc;
}

void pd_ingest_named_profiles_free(pd_ingest_named_profile *p, size_t n)
{
    if (!p)
        return;
    for (size_t i = 0; i < n; i++) {
        free(p[i].name);
        pd_profile_release(&p[i].profile);
    }
    free(p);
}
