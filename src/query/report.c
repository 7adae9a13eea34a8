/*
 * query/report.c — reports of one profile: top, flame graph, meta.
 *
 * Frames. A sample's stack is its locations, leaf first; a location's lines
 * are its frames, innermost (inlined) first — both as pprof. Walking from the
 * root (outermost) down therefore visits location[n-1].line[m-1] first and
 * location[0].line[0] (the leaf) last. A location without lines is one frame
 * named by its address ("0x4a5b6c"), as is a line whose function has no name.
 *
 * Keys. Frames are aggregated by function *name*, as `go tool pprof` does at
 * its default granularity (functions): each location line is mapped once to a
 * key id (a small integer per distinct name) through a string hash table, so
 * the per-sample work is integer lookups only.
 *
 * top:        flat(key) += v for the leaf frame of each sample;
 *             cum(key)  += v once per sample for each distinct key on its
 *             stack (a per-key "last sample" stamp dedups recursion).
 * flamegraph: a prefix tree of keys from the root down; each node's value is
 *             the sum of the samples whose stack passes through it, "self"
 *             the sum of those ending there. Children live in a hash map
 *             (parent node << 32 | key) -> node, and are sorted by name when
 *             written. Output is iterative (deep stacks cannot blow the C stack).
 *
 * Totals are signed sums (negative values come from diffs), wrapping like
 * pd_profile_totals; percentages are taken of the sum of absolute values, as
 * pprof does, which equals the total for an ordinary profile; a zero
 * denominator gives 0%.
 */
#include "query/query.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include "base/u64map.h"
#include "query/query_int.h"

/* Cap on flame graph nodes (memory ~ 40 bytes each). */
#define MAX_FLAME_NODES (8u * 1024u * 1024u)

typedef struct fkey {
    const char *name; /* borrowed from the profile or from keys.arena */
    size_t name_len;
    /* where the name comes from, of all its frames the least by (file, line,
       mapping, build id): file of its function, line its start_line else the
       frame's line (Go before 1.20 sets no start_line; 0: unknown), mapping
       and build id of the frame's location ("" none) */
    const char *file;
    int64_t line;
    const char *mapping, *build_id;
    int64_t flat, cum;
    int64_t bflat, bcum; /* the base side's part of a diff (pd_report_options.diff) */
    size_t stamp;        /* 1 + index of the last sample that counted cum */
} fkey;

typedef struct keys {
    fkey *v;
    size_t n, cap;
    uint32_t *slots;     /* open addressing: key id + 1, 0 = empty */
    size_t nslots;       /* power of two */
    uint32_t *loc_first; /* per location index: offset into loc_keys */
    uint32_t *loc_count; /* per location index: frames (>= 1) */
    uint32_t *loc_keys;  /* key ids, innermost first */
    pd_arena arena;      /* address names */
} keys;

static void keys_release(keys *k)
{
    free(k->v);
    free(k->slots);
    free(k->loc_first);
    free(k->loc_count);
    free(k->loc_keys);
    pd_arena_release(&k->arena);
    memset(k, 0, sizeof *k);
}

static int keys_grow_slots(keys *k)
{
    size_t ns = k->nslots ? k->nslots * 2 : 1024;
    uint32_t *sl = calloc(ns, sizeof *sl);
    if (!sl)
        return PD_ENOMEM;
    for (size_t i = 0; i < k->n; i++) {
        size_t h = (size_t)XXH3_64bits(k->v[i].name, k->v[i].name_len) & (ns - 1);
        while (sl[h])
            h = (h + 1) & (ns - 1);
        sl[h] = (uint32_t)i + 1;
    }
    free(k->slots);
    k->slots = sl;
    k->nslots = ns;
    return 0;
}

/* Returns the key id of name (adding it), or a negative error. */
static int64_t keys_intern(keys *k, const char *name, size_t len, const char *file, int64_t line,
                           const pd_pprof_mapping *m, const pd_profile *p)
{
    if ((k->n + 1) * 10 >= k->nslots * 7) {
        int rc = keys_grow_slots(k);
        if (rc < 0)
            return rc;
    }
    size_t h = (size_t)XXH3_64bits(name, len) & (k->nslots - 1);
    const char *mf = m ? pd_profile_str(p, m->filename) : "",
               *mb = m ? pd_profile_str(p, m->build_id) : "";
    while (k->slots[h]) {
        fkey *f = &k->v[k->slots[h] - 1];
        if (f->name_len == len && memcmp(f->name, name, len) == 0) {
            /* where it comes from: the least (file, line, mapping, build id)
               of its frames, so that the answer does not depend on the
               order of the profile's locations (a merge reorders them) */
            int c = strcmp(file, f->file);
            if (!c)
                c = line < f->line ? -1 : line > f->line;
            if (!c)
                c = strcmp(mf, f->mapping);
            if (!c)
                c = strcmp(mb, f->build_id);
            if (c < 0) {
                f->file = file;
                f->line = line;
                f->mapping = mf;
                f->build_id = mb;
            }
            return k->slots[h] - 1;
        }
        h = (h + 1) & (k->nslots - 1);
    }
    if (k->n >= UINT32_MAX / 2)
        return PD_ETOOBIG;
    if (k->n == k->cap) {
        size_t nc = k->cap ? k->cap * 2 : 256;
        fkey *nv = realloc(k->v, nc * sizeof *nv);
        if (!nv)
            return PD_ENOMEM;
        k->v = nv;
        k->cap = nc;
    }
    fkey *f = &k->v[k->n];
    memset(f, 0, sizeof *f);
    f->name = name;
    f->name_len = len;
    f->file = file;
    f->line = line;
    f->mapping = mf;
    f->build_id = mb;
    k->slots[h] = (uint32_t)k->n + 1;
    return (int64_t)k->n++;
}

