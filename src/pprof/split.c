/*
 * pprof/split.c — a pushed profile cut by its samples' labels into one
 * profile per series (split.h has the rules).
 *
 * One pass over the samples gives each its key: the sample's labels that
 * take part, sorted by name, as "name\0value\0..." bytes; groups are found
 * by the key's XXH3 (a hash map to the first group of that hash, groups of
 * equal hash chained and compared byte for byte). Then each group's view
 * is built alone: its samples (label arrays without the split labels), and
 * the locations, functions, mappings and strings they reach, collected
 * with one stamp array per kind over the source's arrays (stamp = group +
 * 1), so the memory is the source's sizes once, not per group.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "base/buf.h"
#include "base/u64map.h"
#include "pprof/split.h"

static const char *const EXCLUDED[] = {"span_id", "trace_id", "profile_id", "pyroscope.profile.id"};

bool pd_pprof_split_excluded(const char *key)
{
    for (size_t i = 0; i < sizeof EXCLUDED / sizeof *EXCLUDED; i++)
        if (strcmp(key, EXCLUDED[i]) == 0)
            return true;
    return false;
}

/* 1..PD_LABEL_MAX_VALUE bytes of UTF-8 (no overlongs, surrogates or code
 * points past U+10FFFF) without a control byte: what pd_labels_set takes. */
static bool value_ok(const char *s, size_t n)
{
    if (n == 0 || n > PD_LABEL_MAX_VALUE)
        return false;
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned c = u[i];
        if (c < 0x20 || c == 0x7f)
            return false;
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc2 ? 1 : 0;
        if (k == 0 || c > 0xf4 || i + k >= n)
            return false;
        uint32_t cp = c & (0x3f >> k);
        for (size_t j = 1; j <= k; j++) {
            if ((u[i + j] & 0xc0) != 0x80)
                return false;
            cp = cp << 6 | (u[i + j] & 0x3f);
        }
        if ((k == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
            (k == 3 && (cp < 0x10000 || cp > 0x10ffff)))
            return false;
        i += k + 1;
    }
    return true;
}

/* Whether label j of sample s takes part (split.h's rules). */
static bool takes_part(const pd_profile *p, const pd_labels *base, const pd_pprof_sample *s,
                       size_t j)
{
    const pd_pprof_label *l = &s->label[j];
    if (l->str <= 0 || l->key <= 0)
        return false;
    const char *k = pd_profile_str(p, l->key);
    size_t kl = p->string_len[l->key];
    if (strlen(k) != kl || !pd_label_name_valid(k) || (k[0] == '_' && k[1] == '_') ||
        pd_pprof_split_excluded(k) || pd_labels_get(base, k))
        return false;
    const char *v = pd_profile_str(p, l->str);
    size_t vl = p->string_len[l->str];
    if (strlen(v) != vl || !value_ok(v, vl))
        return false;
    for (size_t i = 0; i < s->n_label; i++) /* a key twice in one sample stays */
        if (i != j && s->label[i].key > 0 &&
            (s->label[i].key == l->key || strcmp(pd_profile_str(p, s->label[i].key), k) == 0))
            return false;
    return true;
}

typedef struct group {
    uint64_t hash;
    size_t key_off, key_len; /* in the keys buffer */
    size_t n_samples;
    size_t next; /* next group of the same hash + 1, 0: none */
} group;

/* the profile whose label keys the qsort below compares */
static _Thread_local const pd_profile *tl_p;

static int cmp_label_key(const void *a, const void *b)
{
    const pd_pprof_label *x = *(const pd_pprof_label *const *)a;
    const pd_pprof_label *y = *(const pd_pprof_label *const *)b;
    return strcmp(pd_profile_str(tl_p, x->key), pd_profile_str(tl_p, y->key));
}

void pd_pprof_split_release(pd_pprof_split *s)
{
    if (!s)
        return;
    for (size_t g = 0; g < s->n; g++) {
        pd_pprof_split_group *sg = &s->v[g];
        pd_labels_release(&sg->labels);
        pd_profile *v = &sg->view;
        for (size_t i = 0; i < v->n_sample; i++)
            free(v->sample[i].label);
        free(v->sample);
        free((void *)v->string_table);
        free(v->string_len);
        free(v->sample_type);
        free(v->comment);
        free(v->location);
        free(v->function);
        free(v->mapping);
        pd_u64map_release(&v->loc_by_id);
        pd_u64map_release(&v->fn_by_id);
        pd_u64map_release(&v->map_by_id);
    }
    free(s->v);
    memset(s, 0, sizeof *s);
}

