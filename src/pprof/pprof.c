/*
 * pprof/pprof.c — the in-memory profile: life cycle, decode entry point,
 * id index, validation, lookups, totals, sample_index, string interning.
 *
 * The wire decoder is decode.c, the encoder encode.c, semantic equality
 * equal.c, gzip gzip.c. See pprof.h for the model and its ownership rules.
 *
 * Interning (pd_profile_intern): p->intern points at a struct intern, made
 * on first use from the current string table: a u64map from xxh3(string) to
 * the first index with that hash, and next[] chaining further indexes with
 * the same hash (-1 ends a chain). The string table arrays live in the arena
 * and are replaced by arrays twice as large when full (the old ones stay in
 * the arena until release: at most 2x waste, amortized O(1) per string).
 */
#include "pprof/pprof_int.h"

#include <errno.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

pd_pprof_limits pd_pprof_limits_default(void)
{
    pd_pprof_limits l = {
        .max_body_bytes = 16u << 20,
        .max_decompressed_bytes = 64u << 20,
        .max_samples = 1000000,
        .max_locations = 1000000,
        .max_functions = 1000000,
        .max_mappings = 10000,
        .max_strings = 1000000,
        .max_sample_types = 64,
        .max_stack_depth = 4096,
        .max_labels_per_sample = 1024,
        .max_lines = 4000000,
    };
    return l;
}

pd_pprof_limits pd__pprof_limits_effective(const pd_pprof_limits *lim)
{
    pd_pprof_limits d = pd_pprof_limits_default();
    if (!lim)
        return d;
    pd_pprof_limits l = *lim;
#define DEF(f)                                                                                     \
    if (!l.f)                                                                                      \
        l.f = d.f;
    DEF(max_body_bytes)
    DEF(max_decompressed_bytes)
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
    return l;
}

typedef struct intern {
    pd_u64map head; /* hash -> first string index with that hash */
    int64_t *next;  /* per string index: next index with the same hash, or -1 */
    size_t cap;     /* room in string_table, string_len and next */
} intern;

static void intern_free(intern *in)
{
    if (!in)
        return;
    pd_u64map_release(&in->head);
    free(in->next);
    free(in);
}

int pd_profile_init(pd_profile *p)
{
    memset(p, 0, sizeof *p);
    pd_arena_init(&p->arena);
    pd_u64map_init(&p->loc_by_id);
    pd_u64map_init(&p->fn_by_id);
    pd_u64map_init(&p->map_by_id);
    p->string_table = pd_arena_alloc(&p->arena, sizeof *p->string_table);
    p->string_len = pd_arena_alloc(&p->arena, sizeof *p->string_len);
    if (!p->string_table || !p->string_len) {
        pd_arena_release(&p->arena);
        memset(p, 0, sizeof *p);
        return PD_ENOMEM;
    }
    p->string_table[0] = "";
    p->string_len[0] = 0;
    p->n_string = 1;
    return 0;
}

void pd_profile_release(pd_profile *p)
{
    pd_arena_release(&p->arena);
    pd_u64map_release(&p->loc_by_id);
    pd_u64map_release(&p->fn_by_id);
    pd_u64map_release(&p->map_by_id);
    intern_free(p->intern);
    memset(p, 0, sizeof *p);
}

int pd_profile_decode(pd_profile *p, const uint8_t *body, size_t len, const pd_pprof_limits *lim,
                      pd_err *err)
{
    pd_pprof_limits L = pd__pprof_limits_effective(lim);
    pd_buf raw;
    int rc;

    memset(p, 0, sizeof *p);
    pd_buf_init(&raw, 0);
    if (len > L.max_body_bytes)
        return pd_err_set(err, PD_ETOOBIG,
                          "pprof body: %zu bytes exceed the cap max_body_bytes=%zu", len,
                          L.max_body_bytes);
    if (pd_is_gzip(body, len)) {
        if ((rc = pd_gunzip(body, len, L.max_decompressed_bytes, &raw, err)))
            goto out;
        rc = pd__pprof_decode_raw(p, (const uint8_t *)raw.data, raw.len, &L, err);
    } else {
        if (len > L.max_decompressed_bytes) {
            rc = pd_err_set(
                err, PD_ETOOBIG,
                "pprof body: %zu bytes of raw protobuf exceed the cap max_decompressed_bytes=%zu",
                len, L.max_decompressed_bytes);
            goto out;
        }
        rc = pd__pprof_decode_raw(p, body, len, &L, err);
    }
    if (rc)
        goto out;
    if ((rc = pd_profile_index(p, err)) || (rc = pd_profile_validate(p, err)))
        pd_profile_release(p);
out:
    pd_buf_release(&raw);
    return rc;
}