static int64_t intern_address(keys *k, uint64_t addr, const pd_pprof_mapping *m,
                              const pd_profile *p)
{
    char tmp[32];
    int l = snprintf(tmp, sizeof tmp, "0x%" PRIx64, addr);
    char *s = pd_arena_strndup(&k->arena, tmp, (size_t)l);
    if (!s)
        return PD_ENOMEM;
    return keys_intern(k, s, (size_t)l, "", 0, m, p);
}

/* Maps every location's frames to key ids. */
static int keys_build(keys *k, const pd_profile *p)
{
    memset(k, 0, sizeof *k);
    pd_arena_init(&k->arena);
    size_t nframes = 0;
    for (size_t i = 0; i < p->n_location; i++)
        nframes += p->location[i].n_line ? p->location[i].n_line : 1;
    if (nframes >= UINT32_MAX)
        return PD_ETOOBIG;
    size_t nl = p->n_location ? p->n_location : 1;
    k->loc_first = calloc(nl, sizeof *k->loc_first);
    k->loc_count = calloc(nl, sizeof *k->loc_count);
    k->loc_keys = calloc(nframes ? nframes : 1, sizeof *k->loc_keys);
    if (!k->loc_first || !k->loc_count || !k->loc_keys)
        return PD_ENOMEM;
    int rc = keys_grow_slots(k);
    if (rc < 0)
        return rc;
    uint32_t at = 0;
    for (size_t i = 0; i < p->n_location; i++) {
        const pd_pprof_location *loc = &p->location[i];
        const pd_pprof_mapping *m = loc->mapping_id ? pd_profile_mapping(p, loc->mapping_id) : NULL;
        k->loc_first[i] = at;
        if (!loc->n_line) {
            int64_t id = intern_address(k, loc->address, m, p);
            if (id < 0)
                return (int)id;
            k->loc_keys[at++] = (uint32_t)id;
            k->loc_count[i] = 1;
            continue;
        }
        for (size_t j = 0; j < loc->n_line; j++) {
            const pd_pprof_function *fn = pd_profile_function(p, loc->line[j].function_id);
            int64_t id;
            if (fn && fn->name > 0 && fn->name < (int64_t)p->n_string &&
                p->string_len[fn->name] > 0) {
                id = keys_intern(k, p->string_table[fn->name], p->string_len[fn->name],
                                 pd_profile_str(p, fn->filename),
                                 fn->start_line > 0 ? fn->start_line : loc->line[j].line, m, p);
            } else {
                id = intern_address(k, loc->address, m, p);
            }
            if (id < 0)
                return (int)id;
            k->loc_keys[at++] = (uint32_t)id;
        }
        k->loc_count[i] = (uint32_t)loc->n_line;
    }
    return 0;
}

/* Index of a sample's location id in p->location, or -1 when it does not
 * resolve (a validated profile always resolves). */
static ptrdiff_t loc_index(const pd_profile *p, uint64_t id)
{
    const pd_pprof_location *l = pd_profile_location(p, id);
    return l ? l - p->location : -1;
}

static int64_t sample_value(const pd_pprof_sample *s, size_t si)
{
    return si < s->n_value ? s->value[si] : 0;
}

static int put_value_type(pd_buf *out, const pd_profile *p, const pd_pprof_value_type *vt)
{
    int rc = pd_buf_puts(out, "{\"type\":");
    if (!rc)
        rc = pd__query_json_cstr(out, pd_profile_str(p, vt->type));
    if (!rc)
        rc = pd_buf_puts(out, ",\"unit\":");
    if (!rc)
        rc = pd__query_json_cstr(out, pd_profile_str(p, vt->unit));
    if (!rc)
        rc = pd_buf_putc(out, '}');
    return rc;
}

/* Sums wrap (computed unsigned) like pd_profile_totals, so that the totals
 * agree with it even for hostile values, and signed overflow (UB) never
 * happens. Real profiles are far from the int64 range. */
static int64_t wadd(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a + (uint64_t)b);
}

static int64_t wabs(int64_t v)
{
    return v < 0 ? (int64_t)(0 - (uint64_t)v) : v;
}

static double pct(int64_t v, int64_t denom)
{
    return denom ? (double)v / (double)denom * 100.0 : 0.0;
}

/* ---- diff split ---- */

/* True when sample s carries pprof's diff-base mark pprof::base=true. */
static bool is_base_sample(const pd_profile *p, const pd_pprof_sample *s)
{
    for (size_t i = 0; i < s->n_label; i++) {
        const pd_pprof_label *l = &s->label[i];
        if (l->key <= 0 || (size_t)l->key >= p->n_string || l->str <= 0 ||
            (size_t)l->str >= p->n_string)
            continue;
        if (p->string_len[l->key] == 11 && !memcmp(p->string_table[l->key], "pprof::base", 11) &&
            p->string_len[l->str] == 4 && !memcmp(p->string_table[l->str], "true", 4))
            return true;
    }
    return false;
}

bool pd_report_is_diff(const pd_profile *p)
{
    for (size_t i = 0; i < p->n_sample; i++)
        if (is_base_sample(p, &p->sample[i]))
            return true;
    return false;
}

/* The base side's contribution of a sample (its values were negated when
 * the diff was built, so the base amount is -v), 0 for the new side. */
static int64_t base_part(const pd_profile *p, const pd_report_options *o, const pd_pprof_sample *s,
                         int64_t v)
{
    return o->diff && is_base_sample(p, s) ? (int64_t)(0 - (uint64_t)v) : 0;
}

/* ---- top ---- */

static int cmp_rows(const void *a, const void *b)
{
    const fkey *x = *(const fkey *const *)a, *y = *(const fkey *const *)b;
    if (x->flat != y->flat)
        return x->flat > y->flat ? -1 : 1;
    if (x->cum != y->cum)
        return x->cum > y->cum ? -1 : 1;
    size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = memcmp(x->name, y->name, n);
    if (c)
        return c;
    return x->name_len < y->name_len ? -1 : x->name_len > y->name_len;
}

