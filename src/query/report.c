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
    const char *file; /* of the first function seen with this name */
    int64_t flat, cum;
    size_t stamp; /* 1 + index of the last sample that counted cum */
} fkey;

typedef struct keys {
    fkey *v;
    size_t n, cap;
    uint32_t *slots; /* open addressing: key id + 1, 0 = empty */
    size_t nslots;   /* power of two */
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
static int64_t keys_intern(keys *k, const char *name, size_t len, const char *file)
{
    if ((k->n + 1) * 10 >= k->nslots * 7) {
        int rc = keys_grow_slots(k);
        if (rc < 0)
            return rc;
    }
    size_t h = (size_t)XXH3_64bits(name, len) & (k->nslots - 1);
    while (k->slots[h]) {
        fkey *f = &k->v[k->slots[h] - 1];
        if (f->name_len == len && memcmp(f->name, name, len) == 0)
            return k->slots[h] - 1;
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
    k->slots[h] = (uint32_t)k->n + 1;
    return (int64_t)k->n++;
}

static int64_t intern_address(keys *k, uint64_t addr)
{
    char tmp[32];
    int l = snprintf(tmp, sizeof tmp, "0x%" PRIx64, addr);
    char *s = pd_arena_strndup(&k->arena, tmp, (size_t)l);
    if (!s)
        return PD_ENOMEM;
    return keys_intern(k, s, (size_t)l, "");
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
        k->loc_first[i] = at;
        if (!loc->n_line) {
            int64_t id = intern_address(k, loc->address);
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
                                 pd_profile_str(p, fn->filename));
            } else {
                id = intern_address(k, loc->address);
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

int pd_report_top(const pd_profile *p, size_t sample_index, size_t max_rows, pd_buf *out)
{
    if (sample_index >= p->n_sample_type)
        return PD_EINVAL;
    keys k;
    const fkey **rows = NULL;
    size_t start = out->len;
    int rc = keys_build(&k, p);
    if (rc < 0)
        goto out;
    int64_t total = 0, abs_total = 0;
    for (size_t i = 0; i < p->n_sample; i++) {
        const pd_pprof_sample *s = &p->sample[i];
        int64_t v = sample_value(s, sample_index);
        total = wadd(total, v);
        abs_total = wadd(abs_total, wabs(v));
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
                    leaf = false;
                }
                if (f->stamp != i + 1) {
                    f->stamp = i + 1;
                    f->cum = wadd(f->cum, v);
                }
            }
        }
    }
    size_t nrows = 0;
    if (k.n && !(rows = malloc(k.n * sizeof *rows))) {
        rc = PD_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < k.n; i++)
        if (k.v[i].flat || k.v[i].cum)
            rows[nrows++] = &k.v[i];
    if (nrows > 1)
        qsort(rows, nrows, sizeof *rows, cmp_rows);
    if (max_rows && nrows > max_rows)
        nrows = max_rows;

    rc = pd_buf_puts(out, "{\"sample_type\":");
    if (!rc)
        rc = put_value_type(out, p, &p->sample_type[sample_index]);
    if (!rc)
        rc = pd_buf_printf(out, ",\"total\":%" PRId64 ",\"rows\":[", total);
    for (size_t r = 0; r < nrows && !rc; r++) {
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
            rc = pd__query_json_double(out, pct(f->flat, abs_total));
        if (!rc)
            rc = pd_buf_printf(out, ",\"cum\":%" PRId64 ",\"cum_pct\":", f->cum);
        if (!rc)
            rc = pd__query_json_double(out, pct(f->cum, abs_total));
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

/* ---- flame graph ---- */

typedef struct fnode {
    uint32_t key;    /* UINT32_MAX for the root */
    uint32_t parent;
    int64_t value, self;
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

static int put_node_open(pd_buf *out, const keys *k, const fnode *nd)
{
    int rc = pd_buf_puts(out, "{\"name\":");
    if (!rc) {
        if (nd->key == UINT32_MAX)
            rc = pd_buf_puts(out, "\"root\"");
        else
            rc = pd__query_json_str(out, k->v[nd->key].name, k->v[nd->key].name_len);
    }
    if (!rc)
        rc = pd_buf_printf(out, ",\"value\":%" PRId64 ",\"self\":%" PRId64 ",\"children\":[",
                           nd->value, nd->self);
    return rc;
}

int pd_report_flamegraph(const pd_profile *p, size_t sample_index, pd_buf *out)
{
    if (sample_index >= p->n_sample_type)
        return PD_EINVAL;
    keys k;
    fnode *nodes = NULL;
    size_t nn = 0, ncap = 0, start = out->len;
    pd_u64map kids;
    uint32_t *first = NULL, *count = NULL, *fill = NULL;
    child *ch = NULL;
    struct frame {
        uint32_t node, next;
    } *stack = NULL;
    pd_u64map_init(&kids);
    int rc = keys_build(&k, p);
    if (rc < 0)
        goto out;
    ncap = 1024;
    if (!(nodes = malloc(ncap * sizeof *nodes))) {
        rc = PD_ENOMEM;
        goto out;
    }
    nodes[0] = (fnode){.key = UINT32_MAX, .parent = UINT32_MAX};
    nn = 1;
    for (size_t i = 0; i < p->n_sample; i++) {
        const pd_pprof_sample *s = &p->sample[i];
        int64_t v = sample_value(s, sample_index);
        uint32_t cur = 0;
        nodes[0].value = wadd(nodes[0].value, v);
        for (size_t j = s->n_location; j-- > 0;) {
            ptrdiff_t li = loc_index(p, s->location_id[j]);
            if (li < 0)
                continue;
            const uint32_t *fk = &k.loc_keys[k.loc_first[li]];
            for (uint32_t m = k.loc_count[li]; m-- > 0;) {
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
                        nodes = nv;
                        ncap *= 2;
                    }
                    nodes[nn] = (fnode){.key = fk[m], .parent = cur};
                    if ((rc = pd_u64map_put(&kids, hk, nn)) < 0)
                        goto out;
                    cur = (uint32_t)nn++;
                }
                nodes[cur].value = wadd(nodes[cur].value, v);
            }
        }
        nodes[cur].self = wadd(nodes[cur].self, v);
    }
    /* Children of each node, contiguous (CSR), sorted by name. */
    first = calloc(nn + 1, sizeof *first);
    count = calloc(nn, sizeof *count);
    fill = calloc(nn, sizeof *fill);
    ch = malloc(nn * sizeof *ch);
    stack = malloc(nn * sizeof *stack);
    if (!first || !count || !fill || !ch || !stack) {
        rc = PD_ENOMEM;
        goto out;
    }
    for (size_t i = 1; i < nn; i++)
        count[nodes[i].parent]++;
    for (size_t i = 0; i < nn; i++)
        first[i + 1] = first[i] + count[i];
    for (size_t i = 1; i < nn; i++) {
        uint32_t par = nodes[i].parent;
        ch[first[par] + fill[par]++] = (child){.key = &k.v[nodes[i].key], .node = (uint32_t)i};
    }
    for (size_t i = 0; i < nn; i++)
        if (count[i] > 1)
            qsort(ch + first[i], count[i], sizeof *ch, cmp_child);

    size_t depth = 0;
    rc = put_node_open(out, &k, &nodes[0]);
    stack[depth++] = (struct frame){0, 0};
    while (depth && !rc) {
        struct frame *top = &stack[depth - 1];
        if (top->next < count[top->node]) {
            uint32_t c = ch[first[top->node] + top->next].node;
            if (top->next++)
                rc = pd_buf_putc(out, ',');
            if (!rc)
                rc = put_node_open(out, &k, &nodes[c]);
            stack[depth++] = (struct frame){c, 0};
        } else {
            rc = pd_buf_puts(out, "]}");
            depth--;
        }
    }
out:
    if (rc < 0)
        pd__query_buf_truncate(out, start);
    free(stack);
    free(ch);
    free(fill);
    free(count);
    free(first);
    free(nodes);
    pd_u64map_release(&kids);
    keys_release(&k);
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
                           p->period, p->time_nanos, p->duration_nanos, p->n_sample,
                           p->n_location, p->n_function, p->n_mapping);
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
