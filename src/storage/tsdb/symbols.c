/*
 * storage/tsdb/symbols.c — symbol tables of a block: dedup on write, encode,
 * decode with every reference checked. The API is symbols_int.h.
 *
 * Payload (the `symbols` file wraps it in magic, version, zstd and a CRC:
 * docs/format/symbols.md). varint = unsigned LEB128, zz = zigzag varint.
 *
 *   u8 stack_format (1 tree, 2 list)
 *   strings:   n | n x len | all bytes, concatenated
 *   mappings:  n | n x (start, limit, offset, filename, build_id, u8 flags)
 *   functions: n | n x (name, system_name, filename, zz start_line)
 *   locations: n | n x (mapping, address, u8 folded, n_line,
 *                       n_line x (function, zz line, zz column))
 *   stacks:    n | TREE: n x (i - parent), then n x location   (columns)
 *                | LIST: n x depth, then all locations, leaf first
 *   lsets:     n | n x (n_label, n_label x (key, str, zz num, num_unit))
 *
 * Dedup: every table entry has a canonical key (its encoding above, with
 * ids already block ids); a dictionary maps xxh3(key) to a chain of equal-
 * hash entries compared with memcmp. Tree nodes are keyed by (parent, loc).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <zstd.h>

#include "base/crc32c.h"

#include "base/varint.h"
#include "storage/tsdb/symbols_int.h"
#include "storage/tsdb/symbols_rd_int.h"

#define NONE UINT32_MAX

/* ---- dictionary ---- */

static void dict_release(pd_sym_dict *d)
{
    pd_u64map_release(&d->head);
    free(d->next);
    free(d->koff);
    free(d->klen);
    pd_buf_release(&d->keys);
    memset(d, 0, sizeof *d);
}

static uint64_t key_hash(const void *k, size_t len)
{
    uint64_t h = XXH3_64bits(k, len);
    return h == UINT64_MAX ? 0 : h;
}

/* Finds or adds key; *id its index; *added true when new. find_only: a key
 * not there is not added and MISS is returned (nothing changes). */
#define MISS 1
static int dict_intern_x(pd_sym_dict *d, const void *key, size_t len, uint32_t *id, bool *added,
                         bool find_only)
{
    uint64_t h = key_hash(key, len), first;
    bool have = pd_u64map_get(&d->head, h, &first);
    if (have)
        for (uint32_t j = (uint32_t)first; j != NONE; j = d->next[j])
            if (d->klen[j] == len && !memcmp(d->keys.data + d->koff[j], key, len)) {
                *id = j;
                *added = false;
                return 0;
            }
    if (find_only)
        return MISS;
    if (d->n == d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 256;
        uint32_t *nx = realloc(d->next, nc * sizeof *nx);
        if (nx)
            d->next = nx;
        uint64_t *ko = realloc(d->koff, nc * sizeof *ko);
        if (ko)
            d->koff = ko;
        uint32_t *kl = realloc(d->klen, nc * sizeof *kl);
        if (kl)
            d->klen = kl;
        if (!nx || !ko || !kl)
            return PD_ENOMEM;
        d->cap = nc;
    }
    uint32_t j = (uint32_t)d->n;
    d->koff[j] = d->keys.len;
    d->klen[j] = (uint32_t)len;
    int rc = pd_buf_append(&d->keys, key, len);
    if (rc)
        return rc;
    d->next[j] = have ? (uint32_t)first : NONE;
    if ((rc = pd_u64map_put(&d->head, h, j)))
        return rc;
    d->n++;
    *id = j;
    *added = true;
    return 0;
}

static int dict_intern(pd_sym_dict *d, const void *key, size_t len, uint32_t *id, bool *added)
{
    return dict_intern_x(d, key, len, id, added, false);
}

int pd__symbols_init(pd_symbols *s, pd_stack_format f, bool writable)
{
    memset(s, 0, sizeof *s);
    s->stack_format = f;
    s->writable = writable;
    pd_buf_init(&s->d_str.keys, 0);
    pd_buf_init(&s->d_map.keys, 0);
    pd_buf_init(&s->d_fn.keys, 0);
    pd_buf_init(&s->d_loc.keys, 0);
    pd_buf_init(&s->d_stack.keys, 0);
    pd_buf_init(&s->d_lset.keys, 0);
    if (!writable)
        return 0;
    /* stack 0 / lset 0 are "empty": reserve the slots */
    if (grow(&s->parent, &s->cap_stack, 0, sizeof *s->parent) ||
        !(s->node_loc = calloc(s->cap_stack, sizeof *s->node_loc)) ||
        grow(&s->list_off, &s->cap_list, 1, sizeof *s->list_off) ||
        grow(&s->lset_off, &s->cap_lset, 1, sizeof *s->lset_off)) {
        pd__symbols_release(s);
        return PD_ENOMEM;
    }
    s->parent[0] = s->node_loc[0] = 0;
    s->list_off[0] = s->list_off[1] = 0;
    s->lset_off[0] = s->lset_off[1] = 0;
    return 0;
}