/* ---- index ---- */

static int index_ids(pd_u64map *m, bool *dense, const char *kind, size_t n, const void *base,
                     size_t stride, pd_err *err)
{
    pd_u64map_release(m);
    /* ids 1..n in array order (what Go and most producers write): the array
       index is id - 1, no map is built */
    *dense = true;
    for (size_t i = 0; i < n && *dense; i++)
        *dense = *(const uint64_t *)((const char *)base + i * stride) == i + 1;
    if (*dense)
        return 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t id = *(const uint64_t *)((const char *)base + i * stride), prev;
        if (id == 0)
            return pd_err_set(err, PD_EINVAL, "pprof: %s %zu has id 0 (ids must be non-zero)", kind,
                              i);
        if (id == UINT64_MAX)
            return pd_err_set(err, PD_EINVAL, "pprof: %s %zu has id %" PRIu64 ", which is reserved",
                              kind, i, id);
        if (pd_u64map_get(m, id, &prev))
            return pd_err_set(err, PD_EINVAL,
                              "pprof: %s %zu: duplicate id %" PRIu64 " (also %s %" PRIu64 ")", kind,
                              i, id, kind, prev);
        if (pd_u64map_put(m, id, i))
            return pd_err_set(err, PD_ENOMEM, "pprof: out of memory indexing %s ids", kind);
    }
    return 0;
}

int pd_profile_index(pd_profile *p, pd_err *err)
{
    int rc;
    if ((rc = index_ids(&p->loc_by_id, &p->loc_dense, "location", p->n_location,
                        p->n_location ? &p->location[0].id : NULL, sizeof *p->location, err)) ||
        (rc = index_ids(&p->fn_by_id, &p->fn_dense, "function", p->n_function,
                        p->n_function ? &p->function[0].id : NULL, sizeof *p->function, err)) ||
        (rc = index_ids(&p->map_by_id, &p->map_dense, "mapping", p->n_mapping,
                        p->n_mapping ? &p->mapping[0].id : NULL, sizeof *p->mapping, err)))
        return rc;
    return 0;
}

/* ---- validation ---- */

#define STR_OK(p, i) ((i) >= 0 && (uint64_t)(i) < (uint64_t)(p)->n_string)

static int bad_str(const pd_profile *p, pd_err *err, const char *where, const char *field,
                   int64_t i)
{
    return pd_err_set(err, PD_EINVAL, "%s: %s string index %" PRId64 " out of range (%zu strings)",
                      where, field, i, p->n_string);
}

