/*
 * query/merge.c — merging profiles as google/pprof's profile.Merge does, and
 * diffs as `go tool pprof -diff_base` builds them; streaming, so memory grows
 * with the distinct content of the result, not with the number of inputs.
 *
 * State (struct pd_merge). The result is built in place:
 *   out         the output pd_profile: its string table is filled through
 *               pd_profile_intern as inputs are folded in; its arrays are
 *               written only by finish.
 *   fn[]        distinct functions  (name, system_name, filename, start_line),
 *   map[]       distinct mappings   keyed as pprof's mappingKey: size rounded
 *               up to 4 KiB, file offset, build id (else file name),
 *   loc[]       distinct locations  (mapping id, address, is_folded, lines of
 *               (function id, line, column)); lines live in lines[],
 *   smp[]       distinct samples    (stack of location ids, labels sorted by
 *               key), values in vals[] (n_type per sample), stacks in stk[],
 *               labels in labs[].
 * Each kind has an open-addressing table (htab) from an xxh3 hash of its
 * content to its index; a hit is confirmed by comparing content, so a hash
 * collision only costs a compare. All ids and string indexes in these tables
 * are the output's.
 *
 * Adding one input (pd_merge_add) walks its samples: each location id is
 * resolved through per-input caches (src index -> output id) that are sized
 * by the input and dropped when the call returns, so an input's own tables
 * are visited once, and each sample costs a hash and a probe. The caller
 * releases the input right after the call: with storage reading one profile
 * at a time, peak memory is the merged tables plus one decoded input.
 *
 * pprof rules kept (profile/merge.go, Go 1.19's vendored copy):
 *   - inputs must have the same period type and the same sample types (type
 *     and unit, in order); otherwise PD_EINVAL naming both inputs;
 *   - samples whose values are all zero are skipped; samples with the same
 *     stack and the same labels (as a set of key -> value list) are summed;
 *   - a mapping is relocated onto an equal earlier mapping (addresses shifted
 *     by the difference of their starts); the first input's first mapping is
 *     added first (it is the main binary);
 *   - header: time_nanos the earliest (pprof's exact rule, zero quirk
 *     included), duration_nanos summed, period the largest, comments
 *     concatenated without repeats, default_sample_type the first non-empty,
 *     drop/keep frames and period type from the first input;
 *   - merged samples whose values sum to zero are dropped, and the result is
 *     compacted (unreferenced locations, functions, mappings removed).
 * Diff (-diff_base): a base input's values are negated and its samples get
 * the label pprof::base=true (replacing any such label), so they never
 * cancel against the new side; pprof's reports split the two sides on it.
 * Add the new side first, then the base, to match pprof's order.
 *
 * Files: this one folds inputs in (pd_merge_new/add); merge_finish.c
 * filters and writes the result (pd_merge_finish); merge_store.c runs a
 * merge or diff over the store (pd_query_merge/diff); the shared state is
 * in merge_int.h.
 *
 * Filters are pprof's FilterSamplesByName (profile/filter.go), applied by
 * finish on the distinct locations: a location "matches" a regex when one of
 * its lines' function name or file name, or its mapping's file name,
 * matches (unanchored search). focus keeps samples with a matching location,
 * ignore drops samples with one (ignore wins); hide removes matching lines,
 * and locations left without lines, from stacks (a sample left with no
 * location is dropped). When any filter is given, samples without a stack
 * are dropped, as pprof does.
 *
 * Labels (option `by`): NULL keeps every sample label (pprof's behaviour).
 * Otherwise `by` is a comma-separated list of label names: sample labels with
 * other names are dropped, and for each listed name that is a label of the
 * input's series (e.g. instance) the sample gets that label as a string label
 * unless it already has one with that name — so `by=instance` keeps the
 * instances apart in the merged profile, and `by=` (empty) sums across all
 * labels.
 */
#include "query/query.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "base/time.h"
#include "query/merge_int.h"
#include "query/query_int.h"

/* ---- open-addressing table: content hash -> item index (htab: merge_int.h) ---- */

static void htab_release(htab *t)
{
    free(t->hash);
    free(t->idx);
    memset(t, 0, sizeof *t);
}