void pd__symbols_release(pd_symbols *s)
{
    if (s->writable)
        for (size_t i = 0; i < s->n_str; i++)
            free((void *)s->str[i]);
    free(s->str);
    free(s->str_len);
    free(s->map);
    free(s->fn);
    free(s->loc);
    free(s->line);
    free(s->parent);
    free(s->node_loc);
    free(s->stack_hi);
    pd_u64map_release(&s->stack_cache);
    free(s->list_off);
    free(s->list_locs);
    free(s->lset_off);
    free(s->lab);
    dict_release(&s->d_str);
    dict_release(&s->d_map);
    dict_release(&s->d_fn);
    dict_release(&s->d_loc);
    dict_release(&s->d_stack);
    pd_u64map_release(&s->tree);
    dict_release(&s->d_lset);
    free(s->raw);
    free(s->str_bad);
    free(s->map_bad);
    free(s->fn_bad);
    free(s->loc_bad);
    free(s->stack_bad);
    free(s->lset_bad);
    free(s->damage);
    memset(s, 0, sizeof *s);
}

int pd__symbols_string(pd_symbols *s, const char *str, size_t len, uint32_t *id)
{
    bool added;
    int rc = dict_intern(&s->d_str, str, len, id, &added);
    if (rc || !added)
        return rc;
    size_t cap = s->cap_str;
    if (grow(&s->str, &cap, s->n_str, sizeof *s->str) ||
        grow(&s->str_len, &s->cap_str, s->n_str, sizeof *s->str_len))
        return PD_ENOMEM;
    char *c = malloc(len + 1);
    if (!c)
        return PD_ENOMEM;
    memcpy(c, str, len);
    c[len] = 0;
    s->str[s->n_str] = c;
    s->str_len[s->n_str] = (uint32_t)len;
    s->n_str++;
    return 0;
}

static int kput(pd_buf *k, uint64_t v)
{
    return pd_buf_put_varint(k, v);
}

int pd__symbols_add_profile(pd_symbols *s, const pd_profile *p, uint32_t *str_map, uint32_t *stack,
                            uint32_t *lset, pd_err *err)
{
    return pd__symbols_map_profile(s, p, false, str_map, stack, lset, err);
}

