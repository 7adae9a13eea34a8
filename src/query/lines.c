/*
 * query/lines.c — the cost of one function per source line (the source
 * view, issue 31 item 7; contract in query.h, pd_query_function_lines).
 *
 * A frame is one Line of a Location (inlined frames each count, innermost
 * first, as pprof). A frame "of the function" is one whose Function's name
 * equals the name asked for; it is attributed to (its Function's file,
 * its Line.line). For each sample, with v its value of the sample type:
 *   self  += v on the leaf frame's (file, line) when the leaf frame is the
 *            function's (first Line of the first Location);
 *   total += v once per distinct (file, line) of the function's frames in
 *            the stack (recursion counts once, as pprof's cum);
 * and the file's total once per sample in which the file appears. Entries
 * are kept in one array, found through a u64map keyed by file << 40 | line;
 * a stamp (the sample's index + 1) per entry and per file makes the "once
 * per sample" rule cost nothing extra.
 */
#include <stdlib.h>
#include <string.h>

#include "base/u64map.h"
#include "query/query.h"

#define MAX_LINE ((int64_t)1 << 39)

typedef struct ent {
    uint32_t file;
    int64_t line;
    int64_t self, total;
    size_t stamp;
} ent;

typedef struct fileacc {
    int64_t str; /* string index of the file name */
    int64_t self, total;
    size_t stamp;
} fileacc;

typedef struct mapacc {
    uint32_t file;
    uint64_t mapping_id;
    int64_t total;
} mapacc;

void pd_function_lines_release(pd_function_lines *f)
{
    if (!f)
        return;
    free(f->file);
    free(f->lines);
    for (size_t i = 0; i < f->n_files; i++)
        free(f->files[i]);
    free(f->files);
    for (size_t i = 0; i < f->n_build_ids; i++)
        free(f->build_ids[i]);
    free(f->build_ids);
    memset(f, 0, sizeof *f);
}

static int cmp_line(const void *a, const void *b)
{
    const pd_line_cost *x = a, *y = b;
    return x->line < y->line ? -1 : x->line > y->line;
}

static int cmp_map(const void *a, const void *b)
{
    const mapacc *x = a, *y = b;
    return x->total > y->total ? -1 : x->total < y->total;
}

typedef struct ctx {
    const pd_profile *p;
    pd_u64map fn_file; /* function id -> files index + 1 */
    fileacc *files;
    size_t n_files;
    ent *ents;
    size_t n_ents, cap_ents;
    pd_u64map by_key; /* file << 40 | line -> ents index */
    mapacc *maps;
    size_t n_maps, cap_maps;
} ctx;

static int entry_of(ctx *c, uint32_t file, int64_t line, ent **out)
{
    uint64_t key = (uint64_t)file << 40 | (uint64_t)line, idx;
    if (pd_u64map_get(&c->by_key, key, &idx)) {
        *out = &c->ents[idx];
        return 0;
    }
    if (c->n_ents == c->cap_ents) {
        size_t nc = c->cap_ents ? c->cap_ents * 2 : 64;
        ent *nv = realloc(c->ents, nc * sizeof *nv);
        if (!nv)
            return PD_ENOMEM;
        c->ents = nv;
        c->cap_ents = nc;
    }
    if (pd_u64map_put(&c->by_key, key, c->n_ents) < 0)
        return PD_ENOMEM;
    ent *e = &c->ents[c->n_ents++];
    *e = (ent){.file = file, .line = line};
    *out = e;
    return 0;
}

static int add_map(ctx *c, uint32_t file, uint64_t mapping_id, int64_t v)
{
    for (size_t i = 0; i < c->n_maps; i++)
        if (c->maps[i].file == file && c->maps[i].mapping_id == mapping_id) {
            c->maps[i].total += v;
            return 0;
        }
    if (c->n_maps == c->cap_maps) {
        size_t nc = c->cap_maps ? c->cap_maps * 2 : 8;
        mapacc *nv = realloc(c->maps, nc * sizeof *nv);
        if (!nv)
            return PD_ENOMEM;
        c->maps = nv;
        c->cap_maps = nc;
    }
    c->maps[c->n_maps++] = (mapacc){file, mapping_id, v};
    return 0;
}

/* Adds sample s (its index si_ and value v) to the sums. */
static int add_sample(ctx *c, const pd_pprof_sample *s, size_t stamp, int64_t v)
{
    const pd_profile *p = c->p;
    int rc;
    for (size_t i = 0; i < s->n_location; i++) {
        const pd_pprof_location *l = pd_profile_location(p, s->location_id[i]);
        if (!l)
            continue;
        for (size_t k = 0; k < l->n_line; k++) {
            uint64_t f1;
            if (!pd_u64map_get(&c->fn_file, l->line[k].function_id, &f1))
                continue;
            uint32_t fi = (uint32_t)(f1 - 1);
            int64_t line = l->line[k].line;
            if (line < 0 || line >= MAX_LINE)
                line = 0;
            ent *e;
            if ((rc = entry_of(c, fi, line, &e)) < 0)
                return rc;
            if (i == 0 && k == 0) {
                e->self += v;
                c->files[fi].self += v;
            }
            if (e->stamp != stamp) {
                e->stamp = stamp;
                e->total += v;
            }
            if (c->files[fi].stamp != stamp) {
                c->files[fi].stamp = stamp;
                c->files[fi].total += v;
            }
            if (l->mapping_id && (rc = add_map(c, fi, l->mapping_id, v)) < 0)
                return rc;
        }
    }
    return 0;
}