/* Makes room for one more entry (load <= 0.7). 0 or PD_ENOMEM. */
static int htab_reserve(htab *t)
{
    if ((t->n + 1) * 10 <= t->cap * 7)
        return 0;
    size_t nc = t->cap ? t->cap * 2 : 256;
    uint64_t *nh = malloc(nc * sizeof *nh);
    uint32_t *ni = calloc(nc, sizeof *ni);
    if (!nh || !ni) {
        free(nh);
        free(ni);
        return PD_ENOMEM;
    }
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->idx[i])
            continue;
        size_t s = (size_t)t->hash[i] & (nc - 1);
        while (ni[s])
            s = (s + 1) & (nc - 1);
        nh[s] = t->hash[i];
        ni[s] = t->idx[i];
    }
    free(t->hash);
    free(t->idx);
    t->hash = nh;
    t->idx = ni;
    t->cap = nc;
    return 0;
}

/* Looks for an item with hash h that eq() confirms. Returns its index, or -1
 * with *slot the empty slot to insert at. htab_reserve must have been called
 * (the table is never full). */
static int64_t htab_find(const htab *t, uint64_t h, bool (*eq)(const void *ctx, uint32_t i),
                         const void *ctx, size_t *slot)
{
    size_t s = (size_t)h & (t->cap - 1);
    while (t->idx[s]) {
        if (t->hash[s] == h && eq(ctx, t->idx[s] - 1))
            return t->idx[s] - 1;
        s = (s + 1) & (t->cap - 1);
    }
    *slot = s;
    return -1;
}

static void htab_put(htab *t, size_t slot, uint64_t h, uint32_t i)
{
    t->hash[slot] = h;
    t->idx[slot] = i + 1;
    t->n++;
}

/* ---- growable arrays ---- */

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap : 64;
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

#define GROW(arr, cap, need) grow((void **)&(arr), &(cap), (need), sizeof *(arr))

void pd_merge_free(pd_merge *m)
{
    if (!m)
        return;
    pd_profile_release(&m->out);
    free(m->st_type);
    free(m->st_unit);
    free(m->first_source);
    free(m->comment);
    free(m->fn);
    free(m->map);
    free(m->loc);
    free(m->lines);
    free(m->smp);
    free(m->stk);
    free(m->labs);
    free(m->vals);
    htab_release(&m->t_fn);
    htab_release(&m->t_map);
    htab_release(&m->t_loc);
    htab_release(&m->t_smp);
    pd__merge_regex_release(&m->focus);
    pd__merge_regex_release(&m->ignore);
    pd__merge_regex_release(&m->hide);
    free(m->smap);
    free(m->fmap);
    free(m->mmap);
    free(m->lmap);
    free(m->sstk);
    free(m->slab);
    free(m->sline);
    free(m);
}

static int64_t intern(pd_merge *m, const char *s, size_t len)
{
    int64_t i = pd_profile_intern(&m->out, s, len);
    return i;
}

int pd_merge_new(const pd_merge_options *o, pd_merge **out, pd_err *err)
{
    *out = NULL;
    pd_merge *m = calloc(1, sizeof *m);
    if (!m)
        return pd_err_set(err, PD_ENOMEM, "merge: out of memory");
    if (o)
        m->o = *o;
    m->max_samples = m->o.max_samples ? m->o.max_samples : PD_MERGE_DEFAULT_MAX_SAMPLES;
    int rc = pd_profile_init(&m->out);
    if (rc < 0) {
        free(m);
        return pd_err_set(err, rc, "merge: out of memory");
    }
    if ((m->base_key = intern(m, BASE_LABEL, strlen(BASE_LABEL))) < 0 ||
        (m->base_true = intern(m, "true", 4)) < 0) {
        rc = pd_err_set(err, PD_ENOMEM, "merge: out of memory");
        goto fail;
    }
    if (m->o.by) {
        m->by_set = true;
        const char *s = m->o.by;
        while (*s) {
            const char *e = strchr(s, ',');
            size_t len = e ? (size_t)(e - s) : strlen(s);
            while (len && (*s == ' ')) {
                s++;
                len--;
            }
            while (len && s[len - 1] == ' ')
                len--;
            if (len) {
                if (m->n_by >= MAX_BY_NAMES) {
                    rc = pd_err_set(err, PD_EINVAL, "by: more than %d label names", MAX_BY_NAMES);
                    goto fail;
                }
                int64_t k = intern(m, s, len);
                if (k < 0) {
                    rc = pd_err_set(err, PD_ENOMEM, "merge: out of memory");
                    goto fail;
                }
                m->by[m->n_by++] = k;
            }
            if (!e)
                break;
            s = e + 1;
        }
    }
    m->o.by = NULL; /* not kept: the caller's string may go away */
    if ((rc = pd__merge_regex_compile(&m->focus, "focus", m->o.focus, err)) < 0 ||
        (rc = pd__merge_regex_compile(&m->ignore, "ignore", m->o.ignore, err)) < 0 ||
        (rc = pd__merge_regex_compile(&m->hide, "hide", m->o.hide, err)) < 0)
        goto fail;
    m->o.focus = m->o.ignore = m->o.hide = NULL;
    *out = m;
    return 0;
fail:
    pd_merge_free(m);
    return rc;
}

