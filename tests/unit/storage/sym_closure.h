/* What each profile of a block uses of its symbols, for the damage tests
 * (test_block.c, test_corruption_matrix.c): the frames of a format-2
 * `symbols` file (symbols file version 2 or 3) (docs/format/symbols.md) and, per profile, the closure of
 * its stacks, label sets and strings down to every table entry — computed
 * here from the intact block, independently of the reader's propagation
 * (symbols.c pd__symbols_settle_damage). A damaged frame must cost exactly
 * the profiles whose closure reaches one of its entries, except strings the
 * index keeps inline (the sample types and units of a series' time chunk:
 * type_str). */
#ifndef PD_TEST_SYM_CLOSURE_H
#define PD_TEST_SYM_CLOSURE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/varint.h"
#include "storage/tsdb/block_int.h"
#include "storage/tsdb/chunks_int.h"

enum { TT_STR = 1, TT_MAP, TT_FN, TT_LOC, TT_STACK, TT_LSET, TT_N };

/* A frame: version 2 one part, version 3 the ranges of up to 6 tables. */
typedef struct vframe {
    int np;
    struct {
        int t;
        uint64_t first, count;
    } part[TT_N];
    uint64_t off, zlen;
} vframe;

__attribute__((unused)) static uint64_t vget(const uint8_t *p, size_t *off)
{
    uint64_t v;
    size_t k = pd_varint_get(p + *off, 16, &v);
    assert_true(k > 0);
    *off += k;
    return v;
}

/* The frames of a v2 or v3 symbols file; *dir_end (may be NULL): where the
 * head's directory CRC ends, *copy: where the v3 copy of the directory
 * starts (the file's length in v2). */
__attribute__((unused)) static size_t sym_frames_at(const uint8_t *b, size_t len, vframe *f,
                                                    size_t cap, uint64_t *dir_end, uint64_t *copy)
{
    assert_true(len > 16 && (b[4] == 2 || b[4] == 3));
    int v3 = b[4] == 3;
    uint32_t dl = (uint32_t)b[8] | (uint32_t)b[9] << 8 | (uint32_t)b[10] << 16 | (uint32_t)b[11] << 24;
    size_t off = 12 + 1;
    for (int t = 1; t < TT_N; t++)
        vget(b, &off);
    size_t nf = (size_t)vget(b, &off);
    assert_true(nf <= cap);
    uint64_t at = 12 + dl + 4, next[TT_N] = {0, 0, 0, 0, 0, 1, 1};
    for (size_t k = 0; k < nf; k++) {
        f[k].np = v3 ? (int)vget(b, &off) : 1;
        for (int pi = 0; pi < f[k].np; pi++) {
            int t = b[off++];
            f[k].part[pi].t = t;
            f[k].part[pi].count = vget(b, &off);
            f[k].part[pi].first = next[t];
            next[t] += f[k].part[pi].count;
        }
        f[k].zlen = vget(b, &off);
        vget(b, &off);
        off += 4;
        f[k].off = at;
        at += f[k].zlen;
    }
    if (dir_end)
        *dir_end = 12 + (uint64_t)dl + 4;
    if (copy)
        *copy = at;
    assert_int_equal(at + (v3 ? dl + 8 : 0), len);
    return nf;
}

__attribute__((unused)) static size_t sym_frames(const uint8_t *b, size_t len, vframe *f, size_t cap)
{
    return sym_frames_at(b, len, f, cap, NULL, NULL);
}

/* What one profile uses, per table (bitmaps over the intact block's ids). */
typedef struct uses {
    uint32_t series;
    int64_t ts;
    size_t tp; /* index in g_profs */
    uint8_t *u[TT_N];
} uses;

typedef struct uses_ctx {
    const pd_symbols *S;
    uses *v;
    size_t n;
    uint32_t series;
    uint8_t *type_str; /* strings some time chunk names: restorable */
} uses_ctx;

__attribute__((unused)) static void use_str(uses *x, uses_ctx *c, uint32_t id, bool type)
{
    if (id < c->S->n_str) {
        x->u[TT_STR][id] = 1;
        if (type)
            c->type_str[id] = 1;
    }
}

__attribute__((unused)) static int collect_uses(void *ctx, const pd_dprof *d)
{
    uses_ctx *c = ctx;
    const pd_symbols *S = c->S;
    uses *x = &c->v[c->n++];
    x->series = c->series;
    x->ts = d->ts;
    size_t sz[TT_N] = {0, S->n_str, S->n_map, S->n_fn, S->n_loc, S->n_stack + 1, S->n_lset + 1};
    for (int t = 1; t < TT_N; t++)
        assert_non_null(x->u[t] = calloc(sz[t] + 1, 1));
    for (uint32_t t = 0; t < 2 * d->n_types; t++)
        use_str(x, c, d->types[t], true);
    uint32_t one[] = {d->period_type, d->period_unit, d->drop_frames, d->keep_frames,
                      d->default_sample_type, d->doc_url};
    for (size_t k = 0; k < 6; k++)
        use_str(x, c, one[k], false);
    for (uint32_t k = 0; k < d->n_comment; k++)
        use_str(x, c, d->comment[k], false);
    for (uint32_t i = 0; i < d->n_sample; i++) {
        uint32_t st = d->stack[i], ls = d->lset[i];
        if (S->stack_format == PD_STACKS_TREE) {
            for (uint32_t nd = st; nd; nd = S->parent[nd]) {
                x->u[TT_STACK][nd] = 1;
                x->u[TT_LOC][S->node_loc[nd]] = 1;
            }
        } else if (st) {
            x->u[TT_STACK][st] = 1;
            for (uint64_t j = S->list_off[st - 1]; j < S->list_off[st]; j++)
                x->u[TT_LOC][S->list_locs[j]] = 1;
        }
        if (ls) {
            x->u[TT_LSET][ls] = 1;
            for (uint64_t j = S->lset_off[ls - 1]; j < S->lset_off[ls]; j++) {
                use_str(x, c, S->lab[j].key, false);
                use_str(x, c, S->lab[j].str, false);
                use_str(x, c, S->lab[j].num_unit, false);
            }
        }
    }
    for (size_t l = 0; l < S->n_loc; l++) {
        if (!x->u[TT_LOC][l])
            continue;
        const pd_sym_location *L = &S->loc[l];
        if (L->mapping) {
            const pd_sym_mapping *m = &S->map[L->mapping - 1];
            x->u[TT_MAP][L->mapping - 1] = 1;
            use_str(x, c, m->filename, false);
            use_str(x, c, m->build_id, false);
        }
        for (uint32_t j = 0; j < L->n_line; j++) {
            uint32_t f = S->line[L->first_line + j].function;
            if (!f)
                continue;
            x->u[TT_FN][f - 1] = 1;
            use_str(x, c, S->fn[f - 1].name, false);
            use_str(x, c, S->fn[f - 1].system_name, false);
            use_str(x, c, S->fn[f - 1].filename, false);
        }
    }
    return 0;
}

__attribute__((unused)) static bool frame_touches(const uses *x, const vframe *f, const uint8_t *type_str)
{
    for (int pi = 0; pi < f->np; pi++) {
        int t = f->part[pi].t;
        for (uint64_t i = f->part[pi].first; i < f->part[pi].first + f->part[pi].count; i++)
            if (x->u[t][i] && !(t == TT_STR && type_str[i]))
                return true;
    }
    return false;
}


#endif