/* Builds group g's view: its samples without the split labels, and what
 * they reach. stamp arrays are the source's sizes, stamped with g + 1. */
/* The strings of one view: the source's strings it uses, renumbered in
 * order of first use (0 stays ""). st/idx are the source's sizes: st[i] ==
 * stamp when string i is in, idx[i] its new index. */
typedef struct strs {
    uint32_t *st, *idx, stamp;
    uint32_t *order; /* source indexes in new order */
    size_t n;
} strs;

static int64_t use_str(strs *t, int64_t i)
{
    if (i <= 0)
        return 0;
    if (t->st[i] != t->stamp) {
        t->st[i] = t->stamp;
        t->idx[i] = (uint32_t)t->n;
        t->order[t->n++] = (uint32_t)i;
    }
    return t->idx[i];
}

/* Gives v a string table of only the strings it uses (pointing into p's)
 * and renumbers every string index of v (v's arrays are its own copies).
 * 0 or PD_ENOMEM. */
static int prune_strings(const pd_profile *p, pd_profile *v, strs *t)
{
    t->n = 1;
    t->order[0] = 0;
    if (!(v->sample_type =
              malloc((p->n_sample_type ? p->n_sample_type : 1) * sizeof *v->sample_type)) ||
        !(v->comment = malloc((p->n_comment ? p->n_comment : 1) * sizeof *v->comment)))
        return PD_ENOMEM;
    for (size_t i = 0; i < p->n_sample_type; i++) {
        v->sample_type[i].type = use_str(t, p->sample_type[i].type);
        v->sample_type[i].unit = use_str(t, p->sample_type[i].unit);
    }
    v->n_sample_type = p->n_sample_type;
    for (size_t i = 0; i < p->n_comment; i++)
        v->comment[i] = use_str(t, p->comment[i]);
    v->n_comment = p->n_comment;
    v->period_type.type = use_str(t, p->period_type.type);
    v->period_type.unit = use_str(t, p->period_type.unit);
    v->drop_frames = use_str(t, p->drop_frames);
    v->keep_frames = use_str(t, p->keep_frames);
    v->default_sample_type = use_str(t, p->default_sample_type);
    v->doc_url = use_str(t, p->doc_url);
    for (size_t i = 0; i < v->n_sample; i++)
        for (size_t j = 0; j < v->sample[i].n_label; j++) {
            pd_pprof_label *l = &v->sample[i].label[j];
            l->key = use_str(t, l->key);
            l->str = use_str(t, l->str);
            l->num_unit = use_str(t, l->num_unit);
        }
    for (size_t i = 0; i < v->n_function; i++) {
        pd_pprof_function *f = &v->function[i];
        f->name = use_str(t, f->name);
        f->system_name = use_str(t, f->system_name);
        f->filename = use_str(t, f->filename);
    }
    for (size_t i = 0; i < v->n_mapping; i++) {
        v->mapping[i].filename = use_str(t, v->mapping[i].filename);
        v->mapping[i].build_id = use_str(t, v->mapping[i].build_id);
    }
    const char **tab = malloc(t->n * sizeof *tab);
    size_t *len = malloc(t->n * sizeof *len);
    if (!tab || !len) {
        free(tab);
        free(len);
        return PD_ENOMEM;
    }
    for (size_t i = 0; i < t->n; i++) {
        tab[i] = p->string_table[t->order[i]];
        len[i] = p->string_len[t->order[i]];
    }
    v->string_table = tab;
    v->string_len = len;
    v->n_string = t->n;
    return 0;
}