int pd__symbols_map_profile(pd_symbols *s, const pd_profile *p, bool find_only, uint32_t *str_map,
                            uint32_t *stack, uint32_t *lset, pd_err *err)
{
    int rc = 0;
    uint32_t *fmap = NULL, *mmap = NULL, *lmap = NULL, *tmp = NULL;
    uint32_t *prev_loc = NULL, *prev_node = NULL; /* the previous sample's path, root first */
    pd_buf k;
    pd_buf_init(&k, 0);
    bool added;

    for (size_t i = 0; i < p->n_string; i++)
        if ((rc = find_only
                      ? dict_intern_x(&s->d_str, p->string_table[i], p->string_len[i], &str_map[i],
                                      &added, true)
                      : pd__symbols_string(s, p->string_table[i], p->string_len[i], &str_map[i])))
            goto out;
#define SID(x) (((x) >= 0 && (size_t)(x) < p->n_string) ? str_map[(x)] : str_map[0])

    fmap = malloc((p->n_function + 1) * sizeof *fmap);
    mmap = malloc((p->n_mapping + 1) * sizeof *mmap);
    lmap = malloc((p->n_location + 1) * sizeof *lmap);
    if (!fmap || !mmap || !lmap) {
        rc = PD_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < p->n_function; i++) {
        const pd_pprof_function *f = &p->function[i];
        pd_sym_function sf = {SID(f->name), SID(f->system_name), SID(f->filename), f->start_line};
        pd_buf_reset(&k);
        if ((rc = kput(&k, sf.name)) || (rc = kput(&k, sf.system_name)) ||
            (rc = kput(&k, sf.filename)) || (rc = kput(&k, pd_zigzag_enc(sf.start_line))) ||
            (rc = dict_intern_x(&s->d_fn, k.data, k.len, &fmap[i], &added, find_only)))
            goto out;
        if (added) {
            if ((rc = grow(&s->fn, &s->cap_fn, s->n_fn, sizeof *s->fn)))
                goto out;
            s->fn[s->n_fn++] = sf;
        }
    }
    for (size_t i = 0; i < p->n_mapping; i++) {
        const pd_pprof_mapping *m = &p->mapping[i];
        pd_sym_mapping sm = {m->memory_start,
                             m->memory_limit,
                             m->file_offset,
                             SID(m->filename),
                             SID(m->build_id),
                             (uint8_t)(m->has_functions | m->has_filenames << 1 |
                                       m->has_line_numbers << 2 | m->has_inline_frames << 3)};
        pd_buf_reset(&k);
        if ((rc = kput(&k, sm.start)) || (rc = kput(&k, sm.limit)) || (rc = kput(&k, sm.offset)) ||
            (rc = kput(&k, sm.filename)) || (rc = kput(&k, sm.build_id)) ||
            (rc = kput(&k, sm.flags)) ||
            (rc = dict_intern_x(&s->d_map, k.data, k.len, &mmap[i], &added, find_only)))
            goto out;
        if (added) {
            if ((rc = grow(&s->map, &s->cap_map, s->n_map, sizeof *s->map)))
                goto out;
            s->map[s->n_map++] = sm;
        }
    }
    for (size_t i = 0; i < p->n_location; i++) {
        const pd_pprof_location *l = &p->location[i];
        pd_sym_location sl = {0, l->address, 0, (uint32_t)l->n_line, l->is_folded};
        if (l->mapping_id) {
            const pd_pprof_mapping *m = pd_profile_mapping(p, l->mapping_id);
            if (!m) {
                rc = pd_err_set(err, PD_EINVAL, "location %llu: mapping %llu not found",
                                (unsigned long long)l->id, (unsigned long long)l->mapping_id);
                goto out;
            }
            sl.mapping = mmap[m - p->mapping] + 1;
        }
        pd_buf_reset(&k);
        if ((rc = kput(&k, sl.mapping)) || (rc = kput(&k, sl.address)) ||
            (rc = kput(&k, sl.folded)) || (rc = kput(&k, sl.n_line)))
            goto out;
        for (size_t j = 0; j < l->n_line; j++) {
            uint32_t fid = 0;
            if (l->line[j].function_id) {
                const pd_pprof_function *f = pd_profile_function(p, l->line[j].function_id);
                if (!f) {
                    rc = pd_err_set(err, PD_EINVAL, "location %llu: function %llu not found",
                                    (unsigned long long)l->id,
                                    (unsigned long long)l->line[j].function_id);
                    goto out;
                }
                fid = fmap[f - p->function] + 1;
            }
            if ((rc = kput(&k, fid)) || (rc = kput(&k, pd_zigzag_enc(l->line[j].line))) ||
                (rc = kput(&k, pd_zigzag_enc(l->line[j].column))))
                goto out;
        }
        if ((rc = dict_intern_x(&s->d_loc, k.data, k.len, &lmap[i], &added, find_only)))
            goto out;
        if (added) {
            if ((rc = grow(&s->loc, &s->cap_loc, s->n_loc, sizeof *s->loc)))
                goto out;
            sl.first_line = (uint32_t)s->n_line;
            for (size_t j = 0; j < l->n_line; j++) {
                uint32_t fid = 0;
                if (l->line[j].function_id)
                    fid = fmap[pd_profile_function(p, l->line[j].function_id) - p->function] + 1;
                if ((rc = grow(&s->line, &s->cap_line, s->n_line, sizeof *s->line)))
                    goto out;
                s->line[s->n_line++] = (pd_sym_line){fid, l->line[j].line, l->line[j].column};
            }
            s->loc[s->n_loc++] = sl;
        }
    }

    size_t cap_tmp = 0, n_prev = 0, cap_prev = 0;
    for (size_t i = 0; i < p->n_sample; i++) {
        const pd_pprof_sample *sa = &p->sample[i];
        size_t n = sa->n_location;
        if (n + 1 > cap_tmp) {
            free(tmp);
            cap_tmp = 2 * (n + 1);
            if (!(tmp = malloc(cap_tmp * sizeof *tmp))) {
                rc = PD_ENOMEM;
                goto out;
            }
        }
        for (size_t j = 0; j < n; j++) {
            const pd_pprof_location *l = pd_profile_location(p, sa->location_id[j]);
            if (!l) {
                rc = pd_err_set(err, PD_EINVAL, "sample %zu: location %llu not found", i,
                                (unsigned long long)sa->location_id[j]);
                goto out;
            }
            tmp[j] = lmap[l - p->location];
        }
        if (n > s->max_depth && !find_only)
            s->max_depth = n;
        uint32_t sid = 0;
        XXH128_hash_t hh = {0, 0};
        uint64_t lo = 0, hi = 0, cv;
        if (n && s->stack_format == PD_STACKS_TREE) {
            /* a stack seen before: one lookup (see stack_cache) */
            hh = XXH3_128bits(tmp, n * sizeof *tmp);
            lo = hh.low64 == UINT64_MAX ? 0 : hh.low64;
            hi = hh.high64 ? hh.high64 : 1;
            if (pd_u64map_get(&s->stack_cache, lo, &cv) && cv < s->cap_hi && s->stack_hi[cv] == hi)
                sid = (uint32_t)cv;
        }
        if (sid) {
            /* cached (prev_loc/prev_node keep the last walked path: still
               a path of the tree, so the next walk may start from it) */
        } else if (n && find_only && s->stack_format == PD_STACKS_TREE) {
            rc = MISS; /* every stack added is cached: not in the cache, not known */
            goto out;
        } else if (n && s->stack_format == PD_STACKS_TREE) {
            uint32_t parent = 0;
            /* the root path shared with the previous sample needs no lookup */
            size_t c = 0;
            while (c < n && c < n_prev && prev_loc[c] == tmp[n - 1 - c])
                c++;
            if (c)
                parent = prev_node[c - 1];
            if (n > cap_prev) {
                free(prev_loc);
                free(prev_node);
                cap_prev = 2 * n;
                prev_loc = malloc(cap_prev * sizeof *prev_loc);
                prev_node = malloc(cap_prev * sizeof *prev_node);
                if (!prev_loc || !prev_node) {
                    rc = PD_ENOMEM;
                    goto out;
                }
                c = 0, parent = 0; /* (the copies are gone) */
            }
            n_prev = n;
            for (size_t r = c; r < n; r++) {
                size_t j = n - 1 - r; /* root first */
                /* node (parent, location) -> node id: the pair is the key itself */
                uint64_t key = (uint64_t)parent << 32 | tmp[j], v;
                uint32_t node;
                added = false;
                if (pd_u64map_get(&s->tree, key, &v))
                    node = (uint32_t)v;
                else {
                    if (s->n_stack >= UINT32_MAX - 2) {
                        rc = PD_ENOMEM;
                        goto out;
                    }
                    node = (uint32_t)s->n_stack + 1;
                    if ((rc = pd_u64map_put(&s->tree, key, node)))
                        goto out;
                    added = true;
                }
                if (added) {
                    size_t c2 = s->cap_stack;
                    if ((rc = grow(&s->parent, &c2, node, sizeof *s->parent)))
                        goto out;
                    if (c2 != s->cap_stack) {
                        uint32_t *nl = realloc(s->node_loc, c2 * sizeof *nl);
                        if (!nl) {
                            rc = PD_ENOMEM;
                            goto out;
                        }
                        s->node_loc = nl;
                        s->cap_stack = c2;
                    }
                    s->parent[node] = parent;
                    s->node_loc[node] = tmp[j];
                    s->n_stack = node;
                }
                parent = node;
                prev_loc[r] = tmp[j];
                prev_node[r] = node;
            }
            sid = parent;
            if (sid >= s->cap_hi) {
                size_t nc = s->cap_stack > sid ? s->cap_stack : (size_t)sid + 1;
                uint64_t *nh = realloc(s->stack_hi, nc * sizeof *nh);
                if (!nh) {
                    rc = PD_ENOMEM;
                    goto out;
                }
                memset(nh + s->cap_hi, 0, (nc - s->cap_hi) * sizeof *nh);
                s->stack_hi = nh;
                s->cap_hi = nc;
            }
            if ((rc = pd_u64map_put(&s->stack_cache, lo, sid)))
                goto out;
            s->stack_hi[sid] = hi;
        } else if (n) {
            if ((rc = dict_intern_x(&s->d_stack, tmp, n * sizeof *tmp, &sid, &added, find_only)))
                goto out;
            sid += 1;
            if (added) {
                if ((rc = grow(&s->list_off, &s->cap_list, sid + 1, sizeof *s->list_off)))
                    goto out;
                uint64_t base = s->list_off[sid - 1];
                if ((rc = grow(&s->list_locs, &s->cap_list_locs, s->n_list_locs + n,
                               sizeof *s->list_locs)))
                    goto out;
                memcpy(s->list_locs + base, tmp, n * sizeof *tmp);
                s->n_list_locs += n;
                s->list_off[sid] = base + n;
                s->n_stack = sid;
            }
        }
        stack[i] = sid;

        uint32_t ls = 0;
        if (sa->n_label) {
            pd_buf_reset(&k);
            for (size_t j = 0; j < sa->n_label; j++) {
                const pd_pprof_label *lb = &sa->label[j];
                if ((rc = kput(&k, SID(lb->key))) || (rc = kput(&k, SID(lb->str))) ||
                    (rc = kput(&k, pd_zigzag_enc(lb->num))) || (rc = kput(&k, SID(lb->num_unit))))
                    goto out;
            }
            if ((rc = dict_intern_x(&s->d_lset, k.data, k.len, &ls, &added, find_only)))
                goto out;
            ls += 1;
            if (added) {
                if ((rc = grow(&s->lset_off, &s->cap_lset, ls + 1, sizeof *s->lset_off)))
                    goto out;
                uint64_t base = s->lset_off[ls - 1];
                for (size_t j = 0; j < sa->n_label; j++) {
                    const pd_pprof_label *lb = &sa->label[j];
                    if ((rc = grow(&s->lab, &s->cap_lab, s->n_lab, sizeof *s->lab)))
                        goto out;
                    s->lab[s->n_lab++] =
                        (pd_sym_label){SID(lb->key), SID(lb->str), lb->num, SID(lb->num_unit)};
                }
                s->lset_off[ls] = base + sa->n_label;
                s->n_lset = ls;
            }
        }
        lset[i] = ls;
    }
#undef SID
out:
    free(fmap);
    free(mmap);
    free(lmap);
    free(tmp);
    free(prev_loc);
    free(prev_node);
    pd_buf_release(&k);
    return rc;
}