int64_t (*pd_query_clock_ns)(void) = pd_mono_ns;

/* Checks the deadline and the cancel callback. */
static int check_time(pd_merge *m, pd_err *err)
{
    if (m->o.deadline_ns &&
        __atomic_load_n(&pd_query_clock_ns, __ATOMIC_ACQUIRE)() > m->o.deadline_ns) {
        if (m->o.timeout_ms)
            return pd_err_set(err, PD_ETIMEOUT,
                              "query timed out after %" PRId64
                              " ms (--query.timeout) having merged %zu profiles; narrow the "
                              "selector or time range",
                              m->o.timeout_ms, m->n_inputs);
        return pd_err_set(err, PD_ETIMEOUT, "query timed out having merged %zu profiles",
                          m->n_inputs);
    }
    if (m->o.cancelled && m->o.cancelled(m->o.cancel_ctx))
        return pd_err_set(err, PD_ECANCELED, "query canceled by the client");
    return 0;
}

int pd_merge_check(pd_merge *m, pd_err *err)
{
    return check_time(m, err);
}

/* ---- per-input resolution ---- */

typedef struct input {
    pd_merge *m;
    const pd_profile *p;
    int rc;
} input;

static int64_t dstr(input *in, int64_t idx)
{
    const pd_profile *p = in->p;
    if (idx <= 0 || (size_t)idx >= p->n_string)
        return 0;
    int64_t *sm = in->m->smap;
    if (sm[idx] < 0) {
        int64_t d = intern(in->m, p->string_table[idx], p->string_len[idx]);
        if (d < 0)
            return d;
        sm[idx] = d;
    }
    return sm[idx];
}

typedef struct fn_key {
    const pd_merge *m;
    const pd_pprof_function *f;
} fn_key;

static bool fn_eq(const void *ctx, uint32_t i)
{
    const fn_key *k = ctx;
    const pd_pprof_function *a = &k->m->fn[i], *b = k->f;
    return a->name == b->name && a->system_name == b->system_name && a->filename == b->filename &&
           a->start_line == b->start_line;
}

/* The output id of input function id `id` (0 for none). Negative on error. */
static int64_t map_function(input *in, uint64_t id, pd_err *err)
{
    if (!id)
        return 0;
    const pd_profile *p = in->p;
    const pd_pprof_function *sf = pd_profile_function(p, id);
    if (!sf)
        return 0; /* a validated profile resolves; be lenient otherwise */
    size_t si = (size_t)(sf - p->function);
    pd_merge *m = in->m;
    if (m->fmap[si])
        return (int64_t)m->fmap[si];
    pd_pprof_function f = {0};
    int64_t s;
    if ((s = dstr(in, sf->name)) < 0)
        goto nomem;
    f.name = s;
    if ((s = dstr(in, sf->system_name)) < 0)
        goto nomem;
    f.system_name = s;
    if ((s = dstr(in, sf->filename)) < 0)
        goto nomem;
    f.filename = s;
    f.start_line = sf->start_line;
    int64_t key[4] = {f.name, f.system_name, f.filename, f.start_line};
    uint64_t h = XXH3_64bits(key, sizeof key);
    if (htab_reserve(&m->t_fn) < 0)
        goto nomem;
    size_t slot = 0;
    fn_key k = {m, &f};
    int64_t hit = htab_find(&m->t_fn, h, fn_eq, &k, &slot);
    if (hit >= 0) {
        m->fmap[si] = m->fn[hit].id;
        return (int64_t)m->fn[hit].id;
    }
    if (m->n_fn >= UINT32_MAX - 1)
        return pd_err_set(err, PD_ETOOBIG, "merge: too many distinct functions");
    if (GROW(m->fn, m->cap_fn, m->n_fn + 1) < 0)
        goto nomem;
    f.id = m->n_fn + 1;
    m->fn[m->n_fn] = f;
    htab_put(&m->t_fn, slot, h, (uint32_t)m->n_fn);
    m->n_fn++;
    m->fmap[si] = f.id;
    return (int64_t)f.id;
nomem:
    return pd_err_set(err, PD_ENOMEM, "merge: out of memory");
}