static int build_view(const pd_profile *p, const size_t *gidx, const uint8_t *split_lab,
                      const size_t *lab_off, size_t g, size_t n_samples, uint32_t *loc_st,
                      uint32_t *fn_st, uint32_t *map_st, strs *t, pd_profile *v, pd_err *err)
{
    memset(v, 0, sizeof *v);
    v->keep_frames = p->keep_frames;
    v->time_nanos = p->time_nanos;
    v->duration_nanos = p->duration_nanos;
    v->period = p->period;
    uint32_t stamp = (uint32_t)g + 1;
    if (!(v->sample = calloc(n_samples ? n_samples : 1, sizeof *v->sample)))
        goto nomem;
    size_t nl = 0, nf = 0, nm = 0;
    for (size_t i = 0; i < p->n_sample; i++) {
        if (gidx[i] != g)
            continue;
        const pd_pprof_sample *s = &p->sample[i];
        pd_pprof_sample *d = &v->sample[v->n_sample++];
        *d = *s;
        d->label = NULL;
        d->n_label = 0;
        if (s->n_label) {
            if (!(d->label = malloc(s->n_label * sizeof *d->label)))
                goto nomem;
            for (size_t j = 0; j < s->n_label; j++)
                if (!split_lab[lab_off[i] + j])
                    d->label[d->n_label++] = s->label[j];
        }
        for (size_t k = 0; k < s->n_location; k++) {
            const pd_pprof_location *l = pd_profile_location(p, s->location_id[k]);
            size_t li = (size_t)(l - p->location);
            if (loc_st[li] == stamp)
                continue;
            loc_st[li] = stamp;
            nl++;
            if (l->mapping_id) {
                const pd_pprof_mapping *m = pd_profile_mapping(p, l->mapping_id);
                if (m && map_st[m - p->mapping] != stamp) {
                    map_st[m - p->mapping] = stamp;
                    nm++;
                }
            }
            for (size_t q = 0; q < l->n_line; q++) {
                if (!l->line[q].function_id)
                    continue;
                const pd_pprof_function *f = pd_profile_function(p, l->line[q].function_id);
                if (f && fn_st[f - p->function] != stamp) {
                    fn_st[f - p->function] = stamp;
                    nf++;
                }
            }
        }
    }
    if (!(v->location = malloc((nl ? nl : 1) * sizeof *v->location)) ||
        !(v->function = malloc((nf ? nf : 1) * sizeof *v->function)) ||
        !(v->mapping = malloc((nm ? nm : 1) * sizeof *v->mapping)))
        goto nomem;
    for (size_t i = 0; i < p->n_location; i++)
        if (loc_st[i] == stamp)
            v->location[v->n_location++] = p->location[i];
    for (size_t i = 0; i < p->n_function; i++)
        if (fn_st[i] == stamp)
            v->function[v->n_function++] = p->function[i];
    for (size_t i = 0; i < p->n_mapping; i++)
        if (map_st[i] == stamp)
            v->mapping[v->n_mapping++] = p->mapping[i];
    t->stamp = stamp;
    if (prune_strings(p, v, t) < 0)
        goto nomem;
    return pd_profile_index(v, err);
nomem:
    return pd_err_set(err, PD_ENOMEM, "split: out of memory");
}