/* ---- encode ---- */

int pd__symbols_encode(const pd_symbols *s, pd_buf *o)
{
    int rc = 0;
    PUTB(s->stack_format);
    PUT(s->n_str);
    for (size_t i = 0; i < s->n_str; i++)
        PUT(s->str_len[i]);
    for (size_t i = 0; i < s->n_str; i++)
        if ((rc = pd_buf_append(o, s->str[i], s->str_len[i])))
            return rc;
    /* mappings, functions and locations row by row, as the framed files */
    static const int rows[] = {T_MAP, T_FN, T_LOC};
    const size_t n_rows[] = {s->n_map, s->n_fn, s->n_loc};
    for (int k = 0; k < 3; k++) {
        PUT(n_rows[k]);
        for (size_t i = 0; i < n_rows[k]; i++)
            if ((rc = pd__symbols_entry_encode(s, rows[k], i, o)))
                return rc;
    }
    PUT(s->n_stack);
    if (s->stack_format == PD_STACKS_TREE) {
        for (size_t i = 1; i <= s->n_stack; i++)
            PUT(i - s->parent[i]);
        for (size_t i = 1; i <= s->n_stack; i++)
            PUT(s->node_loc[i]);
    } else {
        for (size_t i = 1; i <= s->n_stack; i++)
            PUT(s->list_off[i] - s->list_off[i - 1]);
        for (size_t i = 0; i < s->n_list_locs; i++)
            PUT(s->list_locs[i]);
    }
    PUT(s->n_lset);
    for (size_t i = 1; i <= s->n_lset; i++)
        if ((rc = pd__symbols_entry_encode(s, T_LSET, i, o)))
            return rc;
    return 0;
}

