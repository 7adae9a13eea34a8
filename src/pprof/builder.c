/*
 * pprof/builder.c — pd_profile_builder: make a profile from parts.
 *
 * State: a pd_profile `p` (its arena holds every copied line, stack, value
 * and label array, and its string table is filled through
 * pd_profile_intern), plus growable malloc'd arrays of functions, mappings,
 * locations and samples. Item i of a kind has id i + 1.
 *
 * Deduplication: each kind has a `dedup` table — a u64map from an xxh3
 * content hash to the most recent item index with that hash, and next[]
 * chaining older items with the same hash (-1 ends a chain). A lookup walks
 * the chain comparing content, so hash collisions only cost time. Samples
 * are keyed on (stack, labels); a hit adds the values.
 *
 * finish copies the arrays into the arena, moves p out, then indexes and
 * validates it.
 */
#include "pprof/pprof.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

typedef struct dedup {
    pd_u64map head;
    int64_t *next;
    size_t cap;
} dedup;

struct pd_profile_builder {
    pd_profile p;
    pd_pprof_limits lim;
    pd_pprof_value_type *st;
    size_t n_st, cap_st;
    int64_t *comment;
    size_t n_comment, cap_comment;
    pd_pprof_function *fn;
    size_t n_fn, cap_fn;
    pd_pprof_mapping *map;
    size_t n_map, cap_map;
    pd_pprof_location *loc;
    size_t n_loc, cap_loc;
    pd_pprof_sample *smp;
    size_t n_smp, cap_smp;
    size_t n_lines; /* Line entries over all locations */
    dedup d_fn, d_map, d_loc, d_smp;
    bool keep_repeats; /* pd_profile_builder_keep_repeats: samples never merged */
};

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap : 16;
    while (nc < need) {
        if (nc > SIZE_MAX / 2 / elem)
            return PD_ENOMEM;
        nc *= 2;
    }
    void *n = realloc(*arr, nc * elem);
    if (!n)
        return PD_ENOMEM;
    *arr = n;
    *cap = nc;
    return 0;
}

static uint64_t fix_hash(uint64_t h)
{
    return h == UINT64_MAX ? 0 : h; /* UINT64_MAX is reserved by u64map */
}

static int64_t dd_first(const dedup *d, uint64_t h)
{
    uint64_t v;
    return pd_u64map_get(&d->head, h, &v) ? (int64_t)v : -1;
}

/* Records item i (the newest) under hash h. */
static int dd_add(dedup *d, uint64_t h, size_t i)
{
    if (grow((void **)&d->next, &d->cap, i + 1, sizeof *d->next))
        return PD_ENOMEM;
    d->next[i] = dd_first(d, h);
    return pd_u64map_put(&d->head, h, i) ? PD_ENOMEM : 0;
}

static void dd_release(dedup *d)
{
    pd_u64map_release(&d->head);
    free(d->next);
}

void pd_profile_builder_keep_repeats(pd_profile_builder *b)
{
    b->keep_repeats = true;
}

int pd_profile_builder_new(const pd_pprof_limits *lim, pd_profile_builder **out)
{
    *out = NULL;
    pd_profile_builder *b = calloc(1, sizeof *b);
    if (!b)
        return PD_ENOMEM;
    if (pd_profile_init(&b->p)) {
        free(b);
        return PD_ENOMEM;
    }
    pd_pprof_limits d = pd_pprof_limits_default();
    b->lim = lim ? *lim : d;
#define DEF(f)                                                                                     \
    if (!b->lim.f)                                                                                 \
        b->lim.f = d.f;
    DEF(max_samples)
    DEF(max_locations)
    DEF(max_functions)
    DEF(max_mappings)
    DEF(max_strings)
    DEF(max_sample_types)
    DEF(max_stack_depth)
    DEF(max_labels_per_sample)
    DEF(max_lines)
#undef DEF
    pd_u64map_init(&b->d_fn.head);
    pd_u64map_init(&b->d_map.head);
    pd_u64map_init(&b->d_loc.head);
    pd_u64map_init(&b->d_smp.head);
    *out = b;
    return 0;
}