int pd_profile_validate(const pd_profile *p, pd_err *err)
{
    char where[80];
    if (p->n_string == 0 || p->string_len[0] != 0)
        return pd_err_set(err, PD_EINVAL, "string_table[0] must be \"\" (%s)",
                          p->n_string ? "it is not empty" : "the string table is empty");
    for (size_t i = 0; i < p->n_sample_type; i++) {
        if (STR_OK(p, p->sample_type[i].type) && STR_OK(p, p->sample_type[i].unit))
            continue;
        snprintf(where, sizeof where, "sample_type %zu", i);
        if (!STR_OK(p, p->sample_type[i].type))
            return bad_str(p, err, where, "type", p->sample_type[i].type);
        if (!STR_OK(p, p->sample_type[i].unit))
            return bad_str(p, err, where, "unit", p->sample_type[i].unit);
    }
    struct {
        const char *name;
        int64_t v;
    } top[] = {
        {"period_type.type", p->period_type.type},
        {"period_type.unit", p->period_type.unit},
        {"drop_frames", p->drop_frames},
        {"keep_frames", p->keep_frames},
        {"default_sample_type", p->default_sample_type},
        {"doc_url", p->doc_url},
    };
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
        if (!STR_OK(p, top[i].v))
            return bad_str(p, err, "profile", top[i].name, top[i].v);
    for (size_t i = 0; i < p->n_comment; i++)
        if (!STR_OK(p, p->comment[i])) {
            snprintf(where, sizeof where, "comment %zu", i);
            return bad_str(p, err, where, "comment", p->comment[i]);
        }

    for (size_t i = 0; i < p->n_sample; i++) {
        const pd_pprof_sample *s = &p->sample[i];
        if (s->n_value != p->n_sample_type)
            return pd_err_set(err, PD_EINVAL, "sample %zu: %zu values for %zu sample types", i,
                              s->n_value, p->n_sample_type);
        for (size_t j = 0; j < s->n_location; j++)
            if (!pd_profile_location(p, s->location_id[j]))
                return pd_err_set(err, PD_EINVAL, "sample %zu: location id %" PRIu64 " not found",
                                  i, s->location_id[j]);
        for (size_t j = 0; j < s->n_label; j++) {
            const pd_pprof_label *l = &s->label[j];
            if (STR_OK(p, l->key) && STR_OK(p, l->str) && STR_OK(p, l->num_unit))
                continue; /* the common case: no message to format */
            snprintf(where, sizeof where, "sample %zu label %zu", i, j);
            if (!STR_OK(p, l->key))
                return bad_str(p, err, where, "key", l->key);
            if (!STR_OK(p, l->str))
                return bad_str(p, err, where, "str", l->str);
            if (!STR_OK(p, l->num_unit))
                return bad_str(p, err, where, "num_unit", l->num_unit);
        }
    }
    for (size_t i = 0; i < p->n_mapping; i++) {
        const pd_pprof_mapping *m = &p->mapping[i];
        if (STR_OK(p, m->filename) && STR_OK(p, m->build_id))
            continue;
        snprintf(where, sizeof where, "mapping %zu (id %" PRIu64 ")", i, m->id);
        if (!STR_OK(p, m->filename))
            return bad_str(p, err, where, "filename", m->filename);
        if (!STR_OK(p, m->build_id))
            return bad_str(p, err, where, "build_id", m->build_id);
    }
    for (size_t i = 0; i < p->n_location; i++) {
        const pd_pprof_location *l = &p->location[i];
        if (l->mapping_id && !pd_profile_mapping(p, l->mapping_id))
            return pd_err_set(err, PD_EINVAL,
                              "location %zu (id %" PRIu64 "): mapping id %" PRIu64 " not found", i,
                              l->id, l->mapping_id);
        for (size_t j = 0; j < l->n_line; j++)
            if (l->line[j].function_id && !pd_profile_function(p, l->line[j].function_id))
                return pd_err_set(err, PD_EINVAL,
                                  "location %zu (id %" PRIu64 ") line %zu: function id %" PRIu64
                                  " not found",
                                  i, l->id, j, l->line[j].function_id);
    }
    for (size_t i = 0; i < p->n_function; i++) {
        const pd_pprof_function *f = &p->function[i];
        if (STR_OK(p, f->name) && STR_OK(p, f->system_name) && STR_OK(p, f->filename))
            continue;
        snprintf(where, sizeof where, "function %zu (id %" PRIu64 ")", i, f->id);
        if (!STR_OK(p, f->name))
            return bad_str(p, err, where, "name", f->name);
        if (!STR_OK(p, f->system_name))
            return bad_str(p, err, where, "system_name", f->system_name);
        if (!STR_OK(p, f->filename))
            return bad_str(p, err, where, "filename", f->filename);
    }
    return 0;
}

/* ---- lookups ---- */

const pd_pprof_location *pd__profile_location_by_map(const pd_profile *p, uint64_t id)
{
    uint64_t i;
    return pd_u64map_get(&p->loc_by_id, id, &i) && i < p->n_location ? &p->location[i] : NULL;
}

const pd_pprof_function *pd__profile_function_by_map(const pd_profile *p, uint64_t id)
{
    uint64_t i;
    return pd_u64map_get(&p->fn_by_id, id, &i) && i < p->n_function ? &p->function[i] : NULL;
}