/* pprof's order for diffs (graph.FlatNameOrder): |flat| descending, name,
 * |cum| descending. */
static int cmp_rows_abs(const void *a, const void *b)
{
    const fkey *x = *(const fkey *const *)a, *y = *(const fkey *const *)b;
    uint64_t fx = (uint64_t)wabs(x->flat), fy = (uint64_t)wabs(y->flat);
    if (fx != fy)
        return fx > fy ? -1 : 1;
    size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = memcmp(x->name, y->name, n);
    if (c)
        return c;
    if (x->name_len != y->name_len)
        return x->name_len < y->name_len ? -1 : 1;
    uint64_t cx = (uint64_t)wabs(x->cum), cy = (uint64_t)wabs(y->cum);
    return cx == cy ? 0 : cx > cy ? -1 : 1;
}

/* The order of pd_report_options.sort: the column (signed), then the other
 * column, then the name; NAME by name, then flat descending. */
static int cmp_rows_by(const void *a, const void *b, void *ctx)
{
    const pd_report_options *o = ctx;
    const fkey *x = *(const fkey *const *)a, *y = *(const fkey *const *)b;
    int c = 0;
    size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int byname = memcmp(x->name, y->name, n);
    if (!byname && x->name_len != y->name_len)
        byname = x->name_len < y->name_len ? -1 : 1;
    int64_t p1 = o->sort == PD_TOP_SORT_CUM ? x->cum : x->flat;
    int64_t q1 = o->sort == PD_TOP_SORT_CUM ? y->cum : y->flat;
    int64_t p2 = o->sort == PD_TOP_SORT_CUM ? x->flat : x->cum;
    int64_t q2 = o->sort == PD_TOP_SORT_CUM ? y->flat : y->cum;
    if (o->sort == PD_TOP_SORT_NAME) {
        c = byname;
        if (!c && x->flat != y->flat)
            return x->flat > y->flat ? -1 : 1;
        return o->ascending ? c : -c;
    }
    if (p1 != q1) /* descending by default */
        c = p1 > q1 ? -1 : 1;
    if (c)
        return o->ascending ? -c : c;
    if (p2 != q2)
        return p2 > q2 ? -1 : 1;
    return byname;
}

/* ASCII case-insensitive substring test of the function name. */
static bool name_has(const fkey *f, const char *needle, size_t nl)
{
    if (nl > f->name_len)
        return false;
    for (size_t i = 0; i + nl <= f->name_len; i++) {
        size_t j = 0;
        while (j < nl) {
            unsigned char a = (unsigned char)f->name[i + j], b = (unsigned char)needle[j];
            if (a >= 'A' && a <= 'Z')
                a = (unsigned char)(a - 'A' + 'a');
            if (b >= 'A' && b <= 'Z')
                b = (unsigned char)(b - 'A' + 'a');
            if (a != b)
                break;
            j++;
        }
        if (j == nl)
            return true;
    }
    return false;
}

int pd_report_top(const pd_profile *p, size_t sample_index, size_t max_rows, pd_buf *out)
{
    pd_report_options o = {.sample_index = sample_index, .max_nodes = max_rows};
    return pd_report_top_ex(p, &o, out);
}