void pd_profile_builder_free(pd_profile_builder *b)
{
    if (!b)
        return;
    pd_profile_release(&b->p);
    free(b->st);
    free(b->comment);
    free(b->fn);
    free(b->map);
    free(b->loc);
    free(b->smp);
    dd_release(&b->d_fn);
    dd_release(&b->d_map);
    dd_release(&b->d_loc);
    dd_release(&b->d_smp);
    free(b);
}

pd_profile *pd_profile_builder_profile(pd_profile_builder *b)
{
    return &b->p;
}

int64_t pd_profile_builder_string(pd_profile_builder *b, const char *s, pd_err *err)
{
    if (!s)
        s = "";
    size_t before = b->p.n_string;
    int64_t i = pd_profile_intern(&b->p, s, strlen(s));
    if (i < 0)
        return pd_err_set(err, (int)i, "profile builder: out of memory interning a string");
    if (b->p.n_string > before && b->p.n_string > b->lim.max_strings) {
        /* Leave the string in place (cannot un-intern) but fail: the
         * builder is unusable after a cap error anyway. */
        return pd_err_set(err, PD_ETOOBIG, "profile builder: more than max_strings=%zu strings",
                          b->lim.max_strings);
    }
    return i;
}

int pd_profile_builder_sample_type(pd_profile_builder *b, const char *type, const char *unit,
                                   pd_err *err)
{
    if (b->n_smp)
        return pd_err_set(err, PD_EINVAL, "profile builder: sample type '%s' added after samples",
                          type ? type : "");
    if (b->n_st >= b->lim.max_sample_types)
        return pd_err_set(err, PD_ETOOBIG, "profile builder: more than max_sample_types=%zu",
                          b->lim.max_sample_types);
    int64_t t = pd_profile_builder_string(b, type, err);
    if (t < 0)
        return (int)t;
    int64_t u = pd_profile_builder_string(b, unit, err);
    if (u < 0)
        return (int)u;
    if (grow((void **)&b->st, &b->cap_st, b->n_st + 1, sizeof *b->st))
        return pd_err_set(err, PD_ENOMEM, "profile builder: out of memory");
    b->st[b->n_st].type = t;
    b->st[b->n_st].unit = u;
    return (int)b->n_st++;
}

int pd_profile_builder_period(pd_profile_builder *b, const char *type, const char *unit,
                              int64_t period, pd_err *err)
{
    int64_t t = pd_profile_builder_string(b, type, err);
    if (t < 0)
        return (int)t;
    int64_t u = pd_profile_builder_string(b, unit, err);
    if (u < 0)
        return (int)u;
    b->p.period_type.type = t;
    b->p.period_type.unit = u;
    b->p.period = period;
    return 0;
}

int pd_profile_builder_comment(pd_profile_builder *b, const char *text, pd_err *err)
{
    int64_t t = pd_profile_builder_string(b, text, err);
    if (t < 0)
        return (int)t;
    if (grow((void **)&b->comment, &b->cap_comment, b->n_comment + 1, sizeof *b->comment))
        return pd_err_set(err, PD_ENOMEM, "profile builder: out of memory");
    b->comment[b->n_comment++] = t;
    return 0;
}