typedef struct map_key {
    const pd_merge *m;
    uint64_t size, offset;
    int64_t bof; /* build id, else file name (output string index) */
} map_key;

static uint64_t map_size_rounded(const pd_pprof_mapping *mp)
{
    uint64_t size = mp->memory_limit - mp->memory_start;
    size = size + 0x1000 - 1;
    return size - (size % 0x1000);
}

static bool map_eq(const void *ctx, uint32_t i)
{
    const map_key *k = ctx;
    const pd_pprof_mapping *a = &k->m->map[i];
    int64_t bof = a->build_id ? a->build_id : a->filename;
    return map_size_rounded(a) == k->size && a->file_offset == k->offset && bof == k->bof;
}

/* Resolves input mapping id `id` into *mi (id 0 for none). */
static int map_mapping(input *in, uint64_t id, mmapinfo *mi, pd_err *err)
{
    mi->id = 0;
    mi->offset = 0;
    if (!id)
        return 0;
    const pd_profile *p = in->p;
    const pd_pprof_mapping *sm = pd_profile_mapping(p, id);
    if (!sm)
        return 0;
    size_t si = (size_t)(sm - p->mapping);
    pd_merge *m = in->m;
    if (m->mmap[si].id) {
        *mi = m->mmap[si];
        return 0;
    }
    int64_t file = dstr(in, sm->filename), bid = dstr(in, sm->build_id);
    if (file < 0 || bid < 0)
        goto nomem;
    map_key k = {m, map_size_rounded(sm), sm->file_offset, bid ? bid : file};
    int64_t key[3] = {(int64_t)k.size, (int64_t)k.offset, k.bof};
    uint64_t h = XXH3_64bits(key, sizeof key);
    if (htab_reserve(&m->t_map) < 0)
        goto nomem;
    size_t slot = 0;
    int64_t hit = htab_find(&m->t_map, h, map_eq, &k, &slot);
    if (hit >= 0) {
        const pd_pprof_mapping *d = &m->map[hit];
        mi->id = d->id;
        mi->offset = (int64_t)(d->memory_start - sm->memory_start); /* wraps like Go's */
    } else {
        if (m->n_map >= UINT32_MAX - 1)
            return pd_err_set(err, PD_ETOOBIG, "merge: too many distinct mappings");
        if (GROW(m->map, m->cap_map, m->n_map + 1) < 0)
            goto nomem;
        pd_pprof_mapping d = *sm;
        d.id = m->n_map + 1;
        d.filename = file;
        d.build_id = bid;
        m->map[m->n_map] = d;
        htab_put(&m->t_map, slot, h, (uint32_t)m->n_map);
        m->n_map++;
        mi->id = d.id;
        mi->offset = 0;
    }
    m->mmap[si] = *mi;
    return 0;
nomem:
    return pd_err_set(err, PD_ENOMEM, "merge: out of memory");
}

typedef struct loc_key {
    const pd_merge *m;
    const mloc *l;
    const pd_pprof_line *lines;
} loc_key;

static bool loc_eq(const void *ctx, uint32_t i)
{
    const loc_key *k = ctx;
    const mloc *a = &k->m->loc[i];
    return a->mapping_id == k->l->mapping_id && a->address == k->l->address &&
           a->is_folded == k->l->is_folded && a->n_line == k->l->n_line &&
           (!a->n_line ||
            !memcmp(&k->m->lines[a->line_off], k->lines, a->n_line * sizeof *k->lines));
}