/* ---- decode ---- */

int pd__symbols_decode(pd_symbols *s, uint8_t *raw, size_t len, pd_err *err)
{
    int rc;
    char *sb = NULL;
    if ((rc = pd__symbols_init(s, PD_STACKS_TREE, false))) {
        free(raw);
        return rc;
    }
    rd r = {raw, len, 0, err, 0};
    uint8_t f = getb(&r, "stack format");
    if (!r.bad && f != PD_STACKS_TREE && f != PD_STACKS_LIST)
        r.bad =
            pd_err_set(err, PD_ECORRUPT, "symbols payload offset 0: unknown stack format %u", f);
    s->stack_format = (pd_stack_format)f;

    /* strings: lengths, then the bytes, copied NUL-terminated into one block */
    s->n_str = getn(&r, 1, "string");
    if (r.bad)
        goto fail;
    s->str = calloc(s->n_str + 1, sizeof *s->str);
    s->str_len = calloc(s->n_str + 1, sizeof *s->str_len);
    if (!s->str || !s->str_len)
        goto nomem;
    uint64_t total = 0;
    for (size_t i = 0; i < s->n_str && !r.bad; i++) {
        uint64_t l = get(&r, "string length");
        if (!r.bad && l > len)
            r.bad =
                pd_err_set(err, PD_ECORRUPT, "symbols payload offset %zu: string %zu length %llu",
                           r.off, i, (unsigned long long)l);
        s->str_len[i] = (uint32_t)l;
        total += l;
    }
    if (!r.bad && total > r.len - r.off)
        r.bad = pd_err_set(err, PD_ECORRUPT,
                           "symbols payload offset %zu: string bytes (%llu) exceed the payload",
                           r.off, (unsigned long long)total);
    if (r.bad)
        goto fail;
    if (!(sb = malloc(total + s->n_str + 1)))
        goto nomem;
    s->raw = (uint8_t *)sb;
    for (size_t i = 0, w = 0; i < s->n_str; i++) {
        memcpy(sb + w, raw + r.off, s->str_len[i]);
        s->str[i] = sb + w;
        r.off += s->str_len[i];
        w += s->str_len[i];
        sb[w++] = 0;
    }
    size_t NS = s->n_str;

    s->n_map = getn(&r, 6, "mapping");
    if (r.bad || !(s->map = calloc(s->n_map + 1, sizeof *s->map)))
        goto bad_or_nomem;
    for (size_t i = 0; i < s->n_map && !r.bad; i++) {
        pd_sym_mapping *m = &s->map[i];
        m->start = get(&r, "mapping start");
        m->limit = get(&r, "mapping limit");
        m->offset = get(&r, "mapping offset");
        m->filename = getref(&r, NS, "mapping filename");
        m->build_id = getref(&r, NS, "mapping build id");
        m->flags = getb(&r, "mapping flags");
    }
    s->n_fn = getn(&r, 4, "function");
    if (r.bad || !(s->fn = calloc(s->n_fn + 1, sizeof *s->fn)))
        goto bad_or_nomem;
    for (size_t i = 0; i < s->n_fn && !r.bad; i++) {
        s->fn[i].name = getref(&r, NS, "function name");
        s->fn[i].system_name = getref(&r, NS, "function system name");
        s->fn[i].filename = getref(&r, NS, "function filename");
        s->fn[i].start_line = pd_zigzag_dec(get(&r, "function start line"));
    }
    s->n_loc = getn(&r, 4, "location");
    if (r.bad || !(s->loc = calloc(s->n_loc + 1, sizeof *s->loc)))
        goto bad_or_nomem;
    size_t cap_line = 0;
    for (size_t i = 0; i < s->n_loc && !r.bad; i++) {
        pd_sym_location *l = &s->loc[i];
        l->mapping = getref(&r, s->n_map + 1, "location mapping");
        l->address = get(&r, "location address");
        l->folded = getb(&r, "location folded");
        l->n_line = (uint32_t)getn(&r, 3, "line");
        l->first_line = (uint32_t)s->n_line;
        for (uint32_t j = 0; j < l->n_line && !r.bad; j++) {
            if (grow(&s->line, &cap_line, s->n_line, sizeof *s->line))
                goto nomem;
            pd_sym_line *ln = &s->line[s->n_line++];
            ln->function = getref(&r, s->n_fn + 1, "line function");
            ln->line = pd_zigzag_dec(get(&r, "line number"));
            ln->column = pd_zigzag_dec(get(&r, "line column"));
        }
    }
    if (r.bad)
        goto fail;
    s->n_stack = getn(&r, 2, "stack");
    if (r.bad)
        goto fail;
    if (s->stack_format == PD_STACKS_TREE) {
        s->parent = calloc(s->n_stack + 1, sizeof *s->parent);
        s->node_loc = calloc(s->n_stack + 1, sizeof *s->node_loc);
        if (!s->parent || !s->node_loc)
            goto nomem;
        for (size_t i = 1; i <= s->n_stack && !r.bad; i++)
            s->parent[i] = (uint32_t)(i - getref(&r, i + 1, "stack parent distance"));
        for (size_t i = 1; i <= s->n_stack && !r.bad; i++)
            s->node_loc[i] = getref(&r, s->n_loc, "stack location");
        /* parent distance 0 would make a node its own parent: refuse */
        for (size_t i = 1; i <= s->n_stack && !r.bad; i++)
            if (s->parent[i] >= i)
                r.bad = pd_err_set(err, PD_ECORRUPT,
                                   "symbols payload: stack node %zu is its own parent", i);
        /* depth of each node is bounded by its id; compute max_depth */
        uint32_t *depth = calloc(s->n_stack + 1, sizeof *depth);
        if (!depth)
            goto nomem;
        for (size_t i = 1; i <= s->n_stack; i++) {
            depth[i] = depth[s->parent[i]] + 1;
            if (depth[i] > s->max_depth)
                s->max_depth = depth[i];
        }
        free(depth);
    } else {
        s->list_off = calloc(s->n_stack + 2, sizeof *s->list_off);
        if (!s->list_off)
            goto nomem;
        for (size_t i = 1; i <= s->n_stack && !r.bad; i++) {
            uint64_t d = getn(&r, 1, "stack depth");
            s->list_off[i] = s->list_off[i - 1] + d;
            if (d > s->max_depth)
                s->max_depth = d;
        }
        s->n_list_locs = s->list_off[s->n_stack];
        if (!r.bad && s->n_list_locs > r.len - r.off)
            r.bad =
                pd_err_set(err, PD_ECORRUPT,
                           "symbols payload offset %zu: stack locations exceed the payload", r.off);
        if (r.bad)
            goto fail;
        if (!(s->list_locs = calloc(s->n_list_locs + 1, sizeof *s->list_locs)))
            goto nomem;
        for (size_t i = 0; i < s->n_list_locs && !r.bad; i++)
            s->list_locs[i] = getref(&r, s->n_loc, "stack location");
    }
    if (r.bad)
        goto fail;
    s->n_lset = getn(&r, 1, "label set");
    if (r.bad || !(s->lset_off = calloc(s->n_lset + 2, sizeof *s->lset_off)))
        goto bad_or_nomem;
    size_t cap_lab = 0;
    for (size_t i = 1; i <= s->n_lset && !r.bad; i++) {
        size_t n = getn(&r, 4, "label");
        for (size_t j = 0; j < n && !r.bad; j++) {
            if (grow(&s->lab, &cap_lab, s->n_lab, sizeof *s->lab))
                goto nomem;
            pd_sym_label *lb = &s->lab[s->n_lab++];
            lb->key = getref(&r, NS, "label key");
            lb->str = getref(&r, NS, "label string");
            lb->num = pd_zigzag_dec(get(&r, "label number"));
            lb->num_unit = getref(&r, NS, "label unit");
        }
        s->lset_off[i] = s->n_lab;
    }
    if (!r.bad && r.off != r.len)
        r.bad = pd_err_set(err, PD_ECORRUPT, "symbols payload offset %zu: %zu trailing bytes",
                           r.off, r.len - r.off);
    if (r.bad)
        goto fail;
    free(raw);
    return 0;
bad_or_nomem:
    if (r.bad)
        goto fail;
nomem:
    free(raw);
    pd__symbols_release(s);
    return PD_ENOMEM;
fail:
    free(raw);
    pd__symbols_release(s);
    return r.bad;
}

int pd__symbols_stack(const pd_symbols *s, uint32_t id, uint32_t *out, size_t cap)
{
    if (id > s->n_stack)
        return PD_ECORRUPT;
    size_t n = 0;
    if (s->stack_format == PD_STACKS_TREE) {
        for (uint32_t x = id; x; x = s->parent[x]) {
            if (n == cap)
                return PD_ECORRUPT;
            out[n++] = s->node_loc[x];
        }
    } else if (id) {
        uint64_t a = s->list_off[id - 1], b = s->list_off[id];
        if (b - a > cap)
            return PD_ECORRUPT;
        for (uint64_t j = a; j < b; j++)
            out[n++] = s->list_locs[j];
    }
    return (int)n;
}