int pd_report_top_ex(const pd_profile *p, const pd_report_options *o, pd_buf *out)
{
    const size_t sample_index = o->sample_index;
    if (sample_index >= p->n_sample_type)
        return PD_EINVAL;
    keys k;
    const fkey **rows = NULL;
    size_t start = out->len;
    int rc = keys_build(&k, p);
    if (rc < 0)
        goto out;
    int64_t total = 0, abs_total = 0, base_total = 0, base_abs = 0;
    for (size_t i = 0; i < p->n_sample; i++) {
        const pd_pprof_sample *s = &p->sample[i];
        int64_t v = sample_value(s, sample_index);
        int64_t bv = base_part(p, o, s, v);
        total = wadd(total, v);
        abs_total = wadd(abs_total, wabs(v));
        if (bv) {
            base_total = wadd(base_total, bv);
            base_abs = wadd(base_abs, wabs(v));
        }
        bool leaf = true;
        for (size_t j = 0; j < s->n_location; j++) {
            ptrdiff_t li = loc_index(p, s->location_id[j]);
            if (li < 0)
                continue;
            const uint32_t *fk = &k.loc_keys[k.loc_first[li]];
            for (uint32_t m = 0; m < k.loc_count[li]; m++) {
                fkey *f = &k.v[fk[m]];
                if (leaf) {
                    f->flat = wadd(f->flat, v);
                    f->bflat = wadd(f->bflat, bv);
                    leaf = false;
                }
                if (f->stamp != i + 1) {
                    f->stamp = i + 1;
                    f->cum = wadd(f->cum, v);
                    f->bcum = wadd(f->bcum, bv);
                }
            }
        }
    }
    /* pprof's denominator: |values| of the base side when there is one */
    int64_t denom = o->diff && base_abs > 0 ? base_abs : abs_total;
    size_t nrows = 0, shown;
    if (k.n && !(rows = malloc(k.n * sizeof *rows))) {
        rc = PD_ENOMEM;
        goto out;
    }
    size_t fl = o->filter ? strlen(o->filter) : 0;
    for (size_t i = 0; i < k.n; i++)
        if ((k.v[i].flat || k.v[i].cum || k.v[i].bflat || k.v[i].bcum) &&
            (!fl || name_has(&k.v[i], o->filter, fl)))
            rows[nrows++] = &k.v[i];
    if (nrows > 1 && o->sort != PD_TOP_SORT_DEFAULT)
        qsort_r(rows, nrows, sizeof *rows, cmp_rows_by, (void *)o);
    else if (nrows > 1)
        qsort(rows, nrows, sizeof *rows, o->diff ? cmp_rows_abs : cmp_rows);
    shown = o->max_nodes && nrows > o->max_nodes ? o->max_nodes : nrows;
    int64_t cut_flat = 0;
    for (size_t r = shown; r < nrows; r++)
        cut_flat = wadd(cut_flat, rows[r]->flat);

    rc = pd_buf_puts(out, "{\"sample_type\":");
    if (!rc)
        rc = put_value_type(out, p, &p->sample_type[sample_index]);
    if (!rc)
        rc = pd_buf_printf(out, ",\"total\":%" PRId64, total);
    if (!rc && o->diff)
        rc = pd_buf_printf(out, ",\"base_total\":%" PRId64 ",\"new_total\":%" PRId64, base_total,
                           wadd(total, base_total));
    if (!rc) {
        static const char *const sorts[] = {"default", "flat", "cum", "name"};
        rc = pd_buf_printf(out, ",\"sort\":\"%s\",\"order\":\"%s\",\"filter\":",
                           sorts[o->sort <= PD_TOP_SORT_NAME ? o->sort : 0],
                           o->ascending && o->sort != PD_TOP_SORT_DEFAULT ? "asc" : "desc");
    }
    if (!rc)
        rc = pd__query_json_cstr(out, o->filter ? o->filter : "");
    if (!rc)
        rc = pd_buf_printf(
            out, ",\"rows_total\":%zu,\"rows_cut\":%zu,\"cut_flat\":%" PRId64 ",\"rows\":[", nrows,
            nrows - shown, cut_flat);
    for (size_t r = 0; r < shown && !rc; r++) {
        const fkey *f = rows[r];
        rc = pd_buf_puts(out, r ? ",{\"function\":" : "{\"function\":");
        if (!rc)
            rc = pd__query_json_str(out, f->name, f->name_len);
        if (!rc)
            rc = pd_buf_puts(out, ",\"file\":");
        if (!rc)
            rc = pd__query_json_cstr(out, f->file);
        if (!rc)
            rc = pd_buf_printf(out, ",\"flat\":%" PRId64 ",\"flat_pct\":", f->flat);
        if (!rc)
            rc = pd__query_json_double(out, pct(f->flat, denom));
        if (!rc)
            rc = pd_buf_printf(out, ",\"cum\":%" PRId64 ",\"cum_pct\":", f->cum);
        if (!rc)
            rc = pd__query_json_double(out, pct(f->cum, denom));
        if (!rc && o->diff)
            rc = pd_buf_printf(out,
                               ",\"base_flat\":%" PRId64 ",\"new_flat\":%" PRId64
                               ",\"base_cum\":%" PRId64 ",\"new_cum\":%" PRId64,
                               f->bflat, wadd(f->flat, f->bflat), f->bcum, wadd(f->cum, f->bcum));
        if (!rc)
            rc = pd_buf_putc(out, '}');
    }
    if (!rc)
        rc = pd_buf_puts(out, "]}");
out:
    if (rc < 0)
        pd__query_buf_truncate(out, start);
    free(rows);
    keys_release(&k);
    return rc;
}

/* ---- call tree (flame graph, folded) ---- */

typedef struct fnode {
    uint32_t key; /* UINT32_MAX for the root */
    uint32_t parent;
    int64_t value, self;   /* all samples (the delta for a diff) */
    int64_t bvalue, bself; /* the base side of a diff */
} fnode;

typedef struct child {
    const fkey *key;
    uint32_t node;
} child;

static int cmp_child(const void *a, const void *b)
{
    const fkey *x = ((const child *)a)->key, *y = ((const child *)b)->key;
    size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = memcmp(x->name, y->name, n);
    if (c)
        return c;
    return x->name_len < y->name_len ? -1 : x->name_len > y->name_len;
}

/* A prefix tree of frames from the root down; children of node i are
 * ch[first[i] .. first[i] + count[i]), sorted by name. */
typedef struct tree {
    keys k;
    fnode *nodes;
    size_t nn;
    uint32_t *first, *count;
    child *ch;
} tree;

static void tree_release(tree *t)
{
    free(t->ch);
    free(t->count);
    free(t->first);
    free(t->nodes);
    keys_release(&t->k);
    memset(t, 0, sizeof *t);
}