int pd_profile_builder_function(pd_profile_builder *b, const char *name, const char *system_name,
                                const char *filename, int64_t start_line, uint64_t *id, pd_err *err)
{
    pd_pprof_function f = {0};
    int64_t s;
    if ((s = pd_profile_builder_string(b, name, err)) < 0)
        return (int)s;
    f.name = s;
    if ((s = pd_profile_builder_string(b, system_name, err)) < 0)
        return (int)s;
    f.system_name = s;
    if ((s = pd_profile_builder_string(b, filename, err)) < 0)
        return (int)s;
    f.filename = s;
    f.start_line = start_line;

    int64_t key[4] = {f.name, f.system_name, f.filename, f.start_line};
    uint64_t h = fix_hash(XXH3_64bits(key, sizeof key));
    for (int64_t j = dd_first(&b->d_fn, h); j >= 0; j = b->d_fn.next[j]) {
        const pd_pprof_function *g = &b->fn[j];
        if (g->name == f.name && g->system_name == f.system_name && g->filename == f.filename &&
            g->start_line == f.start_line) {
            *id = g->id;
            return 0;
        }
    }
    if (b->n_fn >= b->lim.max_functions)
        return pd_err_set(err, PD_ETOOBIG, "profile builder: more than max_functions=%zu functions",
                          b->lim.max_functions);
    if (grow((void **)&b->fn, &b->cap_fn, b->n_fn + 1, sizeof *b->fn) ||
        dd_add(&b->d_fn, h, b->n_fn))
        return pd_err_set(err, PD_ENOMEM, "profile builder: out of memory");
    f.id = b->n_fn + 1;
    b->fn[b->n_fn++] = f;
    *id = f.id;
    return 0;
}

int pd_profile_builder_mapping(pd_profile_builder *b, const pd_pprof_mapping *m,
                               const char *filename, const char *build_id, uint64_t *id,
                               pd_err *err)
{
    pd_pprof_mapping n = {0};
    int64_t s;
    if ((s = pd_profile_builder_string(b, filename, err)) < 0)
        return (int)s;
    n.filename = s;
    if ((s = pd_profile_builder_string(b, build_id, err)) < 0)
        return (int)s;
    n.build_id = s;
    n.memory_start = m->memory_start;
    n.memory_limit = m->memory_limit;
    n.file_offset = m->file_offset;
    n.has_functions = m->has_functions;
    n.has_filenames = m->has_filenames;
    n.has_line_numbers = m->has_line_numbers;
    n.has_inline_frames = m->has_inline_frames;

    uint64_t key[6] = {n.memory_start,
                       n.memory_limit,
                       n.file_offset,
                       (uint64_t)n.filename,
                       (uint64_t)n.build_id,
                       (uint64_t)(n.has_functions | n.has_filenames << 1 | n.has_line_numbers << 2 |
                                  n.has_inline_frames << 3)};
    uint64_t h = fix_hash(XXH3_64bits(key, sizeof key));
    for (int64_t j = dd_first(&b->d_map, h); j >= 0; j = b->d_map.next[j]) {
        const pd_pprof_mapping *g = &b->map[j];
        if (g->memory_start == n.memory_start && g->memory_limit == n.memory_limit &&
            g->file_offset == n.file_offset && g->filename == n.filename &&
            g->build_id == n.build_id && g->has_functions == n.has_functions &&
            g->has_filenames == n.has_filenames && g->has_line_numbers == n.has_line_numbers &&
            g->has_inline_frames == n.has_inline_frames) {
            *id = g->id;
            return 0;
        }
    }
    if (b->n_map >= b->lim.max_mappings)
        return pd_err_set(err, PD_ETOOBIG, "profile builder: more than max_mappings=%zu mappings",
                          b->lim.max_mappings);
    if (grow((void **)&b->map, &b->cap_map, b->n_map + 1, sizeof *b->map) ||
        dd_add(&b->d_map, h, b->n_map))
        return pd_err_set(err, PD_ENOMEM, "profile builder: out of memory");
    n.id = b->n_map + 1;
    b->map[b->n_map++] = n;
    *id = n.id;
    return 0;
}