/* The output id of the input location at index li. Negative on error. */
static int64_t map_location(input *in, size_t li, pd_err *err)
{
    pd_merge *m = in->m;
    if (m->lmap[li])
        return (int64_t)m->lmap[li];
    const pd_pprof_location *sl = &in->p->location[li];
    mmapinfo mi;
    int rc = map_mapping(in, sl->mapping_id, &mi, err);
    if (rc < 0)
        return rc;
    if (sl->n_line > UINT32_MAX)
        return pd_err_set(err, PD_ETOOBIG, "merge: location with too many lines");
    if (GROW(m->sline, m->cap_sline, sl->n_line + 1) < 0)
        return pd_err_set(err, PD_ENOMEM, "merge: out of memory");
    for (size_t j = 0; j < sl->n_line; j++) {
        int64_t f = map_function(in, sl->line[j].function_id, err);
        if (f < 0)
            return f;
        m->sline[j] = (pd_pprof_line){(uint64_t)f, sl->line[j].line, sl->line[j].column};
    }
    mloc l = {.mapping_id = mi.id,
              .address = sl->address + (uint64_t)mi.offset,
              .n_line = (uint32_t)sl->n_line,
              .is_folded = sl->is_folded};
    uint64_t hk[3] = {l.mapping_id, l.address, (uint64_t)l.is_folded};
    uint64_t h =
        XXH3_64bits_withSeed(m->sline, sl->n_line * sizeof *m->sline, XXH3_64bits(hk, sizeof hk));
    if (htab_reserve(&m->t_loc) < 0)
        return pd_err_set(err, PD_ENOMEM, "merge: out of memory");
    size_t slot = 0;
    loc_key k = {m, &l, m->sline};
    int64_t hit = htab_find(&m->t_loc, h, loc_eq, &k, &slot);
    if (hit >= 0) {
        m->lmap[li] = (uint64_t)hit + 1;
        return hit + 1;
    }
    if (m->n_loc >= UINT32_MAX - 1)
        return pd_err_set(err, PD_ETOOBIG, "merge: too many distinct locations");
    if (GROW(m->loc, m->cap_loc, m->n_loc + 1) < 0 ||
        GROW(m->lines, m->cap_lines, m->n_lines + sl->n_line) < 0)
        return pd_err_set(err, PD_ENOMEM, "merge: out of memory");
    l.line_off = m->n_lines;
    if (sl->n_line)
        memcpy(&m->lines[m->n_lines], m->sline, sl->n_line * sizeof *m->sline);
    m->n_lines += sl->n_line;
    m->loc[m->n_loc] = l;
    htab_put(&m->t_loc, slot, h, (uint32_t)m->n_loc);
    m->n_loc++;
    m->lmap[li] = m->n_loc;
    return (int64_t)m->n_loc;
}

typedef struct smp_key {
    const pd_merge *m;
    const uint64_t *stk;
    size_t n_loc;
    const pd_pprof_label *lab;
    size_t n_lab;
} smp_key;

static bool smp_eq(const void *ctx, uint32_t i)
{
    const smp_key *k = ctx;
    const msmp *s = &k->m->smp[i];
    return s->n_loc == k->n_loc && s->n_lab == k->n_lab &&
           (!k->n_loc || !memcmp(&k->m->stk[s->stk_off], k->stk, k->n_loc * sizeof *k->stk)) &&
           (!k->n_lab || !memcmp(&k->m->labs[s->lab_off], k->lab, k->n_lab * sizeof *k->lab));
}

static bool by_has(const pd_merge *m, int64_t key)
{
    for (size_t i = 0; i < m->n_by; i++)
        if (m->by[i] == key)
            return true;
    return false;
}

/* Label order inside a merged sample: by key, string labels before numeric
 * ones, otherwise as in the input (stable), which is pprof's notion of
 * equal label sets (map key -> ordered value list). */
static bool lab_before(const pd_pprof_label *a, const pd_pprof_label *b)
{
    if (a->key != b->key)
        return a->key < b->key;
    return a->str != 0 && b->str == 0;
}

static void sort_labels(pd_pprof_label *v, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        pd_pprof_label x = v[i];
        size_t j = i;
        while (j > 0 && lab_before(&x, &v[j - 1])) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
}

static int64_t wadd(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a + (uint64_t)b);
}

static int64_t wneg(int64_t a)
{
    return (int64_t)(0 - (uint64_t)a);
}

static bool same_strings(const pd_profile *p, int64_t a, const pd_profile *q, int64_t b)
{
    const char *x = pd_profile_str(p, a), *y = pd_profile_str(q, b);
    size_t lx = a > 0 && (size_t)a < p->n_string ? p->string_len[a] : 0;
    size_t ly = b > 0 && (size_t)b < q->n_string ? q->string_len[b] : 0;
    return lx == ly && !memcmp(x, y, lx);
}

/* Appends "[t/u, ...]" of profile p's sample types to b. */
static void types_text(const pd_profile *p, const pd_pprof_value_type *vt, size_t n, pd_buf *b)
{
    pd_buf_putc(b, '[');
    for (size_t i = 0; i < n; i++)
        pd_buf_printf(b, "%s%s/%s", i ? ", " : "", pd_profile_str(p, vt[i].type),
                      pd_profile_str(p, vt[i].unit));
    pd_buf_putc(b, ']');
}