static int tree_build(tree *t, const pd_profile *p, const pd_report_options *o)
{
    const size_t sample_index = o->sample_index;
    memset(t, 0, sizeof *t);
    size_t ncap = 1024, nn = 0;
    uint32_t *fill = NULL;
    pd_u64map kids;
    pd_u64map_init(&kids);
    int rc = keys_build(&t->k, p);
    if (rc < 0)
        goto out;
    if (!(t->nodes = malloc(ncap * sizeof *t->nodes))) {
        rc = PD_ENOMEM;
        goto out;
    }
    fnode *nodes = t->nodes;
    nodes[0] = (fnode){.key = UINT32_MAX, .parent = UINT32_MAX};
    nn = 1;
    for (size_t i = 0; i < p->n_sample; i++) {
        const pd_pprof_sample *s = &p->sample[i];
        int64_t v = sample_value(s, sample_index);
        int64_t bv = base_part(p, o, s, v);
        uint32_t cur = 0;
        nodes[0].value = wadd(nodes[0].value, v);
        nodes[0].bvalue = wadd(nodes[0].bvalue, bv);
        for (size_t j = s->n_location; j-- > 0;) {
            ptrdiff_t li = loc_index(p, s->location_id[j]);
            if (li < 0)
                continue;
            const uint32_t *fk = &t->k.loc_keys[t->k.loc_first[li]];
            for (uint32_t m = t->k.loc_count[li]; m-- > 0;) {
                uint64_t hk = ((uint64_t)cur << 32) | fk[m], got;
                if (pd_u64map_get(&kids, hk, &got)) {
                    cur = (uint32_t)got;
                } else {
                    if (nn >= MAX_FLAME_NODES) {
                        rc = PD_ETOOBIG;
                        goto out;
                    }
                    if (nn == ncap) {
                        fnode *nv = realloc(nodes, ncap * 2 * sizeof *nv);
                        if (!nv) {
                            rc = PD_ENOMEM;
                            goto out;
                        }
                        t->nodes = nodes = nv;
                        ncap *= 2;
                    }
                    nodes[nn] = (fnode){.key = fk[m], .parent = cur};
                    if ((rc = pd_u64map_put(&kids, hk, nn)) < 0)
                        goto out;
                    cur = (uint32_t)nn++;
                }
                nodes[cur].value = wadd(nodes[cur].value, v);
                nodes[cur].bvalue = wadd(nodes[cur].bvalue, bv);
            }
        }
        nodes[cur].self = wadd(nodes[cur].self, v);
        nodes[cur].bself = wadd(nodes[cur].bself, bv);
    }
    t->nn = nn;
    /* Children of each node, contiguous (CSR), sorted by name. */
    t->first = calloc(nn + 1, sizeof *t->first);
    t->count = calloc(nn, sizeof *t->count);
    fill = calloc(nn, sizeof *fill);
    t->ch = malloc(nn * sizeof *t->ch);
    if (!t->first || !t->count || !fill || !t->ch) {
        rc = PD_ENOMEM;
        goto out;
    }
    for (size_t i = 1; i < nn; i++)
        t->count[nodes[i].parent]++;
    for (size_t i = 0; i < nn; i++)
        t->first[i + 1] = t->first[i] + t->count[i];
    for (size_t i = 1; i < nn; i++) {
        uint32_t par = nodes[i].parent;
        t->ch[t->first[par] + fill[par]++] =
            (child){.key = &t->k.v[nodes[i].key], .node = (uint32_t)i};
    }
    for (size_t i = 0; i < nn; i++)
        if (t->count[i] > 1)
            qsort(t->ch + t->first[i], t->count[i], sizeof *t->ch, cmp_child);
out:
    free(fill);
    pd_u64map_release(&kids);
    if (rc < 0)
        tree_release(t);
    return rc;
}

/* Marks the nodes a flame graph capped at max_nodes (besides the root)
 * keeps: greedily the largest |value| among the children of kept nodes, so
 * every kept node's parent is kept. kept[0] (the root) is always set. */
static int tree_keep(const tree *t, size_t max_nodes, bool *kept)
{
    uint32_t *heap = malloc((t->nn + 1) * sizeof *heap);
    if (!heap)
        return PD_ENOMEM;
    size_t hn = 0, nkept = 0;
    const fnode *nd = t->nodes;
#define HV(i) ((uint64_t)wabs(nd[heap[i]].value))
    kept[0] = true;
    uint32_t cur = 0;
    for (;;) {
        for (uint32_t c = 0; c < t->count[cur]; c++) { /* push the children of cur */
            size_t i = hn++;
            heap[i] = t->ch[t->first[cur] + c].node;
            while (i > 0 && HV((i - 1) / 2) < HV(i)) {
                uint32_t tmp = heap[i];
                heap[i] = heap[(i - 1) / 2];
                heap[(i - 1) / 2] = tmp;
                i = (i - 1) / 2;
            }
        }
        if (!hn || nkept >= max_nodes)
            break;
        cur = heap[0]; /* pop the largest */
        heap[0] = heap[--hn];
        for (size_t i = 0;;) {
            size_t l = 2 * i + 1, r = l + 1, m = i;
            if (l < hn && HV(l) > HV(m))
                m = l;
            if (r < hn && HV(r) > HV(m))
                m = r;
            if (m == i)
                break;
            uint32_t tmp = heap[i];
            heap[i] = heap[m];
            heap[m] = tmp;
            i = m;
        }
        kept[cur] = true;
        nkept++;
    }
#undef HV
    free(heap);
    return 0;
}

/* ---- flame graph ---- */

static int put_node_open(pd_buf *out, const tree *t, const pd_report_options *o, uint32_t i,
                         const bool *kept, size_t nkept)
{
    const fnode *nd = &t->nodes[i];
    int rc = pd_buf_puts(out, "{\"name\":");
    if (!rc) {
        if (nd->key == UINT32_MAX)
            rc = pd_buf_puts(out, "\"root\"");
        else
            rc = pd__query_json_str(out, t->k.v[nd->key].name, t->k.v[nd->key].name_len);
    }
    if (!rc)
        rc = pd_buf_printf(out, ",\"value\":%" PRId64 ",\"self\":%" PRId64, nd->value, nd->self);
    if (!rc && o->diff)
        rc = pd_buf_printf(out,
                           ",\"base\":%" PRId64 ",\"new\":%" PRId64 ",\"base_self\":%" PRId64
                           ",\"new_self\":%" PRId64,
                           nd->bvalue, wadd(nd->value, nd->bvalue), nd->bself,
                           wadd(nd->self, nd->bself));
    if (!rc && kept) {
        int64_t cut = 0, bcut = 0;
        size_t ncut = 0;
        for (uint32_t c = 0; c < t->count[i]; c++) {
            const fnode *cn = &t->nodes[t->ch[t->first[i] + c].node];
            if (!kept[t->ch[t->first[i] + c].node]) {
                cut = wadd(cut, cn->value);
                bcut = wadd(bcut, cn->bvalue);
                ncut++;
            }
        }
        if (ncut)
            rc = pd_buf_printf(out, ",\"cut\":%" PRId64 ",\"cut_children\":%zu", cut, ncut);
        if (!rc && ncut && o->diff)
            rc = pd_buf_printf(out, ",\"base_cut\":%" PRId64, bcut);
    }
    if (!rc && i == 0) /* the root says how many nodes are shown of how many */
        rc = pd_buf_printf(out, ",\"nodes\":%zu,\"nodes_total\":%zu", nkept, t->nn - 1);
    if (!rc)
        rc = pd_buf_puts(out, ",\"children\":[");
    return rc;
}