int pd_query_function_lines(const pd_profile *p, size_t sample_index, const char *function,
                            const char *file, pd_function_lines *out, pd_err *err)
{
    memset(out, 0, sizeof *out);
    if (sample_index >= p->n_sample_type)
        return pd_err_set(err, PD_EINVAL, "sample type %zu: the profile has %zu", sample_index,
                          p->n_sample_type);
    ctx c = {.p = p};
    pd_u64map_init(&c.fn_file);
    pd_u64map_init(&c.by_key);
    int rc = 0;
    size_t want = strlen(function);
    c.files = calloc(p->n_function ? p->n_function : 1, sizeof *c.files);
    if (!c.files) {
        rc = PD_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < p->n_function; i++) {
        const pd_pprof_function *fn = &p->function[i];
        if (fn->name <= 0 || fn->name >= (int64_t)p->n_string || p->string_len[fn->name] != want ||
            memcmp(p->string_table[fn->name], function, want) != 0)
            continue;
        const char *fname = pd_profile_str(p, fn->filename);
        size_t fi = 0;
        while (fi < c.n_files && strcmp(pd_profile_str(p, c.files[fi].str), fname) != 0)
            fi++;
        if (fi == c.n_files)
            c.files[c.n_files++].str = fn->filename;
        if ((rc = pd_u64map_put(&c.fn_file, fn->id, fi + 1)) < 0)
            goto out;
    }
    if (!c.n_files) {
        rc =
            pd_err_set(err, PD_ENOTFOUND, "no function named \"%.200s\" in this profile", function);
        goto out;
    }
    for (size_t i = 0; i < p->n_sample; i++) {
        const pd_pprof_sample *s = &p->sample[i];
        int64_t v = sample_index < s->n_value ? s->value[sample_index] : 0;
        if (v && (rc = add_sample(&c, s, i + 1, v)) < 0)
            goto out;
    }
    /* the file: the one asked for, else the one with the largest total */
    size_t chosen = SIZE_MAX;
    for (size_t i = 0; i < c.n_files; i++) {
        const char *n = pd_profile_str(p, c.files[i].str);
        if (file ? strcmp(n, file) == 0
                 : chosen == SIZE_MAX || c.files[i].total > c.files[chosen].total)
            chosen = i;
    }
    if (chosen == SIZE_MAX) {
        rc = pd_err_set(err, PD_ENOTFOUND, "function \"%.200s\" has no frames in file \"%.300s\"",
                        function, file);
        goto out;
    }
    out->file = strdup(pd_profile_str(p, c.files[chosen].str));
    out->files = calloc(c.n_files, sizeof *out->files);
    if (!out->file || !out->files) {
        rc = PD_ENOMEM;
        goto out;
    }
    /* every file, largest total first */
    bool *done = calloc(c.n_files, sizeof *done);
    if (!done) {
        rc = PD_ENOMEM;
        goto out;
    }
    for (size_t k = 0; k < c.n_files; k++) {
        size_t best = SIZE_MAX;
        for (size_t i = 0; i < c.n_files; i++)
            if (!done[i] && (best == SIZE_MAX || c.files[i].total > c.files[best].total))
                best = i;
        done[best] = true;
        if (!(out->files[out->n_files++] = strdup(pd_profile_str(p, c.files[best].str)))) {
            free(done);
            rc = PD_ENOMEM;
            goto out;
        }
    }
    free(done);
    out->self = c.files[chosen].self;
    out->total = c.files[chosen].total;
    out->lines = calloc(c.n_ents ? c.n_ents : 1, sizeof *out->lines);
    if (!out->lines) {
        rc = PD_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < c.n_ents; i++) {
        const ent *e = &c.ents[i];
        if (e->file != chosen || (!e->self && !e->total))
            continue;
        if (e->line == 0) {
            out->no_line_self += e->self;
            out->no_line_total += e->total;
            continue;
        }
        out->lines[out->n_lines++] = (pd_line_cost){e->line, e->self, e->total};
    }
    qsort(out->lines, out->n_lines, sizeof *out->lines, cmp_line);
    /* the build IDs of the file's frames, most value first, each once */
    qsort(c.maps, c.n_maps, sizeof *c.maps, cmp_map);
    out->build_ids = calloc(c.n_maps ? c.n_maps : 1, sizeof *out->build_ids);
    if (!out->build_ids) {
        rc = PD_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < c.n_maps; i++) {
        if (c.maps[i].file != chosen)
            continue;
        const pd_pprof_mapping *m = pd_profile_mapping(p, c.maps[i].mapping_id);
        const char *bid = m ? pd_profile_str(p, m->build_id) : "";
        bool seen = !*bid;
        for (size_t k = 0; k < out->n_build_ids && !seen; k++)
            seen = strcmp(out->build_ids[k], bid) == 0;
        if (seen)
            continue;
        if (!(out->build_ids[out->n_build_ids] = strdup(bid))) {
            rc = PD_ENOMEM;
            goto out;
        }
        out->n_build_ids++;
    }
out:
    if (rc == PD_ENOMEM)
        pd_err_set(err, PD_ENOMEM, "out of memory summing lines");
    if (rc < 0)
        pd_function_lines_release(out);
    pd_u64map_release(&c.fn_file);
    pd_u64map_release(&c.by_key);
    free(c.files);
    free(c.ents);
    free(c.maps);
    return rc;
}