/* Header: compatibility and pprof's combineHeaders, one input at a time. */
static int merge_header(input *in, const char *source, pd_err *err)
{
    pd_merge *m = in->m;
    const pd_profile *p = in->p;
    if (m->n_inputs == 0) {
        m->n_type = p->n_sample_type;
        m->st_type = calloc(m->n_type ? m->n_type : 1, sizeof *m->st_type);
        m->st_unit = calloc(m->n_type ? m->n_type : 1, sizeof *m->st_unit);
        m->first_source = strdup(source ? source : "the first profile");
        if (!m->st_type || !m->st_unit || !m->first_source)
            goto nomem;
        for (size_t i = 0; i < m->n_type; i++) {
            if ((m->st_type[i] = dstr(in, p->sample_type[i].type)) < 0 ||
                (m->st_unit[i] = dstr(in, p->sample_type[i].unit)) < 0)
                goto nomem;
        }
        if ((m->pt_type = dstr(in, p->period_type.type)) < 0 ||
            (m->pt_unit = dstr(in, p->period_type.unit)) < 0 ||
            (m->out.drop_frames = dstr(in, p->drop_frames)) < 0 ||
            (m->out.keep_frames = dstr(in, p->keep_frames)) < 0)
            goto nomem;
        m->out.period = p->period;
        m->out.time_nanos = p->time_nanos;
    } else {
        bool ok = p->n_sample_type == m->n_type;
        for (size_t i = 0; ok && i < m->n_type; i++) {
            const pd_pprof_value_type *vt = &p->sample_type[i];
            ok = same_strings(p, vt->type, &m->out, m->st_type[i]) &&
                 same_strings(p, vt->unit, &m->out, m->st_unit[i]);
        }
        bool pok = same_strings(p, p->period_type.type, &m->out, m->pt_type) &&
                   same_strings(p, p->period_type.unit, &m->out, m->pt_unit);
        if (!ok || !pok) {
            pd_buf a, b;
            pd_buf_init(&a, 1024);
            pd_buf_init(&b, 1024);
            if (!ok) {
                types_text(p, p->sample_type, p->n_sample_type, &a);
                pd_buf_putc(&b, '[');
                for (size_t i = 0; i < m->n_type; i++)
                    pd_buf_printf(&b, "%s%s/%s", i ? ", " : "",
                                  pd_profile_str(&m->out, m->st_type[i]),
                                  pd_profile_str(&m->out, m->st_unit[i]));
                pd_buf_putc(&b, ']');
            } else {
                pd_buf_printf(&a, "%s/%s", pd_profile_str(p, p->period_type.type),
                              pd_profile_str(p, p->period_type.unit));
                pd_buf_printf(&b, "%s/%s", pd_profile_str(&m->out, m->pt_type),
                              pd_profile_str(&m->out, m->pt_unit));
            }
            pd_err_set(err, PD_EINVAL,
                       "cannot merge profiles with different %s: %.150s has %.100s but "
                       "%.150s has %.100s; select series of one profile type",
                       ok ? "period types" : "sample types", source ? source : "a profile",
                       a.data ? a.data : "", m->first_source, b.data ? b.data : "");
            pd_buf_release(&a);
            pd_buf_release(&b);
            return PD_EINVAL;
        }
        if (m->out.time_nanos == 0 || p->time_nanos < m->out.time_nanos)
            m->out.time_nanos = p->time_nanos;
        if (m->out.period == 0 || m->out.period < p->period)
            m->out.period = p->period;
    }
    m->out.duration_nanos = wadd(m->out.duration_nanos, p->duration_nanos);
    for (size_t i = 0; i < p->n_comment; i++) {
        int64_t c = dstr(in, p->comment[i]);
        if (c < 0)
            goto nomem;
        bool seen = false;
        for (size_t j = 0; j < m->n_comment && !seen; j++)
            seen = m->comment[j] == c;
        if (seen)
            continue;
        if (GROW(m->comment, m->cap_comment, m->n_comment + 1) < 0)
            goto nomem;
        m->comment[m->n_comment++] = c;
    }
    if (!m->out.default_sample_type) {
        int64_t d = dstr(in, p->default_sample_type);
        if (d < 0)
            goto nomem;
        m->out.default_sample_type = d;
    }
    if (!m->out.doc_url) {
        int64_t d = dstr(in, p->doc_url);
        if (d < 0)
            goto nomem;
        m->out.doc_url = d;
    }
    return 0;
nomem:
    return pd_err_set(err, PD_ENOMEM, "merge: out of memory");
}