static __thread const keys *sort_keys;

static int cmp_key_name(const void *a, const void *b)
{
    const fkey *x = &sort_keys->v[*(const uint32_t *)a], *y = &sort_keys->v[*(const uint32_t *)b];
    size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = memcmp(x->name, y->name, n);
    return c ? c : x->name_len < y->name_len ? -1 : x->name_len > y->name_len;
}

/* The root's "functions": for each function name drawn (kept nodes), where
 * it comes from — {"file", "line" (the function's start line, else the line
 * of the first call site seen), "mapping", "build_id"},
 * members left out when unknown, names with nothing known left out — so a
 * tooltip can say file:line and binary without a field per node. */
static int put_functions(pd_buf *out, const tree *t, const bool *kept)
{
    bool *seen = calloc(t->k.n ? t->k.n : 1, sizeof *seen);
    if (!seen)
        return PD_ENOMEM;
    for (size_t i = 1; i < t->nn; i++)
        if (!kept || kept[i])
            seen[t->nodes[i].key] = true;
    /* by name: the order of first appearance depends on the locations' */
    uint32_t *ord = malloc((t->k.n ? t->k.n : 1) * sizeof *ord);
    if (!ord) {
        free(seen);
        return PD_ENOMEM;
    }
    size_t n_ord = 0;
    for (size_t i = 0; i < t->k.n; i++)
        if (seen[i])
            ord[n_ord++] = (uint32_t)i;
    sort_keys = &t->k;
    qsort(ord, n_ord, sizeof *ord, cmp_key_name);
    int rc = pd_buf_puts(out, ",\"functions\":{");
    bool any = false;
    for (size_t o = 0; o < n_ord && !rc; o++) {
        size_t i = ord[o];
        const fkey *f = &t->k.v[i];
        bool has_file = f->file && *f->file, has_map = f->mapping && *f->mapping,
             has_bid = f->build_id && *f->build_id;
        if (!has_file && !has_map && !has_bid)
            continue;
        if (any)
            rc = pd_buf_putc(out, ',');
        any = true;
        bool first = true;
        if (!rc)
            rc = pd__query_json_str(out, f->name, f->name_len);
        if (!rc)
            rc = pd_buf_puts(out, ":{");
        if (!rc && has_file) {
            rc = pd_buf_puts(out, "\"file\":");
            if (!rc)
                rc = pd__query_json_cstr(out, f->file);
            if (!rc && f->line > 0)
                rc = pd_buf_printf(out, ",\"line\":%" PRId64, f->line);
            first = false;
        }
        if (!rc && has_map) {
            rc = pd_buf_puts(out, first ? "\"mapping\":" : ",\"mapping\":");
            if (!rc)
                rc = pd__query_json_cstr(out, f->mapping);
            first = false;
        }
        if (!rc && has_bid) {
            rc = pd_buf_puts(out, first ? "\"build_id\":" : ",\"build_id\":");
            if (!rc)
                rc = pd__query_json_cstr(out, f->build_id);
        }
        if (!rc)
            rc = pd_buf_putc(out, '}');
    }
    if (!rc)
        rc = pd_buf_putc(out, '}');
    free(ord);
    free(seen);
    return rc;
}

int pd_report_flamegraph(const pd_profile *p, size_t sample_index, pd_buf *out)
{
    pd_report_options o = {.sample_index = sample_index};
    return pd_report_flamegraph_ex(p, &o, out);
}

int pd_report_flamegraph_ex(const pd_profile *p, const pd_report_options *o, pd_buf *out)
{
    if (o->sample_index >= p->n_sample_type)
        return PD_EINVAL;
    tree t;
    size_t start = out->len;
    bool *kept = NULL;
    struct frame {
        uint32_t node, next;
        bool any;
    } *stack = NULL;
    int rc = tree_build(&t, p, o);
    if (rc < 0)
        return rc;
    size_t nkept = t.nn - 1;
    if (o->max_nodes && t.nn - 1 > o->max_nodes) {
        if (!(kept = calloc(t.nn, sizeof *kept)) || (rc = tree_keep(&t, o->max_nodes, kept)) < 0) {
            rc = rc < 0 ? rc : PD_ENOMEM;
            goto out;
        }
        nkept = 0;
        for (size_t i = 1; i < t.nn; i++)
            nkept += kept[i];
    }
    if (!(stack = malloc(t.nn * sizeof *stack))) {
        rc = PD_ENOMEM;
        goto out;
    }
    size_t depth = 0;
    rc = put_node_open(out, &t, o, 0, kept, nkept);
    stack[depth++] = (struct frame){0, 0, false};
    while (depth && !rc) {
        struct frame *top = &stack[depth - 1];
        if (top->next < t.count[top->node]) {
            uint32_t c = t.ch[t.first[top->node] + top->next++].node;
            if (kept && !kept[c])
                continue;
            if (top->any)
                rc = pd_buf_putc(out, ',');
            top->any = true;
            if (!rc)
                rc = put_node_open(out, &t, o, c, kept, nkept);
            stack[depth++] = (struct frame){c, 0, false};
        } else {
            rc = pd_buf_putc(out, ']');
            if (!rc && depth == 1) /* the root: the functions drawn */
                rc = put_functions(out, &t, kept);
            if (!rc)
                rc = pd_buf_putc(out, '}');
            depth--;
        }
    }
out:
    if (rc < 0)
        pd__query_buf_truncate(out, start);
    free(stack);
    free(kept);
    tree_release(&t);
    return rc;
}

/* ---- folded ---- */