int pd_profile_builder_location(pd_profile_builder *b, uint64_t mapping_id, uint64_t address,
                                const pd_pprof_line *line, size_t n_line, uint64_t *id, pd_err *err)
{
    if (mapping_id > b->n_map)
        return pd_err_set(err, PD_EINVAL,
                          "profile builder: location: mapping id %" PRIu64 " not found",
                          mapping_id);
    for (size_t i = 0; i < n_line; i++)
        if (line[i].function_id > b->n_fn)
            return pd_err_set(err, PD_EINVAL,
                              "profile builder: location: function id %" PRIu64 " not found",
                              line[i].function_id);
    uint64_t seed[2] = {mapping_id, address};
    uint64_t h = XXH3_64bits_withSeed(line, n_line * sizeof *line, XXH3_64bits(seed, sizeof seed));
    h = fix_hash(h);
    for (int64_t j = dd_first(&b->d_loc, h); j >= 0; j = b->d_loc.next[j]) {
        const pd_pprof_location *g = &b->loc[j];
        if (g->mapping_id == mapping_id && g->address == address && g->n_line == n_line &&
            (n_line == 0 || !memcmp(g->line, line, n_line * sizeof *line))) {
            *id = g->id;
            return 0;
        }
    }
    if (b->n_loc >= b->lim.max_locations)
        return pd_err_set(err, PD_ETOOBIG, "profile builder: more than max_locations=%zu locations",
                          b->lim.max_locations);
    if (n_line > b->lim.max_lines - b->n_lines)
        return pd_err_set(err, PD_ETOOBIG, "profile builder: more than max_lines=%zu lines",
                          b->lim.max_lines);
    pd_pprof_location l = {.mapping_id = mapping_id, .address = address, .n_line = n_line};
    if (n_line) {
        if (!(l.line = pd_arena_alloc(&b->p.arena, n_line * sizeof *line)))
            return pd_err_set(err, PD_ENOMEM, "profile builder: out of memory");
        memcpy(l.line, line, n_line * sizeof *line);
    }
    if (grow((void **)&b->loc, &b->cap_loc, b->n_loc + 1, sizeof *b->loc) ||
        dd_add(&b->d_loc, h, b->n_loc))
        return pd_err_set(err, PD_ENOMEM, "profile builder: out of memory");
    l.id = b->n_loc + 1;
    b->loc[b->n_loc++] = l;
    b->n_lines += n_line;
    *id = l.id;
    return 0;
}

int pd_profile_builder_sample(pd_profile_builder *b, const uint64_t *loc, size_t n_loc,
                              const int64_t *value, const pd_pprof_label *label, size_t n_label,
                              pd_err *err)
{
    size_t nv = b->n_st;
    if (!nv)
        return pd_err_set(err, PD_EINVAL, "profile builder: sample added before any sample type");
    if (n_loc > b->lim.max_stack_depth)
        return pd_err_set(err, PD_ETOOBIG,
                          "profile builder: stack of %zu frames exceeds "
                          "max_stack_depth=%zu",
                          n_loc, b->lim.max_stack_depth);
    if (n_label > b->lim.max_labels_per_sample)
        return pd_err_set(err, PD_ETOOBIG,
                          "profile builder: %zu labels exceed "
                          "max_labels_per_sample=%zu",
                          n_label, b->lim.max_labels_per_sample);
    for (size_t i = 0; i < n_loc; i++)
        if (loc[i] == 0 || loc[i] > b->n_loc)
            return pd_err_set(err, PD_EINVAL,
                              "profile builder: sample: location id %" PRIu64 " not found", loc[i]);
    for (size_t i = 0; i < n_label; i++) {
        const pd_pprof_label *l = &label[i];
        if (l->key < 0 || (size_t)l->key >= b->p.n_string || l->str < 0 ||
            (size_t)l->str >= b->p.n_string || l->num_unit < 0 ||
            (size_t)l->num_unit >= b->p.n_string)
            return pd_err_set(err, PD_EINVAL,
                              "profile builder: sample: label %zu has a string "
                              "index out of range",
                              i);
    }
    uint64_t h =
        XXH3_64bits_withSeed(label, n_label * sizeof *label, XXH3_64bits(loc, n_loc * sizeof *loc));
    h = fix_hash(h);
    for (int64_t j = b->keep_repeats ? -1 : dd_first(&b->d_smp, h); j >= 0; j = b->d_smp.next[j]) {
        pd_pprof_sample *g = &b->smp[j];
        if (g->n_location != n_loc || g->n_label != n_label ||
            (n_loc && memcmp(g->location_id, loc, n_loc * sizeof *loc)) ||
            (n_label && memcmp(g->label, label, n_label * sizeof *label)))
            continue;
        int64_t sum[64];
        int64_t *tmp = nv <= 64 ? sum : malloc(nv * sizeof *tmp);
        if (!tmp)
            return pd_err_set(err, PD_ENOMEM, "profile builder: out of memory");
        for (size_t k = 0; k < nv; k++)
            if (__builtin_add_overflow(g->value[k], value[k], &tmp[k])) {
                if (tmp != sum)
                    free(tmp);
                return pd_err_set(err, PD_EINVAL,
                                  "profile builder: sample value %zu overflows "
                                  "int64 when merged",
                                  k);
            }
        memcpy(g->value, tmp, nv * sizeof *tmp);
        if (tmp != sum)
            free(tmp);
        return 0;
    }
    if (b->n_smp >= b->lim.max_samples)
        return pd_err_set(err, PD_ETOOBIG, "profile builder: more than max_samples=%zu samples",
                          b->lim.max_samples);
    pd_pprof_sample s = {.n_location = n_loc, .n_value = nv, .n_label = n_label};
    s.value = pd_arena_alloc(&b->p.arena, nv * sizeof *value);
    if (n_loc)
        s.location_id = pd_arena_alloc(&b->p.arena, n_loc * sizeof *loc);
    if (n_label)
        s.label = pd_arena_alloc(&b->p.arena, n_label * sizeof *label);
    if (!s.value || (n_loc && !s.location_id) || (n_label && !s.label))
        return pd_err_set(err, PD_ENOMEM, "profile builder: out of memory");
    memcpy(s.value, value, nv * sizeof *value);
    if (n_loc)
        memcpy(s.location_id, loc, n_loc * sizeof *loc);
    if (n_label)
        memcpy(s.label, label, n_label * sizeof *label);
    if (grow((void **)&b->smp, &b->cap_smp, b->n_smp + 1, sizeof *b->smp) ||
        dd_add(&b->d_smp, h, b->n_smp))
        return pd_err_set(err, PD_ENOMEM, "profile builder: out of memory");
    b->smp[b->n_smp++] = s;
    return 0;
}