/* Sizes and clears the per-input caches for p. */
static int prepare_input(pd_merge *m, const pd_profile *p)
{
    if (GROW(m->smap, m->cap_smap, p->n_string + 1) < 0 ||
        GROW(m->fmap, m->cap_fmap, p->n_function + 1) < 0 ||
        GROW(m->mmap, m->cap_mmap, p->n_mapping + 1) < 0 ||
        GROW(m->lmap, m->cap_lmap, p->n_location + 1) < 0)
        return PD_ENOMEM;
    memset(m->smap, 0xff, p->n_string * sizeof *m->smap);
    memset(m->fmap, 0, p->n_function * sizeof *m->fmap);
    memset(m->mmap, 0, p->n_mapping * sizeof *m->mmap);
    memset(m->lmap, 0, p->n_location * sizeof *m->lmap);
    return 0;
}

int pd_merge_add(pd_merge *m, const pd_profile *p, const pd_labels *series, bool base,
                 const char *source, pd_err *err)
{
    return pd_merge_add_n(m, p, series, base, source, 1, err);
}

int pd_merge_add_n(pd_merge *m, const pd_profile *p, const pd_labels *series, bool base,
                   const char *source, size_t n_inputs, pd_err *err)
{
    if (m->failed)
        return pd_err_set(err, PD_EINVAL, "merge: used after an error");
    int rc = check_time(m, err);
    if (rc < 0)
        goto fail;
    if (prepare_input(m, p) < 0) {
        rc = pd_err_set(err, PD_ENOMEM, "merge: out of memory");
        goto fail;
    }
    input in = {m, p, 0};
    if ((rc = merge_header(&in, source, err)) < 0) {
        if (rc != PD_EINVAL)
            goto fail;
        return rc; /* nothing of this input was folded in: the merger stays usable */
    }
    m->n_inputs += n_inputs;
    if (base)
        m->n_base_inputs += n_inputs;

    /* pprof maps the first mapping first (it is the main binary) */
    if (m->n_map == 0 && p->n_mapping > 0) {
        mmapinfo mi;
        if ((rc = map_mapping(&in, p->mapping[0].id, &mi, err)) < 0)
            goto fail;
    }

    /* series labels that by= asks for, as output string label pairs */
    pd_pprof_label extra[MAX_BY_NAMES];
    size_t n_extra = 0;
    if (m->by_set && series) {
        for (size_t i = 0; i < m->n_by; i++) {
            const char *name = pd_profile_str(&m->out, m->by[i]);
            const char *v = pd_labels_get(series, name);
            if (!v || !*v)
                continue;
            int64_t vi = intern(m, v, strlen(v));
            if (vi < 0) {
                rc = pd_err_set(err, PD_ENOMEM, "merge: out of memory");
                goto fail;
            }
            extra[n_extra++] = (pd_pprof_label){.key = m->by[i], .str = vi};
        }
    }

    const size_t nt = m->n_type;
    for (size_t i = 0; i < p->n_sample; i++) {
        const pd_pprof_sample *s = &p->sample[i];
        if (++m->checks % CHECK_EVERY == 0 && (rc = check_time(m, err)) < 0)
            goto fail;
        bool zero = true;
        for (size_t v = 0; v < s->n_value && zero; v++)
            zero = s->value[v] == 0;
        if (zero)
            continue;
        m->samples_in++;
        /* stack */
        if (GROW(m->sstk, m->cap_sstk, s->n_location + 1) < 0) {
            rc = pd_err_set(err, PD_ENOMEM, "merge: out of memory");
            goto fail;
        }
        for (size_t j = 0; j < s->n_location; j++) {
            const pd_pprof_location *sl = pd_profile_location(p, s->location_id[j]);
            if (!sl) {
                rc = pd_err_set(err, PD_EINVAL, "%s: sample %zu: location id %" PRIu64 " not found",
                                source ? source : "profile", i, s->location_id[j]);
                goto fail;
            }
            int64_t id = map_location(&in, (size_t)(sl - p->location), err);
            if (id < 0) {
                rc = (int)id;
                goto fail;
            }
            m->sstk[j] = (uint64_t)id;
        }
        /* labels */
        size_t nl = 0;
        if (GROW(m->slab, m->cap_slab, s->n_label + n_extra + 1) < 0) {
            rc = pd_err_set(err, PD_ENOMEM, "merge: out of memory");
            goto fail;
        }
        for (size_t j = 0; j < s->n_label; j++) {
            const pd_pprof_label *sl = &s->label[j];
            int64_t k = dstr(&in, sl->key);
            if (k < 0) {
                rc = pd_err_set(err, PD_ENOMEM, "merge: out of memory");
                goto fail;
            }
            if (base && k == m->base_key && sl->str)
                continue; /* replaced below, as pprof's SetLabel */
            if (m->by_set && !by_has(m, k))
                continue;
            int64_t sv = dstr(&in, sl->str), nu = dstr(&in, sl->num_unit);
            if (sv < 0 || nu < 0) {
                rc = pd_err_set(err, PD_ENOMEM, "merge: out of memory");
                goto fail;
            }
            m->slab[nl++] = (pd_pprof_label){k, sv, sl->num, nu};
        }
        for (size_t j = 0; j < n_extra; j++) {
            bool have = false;
            for (size_t q = 0; q < nl && !have; q++)
                have = m->slab[q].key == extra[j].key;
            if (!have)
                m->slab[nl++] = extra[j];
        }
        if (base) {
            if (GROW(m->slab, m->cap_slab, nl + 1) < 0) {
                rc = pd_err_set(err, PD_ENOMEM, "merge: out of memory");
                goto fail;
            }
            m->slab[nl++] = (pd_pprof_label){.key = m->base_key, .str = m->base_true};
        }
        if (nl > 1)
            sort_labels(m->slab, nl);
        /* find or add */
        uint64_t h = XXH3_64bits_withSeed(m->slab, nl * sizeof *m->slab,
                                          XXH3_64bits(m->sstk, s->n_location * sizeof *m->sstk));
        if (htab_reserve(&m->t_smp) < 0) {
            rc = pd_err_set(err, PD_ENOMEM, "merge: out of memory");
            goto fail;
        }
        size_t slot = 0;
        smp_key k = {m, m->sstk, s->n_location, m->slab, nl};
        int64_t hit = htab_find(&m->t_smp, h, smp_eq, &k, &slot);
        int64_t *dv;
        if (hit >= 0) {
            dv = &m->vals[(size_t)hit * nt];
        } else {
            if (m->n_smp >= m->max_samples) {
                rc = pd_err_set(err, PD_ETOOBIG,
                                "query result has more than %zu distinct samples "
                                "(--query.max-samples) after merging %zu profiles; narrow the "
                                "selector or time range, or drop labels with by=",
                                m->max_samples, m->n_inputs);
                goto fail;
            }
            if (GROW(m->smp, m->cap_smp, m->n_smp + 1) < 0 ||
                GROW(m->stk, m->cap_stk, m->n_stk + s->n_location) < 0 ||
                GROW(m->labs, m->cap_labs, m->n_labs + nl) < 0 ||
                GROW(m->vals, m->cap_vals, m->n_vals + nt) < 0) {
                rc = pd_err_set(err, PD_ENOMEM, "merge: out of memory");
                goto fail;
            }
            msmp *d = &m->smp[m->n_smp];
            d->stk_off = m->n_stk;
            d->n_loc = (uint32_t)s->n_location;
            d->lab_off = m->n_labs;
            d->n_lab = (uint32_t)nl;
            if (s->n_location)
                memcpy(&m->stk[m->n_stk], m->sstk, s->n_location * sizeof *m->stk);
            if (nl)
                memcpy(&m->labs[m->n_labs], m->slab, nl * sizeof *m->labs);
            m->n_stk += s->n_location;
            m->n_labs += nl;
            dv = &m->vals[m->n_vals];
            memset(dv, 0, nt * sizeof *dv);
            m->n_vals += nt;
            htab_put(&m->t_smp, slot, h, (uint32_t)m->n_smp);
            m->n_smp++;
        }
        for (size_t v = 0; v < nt && v < s->n_value; v++)
            dv[v] = wadd(dv[v], base ? wneg(s->value[v]) : s->value[v]);
    }
    return 0;
fail:
    m->failed = true;
    return rc;
}

void pd_merge_get_stats(const pd_merge *m, pd_merge_stats *st)
{
    memset(st, 0, sizeof *st);
    st->profiles = m->n_inputs;
    st->samples_in = m->samples_in;
    st->samples_out = m->n_smp;
}