int pd_report_folded(const pd_profile *p, const pd_report_options *o, pd_buf *out)
{
    if (o->sample_index >= p->n_sample_type)
        return PD_EINVAL;
    tree t;
    size_t start = out->len;
    struct frame {
        uint32_t node, next;
    } *stack = NULL;
    int rc = tree_build(&t, p, o);
    if (rc < 0)
        return rc;
    if (!(stack = malloc(t.nn * sizeof *stack))) {
        rc = PD_ENOMEM;
        goto out;
    }
    size_t depth = 0;
    stack[depth++] = (struct frame){0, 0};
    while (depth && !rc) {
        struct frame *top = &stack[depth - 1];
        if (top->next >= t.count[top->node]) {
            depth--;
            continue;
        }
        uint32_t c = t.ch[t.first[top->node] + top->next++].node;
        stack[depth++] = (struct frame){c, 0};
        const fnode *nd = &t.nodes[c];
        int64_t bself = nd->bself, nself = wadd(nd->self, nd->bself);
        if (o->diff ? (bself == 0 && nself == 0) : nd->self == 0)
            continue;
        for (size_t d = 1; d < depth && !rc; d++) {
            const fkey *f = &t.k.v[t.nodes[stack[d].node].key];
            if (d > 1)
                rc = pd_buf_putc(out, ';');
            /* the format's separators cannot appear inside a frame */
            for (size_t i = 0; i < f->name_len && !rc; i++) {
                char ch = f->name[i];
                rc = pd_buf_putc(out, ch == ';' ? ':' : ch == '\n' || ch == '\r' ? ' ' : ch);
            }
        }
        if (!rc)
            rc = o->diff ? pd_buf_printf(out, " %" PRId64 " %" PRId64 "\n", bself, nself)
                         : pd_buf_printf(out, " %" PRId64 "\n", nd->self);
    }
out:
    if (rc < 0)
        pd__query_buf_truncate(out, start);
    free(stack);
    tree_release(&t);
    return rc;
}

/* ---- meta ---- */

int pd_report_meta(const pd_profile *p, pd_buf *out)
{
    size_t start = out->len;
    int64_t *totals = NULL;
    int rc = pd_buf_puts(out, "{\"sample_types\":[");
    for (size_t i = 0; i < p->n_sample_type && !rc; i++) {
        if (i)
            rc = pd_buf_putc(out, ',');
        if (!rc)
            rc = put_value_type(out, p, &p->sample_type[i]);
    }
    if (!rc)
        rc = pd_buf_puts(out, "],\"default_sample_type\":");
    if (!rc)
        rc = pd__query_json_cstr(out, pd_profile_str(p, p->default_sample_type));
    if (!rc)
        rc = pd_buf_puts(out, ",\"period_type\":");
    if (!rc)
        rc = put_value_type(out, p, &p->period_type);
    if (!rc)
        rc = pd_buf_printf(out,
                           ",\"period\":%" PRId64 ",\"time_nanos\":%" PRId64
                           ",\"duration_nanos\":%" PRId64 ",\"samples\":%zu,\"locations\":%zu"
                           ",\"functions\":%zu,\"mappings\":%zu,\"comments\":[",
                           p->period, p->time_nanos, p->duration_nanos, p->n_sample, p->n_location,
                           p->n_function, p->n_mapping);
    for (size_t i = 0; i < p->n_comment && !rc; i++) {
        if (i)
            rc = pd_buf_putc(out, ',');
        if (!rc)
            rc = pd__query_json_cstr(out, pd_profile_str(p, p->comment[i]));
    }
    if (!rc)
        rc = pd_buf_puts(out, "],\"totals\":[");
    if (!rc && p->n_sample_type) {
        if (!(totals = calloc(p->n_sample_type, sizeof *totals)))
            rc = PD_ENOMEM;
        else
            pd_profile_totals(p, totals);
    }
    for (size_t i = 0; i < p->n_sample_type && !rc; i++)
        rc = pd_buf_printf(out, i ? ",%" PRId64 : "%" PRId64, totals[i]);
    if (!rc)
        rc = pd_buf_puts(out, "]}");
    free(totals);
    if (rc < 0)
        pd__query_buf_truncate(out, start);
    return rc;
}

/* ---- call graph (DOT) ---- */

typedef struct dedge {
    uint32_t from, to;
    int64_t value;
    size_t stamp;
} dedge;

static int cmp_cum_abs(const void *a, const void *b)
{
    const fkey *x = *(const fkey *const *)a, *y = *(const fkey *const *)b;
    uint64_t cx = (uint64_t)wabs(x->cum), cy = (uint64_t)wabs(y->cum);
    if (cx != cy)
        return cx > cy ? -1 : 1;
    size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = memcmp(x->name, y->name, n);
    if (c)
        return c;
    return x->name_len < y->name_len ? -1 : x->name_len > y->name_len;
}

/* A DOT string literal body: quotes and backslashes escaped, control
 * characters dropped. */
static int put_dot_str(pd_buf *out, const char *s, size_t len)
{
    int rc = 0;
    for (size_t i = 0; i < len && !rc; i++) {
        char c = s[i];
        if ((unsigned char)c < 0x20)
            continue;
        if (c == '"' || c == '\\')
            rc = pd_buf_putc(out, '\\');
        if (!rc)
            rc = pd_buf_putc(out, c);
    }
    return rc;
}