const pd_pprof_mapping *pd__profile_mapping_by_map(const pd_profile *p, uint64_t id)
{
    uint64_t i;
    return pd_u64map_get(&p->map_by_id, id, &i) && i < p->n_mapping ? &p->mapping[i] : NULL;
}

const char *pd_profile_str(const pd_profile *p, int64_t idx)
{
    return STR_OK(p, idx) ? p->string_table[idx] : "";
}

void pd_profile_totals(const pd_profile *p, int64_t *totals)
{
    for (size_t t = 0; t < p->n_sample_type; t++) {
        uint64_t sum = 0; /* unsigned: hostile values wrap instead of overflowing */
        for (size_t i = 0; i < p->n_sample; i++)
            if (t < p->sample[i].n_value)
                sum += (uint64_t)p->sample[i].value[t];
        totals[t] = (int64_t)sum;
    }
}

/* ---- sample_index ---- */

static void list_types(const pd_profile *p, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
    for (size_t i = 0; i < p->n_sample_type && n < cap; i++) {
        int w = snprintf(out + n, cap - n, "%s%s", i ? ", " : "",
                         pd_profile_str(p, p->sample_type[i].type));
        if (w < 0)
            break;
        n += (size_t)w;
    }
}

int pd_profile_sample_index(const pd_profile *p, const char *spec, size_t *idx, pd_err *err)
{
    char names[400];
    if (p->n_sample_type == 0)
        return pd_err_set(err, PD_EINVAL, "sample_index: the profile has no sample types");
    if (!spec || !*spec) {
        const char *def = pd_profile_str(p, p->default_sample_type);
        if (*def)
            for (size_t i = 0; i < p->n_sample_type; i++)
                if (!strcmp(pd_profile_str(p, p->sample_type[i].type), def)) {
                    *idx = i;
                    return 0;
                }
        *idx = p->n_sample_type - 1;
        return 0;
    }
    /* a decimal number (as strconv.Atoi: optional sign, digits) */
    const char *s = spec + (*spec == '-' || *spec == '+');
    if (*s && strspn(s, "0123456789") == strlen(s)) {
        errno = 0;
        char *end;
        long long n = strtoll(spec, &end, 10);
        if (errno || n < 0 || (unsigned long long)n >= p->n_sample_type)
            return pd_err_set(err, PD_EINVAL, "sample_index %s is outside the range [0..%zu]", spec,
                              p->n_sample_type - 1);
        *idx = (size_t)n;
        return 0;
    }
    /* "inuse_space" also selects a type named "space" (pprof's legacy names) */
    const char *no_inuse = strncmp(spec, "inuse_", 6) ? spec : spec + 6;
    for (size_t i = 0; i < p->n_sample_type; i++) {
        const char *t = pd_profile_str(p, p->sample_type[i].type);
        if (!strcmp(t, spec) || !strcmp(t, no_inuse)) {
            *idx = i;
            return 0;
        }
    }
    /* "type/unit" */
    const char *slash = strchr(spec, '/');
    if (slash)
        for (size_t i = 0; i < p->n_sample_type; i++) {
            const char *t = pd_profile_str(p, p->sample_type[i].type);
            const char *u = pd_profile_str(p, p->sample_type[i].unit);
            if (strlen(t) == (size_t)(slash - spec) && !strncmp(t, spec, (size_t)(slash - spec)) &&
                !strcmp(u, slash + 1)) {
                *idx = i;
                return 0;
            }
        }
    list_types(p, names, sizeof names);
    return pd_err_set(err, PD_EINVAL, "sample_index \"%.100s\" must be one of: %s", spec, names);
}

/* ---- interning ---- */

static uint64_t str_hash(const char *s, size_t len)
{
    uint64_t h = XXH3_64bits(s, len);
    return h == UINT64_MAX ? h - 1 : h;
}

static int intern_link(intern *in, const pd_profile *p, size_t i)
{
    uint64_t h = str_hash(p->string_table[i], p->string_len[i]), first;
    if (pd_u64map_get(&in->head, h, &first)) {
        /* append at the chain's end so the lowest index is found first */
        size_t j = (size_t)first;
        while (in->next[j] >= 0)
            j = (size_t)in->next[j];
        in->next[j] = (int64_t)i;
        in->next[i] = -1;
        return 0;
    }
    in->next[i] = -1;
    return pd_u64map_put(&in->head, h, i);
}