/* Copies n elements of size elem into the arena; NULL array for n == 0. */
static int to_arena(pd_arena *a, void **dst, const void *src, size_t n, size_t elem)
{
    *dst = NULL;
    if (!n)
        return 0;
    if (!(*dst = pd_arena_alloc(a, n * elem)))
        return PD_ENOMEM;
    memcpy(*dst, src, n * elem);
    return 0;
}

int pd_profile_builder_finish(pd_profile_builder *b, pd_profile *out, pd_err *err)
{
    pd_profile *p = &b->p;
    int rc;
    memset(out, 0, sizeof *out);
    if (to_arena(&p->arena, (void **)&p->sample_type, b->st, b->n_st, sizeof *b->st) ||
        to_arena(&p->arena, (void **)&p->comment, b->comment, b->n_comment, sizeof *b->comment) ||
        to_arena(&p->arena, (void **)&p->function, b->fn, b->n_fn, sizeof *b->fn) ||
        to_arena(&p->arena, (void **)&p->mapping, b->map, b->n_map, sizeof *b->map) ||
        to_arena(&p->arena, (void **)&p->location, b->loc, b->n_loc, sizeof *b->loc) ||
        to_arena(&p->arena, (void **)&p->sample, b->smp, b->n_smp, sizeof *b->smp))
        return pd_err_set(err, PD_ENOMEM, "profile builder: out of memory");
    p->n_sample_type = b->n_st;
    p->n_comment = b->n_comment;
    p->n_function = b->n_fn;
    p->n_mapping = b->n_map;
    p->n_location = b->n_loc;
    p->n_sample = b->n_smp;
    *out = *p;
    memset(p, 0, sizeof *p); /* the arena and intern table now belong to out */
    if ((rc = pd_profile_index(out, err)) || (rc = pd_profile_validate(out, err))) {
        pd_profile_release(out);
        return rc;
    }
    return 0;
}