int pd_report_dot(const pd_profile *p, const pd_report_options *o, pd_buf *out)
{
    const size_t si = o->sample_index;
    if (si >= p->n_sample_type)
        return PD_EINVAL;
    keys k;
    dedge *edges = NULL;
    size_t ne = 0, ecap = 0, start = out->len;
    const fkey **order = NULL;
    int64_t *rank = NULL;
    pd_u64map emap;
    pd_u64map_init(&emap);
    int rc = keys_build(&k, p);
    if (rc < 0)
        goto out;
    int64_t abs_total = 0, base_abs = 0, total = 0;
    for (size_t i = 0; i < p->n_sample; i++) {
        const pd_pprof_sample *s = &p->sample[i];
        int64_t v = sample_value(s, si);
        total = wadd(total, v);
        abs_total = wadd(abs_total, wabs(v));
        if (base_part(p, o, s, v))
            base_abs = wadd(base_abs, wabs(v));
        bool leaf = true;
        uint32_t callee = UINT32_MAX;
        for (size_t j = 0; j < s->n_location; j++) {
            ptrdiff_t li = loc_index(p, s->location_id[j]);
            if (li < 0)
                continue;
            const uint32_t *fk = &k.loc_keys[k.loc_first[li]];
            for (uint32_t m = 0; m < k.loc_count[li]; m++) {
                fkey *f = &k.v[fk[m]];
                if (leaf) {
                    f->flat = wadd(f->flat, v);
                    leaf = false;
                }
                if (f->stamp != i + 1) {
                    f->stamp = i + 1;
                    f->cum = wadd(f->cum, v);
                }
                if (callee != UINT32_MAX && callee != fk[m]) {
                    uint64_t ek = ((uint64_t)fk[m] << 32) | callee, ei;
                    if (!pd_u64map_get(&emap, ek, &ei)) {
                        if (ne == ecap) {
                            size_t nc = ecap ? ecap * 2 : 256;
                            dedge *nv = realloc(edges, nc * sizeof *nv);
                            if (!nv) {
                                rc = PD_ENOMEM;
                                goto out;
                            }
                            edges = nv;
                            ecap = nc;
                        }
                        edges[ne] = (dedge){fk[m], callee, 0, 0};
                        ei = ne++;
                        if ((rc = pd_u64map_put(&emap, ek, ei)) < 0)
                            goto out;
                    }
                    if (edges[ei].stamp != i + 1) {
                        edges[ei].stamp = i + 1;
                        edges[ei].value = wadd(edges[ei].value, v);
                    }
                }
                callee = fk[m];
            }
        }
    }
    int64_t denom = o->diff && base_abs > 0 ? base_abs : abs_total;
    size_t nn = 0;
    order = malloc((k.n + 1) * sizeof *order);
    rank = malloc((k.n + 1) * sizeof *rank);
    if (!order || !rank) {
        rc = PD_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < k.n; i++)
        if (k.v[i].flat || k.v[i].cum)
            order[nn++] = &k.v[i];
    if (nn > 1)
        qsort(order, nn, sizeof *order, cmp_cum_abs);
    size_t shown = o->max_nodes && nn > o->max_nodes ? o->max_nodes : nn;
    for (size_t i = 0; i < k.n; i++)
        rank[i] = -1;
    uint64_t maxflat = 1;
    for (size_t i = 0; i < shown; i++) {
        rank[order[i] - k.v] = (int64_t)i;
        if ((uint64_t)wabs(order[i]->flat) > maxflat)
            maxflat = (uint64_t)wabs(order[i]->flat);
    }
    rc = pd_buf_puts(out, "digraph \"profd\" {\nnode [style=filled fillcolor=\"#f8f8f8\" "
                          "fontname=\"sans-serif\"]\nedge [fontname=\"sans-serif\"]\n"
                          "subgraph cluster_L { \"legend\" [shape=box fontsize=16 label=\"");
    if (!rc) {
        const char *t = pd_profile_str(p, p->sample_type[si].type);
        const char *u = pd_profile_str(p, p->sample_type[si].unit);
        rc = put_dot_str(out, t, strlen(t));
        if (!rc)
            rc = pd_buf_puts(out, " (");
        if (!rc)
            rc = put_dot_str(out, u, strlen(u));
        if (!rc)
            rc = pd_buf_printf(out, ")%s\\lTotal: %" PRId64 "\\lShowing %zu of %zu nodes\\l\"] }\n",
                               o->diff ? " diff (new - base)" : "", total, shown, nn);
    }
    for (size_t i = 0; i < shown && !rc; i++) {
        const fkey *f = order[i];
        double fs = 10.0 + 30.0 * (double)(uint64_t)wabs(f->flat) / (double)maxflat;
        const char *color = !o->diff     ? "#f8f8f8"
                            : f->cum > 0 ? "#f4c7c3"
                            : f->cum < 0 ? "#c8e6c9"
                                         : "#f8f8f8";
        rc = pd_buf_printf(out, "N%zu [shape=box fontsize=%.0f fillcolor=\"%s\" label=\"", i, fs,
                           color);
        if (!rc)
            rc = put_dot_str(out, f->name, f->name_len);
        if (!rc)
            rc =
                pd_buf_printf(out, "\\n%" PRId64 " (%.2f%%)\\nof %" PRId64 " (%.2f%%)\" tooltip=\"",
                              f->flat, pct(f->flat, denom), f->cum, pct(f->cum, denom));
        if (!rc)
            rc = put_dot_str(out, f->name, f->name_len);
        if (!rc)
            rc = pd_buf_puts(out, "\"]\n");
    }
    uint64_t maxedge = 1;
    for (size_t e = 0; e < ne; e++)
        if ((uint64_t)wabs(edges[e].value) > maxedge)
            maxedge = (uint64_t)wabs(edges[e].value);
    for (size_t e = 0; e < ne && !rc; e++) {
        int64_t a = rank[edges[e].from], b = rank[edges[e].to];
        if (a < 0 || b < 0 || !edges[e].value)
            continue;
        double w = 1.0 + 4.0 * (double)(uint64_t)wabs(edges[e].value) / (double)maxedge;
        rc = pd_buf_printf(out,
                           "N%" PRId64 " -> N%" PRId64 " [label=\" %" PRId64
                           "\" penwidth=%.1f weight=%.0f]\n",
                           a, b, edges[e].value, w, w * 10);
    }
    if (!rc)
        rc = pd_buf_puts(out, "}\n");
out:
    if (rc < 0)
        pd__query_buf_truncate(out, start);
    free(order);
    free(rank);
    free(edges);
    pd_u64map_release(&emap);
    keys_release(&k);
    return rc;
}