static intern *intern_make(pd_profile *p)
{
    intern *in = calloc(1, sizeof *in);
    if (!in)
        return NULL;
    pd_u64map_init(&in->head);
    in->cap = p->n_string < 16 ? 16 : p->n_string;
    in->next = malloc(in->cap * sizeof *in->next);
    if (!in->next)
        goto fail;
    /* copy the table into arrays with room to grow */
    const char **st = pd_arena_alloc(&p->arena, in->cap * sizeof *st);
    size_t *sl = pd_arena_alloc(&p->arena, in->cap * sizeof *sl);
    if (!st || !sl)
        goto fail;
    if (p->n_string) {
        memcpy(st, p->string_table, p->n_string * sizeof *st);
        memcpy(sl, p->string_len, p->n_string * sizeof *sl);
    }
    p->string_table = st;
    p->string_len = sl;
    for (size_t i = 0; i < p->n_string; i++)
        if (intern_link(in, p, i))
            goto fail;
    return in;
fail:
    intern_free(in);
    return NULL;
}

int64_t pd_profile_intern(pd_profile *p, const char *s, size_t len)
{
    intern *in = p->intern;
    if (!in) {
        if (!(in = intern_make(p)))
            return PD_ENOMEM;
        p->intern = in;
    }
    uint64_t h = str_hash(s, len), first;
    if (pd_u64map_get(&in->head, h, &first))
        for (int64_t j = (int64_t)first; j >= 0; j = in->next[j])
            if (p->string_len[j] == len && !memcmp(p->string_table[j], s, len))
                return j;
    if (p->n_string == in->cap) {
        size_t nc = in->cap * 2;
        const char **st = pd_arena_alloc(&p->arena, nc * sizeof *st);
        size_t *sl = pd_arena_alloc(&p->arena, nc * sizeof *sl);
        int64_t *nx = realloc(in->next, nc * sizeof *nx);
        if (nx)
            in->next = nx;
        if (!st || !sl || !nx)
            return PD_ENOMEM;
        memcpy(st, p->string_table, p->n_string * sizeof *st);
        memcpy(sl, p->string_len, p->n_string * sizeof *sl);
        p->string_table = st;
        p->string_len = sl;
        in->cap = nc;
    }
    char *copy = pd_arena_strndup(&p->arena, s, len);
    if (!copy)
        return PD_ENOMEM;
    size_t i = p->n_string;
    p->string_table[i] = copy;
    p->string_len[i] = len;
    p->n_string++;
    if (intern_link(in, p, i)) {
        p->n_string--;
        return PD_ENOMEM;
    }
    return (int64_t)i;
}

const char *pd_profile_guess_type(const pd_profile *p, const char *path)
{
    bool cpu = false, heap = false, contention = false, goroutine = false, threadcreate = false;
    for (size_t i = 0; i < p->n_sample_type; i++) {
        const char *t = pd_profile_str(p, p->sample_type[i].type);
        cpu |= !strcmp(t, "cpu") ||
               (!strcmp(t, "samples") && !strcmp(pd_profile_str(p, p->period_type.type), "cpu"));
        heap |= !strcmp(t, "inuse_space") || !strcmp(t, "inuse_objects") ||
                !strcmp(t, "alloc_space") || !strcmp(t, "alloc_objects");
        contention |= !strcmp(t, "contentions") || !strcmp(t, "delay");
        goroutine |= !strcmp(t, "goroutine");
        threadcreate |= !strcmp(t, "threadcreate");
    }
    if (cpu)
        return "cpu";
    if (heap)
        return "heap";
    if (contention) {
        const char *base = path ? strrchr(path, '/') : NULL;
        base = base ? base + 1 : path ? path : "";
        bool mutex = strstr(base, "mutex") != NULL, block = strstr(base, "block") != NULL;
        if (mutex != block)
            return mutex ? "mutex" : "block";
        return "other";
    }
    if (goroutine)
        return "goroutine";
    if (threadcreate)
        return "threadcreate";
    return "other";
}