int pd_pprof_split_by_labels(const pd_profile *p, const pd_labels *base, size_t max_groups,
                             pd_pprof_split *out, pd_err *err)
{
    int rc = PD_ENOMEM;
    memset(out, 0, sizeof *out);
    size_t ns = p->n_sample;
    size_t total_labels = 0;
    for (size_t i = 0; i < ns; i++)
        total_labels += p->sample[i].n_label;
    if (total_labels == 0)
        return 0;
    size_t *gidx = malloc((ns ? ns : 1) * sizeof *gidx);
    size_t *lab_off = malloc((ns ? ns : 1) * sizeof *lab_off);
    uint8_t *split_lab = calloc(total_labels, 1);
    const pd_pprof_label **tmp = NULL;
    size_t tmp_cap = 0;
    group *gs = NULL;
    size_t n_g = 0, cap_g = 0;
    uint32_t *loc_st = NULL, *fn_st = NULL, *map_st = NULL;
    strs t = {0};
    pd_buf keys;
    pd_buf_init(&keys, 0);
    pd_u64map first;
    pd_u64map_init(&first);
    bool any = false;
    if (!gidx || !lab_off || !split_lab)
        goto nomem;
    tl_p = p;
    size_t off = 0;
    for (size_t i = 0; i < ns; i++) {
        const pd_pprof_sample *s = &p->sample[i];
        lab_off[i] = off;
        size_t nk = 0;
        if (s->n_label > tmp_cap) {
            free(tmp);
            tmp_cap = s->n_label * 2;
            if (!(tmp = malloc(tmp_cap * sizeof *tmp)))
                goto nomem;
        }
        for (size_t j = 0; j < s->n_label; j++)
            if (takes_part(p, base, s, j)) {
                split_lab[off + j] = 1;
                tmp[nk++] = &s->label[j];
            }
        if (nk && base->n + nk > PD_LABEL_MAX_COUNT) { /* would pass the series' label cap: */
            memset(split_lab + off, 0, s->n_label);    /* they stay on the sample */
            nk = 0;
        }
        off += s->n_label;
        if (nk)
            any = true;
        if (nk > 1)
            qsort(tmp, nk, sizeof *tmp, cmp_label_key);
        size_t key_off = keys.len;
        for (size_t j = 0; j < nk; j++) {
            const char *k = pd_profile_str(p, tmp[j]->key), *v = pd_profile_str(p, tmp[j]->str);
            if (pd_buf_append(&keys, k, strlen(k) + 1) < 0 ||
                pd_buf_append(&keys, v, strlen(v) + 1) < 0)
                goto nomem;
        }
        size_t key_len = keys.len - key_off;
        uint64_t h = XXH3_64bits(keys.data ? keys.data + key_off : "", key_len);
        if (h == UINT64_MAX)
            h--;
        uint64_t at;
        size_t found = SIZE_MAX;
        if (pd_u64map_get(&first, h, &at))
            for (size_t gi = (size_t)at; gi != SIZE_MAX;) {
                if (gs[gi].key_len == key_len &&
                    (key_len == 0 || /* (keys.data may still be NULL) */
                     memcmp(keys.data + gs[gi].key_off, keys.data + key_off, key_len) == 0)) {
                    found = gi;
                    break;
                }
                gi = gs[gi].next ? gs[gi].next - 1 : SIZE_MAX;
            }
        if (found != SIZE_MAX) {
            keys.len = key_off; /* the group's key is kept once */
            gs[found].n_samples++;
            gidx[i] = found;
            continue;
        }
        if (max_groups && n_g >= max_groups) {
            rc = pd_err_set(err, PD_ETOOBIG,
                            "split: the samples' labels make more than %zu label sets", max_groups);
            goto fail;
        }
        if (n_g == cap_g) {
            size_t nc = cap_g ? cap_g * 2 : 8;
            group *ng = realloc(gs, nc * sizeof *ng);
            if (!ng)
                goto nomem;
            gs = ng;
            cap_g = nc;
        }
        gs[n_g] = (group){.hash = h, .key_off = key_off, .key_len = key_len, .n_samples = 1};
        if (pd_u64map_get(&first, h, &at)) { /* chain behind the first of this hash */
            gs[n_g].next = gs[at].next;
            gs[at].next = n_g + 1;
        } else if (pd_u64map_put(&first, h, n_g) < 0)
            goto nomem;
        gidx[i] = n_g++;
    }
    if (!any) {
        rc = 0;
        goto out;
    }

    if (!(out->v = calloc(n_g, sizeof *out->v)) ||
        !(loc_st = calloc(p->n_location ? p->n_location : 1, sizeof *loc_st)) ||
        !(fn_st = calloc(p->n_function ? p->n_function : 1, sizeof *fn_st)) ||
        !(map_st = calloc(p->n_mapping ? p->n_mapping : 1, sizeof *map_st)) ||
        !(t.st = calloc(p->n_string ? p->n_string : 1, sizeof *t.st)) ||
        !(t.idx = malloc((p->n_string ? p->n_string : 1) * sizeof *t.idx)) ||
        !(t.order = malloc((p->n_string ? p->n_string : 1) * sizeof *t.order)))
        goto nomem;
    for (size_t g = 0; g < n_g; g++) {
        pd_pprof_split_group *sg = &out->v[g];
        out->n = g + 1;
        if ((rc = pd_labels_copy(&sg->labels, base)) < 0)
            goto nomem;
        const char *k = keys.data ? keys.data + gs[g].key_off : NULL;
        const char *end = k ? k + gs[g].key_len : NULL;
        while (k && k < end) {
            const char *v = k + strlen(k) + 1;
            if ((rc = pd_labels_set(&sg->labels, k, v, err)) < 0)
                goto fail;
            sg->n_split++;
            k = v + strlen(v) + 1;
        }
        if ((rc = build_view(p, gidx, split_lab, lab_off, g, gs[g].n_samples, loc_st, fn_st, map_st,
                             &t, &sg->view, err)) < 0)
            goto fail;
    }
    rc = 0;
    goto out;
nomem:
    rc = pd_err_set(err, PD_ENOMEM, "split: out of memory");
fail:
    pd_pprof_split_release(out);
out:
    tl_p = NULL;
    free(gidx);
    free(lab_off);
    free(split_lab);
    free(tmp);
    free(gs);
    free(loc_st);
    free(fn_st);
    free(map_st);
    free(t.st);
    free(t.idx);
    free(t.order);
    pd_buf_release(&keys);
    pd_u64map_release(&first);
    return rc;
}
